"""What a chapter shows of ``width-connectivity`` (new work, not a reproduction): five questions, five tables.

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
the frozen-width twins enter question 3. Each returns a ``pandas.DataFrame``;
:func:`show` renders one as the house table (:func:`hacn_core.engine.tables.house_table`)
with the study's labels.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from hacn_core.beyond.width_connectivity import EXPERIMENT, STUDY_RULES, fixed_control_config
from hacn_core.engine.registry import Experiment, stored_runs
from hacn_core.engine.results import ResultsStore, RunResult, config_hash, study_config
from hacn_core.engine.stats import estimate
from hacn_core.engine.tables import house_table
from hacn_core.hacn.studies import mixer as hm

RULE_LABELS: dict[str, str] = {"resnet": "ResNet", "acn": "ACN", "hacn": "H-ACN"}
#: what a missing cell means in every table of this module
MISSING_NOTE = "no stored run of this cell yet, or a single run (no interval)"
#: what the two controls of question 3 are (a note for :func:`show` of :func:`against_fixed`)
CONTROLS_NOTE = ("frozen: the same run with its widths frozen at the start (the rates do not train), the only "
                 "difference; fixed: hacn-mixer-long's run of the same configuration and seed, which also differs "
                 "in activation (GELU, not ReLU), init (PyTorch's default, not kaiming+) and weight prior (none, "
                 "not N(0, 1)). Differences: adaptive - control, mean of the per-seed differences")


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


def _against(name: str, pairs: Sequence[tuple[RunResult, RunResult]]) -> dict[str, float]:
    """The columns of one control ``name`` of question 3 from its ``(adaptive, control)`` pairs: the control's
    accuracy, the paired differences (final exit with a 95% interval, middle exit), its parameters and the
    pair count; NaN (0 pairs) where no pair is stored."""
    if not pairs:
        return {f"{name} acc (%)": np.nan, f"vs {name} (points)": np.nan, f"vs {name} (points) ±95%": np.nan,
                f"vs {name}, middle exit (points)": np.nan, f"{name} parameters": np.nan, f"{name} pairs": 0}
    m = [(r.metrics, c.metrics) for r, c in pairs]
    return {f"{name} acc (%)": 100 * float(np.mean([c["test_accuracy"] for _, c in m])),
            **_with(f"vs {name} (points)", [r["test_accuracy"] - c["test_accuracy"] for r, c in m], 100.0),
            f"vs {name}, middle exit (points)": 100 * float(np.mean(
                [r["first_half_exit_accuracy"] - c["first_half_exit_accuracy"] for r, c in m])),
            f"{name} parameters": float(np.mean([c["parameters"] for _, c in m])),
            f"{name} pairs": len(pairs)}


def against_fixed(results: Sequence[RunResult], controls: Sequence[RunResult] = ()):
    """Question 3: does learning the width cost accuracy, and how many parameters does it save?

    Per task and rule, the runs that learn their width against two controls, each paired
    seed by seed:

    * ``frozen``: the run's frozen-width twin among ``results`` (:func:`paired_frozen`),
      identical but for the width learning: *the* clean comparison, for the Mixer
      (:data:`~hacn_core.beyond.width_connectivity.FROZEN_MIXER_RULES`) and the stack;
    * ``fixed``: the fixed-width ``hacn-mixer-long`` run of ``controls``
      (:func:`paired_controls`), Mixer only; it differs in activation, init and weight
      prior too (:data:`CONTROLS_NOTE`), so its difference is not width learning's alone.

    Columns: the adaptive test accuracy (%, mean over the cell's runs), their parameters
    at the end of training and ``n``; per control its accuracy (mean over the paired
    runs), the paired difference adaptive - control in points (mean of the per-seed
    differences, with the half-width of its 95% Student-t interval), the same at the
    middle exit (H-ACN Sec. 3.1), the control's parameters and the number of pairs.
    A cell with no pair of either kind is left out; a control without a pair reads NaN.
    """
    import pandas as pd

    cells: dict[tuple[str, str], dict[str, list[tuple[RunResult, RunResult]]]] = {}
    for name, pairs in (("frozen", paired_frozen(results)), ("fixed", paired_controls(results, controls))):
        for run, control in pairs:
            cell = cells.setdefault((task_of(run.config), run.config["rule"]), {"frozen": [], "fixed": []})
            cell[name].append((run, control))
    runs = _cells(results)
    rows = []
    for (task, rule), by_control in cells.items():
        adaptive = runs[task, rule]
        rows.append({"task": task, "rule": rule,
                     "adaptive acc (%)": 100 * float(np.mean([r.metrics["test_accuracy"] for r in adaptive])),
                     "adaptive parameters": float(np.mean([r.metrics["parameters"] for r in adaptive])),
                     "n": len(adaptive),
                     **_against("frozen", by_control["frozen"]), **_against("fixed", by_control["fixed"])})
    order = {rule: i for i, rule in enumerate(STUDY_RULES)}
    rows.sort(key=lambda row: (row["task"], order[row["rule"]]))
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------- 4. time per step


def _control_seconds_per_step(control: RunResult) -> float:
    """Wall seconds per step of a fixed-width run: its median epoch time over its steps per epoch."""
    m = control.metrics
    return m["seconds_per_epoch"] / (m["steps"] / m["epochs"])


def time_per_step(results: Sequence[RunResult], controls: Sequence[RunResult] = ()):
    """Question 4: milliseconds per optimizer step, side by side, per task and rule (medians over seeds).

    In one process, one thread, interleaved (the fair comparison): the trained adaptive
    model with its width update, its fixed-width twin at the learned widths, the
    fixed-width control at its own width, and the adaptive/fixed ratio. From the
    trainings: the wall time per step of the adaptive runs and, where stored, of their
    fixed-width controls (the machine's load differs between trainings: read these as
    rough).
    """
    import pandas as pd

    wall_fixed: dict[tuple[str, str], list[float]] = {}
    for run, control in paired_controls(results, controls):
        wall_fixed.setdefault((task_of(run.config), run.config["rule"]), []).append(_control_seconds_per_step(control))
    rows = []
    for (task, rule), runs in _cells(results).items():
        def med(key: str) -> float:
            return float(np.median([r.metrics[key] for r in runs]))

        fixed_wall = wall_fixed.get((task, rule))
        rows.append({"task": task, "rule": rule, "adaptive (ms)": med("adaptive/ms_per_step"),
                     "twin at learned widths (ms)": med("twin/ms_per_step"),
                     "fixed control (ms)": med("fixed/ms_per_step"),
                     "adaptive / fixed": med("adaptive/ratio_to_fixed"),
                     "training wall, adaptive (ms)": 1000 * med("seconds_per_step"),
                     "training wall, fixed (ms)": 1000 * float(np.median(fixed_wall)) if fixed_wall else None,
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


# ----------------------------------------------------------------------------- display


def show(frame, *, caption: str = "", note: str = ""):
    """``frame`` as the house table (:func:`hacn_core.engine.tables.house_table`): rule ids as ResNet / ACN /
    H-ACN, a missing cell explained by :data:`MISSING_NOTE`."""
    labels = {"rule": RULE_LABELS} if "rule" in frame.columns else None
    return house_table(frame, labels=labels, missing_note=MISSING_NOTE, caption=caption, note=note)


__all__ = [
    "CONTROLS_NOTE",
    "MISSING_NOTE",
    "RULE_LABELS",
    "against_fixed",
    "fixed_experiment",
    "gamma_and_width",
    "learns_width",
    "load",
    "paired_controls",
    "paired_frozen",
    "show",
    "task_of",
    "time_per_step",
    "truncation_table",
    "width_by_depth",
    "width_trajectory",
]
