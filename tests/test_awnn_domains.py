"""AWNN's image and graph studies (``awnn-images``, ``awnn-graphs``): AWNN Sec. 4, Tables 4-5, Figs. 9 and 11.

Smoke runs end to end into a temporary store with metrics checked against their curves
(the stored width is the quantile of the stored rate, the best epoch is the best
validation record), a killed and resumed run equals the uninterrupted one, Errica et
al.'s model selection on a hand-made table, patience-based early stopping, and clear
errors for bad configurations and missing data.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from hacn_core import catalog
from hacn_core.awnn import quantile_width
from hacn_core.awnn.studies import graphs as gr
from hacn_core.awnn.studies import images as im
from hacn_core.awnn.studies.common import SplitAccuracy
from hacn_core.engine.data import DatasetMissingError, missing_files
from hacn_core.engine.results import ResultsStore, RunContext, pinned_threads

from _resume import resumed_equals_uninterrupted  # tests/_resume.py

needs_images = pytest.mark.skipif(bool(missing_files("MNIST") or missing_files("FashionMNIST")),
                                  reason="MNIST / Fashion-MNIST are not under $HACN_DATA")
needs_graphs = pytest.mark.skipif(bool(missing_files("MUTAG")), reason="MUTAG is not under $HACN_DATA")


@pytest.fixture(autouse=True)
def _one_thread():
    with pinned_threads(1):  # many small ops on a loaded 2-core machine are slower with two
        yield


# --------------------------------------------------------------------------------- configurations


def test_profiles_are_table4_and_table5_and_the_stated_book_subsets():
    paper = im.paper_configs()
    assert len(paper) == 3 * 6 * 10 and {c["dataset"] for c in paper} == {"MNIST", "CIFAR10", "CIFAR100"}
    c = im.image_config("CIFAR10", "adaptive", 0, 0)
    assert (c["epochs"], c["milestones"], c["lr"], c["momentum"], c["weight_decay"], c["batch_size"]) == (
        200, (50, 100, 150), 0.1, 0.9, 1e-4, 128)
    assert c["augment"] and not im.image_config("MNIST", "fixed", 0, 0)["augment"]
    assert c["sigma_theta"] == 1.0 and quantile_width(c["rate_init"], c["k"]) == 116  # Table 4, "about 128"
    assert sorted({c["head_width"] for c in paper if c["head"] == "fixed"}) == [0, 32, 128, 256, 512]
    book = im.book_configs()
    assert len(book) == 30 and {c["epochs"] for c in book} == {4} and {c["milestones"] for c in book} == {(1, 2, 3)}
    seeds = {(c["dataset"], c["head"]): set() for c in book}
    for c in book:
        seeds[c["dataset"], c["head"]].add(c["seed"])
    assert {k: sorted(v) for k, v in seeds.items()} == {  # five adaptive runs a dataset for Fig. 9's width comparison
        (d, h): [0, 1, 2, 3, 4] if h == "adaptive" else [0, 1]
        for d in ("MNIST", "FashionMNIST") for h in ("adaptive", "fixed")}
    gp = [c for c in gr.paper_configs() if c["dataset"] == "NCI1"]  # REDDIT-B: tests/test_awnn_reddit.py
    assert len(gp) == 10 * 12 * 2 * 3 and {(c["epochs"], c["patience"], c["lr"]) for c in gp} == {(1000, 500, 0.01)}
    assert {(c["batch_size"], c["layers"], c["pooling"]) for c in gp} == {
        (b, L, p) for b in (32, 128) for L in (1, 2, 4) for p in ("sum", "mean")}
    gb = gr.book_configs()
    assert sum(c["dataset"] == "NCI1" for c in gb) == 60 and sum(c["dataset"] == "MUTAG" for c in gb) == 240
    for exp in (im.EXPERIMENT, gr.EXPERIMENT):
        assert catalog.get(exp.id) is exp and set(exp.setting) == {"smoke", "book", "paper"}


@pytest.mark.parametrize(
    ("module", "config", "field", "allowed"),
    [
        (im, {"dataset": "SVHN"}, "dataset", "MNIST, FashionMNIST, CIFAR10, CIFAR100"),
        (im, {"head": "wide"}, "head", "adaptive, fixed"),
        (im, {"head_width": 32}, "head_width", "0"),
        (im, {"trace_every": 0}, "trace_every", ">= 1"),
        (gr, {"pooling": "max"}, "pooling", "sum, mean"),
        (gr, {"mlp": "gated"}, "mlp", "adaptive, fixed"),
        (gr, {"fold": 10}, "fold", "[0, 9]"),
        (gr, {"dataset": "ENZYMES"}, "dataset", "NCI1, MUTAG"),
        (gr, {"layers": 0}, "layers", ">= 1"),
    ],
)
def test_bad_configuration_names_the_field_and_the_allowed_values(module, config, field, allowed):
    base = im.image_config("MNIST", "adaptive", 0, 0) if module is im else gr.graph_config("MUTAG", 0, "adaptive", 0)
    with pytest.raises(ValueError) as err:
        module.check_config(base | config)
    assert field in str(err.value) and allowed in str(err.value)
    with pytest.raises(ValueError, match="unknown configuration keys"):
        base = module.image_config("MNIST", "fixed", 0, 0, width=3) if module is im else module.graph_config(
            "MUTAG", 0, "fixed", 0, width=3)


def test_cifar_offline_fails_with_the_missing_data_error(tmp_path, monkeypatch):
    monkeypatch.setenv("HACN_DATA", str(tmp_path))
    monkeypatch.setenv("HACN_DOWNLOAD", "0")
    config = im.image_config("CIFAR10", "adaptive", 0, 0)
    with pytest.raises(DatasetMissingError) as err:
        im.train_image_run(config, RunContext(im.EXPERIMENT_ID, None, progress=False))
    assert "CIFAR10" in str(err.value) and "fetch" in str(err.value) and str(tmp_path) in str(err.value)


# --------------------------------------------------------------------------------- protocol pieces


def test_patience_stops_once_the_best_validation_record_is_that_old():
    model = torch.nn.Linear(2, 2)
    with torch.no_grad():
        model.weight.zero_()
        model.bias.copy_(torch.tensor([1.0, 0.0]))  # always class 0
    val = (torch.zeros(4, 2), torch.tensor([0, 0, 1, 1]))  # accuracy 0.5
    cb = SplitAccuracy(val, val, patience=2)
    state = SimpleNamespace(model=model, curves={"val_acc": [0.9, 0.6]}, stop=False)
    assert cb.on_record(state) == {"val_acc": 0.5, "test_acc": 0.5}
    assert state.stop  # best (0.9) two records before this one
    state = SimpleNamespace(model=model, curves={"val_acc": [0.4, 0.6]}, stop=False)
    cb.on_record(state)
    assert not state.stop  # best one record old
    with pytest.raises(ValueError, match="patience"):
        SplitAccuracy(val, val, patience=0)


def test_model_selection_picks_the_best_mean_validation_point_per_fold():
    def run(fold, mlp, layers, seed, val, test, width):
        config = {"dataset": "NCI1", "mlp": mlp, "fold": fold, "batch_size": 32, "layers": layers,
                  "pooling": "sum", "seed": seed}
        return SimpleNamespace(config=config, metrics={"val_acc": val, "test_acc": test, "total_width": width})

    results = [run(0, "adaptive", 1, 0, 0.70, 0.60, 100), run(0, "adaptive", 1, 1, 0.80, 0.64, 120),  # mean 0.75
               run(0, "adaptive", 2, 0, 0.74, 0.90, 300), run(0, "adaptive", 2, 1, 0.74, 0.70, 310),  # mean 0.74
               run(1, "adaptive", 2, 0, 0.60, 0.55, 200), run(0, "fixed", 4, 0, 0.50, 0.52, 320)]
    sel = gr.select_per_fold(results)
    assert set(sel) == {("NCI1", "adaptive", 0), ("NCI1", "adaptive", 1), ("NCI1", "fixed", 0)}
    best = sel["NCI1", "adaptive", 0]
    assert best["grid"] == {"batch_size": 32, "layers": 1, "pooling": "sum"} and best["seeds"] == [0, 1]
    assert best["test_acc"] == pytest.approx(0.62) and best["total_width"] == pytest.approx(110)
    assert sel["NCI1", "adaptive", 1]["test_acc"] == 0.55


# --------------------------------------------------------------------------------- smoke runs


@needs_images
def test_images_smoke_runs_end_to_end(tmp_path):
    results = catalog.run(im.EXPERIMENT_ID, "smoke", store=ResultsStore(tmp_path), where={"dataset": "MNIST"},
                          progress=False)
    assert len(results) == 3 and all((tmp_path / im.EXPERIMENT_ID).glob("*.json"))
    for r in results:
        m, c = r.metrics, r.curves
        best = int(np.argmax(c["val_acc"]))
        assert c["record_epoch"] == [0, 1, 2] and m["best_epoch"] == best and m["test_acc"] == c["test_acc"][best]
        assert 0.0 <= m["test_acc"] <= 1.0 and m["n_train"] == 128
        assert c["trace_step"] == list(range(5))  # 2 epochs of 2 steps, every step
        if r.config["head"] == "adaptive":
            assert m["start_width"] == 116 == c["trace_width"][0]
            for w, nu in zip(c["width"], c["rate"]):
                assert abs(w - quantile_width(nu)) <= 1  # Eq. 11 (the rate is stored to 5 digits)
            assert m["width"] == c["width"][best] and m["final_width"] == c["width"][-1] == c["trace_width"][-1]
            assert c["trace_width"][2] == c["width"][1]  # after epoch 1's 2 steps
            for e in (1, 2):
                parts = sum(c[f"elbo/{t}"][e] for t in ("predictive", "weight_prior", "width_prior"))
                assert c["elbo/total"][e] == pytest.approx(parts, rel=1e-5)
        else:
            assert set(c["trace_width"]) == {0} and m["width"] == m["final_width"] == r.config["head_width"]


@needs_graphs
def test_graphs_smoke_runs_end_to_end(tmp_path):
    results = catalog.run(gr.EXPERIMENT_ID, "smoke", store=ResultsStore(tmp_path), where={"dataset": "MUTAG"},
                          progress=False)
    assert len(results) == 4
    n = {0: None, 1: None}
    for r in results:
        m, c = r.metrics, r.curves
        best = int(np.argmax(c["val_acc"]))
        assert m["test_acc"] == c["test_acc"][best] and len(m["widths"]) == r.config["layers"] + 1
        n[r.config["fold"]] = m["n_train"]
        if r.config["mlp"] == "adaptive":
            assert c["widths"][0] == [116, 116] and m["widths"] == c["widths"][best]
            for ws, rs in zip(c["widths"], c["rates"]):
                assert all(abs(w - quantile_width(nu)) <= 1 for w, nu in zip(ws, rs))
        else:
            assert m["widths"] == [64, 64]
    # 188 graphs: 19 or 18 test graphs per fold, 10% of the rest held out for validation
    assert all(150 <= v <= 153 for v in n.values())


# --------------------------------------------------------------------------------- resume


@needs_images
def test_an_image_run_resumed_equals_the_uninterrupted_one(tmp_path, monkeypatch):
    config = im.image_config("FashionMNIST", "adaptive", 0, 0, epochs=2, milestones=(1,), train_subset=192,
                             eval_subset=64, trace_every=1, batch_size=64)
    ref = resumed_equals_uninterrupted(im, im.train_image_run, config, tmp_path, monkeypatch, kill_at=5)
    assert len(ref["curves"]["trace_step"]) == 7  # 2 epochs of 3 steps, and step 0


@needs_graphs
def test_a_graph_run_resumed_equals_the_uninterrupted_one(tmp_path, monkeypatch):
    config = gr.graph_config("MUTAG", 3, "adaptive", 1, epochs=3, layers=2)
    ref = resumed_equals_uninterrupted(gr, gr.train_graph_run, config, tmp_path, monkeypatch, kill_at=7)
    assert ref["curves"]["record_epoch"] == [0, 1, 2, 3] and not math.isnan(ref["metrics"]["test_acc"])
