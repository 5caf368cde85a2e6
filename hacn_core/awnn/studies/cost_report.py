"""What AWNN chapter 1 shows of the step cost: the stored ``awnn-step-cost`` measurements (Sec. 3.3).

Reads the runs of :mod:`hacn_core.awnn.studies.cost`: :func:`cost_table` (every stored
measurement), :func:`adapting_summary` (the adapting phase per seed and pooled),
:func:`ratio_by_width` and :func:`plot_ratio_vs_width` (the ratios against the width), and
:func:`measurement_text`, the printout of one measurement (``benchmarks/bench_awnn.py``).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from hacn_core.awnn.paper_items import item as paper_item
from hacn_core.awnn.studies.cost import PHASES, TARGET_RATIO, run_label, step_ratios
from hacn_core.engine.registry import select
from hacn_core.engine.results import RunResult


def measurement_text(metrics: dict[str, Any], phase: str) -> str:
    """The benchmark's printout of one phase's measurement (``metrics`` of :func:`measure_step_costs`)."""
    m = metrics
    lines = [
        f"[{phase}] AWNN total width {m['width_start']} -> {m['width_end']} {m['widths_end']}, "
        f"width changed at {m['width_changes']} of {m['steps_compared']} steps",
        f"  awnn   {m['awnn_us']:7.0f} us/step ({m.get('node', 'python')} node)  fixed@same widths {m['fixed_us']:7.0f} us/step  "
        f"ratio {m['awnn/fixed']:.3f} (wall-clock {m['awnn/fixed_wall']:.3f})  [target <= {TARGET_RATIO}]",
        f"  static {m['static_us']:7.0f} us/step  (AWNN layer, frozen widths, exact stores)  "
        f"ratio {m['static/fixed']:.3f}; awnn/static {m['awnn/static']:.3f} (what adapting adds)",
        f"  update_width {m['update_width_us']:5.0f} us/step ({100 * m['update_width/fixed']:.1f}% of fixed)",
    ]
    if "python_us" in m:
        lines.append(f"  python {m['python_us']:7.0f} us/step  (same AWNN, Python node)  ratio {m['python/fixed']:.3f}; "
                     f"python/awnn {m['python/awnn']:.3f} (what the C++ node saves)")
    if "naive_us" in m:
        lines.append(f"  naive  {m['naive_us']:7.0f} us/step  ratio to fixed@its widths {m['naive/fixed']:.3f} "
                     f"(wall-clock {m['naive/fixed_wall']:.3f})  widths {m['naive_widths_end']}")
    return "\n".join(lines)


def cost_table(results: Sequence[RunResult]):
    """Per-step CPU time and ratios of each stored measurement (medians over repetitions)."""
    import pandas as pd

    rows = []
    order = (lambda r: (PHASES.index(r.config["phase"]), not r.config.get("flush_denormal"), r.config["seed"]))
    for r in sorted(results, key=order):
        m = r.metrics
        rows.append({"phase": run_label(r.config), "total width": f"{m['width_start']} -> {m['width_end']}",
                     "AWNN (us/step)": m["awnn_us"], "fixed (us/step)": m["fixed_us"],
                     "AWNN / fixed": m["awnn/fixed"], "static / fixed": m["static/fixed"],
                     "AWNN / static": m["awnn/static"], "Python node / fixed": m.get("python/fixed"),
                     "Python node / C++ node": m.get("python/awnn"), "naive / fixed": m.get("naive/fixed")})
    return pd.DataFrame(rows).set_index("phase")


def pooled(results: RunResult | Sequence[RunResult]) -> tuple[dict[str, list[float]], list[float], list[float]]:
    """Per-repetition ratios (:func:`~hacn_core.awnn.studies.cost.step_ratios`), total widths and
    the naive model's total widths of one run, or of several runs one after the other."""
    runs = [results] if isinstance(results, RunResult) else list(results)
    if not runs:
        raise ValueError("no stored measurement to read: run the awnn-step-cost experiment first")
    ratio: dict[str, list[float]] = {}
    width: list[float] = []
    naive_width: list[float] = []
    for r in runs:
        for k, v in step_ratios(r.curves).items():
            ratio.setdefault(k, []).extend(v)
        width.extend(r.curves["total_width"])
        naive_width.extend(r.curves.get("naive_total_width", []))
    return ratio, width, naive_width


def adapting_summary(results: Sequence[RunResult]):
    """The adapting measurements, one row per seed, and a last row ``pooled`` over the
    repetitions of all of them: medians of the per-repetition ratios, and the share of
    repetitions whose AWNN / fixed is within :data:`TARGET_RATIO`."""
    import pandas as pd

    runs = sorted(select(results, phase="adapting"), key=lambda r: r.config["seed"])
    rows = {}
    for label, group in [*((f"seed {r.config['seed']}", [r]) for r in runs), ("pooled", runs)]:
        ratio, width, _ = pooled(group)
        m = group[0].metrics if len(group) == 1 else None
        rows[label] = {
            "repetitions": len(width),
            "total width": f"{m['width_start']} -> {m['width_end']}" if m else
            f"{min(r.metrics['width_end'] for r in group)} to {max(r.metrics['width_start'] for r in group)}",
            "width changes": sum(r.metrics["width_changes"] for r in group),
            "steps": sum(r.metrics["steps_compared"] for r in group),
            "AWNN / fixed": statistics.median(ratio["awnn/fixed"]),
            f"share <= {TARGET_RATIO}": sum(v <= TARGET_RATIO for v in ratio["awnn/fixed"]) / len(width),
            "static / fixed": statistics.median(ratio["static/fixed"]),
            "AWNN / static": statistics.median(ratio["awnn/static"]),
            "Python node / C++ node": statistics.median(ratio["python/awnn"]) if "python/awnn" in ratio else None,
            "naive / fixed": statistics.median(ratio["naive/fixed"]) if "naive/fixed" in ratio else None,
        }
    return pd.DataFrame.from_dict(rows, orient="index")


def ratio_by_width(results: RunResult | Sequence[RunResult], edges: Sequence[int] = (200, 300, 400)):
    """The adapting runs' per-repetition ratios (medians; several runs pooled), grouped by
    the AWNN's total width in that repetition: below ``edges[0]``, between the edges, from
    ``edges[-1]`` on."""
    import pandas as pd

    ratio, width, _ = pooled(results)
    frame = pd.DataFrame({"total width": width, **ratio})
    bins = [0, *edges, float("inf")]
    labels = [f"< {edges[0]}", *(f"{a}-{b - 1}" for a, b in zip(edges, edges[1:])), f">= {edges[-1]}"]
    frame["width band"] = pd.cut(frame["total width"], bins, right=False, labels=labels)
    cols = ["awnn/fixed", "static/fixed", "awnn/static"] + [
        k for k in ("python/fixed", "python/awnn", "naive/fixed") if k in ratio]
    table = frame.groupby("width band", observed=True)[cols].median()
    table.insert(0, "repetitions", frame.groupby("width band", observed=True).size())
    return table


def plot_ratio_vs_width(results: RunResult | Sequence[RunResult]):
    """Per-repetition ``awnn/fixed``, ``static/fixed`` and (if timed) the Python node's ratio
    against the total width (several runs pooled), with the target."""
    from hacn_core.engine import plots

    runs = [results] if isinstance(results, RunResult) else list(results)
    ratio, width, naive_width = pooled(runs)
    fig, axes = plots.figure(ncols=1, height=3.4)
    ax = axes[0][0]
    ax.scatter(width, ratio["awnn/fixed"], s=12, label="AWNN / fixed")
    ax.scatter(width, ratio["static/fixed"], s=12, marker="x", label="AWNN layer, frozen / fixed")
    if "python/fixed" in ratio:
        ax.scatter(width, ratio["python/fixed"], s=14, marker="s", facecolors="none", edgecolors="tab:red",
                   label="AWNN, Python node / fixed")
    if "naive/fixed" in ratio:
        ax.scatter(naive_width, ratio["naive/fixed"], s=12, marker="^", label="naive / fixed")
        bound = paper_item("awnn/sec3.3/training-overhead").paper_value  # Sec. 3.3: a naive AWNN costs "up to 10x"
        plots.paper_line(ax, bound, label=f"paper: naive up to {bound:g}x")
    ax.axhline(TARGET_RATIO, color="0.4", linestyle="--", linewidth=0.8, label=f"target {TARGET_RATIO}")
    ax.axhline(1.0, color="0.7", linewidth=0.8)
    ax.set_xlabel("total hidden width (mean over the timed block)")
    ax.set_ylabel("CPU time per step, ratio (log scale)")
    plots.clip_log_axis(ax)  # log: the paper's 10x and our ratios near 1 both readable
    phases = sorted({r.config["phase"] for r in runs})
    ax.set_title(f"cost per training step, {' and '.join(phases)} phase"
                 + (f" ({len(runs)} runs pooled)" if len(runs) > 1 else ""))
    plots.legend_outside(ax, "below", ncols=2)
    return fig
