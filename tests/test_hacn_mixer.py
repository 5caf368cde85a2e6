"""The H-ACN Mixer experiment: configurations, data, measurements, and the report's tables read off runs."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from hacn_core import paper_items
from hacn_core.hacn.connectivity import total_connectivity_strength
from hacn_core.hacn.studies import common
from hacn_core.hacn.studies import mixer as hm
from hacn_core.hacn.studies import mixer_report as hmr
from hacn_core.catalog import get
from hacn_core.engine.results import RunContext, RunResult, config_hash


def _fake_images(name: str, train: bool = True):
    """28x28 greyscale images whose class lights up one 7x7 patch (so a Mixer learns it quickly)."""
    gen = torch.Generator().manual_seed(1 if train else 2)
    n = 1200 if train else 300
    y = torch.randint(0, 10, (n,), generator=gen)
    X = torch.rand(n, 1, 28, 28, generator=gen) * 0.2
    for i, label in enumerate(y.tolist()):
        r, c = 7 * (label // 4), 7 * (label % 4)
        X[i, 0, r:r + 7, c:c + 7] += 0.8
    return X, y


@pytest.fixture
def fake_data(monkeypatch):
    monkeypatch.setattr(hm, "image_tensors", _fake_images)


def _smoke(rule: str = "hacn", **overrides):
    return hm.make_config(rule, 0, profile="smoke", **({"train_subset": 512, "batch_size": 64} | overrides))


# ----------------------------------------------------------------------------- configurations


def test_paper_profile_is_appendix_a():
    configs = hm.paper_configs()
    assert len(configs) == len({config_hash(c) for c in configs}) == 39
    c = next(c for c in configs if c["rule"] == "hacn" and c["alpha_mu"] == 0.25 and c["num_classes"] == 10)
    assert (c["dataset"], c["num_layers"], c["hidden_dim"], c["patch_size"]) == ("CIFAR10", 16, 128, 4)
    assert (c["channel_mlp_dim"], c["token_mlp_dim"], c["batch_size"], c["epochs"]) == (512, 64, 64, 300)
    assert (c["optimizer"], c["lr"], c["schedule"], c["alpha_sigma"]) == ("adamw", 1e-3, "cosine", 0.005)
    assert {c["alpha_mu"] for c in configs if c["rule"] == "hacn"} == {0.25, 0.75, 1.0}
    assert {c["seed"] for c in configs} == {0, 1, 2}
    # the rules without residual weights carry no init
    assert all(c["alpha_mu"] is None for c in configs if c["rule"] in ("resnet", "acn", "rezero", None))


def test_book_profile_covers_every_figure_with_three_seeds():
    configs = hm.book_configs()
    cells = {(c["arch"], c["rule"], c["alpha_mu"], c["num_classes"]) for c in configs}
    assert len(configs) == 3 * len(cells)
    for rule in hm.STUDY_RULES:
        assert any(cell[1] == rule for cell in cells)
    assert ("dense_mixer", None, None, 10) in cells
    assert {(r, 2) for r in ("resnet", "acn", "hacn")} <= {(cell[1], cell[3]) for cell in cells}


def test_bad_configuration_is_named():
    with pytest.raises(ValueError, match="dataset='CIFAR100'.*allowed: FashionMNIST, CIFAR10"):
        hm.check_config(_smoke(dataset="CIFAR100"))
    with pytest.raises(ValueError, match="rule='skip'.*allowed:.*hacn"):
        hm.check_config(_smoke(rule="skip"))
    with pytest.raises(ValueError, match="num_classes=5"):
        hm.check_config(_smoke(num_classes=5))
    with pytest.raises(ValueError, match="optimizer='sgd'"):
        hm.check_config(_smoke(optimizer="sgd"))
    with pytest.raises(ValueError, match="profile='huge'"):
        hm.make_config("hacn", 0, profile="huge")


def test_two_class_task_gets_the_same_number_of_steps():
    c10 = hm.make_config("hacn", 0)
    c2 = hm.make_config("hacn", 0, num_classes=2)
    steps10 = c10["epochs"] * math.ceil(c10["train_subset"] / c10["batch_size"])
    n2 = 12000 - min(hm.VAL_SIZE, 12000 // 10)  # 10,800 training images of classes 0 and 1
    per_epoch = math.ceil(n2 / c2["batch_size"])
    steps2 = hm.epochs_for(c2, n2) * per_epoch
    assert abs(steps2 - steps10) <= per_epoch / 2
    assert hm.epochs_for(c10, 20000) == c10["epochs"]


def test_links_point_at_existing_items():
    exp = get(hm.EXPERIMENT_ID)
    for link in exp.links:
        paper_items.item(link.item)  # raises for an unknown id
    assert [paper_items.item(hm.table2_item(mu)).id for mu in hm.TABLE2_MUS] == [
        "hacn/table2/mixer-mu0.25", "hacn/table2/mixer-mu0.75", "hacn/table2/mixer-mu1"]
    assert [paper_items.item(hm.table3_item(c)).id for c in (2, 10)] == [
        "hacn/table3/cifar2-gamma", "hacn/table3/cifar10-gamma"]


# ----------------------------------------------------------------------------- data and measurements


def test_data_splits_are_disjoint_standardised_and_two_class(fake_data):
    d10 = hm.load_data(_smoke(train_subset=None))
    X, y = d10["train"]
    assert len(X) + len(d10["val"][0]) == 1200 and len(d10["val"][0]) == 120
    assert X.mean().abs() < 1e-4 and (X.std() - 1).abs() < 1e-3
    # validation images are not training images
    train_rows = {tuple(r[:40].tolist()) for r in X.flatten(1)}
    assert not any(tuple(r[:40].tolist()) in train_rows for r in d10["val"][0].flatten(1))
    d2 = hm.load_data(_smoke(num_classes=2, train_subset=None))
    for split in ("train", "val", "test"):
        assert set(d2[split][1].unique().tolist()) <= {0, 1}


def test_saved_activation_bytes_counts_each_saved_tensor_once():
    for batch in (4, 8):
        model = nn.Sequential(nn.Linear(5, 7), nn.ReLU(), nn.Linear(7, 3))
        x, y = torch.randn(batch, 5), torch.randint(0, 3, (batch,))
        # input (5), ReLU output = second Linear's input (7, saved once), log-softmax (3),
        # int64 targets, and the loss's float32 total weight; the weights are not activations
        expected = batch * (5 + 7 + 3) * 4 + batch * 8 + 4
        assert hm.saved_activation_bytes(model, (x, y)) == expected
        assert all(p.grad is None for p in model.parameters())


def test_gamma_and_alpha_history():
    alphas = np.array([[1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0], [0.5, -0.5, 0.5, -0.5]])
    assert common.gamma_history(alphas).tolist() == pytest.approx([1.0, 0.0, 0.5])
    curves = {f"param/stack.alpha.{i}": [0.1 * i, 0.2 * i] for i in range(4)}
    hist = common.alpha_history(curves, 4)
    assert hist.shape == (2, 4) and hist[1].tolist() == pytest.approx([0, 0.2, 0.4, 0.6])
    assert common.alpha_history({}, 4) is None


def test_train_measures_what_the_chapters_show(fake_data, tmp_path):
    config = _smoke(epochs=3, record_every_steps=4, lr=3e-3)
    out = hm.train_hacn_mixer(config, RunContext(hm.EXPERIMENT_ID, tmp_path / "ckpt", progress=False))
    m, c = out["metrics"], out["curves"]
    L = config["num_layers"]
    assert len(c["layerwise_test_accuracy"]) == L + 1
    assert m["final_exit_accuracy"] == c["layerwise_test_accuracy"][-1] == pytest.approx(m["test_accuracy"])
    assert m["test_accuracy"] > 0.2 and c["train_loss"][-1] < c["train_loss"][0]  # it learns (chance: 0.1)
    # Gamma and Delta_t are computed from the recorded a_i; Delta ends at 0 and Gamma starts near mu
    assert len(c["gamma"]) == len(c["delta"]) == len(c["record_step"])
    assert c["delta"][-1] == 0.0 and c["gamma"][0] == pytest.approx(0.25, abs=0.02)
    assert m["gamma"] == pytest.approx(total_connectivity_strength(torch.tensor(c["alpha_final"])))
    # L residual weights plus, with the paper's Depth-adaptive LayerNorm, one strength per layer
    assert m["extra_parameters"] == 2 * L
    assert m["saved_activation_bytes"] > 0 and m["seconds_per_epoch"] > 0


def test_densenet_mixer_and_resnet_runs_have_no_gamma(fake_data, tmp_path):
    ctx = RunContext(hm.EXPERIMENT_ID, tmp_path / "ckpt", progress=False)
    dense = hm.train_hacn_mixer(_smoke("resnet", arch="dense_mixer"), ctx)
    assert "gamma" not in dense["metrics"] and len(dense["curves"]["layerwise_test_accuracy"]) == 3


# ----------------------------------------------------------------------------- tables


def _result(rule: str, seed: int, acc: float, alphas, classes: int = 10, mu: float | None = 0.25) -> RunResult:
    config = hm.make_config(rule, seed, profile="smoke", num_classes=classes, alpha_mu=mu)
    metrics = {"test_accuracy": acc, "first_half_exit_accuracy": acc - 0.1, "parameters": 100,
               "seconds_per_epoch": 1.0, "saved_activation_bytes": 2**20}
    curves = {"layerwise_test_accuracy": [0.1, acc - 0.1, acc]}
    if alphas is not None:
        metrics["gamma"] = float(np.linalg.norm(alphas) / math.sqrt(len(alphas)))
        curves["alpha_final"] = list(alphas)
    return RunResult(experiment=hm.EXPERIMENT_ID, config=config, config_hash=config_hash(config), seed=seed,
                     metrics=metrics, curves=curves, provenance={})


def test_tables_put_the_papers_values_beside_ours():
    results = [_result("hacn", s, a, [0.3, 0.2, 0.1 + 0.01 * s]) for s, a in ((0, 0.90), (1, 0.92))]
    results += [_result("hacn", 0, 0.88, [0.1, 0.1, 0.1], classes=2), _result("resnet", 0, 0.9, None, mu=None)]
    t2 = hmr.table2(results)
    assert t2.loc[0.25, "paper (CIFAR-10, %)"] == 90.2 and t2.loc[0.25, "ours (%)"] == "91.0 (1.4), n=2"  # mean (std) over seeds
    assert t2.loc[0.75, "ours (%)"] == "-"
    # H-ACN Table 2 and Table 3 as the study typed them before hacn_core.paper_items became their one source
    assert t2["paper (CIFAR-10, %)"].to_dict() == {0.25: 90.2, 0.75: 89.7, 1.0: 88.7}
    t3 = hmr.table3(results)
    assert t3.loc["2 classes", "paper Gamma"] == 0.326 and t3.loc["2 classes", "ours Gamma"] == "0.100, n=1"
    assert t3.set_index("paper task")["paper Gamma"].to_dict() == {"CIFAR-2": 0.326, "CIFAR-10": 0.428,
                                                                   "ImageNet": 0.930}
    corr = hmr.seed_correlations(results)
    assert (corr["paper (Mixer/CIFAR-10, %)"] == 92.0).all()  # Sec. 4, "Robustness of initialization"
    assert corr.loc["all L weights", "seed pairs"] == 1
    assert corr.loc["all L weights", "mean Pearson (%)"] == pytest.approx(
        100 * np.corrcoef([0.3, 0.2, 0.1], [0.3, 0.2, 0.11])[0, 1])
    table = hmr.comparison_table(results)
    assert list(table.index) == ["ResNet", "H-ACN"] and table.loc["ResNet", "Γ"] == "-"
    both = hmr.seed_correlations_by_rule(results + [_result("hacn_code_mixer", s, 0.9, [0.5, 0.1 * s, 0.2])
                                                    for s in (0, 1, 2)])
    assert list(both.columns[:2]) == ["rule", "weights"] and list(both["seed pairs"]) == [1, 1, 3, 3]
    assert list(both["rule"]) == ["H-ACN"] * 2 + ["H-ACN (public code rule)"] * 2
    assert both["mean Pearson (%)"].iloc[0] == corr.loc["all L weights", "mean Pearson (%)"]
    assert hmr.seed_correlations_by_rule(results[:1]).empty  # one seed: no pair to correlate


def test_step_costs_are_measured_for_every_architecture_side_by_side(tmp_path):
    config = hm.cost_config("smoke") | {"repeats": 2, "steps": 1}
    out = hm.measure_step_costs(config, RunContext(hm.COST_ID, tmp_path / "ckpt", progress=False))
    m = out["metrics"]
    names = [("dense_mixer" if arch == "dense_mixer" else rule) for arch, rule in hm.COST_ARCHS]
    for n in names:
        assert m[f"{n}/ms_per_step"] > 0 and len(out["curves"][f"{n}/seconds_per_step"]) == 2
    assert m["resnet/ratio_to_resnet"] == 1.0
    # the rules add only their mixing scalars to the ResNet Mixer
    L = config["num_layers"]
    assert m["rezero/parameters"] - m["resnet/parameters"] == L
    assert m["hacn/parameters"] - m["resnet/parameters"] == 2 * L  # a_i and Depth-adaptive LN strengths
    assert m["denseformer/saved_activation_bytes"] > m["resnet/saved_activation_bytes"]
