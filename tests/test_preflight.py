"""The test session's data check (``conftest.py``): ``make test`` says which datasets it needs.

A whole-suite run with an empty data root and downloads forbidden stops before collecting
anything, with one message listing every missing dataset, its size and its fetch command;
with downloads allowed each missing dataset is fetched once, with one line saying so; and
``HACN_TEST_DATA=skip`` turns every test that needs data into a skip with one and the same
reason (a ``data`` mark, a ``skipif`` or ``pytest.skip`` on the data root, a ``DatasetMissingError``
raised by a test, a fixture or a notebook cell, and the notebook's later cells).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

import conftest as suite  # the repository's root conftest.py (imported by pytest as `conftest`)
from hacn_core.engine.data import DATASETS, missing_files

ROOT = Path(__file__).resolve().parents[1]
MIRROR = ROOT.parent / "shared" / "data"


def _pytest(args: list[str], cwd: Path, **env: str) -> tuple[subprocess.CompletedProcess[str], float]:
    """``python -m pytest ARGS`` in a fresh process with ``env`` on top of ours; also its wall time."""
    full = {**os.environ, "OMP_NUM_THREADS": "1", **env}
    full.pop("PYTEST_XDIST_WORKER", None)
    full.pop("PYTEST_CURRENT_TEST", None)
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args], cwd=cwd, env=full,
                          capture_output=True, text=True, timeout=600)
    return proc, time.monotonic() - started


def _fake_files(name: str, root: Path) -> None:
    """Empty files where dataset ``name``'s loader looks (enough for ``missing_files``)."""
    spec = DATASETS[name]
    (root / spec.folder).mkdir(parents=True, exist_ok=True)
    for file in spec.files:
        (root / spec.folder / file).write_bytes(b"")


# ------------------------------------------------------------------------------ what the suite needs


def test_the_declared_datasets_are_those_of_every_smoke_profile():
    """The notebooks run at the smoke profile under nbval: their experiments' datasets are the suite's."""
    from hacn_core.catalog import registry

    smoke = {value for exp in registry().values() if "smoke" in exp.configs
             for config in exp.runs("smoke") for value in config.values()
             if isinstance(value, str) and value in DATASETS}
    assert smoke == set(suite.TEST_DATASETS)


@pytest.mark.skipif(not MIRROR.is_dir(), reason="offline data mirror ../shared/data not present")
def test_the_declared_sizes_are_the_mirrors_files():
    for name, megabytes in suite.TEST_DATASETS.items():
        folder = MIRROR / DATASETS[name].folder
        size = sum(path.stat().st_size for path in folder.iterdir() if path.is_file()) / 1e6
        assert size == pytest.approx(megabytes, abs=0.06), name


# ------------------------------------------------------------------------------ require mode


@pytest.mark.slow
def test_a_whole_suite_run_without_data_stops_before_collecting_with_one_message(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    proc, seconds = _pytest(["-n", "2", "--dist", "loadfile", "tests", "notebooks", "--nbval-lax"], ROOT,
                            HACN_DATA=str(empty), HACN_DOWNLOAD="0", HACN_TEST_DATA="require")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 4, out[-2000:]
    assert out.count("ERROR: the tests need 5 dataset(s)") == 1 and f"data root {empty}" in out
    for name, megabytes in suite.TEST_DATASETS.items():
        assert f"{megabytes:6.1f} MB  python -m hacn_core fetch {name}" in out
    assert "115.3 MB on disk" in out and "make data" in out and "HACN_TEST_DATA=skip" in out
    assert "collected" not in out and "passed" not in out and "failed" not in out  # nothing ran
    assert seconds < 120, f"the check took {seconds:.0f} s"  # start-up and the check only: a minute on a quiet machine


def test_missing_data_is_downloaded_once_and_said_so(tmp_path):
    fetched, said = [], []

    def fetch(name: str, root: Path) -> None:
        fetched.append(name)
        _fake_files(name, root)

    _fake_files("MNIST", tmp_path)  # already there: not fetched
    names = ["MNIST", "MUTAG", "tinyshakespeare"]
    assert suite.ensure_test_data(names, tmp_path, download=True, say=said.append, fetch=fetch) == names[1:]
    assert fetched == names[1:] and len(said) == 2
    assert said[0].startswith("tests: downloading MUTAG (0.1 MB on disk) into") and "once" in said[0]
    assert suite.ensure_test_data(names, tmp_path, download=True, say=said.append, fetch=fetch) == []
    assert fetched == names[1:] and len(said) == 2  # the second session finds them


def test_a_failed_download_stops_with_the_same_message(tmp_path):
    def fetch(name: str, root: Path) -> None:
        raise OSError("network is unreachable")

    with pytest.raises(pytest.UsageError) as err:
        suite.ensure_test_data(["NCI1", "MUTAG"], tmp_path, download=True, say=lambda line: None, fetch=fetch)
    message = str(err.value)
    assert "downloading NCI1 failed: network is unreachable" in message
    assert "python -m hacn_core fetch NCI1" in message and "python -m hacn_core fetch MUTAG" in message


def test_a_bad_test_data_mode_names_the_allowed_values(monkeypatch, pytestconfig):
    monkeypatch.setenv(suite.TEST_DATA_ENV, "maybe")
    with pytest.raises(pytest.UsageError, match=r"HACN_TEST_DATA='maybe' is not understood; allowed: require, skip"):
        suite.data_mode(pytestconfig)


# ------------------------------------------------------------------------------ skip mode

NEEDS_DATA = '''
import pytest
from hacn_core.engine.data import ensure_dataset, missing_files

@pytest.mark.skipif(bool(missing_files("MNIST")), reason="MNIST is not under $HACN_DATA")
def test_skipif_on_the_data_root():
    pass

@pytest.mark.data
def test_marked_data():
    ensure_dataset("FashionMNIST")

def test_raises_missing():
    ensure_dataset("MUTAG")

@pytest.fixture
def graphs():
    return ensure_dataset("NCI1")

def test_fixture_raises_missing(graphs):
    pass

def test_skips_itself():
    if missing_files("tinyshakespeare"):
        pytest.skip("Tiny Shakespeare is not in the data root")

def test_without_data():
    assert sum(range(4)) == 6
'''


@pytest.mark.slow
def test_skip_mode_skips_every_test_that_needs_data_with_one_reason(tmp_path):
    (tmp_path / "test_needs_data.py").write_text(NEEDS_DATA)
    cells = [nbformat.v4.new_code_cell("from hacn_core.engine.data import load_text\ntext = load_text()"),
             nbformat.v4.new_code_cell("print(len(text))"),  # would fail with a NameError: skipped too
             nbformat.v4.new_code_cell("print(6 * 7)")]  # skipped: the notebook cannot be checked past its data
    nb = nbformat.v4.new_notebook(cells=cells, metadata={"kernelspec": {"name": "python3", "language": "python",
                                                                        "display_name": "Python 3"}})
    nbformat.write(nb, tmp_path / "chapter.ipynb")
    (tmp_path / "empty").mkdir()
    env = {"HACN_DATA": str(tmp_path / "empty"), "HACN_DOWNLOAD": "0", "HACN_TEST_DATA": "skip",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    # -p conftest: the repository's conftest.py as a plugin, for test files outside the repository
    proc, _ = _pytest(["-p", "conftest", "-rs", "-v", "--nbval-lax", "test_needs_data.py", "chapter.ipynb"],
                      tmp_path, **env)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert "1 passed, 8 skipped" in out, out[-1500:]
    assert "test_needs_data.py::test_without_data PASSED" in out
    reasons = re.findall(r"^SKIPPED \[(\d+)\] ([^:]+):\d+: (.*)$", out, flags=re.MULTILINE)
    assert {where for _, where, _ in reasons} == {"test_needs_data.py", "chapter.ipynb"}  # each at its test
    assert sum(int(n) for n, _, _ in reasons) == 8 and {reason for _, _, reason in reasons} == {suite.SKIP_REASON}
