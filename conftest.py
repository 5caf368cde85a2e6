"""Test-session settings shared by the unit tests and nbval.

Runs never touch the committed ``results/``: the store is pointed at a fresh
temporary folder (the notebooks' kernels inherit it), the profile defaults to
``smoke`` and progress bars are quiet.
"""

import os
import tempfile

_TMP = tempfile.TemporaryDirectory(prefix="hacn-test-results-")


def pytest_configure(config):
    os.environ["HACN_RESULTS"] = _TMP.name
    os.environ.setdefault("HACN_PROFILE", "smoke")
    os.environ["HACN_QUIET"] = "1"
    os.environ.setdefault("MPLBACKEND", "Agg")


def pytest_unconfigure(config):
    _TMP.cleanup()
