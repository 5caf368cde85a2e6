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


# The longest files first (ordered by pytest --durations on the 2-core machine). pytest-xdist's
# --dist loadfile hands out whole files in collection order, so with the long ones first and the many
# short unit-test files last both workers finish at nearly the same time, instead of one idling while
# the other runs a long file that came last. Order inside a file (a notebook's cells) is kept.
LONG_FIRST = (
    "tests/test_dry_run.py",  # every experiment's paper profile, one training step each
    "tests/test_interrupts.py",  # real processes signalled mid-run and resumed
    "tests/test_ledger_formats.py",
    "notebooks/gates_02_cifar.ipynb",
    "tests/test_awnn_domains.py",
    "tests/test_store_safety.py",
    "tests/test_results_root.py",
    "notebooks/awnn_05_images.ipynb",
    "tests/test_ledger.py",
    "notebooks/hacn_02_mixer.ipynb",
    "notebooks/beyond_01_width_connectivity.ipynb",
)


def pytest_collection_modifyitems(session, config, items):
    def rank(item):
        path = item.nodeid.split("::", 1)[0]
        if path in LONG_FIRST:
            return LONG_FIRST.index(path)
        return len(LONG_FIRST) + (0 if path.endswith(".ipynb") else 1)  # then the notebooks, then the rest

    items.sort(key=rank)  # stable: each file keeps its own order
