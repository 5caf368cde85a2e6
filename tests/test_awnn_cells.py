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
