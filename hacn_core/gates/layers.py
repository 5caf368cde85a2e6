"""Residual gates (Savarese & Figueiredo, "Residual Gates", Section 2.2).

A layer ``u = f(x)`` becomes a Gated PlainNet layer ``u = g(k) f(x) + (1 - g(k)) x``
and a residual layer ``u = f_r(x) + x`` becomes a Gated ResNet layer
``u = g(k) f_r(x) + x``, with one scalar ``k`` per layer and ``g = ReLU`` by
default (``sigmoid``, ``identity`` and ``clip01``, ReLU capped at 1, are named
alternatives). The two functions ``gated_plain`` / ``gated_residual`` are the single
implementation of those rules; ``hacn_core.hacn.connectivity`` reuses them for its
gated residual rule, and the layer wrappers below call them.

What this module offers
-----------------------
Layer wrappers (each wraps any ``nn.Module`` ``block``):

- ``PlainLayer``          ``u = f(x)`` (the ungated reference; same parameter names)
- ``GatedPlainLayer``     ``u = g(k) f(x) + (1 - g(k)) x``           (Sec. 2.2)
- ``ResidualLayer``       ``u = f_r(h) + s(h)``, ``h = pre(x)``       (He et al.)
- ``GatedResidualLayer``  ``u = g(k) f_r(h) + s(h)``                  (Sec. 2.2)
- ``SkippedLayer``        what is left of a removed layer: ``u = s(pre(x))``

``s`` is the identity unless a ``shortcut`` (a projection where dimensions
change, Sec. 3.2) is given; it is never gated: the paper gates the residual
branch only, so for a projection block ``k = 0`` leaves ``u = s(h)`` (Fig. 6
discussion: "the convolution performed in the shortcut connection ... is more
important than the residual block itself"). ``pre`` is an optional module
applied before both branches: the shared pre-activation ``BN-ReLU`` of the
dimension-changing blocks of pre-activation ResNets (He et al., 2016).

Every ``k`` is a 0-d parameter tagged ``hacn_core.engine.roles.tag(k, "gate")``; it is
initialised to 1 (Sec. 3.2), so a gated model starts as its ungated counterpart.
Optimizers keep ``gate`` parameters out of weight decay unless the paper's
"k decay" ablation is asked for; this module only tags.

Inspection and pruning (Sec. 3.1, Table 2, Fig. 5):
``gate_values``, ``mean_gate``, ``set_gates``, ``removable_layers``,
``removal_order`` (greedy by increasing ``k`` or seeded random),
``remove_layers`` / ``prune`` (a smaller copy) and ``removal_curve``.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from hacn_core.engine.roles import named_parameter_roles, tag

GATE_FUNCTIONS: dict[str, Callable[[Tensor], Tensor]] = {
    "relu": F.relu,
    "sigmoid": torch.sigmoid,
    "identity": lambda k: k,
    # ReLU capped at 1: g(k) = min(max(k, 0), 1). Same as ReLU on [0, 1], but
    # above 1 the gate stays fully open and dk gets no gradient (a probe of
    # the gate's behaviour at k >= 1; the paper uses "relu").
    "clip01": lambda k: k.clamp(0.0, 1.0),
}

REMOVAL_STRATEGIES: tuple[str, ...] = ("greedy", "random")


def gate_value(k: Tensor, g: str = "relu") -> Tensor:
    """``g(k)`` for the named gate function (``relu`` in the paper)."""
    try:
        fn = GATE_FUNCTIONS[g]
    except KeyError:
        raise ValueError(f"g={g!r} is not a gate function; allowed: {', '.join(GATE_FUNCTIONS)}") from None
    return fn(k)


def gated_plain(fx: Tensor, x: Tensor, k: Tensor, g: str = "relu") -> Tensor:
    """Gated PlainNet rule ``u = g(k) f(x) + (1 - g(k)) x`` (Section 2.2)."""
    gk = gate_value(k, g)
    return gk * fx + (1 - gk) * x


def gated_residual(fx: Tensor, x: Tensor, k: Tensor, g: str = "relu") -> Tensor:
    """Gated ResNet rule ``u = g(k) f_r(x) + x`` (Section 2.2)."""
    return gate_value(k, g) * fx + x


# ---------------------------------------------------------------------------
# Layer wrappers
# ---------------------------------------------------------------------------


def _check_g(g: str) -> str:
    if g not in GATE_FUNCTIONS:
        raise ValueError(f"g={g!r} is not a gate function; allowed: {', '.join(GATE_FUNCTIONS)}")
    return g


def _new_gate(k_init: float) -> nn.Parameter:
    """One scalar ``k`` per layer, tagged ``gate`` (Sec. 2.2; init 1, Sec. 3.2)."""
    if not isinstance(k_init, (int, float)) or isinstance(k_init, bool):
        raise ValueError(f"k_init={k_init!r} must be a real number (the paper uses 1.0)")
    return tag(nn.Parameter(torch.full((), float(k_init))), "gate")


def _count_weight_layers(block: nn.Module) -> int:
    """Weight layers in ``block`` (Linear/Conv): how the paper counts depth."""
    n = sum(isinstance(m, (nn.Linear, nn.modules.conv._ConvNd)) for m in block.modules())
    return max(n, 1)


def _same_shape(fx: Tensor, x: Tensor, what: str) -> None:
    # Broadcasting would silently hide a block that changes the shape.
    if fx.shape != x.shape:
        raise ValueError(
            f"{what}: block output shape {tuple(fx.shape)} differs from the shortcut's {tuple(x.shape)}; "
            "a gated/residual layer needs a shape-preserving block or a `shortcut` projection"
        )


class RemovableLayer(nn.Module):
    """Base of the layers that layer removal (Sec. 3.1, Fig. 5) may drop.

    Subclasses define ``skipped()``: the module that replaces them once removed
    (what the layer computes when its gate is closed).
    """

    #: weight layers in the wrapped block (a residual block of the paper counts 2)
    num_layers: int

    def skipped(self) -> nn.Module:  # pragma: no cover - abstract
        raise NotImplementedError


class PlainLayer(nn.Module):
    """Ungated plain layer ``u = f(x)``: the reference of ``GatedPlainLayer``.

    It only wraps ``block`` so that plain and gated plain networks share
    parameter names (``...block.*``) and weights can be copied between them.
    """

    def __init__(self, block: nn.Module) -> None:
        super().__init__()
        self.block = block
        self.num_layers = _count_weight_layers(block)

    def forward(self, x: Tensor) -> Tensor:
        return self.block(x)


class GatedPlainLayer(RemovableLayer):
    """Gated PlainNet layer ``u = g(k) f(x) + (1 - g(k)) x`` (Sec. 2.2, Fig. 1).

    ``k = 1`` recovers ``f`` (the original cost surface, the ``k = 1`` slice);
    ``k <= 0`` (with ``g = ReLU``) makes the layer an identity mapping.
    """

    def __init__(self, block: nn.Module, g: str = "relu", k_init: float = 1.0) -> None:
        super().__init__()
        self.block = block
        self.g = _check_g(g)
        self.k = _new_gate(k_init)
        self.num_layers = _count_weight_layers(block)

    def gate(self) -> Tensor:
        """``g(k)``."""
        return gate_value(self.k, self.g)

    def forward(self, x: Tensor) -> Tensor:
        fx = self.block(x)
        _same_shape(fx, x, "GatedPlainLayer")
        return gated_plain(fx, x, self.k, self.g)

    def skipped(self) -> nn.Module:
        return SkippedLayer()

    def extra_repr(self) -> str:
        return f"g={self.g}"


class ResidualLayer(RemovableLayer):
    """Residual layer ``u = f_r(h) + s(h)`` with ``h = pre(x)`` (He et al., 2015b/2016).

    ``shortcut`` (``s``) defaults to the identity; give a projection where the
    dimensions change. ``pre`` defaults to the identity; give the shared
    pre-activation of a dimension-changing pre-activation block.
    """

    def __init__(self, block: nn.Module, shortcut: nn.Module | None = None, pre: nn.Module | None = None) -> None:
        super().__init__()
        self.pre = pre
        self.block = block
        self.shortcut = shortcut
        self.num_layers = _count_weight_layers(block)

    def _branches(self, x: Tensor) -> tuple[Tensor, Tensor]:
        h = x if self.pre is None else self.pre(x)
        s = h if self.shortcut is None else self.shortcut(h)
        fx = self.block(h)
        _same_shape(fx, s, type(self).__name__)
        return fx, s

    def forward(self, x: Tensor) -> Tensor:
        fx, s = self._branches(x)
        return fx + s

    def skipped(self) -> nn.Module:
        # Keep the (ungated) projection and the shared pre-activation: they
        # feed the shortcut, which is not part of the removed branch.
        return SkippedLayer(shortcut=self.shortcut, pre=self.pre)


class GatedResidualLayer(ResidualLayer):
    """Gated ResNet layer ``u = g(k) f_r(h) + s(h)`` (Sec. 2.2, Fig. 2).

    From ``u = g(k) (f_r(x) + x) + (1 - g(k)) x = g(k) f_r(x) + x``: the
    shortcut stays unaltered and ``g(k)`` regulates the residual. One ``k`` per
    residual block; the projection shortcut, if any, is not gated (Sec. 3.2).
    """

    def __init__(
        self,
        block: nn.Module,
        shortcut: nn.Module | None = None,
        pre: nn.Module | None = None,
        g: str = "relu",
        k_init: float = 1.0,
    ) -> None:
        super().__init__(block, shortcut=shortcut, pre=pre)
        self.g = _check_g(g)
        self.k = _new_gate(k_init)

    def gate(self) -> Tensor:
        """``g(k)``."""
        return gate_value(self.k, self.g)

    def forward(self, x: Tensor) -> Tensor:
        fx, s = self._branches(x)
        return gated_residual(fx, s, self.k, self.g)

    def extra_repr(self) -> str:
        return f"g={self.g}"


class SkippedLayer(nn.Module):
    """A removed layer: ``u = s(pre(x))``, the identity when there is no shortcut.

    This is exactly what a gated layer computes with ``g(k) = 0``, so removing
    a closed layer leaves the network's function unchanged (Sec. 2.2, 3.1).
    """

    def __init__(self, shortcut: nn.Module | None = None, pre: nn.Module | None = None) -> None:
        super().__init__()
        self.pre = pre
        self.shortcut = shortcut

    def forward(self, x: Tensor) -> Tensor:
        h = x if self.pre is None else self.pre(x)
        return h if self.shortcut is None else self.shortcut(h)


# ---------------------------------------------------------------------------
# Inspection (Table 2, Fig. 5 left, Fig. 6)
# ---------------------------------------------------------------------------


def gate_parameters(model: nn.Module) -> list[tuple[str, nn.Parameter]]:
    """Every parameter tagged ``gate`` in ``model``, in module order."""
    return [(name, p) for name, p, role in named_parameter_roles(model) if role == "gate"]


def gate_values(model: nn.Module) -> dict[str, float]:
    """Snapshot ``{parameter name: k}`` of every gate (raw ``k``, not ``g(k)``).

    Module order is forward order for the models in ``hacn_core.models``, so
    ``list(gate_values(m).values())`` is the curve of Fig. 5 (left) / Fig. 6.
    """
    return {name: float(p.detach()) for name, p in gate_parameters(model)}


def mean_gate(model: nn.Module) -> float:
    """Mean ``k`` over the gates of ``model`` (the quantity of Table 2)."""
    values = list(gate_values(model).values())
    if not values:
        raise ValueError("model has no parameters tagged 'gate'; mean_gate needs a gated model")
    return sum(values) / len(values)


@torch.no_grad()
def set_gates(model: nn.Module, value: float | Sequence[float] | dict[str, float]) -> None:
    """Set every gate to ``value`` (a number, one number per gate in order, or a name -> k dict)."""
    params = gate_parameters(model)
    if isinstance(value, dict):
        known = dict(params)
        unknown = sorted(set(value) - set(known))
        if unknown:
            raise ValueError(f"value: unknown gate names {unknown}; allowed: {list(known)}")
        for name, v in value.items():
            known[name].fill_(float(v))
        return
    if isinstance(value, (int, float)):
        value = [float(value)] * len(params)
    value = list(value)
    if len(value) != len(params):
        raise ValueError(f"value: got {len(value)} gate values, the model has {len(params)} gates")
    for (_, p), v in zip(params, value):
        p.fill_(float(v))


# ---------------------------------------------------------------------------
# Layer removal (Sec. 3.1, Fig. 5 right)
# ---------------------------------------------------------------------------


def removable_layers(model: nn.Module) -> list[tuple[str, RemovableLayer]]:
    """The outermost ``RemovableLayer``s of ``model`` as ``(name, layer)``, in module order."""
    found: list[tuple[str, RemovableLayer]] = []
    for name, module in model.named_modules():
        if not name or not isinstance(module, RemovableLayer):
            continue
        if any(name.startswith(outer + ".") for outer, _ in found):
            continue  # nested inside a layer already listed
        found.append((name, module))
    return found


def removal_order(model: nn.Module, strategy: str = "greedy", seed: int = 0) -> list[str]:
    """Names of the removable layers in the order Fig. 5 removes them.

    ``greedy``: increasing ``k`` ("blocks with the smallest k are removed
    first"; ties keep module order); needs every removable layer to be gated.
    ``random``: a permutation drawn from ``seed`` (the only option for ResNets,
    which lack ``k``); the same seed gives the same order.
    """
    layers = removable_layers(model)
    if strategy == "greedy":
        ungated = [name for name, layer in layers if not hasattr(layer, "k")]
        if ungated:
            raise ValueError(
                f"strategy='greedy' needs a gate k in every removable layer; ungated: {ungated[:3]}"
                f"{'...' if len(ungated) > 3 else ''}; use strategy='random'"
            )
        keyed = sorted(range(len(layers)), key=lambda i: (float(layers[i][1].k.detach()), i))
        return [layers[i][0] for i in keyed]
    if strategy == "random":
        gen = torch.Generator().manual_seed(int(seed))
        perm = torch.randperm(len(layers), generator=gen).tolist()
        return [layers[i][0] for i in perm]
    raise ValueError(f"strategy={strategy!r} is not a removal strategy; allowed: {', '.join(REMOVAL_STRATEGIES)}")


def remove_layers(model: nn.Module, names: Iterable[str]) -> nn.Module:
    """A deep copy of ``model`` with the named removable layers replaced by ``SkippedLayer``.

    The copy has fewer parameters (the residual branches and their gates are
    gone) and its forward skips them; ``model`` is left untouched.
    """
    names = list(names)
    layers = dict(removable_layers(model))
    bad = [n for n in names if n not in layers]
    if bad:
        raise ValueError(f"names: {bad} are not removable layers; allowed: {list(layers)}")
    if len(set(names)) != len(names):
        raise ValueError("names: a layer is listed more than once")
    pruned = copy.deepcopy(model)
    for name in names:
        parent_name, _, child = name.rpartition(".")
        parent = pruned.get_submodule(parent_name) if parent_name else pruned
        layer = parent.get_submodule(child)
        setattr(parent, child, layer.skipped())
    return pruned


def prune(model: nn.Module, n: int, strategy: str = "greedy", seed: int = 0) -> nn.Module:
    """Remove the first ``n`` layers of ``removal_order(model, strategy, seed)`` (a copy)."""
    order = removal_order(model, strategy, seed)
    if not 0 <= n <= len(order):
        raise ValueError(f"n={n} must be between 0 and the number of removable layers ({len(order)})")
    return remove_layers(model, order[:n])


@dataclass(frozen=True)
class RemovalPoint:
    """One point of the layer-removal curve (Fig. 5, right)."""

    blocks_removed: int
    layers_removed: int  # weight layers: a residual block of the paper counts 2
    accuracy: float
    removed: tuple[str, ...]


def removal_curve(
    model: nn.Module,
    evaluate: Callable[[nn.Module], float],
    strategy: str = "greedy",
    counts: Iterable[int] | None = None,
    seed: int = 0,
) -> list[RemovalPoint]:
    """Test accuracy against the number of removed blocks (Fig. 5, right).

    Removals are nested: the point for ``n`` removes the first ``n`` layers of
    one ``removal_order`` (greedy, or one seeded random permutation), as when
    pruning a trained network progressively. ``evaluate`` maps a model to its
    accuracy (it should call ``model.eval()``). ``counts`` defaults to every
    number from 0 to all removable layers.
    """
    order = removal_order(model, strategy, seed)
    depth = {name: layer.num_layers for name, layer in removable_layers(model)}
    counts = list(range(len(order) + 1)) if counts is None else sorted(set(counts))
    for n in counts:
        if not 0 <= n <= len(order):
            raise ValueError(f"counts: {n} is outside 0..{len(order)} (the number of removable layers)")
    points = []
    for n in counts:
        removed = tuple(order[:n])
        points.append(
            RemovalPoint(
                blocks_removed=n,
                layers_removed=sum(depth[name] for name in removed),
                accuracy=float(evaluate(remove_layers(model, removed))),
                removed=removed,
            )
        )
    return points
