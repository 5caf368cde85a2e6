"""Course packs: one chapter, the stored results it reads and its exercises, in a folder a teacher hands out.

    python -m hacn_core course hacn_02_mixer ~/course/mixer        # builds the wheel into the pack
    python -m hacn_core course awnn_02_tabular ~/course/awnn --wheel dist/hacn_core-0.1.0-py3-none-any.whl

A pack holds

* ``<chapter>.ipynb``: the chapter's notebook, as committed (no outputs);
* ``results/<experiment>/<hash>.json``: the stored runs of the experiments the chapter reads, and only
  those (:data:`CHAPTERS`; ``tests/test_course.py`` checks the list against the notebook's calls and,
  with ``--run-course``, against the files a run of the notebook actually opens);
* ``exercises.md``: the chapter's exercises (its cells from the ``## Exercises`` heading on);
* the package as a wheel (``hacn_core-<version>-py3-none-any.whl``), built from this checkout unless
  ``--wheel`` names one;
* ``README.md``: the one-line set-up (``pip install`` of the wheel, ``HACN_RESULTS`` pointed at the
  pack's ``results/``) and the command that runs the chapter headless with its outputs kept;
* ``pack.json``: what was packed, from which commit, with a SHA-256 per file.

The pack is written into a temporary folder beside ``DIR`` and renamed into place when complete, so an
interrupted command leaves no half pack; an existing non-empty ``DIR`` is never overwritten.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from hacn_core.engine.results import REPO_ROOT, code_version, results_root

NOTEBOOKS = REPO_ROOT / "notebooks"

#: chapter (its notebook's name in notebooks/) -> the experiments whose stored runs it reads, at any profile.
#: The ledger, the key results and the appendices read files of the whole checkout
#: (every experiment, benchmarks/gpu-records/) and are not packed.
CHAPTERS: dict[str, tuple[str, ...]] = {
    "hacn_01_forward_rule": (),
    "hacn_02_mixer": ("hacn-mixer", "hacn-mixer-cost", "hacn-mixer-long"),
    "hacn_03_budgets": ("hacn-mixer-cost", "hacn-mixer-long"),
    "hacn_04_vit": ("hacn-vit",),
    "hacn_05_decoder": ("hacn-decoder", "hacn-decoder-ablations", "hacn-vit"),
    "hacn_06_mechanism": ("hacn-mechanism", "hacn-mixer-cost", "hacn-mixer-long", "hacn-code-recipe"),
    "awnn_01_width": ("awnn-kaiming-plus",),
    "awnn_02_tabular": ("awnn-tabular-adaptive", "awnn-tabular-fixed"),
    "awnn_03_compress": ("awnn-compress",),
    "awnn_04_ablations": ("awnn-ablations", "awnn-compress", "awnn-fixed-plus", "awnn-tabular-adaptive",
                          "awnn-tabular-fixed"),
    "awnn_05_images": ("awnn-images",),
    "awnn_06_graphs": ("awnn-graphs",),  # App. D's Fixed+ runs are filed under awnn-graphs
    "awnn_07_text": ("awnn-text",),
    "gates_01_mnist": ("gates-gate-gradients", "gates-keras", "gates-mnist"),
    "gates_02_cifar": ("gates-cifar",),
    "beyond_01_width_connectivity": ("hacn-mixer-cost", "hacn-mixer-long", "width-connectivity"),
}

EXERCISES_HEADING = "## Exercises"
RESULTS_DIR = "results"


class CourseError(ValueError):
    """Bad input to ``course``: an unknown chapter, a folder that is not empty, a wheel that is not one."""


@dataclass(frozen=True)
class Pack:
    """What :func:`write_pack` wrote."""

    folder: Path
    chapter: str
    experiments: tuple[str, ...]
    runs: int  # result files copied
    wheel: str  # the wheel's file name inside the pack


def check_chapter(chapter: str) -> str:
    """``chapter`` if a pack can be made of it; otherwise a :class:`CourseError` listing the chapters."""
    if chapter not in CHAPTERS:
        raise CourseError(f"chapter={chapter!r} is not a chapter with a course pack; allowed: {', '.join(CHAPTERS)}")
    return chapter


def notebook_path(chapter: str) -> Path:
    path = NOTEBOOKS / f"{check_chapter(chapter)}.ipynb"
    if not path.is_file():
        raise CourseError(f"{path} does not exist: course packs are made from a checkout of the hacn-book "
                          f"repository (hacn_core is imported from {Path(__file__).resolve().parent})")
    return path


def chapter_title(notebook: Mapping) -> str:
    """The text of the notebook's first ``# `` heading."""
    for cell in notebook["cells"]:
        if cell["cell_type"] == "markdown":
            for line in "".join(cell["source"]).splitlines():
                if line.startswith("# "):
                    return line[2:].strip()
    return ""


def exercises_markdown(notebook: Mapping) -> str:
    """The chapter's cells from the one opening with ``## Exercises`` to the end, as Markdown (a code
    cell as a fenced ``python`` block); empty when the chapter has no exercises."""
    cells = notebook["cells"]
    start = next((i for i, cell in enumerate(cells) if cell["cell_type"] == "markdown"
                  and "".join(cell["source"]).lstrip().startswith(EXERCISES_HEADING)), None)
    if start is None:
        return ""
    parts = []
    for cell in cells[start:]:
        source = "".join(cell["source"]).strip("\n")
        parts.append(f"```python\n{source}\n```" if cell["cell_type"] == "code" else source)
    return "\n\n".join(parts) + "\n"


def result_files(experiments: Iterable[str], root: Path) -> list[Path]:
    """Every stored result (``<16-hex hash>.json``) of ``experiments`` under ``root``, in order."""
    files = []
    for experiment in experiments:
        files += sorted(p for p in (root / experiment).glob("*.json") if len(p.stem) == 16)
    return files


def build_wheel(out_dir: Path) -> Path:
    """Build the package's wheel from this checkout into ``out_dir`` (pip, no dependencies, no build
    isolation: setuptools from this environment, no download). Built from a copy of the sources, so
    the checkout gets no ``build/`` or ``*.egg-info``."""
    with tempfile.TemporaryDirectory(prefix="hacn-wheel-") as tmp:
        source = Path(tmp) / "src"
        source.mkdir()
        for name in ("pyproject.toml", "README.md", "LICENSE"):
            shutil.copy2(REPO_ROOT / name, source / name)
        shutil.copytree(REPO_ROOT / "hacn_core", source / "hacn_core",
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.so", "build"))
        out = Path(tmp) / "wheel"
        proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                               "--no-index", "-q", str(source), "-w", str(out)], capture_output=True, text=True)
        wheels = sorted(out.glob("hacn_core-*.whl"))
        if proc.returncode != 0 or len(wheels) != 1:
            raise CourseError(f"building the wheel failed (pip wheel exited with {proc.returncode}): "
                              f"{(proc.stderr or proc.stdout).strip()[-500:]}")
        out_dir.mkdir(parents=True, exist_ok=True)
        return Path(shutil.copy2(wheels[0], out_dir / wheels[0].name))


AWNN_NOTE = """
The first run compiles the library's C++ node for AWNN's adaptive layers (a C++ compiler is needed; about
35 s once, then cached; without a compiler the chapter runs the same steps in Python, after one warning).
"""


def readme(chapter: str, title: str, wheel: str, experiments: tuple[str, ...], runs: int, exercises: bool) -> str:
    """The pack's README: what is in it, the one-line set-up and how to run the chapter."""
    stored = (f"the {runs} stored runs it reads (`results/`: {', '.join(experiments)})" if experiments
              else "no stored runs (it computes everything it shows)")
    return f"""# {title or chapter}

A chapter of *hacn-book*, packed for a course: the notebook `{chapter}.ipynb`, {stored},
{"its exercises (`exercises.md`, also at the end of the notebook), " if exercises else ""}and the `hacn_core`
library as a wheel (`{wheel}`). Nothing else is needed: no copy of the repository, no dataset.

## Set up (once, Python 3.10 or newer)

```bash
python -m venv .venv && .venv/bin/pip install "./{wheel}" jupyterlab
```

This installs `hacn_core`, PyTorch and JupyterLab into `.venv/` (PyPI's torch wheel for Linux carries
CUDA: a few GB). On Windows use `.venv\\Scripts\\pip`.

## Run the chapter

`hacn_core` reads the stored runs from the folder that `HACN_RESULTS` names: point it at this pack's
`results/`, from the pack's folder:

```bash
export HACN_RESULTS="$PWD/results"
# headless: {chapter}-run.ipynb keeps every table and figure (the exercises' cells are left to you)
.venv/bin/jupyter-execute --output={chapter}-run {chapter}.ipynb
# or open it in JupyterLab and run it cell by cell, exercises included
.venv/bin/jupyter lab {chapter}.ipynb
```

At the default profile (`book`) the chapter draws the stored runs and trains nothing. With
`HACN_PROFILE=smoke` it trains its own tiny runs instead (a few minutes on a laptop; the image, graph
and text chapters then download their dataset once), which is what the exercises build on.
{AWNN_NOTE if chapter.startswith(("awnn", "beyond")) else ""}"""


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_pack(chapter: str, target: str | os.PathLike[str], wheel: str | os.PathLike[str] | None = None,
               results: str | os.PathLike[str] | None = None) -> Pack:
    """Write the course pack of ``chapter`` into the folder ``target`` (new, or empty).

    ``wheel``: a built ``hacn_core`` wheel to ship (default: built from this checkout, :func:`build_wheel`);
    ``results``: the results folder to copy from (default: :func:`~hacn_core.engine.results.results_root`).
    """
    source = notebook_path(chapter)
    target = Path(target).expanduser().resolve()
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise CourseError(f"{target} exists and is not an empty folder; name a new folder for the pack")
    if wheel is not None and not (Path(wheel).is_file() and Path(wheel).name.startswith("hacn_core-")
                                  and Path(wheel).suffix == ".whl"):
        raise CourseError(f"--wheel {wheel}: not a hacn_core wheel file (hacn_core-<version>-py3-none-any.whl)")
    root = Path(results) if results is not None else results_root()
    experiments = CHAPTERS[chapter]
    files = result_files(experiments, root)
    missing = [e for e in experiments if not (root / e).is_dir()]
    if missing:
        raise CourseError(f"{root} has no stored runs of {', '.join(missing)}, which {chapter} reads")
    notebook = json.loads(source.read_text(encoding="utf-8"))
    exercises = exercises_markdown(notebook)

    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.partial-", dir=target.parent))
    umask = os.umask(0)
    os.umask(umask)
    staging.chmod(0o777 & ~umask)  # mkdtemp's folder is private; the pack is an ordinary folder
    try:
        shutil.copy2(source, staging / source.name)
        for path in files:
            (staging / RESULTS_DIR / path.parent.name).mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, staging / RESULTS_DIR / path.parent.name / path.name)
        (staging / RESULTS_DIR).mkdir(exist_ok=True)
        shipped = Path(shutil.copy2(wheel, staging)) if wheel is not None else build_wheel(staging)
        if exercises:
            (staging / "exercises.md").write_text(exercises, encoding="utf-8")
        (staging / "README.md").write_text(
            readme(chapter, chapter_title(notebook), shipped.name, experiments, len(files), bool(exercises)),
            encoding="utf-8")
        manifest = {
            "chapter": chapter, "experiments": list(experiments), "runs": len(files), "wheel": shipped.name,
            "code_version": code_version(), "results_from": str(root),
            "files": {str(p.relative_to(staging)): sha256(p) for p in sorted(staging.rglob("*")) if p.is_file()},
        }
        (staging / "pack.json").write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
        if target.exists():
            target.rmdir()  # empty (checked above)
        os.replace(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return Pack(target, chapter, experiments, len(files), shipped.name)


# ----------------------------------------------------------------------------- what a chapter reads

#: run first in a traced notebook: every result file the store opens is appended to $HACN_TRACE_READS
TRACE_PRELUDE = """\
import os as _os, pathlib as _pathlib
from hacn_core.engine import results as _results
_read = _results.ResultsStore.read
def _traced_read(self, path, *args, **kwargs):
    with open(_os.environ["HACN_TRACE_READS"], "a") as _log:
        _log.write(str(_pathlib.Path(path).resolve()) + "\\n")
    return _read(self, path, *args, **kwargs)
_results.ResultsStore.read = _traced_read
"""


def run_chapter(chapter: str, results: str | os.PathLike[str] | None = None, timeout: int = 1800):
    """Execute ``chapter``'s notebook as the book does (``book`` profile, no training) in a kernel of this
    Python, with :data:`TRACE_PRELUDE` as its first cell. Returns the executed notebook (without that cell)
    and the experiments whose stored runs it opened under ``results`` (default: :func:`results_root`)."""
    import nbclient
    import nbformat

    nb = nbformat.read(notebook_path(chapter), as_version=4)
    nb.cells.insert(0, nbformat.v4.new_code_cell(TRACE_PRELUDE))
    root = (Path(results) if results is not None else results_root()).resolve()
    with tempfile.TemporaryDirectory(prefix="hacn-trace-") as tmp:
        log = Path(tmp) / "reads.txt"
        log.touch()
        saved = dict(os.environ)
        os.environ.update(HACN_PROFILE="book", HACN_ALLOW_TRAIN="0", HACN_QUIET="1", HACN_TRACE_READS=str(log),
                          HACN_RESULTS=str(root))
        os.environ.pop("MPLBACKEND", None)  # the kernel's inline backend: figures are outputs, as in the book
        try:
            nbclient.NotebookClient(nb, timeout=timeout, kernel_name="python3",
                                    resources={"metadata": {"path": tmp}}).execute()
        finally:
            os.environ.clear()
            os.environ.update(saved)
        reads = {Path(line) for line in log.read_text().splitlines()}
    nb.cells.pop(0)
    return nb, {path.parent.name for path in reads if path.parent.parent == root}


def traced_experiments(chapter: str, results: str | os.PathLike[str] | None = None) -> set[str]:
    """The experiments whose stored runs ``chapter`` opens at the ``book`` profile (:func:`run_chapter`):
    what :data:`CHAPTERS` must list for it."""
    return run_chapter(chapter, results)[1]
