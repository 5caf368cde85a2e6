"""Checks of user input shared by every paper's code: a bad value is refused with an error that names
the field and the allowed values."""

from __future__ import annotations

from collections.abc import Sequence


def check_choice(field_name: str, value: object, allowed: Sequence[str]) -> str:
    """Return ``value`` if it is one of ``allowed``; otherwise raise naming the field and the choices."""
    if not isinstance(value, str) or value not in allowed:
        raise ValueError(f"{field_name}={value!r} is not valid; allowed: {', '.join(allowed)}")
    return value
