"""Argument checks shared by the AWNN modules.

Each raises a ``ValueError`` that names the field and the values it allows.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def check_choice(value: str, allowed: Sequence[str], name: str) -> None:
    """``value`` must be one of ``allowed``."""
    if value not in allowed:
        raise ValueError(f"{name}={value!r} is not allowed; allowed: {', '.join(allowed)}")


def check_k(k: float) -> None:
    """The quantile ``k`` of Eq. 11 must lie in (0, 1)."""
    if not (isinstance(k, (int, float)) and not isinstance(k, bool) and 0.0 < k < 1.0):
        raise ValueError(f"k={k!r} must be in the open interval (0, 1) (the paper uses 0.9)")


def check_rate(rate: float, name: str) -> None:
    """A rate ``nu`` of Eq. 12 must be a finite number > 0."""
    if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not (rate > 0 and math.isfinite(rate)):
        raise ValueError(f"{name}={rate!r} must be a finite rate > 0")


def check_width(width: int, name: str) -> None:
    """A width (or count) must be an int >= 1."""
    if isinstance(width, bool) or not isinstance(width, int) or width < 1:
        raise ValueError(f"{name}={width!r} must be a positive int (>= 1)")
