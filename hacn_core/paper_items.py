"""Every reported number and claim of the three papers: the ledger's list of items.

Each paper package types its own paper's numbers (:mod:`hacn_core.hacn.paper_items`,
:mod:`hacn_core.awnn.paper_items`, :mod:`hacn_core.gates.paper_items`); this module
gathers them in paper order for the ledger, the docs and the tests. Ids start with
``hacn/``, ``awnn/`` or ``gates/``. The lists themselves are pure Python; importing
them loads their paper packages.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from hacn_core.awnn import paper_items as awnn_items
from hacn_core.engine.items import (
    ID_PATTERN,
    PAPER_PREFIX,
    PAPERS,
    W_EXACT,
    W_LIT,
    PaperItem,
    item_lookup,
)
from hacn_core.gates import paper_items as gates_items
from hacn_core.hacn import paper_items as hacn_items

__all__ = [
    "PAPERS",
    "PAPER_PREFIX",
    "ID_PATTERN",
    "W_EXACT",
    "W_LIT",
    "PaperItem",
    "PAPER_ITEMS",
    "items_for",
    "item",
    "as_records",
]

PAPER_ITEMS: tuple[PaperItem, ...] = hacn_items.ITEMS + awnn_items.ITEMS + gates_items.ITEMS
item = item_lookup(PAPER_ITEMS)


def items_for(paper: str) -> tuple[PaperItem, ...]:
    """All items of one paper (``"H-ACN"``, ``"AWNN"`` or ``"Residual Gates"``), in paper order.

    The id prefixes (``hacn``, ``awnn``, ``gates``) are accepted too.
    """
    by_prefix = {v: k for k, v in PAPER_PREFIX.items()}
    name = by_prefix.get(paper, paper)
    if name not in PAPERS:
        raise ValueError(
            f"paper={paper!r} is not one of the papers; allowed: {', '.join(PAPERS)} "
            f"(or the prefixes {', '.join(PAPER_PREFIX.values())})"
        )
    return tuple(it for it in PAPER_ITEMS if it.paper == name)




def as_records(paper: str | None = None) -> list[dict[str, Any]]:
    """Items as plain dicts (one per row), e.g. for ``pandas.DataFrame(as_records())``."""
    items = PAPER_ITEMS if paper is None else items_for(paper)
    return [dataclasses.asdict(it) for it in items]
