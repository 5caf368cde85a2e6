"""Tools for a network whose adaptive MLPs are joined by a residual rule (new work, not a reproduction).

The models of :mod:`hacn_core.beyond.width_connectivity` are H-ACN backbones
(H-ACN Sec. 2, Eq. 2: ``x_i = f_i(x_{i-1}) + a_i x_{i-1}``) whose layer MLPs are
AWNN's adaptive MLPs (AWNN Eq. 14: ``h_j = sigma(W x + b)_j f(j; nu)``, ``j < D``).
This module reads and cuts such a model:

* :func:`layer_widths`: the hidden width ``D_i`` of every adaptive MLP, in layer order;
* :func:`freeze_width_learning`: the width-learning ablation: the rates ``nu_i`` no
  longer train and the widths no longer follow them, everything else unchanged (the
  forward of Eq. 14 still scales neuron ``j`` by ``f(j; nu_i)`` at the starting rate);
* :func:`fixed_width_twin`: the same function as a fixed-width network. With the
  widths frozen, an adaptive MLP is ``W_2 (sigma(W_1 x + b_1) * f) + b_2``, which is
  the fixed MLP ``Linear -> sigma -> Linear`` with the importances folded into the
  output weights, ``W_2' = W_2 diag(f)``. So a combined model at frozen widths *is* a
  fixed-width H-ACN network of those widths (its MLPs have AWNN's activation, not the
  Mixer's GELU);
* :func:`truncated_copy`: every adaptive MLP cut to a fraction of its width, keeping
  its first (most important) neurons (AWNN Sec. 5.4, :func:`~hacn_core.awnn.truncate`);
* :func:`parameters_by_exit`: the parameters the network cut after layer ``d`` uses;
* :func:`truncation_grid`: the test accuracy of every pair (exit depth ``d``, kept
  width fraction ``r``), AWNN's post-hoc truncation (Sec. 5.4) combined with
  H-ACN's layer-wise exits (Sec. 3.1). One truncated copy per fraction and one
  forward pass of it per batch gives the accuracy at every exit at once, because
  exit ``d`` of a pass is exactly the network cut after layer ``d``.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor, nn

from hacn_core.awnn import AdaptiveMLP, adaptive_mlps, model_widths, truncate
from hacn_core.hacn.connectivity import evaluate_layerwise
from hacn_core.models.mlp import Mlp

#: the kept width fractions of the truncation grid (1: the trained widths)
DEFAULT_FRACTIONS: tuple[float, ...] = (1.0, 0.75, 0.5, 0.25, 0.1)
# a parameter of layer i of a ResidualStack: its block or its per-layer scalar (a_i, b_i, k_i, DWA weights)
_LAYER_PARAM = re.compile(r"(?:^|\.)stack\.(?:blocks|alpha|beta|k|dwa)\.(\d+)(?:\.|$)")


def layer_widths(model: nn.Module) -> list[int]:
    """Every adaptive MLP's hidden width ``D_i`` in module order (the layer order of a stack)."""
    return model_widths(model)


def freeze_width_learning(model: nn.Module) -> nn.Module:
    """Stop ``model`` from learning its widths, in place: every adaptive MLP keeps its width (Algorithm 1's
    ``update_width`` becomes a no-op) and its rates ``raw_rate`` stop training (``requires_grad=False``,
    so no gradient reaches them and no optimizer built afterwards holds them). Returns ``model``.

    Nothing else changes: same weights, same importances ``f(j; nu)`` at the unchanged rates, so the
    forward and the loss of Eq. 13 are those of the learning model at the same parameters (the rate
    prior's term is then a constant). Draws no random numbers.
    """
    for m in adaptive_mlps(model):
        m.freeze_widths()
        m.raw_rate.requires_grad_(False)
    return model


def check_fraction(fraction: Any, name: str = "fraction") -> float:
    """``fraction`` as a float in ``(0, 1]``, or an error naming ``name`` and the allowed range."""
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 < fraction <= 1:
        raise ValueError(f"{name}={fraction!r} must be a number in (0, 1] (the kept fraction of each width)")
    return float(fraction)


def _map_adaptive(model: nn.Module, fn: Callable[[AdaptiveMLP], nn.Module]) -> nn.Module:
    """A deep copy of ``model`` with every :class:`AdaptiveMLP` ``m`` replaced by ``fn(m)`` (of the copy)."""
    new = copy.deepcopy(model)
    if isinstance(new, AdaptiveMLP):
        return fn(new)
    for name, module in [(n, m) for n, m in new.named_modules() if isinstance(m, AdaptiveMLP)]:
        parent_name, _, attr = name.rpartition(".")
        setattr(new.get_submodule(parent_name), attr, fn(module))
    return new


@torch.no_grad()
def fixed_mlp_of(mlp: AdaptiveMLP) -> Mlp:
    """The fixed MLP computing what ``mlp`` computes at its current width (importances folded in).

    ``W_1, b_1`` are copied; ``W_2' = W_2 diag(f)`` with ``f`` the importances of Eq. 14
    (renormalised ones where ``importance_norm="active"``), ``b_2`` copied. One hidden
    layer only (the adaptive MLP kind of :mod:`hacn_core.models.mlp`).
    """
    cfg = mlp.config
    if cfg.n_hidden_layers != 1:
        raise ValueError(f"n_hidden_layers={cfg.n_hidden_layers}: fixed_mlp_of needs a one-hidden-layer "
                         "adaptive MLP (allowed: 1)")
    first, second = mlp.layers
    (width,) = mlp.widths()
    f = mlp.importances(0).detach()  # (D,)
    fixed = Mlp(cfg.in_dim, width, cfg.out_dim, activation=cfg.activation, negative_slope=cfg.negative_slope,
                bias=cfg.bias)
    lin1, lin2 = fixed[0], fixed[-1]
    lin1.weight.copy_(first.weight)
    lin2.weight.copy_(second.weight * f[None, :])  # (out, D) * (1, D): column j scaled by f(j)
    if cfg.bias:
        lin1.bias.copy_(first.bias)
        lin2.bias.copy_(second.bias)
    return fixed.to(device=first.weight.device, dtype=first.weight.dtype)


def fixed_width_twin(model: nn.Module) -> nn.Module:
    """A copy of ``model`` whose adaptive MLPs are fixed MLPs of their current widths, same outputs."""
    return _map_adaptive(model, fixed_mlp_of)


def truncated_copy(model: nn.Module, fraction: float) -> nn.Module:
    """A copy of ``model`` with every adaptive MLP cut to ``max(1, round(fraction * D_i))`` neurons (Sec. 5.4).

    The kept neurons are the first ones (the most important, Eq. 12) and keep their
    importances; the copy's widths are frozen. ``fraction = 1`` is the model itself.
    """
    check_fraction(fraction)
    return _map_adaptive(model, lambda m: truncate(m, fraction=fraction))


def layer_of_parameter(name: str) -> int | None:
    """The 0-based stack layer a parameter belongs to (``stack.blocks.3.*``, ``stack.alpha.3``: 3), or None
    for the parameters every exit uses (embedding, head)."""
    found = _LAYER_PARAM.search(name)
    return None if found is None else int(found.group(1))


def parameters_by_exit(model: nn.Module) -> list[int]:
    """``[P_0, ..., P_L]``: the trainable parameters the network cut after layer ``d`` uses.

    ``P_d`` = the shared ones (embedding, head) plus those of layers ``1..d`` (their
    blocks and residual scalars); ``P_L`` is every trainable parameter (shared ones once).
    ``model.stack`` is a :class:`~hacn_core.hacn.connectivity.ResidualStack`.
    """
    n = len(model.stack.blocks)
    shared, per_layer = 0, [0] * n
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        layer = layer_of_parameter(name)
        if layer is None:
            shared += p.numel()
        else:
            per_layer[layer] += p.numel()
    out = [shared]
    for count in per_layer:
        out.append(out[-1] + count)
    return out


def truncation_grid(model: nn.Module, batches: Sequence[tuple[Tensor, Tensor]],
                    fractions: Sequence[float] = DEFAULT_FRACTIONS,
                    device: str | torch.device = "cpu") -> dict[str, list]:
    """Accuracy at every (kept width fraction, exit depth): AWNN Sec. 5.4 x H-ACN Sec. 3.1.

    For each fraction ``r``: one :func:`truncated_copy` and one pass per batch of
    ``batches`` (a list: it is read once per fraction) through
    :func:`~hacn_core.hacn.connectivity.evaluate_layerwise`, which reads all ``L + 1``
    exits. Returns ``fractions``; ``accuracy[r][d]`` (exit ``d = 0..L``);
    ``widths[r]`` (the kept width of every layer); ``parameters[r][d]``
    (:func:`parameters_by_exit` of the truncated copy).
    """
    fractions = [check_fraction(r, "fractions") for r in fractions]
    if not fractions:
        raise ValueError("fractions: need at least one kept width fraction in (0, 1]")
    batches = list(batches)
    out: dict[str, list] = {"fractions": fractions, "accuracy": [], "widths": [], "parameters": []}
    for r in fractions:
        cut = truncated_copy(model, r)
        out["accuracy"].append(evaluate_layerwise(cut, batches, device=device).tolist())
        out["widths"].append(layer_widths(cut))
        out["parameters"].append(parameters_by_exit(cut))
    return out


__all__ = [
    "DEFAULT_FRACTIONS",
    "check_fraction",
    "fixed_mlp_of",
    "fixed_width_twin",
    "freeze_width_learning",
    "layer_of_parameter",
    "layer_widths",
    "parameters_by_exit",
    "truncated_copy",
    "truncation_grid",
]
