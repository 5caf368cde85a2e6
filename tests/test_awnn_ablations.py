"""Tests of the AWNN stability ablations (Figs. 4, 10) and of Fixed+ (App. D)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from torch import nn

from hacn_core import paper_items
from hacn_core.awnn import quantile_width
from hacn_core.awnn.studies import ablations as ab
from hacn_core.awnn.studies import ablations_report as abr
from hacn_core.awnn.studies import compress
from hacn_core.awnn.studies import tabular as at
from hacn_core.engine.registry import matches
from hacn_core.engine.results import RunContext, RunResult, config_hash


def _ctx(tmp_path: Path) -> RunContext:
    return RunContext("awnn-ablations-test", tmp_path, progress=False)


def _fake(config: dict, **metrics) -> RunResult:
    return RunResult(ab.EXPERIMENT_ID, config, config_hash(config), config["seed"], metrics)


# ----------------------------------------------------------------------------- the grid


def test_grid_holds_exactly_the_paper_cells():
    cells = ab.grid_cells()
    assert len(cells) == len(set(cells)) == 27  # 3 activations x (5 batch sizes + 5 rates - the shared cell)
    for act in ("relu6", "relu", "leaky_relu"):
        mine = {(b, r) for a, b, r in cells if a == act}
        batch_sweep = {(b, 0.01) for b in (32, 128, 256, 512, 1024)}
        rate_sweep = {(128, r) for r in (0.001, 0.005, 0.01, 0.05, 0.1)}
        assert mine == batch_sweep | rate_sweep
    assert {a for a, _, _ in cells} == {"relu6", "relu", "leaky_relu"}  # Table 3's non-linearities, no tanh


def test_profiles_cover_the_grid_with_the_stated_budgets():
    def cells_of(configs):
        return sorted({(c["activation"], c["batch_size"], c["rate_init"]) for c in configs})

    paper, book, smoke = ab.paper_configs(), ab.book_configs(), ab.smoke_configs()
    assert cells_of(paper) == cells_of(smoke) == sorted(ab.grid_cells())
    # book: every cell but the starting rate 0.001 (3 cells), one seed
    left_out = sorted(set(ab.grid_cells()) - set(cells_of(book)))
    assert left_out == [(a, 128, 0.001) for a in ("leaky_relu", "relu", "relu6")]
    for configs in (paper, book, smoke):
        assert len({config_hash(c) for c in configs}) == len(configs)
    assert len(paper) == 27 * 10 and {c["epochs"] for c in paper} == {20_000}
    assert len(book) == 24 and {c["epochs"] for c in book} == {2_500}
    # everything but the budget is the paper's setting
    strip = {"epochs", "record_every", "seed"}
    paper_rest = {tuple(sorted((k, v) for k, v in c.items() if k not in strip)) for c in paper}
    book_rest = {tuple(sorted((k, v) for k, v in c.items() if k not in strip)) for c in book}
    assert book_rest <= paper_rest


def test_fixed_plus_profiles():
    book, paper = ab.fixed_plus_book_configs(), ab.fixed_plus_paper_configs()
    assert len(paper) == (1 + 2) * 3 * 10 and book == paper  # Spiral at 1 layer, SpiralHard at 1 and 2; the book draws the paper profile
    count = {(d, w, n): sorted(c["seed"] for c in book if c["dataset"] == d and c["width_source"] == w
                               and c["hidden_layers"] == n)
             for d in ab.FIXED_PLUS_DATASETS for w in ab.WIDTH_SOURCES for n in ab.FIXED_PLUS_DEPTHS[d]}
    assert set(map(tuple, count.values())) == {tuple(range(10))}
    assert {c["epochs"] for c in book if c["dataset"] == "SpiralHard"} == {5000}  # Table 3's budget, unscaled
    # the one-layer runs keep the configuration of the first runs (no hidden_layers override), so their hashes
    one = [c for c in paper if c["hidden_layers"] == 1]
    assert one == [ab.fixed_plus_config(c["dataset"], c["width_source"], c["seed"]) for c in one]
    assert ab.FIXED_PLUS_DEPTHS["SpiralHard"][-1] == at.TABLE1_SHAPES["SpiralHard"][0] == 2


def test_sweep_membership():
    shared = ab.stability_config("relu6", 128, 0.01, 0)
    assert ab.in_sweep(shared, "batch_size") and ab.in_sweep(shared, "rate_init")
    assert ab.in_sweep(ab.stability_config("relu", 32, 0.01, 0), "batch_size")
    assert not ab.in_sweep(ab.stability_config("relu", 32, 0.01, 0), "rate_init")
    assert ab.in_sweep(ab.stability_config("relu", 128, 0.1, 0), "rate_init")
    assert not ab.in_sweep(ab.stability_config("relu", 128, 0.1, 0), "batch_size")
    with pytest.raises(ValueError, match="sweep='depth' is not allowed; allowed: batch_size, rate_init"):
        ab.in_sweep(shared, "depth")


def test_starting_widths_of_the_starting_rates():
    """Eq. 11 at k = 0.9: D = ceil(ln 10 / nu0)."""
    assert ab.start_widths() == {0.001: 2303, 0.005: 461, 0.01: 231, 0.05: 47, 0.1: 24}
    for r, d in ab.start_widths().items():
        assert d == math.ceil(math.log(10) / r)


def test_shared_cell_is_chapter_3s_control_run():
    """(ReLU6, batch 128, rate 0.01) trains exactly what awnn-compress's control does."""
    ours = ab.stability_config("relu6", 128, 0.01, 3)
    control = compress.compress_config("anneal", 3, "none", "none")
    keys = ("dataset", "data", "data_seed", "input_scale", "seed", "hidden_layers", "activation", "rate_init", "k",
            "importance_norm", "init", "grow_init", "sigma_theta", "optimizer", "lr", "batch_size")
    assert {k: ours[k] for k in keys} == {k: control[k] for k in keys}
    assert control["rate_prior"] == "none" and ours["rate_prior"] is None


@pytest.mark.parametrize(
    ("field", "value", "allowed"),
    [
        ("activation", "tanh", "relu6, relu, leaky_relu"),
        ("batch_size", 64, "32, 128, 256, 512, 1024"),
        ("rate_init", 0.02, "0.001, 0.005, 0.01, 0.05, 0.1"),
    ],
)
def test_bad_stability_config_names_field_and_allowed_values(field, value, allowed):
    args = {"activation": "relu6", "batch_size": 128, "rate_init": 0.01} | {field: value}
    with pytest.raises(ValueError, match=f"{field}={value!r} is not allowed; allowed: {allowed}"):
        ab.stability_config(args["activation"], args["batch_size"], args["rate_init"], 0)


def test_other_bad_stability_configs():
    with pytest.raises(ValueError, match="unknown configuration keys \\['lr_decay'\\]"):
        ab.stability_config("relu6", 128, 0.01, 0, lr_decay=0.5)
    with pytest.raises(ValueError, match="rate_prior=0.05 is not allowed; allowed: None"):
        ab.stability_config("relu6", 128, 0.01, 0, rate_prior=0.05)
    with pytest.raises(ValueError, match="epochs=0 is not allowed; allowed: an integer >= 1"):
        ab.stability_config("relu6", 128, 0.01, 0, epochs=0)
    bad = ab.stability_config("relu6", 128, 0.01, 0) | {"activation": "gelu"}
    with pytest.raises(ValueError, match="activation='gelu' is not allowed"):
        ab.train_stability(bad, _ctx(Path("/nonexistent")))


# ----------------------------------------------------------------------------- per-run summaries


def test_width_spread_on_a_hand_made_example():
    s = abr.width_spread([100, 150, 200])
    assert s["ratio"] == pytest.approx(2.0)
    assert s["cv"] == pytest.approx(math.sqrt(5000 / 3) / 150)  # population std 40.82 over mean 150
    assert (s["min"], s["max"], s["n"]) == (100.0, 200.0, 3)
    assert abr.width_spread([7, 7, 7]) == {"ratio": 1.0, "cv": 0.0, "min": 7.0, "max": 7.0, "n": 3}
    with pytest.raises(ValueError, match="non-empty and positive"):
        abr.width_spread([10, 0])


def test_tail_mean_settle_epoch_drift_and_jitter():
    epochs = list(range(0, 101, 10))  # 11 records
    widths = [231, 400, 800, 600, 520, 505, 500, 498, 502, 500, 500]
    assert ab.tail_mean(widths) == pytest.approx(500.0)  # ceil(0.1 * 11) = 2 records
    # 520 is within 10% of 500 (<= 550), 600 is not: settled from the record after 600
    assert ab.settle_epoch(epochs, widths) == 40
    assert ab.settle_epoch(epochs, [100] * 11) == 0
    # drift: tail (500) over the records in (70, 80] (one record, 502) minus 1
    assert ab.late_drift(epochs, widths) == pytest.approx(500 / 502 - 1)
    falling = [1000 * 0.99**e for e in epochs]
    assert ab.late_drift(epochs, falling) < 0
    # jitter: a constant geometric decay has log-differences with zero spread
    assert ab.tail_jitter(falling) == pytest.approx(0.0, abs=1e-12)
    noisy = [100, 120, 90, 130, 80, 140, 100, 120, 90, 130, 80, 140]
    assert ab.tail_jitter(noisy) > 0.2
    with pytest.raises(ValueError, match="equal length"):
        ab.settle_epoch([0, 1], [5])


def test_sweep_widths_spread_table_and_claims_on_hand_made_results():
    results = []
    tails = {"relu6": 500.0, "relu": None, "leaky_relu": None}
    for i, (a, b, r) in enumerate(ab.grid_cells()):
        config = ab.stability_config(a, b, r, 0)
        if a == "relu6":
            tail = 500.0 + (10.0 if b == 32 else 0.0)  # all within a few percent
            drift = -0.01
        else:
            tail = 2000.0 * (0.01 / r) ** 0.5 if b == 128 else 700.0  # spread across rates, not batches
            drift = -0.3
        jitter = 0.2 if b == 32 else 0.01
        results.append(_fake(config, tail_width=tail, late_drift=drift, tail_jitter=jitter))
    del tails
    w = abr.sweep_widths(results, "relu6", "batch_size")
    assert w == {32: 510.0, 128: 500.0, 256: 500.0, 512: 500.0, 1024: 500.0}
    assert abr.sweep_widths(results, "relu", "rate_init")[0.001] == pytest.approx(2000.0 * math.sqrt(10))
    batch, rate = abr.spread_table(results, "batch_size"), abr.spread_table(results, "rate_init")
    assert batch.loc["ReLU6", "max/min"] == pytest.approx(1.02) and batch.loc["ReLU6", "batch size 32"] == 510
    assert bool(rate.loc["ReLU6", "similar"])
    assert not bool(rate.loc["ReLU", "similar"])
    assert rate.loc["ReLU", "max/min"] == pytest.approx(10.0)
    assert list(rate.columns[:5]) == [f"starting rate {r:g}" for r in ab.START_RATES]
    claims = abr.stability_claims(results).set_index("claim")["holds"]
    assert claims.tolist() == [True, True, True, True, True]


def test_shared_cell_crosscheck_on_hand_made_runs():
    ours = ab.stability_config("relu6", 128, 0.01, 0, epochs=10, record_every=5)
    other = ab.stability_config("relu", 128, 0.01, 0, epochs=10, record_every=5)
    mine = [RunResult(ab.EXPERIMENT_ID, c, config_hash(c), 0, {}, {"record_epoch": [0, 5, 10],
                                                                     "total_width": [231, 240, 250]})
            for c in (ours, other)]
    control = compress.compress_config("anneal", 0, "none", "none", epochs=10)
    ch3 = [RunResult("awnn-compress", control, config_hash(control), 0, {},
                     {"record_epoch": list(range(11)), "width/1": [231, 1, 2, 3, 4, 240, 6, 7, 8, 9, 250]})]
    table = abr.shared_cell_crosscheck(mine, ch3)
    assert list(table.index) == [0]  # the ReLU run is not the shared cell
    assert bool(table.loc[0, "identical"]) and table.loc[0, "epochs compared"] == 3
    assert table.loc[0, "width @ 10 (ours / ch. 3)"] == "250 / 250"
    ch3[0].curves["width/1"][10] = 251
    assert not bool(abr.shared_cell_crosscheck(mine, ch3).loc[0, "identical"])


# ----------------------------------------------------------------------------- a short real run


def test_short_run_records_widths_that_follow_the_rate(tmp_path):
    config = ab.stability_config("relu6", 1024, 0.1, 0, epochs=3, record_every=1)
    out = ab.train_stability(config, _ctx(tmp_path))
    c, m = out["curves"], out["metrics"]
    assert c["record_epoch"] == [0, 1, 2, 3]
    assert c["total_width"] == c["width/1"]  # one hidden layer
    assert c["width/1"][0] == m["start_width"] == quantile_width(0.1) == 24
    assert m["final_total_width"] == quantile_width(m["final_rate"], 0.9)  # Eq. 11 after the last step
    assert m["tail_width"] == c["total_width"][-1]  # ceil(0.1 * 4) = 1 record
    assert 0.0 <= m["final_test_acc"] <= 1.0 and m["cpu_s"] > 0
    assert m["n_train"] == 3500  # Table 2: SpiralHard's outer training split


def test_a_longer_run_repeats_the_shorter_one_then_goes_on(tmp_path):
    """The paper-length runs extend the book's: same cell and seed, more epochs, sparser records."""
    short_c = ab.stability_config("relu6", 1024, 0.01, 0, epochs=4, record_every=1)
    long_c = ab.stability_config("relu6", 1024, 0.01, 0, epochs=8, record_every=2)
    short, long = (RunResult(ab.EXPERIMENT_ID, c, config_hash(c), 0, out["metrics"], out["curves"])
                   for c, out in ((c, ab.train_stability(c, _ctx(tmp_path / str(c["epochs"]))))
                                  for c in (short_c, long_c)))
    assert long.curves["record_epoch"] == [0, 2, 4, 6, 8]
    assert abr.same_prefix(long, short) is True
    table = abr.long_run_table([long], [short])
    row = table.loc[("ReLU6", 1024, 0.01)]
    assert bool(row["same first epochs"]) and row["width at 4"] == short.curves["total_width"][4]
    assert row["tail, 8 epochs"] == round(long.metrics["tail_width"])
    assert row["tail, 4 epochs"] == round(short.metrics["tail_width"])
    long.curves["total_width"][1] += 1
    assert abr.same_prefix(long, short) is False
    fig = abr.plot_long_runs([long], [short])
    assert len(fig.axes) == 2 and len(fig.axes[0].get_lines()) == 2  # the long run and the short one, dashed
    assert abr.same_prefix(long, RunResult(ab.EXPERIMENT_ID, short_c, "h", 0, {},
                                          {"record_epoch": [99], "total_width": [1], "test_acc": [0.5]})) is None


def test_seed_table_summarises_cells_with_several_seeds():
    def run(seed, tail, acc, batch=1024):
        c = ab.stability_config("relu6", batch, 0.01, seed, epochs=8, record_every=2)
        return RunResult(ab.EXPERIMENT_ID, c, config_hash(c), seed, {"tail_width": tail, "final_test_acc": acc}, {})

    table = abr.seed_table([run(2, 30.0, 0.9), run(0, 10.0, 1.0), run(1, 20.0, 0.8), run(0, 99.0, 1.0, batch=32)])
    assert list(table.index) == [("ReLU6", 1024, 0.01, 8)]  # the one-seed cell has no row
    row = table.iloc[0]
    assert row["seeds"] == "0, 1, 2" and row["tail width mean"] == 20.0 and row["std"] == 10.0
    assert (row["min"], row["max"]) == (10, 30) and row["test acc mean (%)"] == 90.0
    assert abr.seed_table([run(0, 1.0, 1.0)]).empty


def test_pooled_by_activation_pools_the_cells_complete_for_every_activation():
    def run(act, batch, seed, tail, acc=1.0, rate=0.01):
        c = ab.stability_config(act, batch, rate, seed, epochs=8, record_every=2)
        return RunResult(ab.EXPERIMENT_ID, c, config_hash(c), seed, {"tail_width": tail, "final_test_acc": acc}, {})

    runs = [run("relu6", 256, s, t) for s, t in enumerate([10.0, 20.0, 30.0])]
    runs += [run("relu6", 512, s, t, 0.5) for s, t in enumerate([40.0, 50.0, 60.0])]
    runs += [run("relu6", 1024, s, 1000.0) for s in range(2)]  # incomplete: left out
    runs += [run("relu6", 128, s, 500.0, rate=0.05) for s in range(3)]  # another rate: left out
    runs += [run("relu", 256, s, 7.0) for s in range(2)]  # no complete cell: no row, no constraint
    table = abr.pooled_by_activation(runs, seeds=3)
    assert list(table.index) == ["ReLU6"]
    row = table.loc["ReLU6"]
    assert row["batch sizes"] == "256, 512" and row["runs"] == 6 and row["tail width mean"] == 35.0
    sd = float(np.std([10, 20, 30, 40, 50, 60], ddof=1))
    assert row["std"] == round(sd, 1) and row["standard error"] == round(sd / math.sqrt(6), 1)
    assert row["median"] == 35.0 and (row["min"], row["max"]) == (10, 60) and row["test acc mean (%)"] == 75.0
    # once ReLU has a complete cell, both pool only the batch sizes complete for both
    both = abr.pooled_by_activation(runs + [run("relu", 256, 2, 9.0)], seeds=3)
    assert list(both.index) == ["ReLU6", "ReLU"] and set(both["batch sizes"]) == {"256"}
    assert both.loc["ReLU6", "tail width mean"] == 20.0 and both.loc["ReLU", "runs"] == 3
    assert abr.pooled_by_activation(runs[:2], seeds=3).empty


# ----------------------------------------------------------------------------- Fixed+ (App. D)


@pytest.mark.parametrize("dataset", ["Spiral", "SpiralHard"])
@pytest.mark.parametrize("source", ["paper", "ours-eq14", "ours-renormalised"])
def test_fixed_plus_is_the_fixed_baseline_at_the_stated_width(dataset, source):
    config = ab.fixed_plus_config(dataset, source, 4)
    baseline = at.fixed_config(dataset, 4)
    width = ab.FIXED_PLUS_WIDTHS[source][dataset]
    assert config == baseline | {"width": width, "width_source": source}
    model = ab.build_fixed_plus_model(config)
    linears = [m for m in model.modules() if isinstance(m, nn.Linear)]
    hidden = linears[:-1]
    assert len(hidden) == config["hidden_layers"] == 1
    assert all(m.out_features == width for m in hidden)
    assert linears[-1].in_features == width and linears[-1].out_features == 2


def test_paper_widths_are_table_1_rounded():
    for d in ("Spiral", "SpiralHard"):
        it = paper_items.item(f"awnn/table1/{d.lower()}-awnn-width")
        assert ab.FIXED_PLUS_WIDTHS["paper"][d] == ab.round_half_up(it.paper_value)
    assert ab.round_half_up(18.5) == 19 and ab.round_half_up(19.5) == 20 and ab.round_half_up(18.49) == 18


def test_train_fixed_plus_is_train_fixed_mlp(tmp_path):
    config = ab.fixed_plus_config("Spiral", "ours-eq14", 0, epochs=2)
    ours = ab.train_fixed_plus(config, _ctx(tmp_path / "a"))
    ref = at.train_fixed_mlp(dict(config), _ctx(tmp_path / "b"))
    assert ours["curves"] == ref["curves"]
    assert {k: v for k, v in ours["metrics"].items() if k != "cpu_s"} == ref["metrics"]
    assert ours["metrics"]["total_width"] == ab.FIXED_PLUS_WIDTHS["ours-eq14"]["Spiral"]


def test_bad_fixed_plus_configs():
    with pytest.raises(ValueError, match="width_source='median' is not allowed; allowed: paper, ours-eq14, "
                                         "ours-renormalised"):
        ab.fixed_plus_config("Spiral", "median", 0)
    with pytest.raises(ValueError, match="dataset='DoubleMoon' is not allowed; allowed: Spiral, SpiralHard"):
        ab.fixed_plus_config("DoubleMoon", "paper", 0)
    deep = ab.fixed_plus_config("Spiral", "paper", 0, hidden_layers=2)
    with pytest.raises(ValueError, match="hidden_layers=2 is not allowed; allowed: 1"):
        ab.train_fixed_plus(deep, _ctx(Path("/nonexistent")))
    bad = ab.fixed_plus_config("Spiral", "paper", 0) | {"width": 16}
    with pytest.raises(ValueError, match="width=16 is not allowed for width_source='paper' on Spiral; allowed: 66"):
        ab.train_fixed_plus(bad, _ctx(Path("/nonexistent")))


def test_learned_layer_width_on_hand_made_runs():
    def run(dataset, arm, seed, total, layers):
        config = {"study": "table1", "dataset": dataset, "importance_norm": arm, "hidden_layers": layers, "seed": seed}
        return RunResult("awnn-tabular-adaptive", config, str(seed), seed, {"total_width": total})

    runs = [run("Spiral", "none", 0, 18, 1), run("Spiral", "none", 1, 19, 1), run("SpiralHard", "none", 0, 39, 2),
            run("Spiral", "active", 0, 50, 1)]
    assert ab.learned_layer_width(runs, "Spiral", "none") == 19  # mean 18.5, rounded half up
    assert ab.learned_layer_width(runs, "SpiralHard", "none") == 20  # 39 / 2 layers = 19.5
    assert ab.learned_layer_width(runs, "Spiral", "active") == 50
    with pytest.raises(ValueError, match="no stored"):
        ab.learned_layer_width(runs, "SpiralHard", "active")


def test_width_literals_equal_the_stored_chapter_2_runs():
    from hacn_core.catalog import stored
    from hacn_core.engine.results import REPO_ROOT, ResultsStore

    store = ResultsStore(REPO_ROOT / "results")  # the committed results, not the test session's store
    runs = [r for d in ab.FIXED_PLUS_DATASETS
            for r in stored("awnn-tabular-adaptive", "book", store=store, where={"study": "table1", "dataset": d})
            if r.seed in ab.WIDTH_SOURCE_SEEDS[d]]
    if not runs:
        pytest.skip("the stored awnn-tabular-adaptive book runs are absent")
    for source, arm in ab.WIDTH_SOURCE_ARM.items():
        for d in ab.FIXED_PLUS_DATASETS:
            assert ab.FIXED_PLUS_WIDTHS[source][d] == ab.learned_layer_width(runs, d, arm), (source, d)


def test_fixed_plus_table_shows_paper_beside_ours():
    fp = []
    for d in ab.FIXED_PLUS_DATASETS:
        for s, acc in ((0, 0.9), (1, 1.0)):
            c = ab.fixed_plus_config(d, "paper", s, hidden_layers=at.TABLE1_SHAPES[d][0])
            fp.append(RunResult(ab.FIXED_PLUS_ID, c, config_hash(c), s, {"test_acc": acc}))
    c = ab.fixed_plus_config("SpiralHard", "paper", 0)  # one layer: beside, not the paper's row
    fp.append(RunResult(ab.FIXED_PLUS_ID, c, config_hash(c), 0, {"test_acc": 0.5}))
    table = abr.fixed_plus_table(fp)
    row = table.loc[("SpiralHard", "Fixed+ (paper width, 2 layers)")]
    assert row["test acc (%), ours"] == f"95.0 ({np.std([90, 100], ddof=1):.1f})"
    assert row["paper"] == "83.2 (17)" and row["width per layer"] == "227" and row["seeds"] == 2
    one = table.loc[("SpiralHard", "Fixed+ (paper width, 1 layer)")]
    assert one["test acc (%), ours"] == "50.0" and one["paper"] == "-"
    assert table.loc[("Spiral", "Fixed+ (paper width, 1 layer)"), "paper"] == "100 (0.1)"
    assert table.loc[("Spiral", "Fixed+ (ours-eq14 width, 1 layer)"), "test acc (%), ours"] == "-"
    assert ("SpiralHard", "Fixed (2 x 16)") in table.index
    failures = abr.fixed_plus_failures(fp, threshold=0.95)
    assert failures.loc[("Spiral", 1, "paper"), "seeds below 95%"] == "0"
    assert failures.loc[("SpiralHard", 1, "paper"), "seeds below 95%"] == "0"
    assert failures.loc[("SpiralHard", 2, "paper"), "runs"] == 2


# ----------------------------------------------------------------------------- registry


def test_links_point_at_existing_items_and_metrics():
    from hacn_core.catalog import get

    for exp_id, metric_source in ((ab.EXPERIMENT_ID, "tail_width"), (ab.FIXED_PLUS_ID, "test_acc")):
        exp = get(exp_id)
        assert exp.links
        for link in exp.links:
            paper_items.item(link.item)  # raises if unknown
            assert link.metric == metric_source
            assert any(matches(c, link.where) for c in exp.runs("book"))


def test_width_at_steps_counts_optimizer_steps():
    """Batch 32 on 3,500 points takes 110 steps per epoch, batch 1024 takes 4: the marks
    pick the first record at or after that many steps, NaN past the run's end; runs of
    the rate sweep are left out."""
    def run(batch, rate, widths):
        c = ab.stability_config("relu6", batch, rate, 0, epochs=100, record_every=10)
        curves = {"record_epoch": list(range(0, 101, 10)), "total_width": widths,
                  "test_acc": [w / 1000 for w in widths]}
        return RunResult(ab.EXPERIMENT_ID, c, config_hash(c), 0, {"n_train": 3500}, curves)

    small = run(32, 0.01, list(range(100, 111)))
    large = run(1024, 0.01, list(range(200, 211)))
    other = run(128, 0.05, list(range(300, 311)))
    table = abr.width_at_steps([large, other, small], steps=(1_000, 4_000))
    assert list(table.index.get_level_values("batch")) == [32, 1024]
    # batch 32: 1,000 steps = epoch 9.1 -> record at epoch 10 (width 101); 4,000 steps = epoch 36.4 -> epoch 40
    assert table.loc[("ReLU6", 32, 0), ("1,000 steps", "width")] == 101
    assert table.loc[("ReLU6", 32, 0), ("4,000 steps", "width")] == 104
    assert table.loc[("ReLU6", 32, 0), ("4,000 steps", "test acc (%)")] == pytest.approx(10.4)
    # batch 1024: 400 steps in all, so 1,000 and 4,000 are past the end
    assert math.isnan(table.loc[("ReLU6", 1024, 0), ("1,000 steps", "width")])


def test_cost_table_counts_runs_and_cpu_minutes_per_cell():
    from hacn_core.awnn.studies import ablations_report as report
    from hacn_core.engine.results import RunResult

    def run(seed, cpu_s, batch=128):
        config = {"activation": "relu6", "batch_size": batch, "rate_init": 0.01, "seed": seed}
        metrics = {} if cpu_s is None else {"cpu_s": cpu_s}
        return RunResult(experiment="awnn-ablations", config=config, config_hash=str(seed), seed=seed,
                         metrics=metrics, curves={}, provenance={})

    table = report.cost_table([run(0, 60.0), run(1, 180.0), run(2, None), run(0, 30.0, batch=32)])
    cell = table.loc[("stability", "ReLU6", "batch 128, rate 0.01")]
    assert cell["runs"] == 2 and cell["CPU minutes per run"] == 2.0 and cell["CPU minutes in all"] == 4.0
    assert table.loc[("stability", "ReLU6", "batch 32, rate 0.01"), "CPU minutes in all"] == 0.5
