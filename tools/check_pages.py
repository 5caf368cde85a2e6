"""Read the built book's HTML pages as a reader would and list what a reader should never see.

Usage: ``python tools/check_pages.py _build/html`` (``make book-build`` runs it after the build).
Exit status 0 when every page is clean, 1 when a page has a problem (each listed as page, rule,
section and a snippet), 2 when the folder holds no built pages.

The rules (ids as printed):

``nan-cell``        a table cell showing pandas' missing value: ``nan``, ``NaN``, ``<NA>``, ``NaT``
                    (the house tables write "–" with a note instead).
``unnamed-column``  a column header ``Unnamed: 0``: pandas read a file with an unnamed index column.
``index-column``    pandas' row index shown as a column: every body row starts with a ``<th>`` (what
                    ``DataFrame.to_html`` and the Styler write for the index) under an empty corner
                    cell or in a ``dataframe`` table, or a first column holding 0, 1, 2, ... under an
                    empty, ``index`` or ``level_0`` header. Row headers written on purpose, with
                    ``scope="row"``, are not an index.
``cut-off-cell``    a cell whose text ends in "…" or "...": text shortened for display, or pandas'
                    truncation row/column (a cell holding only "...").
``raw-tex``         TeX a reader sees as source: ``$...$``, ``\\(``, ``\\[``, a braced sub- or
                    superscript (``x_{i-1}``) or a TeX command such as ``\\frac``, ``\\mathrm``,
                    ``\\sigma`` in a text node outside math (MathJax only
                    typesets the ``.math`` elements Sphinx writes) and outside code and program output.
``img-alt``         an ``<img>`` without alt text. MyST-NB writes a notebook's figure as
                    ``<img alt="../_images/<sha256>.svg" src="...">``: its default alt is the file's
                    path, which a screen reader reads out as a hash, so an alt that is the image's
                    path or a bare file name counts as missing. A chapter gives the real text in the
                    figure cell's metadata: ``{"mystnb": {"image": {"alt": "..."}}}``.
``svg-label``       an inline ``<svg>`` (as a text/html output could embed one) without a ``<title>``
                    child, ``aria-label`` or ``aria-labelledby``; ``aria-hidden="true"`` or
                    ``role="presentation"``/``"none"`` marks a decorative one, which is skipped.

Only the page's article (``<article class="bd-article">`` of the book theme, else ``<main>``, else
the body) is read, so the theme's navigation and search are not checked. The parser is the standard
library's :class:`html.parser.HTMLParser`, building a small tree; no third-party package is needed.

Widths exist only once a browser has laid a page out: ``tools/check_layout.py`` (run after this check by
``make book-build``) opens each page in headless Chromium at 1400 px and fails on a table or figure
wider than its column, or a clipped table cell.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

RULES = ("nan-cell", "unnamed-column", "index-column", "cut-off-cell", "raw-tex", "img-alt", "svg-label")
SNIPPET_CHARS = 100

# ---------------------------------------------------------------------------------------------
# A small tree of the page


@dataclass(eq=False)
class Node:
    """One element: its tag, attributes, children (elements and text strings) and parent."""

    tag: str
    attrs: dict[str, str] = field(default_factory=dict)
    children: list[Node | str] = field(default_factory=list)
    parent: Node | None = None

    @property
    def classes(self) -> set[str]:
        return set(self.attrs.get("class", "").split())

    def elements(self) -> Iterator[Node]:
        """Every element below this one, depth first, in document order."""
        for child in self.children:
            if isinstance(child, Node):
                yield child
                yield from child.elements()

    def find_all(self, tag: str) -> list[Node]:
        return [node for node in self.elements() if node.tag == tag]

    def text(self) -> str:
        """The text of this element and everything below it, whitespace runs collapsed."""
        parts: list[str] = []

        def walk(node: Node) -> None:
            for child in node.children:
                if isinstance(child, str):
                    parts.append(child)
                elif child.tag not in ("script", "style"):
                    walk(child)

        walk(self)
        return " ".join("".join(parts).split())

    def ancestors(self) -> Iterator[Node]:
        node = self.parent
        while node is not None:
            yield node
            node = node.parent


# Elements without an end tag, and the open elements a new start tag closes implicitly
# (enough of HTML's rules for Sphinx's and pandas' output, which close their cells anyway).
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
CLOSED_BY = {
    "td": {"td", "th"},
    "th": {"td", "th"},
    "tr": {"tr", "td", "th"},
    "li": {"li"},
    "p": {"p"},
    "option": {"option"},
}
STOP_AT = {"table", "ul", "ol", "div", "section", "article", "body"}  # an implicit close never crosses these


class _TreeBuilder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node("#document")
        self.stack: list[Node] = [self.root]

    def _open(self, tag: str, attrs: list[tuple[str, str | None]], *, push: bool) -> None:
        closes = CLOSED_BY.get(tag)
        if closes:
            for depth in range(len(self.stack) - 1, 0, -1):
                name = self.stack[depth].tag
                if name in closes:
                    del self.stack[depth:]
                    break
                if name in STOP_AT:
                    break
        parent = self.stack[-1]
        node = Node(tag, {key: value or "" for key, value in attrs}, parent=parent)
        parent.children.append(node)
        if push and tag not in VOID:
            self.stack.append(node)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._open(tag, attrs, push=True)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._open(tag, attrs, push=False)  # <img ... />, <path ... /> in an inline SVG

    def handle_endtag(self, tag: str) -> None:
        for depth in range(len(self.stack) - 1, 0, -1):
            if self.stack[depth].tag == tag:
                del self.stack[depth:]
                return
        # a stray end tag: ignored, as a browser does

    def handle_data(self, data: str) -> None:
        self.stack[-1].children.append(data)


def parse_html(html: str) -> Node:
    """The page as a tree of :class:`Node` (the root is a ``#document`` node)."""
    builder = _TreeBuilder()
    builder.feed(html)
    builder.close()
    return builder.root


def content_root(root: Node) -> Node:
    """The part of a page a reader reads: the theme's article, else ``<main>``, else ``<body>``."""
    for node in root.elements():
        if node.tag == "article" and "bd-article" in node.classes:
            return node
    for tag in ("main", "body"):
        found = root.find_all(tag)
        if found:
            return found[0]
    return root


# ---------------------------------------------------------------------------------------------
# Problems


@dataclass(frozen=True)
class Problem:
    """What a reader would see wrong: the page, the rule (one of :data:`RULES`), where and a snippet."""

    page: str
    rule: str
    message: str
    snippet: str
    section: str = ""

    def __str__(self) -> str:
        where = f" (#{self.section})" if self.section else ""
        return f"{self.page}{where}: [{self.rule}] {self.message}: {self.snippet!r}"


def _snippet(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= SNIPPET_CHARS else text[: SNIPPET_CHARS - 1] + "…"


def _section(node: Node) -> str:
    """The id of the innermost ``<section>`` around ``node`` (the heading's anchor), or ''."""
    for ancestor in node.ancestors():
        if ancestor.tag == "section" and ancestor.attrs.get("id"):
            return ancestor.attrs["id"]
    return ""


# ---------------------------------------------------------------------------------------------
# Tables

NAN_RE = re.compile(r"(?<![\w.])(?:nan|<NA>|NaT)(?![\w])", re.IGNORECASE)
UNNAMED_RE = re.compile(r"^Unnamed:\s*\d+")
INDEX_HEADERS = {"", "index", "level_0"}


def _rows(table: Node) -> tuple[list[list[Node]], list[list[Node]]]:
    """(header rows, body rows) of ``table``, each row its ``td``/``th`` cells; nested tables excluded.

    Rows inside ``<thead>`` are header rows; without a ``<thead>``, leading rows made only of
    ``<th>`` cells are."""
    header: list[list[Node]] = []
    body: list[list[Node]] = []

    def own_rows(node: Node, in_head: bool) -> Iterator[tuple[Node, bool]]:
        for child in node.children:
            if not isinstance(child, Node) or child.tag == "table":
                continue
            if child.tag == "tr":
                yield child, in_head
            else:
                yield from own_rows(child, in_head or child.tag == "thead")

    has_thead = any(isinstance(c, Node) and c.tag == "thead" for c in table.children)
    for row, in_head in own_rows(table, False):
        cells = [c for c in row.children if isinstance(c, Node) and c.tag in ("td", "th")]
        if not cells:
            continue
        if in_head or (not has_thead and not body and all(c.tag == "th" for c in cells)):
            header.append(cells)
        else:
            body.append(cells)
    return header, body


def check_table(table: Node, page: str) -> list[Problem]:
    """The table rules for one ``<table>``: nan-cell, unnamed-column, index-column, cut-off-cell."""
    problems: list[Problem] = []
    section = _section(table)
    header, body = _rows(table)

    def add(rule: str, message: str, snippet: str) -> None:
        problems.append(Problem(page, rule, message, _snippet(snippet), section))

    for row in header:
        for cell in row:
            if UNNAMED_RE.match(cell.text()):
                add("unnamed-column", "pandas' unnamed column in a header", cell.text())

    for row in header + body:
        for cell in row:
            text = cell.text()
            if NAN_RE.search(text):
                add("nan-cell", "a missing value shown as pandas writes it", text)
            if text.endswith("…") or text.endswith("..."):
                add("cut-off-cell", "a cell cut off (ends in an ellipsis)", text)

    if body:
        corner = header[0][0].text() if header and header[0] else ""
        firsts = [row[0] for row in body]
        row_headers = all(c.tag == "th" and c.attrs.get("scope") != "row" for c in firsts)
        pandas_like = (
            "dataframe" in table.classes
            or corner == ""
            or any("row_heading" in c.classes for c in firsts)
        )
        if row_headers and pandas_like:
            add("index-column", "pandas' row index shown as a column (body rows start with <th>)",
                " | ".join(c.text() for c in firsts[:6]))
        elif corner.lower() in INDEX_HEADERS and len(firsts) >= 2 and \
                [c.text() for c in firsts] == [str(i) for i in range(len(firsts))]:
            add("index-column", "a first column 0, 1, 2, ... under an empty or 'index' header",
                " | ".join(c.text() for c in firsts[:6]))
    return problems


# ---------------------------------------------------------------------------------------------
# Raw TeX

# Where TeX or TeX-like text is expected: math (typeset by MathJax), code, program output, scripts.
# MyST-NB marks each page ``mathjax_ignore`` and has MathJax typeset only the classes of its
# ``processHtmlClass`` ("tex2jax_process|mathjax_process|math|output_area"); those count as math.
NO_TEX_TAGS = {"script", "style", "pre", "code", "kbd", "samp", "textarea", "math", "svg", "mjx-container", "head"}
NO_TEX_CLASSES = {"math", "MathJax", "highlight", "tex2jax_process", "mathjax_process", "output_area"}
TEX_COMMANDS = (
    "frac dfrac tfrac sqrt mathrm mathbf mathcal mathbb mathit mathsf operatorname textrm textbf text "
    "sum prod int cdot cdots ldots dots times left right mathrel leq geq neq approx sim propto infty "
    "partial nabla hat bar tilde vec begin end "
    "alpha beta gamma delta epsilon varepsilon zeta eta theta vartheta iota kappa lambda mu nu xi pi "
    "rho sigma tau upsilon phi varphi chi psi omega Gamma Delta Theta Lambda Xi Pi Sigma Phi Psi Omega"
).split()
TEX_RE = re.compile(
    r"\$\$.+?\$\$"                               # display math left as $$...$$
    r"|\$(?=\S)[^$\n]{1,300}?(?<=\S)\$"          # inline $...$ (a closing $ right after text)
    r"|\\[(\[]"                                  # the \( or \[ delimiters
    r"|[A-Za-z0-9)\]}][_^]\{[^{}\s]{1,40}\}"        # a braced sub- or superscript, x_{i-1}, 10^{-3}
    r"|\\(?:" + "|".join(TEX_COMMANDS) + r")(?![A-Za-z])",
    re.DOTALL,
)


def _tex_allowed(node: Node) -> bool:
    for element in (node, *node.ancestors()):
        if element.tag in NO_TEX_TAGS or element.classes & NO_TEX_CLASSES:
            return True
    return False


def check_tex(root: Node, page: str) -> list[Problem]:
    """raw-tex: TeX source in a text node outside math, code and program output."""
    problems: list[Problem] = []
    for node in (root, *root.elements()):
        if _tex_allowed(node):
            continue
        for child in node.children:
            if isinstance(child, str):
                match = TEX_RE.search(child)
                if match:
                    start = max(0, match.start() - 30)
                    problems.append(Problem(page, "raw-tex", "TeX source outside math",
                                            _snippet(child[start: match.end() + 30]), _section(node)))
    return problems


# ---------------------------------------------------------------------------------------------
# Images and figures

IMAGE_FILE_RE = re.compile(r"^\S+\.(?:svg|png|jpe?g|gif|webp|pdf)$", re.IGNORECASE)


def check_images(root: Node, page: str) -> list[Problem]:
    """img-alt and svg-label: every image and inline SVG figure carries text a screen reader reads."""
    problems: list[Problem] = []
    for node in root.elements():
        if node.tag == "img":
            alt = node.attrs.get("alt")
            src = node.attrs.get("src", "")
            if alt is None or not alt.strip():
                why = "an image without alt text"
            elif alt.strip() == src or IMAGE_FILE_RE.match(alt.strip()):
                why = "an image whose alt text is its file name (MyST-NB's default; set mystnb.image.alt)"
            else:
                continue
            problems.append(Problem(page, "img-alt", why, _snippet(f'<img alt="{alt or ""}" src="{src}">'),
                                    _section(node)))
        elif node.tag == "svg":
            if node.attrs.get("aria-hidden") == "true" or node.attrs.get("role") in ("presentation", "none"):
                continue
            if node.attrs.get("aria-label", "").strip() or node.attrs.get("aria-labelledby", "").strip():
                continue
            titles = [c for c in node.children if isinstance(c, Node) and c.tag == "title" and c.text()]
            if titles:
                continue
            problems.append(Problem(page, "svg-label", "an inline SVG without <title> or aria-label",
                                    _snippet("<svg " + " ".join(f'{k}="{v}"' for k, v in node.attrs.items()) + ">"),
                                    _section(node)))
    return problems


# ---------------------------------------------------------------------------------------------
# Pages and the book


def check_page(html: str, page: str = "<page>") -> list[Problem]:
    """Every rule on one page's HTML (only its article is read: :func:`content_root`)."""
    root = content_root(parse_html(html))
    problems: list[Problem] = []
    for table in root.find_all("table"):
        problems += check_table(table, page)
    problems += check_tex(root, page)
    problems += check_images(root, page)
    return problems


SKIPPED_DIRS = {"_static", "_sources", "_images", "_downloads", ".doctrees", "jupyter_execute"}
SKIPPED_PAGES = {"genindex.html", "search.html", "py-modindex.html"}


def book_pages(html_dir: str | Path) -> list[Path]:
    """The book's content pages under ``html_dir`` (the theme's assets, index and search left out)."""
    html_dir = Path(html_dir)
    return sorted(
        path for path in html_dir.rglob("*.html")
        if path.name not in SKIPPED_PAGES and not SKIPPED_DIRS & set(path.relative_to(html_dir).parts[:-1])
    )


def check_book(html_dir: str | Path) -> list[Problem]:
    """Every rule on every content page of a built book."""
    html_dir = Path(html_dir)
    problems: list[Problem] = []
    for path in book_pages(html_dir):
        problems += check_page(path.read_text(encoding="utf-8"), str(path.relative_to(html_dir)))
    return problems


def report(problems: list[Problem]) -> str:
    """The problems grouped by page, one line each, and a count per rule."""
    lines: list[str] = []
    page = None
    for problem in sorted(problems, key=lambda p: (p.page, RULES.index(p.rule))):
        if problem.page != page:
            page = problem.page
            lines.append(f"{page}:")
        where = f" #{problem.section}" if problem.section else ""
        lines.append(f"  [{problem.rule}]{where} {problem.message}: {problem.snippet!r}")
    counts = {rule: sum(p.rule == rule for p in problems) for rule in RULES}
    lines.append(f"{len(problems)} problems: " + ", ".join(f"{r} {n}" for r, n in counts.items() if n))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("html_dir", help="the built book, e.g. _build/html")
    parser.add_argument("--rule", action="append", choices=RULES,
                        help="check only these rules (repeatable; default: all)")
    args = parser.parse_args(argv)
    pages = book_pages(args.html_dir)
    if not pages:
        print(f"check_pages: no built pages under {args.html_dir} (build the book first: make book)",
              file=sys.stderr)
        return 2
    problems = check_book(args.html_dir)
    if args.rule:
        problems = [p for p in problems if p.rule in args.rule]
    if not problems:
        print(f"check_pages: {len(pages)} pages, no problems")
        return 0
    print(report(problems))
    print(f"check_pages: {len({p.page for p in problems})} of {len(pages)} pages have problems", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
