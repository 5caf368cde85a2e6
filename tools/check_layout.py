"""Open every built page of the book in headless Chromium and list what does not fit its column.

Usage: ``python tools/check_layout.py _build/html`` (``make book-build`` runs it after
``tools/check_pages.py``, with ``--if-browser``). Exit status 0 when every page fits, 1 when a page has
a problem (each listed as page, rule, section, element and widths), 2 when it cannot run: no built
pages, no Chromium (with ``--if-browser``: a notice and 0), or no Playwright.

``tools/check_pages.py`` reads a page's HTML; widths only exist once a browser has laid the page out,
so this check loads each page at a reader's window width (1400 px by default) in Debian's ``chromium``,
driven by Playwright for Python (its own browser download is not needed: the system browser is
launched through ``executable_path``), and measures:

``wide-table``   a ``<table>`` wider than the content column (the content box of the theme's
                 ``<article class="bd-article">``, else ``<main>``, else the body), or reaching out of
                 it on either side. A table's extent is its box, what spills out of it and its cells
                 (rows that the theme lays out as flex boxes, as Bootstrap does to ``<tr class="row">``,
                 push cells out of the box). A table inside a horizontally scrolling wrapper counts
                 too: a reader does not see its right-hand columns.
``wide-figure``  an ``<img>`` or an (outermost) inline ``<svg>`` wider than the column, or out of it.
``clipped-cell`` a table cell, or an element inside one, whose text is cut: it hides its overflow
                 (``overflow: hidden``/``clip``) or ends it in an ellipsis (``text-overflow: ellipsis``)
                 and what a reader would see of its content (text and boxes; text kept for screen readers
                 only, such as MathJax's clipped assistive MathML, aside) reaches out of its box.

Closed ``<details>`` are opened first (what is one click away must fit too); an element that is not
displayed (an inactive tab) has no width and is skipped. A width may exceed the column by
:data:`TOLERANCE_PX` (sub-pixel rounding). A page that only redirects (the book's ``index.html``) is
skipped: the page it leads to is checked itself.

The browser is ``--browser``, else ``$HACN_CHROMIUM``, else the first of ``chromium``,
``chromium-browser``, ``google-chrome`` on the ``PATH``. ``--screenshots DIR`` also saves a full-page
PNG of each page (``DIR/<page>.png``).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import itertools
import os
import re
import shutil
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from check_pages import book_pages  # noqa: E402  (the same pages as the HTML check)

RULES = ("wide-table", "wide-figure", "clipped-cell")
WIDTH_PX = 1400
HEIGHT_PX = 1000
TOLERANCE_PX = 1.0
BROWSERS = ("chromium", "chromium-browser", "google-chrome")

# Runs in the page: returns the column's box and one record per element that breaks a rule.
# Widths are CSS pixels; a table's extent is the union of its box, its scrollWidth (content that spills
# out of a fixed-width table) and its cells' boxes.
MEASURE_JS = r"""
(tolerance) => {
  const article = document.querySelector('article.bd-article') || document.querySelector('main')
                  || document.body;
  for (const d of article.querySelectorAll('details:not([open])')) d.open = true;
  const cs = getComputedStyle(article);
  const box = article.getBoundingClientRect();
  const left = box.left + article.clientLeft + parseFloat(cs.paddingLeft);
  const width = article.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight);
  const right = left + width;
  const sectionOf = (el) => { const s = el.closest('section[id]'); return s ? s.id : ''; };
  const text = (el) => (el.textContent || '').replace(/\s+/g, ' ').trim().slice(0, 60);
  const describe = (el) => {
    if (el.tagName === 'TABLE') {
      const cls = el.className ? '.' + String(el.className).trim().split(/\s+/).join('.') : '';
      const head = el.querySelector('th') || el.querySelector('td');
      return `table${cls} (first cell '${head ? text(head) : ''}', ${el.rows.length} rows)`;
    }
    if (el.tagName === 'IMG') return `img alt='${(el.getAttribute('alt') || '').slice(0, 60)}'`;
    const title = el.querySelector('title');
    return `svg '${title ? text(title) : (el.getAttribute('aria-label') || '')}'`;
  };
  const found = [];
  const elements = [...article.querySelectorAll('table, img, svg')]
    .filter((el) => !(el.tagName.toLowerCase() === 'svg' && el.parentElement.closest('svg')));
  for (const el of elements) {
    const r = el.getBoundingClientRect();
    if (r.width === 0 && r.height === 0) continue;  // not displayed
    // a table's extent: its box, what spills out of it, and its cells (a row laid out as a flex or grid
    // box, e.g. by a class the theme's Bootstrap styles, can push cells out of the table's box)
    let l = r.left, rr = r.left + (el.tagName === 'TABLE' ? Math.max(r.width, el.scrollWidth) : r.width);
    if (el.tagName === 'TABLE') {
      for (const cell of el.querySelectorAll('td, th')) {
        const c = cell.getBoundingClientRect();
        if (c.width > 0) { l = Math.min(l, c.left); rr = Math.max(rr, c.right); }
      }
    }
    const w = rr - l, over = Math.max(rr - right, left - l);
    if (w > width + tolerance || over > tolerance) {
      found.push({rule: el.tagName === 'TABLE' ? 'wide-table' : 'wide-figure', section: sectionOf(el),
                  element: describe(el), width: Math.round(w), overhang: Math.round(over)});
    }
  }
  // The left and right edges of what a reader sees inside `root`: its text and boxes, without text hidden for screen
  // readers (a `clip`ped element such as MathJax's assistive MathML, which widens scrollWidth unseen).
  const visibleExtent = (root) => {
    let lo = Infinity, right = -Infinity;
    const walk = (node) => {
      for (const child of node.childNodes) {
        if (child.nodeType === Node.TEXT_NODE && child.textContent.trim()) {
          const range = document.createRange();
          range.selectNodeContents(child);
          for (const r of range.getClientRects()) { lo = Math.min(lo, r.left); right = Math.max(right, r.right); }
        } else if (child.nodeType === Node.ELEMENT_NODE) {
          const s = getComputedStyle(child);
          if (s.display === 'none' || s.visibility === 'hidden' || s.clip !== 'auto') continue;
          const r = child.getBoundingClientRect();
          if (r.width > 0) { lo = Math.min(lo, r.left); right = Math.max(right, r.right); }
          walk(child);
        }
      }
    };
    walk(root);
    return [lo, right];
  };
  for (const cell of article.querySelectorAll('td, th')) {
    for (const el of [cell, ...cell.querySelectorAll('*')]) {
      const s = getComputedStyle(el);
      const hides = ['hidden', 'clip'].includes(s.overflowX) || s.textOverflow === 'ellipsis';
      if (!hides || el.clientWidth === 0) continue;  // (scrollWidth misses content cut at the left)
      const innerLeft = el.getBoundingClientRect().left + el.clientLeft;
      const [lo, hi] = visibleExtent(el);
      const cut = Math.max(hi - (innerLeft + el.clientWidth), innerLeft - lo);
      if (cut > tolerance) {
        found.push({rule: 'clipped-cell', section: sectionOf(cell),
                    element: `${cell.tagName.toLowerCase()} '${text(cell)}'`,
                    width: Math.round(el.clientWidth + cut), shown: el.clientWidth});
        break;
      }
    }
  }
  return {column: Math.round(width), found};
}
"""

#: a page that only sends the reader on (``<meta http-equiv="refresh">``): there is nothing to lay out
REDIRECT_RE = re.compile(r"<meta[^>]+http-equiv=[\"']?refresh", re.IGNORECASE)

# MathJax typesets after load and can change the layout: wait for it where a page loads it.
MATHJAX_JS = "() => (window.MathJax && MathJax.startup && MathJax.startup.promise) ? MathJax.startup.promise.then(() => true) : true"


@dataclass(frozen=True)
class LayoutProblem:
    """One element that does not fit: page, rule (one of :data:`RULES`), section, element and widths."""

    page: str
    rule: str
    section: str
    element: str
    width: int
    column: int
    detail: str

    def line(self) -> str:
        """What is wrong, without the page: ``[rule] #section element: widths``."""
        where = f" #{self.section}" if self.section else ""
        return f"[{self.rule}]{where} {self.element}: {self.detail}"

    def __str__(self) -> str:
        return f"{self.page}: {self.line()}"


def _problem(page: str, column: int, found: dict) -> LayoutProblem:
    if found["rule"] == "clipped-cell":
        detail = f"text {found['width']} px wide shown in {found['shown']} px"
    elif found["width"] > column:
        detail = f"{found['width']} px wide, column {column} px"
    else:
        detail = f"{found['width']} px wide, reaches {found['overhang']} px out of the column ({column} px)"
    return LayoutProblem(page, found["rule"], found["section"], found["element"], found["width"], column, detail)


def find_browser(explicit: str | None = None) -> str | None:
    """The Chromium to drive: ``explicit``, else ``$HACN_CHROMIUM``, else the first of :data:`BROWSERS` found."""
    for candidate in (explicit, os.environ.get("HACN_CHROMIUM")):
        if candidate:
            return candidate if Path(candidate).is_file() else shutil.which(candidate)
    return next((found for name in BROWSERS if (found := shutil.which(name))), None)


class BrowserSession:
    """One headless Chromium (``browser``, driven by Playwright) for one check or several: a context manager
    that starts it and closes it; :meth:`check` loads pages in a new tab of it."""

    def __init__(self, browser: str) -> None:
        self.browser = browser
        self._playwright = None
        self._chromium = None

    def __enter__(self) -> BrowserSession:
        from playwright.sync_api import sync_playwright

        self._playwright = sync_playwright()
        pw = self._playwright.__enter__()
        try:
            self._chromium = pw.chromium.launch(executable_path=self.browser, headless=True,
                                                args=["--no-sandbox", "--disable-gpu"])
        except BaseException:
            self._playwright.__exit__(*sys.exc_info())
            raise
        return self

    def __exit__(self, *exc) -> None:
        try:
            self._chromium.close()
        finally:
            self._playwright.__exit__(*exc)

    def check(self, html_dir: str | Path, pages: list[Path], *, width: int = WIDTH_PX,
              screenshots: Path | None = None) -> list[LayoutProblem]:
        """Load each of ``pages`` (files under ``html_dir``) at ``width`` px in a new tab (in a browser context of
        its own, closed afterwards) and measure it (:data:`MEASURE_JS`)."""
        html_dir = Path(html_dir)
        problems: list[LayoutProblem] = []
        tab = self._chromium.new_page(viewport={"width": width, "height": HEIGHT_PX}, device_scale_factor=1)
        try:
            for path in pages:
                name = str(path.relative_to(html_dir))
                if REDIRECT_RE.search(path.read_text(encoding="utf-8", errors="replace")[:2000]):
                    continue  # a redirect (the book's index.html): the page it leads to is checked itself
                tab.goto(path.resolve().as_uri(), wait_until="load")
                tab.evaluate(MATHJAX_JS)
                measured = tab.evaluate(MEASURE_JS, TOLERANCE_PX)
                problems += [_problem(name, measured["column"], found) for found in measured["found"]]
                if screenshots is not None:
                    png = screenshots / Path(name).with_suffix(".png")
                    png.parent.mkdir(parents=True, exist_ok=True)
                    tab.screenshot(path=str(png), full_page=True, timeout=120_000)  # a long page on a busy CPU
        finally:
            tab.context.close()
        return problems


#: the sessions :func:`shared_browser` holds open, by browser executable
_SHARED: dict[str, BrowserSession] = {}


@contextlib.contextmanager
def shared_browser(browser: str) -> Iterator[BrowserSession]:
    """Within the block, every check that drives ``browser`` (:func:`check_pages_in_browser`, :func:`check_book`,
    :func:`main`) loads its pages in a new tab of one Chromium started here instead of starting its own (the
    tests of this tool: each start of the browser costs seconds of CPU)."""
    with BrowserSession(browser) as session:
        _SHARED[browser] = session
        try:
            yield session
        finally:
            _SHARED.pop(browser, None)


def check_pages_in_browser(html_dir: str | Path, pages: list[Path], browser: str, *, width: int = WIDTH_PX,
                           screenshots: Path | None = None) -> list[LayoutProblem]:
    """Load each of ``pages`` (files under ``html_dir``) at ``width`` px and measure it (:data:`MEASURE_JS`), in
    a Chromium started for this check (or the one :func:`shared_browser` holds open for ``browser``)."""
    shared = _SHARED.get(browser)
    if shared is not None:
        return shared.check(html_dir, pages, width=width, screenshots=screenshots)
    with BrowserSession(browser) as session:
        return session.check(html_dir, pages, width=width, screenshots=screenshots)


def check_book(html_dir: str | Path, browser: str, *, width: int = WIDTH_PX,
               screenshots: Path | None = None) -> list[LayoutProblem]:
    """Every rule on every content page of a built book (the pages ``check_pages.book_pages`` reads)."""
    return check_pages_in_browser(html_dir, book_pages(html_dir), browser, width=width, screenshots=screenshots)


def report(problems: list[LayoutProblem]) -> str:
    """The problems grouped by page (the page, then one indented line each) and a count per rule."""
    ordered = sorted(problems, key=lambda p: (p.page, RULES.index(p.rule)))
    lines: list[str] = []
    for page, group in itertools.groupby(ordered, key=lambda p: p.page):
        lines += [f"{page}:", *(f"  {p.line()}" for p in group)]
    counts = collections.Counter(p.rule for p in problems)
    lines.append(f"{len(problems)} problems: " + ", ".join(f"{r} {counts[r]}" for r in RULES if counts[r]))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("html_dir", help="the built book, e.g. _build/html")
    parser.add_argument("--width", type=int, default=WIDTH_PX, help=f"window width in px (default {WIDTH_PX})")
    parser.add_argument("--browser", help="the Chromium executable (default: $HACN_CHROMIUM, else chromium on PATH)")
    parser.add_argument("--screenshots", type=Path, help="also save a full-page PNG of each page under this folder")
    parser.add_argument("--if-browser", action="store_true",
                        help="where no Chromium is installed, say so and pass (make book on a machine without "
                             "one; CI installs it, so the check runs there)")
    args = parser.parse_args(argv)
    if args.width < 320:
        parser.error(f"--width must be at least 320 px, got {args.width}")
    pages = book_pages(args.html_dir)
    if not pages:
        print(f"check_layout: no built pages under {args.html_dir} (build the book first: make book)", file=sys.stderr)
        return 2
    browser = find_browser(args.browser)
    if browser is None:
        where = f"--browser {args.browser}" if args.browser else "chromium on PATH or $HACN_CHROMIUM"
        if args.if_browser:
            print(f"check_layout: SKIPPED, no Chromium found ({where}): the widths of tables and figures are not "
                  "checked (apt-get install chromium)", file=sys.stderr)
            return 0
        print(f"check_layout: no Chromium found ({where}); install Debian's: apt-get install chromium",
              file=sys.stderr)
        return 2
    try:
        from playwright.sync_api import Error as BrowserError
    except ImportError:
        print("check_layout: Playwright for Python is not installed (make env installs requirements.txt)",
              file=sys.stderr)
        return 2
    try:
        problems = check_book(args.html_dir, browser, width=args.width, screenshots=args.screenshots)
    except BrowserError as error:  # the browser would not start or a page would not load
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        print(f"check_layout: {browser} failed: {first}", file=sys.stderr)
        return 2
    if not problems:
        print(f"check_layout: {len(pages)} pages at {args.width} px, every table and figure fits its column")
        return 0
    print(report(problems))
    print(f"check_layout: {len({p.page for p in problems})} of {len(pages)} pages at {args.width} px do not fit",
          file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
