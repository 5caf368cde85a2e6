"""Scale profiles: one switch that decides how big every run is.

Each notebook reads the profile once, in its tagged ``parameters`` cell::

    PROFILE = hacn_core.engine.profiles.current_profile()

and every experiment maps the profile name to a configuration preset
(``hacn_core.experiments``). The profiles are:

``smoke``
    tiny settings so every notebook finishes in about a minute on a 2-core CPU;
    used by nbval in CI. Results go to a temporary store, never to ``results/``.
``book``
    the settings whose real results are stored in ``results/`` and rendered in
    the book (scaled where the paper's setting needs a GPU or a download).
``paper``
    exactly the paper's settings, for a reader with a GPU and downloaded data.
"""

from __future__ import annotations

import os

PROFILES: tuple[str, ...] = ("smoke", "book", "paper")
PROFILE_ENV = "HACN_PROFILE"
DEFAULT_PROFILE = "book"


class ProfileError(ValueError):
    """An unknown profile name."""


def check_profile(name: str) -> str:
    """Return ``name`` normalised, or raise naming the allowed values."""
    normalised = name.strip().lower()
    if normalised not in PROFILES:
        raise ProfileError(
            f"unknown profile {name!r} (from {PROFILE_ENV} or the 'profile' argument); "
            f"valid profiles: {', '.join(PROFILES)}"
        )
    return normalised


def current_profile(default: str = DEFAULT_PROFILE) -> str:
    """The profile named by ``$HACN_PROFILE``, else ``default``."""
    return check_profile(os.environ.get(PROFILE_ENV) or default)
