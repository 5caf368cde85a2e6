"""Test-session settings shared by the unit tests and nbval, and the data the tests need.

Runs never touch the committed ``results/``: the store is pointed at a fresh
temporary folder (the notebooks' kernels inherit it), the profile defaults to
``smoke`` and progress bars are quiet.

Data
    The tests and the notebooks at the smoke profile read five real datasets
    (:data:`TEST_DATASETS`, about 115 MB on disk). A run of a whole folder
    (``pytest tests``, ``pytest notebooks``, ``make test``) checks the data root
    (``$HACN_DATA``) for them before anything is collected:

    * all there: the tests run;
    * some missing, downloads allowed (``$HACN_DOWNLOAD`` unset or 1): each is
      downloaded once into the data root, with one line saying so (later runs find it);
    * some missing, downloads forbidden (``HACN_DOWNLOAD=0``) or failing: the session
      stops at once with one message listing them, their sizes and the commands
      that fetch them, instead of a failure per test.

    ``HACN_TEST_DATA=skip`` (or ``pytest --skip-data``) runs without them instead:
    every test that needs a missing dataset is skipped, all with the same reason
    (:data:`SKIP_REASON`): those marked ``data``, those whose ``skipif`` or
    ``pytest.skip`` names the data root, those that raise ``DatasetMissingError``,
    and a notebook's cells after the first one that does.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

_TMP = tempfile.TemporaryDirectory(prefix="hacn-test-results-")

#: the datasets the tests read -> megabytes on disk (the offline mirror's uncompressed files, as
#: torchvision / torch-geometric read them; a download fetches compressed archives, smaller than this).
#: They are the datasets of every experiment's smoke profile (tests/test_preflight.py checks both).
TEST_DATASETS: dict[str, float] = {
    "MNIST": 55.0,
    "FashionMNIST": 55.0,
    "NCI1": 4.1,
    "MUTAG": 0.1,
    "tinyshakespeare": 1.1,
}
TEST_DATA_ENV = "HACN_TEST_DATA"
TEST_DATA_MODES = ("require", "skip")
SKIP_REASON = f"needs a dataset that is not in the data root ({TEST_DATA_ENV}=skip; README: 'The data the tests use')"
#: words of a ``skipif`` reason that says a dataset is not in the data root
_DATA_SKIP_WORDS = ("$HACN_DATA", "data root")

ROOT = Path(__file__).resolve().parent
#: notebook files with a cell that skipped for missing data: their later cells skip too
_SKIPPED_NOTEBOOKS: set[str] = set()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--skip-data", action="store_true", default=False,
                     help=f"skip every test that needs a dataset missing from the data root "
                          f"(the same as {TEST_DATA_ENV}=skip)")
    parser.addoption("--run-course", action="store_true", default=False,
                     help="also run the tests marked course: a chapter's course pack installed into a fresh "
                          "virtual environment and run as a teacher would (minutes per chapter)")


def data_mode(config: pytest.Config) -> str:
    """``require`` (default: missing data stops the session) or ``skip``, from ``--skip-data`` or the env."""
    if config.getoption("--skip-data", default=False):
        return "skip"
    value = os.environ.get(TEST_DATA_ENV, "require").strip().lower() or "require"
    if value not in TEST_DATA_MODES:
        raise pytest.UsageError(f"{TEST_DATA_ENV}={value!r} is not understood; allowed: {', '.join(TEST_DATA_MODES)}")
    return value


def pytest_configure(config: pytest.Config) -> None:
    os.environ["HACN_RESULTS"] = _TMP.name
    os.environ.setdefault("HACN_PROFILE", "smoke")
    os.environ["HACN_QUIET"] = "1"
    os.environ.setdefault("MPLBACKEND", "Agg")
    config.addinivalue_line("markers", "data: needs the offline data mirror or a download")
    config.addinivalue_line("markers", "course: a course pack run from a fresh environment (only with --run-course)")
    config._hacn_data_mode = data_mode(config)  # type: ignore[attr-defined]


def pytest_unconfigure(config: pytest.Config) -> None:
    _TMP.cleanup()


# ----------------------------------------------------------------------------- the data check


def whole_folder_run(config: pytest.Config) -> bool:
    """Whether this session runs a whole folder of the suite (``tests``, ``notebooks``, or the default
    ``testpaths``): the runs that need every dataset. A run of single files gets no check up front;
    a test that meets a missing dataset fails (or skips) with the loader's own message."""
    args = [arg.split("::")[0] for arg in config.args]
    return any((config.invocation_params.dir / arg).resolve() in (ROOT, ROOT / "tests", ROOT / "notebooks")
               for arg in args)


def missing_datasets(names: Sequence[str], root: Path) -> list[str]:
    from hacn_core.engine.data import missing_files

    return [name for name in names if missing_files(name, root)]


def missing_message(missing: Sequence[str], root: Path, why: str) -> str:
    """The one message that stops a session: which datasets, how big, and how to get them."""
    width = max(map(len, missing))
    rows = [f"  {name:<{width}}  {TEST_DATASETS.get(name, 0):6.1f} MB  python -m hacn_core fetch {name}"
            for name in missing]
    total = sum(TEST_DATASETS.get(name, 0) for name in missing)
    return "\n".join([
        f"the tests need {len(missing)} dataset(s) that are not in the data root {root} ({why}):",
        *rows,
        f"  {'total':<{width}}  {total:6.1f} MB on disk",
        "get them with a network: the commands above, or run the tests again without HACN_DOWNLOAD=0 "
        "(they download them once);",
        "or, with the offline mirror at ../shared/data: make data (links it into .data/, which make test uses);",
        "or point HACN_DATA at a folder that holds them;",
        f"or skip every test that needs them: {TEST_DATA_ENV}=skip make test (pytest --skip-data).",
    ])


def ensure_test_data(names: Sequence[str], root: Path, download: bool, say: Callable[[str], None],
                     fetch: Callable[[str, Path], object] | None = None) -> list[str]:
    """Make sure every dataset of ``names`` is under ``root``: download the missing ones when ``download``
    (one line each through ``say``). Returns the datasets fetched. When some are missing and may not
    (or could not) be downloaded, raises ``pytest.UsageError`` with :func:`missing_message`: pytest
    prints it once, as ``ERROR: ...``, and exits with status 4 before collecting anything."""
    from hacn_core.engine.data import DOWNLOAD_ENV, ensure_dataset

    missing = missing_datasets(names, root)
    if not missing:
        return []
    if not download:
        raise pytest.UsageError(missing_message(missing, root, f"{DOWNLOAD_ENV}=0 forbids downloading them"))
    fetch = fetch or (lambda name, base: ensure_dataset(name, base, download=True))
    fetched: list[str] = []
    for name in missing:
        say(f"tests: downloading {name} ({TEST_DATASETS.get(name, 0):.1f} MB on disk) into {root}, "
            "once: later runs find it there")
        try:
            fetch(name, root)
        except Exception as err:  # noqa: BLE001 - any failed download ends in the same message
            first = str(err).splitlines()[0] if str(err) else type(err).__name__
            raise pytest.UsageError(missing_message(missing_datasets(names, root), root,
                                                    f"downloading {name} failed: {first}")) from err
        fetched.append(name)
    return fetched


def pytest_sessionstart(session: pytest.Session) -> None:
    config = session.config
    if (hasattr(config, "workerinput") or config._hacn_data_mode == "skip" or config.option.collectonly
            or not whole_folder_run(config)):
        return  # xdist workers: the controller checked; skip mode: tests skip instead; --collect-only reads none
    from hacn_core.engine.data import data_root, downloads_allowed

    reporter = config.pluginmanager.get_plugin("terminalreporter")
    say = reporter.write_line if reporter is not None else print
    ensure_test_data(list(TEST_DATASETS), data_root(), downloads_allowed(), say)


# ----------------------------------------------------------------------------- skip mode


def _skips_for_data(item: pytest.Item) -> bool:
    """Whether ``item`` is marked ``data`` or carries a true ``skipif`` that says data is missing."""
    if item.get_closest_marker("data") is not None:
        return True
    for mark in item.iter_markers("skipif"):
        condition = mark.args[0] if mark.args else mark.kwargs.get("condition")
        reason = str(mark.kwargs.get("reason", ""))
        if condition is True and any(word in reason for word in _DATA_SKIP_WORDS):
            return True
    return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.getoption("--run-course", default=False):
        for item in items:
            if item.get_closest_marker("course") is not None:
                item.add_marker(pytest.mark.skip(reason="a course pack run from a fresh environment: --run-course"))
    if config._hacn_data_mode != "skip":
        return
    from hacn_core.engine.data import data_root

    missing = missing_datasets(list(TEST_DATASETS), data_root())
    for item in items:
        if missing and _skips_for_data(item):
            # first among the skipif marks, so that its reason is the one reported
            item.add_marker(pytest.mark.skipif(True, reason=SKIP_REASON), append=False)


def _is_missing_data(excinfo: pytest.ExceptionInfo[BaseException]) -> bool:
    from hacn_core.engine.data import DatasetMissingError

    # a test raises the error itself; nbval reports a cell's error as its traceback's text
    text = f"{excinfo.value} {getattr(excinfo.value, 'inner_traceback', '') or ''}"
    return isinstance(excinfo.value, DatasetMissingError) or "DatasetMissingError" in text


def pytest_runtest_setup(item: pytest.Item) -> None:
    if str(item.path) in _SKIPPED_NOTEBOOKS:
        pytest.skip(SKIP_REASON)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    outcome = yield
    report = outcome.get_result()
    if item.config._hacn_data_mode != "skip":
        return
    failed_for_data = report.failed and call.excinfo is not None and _is_missing_data(call.excinfo)
    # a test that calls pytest.skip itself when a dataset is missing ("... is not under $HACN_DATA")
    skipped_for_data = (report.skipped and isinstance(report.longrepr, tuple) and SKIP_REASON not in report.longrepr[2]
                        and any(word in report.longrepr[2] for word in _DATA_SKIP_WORDS + ("not available offline",)))
    # a notebook's later cells, skipped in pytest_runtest_setup: reported at the notebook, not at this file
    skipped_here = (report.skipped and isinstance(report.longrepr, tuple) and SKIP_REASON in report.longrepr[2]
                    and Path(report.longrepr[0]).name == Path(__file__).name)
    if failed_for_data or skipped_for_data or skipped_here:
        report.outcome = "skipped"
        report.longrepr = (str(item.path), item.location[1] or 0, f"Skipped: {SKIP_REASON}")
        if item.path.suffix == ".ipynb":
            _SKIPPED_NOTEBOOKS.add(str(item.path))
