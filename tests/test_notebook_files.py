"""The chapter notebooks as committed: valid nbformat 4.5 (every cell has an id), outputs only where nbval
compares them, and every compared cell with its reference output (``tools/strip_outputs.py --execute``)."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
CHECK_TAG = "nbval-check-output"  # the cell tag nbval reads (a tag, so the book shows no marker)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_valid_and_keeps_only_reference_outputs(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)  # raises on a cell without an id (a hard error in future nbformat versions)
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        checked = CHECK_TAG in cell.metadata.get("tags", [])
        if checked:
            assert cell.outputs, (f"{path.name} cell {i}: nbval compares this cell's output, but none is stored "
                                  "(run python tools/strip_outputs.py --execute on the notebook)")
        else:
            assert not cell.outputs, f"{path.name} cell {i}: committed with outputs (python tools/strip_outputs.py)"


#: a code cell that draws a figure: it assigns ``fig`` or calls a report's ``plot_*``
FIGURE_CELL = re.compile(r"^\s*(fig\s*[,=]|[\w.]+\.plot_\w+\()", re.MULTILINE)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_figure_cell_describes_its_image(path):
    """A figure cell carries its alt text (``mystnb.image.alt``) before its figure is first drawn: a chapter
    whose study has no stored run yet draws nothing, and the page check (``img-alt``) would only fail the
    book build of the session whose runs arrive."""
    nb = nbformat.read(path, as_version=4)
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code" and FIGURE_CELL.search(cell.source):
            alt = cell.metadata.get("mystnb", {}).get("image", {}).get("alt", "")
            assert len(alt.split()) >= 5, f"{path.name} cell {i} draws a figure without mystnb.image.alt"


#: cells the book shows without their code (MyST-NB tags); every other code cell is shown as a code block
HIDDEN_CODE = {"hide-input", "remove-input", "remove-cell", "hide-cell"}
MAX_CODE_LINE = 80  # characters a code block shows at the book's text width without a scroll bar
#: summary pages whose owner keeps their parameters cell's one longer comment line
LONG_LINES_ALLOWED = {"00_ledger", "key_results"}


@pytest.mark.parametrize("path", [p for p in NOTEBOOKS if p.stem not in LONG_LINES_ALLOWED], ids=lambda p: p.stem)
def test_code_the_book_shows_fits_the_page(path):
    """A code cell the reader sees (exercises included) has no line longer than 80 characters: a longer line is
    cut off in the book's code block."""
    nb = nbformat.read(path, as_version=4)
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or HIDDEN_CODE & set(cell.metadata.get("tags", [])):
            continue
        long = [line for line in cell.source.splitlines() if len(line) > MAX_CODE_LINE]
        assert not long, f"{path.name} cell {i} ({cell.id}): {len(long)} lines over {MAX_CODE_LINE}: {long[0]!r}"
