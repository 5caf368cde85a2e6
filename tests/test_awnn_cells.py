"""The stored AWNN cost cells (awnn-step-cells): a measurement filed like a run, read back as its rows."""

from __future__ import annotations

from hacn_core.awnn.studies import cost_cells as cc
from hacn_core.engine.results import ResultsStore, run_or_load


def test_cells_are_stored_column_by_column_and_read_back(tmp_path):
    config = cc.cells_config("smoke") | {"reps": 1, "steps": 1}
    result = run_or_load(cc.CELLS_ID, config, cc.measure_stored, store=ResultsStore(tmp_path), progress=False)
    rows = cc.stored_rows(result)
    assert len(rows) == result.metrics["cells"] == 4  # 2 objectives x 1 layer count x 2 phases x 1 width
    assert {(r["objective"], r["phase"]) for r in rows} == {(o, p) for o in cc.OBJECTIVES for p in cc.PHASES}
    for r in rows:
        assert result.metrics[f"{r['objective']}/1/{r['phase']}/30"] == r["ratio"]
        # a cell's ratio is against the weight-decayed MLP for the ELBO, the plain one for the likelihood
        assert r["ratio"] == (r["awnn/fixed+wd"] if r["objective"] == "elbo" else r["awnn/fixed"])
    assert result.metrics["cells_at_target"] == sum(r["ratio"] <= cc.TARGET_RATIO for r in rows)
    table = cc.cells_table(rows)
    assert len(table) == 4 and table["ratio"].tolist() == [r["ratio"] for r in rows]


def test_fast_cells_time_every_option_beside_the_default(tmp_path):
    config = cc.fast_config("smoke") | {"reps": 1, "steps": 1}
    assert config["options"] == list(cc.OPTIONS)
    result = run_or_load(cc.FAST_ID, config, cc.measure_fast_stored, store=ResultsStore(tmp_path), progress=False)
    rows = cc.stored_fast_rows(result)
    # the likelihood has no priors: its cells have the default step only; the ELBO's every option
    assert sorted((r["objective"], r["phase"], r["option"]) for r in rows) == sorted(
        [("likelihood", p, "default") for p in cc.PHASES] + [("elbo", p, o) for p in cc.PHASES for o in cc.OPTIONS])
    for r in rows:
        assert result.metrics[f"{r['objective']}/1/{r['phase']}/30/{r['option']}"] == r["ratio"]
    assert result.metrics["cells"] == 4
    table = cc.cells_table(rows, before=[r for r in rows if r["option"] == "default"])
    assert table.index.names[-1] == "option" and len(table) == 6
    assert (table["ratio before"].to_numpy() > 0).all()


def test_options_table_has_one_line_per_cell_with_each_option_beside():
    base = {"layers": 1, "start_width": 30, "width": 30, "fixed_us": 400.0, "fixed_wd_us": 500.0}
    rows = [{**base, "objective": "likelihood", "phase": "steady", "option": "default", "awnn_us": 430.0, "ratio": 1.075},
            {**base, "objective": "elbo", "phase": "steady", "option": "default", "awnn_us": 800.0, "ratio": 1.6},
            {**base, "objective": "elbo", "phase": "steady", "option": "fused_priors", "awnn_us": 540.0, "ratio": 1.08}]
    table = cc.options_table(rows)
    assert len(table) == 2
    lik, elbo = table.loc[("likelihood", 1, "steady", 30)], table.loc[("elbo", 1, "steady", 30)]
    # the baseline: the plain MLP for the likelihood, the weight-decayed one for the ELBO
    assert lik["baseline (us/step)"] == 400.0 and elbo["baseline (us/step)"] == 500.0
    assert lik["default / baseline"] == 1.075 and lik["fused_priors / baseline"] != lik["fused_priors / baseline"]  # NaN
    assert elbo["default (us/step)"] == 800.0 and elbo["fused_priors / baseline"] == 1.08
    assert lik["at target"] == "default" and elbo["at target"] == "fused_priors"
