"""Tables a chapter shows: the house table, the claims table and the "mean (std)" cells.

:func:`house_table` is how every chapter shows a DataFrame: human column names,
no index column, numbers at a sensible precision, "–" (with a note saying why)
where a cell has no value, "yes"/"no" for booleans, internal ids replaced by
labels, and a layout that fits the book's text column (:func:`house_table`: headers and text
wrap, long tokens break at their punctuation, a table of many columns is set in a smaller type).
``ClaimTable`` collects the
rows of a chapter's "the paper's claims, checked on our runs" table;
:func:`mean_std` formats one cell of seeds as papers print it; :func:`coverage_table`
says which cells of a study that fills in over several sessions are stored.
"""

from __future__ import annotations

import html
import math
import numbers
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np


def mean_std(values: Sequence[float], digits: int = 1) -> str:
    """``"mean (std)"`` of ``values`` (sample std, ``ddof=1``) at ``digits`` decimals.

    One value is shown alone and no value as ``"-"``: the cell of a table whose
    runs are not (all) stored yet.
    """
    v = np.asarray(values, dtype=float)
    if v.size == 0:
        return "-"
    if v.size == 1:
        return f"{v[0]:.{digits}f}"
    return f"{v.mean():.{digits}f} ({v.std(ddof=1):.{digits}f})"


class ClaimTable:
    """Rows of a chapter's "the paper's claims, checked on our runs" table.

    ``add(claim, source, evidence, holds)`` records one claim: where the paper
    makes it, our evidence, and whether it holds (``None`` when the runs cannot
    tell); ``frame()`` is the DataFrame the notebook shows.
    """

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []
        self.ledger: list[dict[str, Any]] = []

    def add(self, claim: str, source: str, evidence: str, holds: bool | None, *, items: Sequence[str] = (),
            values: Sequence[float] = (), unit: str = "", under: str = "") -> None:
        """One claim. ``items``: the ledger ids (``hacn_core.paper_items``) this claim judges on the chapter's
        offline analogue, so the ledger carries the same verdict; ``values`` (our value of the first item, one
        per seed, in ``unit``) when the claim rests on one; ``under`` names the rule or recipe the verdict holds
        under when the paper's item is judged more than once (e.g. "the public code's rule")."""
        self.rows.append({"claim": claim, "paper": source, "ours": evidence, "holds": holds})
        self.ledger.append({"claim": claim, "evidence": evidence, "holds": holds, "items": tuple(items),
                            "values": tuple(float(v) for v in values), "unit": unit, "under": under})

    def frame(self):
        """The DataFrame a chapter shows; ``frame.attrs["ledger"]`` keeps each row's ledger ids and values."""
        import pandas as pd

        frame = pd.DataFrame.from_records(self.rows, columns=["claim", "paper", "ours", "holds"])
        frame.attrs["ledger"] = list(self.ledger)
        return frame


def coverage_table(planned: Sequence[Mapping[str, Any]], results: Sequence[Any],
                   cell: Callable[[Mapping[str, Any]], Mapping[str, Any]],
                   unit: Callable[[Mapping[str, Any]], Any] = lambda c: c["seed"], unit_name: str = "seeds"):
    """Which cells of a study are stored, for a chapter whose runs arrive over several sessions.

    ``planned``: the profile's configurations; ``results``: the stored runs (``RunResult``).
    ``cell(config)`` gives a row's leading columns (labels), ``unit(config)`` the unit a
    cell counts (a seed; for a cross-validated grid, a fold). A unit is stored when every
    planned configuration of it in that cell is, matched by configuration hash (the
    execution entries of a filed configuration aside). Columns: the cell's,
    ``<unit_name> planned``, ``<unit_name> stored``, ``stored`` (which units, or
    "none"), and, where a unit holds several configurations, ``runs stored`` ("k of n").
    One row per cell, in the order ``planned`` first names it.
    """
    import pandas as pd

    from hacn_core.engine.results import config_hash, study_config

    have = {config_hash(study_config(r.config)) for r in results}
    cells: dict[tuple, dict[Any, list[bool]]] = {}
    columns: dict[tuple, Mapping[str, Any]] = {}
    for c in planned:
        head = dict(cell(c))
        key = tuple(head.items())
        columns.setdefault(key, head)
        cells.setdefault(key, {}).setdefault(unit(c), []).append(config_hash(c) in have)
    several = any(len(flags) > 1 for units in cells.values() for flags in units.values())
    rows = []
    for key, units in cells.items():
        done = [u for u, flags in units.items() if all(flags)]
        row = dict(columns[key]) | {f"{unit_name} planned": len(units), f"{unit_name} stored": len(done),
                                    "stored": ", ".join(str(u) for u in sorted(done)) or "none"}
        if several:
            flags = [f for fs in units.values() for f in fs]
            row["runs stored"] = f"{sum(flags)} of {len(flags)}"
        rows.append(row)
    return pd.DataFrame(rows)


def device_label(provenance: Mapping[str, Any]) -> str:
    """A run's device in a few words, for a table column: the GPU's model ("H100") or "CPU, n cores, t thread(s)".

    Read from the provenance that every stored result records (``device``, ``threads``); two CPUs of the
    same model name are told apart by their core count, which the device string carries.
    """
    device = str(provenance.get("device", "not recorded"))
    if device.startswith("cuda: "):
        return device.removeprefix("cuda: ").removeprefix("NVIDIA ").split(" ")[0]
    if device.startswith("cpu"):
        cores = re.search(r"\((\d+) cores", device)
        threads = provenance.get("threads") or 1
        where = f", {cores.group(1)} cores" if cores else ""
        return f"CPU{where}, {threads} thread{'s' if threads != 1 else ''}"
    return device


def devices_summary(results: Sequence[Any]) -> str:
    """The devices a set of runs trained on, with how many runs each: ``"cpu: X (30 runs); cuda: Y (3 runs)"``.

    A run resumed on another machine records its devices in order (``"A; B"``, see the results store); it
    counts under ``"A, then B"``.
    """
    counts: dict[str, int] = {}
    for r in results:
        device = str(r.provenance.get("device", "device not recorded")).replace("; ", ", then ")
        counts[device] = counts.get(device, 0) + 1
    if len(counts) == 1:
        return next(iter(counts))
    return "; ".join(f"{d} ({n} run{'s' if n != 1 else ''})" for d, n in sorted(counts.items()))


#: Decimals of a value by its unit, the one precision per kind of quantity across the book (the ledger and the
#: key results read it): accuracies and errors in % to 2 decimals (as the papers print them), Γ and Pearson
#: correlations to 3, perplexities to 2, losses in nats to 3, counts whole.
UNIT_DECIMALS: dict[str, int] = {
    "%": 2, "Γ": 3, "Gamma": 3, "perplexity": 2, "perplexity per character": 2, "cross-entropy": 3,
    "nats": 3, "nats per token": 3, "×": 1, "x": 1, "s": 2, "M parameters": 2, "epochs": 0, "neurons": 1,
    "parameters": 0, "samples": 0, "features": 0,
}
#: units written without a space before them, and units shown otherwise than spelled (Γ is the quantity itself)
_TIGHT_UNITS = ("%", "×", "x")
_UNIT_LABEL = {"x": "×", "Gamma": "", "Γ": ""}


def unit_decimals(unit: str) -> int:
    """How many decimals a value in ``unit`` is shown with (:data:`UNIT_DECIMALS`; 3 for a unit not listed)."""
    return UNIT_DECIMALS.get(unit, 3)


def quantity_text(values: Sequence[float], unit: str = "", *, spread: bool = True, std: float | None = None) -> str:
    """Values of one quantity as the book prints them: ``mean (std) unit, n = k`` at the unit's precision
    (:func:`unit_decimals`; counts with thousands separators); one value alone; "–" for none. ``spread=False``
    gives the mean alone; ``std`` a spread printed beside a single value (a paper's "value (std)")."""
    v = np.asarray(values, dtype=float)
    if v.size == 0:
        return MISSING
    d = unit_decimals(unit)
    mean = float(v.mean()) + 0.0
    text = f"{mean:,.{d}f}"
    if spread and v.size > 1:
        text += f" ({float(v.std(ddof=1)):,.{d}f})"
    elif std is not None:
        text += f" ({std:,.{d}f})"
    label = _UNIT_LABEL.get(unit, unit)
    if label:
        text += ("" if unit in _TIGHT_UNITS else " ") + label
    return text + (f", n = {v.size}" if spread and v.size > 1 else "")


MISSING = "–"
#: the house style of every table: wraps at the text width, numbers right-aligned, no index. Text and headers
#: wrap at spaces (and at the <wbr> of :func:`_breakable`), numbers never; a table of many columns is set
#: ``compact`` or ``dense`` (:data:`LAYOUTS`, :func:`_layout`): a smaller type with tighter cells.
TABLE_CSS = (
    "<style>table.house{border-collapse:collapse;margin:0.5em 0;font-size:0.9em;max-width:100%}"
    "div.house-wrap{overflow-x:auto;max-width:100%}"
    "table.house th,table.house td{padding:0.25em 0.6em;border-bottom:1px solid #ddd;vertical-align:top;"
    "white-space:normal;overflow-wrap:break-word}"
    "table.house th{text-align:left;border-bottom:2px solid #888}"
    "table.house td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}"
    "table.house.compact{font-size:0.8em}table.house.compact th,table.house.compact td{padding:0.2em 0.35em}"
    "table.house.dense{font-size:0.7em}table.house.dense th,table.house.dense td{padding:0.15em 0.2em}"
    "p.house-note{font-size:0.85em;color:#555;margin:0 0 1em 0}</style>"
)
#: the book's text column in px at a 1400 px window (the theme's article; ``tools/check_layout.py`` measures it)
COLUMN_PX = 784
#: the house layouts, roomiest first: class, type size (em of the page's 16 px) and a cell's left or right
#: padding (em of that type), as :data:`TABLE_CSS` sets them
LAYOUTS: tuple[tuple[str, float, float], ...] = (("house", 0.9, 0.6), ("house compact", 0.8, 0.35),
                                                 ("house dense", 0.7, 0.2))
#: the mean advance of a character of the theme's sans-serif in em, bold headers included (fitted on the
#: book's tables in Chromium: a table's narrowest width / its characters, 0.58-0.61)
_CHAR_EM = 0.6
#: a token (text between spaces) longer than this breaks after its punctuation (:func:`_breakable`)
LONG_TOKEN = 14
_BREAK_AFTER = re.compile(r"(?<=[/_.:,;=+×)\]])(?=[A-Za-z(\[])|(?<=\w)(?=[(\[])")

Format = str | Callable[[Any], str]


def _breakable(text: str) -> str:
    """``text`` as escaped HTML in which a token longer than :data:`LONG_TOKEN` may break after its punctuation
    (``tests/<wbr>test_<wbr>ledger.<wbr>py``, ``ln<wbr>(1/<wbr>(1-k))/<wbr>rate``): a path or a formula in a
    narrow column wraps instead of widening the table past the text column. ``<wbr>`` adds no text."""
    parts = re.split(r"(\s+)", text)
    return "".join(html.escape(part) if len(part) <= LONG_TOKEN or part.isspace()
                   else "<wbr>".join(html.escape(piece) for piece in _BREAK_AFTER.split(part)) for part in parts)


def _segments(text: str) -> list[str]:
    """The pieces of ``text`` that cannot break: tokens between spaces, long ones cut as :func:`_breakable` cuts."""
    return [piece for token in text.split() for piece in
            (_BREAK_AFTER.split(token) if len(token) > LONG_TOKEN else [token])]


def _min_chars(heads: Sequence[str], cells: Sequence[Sequence[str]], numeric: Sequence[bool]) -> int:
    """The characters of the table's narrowest layout: per column the longest piece that cannot break (a
    whole number cell, since numbers do not wrap), summed over the columns."""
    total = 0
    for head, column, num in zip(heads, cells, numeric):
        widest = max((len(p) for p in _segments(head)), default=0)
        for text in column:
            widest = max(widest, len(text) if num else max((len(p) for p in _segments(text)), default=0))
        total += widest
    return total


def _layout(heads: Sequence[str], cells: Sequence[Sequence[str]], numeric: Sequence[bool]) -> str:
    """The table's class: the roomiest of :data:`LAYOUTS` whose narrowest width (in px, estimated from
    :func:`_min_chars` and the padding of each column) fits :data:`COLUMN_PX` with a 3% margin; the densest
    if none does (``tools/check_layout.py`` then fails the page, and the table must be split)."""
    chars, columns = _min_chars(heads, cells, numeric), len(heads)
    for name, size, pad in LAYOUTS:
        if 16 * size * (_CHAR_EM * chars + 2 * pad * columns) <= 0.97 * COLUMN_PX:
            return name
    return LAYOUTS[-1][0]


def _missing(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, float) and math.isnan(value):
        return True
    try:
        import pandas as pd

        return value is pd.NA or value is pd.NaT
    except ImportError:  # pragma: no cover
        return False


#: a formatted number that rounded to zero from below ("-0.0", "-0", "-0.00%")
_NEGATIVE_ZERO = re.compile(r"^-0(\.0*)?%?$")


def format_value(value: Any, fmt: Format | None = None) -> str:
    """One cell as the house shows it: ``fmt`` (a format spec such as ``".2f"`` or a function) if given
    (a value that rounds to zero from below loses its minus: ``-0.03`` at ``"+.1f"`` is ``+0.0``);
    otherwise booleans as yes/no, integers with thousands separators, floats with 4 significant digits
    (integral floats as integers), anything else as its text. A missing value is ``MISSING``."""
    if _missing(value):
        return MISSING
    if callable(fmt):
        return fmt(value)
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if fmt is not None:
        text = format(value, fmt)
        if _NEGATIVE_ZERO.match(text):  # a small negative rounded to zero: no sign, or "+" where the spec asks
            text = ("+" if "+" in fmt else "") + text[1:]
        return text
    if isinstance(value, numbers.Integral):
        return f"{int(value):,}"
    if isinstance(value, numbers.Real):
        v = float(value)
        if math.isinf(v):
            return "∞" if v > 0 else "−∞"
        if v.is_integer() and abs(v) < 1e15:
            return f"{int(v):,}"
        return f"{v:.4g}"
    return str(value)


def house_table(frame: Any, *, columns: Mapping[str, str] | None = None, formats: Mapping[str, Format] | None = None,
                labels: Mapping[str, Mapping[Any, str]] | None = None, missing_note: str = "",
                note: str = "", caption: str = "") -> Any:
    """``frame`` as the book shows a table (an ``IPython.display.HTML``; its ``.data`` is the HTML).

    ``frame``: a DataFrame; a named or multi-level index becomes ordinary leading
    columns (a plain 0..n-1 index is dropped). ``columns``: new names for columns
    (human names with units, e.g. ``{"test_acc": "test accuracy (%)"}``); columns
    not named keep theirs. ``formats``: per column (by its new or old name) a
    format spec or a function. ``labels``: per column, display labels of internal
    ids (``{"rule": {"hacn": "H-ACN"}}``). Missing cells show ``–``; if any does,
    ``missing_note`` (why they are missing) is printed under the table, and the
    call fails if it was not given, so a "–" is never unexplained. ``note``: any
    other line under the table.

    Layout (the book's text column is about 784 px at a 1400 px window; ``tools/check_layout.py`` checks every
    page): headers and text cells wrap at spaces, a token longer than :data:`LONG_TOKEN` characters also after
    its punctuation (:func:`_breakable`), numbers never wrap; a table whose narrowest layout is wider than
    the column in the house type is set in the first of :data:`LAYOUTS` (``compact``, ``dense``: a smaller
    type, tighter cells) in which it fits (:func:`_layout`).
    """
    import pandas as pd
    from IPython.display import HTML

    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"frame must be a pandas DataFrame, got {type(frame).__name__}")
    df = frame
    if not (isinstance(df.index, pd.RangeIndex) and df.index.name is None):
        df = df.reset_index()
    columns = dict(columns or {})
    formats = dict(formats or {})
    labels = dict(labels or {})
    unknown = [c for c in list(columns) + list(labels) if c not in df.columns]
    if unknown:
        raise KeyError(f"house_table: columns {unknown} are not in the table; it has {list(df.columns)}")
    heads, cells, numeric, any_missing = [], [], [], False
    for col in df.columns:
        name = columns.get(col, str(col))
        fmt = formats.get(name, formats.get(col))
        mapping = labels.get(col)
        values = df[col].tolist()
        shown = []
        for v in values:
            if mapping is not None and not _missing(v):
                v = mapping.get(v, v)
            text = format_value(v, fmt)
            any_missing |= text == MISSING
            shown.append(text)
        heads.append(name)
        cells.append(shown)
        numeric.append(all(isinstance(v, numbers.Real) and not isinstance(v, (bool, np.bool_)) or _missing(v)
                           for v in values) and not mapping)
    if any_missing and not missing_note:
        raise ValueError("house_table: the table has missing cells (shown as '–'); say why in missing_note")
    rows = []
    for i in range(len(df)):
        tds = "".join(f'<td class="num">{html.escape(c[i])}</td>' if num else f"<td>{_breakable(c[i])}</td>"
                      for c, num in zip(cells, numeric))
        rows.append(f"<tr>{tds}</tr>")
    head = "".join(f"<th>{_breakable(h)}</th>" for h in heads)
    table_class = _layout(heads, cells, numeric)
    cap = f"<caption>{html.escape(caption)}</caption>" if caption else ""
    notes = []
    if any_missing:
        notes.append(f"{MISSING}: {missing_note}")
    if note:
        notes.append(note)
    foot = "".join(f'<p class="house-note">{html.escape(n)}</p>' for n in notes)
    return HTML(f'{TABLE_CSS}<div class="house-wrap"><table class="{table_class}">{cap}<thead><tr>{head}</tr></thead>'
                f'<tbody>{"".join(rows)}</tbody></table></div>{foot}')
