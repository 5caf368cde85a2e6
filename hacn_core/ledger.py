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

Status of a row:

``reproduced``, ``differs``, ``inconclusive``  runs at the paper's own setting, compared as above
``run``              runs at the paper's own setting; the paper gives no number or the link no tolerance
``exact``            the chapter shows the item exactly: an equation implemented and checked by the
                     tests the row names (no stored run needed)
``shown``            a figure the chapter draws from stored runs (or from the library alone), which has
                     no single number to compare
``scaled analogue``  runs exist, at a scaled setting (other data or budget): not comparable number for number
``not run``          nothing stored or checked yet

A number compared by a link wins over ``exact`` and ``shown``. Every row links to
the chapter (and section) that shows it: :func:`chapter_href`.
"""

from __future__ import annotations

import csv
import html
import io
import json
import math
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from hacn_core.catalog import registry
from hacn_core.engine.items import Place
from hacn_core.engine.registry import Experiment, Link, matches
from hacn_core.engine.results import ResultsStore, RunResult, config_hash, study_config
from hacn_core.engine.stats import Estimate, estimate
from hacn_core.paper_items import PAPER_ITEMS, PaperItem

STATUSES: tuple[str, ...] = ("reproduced", "differs", "inconclusive", "run", "exact", "shown", "scaled analogue",
                             "not run")
#: Colour of each status on the ledger page (text is white on all but the last).
STATUS_COLOURS: dict[str, str] = {
    "reproduced": "#1a7f37", "differs": "#cf222e", "inconclusive": "#9a6700", "run": "#0969da",
    "exact": "#8250df", "shown": "#1b7c83", "scaled analogue": "#bc4c00", "not run": "#d0d7de",
}
#: What each status means, for the page's legend.
STATUS_MEANING: dict[str, str] = {
    "reproduced": "paper setting; within the tolerance, and our 95% interval no wider than it",
    "differs": "paper setting; outside the tolerance, and the paper's value outside our 95% interval",
    "inconclusive": "paper setting; our 95% interval is wider than the tolerance and holds the paper's value",
    "run": "paper setting; the paper gives no number, or no tolerance can be defended",
    "exact": "the chapter shows it exactly: implemented and checked by the named tests",
    "shown": "a figure the chapter draws, with no single number to compare",
    "scaled analogue": "runs at a scaled setting: not comparable number for number",
    "not run": "nothing stored or checked yet",
}
NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"  # the chapters (for their titles)


@dataclass(frozen=True)
class LedgerRow:
    """One row of the ledger. ``values``: our value of each chosen run (in the paper's unit), whose
    mean and 95% confidence interval ``ours`` is; ``tolerance`` the link's; ``verdict`` why the status."""

    item: PaperItem
    ours: Estimate | None
    seeds: tuple[int, ...]
    setting: str
    status: str
    experiment: str = ""
    values: tuple[float, ...] = ()
    tolerance: float | None = None
    verdict: str = ""

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
    """The store's runs and the paper-setting hashes of each experiment, read once per ledger."""

    def __init__(self, store: ResultsStore) -> None:
        self.store = store
        self._runs: dict[str, list[RunResult]] = {}
        self._paper: dict[str, frozenset[str]] = {}

    def runs(self, experiment: Experiment) -> list[RunResult]:
        if experiment.id not in self._runs:
            # a damaged file is skipped with a warning naming it: it costs its own run, not the ledger
            self._runs[experiment.id] = list(self.store.iter_results(experiment.id, damaged=[]))
        return self._runs[experiment.id]

    def paper_hashes(self, experiment: Experiment) -> frozenset[str]:
        if experiment.id not in self._paper:
            self._paper[experiment.id] = experiment.paper_config_hashes()
        return self._paper[experiment.id]

    def at_paper(self, experiment: Experiment, runs: Iterable[RunResult]) -> list[RunResult]:
        """The runs at the paper's setting (run on any threads or ranks)."""
        hashes = self.paper_hashes(experiment)
        return [r for r in runs if config_hash(study_config(r.config)) in hashes]


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


def _setting(experiment: Experiment, chosen: Sequence[RunResult], at_paper: bool) -> str:
    profile = sorted({r.profile or "?" for r in chosen})[0]
    return ("paper setting" if at_paper else "scaled") + f" ({experiment.setting.get(profile, profile)})"


def _link_row(item: PaperItem, experiment: Experiment, link: Link, stored: _StoredRuns) -> LedgerRow:
    runs = [r for r in stored.runs(experiment) if matches(r.config, link.where) and link.metric in r.metrics]
    if not runs:
        return LedgerRow(item, None, (), "", "not run", experiment.id, tolerance=link.tolerance)
    runs = one_per_setting(runs)
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
    return LedgerRow(item, ours, seeds, setting, status, experiment.id, values, link.tolerance, why)


def _book_row(item: PaperItem, place: Place, experiments: dict[str, Experiment], stored: _StoredRuns) -> LedgerRow:
    """The row of an item no link compares: "exact", "shown" or still "not run", from where the book shows it."""
    if place.checked_by:
        return LedgerRow(item, None, (), "checked exactly by " + "; ".join(place.checked_by), "exact",
                         verdict="an equation implemented and checked against a hand computation")
    if place.drawn_from is None:
        return LedgerRow(item, None, (), "", "not run")
    if not place.drawn_from:
        return LedgerRow(item, None, (), "drawn from the library (no stored run needed)", "shown",
                         verdict="a figure: no single number to compare")
    parts, drawn = [], []
    for experiment_id in place.drawn_from:
        experiment = experiments[experiment_id]
        runs = one_per_setting(stored.runs(experiment))
        if not runs:
            continue
        at_paper = stored.at_paper(experiment, runs)
        chosen = at_paper or runs
        drawn.append(experiment_id)
        seeds = sorted({int(r.seed) for r in chosen if r.seed is not None})
        parts.append(f"{experiment_id}: {len(chosen)} stored runs (seeds {', '.join(map(str, seeds))}), "
                     f"{_setting(experiment, chosen, bool(at_paper))}")
    if not drawn:
        return LedgerRow(item, None, (), "", "not run", ", ".join(place.drawn_from))
    # no number, so no seeds: the setting says how many runs the figure (or table cell) draws
    verdict = ("a figure drawn from stored runs: no single number to compare" if item.item.startswith("Fig.") else
               "a table cell the chapter computes from stored runs (model selection over arms or folds), beside "
               "the paper's number: no single link to compare")
    return LedgerRow(item, None, (), "drawn from " + "; ".join(parts), "shown", ", ".join(drawn), verdict=verdict)


# When several experiments reproduce one item, the row shows the most faithful one.
_PREFERENCE = {"reproduced": 0, "differs": 0, "inconclusive": 0, "run": 0, "scaled analogue": 1, "not run": 2}


def _row(item: PaperItem, experiments: dict[str, Experiment], stored: _StoredRuns) -> LedgerRow:
    candidates = [
        _link_row(item, experiment, link, stored)
        for experiment in experiments.values()
        for link in experiment.links
        if link.item == item.id
    ]
    best = min(candidates, key=lambda row: _PREFERENCE[row.status]) if candidates else None
    if best is not None and best.status != "not run":
        return best
    if item.book is not None:
        row = _book_row(item, item.book, experiments, stored)
        if row.status != "not run" or best is None:
            return row
    return best or LedgerRow(item, None, (), "", "not run")


def ledger_rows(store: ResultsStore | None = None, items: Sequence[PaperItem] = PAPER_ITEMS) -> list[LedgerRow]:
    """One row per paper item, in the registry's order."""
    stored = _StoredRuns(store or ResultsStore())
    experiments = dict(registry())
    return [_row(item, experiments, stored) for item in items]


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


def _link_text(place: Place) -> str:
    """The section a row links to (the chapter's title when the row links to the chapter's top)."""
    return place.section.replace("$", "").replace("\\", "") or chapter_title(place.chapter)


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
    """The paper's value as the paper prints it: ``value (std)``; "—" for a figure or claim."""
    if item.paper_value is None:
        return "—"
    return _g(item.paper_value) + (f" ({_g(item.paper_std, 2)})" if item.paper_std is not None else "")


def ours_text(row: LedgerRow) -> str:
    """Our value in the book's convention: ``mean (std), n=k``; "—" when there is no number."""
    if row.ours is None:
        return "—"
    std = row.std
    return _g(row.ours.mean) + (f" ({_g(std, 2)})" if std is not None else "") + f", n={row.ours.n}"


def tolerance_text(row: LedgerRow) -> str:
    return "—" if row.tolerance is None or row.ours is None else f"± {row.tolerance:g}"


def interval_text(row: LedgerRow) -> str:
    """Our 95% interval ``[low, high]``, to two significant digits of its half-width; "—" without one."""
    interval = row.interval
    if interval is None:
        return "—"
    half = (interval[1] - interval[0]) / 2
    decimals = max(0, 1 - math.floor(math.log10(half))) if half > 0 else 0
    return f"[{interval[0]:.{decimals}f}, {interval[1]:.{decimals}f}]"


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
                "ours": ours_text(row),
                "tolerance": tolerance_text(row),
                "95% interval": interval_text(row),
                "status": row.status,
                "setting": row.setting or row.item.where,
                "chapter": chapter_href(row.item.book),
                "finding": row.item.finding,
                "id": row.item.id,
            }
        )
    return pd.DataFrame.from_records(records)


#: columns of the machine-readable ledger (``python -m hacn_core ledger --format csv`` or ``json``)
COLUMNS: tuple[str, ...] = ("id", "paper", "item", "quantity", "paper value", "paper std", "our mean", "our std",
                            "seeds", "tolerance", "ci low", "ci high", "status", "verdict", "setting", "experiment",
                            "chapter", "checked by", "finding")


def ledger_records(store: ResultsStore | None = None, items: Sequence[PaperItem] = PAPER_ITEMS) -> list[dict[str, Any]]:
    """The ledger as plain records, one per paper item, with the :data:`COLUMNS` and a ``seed list``.

    Numbers are unrounded and ``None`` where there is no value: ``our mean`` is the
    mean of the chosen runs' values, ``our std`` their sample standard deviation
    (``ddof=1``; ``None`` for a single run), ``seeds`` the number of runs and
    ``seed list`` their distinct seeds; ``tolerance`` is the link's, ``ci low`` and
    ``ci high`` our 95% interval (two runs or more), ``verdict`` why the status.
    ``setting`` is the text ledger's: our setting, or where the item can run when it
    has not. ``chapter`` is the page that shows the item (:func:`chapter_href`),
    ``checked by`` the tests of an exact item, ``; ``-separated.
    """
    records = []
    for row in ledger_rows(store, items):
        interval = row.interval
        records.append({
            "id": row.item.id,
            "paper": row.item.paper,
            "item": row.item.item,
            "quantity": row.item.quantity,
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
            "setting": row.setting or row.item.where,
            "experiment": row.experiment,
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


def status_counts(store: ResultsStore | None = None, rows: Sequence[LedgerRow] | None = None) -> dict[str, int]:
    """How many paper items are in each status (of ``rows`` when given, else of the store's ledger)."""
    counts = dict.fromkeys(STATUSES, 0)
    for row in ledger_rows(store) if rows is None else rows:
        counts[row.status] += 1
    return counts


def format_ledger(store: ResultsStore | None = None) -> str:
    """The ledger as plain text (for the command line)."""
    table = ledger_table(store)
    return table.drop(columns=["id"]).to_string(index=False, max_colwidth=60)


# ----------------------------------------------------------------------------- the ledger page


_STYLE = """
#hacn-ledger { font-size: 0.82rem; }
#hacn-ledger .st { display: inline-block; padding: 0 0.45em; border-radius: 0.7em; color: #fff;
  white-space: nowrap; font-size: 0.78rem; line-height: 1.5; }
#hacn-ledger .st-not-run { color: #24292f; }
#hacn-ledger table { border-collapse: collapse; width: 100%; margin: 0.4em 0 1em 0; }
#hacn-ledger th, #hacn-ledger td { border-bottom: 1px solid rgba(127,127,127,0.3); padding: 0.25em 0.4em;
  vertical-align: top; text-align: left; }
#hacn-ledger td.num { text-align: right; white-space: nowrap; font-variant-numeric: tabular-nums; }
#hacn-ledger th.sortable { cursor: pointer; user-select: none; }
#hacn-ledger th.sortable::after { content: " \\21C5"; opacity: 0.4; }
#hacn-ledger th[data-dir="asc"]::after { content: " \\25B2"; opacity: 1; }
#hacn-ledger th[data-dir="desc"]::after { content: " \\25BC"; opacity: 1; }
#hacn-ledger code { font-size: 0.72rem; word-break: break-all; }
#hacn-ledger .figs { display: flex; flex-wrap: wrap; gap: 0.3em 0.9em; margin: 0.2em 0 0.8em 0; }
#hacn-ledger .fig, #hacn-ledger .st-filter { cursor: pointer; white-space: nowrap; }
#hacn-ledger .fig:hover, #hacn-ledger .st-filter:hover { text-decoration: underline; }
#hacn-ledger .dot { display: inline-block; width: 0.62em; height: 0.62em; margin-left: 1px; border-radius: 2px;
  vertical-align: middle; }
#hacn-ledger .controls { display: flex; flex-wrap: wrap; gap: 0.5em; align-items: center; margin: 0.6em 0; }
#hacn-ledger .controls input { min-width: 16em; }
#hacn-ledger .why { font-size: 0.72rem; opacity: 0.8; }
#hacn-ledger .scroll { overflow-x: auto; }
#hacn-ledger td.setting { min-width: 11em; font-size: 0.76rem; overflow-wrap: anywhere; }
#hacn-ledger td.status { min-width: 7.5em; }
#hacn-ledger td.quantity { min-width: 12em; }
#hacn-ledger td.item { white-space: nowrap; }
"""

_SCRIPT = """
(function () {
  var root = document.getElementById("hacn-ledger");
  if (!root) { return; }
  var table = root.querySelector("table.rows");
  var body = table.tBodies[0];
  var text = root.querySelector("input.q"), paper = root.querySelector("select.paper"),
      status = root.querySelector("select.status"), shown = root.querySelector(".shown"),
      reset = root.querySelector("button.reset");
  var onlyItem = "";
  function apply() {
    var q = text.value.toLowerCase(), p = paper.value, s = status.value, n = 0;
    Array.prototype.forEach.call(body.rows, function (tr) {
      var ok = (!p || tr.dataset.paper === p) && (!s || tr.dataset.status === s) &&
               (!onlyItem || tr.dataset.fig === onlyItem) && (!q || tr.textContent.toLowerCase().indexOf(q) >= 0);
      tr.style.display = ok ? "" : "none";
      if (ok) { n += 1; }
    });
    shown.textContent = n + " of " + body.rows.length + " rows" + (onlyItem ? " (" + onlyItem.replace("|", ", ") + ")" : "");
  }
  [text, paper, status].forEach(function (el) { el.addEventListener("input", apply); });
  reset.addEventListener("click", function () { text.value = ""; paper.value = ""; status.value = ""; onlyItem = ""; apply(); });
  Array.prototype.forEach.call(root.querySelectorAll(".fig"), function (el) {
    el.addEventListener("click", function () {
      onlyItem = el.dataset.fig; paper.value = ""; status.value = ""; text.value = ""; apply();
      table.scrollIntoView({behavior: "smooth", block: "start"});
    });
  });
  Array.prototype.forEach.call(root.querySelectorAll(".st-filter"), function (el) {
    el.addEventListener("click", function () {
      status.value = el.dataset.status; paper.value = el.dataset.paper || ""; onlyItem = ""; text.value = ""; apply();
    });
  });
  Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, col) {
    th.addEventListener("click", function () {
      var dir = th.dataset.dir === "asc" ? "desc" : "asc";
      Array.prototype.forEach.call(table.tHead.rows[0].cells, function (h) { delete h.dataset.dir; });
      th.dataset.dir = dir;
      var rows = Array.prototype.slice.call(body.rows);
      function key(tr) { var c = tr.cells[col]; return c.dataset.sort !== undefined ? c.dataset.sort : c.textContent.trim(); }
      rows.sort(function (a, b) {
        var x = key(a), y = key(b), fx = parseFloat(x), fy = parseFloat(y), r;
        if (x === "" || y === "") { return (x === "") - (y === ""); }  // rows without a value go last
        r = (Number.isFinite(fx) && Number.isFinite(fy)) ? fx - fy : x.localeCompare(y, undefined, {numeric: true});
        return dir === "asc" ? r : -r;
      });
      rows.forEach(function (tr) { body.appendChild(tr); });
    });
  });
  apply();
})();
"""


def _badge(status: str, title: str = "", attrs: str = "") -> str:
    cls = "st st-" + status.replace(" ", "-")
    title_attr = f' title="{html.escape(title)}"' if title else ""
    return (f'<span class="{cls}" style="background:{STATUS_COLOURS[status]}"{title_attr}{attrs}>'
            f"{html.escape(status)}</span>")


def _sort_key(x: float | None) -> str:
    return "" if x is None or not math.isfinite(x) else repr(float(x))


def ledger_html(store: ResultsStore | None = None, rows: Sequence[LedgerRow] | None = None) -> str:
    """The ledger page as one self-contained HTML fragment (inline style and script, no CDN).

    At the top, the legend and the verdict rule; then one summary line per paper (the
    count of each status, coloured; a click filters the rows) and its tables and figures,
    one coloured square per item (a click shows that table's rows); then every row in a
    table sorted by clicking a header and filtered by paper, status and free text. Each
    row links to the chapter section that shows it; settings are printed in full.
    For ``IPython.display.HTML`` in the ledger notebook.
    """
    rows = ledger_rows(store) if rows is None else list(rows)
    esc = html.escape
    out = [f"<div id=\"hacn-ledger\"><style>{_STYLE}</style>"]

    # legend
    out.append("<p>")
    out.append(" ".join(f"{_badge(s)}&nbsp;{esc(STATUS_MEANING[s])}." for s in STATUSES))
    out.append("</p><p><b>Verdict</b> (paper setting, a paper number and a tolerance <i>tol</i>): with "
               "<i>d</i> = |our mean − paper| and <i>h</i> the half-width of our 95% Student-t interval, "
               "<i>reproduced</i> when <i>d</i> ≤ <i>tol</i> and <i>h</i> ≤ <i>tol</i>; <i>differs</i> when "
               "<i>d</i> &gt; <i>tol</i> and <i>d</i> &gt; <i>h</i> (the paper's value outside our interval); "
               "<i>inconclusive</i> otherwise (<i>h</i> &gt; <i>tol</i> and the paper's value inside our "
               "interval). One run has no interval: the tolerance alone decides. Spread: the paper's "
               "<i>value (std)</i> beside our <i>mean (std), n=runs</i>.</p>")

    # summary per paper, then per table / figure
    papers = list(dict.fromkeys(r.item.paper for r in rows))
    out.append("<table class=\"summary\"><thead><tr><th>paper</th><th>items</th>")
    out.extend(f"<th>{_badge(s)}</th>" for s in STATUSES)
    out.append("</tr></thead><tbody>")
    for paper in [*papers, ""]:
        mine = [r for r in rows if r.item.paper == paper or not paper]
        counts = status_counts(rows=mine)
        label = esc(paper) if paper else "<b>all</b>"
        out.append(f"<tr><td>{label}</td><td class=\"num\">{len(mine)}</td>")
        for s in STATUSES:
            cell = (f'<span class="st-filter" data-status="{esc(s)}" data-paper="{esc(paper)}">{counts[s]}</span>'
                    if counts[s] else "")
            out.append(f"<td class=\"num\">{cell}</td>")
        out.append("</tr>")
    out.append("</tbody></table>")
    for paper in papers:
        out.append(f"<div><b>{esc(paper)}</b><div class=\"figs\">")
        figures = list(dict.fromkeys(r.item.item for r in rows if r.item.paper == paper))
        for fig in figures:
            mine = [r for r in rows if r.item.paper == paper and r.item.item == fig]
            dots = "".join(f'<span class="dot" style="background:{STATUS_COLOURS[r.status]}" '
                           f'title="{esc(r.item.id)}: {esc(r.status)}"></span>' for r in mine)
            out.append(f'<span class="fig" data-fig="{esc(paper)}|{esc(fig)}">{esc(fig)}&nbsp;{dots}</span>')
        out.append("</div></div>")

    # controls and the full table
    options = "".join(f'<option value="{esc(p)}">{esc(p)}</option>' for p in papers)
    status_options = "".join(f'<option value="{esc(s)}">{esc(s)}</option>' for s in STATUSES)
    out.append('<div class="controls"><input class="q" type="search" placeholder="filter: any text, e.g. Table 1, '
               'mnist, hacn-mixer" aria-label="filter rows">'
               f'<select class="paper" aria-label="paper"><option value="">all papers</option>{options}</select>'
               f'<select class="status" aria-label="status"><option value="">all statuses</option>{status_options}'
               '</select><button class="reset" type="button">show all</button><span class="shown"></span></div>')
    headers = ("item", "quantity, where the book shows it", "paper value (std)", "ours: mean (std), n",
               "tolerance", "status", "setting")
    out.append('<div class="scroll"><table class="rows"><thead><tr>')
    out.extend(f'<th class="sortable">{esc(h)}</th>' for h in headers)
    out.append("</tr></thead><tbody>")
    for row in rows:
        item = row.item
        href = chapter_href(item.book)
        link = (f'<br>in <a href="{esc(href.removeprefix("notebooks/"))}" title="{esc(_place_text(item.book))}">'
                f"{esc(_link_text(item.book))}</a>" if href else "")
        interval = f'<div class="why">95%: {esc(interval_text(row))}</div>' if row.interval else ""
        # the sentence behind a comparison's verdict (exact, shown and not run are explained by the legend)
        why = f'<div class="why">{esc(row.verdict)}</div>' if row.verdict and row.ours is not None else ""
        if item.finding:
            why += f'<div class="why"><b>Our finding:</b> {esc(item.finding)}</div>'
        out.append(
            f'<tr data-paper="{esc(item.paper)}" data-status="{esc(row.status)}" '
            f'data-fig="{esc(item.paper)}|{esc(item.item)}">'
            f'<td class="item">{esc(item.paper)}<br>{esc(item.item)}</td>'
            f'<td class="quantity">{esc(item.quantity)}<br><code>{esc(item.id)}</code>{link}</td>'
            f'<td class="num" data-sort="{_sort_key(item.paper_value)}">{esc(paper_text(item))}</td>'
            f'<td class="num" data-sort="{_sort_key(row.ours.mean if row.ours else None)}">{esc(ours_text(row))}'
            f"{interval}</td>"
            f'<td class="num" data-sort="{_sort_key(row.tolerance if row.ours else None)}">'
            f"{esc(tolerance_text(row))}</td>"
            f'<td class="status" data-sort="{STATUSES.index(row.status)}">{_badge(row.status, row.verdict)}{why}</td>'
            f'<td class="setting">{esc(row.setting or item.where)}</td></tr>'
        )
    out.append(f"</tbody></table></div><script>{_SCRIPT}</script></div>")
    return "".join(out)


# ----------------------------------------------------------------------------- the key-results page

#: the statuses of a comparison with the paper's own number, in the order the key-results page lists them
COMPARED: tuple[str, ...] = ("reproduced", "differs", "inconclusive")


def key_results(store: ResultsStore | None = None, rows: Sequence[LedgerRow] | None = None) -> dict[str, Any]:
    """What the key-results page shows, from the ledger alone (pandas DataFrames).

    ``counts``: one row per paper, the number of its items in every status, and in all.
    ``compared[paper]``: the paper's items compared number for number at its own
    setting (:data:`COMPARED`), verdict first: item, quantity, the paper's value, ours,
    the tolerance and the status. ``to_run[paper]``: per table or figure, how many of
    its items are still ``not run``, largest first.
    """
    import pandas as pd

    rows = list(rows) if rows is not None else ledger_rows(store)
    papers = list(dict.fromkeys(r.item.paper for r in rows))
    counts = pd.DataFrame([{"paper": p, **{s: sum(r.item.paper == p and r.status == s for r in rows)
                                            for s in STATUSES},
                            "items": sum(r.item.paper == p for r in rows)} for p in papers])
    compared, to_run = {}, {}
    for p in papers:
        mine = sorted((r for r in rows if r.item.paper == p and r.status in COMPARED),
                      key=lambda r: COMPARED.index(r.status))
        compared[p] = pd.DataFrame([{"item": r.item.item, "quantity": r.item.quantity, "paper": paper_text(r.item),
                                     "ours": ours_text(r), "tolerance": tolerance_text(r), "status": r.status}
                                    for r in mine], columns=["item", "quantity", "paper", "ours", "tolerance", "status"])
        left: dict[str, int] = {}
        for r in rows:
            if r.item.paper == p and r.status == "not run":
                left[r.item.item] = left.get(r.item.item, 0) + 1
        to_run[p] = pd.DataFrame(sorted(left.items(), key=lambda kv: -kv[1]), columns=["table or figure", "items"])
    return {"counts": counts, "compared": compared, "to_run": to_run}
