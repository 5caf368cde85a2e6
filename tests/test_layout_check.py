"""tools/check_layout.py: in headless Chromium, a planted over-wide table, an over-wide figure, a table whose
cells are pushed out of the column and a clipped cell fail the check; a page whose tables and figures fit
passes it.

The pages are tiny HTML files written here (no book build needed), with the theme's
``<article class="bd-article">`` as the column. One Chromium serves the whole module
(``check_layout.shared_browser``: each check loads its pages in a new tab of its own). Skipped where
Debian's ``chromium`` or Playwright is missing (CI installs both: ``.ci/run`` and requirements.txt).
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("check_layout", ROOT / "tools" / "check_layout.py")
check_layout = importlib.util.module_from_spec(_spec)
sys.modules["check_layout"] = check_layout  # dataclasses look the module up by name
_spec.loader.exec_module(check_layout)

BROWSER = check_layout.find_browser()
pytestmark = [
    pytest.mark.skipif(BROWSER is None, reason="no Chromium on PATH (apt-get install chromium; .ci/run installs it)"),
    pytest.mark.skipif(importlib.util.find_spec("playwright") is None,
                       reason="Playwright for Python is not installed (requirements.txt)"),
]

COLUMN = 600  # px: the article's content box in every page below (padding outside it)
LONG = "A" * 120  # one unbreakable word, about 1,200 px wide at the default font


def page(body: str) -> str:
    return ('<html><head><title>t</title></head><body style="margin:0"><nav style="width:200px"></nav>'
            f'<main><article class="bd-article" style="width:{COLUMN}px;padding:0 30px">'
            f'<section id="sec">{body}</section></article></main></body></html>')


PAGES = {
    # a table wider than the column, inside a horizontally scrolling wrapper: it still counts
    "wide.html": f'<div style="overflow-x:auto"><table class="house"><tr><th>item</th></tr>'
                 f'<tr><td style="white-space:nowrap">{LONG}</td></tr></table></div>',
    # an inline SVG figure wider than the column
    "figure.html": '<svg width="900" height="40"><title>a wide plot</title><rect width="900" height="40"/></svg>',
    # a header cut to an ellipsis in a fixed-layout table that fits the column
    "clipped.html": '<table style="table-layout:fixed;width:300px"><tr><th style="width:60px;overflow:hidden;'
                    'text-overflow:ellipsis;white-space:nowrap">parameters of the model</th><td>1</td></tr></table>',
    # rows laid out as flex boxes with a negative margin (what the theme's Bootstrap does to <tr class="row">):
    # the table's box fits, but its cells start left of the column, where the scrolling output cuts them
    "shifted.html": '<div style="overflow-x:auto"><table style="width:100%"><tr style="display:flex;'
                    'margin-left:-12px"><td>ACN and ResNet forward rules</td><td>exact</td></tr></table></div>',
    # everything fits: a header that wraps, a figure narrower than the column, a table behind a click
    "clean/ok.html": '<table><tr><th>a long header that wraps at its spaces</th><th>n</th></tr>'
                     '<tr><td>H-ACN</td><td>3</td></tr></table>'
                     '<svg width="500" height="40"><title>a plot that fits</title></svg>'
                     f'<details><summary>details</summary><table style="width:{COLUMN}px"><tr><td>x</td></tr>'
                     '</table></details>',
}


@pytest.fixture(scope="module")
def chromium():
    """One headless Chromium for the module's checks, in-process ones and ``main`` alike (a start costs seconds
    of CPU); each check still loads its pages in a new tab, in a browser context of its own."""
    with check_layout.shared_browser(BROWSER) as session:
        yield session


@pytest.fixture(scope="module")
def book(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("html")
    for name, body in PAGES.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(page(body))
    (root / "search.html").write_text(page(PAGES["wide.html"]))  # the theme's pages are not read
    return root


def test_over_wide_table_and_figure_and_clipped_cell_fail_and_clean_page_passes(chromium, book):
    problems = check_layout.check_book(book, BROWSER)
    by_page = {p.page: p for p in problems}
    assert sorted(by_page) == ["clipped.html", "figure.html", "shifted.html", "wide.html"], problems
    wide, figure, clipped = by_page["wide.html"], by_page["figure.html"], by_page["clipped.html"]
    shifted = by_page["shifted.html"]
    assert shifted.rule == "wide-table" and shifted.width > COLUMN and "ACN and ResNet" in shifted.element
    assert wide.rule == "wide-table" and wide.column == COLUMN and wide.width > 1000
    assert wide.section == "sec" and "table.house" in wide.element and "first cell 'item'" in wide.element
    assert figure.rule == "wide-figure" and figure.width == 900 and "a wide plot" in figure.element
    assert clipped.rule == "clipped-cell" and "parameters of the model" in clipped.element
    assert str(wide) == f"wide.html: [wide-table] #sec {wide.element}: {wide.width} px wide, column {COLUMN} px"


def test_the_column_is_measured_at_the_window_width(chromium, tmp_path):
    # a column that is 90% of the window: an 800 px table fits at 1400 px, not at 800 px
    (tmp_path / "p.html").write_text(
        '<html><body style="margin:0"><article class="bd-article" style="width:90%">'
        '<table style="width:800px"><tr><td>x</td></tr></table></article></body></html>')
    pages = [tmp_path / "p.html"]
    assert check_layout.check_pages_in_browser(tmp_path, pages, BROWSER, width=1400) == []
    [narrow] = check_layout.check_pages_in_browser(tmp_path, pages, BROWSER, width=800)
    assert (narrow.rule, narrow.width, narrow.column) == ("wide-table", 800, 720)


def test_cli_lists_page_element_and_widths_and_sets_the_exit_status(chromium, book, tmp_path, capsys):
    """The command line's report and exit status: the runs that open pages call its ``main`` here, in the module's
    browser (``sys.exit(main())`` is all the script adds; the book build runs it as a script over every page);
    those that stop before a browser starts run the script in a real process."""

    def in_process(*args: str) -> subprocess.CompletedProcess:
        code = check_layout.main(["--browser", BROWSER, *args])
        out, err = capsys.readouterr()
        return subprocess.CompletedProcess(args, code, out, err)

    cmd = [sys.executable, str(ROOT / "tools" / "check_layout.py"), "--browser", BROWSER]
    failed = in_process(str(book))
    assert failed.returncode == 1, failed.stderr
    assert "wide.html:" in failed.stdout and f"px wide, column {COLUMN} px" in failed.stdout
    assert "4 problems: wide-table 2, wide-figure 1, clipped-cell 1" in failed.stdout
    shots = tmp_path / "shots"
    passed = in_process("--screenshots", str(shots), str(book / "clean"))
    assert passed.returncode == 0 and "1 pages at 1400 px, every table and figure fits" in passed.stdout
    assert (shots / "ok.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"  # a full-page screenshot of the page
    empty = subprocess.run([*cmd, str(tmp_path)], capture_output=True, text=True)
    assert empty.returncode == 2 and "no built pages" in empty.stderr and "Traceback" not in empty.stderr
    missing = subprocess.run([*cmd[:-1], "/nonexistent/chromium", str(book)], capture_output=True, text=True)
    assert missing.returncode == 2 and "no Chromium found" in missing.stderr and "Traceback" not in missing.stderr
    skipped = subprocess.run([*cmd[:-1], "/nonexistent/chromium", "--if-browser", str(book)], capture_output=True,
                             text=True)
    assert skipped.returncode == 0 and "SKIPPED, no Chromium found" in skipped.stderr  # make book without one


def test_house_tables_fit_the_books_column_and_would_not_without_the_house_layout(chromium, tmp_path):
    """The house table's layouts (hacn_core.engine.tables) in Chromium, in a 784 px column of the theme's font
    (Arial, Debian's Liberation Sans): the widest table of each layout fits; set in the house type without the
    smaller layout, or without its break points, the same table does not."""
    import pandas as pd

    from hacn_core.engine.tables import COLUMN_PX, house_table

    tables = {
        "compact": pd.DataFrame({f"p{i}": [123_456, 7] for i in range(12)}),
        "dense": pd.DataFrame({f"p{i}": [123_456, 7] for i in range(14)}),
        # a ledger-like table: long paths break at their punctuation
        "paths": pd.DataFrame({"item": ["Table 4"], "checked by": ["tests/test_paper_items.py::test_decoder_params"],
                               "setting": ["hacn_core/hacn/studies/decoder_report.py::table4_rows"],
                               "paper": [208.54], "ours": [208.54], "verdict": ["reproduced (exact)"]}),
    }
    html = {name: str(house_table(frame).data) for name, frame in tables.items()}
    assert 'class="house compact"' in html["compact"] and 'class="house dense"' in html["dense"]
    assert "<wbr>" in html["paths"]
    plain = {"compact": html["compact"].replace('class="house compact"', 'class="house"'),
             "dense": html["dense"].replace('class="house dense"', 'class="house"'),
             "paths": html["paths"].replace("<wbr>", "")}

    def write(folder: Path, bodies: dict[str, str]) -> list[Path]:
        folder.mkdir()
        for name, body in bodies.items():
            (folder / f"{name}.html").write_text(
                f'<html><body style="margin:0;font-family:Arial,sans-serif"><article class="bd-article" '
                f'style="width:{COLUMN_PX}px"><section id="t">{body}</section></article></body></html>')
        return sorted(folder.glob("*.html"))

    assert check_layout.check_pages_in_browser(tmp_path / "house", write(tmp_path / "house", html), BROWSER) == []
    without = check_layout.check_pages_in_browser(tmp_path / "plain", write(tmp_path / "plain", plain), BROWSER)
    assert sorted(p.page for p in without) == ["compact.html", "dense.html", "paths.html"], without
    assert all(p.rule == "wide-table" and p.width > COLUMN_PX for p in without)
