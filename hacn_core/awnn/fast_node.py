"""The fast path, part 2: the whole adaptive MLP of Eq. 14 as one autograd node.

:meth:`hacn_core.awnn.mlp.AdaptiveMLP.intermediates` writes Eq. 14 of the AWNN paper
(Sec. 3.1) with plain autograd ops. Autograd's per-op bookkeeping dominates a
training step of the paper's small MLPs, so by default the model runs the same
arithmetic as one node with a hand-written backward, :class:`AdaptiveMLPFunction`
(checked against plain autograd in ``tests/test_awnn.py``). The same node also
exists in C++ (``hacn_core/awnn/csrc/awnn_fused.cpp``, same ops in the same order,
equal bit for bit, ``tests/test_awnn_ext.py``), compiled on first use;
:mod:`hacn_core.awnn.fast_cpp` chooses between the two (``$HACN_AWNN_BACKEND``:
``auto``, ``cpp``, ``python``) and :func:`fused_adaptive_mlp` runs the chosen one on
inputs of any leading shape. ``benchmarks/bench_awnn.py`` measures the per-step cost
against a fixed MLP.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from hacn_core.awnn import fast_cpp
from hacn_core.awnn.distribution import float_softplus
from hacn_core.awnn.importance import importance_log_shift, importance_scale

# ---------------------------------------------------------------------------
# Activations and cached constants
# ---------------------------------------------------------------------------


_aten = torch.ops.aten
#: dL/dz from dL/da = t and the saved output a, written over t (a temporary of the backward:
#: one allocation fewer than the functional ops, the same values)
_ACT_BACKWARD_ = {
    "relu": lambda t, a, s: _aten.threshold_backward.grad_input(t, a, 0, grad_input=t),
    "leaky_relu": lambda t, a, s: _aten.leaky_relu_backward.grad_input(t, a, s, True, grad_input=t),
    "relu6": lambda t, a, s: _aten.hardtanh_backward.grad_input(t, a, 0.0, 6.0, grad_input=t),
    "tanh": lambda t, a, s: _aten.tanh_backward.grad_input(t, a, grad_input=t),
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


# ---------------------------------------------------------------------------
# The node
# ---------------------------------------------------------------------------


def _fused_forward(x: Tensor, nus: list[float], spec: tuple, rhos: Sequence[Tensor]):
    """Forward of :class:`AdaptiveMLPFunction`: output and the intermediates of the backward."""
    positions, activation, slope, bias, norms = spec
    ones = _ones_column(x) if bias else None
    buf = torch.cat((ones, x), 1) if bias else x  # [1 | x]: the dummy input of the bias
    bufs, acts, fs = [buf], [], []
    zero = _zero(x)
    for nu, j, rho, m in zip(nus, positions, rhos, norms):
        a = _act_(torch.mm(buf, rho.t()), activation, slope)
        f = torch.pow(math.exp(-nu), j)  # q^j; the constant factor is applied with it:
        c = importance_scale(nu, m)  # h = a * q^j (1 - q) [/ (1 - q^M)]
        if bias:  # [1 | h], h written straight into its columns (cat's values, one pass fewer)
            buf = a.new_empty((a.shape[0], a.shape[1] + 1))
            buf.select(1, 0).fill_(1.0)
            torch.addcmul(zero, a, f, value=c, out=buf[:, 1:])
        else:
            buf = torch.addcmul(zero, a, f, value=c)
        bufs.append(buf)
        acts.append(a)
        fs.append(f)
    return torch.mm(buf, rhos[-1].t()), bufs, acts, fs


class AdaptiveMLPFunction(torch.autograd.Function):
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
    outputs, which works for all of :data:`hacn_core.awnn.init.ACTIVATIONS`.

    ``apply(x, raw, spec, prior, *rhos)``: ``x`` of shape ``(batch, in_dim)``, ``raw`` the
    ``(L,)`` raw rates, ``rhos`` the ``L + 1`` layer parameters ``(out, [1 +] in)``;
    ``spec = (positions, activation, slope, bias, norm_widths)`` with, per hidden layer,
    the positions ``0..D_l-1`` and the renormalisation width ``M_l`` (or None).

    ``prior``: None (the default; the node's values are those of Eq. 14 alone), or
    ``(w_coef, mu, r_coef)``, the *fused prior gradients* of Eq. 13 (the option
    ``ELBOLoss(fused_priors=True)`` of :mod:`hacn_core.awnn.elbo`): the backward adds the
    Gaussian weight prior's gradient ``w_coef * rho`` (``w_coef = 1 / sigma_theta^2``, a weight
    decay on the active block; for the input layer folded into its ``addmm``) and the rate
    prior's ``r_coef (nu_l - mu) (1 - e^{-nu_l})`` to ``dL/draw_l`` (``r_coef = 1 / sigma^2``,
    ``dnu/draw = sigmoid(raw) = 1 - e^{-nu}``), as if the loss held the priors. Either
    coefficient 0 leaves its prior out. The sums happen in another order than autograd's
    accumulation of two nodes, so the gradients agree to rounding, not bit for bit.
    """

    @staticmethod
    def forward(ctx, x: Tensor, raw: Tensor, spec: tuple, prior: tuple[float, float, float] | None,
                *rhos: Tensor) -> Tensor:
        nus = [float_softplus(r) for r in raw.tolist()]
        out, bufs, acts, fs = _fused_forward(x, nus, spec, rhos)
        # intermediates are kept on ctx (cheaper than save_for_backward, which checks
        # versions on unpacking) and released by the backward; x and the parameters
        # go through save_for_backward, so that a second backward (retain_graph=True)
        # can recompute them
        ctx.save_for_backward(x, *rhos)
        ctx.bufs, ctx.acts, ctx.fs, ctx.nus, ctx.spec, ctx.prior = bufs, acts, fs, nus, spec, prior
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
        need = ctx.needs_input_grad[:3] + ctx.needs_input_grad[4:]  # x, raw, spec, rhos (the prior's slot left out)
        w_coef, r_mu, r_coef = ctx.prior if ctx.prior is not None else (0.0, 0.0, 0.0)
        act_backward_ = _ACT_BACKWARD_[activation]
        g_rho: list[Tensor | None] = [None] * (n + 1)
        g_nu: list[Tensor] = []
        g_x = None
        for layer in range(n, -1, -1):
            if need[3 + layer]:
                if layer == 0 and w_coef > 0:  # fused weight prior: dL/drho + w_coef * rho in one op
                    g_rho[0] = torch.addmm(rhos[0], g.t(), bufs[0], beta=w_coef, alpha=1.0)
                else:
                    g_rho[layer] = g.t().mm(bufs[layer])
            if layer == 0:
                if need[0]:
                    g_x = g.mm(rhos[0])
                    # without the bias column, contiguous: a strided gradient slows the ops it
                    # flows into (a gather, as in a GNN's scatter-sum backward, by 8x)
                    g_x = g_x[:, 1:].contiguous() if bias else g_x
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
            if w_coef > 0 and g_rho[layer] is not None:  # fused weight prior, after s_k (likelihood only)
                g_rho[layer].add_(rhos[layer], alpha=w_coef)
            g = act_backward_(t, acts[k], slope)  # over t, read no more
        g_raw = None
        if need[1]:
            g_nu.reverse()
            dsig = torch.tensor([math.expm1(-nu) for nu in nus], dtype=g_nu[0].dtype, device=g_nu[0].device)
            if r_coef > 0:  # fused rate prior, in double, rounded once to the gradient's dtype
                extra = [r_coef * (nu - r_mu) * -math.expm1(-nu) for nu in nus]
                prior_t = torch.tensor(extra, dtype=torch.float64, device=dsig.device).to(dsig.dtype)
                g_raw = torch.addcmul(prior_t, torch.stack(g_nu), dsig)
            else:
                g_raw = torch.stack(g_nu).mul_(dsig)  # dL/draw = -dL/dnu * (1 - e^{-nu}), sign folded in
        return (g_x, g_raw, None, None, *g_rho)


def fused_adaptive_mlp(x: Tensor, raw: Tensor, rhos: Sequence[Tensor], specs: tuple[tuple, tuple],
                       prior: tuple[float, float, float] | None = None) -> Tensor:
    """The adaptive MLP on ``x`` of shape ``(..., in_dim)`` (any leading shape: a batch,
    the tokens ``(B, T, d)`` of a transformer, the nodes of a graph) to ``(..., out_dim)``.

    The leading dimensions are flattened into one batch dimension for the node and
    restored on the output. ``raw`` holds the raw rates, ``rhos`` the parameters of the
    layers and ``specs`` is ``(spec, ext_args)``: the ``spec`` of
    :class:`AdaptiveMLPFunction` and the C++ node's arguments after ``x, raw, rhos``
    (positions, norm widths with 0 for none, activation code, slope, bias). The node is
    the one :func:`hacn_core.awnn.fast_cpp.module` picks. ``prior``: the fused prior
    gradients ``(w_coef, mu, r_coef)`` of :class:`AdaptiveMLPFunction`, or None.
    """
    x2 = x if x.dim() == 2 else x.reshape(-1, x.shape[-1])
    ext = fast_cpp.module()
    if ext is None:
        out = AdaptiveMLPFunction.apply(x2, raw, specs[0], prior, *rhos)
    elif prior is None:  # the same node in C++ (hacn_core/awnn/csrc/awnn_fused.cpp): same values, no interpreter per op
        out = ext.adaptive_mlp(x2, raw, rhos, *specs[1])
    else:
        out = ext.adaptive_mlp(x2, raw, rhos, *specs[1], *prior)
    return out if x.dim() == 2 else out.reshape(*x.shape[:-1], out.shape[-1])
