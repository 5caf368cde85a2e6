"""The reproduction ledger: every paper item, the paper's value and ours.

Rows come from two registries: ``hacn_core.paper_items.PAPER_ITEMS`` (every table
and figure of the three papers with the value the paper reports) and the
experiments' :class:`~hacn_core.engine.registry.Link` s (which stored metric
reproduces which item). Our value is the mean over the stored runs (one per
seed) with a 95% confidence interval from Student's t; nothing is typed in by
hand, so the ledger stays current as results land in ``results/``.

Status of a row:

``not run``          no stored run reproduces it yet
``scaled analogue``  runs exist, at a scaled setting (other data or budget): not comparable number for number
``reproduced``       runs at the paper's own setting, within the link's tolerance of the paper's value
``differs``          runs at the paper's own setting, outside that tolerance
``run``              runs at the paper's own setting; the paper gives no number or the link no tolerance
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from hacn_core.catalog import registry
from hacn_core.engine.registry import Experiment, matches
from hacn_core.engine.stats import Estimate, estimate
from hacn_core.paper_items import PAPER_ITEMS, PaperItem
from hacn_core.engine.results import ResultsStore

STATUSES: tuple[str, ...] = ("reproduced", "differs", "run", "scaled analogue", "not run")


@dataclass(frozen=True)
class LedgerRow:
    """One row of the ledger."""

    item: PaperItem
    ours: Estimate | None
    seeds: tuple[int, ...]
    setting: str
    status: str
    experiment: str = ""


def _link_row(item: PaperItem, experiment: Experiment, link, store: ResultsStore) -> LedgerRow:
    runs = [r for r in store.iter_results(experiment.id) if matches(r.config, link.where) and link.metric in r.metrics]
    if not runs:
        return LedgerRow(item, None, (), "", "not run", experiment.id)
    paper_hashes = experiment.paper_config_hashes()
    at_paper = [r for r in runs if r.config_hash in paper_hashes]
    chosen = at_paper or runs  # never mix paper-setting and scaled runs in one number
    ours = estimate([float(r.metrics[link.metric]) * link.scale for r in chosen])
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
    return LedgerRow(item, ours, seeds, setting, status, experiment.id)


# When several experiments reproduce one item, the row shows the most faithful one.
_PREFERENCE = {"reproduced": 0, "differs": 0, "run": 0, "scaled analogue": 1, "not run": 2}


def _row(item: PaperItem, experiments: Iterable[Experiment], store: ResultsStore) -> LedgerRow:
    candidates = [
        _link_row(item, experiment, link, store)
        for experiment in experiments
        for link in experiment.links
        if link.item == item.id
    ]
    if not candidates:
        return LedgerRow(item, None, (), "", "not run")
    return min(candidates, key=lambda row: _PREFERENCE[row.status])


def ledger_rows(store: ResultsStore | None = None, items: Sequence[PaperItem] = PAPER_ITEMS) -> list[LedgerRow]:
    """One row per paper item, in the registry's order."""
    store = store or ResultsStore()
    experiments = list(registry().values())
    return [_row(item, experiments, store) for item in items]


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
