import math

import pytest

from hacn_core import catalog
from hacn_core.engine.registry import Experiment, Link, by_id
from hacn_core.__main__ import main
from hacn_core.engine.stats import estimate
from hacn_core.ledger import ledger_rows, ledger_table, status_counts
from hacn_core.paper_items import PAPER_ITEMS, item
from hacn_core.engine.results import ResultsStore

ITEM = "awnn/table1/spiral-fixed-accuracy"  # paper: 99.5 (0.5)


def _toy_train(config, context):
    return {"metrics": {"test_acc": config["acc"]}, "curves": {"loss": [1.0, 0.1]}}


@pytest.fixture
def toy_experiment(monkeypatch):
    def configs(accs):
        return lambda: [{"acc": a, "seed": s, "scale": "x"} for s, a in enumerate(accs)]

    experiment = Experiment(
        id="toy-ledger",
        title="toy",
        train=_toy_train,
        configs={"smoke": configs([0.5, 0.6]), "paper": configs([0.995, 0.993, 0.997])},
        setting={"smoke": "tiny", "paper": "the paper's"},
        links=(Link(ITEM, "test_acc", {"scale": "x"}, scale=100.0, tolerance=0.3),),
    )
    monkeypatch.setitem(catalog.EXPERIMENTS, experiment.id, experiment)
    return experiment


def test_estimate_is_mean_with_student_t_interval():
    est = estimate([1.0, 2.0, 3.0])
    assert est.mean == 2.0 and est.n == 3
    assert math.isclose(est.half_width, 4.302652729911275 * 1.0 / math.sqrt(3), rel_tol=1e-9)
    single = estimate([0.25])
    assert single.n == 1 and math.isnan(single.half_width) and str(single) == "0.25"
    with pytest.raises(ValueError):
        estimate([])


def test_ledger_has_one_row_per_paper_item_and_starts_not_run(tmp_path):
    store = ResultsStore(tmp_path)
    table = ledger_table(store)
    assert len(table) == len(PAPER_ITEMS) and table["id"].is_unique
    assert set(table["status"]) == {"not run"}
    assert sum(status_counts(store).values()) == len(PAPER_ITEMS)


def test_scaled_runs_are_labelled_and_never_called_reproduced(tmp_path, toy_experiment):
    store = ResultsStore(tmp_path)
    catalog.run("toy-ledger", "smoke", store=store, progress=False)
    row = next(r for r in ledger_rows(store) if r.item.id == ITEM)
    assert row.status == "scaled analogue" and row.seeds == (0, 1)
    assert math.isclose(row.ours.mean, 55.0)
    assert row.setting.startswith("scaled (tiny")


def test_paper_setting_runs_are_compared_with_the_tolerance(tmp_path, toy_experiment):
    store = ResultsStore(tmp_path)
    catalog.run("toy-ledger", "smoke", store=store, progress=False)
    catalog.run("toy-ledger", "paper", store=store, progress=False)
    row = next(r for r in ledger_rows(store) if r.item.id == ITEM)
    # Paper-setting runs win and are not mixed with the scaled ones.
    assert row.status == "reproduced" and row.ours.n == 3 and math.isclose(row.ours.mean, 99.5)
    assert row.setting == "paper setting (the paper's)"  # every run of the profile is stored
    assert item(ITEM).paper_value == 99.5


def test_paper_setting_outside_tolerance_differs(tmp_path, toy_experiment):
    store = ResultsStore(tmp_path)
    object.__setattr__(toy_experiment.links[0], "tolerance", 0.0001)
    try:
        catalog.run("toy-ledger", "paper", store=store, where={"seed": 1}, progress=False)  # 99.3 vs 99.5
        row = next(r for r in ledger_rows(store) if r.item.id == ITEM)
        assert row.status == "differs" and row.ours.n == 1
        assert row.setting == "paper setting (the paper's); 1 of its 3 runs stored"  # partial coverage is said
    finally:
        object.__setattr__(toy_experiment.links[0], "tolerance", 0.3)


def test_registry_errors_name_the_choices(toy_experiment):
    with pytest.raises(KeyError, match="toy-ledger"):
        catalog.get("no-such-experiment")
    with pytest.raises(ValueError, match="has no 'book' profile; it has: smoke, paper"):
        toy_experiment.runs("book")
    with pytest.raises(ValueError, match="registered twice"):
        by_id(toy_experiment, Experiment("toy-ledger", "again", _toy_train, {}, {}))
    with pytest.raises(ValueError, match="unknown profiles \\['huge'\\]"):
        Experiment("toy", "toy", _toy_train, {"huge": list}, {})


def test_every_link_of_every_experiment_points_at_a_paper_item():
    ids = {i.id for i in PAPER_ITEMS}
    for experiment in catalog.registry().values():
        for link in experiment.links:
            assert link.item in ids, (experiment.id, link.item)
        for profile in experiment.configs:
            assert experiment.runs(profile), (experiment.id, profile)


def test_command_line_run_list_and_ledger(tmp_path, capsys, toy_experiment):
    assert main(["list"]) == 0
    assert "toy-ledger: toy" in capsys.readouterr().out
    assert main(["run", "toy-ledger", "--profile", "smoke", "--where", "seed=1", "--results", str(tmp_path)]) == 0
    assert "seed=1: test_acc=0.6" in capsys.readouterr().out
    assert main(["ledger", "--results", str(tmp_path)]) == 0
    assert "scaled analogue" in capsys.readouterr().out


def test_stored_returns_only_runs_already_in_the_store(tmp_path):
    from hacn_core.engine.results import ResultsStore

    store = ResultsStore(tmp_path)
    assert catalog.stored("hacn-mixer-cost", "smoke", store=store) == []
    ran = catalog.run("hacn-mixer-cost", "smoke", store=store, allow_train=True, progress=False)
    assert [r.config_hash for r in catalog.stored("hacn-mixer-cost", "smoke", store=store)] == [
        r.config_hash for r in ran]


def test_awnn_starting_widths_are_exact_and_read_run_not_reproduced(tmp_path):
    """Eq. 11's starting widths come from the exact-checks run; the paper's "approximately"
    values have no tolerance, so the rows say "run" with our closed-form width."""
    store = ResultsStore(tmp_path)
    (result,) = catalog.run("exact-checks", "smoke", store=store, progress=False)
    rows = {r.item.id: r for r in ledger_rows(store)}
    for slug, rate, paper in (("tabular-rate0.01", 0.01, 256), ("image-rate0.02", 0.02, 128),
                              ("multi30k-rate0.004", 0.004, 512)):
        width = math.ceil(math.log(10) / rate)  # smallest D with 1 - e^{-rate D} >= 0.9
        assert result.metrics[f"awnn_start_width_rate{rate:g}"] == width
        row = rows[f"awnn/eq11/start-width-{slug}"]
        assert row.status == "run" and row.ours.mean == width and row.item.paper_value == paper
    assert [rows[f"awnn/eq11/start-width-{s}"].ours.mean for s in ("tabular-rate0.01", "image-rate0.02",
                                                                     "multi30k-rate0.004")] == [231, 116, 576]


def test_fig2_and_fig7_left_read_the_depth_variance_ratio_of_theorem_3_1(tmp_path):
    """Figs. 2 / 7 (left) have no number; the exact-checks run stores Var[alpha^5] / Var[alpha^1]
    (mean of 16 draws) under kaiming+ (about 1) and kaiming (the collapse), and the rows read them."""
    from hacn_core.awnn.studies import init as ai

    store = ResultsStore(tmp_path)
    (result,) = catalog.run("exact-checks", "smoke", store=store, progress=False)
    plus = result.metrics["awnn_kaiming_plus_variance_ratio_l5_l1"]
    kaiming = result.metrics["awnn_kaiming_variance_ratio_l5_l1"]
    assert 0.8 < plus < 1.25
    theory = ai.theory_variances("kaiming")
    assert kaiming < 1e-15 and 0.5 < kaiming / (theory[-1] / theory[0]) < 2.0  # the collapse Appendix A predicts
    rows = {r.item.id: r for r in ledger_rows(store)}
    assert rows["awnn/fig2/activation-variance"].ours.mean == plus
    assert rows["awnn/fig7-left/activation-variance"].ours.mean == kaiming
    assert {rows[i].status for i in ("awnn/fig2/activation-variance", "awnn/fig7-left/activation-variance")} == {"run"}
