"""Tests for the AWNN tabular study (``hacn_core.awnn.studies.adaptive`` and its report).

The configurations of each profile against the paper's Table 3, the links to
Table 1, the data the runs see, and the wiring of one tiny run: ``N`` is the
training-set size, the stored widths follow the rates (Eq. 11), the ELBO total is
the sum of its terms, and the best-epoch metrics are read off the stored curves.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from hacn_core import paper_items
from hacn_core.awnn import quantile_width
from hacn_core.awnn.studies import adaptive as aa
from hacn_core.awnn.studies import adaptive_report as ar
from hacn_core.awnn.studies import common
from hacn_core.awnn.studies import tabular as at
from hacn_core.engine.registry import matches
from hacn_core.engine.results import RunContext, RunResult, config_hash

PAPER_TABLE3 = {  # dataset: (epochs, batch), App. C.1 Table 3
    "DoubleMoon": (500, 32),
    "Spiral": (1000, 128),
    "SpiralHard": (5000, 128),
}


def _experiment():

    return aa.EXPERIMENT


def test_paper_profile_is_the_papers_setting():
    runs = _experiment().runs("paper")
    table = [c for c in runs if c["study"] == "table1"]
    assert len(table) == 3 * 2 * 10
    for c in table:
        epochs, batch = PAPER_TABLE3[c["dataset"]]
        assert (c["epochs"], c["batch_size"]) == (epochs, batch)
        assert c["hidden_layers"] == (2 if c["dataset"] == "SpiralHard" else 1)
        assert (c["optimizer"], c["lr"], c["rate_init"], c["k"]) == ("adam", 0.01, 0.01, 0.9)
        assert c["rate_prior"] is None and c["sigma_theta"] == 10.0 and c["init"] == "kaiming_plus"
        assert (c["activation"], c["grow_init"], c["data"], c["input_scale"], c["n_train_scale"]) == (
            "relu6", "normal", "shared", 1.0, 1.0)
    for d in aa.DATASETS:
        for arm in aa.ARMS:
            assert sorted(c["seed"] for c in table if c["dataset"] == d and c["importance_norm"] == arm) == list(
                range(10))
    assert quantile_width(0.01, 0.9) == 231  # the paper's "approximately 256"


def test_book_is_the_paper_profile_and_smoke_is_tiny():
    exp = _experiment()
    paper = [config_hash(c) for c in exp.runs("paper")]
    book = exp.runs("book")
    assert [config_hash(c) for c in book] == paper  # the ledger counts every book run as the paper's setting
    hard = [c for c in book if c["study"] == "table1" and c["dataset"] == "SpiralHard"]
    assert sorted(c["seed"] for c in hard) == sorted(2 * list(range(10)))  # 10 seeds per arm
    smoke = exp.runs("smoke")
    assert {c["epochs"] for c in smoke} == {3} and {c["seed"] for c in smoke} == {0, 1}
    assert {c["dataset"] for c in smoke} == set(aa.DATASETS)


def test_diagnosis_changes_one_factor_at_a_time():
    diag = [c for c in _experiment().runs("paper") if c["study"] == "diagnosis"]
    labels = [aa.diagnosis_label(c) for c in diag]
    assert set(labels) == set(aa.DIAGNOSIS_VARIANTS)
    base = aa.adaptive_config("Spiral", 0, study="diagnosis", epochs=aa.DIAG_EPOCHS)
    for label, overrides in aa.DIAGNOSIS_VARIANTS.items():
        assert len(overrides) <= 2 and all(base[k] != v for k, v in overrides.items()), label
    longs = [c for c in diag if c["epochs"] == 1000]
    assert {aa.diagnosis_label(c) for c in longs} == {"public geometry", "public geometry, renormalised"}


def test_links_point_at_table1_with_the_papers_spread():
    exp = _experiment()
    items = {link.item: link for link in exp.links}
    for d in aa.DATASETS:
        acc = items[f"awnn/table1/{d.lower()}-awnn-accuracy"]
        width = items[f"awnn/table1/{d.lower()}-awnn-width"]
        assert acc.scale == 100.0 and acc.tolerance == 1.0 and acc.metric == "test_acc"
        assert width.tolerance == paper_items.item(width.item).paper_std and width.metric == "total_width"
        assert dict(acc.where) == {"study": "table1", "dataset": d, "importance_norm": "none"}
    paper = exp.runs("paper")
    for link in exp.links:  # each link selects exactly the 10 paper runs of one dataset and arm
        assert sum(matches(c, link.where) for c in paper) == 10


@pytest.mark.parametrize(
    "override,field,allowed",
    [
        ({"data": "moons"}, "data", "shared, spiral-r4pi-2turns"),
        ({"importance_norm": "sum"}, "importance_norm", "none, active"),
        ({"study": "ablation"}, "study", "table1, diagnosis"),
    ],
)
def test_bad_configuration_names_the_field(override, field, allowed):
    config = aa.adaptive_config("Spiral", 0) | override
    with pytest.raises(ValueError) as err:
        aa.train_adaptive_mlp(config, RunContext("x", checkpoint_dir=None))  # type: ignore[arg-type]
    assert field in str(err.value) and allowed in str(err.value)
    with pytest.raises(ValueError, match="Spiral"):
        aa.train_adaptive_mlp(aa.adaptive_config("DoubleMoon", 0, data="spiral-r4pi-2turns"),
                              RunContext("x", checkpoint_dir=None))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown configuration keys"):
        aa.adaptive_config("Spiral", 0, width=8)


def test_data_of_the_runs():
    shared = common.load_splits(aa.adaptive_config("Spiral", 0))
    assert [len(shared[k][1]) for k in ("train", "val", "test")] == [1750, 250, 500]
    scaled = common.load_splits(aa.adaptive_config("Spiral", 0, input_scale=2.0))
    torch.testing.assert_close(scaled["test"][0], 2 * shared["test"][0])
    x, y = common.public_geometry_spiral(0)
    assert x.shape == (2500, 2) and int(y.sum()) == 1250
    r = x.norm(dim=1)
    assert r.max() < 4 * math.pi + 1.5 and r.max() > 4 * math.pi - 0.5  # radius 4 pi plus noise 0.3
    wide = common.load_splits(aa.adaptive_config("Spiral", 0, data="spiral-r4pi-2turns"))
    assert [len(wide[k][1]) for k in ("train", "val", "test")] == [1750, 250, 500]


def test_tiny_run_wiring(tmp_path):
    config = aa.adaptive_config("Spiral", 0, epochs=3, study="diagnosis", n_train_scale=0.1)
    out = aa.train_adaptive_mlp(config, RunContext(aa.EXPERIMENT_ID, tmp_path / "ckpt", progress=False))
    m, c = out["metrics"], out["curves"]
    assert m["n_train"] == 175  # N = n_train_scale x the 1750 training points
    main = aa.train_adaptive_mlp(aa.adaptive_config("Spiral", 0, epochs=1), RunContext(aa.EXPERIMENT_ID, tmp_path / "c2",
                                                                               progress=False))
    assert main["metrics"]["n_train"] == 1750  # the true training-set size
    assert c["record_epoch"] == [0, 1, 2, 3] and m["start_width"] == 231
    # the stored width is the quantile width (Eq. 11) of the stored rate
    for w, nu in zip(c["width/1"], c["rate/1"]):
        assert abs(w - quantile_width(nu)) <= 1  # the rate is stored to 5 significant digits
    best = int(np.argmax(c["val_acc"]))
    assert m["total_width"] == c["width/1"][best] and m["best_epoch"] == c["record_epoch"][best]
    assert m["test_acc"] == c["test_acc"][best] and m["final_total_width"] == c["width/1"][-1]
    assert math.isnan(c["elbo/total"][0])
    for e in range(1, 4):
        parts = c["elbo/predictive"][e] + c["elbo/weight_prior"][e] + c["elbo/width_prior"][e]
        assert c["elbo/total"][e] == pytest.approx(parts, rel=1e-5)
        assert c["elbo/width_prior"][e] == 0.0  # uninformative rate prior


def test_table1_helper_formats_mean_and_std():
    def result(exp, dataset, arm, seed, acc, width):
        config = aa.adaptive_config(dataset, seed, arm) if exp == aa.EXPERIMENT_ID else at.fixed_config(dataset, seed)
        metrics = {"test_acc": acc, "total_width": width, "final_total_width": width - 10}
        return RunResult(exp, config, "h", seed, metrics)

    adaptive = [result(aa.EXPERIMENT_ID, "Spiral", "none", s, a, w) for s, (a, w) in enumerate([(0.99, 60), (1.0, 70)])]
    fixed = [result(aa.FIXED_ID, "Spiral", None, s, 0.995, 16) for s in range(2)]
    table = ar.table1(adaptive, fixed)
    acc, width, end = (table.loc[("Spiral", q)] for q in ("test acc (%)", "total width", "total width at the end"))
    assert acc["AWNN Eq. 14 (ours)"] == "99.5 (0.7)" and acc["fixed (ours)"] == "99.5 (0.0)"
    assert width["AWNN Eq. 14 (ours)"] == "65.0 (7.1)" and end["AWNN Eq. 14 (ours)"] == "55.0 (7.1)"
    assert width["AWNN (paper)"] == "65.9 (8.7)" and width["fixed (ours)"] == "16" and width["fixed (paper)"] == "16"
    assert acc["AWNN renormalised (ours)"] == "-" and acc["AWNN (paper)"] == "99.8 (0.1)"


def test_fixed_seed_table_separates_a_stuck_seed_from_underfitting_per_shape():
    def result(dataset, seed, acc, loss, layers=1, width=8):
        config = {"dataset": dataset, "seed": seed, "width": width, "hidden_layers": layers}
        return RunResult(aa.FIXED_ID, config, "h", seed, {"test_acc": acc}, curves={"train_loss": [1.0, loss]})

    fixed = [result("DoubleMoon", s, a, l) for s, (a, l) in enumerate([(0.998, 1e-4), (0.878, 0.21), (0.996, 3e-3)])]
    fixed += [result("SpiralHard", s, a, l, 1, 32) for s, (a, l) in enumerate([(0.946, 0.14), (0.907, 0.18)])]
    fixed += [result("SpiralHard", s, 0.99, 0.01, 2, 16) for s in range(2)]
    table = ar.fixed_seed_table(fixed)
    moon, hard, deep = (table.loc[k] for k in (("DoubleMoon", "1 x 8"), ("SpiralHard", "1 x 32"), ("SpiralHard", "2 x 16")))
    assert moon["test acc (%) per seed"] == "99.8 87.8 99.6" and moon["seeds below 95%"] == "1"
    # std of 99.8, 87.8, 99.6 (ddof=1): sqrt(94.43 / 2) = 6.87
    assert moon["final train loss, min-max"] == "0.0001-0.2100" and moon["mean (std)"] == "95.7 (6.9)"
    assert hard["seeds below 95%"] == "0, 1" and deep["seeds below 95%"] == "none" and deep["mean (std)"] == "99.0 (0.0)"
    assert list(table.index) == [("DoubleMoon", "1 x 8"), ("SpiralHard", "1 x 32"), ("SpiralHard", "2 x 16")]


def test_table1_and_fixed_plus_read_only_the_table1_baseline_shape():
    """On SpiralHard Table 1's baseline is 2 x 16; 1 x 32 and 4 x 8 stand beside it, never inside its mean."""
    from hacn_core.awnn.studies import ablations_report as abr

    def result(layers, width, acc):
        config = at.fixed_config("SpiralHard", 0, **({} if layers == 1 else {"hidden_layers": layers, "width": width}))
        return RunResult(aa.FIXED_ID, config, "h", 0, {"test_acc": acc, "total_width": layers * width})

    fixed = [result(1, 32, 0.5), result(2, 16, 0.9), result(4, 8, 0.5)]
    assert [at.is_table1_baseline(r.config) for r in fixed] == [False, True, False]
    awnn_run = RunResult(aa.EXPERIMENT_ID, aa.adaptive_config("SpiralHard", 0), "h", 0,
                         {"test_acc": 1.0, "total_width": 40, "final_total_width": 30})
    table = ar.table1([awnn_run], fixed)
    assert table.loc[("SpiralHard", "test acc (%)"), "fixed (ours)"] == "90.0"
    assert table.loc[("SpiralHard", "total width"), "fixed (ours)"] == "32"
    assert abr.fixed_plus_table([], fixed).loc[("SpiralHard", "Fixed (2 x 16)"), "test acc (%), ours"] == "90.0"
    others = [c for c in at.paper_configs() if not at.is_table1_baseline(c)]
    assert sorted({(c["hidden_layers"], c["width"]) for c in others}) == [(1, 32), (4, 8)]
    assert {c["dataset"] for c in others} == {"SpiralHard"} and len(others) == 20
    # every configuration of the first runs is unchanged (their stored hashes still load)
    assert [c for c in at.paper_configs() if c["hidden_layers"] == 1] == [at.fixed_config(d, s) for d in at.TASKS for s in range(10)]


def test_shared_pieces_of_the_tabular_studies():
    """``common`` and the engine helpers the reports share: known values, and the refusal names the field."""
    from hacn_core.engine.stats import round_significant
    from hacn_core.engine.tables import mean_std

    assert round_significant([0.0123456789, 98765.4321, float("nan")], 5)[:2] == [0.012346, 98765.0]
    assert math.isnan(round_significant([float("nan")], 6)[0])
    assert mean_std([]) == "-" and mean_std([0.25]) == "0.2" and mean_std([1.0, 2.0, 3.0], 2) == "2.00 (1.00)"
    assert common.paper_text("awnn/table1/spiral-awnn-width") == "65.9 (8.7)"
    assert common.paper_text("awnn/table1/spiral-fixed-width") == "16"  # no spread printed
    with pytest.raises(ValueError, match="qualitative"):
        common.paper_text("awnn/eq12/discretized-exponential")
    assert common.best_record([0.5, 0.9, 0.9, 0.7]) == 1  # the first of the best
    with pytest.raises(ValueError, match=r"arm='x' is not allowed; allowed: none, active"):
        common.check_choice("arm", "x", common.ARMS)
    # the widths read from Table 1 keep every stored configuration's hash
    assert {d: t["width"] for d, t in at.TASKS.items()} == {"DoubleMoon": 8, "Spiral": 16, "SpiralHard": 32}
    assert all(type(t["width"]) is int for t in at.TASKS.values())
    assert at.TABLE1_SHAPES == {"DoubleMoon": (1, 8), "Spiral": (1, 16), "SpiralHard": (2, 16)}
    assert at.GRID_DEPTHS == {"SpiralHard": ((2, 16), (4, 8))}
    assert {d: (t["epochs"], t["batch_size"]) for d, t in aa.TASKS.items()} == PAPER_TABLE3
