"""How the runs were made (hacn_core.engine.provenance): the one coverage line of a chapter, and the
appendix's tables read from each run's stored provenance."""

from __future__ import annotations

import pytest

from hacn_core.engine import provenance as pv
from hacn_core.engine.results import ResultsStore, RunResult, config_hash, result_checksum

CPU = "cpu: Intel(R) Xeon(R) Processor (2 cores, 1 torch threads)"
GPU_THEN_CPU = "cuda: NVIDIA H100 80GB HBM3; cpu: AMD EPYC (2 cores, 1 torch threads)"


def run(experiment: str, seed: int, device: str = CPU, *, wall: float = 3600.0, **provenance) -> RunResult:
    config = {"seed": seed, "device_test": device, "wall": wall}
    metrics, curves = {"x": float(seed)}, {}
    prov = {"device": device, "git_commit": "a" * 40, "date": f"2026-11-2{seed}T00:00:00+00:00",
            "wall_time_s": wall, **provenance}
    return RunResult(experiment, config, config_hash(config), seed, metrics, curves, prov, "book",
                     checksum=result_checksum(metrics, curves))


@pytest.fixture()
def store(tmp_path) -> ResultsStore:
    store = ResultsStore(tmp_path)
    for r in (run("alpha", 0), run("alpha", 1, wall=1800.0),
              run("beta", 2, GPU_THEN_CPU, segments=2, precision="fp32", threads=1)):
        store.save(r)
    return store


def test_coverage_line_counts_against_the_plan_and_names_no_machine():
    runs = [run("alpha", 0), run("alpha", 1)]
    assert pv.coverage_line(runs, 2) == "All 2 planned runs of this profile are stored (seeds 0, 1)."
    line = pv.coverage_line(runs[:1], 3)
    assert line.startswith("1 of 3 planned runs of this profile are stored (seeds 0)") and "2 others" in line
    assert "None of the 4 planned runs" in pv.coverage_line([], 4)
    assert not any(word in pv.coverage_line(runs, 2) for word in ("cpu", "cuda", "yet", "so far"))


def test_provenance_table_sums_hours_and_counts_resumed_runs(store):
    table = pv.provenance_table(store).set_index("experiment")
    assert list(table.index) == ["alpha", "beta"]
    assert table.loc["alpha", "runs"] == 2 and table.loc["alpha", "hours"] == pytest.approx(1.5)
    assert table.loc["alpha", "torch threads"] == "1"  # read off the device text when not recorded
    assert table.loc["alpha", "precision"] == "not recorded" and table.loc["beta", "precision"] == "fp32"
    assert table.loc["alpha", "resumed runs"] == 0 and table.loc["beta", "resumed runs"] == 1
    assert table.loc["alpha", "dates"] == "2026-11-20 to 2026-11-21"
    assert pv.provenance_table(ResultsStore(store.root / "missing")).empty


def test_resumed_runs_list_devices_in_order(store):
    resumed = pv.resumed_runs(store)
    assert len(resumed) == 1
    row = resumed.iloc[0]
    assert row["devices, in order"] == "cuda: NVIDIA H100 80GB HBM3, then cpu: AMD EPYC (2 cores, 1 torch threads)"
    assert row["processes"] == 2 and row["hours"] == pytest.approx(1.0)
