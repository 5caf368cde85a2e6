"""What a chapter shows of ``width-connectivity`` (new work, not a reproduction): five questions, their tables,
figures and verdicts.

The study (:mod:`hacn_core.beyond.width_connectivity`) trains H-ACN backbones whose
layer MLPs learn their width (H-ACN Eq. 2 x AWNN Eqs. 11-14). This module only reads
stored runs (:func:`load`; nothing here trains) and answers, per task and rule
(ResNet ``a_i = 1``, ACN ``a_i = 0``, H-ACN learned ``a_i``):

1. :func:`width_by_depth`: the learned width of layer ``i`` against its depth, mean
   over seeds with a 95% Student-t interval (:func:`hacn_core.engine.stats.estimate`);
2. :func:`gamma_and_width`: ``Gamma = ||a||_2 / sqrt(L)`` (H-ACN Sec. 4) and the total
   width, per task: do connectivity and width both follow task difficulty?
3. :func:`against_fixed`: test accuracy and parameters against (a) the run's
   frozen-width twin (``learn_width=False``: the same run whose width stays at its start,
   the only difference; :func:`paired_frozen`) and (b) the fixed-width
   ``hacn-mixer-long`` run of the same configuration (which differs in activation, init
   and weight prior too; :func:`paired_controls`), both paired seed by seed;
4. :func:`time_per_step`: milliseconds per optimizer step side by side: the adaptive
   model, its fixed-width twin at the learned widths, the fixed control (measured in
   one process, interleaved) and the wall time of both trainings;
5. :func:`truncation_table`: the accuracy of every (kept width fraction, exit depth)
   pair, AWNN Sec. 5.4's truncation crossed with H-ACN Sec. 3.1's exits.

Questions 1, 2, 4 and 5 read the runs that learn their width only (:func:`learns_width`);
the frozen-width twins enter questions 3 and 4 (as the controls). Each returns a
``pandas.DataFrame``; :func:`show` renders one as the house table
(:func:`hacn_core.engine.tables.house_table`) with the study's labels. Each question
has a figure (``plot_*``) and computed verdicts (:func:`verdicts`): a claim **holds**
when the 95% interval of its quantity lies wholly on the claim's side of a stated
threshold, **does not hold** when it lies wholly on the other side, and **cannot be
told** otherwise (:func:`above`)::

    1. first-half share of the width, ACN / H-ACN - ResNet > 0          (Welch)
       share = sum_i w_i D_i / sum_i D_i,  w_i = clip(L/2 - (i - 1), 0, 1)
    2. total width, 10 - 2 classes > 0 (every rule); Gamma, 10 - 2 > 0 (H-ACN)   (Welch)
    3. paired accuracy, learned - control > -NO_COST_POINTS; parameters saved > 0   (Student-t)
    4. step time learned / fixed control > 1 (interleaved); training clock learned / frozen > 1
    5. parameters kept: min(exits alone, truncation alone) - both > 0 at <= CUT_POINTS points lost

Around them: :func:`coverage_table` (which runs are stored), :func:`budget_table` (the
profile's arithmetic from measured step times), :func:`missing_sentence` (what a section
says while its runs are missing) and :func:`summary_markdown` (the closing reading).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from matplotlib.ticker import MaxNLocator

from hacn_core.beyond.width_connectivity import EXPERIMENT, STUDY_RULES, fixed_control_config
from hacn_core.engine import plots
from hacn_core.engine.registry import Experiment, stored_runs
from hacn_core.engine.results import ResultsStore, RunResult, config_hash, study_config
from hacn_core.engine.stats import Estimate, difference, estimate
from hacn_core.engine.tables import format_value, house_table
from hacn_core.hacn.studies import mixer as hm

RULE_LABELS: dict[str, str] = {"resnet": "ResNet", "acn": "ACN", "hacn": "H-ACN"}
#: what a missing cell means in every table of this module
MISSING_NOTE = ("no run of this cell stored, or none planned (the Mixer has frozen-width twins for H-ACN only); a "
                "single run (no interval); or, for training clocks, no pair of runs trained wholly on one and the "
                "same device")
#: the two controls of question 3, as :func:`against_fixed` names them and as the book shows them
CONTROL_LABELS: dict[str, str] = {"frozen": "frozen-width twin", "fixed": "fixed-width run"}
#: what the two controls of question 3 are (a note for :func:`show` of :func:`against_fixed`)
CONTROLS_NOTE = ("frozen-width twin: the same run with its widths frozen at the start (the rates do not train), the "
                 "only difference; fixed-width run: the fixed-width study's run of the same configuration and seed "
                 "(hacn-mixer-long at the book profile), which also differs in activation (GELU, not ReLU), init "
                 "(PyTorch's default, not kaiming+) and weight prior (none, not N(0, 1)). Accuracies and parameters: "
                 "means over the pairs; differences: learned - control, mean of the per-seed differences")


def task_of(config: dict[str, Any]) -> str:
    """A run's task as the tables name it: ``"Fashion-MNIST, 10 classes"``, ``"SpiralHard"``."""
    if config["setting"] == "stack":
        return config["dataset"]
    name = {"FashionMNIST": "Fashion-MNIST", "CIFAR10": "CIFAR"}[config["dataset"]]
    return f"{name}, {config['num_classes']} classes"


def learns_width(result: RunResult) -> bool:
    """Whether a run learned its width (``learn_width``; False: a frozen-width twin)."""
    return bool(result.config["learn_width"])


def _cells(results: Sequence[RunResult]) -> dict[tuple[str, str], list[RunResult]]:
    """The runs that learn their width grouped by (task, rule), tasks in order of appearance, rules in
    :data:`STUDY_RULES` order, each cell in seed order."""
    cells: dict[tuple[str, str], list[RunResult]] = {}
    for r in results:
        if learns_width(r):
            cells.setdefault((task_of(r.config), r.config["rule"]), []).append(r)
    tasks = list(dict.fromkeys(t for t, _ in cells))
    return {(t, rule): sorted(cells[t, rule], key=lambda r: r.seed or 0)
            for t in tasks for rule in STUDY_RULES if (t, rule) in cells}


def _interval(values: Sequence[float], scale: float = 1.0) -> dict[str, float]:
    """``mean``, ``ci95`` (half-width; NaN for one value) and ``n`` of ``values`` times ``scale``."""
    e = estimate([scale * float(v) for v in values])
    return {"mean": e.mean, "ci95": e.half_width, "n": e.n}


def _with(prefix: str, values: Sequence[float], scale: float = 1.0) -> dict[str, float]:
    est = _interval(values, scale)
    return {f"{prefix}": est["mean"], f"{prefix} ±95%": est["ci95"]}


# ----------------------------------------------------------------------------- reading the store


def fixed_experiment(profile: str) -> Experiment:
    """The experiment whose stored runs are the fixed-width controls: ``hacn-mixer-long`` for the book
    profile (its converged runs), ``hacn-mixer`` for the others (whose configurations the study reuses)."""
    return hm.LONG if profile == "book" else hm.EXPERIMENT


def load(profile: str = "book", *, store: ResultsStore | None = None) -> tuple[list[RunResult], list[RunResult]]:
    """``(runs, controls)``: the stored runs of ``width-connectivity`` at ``profile`` (those that learn
    their width and their frozen-width twins) and the stored fixed-width runs they pair with
    (:func:`fixed_experiment`). Never trains."""
    runs = stored_runs(EXPERIMENT, profile, store=store)
    controls = stored_runs(fixed_experiment(profile), profile, store=store)
    return runs, controls


def paired_controls(results: Sequence[RunResult], controls: Sequence[RunResult]) -> list[tuple[RunResult, RunResult]]:
    """``(adaptive run, fixed control)`` for every Mixer run that learns its width and whose control is
    stored: the control's study configuration is the run's minus the width fields
    (:func:`~hacn_core.beyond.width_connectivity.fixed_control_config`)."""
    by_key = {config_hash(study_config(c.config)): c for c in controls}
    pairs = []
    for r in results:
        if r.config["setting"] != "mixer" or not learns_width(r):
            continue
        control = by_key.get(config_hash(fixed_control_config(study_config(r.config))))
        if control is not None:
            pairs.append((r, control))
    return pairs


def paired_frozen(results: Sequence[RunResult]) -> list[tuple[RunResult, RunResult]]:
    """``(adaptive run, frozen-width twin)`` for every run that learns its width and whose twin is among
    ``results``: the twin's study configuration is the run's with ``learn_width=False``
    (:func:`~hacn_core.beyond.width_connectivity.frozen_width_config`): same task, rule, seed, everything."""
    frozen = {config_hash(study_config(r.config) | {"learn_width": True}): r for r in results if not learns_width(r)}
    pairs = []
    for r in results:
        twin = frozen.get(config_hash(study_config(r.config))) if learns_width(r) else None
        if twin is not None:
            pairs.append((r, twin))
    return pairs


# ----------------------------------------------------------------------------- 1. width against depth


def width_by_depth(results: Sequence[RunResult]):
    """Question 1: the final width ``D_i`` of every layer ``i = 1..L``, per task and rule, over seeds.

    Columns: task, rule, layer, width (mean), width ±95% (half-width of the Student-t
    interval), the starting width and ``n`` (seeds).
    """
    import pandas as pd

    rows = []
    for (task, rule), runs in _cells(results).items():
        finals = np.array([r.curves["final_widths"] for r in runs], dtype=float)  # (seeds, L)
        start = runs[0].curves["widths"][0]
        for layer in range(finals.shape[1]):
            est = _interval(finals[:, layer])
            rows.append({"task": task, "rule": rule, "layer": layer + 1, "width": est["mean"],
                         "width ±95%": est["ci95"], "start width": int(start[layer]), "n": est["n"]})
    return pd.DataFrame(rows, columns=["task", "rule", "layer", "width", "width ±95%", "start width", "n"])


def width_trajectory(results: Sequence[RunResult]):
    """The width of every layer over training, mean over seeds: task, rule, step, layer, width (long format)."""
    import pandas as pd

    rows = []
    for (task, rule), runs in _cells(results).items():
        steps = runs[0].curves["record_step"]
        widths = np.array([r.curves["widths"] for r in runs if r.curves["record_step"] == steps], dtype=float)
        mean = widths.mean(axis=0)  # (records, L)
        for k, step in enumerate(steps):
            for layer, w in enumerate(mean[k]):
                rows.append({"task": task, "rule": rule, "step": int(step), "layer": layer + 1, "width": float(w)})
    return pd.DataFrame(rows, columns=["task", "rule", "step", "layer", "width"])


# ----------------------------------------------------------------------------- 2. Gamma and total width


def gamma_and_width(results: Sequence[RunResult]):
    """Question 2: ``Gamma`` and the total width per task and rule (ResNet's Gamma is 1 and ACN's 0 by
    definition), with the test accuracy beside them; means over seeds with 95% intervals."""
    import pandas as pd

    rows = []
    for (task, rule), runs in _cells(results).items():
        rows.append({"task": task, "rule": rule,
                     **_with("Gamma", [r.metrics["gamma"] for r in runs]),
                     **_with("total width", [r.metrics["total_width"] for r in runs]),
                     "start total width": runs[0].metrics["start_total_width"],
                     **_with("test accuracy (%)", [r.metrics["test_accuracy"] for r in runs], 100.0),
                     "n": len(runs)})
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------- 3. against the fixed-width runs


def against_fixed(results: Sequence[RunResult], controls: Sequence[RunResult] = ()):
    """Question 3: does learning the width cost accuracy, and how many parameters does it save?

    One row per task, rule and control, the runs that learn their width paired seed by seed
    with the control's runs:

    * ``frozen``: the run's frozen-width twin among ``results`` (:func:`paired_frozen`),
      identical but for the width learning: *the* clean comparison, for the Mixer
      (:data:`~hacn_core.beyond.width_connectivity.FROZEN_MIXER_RULES`) and the stack;
    * ``fixed``: the fixed-width ``hacn-mixer-long`` run of ``controls``
      (:func:`paired_controls`), Mixer only; it differs in activation, init and weight
      prior too (:data:`CONTROLS_NOTE`), so its difference is not width learning's alone.

    Columns: the number of pairs; the test accuracy (%) of the width-learning runs and of
    their controls (means over the pairs); their paired difference in points (mean of the
    per-seed differences, with the half-width of its 95% Student-t interval) and the same at
    the middle exit (H-ACN Sec. 3.1); the parameters of both at the end of training and the
    share saved. A control with no stored pair has no row, so no cell is empty for want of
    a run.
    """
    import pandas as pd

    cells: dict[tuple[str, str, str], list[tuple[RunResult, RunResult]]] = {}
    for name, pairs in (("frozen", paired_frozen(results)), ("fixed", paired_controls(results, controls))):
        for run, control in pairs:
            cells.setdefault((task_of(run.config), run.config["rule"], name), []).append((run, control))
    rows = []
    for (task, rule, name), pairs in cells.items():
        m = [(r.metrics, c.metrics) for r, c in pairs]
        learned, fixed = (float(np.mean([x[k]["parameters"] for x in m])) for k in (0, 1))
        rows.append({"task": task, "rule": rule, "control": name, "pairs": len(pairs),
                     "learned acc (%)": 100 * float(np.mean([r["test_accuracy"] for r, _ in m])),
                     "control acc (%)": 100 * float(np.mean([c["test_accuracy"] for _, c in m])),
                     **_with("difference (points)", [r["test_accuracy"] - c["test_accuracy"] for r, c in m], 100.0),
                     "middle exit difference (points)": 100 * float(np.mean(
                         [r["first_half_exit_accuracy"] - c["first_half_exit_accuracy"] for r, c in m])),
                     "learned parameters": learned, "control parameters": fixed,
                     "parameters saved (%)": 100 * (1 - learned / fixed)})
    order = {rule: i for i, rule in enumerate(STUDY_RULES)}
    rows.sort(key=lambda row: (row["task"], order[row["rule"]], row["control"] != "frozen"))
    return pd.DataFrame(rows)


#: the two halves of question 3's table, as the chapter shows them (each with the task, rule and control)
AGAINST_FIXED_PARTS: dict[str, list[str]] = {
    "accuracy": ["pairs", "learned acc (%)", "control acc (%)", "difference (points)", "difference (points) ±95%",
                 "middle exit difference (points)"],
    "parameters": ["pairs", "learned parameters", "control parameters", "parameters saved (%)"],
}


def against_fixed_part(frame, part: str):
    """One half of :func:`against_fixed`'s table (:data:`AGAINST_FIXED_PARTS`): ``"accuracy"`` or
    ``"parameters"``, so that each fits the page beside its panel of :func:`plot_against_fixed`."""
    if part not in AGAINST_FIXED_PARTS:
        raise ValueError(f"part={part!r}: must be one of {sorted(AGAINST_FIXED_PARTS)}")
    return frame[["task", "rule", "control", *AGAINST_FIXED_PARTS[part]]]


# ----------------------------------------------------------------------------- 4. time per step


def training_device(run: RunResult) -> str | None:
    """The one device ``run`` trained on (its provenance ``device``), or None: a run resumed on another
    device names each of them (``"A; B"``), and its clock mixes their speeds."""
    device = run.provenance.get("device")
    return device if isinstance(device, str) and device and "; " not in device else None


def same_device(pairs: Sequence[tuple[RunResult, RunResult]]) -> list[tuple[RunResult, RunResult]]:
    """The pairs whose two runs each trained wholly on one and the same device: the only pairs whose
    training clocks can be compared (another CPU, or a segment on a GPU, changes the clock by far more
    than width learning does)."""
    return [(a, b) for a, b in pairs if training_device(a) is not None and training_device(a) == training_device(b)]


def time_per_step(results: Sequence[RunResult], controls: Sequence[RunResult] = ()):
    """Question 4: milliseconds per optimizer step, side by side, per task and rule (medians over seeds).

    In one process, one thread, interleaved (the fair comparison): the trained adaptive
    model with its width update, its fixed-width twin at the learned widths, the
    fixed-width control at its own width, and the adaptive/fixed ratio. The frozen arm:
    the frozen-width twin's step over the same fixed-width control, measured in its own
    run the same way (a ratio, so the two processes' different loads cancel), where
    the twin is stored; and the trainings' own clocks, the width-learning run's wall time per
    step over its frozen twin's, for the pairs trained on one and the same device
    (:func:`same_device`; other jobs on the machine slow the two trainings by different
    amounts: read it as rough). ``controls`` is accepted for symmetry with the other
    questions: the fixed-width runs' clocks are not compared, since they trained elsewhere.
    """
    import pandas as pd

    def by_cell(pairs, value) -> dict[tuple[str, str], list[float]]:
        out: dict[tuple[str, str], list[float]] = {}
        for run, other in pairs:
            out.setdefault((task_of(run.config), run.config["rule"]), []).append(value(run, other))
        return out

    frozen = paired_frozen(results)
    frozen_ratio = by_cell(frozen, lambda _, t: t.metrics["adaptive/ratio_to_fixed"])
    clock = by_cell(same_device(frozen), lambda r, t: r.metrics["seconds_per_step"] / t.metrics["seconds_per_step"])

    def median(values: list[float] | None) -> float:
        return float(np.median(values)) if values else float("nan")  # NaN: a float column even when all missing

    rows = []
    for (task, rule), runs in _cells(results).items():
        def med(key: str) -> float:
            return float(np.median([r.metrics[key] for r in runs]))

        rows.append({"task": task, "rule": rule, "adaptive (ms)": med("adaptive/ms_per_step"),
                     "twin at learned widths (ms)": med("twin/ms_per_step"),
                     "fixed control (ms)": med("fixed/ms_per_step"),
                     "adaptive / fixed": med("adaptive/ratio_to_fixed"),
                     "frozen twin / fixed": median(frozen_ratio.get((task, rule))),
                     "training clock, learned / frozen": median(clock.get((task, rule))),
                     "n": len(runs)})
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------- 5. the truncation grid


def truncation_table(results: Sequence[RunResult], task: str, rule: str, exits: Sequence[int] | None = None):
    """Question 5: test accuracy (%) of every (kept width fraction, exit depth) pair of one task and rule.

    Rows: the kept fraction of every layer's width (1 = the trained widths); columns:
    the exits (``exits``, default all ``0..L``), mean over seeds; last column the
    parameters of the full-depth network at that fraction (mean over seeds).
    """
    import pandas as pd

    runs = _cells(results).get((task, rule), [])
    if not runs:
        return pd.DataFrame()
    acc = np.array([r.curves["truncation_accuracy"] for r in runs], dtype=float).mean(axis=0)  # (F, L + 1)
    params = np.array([[p[-1] for p in r.curves["truncation_parameters"]] for r in runs], dtype=float).mean(axis=0)
    exits = list(range(acc.shape[1])) if exits is None else list(exits)
    bad = [d for d in exits if not 0 <= d < acc.shape[1]]
    if bad:
        raise ValueError(f"exits={bad} out of range; allowed: 0..{acc.shape[1] - 1}")
    frame = pd.DataFrame(100 * acc[:, exits], columns=[f"exit {d}" for d in exits])
    frame.insert(0, "kept width", runs[0].curves["truncation_fractions"])
    frame["parameters (all layers)"] = params
    return frame


# ----------------------------------------------------------------------------- around the questions


def coverage_table(planned: Sequence[dict[str, Any]], results: Sequence[RunResult],
                   controls: Sequence[RunResult] = ()):
    """Which cells of the study are stored: per task, rule and arm (the width learned, or frozen at its start),
    the seeds planned and the seeds stored; for the Mixer runs that learn their width, the seeds whose
    fixed-width control (``hacn-mixer-long`` at the book profile) is stored too. ``planned``: the study's
    configurations at a profile (``EXPERIMENT.runs(profile)``)."""
    import pandas as pd

    stored = {config_hash(study_config(r.config)) for r in results}
    have_control = {config_hash(study_config(c.config)) for c in controls}
    cells: dict[tuple[str, str, str, str], dict[str, list[int]]] = {}
    for c in planned:
        arm = "learned" if c["learn_width"] else "frozen at its start"
        key = (c["setting"], task_of(c), c["rule"], arm)
        cell = cells.setdefault(key, {"planned": [], "stored": [], "controls": []})
        cell["planned"].append(c["seed"])
        if config_hash(c) in stored:
            cell["stored"].append(c["seed"])
        if c["setting"] == "mixer" and c["learn_width"] and config_hash(fixed_control_config(c)) in have_control:
            cell["controls"].append(c["seed"])
    rows = []
    for (setting, task, rule, arm), cell in cells.items():
        mixer_learning = setting == "mixer" and arm == "learned"
        rows.append({"task": task, "rule": rule, "width": arm, "seeds planned": len(cell["planned"]),
                     "seeds stored": len(cell["stored"]),
                     "which seeds": ", ".join(map(str, sorted(cell["stored"]))) or "none",
                     "fixed-width controls stored": (", ".join(map(str, sorted(cell["controls"]))) or "none")
                     if mixer_learning else "none planned"})
    return pd.DataFrame(rows)


def steps_per_run(config: dict[str, Any]) -> int:
    """The optimizer steps of one run: its epochs (the Mixer's equal-step rule for 2 classes) times
    ``ceil(training examples / batch)``, from the run's dry-run plan (no data is loaded)."""
    plan = EXPERIMENT.plan(config)
    return plan.train.epochs * math.ceil(plan.n_train / plan.train.batch_size)


def budget_table(planned: Sequence[dict[str, Any]], results: Sequence[RunResult], cost: RunResult | None = None):
    """The profile's arithmetic per setting: runs planned, optimizer steps per run, the measured CPU
    milliseconds of one step and what they add up to.

    The step time is the median of the stored runs' own interleaved measurement (``adaptive/ms_per_step``,
    one thread) where runs are stored; before that, for the Mixer, ``cost``'s (the ``hacn-mixer-cost``
    run: the fixed-width H-ACN Mixer of the same size, measured the same way); otherwise missing.
    """
    import pandas as pd

    rows = []
    for setting in ("mixer", "stack"):
        configs = [c for c in planned if c["setting"] == setting]
        if not configs:
            continue
        steps = [steps_per_run(c) for c in configs]
        measured = [r.metrics["adaptive/ms_per_step"] for r in results
                    if r.config["setting"] == setting and "adaptive/ms_per_step" in r.metrics]
        if measured:
            ms, source = float(np.median(measured)), f"this study's stored runs (median of {len(measured)})"
        elif setting == "mixer" and cost is not None and "hacn/ms_per_step" in cost.metrics:
            ms, source = float(cost.metrics["hacn/ms_per_step"]), "hacn-mixer-cost: the fixed-width H-ACN Mixer"
        else:
            ms, source = np.nan, "not measured"
        rows.append({"setting": {"mixer": "H-ACN Mixer", "stack": "MLP stack"}[setting], "runs planned": len(configs),
                     "steps per run": int(np.median(steps)), "ms per step": ms, "measured by": source,
                     "CPU-hours, all runs": ms * sum(steps) / 3.6e6})
    return pd.DataFrame(rows)


#: what each question needs stored before its section can show anything
_NEEDS: dict[int, str] = {
    1: "No run that learns its width is stored, so the learned widths cannot be drawn against depth.",
    2: "No Mixer run that learns its width is stored, so Γ and the width cannot be compared between "
       "the 10-class and the 2-class task.",
    3: "No run is stored together with its frozen-width twin or its fixed-width control, so the cost "
       "in accuracy and the saving in parameters cannot be measured.",
    4: "No run that learns its width is stored, so its time per step cannot be set beside the fixed-width "
       "network's.",
    5: "No run that learns its width is stored, so there is no truncation grid to show.",
}


def missing_sentence(question: int, results: Sequence[RunResult], controls: Sequence[RunResult] = ()) -> str:
    """One plain sentence saying why question ``question`` (1-5) has nothing to show yet, or ``""`` when its
    section has stored runs to show."""
    if question not in _NEEDS:
        raise ValueError(f"question={question!r}; allowed: {', '.join(map(str, _NEEDS))}")
    learning = [r for r in results if learns_width(r)]
    has = {1: bool(learning), 4: bool(learning), 5: bool(learning),
           2: any(r.config["setting"] == "mixer" for r in learning),
           3: bool(paired_frozen(results) or paired_controls(results, controls))}[question]
    return "" if has else _NEEDS[question]


# ----------------------------------------------------------------------------- verdicts

#: question 3: learning the width "costs no accuracy" when the whole 95% interval of the paired difference
#: (adaptive - control) lies above -NO_COST_POINTS points; "does not hold" when it lies wholly below
NO_COST_POINTS = 1.0
#: question 5: a cut network "keeps the accuracy" when it is at most CUT_POINTS points below the full one
CUT_POINTS = 1.0
#: the rule questions 3 and 4 judge (the tables show every rule): the fixed-width H-ACN is the comparison asked
VERDICT_RULE = "hacn"
QUESTIONS: dict[int, str] = {
    1: "Does auto-compression show in the learned widths?",
    2: "Do the residual weights and the widths follow task difficulty together?",
    3: "What does learning the width cost in accuracy, and how many parameters does it save?",
    4: "What does learning the width cost in time per step?",
    5: "How do layer-wise exits and width truncation combine?",
}
VERDICT_LABELS: dict[bool, str] = {True: "holds", False: "does not hold"}
CANNOT_TELL = "cannot be told from the stored runs (a single seed, or a 95% interval across the threshold)"


def above(est: Estimate, threshold: float = 0.0) -> bool | None:
    """Is the quantity ``est`` estimates above ``threshold``? True when its whole 95% interval is; False when
    the whole interval is below, or the interval has width 0 (every run gave the same value) and sits at or
    below ``threshold``; None when the interval crosses ``threshold`` or there is none (one run)."""
    mean, half = float(est.mean), float(est.half_width)
    if not math.isfinite(half):
        return None
    if mean - half > threshold:
        return True
    if mean + half < threshold or (half == 0 and mean <= threshold):
        return False
    return None


def _fmt(est: Estimate, unit: str = "", digits: int = 1, signed: bool = True) -> str:
    """``+x ± w unit (n=k)``, or ``+x unit (n=1, no interval)``."""
    value = format_value(est.mean, f"{'+' if signed else ''}.{digits}f")  # -0.03 is +0.0, as in the tables
    unit = unit if unit in ("", "%", "×") else f" {unit}"  # 2.5%, 1.10×, 3 points
    if not math.isfinite(est.half_width):
        return f"{value}{unit} (n={est.n}, no interval)"
    return f"{value} ± {est.half_width:.{digits}f}{unit} (n={est.n})"


def first_half_width_share(widths: Sequence[float]) -> float:
    """The share of the total width ``sum_i D_i`` held by the first half of the ``L`` layers (a middle layer of
    an odd ``L`` counts half): 0.5 when every layer is equally wide, above 0.5 when the early layers are wider."""
    w = np.asarray(widths, dtype=float)
    if w.ndim != 1 or not len(w) or w.sum() <= 0:
        raise ValueError(f"widths={list(widths)!r} must be a non-empty list of widths with a positive sum")
    in_first_half = np.clip(len(w) / 2 - np.arange(len(w)), 0.0, 1.0)  # 1, ..., 1, (0.5), 0, ..., 0
    return float((in_first_half * w).sum() / w.sum())


def cut_savings(run: RunResult, points: float = CUT_POINTS) -> dict[str, float]:
    """The smallest network cut from ``run`` that keeps its accuracy within ``points`` points (question 5).

    From the run's truncation grid (accuracy and parameters at every kept width fraction ``r`` and exit
    ``d``): the parameters kept, as a fraction of the full network's (``r = 1``, ``d = L``), by the
    smallest qualifying cut along the exits alone (``r = 1``), along the widths alone (``d = L``) and over
    the whole grid; ``gain`` = the better single cut minus the combined one (>= 0: the grid holds both
    lines); ``fraction`` and ``exit`` locate the combined cut. The cut is chosen on the test accuracy the
    grid holds: a description of what the trained network allows, not a model selection.
    """
    fractions = list(run.curves["truncation_fractions"])
    acc = np.asarray(run.curves["truncation_accuracy"], dtype=float)  # (F, L + 1)
    params = np.asarray(run.curves["truncation_parameters"], dtype=float)  # (F, L + 1)
    full = int(np.argmax(fractions))  # the untruncated row (fraction 1)
    keeps = acc >= acc[full, -1] - points / 100 - 1e-12  # (F, L + 1); the full network itself always qualifies
    total = params[full, -1]
    exits = params[full][keeps[full]].min() / total
    widths = params[:, -1][keeps[:, -1]].min() / total
    masked = np.where(keeps, params, np.inf)
    f, d = np.unravel_index(int(np.argmin(masked)), masked.shape)
    both = masked[f, d] / total
    return {"full accuracy": float(acc[full, -1]), "exits only": float(exits), "widths only": float(widths),
            "both": float(both), "gain": float(min(exits, widths) - both), "fraction": float(fractions[f]),
            "exit": int(d)}


def cut_table(results: Sequence[RunResult], points: float = CUT_POINTS):
    """Question 5 per task and rule: the full network's test accuracy and the parameters (% of the full
    network's) of the smallest cut that keeps it within ``points`` points: along the exits, along the widths,
    and both together (:func:`cut_savings`; means over seeds)."""
    import pandas as pd

    rows = []
    for (task, rule), runs in _cells(results).items():
        cuts = [cut_savings(r, points) for r in runs]
        rows.append({"task": task, "rule": rule,
                     "full accuracy (%)": 100 * float(np.mean([c["full accuracy"] for c in cuts])),
                     "kept by exits alone (%)": 100 * float(np.mean([c["exits only"] for c in cuts])),
                     "kept by truncation alone (%)": 100 * float(np.mean([c["widths only"] for c in cuts])),
                     "kept by both (%)": 100 * float(np.mean([c["both"] for c in cuts])), "n": len(runs)})
    return pd.DataFrame(rows)


def _row(question: int, task: str, claim: str, ours: str, verdict: bool | None) -> dict[str, Any]:
    return {"question": question, "task": task, "claim": claim, "ours": ours, "verdict": verdict}


def _mixer_task_pairs(cells: dict[tuple[str, str], list[RunResult]]) -> list[tuple[str, str, str]]:
    """``(label, harder task, easier task)`` for every Mixer dataset with both its class counts stored."""
    by_dataset: dict[str, dict[int, str]] = {}
    for (task, _rule), runs in cells.items():
        c = runs[0].config
        if c["setting"] == "mixer":
            by_dataset.setdefault(task.split(",")[0], {})[c["num_classes"]] = task
    return [(f"{name}, {max(t)} vs {min(t)} classes", t[max(t)], t[min(t)])
            for name, t in by_dataset.items() if len(t) >= 2]


def _q1_rows(results: Sequence[RunResult]) -> list[dict[str, Any]]:
    """Auto-compression in the widths: the first-half share of ACN's and H-ACN's width against the ResNet's."""
    cells = _cells(results)
    rows = []
    for task in dict.fromkeys(t for t, _ in cells):
        base = [100 * first_half_width_share(r.curves["final_widths"]) for r in cells.get((task, "resnet"), [])]
        for rule in ("acn", "hacn"):
            runs = cells.get((task, rule), [])
            if not runs or not base:
                continue
            share = [100 * first_half_width_share(r.curves["final_widths"]) for r in runs]
            d = difference(share, base)
            rows.append(_row(1, task, f"{RULE_LABELS[rule]} puts more of its learned width in its first half of "
                                      "layers than the ResNet",
                             f"first-half share {np.mean(share):.1f}% against {np.mean(base):.1f}% (50% at the "
                             f"start); difference {_fmt(d, 'points')}", above(d)))
    return rows


def _q2_rows(results: Sequence[RunResult]) -> list[dict[str, Any]]:
    """Task difficulty: total width (every rule) and Gamma (H-ACN) larger on the harder task, and both together."""
    cells = _cells(results)
    rows = []
    for label, hard, easy in _mixer_task_pairs(cells):
        width_verdict = {}
        for rule in STUDY_RULES:
            a, b = cells.get((hard, rule), []), cells.get((easy, rule), [])
            if not a or not b:
                continue
            d = difference([r.metrics["total_width"] for r in a], [r.metrics["total_width"] for r in b])
            width_verdict[rule] = above(d)
            rows.append(_row(2, label, f"{RULE_LABELS[rule]} learns a larger total width on the harder task",
                             f"total width {np.mean([r.metrics['total_width'] for r in a]):,.0f} against "
                             f"{np.mean([r.metrics['total_width'] for r in b]):,.0f} neurons; difference "
                             f"{_fmt(d, 'neurons', 0)}", width_verdict[rule]))
        a, b = cells.get((hard, "hacn"), []), cells.get((easy, "hacn"), [])
        if a and b:
            d = difference([r.metrics["gamma"] for r in a], [r.metrics["gamma"] for r in b])
            gamma = above(d)
            rows.append(_row(2, label, "H-ACN's Γ is larger on the harder task (as H-ACN Table 3 finds at fixed "
                                       "width)", f"Γ difference {_fmt(d, digits=3)}", gamma))
            width = width_verdict.get("hacn")
            both = False if False in (gamma, width) else (True if gamma and width else None)
            rows.append(_row(2, label, "H-ACN's Γ and total width both grow with task difficulty",
                             f"Γ: {VERDICT_LABELS.get(gamma, 'cannot be told')}; width: "
                             f"{VERDICT_LABELS.get(width, 'cannot be told')}", both))
    return rows


def control_name(kind: str, pairs: Sequence[tuple[RunResult, RunResult]] = ()) -> str:
    """How a claim names a control: ``frozen``, the run's frozen-width twin; ``fixed``, the fixed-width run of
    the controls' experiment (``hacn-mixer-long`` at the book profile, ``hacn-mixer`` otherwise)."""
    if kind == "frozen":
        return "its frozen-width twin"
    experiment = pairs[0][1].experiment if pairs else hm.LONG_ID
    return f"the fixed-width {experiment} run (which also differs in activation, init and prior)"



def _by_task(pairs: Sequence[tuple[RunResult, RunResult]], rule: str) -> dict[str, list[tuple[RunResult, RunResult]]]:
    out: dict[str, list[tuple[RunResult, RunResult]]] = {}
    for run, control in pairs:
        if run.config["rule"] == rule:
            out.setdefault(task_of(run.config), []).append((run, control))
    return out


def _q3_rows(results: Sequence[RunResult], controls: Sequence[RunResult]) -> list[dict[str, Any]]:
    """Accuracy and parameters of the width-learning H-ACN against each control, paired seed by seed."""
    rows = []
    for name, pairs in (("frozen", paired_frozen(results)), ("fixed", paired_controls(results, controls))):
        for task, cell in _by_task(pairs, VERDICT_RULE).items():
            acc = estimate([100 * (r.metrics["test_accuracy"] - c.metrics["test_accuracy"]) for r, c in cell])
            rows.append(_row(3, task, f"Learning the width costs H-ACN at most {NO_COST_POINTS:g} point of test "
                                      f"accuracy against {control_name(name, cell)}",
                             f"paired difference {_fmt(acc, 'points')}", above(acc, -NO_COST_POINTS)))
            saved = estimate([100 * (1 - r.metrics["parameters"] / c.metrics["parameters"]) for r, c in cell])
            rows.append(_row(3, task, f"Learning the width saves H-ACN parameters against {control_name(name, cell)}",
                             f"{np.mean([r.metrics['parameters'] for r, _ in cell]):,.0f} against "
                             f"{np.mean([c.metrics['parameters'] for _, c in cell]):,.0f} parameters; saved "
                             f"{_fmt(saved, '%')}", above(saved)))
    return rows


def _q4_rows(results: Sequence[RunResult]) -> list[dict[str, Any]]:
    """Time per step of the width-learning H-ACN: interleaved against the fixed-width control, and the training
    clocks against the frozen-width twin."""
    rows = []
    cells = _cells(results)
    frozen = _by_task(paired_frozen(results), VERDICT_RULE)
    for (task, rule), runs in cells.items():
        if rule != VERDICT_RULE:
            continue
        ratio = estimate([r.metrics["adaptive/ratio_to_fixed"] for r in runs])
        twin = np.median([r.metrics["twin/ratio_to_fixed"] for r in runs])
        rows.append(_row(4, task, "A width-learning H-ACN step takes longer than a fixed-width H-ACN step "
                                  "(one process, interleaved)",
                         f"time ÷ fixed-width control {_fmt(ratio, '×', 2, signed=False)}; the fixed-width twin "
                         f"at the learned widths {twin:.2f}×", above(ratio, 1.0)))
        if pairs := same_device(frozen.get(task, [])):  # a clock compares only on one and the same device
            clock = estimate([r.metrics["seconds_per_step"] / t.metrics["seconds_per_step"] for r, t in pairs])
            rows.append(_row(4, task, "Training with width learning takes longer per step than its frozen-width "
                                      "twin (the trainings' own clocks, pairs trained on one and the same device)",
                             f"training clock ÷ the frozen twin's {_fmt(clock, '×', 2, signed=False)}",
                             above(clock, 1.0)))
    return rows


def _q5_rows(results: Sequence[RunResult], points: float = CUT_POINTS) -> list[dict[str, Any]]:
    """Exits and truncation combined: does the combined cut keep the accuracy with fewer parameters?"""
    rows = []
    for (task, rule), runs in _cells(results).items():
        cuts = [cut_savings(r, points) for r in runs]
        gain = estimate([100 * c["gain"] for c in cuts])
        rows.append(_row(5, task, f"{RULE_LABELS[rule]}: cutting depth and width together keeps the accuracy "
                                  f"(within {points:g} point) with fewer parameters than either cut alone",
                         f"parameters kept: exits alone {100 * np.mean([c['exits only'] for c in cuts]):.0f}%, "
                         f"truncation alone {100 * np.mean([c['widths only'] for c in cuts]):.0f}%, both "
                         f"{100 * np.mean([c['both'] for c in cuts]):.0f}%; saved beyond each seed's better single cut "
                         f"{_fmt(gain, 'points')}",
                         above(gain)))
    return rows


def verdicts(results: Sequence[RunResult], controls: Sequence[RunResult] = ()):
    """Every question's claims judged on the stored runs: question, task, claim, ours (the evidence), verdict.

    A verdict is True ("holds") when the 95% interval of the quantity lies wholly on the claim's side of its
    threshold, False ("does not hold") when it lies wholly on the other side, None ("cannot be told") when it
    straddles the threshold or rests on one run (:func:`above`). Intervals: Welch's for a difference between
    two cells of different runs (questions 1, 2), Student-t of the per-seed values or paired differences
    otherwise. Thresholds are the module's constants (:data:`NO_COST_POINTS`, :data:`CUT_POINTS`). A claim
    whose cells have no stored run yet has no row.
    """
    import pandas as pd

    rows = (_q1_rows(results) + _q2_rows(results) + _q3_rows(results, controls) + _q4_rows(results)
            + _q5_rows(results))
    frame = pd.DataFrame(rows, columns=["question", "task", "claim", "ours", "verdict"])
    frame["verdict"] = pd.Series([r["verdict"] for r in rows], dtype=object)  # True / False / None, not numpy bools
    return frame


def show_verdicts(frame, question: int | None = None, task: str | None = None):
    """The verdict rows of :func:`verdicts` as the house table (verdicts as words, None explained): those of
    question ``question`` (without the question column), or of every question; of ``task`` only if given
    (without the task column)."""
    rows = frame
    if question is not None:
        rows = rows[rows["question"] == question].drop(columns="question")
    if task is not None:
        rows = rows[rows["task"] == task].drop(columns="task")
    return house_table(rows.reset_index(drop=True), labels={"verdict": VERDICT_LABELS}, missing_note=CANNOT_TELL)


def summary_markdown(frame, n_runs: int) -> str:
    """The chapter's closing reading, written from the verdicts (Markdown without TeX: a notebook's Markdown
    output is not typeset). ``n_runs``: the stored runs that learn their width."""
    if n_runs == 0:
        return ("No run of this study that learns its width is stored for this profile, so none of the five "
                "questions has an answer here. The coverage table at the top says which runs exist; every "
                "section fills in as the background trainings store them.")
    lines = []
    for q, title in QUESTIONS.items():
        rows = frame[frame["question"] == q]
        if not len(rows):
            lines.append(f"- **{q}. {title}** Undecided: no stored pair of cells decides it.")
            continue
        decided = rows[rows["verdict"].notna()]
        parts = [f"{r.task}: {r.claim} — **{VERDICT_LABELS[bool(r.verdict)]}** ({r.ours})"
                 for r in decided.itertuples()]
        head = f"- **{q}. {title}** {len(decided)} of {len(rows)} claims decided"
        lines.append(head + (":" if parts else "; the others cannot be told (one seed, or an interval "
                                               "across the threshold)."))
        lines += [f"  - {p}." for p in parts]
    return "\n".join(lines)


# ----------------------------------------------------------------------------- figures

_COLOURS = plots.categorical(STUDY_RULES)  # ResNet, ACN, H-ACN: the same colours as the Mixer chapters
_START = "0.45"  # the starting width: a grey reference line


def _band(ax, x, mean, half, **style) -> None:
    """``mean`` as a line, ``mean ± half`` (a 95% interval) as a band where it exists."""
    (line,) = ax.plot(x, mean, **style)
    half = np.asarray(half, dtype=float)
    if np.isfinite(half).any():
        ax.fill_between(x, mean - half, mean + half, color=line.get_color(), alpha=0.2, linewidth=0)


def _tasks(results: Sequence[RunResult]) -> list[str]:
    return list(dict.fromkeys(t for t, _ in _cells(results)))


def plot_width_by_depth(results: Sequence[RunResult]):
    """Question 1: the learned width of every layer against its depth, one panel per task, one line per rule
    (mean over seeds, band: 95% Student-t interval), the starting width as a grey line."""
    frame = width_by_depth(results)
    tasks = _tasks(results)
    fig, axes = plots.figure(ncols=len(tasks))
    for ax, task in zip(axes[0], tasks):
        for rule in STUDY_RULES:
            rows = frame[(frame["task"] == task) & (frame["rule"] == rule)]
            if len(rows):
                _band(ax, rows["layer"].to_numpy(), rows["width"].to_numpy(), rows["width ±95%"].to_numpy(),
                      label=RULE_LABELS[rule], color=_COLOURS[rule], marker="o", markersize=3)
        start = frame[frame["task"] == task]["start width"]
        ax.axhline(float(start.iloc[0]), color=_START, linestyle=":", linewidth=1.0, label="starting width")
        ax.set_title(task)
        ax.set_xlabel("layer i")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    axes[0][0].set_ylabel("learned width D_i (neurons)")
    plots.figure_legend(fig)
    return fig


def plot_width_over_training(results: Sequence[RunResult]):
    """The total width over training as a percentage of its start, one panel per task, one line per rule
    (mean and standard error over the seeds): are the widths still moving at the end?"""
    tasks = _tasks(results)
    fig, axes = plots.figure(ncols=len(tasks), height=2.6)
    for ax, task in zip(axes[0], tasks):
        for rule in STUDY_RULES:
            runs = _cells(results).get((task, rule), [])
            runs = [r for r in runs if r.curves["record_step"] == runs[0].curves["record_step"]] if runs else []
            if runs:
                steps = np.asarray(runs[0].curves["record_step"], dtype=float)
                total = np.array([np.asarray(r.curves["total_width"], float) / r.curves["total_width"][0]
                                  for r in runs])
                plots.with_ci(ax, 100 * steps / steps[-1], 100 * total, label=RULE_LABELS[rule], color=_COLOURS[rule])
        ax.axhline(100, color=_START, linestyle=":", linewidth=1.0, label="start")
        ax.set_title(task)
        ax.set_xlabel("training progress (% of steps)")
    axes[0][0].set_ylabel("total width (% of start)")
    plots.figure_legend(fig)
    return fig


def plot_gamma_and_width(results: Sequence[RunResult]):
    """Question 2: (a) every H-ACN run's Γ against its total width (% of its start), one colour per task;
    (b) the total width (% of start) of every rule and task, one point per run and the mean."""
    cells = _cells(results)
    tasks = _tasks(results)
    task_colour = plots.categorical(tasks)
    fig, axes = plots.figure(ncols=2)
    ax_a, ax_b = axes[0]
    width = 0.8 / max(len(tasks), 1)
    for i, task in enumerate(tasks):
        hacn = cells.get((task, "hacn"), [])
        if hacn:
            ax_a.plot([r.metrics["gamma"] for r in hacn],
                      [100 * r.metrics["total_width"] / r.metrics["start_total_width"] for r in hacn],
                      linestyle="none", marker="o", color=task_colour[task], label=task)
        for j, rule in enumerate(STUDY_RULES):
            runs = cells.get((task, rule), [])
            if runs:
                x = j + (i - (len(tasks) - 1) / 2) * width
                y = [100 * r.metrics["total_width"] / r.metrics["start_total_width"] for r in runs]
                ax_b.plot([x] * len(y), y, linestyle="none", marker="o", markersize=3, alpha=0.6,
                          color=task_colour[task])
                ax_b.plot([x - width / 3, x + width / 3], [np.mean(y)] * 2, color=task_colour[task], linewidth=2)
    ax_a.set_xlabel("Γ = ‖a‖₂ / √L (H-ACN)")
    ax_a.set_ylabel("total width (% of start)")
    ax_a.set_title("(a) H-ACN, one point per run")
    ax_b.set_xticks(range(len(STUDY_RULES)), [RULE_LABELS[r] for r in STUDY_RULES])
    ax_b.set_title("(b) every rule: runs and their mean")
    for ax in (ax_a, ax_b):
        ax.axhline(100, color=_START, linestyle=":", linewidth=1.0)
    plots.figure_legend(fig)
    return fig


def _row_labels(cells) -> list[str]:
    """Axis labels ``"task · Rule"`` of ``(task, rule)`` pairs."""
    return [f"{t} · {RULE_LABELS[r]}" for t, r in cells]


def plot_against_fixed(results: Sequence[RunResult], controls: Sequence[RunResult] = ()):
    """Question 3: (a) test accuracy of the width-learning run minus its control (paired, mean and 95%
    interval), (b) parameters saved against the control (%), one row per task and rule, one colour per
    control (frozen-width twin, fixed-width run)."""
    frame = against_fixed(results, controls)
    cells = list(dict.fromkeys(zip(frame["task"], frame["rule"])))  # the rows, in the table's order
    colour = plots.categorical(list(CONTROL_LABELS))
    fixed_id = controls[0].experiment if len(controls) else hm.LONG_ID
    names = {"frozen": CONTROL_LABELS["frozen"], "fixed": f"{CONTROL_LABELS['fixed']} ({fixed_id})"}
    fig, axes = plots.figure(ncols=2, height=0.9 + 0.32 * max(len(cells), 1), sharey=True)
    ax_a, ax_b = axes[0]
    for k, name in enumerate(CONTROL_LABELS):
        part = frame[frame["control"] == name]
        if not len(part):
            continue
        y = np.array([cells.index(cell) for cell in zip(part["task"], part["rule"])]) + (k - 0.5) * 0.25
        ax_a.errorbar(part["difference (points)"].to_numpy(float), y, linestyle="none", marker="o", markersize=4,
                      xerr=np.nan_to_num(part["difference (points) ±95%"].to_numpy(float)), capsize=2,
                      color=colour[name], label=names[name])
        ax_b.plot(part["parameters saved (%)"].to_numpy(float), y, linestyle="none", marker="o", markersize=4,
                  color=colour[name])
    ax_a.axvline(0, color=_START, linewidth=0.8)
    ax_a.axvspan(-NO_COST_POINTS, 0, color=_START, alpha=0.1, linewidth=0)
    ax_b.axvline(0, color=_START, linewidth=0.8)
    ax_a.set_yticks(np.arange(len(cells)), _row_labels(cells))
    ax_a.invert_yaxis()
    ax_a.set_xlabel("accuracy, learned − control (points)")
    ax_b.set_xlabel("parameters saved (%)")
    plots.figure_legend(fig)
    return fig


def plot_time_per_step(results: Sequence[RunResult]):
    """Question 4: CPU milliseconds per optimizer step, measured in one process, interleaved: the
    width-learning model (with its width update), the fixed-width twin at its learned widths and the
    fixed-width control at its own width; one row per task and rule."""
    frame = time_per_step(results)
    series = {"adaptive (ms)": "width learned", "twin at learned widths (ms)": "fixed twin at the learned widths",
              "fixed control (ms)": "fixed-width control"}
    colour = plots.categorical(list(series))
    fig, axes = plots.figure(height=0.9 + 0.4 * max(len(frame), 1))
    ax = axes[0][0]
    y = np.arange(len(frame))
    for k, (column, label) in enumerate(series.items()):
        ax.barh(y + (k - 1) * 0.27, frame[column].to_numpy(float), height=0.27, color=colour[column], label=label)
    ax.set_yticks(y, _row_labels(zip(frame["task"], frame["rule"])))
    ax.invert_yaxis()
    ax.set_xlabel("CPU ms per optimizer step (one thread)")
    plots.legend(ax, outside="below")
    return fig


def plot_truncation_grid(results: Sequence[RunResult], points: float = CUT_POINTS):
    """Question 5: test accuracy at every exit depth (x) for every kept width fraction (one line each), one row
    of panels per task and one column per rule (mean over seeds); the dotted line is ``points`` points below
    the full network (the accuracy a cut must keep)."""
    tasks = _tasks(results)
    cells = _cells(results)
    fractions = sorted({f for runs in cells.values() for r in runs for f in r.curves["truncation_fractions"]},
                       reverse=True)
    colour = plots.categorical(fractions)
    fig, axes = plots.figure(ncols=len(STUDY_RULES), nrows=len(tasks), height=2.1, sharey="row")
    for i, task in enumerate(tasks):
        for j, rule in enumerate(STUDY_RULES):
            ax = axes[i][j]
            runs = cells.get((task, rule), [])
            if i == 0:
                ax.set_title(RULE_LABELS[rule])
            if not runs:
                ax.text(0.5, 0.5, "not stored", ha="center", va="center", transform=ax.transAxes, color=_START)
                continue
            acc = 100 * np.array([r.curves["truncation_accuracy"] for r in runs], dtype=float).mean(axis=0)
            exits = np.arange(acc.shape[1])
            for f, row in zip(runs[0].curves["truncation_fractions"], acc):
                ax.plot(exits, row, color=colour[f], marker="o", markersize=2, label=f"kept width {100 * f:.0f}%")
            full = acc[int(np.argmax(runs[0].curves["truncation_fractions"])), -1]
            ax.axhline(full - points, color=_START, linestyle=":", linewidth=1.0,
                       label=f"{points:g} point below the full network")
        axes[i][0].set_ylabel(f"{task}\ntest accuracy (%)")
    for ax in axes[-1]:
        ax.set_xlabel("exit (layers used)")
    for ax in axes.ravel():
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    plots.figure_legend(fig)
    return fig


# ----------------------------------------------------------------------------- display


def show(frame, *, caption: str = "", note: str = ""):
    """``frame`` as the house table (:func:`hacn_core.engine.tables.house_table`): rule ids as ResNet / ACN /
    H-ACN and control ids by :data:`CONTROL_LABELS`, a missing cell explained by :data:`MISSING_NOTE`."""
    empty = [c for c in frame.columns if frame[c].isna().all()]
    # an interval column stays while its value column is shown (one seed: the dash says "no interval")
    empty = [c for c in empty if "±95%" not in str(c) or str(c).replace(" ±95%", "") in map(str, empty)]
    if empty and len(frame):  # a control with no stored pair anywhere: its columns would be all dashes
        frame = frame.drop(columns=empty)
        note = (note + " " if note else "") + f"Not shown, no value stored: {', '.join(map(str, empty))}."
    labels = {c: m for c, m in (("rule", RULE_LABELS), ("control", CONTROL_LABELS)) if c in frame.columns}
    return house_table(frame, labels=labels, missing_note=MISSING_NOTE, caption=caption, note=note,
                       formats={c: f for c, f in _column_formats(frame.columns).items()
                                if frame[c].map(lambda v: isinstance(v, (int, float))).all()})  # numbers only


def _column_formats(columns: Sequence[Any]) -> dict[str, str]:
    """The precision each kind of column is shown at, read from its name (an interval column ``"X ±95%"``
    as its value column ``X``): Γ to 0.001, parameters and widths as whole numbers, accuracies and
    differences in points and shares saved to 0.1 (signed, intervals not), times in ms, CPU-hours and ratios
    to 0.01."""
    formats = {}
    for col in map(str, columns):
        base, interval = col.removesuffix(" ±95%"), col.endswith(" ±95%")
        if "Gamma" in base or "Γ" in base:
            formats[col] = ".3f"
        elif "saved (%)" in base:  # a share saved: negative where learning the width added parameters
            formats[col] = ".1f" if interval else "+.1f"
        elif base.endswith("(ms)") or base.startswith("ms ") or base.startswith("CPU-hours"):
            formats[col] = ".2f"  # before "width": "twin at learned widths (ms)" is a time
        elif "parameters" in base or "width" in base:
            formats[col] = ",.0f"
        elif "(points)" in base:
            formats[col] = ".1f" if interval else "+.1f"
        elif base.endswith("(%)"):
            formats[col] = ".1f"
        elif " / " in base:  # a ratio of two times or widths
            formats[col] = ".2f"
    return formats


__all__ = [
    "AGAINST_FIXED_PARTS",
    "CANNOT_TELL",
    "CONTROLS_NOTE",
    "CONTROL_LABELS",
    "CUT_POINTS",
    "MISSING_NOTE",
    "NO_COST_POINTS",
    "QUESTIONS",
    "RULE_LABELS",
    "VERDICT_LABELS",
    "above",
    "against_fixed",
    "against_fixed_part",
    "budget_table",
    "coverage_table",
    "cut_savings",
    "cut_table",
    "first_half_width_share",
    "fixed_experiment",
    "gamma_and_width",
    "learns_width",
    "load",
    "missing_sentence",
    "paired_controls",
    "paired_frozen",
    "plot_against_fixed",
    "plot_gamma_and_width",
    "plot_time_per_step",
    "plot_truncation_grid",
    "plot_width_by_depth",
    "plot_width_over_training",
    "same_device",
    "show",
    "show_verdicts",
    "steps_per_run",
    "summary_markdown",
    "task_of",
    "time_per_step",
    "training_device",
    "truncation_table",
    "verdicts",
    "width_by_depth",
    "width_trajectory",
]
