"""Adaptive Width Neural Networks (Errica et al., "Adaptive Width Neural Networks").

Every adaptive hidden layer ``l`` owns a learnable rate ``nu_l`` of a discretized
exponential distribution over neuron positions (Eq. 12)::

    f(x; nu) = e^{-nu x} - e^{-nu (x + 1)},   x = 0, 1, 2, ...

Its width ``D_l`` is the quantile of ``f`` at ``k`` (Eq. 11, default k = 0.9), and
the activation of neuron ``j`` is rescaled by its importance (Eq. 14)::

    h_j = sigma(W h_prev + b)_j * f(j; nu)

so the network sees a soft order of importance among neurons, ``D_l`` follows
``nu_l`` at every training step (Algorithm 1) and the loss is the negative ELBO of
Eq. 13. Everything in this module is written from the paper's equations.

Conventions (decisions this module takes)
-----------------------------------------
* **Index convention.** ``f`` is a distribution over ``x in {0, 1, 2, ...}`` (the
  discretization of Roy, 2003, so it sums to 1). The paper numbers neurons from 1
  (Eq. 14) and speaks of support over N+: its neuron ``j = 1..D`` is our position
  ``x = j - 1``. The normalized distribution on N+ is exactly this one shifted
  (``f(j) / e^{-nu} = f(j - 1)``), so nothing is lost; the literal ``f(j)`` with
  ``j >= 1`` would only multiply every importance by the constant ``e^{-nu}``.
* **Positive rate.** ``nu_l = softplus(raw_l)``; the raw values of all layers form
  one parameter ``raw_rate`` of shape ``(L,)`` tagged ``roles.tag(.., "rate")``,
  initialised to ``softplus^{-1}(nu_0)``. Softplus behaves like ``exp`` for the
  small rates used in practice (0.004-0.02), so Adam moves ``nu`` by a roughly
  constant *relative* amount per step, and it never reaches 0.
* **Width.** ``D = ceil(ln(1 / (1 - k)) / nu)``, the smallest ``D`` whose first
  ``D`` importances hold mass ``1 - e^{-nu D} >= k`` (closed form of Eq. 11).
* **Bias.** Neuron ``n``'s parameters ``rho_{l n}`` (Eq. 13) are one row
  ``[b_n | w_n]`` of a single tensor ``rho`` per layer: "the bias parameter is taken
  into account by concatenating a dummy value 1" (Sec. 3.1). The weight prior
  therefore covers biases too.
* **New neurons** are drawn from a standard normal, as Sec. 3 says
  (``grow_init="kaiming_plus"`` draws them with the kaiming+ std instead).
* **Standard deviations.** ``N(mu, sigma)`` in Eqs. 3, 4 and Sec. 5.3 is read
  with ``sigma`` a standard deviation.

Efficient resizing (what the public code does differently, see PLAN.md)
-----------------------------------------------------------------------
A naive implementation builds new ``nn.Linear`` objects and a new optimizer (or
resets its state) at every resize; the paper reports up to 10x overhead. Here each
:class:`AdaptiveLinear` keeps a *store* with spare rows and columns for ``rho``
and one joint store for its per-element optimizer state (Adam
``exp_avg``/``exp_avg_sq``, SGD ``momentum_buffer``, ...). The ``nn.Parameter``
never changes identity: its ``.data`` is a view of the active block of the store,
and the optimizer's state tensors are views of the state store, re-pointed in
place. Consequences:

* forward, backward and the optimizer step touch only the active block;
* surviving neurons keep their values and optimizer state across resizes; new
  neurons start with zero state (Adam's shared ``step`` counter is kept);
* the stores grow geometrically (``capacity_growth``, default doubling) and only
  then are reallocated (state copied); new neurons are drawn when they appear
  (``AWNNConfig(prefill=True)`` pre-draws the spare capacity instead, at the cost
  of bit-exact resumption);
* a neuron that leaves the active width leaves the parameter and the state: no
  gradient, momentum or weight decay can touch it; if it returns it is drawn
  afresh with zero state;
* a strided ``rho`` slows Adam a little, so once the widths have been stable for
  ``pack_after`` steps the layers drop their spare columns (contiguous again).

The MLP itself runs as one autograd node with a hand-written backward
(:class:`_AdaptiveMLPFunction`, checked against plain autograd in the tests), as
the per-op bookkeeping of autograd dominates the small MLPs of the paper. The
same node also exists in C++ (``hacn_core/awnn/csrc/awnn_fused.cpp``, same ops in the
same order, equal bit for bit), compiled on first use; :mod:`hacn_core.awnn.fast_cpp`
chooses between the two (``$HACN_AWNN_BACKEND``: ``auto``, ``cpp``, ``python``).
``benchmarks/bench_awnn.py`` measures the per-step cost against a fixed MLP.

Pass the optimizer to :meth:`AdaptiveMLP.update_width` (or attach it once with
:meth:`AdaptiveMLP.attach_optimizer`); with :func:`hacn_core.engine.training.fit`, pass an
:class:`ELBOLoss` as ``loss_fn`` and a :class:`WidthCallback`, which does both and
logs widths, rates and the ELBO terms per epoch.

``AWNNConfig(importance_norm="active")`` renormalises the importances over the
active neurons, as the public code does; the default follows Eq. 14 as written.

Fused optimizers (``fused=True``) assume contiguous parameters and are refused; the
default for-loop and ``foreach`` implementations work on the strided views.
"""

from __future__ import annotations

import copy
import math
import weakref
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from hacn_core.awnn import fast_cpp
from hacn_core.engine.roles import tag
from hacn_core.engine.training import Callback, TrainState

ACTIVATIONS: tuple[str, ...] = ("relu", "leaky_relu", "relu6", "tanh")
INITS: tuple[str, ...] = ("kaiming_plus", "kaiming")
GROW_INITS: tuple[str, ...] = ("normal", "kaiming_plus")
LIKELIHOODS: tuple[str, ...] = ("categorical", "gaussian")
INTERPOLATIONS: tuple[str, ...] = ("linear", "geometric")
#: ``none``: Eq. 14 as written; ``active``: importances renormalised over the active neurons (public code)
IMPORTANCE_NORMS: tuple[str, ...] = ("none", "active")

#: rate of the tabular experiments (Appendix C.1, Table 3)
DEFAULT_RATE = 0.01


# ---------------------------------------------------------------------------
# Eq. 12 and Eq. 11: the discretized exponential and its quantile width
# ---------------------------------------------------------------------------


def rate_from_raw(raw: Tensor) -> Tensor:
    """Positive rate ``nu = softplus(raw)`` (our parametrization of ``nu_l`` in Eq. 13)."""
    return F.softplus(raw)


def _softplus(x: float) -> float:
    """``log(1 + e^x)`` of a Python float (stable; the rates are computed in float64
    from the raw parameter, identically for the widths and the importances)."""
    return x + math.log1p(math.exp(-x)) if x > 0 else math.log1p(math.exp(x))


def raw_from_rate(rate: float) -> float:
    """Inverse softplus: the raw value whose softplus is ``rate`` (> 0)."""
    _check_rate(rate, "rate")
    rate = float(rate)
    # log(e^r - 1) = r + log(1 - e^{-r}); the second form is stable for large r
    return rate + math.log(-math.expm1(-rate))


def discretized_exponential(x: Tensor, nu: Tensor | float) -> Tensor:
    """Eq. 12: ``f(x; nu) = e^{-nu x} - e^{-nu (x+1)} = e^{-nu x} (1 - e^{-nu})``.

    ``x`` holds positions 0, 1, 2, ... (see the module's index convention). The
    factored form with ``expm1`` keeps precision for small ``nu``.
    """
    nu = torch.as_tensor(nu, dtype=x.dtype if x.is_floating_point() else torch.get_default_dtype(), device=x.device)
    with torch.no_grad():
        if not bool(torch.all(torch.isfinite(nu) & (nu > 0))):
            raise ValueError(f"nu={nu.detach().cpu().tolist()} must be a finite rate > 0 (Eq. 12)")
    return _geometric_importances(x, nu)


def _geometric_importances(x: Tensor, nu: Tensor) -> Tensor:
    """Eq. 12 without the rate check, for the model's own callers: their rates are
    ``softplus`` of a parameter, positive by construction (as the fused node assumes)."""
    nu = torch.as_tensor(nu, dtype=x.dtype if x.is_floating_point() else torch.get_default_dtype(), device=x.device)
    x = x.to(nu.dtype)
    neg = -nu
    # q^x (1 - q) with q = e^{-nu}: the geometric form of the same distribution
    return torch.exp(neg).pow(x) * -torch.expm1(neg)


def importances(nu: Tensor | float, width: int) -> Tensor:
    """Importances ``f(0), ..., f(width - 1)`` of the first ``width`` neurons (Eq. 14)."""
    if isinstance(width, bool) or not isinstance(width, int) or width < 1:
        raise ValueError(f"width={width!r} must be a positive int (>= 1): a layer keeps at least one neuron")
    nu_t = torch.as_tensor(nu)
    dtype = nu_t.dtype if nu_t.is_floating_point() else torch.get_default_dtype()
    return discretized_exponential(torch.arange(width, dtype=dtype, device=nu_t.device), nu_t.to(dtype))


def importance_scale(nu: float, norm_width: int | None = None) -> float:
    """The constant factor ``c`` of ``f(j) = c q^j`` (``q = e^{-nu}``) used in Eq. 14.

    ``c = 1 - q`` for Eq. 12 as written (``norm_width=None``). With ``norm_width = M``
    the importances are renormalised over the first ``M`` neurons,
    ``p(j) = f(j) / sum_{i<M} f(i)``, so ``c = (1 - q) / (1 - q^M)`` and the ``M``
    importances sum to 1 (``importance_norm="active"``, the public code's behaviour).
    """
    if norm_width is None:
        return -math.expm1(-nu)
    return math.expm1(-nu) / math.expm1(-nu * norm_width)


def importance_log_shift(nu: float, norm_width: int | None = None) -> float:
    """``s`` in ``d log f(j) / d nu = s - j`` (the rate gradient of Eq. 14's importances).

    Eq. 12: ``s = 1 / (e^nu - 1)``; renormalised over ``M`` neurons it loses
    ``M / (e^{nu M} - 1)``, the derivative of ``log(1 - e^{-nu M})``. That term removes
    the pull of a uniform gain on ``nu``: ``sum_{j<M} p(j) (s - j) = 0``.
    """
    shift = 1.0 / math.expm1(nu)
    if norm_width is not None:
        shift -= norm_width / math.expm1(nu * norm_width)
    return shift


def importance_mass(nu: float, width: int) -> float:
    """Mass ``sum_{x < width} f(x; nu) = 1 - e^{-nu width}`` of the first ``width`` neurons."""
    return -math.expm1(-float(nu) * width)


def quantile_width(nu: float | Tensor, k: float = 0.9, max_width: int | None = None) -> int:
    """Eq. 11: the truncated width ``D``, the quantile of ``f(.; nu)`` at ``k``.

    Closed form ``D = ceil(ln(1/(1-k)) / nu)``: the smallest ``D`` with
    ``1 - e^{-nu D} >= k`` (positions ``0..D-1`` hold mass ``>= k``, ``0..D-2`` do
    not). The ceiling is corrected by one step where floating point rounding puts
    it on the wrong side. ``max_width`` optionally caps the result.
    """
    nu = float(nu)
    _check_rate(nu, "nu")
    _check_k(k)
    c = -math.log1p(-k)  # ln(1 / (1 - k))
    ratio = c / nu
    if not math.isfinite(ratio) or ratio > 2**62:
        raise ValueError(f"nu={nu!r} is too small: the quantile width {ratio:.3g} is not a usable width")
    d = max(1, math.ceil(ratio))
    if importance_mass(nu, d) < k:
        d += 1
    elif d > 1 and importance_mass(nu, d - 1) >= k:
        d -= 1
    if max_width is not None:
        d = min(d, max_width)
    return d


def rate_for_width(width: int, k: float = 0.9) -> float:
    """A rate whose quantile width (Eq. 11) is ``width``.

    Any ``nu`` in ``[c / width, c / (width - 1))`` with ``c = ln(1/(1-k))`` works;
    we take ``c / (width - 1/2)``, away from both ends. For example the paper's
    starting rate 0.01 gives 231 neurons at k = 0.9 (Appendix C.1 says "approximately 256").
    """
    _check_width(width, "width")
    _check_k(k)
    return -math.log1p(-k) / (width - 0.5)


# ---------------------------------------------------------------------------
# Section 3.2 / Appendix A: kaiming+ initialization
# ---------------------------------------------------------------------------


def activation_gain(activation: str, negative_slope: float = 0.01) -> float:
    """The factor ``g`` in ``Var[w] = g / sum_j f(j)^2`` (Theorem 3.1, Eqs. 19-20, 41).

    2 for ReLU-like activations (Lemma A.1; ``2 / (1 + a^2)`` for LeakyReLU with
    slope ``a``), 1 for activations with ``sigma'(0) ~ 1`` (tanh, or no activation).
    """
    _check_choice(activation, ACTIVATIONS + ("linear",), "activation")
    if activation in ("relu", "relu6"):
        return 2.0
    if activation == "leaky_relu":
        return 2.0 / (1.0 + negative_slope**2)
    return 1.0


def init_std(prev_importances: Tensor | None, fan_in: int, activation: str, scheme: str = "kaiming_plus",
             negative_slope: float = 0.01) -> float:
    """Weight standard deviation of a layer (Theorem 3.1, Appendix A).

    ``kaiming_plus``: ``sqrt(g / sum_j f_prev(j)^2)``, summed over the importances of
    the *previous* layer's ``D_prev`` neurons (the derivation, Eqs. 27-28 and 40-41;
    Eq. 15 writes ``f_l`` but all layers share their initial ``nu``). Inputs of the
    first layer are not rescaled (``prev_importances=None``, importances all 1),
    which gives plain kaiming there. ``kaiming``: ``sqrt(g / D_prev)`` (He et al., 2015).
    """
    _check_choice(scheme, INITS, "init")
    g = activation_gain(activation, negative_slope)
    if scheme == "kaiming" or prev_importances is None:
        return math.sqrt(g / fan_in)
    return math.sqrt(g / float(prev_importances.double().pow(2).sum()))


# ---------------------------------------------------------------------------
# Storage with spare capacity: a linear layer whose active block can change
# ---------------------------------------------------------------------------


def _block(store: Tensor, r0: int, r1: int, c0: int, c1: int) -> Tensor:
    """``store[r0:r1, c0:c1]`` of a 2-d store, or ``store[:, r0:r1, c0:c1]`` of a
    3-d one, as a single ``as_strided`` op (slicing costs one op per dimension)."""
    if store.dim() == 2:
        s0, s1 = store.stride()
        return store.as_strided((r1 - r0, c1 - c0), (s0, s1), r0 * s0 + c0 * s1)
    k, _, _ = store.shape
    s0, s1, s2 = store.stride()
    return store.as_strided((k, r1 - r0, c1 - c0), (s0, s1, s2), r0 * s1 + c0 * s2)


_OTHER_DTYPE_EMPTY: dict[tuple[torch.dtype, torch.device], Tensor] = {}


def _drop_grad_accumulator(p: Tensor) -> None:
    """Make autograd forget ``p``'s cached ``AccumulateGrad`` node before its shape changes.

    The node records the parameter's shape when it is created and is reused while
    any earlier graph is alive (say, a loss kept for logging), so the next backward
    would reject gradients of the new shape. Assigning ``.data`` of another dtype
    is the one path on which PyTorch resets that cache (``VariableHooks::set_data``);
    the real data is assigned right after. ``tests/test_awnn.py`` guards this.
    """
    key = (p.dtype, p.device)
    empty = _OTHER_DTYPE_EMPTY.get(key)
    if empty is None:
        other = torch.float64 if p.dtype != torch.float64 else torch.float32
        empty = _OTHER_DTYPE_EMPTY[key] = torch.empty(0, dtype=other, device=p.device)
    p.data = empty


class AdaptiveLinear(nn.Module):
    """``y = x W^T + b`` on the active block of a capacity store (Sec. 3, Algorithm 1 l. 12).

    The parameter is ``rho`` of shape ``(out, 1 + in)``: row ``n`` is neuron ``n``'s
    variational parameter ``rho_{l n}`` of Eq. 13, its bias in column 0 followed by
    its incoming weights - the paper's "the bias parameter is taken into account by
    concatenating a dummy value 1" (Sec. 3.1). Without bias, ``rho`` is ``W``.
    :attr:`weight` and :attr:`bias` are (differentiable) views of it. One tensor per
    layer also halves the optimizer's per-tensor work; Adam, AdamW and SGD are
    elementwise, so their updates are the same as for separate ``W`` and ``b``
    (optimizers with per-tensor statistics, e.g. LAMB, would differ, and biases
    cannot be given their own weight decay).

    ``rho.data`` is a view of the store ``[:out, :1 + in]``. The optimizer's
    per-element state of ``rho`` (Adam ``exp_avg``/``exp_avg_sq``, SGD
    ``momentum_buffer``, ...) is moved into one joint store with the same capacity
    (first resize after the optimizer created it) and handed back as views. Entries
    outside the active block are never read or updated; rows/columns that become
    active are drawn afresh and their optimizer state is zeroed.
    """

    in_features: int
    out_features: int

    def __init__(self, in_features: int, out_features: int, bias: bool = True, *,
                 capacity_growth: float = 2.0, device=None, dtype=None) -> None:
        super().__init__()
        _check_width(in_features, "in_features")
        _check_width(out_features, "out_features")
        if not capacity_growth > 1.0:
            raise ValueError(f"capacity_growth={capacity_growth!r} must be > 1 (2.0 doubles the capacity)")
        self.in_features = in_features
        self.out_features = out_features
        self.has_bias = bool(bias)
        self.col0 = 1 if bias else 0  # column of the first weight in rho
        self.capacity_growth = float(capacity_growth)
        store = torch.zeros(out_features, self.col0 + in_features, device=device, dtype=dtype)
        self.rho = nn.Parameter(store)  # shares the store's memory (capacity = size, to start)
        self._store = store
        self._state: Tensor | None = None  # (K, out_capacity, col_capacity) optimizer state
        self._state_keys: tuple[str, ...] = ()
        self._state_views: dict[str, Tensor] = {}  # the views last put into optimizer.state[rho]
        self._state_len = -1
        # rows >= R or columns >= C of the stores were never active: (R, C)
        self._high_water = (out_features, self.col0 + in_features)
        # (weight std, bias std) of the draws pre-filled in spare capacity, or None
        self._prefill: tuple[float, float] | None = None

    @property
    def weight(self) -> Tensor:
        """``W``, shape ``(out, in)`` (a view of ``rho``)."""
        return self.rho[:, self.col0:]

    @property
    def bias(self) -> Tensor | None:
        """``b``, shape ``(out,)`` (a view of ``rho``), or None."""
        return self.rho[:, 0] if self.has_bias else None

    def forward(self, x: Tensor) -> Tensor:
        return F.linear(x, self.weight, self.bias)

    def extra_repr(self) -> str:
        co, ci = self.capacity
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.has_bias}, capacity=({co}, {ci})")

    @property
    def capacity(self) -> tuple[int, int]:
        """``(out_capacity, in_capacity)`` of the store."""
        self._ensure_linked()
        co, cc = self._store.shape
        return int(co), int(cc) - self.col0

    def _ensure_linked(self) -> None:
        """Rebuild the store if ``rho`` no longer views it.

        ``copy.deepcopy``, ``.to()``/``.double()`` and the like hand the parameter a
        fresh tensor; the store is then rebuilt from it (capacity = active size) and
        optimizer state is re-adopted at the next resize.
        """
        p = self._parameters["rho"]
        s = self._store
        if p.data_ptr() == s.data_ptr() and p.stride() == s.stride() and p.device == s.device:
            return
        new = p.data.clone(memory_format=torch.contiguous_format)
        self._store = new
        self._state, self._state_keys, self._state_views, self._state_len = None, (), {}, -1
        self._high_water = tuple(new.shape)
        p.data = new
        self.__dict__["out_features"] = int(p.shape[0])
        self.__dict__["in_features"] = int(p.shape[1]) - self.col0

    def _adopt_state(self, optimizer: torch.optim.Optimizer | None) -> None:
        """Move ``optimizer``'s per-element state of ``rho`` into the joint state store.

        The optimizer then holds tensors owned by this layer (views of the store),
        which later resizes re-point in place (``Tensor.set_``), so the optimizer is
        needed here only once: after its first step, or if it replaced the state
        (another optimizer, a loaded state dict). Tensors it still holds from this
        layer keep their values; new ones are copied in.
        """
        if optimizer is None:
            return
        p = self._parameters["rho"]
        st = optimizer.state.get(p)
        if not st:
            if self._state is not None:  # the optimizer forgot this parameter
                self._state, self._state_keys, self._state_views, self._state_len = None, (), {}, -1
            return
        views = self._state_views
        if len(st) == self._state_len and all(st.get(k) is v for k, v in views.items()):
            return  # the common case: nothing to do
        old, old_keys = self._state, self._state_keys
        slots: dict[str, Tensor] = {}
        o, c = p.shape
        for key, t in st.items():
            if not isinstance(t, Tensor) or t.dim() == 0:
                continue  # scalars such as Adam's "step" are shared by all neurons
            if old is not None and key in old_keys and views.get(key) is t:
                slots[key] = old[old_keys.index(key), :o, :c]  # ours: the store has its values
            elif t.shape == p.shape:
                for group in optimizer.param_groups:
                    if group.get("fused") and any(q is p for q in group["params"]):
                        raise ValueError(
                            "optimizer has fused=True: fused kernels assume contiguous parameters and "
                            "would write outside the active block; use fused=False (the default for-loop, "
                            "or foreach=True)")
                slots[key] = t
        if not slots:
            self._state, self._state_keys, self._state_views, self._state_len = None, (), {}, len(st)
            return
        co, cc = self._store.shape
        block = self._store.new_zeros(len(slots), co, cc)
        with torch.no_grad():
            for k, t in enumerate(slots.values()):
                block[k, :o, :c] = t
        self._state, self._state_keys, self._state_len = block, tuple(slots), len(st)
        self._state_views = {key: block[k, :o, :c] for k, key in enumerate(slots)}
        st.update(self._state_views)

    def _relink(self, optimizer: torch.optim.Optimizer | None = None) -> None:
        """Point ``rho`` and the optimizer-state tensors at the active block of the stores."""
        p = self._parameters["rho"]
        d = self.__dict__
        shape = (d["out_features"], self.col0 + d["in_features"])
        if p.shape != shape:
            _drop_grad_accumulator(p)
            if p.grad is not None:
                p.grad = None  # a gradient of the old shape cannot be applied any more
        s = self._store
        p.data = s.as_strided(shape, s.stride())
        block = self._state
        if block is not None:
            # in place: the optimizer keeps holding the very same tensor objects
            storage = block.untyped_storage()
            s0, s1, s2 = block.stride()
            stride = (s1, s2)
            for k, v in enumerate(self._state_views.values()):
                v.set_(storage, k * s0, shape, stride)

    def sync_optimizer(self, optimizer: torch.optim.Optimizer | None) -> None:
        """Re-point ``rho`` and ``optimizer``'s per-element state at the stores.

        After a resize or a capacity reallocation the parameter keeps its identity
        (``param_groups`` stay valid) and every state entry is a view of its
        (possibly new) store, whose active block holds the values of every surviving
        neuron. :meth:`resize_` does this; calling it adopts the state of a new
        optimizer without resizing.
        """
        self._ensure_linked()
        self._adopt_state(optimizer)
        self._relink(optimizer)

    def resize_(self, out_features: int | None = None, in_features: int | None = None, *,
                optimizer: torch.optim.Optimizer | None = None, new_weight_std: float = 1.0,
                new_bias_std: float = 1.0) -> None:
        """Change the active block to ``(out_features, in_features)`` in place.

        Rows (neurons) and columns (inputs) that become active are drawn from
        ``N(0, new_weight_std^2)``, new biases from ``N(0, new_bias_std^2)`` (the paper
        draws new neurons from a standard normal, Sec. 3), with zero optimizer state;
        surviving entries and their state are untouched; removed ones leave the
        parameter. The stores grow by ``capacity_growth`` when the block does not fit.
        Pass the optimizer that holds state for ``rho``.
        """
        d = self.__dict__
        o2 = d["out_features"] if out_features is None else out_features
        i2 = d["in_features"] if in_features is None else in_features
        if o2 == d["out_features"] and i2 == d["in_features"]:
            return
        _check_width(o2, "out_features")
        _check_width(i2, "in_features")
        self._resize(o2, i2, optimizer, new_weight_std, new_bias_std)

    def _resize(self, o2: int, i2: int, optimizer: torch.optim.Optimizer | None, new_weight_std: float,
                new_bias_std: float, ext=None) -> None:
        """:meth:`resize_` without the argument checks (widths from :meth:`AdaptiveMLP.update_width`
        are valid by construction). Runs at nearly every step while the widths adapt, so the
        common case (linked store, state already adopted, block fits) is written inline: plain
        ``__dict__`` reads and writes instead of ``nn.Module`` attribute hooks, one call less
        per helper. The tensor work - and with it every number - is that of the helpers; with
        ``ext`` (the C++ module of :mod:`hacn_core.awnn.fast_cpp`) it runs as one call of
        ``resize_layer``, the same ops in the same order."""
        d = self.__dict__
        p = self._parameters["rho"]
        s = d["_store"]
        if p.data_ptr() != s.data_ptr() or p.stride() != s.stride() or p.device != s.device:
            self._ensure_linked()
        if optimizer is not None:  # the check of _adopt_state, inline
            st = optimizer.state.get(p)
            views = d["_state_views"]
            if not st or len(st) != d["_state_len"] or any(st.get(k) is not v for k, v in views.items()):
                self._adopt_state(optimizer)
        o1, i1 = d["out_features"], d["in_features"]
        b = self.col0
        c1, c2 = b + i1, b + i2
        om = o1 if o1 < o2 else o2
        store = d["_store"]
        co, cc = store.shape
        if o2 > co or c2 > cc:  # grow the capacity geometrically
            nco = co if o2 <= co else max(o2, math.ceil(co * self.capacity_growth))
            ncc = cc if c2 <= cc else max(c2, math.ceil(cc * self.capacity_growth))
            self._reallocate(nco, ncc, om, min(c1, c2))
            store = d["_store"]
        block = d["_state"]
        high = d["_high_water"]
        # Initialise what becomes active (stores are plain tensors: no autograd). Entries
        # outside [0, R) x [0, C) were never active since the store was allocated and
        # already hold fresh draws (``_prefill``) and zero state; only the rest is drawn.
        prefill = d["_prefill"]
        if prefill is not None and new_weight_std == prefill[0] and new_bias_std == prefill[1]:
            r_hw, c_hw = high
        else:
            r_hw, c_hw = store.shape
        d["_high_water"] = (max(high[0], o2), max(high[1], c2))
        d["out_features"], d["in_features"] = o2, i2
        if ext is not None:
            ext.resize_layer(p, store, block, list(d["_state_views"].values()), o1, o2, c1, c2, om, r_hw, c_hw,
                             new_weight_std, new_bias_std, bool(b))
            return
        if o2 > o1 and o1 < r_hw:  # new neurons: their row of rho (bias and incoming weights)
            r_end, c_end = min(o2, r_hw), min(c2, c_hw)
            _block(store, o1, r_end, 0, c_end).normal_(0.0, new_weight_std)
            if b and new_bias_std != new_weight_std:
                bias = _block(store, o1, r_end, 0, 1)
                bias.normal_(0.0, new_bias_std) if new_bias_std > 0 else bias.zero_()
            if block is not None:
                _block(block, o1, r_end, 0, c_end).zero_()
        if c2 > c1 and c1 < c_hw:  # new inputs: columns of the surviving neurons
            r_end, c_end = min(om, r_hw), min(c2, c_hw)
            _block(store, 0, r_end, c1, c_end).normal_(0.0, new_weight_std)
            if block is not None:
                _block(block, 0, r_end, c1, c_end).zero_()
        self._relink(optimizer)

    def _reallocate(self, out_cap: int, col_cap: int, keep_out: int, keep_col: int) -> None:
        """New stores of ``out_cap`` x ``col_cap`` holding the kept block (state copied).

        The part outside the high-water rectangle is pre-drawn from the growth
        distribution, so that neurons and inputs added later need no work.
        """
        with torch.no_grad():
            new = self._store.new_empty(out_cap, col_cap)
            new[:keep_out, :keep_col] = self._store[:keep_out, :keep_col]
            r_hw, c_hw = min(self._high_water[0], out_cap), min(self._high_water[1], col_cap)
            if self._prefill is None:
                r_hw, c_hw = out_cap, col_cap  # nothing pre-drawn: everything is initialised on use
            else:
                w_std, b_std = self._prefill
                new[r_hw:].normal_(0.0, w_std)
                new[:r_hw, c_hw:].normal_(0.0, w_std)
                if self.col0 and b_std != w_std and r_hw < out_cap:
                    new[r_hw:, 0].normal_(0.0, b_std) if b_std > 0 else new[r_hw:, 0].zero_()
            self._store = new
            self._high_water = (r_hw, c_hw)
            if self._state is not None:
                blk = self._state.new_zeros(self._state.shape[0], out_cap, col_cap)
                blk[:, :keep_out, :keep_col] = self._state[:, :keep_out, :keep_col]
                self._state = blk

    def pack_(self, optimizer: torch.optim.Optimizer | None = None) -> bool:
        """Drop the spare columns so that ``rho`` is contiguous again (rows keep theirs).

        A strided ``rho`` costs Adam and the matmuls some 15% on CPU; :class:`AdaptiveMLP`
        packs its layers once the widths have been stable for a while. Returns whether
        anything was re-packed.
        """
        self._ensure_linked()
        c = self.col0 + self.in_features
        if self._store.shape[1] == c:
            return False
        self._adopt_state(optimizer)
        self._reallocate(self._store.shape[0], c, self.out_features, c)
        self._relink(optimizer)
        return True

    def compact_(self, optimizer: torch.optim.Optimizer | None = None) -> None:
        """Release spare capacity: the stores shrink to the active block (state kept)."""
        self._ensure_linked()
        self._adopt_state(optimizer)
        o, c = self.out_features, self.col0 + self.in_features
        self._reallocate(o, c, o, c)
        self._relink(optimizer)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs) -> None:
        # A checkpoint of another width: take its shape first, then copy as usual.
        rho = state_dict.get(prefix + "rho")
        if rho is not None and rho.dim() == 2 and tuple(rho.shape) != tuple(self.rho.shape):
            self.resize_(int(rho.shape[0]), int(rho.shape[1]) - self.col0)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys,
                                      unexpected_keys, error_msgs)


# ---------------------------------------------------------------------------
# The fused forward/backward of an adaptive MLP (Eq. 14)
# ---------------------------------------------------------------------------

_aten = torch.ops.aten
_ACT_BACKWARD = {
    "relu": lambda t, a, s: _aten.threshold_backward.default(t, a, 0),
    "leaky_relu": lambda t, a, s: _aten.leaky_relu_backward.default(t, a, s, True),
    "relu6": lambda t, a, s: _aten.hardtanh_backward.default(t, a, 0.0, 6.0),
    "tanh": lambda t, a, s: _aten.tanh_backward.default(t, a),
}


def _act_(z: Tensor, activation: str, slope: float) -> Tensor:
    """In-place activation of a fresh pre-activation tensor."""
    if activation == "relu":
        return z.relu_()
    if activation == "leaky_relu":
        return F.leaky_relu_(z, slope)
    if activation == "relu6":
        return F.hardtanh_(z, 0.0, 6.0)
    return z.tanh_()


_ONES: dict[tuple[int, torch.dtype, torch.device], Tensor] = {}
_ZEROS: dict[tuple[torch.dtype, torch.device], Tensor] = {}


def _zero(x: Tensor) -> Tensor:
    """A cached 0-d zero (the ``input`` of ``addcmul``, which scales a product in one op)."""
    key = (x.dtype, x.device)
    z = _ZEROS.get(key)
    if z is None:
        z = _ZEROS[key] = torch.zeros((), dtype=x.dtype, device=x.device)
    return z


def _ones_column(x: Tensor) -> Tensor:
    """A cached ``(batch, 1)`` column of ones: the dummy input of the bias (Sec. 3.1)."""
    key = (x.shape[0], x.dtype, x.device)
    ones = _ONES.get(key)
    if ones is None:
        if len(_ONES) > 16:
            _ONES.clear()
        ones = _ONES[key] = torch.ones(x.shape[0], 1, dtype=x.dtype, device=x.device)
    return ones


def _fused_forward(x: Tensor, nus: list[float], spec: tuple, rhos: Sequence[Tensor]):
    """Forward of :class:`_AdaptiveMLPFunction`: output and the intermediates of the backward."""
    positions, activation, slope, bias, norms = spec
    ones = _ones_column(x) if bias else None
    buf = torch.cat((ones, x), 1) if bias else x  # [1 | x]: the dummy input of the bias
    bufs, acts, fs = [buf], [], []
    zero = _zero(x)
    for nu, j, rho, m in zip(nus, positions, rhos, norms):
        a = _act_(torch.mm(buf, rho.t()), activation, slope)
        f = torch.pow(math.exp(-nu), j)  # q^j; the constant factor is applied with it:
        h = torch.addcmul(zero, a, f, value=importance_scale(nu, m))  # h = a * q^j (1 - q) [/ (1 - q^M)]
        buf = torch.cat((ones, h), 1) if bias else h
        bufs.append(buf)
        acts.append(a)
        fs.append(f)
    return torch.mm(buf, rhos[-1].t()), bufs, acts, fs


class _AdaptiveMLPFunction(torch.autograd.Function):
    """The whole adaptive MLP as one autograd node, with a hand-written backward.

    Forward, per hidden layer: ``a = act([1 | h] rho^T)``, ``f_j = q^j (1 - q)`` with
    ``q = e^{-nu}`` (Eq. 12), ``h = a * f`` (Eq. 14; ``fs`` keeps ``q^j``, the factor
    ``1 - q`` rides on ``addcmul``). Backward, with ``t = dL/dh * f``:
    ``dL/d rho = g^T [1 | h_prev]``, ``dL/dz = act'(z) t`` (from the saved ``a``),
    ``dL/d nu = sum_{b,j} t a (1 / (e^nu - 1) - j)`` since
    ``df_j/dnu = f_j (1 / (e^nu - 1) - j)``, and ``dnu / draw = 1 - e^{-nu}``.
    With renormalised importances (``spec``'s per-layer ``M``, see
    :func:`importance_scale`) the constant factor and the shift change
    (:func:`importance_log_shift`).

    Same arithmetic as autograd would do, minus its per-op bookkeeping, which
    dominates for the small MLPs of the paper (``tests/test_awnn.py`` checks the
    gradients against plain autograd). Activations are recomputed from their
    outputs, which works for all of ``ACTIVATIONS``.
    """

    @staticmethod
    def forward(ctx, x: Tensor, raw: Tensor, spec: tuple, *rhos: Tensor) -> Tensor:
        nus = [_softplus(r) for r in raw.tolist()]
        out, bufs, acts, fs = _fused_forward(x, nus, spec, rhos)
        # intermediates are kept on ctx (cheaper than save_for_backward, which checks
        # versions on unpacking) and released by the backward; x and the parameters
        # go through save_for_backward, so that a second backward (retain_graph=True)
        # can recompute them
        ctx.save_for_backward(x, *rhos)
        ctx.bufs, ctx.acts, ctx.fs, ctx.nus, ctx.spec = bufs, acts, fs, nus, spec
        return out

    @staticmethod
    def backward(ctx, g: Tensor):
        positions, activation, slope, bias, norms = ctx.spec
        nus, bufs, acts, fs = ctx.nus, ctx.bufs, ctx.acts, ctx.fs
        x, *rhos = ctx.saved_tensors
        if bufs is None:  # a second backward through this graph: recompute
            with torch.no_grad():
                _, bufs, acts, fs = _fused_forward(x, nus, ctx.spec, rhos)
        else:
            # release the intermediates with this backward (autograd does the same with
            # saved tensors): the next step's allocations can then reuse their memory
            ctx.bufs = ctx.acts = ctx.fs = None
        n = len(nus)
        need = ctx.needs_input_grad
        act_backward = _ACT_BACKWARD[activation]
        g_rho: list[Tensor | None] = [None] * (n + 1)
        g_nu: list[Tensor] = []
        g_x = None
        for layer in range(n, -1, -1):
            if need[3 + layer]:
                g_rho[layer] = g.t().mm(bufs[layer])
            if layer == 0:
                if need[0]:
                    g_x = g.mm(rhos[0])
                    g_x = g_x[:, 1:] if bias else g_x
                break
            gh = g.mm(rhos[layer])
            gh = gh[:, 1:] if bias else gh
            k = layer - 1
            t = torch.addcmul(_zero(gh), gh, fs[k], value=importance_scale(nus[k], norms[k]))  # dL/dh * f
            if need[1]:
                # s_j = sum_b t_bj a_bj = sum_b dL/dh_bj h_bj = sum_i W_ij dL/dW_ij: the last
                # form costs out x D instead of batch x D (the output layer is narrow)
                gr = g_rho[layer]
                if gr is not None and rhos[layer].shape[0] < t.shape[0]:
                    w, gw = (rhos[layer][:, 1:], gr[:, 1:]) if bias else (rhos[layer], gr)
                    s_k = torch.linalg.vecdot(w, gw, dim=0)
                else:
                    s_k = torch.linalg.vecdot(t, acts[k], dim=0)
                g_nu.append(torch.dot(s_k, positions[k] - importance_log_shift(nus[k], norms[k])))
            g = act_backward(t, acts[k], slope)
        g_raw = None
        if need[1]:
            g_nu.reverse()
            dsig = torch.tensor([math.expm1(-nu) for nu in nus], dtype=g_nu[0].dtype, device=g_nu[0].device)
            g_raw = torch.stack(g_nu).mul_(dsig)  # dL/draw = -dL/dnu * (1 - e^{-nu}), sign folded in
        return (g_x, g_raw, None, *g_rho)


# ---------------------------------------------------------------------------
# The adaptive MLP (Sec. 3.1, Algorithm 1)
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
        _check_width(self.in_dim, "in_dim")
        _check_width(self.out_dim, "out_dim")
        _check_width(self.n_hidden_layers, "n_hidden_layers")
        _check_choice(self.activation, ACTIVATIONS, "activation")
        _check_choice(self.init, INITS, "init")
        _check_choice(self.grow_init, GROW_INITS, "grow_init")
        _check_choice(self.importance_norm, IMPORTANCE_NORMS, "importance_norm")
        _check_k(self.k)
        if self.rate_init is not None and self.initial_width is not None:
            raise ValueError("rate_init and initial_width both given; set one (allowed: rate_init > 0 or initial_width >= 1)")
        if self.initial_width is not None:
            _check_width(self.initial_width, "initial_width")
        if self.rate_init is not None:
            _check_rate(self.rate_init, "rate_init")
        if self.max_width is not None:
            _check_width(self.max_width, "max_width")
        if self.pack_after is not None:
            _check_width(self.pack_after, "pack_after")
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
        self.raw_rate = tag(nn.Parameter(torch.full((n,), raw_from_rate(config.initial_rate))), "rate")
        dims = [config.in_dim] + [d0] * n + [config.out_dim]
        self.layers = nn.ModuleList(
            AdaptiveLinear(dims[i], dims[i + 1], config.bias, capacity_growth=config.capacity_growth)
            for i in range(n + 1)
        )
        if config.grow_init == "normal" and config.prefill:  # new neurons ~ N(0, 1): spare capacity pre-drawn
            for lin in self.layers:
                lin._prefill = (1.0, 1.0)
        self.__dict__["_hidden"] = list(self.layers)[:-1]  # a plain list: cheap per-step access
        # positions 0, 1, 2, ... of Eq. 12, grown like the weights
        self.register_buffer("_positions", torch.arange(d0, dtype=torch.get_default_dtype()), persistent=False)
        self.widths_frozen = False
        self._stable_steps = 0
        self._optimizer_ref: Callable[[], torch.optim.Optimizer | None] = _no_optimizer
        self.reset_parameters()

    # -- widths ------------------------------------------------------------
    @property
    def n_hidden_layers(self) -> int:
        return self.config.n_hidden_layers

    def widths(self) -> list[int]:
        """Current widths ``[D_1, ..., D_L]`` of the hidden layers (log these for Figs. 3-5)."""
        return [lin.__dict__["out_features"] for lin in self._hidden]

    def rates(self) -> Tensor:
        """The rates ``nu_l = softplus(raw_l)`` as a vector of length ``L`` (differentiable)."""
        return F.softplus(self.raw_rate)

    def target_widths(self) -> list[int]:
        """Quantile widths of the current rates (Eq. 11): what :meth:`update_width` sets."""
        cfg = self.config
        k, cap = cfg.k, cfg.max_width
        c = -math.log1p(-k)
        out = []
        for r in self._parameters["raw_rate"].tolist():  # not self.raw_rate: nn.Module.__getattr__ is slow
            nu = r + math.log1p(math.exp(-r)) if r > 0 else math.log1p(math.exp(r))  # _softplus, inline
            ratio = c / nu
            d = math.ceil(ratio)
            if not (1.0 < ratio < 2**53) or d - ratio < 1e-9 or ratio - (d - 1) < 1e-9:
                d = quantile_width(nu, k)  # near an integer (or out of range): the checked path
            out.append(d if cap is None else min(d, cap))
        return out

    def importances(self, layer: int | None = None) -> Tensor | list[Tensor]:
        """Importances ``f(j; nu_l)``, ``j = 0..D_l-1`` of hidden ``layer`` (Eq. 14), or
        of all hidden layers as a list (differentiable in ``raw_rate``)."""
        nu = F.softplus(self.raw_rate)
        pos = self._position_views()
        norms = self.norm_widths()

        def one(i: int) -> Tensor:
            f = _geometric_importances(pos[i], nu[i])
            m = norms[i]
            return f if m is None else f / -torch.expm1(-nu[i] * m)  # sum_{j<M} f(j) = 1 - e^{-nu M}

        if layer is not None:
            return one(layer)
        return [one(i) for i in range(len(pos))]

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
        :class:`_AdaptiveMLPFunction`, ``(positions, activation, slope, bias, norm widths)``;
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

    def _fused_spec(self) -> tuple:
        """``spec`` of :class:`_AdaptiveMLPFunction` (see :meth:`_specs`)."""
        return self._specs()[0]

    def _ext_spec(self) -> tuple:
        """The C++ node's arguments after ``x, raw, rhos`` (see :meth:`_specs`)."""
        return self._specs()[1]

    def attach_optimizer(self, optimizer: torch.optim.Optimizer | None) -> None:
        """Remember ``optimizer`` (weakly) so that width updates keep its state in sync."""
        self._optimizer_ref = _no_optimizer if optimizer is None else weakref.ref(optimizer)

    def update_width(self, optimizer: torch.optim.Optimizer | None = None) -> bool:
        """Algorithm 1, ``update_width``: set every ``D_l`` to the quantile of ``f(.; nu_l)``.

        Growing a layer adds rows to ``rho_l`` and columns to ``rho_{l+1}``
        (initialised per ``config.grow_init``); shrinking removes the last (least
        important) ones. Returns whether any width changed; a no-op once
        :meth:`freeze_widths` was called. Pass the optimizer (or attach it) as soon
        as it holds state, so that its state follows the resize.
        """
        d = self.__dict__
        if d["widths_frozen"]:
            return False
        new = self.target_widths()
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
            _check_width(w, "widths")
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
                lin._resize(out, fan_in, optimizer, w_std, b_std, ext)
            fan_in = out

    def _importances_at(self, layer: int, width: int) -> Tensor:
        with torch.no_grad():
            nu = F.softplus(self.raw_rate[layer]).double()
            f = _geometric_importances(torch.arange(width, dtype=nu.dtype), nu)  # importances(nu, width), unchecked
            if self.config.importance_norm == "active":
                f = f / -torch.expm1(-nu * width)
            return f

    def freeze_widths(self, frozen: bool = True) -> None:
        """Stop (or resume) following the rates: used after truncation (Sec. 5.4).

        Resuming also drops a truncated copy's frozen normaliser (:meth:`norm_widths`)."""
        self.widths_frozen = frozen
        if not frozen:
            self.__dict__["_frozen_norm_widths"] = None

    # -- init ----------------------------------------------------------------
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

    # -- forward ---------------------------------------------------------------
    def _act(self, z: Tensor) -> Tensor:
        a = self.config.activation
        if a == "relu":
            return F.relu(z)
        if a == "leaky_relu":
            return F.leaky_relu(z, self.config.negative_slope)
        if a == "relu6":
            return F.relu6(z)
        return torch.tanh(z)

    def forward(self, x: Tensor) -> Tensor:
        if not self.config.fused or torch.is_autocast_enabled(x.device.type):
            return self.intermediates(x)[0]  # plain autograd ops (autocast handles their dtypes)
        x2 = x if x.dim() == 2 else x.reshape(-1, x.shape[-1])
        rhos = [lin._parameters["rho"] for lin in self.layers._modules.values()]
        raw = self._parameters["raw_rate"]
        ext = fast_cpp.module()
        if ext is None:
            out = _AdaptiveMLPFunction.apply(x2, raw, self._fused_spec(), *rhos)
        else:  # the same node in C++ (hacn_core/awnn/csrc/awnn_fused.cpp): same values, no interpreter per op
            out = ext.adaptive_mlp(x2, raw, rhos, *self._specs()[1])
        return out if x.dim() == 2 else out.reshape(*x.shape[:-1], out.shape[-1])

    def intermediates(self, x: Tensor) -> tuple[Tensor, list[Tensor], list[Tensor]]:
        """Eq. 14 with plain autograd ops: ``(output, alphas, hs)``, per hidden layer the
        activations before (``alpha``, Theorem 3.1) and after (``h``) the rescaling
        (Figs. 2, 6, 7). Same values and gradients as the fused ``forward``."""
        alphas, hs = [], []
        h = x
        for lin, f in zip(self.layers, self.importances()):
            a = self._act(lin(h))
            h = a * f
            alphas.append(a)
            hs.append(h)
        return self.layers[-1](h), alphas, hs

    def extra_repr(self) -> str:
        norm = "" if self.config.importance_norm == "none" else f", importance_norm={self.config.importance_norm}"
        return f"widths={self.widths()}, activation={self.config.activation}, k={self.config.k}{norm}"


def _no_optimizer() -> None:
    return None


def adaptive_mlps(model: nn.Module) -> list[AdaptiveMLP]:
    """Every :class:`AdaptiveMLP` inside ``model`` (itself included)."""
    return [m for m in model.modules() if isinstance(m, AdaptiveMLP)]


def update_widths(model: nn.Module, optimizer: torch.optim.Optimizer | None = None) -> bool:
    """Algorithm 1 line 5 for every adaptive MLP in ``model`` (a ResNet head, GIN MLPs, FFNs)."""
    changed = False
    for m in adaptive_mlps(model):
        changed |= m.update_width(optimizer)
    return changed


def model_widths(model: nn.Module) -> list[int]:
    """All hidden widths of all adaptive MLPs in ``model``, in module order."""
    return [w for m in adaptive_mlps(model) for w in m.widths()]


# ---------------------------------------------------------------------------
# Optimizer re-pointing for code that swaps parameter objects
# ---------------------------------------------------------------------------


def _copy_leading_block(old: Tensor, new_param: Tensor) -> Tensor:
    out = torch.zeros_like(new_param, memory_format=torch.contiguous_format)
    if old.dim() == out.dim():
        idx = tuple(slice(0, min(a, b)) for a, b in zip(old.shape, out.shape))
        out[idx] = old[idx]
    return out


def repoint_optimizer(optimizer: torch.optim.Optimizer, old: Tensor, new: Tensor,
                      transfer: Callable[[Tensor, Tensor], Tensor] | None = None) -> None:
    """Replace parameter ``old`` by ``new`` in ``optimizer`` (``param_groups`` and ``state``).

    Per-element state tensors (those shaped like ``old``) are carried over with
    ``transfer(old_state, new)``; by default the overlapping leading block is copied
    and the rest is zero (fresh state for new entries). Scalar state (Adam's ``step``)
    is kept. :class:`AdaptiveLinear` never needs this (its parameters keep their
    identity, see :meth:`AdaptiveLinear.sync_optimizer`); it serves code that builds
    new parameter tensors, e.g. on reallocation.
    """
    transfer = transfer or _copy_leading_block
    found = False
    for group in optimizer.param_groups:
        for i, p in enumerate(group["params"]):
            if p is old:
                group["params"][i] = new
                found = True
    if not found:
        raise ValueError("repoint_optimizer: `old` is not a parameter of this optimizer")
    st = optimizer.state.pop(old, None)
    if st:
        optimizer.state[new] = {
            key: (transfer(t, new) if torch.is_tensor(t) and t.dim() > 0 and t.shape == old.shape else t)
            for key, t in st.items()
        }


# ---------------------------------------------------------------------------
# Eq. 13: the negative ELBO
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class RatePrior:
    """Gaussian prior ``p(lambda_l) = N(mu, sigma)`` on every rate (Eq. 3), ``sigma`` a std."""

    mu: float
    sigma: float

    def __post_init__(self) -> None:
        if not (isinstance(self.sigma, (int, float)) and self.sigma > 0):
            raise ValueError(f"sigma={self.sigma!r} must be > 0 (a standard deviation)")
        if not (isinstance(self.mu, (int, float)) and math.isfinite(self.mu)):
            raise ValueError(f"mu={self.mu!r} must be a finite number")


@dataclass(frozen=True)
class RatePriorSchedule:
    """The annealed rate prior of the compression experiment (Sec. 5.3, Fig. 5).

    Uninformative (``None``) before ``start_epoch``; from there ``N(mu, sigma)``
    with ``sigma`` going from ``sigma_start`` to ``sigma_end`` at ``end_epoch``
    (``linear`` or ``geometric`` interpolation), constant afterwards. Defaults:
    introduced at epoch 1000 as ``N(0.05, 1)``, annealed to ``sigma = 0.1`` at 2500.
    """

    mu: float = 0.05
    sigma_start: float = 1.0
    sigma_end: float = 0.1
    start_epoch: int = 1000
    end_epoch: int = 2500
    interpolation: str = "linear"

    def __post_init__(self) -> None:
        _check_choice(self.interpolation, INTERPOLATIONS, "interpolation")
        RatePrior(self.mu, self.sigma_start)
        RatePrior(self.mu, self.sigma_end)
        if not (0 <= self.start_epoch <= self.end_epoch):
            raise ValueError(f"start_epoch={self.start_epoch}, end_epoch={self.end_epoch}: need 0 <= start_epoch <= end_epoch")

    def __call__(self, epoch: int) -> RatePrior | None:
        if epoch < self.start_epoch:
            return None
        span = self.end_epoch - self.start_epoch
        t = 1.0 if span == 0 else min(1.0, (epoch - self.start_epoch) / span)
        if self.interpolation == "linear":
            sigma = self.sigma_start + t * (self.sigma_end - self.sigma_start)
        else:
            sigma = self.sigma_start * (self.sigma_end / self.sigma_start) ** t
        return RatePrior(self.mu, sigma)


_ABSENT_TERMS: dict[torch.dtype, Tensor] = {}


def _absent_term(output: Tensor) -> Tensor:
    """The 0-d zero of a prior that is not in the loss. On the CPU one tensor per dtype is
    shared by all calls (a new one costs an op per training step, some 1% of a step of the
    paper's MLPs); elsewhere a fresh one."""
    if not output.is_cpu:
        return output.new_zeros(())
    zero = _ABSENT_TERMS.get(output.dtype)
    if zero is None:
        zero = _ABSENT_TERMS[output.dtype] = torch.zeros((), dtype=output.dtype)
    return zero


@dataclass(slots=True)
class ELBOTerms:
    """The negative ELBO of Eq. 13, term by term (each a 0-d tensor to minimise).

    ``predictive = (N/M) sum_batch -log p(y|x)``; ``weight_prior = -sum log p(rho)/q(rho)``
    over the active weights; ``width_prior = -sum_l log p(nu_l)/q(nu_l)``;
    ``total`` their sum. The term of a prior left out is zero (on the CPU one shared
    tensor: read the terms, do not modify them in place).
    """

    total: Tensor
    predictive: Tensor
    weight_prior: Tensor
    width_prior: Tensor

    def as_dict(self) -> dict[str, float]:
        """Plain floats for logging."""
        return {k: float(getattr(self, k).detach()) for k in ("total", "predictive", "weight_prior", "width_prior")}


def awnn_parameters(model: nn.Module) -> list[Tensor]:
    """The active ``rho`` (biases and weights) of every :class:`AdaptiveLinear` in ``model`` (Eq. 13)."""
    return [m.rho for m in model.modules() if isinstance(m, AdaptiveLinear)]


def rate_parameters(model: nn.Module) -> list[Tensor]:
    """The rates ``nu_l`` of every adaptive MLP in ``model`` (differentiable)."""
    return [nu for m in adaptive_mlps(model) for nu in m.rates().unbind()]


def negative_elbo(model: nn.Module, output: Tensor, target: Tensor, *, n_train: int,
                  likelihood: str = "categorical", sigma_theta: float | None = None,
                  rate_prior: RatePrior | None = None, include_constants: bool = True,
                  per_sample: bool = False, ignore_index: int | None = None, noise_std: float = 1.0,
                  weight_params: Iterable[Tensor] | None = None) -> ELBOTerms:
    """Eq. 13 as a loss: minus the ELBO at the first-order point ``lambda = nu, theta = rho``.

    * predictive: ``(N/M) sum_{i in batch} -log p(y_i | x_i)`` with ``N = n_train``
      (the true training-set size, counted in the same units as the batch's ``M``
      targets) - the mini-batch rescaling of Sec. 3. ``likelihood``: ``categorical``
      (logits ``(..., C)``, integer targets; targets equal to ``ignore_index`` do
      not count in ``M``) or ``gaussian`` (mean ``output``, std ``noise_std``; ``M``
      is ``output.shape[0]``).
    * weight prior (Eqs. 4, 10): ``-log N(rho; 0, sigma_theta^2) + log N(rho; rho, 1)
      = rho^2 / (2 sigma_theta^2) + log sigma_theta`` summed over the *active* weights
      and biases (``weight_params``, default :func:`awnn_parameters`; inactive neurons
      have ``q = p`` and cancel). ``sigma_theta=None``: uninformative, term 0.
    * width prior (Eqs. 3, 8): the prior is on the rate ``lambda_l``, evaluated at
      ``nu_l``; ``q(nu_l; nu_l) = N(nu_l; nu_l, 1)`` is a constant, so the term is
      ``(nu_l - mu)^2 / (2 sigma^2) + log sigma``. ``rate_prior=None``: uninformative, 0.

    ``include_constants=False`` drops the parameter-free ``log sigma`` (and Gaussian
    ``log 2 pi``) constants, which change the logged value but not the gradient.
    ``per_sample=True`` divides every term by ``N`` (same minimiser; convenient with SGD).
    """
    _check_choice(likelihood, LIKELIHOODS, "likelihood")
    if isinstance(n_train, bool) or not isinstance(n_train, int) or n_train < 1:
        raise ValueError(f"n_train={n_train!r} must be the training-set size, a positive int")
    if likelihood == "categorical":
        logits = output if output.dim() == 2 else output.reshape(-1, output.shape[-1])
        tgt = target if target.dim() == 1 else target.reshape(-1)
        if ignore_index is None:
            nll_sum = F.cross_entropy(logits, tgt, reduction="sum")
            m = tgt.numel()
        else:
            nll_sum = F.cross_entropy(logits, tgt, ignore_index=ignore_index, reduction="sum")
            m = int((tgt != ignore_index).sum())
    else:
        if output.shape != target.shape:
            raise ValueError(f"gaussian likelihood: output shape {tuple(output.shape)} != target shape {tuple(target.shape)}")
        if not noise_std > 0:
            raise ValueError(f"noise_std={noise_std!r} must be > 0")
        nll_sum = 0.5 * ((output - target) / noise_std).pow(2).sum()
        if include_constants:
            nll_sum = nll_sum + output.numel() * (math.log(noise_std) + 0.5 * math.log(2 * math.pi))
        m = output.shape[0] if output.dim() else 1
    if m > n_train:
        raise ValueError(f"n_train={n_train} is smaller than the batch's M={m} targets: pass the training-set size")
    scale = 1.0 / max(m, 1) if per_sample else n_train / max(m, 1)
    predictive = nll_sum * scale
    total = predictive
    zero = _absent_term(output)

    weight_prior = zero
    if sigma_theta is not None:
        if not sigma_theta > 0:
            raise ValueError(f"sigma_theta={sigma_theta!r} must be > 0 (or None for an uninformative prior)")
        params = awnn_parameters(model) if weight_params is None else list(weight_params)
        if params:
            weight_prior = torch.stack([p.pow(2).sum() for p in params]).sum() / (2.0 * sigma_theta**2)
            if include_constants:
                weight_prior = weight_prior + sum(p.numel() for p in params) * math.log(sigma_theta)
            if per_sample:
                weight_prior = weight_prior / n_train
            total = total + weight_prior

    width_prior = zero
    if rate_prior is not None:
        nus = [m_.rates() for m_ in adaptive_mlps(model)]
        if nus:
            nu = torch.cat(nus)
            width_prior = (nu - rate_prior.mu).pow(2).sum() / (2.0 * rate_prior.sigma**2)
            if include_constants:
                width_prior = width_prior + nu.numel() * math.log(rate_prior.sigma)
            if per_sample:
                width_prior = width_prior / n_train
            total = total + width_prior
    return ELBOTerms(total, predictive, weight_prior, width_prior)


# ---------------------------------------------------------------------------
# Algorithm 1 inside the trainer: the ELBO as loss_fn, widths after every step
# ---------------------------------------------------------------------------

ELBO_TERMS: tuple[str, ...] = ("total", "predictive", "weight_prior", "width_prior")


class ELBOLoss:
    """Eq. 13 as a ``loss_fn`` for :func:`hacn_core.engine.training.fit` (Algorithm 1, line 7).

    ``ELBOLoss(model, n_train, sigma_theta=..., rate_prior=...)(output, target)``
    returns ``negative_elbo(...).total`` with ``N = n_train`` (pass the true
    training-set size); the other keyword arguments go to :func:`negative_elbo`.
    While the model trains (``model.training`` and gradients on, so never during an
    evaluation), every term is added to a running sum; :meth:`pop_means` returns the
    mean of each term over the batches since the last call (what
    :class:`WidthCallback` logs per epoch) and starts afresh. ``rate_prior`` is an
    attribute, so a :class:`RatePriorSchedule` can replace it during training.
    """

    def __init__(self, model: nn.Module, n_train: int, *, sigma_theta: float | None = None,
                 rate_prior: RatePrior | None = None, **elbo_kwargs) -> None:
        if isinstance(n_train, bool) or not isinstance(n_train, int) or n_train < 1:
            raise ValueError(f"n_train={n_train!r} must be the training-set size, a positive int")
        self.model, self.n_train = model, n_train
        self.sigma_theta, self.rate_prior = sigma_theta, rate_prior
        self.elbo_kwargs = elbo_kwargs
        self._sums: Tensor | None = None
        self._count = 0
        self.last: ELBOTerms | None = None

    def terms(self, output: Tensor, target: Tensor) -> ELBOTerms:
        """All terms of Eq. 13 for one batch (nothing is recorded)."""
        return negative_elbo(self.model, output, target, n_train=self.n_train, sigma_theta=self.sigma_theta,
                             rate_prior=self.rate_prior, **self.elbo_kwargs)

    def __call__(self, output: Tensor, target: Tensor) -> Tensor:
        terms = self.terms(output, target)
        if self.model.training and torch.is_grad_enabled():
            self.last = terms
            row = torch.stack([getattr(terms, k).detach().float() for k in ELBO_TERMS])
            self._sums = row if self._sums is None else self._sums + row
            self._count += 1
        return terms.total

    def pop_means(self) -> dict[str, float]:
        """Mean of each term over the training batches since the last call (NaN if none)."""
        if self._sums is None:
            means = {k: float("nan") for k in ELBO_TERMS}
        else:
            means = dict(zip(ELBO_TERMS, (self._sums / self._count).tolist(), strict=True))
        self._sums, self._count = None, 0
        return means


class WidthCallback(Callback):
    """Algorithm 1's ``update_width`` inside :func:`hacn_core.engine.training.fit`, with logging.

    * ``on_train_begin``: attaches the optimizer to every :class:`AdaptiveMLP` of the
      model, so that resizes keep its state in sync;
    * ``on_step_end``: :func:`update_widths` after every optimizer step, i.e. right
      before the next forward (Algorithm 1, line 5), and the rate prior of
      ``schedule`` (Sec. 5.3) for the epoch of that *next* step, so every step of
      0-based epoch ``e`` runs under ``schedule(e)`` ("at epoch 1000": all steps
      after 1,000 completed epochs, none before);
    * ``on_record``: ``awnn/widths`` (all hidden widths, module order),
      ``awnn/total_width``, ``awnn/rates`` and, with an :class:`ELBOLoss`,
      ``elbo/<term>``, the mean of each term of Eq. 13 over the batches since the
      previous record (NaN at the record before training).
    """

    def __init__(self, elbo: ELBOLoss | None = None, schedule: RatePriorSchedule | None = None) -> None:
        if schedule is not None and elbo is None:
            raise ValueError("schedule= needs elbo= (the ELBOLoss whose rate prior it sets)")
        self.elbo, self.schedule = elbo, schedule

    def _set_prior(self, state: TrainState) -> None:
        if self.schedule is not None:
            # after an epoch's last step the trainer still reports that epoch; the next step is the next one's
            next_epoch = state.epoch + (1 if state.step_in_epoch >= state.steps_per_epoch else 0)
            self.elbo.rate_prior = self.schedule(next_epoch)

    def on_train_begin(self, state: TrainState) -> None:
        for m in adaptive_mlps(state.model):
            m.attach_optimizer(state.optimizer)
        update_widths(state.model, state.optimizer)  # a resumed run follows its loaded rates
        self._set_prior(state)

    def on_step_end(self, state: TrainState) -> None:
        update_widths(state.model, state.optimizer)
        self._set_prior(state)

    def state_dict(self) -> dict[str, object]:
        """The ELBO sums of the epoch in progress (so a resumed epoch logs the same means)."""
        if self.elbo is None or self.elbo._sums is None:
            return {}
        return {"sums": self.elbo._sums.tolist(), "count": self.elbo._count}

    def load_state_dict(self, state: dict[str, object]) -> None:
        if self.elbo is not None and state:
            self.elbo._sums = torch.tensor(state["sums"], dtype=torch.float32)
            self.elbo._count = int(state["count"])

    def on_record(self, state: TrainState) -> dict[str, object]:
        widths = model_widths(state.model)
        with torch.no_grad():
            rates = [float(nu) for m in adaptive_mlps(state.model) for nu in m.rates()]
        out: dict[str, object] = {"awnn/widths": widths, "awnn/total_width": sum(widths), "awnn/rates": rates}
        if self.elbo is not None:
            out.update({f"elbo/{k}": v for k, v in self.elbo.pop_means().items()})
        return out


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


# ---------------------------------------------------------------------------
# validation helpers
# ---------------------------------------------------------------------------


def _check_choice(value: str, allowed: Sequence[str], name: str) -> None:
    if value not in allowed:
        raise ValueError(f"{name}={value!r} is not allowed; allowed: {', '.join(allowed)}")


def _check_k(k: float) -> None:
    if not (isinstance(k, (int, float)) and not isinstance(k, bool) and 0.0 < k < 1.0):
        raise ValueError(f"k={k!r} must be in the open interval (0, 1) (the paper uses 0.9)")


def _check_rate(rate: float, name: str) -> None:
    if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not (rate > 0 and math.isfinite(rate)):
        raise ValueError(f"{name}={rate!r} must be a finite rate > 0")


def _check_width(width: int, name: str) -> None:
    if isinstance(width, bool) or not isinstance(width, int) or width < 1:
        raise ValueError(f"{name}={width!r} must be a positive int (>= 1)")
