"""The test session's file order (``conftest.py``): the long files first, each file's own order kept."""

import importlib.util
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("root_conftest", ROOT / "conftest.py")
conftest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(conftest)


def test_every_long_file_named_exists():
    assert len(set(conftest.LONG_FIRST)) == len(conftest.LONG_FIRST)
    missing = [p for p in conftest.LONG_FIRST if not (ROOT / p).is_file()]
    assert not missing, f"conftest.LONG_FIRST names files that are gone: {missing}"


def test_long_files_come_first_then_notebooks_and_each_file_keeps_its_order():
    ids = ["tests/test_a.py::t1", "notebooks/x.ipynb::Cell 0", "tests/test_a.py::t2", "notebooks/x.ipynb::Cell 1",
           f"{conftest.LONG_FIRST[1]}::late", f"{conftest.LONG_FIRST[0]}::first", f"{conftest.LONG_FIRST[1]}::later"]
    items = [SimpleNamespace(nodeid=i) for i in ids]
    conftest.pytest_collection_modifyitems(None, None, items)
    assert [i.nodeid for i in items] == [
        f"{conftest.LONG_FIRST[0]}::first", f"{conftest.LONG_FIRST[1]}::late", f"{conftest.LONG_FIRST[1]}::later",
        "notebooks/x.ipynb::Cell 0", "notebooks/x.ipynb::Cell 1", "tests/test_a.py::t1", "tests/test_a.py::t2"]
