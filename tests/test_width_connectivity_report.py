"""The verdicts, figures and page furniture of the width-connectivity chapter, on made-up stored runs.

Every verdict is checked against the number computed by hand from the synthetic runs (the first-half
share of the widths, Welch and Student-t intervals, the smallest cut of a truncation grid); a claim
flips to "does not hold" when the runs are made to say the opposite and to "cannot be told" on one
seed; with no stored run the chapter gets a coverage table of the whole plan, one sentence per
section and no verdict; the figures draw the means the tables hold.
"""

from __future__ import annotations

import math

import matplotlib
import numpy as np
import pytest

from hacn_core.beyond import width_connectivity as wc
from hacn_core.beyond import width_connectivity_report as report
from hacn_core.engine.results import RunResult, config_hash
from hacn_core.engine.stats import Estimate, difference, estimate
from hacn_core.hacn.studies import mixer as hm

matplotlib.use("Agg")
BOOK = wc.configs("book")
T95 = {2: 12.706204736174698, 3: 4.302652729749464}  # Student-t 97.5% quantiles, 1 and 2 degrees of freedom


def _config(setting: str, rule: str, seed: int, classes: int = 2, learn: bool = True) -> dict:
    return next(c for c in BOOK if c["setting"] == setting and c["rule"] == rule and c["seed"] == seed
                and c["num_classes"] == classes and c["learn_width"] is learn)


def _run(config: dict, *, widths=None, gamma: float | None = None, acc: float = 0.9, params: int = 1000,
         ratio: float = 1.1, seconds: float = 0.01, grid=None, device: str = "cpu: a test CPU") -> RunResult:
    """A stored run of the study with the fields the report reads; unset ones get plain values."""
    L = config["num_layers"]
    widths = list(widths) if widths is not None else [config["channel_mlp_dim"]] * L
    start = [config["channel_mlp_dim"]] * L
    gamma = {"resnet": 1.0, "acn": 0.0}.get(config["rule"], 0.3) if gamma is None else gamma
    fractions, accuracy, parameters = grid or ([1.0, 0.5], [[acc] * (L + 1)] * 2,
                                               [[params] * (L + 1), [params // 2] * (L + 1)])
    metrics = {"test_accuracy": acc, "first_half_exit_accuracy": acc - 0.1, "gamma": gamma,
               "total_width": int(sum(widths)), "start_total_width": int(sum(start)), "parameters": params,
               "adaptive/ms_per_step": 10.0 * ratio, "twin/ms_per_step": 10.0, "fixed/ms_per_step": 10.0,
               "adaptive/ratio_to_fixed": ratio, "twin/ratio_to_fixed": 1.0, "seconds_per_step": seconds}
    curves = {"final_widths": widths, "widths": [start, widths], "total_width": [sum(start), sum(widths)],
              "record_step": [0, 100], "truncation_fractions": fractions, "truncation_accuracy": accuracy,
              "truncation_parameters": parameters}
    return RunResult(wc.EXPERIMENT_ID, config, config_hash(config), config["seed"], metrics, curves,
                     provenance={"device": device})


def _row(frame, question: int, task: str, start: str):
    rows = frame[(frame["question"] == question) & (frame["task"] == task) & frame["claim"].str.startswith(start)]
    assert len(rows) == 1, (question, task, start, list(frame["claim"]))
    return rows.iloc[0]


# ----------------------------------------------------------------------------- the building blocks


def test_first_half_width_share_by_hand():
    assert report.first_half_width_share([4, 3, 2, 1]) == pytest.approx(7 / 10)
    assert report.first_half_width_share([5] * 16) == pytest.approx(0.5)
    assert report.first_half_width_share([2, 4, 6]) == pytest.approx((2 + 0.5 * 4) / 12)  # the middle counts half
    assert report.first_half_width_share([9]) == pytest.approx(0.5)
    for bad in ([], [0, 0]):
        with pytest.raises(ValueError, match=r"widths=.* must be a non-empty list of widths with a positive sum"):
            report.first_half_width_share(bad)


def test_above_reads_the_whole_interval_against_the_threshold():
    assert report.above(Estimate(1.0, 0.5, 3)) is True
    assert report.above(Estimate(-1.0, 0.5, 3)) is False
    assert report.above(Estimate(0.2, 0.5, 3)) is None  # the interval crosses 0
    assert report.above(Estimate(5.0, math.nan, 1)) is None  # one run: no interval
    assert report.above(Estimate(0.0, 0.0, 3)) is False  # every run gave exactly the threshold
    assert report.above(Estimate(-0.5, 0.4, 3), -1.0) is True and report.above(Estimate(1.2, 0.1, 3), 1.0) is True


def test_cut_savings_is_the_smallest_cut_of_the_grid_by_hand():
    """A 3 x 4 grid (kept width 1, 0.5, 0.25; exits 0..3): the full network has 90% at 1,000 parameters.
    Within 1 point: exits alone reach exit 2 (600), truncation alone reaches 0.5 (550), and together
    (0.5, exit 2) keeps 89.2% at 330 parameters; the better single cut is 550, so the gain is 22 points."""
    run = _run(_config("stack", "hacn", 0), grid=(
        [1.0, 0.5, 0.25],
        [[0.50, 0.80, 0.895, 0.90], [0.50, 0.79, 0.892, 0.893], [0.50, 0.60, 0.70, 0.80]],
        [[100, 350, 600, 1000], [100, 210, 330, 550], [100, 150, 210, 320]]))
    cut = report.cut_savings(run)
    assert cut["full accuracy"] == 0.90
    assert (cut["exits only"], cut["widths only"], cut["both"]) == pytest.approx((0.6, 0.55, 0.33))
    assert cut["gain"] == pytest.approx(0.22) and (cut["fraction"], cut["exit"]) == (0.5, 2)
    strict = report.cut_savings(run, points=0.6)  # 89.4% needed: exit 2 at full width (89.5%) and nothing cut thinner
    assert (strict["exits only"], strict["widths only"], strict["both"], strict["gain"]) == pytest.approx(
        (0.6, 1.0, 0.6, 0.0))


# ----------------------------------------------------------------------------- the five questions


def _widths(kind: str, seed: int) -> list[int]:
    """16 layer widths around 32: flat, falling or rising with depth, a little different per seed."""
    slope = {"flat": 0.0, "falling": -1.0, "rising": 1.0}[kind]
    return [int(round(32 + slope * (i - 7.5) + (seed - 1) * ((i % 3) - 1))) for i in range(16)]


def test_question1_compares_the_first_half_share_with_the_resnets():
    """H-ACN's widths fall with depth (more width early: holds), ACN's rise (does not hold), against a flat
    ResNet; the evidence is Welch's difference of the per-run shares, and one seed cannot tell."""
    kinds = {"resnet": "flat", "acn": "rising", "hacn": "falling"}
    runs = [_run(_config("stack", rule, s), widths=_widths(kind, s)) for rule, kind in kinds.items() for s in (0, 1, 2)]
    frame = report.verdicts(runs)
    share = {rule: [100 * report.first_half_width_share(_widths(kind, s)) for s in (0, 1, 2)]
             for rule, kind in kinds.items()}
    for rule, expected in (("hacn", True), ("acn", False)):
        row = _row(frame, 1, "SpiralHard", report.RULE_LABELS[rule] + " puts")
        d = difference(share[rule], share["resnet"])
        assert row["verdict"] is expected
        assert f"difference {d.mean:+.1f} ± {d.half_width:.1f} points (n=3)" in row["ours"]
        assert f"first-half share {np.mean(share[rule]):.1f}%" in row["ours"]
    one_seed = report.verdicts([r for r in runs if r.seed == 0])
    assert one_seed[one_seed["question"] == 1]["verdict"].isna().all()
    assert "(n=1, no interval)" in _row(one_seed, 1, "SpiralHard", "H-ACN puts")["ours"]

    fig = report.plot_width_by_depth(runs)  # the figure draws the table's means, one line per rule
    lines = {line.get_label(): line for line in fig.axes[0].get_lines()}
    np.testing.assert_allclose(lines["H-ACN"].get_ydata(), np.mean([_widths("falling", s) for s in (0, 1, 2)], axis=0))
    assert lines["starting width"].get_ydata()[0] == 32


def _difficulty_runs(hacn_width_10: int) -> list[RunResult]:
    """Mixer runs on 10 and 2 classes, seeds 0-2: Gamma larger on 10 classes; H-ACN's total width on 10 classes
    ``hacn_width_10`` (2 classes: 2,000); the ResNet's width smaller on 10 classes; the ACN's the same."""
    runs = []
    for s in (0, 1, 2):
        for classes in (10, 2):
            hard = classes == 10
            for rule in wc.STUDY_RULES:
                total = {"hacn": hacn_width_10 if hard else 2000, "resnet": 1900 if hard else 2100,
                         "acn": 2048}[rule] + 10 * s
                widths = [total // 16] * 15 + [total - 15 * (total // 16)]
                gamma = (0.45 if hard else 0.30) + 0.01 * s if rule == "hacn" else None
                runs.append(_run(_config("mixer", rule, s, classes), widths=widths, gamma=gamma))
    return runs


def test_question2_judges_width_and_gamma_against_task_difficulty():
    frame = report.verdicts(_difficulty_runs(hacn_width_10=2200))
    task = "Fashion-MNIST, 10 vs 2 classes"
    assert _row(frame, 2, task, "H-ACN learns a larger")["verdict"] is True
    assert _row(frame, 2, task, "ResNet learns a larger")["verdict"] is False
    assert _row(frame, 2, task, "ACN learns a larger")["verdict"] is None  # the same widths: an interval around 0
    gamma = _row(frame, 2, task, "H-ACN's Γ is larger")
    d = difference([0.45, 0.46, 0.47], [0.30, 0.31, 0.32])  # Welch: each side has its spread over the seeds
    assert gamma["verdict"] is True and f"Γ difference +0.150 ± {d.half_width:.3f} (n=3)" in gamma["ours"]
    assert _row(frame, 2, task, "H-ACN's Γ and total width both")["verdict"] is True
    runs = _difficulty_runs(hacn_width_10=1800)  # Gamma grows, the width shrinks
    apart = report.verdicts(runs)
    assert _row(apart, 2, task, "H-ACN learns a larger")["verdict"] is False
    assert _row(apart, 2, task, "H-ACN's Γ and total width both")["verdict"] is False
    assert not len(report.verdicts([r for r in runs if r.config["num_classes"] == 10]).query("question == 2"))


def _paired_runs() -> tuple[list[RunResult], list[RunResult]]:
    """H-ACN stack runs and their frozen twins, H-ACN Mixer runs (10 classes) and their hacn-mixer-long controls:
    learned - frozen accuracy -0.2, -0.1, -0.3 points, 900 against 1,000 parameters; learned - fixed -3, -4, -5
    points; step time 1.20, 1.25, 1.30 times the fixed control's; training clock 1.1, 1.2, 1.3 times the twin's."""
    runs, controls = [], []
    for s, (d_frozen, d_fixed, ratio, clock) in enumerate(((-0.2, -3, 1.20, 1.1), (-0.1, -4, 1.25, 1.2),
                                                           (-0.3, -5, 1.30, 1.3))):
        learning = _config("stack", "hacn", s)
        runs.append(_run(learning, acc=0.9 + d_frozen / 100, params=900, ratio=ratio, seconds=0.01 * clock))
        runs.append(_run(wc.frozen_width_config(learning), acc=0.9, params=1000, ratio=1.0, seconds=0.01))
        mixer = _config("mixer", "hacn", s, 10)
        runs.append(_run(mixer, acc=0.85 + d_fixed / 100, params=4000, ratio=ratio))
        fixed = wc.fixed_control_config(mixer)
        controls.append(RunResult(hm.LONG_ID, fixed, config_hash(fixed), s,
                                  {"test_accuracy": 0.85, "parameters": 5000, "first_half_exit_accuracy": 0.5,
                                   "seconds_per_epoch": 43.0, "steps": 12900, "epochs": 30}, {}))
    return runs, controls


def test_questions3_and_4_pair_each_run_with_its_controls():
    runs, controls = _paired_runs()
    frame = report.verdicts(runs, controls)
    sd = np.std([-0.2, -0.1, -0.3], ddof=1)
    no_cost = _row(frame, 3, "SpiralHard", "Learning the width costs H-ACN at most 1 point")
    assert no_cost["verdict"] is True  # -0.2 ± 0.25: wholly above -1
    assert f"paired difference -0.2 ± {T95[3] * sd / math.sqrt(3):.1f} points (n=3)" in no_cost["ours"]
    saved = _row(frame, 3, "SpiralHard", "Learning the width saves")
    assert saved["verdict"] is True and "900 against 1,000 parameters; saved +10.0 ± 0.0% (n=3)" in saved["ours"]
    fixed = _row(frame, 3, "Fashion-MNIST, 10 classes", "Learning the width costs H-ACN at most 1 point")
    assert fixed["verdict"] is False and "hacn-mixer-long" in fixed["claim"]  # -4 ± 2.5 points: wholly below -1
    assert _row(frame, 3, "Fashion-MNIST, 10 classes", "Learning the width saves")["verdict"] is True  # 20%
    assert not len(frame[(frame["question"] == 3) & (frame["task"] == "SpiralHard")
                         & frame["claim"].str.contains("hacn-mixer-long")])  # the stack has no fixed control

    step = _row(frame, 4, "SpiralHard", "A width-learning H-ACN step")
    e = estimate([1.20, 1.25, 1.30])
    assert step["verdict"] is True and f"{e.mean:.2f} ± {e.half_width:.2f}× (n=3)" in step["ours"]
    clock = _row(frame, 4, "SpiralHard", "Training with width learning")
    c = estimate([1.1, 1.2, 1.3])
    assert c.mean - c.half_width < 1 < c.mean + c.half_width  # 1.2 ± 0.25: the interval crosses 1
    assert clock["verdict"] is None and f"{c.mean:.2f} ± {c.half_width:.2f}× (n=3)" in clock["ours"]
    assert not len(frame[(frame["question"] == 4) & (frame["task"] == "Fashion-MNIST, 10 classes")
                         & frame["claim"].str.startswith("Training with")])  # no frozen Mixer twin stored here
    times = report.time_per_step(runs, controls).set_index("task")
    assert times.loc["SpiralHard", "frozen twin / fixed"] == 1.0
    assert times.loc["SpiralHard", "training clock, learned / frozen"] == pytest.approx(1.2)  # the median
    assert math.isnan(times.loc["Fashion-MNIST, 10 classes", "frozen twin / fixed"])
    assert not any("fixed (ms)" in c and "training" in c for c in times.columns)  # the controls trained elsewhere

    # a clock compares only runs trained wholly on one and the same device
    def moved(run, device):
        return RunResult(run.experiment, run.config, run.config_hash, run.seed, run.metrics, run.curves,
                         provenance={"device": device})

    first = next(r for r in runs if r.config["setting"] == "stack" and r.config["learn_width"] and r.seed == 0)
    for device in ("cuda: a GPU; cpu: a test CPU", "cpu: another CPU"):  # resumed elsewhere, or another machine
        part = report.verdicts([moved(r, device) if r is first else r for r in runs], controls)
        c2 = estimate([1.2, 1.3])
        assert f"{c2.mean:.2f} ± {c2.half_width:.2f}× (n=2)" in _row(part, 4, "SpiralHard", "Training with")["ours"]
    elsewhere = [moved(r, "cpu: another CPU") if r.config["learn_width"] else r for r in runs]
    assert not len(report.verdicts(elsewhere, controls).query("question == 4 and claim.str.startswith('Training')"))
    assert math.isnan(report.time_per_step(elsewhere).set_index("task").loc["SpiralHard",
                                                                             "training clock, learned / frozen"])
    assert report.training_device(moved(first, "cuda: a GPU; cpu: a test CPU")) is None

    fig = report.plot_against_fixed(runs, controls)  # the dots are the table's paired differences
    table = report.against_fixed(runs, controls)
    drawn = sorted(float(x) for c in fig.axes[0].containers for x in c.lines[0].get_xdata() if np.isfinite(x))
    assert drawn == pytest.approx(sorted(table["difference (points)"]))


def test_question5_holds_only_where_the_combined_cut_is_smaller_in_every_seed():
    """Three seeds whose grids let the combined cut beat both single cuts by 22, 20 and 24 points: holds.
    Grids where the best cut is one of the single cuts (gain 0 in every seed): does not hold."""
    def grid(bonus: float, combined_helps: bool):
        acc = [[0.5, 0.8, 0.895, 0.9], [0.5, 0.79, 0.892 if combined_helps else 0.8, 0.893], [0.5, 0.6, 0.7, 0.8]]
        return [1.0, 0.5, 0.25], acc, [[100, 350, 600, 1000], [100, 210, 330 + bonus, 550], [100, 150, 210, 320]]

    helps = [_run(_config("stack", "hacn", s), grid=grid(b, True)) for s, b in ((0, 0), (1, 20), (2, -20))]
    row = _row(report.verdicts(helps), 5, "SpiralHard", "H-ACN: cutting depth and width")
    g = estimate([22, 20, 24])
    assert row["verdict"] is True and f"saved beyond each seed's better single cut +{g.mean:.1f} ± {g.half_width:.1f} points (n=3)" in row["ours"]
    assert "exits alone 60%, truncation alone 55%, both 33%" in row["ours"]
    never = [_run(_config("stack", "hacn", s), grid=grid(0, False)) for s in (0, 1, 2)]
    assert _row(report.verdicts(never), 5, "SpiralHard", "H-ACN: cutting")["verdict"] is False
    cuts = report.cut_table(helps).iloc[0]
    assert (cuts["kept by exits alone (%)"], cuts["kept by both (%)"]) == pytest.approx((60.0, 33.0))

    fig = report.plot_truncation_grid(helps)  # panel (SpiralHard, H-ACN): one line per kept fraction, the mean
    lines = [line for line in fig.axes[2].get_lines() if line.get_label().startswith("kept width")]
    assert [line.get_label() for line in lines] == ["kept width 100%", "kept width 50%", "kept width 25%"]
    np.testing.assert_allclose(lines[0].get_ydata(), [50, 80, 89.5, 90])


# ----------------------------------------------------------------------------- the page with 0 or some runs


def test_with_no_stored_run_the_chapter_shows_the_plan_and_one_sentence_per_section():
    planned = wc.configs("book")
    cover = report.coverage_table(planned, [], [])
    assert cover["seeds planned"].sum() == len(planned) == 42 and cover["seeds stored"].sum() == 0
    assert set(cover["which seeds"]) == {"none"}
    learned_mixer = (cover["width"] == "learned") & cover["task"].str.startswith("Fashion-MNIST")
    assert set(cover[learned_mixer]["fixed-width controls stored"]) == {"none"}
    assert set(cover[~learned_mixer]["fixed-width controls stored"]) == {"none planned"}
    for q in range(1, 6):
        sentence = report.missing_sentence(q, [], [])
        assert sentence.endswith(".") and sentence.count(". ") == 0  # one sentence
    with pytest.raises(ValueError, match=r"question=6; allowed: 1, 2, 3, 4, 5"):
        report.missing_sentence(6, [])
    frame = report.verdicts([], [])
    assert list(frame.columns) == ["question", "task", "claim", "ours", "verdict"] and not len(frame)
    assert report.summary_markdown(frame, 0).startswith("No run of this study that learns its width is stored")
    for q in range(1, 6):
        assert "–" not in str(report.show_verdicts(frame, q).data).split("<tbody>")[1]  # an empty table, no dashes


def test_coverage_budget_and_summary_follow_the_stored_runs():
    runs, controls = _paired_runs()
    planned = wc.configs("book")
    cover = report.coverage_table(planned, runs, controls).set_index(["task", "rule", "width"])
    assert cover.loc[("SpiralHard", "hacn", "learned"), "which seeds"] == "0, 1, 2"
    assert cover.loc[("SpiralHard", "hacn", "frozen at its start"), "seeds stored"] == 3
    assert cover.loc[("Fashion-MNIST, 10 classes", "hacn", "learned"), "fixed-width controls stored"] == "0, 1, 2"
    assert cover.loc[("Fashion-MNIST, 2 classes", "hacn", "learned"), "seeds stored"] == 0
    assert all(report.missing_sentence(q, runs, controls) == "" for q in range(1, 6))
    only_stack = [r for r in runs if r.config["setting"] == "stack"]
    assert report.missing_sentence(2, only_stack).startswith("No Mixer run")

    steps = {c["setting"]: report.steps_per_run(c) for c in planned
             if c["num_classes"] == 10 or c["setting"] == "stack"}
    assert steps == {"mixer": 30 * math.ceil(55_000 / 128), "stack": wc.BOOK_STACK_EPOCHS * math.ceil(3500 / 128)}
    budget = report.budget_table(planned, [], RunResult(hm.COST_ID, {}, "x", None, {"hacn/ms_per_step": 90.0}))
    mixer, stack = budget.iloc[0], budget.iloc[1]
    n_mixer = sum(c["setting"] == "mixer" for c in planned)
    assert mixer["runs planned"] == n_mixer == 24 and mixer["measured by"].startswith("hacn-mixer-cost")
    total = sum(report.steps_per_run(c) for c in planned if c["setting"] == "mixer")
    assert mixer["CPU-hours, all runs"] == pytest.approx(90.0 * total / 3.6e6)
    assert math.isnan(stack["ms per step"]) and stack["measured by"] == "not measured"
    measured = report.budget_table(planned, runs).set_index("setting")
    assert measured.loc["MLP stack", "ms per step"] == pytest.approx(np.median([12.0, 12.5, 13.0, 10.0, 10.0, 10.0]))

    frame = report.verdicts(runs, controls)
    text = report.summary_markdown(frame, len([r for r in runs if report.learns_width(r)]))
    assert "**3. What does learning the width cost in accuracy" in text and "— **does not hold**" in text
    assert "**1. Does auto-compression show in the learned widths?** Undecided" in text  # no ResNet stored
    html = str(report.show_verdicts(frame, 3).data)
    assert "<td>holds</td>" in html and "<td>does not hold</td>" in html
    assert "<th>claim</th>" in html and "<th>question</th>" not in html and "<th>index</th>" not in html
    stack = str(report.show_verdicts(frame, task="SpiralHard").data)  # every question, one task
    assert stack.count("<tr>") == 1 + len(frame[frame["task"] == "SpiralHard"]) and "<th>task</th>" not in stack
    assert report.CANNOT_TELL in stack  # the clock ratio's interval crosses 1


def test_show_formats_columns_by_kind_and_leaves_out_controls_with_no_value():
    """Parameters as whole numbers (a time "at learned widths" is not a width), differences and shares saved
    signed to 0.1, half-widths unsigned, times and ratios to 0.01; a control with no stored pair anywhere is
    left out and named in the note, an interval of a shown value kept."""
    import re

    import pandas as pd

    frame = pd.DataFrame({"rule": ["hacn"], "adaptive parameters": [32609.67], "vs frozen (points)": [0.0333],
                          "vs frozen (points) ±95%": [0.1434], "adaptive / fixed": [1.1312], "Gamma": [0.25534],
                          "Gamma ±95%": [0.0812], "total width": [2177.5], "total width ±95%": [6.44],
                          "vs fixed (points)": [float("nan")], "vs fixed (points) ±95%": [float("nan")],
                          "n": [1], "one seed (points)": [2.0], "one seed (points) ±95%": [float("nan")],
                          "parameters saved (%)": [6.94], "twin at learned widths (ms)": [51.234],
                          "ms per step": [60.194], "CPU-hours, all runs": [0.6909]})
    html = report.show(frame).data
    cells = re.findall(r'<td class="num">([^<]*)</td>', html)
    assert cells == ["32,610", "+0.0", "0.1", "1.13", "0.255", "0.081", "2,178", "6", "1", "+2.0", "–", "+6.9", "51.23", "60.19", "0.69"]
    assert "vs fixed" not in re.sub(r'house-note">[^<]*', "", html)
    assert "Not shown, no value stored: vs fixed (points), vs fixed (points) ±95%." in html
