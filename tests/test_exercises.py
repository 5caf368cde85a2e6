"""Every chapter of the book ends with 2-4 exercises whose Python code at least compiles.

The chapters are the notebooks that ``_toc.yml`` lists (the ledger, ``00_ledger``, is a
table, not a chapter). The last cell of each must be a markdown cell that opens with
``## Exercises`` and holds between 2 and 4 numbered items ``1.``, ``2.``, ... at the start
of a line; every fenced ``python`` block in it (indented inside a list item or not) must
compile. Running the blocks trains small models, which is a reader's job, not a test's.
"""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOT_CHAPTERS = {"notebooks/00_ledger", "notebooks/key_results"}  # summary pages, not chapters
ITEM = re.compile(r"^(\d+)\. ", re.MULTILINE)  # a numbered item at the left margin
FENCE = re.compile(r"^(?P<indent>[ \t]*)```python[ \t]*\n(?P<body>.*?)^(?P=indent)```[ \t]*$", re.MULTILINE | re.DOTALL)


def chapter_notebooks() -> list[Path]:
    """The notebooks ``_toc.yml`` lists as ``file:`` entries, in book order, without the ledger."""
    files = re.findall(r"^\s*-?\s*file:\s*(\S+)\s*$", (ROOT / "_toc.yml").read_text(encoding="utf-8"), re.MULTILINE)
    notebooks = [ROOT / f"{f}.ipynb" for f in files if f.startswith("notebooks/") and f not in NOT_CHAPTERS]
    return notebooks


def exercises_cell(path: Path) -> str:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    last = cells[-1]
    assert last["cell_type"] == "markdown", f"{path.name}: the last cell is a {last['cell_type']} cell, not the exercises"
    return "".join(last["source"])


def python_blocks(markdown: str) -> list[str]:
    """The fenced ``python`` blocks of ``markdown``, each dedented by its fence's indentation."""
    return [textwrap.dedent(m.group("body")) for m in FENCE.finditer(markdown)]


def test_toc_lists_the_chapters() -> None:
    names = {p.stem for p in chapter_notebooks()}
    assert {"hacn_01_forward_rule", "awnn_01_width", "gates_01_mnist", "appendix_performance"} <= names
    assert "00_ledger" not in names
    assert all(p.exists() for p in chapter_notebooks())


@pytest.mark.parametrize("path", chapter_notebooks(), ids=lambda p: p.stem)
def test_chapter_ends_with_exercises(path: Path) -> None:
    text = exercises_cell(path)
    assert text.split("\n", 1)[0].strip() == "## Exercises", f"{path.name}: last cell does not open with '## Exercises'"
    numbers = [int(n) for n in ITEM.findall(text)]
    assert 2 <= len(numbers) <= 4, f"{path.name}: {len(numbers)} numbered exercises, expected 2 to 4"
    assert numbers == list(range(1, len(numbers) + 1)), f"{path.name}: exercises numbered {numbers}"
    blocks = python_blocks(text)
    assert blocks, f"{path.name}: the exercises give no python code to run"
    for i, source in enumerate(blocks, start=1):
        compile(source, f"{path.stem}:exercise-block-{i}", "exec")  # a SyntaxError names the block


def test_python_blocks_are_found_and_dedented() -> None:
    markdown = "1. Run:\n\n   ```python\n   x = 1\n   if x:\n       y = 2\n   ```\n\n```python\nz = 3\n```\n"
    assert python_blocks(markdown) == ["x = 1\nif x:\n    y = 2\n", "z = 3\n"]
    with pytest.raises(SyntaxError):
        compile(python_blocks("   ```python\n   x = (\n   ```\n")[0], "broken", "exec")
