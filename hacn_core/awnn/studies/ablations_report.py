"""What AWNN chapter 4 shows of the ablations: Figs. 4 and 10 (training stability) and App. D (Fixed+).

Reads the stored runs of :mod:`hacn_core.awnn.studies.ablations` (``awnn-ablations``,
``awnn-fixed-plus``), with chapter 2's and chapter 3's runs beside them:

* across runs, :func:`width_spread`, :func:`sweep_widths` and :func:`spread_table` (the max/min
  ratio and coefficient of variation of the tail widths across batch sizes and across starting
  rates, per activation) and :func:`stability_claims` (Sec. 5.2 and App. F's claims checked,
  "similar" meaning a max/min of at most :data:`SIMILAR_RATIO`);
* :func:`width_at_steps`, :func:`run_table`, :func:`long_run_table`, :func:`seed_table`,
  :func:`pooled_by_activation` and :func:`shared_cell_crosscheck`: the runs cell by cell;
* :func:`fixed_plus_table` and :func:`fixed_plus_failures`: App. D's table, ours beside the paper's;
* :func:`cost_table`; the figures :func:`plot_fig4`, :func:`plot_fig10`, :func:`plot_accuracy`
  and :func:`plot_long_runs`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from hacn_core.awnn.studies.ablations import (
    ACTIVATION_LABELS,
    ACTIVATIONS,
    BASE_BATCH,
    BASE_RATE,
    BATCH_SIZES,
    FIXED_PLUS_DATASETS,
    FIXED_PLUS_DEPTHS,
    FIXED_PLUS_WIDTHS,
    PAPER_SEEDS,
    SETTLE_BAND,
    SWEEP_LABELS,
    SWEEPS,
    WIDTH_SOURCES,
    in_sweep,
    sweep_values,
)
from hacn_core.awnn.studies.common import paper_text
from hacn_core.awnn.studies.tabular import TABLE1_SHAPES, table1_baseline_runs
from hacn_core.engine.registry import select
from hacn_core.engine.results import RunResult
from hacn_core.engine.tables import ClaimTable, mean_std

SIMILAR_RATIO = 1.5  # "a similar width": max/min of the tail widths at most 1.5 (our threshold)


def width_spread(values: Sequence[float]) -> dict[str, float]:
    """How far a set of learned widths is from "similar": ``ratio`` = max / min, ``cv`` = the
    coefficient of variation (population std / mean), and ``min``, ``max``, ``n``."""
    v = np.asarray(values, dtype=float)
    if v.size == 0 or np.any(v <= 0):
        raise ValueError(f"widths must be non-empty and positive, got {values!r}")
    return {"ratio": float(v.max() / v.min()), "cv": float(v.std() / v.mean()), "min": float(v.min()),
            "max": float(v.max()), "n": int(v.size)}


def sweep_widths(results: Sequence[RunResult], activation: str, sweep: str,
                 metric: str = "tail_width") -> dict[Any, float]:
    """``{sweep value: mean over seeds of metric}`` for one activation and sweep."""
    out: dict[Any, list[float]] = {}
    for r in results:
        c = r.config
        if c["activation"] == activation and in_sweep(c, sweep):
            out.setdefault(c[sweep], []).append(float(r.metrics[metric]))
    return {k: float(np.mean(v)) for k, v in sorted(out.items())}


def spread_table(results: Sequence[RunResult], sweep: str):
    """One row per activation for one sweep: the tail width at every swept value (mean over
    seeds), their max/min ratio and coefficient of variation, and whether they count as
    "similar" (max/min <= :data:`SIMILAR_RATIO`). Activations with fewer than two swept
    values stored have no row."""
    import pandas as pd

    rows = []
    for act in ACTIVATIONS:
        widths = sweep_widths(results, act, sweep)
        if len(widths) < 2:  # a spread needs two swept values
            continue
        s = width_spread(list(widths.values()))
        row = {"activation": ACTIVATION_LABELS[act]}
        row |= {f"{SWEEP_LABELS[sweep]} {v:g}": round(w) for v, w in widths.items()}
        row |= {"max/min": round(s["ratio"], 2), "CV": round(s["cv"], 2), "similar": s["ratio"] <= SIMILAR_RATIO}
        rows.append(row)
    if not rows:
        return pd.DataFrame()
    frame = pd.DataFrame(rows).set_index("activation")
    swept = [f"{SWEEP_LABELS[sweep]} {v:g}" for v in sweep_values(sweep)]
    return frame[[c for c in swept if c in frame.columns] + ["max/min", "CV", "similar"]]


STEP_MARKS: tuple[int, ...] = (1_000, 3_000, 10_000, 30_000)


def width_at_steps(results: Sequence[RunResult], steps: Sequence[int] = STEP_MARKS):
    """The batch-size sweep counted in optimizer steps instead of epochs.

    A run at batch ``B`` takes ``ceil(N / B)`` steps per epoch (``N`` the training-set
    size, last batch kept), so at equal epochs batch 32 has taken 32 times the steps of
    batch 1024. For each run of the batch sweep (``rate_init`` 0.01) and each mark in
    ``steps``: the total width and the test accuracy (%) at the first record at or
    after that many steps; ``NaN`` past the end of the run.
    """
    import pandas as pd

    from hacn_core.engine.training import steps_per_epoch

    rows = []
    for r in sorted(results, key=lambda r: (ACTIVATIONS.index(r.config["activation"]), r.config["batch_size"],
                                            r.config["seed"])):
        c = r.config
        if c["rate_init"] != BASE_RATE:
            continue
        per_epoch = steps_per_epoch(int(r.metrics["n_train"]), c["batch_size"])
        done = np.asarray(r.curves["record_epoch"]) * per_epoch
        row: dict[tuple[str, str] | str, Any] = {"activation": ACTIVATION_LABELS[c["activation"]],
                                                 "batch": c["batch_size"], "seed": c["seed"]}
        for mark in steps:
            i = int(np.searchsorted(done, mark))
            past = i >= len(done)
            row[(f"{mark:,} steps", "width")] = np.nan if past else r.curves["total_width"][i]
            row[(f"{mark:,} steps", "test acc (%)")] = np.nan if past else 100 * r.curves["test_acc"][i]
        rows.append(row)
    if not rows:
        return pd.DataFrame()
    frame = pd.DataFrame(rows).set_index(["activation", "batch", "seed"])
    frame.columns = pd.MultiIndex.from_tuples(frame.columns)
    return frame


def run_table(results: Sequence[RunResult]):
    """One row per cell (mean over seeds): start, peak and tail width, settle epoch, late drift,
    tail jitter, test accuracy at the end and at the best validation epoch, CPU seconds."""
    import pandas as pd

    rows = []
    for r in results:
        c, m = r.config, r.metrics
        rows.append({"activation": ACTIVATION_LABELS[c["activation"]], "batch": c["batch_size"],
                     "rate": c["rate_init"], "start": m["start_width"], "peak": m["max_width"],
                     "tail width": round(m["tail_width"], 1), "settled at": m["settle_epoch"],
                     "late drift (%)": 100 * m["late_drift"], "jitter": m["tail_jitter"],
                     "test acc end (%)": 100 * m["final_test_acc"], "test acc best-val (%)": 100 * m["test_acc"],
                     "CPU time (s)": round(m["cpu_s"])})
    if not rows:
        return pd.DataFrame()
    frame = pd.DataFrame(rows).groupby(["activation", "batch", "rate"], sort=False).mean().round(2)
    return frame


def stability_claims(results: Sequence[RunResult]):
    """The paper's claims of Sec. 5.2 and App. F, checked on the runs (a :class:`ClaimTable`)."""
    table = ClaimTable()
    if not results:
        return table.frame()
    epochs = max(r.config["epochs"] for r in results)

    def spread(act: str, sweep: str) -> dict[str, float] | None:
        w = sweep_widths(results, act, sweep)
        return width_spread(list(w.values())) if len(w) > 1 else None

    b6 = spread("relu6", "batch_size")
    if b6:
        table.add("All batch sizes converge to a similar width (ReLU6)", "Sec. 5.2, Fig. 4 left",
                  f"tail widths {b6['min']:.0f}-{b6['max']:.0f}, max/min {b6['ratio']:.2f} after {epochs} epochs",
                  b6["ratio"] <= SIMILAR_RATIO)
    jit = {a: sweep_widths(results, a, "batch_size", "tail_jitter") for a in ACTIVATIONS}
    small, large = min(BATCH_SIZES), max(BATCH_SIZES)
    pairs = [(j.get(small), j.get(large)) for j in jit.values() if small in j and large in j]
    if pairs:
        more = sum(s > l for s, l in pairs)
        table.add(f"Smaller batches are less stable (batch {small} vs {large})", "Sec. 5.2, Fig. 4 left",
                  f"late record-to-record jitter of log width larger at batch {small} for {more} of {len(pairs)} "
                  f"activations", more == len(pairs))
    r6 = spread("relu6", "rate_init")
    if r6:
        table.add("With ReLU6, all starting rates converge to a similar width", "Sec. 5.2, Fig. 4 right",
                  f"tail widths {r6['min']:.0f}-{r6['max']:.0f}, max/min {r6['ratio']:.2f}",
                  r6["ratio"] <= SIMILAR_RATIO)
    unb = {a: spread(a, "rate_init") for a in ("relu", "leaky_relu")}
    if r6 and all(unb.values()):
        text = ", ".join(f"{ACTIVATION_LABELS[a]} {s['ratio']:.2f}" for a, s in unb.items())
        table.add("Unbounded activations converge more slowly across starting rates (larger spread)",
                  "App. F, Fig. 10", f"max/min across rates: ReLU6 {r6['ratio']:.2f}, {text}",
                  all(s["ratio"] > r6["ratio"] for s in unb.values()))
    drifts = {a: [r.metrics["late_drift"] for r in select(results, activation=a)] for a in ACTIVATIONS}
    if all(drifts.values()):
        med = {a: float(np.median(v)) for a, v in drifts.items()}
        text = ", ".join(f"{ACTIVATION_LABELS[a]} {100 * v:+.0f}%" for a, v in med.items())
        table.add("ReLU and LeakyReLU still drift down where ReLU6 has settled", "App. F, Fig. 10",
                  f"median late drift of the width (tail vs 70-80% of training): {text}",
                  med["relu"] < med["relu6"] and med["leaky_relu"] < med["relu6"] and abs(med["relu6"]) <= SETTLE_BAND)
    return table.frame()


def shared_cell_crosscheck(results: Sequence[RunResult], compress: Sequence[RunResult]):
    """The (ReLU6, 128, 0.01) cell beside chapter 3's control runs (``awnn-compress``, Eq. 14,
    ``rate_prior="none"``) of the same seed: the total width at the epochs both recorded, and
    whether the two runs agree at every one of them (they train the same network on the same
    data, so they should, bit for bit)."""
    import pandas as pd

    controls = {r.seed: r for r in compress if r.config.get("study") == "anneal"
                and r.config.get("importance_norm") == "none" and r.config.get("rate_prior") == "none"}
    rows = []
    for r in results:
        c = r.config
        shared = (c["activation"], c["batch_size"], c["rate_init"]) == ("relu6", BASE_BATCH, BASE_RATE)
        if not shared or r.seed not in controls:
            continue
        other = controls[r.seed].curves
        theirs = dict(zip(other["record_epoch"], other["width/1"]))
        common = [(e, w) for e, w in zip(r.curves["record_epoch"], r.curves["total_width"]) if e in theirs]
        if not common:
            continue
        picks = sorted({common[0][0], common[-1][0]} | {e for e, _ in common if e % 500 == 0})
        ours = dict(common)
        row = {"seed": r.seed, "epochs compared": len(common),
               "identical": all(theirs[e] == w for e, w in common)}
        row |= {f"width @ {e} (ours / ch. 3)": f"{ours[e]} / {theirs[e]}" for e in picks}
        rows.append(row)
    return pd.DataFrame(rows).set_index("seed") if rows else pd.DataFrame()


def fixed_plus_table(fixed_plus: Sequence[RunResult], fixed: Sequence[RunResult] = (),
                     adaptive: Sequence[RunResult] = ()):
    """App. D's table, ours beside the paper's: test accuracy (%) at the best validation epoch,
    mean (std) over seeds, for the fixed MLP (``awnn-tabular-fixed``), AWNN (both arms of
    ``awnn-tabular-adaptive``) and Fixed+ at each width source; the per-layer width in brackets."""
    import pandas as pd

    def acc(runs: Sequence[RunResult]) -> str:
        return mean_std(100 * np.asarray([r.metrics["test_acc"] for r in runs], dtype=float))

    rows = []
    for d in FIXED_PLUS_DATASETS:
        fx = table1_baseline_runs(fixed, d)
        slug = d.lower()
        layers, width = TABLE1_SHAPES[d]
        rows.append({"dataset": d, "model": f"Fixed ({layers} x {width})", "width per layer": f"{width}",
                     "test acc (%), ours": acc(fx), "paper": paper_text(f"awnn/table1/{slug}-fixed-accuracy"),
                     "seeds": len(fx)})
        for arm, label in (("none", "AWNN Eq. 14"), ("active", "AWNN renormalised")):
            runs = select(adaptive, study="table1", dataset=d, importance_norm=arm)
            per_layer = [r.metrics["total_width"] / r.config["hidden_layers"] for r in runs]
            width = f"{np.mean(per_layer):.1f}" if runs else "-"
            rows.append({"dataset": d, "model": label, "width per layer": width, "test acc (%), ours": acc(runs),
                         "paper": paper_text(f"awnn/table1/{slug}-awnn-accuracy") if arm == "none" else "-",
                         "seeds": len(runs)})
        for depth in FIXED_PLUS_DEPTHS[d]:
            for src in WIDTH_SOURCES:
                runs = select(fixed_plus, dataset=d, width_source=src, hidden_layers=depth)
                at_paper = src == "paper" and depth == layers
                rows.append({"dataset": d, "model": f"Fixed+ ({src} width, {depth} layer{'s' * (depth > 1)})",
                             "width per layer": str(FIXED_PLUS_WIDTHS[src][d]), "test acc (%), ours": acc(runs),
                             "paper": paper_text(f"awnn/appd/{slug}-fixed-plus-accuracy") if at_paper else "-",
                             "seeds": len(runs)})
    return pd.DataFrame(rows).set_index(["dataset", "model"])


def fixed_plus_failures(fixed_plus: Sequence[RunResult], threshold: float = 0.9):
    """Per dataset and width source: the seeds whose test accuracy stays below ``threshold``
    (App. D's "convergence issue on SpiralHard") and the worst accuracy."""
    import pandas as pd

    rows = []
    for d in FIXED_PLUS_DATASETS:
        for depth in FIXED_PLUS_DEPTHS[d]:
            for src in WIDTH_SOURCES:
                runs = sorted(select(fixed_plus, dataset=d, width_source=src, hidden_layers=depth),
                              key=lambda r: r.seed)
                if not runs:
                    continue
                bad = [r.seed for r in runs if r.metrics["test_acc"] < threshold]
                rows.append({"dataset": d, "layers": depth, "width source": src, "width": FIXED_PLUS_WIDTHS[src][d],
                             "runs": len(runs), f"seeds below {100 * threshold:g}%": ", ".join(map(str, bad)) or "none",
                             "worst test acc (%)": round(100 * min(r.metrics["test_acc"] for r in runs), 1)})
    return pd.DataFrame(rows).set_index(["dataset", "layers", "width source"]) if rows else pd.DataFrame()


def cost_table(results: Sequence[RunResult]):
    """Measured CPU time per run (one thread) per experiment group: runs, mean and total CPU minutes."""
    import pandas as pd

    rows = []
    for r in results:
        c = r.config
        if "width_source" in c:
            group = ("Fixed+", c["dataset"], f"{c['width_source']}, {c['hidden_layers']} layer(s)")
        else:
            cell = f"batch {c['batch_size']}, rate {c['rate_init']:g}"
            group = ("stability", ACTIVATION_LABELS[c["activation"]], cell)
        if "cpu_s" in r.metrics:  # runs stored before the trainer recorded CPU time have none
            rows.append({"study": group[0], "group": group[1], "cell": group[2], "cpu_min": r.metrics["cpu_s"] / 60})
    if not rows:
        return pd.DataFrame()
    grouped = pd.DataFrame(rows).groupby(["study", "group", "cell"], sort=False)["cpu_min"]
    return pd.DataFrame({"runs": grouped.count(), "CPU minutes per run": grouped.mean().round(1),
                         "CPU minutes in all": grouped.sum().round(1)})


def cell_key(config: dict[str, Any]) -> tuple:
    """A stability run's cell and seed: ``(activation, batch size, starting rate, seed)``."""
    return config["activation"], config["batch_size"], config["rate_init"], config["seed"]


def same_prefix(long: RunResult, short: RunResult) -> bool | None:
    """Whether ``long`` (more epochs) recorded exactly the widths and accuracies of ``short``
    (the same cell and seed) at every epoch both recorded; None if they share no epoch.

    The configurations differ only in ``epochs`` and ``record_every``; the learning rate is
    constant and the data order depends on the seed alone, so the first epochs are the
    same training and must agree bit for bit."""
    a = dict(zip(long.curves["record_epoch"], zip(long.curves["total_width"], long.curves["test_acc"])))
    shared = [(e, w, t) for e, w, t in zip(short.curves["record_epoch"], short.curves["total_width"],
                                           short.curves["test_acc"]) if e in a]
    if not shared:
        return None
    return all(a[e] == (w, t) for e, w, t in shared)


def long_run_table(long: Sequence[RunResult], short: Sequence[RunResult]):
    """Per cell run at the long budget: the total width at the end of the short budget (the
    book's 2,500 epochs) and the tail widths of both runs, the long run's settle epoch, late
    drift and test accuracy, and whether its first epochs repeat the short run exactly."""
    import pandas as pd

    by_cell = {cell_key(r.config): r for r in short}
    rows = []
    for r in sorted(long, key=lambda r: (ACTIVATIONS.index(r.config["activation"]), not in_sweep(r.config, "batch_size"),
                                         r.config["batch_size"], r.config["rate_init"])):
        c, m = r.config, r.metrics
        book = by_cell.get(cell_key(c))
        row = {"activation": ACTIVATION_LABELS[c["activation"]], "batch": c["batch_size"], "rate": c["rate_init"],
               "start": m["start_width"]}
        if book is not None:
            end = book.config["epochs"]
            e = np.asarray(r.curves["record_epoch"])
            at = int(np.flatnonzero(e <= end)[-1])
            row |= {f"width at {end:,}": r.curves["total_width"][at], f"tail, {end:,} epochs": round(book.metrics["tail_width"]),
                    "same first epochs": same_prefix(r, book)}
        row |= {f"tail, {c['epochs']:,} epochs": round(m["tail_width"]), "settled at": m["settle_epoch"],
                "late drift (%)": round(100 * m["late_drift"], 1), "test acc end (%)": round(100 * m["final_test_acc"], 1),
                "CPU time (s)": round(m["cpu_s"])}
        rows.append(row)
    return pd.DataFrame(rows).set_index(["activation", "batch", "rate"]) if rows else pd.DataFrame()


def seed_table(results: Sequence[RunResult]):
    """Cells with two or more seeds stored: the seeds, and the mean, std (ddof=1), min and max
    of the tail total width and the final test accuracy over them. The paper reports Figs. 4
    and 10 over 10 seeds; the long-run tables of the chapter show seed 0, this one how far
    the other stored seeds spread around it."""
    import pandas as pd

    cells: dict[tuple, list[RunResult]] = {}
    for r in results:
        c = r.config
        cells.setdefault((c["activation"], c["batch_size"], c["rate_init"], c["epochs"]), []).append(r)
    rows = []
    for (act, batch, rate, epochs), runs in sorted(cells.items(), key=lambda kv: (ACTIVATIONS.index(kv[0][0]),) + kv[0][1:]):
        if len(runs) < 2:
            continue
        runs = sorted(runs, key=lambda r: r.config["seed"])
        tail = np.array([r.metrics["tail_width"] for r in runs], dtype=float)
        acc = np.array([r.metrics["final_test_acc"] for r in runs], dtype=float)
        rows.append({"activation": ACTIVATION_LABELS[act], "batch": batch, "rate": rate, "epochs": epochs,
                     "seeds": ", ".join(str(r.config["seed"]) for r in runs),
                     "tail width mean": round(float(tail.mean()), 1), "std": round(float(tail.std(ddof=1)), 1),
                     "min": round(float(tail.min())), "max": round(float(tail.max())),
                     "test acc mean (%)": round(100 * float(acc.mean()), 1)})
    return pd.DataFrame(rows).set_index(["activation", "batch", "rate", "epochs"]) if rows else pd.DataFrame()


def pooled_by_activation(results: Sequence[RunResult], *, seeds: int = len(PAPER_SEEDS), rate: float = BASE_RATE):
    """Fig. 10's question on the batch-size sweep, with every seed: per activation, the tail
    widths pooled over the batch sizes (at ``rate``) whose cells have all ``seeds`` seeds stored
    for *every* activation that has such a cell, with their mean, standard error (std / sqrt(n)),
    std, median, range and mean final test accuracy. So the activations are compared on the same
    cells, and a cell completed for one activation only changes nothing; the batch sizes pooled
    are listed per row."""
    import pandas as pd

    cells: dict[tuple[str, int], list[RunResult]] = {}
    for r in results:
        c = r.config
        if c["rate_init"] == rate:
            cells.setdefault((c["activation"], c["batch_size"]), []).append(r)
    complete = {act: {b for (a, b), runs in cells.items() if a == act and len({r.config["seed"] for r in runs}) >= seeds}
                for act in ACTIVATIONS}
    shown = [act for act in ACTIVATIONS if complete[act]]
    common = set.intersection(*(complete[act] for act in shown)) if shown else set()
    rows = []
    for act in shown:
        full = {b: cells[act, b] for b in common}
        if not full:
            continue
        tail = np.array([r.metrics["tail_width"] for runs in full.values() for r in runs], dtype=float)
        acc = np.array([r.metrics["final_test_acc"] for runs in full.values() for r in runs], dtype=float)
        rows.append({"activation": ACTIVATION_LABELS[act], "batch sizes": ", ".join(map(str, sorted(full))),
                     "runs": tail.size, "tail width mean": round(float(tail.mean()), 1),
                     "standard error": round(float(tail.std(ddof=1) / math.sqrt(tail.size)), 1),
                     "std": round(float(tail.std(ddof=1)), 1), "median": round(float(np.median(tail)), 1),
                     "min": round(float(tail.min())), "max": round(float(tail.max())),
                     "test acc mean (%)": round(100 * float(acc.mean()), 1)})
    return pd.DataFrame(rows).set_index("activation") if rows else pd.DataFrame()


def plot_long_runs(long: Sequence[RunResult], short: Sequence[RunResult] = ()):
    """Total width over epochs of the long runs (one row per activation present; left: batch
    sizes, right: starting rates), with the short runs of the same cells dashed on top."""
    from hacn_core.engine import plots

    acts = [a for a in ACTIVATIONS if any(r.config["activation"] == a for r in long)]
    fig, axes = plots.figure(ncols=2, nrows=max(1, len(acts)), height=2.2, sharex=True, sharey=True)
    by_cell = {cell_key(r.config): r for r in short}
    for i, act in enumerate(acts):
        for j, sweep in enumerate(SWEEPS):
            ax = axes[i, j]
            colours = plots.categorical(sweep_values(sweep))
            for r in sorted(long, key=lambda r: r.config[sweep]):  # legend in sweep order
                c = r.config
                if c["activation"] != act or not in_sweep(c, sweep):
                    continue
                colour = colours[c[sweep]]
                ax.plot(record_epochs(r), r.curves["total_width"], color=colour, linewidth=0.9, label=f"{c[sweep]:g}")
                book = by_cell.get(cell_key(c))
                if book is not None:
                    ax.plot(record_epochs(book), book.curves["total_width"], color="0.2", linewidth=0.6, linestyle="--")
            ax.set(yscale="log", xlabel="epoch" if i == len(acts) - 1 else "", ylabel="total width" if j == 0 else "")
            ax.set_title(f"{ACTIVATION_LABELS[act]}: {SWEEP_LABELS[sweep]}")
    for j, sweep in enumerate(SWEEPS):  # one legend per column, under it
        if axes[-1, j].get_lines():
            plots.legend_outside(axes[-1, j], "below", title=SWEEP_LEGEND[sweep], ncols=5, columnspacing=1.0)
    return fig


def record_epochs(r: RunResult) -> np.ndarray:
    """The epochs at which a run recorded its curves."""
    return np.asarray(r.curves["record_epoch"])


def plot_sweep(ax, results: Sequence[RunResult], sweep: str, activations: Sequence[str]) -> int:
    """One panel of Figs. 4 / 10: total width over epochs per value of ``sweep`` (mean over the runs of
    ``activations``, band of one standard error where a curve has more than one run), log scale fitted
    to the mean curves. Returns the fewest runs behind a curve (1: no spread can be drawn)."""
    from hacn_core.engine import plots

    fewest = 0
    values = sweep_values(sweep)
    # batch sizes: five distinct colours; starting rates: a grey ramp (dark = small), so that no colour
    # means one thing in a batch-size panel and another in the starting-rate panel beside it
    colours = plots.categorical(values) if sweep == "batch_size" else plots.grey_ramp(values)
    for v in values:
        runs = [r for r in results if r.config["activation"] in activations and in_sweep(r.config, sweep)
                and r.config[sweep] == v]
        if not runs:
            continue
        n = min(len(r.curves["total_width"]) for r in runs)
        plots.with_ci(ax, record_epochs(runs[0])[:n], np.stack([r.curves["total_width"][:n] for r in runs]), f"{v:g}",
                      color=colours[v])
        fewest = min(fewest, len(runs)) if fewest else len(runs)
    ax.set(xlabel="epoch", ylabel="total width")
    if ax.get_lines():
        plots.clip_log_axis(ax)
    return fewest


#: legend titles of the two sweeps
SWEEP_LEGEND = {"batch_size": "batch size", "rate_init": r"starting rate $\nu_0$"}


def plot_fig4(results: Sequence[RunResult]):
    """Fig. 4: total width over epochs. Left: one curve per batch size (rate 0.01), mean over the
    three activations and seeds ("averaged across the different configurations", Sec. 5.2).
    Right: one curve per starting rate (batch 128), ReLU6 (the caption's bounded non-linearity).
    Bands: one standard error. The paper gives no number for this figure."""
    from hacn_core.engine import plots

    fig, axes = plots.figure(ncols=2, height=3.2)
    plot_sweep(axes[0, 0], results, "batch_size", ACTIVATIONS)
    plot_sweep(axes[0, 1], results, "rate_init", ("relu6",))
    axes[0, 0].set_title("all activations: batch sizes")
    axes[0, 1].set_title("ReLU6: starting rates")
    for ax, sweep in zip(axes[0], SWEEPS):
        if ax.get_lines():
            plots.legend_outside(ax, "below", title=SWEEP_LEGEND[sweep], ncols=3)
    return fig


def plot_fig10(results: Sequence[RunResult]):
    """Fig. 10: the same two sweeps organised by activation (rows: ReLU6, ReLU, LeakyReLU;
    left: batch sizes, right: starting rates), total width over epochs, log scale."""
    from hacn_core.engine import plots

    fig, axes = plots.figure(ncols=2, nrows=len(ACTIVATIONS), height=2.2, sharex=True, sharey=True)
    fewest = []
    for i, act in enumerate(ACTIVATIONS):
        fewest += [plot_sweep(axes[i, 0], results, "batch_size", (act,)),
                   plot_sweep(axes[i, 1], results, "rate_init", (act,))]
        axes[i, 0].set_title(f"{ACTIVATION_LABELS[act]}: batch sizes")
        axes[i, 1].set_title(f"{ACTIVATION_LABELS[act]}: starting rates")
        axes[i, 1].set_ylabel("")
        if i < len(ACTIVATIONS) - 1:
            for ax in axes[i]:
                ax.set_xlabel("")
    if any(ax.get_lines() for ax in axes.ravel()):
        plots.clip_log_axis(axes)  # shared y: one range for the six panels
    for ax, sweep in zip(axes[-1], SWEEPS):  # one legend per column, under it
        if ax.get_lines():
            plots.legend_outside(ax, "below", title=SWEEP_LEGEND[sweep], ncols=5, columnspacing=1.0)
    if max(fewest, default=0) == 1:  # say why no curve has a band
        fig.suptitle("one run (one seed) per curve: no spread between seeds to draw")
    return fig


def plot_accuracy(results: Sequence[RunResult]):
    """Test accuracy over epochs per cell, one column per activation; top row: the batch sizes
    (rate 0.01), bottom row: the starting rates (batch 128). Does every cell also learn the task?"""
    from hacn_core.engine import plots

    fig, axes = plots.figure(ncols=len(ACTIVATIONS), nrows=len(SWEEPS), height=2.2, sharex=True, sharey=True)
    for i, sweep in enumerate(SWEEPS):
        colours = plots.categorical(sweep_values(sweep))
        for ax, act in zip(axes[i], ACTIVATIONS):
            runs = sorted((r for r in select(results, activation=act) if in_sweep(r.config, sweep)),
                          key=lambda r: r.config[sweep])
            for r in runs:
                v = r.config[sweep]
                ax.plot(record_epochs(r), 100 * np.asarray(r.curves["test_acc"]), linewidth=0.8, alpha=0.85,
                        color=colours[v], label=f"{v:g}")
            ax.set(title=f"{ACTIVATION_LABELS[act]}: {SWEEP_LABELS[sweep]}",
                   xlabel="epoch" if i == len(SWEEPS) - 1 else "")
        axes[i, 0].set_ylabel("test accuracy (%)")
        if axes[i, -1].get_lines():
            plots.legend_outside(axes[i, -1], "right", title=SWEEP_LEGEND[sweep])
    return fig
