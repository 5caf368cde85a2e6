"""Tables a chapter shows: the claims table.

``ClaimTable`` collects the rows of a chapter's "the paper's claims, checked on
our runs" table.
"""

from __future__ import annotations

from typing import Any


class ClaimTable:
    """Rows of a chapter's "the paper's claims, checked on our runs" table.

    ``add(claim, source, evidence, holds)`` records one claim: where the paper
    makes it, our evidence, and whether it holds (``None`` when the runs cannot
    tell); ``frame()`` is the DataFrame the notebook shows.
    """

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []

    def add(self, claim: str, source: str, evidence: str, holds: bool | None) -> None:
        self.rows.append({"claim": claim, "paper": source, "ours": evidence, "holds": holds})

    def frame(self):
        import pandas as pd

        return pd.DataFrame.from_records(self.rows, columns=["claim", "paper", "ours", "holds"])
