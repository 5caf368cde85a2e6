"""Where an AWNN training step's extra cost goes: the step of a few cost cells timed phase by phase.

:mod:`hacn_core.awnn.studies.cost_cells` compares whole training steps (AWNN Sec. 3.3): an AWNN
against a plain ``nn.Linear`` MLP of the same width. This module splits the step of a few
representative cells into its phases (:data:`~hacn_core.awnn.studies.cost_cells.STEP_PARTS`):
zeroing the gradients, the forward pass, the loss, the backward pass, Adam's step and the width
update of Algorithm 1 (for a fixed MLP, a call that returns its widths) - the calls of the
cells' own step (:class:`~hacn_core.awnn.studies.cost_cells.StepParts`, built by
:func:`~hacn_core.awnn.studies.cost_cells.awnn_parts_for` and
:func:`~hacn_core.awnn.studies.cost_cells.fixed_parts_for`), each between two readings of the
process CPU clock.

The *arms* of a cell: the AWNN step with every option of
:data:`~hacn_core.awnn.studies.cost_cells.OPTIONS` that applies (``fused_priors`` only for the
``elbo`` objective) and the cell's baseline (``fixed`` for ``likelihood``, ``fixed+wd`` - Adam with
the weight prior's weight decay - for ``elbo``), built at the first AWNN arm's mean widths of the
repetition. In every repetition each arm runs two blocks of ``steps`` steps (each after one untimed
step): one timed phase by phase, one timed as whole steps, as the cells are; the arms' order and the
order of the two blocks alternate from one repetition to the next. A row gives, per arm, the medians
over repetitions of the per-step phase times, of their sum and of the whole step, and, for an AWNN
arm, the median over repetitions of the per-repetition difference from the baseline, phase by phase
(``<phase>_gap_us``) and for the whole step (``step_gap_us``, and ``ratio``, the whole steps' ratio).
The phase sum and the whole step measure the same calls, so they agree up to the clock readings
between phases (a few per step) and the noise of the machine; the stored metric
``phase_sum/step_max_dev`` says by how much they differ at most.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from typing import Any

from hacn_core.awnn import fast_cpp
from hacn_core.awnn.studies.cost_cells import (
    OBJECTIVES, OPTIONS, PHASES, SIGMA_THETA, STEP_PARTS, TARGET_RATIO, SpiralBatches, StepParts, awnn_parts_for,
    fixed_parts_for, rows_from_curves, time_steps, timing_conditions)
from hacn_core.engine.registry import Experiment

#: a cell: objective (:data:`OBJECTIVES`), hidden layers, widths adapting or steady (:data:`PHASES`), starting width
CELL_KEYS: tuple[str, ...] = ("objective", "layers", "phase", "start_width")
#: the cells the book profiles: the narrow one-layer steady cells (the likelihood, then the ELBO: the overhead
#: per step alone), the wide one-layer adapting ELBO cell (what changing width adds) and the wide two-layer
#: steady ELBO cell (the closest to a fixed MLP)
BOOK_CELLS: tuple[dict[str, Any], ...] = (
    {"objective": "likelihood", "layers": 1, "phase": "steady", "start_width": 30},
    {"objective": "elbo", "layers": 1, "phase": "steady", "start_width": 30},
    {"objective": "elbo", "layers": 1, "phase": "adapting", "start_width": 400},
    {"objective": "elbo", "layers": 2, "phase": "steady", "start_width": 400},
)
SMOKE_CELLS: tuple[dict[str, Any], ...] = (
    {"objective": "likelihood", "layers": 1, "phase": "steady", "start_width": 30},
    {"objective": "elbo", "layers": 1, "phase": "adapting", "start_width": 30},
)


def check_cell(cell: dict[str, Any]) -> tuple[str, int, str, int]:
    """``cell``'s ``(objective, layers, phase, start_width)``; ValueError naming a missing or bad field."""
    missing = [k for k in CELL_KEYS if k not in cell]
    if missing:
        raise ValueError(f"cell {cell!r} lacks {', '.join(missing)}; a cell has {', '.join(CELL_KEYS)}")
    objective, layers, phase, width = (cell[k] for k in CELL_KEYS)
    if objective not in OBJECTIVES:
        raise ValueError(f"objective={objective!r} is not allowed; allowed: {', '.join(OBJECTIVES)}")
    if phase not in PHASES:
        raise ValueError(f"phase={phase!r} is not allowed; allowed: {', '.join(PHASES)}")
    if not (isinstance(layers, int) and layers >= 1):
        raise ValueError(f"layers={layers!r} must be an int >= 1")
    if not (isinstance(width, int) and width >= 1):
        raise ValueError(f"start_width={width!r} must be an int >= 1")
    return objective, layers, phase, width


def baseline_arm(objective: str) -> str:
    """The arm a cell's AWNN is compared with: ``fixed+wd`` for ``elbo``, ``fixed`` for ``likelihood``."""
    return "fixed+wd" if objective == "elbo" else "fixed"


def time_phases(parts: StepParts, batches, steps: int) -> tuple[dict[str, float], list[list[int]]]:
    """``steps`` steps of ``parts`` on fresh batches (after one untimed step), each phase of
    :data:`STEP_PARTS` between two readings of the process CPU clock: (CPU seconds per step of each
    phase, the widths each timed step returned). The same calls as ``parts.step``, in its order."""
    data = [batches() for _ in range(steps)]
    parts.step(*batches())
    clock = time.process_time_ns
    totals = [0] * len(STEP_PARTS)  # ns, in the order of STEP_PARTS
    seen: list[list[int]] = []
    for xb, yb in data:
        t0 = clock()
        parts.zero_grad()
        t1 = clock()
        out = parts.forward(xb)
        t2 = clock()
        loss = parts.loss(out, yb)
        t3 = clock()
        parts.backward(loss)
        del out, loss  # freed here, as in parts.step, not at the next step's forward
        t4 = clock()
        parts.optimizer_step()
        t5 = clock()
        seen.append(parts.width_update())
        t6 = clock()
        for i, d in enumerate((t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4, t6 - t5)):
            totals[i] += d
    return {name: tot * 1e-9 / steps for name, tot in zip(STEP_PARTS, totals)}, seen


def measure_phases(cells: Sequence[dict[str, Any]] = BOOK_CELLS, *, reps: int = 15, steps: int = 12,
                   batch_size: int = 128, lr: float = 0.01, seed: int = 0) -> list[dict[str, Any]]:
    """Time every cell's arms phase by phase and as whole steps, interleaved (see the module docstring);
    one row per cell and arm: the cell's keys, ``arm``, ``width`` (mean width per layer over the
    repetitions), ``<phase>_us`` for each of :data:`STEP_PARTS` and ``phase_sum_us``, ``step_us``
    (medians, microseconds of CPU per step), ``<phase>_gap_us``, ``step_gap_us`` and ``ratio`` (against
    the cell's baseline; 0, 0 and 1 for the baseline itself), ``node`` and ``reps``."""
    if reps < 1 or steps < 1:
        raise ValueError(f"reps={reps!r} and steps={steps!r} must be >= 1")
    checked = [check_cell(c) for c in cells]
    if not checked:
        raise ValueError("cells is empty; give at least one cell (see BOOK_CELLS)")
    batches = SpiralBatches(batch_size, seed)
    dims = (batches.in_dim, batches.out_dim, batches.n_train)
    med = statistics.median
    rows: list[dict[str, Any]] = []
    with timing_conditions():
        for objective, n_layers, phase, width in checked:
            options = [o for o in OPTIONS if objective == "elbo" or o == "default"]
            base = baseline_arm(objective)
            awnn = {o: awnn_parts_for(o, objective, n_layers, width, phase == "steady", *dims, lr, seed)
                    for o in options}
            phase_s: dict[str, list[dict[str, float]]] = {a: [] for a in [*options, base]}
            step_s: dict[str, list[float]] = {a: [] for a in [*options, base]}
            total_widths: list[float] = []
            for rep in range(reps):
                phased_first = rep % 2 == 0

                def run(arm: str, parts: StepParts) -> list[list[int]]:
                    if phased_first:
                        ph, seen = time_phases(parts, batches, steps)
                        st = time_steps(parts.step, batches, steps)[0]
                    else:
                        st = time_steps(parts.step, batches, steps)[0]
                        ph, seen = time_phases(parts, batches, steps)
                    phase_s[arm].append(ph)
                    step_s[arm].append(st)
                    return seen

                mean_w: list[int] = []
                for o in (options if rep % 2 == 0 else options[::-1]):
                    seen = run(o, awnn[o])
                    if o == options[0]:
                        mean_w = [max(1, round(statistics.fmean(w[i] for w in seen))) for i in range(n_layers)]
                total_widths.append(sum(mean_w))
                wd = 1.0 / SIGMA_THETA**2 if base == "fixed+wd" else 0.0
                run(base, fixed_parts_for(mean_w, *dims, lr, wd))
            cell = dict(zip(CELL_KEYS, (objective, n_layers, phase, width)))
            for arm in [*options, base]:
                row: dict[str, Any] = {**cell, "arm": arm, "width": round(statistics.fmean(total_widths) / n_layers)}
                for p in STEP_PARTS:
                    row[f"{p}_us"] = 1e6 * med(ph[p] for ph in phase_s[arm])
                row["phase_sum_us"] = 1e6 * med(sum(ph.values()) for ph in phase_s[arm])
                row["step_us"] = 1e6 * med(step_s[arm])
                for p in STEP_PARTS:  # paired: the median over repetitions of this arm's phase minus the baseline's
                    row[f"{p}_gap_us"] = 1e6 * med(a[p] - b[p] for a, b in zip(phase_s[arm], phase_s[base]))
                row["step_gap_us"] = 1e6 * med(a - b for a, b in zip(step_s[arm], step_s[base]))
                row["ratio"] = med(a / b for a, b in zip(step_s[arm], step_s[base]))
                row["node"] = fast_cpp.active_backend()
                row["reps"] = reps
                rows.append(row)
    return rows


ROW_KEYS: tuple[str, ...] = (CELL_KEYS + ("arm", "width") + tuple(f"{p}_us" for p in STEP_PARTS)
                             + ("phase_sum_us", "step_us") + tuple(f"{p}_gap_us" for p in STEP_PARTS)
                             + ("step_gap_us", "ratio", "node", "reps"))

#: the phases' names in the book's tables
PHASE_LABELS: dict[str, str] = {"zero_grad": "zero grad", "forward": "forward", "loss": "loss",
                                "backward": "backward", "optimizer_step": "Adam step", "width_update": "width update"}


def phases_table(rows: Sequence[dict[str, Any]]):
    """The phase times as a DataFrame indexed by (objective, layers, phase, start width, arm): mean width
    per layer, the median µs per step of every phase, their sum, the whole step, and the ratio of the
    whole step to the cell's baseline."""
    import pandas as pd

    if not rows:
        raise ValueError("no rows to tabulate: measure_phases returned none")
    return pd.DataFrame([{
        **{k: r[k] for k in CELL_KEYS}, "arm": r["arm"], "width/layer": r["width"],
        **{PHASE_LABELS[p]: r[f"{p}_us"] for p in STEP_PARTS},
        "sum of phases": r["phase_sum_us"], "whole step": r["step_us"], "step / baseline": r["ratio"],
    } for r in rows]).set_index([*CELL_KEYS, "arm"])


def gap_table(rows: Sequence[dict[str, Any]]):
    """The AWNN arms' extra cost over the cell's baseline, phase by phase (µs per step, medians of the
    per-repetition differences), the whole step's, and the ratio; indexed as :func:`phases_table`."""
    import pandas as pd

    awnn = [r for r in rows if r["arm"] in OPTIONS]
    if not awnn:
        raise ValueError("no AWNN arm among the rows: measure_phases returned none")
    return pd.DataFrame([{
        **{k: r[k] for k in CELL_KEYS}, "arm": r["arm"], "baseline": baseline_arm(r["objective"]),
        **{PHASE_LABELS[p]: r[f"{p}_gap_us"] for p in STEP_PARTS},
        "whole step": r["step_gap_us"], "step / baseline": r["ratio"],
        f"<= {TARGET_RATIO}": r["ratio"] <= TARGET_RATIO,
    } for r in awnn]).set_index([*CELL_KEYS, "arm"])


# ----------------------------------------------------------------------------- the stored measurement

PHASES_ID = "awnn-step-phases"


def phases_config(profile: str) -> dict[str, Any]:
    """The cells and repetitions of ``profile`` (smoke: two narrow one-layer cells, 2 x 2 steps)."""
    if profile == "smoke":
        return {"cells": [dict(c) for c in SMOKE_CELLS], "reps": 2, "steps": 2, "seed": 0}
    return {"cells": [dict(c) for c in BOOK_CELLS], "reps": 15, "steps": 12, "seed": 0}


def measure_phases_stored(config: dict[str, Any], context: Any) -> dict[str, Any]:
    """The experiment's train function: :func:`measure_phases` on ``config``, stored column by column
    (``curves[key][i]`` is row ``i``'s value). Metrics: each AWNN arm's whole-step ratio
    (``<objective>/<layers>/<phase>/<width>/<arm>``) and ``phase_sum/step_max_dev``, the largest
    ``|phase sum / whole step - 1|`` over the rows."""
    rows = measure_phases(config["cells"], reps=config["reps"], steps=config["steps"], seed=config["seed"])
    metrics: dict[str, float] = {
        f"{r['objective']}/{r['layers']}/{r['phase']}/{r['start_width']}/{r['arm']}": r["ratio"]
        for r in rows if r["arm"] in OPTIONS}
    metrics["phase_sum/step_max_dev"] = max(abs(r["phase_sum_us"] / r["step_us"] - 1) for r in rows)
    return {"metrics": metrics, "curves": {k: [r[k] for r in rows] for k in ROW_KEYS}, "device": "cpu"}


def stored_phase_rows(result: Any) -> list[dict[str, Any]]:
    """The rows of a stored ``awnn-step-phases`` result, as :func:`measure_phases` returned them."""
    return rows_from_curves(result, ROW_KEYS)


PHASES_EXPERIMENT = Experiment(
    id=PHASES_ID,
    title="AWNN: a training step's cost phase by phase against a fixed MLP, on a few cost cells",
    train=measure_phases_stored,
    configs={p: (lambda p=p: [phases_config(p)]) for p in ("smoke", "book", "paper")},
    setting={"smoke": "likelihood 1 layer steady 30 and ELBO 1 layer adapting 30, 2 repetitions x 2 steps",
             "book": "SpiralHard, one CPU thread: likelihood 1 layer steady 30, ELBO 1 layer steady 30, ELBO 1 layer "
                     "adapting 400, ELBO 2 layers steady 400; the AWNN step (default, fused_priors) and the "
                     "baseline, 15 interleaved repetitions x 12 steps phase by phase and 12 whole steps",
             "paper": "as the book: the measurement has no reduced setting"},
)
