"""How the stored runs were made, read from their provenance: the appendix "How the runs were made".

Every stored run records its device, threads, precision, code version and wall time
(:func:`hacn_core.engine.results.begin_training`). The chapters show results; this module
gathers that record for the whole store, so the history of where and how the runs
trained lives on one page, generated, and not in the chapters' prose:

- :func:`coverage_line`: the one line a chapter prints about its stored runs against
  its plan (nothing about machines);
- :func:`provenance_table`: one row per experiment, with devices in order for a run
  resumed on another machine ("A, then B", :func:`hacn_core.engine.tables.devices_summary`);
- :func:`resumed_runs`: the runs trained in more than one process or on more than one device.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

import pandas as pd

from hacn_core.engine.results import ResultsStore, RunResult
from hacn_core.engine.tables import devices_summary

__all__ = ["coverage_line", "provenance_table", "resumed_runs", "run_threads", "run_precision"]

#: the thread count a device description names: "cpu: X (2 cores, 1 torch threads)"
_THREADS = re.compile(r"(\d+) torch threads?")


def coverage_line(results: Sequence[RunResult], planned: int) -> str:
    """One line: how many of the ``planned`` runs of a chapter's profile are stored, and their seeds.

    >>> coverage_line([], 4)
    'None of the 4 planned runs of this profile is stored: the tables and figures below are empty.'
    """
    if not results:
        return (f"None of the {planned} planned runs of this profile is stored: "
                "the tables and figures below are empty.")
    seeds = ", ".join(str(s) for s in sorted({r.seed for r in results if r.seed is not None}))
    seeds = f" (seeds {seeds})" if seeds else ""
    if len(results) >= planned:
        return f"All {planned} planned runs of this profile are stored{seeds}."
    return (f"{len(results)} of {planned} planned runs of this profile are stored{seeds}; "
            f"the {planned - len(results)} others leave their cells below empty.")


def run_threads(run: RunResult) -> int | None:
    """The torch threads a run trained with: its ``threads`` field, else the count its device names."""
    if run.provenance.get("threads") is not None:
        return int(run.provenance["threads"])
    found = _THREADS.findall(str(run.provenance.get("device", "")))
    return int(found[-1]) if found else None


def run_precision(run: RunResult) -> str:
    """The precision a run computed in, as recorded (runs stored before the field existed: not recorded)."""
    return str(run.provenance.get("precision") or run.config.get("precision") or "not recorded")


def _resumed(run: RunResult) -> bool:
    """A run trained in more than one process (``segments``) or on more than one device ("A; B")."""
    return int(run.provenance.get("segments") or 1) > 1 or "; " in str(run.provenance.get("device", ""))


def _joined(values: Iterable[Any]) -> str:
    return ", ".join(str(v) for v in sorted(set(values), key=str))


def provenance_table(store: ResultsStore | None = None, experiments: Sequence[str] | None = None) -> pd.DataFrame:
    """One row per experiment of the store: runs, devices, threads, precision, code versions, hours, resumed runs.

    ``hours`` is the sum of the runs' wall times (a resumed run's segments included), so it is machine time,
    not elapsed time: runs of one experiment often trained side by side.
    """
    store = store or ResultsStore()
    rows = []
    if experiments is None:  # every experiment folder of the store (none if the store does not exist)
        folders = store.root.iterdir() if store.root.is_dir() else []
        experiments = sorted(p.name for p in folders if p.is_dir() and not p.name.startswith("."))
    for name in experiments:
        runs = list(store.iter_results(name))
        if not runs:
            continue
        prov = [r.provenance for r in runs]
        dates = sorted(str(p.get("date", ""))[:10] for p in prov if p.get("date"))
        threads = [t for t in (run_threads(r) for r in runs) if t is not None]
        rows.append({
            "experiment": name,
            "runs": len(runs),
            "profiles": _joined(r.profile or "not recorded" for r in runs),
            "devices": devices_summary(runs),
            "torch threads": _joined(threads) or "not recorded",
            "precision": _joined(run_precision(r) for r in runs),
            "code versions": len({p.get("git_commit") for p in prov}),
            "dates": f"{dates[0]} to {dates[-1]}" if dates and dates[0] != dates[-1] else (dates[0] if dates else "–"),
            "hours": sum(float(p.get("wall_time_s") or 0.0) for p in prov) / 3600,
            "resumed runs": sum(_resumed(r) for r in runs),
        })
    return pd.DataFrame(rows)


def resumed_runs(store: ResultsStore | None = None, experiments: Sequence[str] | None = None) -> pd.DataFrame:
    """The runs trained in more than one process or on more than one device, one row each."""
    store = store or ResultsStore()
    rows = []
    for name in experiments if experiments is not None else [e for e in provenance_table(store)["experiment"]]:
        for r in store.iter_results(name):
            if _resumed(r):
                p = r.provenance
                rows.append({"experiment": name, "run": r.config_hash[:8], "seed": r.seed,
                             "devices, in order": str(p.get("device", "not recorded")).replace("; ", ", then "),
                             "processes": int(p.get("segments") or 1), "precision": run_precision(r),
                             "hours": float(p.get("wall_time_s") or 0.0) / 3600})
    return pd.DataFrame(rows)
