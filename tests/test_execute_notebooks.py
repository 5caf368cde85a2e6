"""``tools/execute_notebooks.py``: the book's notebooks executed ahead of ``jupyter-book build`` (``make book-build``)."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import nbformat
import yaml

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("execute_notebooks", ROOT / "tools" / "execute_notebooks.py")
execute_notebooks = importlib.util.module_from_spec(spec)
spec.loader.exec_module(execute_notebooks)


def test_every_chapter_notebook_is_named_by_the_toc():
    found = execute_notebooks.toc_notebooks(ROOT / "_toc.yml")
    assert sorted(found) == sorted((ROOT / "notebooks").glob("*.ipynb"))  # every notebook, each once
    assert len(set(found)) == len(found)


def test_the_build_config_is_the_books_but_reads_the_cache(tmp_path):
    book = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert book["execute"]["execute_notebooks"] == "force"  # `jupyter-book build .` alone still executes all
    cache = tmp_path / "cache"
    derived = execute_notebooks.cached_config(ROOT / "_config.yml", cache)
    assert derived["execute"] == {**book["execute"], "execute_notebooks": "cache", "cache": str(cache.resolve())}
    # Jupyter Book looks for local extensions relative to the config file, which now lives in _build/
    for name, path in derived["sphinx"]["local_extensions"].items():
        assert Path(path).is_absolute() and (Path(path) / f"{name}.py").is_file()
    rest = {k: v for k, v in derived.items() if k not in ("execute", "sphinx")}
    assert rest == {k: v for k, v in book.items() if k not in ("execute", "sphinx")}
    assert {k: v for k, v in derived["sphinx"].items() if k != "local_extensions"} == \
        {k: v for k, v in book["sphinx"].items() if k != "local_extensions"}


def test_executed_notebooks_are_found_in_the_cache_as_the_build_looks_them_up(tmp_path, capfd):
    """The build (myst-nb's cache mode) matches a notebook by its code: what the script cached must match."""
    from jupyter_cache import get_cache

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(6 * 7)"),
                                         nbformat.v4.new_code_cell("x = 1")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    (tmp_path / "ch").mkdir()
    nbformat.write(nb, tmp_path / "ch" / "one.ipynb")
    broken = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1 / 0")], metadata=nb.metadata)
    nbformat.write(broken, tmp_path / "ch" / "two.ipynb")
    (tmp_path / "_toc.yml").write_text("format: jb-book\nroot: ch/one\nchapters:\n  - file: ch/two\n  - file: intro\n")
    (tmp_path / "_config.yml").write_text("title: t\nexecute:\n  execute_notebooks: force\n  timeout: 60\n")
    config = tmp_path / "build" / "config.yml"
    assert execute_notebooks.main(["--cache", str(tmp_path / "cache"), "--config", str(config),
                                   "--toc", str(tmp_path / "_toc.yml"),
                                   "--book-config", str(tmp_path / "_config.yml")]) == 0
    cache = get_cache(tmp_path / "cache")
    record = cache.match_cache_notebook(nbformat.read(tmp_path / "ch" / "one.ipynb", as_version=4))
    _, executed = cache.merge_match_into_notebook(nbformat.read(tmp_path / "ch" / "one.ipynb", as_version=4))
    assert record is not None and executed.cells[0].outputs[0]["text"] == "42\n"
    assert len(cache.list_cache_records()) == 1  # the failing notebook is left for the build to run and report
    assert yaml.safe_load(config.read_text())["execute"]["execute_notebooks"] == "cache"
    # the kernels' "running over TCP without encryption" warning is not printed (quiet_kernels)
    assert "without encryption" not in capfd.readouterr().err and "IPYTHONDIR" not in os.environ
