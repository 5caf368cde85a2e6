"""What the MNIST chapter shows of the residual-gates study (Savarese et al., Sec. 3.1).

The study (:mod:`hacn_core.gates.studies.mnist`) trains and measures the runs;
this module reads them: Table 1 (test error) and Table 2 (mean ``k``) beside
the paper's values (read from :mod:`hacn_core.paper_items`), the claims of
Sec. 3.1 checked on the runs, the stored gate gradients at initialisation (measured by
:mod:`hacn_core.gates.studies.gradients`), the cost
of both budgets and of the stacked engine's groups, and Figs. 4-5.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from hacn_core.engine.results import RunResult
from hacn_core.engine.stats import cell_means
from hacn_core.engine.tables import ClaimTable
from hacn_core.gates.studies.mnist import (
    BOOK_EPOCHS,
    DEPTHS,
    GATED_KINDS,
    PAPER_EPOCHS,
    table1_item,
    table2_item,
)
from hacn_core.models.fc import KINDS
from hacn_core.gates.paper_items import item

KIND_LABELS = {"plain": "Plain", "resnet": "ResNet", "gated_plain": "Gated PlainNet", "gated_resnet": "Gated ResNet"}


def paper_test_error(kind: str, depth: int) -> float:
    """Table 1: the paper's test error (%) of ``kind`` at depth ``d``."""
    return item(table1_item(kind, depth)).paper_value


def paper_mean_k(kind: str, depth: int) -> float:
    """Table 2: the paper's mean final ``k`` of a gated ``kind`` at depth ``d``."""
    return item(table2_item(kind, depth)).paper_value


# ----------------------------------------------------------------------------- tables


def results_frame(results: Sequence[RunResult]):
    """One row per run: configuration essentials and the final metrics (a pandas DataFrame)."""
    import pandas as pd

    rows = []
    for r in results:
        rows.append({"kind": r.config["kind"], "depth": r.config["depth"], "seed": r.config["seed"],
                     "epochs": r.config["epochs"], **r.metrics})
    return pd.DataFrame.from_records(rows)


def gate_counts(results: Sequence[RunResult]):
    """Per gated run: its gates, those closed (``k <= 0``) and reopened at the end, and the mean final ``k``."""
    frame = results_frame(results)
    gated = frame[frame["kind"].isin(GATED_KINDS)]
    counts = {"n_gates": int, "gates_closed": int, "gates_reopened": int}
    return (gated[["kind", "depth", "seed", *counts, "mean_k"]].astype(counts)
            .sort_values(["kind", "depth", "seed"]).reset_index(drop=True))


def run_summary(result: RunResult) -> str:
    """One line per run: kind, depth, budget, seed, final test error and (gated kinds) mean ``k``."""
    c, m = result.config, result.metrics
    k = f", mean k {m['mean_k']:.3f}" if "mean_k" in m else ""
    return (f"{KIND_LABELS[c['kind']]} d = {c['depth']}, {c['epochs']} epochs, seed {result.seed}: "
            f"test error {100 * m['test_error']:.2f}%{k}")


def _mean_n(frame, column: str):
    grouped = frame.groupby(["depth", "kind"])[column]
    return grouped.mean(), grouped.std(ddof=1), grouped.count()


def table1(results: Sequence[RunResult]):
    """Table 1: test error (%) after the last epoch, ours (mean, std, seeds) beside the paper's."""
    import pandas as pd

    frame = results_frame(results)
    mean, std, n = _mean_n(frame, "test_error")
    best, _, _ = _mean_n(frame, "best_test_error")
    rows = []
    for (depth, kind), value in mean.items():
        paper = paper_test_error(kind, depth)
        rows.append({"d": depth, "kind": KIND_LABELS[kind], "paper": paper,
                     "ours": 100 * value, "std": 100 * std[(depth, kind)], "seeds": int(n[(depth, kind)]),
                     "ours - paper": 100 * value - paper,
                     "best epoch (test-selected)": 100 * best[(depth, kind)]})
    order = {KIND_LABELS[k]: i for i, k in enumerate(KINDS)}
    table = pd.DataFrame.from_records(rows)
    return table.sort_values(["d", "kind"], key=lambda s: s.map(order) if s.name == "kind" else s).reset_index(
        drop=True)


def table2(results: Sequence[RunResult]):
    """Table 2: mean final ``k`` of the gated kinds, ours (mean, std, seeds) beside the paper's, and the closed
    gates of each seed (whole counts, seeds in order, out of the network's gates)."""
    import pandas as pd

    frame = results_frame(results)
    frame = frame[frame["kind"].isin(GATED_KINDS)]
    mean, std, n = _mean_n(frame, "mean_k")
    rows = []
    for (depth, kind), value in mean.items():
        cell = frame[(frame.depth == depth) & (frame.kind == kind)].sort_values("seed")
        # a count per seed (whole gates, seeds in order), not a mean of counts: "1, 0, 2 of 50"
        closed = ", ".join(str(int(v)) for v in cell["gates_closed"])
        gates = sorted({int(v) for v in cell["n_gates"]}) if "n_gates" in cell else []
        rows.append({"d": depth, "kind": KIND_LABELS[kind], "paper": paper_mean_k(kind, depth), "ours": value,
                     "std": std[(depth, kind)], "seeds": int(n[(depth, kind)]),
                     "closed gates (k <= 0), per seed": closed + (f" of {gates[0]}" if len(gates) == 1 else "")})
    return pd.DataFrame.from_records(rows).sort_values(["kind", "d"]).reset_index(drop=True)


def _cell_means(results: Sequence[RunResult], metric: str) -> dict[tuple[str, int], float]:
    """Mean of ``metric`` over seeds per (kind, depth), for the runs that have it."""
    return cell_means(results, metric, ("kind", "depth"))


def claims(results: Sequence[RunResult]):
    """The paper's qualitative claims of Sec. 3.1, each checked on ``results`` (seed means per cell).

    Returns a DataFrame with the claim, where the paper makes it, our evidence
    and whether it holds (``None`` when the runs cannot tell).
    """
    err = _cell_means(results, "test_error")
    loss = _cell_means(results, "train_loss")
    mean_k = _cell_means(results, "mean_k")
    depths = sorted({d for _, d in err})
    table = ClaimTable()
    add = table.add

    for gated, base in (("gated_plain", "plain"), ("gated_resnet", "resnet")):
        pairs = [d for d in depths if (gated, d) in err and (base, d) in err]
        wins = [d for d in pairs if err[(gated, d)] < err[(base, d)]]
        add(f"{KIND_LABELS[gated]} has lower test error than {KIND_LABELS[base]} at every depth", "Table 1",
            f"at d = {wins} of {pairs}", len(wins) == len(pairs) if pairs else None)
    pairs = [d for d in depths if ("gated_plain", d) in err and ("resnet", d) in err]
    wins = [d for d in pairs if err[("gated_plain", d)] < err[("resnet", d)]]
    deep_pairs = {d for d in pairs if d >= 20}
    add("Gated PlainNet has lower test error than ResNet at d >= 20 (and d = 2)", "Table 1",
        f"at d = {wins} of {pairs}", set(wins) >= deep_pairs if deep_pairs else None)
    deep = [d for d in depths if d >= 50 and ("plain", d) in err]
    failed = " and ".join(f"{paper_test_error('plain', d):.0f}%" for d in (50, 100))  # Table 1, rounded
    add(f"Plain networks fail to converge at d = 50 and 100 (test error {failed})", "Table 1",
        ", ".join(f"d = {d}: {100 * err[('plain', d)]:.2f}%" for d in deep) or "no run at d >= 50",
        all(err[("plain", d)] > 0.5 for d in deep) if deep else None)
    gaps = {d: loss[("plain", d)] / loss[("gated_plain", d)] for d in depths
            if ("plain", d) in loss and ("gated_plain", d) in loss}
    add("The training-loss gap between plain and gated plain grows with depth", "Fig. 4",
        "final loss ratio plain / gated: " + ", ".join(f"d = {d}: {g:.3g}" for d, g in gaps.items()),
        bool(np.all(np.diff(list(gaps.values())) > 0)) if len(gaps) > 1 else None)
    for kind in GATED_KINDS:
        ks = [(d, mean_k[(kind, d)]) for d in depths if (kind, d) in mean_k]
        add(f"Mean k of {KIND_LABELS[kind]} decreases with depth", "Table 2",
            ", ".join(f"d = {d}: {k:.2f}" for d, k in ks),
            bool(np.all(np.diff([k for _, k in ks]) < 0)) if len(ks) > 1 else None)
    removal = [r for r in results if r.config.get("removal")]
    if removal:
        top = max(r.config["depth"] for r in removal)
        g = [r for r in removal if r.config["kind"] == "gated_resnet" and r.config["depth"] == top]
        p = [r for r in removal if r.config["kind"] == "resnet" and r.config["depth"] == top]
        if g:
            dip = float(np.mean([r.metrics["k_middle_dip"] for r in g]))
            add(f"Middle blocks of Gated ResNet (d = {top}) have smaller k than the first and last ones",
                "Fig. 5 (left)", f"min(first, last third) - middle third = {dip:.3f}", dip > 0)
            greedy = float(np.mean([np.mean(r.curves["removal_greedy_acc"]) for r in g]))
            rand = float(np.mean([np.mean(r.curves["removal_random_acc_mean"]) for r in g]))
            add("Greedy removal (smallest k first) is slightly better than random", "Fig. 5 (right)",
                f"mean accuracy over the curve: greedy {100 * greedy:.1f}%, random {100 * rand:.1f}%", greedy > rand)
            kept = float(np.mean([r.metrics["retained_half_removed_random"] for r in g]))
            bound = item("gates/fig5-right/retained-performance-half-removed").paper_value  # "over 90%"
            add(f"Gated ResNet keeps over {bound:g}% of its performance with half its blocks randomly removed",
                "Abstract, Fig. 5", f"{100 * kept:.1f}% kept", kept > bound / 100)
        if g and p:
            kept_p = float(np.mean([r.metrics["retained_half_removed_random"] for r in p]))
            add("ResNet degrades more under random removal than Gated ResNet", "Fig. 5 (right)",
                f"ResNet keeps {100 * kept_p:.1f}% with half its blocks removed", kept_p < kept)
    return table.frame()


def gate_gradient_table(results: Sequence[RunResult]):
    """The stored gate gradients at initialisation (``gates-gate-gradients``, one run per depth),
    summarised per third of the gates: mean ``|dL/dk|`` and sign agreement."""
    import pandas as pd

    rows = []
    for r in sorted(results, key=lambda r: r.config["depth"]):
        row: dict[str, Any] = {"d": r.config["depth"]}
        for part in ("first", "middle", "last"):
            if f"mean_abs/{part}" in r.metrics:
                row[f"|dL/dk| {part} third"] = r.metrics[f"mean_abs/{part}"]
                row[f"sign agreement {part} third"] = r.metrics[f"sign_agreement/{part}"]
        rows.append(row)
    return pd.DataFrame(rows).set_index("d")


def epoch_seconds(result: RunResult) -> float:
    """Median wall-clock seconds per training epoch of a stored run (its ``time_s`` curve).

    ``time_s`` is cumulative and includes the per-epoch test evaluation; the
    median ignores a slow first epoch.
    """
    times = np.asarray(result.curves["time_s"], dtype=float)
    return float(np.median(np.diff(np.concatenate([[0.0], times]))))


def cost_table(results: Sequence[RunResult]):
    """Seconds per epoch of every stored run (seed mean per cell) and the CPU-minutes of both budgets.

    Read off the runs themselves, so they say which machine and load they were
    measured under (wall time; the provenance records the device).
    """
    import pandas as pd

    cells: dict[tuple[int, str], list[float]] = {}
    for r in results:
        if "engine" in r.provenance:  # a stacked run's clock is its whole group's (see stacked_groups)
            continue
        cells.setdefault((r.config["depth"], r.config["kind"]), []).append(epoch_seconds(r))
    frame = pd.DataFrame({KIND_LABELS[k]: {d: float(np.mean(cells[(d, k)])) for d in DEPTHS if (d, k) in cells}
                          for k in KINDS if any((d, k) in cells for d in DEPTHS)})
    frame.index.name = "d"
    total = float(np.nansum(frame.to_numpy()))
    frame.loc["sum over d"] = frame.sum()
    summary = {f"all cells x {PAPER_EPOCHS} epochs (paper, one seed), minutes": total * PAPER_EPOCHS / 60,
               f"all cells x {BOOK_EPOCHS} epochs (book), minutes": total * BOOK_EPOCHS / 60}
    return frame, summary


def stacked_groups(results: Sequence[RunResult]):
    """One row per group of runs trained together by the stacked engine: size, budget and wall time.

    The wall time is the group's (all members at once), read off the runs'
    provenance; ``minutes per run`` divides it by the members.
    """
    import pandas as pd

    groups: dict[tuple[str, ...], list[RunResult]] = {}
    for r in results:
        engine = r.provenance.get("engine")
        if engine and engine.get("name") == "stacked":
            groups.setdefault(tuple(engine["member_hashes"]), []).append(r)
    rows = []
    for members in groups.values():
        r = members[0]
        wall = r.provenance["wall_time_s"] / 60
        size = r.provenance["engine"]["members"]
        # the members themselves, kind by kind with their seeds: a "kinds x seeds" product would claim
        # combinations the group did not train
        seeds: dict[str, list[int]] = {}
        for m in sorted(members, key=lambda m: (KINDS.index(m.config["kind"]), m.seed)):
            seeds.setdefault(KIND_LABELS[m.config["kind"]], []).append(m.seed)
        rows.append({"d": r.config["depth"], "epochs": r.config["epochs"], "runs in the group": size,
                     "stored members (kind: seeds)": "; ".join(f"{k}: {', '.join(map(str, v))}"
                                                                for k, v in seeds.items()),
                     "wall minutes (group)": round(wall, 1), "minutes per run": round(wall / size, 1),
                     "device": r.provenance.get("device", "?")})
    return pd.DataFrame.from_records(rows).sort_values("d").reset_index(drop=True) if rows else pd.DataFrame()


# ----------------------------------------------------------------------------- figures


# Colour by family (plain / residual), solid for gated and dashed for ungated networks.
_KIND_STYLE = {"plain": {"color": "C0", "linestyle": "--"}, "gated_plain": {"color": "C0"},
               "resnet": {"color": "C1", "linestyle": "--"}, "gated_resnet": {"color": "C1"}}


def plot_training_loss(results: Sequence[RunResult]):
    """Fig. 4: training loss per epoch, one panel per depth, one line per kind (mean over seeds).

    The paper prints no number for this figure; its final test errors are Table 1's."""
    from hacn_core.engine import plots

    depths = sorted({r.config["depth"] for r in results})
    fig, axes = plots.figure(ncols=min(len(depths), 3), nrows=-(-len(depths) // 3), height=2.2,
                             sharey=True)
    flat = axes.ravel()
    for ax, depth in zip(flat, depths):
        for kind in KINDS:
            runs = [r for r in results if r.config["depth"] == depth and r.config["kind"] == kind]
            if not runs:
                continue
            loss = np.array([r.curves["train_loss"] for r in runs], dtype=float)
            plots.with_ci(ax, runs[0].curves["epoch"], loss, label=KIND_LABELS[kind], **_KIND_STYLE[kind])
        ax.set_title(f"d = {depth}")
        ax.set_xlabel("epoch")
    if any(ax.get_lines() for ax in flat):
        plots.clip_log_axis(flat[:len(depths)])  # shared y: one range for every panel
    for ax in flat[len(depths):]:
        ax.set_visible(False)
    flat[0].set_ylabel("training loss")
    plots.figure_legend(fig, flat[:1])
    return fig


def plot_mean_k(results: Sequence[RunResult]):
    """Mean ``k`` against epochs (Table 2 is its last point), one panel per gated kind, one line per
    depth, and Table 2's value for each depth as a diamond at the last epoch."""
    from hacn_core.engine import plots

    depths = sorted({r.config["depth"] for r in results})
    colours = plots.categorical(depths)
    fig, axes = plots.figure(ncols=2, height=2.8, sharey=True)
    for ax, kind in zip(axes[0], GATED_KINDS):
        for depth in depths:
            runs = [r for r in results if r.config["kind"] == kind and r.config["depth"] == depth]
            if runs:
                k = np.array([r.curves["mean_k"] for r in runs], dtype=float)
                x = runs[0].curves["record_epoch"]
                plots.with_ci(ax, x, k, label=f"d = {depth}", color=colours[depth])
                paper = _paper_mean_k(kind, depth)
                if paper is not None:
                    plots.paper_point(ax, x[-1], paper, color=colours[depth], markeredgecolor=plots.PAPER_COLOUR,
                                      markeredgewidth=1.2, label="_nolegend_")
        ax.set_title(KIND_LABELS[kind])
        ax.set_xlabel("epoch")
    if any(ax.get_lines() for ax in axes[0]):
        plots.clip_log_axis(axes[0])  # shared y: one range for both panels
        plots.paper_key(axes[0, 0], f"paper, Table 2 (after {PAPER_EPOCHS} epochs)")
    axes[0, 0].set_ylabel("mean k")
    plots.figure_legend(fig, axes, ncols=6)
    return fig


def _paper_or_none(lookup, kind: str, depth: int) -> float | None:
    """``lookup(kind, depth)`` (a paper value), or None when the paper has no such cell (a smoke depth)."""
    try:
        return lookup(kind, depth)
    except KeyError:
        return None


def _paper_mean_k(kind: str, depth: int) -> float | None:
    return _paper_or_none(paper_mean_k, kind, depth)


def _paper_error(kind: str, depth: int) -> float | None:
    return _paper_or_none(paper_test_error, kind, depth)


def plot_tables(results: Sequence[RunResult]):
    """Tables 1 and 2 as a figure: final test error (left) and mean final ``k`` of the gated kinds
    (right) against depth, ours (mean over seeds, one standard deviation as error bars) as lines with
    dots, the paper's value for each cell as a diamond in the same colour with a grey edge.

    The test errors of the networks that train differ by tenths of a point, so the left axis is linear
    and spans those; a cell at :data:`FAILED_ERROR` or above (seeds that did not train) is drawn as a
    triangle on the frame's top edge, and one line gives their range."""
    from hacn_core.engine import plots

    frame = results_frame(results)
    depths = sorted(frame["depth"].unique())
    colours = plots.categorical(KINDS)
    fig, axes = plots.figure(ncols=2, height=3.0)
    for ax, metric, kinds, paper in ((axes[0, 0], "test_error", KINDS, _paper_error),
                                     (axes[0, 1], "mean_k", GATED_KINDS, _paper_mean_k)):
        if metric not in frame:
            continue
        scale = 100.0 if metric == "test_error" else 1.0
        for i, kind in enumerate(kinds):
            cell = frame[frame["kind"] == kind].groupby("depth")[metric]
            mean, std = scale * cell.mean(), scale * cell.std(ddof=1).fillna(0.0)
            if mean.empty:
                continue
            pos = [depths.index(d) + 0.08 * (i - 1.5) for d in mean.index]  # a small dodge per kind
            ax.errorbar(pos, mean.to_numpy(), yerr=std.to_numpy(), color=colours[kind], marker="o", markersize=3,
                        capsize=2, linewidth=1.0, label=KIND_LABELS[kind])
            for p_, d in zip(pos, mean.index):
                value = paper(kind, int(d))
                if value is not None:
                    plots.paper_point(ax, p_, value, color=colours[kind], markeredgecolor=plots.PAPER_COLOUR,
                                      markeredgewidth=1.2, markersize=6, label="_nolegend_")
        ax.set_xticks(range(len(depths)), [str(d) for d in depths])
        ax.set_xlabel("depth d")
    _clip_failed(axes[0, 0], 100 * FAILED_ERROR)
    axes[0, 1].set_yscale("log")  # k is a gain: 0.5 and 2 are as far from 1
    plots.paper_key(axes[0, 0], "paper")
    axes[0, 0].set_ylabel("test error (%)")
    axes[0, 0].set_title("Table 1", pad=20)
    axes[0, 1].set_ylabel("mean final k, log scale")
    axes[0, 1].set_title("Table 2 (gated kinds)", pad=20)
    plots.figure_legend(fig, axes[0, :1], ncols=5)
    return fig


#: the figure's linear error axis ends below this (a fraction): the networks that train end near 0.02, and a
#: cell at or above it holds seeds that did not train (chance is 0.9)
FAILED_ERROR = 0.10


def _clip_failed(ax, failed: float) -> None:
    """A linear y axis spanning the markers under ``failed`` (ours and the paper's); the points at or above
    it are moved onto the frame's top edge as triangles, and one line in the corner gives their range."""
    from hacn_core.engine import plots

    # the means and the paper's values set the frame (not the error-bar caps, marker "_")
    points = [line for line in ax.get_lines() if line.get_marker() != "_"]
    below = [y for line in points for y in np.asarray(line.get_ydata(), dtype=float)
             if np.isfinite(y) and y < failed]
    if not below:
        return
    low, high = min(below), max(below)
    pad = 0.15 * (high - low or 1.0)
    top = high + 2 * pad
    ax.set_ylim(max(0.0, low - pad), top)
    above = []
    for line in points:
        x, y = np.asarray(line.get_xdata(), dtype=float), np.asarray(line.get_ydata(), dtype=float)
        out = np.isfinite(y) & (y >= failed)
        if out.any():
            above += list(y[out])
            ax.plot(x[out], np.full(out.sum(), top), marker="^", linestyle="none", markersize=6, clip_on=False,
                    color=line.get_markerfacecolor() or line.get_color(), markeredgecolor=line.get_markeredgecolor(),
                    zorder=4)
    if above:  # said under the title, where no data point is
        ax.annotate(f"▲ on the top edge: {min(above):.0f}-{max(above):.0f}% error, seeds that did not train",
                    xy=(0.0, 1.0), xycoords="axes fraction", xytext=(0, 6), textcoords="offset points",
                    ha="left", va="bottom", fontsize=plots.FONT_SIZES["legend.fontsize"], color="0.3",
                    annotation_clip=False)


def plot_long_runs(runs: Sequence[RunResult]):
    """Training loss, test error and mean ``k`` per epoch of runs at the paper's full budget (one line
    each), with Table 1's test error and Table 2's mean ``k`` as dashed lines when the runs share one cell."""
    from hacn_core.engine import plots

    runs = sorted(runs, key=lambda r: (r.config["depth"], r.config["kind"], r.seed))
    labels = [f"{KIND_LABELS[r.config['kind']]}, d = {r.config['depth']}, seed {r.seed}" for r in runs]
    colours = plots.categorical(labels)
    fig, axes = plots.figure(ncols=3, height=2.6)
    for r, lbl in zip(runs, labels):
        axes[0, 0].plot(r.curves["epoch"], r.curves["train_loss"], label=lbl, color=colours[lbl])
        axes[0, 1].plot(r.curves["record_epoch"], 100 * np.asarray(r.curves["test_error"]), label=lbl,
                        color=colours[lbl])
        if "mean_k" in r.curves:
            axes[0, 2].plot(r.curves["record_epoch"], r.curves["mean_k"], label=lbl, color=colours[lbl])
    cells = {(r.config["kind"], r.config["depth"]) for r in runs}
    if len(cells) == 1:
        kind, depth = next(iter(cells))
        error, k = _paper_error(kind, depth), _paper_mean_k(kind, depth)
        if error is not None:
            plots.paper_line(axes[0, 1], error, label="paper, Table 1", in_legend=False)
        if k is not None:
            plots.paper_line(axes[0, 2], k, label="paper, Table 2", in_legend=False)
    for ax, name in zip(axes[0], ("training loss", "test error (%)", "mean k")):
        ax.set_xlabel("epoch")
        ax.set_title(name)
    plots.figure_legend(fig, axes, ncols=2)
    return fig


def plot_removal(results: Sequence[RunResult]):
    """Fig. 5: final ``k`` per block (left) and accuracy vs removed layers (right), deepest residual nets."""
    from hacn_core.engine import plots

    with_removal = [r for r in results if r.config.get("removal")]
    if not with_removal:
        raise ValueError("no run with removal curves among the results")
    depth = max(r.config["depth"] for r in with_removal)
    gated = [r for r in with_removal if r.config["depth"] == depth and r.config["kind"] == "gated_resnet"]
    plain = [r for r in with_removal if r.config["depth"] == depth and r.config["kind"] == "resnet"]
    fig, axes = plots.figure(ncols=2, height=3.0)
    left, right = axes[0]
    for r in gated:
        k = r.curves["k_per_block"]
        left.plot(np.arange(1, len(k) + 1), k, marker=".", label=f"seed {r.config['seed']}")
    left.axhline(0, color="0.6", linewidth=0.8)
    left.xaxis.get_major_locator().set_params(integer=True)
    left.set_xlabel("residual block")
    left.set_ylabel("final k")
    left.set_title(f"Gated ResNet, d = {depth}")
    if len(gated) > 1:
        plots.legend(left)
    layers = (gated or plain)[0].curves["removal_layers"]
    for runs, key, label in ((gated, "removal_greedy_acc", "Gated ResNet, greedy"),
                             (gated, "removal_random_acc_mean", "Gated ResNet, random"),
                             (plain, "removal_random_acc_mean", "ResNet, random")):
        if runs:
            plots.with_ci(right, layers, 100 * np.array([r.curves[key] for r in runs]), label=label)
    if gated:  # the paper: a Gated ResNet keeps over 90% of its performance with half its layers removed
        bound = item("gates/fig5-right/retained-performance-half-removed").paper_value
        intact = 100 * float(np.mean([r.curves["removal_random_acc_mean"][0] for r in gated]))
        plots.paper_point(right, layers[-1] / 2, bound / 100 * intact, marker="^",
                          label=f"paper: over {bound:g}% of the intact accuracy kept, half removed")
    right.set_xlabel("removed layers")
    right.set_ylabel("test accuracy (%)")
    right.set_title("layer removal")
    plots.figure_legend(fig, [right], ncols=2)
    return fig
