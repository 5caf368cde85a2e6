"""The AWNN text chapter's report (``hacn_core.awnn.studies.text_report``) on hand-made runs.

The rule that judges "far fewer FFN parameters at a comparable loss" (its interval when an
arm has one seed, its three verdicts, the paper's own Table 1 numbers under it), Table 1
beside ours, the grid's selection by validation loss, the coverage of a partly stored
study, the learned width per FFN, the book's budget from the measured step cost, and the
figures' data.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from hacn_core.awnn.studies import text as tx
from hacn_core.awnn.studies import text_report as tr
from hacn_core.engine.data import missing_files
from hacn_core.engine.results import RunResult, config_hash
from hacn_core.engine.stats import Estimate, difference, difference_from_summary


def _run(ffn: str, width: int, seed: int, test: float, val: float, widths: list[int] | None = None,
         acc: float = 0.9, cpu_s: float = 100.0) -> RunResult:
    config = tx.text_config("tinyshakespeare", ffn, width, seed, **tx.BOOK_MODEL)
    widths = widths or [width] * 4
    metrics = {"test_token_loss": test, "test_char_acc": acc, "val_token_loss": val, "best_epoch": 8,
               "epochs_run": 10, "widths": widths, "total_width": sum(widths),
               "ffn_params": tx.ffn_parameters(widths, 64), "final_widths": [w + 1 for w in widths],
               "n_train": 22_864, "cpu_s": cpu_s}
    curves = {"record_epoch": [0, 1, 2], "widths": [[64] * 4, [50] * 4, widths]} if ffn == "adaptive" else {}
    return RunResult(tx.EXPERIMENT_ID, config, config_hash(config), seed, metrics, curves,
                     {"date": "2026-11-27T10:00:00+00:00"})


@pytest.fixture
def runs() -> list[RunResult]:
    """Three adaptive seeds (40 neurons per FFN) and the book's three fixed widths at seed 0."""
    adaptive = [_run("adaptive", 0, s, test, test + 0.01, [40, 42, 38, 40])
                for s, test in enumerate((0.500, 0.502, 0.504))]
    return adaptive + [_run("fixed", 16, 0, 0.80, 0.81), _run("fixed", 64, 0, 0.40, 0.45),
                       _run("fixed", 256, 0, 0.50, 0.42)]


# ----------------------------------------------------------------------------- the rule


def test_loss_difference_is_welch_or_borrows_the_other_arms_spread():
    a, f = [1.0, 1.2, 1.4], [0.9, 1.0]
    d, kind = tr.loss_difference(a, f)
    assert kind == "Welch" and d == difference(a, f)
    d, kind = tr.loss_difference(a, [1.0])  # one fixed seed: the adaptive seeds' std 0.2 for both arms
    assert d.mean == pytest.approx(0.2)
    assert d.half_width == pytest.approx(stats.t.ppf(0.975, 2) * 0.2 * math.sqrt(1 / 3 + 1))
    assert "fixed arm's one seed" in kind
    d2, kind2 = tr.loss_difference([1.0], [1.4, 1.2, 1.0])  # the mirror case
    assert d2.mean == pytest.approx(-0.2) and d2.half_width == pytest.approx(d.half_width)
    assert "adaptive arm's one seed" in kind2
    d, kind = tr.loss_difference([1.0], [2.0])
    assert math.isnan(d.half_width) and kind.startswith("one seed each")
    with pytest.raises(ValueError, match="at least one"):
        tr.loss_difference([], [1.0])


def test_difference_from_summary_equals_welch_on_samples_with_those_moments():
    z = np.linspace(-1, 1, 10)
    z = (z - z.mean()) / z.std(ddof=1)  # mean 0, sample std 1
    a, b = 1.51 + 0.2 * z, 1.43 + 0.4 * z
    got = difference_from_summary(1.51, 0.2, 10, 1.43, 0.4, 10)
    want = difference(a, b)
    assert got.mean == pytest.approx(want.mean) and got.half_width == pytest.approx(want.half_width)
    assert math.isnan(difference_from_summary(1.0, 0.1, 1, 0.5, 0.1, 5).half_width)
    with pytest.raises(ValueError, match="at least 1"):
        difference_from_summary(1.0, 0.1, 0, 0.5, 0.1, 5)


@pytest.mark.parametrize("diff, expected", [
    (Estimate(0.05, 0.02, 3), True),  # upper end 0.07 under the margin 0.1
    (Estimate(-0.30, 0.05, 3), True),  # better than the fixed model counts as comparable
    (Estimate(0.20, 0.05, 3), False),  # lower end 0.15 above the margin
    (Estimate(0.05, 0.10, 3), None),  # reaches from -0.05 to 0.15: straddles the margin
    (Estimate(0.0, float("nan"), 1), None),  # no interval
])
def test_comparable_is_non_inferiority_within_ten_percent(diff, expected):
    assert tr.comparable(diff, fixed_loss=1.0) is expected


def test_comparable_scales_the_margin_with_the_fixed_loss():
    d = Estimate(0.05, 0.02, 3)  # upper end 0.07
    assert tr.comparable(d, fixed_loss=0.5) is None  # margin 0.05: the interval reaches past it
    assert tr.comparable(d, fixed_loss=1.0, margin=0.05) is None
    assert tr.comparable(d, fixed_loss=0.2) is False  # margin 0.02, under the lower end 0.03


def test_the_whole_claim_needs_both_parts():
    assert tr.claim_holds(True, 2.0) is True
    assert tr.claim_holds(True, 1.9) is False  # not far fewer parameters
    assert tr.claim_holds(None, 5.0) is None
    assert tr.claim_holds(False, 200.0) is False
    assert tr.claim_holds(None, 1.0) is False  # fewer parameters fails whatever the loss


def test_the_papers_own_numbers_under_the_rule():
    p = tr.paper_judgement()
    se2 = 0.2**2 / 10 + 0.4**2 / 10  # Table 1: AWNN 1.51 (0.2), fixed 1.43 (0.4), 10 runs each
    df = se2**2 / ((0.2**2 / 10) ** 2 / 9 + (0.4**2 / 10) ** 2 / 9)
    assert p["difference"].mean == pytest.approx(0.08)
    assert p["difference"].half_width == pytest.approx(stats.t.ppf(0.975, df) * math.sqrt(se2))
    assert p["margin"] == pytest.approx(0.143)
    assert p["comparable"] is None and p["holds"] is None and p["contains_zero"] is True
    # 12 FFNs at d = 512: 12 x 2048 against 123.2 neurons in all; the count is linear in the widths
    assert tr.paper_ffn_parameters(24576) == tx.ffn_parameters([2048] * 12, 512) == 25_196_544
    assert tr.paper_ffn_parameters(123.2) == pytest.approx(1025 * 123.2 + 12 * 512)
    assert tr.paper_ffn_parameters(sum([3, 7, 11])) == tx.ffn_parameters([3, 7, 11] + [0] * 9, 512)
    assert p["ratio"] == pytest.approx(25_196_544 / (1025 * 123.2 + 6144))


# ----------------------------------------------------------------------------- tables


def test_the_grid_selects_by_validation_loss_not_test_loss(runs):
    assert tr.selected_fixed(runs) == 256  # val 0.42 is the lowest; fixed 64 has the lowest test loss
    assert tr.selected_fixed([r for r in runs if r.config["ffn"] == "adaptive"]) is None
    assert list(tr.arm_runs(runs)) == [("adaptive", 0), ("fixed", 16), ("fixed", 64), ("fixed", 256)]


def test_comparison_table_judges_every_fixed_width(runs):
    t = tr.comparison_table(runs).set_index("fixed width")
    a_params = tx.ffn_parameters([40, 42, 38, 40], 64)
    assert t.loc[256, "FFN parameters, fixed ÷ adaptive"] == round(tx.ffn_parameters([256] * 4, 64) / a_params, 2)
    assert bool(t.loc[256, "grid's choice"]) and not t.loc[64, "grid's choice"]
    half = stats.t.ppf(0.975, 2) * 0.002 * math.sqrt(1 / 3 + 1)  # adaptive spread 0.002, one fixed seed
    assert t.loc[256, "test loss, adaptive − fixed"] == f"{0.002:+.3f} ± {half:.3f}"
    ok, fewer, holds = ({w: v for w, v in zip(t.index, t[col].tolist())}  # None: cannot be told
                        for col in ("comparable loss", "far fewer parameters", "claim holds"))
    assert ok[256] is True and holds[256] is True
    assert ok[64] is False and holds[64] is False  # 0.102 worse, against a margin of 0.04
    assert ok[16] is True and fewer[16] is False and holds[16] is False  # better, but fixed 16 is the smaller
    assert tr.comparison_table([r for r in runs if r.config["ffn"] == "fixed"]).empty


def test_claims_and_verdict_on_runs_and_on_none(runs):
    c = tr.claims(runs)
    assert list(c["holds"]) == [True, True, True, None]  # the last row: the paper's numbers, undecided
    assert "fixed 256 per FFN" in c.loc[0, "ours"]
    text = tr.verdict_markdown(runs)
    ratio = tx.ffn_parameters([256] * 4, 64) / tx.ffn_parameters([40, 42, 38, 40], 64)
    assert "the claim holds" in text and f"hold {ratio:.2f} times the FFN parameters" in text
    assert "width 256" in text and "95% interval" in text
    assert "contains 0" in text and "cannot show a comparable loss" in text  # the paper's part
    empty = tr.claims([])
    assert list(empty["holds"]) == [None] * 4
    assert tr.verdict_markdown([]).startswith("No adaptive and fixed runs")


def test_table1_puts_the_papers_row_above_ours(runs):
    t = tr.table1(runs)
    assert list(t["source"]) == ["paper (Table 1)"] * 2 + ["ours"] * 2
    assert list(t["model"]) == ["fixed 2048 (grid search)", "adaptive", "fixed 256 (lowest validation loss)",
                                "adaptive"]
    assert t.loc[0, "test loss (nats/token)"] == "1.43 (0.4)" and t.loc[1, "total FFN width"] == "123.2 (187.9)"
    assert t.loc[0, "FFN parameters"] == "25,196,544" and t["token accuracy (%)"][:2].isna().all()
    assert t.loc[3, "test loss (nats/token)"] == "0.502 (0.002)" and t.loc[3, "total FFN width"] == "160.0 (0.0)"
    assert t.loc[3, "token accuracy (%)"] == "90.0 (0.0)" and t.loc[3, "runs"] == 3
    assert t.loc[2, "FFN parameters"] == f"{tx.ffn_parameters([256] * 4, 64):,}"
    assert len(tr.table1([])) == 2  # the paper's rows alone


def test_coverage_of_a_partly_stored_study(runs):
    stored = [r for r in runs if not (r.config["ffn"] == "adaptive" and r.seed == 1)]
    stored = [r for r in stored if r.config["ffn_hidden"] != 64]
    t = tr.coverage_table(tx.book_configs(), stored).set_index("width per FFN")
    assert t.loc["learned, from 64", "seeds planned"] == 3 and t.loc["learned, from 64", "stored"] == "0, 2"
    assert t.loc["64", "seeds stored"] == 0 and t.loc["64", "stored"] == "none"
    assert t.loc["256", "stored"] == "0"
    assert tr.coverage_table(tx.book_configs(), [])["seeds stored"].sum() == 0


def test_width_table_per_ffn_and_the_papers_mean(runs):
    t = tr.width_table(runs).set_index("FFN")
    assert list(t.index[:4]) == ["encoder 1", "encoder 2", "decoder 1", "decoder 2"]
    assert t.loc["encoder 2", "learned width (selected epoch)"] == "42.0 (0.0)"
    assert t.loc["encoder 2", "learned width (end)"] == "43.0 (0.0)"
    assert t.loc["decoder 1", "learned ÷ start"] == round(38 / 64, 3)
    paper = t.loc["paper: mean of its 12 (Table 1 total ÷ 12)"]
    assert paper["start width"] == 576 and paper["learned ÷ start"] == round(123.2 / 12 / 576, 3)
    assert tr.width_table([r for r in runs if r.config["ffn"] == "fixed"]).empty


def test_budget_from_the_measured_step_cost():
    configs = tx.book_configs()
    assert {tr.arm_of(c) for c in configs} <= set(tx.BOOK_STEP_S)  # every book arm has a measured step
    t = tr.budget_table(configs, 22_864, tx.BOOK_STEP_S, tx.BOOK_EVAL_S).set_index("arm")
    assert t.loc["adaptive", "steps per epoch"] == 358 and t.loc["adaptive", "runs"] == 3
    assert t.loc["adaptive", "CPU-hours"] == round(3 * (10 * 358 * 0.37 + 11 * 3.6) / 3600, 2)
    seconds = sum(n * (10 * 358 * s + 11 * 3.6) for n, s in ((3, 0.37), (1, 0.35), (1, 0.27), (1, 0.37)))
    assert t.loc["all", "CPU-hours"] == round(seconds / 3600, 2) and t.loc["all", "runs"] == 6


def test_cost_table_divides_cpu_time_by_the_steps(runs):
    t = tr.cost_table(runs[:1])
    assert t.loc[0, "steps"] == 3580 and t.loc[0, "CPU s per step (evaluations included)"] == round(100 / 3580, 3)
    assert t.loc[0, "date"] == "2026-11-27"


def test_setting_table_reads_both_profiles():
    planned = {"paper": tx.paper_configs(), "book": tx.book_configs()}
    t = tr.setting_table(planned["paper"][0], planned["book"][0], {"train": 10, "val": 2, "test": 3}, 68,
                         tx.GPT2_VOCAB, planned).set_index("")
    assert t.loc["model", "paper (App. C.3)"].startswith("6 + 6 layers, d 512, 8 heads")
    assert t.loc["model", "this book"].startswith("2 + 2 layers, d 64, 4 heads")
    assert "576 neurons" in t.loc["adaptive FFNs", "paper (App. C.3)"] and "seeds 0-9" in t.loc["adaptive FFNs",
                                                                                                 "paper (App. C.3)"]
    assert "64 neurons" in t.loc["adaptive FFNs", "this book"] and "seeds 0-2" in t.loc["adaptive FFNs", "this book"]
    assert t.loc["fixed FFN widths", "this book"] == "16, 64, 256 (seeds 0)"
    assert t.loc["runs", "paper (App. C.3)"] == "60" and t.loc["runs", "this book"] == "6"
    assert "10 / 2 / 3" in t.loc["data", "this book"] and "31,000" in t.loc["data", "paper (App. C.3)"]


@pytest.mark.skipif(bool(missing_files("tinyshakespeare")), reason="Tiny Shakespeare is not under $HACN_DATA")
def test_denoising_lines_are_the_documented_split():
    lines, tokenizer = tx.denoising_lines(tx.book_configs()[0])
    assert {k: len(v) for k, v in lines.items()} == {"train": 22_864, "val": 1_231, "test": 1_232}
    assert all(16 <= len(line) <= 64 for v in lines.values() for line in v) and tokenizer.vocab_size == 65


# ----------------------------------------------------------------------------- figures


def test_grid_figure_puts_ours_and_the_papers_on_one_scale(runs):
    fig = tr.plot_grid(runs)
    ours, theirs = fig.axes[:2]
    fixed = ours.get_lines()[0]
    assert list(fixed.get_xdata()) == [16 / 64, 64 / 64, 256 / 64] and list(fixed.get_ydata()) == [0.8, 0.4, 0.5]
    points = {tuple(np.round(np.r_[ln.get_xdata(), ln.get_ydata()], 6)) for ln in theirs.get_lines()
              if ln.get_marker() == "D"}
    assert points == {(4.0, 1.43), (round(123.2 / (12 * 512), 6), 1.51)}  # Table 1's two points
    assert len(tr.plot_grid([]).axes[1].get_lines()) >= 2  # the paper's points without any run of ours


def test_width_figure_draws_the_selected_widths_per_ffn(runs):
    fig = tr.plot_widths(runs)
    left, right = fig.axes[:2]
    heights = [p.get_height() for p in right.patches]
    assert heights == pytest.approx([40, 42, 38, 40])
    assert [t.get_text() for t in right.get_xticklabels()] == ["enc 1", "enc 2", "dec 1", "dec 2"]
    mean_total = left.get_lines()[0]
    assert list(mean_total.get_ydata()) == [256, 200, 160]  # the adaptive totals over the records
