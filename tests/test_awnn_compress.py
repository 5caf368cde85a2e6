"""Tests of the AWNN compression experiment (Fig. 5: annealed rate prior; Fig. 6: truncation)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from hacn_core import catalog, paper_items
from hacn_core.awnn import AdaptiveMLP, ELBOLoss, RatePrior, WidthCallback, importances
from hacn_core.awnn.studies import common
from hacn_core.awnn.studies import compress as ac
from hacn_core.engine.registry import matches
from hacn_core.engine.results import RunContext
from hacn_core.engine.training import TrainConfig, evaluate, fit


def _ctx(tmp_path: Path) -> RunContext:
    return RunContext("awnn-compress-test", tmp_path, progress=False)


# ----------------------------------------------------------------------------- the schedule (Sec. 5.3)


def test_schedule_of_the_paper_config():
    schedule = ac.prior_schedule(ac.compress_config("anneal", 0))
    assert schedule(0) is None and schedule(999) is None  # uninformative before epoch 1000
    assert schedule(1000) == RatePrior(0.05, 1.0)  # N(0.05, 1) introduced at 1000
    assert schedule(1750).sigma == pytest.approx(0.55, abs=1e-12)  # linear: half-way between 1 and 0.1
    assert schedule(2500).sigma == pytest.approx(0.1, abs=1e-12)
    assert schedule(4000).sigma == pytest.approx(0.1, abs=1e-12)  # constant after the end
    assert ac.prior_schedule(ac.compress_config("anneal", 0, rate_prior="none")) is None


def test_rate_penalty_is_the_width_term_without_its_constant():
    prior = RatePrior(0.05, 0.1)
    assert ac.rate_penalty([0.01, 0.03], prior) == pytest.approx((0.04**2 + 0.02**2) / (2 * 0.01))
    assert ac.rate_penalty([0.01], None) == 0.0


def test_every_step_of_the_prior_epochs_and_none_before_use_the_prior(tmp_path):
    """WidthCallback: all steps of 0-based epoch e run under schedule(e)."""
    config = ac.compress_config("anneal", 0, epochs=4, prior_start_epoch=2, prior_end_epoch=3)
    schedule = ac.prior_schedule(config)
    torch.manual_seed(0)
    x, y = torch.randn(300, 2), torch.randint(0, 2, (300,))
    model = common.build_model(config)
    elbo = ELBOLoss(model, 300, rate_prior=None)
    seen: list = []

    def loss_fn(output, target):
        if model.training and torch.is_grad_enabled():
            seen.append(elbo.rate_prior)
        return elbo(output, target)

    cfg = TrainConfig(epochs=4, batch_size=128, lr=0.01, optimizer="adam", fused=False, device="cpu")
    fit(model, (x, y), cfg, loss_fn=loss_fn, callbacks=[WidthCallback(elbo, schedule)], progress=False)
    steps = 3  # ceil(300 / 128)
    assert len(seen) == 4 * steps
    for i, prior in enumerate(seen):
        assert prior == schedule(i // steps), f"step {i} (epoch {i // steps}) ran under {prior}"
    assert seen[2 * steps] == RatePrior(0.05, 1.0) and seen[2 * steps - 1] is None


@pytest.fixture(scope="module")
def anneal_pair(tmp_path_factory):
    """A short annealed run (prior over epochs 2-5 of 6) and its control, seed 0, Eq. 14 arm."""
    out = {}
    for prior in ac.RATE_PRIORS:
        config = ac.compress_config("anneal", 0, "none", prior, **ac.SMOKE_ANNEAL)
        out[prior] = (config, ac.train_compress(config, _ctx(tmp_path_factory.mktemp(prior))))
    return out


def test_width_prior_term_is_zero_before_the_start_and_acts_after(anneal_pair):
    config, res = anneal_pair["annealed"]
    c = res["curves"]
    start = config["prior_start_epoch"]
    for e, term, pen in zip(c["record_epoch"], c["elbo/width_prior"], c["rate_penalty"], strict=True):
        if e <= start:  # records up to `start` follow epochs trained without the prior (record 0: nothing yet)
            assert (e == 0 and math.isnan(term)) or term == 0.0
            assert pen == 0.0
        else:
            assert term != 0.0 and pen > 0.0
    # the logged epoch mean includes log sigma: at the end sigma = 0.1 and nu is far below 0.05
    nu = c["rate/1"][-1]
    assert c["rate_penalty"][-1] == pytest.approx((nu - 0.05) ** 2 / (2 * 0.1**2), rel=1e-4)
    _, control = anneal_pair["none"]
    assert all(t == 0.0 for t in control["curves"]["elbo/width_prior"][1:])


def test_control_equals_annealed_run_until_the_prior_starts(anneal_pair):
    (config, a), (_, b) = anneal_pair["annealed"], anneal_pair["none"]
    n = a["curves"]["record_epoch"].index(config["prior_start_epoch"]) + 1
    for key in ("width/1", "rate/1", "test_acc", "elbo/predictive"):
        assert a["curves"][key][1:n] == b["curves"][key][1:n], key  # record 0: before training (NaN terms)
    assert a["curves"]["rate/1"][n:] != b["curves"]["rate/1"][n:]  # the prior moves the rate afterwards
    m = a["metrics"]
    assert m["width_before"] == a["curves"]["width/1"][n - 1] == b["metrics"]["width_before"]
    assert m["width_after"] == a["curves"]["width/1"][-1]
    assert m["width_ratio"] == pytest.approx(m["width_after"] / m["width_before"])
    assert m["test_acc_before"] == a["curves"]["test_acc"][n - 1]


# ----------------------------------------------------------------------------- truncation (Sec. 5.4)


def _spiral_model(norm: str = "none", seed: int = 0) -> tuple[AdaptiveMLP, tuple[torch.Tensor, torch.Tensor]]:
    config = ac.compress_config("truncate", seed, norm, rate_init=0.1)  # 24 neurons: a quick curve
    torch.manual_seed(seed)
    model = common.build_model(config)
    test = common.load_splits(config)["test"]
    return model, test


@pytest.mark.parametrize("norm", common.ARMS)
def test_truncation_at_zero_is_the_untruncated_model(norm):
    model, test = _spiral_model(norm)
    curve = ac.truncation_curve(model, test)
    d = model.widths()[0]
    assert curve["removed"] == list(range(d)) and curve["fraction"][1] == pytest.approx(1 / d)
    assert curve["test_acc"][0] == evaluate(model, test, batch_size=4096)["accuracy"]


@pytest.mark.parametrize("norm", common.ARMS)
def test_removing_neurons_without_outgoing_weights_changes_nothing(norm):
    model, test = _spiral_model(norm, seed=1)
    d = model.widths()[0]
    dead = 7
    with torch.no_grad():  # output layer rho = [bias | weights of hidden neurons 0..D-1]
        model.layers[-1].rho[:, 1 + d - dead:] = 0.0
    curve = ac.truncation_curve(model, test)
    base = evaluate(model, test, batch_size=4096)["accuracy"]
    assert curve["test_acc"][: dead + 1] == [base] * (dead + 1)
    assert ac.lossless_fraction(curve["fraction"], curve["test_acc"], tolerance=0.0) >= dead / d
    # and the logits agree up to rounding
    from hacn_core.awnn import truncate

    torch.testing.assert_close(truncate(model, widths=[d - dead])(test[0]), model(test[0]), rtol=1e-5, atol=1e-5)


def test_truncation_curve_refuses_deep_models():
    model = AdaptiveMLP(in_dim=2, out_dim=2, n_hidden_layers=2, rate_init=0.3)
    with pytest.raises(ValueError, match="n_hidden_layers=2.*allowed: 1"):
        ac.truncation_curve(model, (torch.zeros(3, 2), torch.zeros(3, dtype=torch.long)))


def test_lossless_fraction_on_a_hand_made_curve():
    f = [0.0, 0.1, 0.2, 0.3, 0.4, 0.5]
    acc = [0.900, 0.903, 0.895, 0.880, 0.899, 0.5]
    # 0.895 is exactly 0.5 point below: still lossless; 0.880 ends the range; the later 0.899 does not count
    assert ac.lossless_fraction(f, acc) == 0.2
    assert ac.lossless_fraction(f, acc, tolerance=0.0) == 0.1
    assert ac.lossless_fraction(f, acc, tolerance=0.5) == 0.5
    assert ac.lossless_fraction([0.0], [0.7]) == 0.0
    with pytest.raises(ValueError, match="start at 0"):
        ac.lossless_fraction([0.1, 0.2], [0.9, 0.9])
    with pytest.raises(ValueError, match="equal length"):
        ac.lossless_fraction([0.0, 0.1], [0.9])


def test_activation_profile_is_eq14_per_neuron():
    model, test = _spiral_model("none")
    x = test[0][:50]
    lin = model.layers[0]
    with torch.no_grad():
        a = torch.clamp(x @ lin.weight.T + lin.bias, 0.0, 6.0)  # ReLU6
        h = (a * importances(model.rates()[0].item(), model.widths()[0])).double()
    prof = ac.activation_profile(model, x)
    torch.testing.assert_close(torch.tensor(prof["mean_abs"], dtype=torch.float64), h.abs().mean(0),
                               rtol=1e-5, atol=1e-7)
    torch.testing.assert_close(torch.tensor(prof["max"], dtype=torch.float64), h.max(0).values, rtol=1e-5, atol=1e-7)
    assert all(lo <= hi for lo, hi in zip(prof["q5"], prof["q95"], strict=True))


def test_exponential_fit_recovers_a_known_curve_and_skips_dead_neurons():
    v = [3.0 * math.exp(-0.2 * j) for j in range(12)]
    v[5] = 0.0  # a dead neuron
    out = ac.exponential_fit(v)
    assert out["A"] == pytest.approx(3.0) and out["b"] == pytest.approx(0.2) and out["r2"] == pytest.approx(1.0)
    assert out["n_fit"] == 11
    assert math.isnan(ac.exponential_fit([0.0, 1.0])["b"])


def test_truncate_run_metrics(tmp_path):
    config = ac.compress_config("truncate", 0, epochs=2)
    res = ac.train_compress(config, _ctx(tmp_path))
    m, c = res["metrics"], res["curves"]
    d = m["truncation_width"]
    assert d == c["width/1"][-1] == len(c["truncation/test_acc"]) == len(c["activation/mean_abs"])
    assert m["untruncated_test_acc"] == c["test_acc"][-1]  # the curve's first point is the trained model
    assert m["lossless_fraction"] == ac.lossless_fraction(c["truncation/fraction"], c["truncation/test_acc"])
    assert m["dead_neurons"] == sum(v == 0 for v in c["activation/mean_abs"])


# ----------------------------------------------------------------------------- configurations


@pytest.mark.parametrize(("overrides", "message"), [
    ({"study": "prune"}, r"study='prune' is not allowed; allowed: anneal, truncate"),
    ({"importance_norm": "softmax"}, r"importance_norm='softmax' is not allowed; allowed: none, active"),
    ({"rate_prior": "gamma"}, r"rate_prior='gamma' is not allowed; allowed: annealed, none"),
    ({"dataset": "Spiral"}, r"dataset='Spiral' is not allowed for study='anneal'; allowed: SpiralHard"),
    ({"prior_interpolation": "cosine"}, r"prior_interpolation='cosine' is not allowed; allowed: linear, geometric"),
    ({"prior_end_epoch": 3000}, r"prior_end_epoch=3000 must be <= epochs=2500"),
    ({"prior_sigma_end": 0.0}, r"sigma=0.0 must be > 0"),
])
def test_bad_configurations_name_the_field(overrides, message):
    with pytest.raises(ValueError, match=message):
        ac.check_config(ac.compress_config("anneal", 0) | overrides)


def test_truncate_study_refuses_a_prior_and_unknown_keys():
    with pytest.raises(ValueError, match="rate_prior='annealed' is not allowed for study='truncate'; allowed: none"):
        ac.check_config(ac.compress_config("truncate", 0) | {"rate_prior": "annealed"})
    with pytest.raises(ValueError, match=r"unknown configuration keys \['width'\]"):
        ac.compress_config("anneal", 0, width=3)


def test_profiles_and_links():
    exp = catalog.get(ac.EXPERIMENT_ID)
    paper = exp.runs("paper")
    anneal = [c for c in paper if c["study"] == "anneal"]
    assert len(anneal) == 2 * 2 * 10 and len(paper) - len(anneal) == 2 * 10
    for c in anneal:
        ac.check_config(c)
        assert (c["epochs"], c["prior_start_epoch"], c["prior_end_epoch"], c["prior_mu"], c["prior_sigma_start"],
                c["prior_sigma_end"], c["sigma_theta"], c["activation"]) == (2500, 1000, 2500, 0.05, 1.0, 0.1, None,
                                                                            "relu6")
    assert len(exp.runs("book")) == len(ac.BOOK_ANNEAL_SEEDS) * 4 + len(ac.BOOK_TRUNCATE_SEEDS) * 2
    for c in exp.runs("smoke"):
        ac.check_config(c)
    for link in exp.links:
        paper_items.item(link.item)  # every linked id exists
        assert any(matches(c, link.where) for c in paper)  # and selects paper runs
