"""Paper items: one reported number (or claim) of a paper, validated, and the lookups the ledger uses.

Each paper package lists its items in its ``paper_items`` module (the one place a
paper's number is typed); :mod:`hacn_core.paper_items` gathers the three lists for
the ledger. Pure Python (no torch), so anything can import it.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace

#: The three papers, as spelled in :attr:`PaperItem.paper`.
PAPERS: tuple[str, ...] = ("H-ACN", "AWNN", "Residual Gates")
#: The id prefix each paper's items use.
PAPER_PREFIX: dict[str, str] = {"H-ACN": "hacn", "AWNN": "awnn", "Residual Gates": "gates"}
#: ``<prefix>/<item slug>/<quantity slug>[/...]``: lowercase, digits, ``.`` and ``-``.
ID_PATTERN = re.compile(r"^(hacn|awnn|gates)(/[a-z0-9][a-z0-9.-]*){2,}$")


@dataclass(frozen=True)
class Place:
    """Where the book shows a paper item, and how (the ledger links the row there and reads its status off it).

    ``chapter`` is a notebook of ``notebooks/`` (its file name without ``.ipynb``) and
    ``section`` one of its headings, exactly as written ("" for the chapter's top).
    ``checked_by`` names the tests (``tests/<file>.py::<test function>``) that check the
    item exactly (an equation implemented and compared with a hand computation): the
    ledger calls such an item "exact". ``drawn_from`` marks a figure the chapter draws:
    from the stored runs of these experiments, or from the library alone when empty;
    the ledger calls it "shown" (once such runs are stored). ``None``: not a drawn figure.
    A row an experiment's link compares with a number keeps that comparison's status.
    """

    chapter: str
    section: str = ""
    checked_by: tuple[str, ...] = ()
    drawn_from: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[a-z0-9_]+", self.chapter):
            raise ValueError(f"Place.chapter={self.chapter!r} must be a notebook name such as 'hacn_01_forward_rule'")
        if self.checked_by and self.drawn_from is not None:
            raise ValueError(f"Place in {self.chapter!r}: an item is either checked exactly (checked_by) or a drawn "
                             "figure (drawn_from), not both")
        for test in self.checked_by:
            if not re.fullmatch(r"tests/test_\w+\.py::test_\w+", test):
                raise ValueError(f"Place.checked_by entry {test!r} must read 'tests/test_<file>.py::test_<name>'")

    @property
    def shows(self) -> str:
        """How the chapter shows the item: ``"exact"``, ``"drawn"`` or ``""`` (a number or a discussion)."""
        return "exact" if self.checked_by else "drawn" if self.drawn_from is not None else ""


@dataclass(frozen=True)
class PaperItem:
    """One reported number (or qualitative claim) of one paper.

    ``paper_value`` is the number exactly as the paper prints it, ``None`` for a
    figure or a claim the paper gives no number for; ``paper_std`` is the spread
    printed next to it (``±`` or the parenthesised std). ``where`` says where it
    can run in this project (data, hardware, budget), ``source`` where it is in the
    paper. ``finding`` is ours, not the paper's: what a study of ours established about
    a difference from the paper (the hypotheses it tested and what they showed).
    """

    id: str
    paper: str
    item: str
    quantity: str
    paper_value: float | None
    paper_std: float | None = None
    unit: str = ""
    higher_is_better: bool | None = None
    paper_setting: str = ""
    where: str = ""
    source: str = ""
    note: str = ""
    book: Place | None = None  # where the book shows it (set by :func:`place_items`)
    #: what our studies found about this item beyond its number: why ours differs, what was tested
    finding: str = ""

    def __post_init__(self) -> None:
        if isinstance(self.book, Mapping):  # a record of as_records (dataclasses.asdict) read back
            object.__setattr__(self, "book", Place(**self.book))
        if self.paper not in PAPERS:
            raise ValueError(f"PaperItem.paper={self.paper!r} is not a paper; allowed: {', '.join(PAPERS)}")
        if not ID_PATTERN.match(self.id):
            raise ValueError(
                f"PaperItem.id={self.id!r} is malformed; expected {ID_PATTERN.pattern} "
                "(e.g. 'gates/table1/mnist-d50-gated-resnet')"
            )
        prefix = PAPER_PREFIX[self.paper]
        if not self.id.startswith(prefix + "/"):
            raise ValueError(f"PaperItem.id={self.id!r} must start with {prefix + '/'!r} for paper {self.paper!r}")
        if self.paper_std is not None and self.paper_value is None:
            raise ValueError(f"PaperItem.paper_std is set but paper_value is None ({self.id})")
        if self.paper_value is not None and not self.unit:
            raise ValueError(f"PaperItem.unit is empty for numeric item {self.id}")
        if self.paper_value is None and not self.note:
            raise ValueError(f"PaperItem.note must state the claim of qualitative item {self.id}")
        for name in ("quantity", "item", "source", "where"):
            if not getattr(self, name):
                raise ValueError(f"PaperItem.{name} is empty ({self.id})")

    @property
    def qualitative(self) -> bool:
        """True when the paper gives no number (a figure or a stated claim)."""
        return self.paper_value is None


#: ``where`` of the items that follow from definitions alone, and of numbers the papers only quote.
W_EXACT = "CPU, exact"
W_LIT = "literature value quoted by the paper; not reproduced here"


def index_items(items: Iterable[PaperItem]) -> dict[str, PaperItem]:
    """The items by id; a duplicate id fails at once (it would silently shadow a ledger row)."""
    table: dict[str, PaperItem] = {}
    for it in items:
        if it.id in table:
            raise RuntimeError(f"duplicate PaperItem id {it.id!r}")
        table[it.id] = it
    return table


def find_item(table: dict[str, PaperItem], id: str) -> PaperItem:  # noqa: A002 - the field is called id
    """``table[id]``; a KeyError lists the closest ids when there is none."""
    try:
        return table[id]
    except KeyError:
        close = difflib.get_close_matches(id, list(table), n=5, cutoff=0.5)
        hint = f"; closest ids: {', '.join(close)}" if close else ""
        raise KeyError(f"no paper item with id {id!r}{hint}") from None


def item_lookup(items: Iterable[PaperItem], whose: str = "") -> Callable[[str], PaperItem]:
    """``item(id)`` over ``items`` (indexed once; a duplicate id fails here), for a paper's ``paper_items`` module."""
    table = index_items(items)

    def item(id: str) -> PaperItem:  # noqa: A002 - the field is called id
        return find_item(table, id)

    item.__doc__ = f"The {whose + ' ' if whose else ''}item with this id; a KeyError lists the closest ids."
    return item


def place_items(items: Iterable[PaperItem], places: Mapping[str, Place]) -> tuple[PaperItem, ...]:
    """``items`` with their :attr:`PaperItem.book` set from ``places``.

    A key of ``places`` is an item id or an id prefix ending at a ``/`` boundary
    (``"hacn/table2"`` places every ``hacn/table2/...`` item); the longest matching key
    wins. A key that places no item is refused (a typo would silently unlink rows).
    """
    items = tuple(items)
    used: set[str] = set()
    out = []
    for it in items:
        keys = [k for k in places if it.id == k or it.id.startswith(k + "/")]
        if keys:
            key = max(keys, key=len)
            used.add(key)
            it = replace(it, book=places[key])
        out.append(it)
    unused = sorted(set(places) - used)
    if unused:
        raise ValueError(f"places name no item: {', '.join(unused)}")
    return tuple(out)
