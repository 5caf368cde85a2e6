"""The reproduction ledger: every paper item, the paper's value and ours.

Rows come from three sources: ``hacn_core.paper_items.PAPER_ITEMS`` (every table
and figure of the three papers with the value the paper reports, and
:attr:`~hacn_core.engine.items.PaperItem.book`, the chapter that shows it), the
experiments' :class:`~hacn_core.engine.registry.Link` s (which stored metric
reproduces which item) and the runs stored in ``results/``. Nothing is typed in by
hand, so the ledger stays current as results land. A stray JSON in the store (not
named ``<config hash>.json``) is skipped with a warning.

**Spread.** As in the chapters, our value is shown as the mean over the stored runs
(one per seed) with the standard deviation across them and the number of runs:
``mean (std), n=k``; the paper column shows the paper's value with the spread it
prints, ``value (std)``. The verdict uses the 95% Student-t confidence interval of
our mean, ``mean ± t_{0.975, n-1} std / sqrt(n)``, shown in its own column.

**Verdict** of a run at the paper's own setting against a paper number, with the
link's tolerance ``tol`` (shown in the row), ``d = |our mean - paper value|`` and,
for two runs or more, ``h`` the half-width of our 95% interval:

``reproduced``    ``d <= tol``, and (two runs or more) ``h <= tol``: within the tolerance,
                  with an interval narrow enough to tell
``differs``       ``d > tol``, and (two runs or more) the paper's value lies outside our
                  interval (``d > h``): the gap is larger than the tolerance and than the seed noise
``inconclusive``  two runs or more, ``h > tol`` and the paper's value inside our interval
                  (``d <= h``): the seeds spread more than the tolerance, more runs are needed

With one run there is no interval and the tolerance alone decides. The three cases
cover every comparison exactly once: with ``h <= tol`` the tolerance decides; with
``h > tol`` the interval does. (Calling an item reproduced whenever the paper's value
lies inside our interval would call 36 (28), n=3 "reproduced" against a paper's 1.36:
a wide interval holds anything, so it can only withhold a verdict, never give one.)

Two verdicts per row. ``status`` is the verdict **at the paper's own setting**:

``reproduced``, ``differs``, ``inconclusive``  runs at the paper's own setting, compared as above
``run``              runs at the paper's own setting; the paper gives no number or the link no tolerance
``exact``            an equation, count or configuration the tests named in the row check exactly
``shown``            a figure drawn at the paper's own setting (from its runs, or from the library alone),
                     with no single number to compare
``quoted``           a number the paper quotes from another paper: not a claim of this paper, and not
                     among the items to reproduce
``not run``          not run at the paper's setting: the row's ``needs`` says what it takes (a download, a
                     GPU budget)

``analogue`` is the verdict **on the offline analogue** a chapter runs (other data, a smaller model or
budget), where one exists: ``holds`` / ``does not hold`` / ``cannot be told`` for a claim the chapter's
claims table judges (:mod:`hacn_core.analogues`), ``shown`` for a value or a figure the chapter shows
beside the paper's without a claim; with our value on the analogue, its spread, n and the analogue's
setting. A number compared by a link wins over ``exact`` and ``shown``. Every row links to the chapter
(and section) that shows it: :func:`chapter_href`.
"""

from __future__ import annotations

import csv
import html
import io
import json
import math
import re
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from hacn_core.analogues import VERDICTS as ANALOGUE_VERDICTS
from hacn_core.analogues import Finding, findings
from hacn_core.catalog import registry
from hacn_core.engine.items import W_LIT, Place
from hacn_core.engine.registry import Experiment, Link, matches
from hacn_core.engine.results import ResultsStore, RunResult, config_hash, study_config
from hacn_core.engine.stats import Estimate, estimate
from hacn_core.engine.tables import quantity_text, unit_decimals
from hacn_core.paper_items import PAPER_ITEMS, PaperItem

STATUSES: tuple[str, ...] = ("reproduced", "differs", "inconclusive", "run", "exact", "shown", "quoted", "not run")
#: the statuses of a comparison with the paper's own number
COMPARED_STATUSES: tuple[str, ...] = ("reproduced", "differs", "inconclusive")
#: the verdicts on a chapter's offline analogue (:mod:`hacn_core.analogues`), and "" for none
ANALOGUE_STATUSES: tuple[str, ...] = ANALOGUE_VERDICTS
#: the paper-setting statuses that count among the items to reproduce (a quote of another paper does not)
TO_REPRODUCE: tuple[str, ...] = tuple(s for s in STATUSES if s != "quoted")
#: Colour of each status on the ledger page (text is white on all but "not run").
STATUS_COLOURS: dict[str, str] = {
    "reproduced": "#1a7f37", "differs": "#cf222e", "inconclusive": "#9a6700", "run": "#0969da",
    "exact": "#8250df", "shown": "#1b7c83", "quoted": "#57606a", "not run": "#d0d7de",
    "holds": "#1a7f37", "does not hold": "#cf222e", "cannot be told": "#9a6700",
}
#: What each status means, for the page's legend.
STATUS_MEANING: dict[str, str] = {
    "reproduced": "within the tolerance, and our 95% interval no wider than it",
    "differs": "outside the tolerance, and the paper's value outside our 95% interval",
    "inconclusive": "our 95% interval is wider than the tolerance and holds the paper's value",
    "run": "run; the paper gives no number, or no tolerance can be defended",
    "exact": "checked exactly by the tests the row names",
    "shown": "a figure drawn, with no single number to compare",
    "quoted": "a result the paper quotes from another paper: not a claim of this paper",
    "not run": "not run at the paper's setting (the row says what it needs)",
}
#: What each analogue verdict means.
ANALOGUE_MEANING: dict[str, str] = {
    "holds": "the chapter's claims table finds the paper's claim holds on the analogue",
    "does not hold": "the claim's opposite holds on the analogue (the 95% interval says so)",
    "cannot be told": "the analogue's 95% interval cannot tell",
    "shown": "our value or figure on the analogue, beside the paper's, with no claim judged",
}
NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"  # the chapters (for their titles)


@dataclass(frozen=True)
class Analogue:
    """What a chapter shows of an item on its offline analogue: ``status`` (:data:`ANALOGUE_STATUSES`),
    our values on it (one per seed, in ``unit``), the analogue's ``setting``, and ``evidence``: one
    sentence per claim that judges the item ("holds (public code's rule): Γ, 10 − 2 classes: +0.094 ± 0.078")."""

    status: str
    values: tuple[float, ...] = ()
    unit: str = ""
    setting: str = ""
    experiment: str = ""
    evidence: tuple[str, ...] = ()
    claims: tuple[Finding, ...] = ()  # the chapters' claims behind ``evidence``, in order

    @property
    def ours(self) -> Estimate | None:
        return estimate(self.values) if self.values else None

    @property
    def std(self) -> float | None:
        return float(np.std(self.values, ddof=1)) if len(self.values) > 1 else None


@dataclass(frozen=True)
class LedgerRow:
    """One row of the ledger. ``values``: our value of each chosen run (in the paper's unit), whose
    mean and 95% confidence interval ``ours`` is; ``tolerance`` the link's; ``verdict`` why the status;
    ``analogue`` the chapter's offline analogue of the item, if any."""

    item: PaperItem
    ours: Estimate | None
    seeds: tuple[int, ...]
    setting: str
    status: str
    experiment: str = ""
    values: tuple[float, ...] = ()
    tolerance: float | None = None
    verdict: str = ""
    analogue: Analogue | None = None
    unit: str = ""  # the unit of ``values``: the item's, or the link's for an item without one

    @property
    def std(self) -> float | None:
        """Sample standard deviation of our runs (``ddof=1``); ``None`` for fewer than two."""
        return float(np.std(self.values, ddof=1)) if len(self.values) > 1 else None

    @property
    def interval(self) -> tuple[float, float] | None:
        """Our 95% confidence interval of the mean; ``None`` for fewer than two runs."""
        if self.ours is None or self.ours.n < 2 or not math.isfinite(self.ours.half_width):
            return None
        return self.ours.mean - self.ours.half_width, self.ours.mean + self.ours.half_width

    @property
    def analogue_status(self) -> str:
        """The analogue verdict, "" when no chapter shows the item on an analogue."""
        return self.analogue.status if self.analogue else ""

    @property
    def needs(self) -> str:
        """What running the item at the paper's setting takes (a row "not run" there): the item's ``where``."""
        return self.item.where if self.status == "not run" else ""


def compare(ours: Estimate, paper: float, tolerance: float) -> tuple[str, str]:
    """The verdict of our estimate against the paper's value (module docstring): a status among
    ``reproduced``, ``differs``, ``inconclusive``, and the sentence that says why."""
    if not tolerance >= 0:
        raise ValueError(f"tolerance={tolerance!r} must be a number >= 0")
    d = abs(ours.mean - paper)
    gap = f"|ours - paper| = {d:.3g} {'<=' if d <= tolerance else '>'} tolerance {tolerance:g}"
    if ours.n < 2 or not math.isfinite(ours.half_width):
        return ("reproduced" if d <= tolerance else "differs"), f"{gap} (one run: no interval)"
    h = ours.half_width
    if h <= tolerance:
        if d <= tolerance:
            return "reproduced", f"{gap}; our 95% interval (± {h:.3g}) is narrower than the tolerance"
        return "differs", f"{gap}; the paper's value is outside our 95% interval (± {h:.3g})"
    if d > h:
        return "differs", f"{gap}; the paper's value is outside our 95% interval (± {h:.3g})"
    return "inconclusive", (f"{gap}, but our 95% interval (± {h:.3g}) is wider than the tolerance and holds the "
                            "paper's value: more runs are needed")


class _StoredRuns:
    """The store's runs and the paper-setting hashes of each experiment, read once per ledger, and the study
    configuration hash of each run, computed once (every link row of an experiment asks for them)."""

    def __init__(self, store: ResultsStore) -> None:
        self.store = store
        self._runs: dict[str, list[RunResult]] = {}
        self._paper: dict[str, frozenset[str]] = {}
        self._study: dict[int, str] = {}  # by id(run): the runs stay alive in self._runs, so ids stay theirs

    def runs(self, experiment: Experiment) -> list[RunResult]:
        if experiment.id not in self._runs:
            # a damaged file is skipped with a warning naming it: it costs its own run, not the ledger
            self._runs[experiment.id] = list(self.store.iter_results(experiment.id, damaged=[]))
        return self._runs[experiment.id]

    def paper_hashes(self, experiment: Experiment) -> frozenset[str]:
        if experiment.id not in self._paper:
            self._paper[experiment.id] = experiment.paper_config_hashes()
        return self._paper[experiment.id]

    def study_hash(self, run: RunResult) -> str:
        """:func:`study_hash` of one of :meth:`runs`."""
        if id(run) not in self._study:
            self._study[id(run)] = study_hash(run)
        return self._study[id(run)]

    def at_paper(self, experiment: Experiment, runs: Iterable[RunResult]) -> list[RunResult]:
        """The runs at the paper's setting (run on any threads or ranks)."""
        hashes = self.paper_hashes(experiment)
        return [r for r in runs if self.study_hash(r) in hashes]


def study_hash(run: RunResult) -> str:
    """The hash of a run's study configuration (:func:`~hacn_core.engine.results.study_config`): the same for
    a configuration stored under any execution (torch threads, ranks)."""
    return config_hash(study_config(run.config))


def one_per_setting(runs: Iterable[RunResult], hash_of: Callable[[RunResult], str] = study_hash) -> list[RunResult]:
    """One run per study configuration (``hash_of``: :func:`study_hash`, or a cache of it): a configuration
    stored under several executions (other torch threads, several ranks) counts once, preferably the default
    execution (one thread, one process), else the first file."""
    chosen: dict[str, RunResult] = {}
    for run in runs:
        key = hash_of(run)
        if key not in chosen or run.config_hash == key:
            chosen[key] = run
    return list(chosen.values())


def _setting(experiment: Experiment, chosen: Sequence[RunResult], at_paper: bool) -> str:
    profile = sorted({r.profile or "?" for r in chosen})[0]
    return ("paper setting" if at_paper else "scaled") + f" ({experiment.setting.get(profile, profile)})"


def _link_row(item: PaperItem, experiment: Experiment, link: Link, stored: _StoredRuns) -> LedgerRow:
    runs = [r for r in stored.runs(experiment) if matches(r.config, link.where) and link.metric in r.metrics]
    if not runs:
        return LedgerRow(item, None, (), "", "not run", experiment.id, tolerance=link.tolerance)
    runs = one_per_setting(runs, stored.study_hash)
    at_paper = stored.at_paper(experiment, runs)
    chosen = at_paper or runs  # never mix paper-setting and scaled runs in one number
    values = tuple(float(r.metrics[link.metric]) * link.scale for r in chosen)
    ours = estimate(values)
    setting = _setting(experiment, chosen, bool(at_paper))
    if at_paper:  # say so when only part of the paper profile is stored
        planned = sum(1 for c in experiment.runs("paper") if matches(c, link.where))
        if len(at_paper) < planned:
            setting += f"; {len(at_paper)} of its {planned} runs stored"
    if not at_paper:
        status, why = "scaled analogue", "a scaled setting: not comparable with the paper's number"
    elif item.paper_value is None:
        status, why = "run", "the paper gives no number for this item"
    elif link.tolerance is None:
        status, why = "run", "no tolerance: the paper's number is approximate or a bound"
    else:
        status, why = compare(ours, item.paper_value, link.tolerance)
    seeds = tuple(sorted({int(r.seed) for r in chosen if r.seed is not None}))
    return LedgerRow(item, ours, seeds, setting, status, experiment.id, values, link.tolerance, why,
                     unit=link.unit or item.unit)


def _book_row(item: PaperItem, place: Place, experiments: dict[str, Experiment], stored: _StoredRuns) -> LedgerRow:
    """The row of an item no link compares: "exact", "shown" or "not run" at the paper's setting, from where
    the book shows it; a figure drawn from runs at a scaled setting is "shown" on the analogue."""
    if place.checked_by:
        return LedgerRow(item, None, (), "checked exactly by " + "; ".join(place.checked_by), "exact",
                         verdict="implemented and checked against the paper's value or a hand computation")
    if place.drawn_from is None:
        return LedgerRow(item, None, (), "", "not run")
    if not place.drawn_from:
        return LedgerRow(item, None, (), "drawn from the library (no stored run needed)", "shown",
                         verdict="a figure: no single number to compare")
    paper_parts, scaled_parts, drawn = [], [], []
    for experiment_id in place.drawn_from:
        experiment = experiments[experiment_id]
        runs = one_per_setting(stored.runs(experiment), stored.study_hash)
        if not runs:
            continue
        at_paper = stored.at_paper(experiment, runs)
        chosen = at_paper or runs
        drawn.append(experiment_id)
        seeds = sorted({int(r.seed) for r in chosen if r.seed is not None})
        text = (f"{experiment_id}: {len(chosen)} stored runs (seeds {', '.join(map(str, seeds))}), "
                f"{_setting(experiment, chosen, bool(at_paper))}")
        (paper_parts if at_paper else scaled_parts).append(text)
    if not drawn:
        return LedgerRow(item, None, (), "", "not run", ", ".join(place.drawn_from))
    figure = item.item.startswith("Fig.")
    why = ("a figure drawn from stored runs: no single number to compare" if figure else
           "a table cell the chapter computes from stored runs (model selection over arms or folds), beside "
           "the paper's number: no single link to compare")
    if paper_parts:
        return LedgerRow(item, None, (), "drawn from " + "; ".join(paper_parts), "shown", ", ".join(drawn),
                         verdict=why)
    analogue = Analogue("shown", setting="drawn from " + "; ".join(scaled_parts), experiment=", ".join(drawn))
    return LedgerRow(item, None, (), "", "not run", ", ".join(drawn), verdict=why, analogue=analogue)


# When several experiments reproduce one item, the row shows the most faithful one.
_PREFERENCE = {"reproduced": 0, "differs": 0, "inconclusive": 0, "run": 0, "scaled analogue": 1, "not run": 2}


def _as_analogue(row: LedgerRow) -> LedgerRow:
    """A link row whose runs are at a scaled setting: "not run" at the paper's setting, "shown" on the analogue
    with the link's values."""
    analogue = Analogue("shown", row.values, row.unit or row.item.unit, row.setting, row.experiment)
    return LedgerRow(row.item, None, (), "", "not run", row.experiment, tolerance=row.tolerance,
                     verdict="a scaled setting: not comparable with the paper's number", analogue=analogue)


def _with_findings(row: LedgerRow, found: Sequence[Finding], settings: dict[str, str]) -> LedgerRow:
    """``row`` with the chapters' findings on the analogue (:mod:`hacn_core.analogues`): the first claim's verdict
    (the paper's equation comes first where a chapter judges several rules), our values from the row's link or the
    first finding that has some, and one line of evidence per claim."""
    if not found:
        return row
    base = row.analogue or Analogue("shown")
    values, unit, experiment = base.values, base.unit, base.experiment
    if not values:
        first = next((f for f in found if f.values), None)
        if first is not None:
            values, unit, experiment = first.values, first.unit, first.experiment
    experiment = experiment or found[0].experiment
    claims = [f for f in found if f.verdict != "shown"]
    status = claims[0].verdict if claims else "shown"
    evidence = tuple(dict.fromkeys(
        f"{f.verdict}{f' ({f.under})' if f.under else ''}: {f.claim} — {f.evidence}" for f in claims))
    setting = base.setting or "; ".join(settings.get(e, e) for e in experiment.split(", ") if e)
    analogue = Analogue(status, tuple(values), unit, setting, experiment, evidence, tuple(claims))
    return LedgerRow(row.item, row.ours, row.seeds, row.setting, row.status, row.experiment, row.values,
                     row.tolerance, row.verdict, analogue, row.unit)


def _row(item: PaperItem, experiments: dict[str, Experiment], stored: _StoredRuns) -> LedgerRow:
    if item.where == W_LIT:
        return LedgerRow(item, None, (), "", "quoted", verdict="a result the paper quotes from another paper")
    candidates = [
        _link_row(item, experiment, link, stored)
        for experiment in experiments.values()
        for link in experiment.links
        if link.item == item.id
    ]
    best = min(candidates, key=lambda row: _PREFERENCE[row.status]) if candidates else None
    if best is not None and best.status == "scaled analogue":
        if item.book is not None and item.book.checked_by:
            return _book_row(item, item.book, experiments, stored)
        return _as_analogue(best)
    if best is not None and best.status != "not run":
        return best
    if item.book is not None:
        row = _book_row(item, item.book, experiments, stored)
        if row.status != "not run" or row.analogue is not None or best is None:
            return row
    return best or LedgerRow(item, None, (), "", "not run")


def ledger_rows(store: ResultsStore | None = None, items: Sequence[PaperItem] = PAPER_ITEMS,
                analogues: bool = True) -> list[LedgerRow]:
    """One row per paper item, in the registry's order, each with its chapter's analogue
    (:mod:`hacn_core.analogues`; ``analogues=False`` leaves them out, which skips computing the chapters'
    claims)."""
    store = store or ResultsStore()
    stored = _StoredRuns(store)
    experiments = dict(registry())
    rows = [_row(item, experiments, stored) for item in items]
    if not analogues:
        return rows
    from hacn_core.analogues import settings as analogue_settings

    found = findings(store)
    settings = analogue_settings(found) | {e: x.setting.get("book", "book") for e, x in experiments.items()}
    return [_with_findings(row, found.get(row.item.id, ()), settings) for row in rows]


# ----------------------------------------------------------------------------- where the book shows an item


def section_anchor(heading: str) -> str:
    """The HTML id Jupyter Book (Sphinx, docutils' ``make_id``) gives a section with this heading.

    Math markers go (``$\\Gamma$`` reads ``Gamma``), the text is lowercased and folded
    to ASCII, every run of other characters becomes one ``-``, and leading non-letters
    and trailing hyphens are dropped: ``"The paper's rule"`` -> ``the-paper-s-rule``.
    """
    text = heading.replace("$", "").replace("\\", "")
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii").lower()
    text = re.sub(r"[^a-z0-9]+", "-", text)
    return re.sub(r"^[^a-z]+", "", text).strip("-")


def chapter_href(place: Place | None) -> str:
    """The page (and section) of the book that shows an item, relative to the book's root:
    ``notebooks/<chapter>.html#<section anchor>``; "" when no chapter shows it yet."""
    if place is None:
        return ""
    anchor = section_anchor(place.section) if place.section else ""
    return f"notebooks/{place.chapter}.html" + (f"#{anchor}" if anchor else "")


@cache
def chapter_title(chapter: str) -> str:
    """The first heading of the chapter's notebook (its title), or its name when the notebook is not found."""
    path = NOTEBOOKS / f"{chapter}.ipynb"
    if path.is_file():
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            if cell["cell_type"] == "markdown":
                for line in "".join(cell["source"]).splitlines():
                    if line.startswith("# "):
                        return line[2:].strip()
    return chapter


def _place_text(place: Place | None) -> str:
    if place is None:
        return ""
    section = place.section.replace("$", "").replace("\\", "")
    return chapter_title(place.chapter) + (f" › {section}" if section else "")


# ----------------------------------------------------------------------------- formatting


def _g(x: float, digits: int = 4) -> str:
    """``x`` to ``digits`` significant digits, without an exponent where plain digits do (``1e+02`` -> ``100``)."""
    return f"{float(f'{x:.{digits}g}'):g}"


def paper_text(item: PaperItem) -> str:
    """The paper's value with its unit at the house precision, ``value (std) unit``; "—" for a figure or claim."""
    if item.paper_value is None:
        return "—"
    return quantity_text([item.paper_value], item.unit, std=item.paper_std)


def ours_text(row: LedgerRow) -> str:
    """Our value at the paper's setting, ``mean (std) unit, n = k``; an exact item shows the paper's value (the
    tests check it); "—" when there is no number."""
    if row.ours is None:
        if row.status == "exact" and row.item.paper_value is not None:
            return quantity_text([row.item.paper_value], row.item.unit) + " (exact)"
        return "—"
    return quantity_text(row.values, row.unit or row.item.unit)


def analogue_text(row: LedgerRow) -> str:
    """Our value on the chapter's analogue, ``mean (std) unit, n = k``; "—" without one."""
    if row.analogue is None or not row.analogue.values:
        return "—"
    return quantity_text(row.analogue.values, row.analogue.unit)


def tolerance_text(row: LedgerRow) -> str:
    if row.tolerance is None or row.ours is None:
        return "—"
    return "± " + quantity_text([row.tolerance], row.item.unit, spread=False)


def interval_text(row: LedgerRow) -> str:
    """Our 95% interval ``[low, high]`` at the unit's precision; "—" without one."""
    interval = row.interval
    if interval is None:
        return "—"
    d = unit_decimals(row.item.unit)
    return f"[{interval[0]:,.{d}f}, {interval[1]:,.{d}f}]"


def ledger_table(store: ResultsStore | None = None, items: Sequence[PaperItem] = PAPER_ITEMS,
                 rows: Sequence[LedgerRow] | None = None):
    """The ledger as a pandas DataFrame (one row per paper item; of ``rows`` when given, which saves
    reading every stored run again)."""
    import pandas as pd

    records = []
    for row in ledger_rows(store, items) if rows is None else rows:
        records.append(
            {
                "paper": row.item.paper,
                "item": row.item.item,
                "quantity": row.item.quantity,
                "paper value": paper_text(row.item),
                "ours, paper setting": ours_text(row),
                "status": row.status,
                "ours, analogue": analogue_text(row),
                "analogue": row.analogue_status or "—",
                "chapter": chapter_href(row.item.book),
                "id": row.item.id,
            }
        )
    return pd.DataFrame.from_records(records)


#: columns of the machine-readable ledger (``python -m hacn_core ledger --format csv`` or ``json``)
COLUMNS: tuple[str, ...] = ("id", "paper", "item", "quantity", "unit", "paper value", "paper std", "our mean",
                            "our std", "seeds", "tolerance", "ci low", "ci high", "status", "verdict", "setting",
                            "needs", "experiment", "analogue", "analogue mean", "analogue std", "analogue n",
                            "analogue unit", "analogue setting", "analogue evidence", "chapter", "checked by",
                            "finding")


def ledger_records(store: ResultsStore | None = None, items: Sequence[PaperItem] = PAPER_ITEMS,
                   rows: Sequence[LedgerRow] | None = None) -> list[dict[str, Any]]:
    """The ledger as plain records, one per paper item, with the :data:`COLUMNS` and a ``seed list``.

    Numbers are unrounded and ``None`` where there is no value. At the paper's setting: ``our mean``
    is the mean of the chosen runs' values, ``our std`` their sample standard deviation (``ddof=1``;
    ``None`` for a single run), ``seeds`` the number of runs and ``seed list`` their distinct seeds;
    ``tolerance`` is the link's, ``ci low`` and ``ci high`` our 95% interval (two runs or more),
    ``status`` the verdict and ``verdict`` why; ``needs`` what a row "not run" there takes. On the
    chapter's offline analogue: ``analogue`` (the verdict), ``analogue mean`` / ``std`` / ``n`` /
    ``unit``, its ``analogue setting`` and ``analogue evidence`` (the claims, `` | ``-separated).
    ``chapter`` is the page that shows the item (:func:`chapter_href`), ``checked by`` the tests of an
    exact item, ``; ``-separated.
    """
    records = []
    for row in ledger_rows(store, items) if rows is None else rows:
        interval = row.interval
        a = row.analogue
        records.append({
            "id": row.item.id,
            "paper": row.item.paper,
            "item": row.item.item,
            "quantity": row.item.quantity,
            "unit": row.item.unit,
            "paper value": row.item.paper_value,
            "paper std": row.item.paper_std,
            "our mean": row.ours.mean if row.ours else None,
            "our std": row.std,
            "seeds": len(row.values),
            "tolerance": row.tolerance if row.ours else None,
            "ci low": interval[0] if interval else None,
            "ci high": interval[1] if interval else None,
            "status": row.status,
            "verdict": row.verdict,
            "setting": row.setting or ("" if row.status == "not run" else row.item.where),
            "needs": row.needs,
            "experiment": row.experiment,
            "analogue": row.analogue_status,
            "analogue mean": a.ours.mean if a and a.ours else None,
            "analogue std": a.std if a else None,
            "analogue n": len(a.values) if a else 0,
            "analogue unit": a.unit if a else "",
            "analogue setting": a.setting if a else "",
            "analogue evidence": " | ".join(a.evidence) if a else "",
            "chapter": chapter_href(row.item.book),
            "checked by": "; ".join(row.item.book.checked_by) if row.item.book else "",
            "finding": row.item.finding,
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


def status_counts(store: ResultsStore | None = None, rows: Sequence[LedgerRow] | None = None,
                  analogue: bool = False) -> dict[str, int]:
    """How many paper items are in each status at the paper's setting (of ``rows`` when given, else of the
    store's ledger); ``analogue=True``: in each analogue verdict, with "" for the items no chapter shows on an
    analogue."""
    rows = ledger_rows(store) if rows is None else rows
    if analogue:
        counts = dict.fromkeys((*ANALOGUE_STATUSES, ""), 0)
        for row in rows:
            counts[row.analogue_status] += 1
        return counts
    counts = dict.fromkeys(STATUSES, 0)
    for row in rows:
        counts[row.status] += 1
    return counts


def format_ledger(store: ResultsStore | None = None) -> str:
    """The ledger as plain text (for the command line)."""
    table = ledger_table(store)
    return table.drop(columns=["id"]).to_string(index=False, max_colwidth=60)


# ----------------------------------------------------------------------------- the ledger page


# Class names stay clear of the theme's Bootstrap (``row``, ``col``, ``table``, ``summary`` lay out a page grid).
_STYLE = """
#hacn-ledger { font-size: 0.82rem; max-width: 100%; }
#hacn-ledger .st { display: inline-block; padding: 0 0.4em; border-radius: 0.7em; color: #fff;
  font-size: 0.74rem; line-height: 1.5; white-space: nowrap; }
#hacn-ledger .st-not-run { color: #24292f; }
#hacn-ledger table { border-collapse: collapse; width: 100%; table-layout: fixed; margin: 0.3em 0 1.2em 0; }
#hacn-ledger th, #hacn-ledger td { border-bottom: 1px solid rgba(127,127,127,0.25); padding: 0.22em 0.35em;
  vertical-align: top; text-align: left; overflow-wrap: anywhere; }
#hacn-ledger td.num { text-align: right; font-variant-numeric: tabular-nums; }
#hacn-ledger tr.grp th { background: rgba(127,127,127,0.10); font-weight: 600; }
#hacn-ledger details > summary { cursor: pointer; }
#hacn-ledger details .more { font-size: 0.74rem; margin: 0.3em 0 0.2em 0.8em; opacity: 0.9; }
#hacn-ledger details .more p { margin: 0.15em 0; }
#hacn-ledger code { font-size: 0.7rem; overflow-wrap: anywhere; }
#hacn-ledger .controls { position: sticky; top: 0; z-index: 2; background: var(--pst-color-background, #fff);
  display: flex; flex-wrap: wrap; gap: 0.4em; align-items: center; padding: 0.4em 0; }
#hacn-ledger .controls input { min-width: 12em; flex: 1 1 12em; }
#hacn-ledger .controls select { max-width: 13em; }
#hacn-ledger table.summary { table-layout: auto; }
#hacn-ledger table.summary th { white-space: nowrap; }
#hacn-ledger .filter { cursor: pointer; text-decoration: underline dotted; }
"""

_SCRIPT = """
(function () {
  var root = document.getElementById("hacn-ledger");
  if (!root) { return; }
  var q = root.querySelector("input.q"), paper = root.querySelector("select.paper"),
      status = root.querySelector("select.status"), analogue = root.querySelector("select.analogue"),
      shown = root.querySelector(".shown"), reset = root.querySelector("button.reset");
  var rows = root.querySelectorAll("tr.item-row"), total = rows.length;
  function apply() {
    var text = q.value.toLowerCase(), n = 0;
    Array.prototype.forEach.call(rows, function (tr) {
      var ok = (!paper.value || tr.dataset.paper === paper.value) && (!status.value || tr.dataset.status === status.value)
               && (!analogue.value || tr.dataset.analogue === analogue.value)
               && (!text || tr.textContent.toLowerCase().indexOf(text) >= 0);
      tr.style.display = ok ? "" : "none";
      if (ok) { n += 1; }
    });
    Array.prototype.forEach.call(root.querySelectorAll("tr.grp"), function (g) {
      var any = false, next = g.nextElementSibling;
      while (next && next.classList.contains("item-row")) { if (next.style.display !== "none") { any = true; } next = next.nextElementSibling; }
      g.style.display = any ? "" : "none";
    });
    Array.prototype.forEach.call(root.querySelectorAll("section.paper"), function (sec) {
      sec.style.display = sec.querySelector("tr.item-row:not([style*='none'])") ? "" : "none";
    });
    shown.textContent = n + " of " + total + " items";
  }
  [q, paper, status, analogue].forEach(function (el) { el.addEventListener("input", apply); });
  reset.addEventListener("click", function () { q.value = ""; paper.value = ""; status.value = ""; analogue.value = ""; apply(); });
  Array.prototype.forEach.call(root.querySelectorAll(".filter"), function (el) {
    el.addEventListener("click", function () {
      paper.value = el.dataset.paper || ""; status.value = el.dataset.status || ""; analogue.value = el.dataset.analogue || "";
      q.value = ""; apply();
    });
  });
  apply();
})();
"""


def _badge(status: str, title: str = "") -> str:
    if not status:
        return ""
    cls = "st st-" + status.replace(" ", "-")
    title_attr = f' title="{html.escape(title)}"' if title else ""
    return (f'<span class="{cls}" style="background:{STATUS_COLOURS[status]}"{title_attr}>'
            f"{html.escape(status)}</span>")


def _details(row: LedgerRow) -> str:
    """What one click on a row's quantity shows: the paper's setting, ours, the tolerance and interval, the tests,
    the analogue's setting and evidence, our finding, the chapter and the item's id."""
    esc, item, parts = html.escape, row.item, []
    if item.paper_setting:
        parts.append(f"<b>Paper's setting:</b> {esc(item.paper_setting)} ({esc(item.source)})")
    if row.status == "not run":
        parts.append(f"<b>At the paper's setting:</b> not run; needs {esc(item.where)}")
    elif row.setting:
        parts.append(f"<b>Ours at the paper's setting:</b> {esc(row.setting)}")
    if row.ours is not None and row.tolerance is not None:
        parts.append(f"<b>Verdict:</b> {esc(row.verdict)} (95% interval {esc(interval_text(row))}, tolerance "
                     f"{esc(tolerance_text(row))})")
    elif row.verdict and row.status not in ("not run",):
        parts.append(f"<b>Verdict:</b> {esc(row.verdict)}")
    if row.analogue is not None:
        parts.append(f"<b>Analogue:</b> {esc(row.analogue.setting or row.analogue.experiment)}")
        parts.extend(f"<b>Claim</b> {esc(e)}" for e in row.analogue.evidence)
    if item.finding:
        parts.append(f"<b>Our finding:</b> {esc(item.finding)}")
    href = chapter_href(item.book)
    if href:
        parts.append(f'<b>Shown in</b> <a href="{esc(href.removeprefix("notebooks/"))}">{esc(_place_text(item.book))}</a>')
    parts.append(f"<code>{esc(item.id)}</code>")
    return "".join(f"<p>{p}</p>" for p in parts)


def ledger_html(store: ResultsStore | None = None, rows: Sequence[LedgerRow] | None = None) -> str:
    """The ledger page as one self-contained HTML fragment (inline style and script, no CDN).

    At the top, a sticky bar of filters (free text, paper, verdict at the paper's setting, verdict on the
    analogue) and the counts per paper (a click filters); then one section per paper, its items grouped by
    table and figure, in four short columns: quantity, the paper's value, ours at the paper's setting with its
    verdict, ours on the chapter's analogue with its verdict. A click on a quantity opens its details (settings,
    tolerance, interval, tests, claims, finding, chapter). For ``IPython.display.HTML`` in the ledger notebook.
    """
    rows = ledger_rows(store) if rows is None else list(rows)
    esc = html.escape
    papers = list(dict.fromkeys(r.item.paper for r in rows))
    out = [f'<div id="hacn-ledger"><style>{_STYLE}</style>']
    paper_options = "".join(f'<option value="{esc(p)}">{esc(p)}</option>' for p in papers)
    status_options = "".join(f'<option value="{esc(s)}">{esc(s)}</option>' for s in STATUSES)
    analogue_options = "".join(f'<option value="{esc(s)}">{esc(s)}</option>' for s in ANALOGUE_STATUSES)
    out.append('<div class="controls"><input class="q" type="search" aria-label="filter items" '
               'placeholder="filter: any text, e.g. Table 1, Γ, MNIST">'
               f'<select class="paper" aria-label="paper"><option value="">all papers</option>{paper_options}</select>'
               f'<select class="status" aria-label="verdict at the paper\'s setting"><option value="">paper setting: '
               f'all</option>{status_options}</select>'
               f'<select class="analogue" aria-label="verdict on the analogue"><option value="">analogue: all</option>'
               f'{analogue_options}</select><button class="reset" type="button">show all</button>'
               '<span class="shown"></span></div>')

    # counts per paper: at the paper's setting, and on the analogue (a click filters)
    out.append('<table class="summary"><thead><tr><th>paper</th><th>items</th><th>at the paper\'s setting</th>'
               "<th>on the offline analogue</th></tr></thead><tbody>")
    for paper in papers:
        mine = [r for r in rows if r.item.paper == paper]
        counts, acounts = status_counts(rows=mine), status_counts(rows=mine, analogue=True)
        cells = " ".join(f'<span class="filter" data-paper="{esc(paper)}" data-status="{esc(s)}">'
                         f"{_badge(s)}&nbsp;{n}</span>" for s, n in counts.items() if n)
        acells = " ".join(f'<span class="filter" data-paper="{esc(paper)}" data-analogue="{esc(s)}">'
                          f"{_badge(s)}&nbsp;{n}</span>" for s, n in acounts.items() if n and s)
        out.append(f"<tr><td>{esc(paper)}</td><td class=\"num\">{len(mine)}</td><td>{cells}</td><td>{acells}</td></tr>")
    out.append("</tbody></table>")

    widths = ("43%", "15%", "21%", "21%")
    heads = ("quantity (click for details and the chapter)", "paper", "ours at the paper's setting",
             "ours on the offline analogue")
    for paper in papers:
        out.append(f'<section class="paper"><h3>{esc(paper)}</h3><table class="rows">')
        out.append("".join(f'<col style="width:{w}">' for w in widths))
        out.append("<thead><tr>" + "".join(f"<th>{esc(h)}</th>" for h in heads) + "</tr></thead><tbody>")
        for fig in dict.fromkeys(r.item.item for r in rows if r.item.paper == paper):
            out.append(f'<tr class="grp"><th colspan="4">{esc(fig)}</th></tr>')
            for row in (r for r in rows if r.item.paper == paper and r.item.item == fig):
                item = row.item
                ours = esc(ours_text(row)) if row.ours is not None or (
                    row.status == "exact" and item.paper_value is not None) else ""
                analogue = (f"{esc(analogue_text(row)) if row.analogue and row.analogue.values else ''} "
                            f"{_badge(row.analogue_status)}" if row.analogue else "—")
                out.append(
                    f'<tr class="item-row" data-paper="{esc(item.paper)}" data-status="{esc(row.status)}" '
                    f'data-analogue="{esc(row.analogue_status)}">'
                    f"<td><details><summary>{esc(item.quantity)}</summary><div class=\"more\">{_details(row)}</div>"
                    f"</details></td>"
                    f'<td class="num">{esc(paper_text(item))}</td>'
                    f"<td>{ours} {_badge(row.status, row.verdict)}</td>"
                    f"<td>{analogue}</td></tr>")
        out.append("</tbody></table></section>")
    out.append(f"<script>{_SCRIPT}</script></div>")
    return "".join(out)
