"""The decoder's App. D ablations (hacn_core.hacn.studies.decoder_ablations, hacn-decoder-ablations): Table 6's
initialisations of the residual weights as the paper defines them, Table 7's runs without DepthLN, the main study's
hashes left as they were, the book budget, and a smoke run into a temp store."""

from __future__ import annotations

import math

import pytest
import torch

from hacn_core import catalog
from hacn_core.engine.results import ResultsStore, config_hash
from hacn_core.hacn.studies import decoder as hd
from hacn_core.hacn.studies import decoder_ablations as hda
from hacn_core.hacn.studies.common import DEPTH_INITS

L = 12  # the book decoder's depth
SIGMA = 0.005


def alphas(config: dict) -> torch.Tensor:
    """The residual weights a_1..a_L the study's model starts from."""
    model = hd.build_model(config)
    return torch.stack([p.detach() for n, p in model.named_parameters() if n.startswith("stack.alpha.")])


def book(slug: str, seed: int = 0, depth_ln: str = "auto") -> dict:
    return hda.make_config(slug, depth_ln, seed)


def main_noise(seed: int) -> torch.Tensor:
    """The standard normal draw behind hacn-decoder's own N(0.25, 0.005) at ``seed``."""
    return (alphas(hd.make_config("hacn", seed)) - 0.25) / SIGMA


# ----------------------------------------------------------------------------- Table 6's initialisations


@pytest.mark.parametrize("slug,mu,sigma", [("n0.15-0.01", 0.15, 0.01), ("n0.25-0.01", 0.25, 0.01),
                                           ("n0.15-0.005", 0.15, 0.005)])
def test_normal_rows_draw_the_main_studys_noise_at_their_mean_and_std(slug, mu, sigma):
    """a_i = mu + sigma z_i with the very z_i of the main study's N(0.25, 0.005) at the same seed: only the
    mean and the standard deviation change (Table 6)."""
    z = main_noise(0)
    assert torch.allclose(alphas(book(slug)), mu + sigma * z, atol=1e-6)


def test_half_layers_is_0_4_then_0_15():
    """Table 6's "half layers": N(0.4, 0.005) for the first half of the 12 layers, N(0.15, 0.005) for the rest."""
    a, z = alphas(book("half-layers")), main_noise(0)
    means = torch.tensor([0.4] * 6 + [0.15] * 6)
    assert torch.allclose(a, means + SIGMA * z, atol=1e-6)
    assert (a[:6] - 0.4).abs().max() < 5 * SIGMA and (a[6:] - 0.15).abs().max() < 5 * SIGMA
    # an odd depth gives the first half the middle layer: ceil(L / 2)
    odd = hd.make_config("hacn", 0, profile="smoke", num_layers=3, **hda.INITS["half-layers"])
    assert torch.allclose(alphas(odd), torch.tensor([0.4, 0.4, 0.15]), atol=5 * SIGMA)


def test_exp_decay_falls_exponentially_from_0_25_to_0_1():
    """Table 6's "exp. decay": mean 0.25 (0.1 / 0.25)^((l-1)/(L-1)) at layer l, noise 0.005: the first layer's
    mean 0.25, the last one's 0.1, and a constant ratio between neighbours."""
    a, z = alphas(book("exp-decay")), main_noise(0)
    means = torch.tensor([0.25 * 0.4 ** (i / (L - 1)) for i in range(L)])
    assert torch.allclose(a, means + SIGMA * z, atol=1e-6)
    assert means[0] == pytest.approx(0.25) and means[-1] == pytest.approx(0.1)
    assert torch.allclose(means[1:] / means[:-1], torch.full((L - 1,), 0.4 ** (1 / 11)))


def test_draws_are_reproducible_per_seed_and_differ_between_seeds():
    for slug in hda.INITS:
        assert torch.equal(alphas(book(slug, seed=1)), alphas(book(slug, seed=1)))
        assert not torch.equal(alphas(book(slug, seed=0)), alphas(book(slug, seed=1)))


def test_without_depthln_only_the_norms_change():
    """Table 7's runs: the same a_i, and no Depth-adaptive LayerNorm strength s (Eq. 7) in the model."""
    with_ln, without = book("n0.15-0.01"), book("n0.15-0.01", depth_ln="none")
    assert torch.equal(alphas(with_ln), alphas(without))
    names = [n for n, _ in hd.build_model(without).named_parameters()]
    assert not any(n.endswith("gain.strength") for n in names)
    # "one extra parameter per layer" (App. D)
    assert sum(n.endswith("gain.strength") for n, _ in hd.build_model(with_ln).named_parameters()) == L


# ----------------------------------------------------------------------------- the main study is unchanged


def test_the_main_studys_configurations_hash_as_before():
    """The default init names no new key: hacn-decoder's stored runs keep matching (hashes before the ablation
    options existed)."""
    assert [config_hash(hd.make_config(r, 0)) for r in ("resnet", "acn", "hacn")] == [
        "888a46f1092cc859", "6b940a18d4020068", "ac67c08affd5c233"]
    assert config_hash(hd.make_config("hacn", 0, profile="smoke")) == "77051bd03ba73926"
    assert hd.make_config("hacn", 0, alpha_init="normal") == hd.make_config("hacn", 0)
    assert not any("alpha_init" in c for c in hd.EXPERIMENT.runs("book"))


def test_each_ablation_run_is_the_main_hacn_but_for_its_init_and_depthln():
    for profile in ("smoke", "book", "paper"):
        main = {config_hash(c) for c in hd.EXPERIMENT.runs(profile)}
        for config in hda.EXPERIMENT.runs(profile):
            assert config_hash(config) not in main
            base = hd.make_config("hacn", config["seed"], profile=profile)
            changed = {k for k in config.keys() | base.keys() if config.get(k) != base.get(k)}
            assert changed <= {"alpha_mu", "alpha_sigma", "alpha_init", "alpha_mu_end", "depth_ln"}, changed
            hd.check_config(config)


def test_grids_and_the_book_budget():
    runs = {p: hda.EXPERIMENT.runs(p) for p in ("smoke", "book", "paper")}
    cells = {(c.get("alpha_init"), c["alpha_mu"], c.get("alpha_mu_end"), c["alpha_sigma"], c["depth_ln"])
             for c in runs["book"]}
    assert len(cells) == len(hda.ROWS) == 7 and ("half_layers", 0.4, 0.15, 0.005, "auto") in cells
    assert (None, 0.25, None, 0.005, "auto") not in cells  # hacn-decoder's own H-ACN
    assert {(c.get("alpha_init"), c["depth_ln"]) for c in runs["book"]} >= {("exp_decay", "auto"), (None, "none")}
    # seed 0 of all seven first, then seed 1 of Table 7's four cells
    assert [c["seed"] for c in runs["book"]] == [0] * 7 + [1] * 4
    assert {c["alpha_sigma"] for c in runs["book"] if c["seed"] == 1} == {0.01}
    assert len(runs["smoke"]) == 7 and len(runs["paper"]) == 21
    assert {c["num_layers"] for c in runs["paper"]} == {24} and {c["steps"] for c in runs["book"]} == {hd.BOOK_STEPS}
    minutes = hd.BOOK_STEPS * 493.0 / 60e3 + 1.0  # the decoder's measured H-ACN step, its minute of evaluation
    assert hda.book_cpu_hours() == pytest.approx(11 * minutes / 60) and hda.book_cpu_hours() <= hda.BUDGET_CPU_HOURS
    assert hda.book_cpu_hours(14) > hda.BUDGET_CPU_HOURS  # two seeds of every row would not fit
    assert f"about {hda.book_cpu_hours():.1f} CPU-hours" in hda.EXPERIMENT.setting["book"]
    assert catalog.get(hda.EXPERIMENT_ID) is hda.EXPERIMENT


# ----------------------------------------------------------------------------- bad input


BAD = [  # (entries on the book H-ACN, the error's words)
    ({"alpha_init": "normal", "alpha_mu_end": 0.1}, "alpha_init='normal' is not supported; allowed: half_layers, "
                                                    "exp_decay"),
    ({"alpha_init": "linear", "alpha_mu_end": 0.1}, "alpha_init='linear' is not supported"),
    ({"alpha_init": "half_layers"}, "alpha_mu_end=None must be a finite number"),
    ({"alpha_init": "exp_decay", "alpha_mu_end": float("nan")}, "alpha_mu_end=nan must be a finite number"),
    ({"alpha_init": "exp_decay", "alpha_mu_end": -0.1}, "must be > 0 for alpha_init='exp_decay'"),
    ({"alpha_mu_end": 0.1}, "alpha_init=None is not supported"),
    ({"alpha_sigma": -0.01}, "alpha_sigma=-0.01 must be a finite number >= 0"),
    ({"alpha_mu": math.inf}, "alpha_mu=inf must be a finite number"),
]


@pytest.mark.parametrize("entries,words", BAD)
def test_bad_init_entries_are_named(entries, words):
    with pytest.raises(ValueError, match=words):
        hd.check_config(hd.make_config("hacn", 0) | entries)


def test_a_depth_init_needs_residual_weights_and_the_ablation_names_its_rows():
    resnet = hd.make_config("resnet", 0) | {"alpha_init": "half_layers", "alpha_mu_end": 0.15}
    with pytest.raises(ValueError, match="alpha_init='half_layers' needs a rule with residual weights"):
        hd.check_config(resnet)
    with pytest.raises(ValueError, match="slug='n0.5-0.01' is not one of Table 6's initialisations; allowed: "
                                         "n0.15-0.01"):
        hda.make_config("n0.5-0.01", "auto", 0)
    with pytest.raises(ValueError, match="depth_ln='code' is not an ablation setting; allowed: auto, none"):
        hda.make_config("half-layers", "code", 0)
    assert set(DEPTH_INITS) == {c["alpha_init"] for c in hda.INITS.values() if "alpha_init" in c}


# ----------------------------------------------------------------------------- a smoke run


def test_smoke_runs_start_from_their_init_and_store_under_the_new_experiment(tmp_path):
    """The half-layers smoke run (2 layers: a_1 ~ N(0.4, 0.005), a_2 ~ N(0.15, 0.005)) trains through the decoder's
    train function; its recorded a at step 0 is the model's initial draw."""
    store = ResultsStore(tmp_path)
    (run,) = catalog.run(hda.EXPERIMENT_ID, "smoke", store=store, where={"alpha_init": "half_layers"},
                         allow_train=True, progress=False)
    assert run.experiment == hda.EXPERIMENT_ID and (tmp_path / hda.EXPERIMENT_ID).is_dir()
    start = run.curves["alpha_history"][0]
    assert start == pytest.approx(alphas(run.config).tolist(), abs=1e-7)
    assert start[0] == pytest.approx(0.4, abs=5 * SIGMA) and start[1] == pytest.approx(0.15, abs=5 * SIGMA)
    assert math.isfinite(run.metrics["val_perplexity"]) and run.metrics["steps"] == 20
    assert catalog.stored(hda.EXPERIMENT_ID, "smoke", store=store) == [run]
