"""ELBOLoss(fused_priors=True): the priors of Eq. 13 (AWNN Sec. 3) as closed-form gradients inside the fused
node, checked against the loss that builds them (gradients to rounding, recorded values exactly)."""

from __future__ import annotations

import pytest
import torch

from hacn_core.awnn import AdaptiveMLP, AWNNConfig, ELBOLoss, RatePrior, RatePriorSchedule, fast_cpp
from hacn_core.awnn.elbo import negative_elbo

BACKENDS = ["python"] + (["cpp"] if fast_cpp.module() is not None else [])


def _model(layers: int, bias: bool = True, **kw) -> AdaptiveMLP:
    torch.manual_seed(0)
    return AdaptiveMLP(AWNNConfig(in_dim=5, out_dim=3, n_hidden_layers=layers, activation="relu6", initial_width=7,
                                  bias=bias, **kw))


def _grads(model: AdaptiveMLP, loss: ELBOLoss, x, y) -> list[torch.Tensor]:
    model.zero_grad(set_to_none=True)
    loss(model(x), y).backward()
    return [p.grad.clone() for p in model.parameters()]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("layers", [1, 2])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("per_sample", [False, True])
def test_fused_prior_gradients_equal_those_of_the_elbo(backend, layers, bias, per_sample):
    model = _model(layers, bias)
    x, y = torch.randn(16, 5), torch.randint(0, 3, (16,))
    prior = dict(sigma_theta=0.7, rate_prior=RatePrior(0.3, 0.5), per_sample=per_sample)
    with fast_cpp.use_backend(backend):
        exact = _grads(model, ELBOLoss(model, 100, **prior), x, y)
        fused = _grads(model, ELBOLoss(model, 100, fused_priors=True, **prior), x, y)
        model.set_fused_prior(None)
        plain = _grads(model, ELBOLoss(model, 100, per_sample=per_sample), x, y)
    for e, f, p in zip(exact, fused, plain):
        torch.testing.assert_close(f, e, rtol=1e-5, atol=1e-6)
        assert not torch.equal(e, p)  # the priors do move every gradient


@pytest.mark.parametrize("which", ["weight", "rate"])
def test_each_prior_alone(which):
    model = _model(2)
    x, y = torch.randn(16, 5), torch.randint(0, 3, (16,))
    prior = {"sigma_theta": 0.7} if which == "weight" else {"rate_prior": RatePrior(0.3, 0.5)}
    exact = _grads(model, ELBOLoss(model, 100, **prior), x, y)
    fused = _grads(model, ELBOLoss(model, 100, fused_priors=True, **prior), x, y)
    for e, f in zip(exact, fused):
        torch.testing.assert_close(f, e, rtol=1e-5, atol=1e-6)


@pytest.mark.skipif("cpp" not in BACKENDS, reason="the C++ node did not build")
def test_cpp_and_python_nodes_agree_bit_for_bit_with_fused_priors():
    model = _model(2)
    x, y = torch.randn(16, 5), torch.randint(0, 3, (16,))
    loss = ELBOLoss(model, 100, sigma_theta=0.7, rate_prior=RatePrior(0.3, 0.5), fused_priors=True)
    with fast_cpp.use_backend("python"):
        py = _grads(model, loss, x, y)
    with fast_cpp.use_backend("cpp"):
        cpp = _grads(model, loss, x, y)
    for a, b in zip(py, cpp):
        assert torch.equal(a, b)


def test_recorded_terms_are_exact():
    """pop_means: the mean of the steps' predictive terms and the priors' exact values at the record."""
    model = _model(1)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    loss = ELBOLoss(model, 100, sigma_theta=0.7, rate_prior=RatePrior(0.3, 0.5), fused_priors=True)
    preds = []
    for _ in range(3):
        x, y = torch.randn(16, 5), torch.randint(0, 3, (16,))
        opt.zero_grad()
        out = model(x)
        with torch.no_grad():
            preds.append(negative_elbo(model, out, y, n_train=100).predictive)
        value = loss(out, y)
        assert torch.equal(value, preds[-1])  # a training step returns the predictive term
        value.backward()
        opt.step()
    means = loss.pop_means()
    x, y = torch.randn(16, 5), torch.randint(0, 3, (16,))
    with torch.no_grad():
        now = negative_elbo(model, model(x), y, n_train=100, sigma_theta=0.7, rate_prior=RatePrior(0.3, 0.5))
    assert means["weight_prior"] == float(now.weight_prior)
    assert means["width_prior"] == float(now.width_prior)
    assert means["predictive"] == pytest.approx(float(sum(preds)) / 3, rel=1e-6)
    assert means["total"] == pytest.approx(means["predictive"] + means["weight_prior"] + means["width_prior"])
    # evaluation returns the exact total, priors included
    model.eval()
    with torch.no_grad():
        assert torch.equal(loss(model(x), y), now.total)


def test_a_schedule_reinstalls_the_rate_prior():
    model = _model(1)
    loss = ELBOLoss(model, 100, sigma_theta=2.0, fused_priors=True)
    assert model.__dict__["_fused_prior"] == (0.25, 0.0, 0.0)
    loss.rate_prior = RatePriorSchedule()(1000)  # N(0.05, 1)
    assert model.__dict__["_fused_prior"] == (0.25, 0.05, 1.0)
    loss.sigma_theta, loss.rate_prior = None, None
    assert model.__dict__["_fused_prior"] is None


def test_default_loss_installs_nothing():
    model = _model(1)
    ELBOLoss(model, 100, sigma_theta=0.7, rate_prior=RatePrior(0.3, 0.5))
    assert model.__dict__.get("_fused_prior") is None


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="fused=True"):
        ELBOLoss(_model(1, fused=False), 100, sigma_theta=1.0, fused_priors=True)
    model = _model(1)
    with pytest.raises(ValueError, match="weight_params"):
        ELBOLoss(model, 100, sigma_theta=1.0, fused_priors=True, weight_params=list(model.parameters()))
    with pytest.raises(ValueError, match="fused_priors"):
        ELBOLoss(model, 100, fused_priors="yes")
    with pytest.raises(ValueError, match="r_coef"):
        model.set_fused_prior((1.0, 0.0, -1.0))


def test_recording_without_priors_keeps_the_values_of_four_running_sums():
    """Without priors ELBOLoss keeps one running sum; the means are those of the four-term sums, bit for bit,
    also when a prior arrives in the middle of an epoch (a schedule)."""
    model = _model(1)
    loss = ELBOLoss(model, 100)
    rows = []
    for step in range(5):
        if step == 3:
            loss.rate_prior = RatePrior(0.3, 0.5)
        x, y = torch.randn(16, 5), torch.randint(0, 3, (16,))
        out = model(x)
        t = loss.terms(out, y)
        rows.append(torch.stack([t.total, t.predictive, t.weight_prior, t.width_prior]).detach())
        loss(out, y)
        if step == 1:
            assert loss.state_dict()["sums"] == (rows[0] + rows[1]).tolist()
    sums = rows[0]
    for r in rows[1:]:
        sums = sums + r
    assert loss.pop_means() == dict(zip(("total", "predictive", "weight_prior", "width_prior"),
                                        (sums / 5).tolist()))


@pytest.mark.parametrize("per_sample", [False, True])
def test_the_lean_likelihood_path_gives_negative_elbo_bit_for_bit(per_sample):
    """ELBOLoss without priors computes the predictive term without negative_elbo's Python: the same value
    and gradients; other shapes go through negative_elbo (and its errors)."""
    model = _model(1)
    loss = ELBOLoss(model, 100, per_sample=per_sample)
    # samples (B, C) with targets (B,), and tokens (B, T, C) with targets (B, T) as the Transformer's (flattened
    # as negative_elbo flattens them); each with a target of the wrong shape
    cases = [(torch.randn(16, 5), torch.randint(0, 3, (16,)), lambda y: y[:8]),
             (torch.randn(4, 4, 5), torch.randint(0, 3, (4, 4)), lambda y: y.reshape(-1))]
    for x, y, wrong in cases:
        assert loss._predictive_terms(model(x), y) is not None
        value = loss(model(x), y)
        exact = negative_elbo(model, model(x), y, n_train=100, per_sample=per_sample).total
        assert torch.equal(value, exact)
        assert torch.equal(torch.autograd.grad(value, model.raw_rate)[0],
                           torch.autograd.grad(exact, model.raw_rate)[0])
        with pytest.raises(ValueError, match="n_train=10 is smaller"):
            ELBOLoss(model, 10)(model(x), y)
        with pytest.raises(ValueError, match="target shape"):
            loss(model(x), wrong(y))


def test_a_killed_builds_baton_is_cleared_and_builds_take_turns(tmp_path, monkeypatch):
    """torch's load() waits forever on the ``lock`` file a killed build leaves; _build clears it under an flock
    that only a live builder holds (the real compile is not run: load is replaced by a stand-in)."""
    import fcntl
    from pathlib import Path

    import torch.utils.cpp_extension as cpp

    from hacn_core.awnn import fast_cpp

    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))
    name = "hacn_awnn_fused_test"
    build_dir = Path(cpp._get_build_directory(name, False))
    build_dir.mkdir(parents=True, exist_ok=True)
    (build_dir / "lock").write_text("")  # what a build killed mid-way leaves
    seen = {}

    def fake_load(name, sources, extra_cflags, verbose):
        seen["baton"] = (build_dir / "lock").exists()
        with open(build_dir.parent / f"{build_dir.name}.hacn-lock") as other:  # another process's attempt
            try:
                fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
                seen["held"] = False
            except BlockingIOError:
                seen["held"] = True
        return "module"

    monkeypatch.setattr(cpp, "load", fake_load)
    assert fast_cpp._build(name) == "module"
    assert seen == {"baton": False, "held": True}
    with open(build_dir.parent / f"{build_dir.name}.hacn-lock") as after:  # released once the build returns
        fcntl.flock(after, fcntl.LOCK_EX | fcntl.LOCK_NB)
