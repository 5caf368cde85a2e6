import dataclasses
import html
import math

import pytest

from hacn_core import catalog
from hacn_core.engine.registry import Experiment, Link, by_id
from hacn_core.__main__ import main
from hacn_core.engine.stats import estimate
from hacn_core.ledger import (
    STATUSES,
    chapter_href,
    compare,
    ledger_html,
    ledger_rows,
    ledger_table,
    ours_text,
    section_anchor,
    status_counts,
)
from hacn_core.paper_items import PAPER_ITEMS, W_LIT, item
from hacn_core.engine.results import ResultsStore

ITEM = "awnn/table1/spiral-fixed-accuracy"  # paper: 99.5 (0.5)


@pytest.fixture(scope="module")
def exact_checks(tmp_path_factory):
    """A store holding one smoke run of ``exact-checks`` (the tests below only read it), and that run."""
    store = ResultsStore(tmp_path_factory.mktemp("exact-checks"))
    (result,) = catalog.run("exact-checks", "smoke", store=store, progress=False)
    return store, result


def _toy_train(config, context):
    return {"metrics": {"test_acc": config["acc"]}, "curves": {"loss": [1.0, 0.1]}}


@pytest.fixture
def toy_experiment(monkeypatch):
    def configs(accs):
        return lambda: [{"acc": a, "seed": s, "scale": "x"} for s, a in enumerate(accs)]

    experiment = Experiment(
        id="toy-ledger",
        title="toy",
        train=_toy_train,
        configs={"smoke": configs([0.5, 0.6]), "paper": configs([0.995, 0.993, 0.997])},
        setting={"smoke": "tiny", "paper": "the paper's"},
        links=(Link(ITEM, "test_acc", {"scale": "x"}, scale=100.0, tolerance=0.3),),
    )
    monkeypatch.setitem(catalog.EXPERIMENTS, experiment.id, experiment)
    return experiment


def test_estimate_is_mean_with_student_t_interval():
    est = estimate([1.0, 2.0, 3.0])
    assert est.mean == 2.0 and est.n == 3
    assert math.isclose(est.half_width, 4.302652729911275 * 1.0 / math.sqrt(3), rel_tol=1e-9)
    single = estimate([0.25])
    assert single.n == 1 and math.isnan(single.half_width) and str(single) == "0.25"
    with pytest.raises(ValueError):
        estimate([])


def test_ledger_has_one_row_per_paper_item_and_starts_not_run_exact_or_library_drawn(tmp_path):
    """An empty store leaves every row "not run", except the items the tests check exactly ("exact"), the
    figures drawn from the library alone ("shown") and the other papers' results the paper quotes ("quoted"):
    none needs a stored run. No chapter shows an analogue yet."""
    store = ResultsStore(tmp_path)
    table = ledger_table(store)
    assert len(table) == len(PAPER_ITEMS) and table["id"].is_unique
    assert set(table["status"]) == {"not run", "exact", "shown", "quoted"}
    assert set(table["analogue"]) == {"—"}
    quoted = {i.id for i in PAPER_ITEMS if i.where == W_LIT}
    assert set(table.loc[table["status"] == "quoted", "id"]) == quoted and len(quoted) == 17
    exact = {i.id for i in PAPER_ITEMS if i.book and i.book.checked_by}
    library = {i.id for i in PAPER_ITEMS if i.book and i.book.drawn_from == ()}
    assert set(table.loc[table["status"] == "exact", "id"]) == exact
    assert set(table.loc[table["status"] == "shown", "id"]) == library == {"awnn/fig8/synthetic-datasets"}
    assert sum(status_counts(store).values()) == len(PAPER_ITEMS)
    assert ledger_table(rows=ledger_rows(store)).equals(table)  # the chapter's rows, not read again


def test_scaled_runs_are_labelled_and_never_called_reproduced(tmp_path, toy_experiment):
    store = ResultsStore(tmp_path)
    catalog.run("toy-ledger", "smoke", store=store, progress=False)
    row = next(r for r in ledger_rows(store) if r.item.id == ITEM)
    # not run at the paper's setting; on the analogue, shown with our value (no claim judges it)
    assert row.status == "not run" and row.ours is None and row.needs == row.item.where
    assert row.analogue.status == "shown" and math.isclose(row.analogue.ours.mean, 55.0)
    assert sorted(row.analogue.values) == [50.0, 60.0] and row.analogue.setting.startswith("scaled (tiny")


def test_paper_setting_runs_are_compared_with_the_tolerance_and_our_interval(tmp_path, toy_experiment):
    store = ResultsStore(tmp_path)
    catalog.run("toy-ledger", "smoke", store=store, progress=False)
    catalog.run("toy-ledger", "paper", store=store, progress=False)
    row = next(r for r in ledger_rows(store) if r.item.id == ITEM)
    # Paper-setting runs win and are not mixed with the scaled ones.
    assert row.ours.n == 3 and math.isclose(row.ours.mean, 99.5) and item(ITEM).paper_value == 99.5
    assert row.setting == "paper setting (the paper's)"  # every run of the profile is stored
    # 99.5, 99.3, 99.7: std 0.2, 95% half-width 4.303 * 0.2 / sqrt(3) = 0.497 > tolerance 0.3, and the
    # paper's 99.5 inside: the mean is on the paper's value, but three seeds cannot resolve 0.3 points
    assert row.tolerance == 0.3 and math.isclose(row.ours.half_width, 4.302652729911275 * 0.2 / math.sqrt(3))
    assert row.status == "inconclusive" and "more runs are needed" in row.verdict
    assert ours_text(row) == "99.50 (0.20)%, n = 3"  # the book's spread: mean (std) unit, n; % to 2 decimals
    assert row.interval == pytest.approx((99.5 - row.ours.half_width, 99.5 + row.ours.half_width))
    object.__setattr__(toy_experiment.links[0], "tolerance", 0.5)  # now the interval fits in the tolerance
    try:
        row = next(r for r in ledger_rows(store) if r.item.id == ITEM)
        assert row.status == "reproduced" and row.tolerance == 0.5
    finally:
        object.__setattr__(toy_experiment.links[0], "tolerance", 0.3)


def test_paper_setting_outside_tolerance_differs(tmp_path, toy_experiment):
    store = ResultsStore(tmp_path)
    object.__setattr__(toy_experiment.links[0], "tolerance", 0.0001)
    try:
        catalog.run("toy-ledger", "paper", store=store, where={"seed": 1}, progress=False)  # 99.3 vs 99.5
        row = next(r for r in ledger_rows(store) if r.item.id == ITEM)
        assert row.status == "differs" and row.ours.n == 1
        assert row.setting == "paper setting (the paper's); 1 of its 3 runs stored"  # partial coverage is said
    finally:
        object.__setattr__(toy_experiment.links[0], "tolerance", 0.3)


def test_registry_errors_name_the_choices(toy_experiment):
    with pytest.raises(KeyError, match="toy-ledger"):
        catalog.get("no-such-experiment")
    with pytest.raises(ValueError, match="has no 'book' profile; it has: smoke, paper"):
        toy_experiment.runs("book")
    with pytest.raises(ValueError, match="registered twice"):
        by_id(toy_experiment, Experiment("toy-ledger", "again", _toy_train, {}, {}))
    with pytest.raises(ValueError, match="unknown profiles \\['huge'\\]"):
        Experiment("toy", "toy", _toy_train, {"huge": list}, {})


def test_every_link_of_every_experiment_points_at_a_paper_item():
    ids = {i.id for i in PAPER_ITEMS}
    for experiment in catalog.registry().values():
        for link in experiment.links:
            assert link.item in ids, (experiment.id, link.item)
        for profile in experiment.configs:
            assert experiment.runs(profile), (experiment.id, profile)


def test_command_line_run_list_and_ledger(tmp_path, capsys, toy_experiment):
    assert main(["list"]) == 0
    assert "toy-ledger: toy" in capsys.readouterr().out
    assert main(["run", "toy-ledger", "--profile", "smoke", "--where", "seed=1", "--results", str(tmp_path)]) == 0
    assert "seed=1: test_acc=0.6" in capsys.readouterr().out
    assert main(["ledger", "--results", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "not run" in out and "shown" in out


def test_stored_returns_only_runs_already_in_the_store(tmp_path):
    from hacn_core.engine.results import ResultsStore

    store = ResultsStore(tmp_path)
    assert catalog.stored("hacn-mixer-cost", "smoke", store=store) == []
    ran = catalog.run("hacn-mixer-cost", "smoke", store=store, allow_train=True, progress=False)
    assert [r.config_hash for r in catalog.stored("hacn-mixer-cost", "smoke", store=store)] == [
        r.config_hash for r in ran]


def test_awnn_starting_widths_are_exact_and_read_run_not_reproduced(exact_checks):
    """Eq. 11's starting widths come from the exact-checks run; the paper's "approximately"
    values have no tolerance, so the rows say "run" with our closed-form width."""
    store, result = exact_checks
    rows = {r.item.id: r for r in ledger_rows(store)}
    for slug, rate, paper in (("tabular-rate0.01", 0.01, 256), ("image-rate0.02", 0.02, 128),
                              ("multi30k-rate0.004", 0.004, 512)):
        width = math.ceil(math.log(10) / rate)  # smallest D with 1 - e^{-rate D} >= 0.9
        assert result.metrics[f"awnn_start_width_rate{rate:g}"] == width
        row = rows[f"awnn/eq11/start-width-{slug}"]
        assert row.status == "run" and row.ours.mean == width and row.item.paper_value == paper
    assert [rows[f"awnn/eq11/start-width-{s}"].ours.mean for s in ("tabular-rate0.01", "image-rate0.02",
                                                                     "multi30k-rate0.004")] == [231, 116, 576]


def test_fig2_and_fig7_left_read_the_depth_variance_ratio_of_theorem_3_1(exact_checks):
    """Figs. 2 / 7 (left) have no number; the exact-checks run stores Var[alpha^5] / Var[alpha^1]
    (mean of 16 draws) under kaiming+ (about 1) and kaiming (the collapse), and the rows read them."""
    from hacn_core.awnn.studies import init as ai

    store, result = exact_checks
    plus = result.metrics["awnn_kaiming_plus_variance_ratio_l5_l1"]
    kaiming = result.metrics["awnn_kaiming_variance_ratio_l5_l1"]
    assert 0.8 < plus < 1.25
    theory = ai.theory_variances("kaiming")
    assert kaiming < 1e-15 and 0.5 < kaiming / (theory[-1] / theory[0]) < 2.0  # the collapse Appendix A predicts
    rows = {r.item.id: r for r in ledger_rows(store)}
    assert rows["awnn/fig2/activation-variance"].ours.mean == plus
    assert rows["awnn/fig7-left/activation-variance"].ours.mean == kaiming
    assert {rows[i].status for i in ("awnn/fig2/activation-variance", "awnn/fig7-left/activation-variance")} == {"run"}


# ----------------------------------------------------------------------------- the verdict rule


def test_verdict_of_the_two_wide_awnn_intervals_is_the_same():
    """Fig. 5 (left) of AWNN: 800 vs 692.5 over two runs, and 300 vs 376 over two runs, tolerances 20% of the
    paper's value. Both intervals (t_{0.975, 1} = 12.7 times the standard error) are far wider than the
    tolerance and hold the paper's value: neither is called reproduced nor differs."""
    before = estimate([536.0, 849.0])  # mean 692.5: inside the tolerance 160 of 800
    after = estimate([247.0, 505.0])  # mean 376: outside the tolerance 60 of 300
    assert abs(before.mean - 800) <= 160 and abs(after.mean - 300) > 60
    assert before.half_width > 160 and after.half_width > 60
    assert compare(before, 800.0, 160.0)[0] == compare(after, 300.0, 60.0)[0] == "inconclusive"


@pytest.mark.parametrize("values,paper,tolerance,expected", [
    ([2.0], 2.2, 0.3, "reproduced"),  # one run: the tolerance alone decides
    ([2.0], 2.4, 0.3, "differs"),
    ([2.40, 2.45, 2.50], 2.29, 0.3, "reproduced"),  # within the tolerance, interval (± 0.124) narrower than it
    ([2.0, 2.1, 1.9], 1.64, 0.3, "differs"),  # interval ± 0.25 <= 0.3, gap 0.36 > 0.3
    ([1.9, 1.95, 1.8], 1.26, 0.3, "differs"),  # the paper's value far outside our interval
    ([1.0, 50.0, 57.0], 1.36, 0.3, "inconclusive"),  # 36 (31), n=3 holds anything: no verdict
    ([5.0, 5.0], 5.2, 0.3, "reproduced"),  # zero spread: an interval of width 0
    ([5.0, 5.0], 5.5, 0.3, "differs"),
])
def test_verdict_rule(values, paper, tolerance, expected):
    est = estimate(values)
    status, why = compare(est, paper, tolerance)
    assert status == expected, why
    d, h = abs(est.mean - paper), est.half_width
    # the rule of the module docstring, written out
    if len(values) == 1:
        assert status == ("reproduced" if d <= tolerance else "differs")
    else:
        assert (status == "reproduced") == (d <= tolerance and h <= tolerance)
        assert (status == "differs") == (d > tolerance and d > h)
        assert (status == "inconclusive") == (h > tolerance and d <= h)
    with pytest.raises(ValueError, match="tolerance"):
        compare(est, paper, -1.0)


# ----------------------------------------------------------------------------- exact, shown, chapters


def test_exact_and_shown_rows_read_where_the_book_shows_them(tmp_path, monkeypatch):
    """Exact items need no run; a drawn figure is "shown" once its experiment has stored runs, and says which."""
    store = ResultsStore(tmp_path)
    rows = {r.item.id: r for r in ledger_rows(store)}
    eq4 = rows["hacn/eq4/direct-layer-connectivity"]
    assert eq4.status == "exact" and eq4.ours is None
    assert eq4.setting == "checked exactly by tests/test_connectivity.py::test_hacn_connectivity_is_product_of_eq4"
    assert rows["hacn/fig2b/train-loss"].status == "not run"  # hacn-mixer has nothing stored here
    experiment = Experiment(
        id="toy-figure", title="toy", train=_toy_train, configs={"smoke": lambda: [{"acc": 0.5, "seed": 3}]},
        setting={"smoke": "tiny"})
    monkeypatch.setitem(catalog.EXPERIMENTS, experiment.id, experiment)
    from hacn_core.engine.items import Place

    placed = dataclasses.replace(item("hacn/fig2b/train-loss"), book=Place("hacn_02_mixer", "Training loss (Fig. 2b)",
                                                                            drawn_from=("toy-figure",)))
    catalog.run("toy-figure", "smoke", store=store, progress=False)
    (row,) = ledger_rows(store, [placed])
    # drawn from runs at a scaled setting: not run at the paper's, shown on the analogue
    assert row.status == "not run" and row.ours is None and row.seeds == () and row.experiment == "toy-figure"
    assert row.analogue.status == "shown" and row.analogue.values == ()
    assert row.analogue.setting == "drawn from toy-figure: 1 stored runs (seeds 3), scaled (tiny)"
    assert row.verdict.startswith("a figure drawn from stored runs")
    # a Table 1 cell that the chapter computes by model selection is "shown" too, and says it is a table cell
    cell = dataclasses.replace(item("awnn/table1/nci1-fixed-accuracy"),
                               book=Place("awnn_06_graphs", "Accuracy and width (Table 1)", drawn_from=("toy-figure",)))
    (row,) = ledger_rows(store, [cell])
    assert row.analogue_status == "shown" and row.verdict.startswith("a table cell the chapter computes")


def test_offline_table1_rows_link_their_awnn_cells_and_draw_the_selected_ones():
    """AWNN Table 1 on MNIST and the text task: the AWNN cells are means over the adaptive runs (a scaled analogue
    once runs are stored); the fixed cells and NCI1's are computed by model selection in the chapter (drawn)."""
    links = {link.item: (e.id, link) for e in catalog.registry().values() for link in e.links}
    assert links["awnn/table1/mnist-awnn-accuracy"][0] == "awnn-images"
    assert links["awnn/table1/mnist-awnn-width"][1].metric == "width"
    assert links["awnn/table1/multi30k-awnn-loss"][1].where == {"ffn": "adaptive"}
    for cell in ("mnist-fixed-accuracy", "nci1-awnn-accuracy", "nci1-fixed-width", "multi30k-fixed-loss"):
        assert f"awnn/table1/{cell}" not in links and item(f"awnn/table1/{cell}").book.drawn_from, cell
    assert item("awnn/table1/cifar10-awnn-accuracy").book.drawn_from is None  # needs a download: not run offline


def test_a_compared_number_wins_over_exact(tmp_path, exact_checks):
    """Gamma of Sec. 4 is shown exactly in chapter 1 and compared by the exact-checks run: the comparison wins."""
    gamma = item("hacn/sec4/gamma-acn")
    assert ledger_rows(ResultsStore(tmp_path), [gamma])[0].status == "not run"  # no run stored
    row = ledger_rows(exact_checks[0], [gamma])[0]
    assert row.status == "reproduced" and row.tolerance == 0.0 and "one run" in row.verdict


def test_section_anchor_is_the_id_jupyter_book_gives_the_heading():
    assert section_anchor("The rule: Eq. 1-2 and Algorithm 1") == "the-rule-eq-1-2-and-algorithm-1"
    assert section_anchor("H-ACN connectivity and $\\Gamma$") == "h-acn-connectivity-and-gamma"
    assert section_anchor("The starting widths: the paper's values and ours") == (
        "the-starting-widths-the-paper-s-values-and-ours")
    assert section_anchor("Fixed+: the fixed MLP at AWNN's width (App. D)") == "fixed-the-fixed-mlp-at-awnn-s-width-app-d"
    assert section_anchor("$C$ is the network") == "c-is-the-network"
    assert section_anchor("3 layers, naïve") == "layers-naive"  # docutils drops leading non-letters, folds accents
    assert chapter_href(item("hacn/eq4/direct-layer-connectivity").book) == (
        "notebooks/hacn_01_forward_rule.html#the-direct-layer-connectivity-matrix")
    assert chapter_href(item("awnn/table3/tabular-config").book) == "notebooks/awnn_02_tabular.html"
    assert chapter_href(item("hacn/fig3b/vit-imagenet-res").book) == "notebooks/hacn_04_vit.html#best-accuracy-fig-3b"
    assert chapter_href(item("hacn/fig10/vit-finetune-depth").book) == ""  # no chapter shows the fine-tuning yet


def test_section_anchor_agrees_with_docutils_on_every_heading_of_the_book():
    nodes = pytest.importorskip("docutils.nodes")
    import json
    from pathlib import Path

    headings = []
    for path in sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb")):
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            if cell["cell_type"] == "markdown":
                headings += [line.lstrip("#").strip() for line in "".join(cell["source"]).splitlines()
                             if line.startswith("#")]
    assert len(headings) > 50
    for heading in headings:  # Sphinx ids a section by make_id of its text; math reads without the $
        assert section_anchor(heading) == nodes.make_id(heading.replace("$", "")), heading


# ----------------------------------------------------------------------------- the page


def test_ledger_html_has_every_item_status_tolerance_and_script(tmp_path, toy_experiment):
    import re

    store = ResultsStore(tmp_path)
    catalog.run("toy-ledger", "paper", store=store, progress=False)
    page = ledger_html(store)
    for it in PAPER_ITEMS:
        assert it.id in page
    for status in STATUSES:
        assert f'<option value="{status}">' in page
    assert page.count('<tr class="item-row"') == len(PAPER_ITEMS)
    assert page.count("<details>") == len(PAPER_ITEMS)  # every item's details one click away
    assert "<script>" in page and "addEventListener" in page and "http" not in page.split("<script>")[1]
    # ours with its unit, the interval and the tolerance at the unit's precision
    assert "99.50 (0.20)%, n = 3" in page and "tolerance ± 0.30%" in page
    assert 'href="hacn_01_forward_rule.html#the-rule-eq-1-2-and-algorithm-1"' in page
    assert re.search(r"\bnan\b", page, re.IGNORECASE) is None and "…" not in page
    assert "NBVAL" not in page and "assert" not in page  # no test machinery on the page
    # settings in full, never cut (in the details)
    long_setting = max((r.setting for r in ledger_rows(store)), key=len)
    assert len(long_setting) > 200 and html.escape(long_setting) in page
