"""The closed-form priors of Eq. 13 (AWNN Sec. 3, Eqs. 3, 4, 8, 10) and the cost table of the benchmark."""

from __future__ import annotations

import math

import pytest
import torch

from hacn_core.awnn import AdaptiveMLP, AWNNConfig, ELBOLoss, RatePrior, fast_cpp, negative_elbo
from hacn_core.awnn.elbo import awnn_parameters, prior_terms, raw_rate_parameters
from hacn_core.awnn.mlp import adaptive_mlps
from hacn_core.awnn.studies.cost_cells import TARGET_RATIO, cells_table


def _terms_and_grads(backend: str, closed: bool, dtype: torch.dtype, per_sample: bool, consts: bool, layers: int):
    with fast_cpp.use_backend(backend):
        torch.manual_seed(0)
        model = AdaptiveMLP(AWNNConfig(in_dim=3, out_dim=4, n_hidden_layers=layers, activation="relu6",
                                       initial_width=17)).to(dtype)
        x, y = torch.randn(16, 3, dtype=dtype), torch.randint(0, 4, (16,))
        t = negative_elbo(model, model(x), y, n_train=3500, sigma_theta=10.0, rate_prior=RatePrior(0.05, 0.7),
                          per_sample=per_sample, include_constants=consts, closed_form_priors=closed)
        t.total.backward()
        return [t.total, t.predictive, t.weight_prior, t.width_prior] + [p.grad for p in model.parameters()]


def _backends() -> list[str]:
    return ["python"] + (["cpp"] if fast_cpp.module() is not None else [])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("per_sample,consts", [(False, True), (True, False), (True, True)])
@pytest.mark.parametrize("layers", [1, 2])
def test_closed_form_priors_equal_the_autograd_composition_bit_for_bit(dtype, per_sample, consts, layers):
    for backend in _backends():
        fast = _terms_and_grads(backend, True, dtype, per_sample, consts, layers)
        ref = _terms_and_grads(backend, False, dtype, per_sample, consts, layers)
        for a, b in zip(fast, ref, strict=True):
            assert torch.equal(a, b), backend


def test_closed_form_prior_gradients_are_a_weight_decay_and_a_scalar_per_layer():
    torch.manual_seed(1)
    model = AdaptiveMLP(AWNNConfig(in_dim=2, out_dim=2, n_hidden_layers=2, initial_width=9)).double()
    sigma_theta, prior = 3.0, RatePrior(0.2, 0.5)
    for backend in _backends():
        with fast_cpp.use_backend(backend):
            model.zero_grad(set_to_none=True)
            rhos, raws = awnn_parameters(model), raw_rate_parameters(model)

            w, r = prior_terms(rhos, raws, sigma_theta=sigma_theta, rate_prior=prior, include_constants=True,
                               per_sample_n=0)
            n = sum(p.numel() for p in rhos)
            assert float(w.detach()) == pytest.approx(sum(float((p.detach()**2).sum()) for p in rhos) / (2 * sigma_theta**2)
                                             + n * math.log(sigma_theta), rel=1e-12)
            (w + r).backward()
            for p in rhos:  # d/drho of rho^2 / (2 sigma^2): a weight decay 1 / sigma^2
                torch.testing.assert_close(p.grad, p.detach() / sigma_theta**2, rtol=1e-12, atol=0)
            raw = raws[0].detach()
            nu = torch.nn.functional.softplus(raw)
            torch.testing.assert_close(raws[0].grad, (nu - prior.mu) / prior.sigma**2 * torch.sigmoid(raw),
                                       rtol=1e-12, atol=0)


def test_elbo_loss_records_the_same_means_with_closed_form_priors():
    torch.manual_seed(2)
    model = AdaptiveMLP(AWNNConfig(in_dim=2, out_dim=2, initial_width=12))
    x, y = torch.randn(40, 2), torch.randint(0, 2, (40,))
    means = []
    for closed in (True, False):
        loss = ELBOLoss(model, 400, sigma_theta=2.0, rate_prior=RatePrior(0.1, 0.5), closed_form_priors=closed)
        for i in range(0, 40, 8):
            loss(model(x[i:i + 8]), y[i:i + 8])
        means.append(loss.pop_means())
    assert means[0] == means[1]


def test_a_plain_model_is_found_without_a_walk_and_a_wrapped_one_with_it():
    model = AdaptiveMLP(AWNNConfig(in_dim=2, out_dim=2, initial_width=5))
    assert adaptive_mlps(model) == [model]
    assert awnn_parameters(model) == [lin.rho for lin in model.layers]
    model.extra = torch.nn.Linear(2, 2)  # a module added to it: back to the walk
    assert adaptive_mlps(model) == [model]
    wrapped = torch.nn.Sequential(model, AdaptiveMLP(AWNNConfig(in_dim=2, out_dim=2, initial_width=3)))
    assert len(adaptive_mlps(wrapped)) == 2 and len(awnn_parameters(wrapped)) == 4


def _row(objective, layers, phase, width, ratio):
    return {"objective": objective, "layers": layers, "phase": phase, "start_width": width, "width": width,
            "awnn_us": 110.0 * ratio, "fixed_us": 110.0, "fixed_wd_us": 100.0, "awnn/fixed": ratio,
            "awnn/fixed+wd": 1.1 * ratio, "ratio": ratio, "node": "cpp", "reps": 3}


def test_cells_table_indexes_the_cells_and_puts_the_earlier_ratio_beside():
    rows = [_row("likelihood", 1, "steady", 30, 1.05), _row("elbo", 2, "adapting", 400, 1.3)]
    before = [_row("likelihood", 1, "steady", 30, 1.4)]
    table = cells_table(rows, before)
    assert table.loc[("likelihood", 1, "steady", 30), "ratio before"] == 1.4
    assert math.isnan(table.loc[("elbo", 2, "adapting", 400), "ratio before"])
    assert list(table[f"<= {TARGET_RATIO}"]) == [True, False]
    assert table.loc[("elbo", 2, "adapting", 400), "AWNN (us/step)"] == pytest.approx(143.0)
    with pytest.raises(ValueError, match="no cells"):
        cells_table([])
