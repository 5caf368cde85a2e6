"""The reproduction ledger: every paper item, the paper's value and ours.

Rows come from two registries: ``hacn_core.paper_items.PAPER_ITEMS`` (every table
and figure of the three papers with the value the paper reports) and the
experiments' :class:`~hacn_core.engine.registry.Link` s (which stored metric
reproduces which item). Our value is the mean over the stored runs (one per
seed) with a 95% confidence interval from Student's t; nothing is typed in by
hand, so the ledger stays current as results land in ``results/``. A stray JSON
in the store (not named ``<config hash>.json``) is skipped with a warning.

Status of a row:

``not run``          no stored run reproduces it yet
``scaled analogue``  runs exist, at a scaled setting (other data or budget): not comparable number for number
``reproduced``       runs at the paper's own setting, within the link's tolerance of the paper's value
``differs``          runs at the paper's own setting, outside that tolerance
``run``              runs at the paper's own setting; the paper gives no number or the link no tolerance
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from hacn_core.catalog import registry
from hacn_core.engine.registry import Experiment, matches
from hacn_core.engine.stats import Estimate, estimate
from hacn_core.paper_items import PAPER_ITEMS, PaperItem
from hacn_core.engine.results import ResultsStore, RunResult, config_hash, study_config

STATUSES: tuple[str, ...] = ("reproduced", "differs", "run", "scaled analogue", "not run")


@dataclass(frozen=True)
class LedgerRow:
    """One row of the ledger. ``values``: our value of each chosen run (in the paper's unit), whose
    mean and confidence interval ``ours`` is."""

    item: PaperItem
    ours: Estimate | None
    seeds: tuple[int, ...]
    setting: str
    status: str
    experiment: str = ""
    values: tuple[float, ...] = ()


class _StoredRuns:
    """The store's runs and the paper-setting hashes of each experiment, read once per ledger."""

    def __init__(self, store: ResultsStore) -> None:
        self.store = store
        self._runs: dict[str, list[RunResult]] = {}
        self._paper: dict[str, frozenset[str]] = {}

    def runs(self, experiment: Experiment) -> list[RunResult]:
        if experiment.id not in self._runs:
            self._runs[experiment.id] = list(self.store.iter_results(experiment.id))
        return self._runs[experiment.id]

    def paper_hashes(self, experiment: Experiment) -> frozenset[str]:
        if experiment.id not in self._paper:
            self._paper[experiment.id] = experiment.paper_config_hashes()
        return self._paper[experiment.id]


def one_per_setting(runs: Iterable[RunResult]) -> list[RunResult]:
    """One run per study configuration: a configuration stored under several executions (other torch
    threads, several ranks: :func:`~hacn_core.engine.results.study_config`) counts once, preferably the
    default execution (one thread, one process), else the first file."""
    chosen: dict[str, RunResult] = {}
    for run in runs:
        key = config_hash(study_config(run.config))
        if key not in chosen or run.config_hash == key:
            chosen[key] = run
    return list(chosen.values())


def _link_row(item: PaperItem, experiment: Experiment, link, stored: _StoredRuns) -> LedgerRow:
    runs = [r for r in stored.runs(experiment) if matches(r.config, link.where) and link.metric in r.metrics]
    if not runs:
        return LedgerRow(item, None, (), "", "not run", experiment.id)
    runs = one_per_setting(runs)
    paper_hashes = stored.paper_hashes(experiment)
    # the paper's setting run on other threads or ranks is still the paper's setting
    at_paper = [r for r in runs if config_hash(study_config(r.config)) in paper_hashes]
    chosen = at_paper or runs  # never mix paper-setting and scaled runs in one number
    values = tuple(float(r.metrics[link.metric]) * link.scale for r in chosen)
    ours = estimate(values)
    profile = sorted({r.profile or "?" for r in chosen})[0]
    setting = ("paper setting" if at_paper else "scaled") + f" ({experiment.setting.get(profile, profile)})"
    if at_paper:  # say so when only part of the paper profile is stored
        planned = sum(1 for c in experiment.runs("paper") if matches(c, link.where))
        if len(at_paper) < planned:
            setting += f"; {len(at_paper)} of its {planned} runs stored"
    if not at_paper:
        status = "scaled analogue"
    elif item.paper_value is None or link.tolerance is None:
        status = "run"
    else:
        status = "reproduced" if abs(ours.mean - item.paper_value) <= link.tolerance else "differs"
    seeds = tuple(sorted({int(r.seed) for r in chosen if r.seed is not None}))
    return LedgerRow(item, ours, seeds, setting, status, experiment.id, values)


# When several experiments reproduce one item, the row shows the most faithful one.
_PREFERENCE = {"reproduced": 0, "differs": 0, "run": 0, "scaled analogue": 1, "not run": 2}


def _row(item: PaperItem, experiments: Iterable[Experiment], stored: _StoredRuns) -> LedgerRow:
    candidates = [
        _link_row(item, experiment, link, stored)
        for experiment in experiments
        for link in experiment.links
        if link.item == item.id
    ]
    if not candidates:
        return LedgerRow(item, None, (), "", "not run")
    return min(candidates, key=lambda row: _PREFERENCE[row.status])


def ledger_rows(store: ResultsStore | None = None, items: Sequence[PaperItem] = PAPER_ITEMS) -> list[LedgerRow]:
    """One row per paper item, in the registry's order."""
    stored = _StoredRuns(store or ResultsStore())
    experiments = list(registry().values())
    return [_row(item, experiments, stored) for item in items]


def ledger_table(store: ResultsStore | None = None, items: Sequence[PaperItem] = PAPER_ITEMS):
    """The ledger as a pandas DataFrame (one row per paper item)."""
    import pandas as pd

    records = []
    for row in ledger_rows(store, items):
        paper = "" if row.item.paper_value is None else f"{row.item.paper_value:g}"
        if row.item.paper_std is not None:
            paper += f" ({row.item.paper_std:g})"
        records.append(
            {
                "paper": row.item.paper,
                "item": row.item.item,
                "quantity": row.item.quantity,
                "paper value": paper or "—",
                "ours": str(row.ours) if row.ours else "—",
                "seeds": len(row.seeds),
                "setting": row.setting or row.item.where,
                "status": row.status,
                "id": row.item.id,
            }
        )
    return pd.DataFrame.from_records(records)


#: columns of the machine-readable ledger (``python -m hacn_core ledger --format csv`` or ``json``)
COLUMNS: tuple[str, ...] = ("id", "paper", "item", "quantity", "paper value", "paper std", "our mean", "our std",
                            "seeds", "setting", "status", "experiment")


def ledger_records(store: ResultsStore | None = None, items: Sequence[PaperItem] = PAPER_ITEMS) -> list[dict[str, Any]]:
    """The ledger as plain records, one per paper item, with the :data:`COLUMNS` and a ``seed list``.

    Numbers are unrounded and ``None`` where there is no value: ``our mean`` is the
    mean of the chosen runs' values, ``our std`` their sample standard deviation
    (``ddof=1``; ``None`` for a single run), ``seeds`` the number of runs and
    ``seed list`` their distinct seeds. ``setting`` is the text ledger's: our
    setting, or where the item can run when it has not.
    """
    records = []
    for row in ledger_rows(store, items):
        values = np.asarray(row.values, dtype=float)
        records.append({
            "id": row.item.id,
            "paper": row.item.paper,
            "item": row.item.item,
            "quantity": row.item.quantity,
            "paper value": row.item.paper_value,
            "paper std": row.item.paper_std,
            "our mean": row.ours.mean if row.ours else None,
            "our std": float(values.std(ddof=1)) if values.size > 1 else None,
            "seeds": int(values.size),
            "setting": row.setting or row.item.where,
            "status": row.status,
            "experiment": row.experiment,
            "seed list": list(row.seeds),
        })
    return records


def ledger_csv(store: ResultsStore | None = None) -> str:
    """The ledger as CSV with the :data:`COLUMNS` (a header line, one line per paper item; empty cells where
    there is no value; floats written exactly, as ``repr``): ``pandas.read_csv`` reads it."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COLUMNS)
    for record in ledger_records(store):
        writer.writerow(["" if record[c] is None else record[c] for c in COLUMNS])
    return out.getvalue()


def ledger_json(store: ResultsStore | None = None) -> str:
    """The ledger as a JSON list of :func:`ledger_records` (``null`` where there is no value)."""
    return json.dumps(ledger_records(store), indent=1) + "\n"


def status_counts(store: ResultsStore | None = None) -> dict[str, int]:
    """How many paper items are in each status."""
    counts = dict.fromkeys(STATUSES, 0)
    for row in ledger_rows(store):
        counts[row.status] += 1
    return counts


def format_ledger(store: ResultsStore | None = None) -> str:
    """The ledger as plain text (for the command line)."""
    table = ledger_table(store)
    return table.drop(columns=["id"]).to_string(index=False, max_colwidth=60)
