"""awnn-step-phases: the cost cells' training step timed phase by phase (hacn_core.awnn.studies.cost_phases)."""

from __future__ import annotations

import pytest
import torch

from hacn_core.awnn.studies import cost_cells as cc
from hacn_core.awnn.studies import cost_phases as cp
from hacn_core.engine.results import ResultsStore, run_or_load


@pytest.mark.parametrize("option", cc.OPTIONS)
def test_the_phased_step_is_the_step(option):
    """Timing phase by phase calls what StepParts.step calls, in its order: the same widths, the same
    parameters bit for bit, on the same batches (the ELBO, adapting: the widths move)."""
    dims = (lambda b: (b.in_dim, b.out_dim, b.n_train))(cc.SpiralBatches())
    whole = cc.awnn_parts_for(option, "elbo", 1, 30, False, *dims, 0.05, 0)
    phased = cc.awnn_parts_for(option, "elbo", 1, 30, False, *dims, 0.05, 0)
    with cc.timing_conditions():  # a growing layer draws its new neurons from torch's random state
        torch.manual_seed(1)
        _, seen_whole = cc.time_steps(whole.step, cc.SpiralBatches(seed=3), 6)
        torch.manual_seed(1)
        phase_s, seen_phased = cp.time_phases(phased, cc.SpiralBatches(seed=3), 6)
    assert seen_whole == seen_phased and len(seen_whole) == 6
    assert list(phase_s) == list(cc.STEP_PARTS)
    a, b = whole.forward, phased.forward  # the models
    assert a.widths() == b.widths()
    for p, q in zip(a.parameters(), b.parameters(), strict=True):
        assert torch.equal(p, q)


def test_phases_sum_to_the_whole_step_for_every_arm():
    rows = cp.measure_phases(cp.SMOKE_CELLS, reps=5, steps=8)
    arms = {(r["objective"], r["arm"]) for r in rows}
    assert arms == {("likelihood", "default"), ("likelihood", "fixed"),
                    ("elbo", "default"), ("elbo", "fused_priors"), ("elbo", "fixed+wd")}
    for r in rows:
        for p in cc.STEP_PARTS:
            assert r[f"{p}_us"] >= 0, (r["arm"], p)
        for p in ("forward", "loss", "backward", "optimizer_step"):
            assert r[f"{p}_us"] > 0, (r["arm"], p)
        # how close the phases' sum comes to the whole step is a measurement, not a test: the study stores it
        # (phase_sum/step_max_dev) and the appendix prints it; on a loaded machine the two timings drift apart
        assert r["phase_sum_us"] > 0 and r["step_us"] > 0, r
        if r["arm"] == cp.baseline_arm(r["objective"]):  # the baseline against itself
            assert r["ratio"] == 1 and r["step_gap_us"] == 0
            assert all(r[f"{p}_gap_us"] == 0 for p in cc.STEP_PARTS)
        else:  # an AWNN arm updates its widths; the fixed MLP's width update returns a list
            assert r["width_update_gap_us"] > 0


def test_phases_are_stored_column_by_column_and_tabulated(tmp_path):
    config = cp.phases_config("smoke")
    result = run_or_load(cp.PHASES_ID, config, cp.measure_phases_stored, store=ResultsStore(tmp_path), progress=False)
    rows = cp.stored_phase_rows(result)
    assert len(rows) == 5  # likelihood: default + fixed; ELBO: default, fused_priors + fixed+wd
    for r in rows:
        if r["arm"] in cc.OPTIONS:
            assert result.metrics[f"{r['objective']}/1/{r['phase']}/30/{r['arm']}"] == r["ratio"]
    assert result.metrics["phase_sum/step_max_dev"] == max(abs(r["phase_sum_us"] / r["step_us"] - 1) for r in rows)
    table, gaps = cp.phases_table(rows), cp.gap_table(rows)
    assert len(table) == 5 and len(gaps) == 3
    assert table["sum of phases"].tolist() == [r["phase_sum_us"] for r in rows]
    assert gaps["whole step"].tolist() == [r["step_gap_us"] for r in rows if r["arm"] in cc.OPTIONS]


@pytest.mark.parametrize("cell, field", [
    ({"objective": "elbo", "layers": 1, "phase": "steady"}, "start_width"),
    ({"objective": "kl", "layers": 1, "phase": "steady", "start_width": 30}, "objective"),
    ({"objective": "elbo", "layers": 1, "phase": "frozen", "start_width": 30}, "phase"),
    ({"objective": "elbo", "layers": 0, "phase": "steady", "start_width": 30}, "layers"),
])
def test_a_bad_cell_is_named(cell, field):
    with pytest.raises(ValueError, match=field):
        cp.measure_phases([cell], reps=1, steps=1)
