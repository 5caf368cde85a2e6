"""Paper items: one reported number (or claim) of a paper, validated, and the lookups the ledger uses.

Each paper package lists its items in its ``paper_items`` module (the one place a
paper's number is typed); :mod:`hacn_core.paper_items` gathers the three lists for
the ledger. Pure Python (no torch), so anything can import it.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

#: The three papers, as spelled in :attr:`PaperItem.paper`.
PAPERS: tuple[str, ...] = ("H-ACN", "AWNN", "Residual Gates")
#: The id prefix each paper's items use.
PAPER_PREFIX: dict[str, str] = {"H-ACN": "hacn", "AWNN": "awnn", "Residual Gates": "gates"}
#: ``<prefix>/<item slug>/<quantity slug>[/...]``: lowercase, digits, ``.`` and ``-``.
ID_PATTERN = re.compile(r"^(hacn|awnn|gates)(/[a-z0-9][a-z0-9.-]*){2,}$")


@dataclass(frozen=True)
class PaperItem:
    """One reported number (or qualitative claim) of one paper.

    ``paper_value`` is the number exactly as the paper prints it, ``None`` for a
    figure or a claim the paper gives no number for; ``paper_std`` is the spread
    printed next to it (``±`` or the parenthesised std). ``where`` says where it
    can run in this project (data, hardware, budget), ``source`` where it is in the
    paper.
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

    def __post_init__(self) -> None:
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
