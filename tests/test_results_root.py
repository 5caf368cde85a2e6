"""The stored results are found from the package's location, not the working directory.

A teacher downloads a chapter's .ipynb from the book and runs it in another folder after the
README's set-up (``make env``: an editable install of the checkout). The chapter then loads its
stored runs through ``catalog.run`` with no store given (:func:`hacn_core.engine.results.results_root`).
These tests run Python in a temporary working directory, as that notebook's kernel would:
from a checkout the stored runs load; from a copy of the package without its checkout the store
refuses with the places it looked and the two ways to fix it, instead of training everything again.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import hacn_core.engine.results as R

ROOT = Path(__file__).resolve().parents[1]

# From a fresh folder: load every book-profile run of a stored experiment, never training. The default store
# (the one catalog.run opens when given none) comes first: where there is no results folder it refuses before
# the catalog (and torch) is imported, so that run of this script is a short one.
LOAD = """
import json
from hacn_core.engine.results import ResultsStore
store = ResultsStore()
from hacn_core import catalog
runs = catalog.run("hacn-mixer-cost", "book", allow_train=False, progress=False)
print(store.root)
print(json.dumps(sorted(r.config_hash for r in runs)))
"""


def _python(code: str, cwd: Path, pythonpath: Path, **env: str) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k not in ("HACN_RESULTS", "PYTHONPATH")}
    environment.update(PYTHONPATH=str(pythonpath), HACN_QUIET="1", HACN_ALLOW_TRAIN="0", **env)
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=environment, capture_output=True,
                          text=True, timeout=600)


@pytest.fixture(scope="module")
def from_checkout(tmp_path_factory) -> subprocess.CompletedProcess:
    """:data:`LOAD` run from a fresh folder with the checkout importable, once for the module: the first test
    checks it, the second compares a package copy's runs with it (each run is a Python start with torch)."""
    return _python(LOAD, cwd=tmp_path_factory.mktemp("elsewhere"), pythonpath=ROOT)


def test_a_chapter_run_from_another_folder_loads_the_committed_results(from_checkout):
    out = from_checkout
    assert out.returncode == 0, out.stderr[-2000:]
    root, runs = out.stdout.strip().splitlines()[-2:]
    assert Path(root) == ROOT / "results"
    stored = sorted(p.stem for p in (ROOT / "results" / "hacn-mixer-cost").glob("*.json"))
    loaded = json.loads(runs)
    assert loaded and set(loaded) <= set(stored)  # files of the committed results/, loaded


def test_a_package_without_its_checkout_names_where_it_looked(tmp_path, from_checkout):
    site = tmp_path / "site-packages"  # what `pip install .` leaves: the package, no results/ beside it
    shutil.copytree(ROOT / "hacn_core", site / "hacn_core", ignore=shutil.ignore_patterns("__pycache__"))
    work = tmp_path / "work"
    work.mkdir()
    out = _python(LOAD, cwd=work, pythonpath=site)
    assert out.returncode != 0
    message = out.stderr.strip().splitlines()[-1]
    assert message.startswith("hacn_core.engine.results.ResultsRootError: no results folder")
    assert str(site / "results") in message and "HACN_RESULTS" in message and "pip install -e" in message
    # the fix it names: point HACN_RESULTS at the stored results, and the same runs load
    fixed = _python(LOAD, cwd=work, pythonpath=site, HACN_RESULTS=str(ROOT / "results"))
    assert fixed.returncode == 0, fixed.stderr[-2000:]
    assert from_checkout.returncode == 0, from_checkout.stderr[-2000:]
    assert fixed.stdout.strip().splitlines()[-1] == from_checkout.stdout.strip().splitlines()[-1]


def test_results_root_order(tmp_path, monkeypatch):
    monkeypatch.setenv("HACN_RESULTS", str(tmp_path / "mine"))
    assert R.results_root() == tmp_path / "mine"  # the variable first, even before the folder exists
    monkeypatch.delenv("HACN_RESULTS")
    assert R.results_root() == R.REPO_ROOT / "results"
    monkeypatch.setattr(R, "REPO_ROOT", tmp_path / "no-checkout")
    with pytest.raises(R.ResultsRootError, match="no-checkout/results does not exist"):
        R.ResultsStore()
    assert R.ResultsStore(tmp_path).root == tmp_path  # an explicit store needs no lookup
