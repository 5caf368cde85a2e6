"""The adaptive MLP as a drop-in on inputs of any leading shape (AWNN, Sec. 3.1, Eq. 14).

An adaptive MLP used as the feed-forward block of a transformer sees tokens
``(B, T, d)``, one used on a graph sees nodes ``(N, d)``: every position of the
leading dimensions is one example. Each test compares a leading shape with the
flattened ``(B * T, d)`` batch it stands for: the output and every gradient (both
nodes of the fused forward and the plain-autograd Eq. 14), the negative ELBO of
Eq. 13, and Algorithm 1's width update with the Adam state of the surviving neurons.
"""

from __future__ import annotations

import shutil

import pytest
import torch

from hacn_core.awnn import (
    AdaptiveMLP,
    ELBOLoss,
    RatePrior,
    fast_cpp,
    negative_elbo,
)
from hacn_core.awnn.baseline import MLP

has_compiler = shutil.which("c++") is not None or shutil.which("g++") is not None
BACKENDS = ["python", pytest.param("cpp", marks=pytest.mark.skipif(not has_compiler, reason="no C++ compiler"))]


def _grads(model: AdaptiveMLP, x: torch.Tensor) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
    """Output and the gradients of ``sum(out^2)`` in ``x``, the rates and every ``rho``."""
    x = x.detach().clone().requires_grad_()
    y = model(x)
    grads = torch.autograd.grad(y.square().sum(), [x, model.raw_rate, *(lin.rho for lin in model.layers)])
    return y, grads


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fused", [True, False])
@pytest.mark.parametrize("shape", [(4, 5), (2, 3, 4), (7,)])
def test_leading_shape_gives_the_outputs_and_gradients_of_the_flattened_batch(backend, fused, shape):
    torch.manual_seed(0)
    model = AdaptiveMLP(in_dim=3, out_dim=2, n_hidden_layers=2, activation="leaky_relu", rate_init=0.2,
                        fused=fused)
    x = torch.randn(*shape, 3)
    with fast_cpp.use_backend(backend):
        y, g = _grads(model, x)
        y_flat, g_flat = _grads(model, x.reshape(-1, 3))
    assert y.shape == (*shape, 2)
    assert torch.equal(y, y_flat.reshape(*shape, 2))
    assert torch.equal(g[0], g_flat[0].reshape(*shape, 3))  # the input's gradient keeps its shape
    assert all(torch.equal(a, b) for a, b in zip(g[1:], g_flat[1:], strict=True))  # rates and weights


@pytest.mark.parametrize("backend", BACKENDS)
def test_fused_nodes_equal_plain_autograd_on_tokens(backend):
    """Eq. 14 in plain ops (:meth:`intermediates`) and the fused node agree on ``(B, T, d)``."""
    torch.manual_seed(1)
    model = AdaptiveMLP(in_dim=4, out_dim=3, n_hidden_layers=2, activation="tanh", rate_init=0.15,
                        importance_norm="active").double()
    x = torch.randn(3, 5, 4, dtype=torch.float64)
    out, alphas, hs = model.intermediates(x)
    assert out.shape == (3, 5, 3)
    assert [a.shape for a in alphas] == [h.shape for h in hs] == [(3, 5, d) for d in model.widths()]
    with fast_cpp.use_backend(backend):
        y, g = _grads(model, x)
    model.config.fused = False
    y_ref, g_ref = _grads(model, x)
    torch.testing.assert_close(y, out)
    torch.testing.assert_close(y, y_ref)
    for a, b in zip(g, g_ref, strict=True):
        torch.testing.assert_close(a, b)


def test_negative_elbo_on_tokens_equals_the_flattened_batch():
    """``(B, T, C)`` logits with ``(B, T)`` targets are ``B * T`` examples (``n_train`` counts them too)."""
    torch.manual_seed(2)
    model = AdaptiveMLP(in_dim=3, out_dim=4, rate_init=0.3).double()
    x = torch.randn(2, 6, 3, dtype=torch.float64)
    y = torch.randint(0, 4, (2, 6))
    out = model(x)
    kw = dict(n_train=120, sigma_theta=2.0, rate_prior=RatePrior(0.05, 0.5))
    tokens = negative_elbo(model, out, y, **kw)
    flat = negative_elbo(model, out.reshape(12, 4), y.reshape(12), **kw)
    assert tokens.as_dict() == flat.as_dict()
    torch.testing.assert_close(tokens.predictive,
                               -(120 / 12) * torch.log_softmax(out, -1).gather(-1, y[..., None]).sum())
    # ignored tokens (padding) do not count in M
    y_pad = y.clone()
    y_pad[1, 3:] = -100
    padded = negative_elbo(model, out, y_pad, ignore_index=-100, **kw).predictive
    torch.testing.assert_close(padded, negative_elbo(model, out.reshape(12, 4), y_pad.reshape(12),
                                                     ignore_index=-100, **kw).predictive)
    keep = y_pad != -100
    torch.testing.assert_close(padded, -(120 / 9) * torch.log_softmax(out[keep], -1).gather(-1, y[keep][:, None]).sum())
    # gaussian: (B, T, d) means are B * T examples, like their flattened (B * T, d)
    mu, t = out[..., :2], torch.randn(2, 6, 2, dtype=torch.float64)
    g3 = negative_elbo(model, mu, t, n_train=120, likelihood="gaussian").predictive
    torch.testing.assert_close(g3, negative_elbo(model, mu.reshape(12, 2), t.reshape(12, 2), n_train=120,
                                                 likelihood="gaussian").predictive)
    # the ELBO loss of the trainer sees the same
    loss = ELBOLoss(model, 120, sigma_theta=2.0)
    assert torch.equal(loss(out, y), loss(out.reshape(12, 4), y.reshape(12)))
    # targets that do not pair with the output's positions are refused, naming the shapes
    with pytest.raises(ValueError, match=r"target shape \(6, 2\) must be the output's leading shape \(2, 6\)"):
        negative_elbo(model, out, y.T, n_train=120)
    with pytest.raises(ValueError, match="n_train=8 is smaller than the batch's M=12"):
        negative_elbo(model, out, y, n_train=8)


def _adam_run(shape: tuple[int, ...], backend: str, steps: int = 25):
    """Adam with Algorithm 1's width update before every step; batches of ``shape`` positions."""
    torch.manual_seed(3)
    model = AdaptiveMLP(in_dim=2, out_dim=3, n_hidden_layers=2, activation="relu6", rate_init=0.08)
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    model.attach_optimizer(opt)
    gen = torch.Generator().manual_seed(4)
    loss = ELBOLoss(model, 4000, sigma_theta=5.0)
    widths = []
    with fast_cpp.use_backend(backend):
        for _ in range(steps):
            x = torch.randn(24, 2, generator=gen)
            y = torch.randint(0, 3, (24,), generator=gen)
            model.update_width()  # the attached optimizer's state follows the resize
            opt.zero_grad(set_to_none=True)
            loss(model(x.reshape(*shape, 2)), y.reshape(shape)).backward()
            opt.step()
            widths.append(model.widths())
    return model, opt, widths


@pytest.mark.parametrize("backend", BACKENDS)
def test_width_updates_after_token_forwards_keep_adam_state_as_for_a_flat_batch(backend):
    model, opt, widths = _adam_run((4, 6), backend)
    flat, flat_opt, flat_widths = _adam_run((24,), backend)
    assert widths == flat_widths and len({tuple(w) for w in widths}) > 1  # the widths did change
    for p, q in zip(model.parameters(), flat.parameters(), strict=True):
        assert torch.equal(p, q)
        assert opt.state[p].keys() == flat_opt.state[q].keys()
        assert all(torch.equal(opt.state[p][k], flat_opt.state[q][k]) for k in opt.state[p])

    # one more width change: the surviving neurons keep their Adam moments, new ones start at 0
    lin0, lin1 = model.layers[0], model.layers[1]
    d0, d1 = model.widths()
    before = [{k: v.clone() for k, v in opt.state[lin.rho].items()} for lin in (lin0, lin1)]
    model.set_widths([d0 + 5, max(1, d1 - 2)])
    k1 = min(d1, max(1, d1 - 2))
    for key in ("exp_avg", "exp_avg_sq"):
        s0, s1 = opt.state[lin0.rho][key], opt.state[lin1.rho][key]
        assert s0.shape == lin0.rho.shape and s1.shape == lin1.rho.shape
        assert torch.equal(s0[:d0], before[0][key]) and torch.all(s0[d0:] == 0)
        assert torch.equal(s1[:, : 1 + d0], before[1][key][:k1]) and torch.all(s1[:, 1 + d0:] == 0)
    assert torch.equal(opt.state[lin0.rho]["step"], before[0]["step"])
    with fast_cpp.use_backend(backend):  # and the model trains on tokens at its new widths
        model(torch.randn(2, 3, 2)).square().sum().backward()
    assert lin0.rho.grad.shape == lin0.rho.shape


def test_fixed_width_baseline_takes_any_leading_shape():
    torch.manual_seed(6)
    mlp, x = MLP(3, 2, width=8, hidden_layers=2), torch.randn(2, 5, 3)
    assert torch.equal(mlp(x), mlp(x.reshape(10, 3)).reshape(2, 5, 2))
