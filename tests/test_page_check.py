"""tools/check_pages.py: each rule fires on a page a reader should not see and stays quiet on a clean one.

The snippets are written the way the build writes them: pandas' ``DataFrame.to_html`` (class
``dataframe``, an empty corner cell, ``<th>`` row index), the house table (``class="house"``, all
``<td>``), Sphinx's math spans (``<span class="math">\\(...\\)</span>``) and MyST-NB's figure
``<img alt="../_images/<hash>.svg">``.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("check_pages", ROOT / "tools" / "check_pages.py")
check_pages = importlib.util.module_from_spec(_spec)
sys.modules["check_pages"] = check_pages  # dataclasses look the module up by name
_spec.loader.exec_module(check_pages)


def page(body: str) -> str:
    """A page as the book theme writes it: navigation outside, the chapter inside the article."""
    return (
        "<html><head><title>t</title></head><body>"
        '<nav class="bd-links"><img src="logo.png"></nav>'
        '<main id="main-content"><article class="bd-article"><section id="sec">'
        f"{body}</section></article></main></body></html>"
    )


def rules(body: str) -> list[str]:
    return [p.rule for p in check_pages.check_page(page(body), "p.html")]


def house(header: list[str], *rows: list[str]) -> str:
    head = "".join(f"<th>{h}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="house"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


PANDAS_WITH_INDEX = """
<table border="1" class="dataframe">
  <thead><tr style="text-align: right;"><th></th><th>model</th><th>error</th></tr></thead>
  <tbody>
    <tr><th>0</th><td>ResNet</td><td>1.31</td></tr>
    <tr><th>1</th><td>Gated ResNet</td><td>2.03</td></tr>
  </tbody>
</table>"""


# --- nan-cell -------------------------------------------------------------------------------

def test_nan_cell_fires_on_pandas_missing_values():
    assert rules(house(["model", "std"], ["ResNet", "NaN"], ["Plain", "nan ± nan (n=1)"])) == ["nan-cell"] * 2
    assert rules(house(["when"], ["NaT"])) == ["nan-cell"]
    assert rules(house(["k"], ["&lt;NA&gt;"])) == ["nan-cell"]  # pandas escapes <NA>


def test_nan_cell_passes_a_dash_and_words_containing_nan():
    # "–" is the house's missing value; "nanoGPT", "Nanjing", "financial" contain the letters, not the value
    assert rules(house(["model", "std"], ["nanoGPT", "–"], ["financial", "0.3"])) == []


# --- unnamed-column ---------------------------------------------------------------------------

def test_unnamed_column_fires_on_pandas_unnamed_header():
    assert rules(house(["Unnamed: 0", "error"], ["a", "1.0"])) == ["unnamed-column"]


def test_unnamed_column_passes_named_headers():
    assert rules(house(["unnamed layers", "error"], ["a", "1.0"])) == []


# --- index-column -----------------------------------------------------------------------------

def test_index_column_fires_on_to_html_with_index():
    problems = check_pages.check_page(page(PANDAS_WITH_INDEX), "p.html")
    assert [p.rule for p in problems] == ["index-column"]
    assert problems[0].snippet == "0 | 1" and problems[0].section == "sec"


def test_index_column_fires_on_a_named_index_and_on_styler_row_headings():
    named = """<table class="dataframe"><thead><tr><th></th><th>Plain</th></tr>
      <tr><th>d</th><th></th></tr></thead>
      <tbody><tr><th>2</th><td>1.31</td></tr><tr><th>10</th><td>3.87</td></tr></tbody></table>"""
    styler = """<table id="T_1"><thead><tr><th class="blank level0">&nbsp;</th><th class="col_heading">a</th></tr></thead>
      <tbody><tr><th id="T_1_level0_row0" class="row_heading level0 row0">0</th><td class="data">x</td></tr></tbody></table>"""
    assert rules(named) == ["index-column"]
    assert rules(styler) == ["index-column"]


def test_index_column_fires_on_a_reset_index_column():
    assert rules(house(["index", "model"], ["0", "ResNet"], ["1", "Plain"], ["2", "ACN"])) == ["index-column"]
    assert rules(house(["", "model"], ["0", "ResNet"], ["1", "Plain"])) == ["index-column"]


def test_index_column_passes_house_tables_and_deliberate_row_headers():
    # a column of numbers that is data (a named depth, or an index not starting at 0) is no index
    assert rules(house(["depth", "error"], ["0", "1.2"], ["1", "1.3"])) == []
    assert rules(house(["", "error"], ["2", "1.2"], ["10", "1.3"])) == []
    scoped = """<table><thead><tr><th></th><th>error</th></tr></thead>
      <tbody><tr><th scope="row">ResNet</th><td>1.2</td></tr><tr><th scope="row">ACN</th><td>1.3</td></tr></tbody></table>"""
    assert rules(scoped) == []
    # a Sphinx (markdown) table: header row of <th>, body of <td>
    sphinx = """<table class="table"><thead><tr class="row-odd"><th class="head"><p>paper</p></th>
      <th class="head"><p>code</p></th></tr></thead><tbody><tr class="row-even"><td><p>Eq. 2</p></td>
      <td><p>x</p></td></tr></tbody></table>"""
    assert rules(sphinx) == []


# --- cut-off-cell -----------------------------------------------------------------------------

def test_cut_off_cell_fires_on_an_ellipsis_at_the_end_and_on_pandas_truncation():
    assert rules(house(["setting"], ["cpu: Intel(R) Xeon(R) Processor (2 cores, 1 to..."])) == ["cut-off-cell"]
    assert rules(house(["setting"], ["20 epochs, batch 128, Adam lr 1e-3, widths 8, 16, 32…"])) == ["cut-off-cell"]
    truncated = house(["a", "...", "z"], ["1", "...", "3"])
    assert rules(truncated) == ["cut-off-cell"] * 2


def test_cut_off_cell_passes_an_ellipsis_inside_the_text():
    assert rules(house(["layers"], ["a_1 … a_n (all of them)"], ["1, 2, ..., 12 in order"])) == []


# --- raw-tex ----------------------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "<p>the rate $\\lambda$ of the exponential</p>",
    "<p>we take \\frac{1}{2} of it</p>",
    "<p>a width of \\mathrm{D}</p>",
    "<p>the scale \\sigma</p>",
    house(["$\\sigma$", "error"], ["0.5", "1.0"]),
    "<p>the cell shows \\(a_i\\) unrendered</p>",
    house(["quantity"], ["H-ACN forward rule x_i = f_i(x_{i-1}) + a_i x_{i-1}"]),
    "<p>a learning rate of 10^{-3}</p>",
])
def test_raw_tex_fires_outside_math(text):
    assert "raw-tex" in rules(text)


def test_raw_tex_passes_math_code_and_output():
    body = (
        '<p>the rate <span class="math notranslate nohighlight">\\(\\lambda\\)</span> and</p>'
        '<div class="math notranslate nohighlight">\\[\\frac{1}{2}\\sigma\\]</div>'
        '<p><code class="docutils literal">r"$\\sigma$"</code></p>'
        '<div class="highlight-ipython3"><div class="highlight"><pre>ax.set_xlabel(r"$\\mathrm{D}$")</pre></div></div>'
        '<div class="output stream"><pre>label \\sigma</pre></div>'
        "<p>it costs $5 and $6 more, and a path C:\\temp\\data</p>"
        "<p>the gate_plain run, a_i and {braces} in prose</p>"
        # MathJax's processHtmlClass (tex2jax_process|mathjax_process|math|output_area) typesets these
        '<div class="mathjax_process"><p>\\(\\sigma\\) typeset</p></div>'
    )
    assert rules(body) == []


# --- img-alt ----------------------------------------------------------------------------------

def test_img_alt_fires_without_alt_empty_alt_and_mystnb_default_alt():
    src = "../_images/27cad249dca34c2d9559318ea3f2cda45224f9f15f58dd618062e43578fe0fc7.svg"
    assert rules(f'<img src="{src}" />') == ["img-alt"]
    assert rules(f'<img alt="  " src="{src}" />') == ["img-alt"]
    assert rules(f'<img alt="{src}" src="{src}" />') == ["img-alt"]
    assert rules(f'<img alt="figure.png" src="{src}" />') == ["img-alt"]


def test_img_alt_passes_a_description_and_ignores_the_theme_navigation():
    # the <nav> of page() holds an <img> without alt: outside the article, not checked
    assert rules('<img alt="Training loss per epoch for depths 2 to 100" src="../_images/a.svg" />') == []


# --- svg-label --------------------------------------------------------------------------------

def test_svg_label_fires_on_an_inline_svg_without_text():
    assert rules('<svg width="400" height="300"><g><path d="M0 0"/></g></svg>') == ["svg-label"]
    assert rules('<svg><title>  </title><path d="M0 0"/></svg>') == ["svg-label"]


def test_svg_label_passes_title_aria_label_and_decorative_svgs():
    assert rules('<svg><title>Layer-wise accuracy, Fig. 2a</title><path d="M0 0"/></svg>') == []
    assert rules('<svg role="img" aria-label="Layer-wise accuracy"><path d="M0 0"/></svg>') == []
    assert rules('<svg aria-hidden="true"><path d="M0 0"/></svg>') == []


# --- the command line -------------------------------------------------------------------------

def test_cli_lists_page_rule_and_snippet_and_exits_1_on_a_bad_book(tmp_path):
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "notebooks" / "bad.html").write_text(page(PANDAS_WITH_INDEX + house(["std"], ["NaN"])))
    (tmp_path / "good.html").write_text(page(house(["model", "std"], ["ResNet", "–"])))
    (tmp_path / "_static").mkdir()
    (tmp_path / "_static" / "theme.html").write_text(page("<p>$\\sigma$</p>"))  # assets are not pages
    script = ROOT / "tools" / "check_pages.py"
    bad = subprocess.run([sys.executable, str(script), str(tmp_path)], capture_output=True, text=True)
    assert bad.returncode == 1
    assert "notebooks/bad.html:" in bad.stdout
    assert "[index-column] #sec" in bad.stdout and "[nan-cell] #sec" in bad.stdout and "'NaN'" in bad.stdout
    assert "good.html" not in bad.stdout and "theme.html" not in bad.stdout
    (tmp_path / "notebooks" / "bad.html").unlink()
    good = subprocess.run([sys.executable, str(script), str(tmp_path)], capture_output=True, text=True)
    assert good.returncode == 0, good.stdout + good.stderr
    empty = subprocess.run([sys.executable, str(script), str(tmp_path / "none")], capture_output=True, text=True)
    assert empty.returncode == 2 and "build the book first" in empty.stderr


# --- the repository URL: one setting in _config.yml -------------------------------------------

def _book_config() -> dict:
    import yaml

    return yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))


def test_config_repository_button_only_with_a_url():
    config = _book_config()
    url = config["repository"]["url"]
    assert isinstance(url, str)
    html = config["html"]
    for button in ("use_repository_button", "use_issues_button", "use_edit_page_button"):
        assert html.get(button, False) in (True, False)
        if html.get(button):
            assert url.startswith("https://"), f"html.{button} is on but repository.url is {url!r}"
    if not url:
        assert not any(html.get(b) for b in ("use_repository_button", "use_issues_button", "use_edit_page_button"))
    # the pages name the repository through {{ repository }}, which the extension defines from that url
    assert "substitution" in config["parse"]["myst_enable_extensions"]
    assert config["sphinx"]["local_extensions"] == {"book_repository": "tools/"}


def test_no_page_holds_a_repository_address_of_its_own():
    sources = [*(ROOT / "book").glob("*.md"), *(ROOT / "notebooks").glob("*.ipynb"), ROOT / "README.md"]
    for path in sources:
        text = path.read_text(encoding="utf-8")
        for host in ("github.com/", "gitlab.com/", "bitbucket.org/"):
            assert host not in text, f"{path.name} links to {host}: use {{{{ repository }}}} (from _config.yml)"


def test_repository_substitution_is_a_link_only_with_a_url():
    spec = importlib.util.spec_from_file_location("book_repository", ROOT / "tools" / "book_repository.py")
    ext = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ext)
    assert ext.repository_markdown("") == ext.repository_markdown(None) == "the hacn-book repository (not yet public)"
    assert ext.repository_markdown(" https://github.com/o/hacn-book ") == \
        "[the hacn-book repository](https://github.com/o/hacn-book)"
    with pytest.raises(ValueError, match="repository.url"):
        ext.repository_markdown("github.com/o/hacn-book")

    class Config:  # what Sphinx hands the extension at config-inited
        html_theme_options = {"repository_url": "https://github.com/o/hacn-book"}
        myst_substitutions = {"other": "x"}

    ext._define_substitution(None, Config)
    assert Config.myst_substitutions == {"other": "x", "repository": "[the hacn-book repository](https://github.com/o/hacn-book)"}
