"""Course packs (``python -m hacn_core course CHAPTER DIR``, ``hacn_core/course.py``).

Always: a pack holds the chapter's notebook byte for byte, every stored run of the experiments the
chapter reads and nothing else, its exercises, the wheel and a README with the set-up; the declared
experiments cover every experiment the notebook's code names; bad input is one line.

With ``--run-course`` (slow: each chapter runs twice, minutes on a 2-core machine), as a teacher would:
build the wheel, build the pack into a temporary folder, install the wheel into a fresh virtual
environment (torch and Jupyter from this one's site-packages through a ``.pth`` line, so nothing is
downloaded; ``hacn_core`` only from the wheel, the checkout not importable), run the notebook headless
with ``jupyter-execute --output``, and compare its tables with the chapter run as the book runs it
(which also checks that :data:`~hacn_core.course.CHAPTERS` lists exactly the experiments it opens).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import nbformat
import pytest

from hacn_core import course
from hacn_core.__main__ import main
from hacn_core.engine.results import COMMITTED_STORE

ROOT = Path(__file__).resolve().parents[1]
#: one H-ACN and one AWNN chapter, run end to end by the teacher's test
TEACHER_CHAPTERS = ("hacn_02_mixer", "awnn_02_tabular")
#: chapters of the book that are not packed (they read the whole checkout), with the reason
NOT_PACKED = {"00_ledger", "key_results", "appendix_performance", "appendix_provenance"}


def _fake_wheel(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    wheel = folder / "hacn_core-0.1.0-py3-none-any.whl"
    wheel.write_bytes(b"PK\x05\x06" + bytes(18))  # an empty zip: the pack only copies it
    return wheel


# ------------------------------------------------------------------------------ the chapters


def test_every_chapter_of_the_toc_is_packed_or_named_as_not():
    toc = re.findall(r"file:\s*notebooks/(\S+)", (ROOT / "_toc.yml").read_text())
    assert set(course.CHAPTERS) | NOT_PACKED == set(toc) and not set(course.CHAPTERS) & NOT_PACKED


def _named_experiments(path: Path) -> set[str]:
    """Experiment ids the notebook's code passes to ``catalog.run / stored / get`` or ``run_or_load``: literals and
    ``alias.NAME`` constants of the study modules it imports (``from hacn_core.x import y as alias``)."""
    import importlib

    from hacn_core.catalog import EXPERIMENTS

    cells = json.loads(path.read_text())["cells"]
    end = next((i for i, c in enumerate(cells) if c["cell_type"] == "markdown"
                and "".join(c["source"]).lstrip().startswith(course.EXERCISES_HEADING)), len(cells))
    # the exercises' cells train their own smoke runs (a temporary store) and are not run by the book
    code = "\n".join("".join(c["source"]) for c in cells[:end] if c["cell_type"] == "code")
    aliases = {alias or name: f"{package}.{name}" for package, name, alias in
               re.findall(r"from (hacn_core[\w.]*) import (\w+)(?: as (\w+))?", code)}
    found = set()
    for arg in re.findall(r"(?:catalog\.(?:run|stored|get)|run_or_load)\(\s*([\w.\"'-]+)", code):
        if arg[0] in "\"'":
            found.add(arg.strip("\"'"))
        elif "." in arg and arg.split(".")[0] in aliases:
            value = getattr(importlib.import_module(aliases[arg.split(".")[0]]), arg.split(".")[1])
            found.add(value)
    return {e for e in found if e in EXPERIMENTS}


@pytest.mark.parametrize("chapter", list(course.CHAPTERS))
def test_the_declared_experiments_cover_what_the_notebook_names(chapter):
    from hacn_core.catalog import EXPERIMENTS

    assert set(course.CHAPTERS[chapter]) <= set(EXPERIMENTS)
    assert _named_experiments(course.notebook_path(chapter)) <= set(course.CHAPTERS[chapter])


# ------------------------------------------------------------------------------ the pack


def test_a_pack_holds_the_chapter_its_runs_only_its_exercises_and_the_setup(tmp_path):
    wheel = _fake_wheel(tmp_path / "dist")
    pack = course.write_pack("hacn_02_mixer", tmp_path / "course" / "mixer", wheel=wheel, results=COMMITTED_STORE)
    folder = tmp_path / "course" / "mixer"
    assert pack.folder == folder.resolve() and pack.wheel == wheel.name
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        ["README.md", "exercises.md", "hacn_02_mixer.ipynb", "pack.json", "results", wheel.name])
    assert not [p for p in folder.parent.iterdir() if p.name != "mixer"]  # no staging folder left behind
    source = ROOT / "notebooks" / "hacn_02_mixer.ipynb"
    assert (folder / "hacn_02_mixer.ipynb").read_bytes() == source.read_bytes()
    # every stored run of the three experiments, byte for byte, and nothing else
    expected = {p.relative_to(COMMITTED_STORE) for e in course.CHAPTERS["hacn_02_mixer"]
                for p in (COMMITTED_STORE / e).glob("*.json")}
    copied = {p.relative_to(folder / "results") for p in (folder / "results").rglob("*") if p.is_file()}
    assert copied == expected and pack.runs == len(expected) > 0
    assert all((folder / "results" / p).read_bytes() == (COMMITTED_STORE / p).read_bytes() for p in expected)
    # the exercises: the chapter's cells from its "## Exercises" heading on
    nb = json.loads(source.read_text())
    text = (folder / "exercises.md").read_text()
    assert text.startswith("## Exercises") and text == course.exercises_markdown(nb)
    tail = [c for c in nb["cells"][next(i for i, c in enumerate(nb["cells"])
                                        if "".join(c["source"]).startswith("## Exercises")):]]
    assert all("".join(c["source"]).strip() in text for c in tail)
    # the README: the one-line set-up from the wheel, HACN_RESULTS at the pack, a run that keeps outputs
    readme = (folder / "README.md").read_text()
    assert f'pip install "./{wheel.name}"' in readme and 'export HACN_RESULTS="$PWD/results"' in readme
    assert "jupyter-execute --output=hacn_02_mixer-run hacn_02_mixer.ipynb" in readme
    assert readme.startswith(f"# {course.chapter_title(nb)}") and f"{pack.runs} stored runs" in readme
    assert course.AWNN_NOTE not in readme  # the C++ node's first build: AWNN chapters only
    assert course.AWNN_NOTE in course.readme("awnn_02_tabular", "t", wheel.name, ("awnn-tabular-fixed",), 1, True)
    manifest = json.loads((folder / "pack.json").read_text())
    assert manifest["chapter"] == "hacn_02_mixer" and manifest["runs"] == pack.runs
    assert set(manifest["files"]) == {str(p.relative_to(folder)) for p in folder.rglob("*")
                                      if p.is_file() and p.name != "pack.json"}
    assert all(hashlib.sha256((folder / f).read_bytes()).hexdigest() == digest
               for f, digest in manifest["files"].items())


def test_bad_input_is_one_line_and_nothing_is_overwritten(tmp_path, capsys):
    assert main(["course", "hacn_99_nope", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: chapter='hacn_99_nope' is not a chapter")
    assert "allowed: hacn_01_forward_rule, hacn_02_mixer" in err and "beyond_01_width_connectivity" in err
    occupied = tmp_path / "occupied"
    occupied.mkdir()
    (occupied / "notes.txt").write_text("a teacher's file")
    assert main(["course", "hacn_04_vit", str(occupied), "--wheel", str(_fake_wheel(tmp_path / "d"))]) == 2
    assert "exists and is not an empty folder" in capsys.readouterr().err
    assert [p.name for p in occupied.iterdir()] == ["notes.txt"]
    assert main(["course", "hacn_04_vit", str(tmp_path / "y"), "--wheel", str(tmp_path / "nothing.whl")]) == 2
    assert "not a hacn_core wheel file" in capsys.readouterr().err
    # runs that are not there: one line, and no half-written pack
    assert main(["course", "hacn_04_vit", str(tmp_path / "z"), "--wheel", str(_fake_wheel(tmp_path / "d")),
                 "--results", str(tmp_path / "empty-store")]) == 2
    assert "has no stored runs of hacn-vit" in capsys.readouterr().err
    assert not (tmp_path / "z").exists() and not list(tmp_path.glob(".z.partial-*"))


# ------------------------------------------------------------------------------ as a teacher would


def _tables(nb: nbformat.NotebookNode) -> list[str]:
    """Every table (HTML) and Markdown output, in order: what a reader sees of the stored numbers."""
    out = []
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            out += [data[k] for k in ("text/html", "text/markdown") if k in data]
    return out


def _figures(nb: nbformat.NotebookNode) -> list[str]:
    """Every figure (SVG, the house style's inline format, or PNG), in order."""
    return [o["data"][kind] for c in nb.cells for o in c.get("outputs", [])
            for kind in ("image/svg+xml", "image/png") if kind in o.get("data", {})]


def _fresh_venv(folder: Path, wheel: Path) -> Path:
    """A new virtual environment with ``hacn_core`` installed from ``wheel`` and everything else (torch,
    Jupyter) from this environment's site-packages, added by a ``.pth`` line: a ``.pth`` file in that
    folder is not read then, so the editable install of this checkout stays out."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    python = folder / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / "hacn-book-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
                    "--no-index", str(wheel)], check=True)
    return python


@pytest.mark.course
@pytest.mark.parametrize("chapter", TEACHER_CHAPTERS)
def test_a_teacher_runs_the_pack_from_a_fresh_environment(chapter, tmp_path):
    times = {}
    started = time.monotonic()
    book, opened = course.run_chapter(chapter, results=COMMITTED_STORE)  # the chapter as the book runs it
    times["book run"] = time.monotonic() - started
    assert opened == set(course.CHAPTERS[chapter])  # what it reads is what the pack ships

    started = time.monotonic()
    wheel = course.build_wheel(tmp_path / "dist")
    times["wheel"] = time.monotonic() - started
    started = time.monotonic()
    assert main(["course", chapter, str(tmp_path / "pack"), "--wheel", str(wheel),
                 "--results", str(COMMITTED_STORE)]) == 0
    times["pack"] = time.monotonic() - started
    started = time.monotonic()
    python = _fresh_venv(tmp_path / "venv", wheel)
    times["venv"] = time.monotonic() - started

    pack = tmp_path / "pack"
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("HACN_", "PYTHON", "PYTEST", "IPYTHON", "MPLBACKEND"))}
    env.update(HACN_RESULTS=str(pack / "results"), HACN_ALLOW_TRAIN="0", HACN_DOWNLOAD="0",
               HACN_DATA=str(tmp_path / "no-data"), VIRTUAL_ENV=str(tmp_path / "venv"),
               PATH=f"{python.parent}{os.pathsep}{env.get('PATH', '')}")
    where = subprocess.run([str(python), "-c", "import hacn_core, sys; print(hacn_core.__file__)"], cwd=pack,
                           env=env, capture_output=True, text=True, check=True).stdout
    assert where.startswith(str(tmp_path / "venv")) and str(ROOT) not in where  # the wheel, not the checkout
    # the README's command: jupyter-execute (nbclient) keeps the outputs in <chapter>-run.ipynb
    started = time.monotonic()
    proc = subprocess.run([str(python), "-c", "import sys; from nbclient.cli import main; sys.exit(main())",
                           f"--output={chapter}-run", f"{chapter}.ipynb", "--timeout=1800"],
                          cwd=pack, env=env, capture_output=True, text=True)
    times["pack run"] = time.monotonic() - started
    assert proc.returncode == 0, proc.stderr[-3000:]
    ran = nbformat.read(pack / f"{chapter}-run.ipynb", as_version=4)
    assert all(o.get("output_type") != "error" for c in ran.cells for o in c.get("outputs", []))
    tables = _tables(ran)
    assert tables and tables == _tables(book)  # the same tables as the book, character for character
    figures = _figures(ran)
    assert figures and len(figures) == len(_figures(book))  # every figure drawn (the kernel's inline backend)
    same = sum(a == b for a, b in zip(figures, _figures(book)))
    print(f"{chapter}: " + ", ".join(f"{k} {v:.0f} s" for k, v in times.items())
          + f"; {len(tables)} tables, {len(figures)} figures ({same} identical to the byte: SVG ids are random)")
