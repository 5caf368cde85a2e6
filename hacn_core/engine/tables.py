"""Tables a chapter shows: the claims table and the "mean (std)" cells.

``ClaimTable`` collects the rows of a chapter's "the paper's claims, checked on
our runs" table; :func:`mean_std` formats one cell of seeds as papers print it.
"""

from __future__ import annotations

from collections.abc import Sequence
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

    def add(self, claim: str, source: str, evidence: str, holds: bool | None) -> None:
        self.rows.append({"claim": claim, "paper": source, "ours": evidence, "holds": holds})

    def frame(self):
        import pandas as pd

        return pd.DataFrame.from_records(self.rows, columns=["claim", "paper", "ours", "holds"])
