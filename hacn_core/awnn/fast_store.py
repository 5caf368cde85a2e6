"""The fast path, part 1: an adaptive linear layer on a store with spare capacity.

Algorithm 1 of the AWNN paper changes the width of every adaptive layer as its rate
moves (Sec. 3, Eq. 11). A naive implementation builds new ``nn.Linear`` objects and
a new optimizer (or resets its state) at every resize; the paper reports up to 10x
the cost of a fixed network (Sec. 3.3). Unlike the public code, each
:class:`AdaptiveLinear` here keeps a *store* with spare rows and columns for its
parameter ``rho`` and one joint store for its per-element optimizer state (Adam
``exp_avg``/``exp_avg_sq``, SGD ``momentum_buffer``, ...). The ``nn.Parameter``
never changes identity: its ``.data`` is a view of the active block of the store,
and the optimizer's state tensors are views of the state store, re-pointed in
place. Consequences:

* forward, backward and the optimizer step touch only the active block;
* surviving neurons keep their values and optimizer state across resizes; new
  neurons start with zero state (Adam's shared ``step`` counter is kept);
* the stores grow geometrically (``capacity_growth``, default doubling) and only
  then are reallocated (state copied); new neurons are drawn when they appear
  (``prefill_std`` pre-draws the spare capacity instead, at the cost of bit-exact
  resumption);
* a neuron that leaves the active width leaves the parameter and the state: no
  gradient, momentum or weight decay can touch it; if it returns it is drawn
  afresh with zero state;
* a strided ``rho`` slows Adam a little, so :meth:`AdaptiveLinear.pack_` drops the
  spare columns (contiguous again) once the widths have been stable for a while.

Fused optimizers (``fused=True``) assume contiguous parameters and are refused; the
default for-loop and ``foreach`` implementations work on the strided views. The
tensor work of a resize also exists in C++ (``resize_layer`` of
``hacn_core/awnn/csrc/awnn_fused.cpp``, same ops in the same order), which
:meth:`AdaptiveLinear.resize_unchecked_` runs when given the compiled module.

:func:`repoint_optimizer` serves code that does build new parameter tensors.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from hacn_core.awnn.checks import check_width

# ---------------------------------------------------------------------------
# Views of a store, and autograd's cached grad accumulator
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


# ---------------------------------------------------------------------------
# The layer
# ---------------------------------------------------------------------------


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

    ``prefill_std`` (a std, or None) draws the spare capacity of a growing store from
    ``N(0, prefill_std^2)`` (biases too) when it is allocated, so that a resize with
    that std needs no draws; None draws each new row and column when it becomes active.
    """

    in_features: int
    out_features: int

    def __init__(self, in_features: int, out_features: int, bias: bool = True, *,
                 capacity_growth: float = 2.0, prefill_std: float | None = None, device=None, dtype=None) -> None:
        super().__init__()
        check_width(in_features, "in_features")
        check_width(out_features, "out_features")
        if not capacity_growth > 1.0:
            raise ValueError(f"capacity_growth={capacity_growth!r} must be > 1 (2.0 doubles the capacity)")
        if prefill_std is not None and not prefill_std >= 0:
            raise ValueError(f"prefill_std={prefill_std!r} must be a std >= 0 or None (draw new neurons on use)")
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
        self._prefill: tuple[float, float] | None = None if prefill_std is None else (prefill_std, prefill_std)

    @property
    def weight(self) -> Tensor:
        """``W``, shape ``(out, in)`` (a view of ``rho``)."""
        return self.rho[:, self.col0:]

    @property
    def bias(self) -> Tensor | None:
        """``b``, shape ``(out,)`` (a view of ``rho``), or None."""
        return self.rho[:, 0] if self.has_bias else None

    def forward(self, x: Tensor) -> Tensor:
        """``x`` of shape ``(..., in)`` (any leading shape) to ``(..., out)``."""
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
        check_width(o2, "out_features")
        check_width(i2, "in_features")
        self.resize_unchecked_(o2, i2, optimizer, new_weight_std, new_bias_std)

    def resize_unchecked_(self, o2: int, i2: int, optimizer: torch.optim.Optimizer | None, new_weight_std: float,
                          new_bias_std: float, ext=None) -> None:
        """:meth:`resize_` without the argument checks, for callers whose widths are valid by
        construction (:meth:`hacn_core.awnn.mlp.AdaptiveMLP.update_width`). Runs at nearly
        every step while the widths adapt, so the common case (linked store, state already
        adopted, block fits) is written inline: plain ``__dict__`` reads and writes instead of
        ``nn.Module`` attribute hooks, one call less per helper. The tensor work - and with it
        every number - is that of the helpers; with ``ext`` (the C++ module of
        :mod:`hacn_core.awnn.fast_cpp`) it runs as one call of ``resize_layer``, the same ops
        in the same order."""
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

