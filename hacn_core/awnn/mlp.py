"""The adaptive MLP: each hidden layer learns its width (AWNN, Sec. 3.1, Eq. 14, Algorithm 1).

``in_dim -> D_1 -> ... -> D_L -> out_dim``: hidden layer ``l`` rescales the
activation of its neuron ``j`` by the importance ``f(j; nu_l)`` of Eq. 12 (Eq. 14)::

    h_l = sigma(W_l h_{l-1} + b_l) * f(j; nu_l),   j = 0..D_l - 1

and its width ``D_l`` is the quantile of ``f(.; nu_l)`` at ``k`` (Eq. 11). Algorithm 1
trains the rates ``nu_l`` with the weights on the negative ELBO of Eq. 13
(:mod:`hacn_core.awnn.elbo`) and sets every ``D_l`` from its rate before each step
(:meth:`AdaptiveMLP.update_width`, line 5). :meth:`AdaptiveMLP.intermediates` is Eq. 14
in plain autograd ops; the default forward runs the same arithmetic as one autograd
node (:mod:`hacn_core.awnn.fast_node`) and the layers live in stores with spare
capacity that keep the optimizer state of surviving neurons across width changes
(:mod:`hacn_core.awnn.fast_store`). Inputs may have any leading shape ``(..., in_dim)``.

Conventions (decisions this module takes; the index convention and the rate
parametrization are in :mod:`hacn_core.awnn.distribution`)
-----------------------------------------------------------------------------
* **Rates.** The raw values of the ``L`` rates form one parameter ``raw_rate`` of
  shape ``(L,)``, tagged ``roles.tag(.., "rate")``, ``nu_l = softplus(raw_l)``.
* **Bias.** Neuron ``n``'s parameters ``rho_{l n}`` (Eq. 13) are one row
  ``[b_n | w_n]`` of a single tensor ``rho`` per layer: "the bias parameter is taken
  into account by concatenating a dummy value 1" (Sec. 3.1). The weight prior
  therefore covers biases too.
* **New neurons** are drawn from a standard normal, as Sec. 3 says
  (``grow_init="kaiming_plus"`` draws them with the kaiming+ std instead).
* **Standard deviations.** ``N(mu, sigma)`` in Eqs. 3, 4 and Sec. 5.3 is read
  with ``sigma`` a standard deviation.
* **Importances.** ``AWNNConfig(importance_norm="active")`` renormalises the
  importances over the active neurons, as the public code does; the default follows
  Eq. 14 as written (:mod:`hacn_core.awnn.importance`).

Pass the optimizer to :meth:`AdaptiveMLP.update_width` (or attach it once with
:meth:`AdaptiveMLP.attach_optimizer`); with :func:`hacn_core.engine.training.fit`, pass an
:class:`hacn_core.awnn.elbo.ELBOLoss` as ``loss_fn`` and a
:class:`hacn_core.awnn.callback.WidthCallback`, which does both and logs widths, rates
and the ELBO terms per epoch. :func:`truncate` cuts a trained model (Sec. 5.4).
"""

from __future__ import annotations

import copy
import math
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from hacn_core.awnn import fast_cpp
from hacn_core.awnn.checks import check_choice, check_k, check_rate, check_width
from hacn_core.awnn.distribution import geometric_importances, quantile_width, rate_for_width, raw_from_rate
from hacn_core.awnn.fast_node import fused_adaptive_mlp
from hacn_core.awnn.fast_store import AdaptiveLinear
from hacn_core.awnn.importance import IMPORTANCE_NORMS
from hacn_core.awnn.init import ACTIVATIONS, INITS, init_std
from hacn_core.engine.roles import tag

#: distributions of neurons added during training: the paper's standard normal (Sec. 3), or kaiming+
GROW_INITS: tuple[str, ...] = ("normal", "kaiming_plus")

#: rate of the tabular experiments (Appendix C.1, Table 3)
DEFAULT_RATE = 0.01

#: The most parameters an :class:`AdaptiveMLP` may *start* with: 2**30 (about 1.07e9,
#: 4 GiB in float32 before gradients and optimizer state). The starting width is Eq. 11's
#: quantile ``ceil(ln(1/(1-k)) / nu_0)``, so a tiny ``rate_init`` asks for billions of
#: neurons (1e-9: 2.3e9 per layer) and would fail only after trying to allocate them.
#: The studies start at most at 2,303 neurons (``rate_init`` 0.001, Figs. 4 and 10;
#: about 12,000 parameters, or 5.3 million with two hidden layers) and may grow
#: far past that during training (to over 11,000 neurons): widths reached while
#: training are not limited.
MAX_START_PARAMETERS = 2**30

#: The most parameters a width update may give an :class:`AdaptiveMLP`: 2**32 (about 4.3e9,
#: 16 GiB in float32, 64 GiB with gradients and Adam's two moments: more than the GPUs the
#: studies run on). The studies' widest MLPs stay below 10 million parameters; a width past
#: this cap means the rate collapsed (a raw rate of -30 asks for 4.9e13 neurons at k=0.99),
#: and the update refuses it (:class:`WidthUpdateError`) instead of trying to allocate it.
MAX_UPDATE_PARAMETERS = 2**32


class WidthUpdateError(RuntimeError):
    """A width update (Algorithm 1, Eq. 11) that cannot be made: a rate that is not finite, or a width
    whose parameters exceed :data:`MAX_UPDATE_PARAMETERS`. The message names the hidden layer (and the
    adaptive MLP within the model, where :func:`update_widths` knows it) and the rate. Raised before
    anything is resized, so training stops with its last checkpoint as it was."""


# ---------------------------------------------------------------------------
# Hyper-parameters
# ---------------------------------------------------------------------------


@dataclass
class AWNNConfig:
    """Hyper-parameters of an :class:`AdaptiveMLP` (paper defaults: Appendix C).

    ``rate_init`` (``nu_0``, shared by all layers, Sec. 3) or ``initial_width`` (the
    starting quantile width, converted with :func:`rate_for_width`) may be given, not
    both; with neither, ``nu_0 = 0.01`` (Table 3). ``init`` is the initial weight
    scheme (Sec. 3.2), ``grow_init`` the distribution of neurons added during
    training (``normal``: the paper's standard normal, Sec. 3; ``kaiming_plus``: the
    kaiming+ std of the current importances, zero bias). ``max_width`` optionally caps
    every width (the paper's width is unbounded). ``fused`` selects the one-node
    forward/backward (default; in C++ or in Python, :mod:`hacn_core.awnn.fast_cpp`) or plain
    autograd ops (same values; slower).
    ``capacity_growth`` is the factor by which the stores grow; after ``pack_after``
    steps without a width change the layers drop their spare columns so that the
    parameters are contiguous again (``None``: never).

    ``importance_norm``: ``none`` uses Eq. 12's ``f(j)`` in Eq. 14, as the paper
    writes it (the first ``D`` importances then hold mass ``1 - e^{-nu D} ~ k``);
    ``active`` renormalises them over the ``D`` active neurons,
    ``p(j) = f(j) / sum_{i<D} f(i)``, as the public code does (its truncated
    distribution returns a renormalised probability vector). The two differ in the
    gradient of ``nu``: with ``none``, any pressure to scale all activations up
    (cross-entropy on separable data always wants larger logits) raises ``nu``,
    because raising ``nu`` raises the mass of the ``D`` active neurons; with
    ``active`` that mass is always 1 and only the distribution of importance among
    neurons moves ``nu`` (see ``notebooks/awnn_02_tabular.ipynb``). Kaiming+ uses
    the same importances.

    ``prefill=True`` draws the future neurons of the spare capacity when a store
    grows (``grow_init="normal"`` only), so that growing into it costs nothing; the
    draws then depend on the capacity history, which a checkpoint does not hold, so a
    resumed run no longer repeats the uninterrupted one bit for bit. The default draws
    each new neuron when it appears, from the random state the trainer checkpoints.
    """

    in_dim: int
    out_dim: int
    n_hidden_layers: int = 1
    activation: str = "relu"
    bias: bool = True
    k: float = 0.9
    rate_init: float | None = None
    initial_width: int | None = None
    init: str = "kaiming_plus"
    grow_init: str = "normal"
    negative_slope: float = 0.01
    capacity_growth: float = 2.0
    max_width: int | None = None
    fused: bool = True
    pack_after: int | None = 50
    importance_norm: str = "none"
    prefill: bool = False

    def __post_init__(self) -> None:
        check_width(self.in_dim, "in_dim")
        check_width(self.out_dim, "out_dim")
        check_width(self.n_hidden_layers, "n_hidden_layers")
        check_choice(self.activation, ACTIVATIONS, "activation")
        check_choice(self.init, INITS, "init")
        check_choice(self.grow_init, GROW_INITS, "grow_init")
        check_choice(self.importance_norm, IMPORTANCE_NORMS, "importance_norm")
        check_k(self.k)
        if self.rate_init is not None and self.initial_width is not None:
            raise ValueError("rate_init and initial_width both given; set one (allowed: rate_init > 0 or initial_width >= 1)")
        if self.initial_width is not None:
            check_width(self.initial_width, "initial_width")
        if self.rate_init is not None:
            check_rate(self.rate_init, "rate_init")
        if self.max_width is not None:
            check_width(self.max_width, "max_width")
        if self.pack_after is not None:
            check_width(self.pack_after, "pack_after")
        if not isinstance(self.prefill, bool):
            raise ValueError(f"prefill={self.prefill!r} must be True or False")
        if isinstance(self.negative_slope, bool) or not (
                isinstance(self.negative_slope, (int, float)) and self.negative_slope >= 0):
            raise ValueError(f"negative_slope={self.negative_slope!r} must be a number >= 0")
        if isinstance(self.capacity_growth, bool) or not (
                isinstance(self.capacity_growth, (int, float)) and self.capacity_growth > 1):
            raise ValueError(f"capacity_growth={self.capacity_growth!r} must be > 1 (2.0 doubles the capacity)")

    @property
    def initial_rate(self) -> float:
        """The starting rate ``nu_0``: ``rate_init``, the rate of ``initial_width``, or 0.01."""
        if self.initial_width is not None:
            return rate_for_width(self.initial_width, self.k)
        return DEFAULT_RATE if self.rate_init is None else float(self.rate_init)


# ---------------------------------------------------------------------------
# The model
# ---------------------------------------------------------------------------


def check_starting_size(config: AWNNConfig, width: int) -> None:
    """Refuse a starting ``width`` per hidden layer whose parameters exceed :data:`MAX_START_PARAMETERS`.

    Runs before anything is allocated; the message names the field that set the width
    (``rate_init`` or ``initial_width``), the width, the parameters and their memory.
    """
    dims = [config.in_dim] + [width] * config.n_hidden_layers + [config.out_dim]
    params = sum((a + int(config.bias)) * b for a, b in zip(dims[:-1], dims[1:]))
    if params <= MAX_START_PARAMETERS:
        return
    if config.initial_width is not None:
        source, fix = f"initial_width={config.initial_width!r}", "use a smaller initial_width"
    else:
        source = f"rate_init={config.initial_rate!r} (Eq. 11 at k={config.k!r})"
        fix = f"use a larger rate_init ({DEFAULT_RATE} starts at {quantile_width(DEFAULT_RATE, config.k):,} neurons)"
    gib = params * torch.get_default_dtype().itemsize / 2**30
    raise ValueError(
        f"{source} gives a starting width of {width:,} neurons in each of {config.n_hidden_layers} hidden "
        f"layer(s): {params:,} parameters ({gib:,.1f} GiB), above MAX_START_PARAMETERS={MAX_START_PARAMETERS:,}; "
        f"{fix}, or cap the width with max_width"
    )


class AdaptiveMLP(nn.Module):
    """An MLP whose hidden widths are learned (Sec. 3.1, Eq. 14, Algorithm 1).

    ``in_dim -> D_1 -> ... -> D_L -> out_dim`` with ``L = n_hidden_layers``. Hidden
    layer ``l`` computes ``h_l = act(W_l h_{l-1} + b_l) * f(j; nu_l)`` for positions
    ``j = 0..D_l-1``; the output layer is linear. Inputs may have leading batch
    dimensions (``(..., in_dim)``). Call :meth:`update_width` before every training
    step (Algorithm 1, line 5) with the optimizer.

    The ``L`` rates live in one parameter ``raw_rate`` of shape ``(L,)`` (entry ``l``
    is ``softplus^{-1}(nu_l)``), tagged ``rate``.
    """

    def __init__(self, config: AWNNConfig | None = None, **kwargs) -> None:
        super().__init__()
        if config is None:
            config = AWNNConfig(**kwargs)
        elif kwargs:
            raise ValueError(f"pass either a config or keyword arguments, not both (got {sorted(kwargs)})")
        self.config = config
        n = config.n_hidden_layers
        d0 = quantile_width(config.initial_rate, config.k, config.max_width)
        check_starting_size(config, d0)
        self.raw_rate = tag(nn.Parameter(torch.full((n,), raw_from_rate(config.initial_rate))), "rate")
        dims = [config.in_dim] + [d0] * n + [config.out_dim]
        # new neurons ~ N(0, 1): with prefill, the spare capacity is pre-drawn
        prefill_std = 1.0 if config.grow_init == "normal" and config.prefill else None
        self.layers = nn.ModuleList(
            AdaptiveLinear(dims[i], dims[i + 1], config.bias, capacity_growth=config.capacity_growth,
                           prefill_std=prefill_std)
            for i in range(n + 1)
        )
        self.__dict__["_hidden"] = list(self.layers)[:-1]  # a plain list: cheap per-step access
        # positions 0, 1, 2, ... of Eq. 12, grown like the weights
        self.register_buffer("_positions", torch.arange(d0, dtype=torch.get_default_dtype()), persistent=False)
        self.widths_frozen = False
        self._stable_steps = 0
        self._optimizer_ref: Callable[[], torch.optim.Optimizer | None] = _no_optimizer
        self.reset_parameters()

    def _own_modules_only(self) -> bool:
        """Whether this model holds nothing but its own layers (no module added to it), so that
        its adaptive MLPs and adaptive layers are known without walking ``modules()``."""
        mods = self._modules
        return len(mods) == 1 and len(mods["layers"]._modules) == self.config.n_hidden_layers + 1

    # -- Eq. 14: the forward --------------------------------------------------------
    def rates(self) -> Tensor:
        """The rates ``nu_l = softplus(raw_l)`` as a vector of length ``L`` (differentiable)."""
        return F.softplus(self.raw_rate)

    def importances(self, layer: int | None = None) -> Tensor | list[Tensor]:
        """Importances ``f(j; nu_l)``, ``j = 0..D_l-1`` of hidden ``layer`` (Eq. 14), or
        of all hidden layers as a list (differentiable in ``raw_rate``)."""
        nu = F.softplus(self.raw_rate)
        pos = self._position_views()
        norms = self.norm_widths()

        def one(i: int) -> Tensor:
            f = geometric_importances(pos[i], nu[i])
            m = norms[i]
            return f if m is None else f / -torch.expm1(-nu[i] * m)  # sum_{j<M} f(j) = 1 - e^{-nu M}

        if layer is not None:
            return one(layer)
        return [one(i) for i in range(len(pos))]

    def _act(self, z: Tensor) -> Tensor:
        a = self.config.activation
        if a == "relu":
            return F.relu(z)
        if a == "leaky_relu":
            return F.leaky_relu(z, self.config.negative_slope)
        if a == "relu6":
            return F.relu6(z)
        return torch.tanh(z)

    def intermediates(self, x: Tensor) -> tuple[Tensor, list[Tensor], list[Tensor]]:
        """Eq. 14 with plain autograd ops: ``(output, alphas, hs)``, per hidden layer the
        activations before (``alpha``, Theorem 3.1) and after (``h``) the rescaling
        (Figs. 2, 6, 7). Same values and gradients as the fused ``forward``.

        ``x`` has shape ``(..., in_dim)``; the output ``(..., out_dim)`` and every
        ``alpha``, ``h`` ``(..., D_l)`` keep its leading shape."""
        alphas, hs = [], []
        h = x
        for lin, f in zip(self.layers, self.importances()):
            a = self._act(lin(h))
            h = a * f
            alphas.append(a)
            hs.append(h)
        return self.layers[-1](h), alphas, hs

    def forward(self, x: Tensor) -> Tensor:
        """``(..., in_dim) -> (..., out_dim)``: :meth:`intermediates`'s output, computed by the
        fused node (:func:`hacn_core.awnn.fast_node.fused_adaptive_mlp`) unless
        ``config.fused`` is off or autocast is on. In training mode the node also adds the
        prior gradients an ``ELBOLoss(fused_priors=True)`` installed (:meth:`set_fused_prior`)."""
        if not self.config.fused or torch.is_autocast_enabled(x.device.type):
            return self.intermediates(x)[0]  # plain autograd ops (autocast handles their dtypes)
        rhos = [lin._parameters["rho"] for lin in self.layers._modules.values()]
        # the fused prior gradients installed by ELBOLoss(fused_priors=True), while training
        d = self.__dict__
        prior = d.get("_fused_prior") if d["training"] else None
        return fused_adaptive_mlp(x, self._parameters["raw_rate"], rhos, self._specs(), prior)

    def set_fused_prior(self, prior: tuple[float, float, float] | None) -> None:
        """Install (or, with None, remove) the fused prior gradients ``(w_coef, mu, r_coef)`` that the
        fused node adds in its backward while the model trains (see
        :class:`hacn_core.awnn.fast_node.AdaptiveMLPFunction`); :class:`hacn_core.awnn.elbo.ELBOLoss`
        with ``fused_priors=True`` calls it. A model without it computes Eq. 14's gradients alone."""
        if prior is not None:
            if not self.config.fused:
                raise ValueError("fused prior gradients need config.fused=True (the fused node adds them); "
                                 "with fused=False use the priors in the loss (ELBOLoss(fused_priors=False))")
            w_coef, mu, r_coef = (float(v) for v in prior)
            if not (w_coef >= 0 and r_coef >= 0 and math.isfinite(mu)):
                raise ValueError(f"prior={prior!r}: need w_coef >= 0, r_coef >= 0 and a finite mu")
            prior = None if w_coef == 0 and r_coef == 0 else (w_coef, mu, r_coef)
        self.__dict__["_fused_prior"] = prior

    # -- widths: Eq. 11 and Algorithm 1 -------------------------------------------
    @property
    def n_hidden_layers(self) -> int:
        return self.config.n_hidden_layers

    def widths(self) -> list[int]:
        """Current widths ``[D_1, ..., D_L]`` of the hidden layers (log these for Figs. 3-5)."""
        return [lin.__dict__["out_features"] for lin in self._hidden]

    def target_widths(self, raw_rates: Sequence[float] | None = None) -> list[int]:
        """Quantile widths of the current rates (Eq. 11): what :meth:`update_width` sets.

        ``raw_rates``: the values of ``raw_rate`` already on the host (:func:`update_widths`
        reads those of all MLPs of a GPU model in one transfer); by default they are read here.
        """
        cfg = self.config
        k, cap = cfg.k, cfg.max_width
        c = -math.log1p(-k)
        out = []
        if raw_rates is None:
            raw_rates = self._parameters["raw_rate"].tolist()  # not self.raw_rate: Module.__getattr__ is slow
        for layer, r in enumerate(raw_rates, start=1):
            if not math.isfinite(r):
                raise WidthUpdateError(f"hidden layer {layer}: its rate is not finite (raw_rate={r!r}), so Eq. 11 "
                                       "gives no width; training diverged before this step")
            nu = r + math.log1p(math.exp(-r)) if r > 0 else math.log1p(math.exp(r))  # float_softplus, inline
            if nu <= 0.0 or c / nu > 2**53:  # the rate underflowed: an astronomic width, capped below
                d = 2**53
            else:
                ratio = c / nu
                d = math.ceil(ratio)
                if not (1.0 < ratio < 2**53) or d - ratio < 1e-9 or ratio - (d - 1) < 1e-9:
                    d = quantile_width(nu, k)  # near an integer (or out of range): the checked path
            out.append(d if cap is None else min(d, cap))
        self._check_update(out, raw_rates)
        return out

    def _check_update(self, widths: Sequence[int], raw_rates: Sequence[float]) -> None:
        """Refuse ``widths`` whose parameters exceed :data:`MAX_UPDATE_PARAMETERS`, naming the widest layer."""
        cfg = self.config
        dims = [cfg.in_dim, *widths, cfg.out_dim]
        params = sum((a + int(cfg.bias)) * b for a, b in zip(dims[:-1], dims[1:]))
        if params <= MAX_UPDATE_PARAMETERS:
            return
        layer = max(range(len(widths)), key=lambda i: widths[i])
        r = float(raw_rates[layer])
        nu = r + math.log1p(math.exp(-r)) if r > 0 else math.log1p(math.exp(r))
        raise WidthUpdateError(
            f"hidden layer {layer + 1}: its rate nu={nu:.3g} (raw_rate={r:.6g}) gives a width of {widths[layer]:,} "
            f"neurons (Eq. 11 at k={cfg.k}), {params:,} parameters in all, above MAX_UPDATE_PARAMETERS="
            f"{MAX_UPDATE_PARAMETERS:,}: the rate collapsed. Lower the learning rate, or cap the width with max_width")

    def norm_widths(self) -> tuple[int | None, ...]:
        """Per hidden layer, the width ``M`` over which importances are renormalised
        (``config.importance_norm="active"``), or ``None`` (Eq. 12 as written).

        ``M`` is the current width, except in a truncated copy (:func:`truncate`), which
        keeps the width it was cut from so that the kept neurons' importances stay put.
        """
        if self.config.importance_norm == "none":
            return (None,) * self.n_hidden_layers
        frozen = self.__dict__.get("_frozen_norm_widths")
        return tuple(frozen) if frozen is not None else tuple(self.widths())

    def attach_optimizer(self, optimizer: torch.optim.Optimizer | None) -> None:
        """Remember ``optimizer`` (weakly) so that width updates keep its state in sync."""
        self._optimizer_ref = _no_optimizer if optimizer is None else weakref.ref(optimizer)

    def update_width(self, optimizer: torch.optim.Optimizer | None = None,
                     raw_rates: Sequence[float] | None = None) -> bool:
        """Algorithm 1, ``update_width``: set every ``D_l`` to the quantile of ``f(.; nu_l)``.

        Growing a layer adds rows to ``rho_l`` and columns to ``rho_{l+1}``
        (initialised per ``config.grow_init``); shrinking removes the last (least
        important) ones. Returns whether any width changed; a no-op once
        :meth:`freeze_widths` was called. Pass the optimizer (or attach it) as soon
        as it holds state, so that its state follows the resize. ``raw_rates``: as in
        :meth:`target_widths`.
        """
        d = self.__dict__
        if d["widths_frozen"]:
            return False
        try:
            new = self.target_widths(raw_rates)
        except WidthUpdateError as err:
            err.mlp = self  # type: ignore[attr-defined]  # update_widths names it within the model
            raise
        if new == [lin.__dict__["out_features"] for lin in d["_hidden"]]:
            stable = d["_stable_steps"] = d["_stable_steps"] + 1  # plain int: no Module.__setattr__
            if stable == self.config.pack_after:
                self.pack(optimizer)
            return False
        d["_stable_steps"] = 0
        self._resize_layers(new, optimizer)  # target widths are valid: no checks
        return True

    def pack(self, optimizer: torch.optim.Optimizer | None = None) -> None:
        """Make every ``rho`` contiguous again (:meth:`AdaptiveLinear.pack_`); done by
        :meth:`update_width` after ``config.pack_after`` steps without a width change."""
        if optimizer is None:
            optimizer = self._optimizer_ref()
        for lin in self.layers:
            lin.pack_(optimizer)

    def set_widths(self, widths: Sequence[int], optimizer: torch.optim.Optimizer | None = None) -> None:
        """Resize the hidden layers to ``widths`` (survivors keep values and optimizer state)."""
        widths = [int(w) for w in widths]
        if len(widths) != self.n_hidden_layers:
            raise ValueError(f"widths={widths} must have one entry per hidden layer ({self.n_hidden_layers})")
        for w in widths:
            check_width(w, "widths")
        self._resize_layers(widths, optimizer)

    def _resize_layers(self, widths: list[int], optimizer: torch.optim.Optimizer | None) -> None:
        """:meth:`set_widths` on checked ``widths``: layer ``i`` becomes ``dims[i+1] x dims[i]``."""
        if optimizer is None:
            optimizer = self._optimizer_ref()
        cfg = self.config
        ext = fast_cpp.module()  # resize in C++ where the fused node runs there (same draws, same values)
        normal = cfg.grow_init == "normal"
        n = len(widths)
        fan_in = cfg.in_dim
        for i, lin in enumerate(self._modules["layers"]._modules.values()):
            out = widths[i] if i < n else cfg.out_dim
            ld = lin.__dict__
            if ld["out_features"] != out or ld["in_features"] != fan_in:
                if normal:
                    w_std, b_std = 1.0, 1.0
                else:
                    prev = None if i == 0 else self._importances_at(i - 1, fan_in)
                    act = cfg.activation if i < n else "linear"
                    w_std, b_std = init_std(prev, fan_in, act, "kaiming_plus", cfg.negative_slope), 0.0
                lin.resize_unchecked_(out, fan_in, optimizer, w_std, b_std, ext)
            fan_in = out

    def _importances_at(self, layer: int, width: int) -> Tensor:
        with torch.no_grad():
            nu = F.softplus(self.raw_rate[layer]).double()
            f = geometric_importances(torch.arange(width, dtype=nu.dtype), nu)  # importances(nu, width), unchecked
            if self.config.importance_norm == "active":
                f = f / -torch.expm1(-nu * width)
            return f

    def freeze_widths(self, frozen: bool = True) -> None:
        """Stop (or resume) following the rates: used after truncation (Sec. 5.4).

        Resuming also drops a truncated copy's frozen normaliser (:meth:`norm_widths`)."""
        self.widths_frozen = frozen
        if not frozen:
            self.__dict__["_frozen_norm_widths"] = None

    # -- Sec. 3.2: init -------------------------------------------------------------
    @torch.no_grad()
    def reset_parameters(self) -> None:
        """Initial weights per ``config.init`` (kaiming+ by default, Sec. 3.2), zero biases.

        Layer ``l``'s std uses the importances of layer ``l-1`` (none for the inputs);
        the output layer has no activation, so its gain is 1 (Eq. 28).
        """
        cfg = self.config
        for i, lin in enumerate(self.layers):
            prev = None if i == 0 else self._importances_at(i - 1, lin.in_features)
            act = cfg.activation if i < self.n_hidden_layers else "linear"
            std = init_std(prev, lin.in_features, act, cfg.init, cfg.negative_slope)
            lin.weight.normal_(0.0, std)
            if lin.has_bias:
                lin.bias.zero_()

    # -- bookkeeping of the fused node (positions and arguments per width) ---------
    def _position_views(self) -> tuple[Tensor, ...]:
        """Positions ``0..D_l-1`` of every layer: views of one buffer, kept per width (a width
        that comes back, as adapting widths do, finds its view; at most 256 kept)."""
        widths = self.widths()
        d = self.__dict__
        pos = self._buffers["_positions"]
        if pos.numel() < max(widths):
            n = max(max(widths), math.ceil(pos.numel() * self.config.capacity_growth))
            self._positions = pos = torch.arange(n, dtype=pos.dtype, device=pos.device)
        cache = d.get("_pos_cache")
        if cache is None or cache[0] is not pos:
            cache = d["_pos_cache"] = (pos, {})
        views = cache[1]
        out = []
        for w in widths:
            v = views.get(w)
            if v is None:
                if len(views) >= 256:
                    views.clear()
                v = views[w] = pos[:w]
            out.append(v)
        return tuple(out)

    def _specs(self) -> tuple[tuple, tuple]:
        """``(spec, ext_args)`` of the current widths and config: ``spec`` for
        :class:`hacn_core.awnn.fast_node.AdaptiveMLPFunction`, ``(positions, activation, slope, bias, norm widths)``;
        ``ext_args`` the C++ node's arguments after ``x, raw, rhos``: positions, norm widths
        (0: none), activation code, slope, bias (the node computes the rates and the constants
        of Eq. 14 from ``raw`` itself).

        Kept per (widths, config) for the current positions buffer: while the widths adapt
        they move back and forth among a few values, so most width changes find theirs here
        instead of making new views (at most 256 kept)."""
        d = self.__dict__
        cfg = self.config
        key = (tuple([lin.__dict__["out_features"] for lin in d["_hidden"]]), cfg.activation, cfg.negative_slope,
               cfg.bias, cfg.importance_norm, d.get("_frozen_norm_widths"))
        cache = d.get("_spec_cache")
        if cache is not None and cache[0] is self._buffers["_positions"]:
            hit = cache[1].get(key)
            if hit is not None:
                return hit
        positions = self._position_views()  # may replace the buffer (grown)
        pos = self._buffers["_positions"]
        if cache is None or cache[0] is not pos or len(cache[1]) >= 256:
            cache = d["_spec_cache"] = (pos, {})
        norms = self.norm_widths()
        spec = (positions, cfg.activation, float(cfg.negative_slope), cfg.bias, norms)
        args = (list(positions), [0 if m is None else m for m in norms], fast_cpp.ACTIVATION_CODES[cfg.activation],
                float(cfg.negative_slope), cfg.bias)
        entry = cache[1][key] = (spec, args)
        return entry

    def _ext_spec(self) -> tuple:
        """The C++ node's arguments after ``x, raw, rhos`` (see :meth:`_specs`)."""
        return self._specs()[1]

    def extra_repr(self) -> str:
        norm = "" if self.config.importance_norm == "none" else f", importance_norm={self.config.importance_norm}"
        return f"widths={self.widths()}, activation={self.config.activation}, k={self.config.k}{norm}"


def _no_optimizer() -> None:
    return None


def adaptive_mlps(model: nn.Module) -> list[AdaptiveMLP]:
    """Every :class:`AdaptiveMLP` inside ``model`` (itself included), in the order of ``model.modules()``.

    :func:`update_widths` looks them up at every step, so the walk is a plain recursion over the
    children (no names, no generators) that does not enter an adaptive MLP holding nothing but its
    own layers: 17 us instead of ``modules()``'s 45 in the Transformer of
    ``benchmarks/bench_awnn_backbones.py``, 5 instead of 22 in its GIN (one thread, on a machine
    loaded by two trainings)."""
    if type(model) is AdaptiveMLP and model._own_modules_only():  # the common case, without a walk (per step)
        return [model]
    found: list[AdaptiveMLP] = []
    _collect_adaptive(model, found, set())
    return found


def _collect_adaptive(module: nn.Module, found: list[AdaptiveMLP], seen: set[int]) -> None:
    """Pre-order walk of ``module`` and its children, each module once (as ``modules()``)."""
    if id(module) in seen:
        return
    seen.add(id(module))
    if isinstance(module, AdaptiveMLP):
        found.append(module)
        if type(module) is AdaptiveMLP and module._own_modules_only():
            return  # its children are its AdaptiveLinear layers
    for child in module._modules.values():
        if child is not None:
            _collect_adaptive(child, found, seen)


def update_widths(model: nn.Module | Sequence[AdaptiveMLP], optimizer: torch.optim.Optimizer | None = None,
                  *, one_read: bool | None = None) -> bool:
    """Algorithm 1 line 5 for every adaptive MLP in ``model`` (a ResNet head, GIN MLPs, FFNs), or for
    the list of MLPs ``model`` (:func:`adaptive_mlps`, found once).

    ``one_read``: read the rates of all MLPs to the host in one transfer instead of one per MLP.
    By default it does where the rates live off the CPU: on a GPU every read waits for the
    queued kernels, and a Mixer with 16 adaptive MLPs would wait 16 times per step. The
    widths it sets are the same either way.
    """
    mlps = list(model) if isinstance(model, (list, tuple)) else adaptive_mlps(model)
    if not mlps:
        return False
    try:
        return _update_widths(mlps, optimizer, one_read)
    except WidthUpdateError as err:  # name the MLP within the model: "of 'blocks.3.mlp': hidden layer 2 ..."
        names = {id(m): name for name, m in model.named_modules()} if isinstance(model, nn.Module) else {}
        name = names.get(id(getattr(err, "mlp", None)))
        raise WidthUpdateError(f"AWNN width update{f' of {name!r}' if name else ''}: {err}") from None


def _update_widths(mlps: list[AdaptiveMLP], optimizer: torch.optim.Optimizer | None, one_read: bool | None) -> bool:
    """:func:`update_widths` on the MLPs found."""
    if one_read is None:
        one_read = len(mlps) > 1 and mlps[0]._parameters["raw_rate"].device.type != "cpu"
    if not one_read:
        changed = False
        for m in mlps:
            changed |= m.update_width(optimizer)
        return changed
    with torch.no_grad():
        values = torch.cat([m._parameters["raw_rate"].reshape(-1) for m in mlps]).tolist()
    changed, start = False, 0
    for m in mlps:
        n = m._parameters["raw_rate"].numel()
        changed |= m.update_width(optimizer, values[start:start + n])
        start += n
    return changed


def model_widths(model: nn.Module) -> list[int]:
    """All hidden widths of all adaptive MLPs in ``model``, in module order."""
    return [w for m in adaptive_mlps(model) for w in m.widths()]


# ---------------------------------------------------------------------------
# Sec. 5.4: post-hoc truncation
# ---------------------------------------------------------------------------


def truncate(model: AdaptiveMLP, widths: Sequence[int] | None = None, *,
             fraction: float | None = None) -> AdaptiveMLP:
    """A copy of ``model`` keeping only the first neurons of each hidden layer (Sec. 5.4).

    Give ``widths`` (one per hidden layer, each ``1 <= w <= D_l``) or a ``fraction``
    in (0, 1] of every current width (rounded, at least 1). The copy computes exactly
    what ``model`` computes with neurons beyond the cut removed (importances of the
    kept neurons unchanged), holds only the kept weights, and has its widths frozen.
    """
    if (widths is None) == (fraction is None):
        raise ValueError("truncate: give exactly one of widths=[...] or fraction=(0, 1]")
    current = model.widths()
    if fraction is not None:
        if not (isinstance(fraction, (int, float)) and 0 < fraction <= 1):
            raise ValueError(f"fraction={fraction!r} must be in (0, 1]")
        widths = [max(1, round(fraction * d)) for d in current]
    widths = [int(w) for w in widths]
    if len(widths) != len(current) or any(not 1 <= w <= d for w, d in zip(widths, current)):
        raise ValueError(f"widths={widths} must have {len(current)} entries with 1 <= w_l <= D_l = {current}")
    new = copy.deepcopy(model)
    new.attach_optimizer(None)
    # renormalised importances keep the normaliser of the width they were cut from
    new.__dict__["_frozen_norm_widths"] = model.norm_widths() if model.config.importance_norm != "none" else None
    new.set_widths(widths)
    for lin in new.layers:
        lin.compact_()
    new.freeze_widths()
    return new
