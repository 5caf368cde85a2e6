"""Every chapter of the book ends with 2-4 exercises a student runs, each a code cell.

The chapters are the notebooks that ``_toc.yml`` lists (the ledger and the key results are summary pages, not
chapters). A chapter's exercises open with a markdown cell ``## Exercises``; after it come, per exercise, a
markdown prompt headed ``### N. ...``, one or more code cells and a hint. Each code cell is tagged
``skip-execution``, so the book build (MyST-NB, jupyter-cache: nbclient skips the tag) shows it without running
it, while nbval runs it under the smoke profile in ``make test``; its code reads ``PROFILE`` so that smoke is a
tiny budget, and its lines fit a code block (80 characters). The "What to look for" of each exercise sits in a
collapsed hint (a MyST ``{admonition}`` with ``:class: dropdown``), never open under the prompt.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
NOT_CHAPTERS = {"notebooks/00_ledger", "notebooks/key_results"}  # summary pages, not chapters
HEADING = re.compile(r"^### (\d+)\. \S", re.MULTILINE)  # an exercise's prompt: "### 1. Change one knob ..."
DROPDOWN = re.compile(r"^```\{admonition\} What to look for\n:class: dropdown\n\n.+\n```\s*$", re.DOTALL)
MAX_LINE = 80  # characters a code block shows without a scroll bar
SKIP = "skip-execution"
#: whether a cell trains: such a cell must scale its budget by the profile (smoke: a few seconds in CI)
TRAINS = re.compile(r"\b(run_or_load|measure_cells)\(")  # catalog.run(..., "smoke"): the smoke profile itself


def chapter_notebooks() -> list[Path]:
    """The notebooks ``_toc.yml`` lists as ``file:`` entries, in book order, without the summary pages."""
    files = re.findall(r"^\s*-?\s*file:\s*(\S+)\s*$", (ROOT / "_toc.yml").read_text(encoding="utf-8"), re.MULTILINE)
    return [ROOT / f"{f}.ipynb" for f in files if f.startswith("notebooks/") and f not in NOT_CHAPTERS]


def exercise_cells(path: Path) -> list[nbformat.NotebookNode]:
    """The cells from the chapter's ``## Exercises`` heading to its end."""
    cells = nbformat.read(path, as_version=4).cells
    starts = [i for i, c in enumerate(cells) if c.cell_type == "markdown" and c.source.startswith("## Exercises")]
    assert len(starts) == 1, f"{path.name}: {len(starts)} '## Exercises' cells, expected one"
    return cells[starts[0]:]


def exercises(path: Path) -> list[tuple[int, list[nbformat.NotebookNode]]]:
    """``(number, cells)`` per exercise: its prompt and every cell up to the next prompt."""
    out: list[tuple[int, list[nbformat.NotebookNode]]] = []
    for cell in exercise_cells(path)[1:]:
        match = HEADING.match(cell.source) if cell.cell_type == "markdown" else None
        if match:
            out.append((int(match.group(1)), [cell]))
        else:
            assert out, f"{path.name}: a {cell.cell_type} cell between '## Exercises' and the first prompt"
            out[-1][1].append(cell)
    return out


def test_toc_lists_the_chapters() -> None:
    names = {p.stem for p in chapter_notebooks()}
    assert {"hacn_01_forward_rule", "awnn_01_width", "gates_01_mnist", "appendix_performance"} <= names
    assert "00_ledger" not in names
    assert all(p.exists() for p in chapter_notebooks())


@pytest.mark.parametrize("path", [p for p in chapter_notebooks() if p.exists()], ids=lambda p: p.stem)
def test_chapter_ends_with_runnable_exercises(path: Path) -> None:
    found = exercises(path)
    numbers = [n for n, _ in found]
    assert 2 <= len(numbers) <= 4, f"{path.name}: {len(numbers)} exercises, expected 2 to 4"
    assert numbers == list(range(1, len(numbers) + 1)), f"{path.name}: exercises numbered {numbers}"
    for n, cells in found:
        where = f"{path.name} exercise {n}"
        code = [c for c in cells if c.cell_type == "code"]
        assert code, f"{where}: no code cell to run"
        for cell in code:
            assert SKIP in cell.metadata.get("tags", []), f"{where}: a code cell not tagged {SKIP!r}"
            compile(cell.source, where, "exec")  # a SyntaxError names the exercise
            long = [line for line in cell.source.splitlines() if len(line) > MAX_LINE]
            assert not long, f"{where}: {len(long)} lines over {MAX_LINE} characters, e.g. {long[0]!r}"
            if TRAINS.search(cell.source):
                assert "PROFILE" in cell.source, f"{where}: trains without scaling its budget by PROFILE"
        markdown = [c.source for c in cells[1:] if c.cell_type == "markdown"]
        assert "What to look for" not in cells[0].source, f"{where}: the hint is open under the prompt"
        hints = [m for m in markdown if "What to look for" in m]
        assert len(hints) == 1 and DROPDOWN.match(hints[0].strip() + "\n"), \
            f"{where}: the 'What to look for' must be one collapsed hint (admonition, :class: dropdown)"
        assert not any("```python" in m for m in [cells[0].source, *markdown]), f"{where}: code in markdown"


def test_exercises_are_split_and_checked_as_a_reader_meets_them(tmp_path: Path) -> None:
    """The parser on a small notebook: a prompt, a tagged code cell, a collapsed hint."""
    nb = nbformat.v4.new_notebook()
    def code() -> nbformat.NotebookNode:
        cell = nbformat.v4.new_code_cell("epochs = 2 if PROFILE == 'smoke' else 30")
        cell.metadata["tags"] = [SKIP]
        return cell

    hint = "```{admonition} What to look for\n:class: dropdown\n\nThe width.\n```"
    nb.cells = [nbformat.v4.new_markdown_cell("## Exercises\n\nIntro."),
                nbformat.v4.new_markdown_cell("### 1. Change one knob\n\nPredict."), code(),
                nbformat.v4.new_markdown_cell(hint),
                nbformat.v4.new_markdown_cell("### 2. Read the code\n\nFind it."), code(),
                nbformat.v4.new_markdown_cell(hint)]
    path = tmp_path / "chapter.ipynb"
    nbformat.write(nb, path)
    found = exercises(path)
    assert [n for n, _ in found] == [1, 2] and [len(cells) for _, cells in found] == [3, 3]
    assert DROPDOWN.match(hint + "\n") and not DROPDOWN.match("*What to look for.* The width.")
