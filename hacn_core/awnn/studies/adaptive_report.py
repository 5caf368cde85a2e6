"""What chapter 2 shows of the AWNN tabular runs: Table 1, Figs. 3 and 8, the diagnosis (Errica et al.).

Reads the stored runs of :mod:`hacn_core.awnn.studies.adaptive` (``awnn-tabular-adaptive``)
and of the fixed baseline :mod:`hacn_core.awnn.studies.tabular` (``awnn-tabular-fixed``):

* :func:`table1` (Table 1's tabular rows, ours beside the paper's) and
  :func:`fixed_seed_table` (the fixed baseline seed by seed, per shape);
* :func:`diagnosis_table`, :func:`long_diagnosis_table`, :func:`initial_scale_table`
  and :func:`steepest_rate_rise`: why Eq. 14 on our data ends narrower than the paper;
* :func:`cost_table`: measured CPU seconds per run;
* :func:`plot_datasets` (Fig. 8), :func:`plot_width_and_accuracy` (Fig. 3) and
  :func:`plot_elbo` (the terms of Eq. 13 over training).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch

from hacn_core.awnn import paper_items, quantile_width
from hacn_core.awnn.studies.adaptive import (
    DATASETS,
    DIAG_EPOCHS,
    DIAGNOSIS_VARIANTS,
    TASKS,
    adaptive_config,
    diagnosis_label,
)
from hacn_core.awnn.studies.common import (
    ARMS,
    PUBLIC_RADIUS,
    START_RATE,
    build_model,
    load_splits,
    paper_text,
    public_geometry_spiral,
)
from hacn_core.awnn.studies.tabular import table1_baseline_runs
from hacn_core.engine.data import SYNTHETIC, synthetic_splits
from hacn_core.engine.registry import select
from hacn_core.engine.results import RunResult
from hacn_core.engine.tables import mean_std


def results_frame(results: Sequence[RunResult]):
    """One row per run: study, dataset, arm, seed and the stored metrics."""
    import pandas as pd

    rows = []
    for r in results:
        c = r.config
        row = {"study": c["study"], "dataset": c["dataset"], "arm": c["importance_norm"], "seed": r.seed,
               "epochs": c["epochs"], "hidden_layers": c["hidden_layers"]}
        if c["study"] == "diagnosis":
            row["variant"] = diagnosis_label(c)
        rows.append(row | r.metrics)
    return pd.DataFrame(rows)


def table1(results: Sequence[RunResult], fixed: Sequence[RunResult]):
    """Table 1's tabular rows, ours (mean (std) over seeds) beside the paper's.

    One row per dataset and quantity: test accuracy (%) and total width at the best
    validation epoch (the protocol), and the total width at the end of training.
    Columns: the fixed MLP (``awnn-tabular-fixed``), the two AWNN arms, the paper.
    """
    import pandas as pd

    frame = results_frame(select(results, study="table1"))
    rows = []
    for d in DATASETS:
        slug = d.lower()
        fx = table1_baseline_runs(fixed, d)
        ours = {arm: frame[(frame.dataset == d) & (frame.arm == arm)] for arm in ARMS}

        def paper(name: str) -> str:
            return paper_text(f"awnn/table1/{slug}-{name}")

        fixed_width = ", ".join(sorted({str(r.metrics["total_width"]) for r in fx})) or "-"
        for quantity, metric, scale in (("test acc (%)", "test_acc", 100.0), ("total width", "total_width", 1.0),
                                        ("total width at the end", "final_total_width", 1.0)):
            is_acc = metric == "test_acc"
            rows.append({
                "dataset": d, "quantity": quantity,
                "fixed (ours)": mean_std([100 * r.metrics["test_acc"] for r in fx]) if is_acc else fixed_width,
                "fixed (paper)": paper("fixed-accuracy" if is_acc else "fixed-width"),
                "AWNN Eq. 14 (ours)": mean_std(scale * ours["none"][metric]) if len(ours["none"]) else "-",
                "AWNN renormalised (ours)": mean_std(scale * ours["active"][metric]) if len(ours["active"]) else "-",
                "AWNN (paper)": paper("awnn-accuracy" if is_acc else "awnn-width") if metric != "final_total_width"
                else "-",
                "seeds (AWNN arms, fixed)": f"{len(ours['none'])}, {len(ours['active'])}, {len(fx)}",
            })
    return pd.DataFrame(rows).set_index(["dataset", "quantity"])


def fixed_seed_table(fixed: Sequence[RunResult], *, stuck_below: float = 0.95):
    """The fixed MLPs of Table 1 seed by seed, one row per dataset and shape (hidden layers x
    width per layer): where the baseline's mean falls short of the paper's, and whether
    another shape of the same total width (:data:`hacn_core.awnn.studies.tabular.GRID_DEPTHS`)
    closes the gap.

    Per row: the test accuracy (%) at the best validation epoch of each seed, the training
    loss of the last epoch (an MLP that fits its training set ends near 0), and which seeds
    stay below ``stuck_below`` test accuracy. A mean pulled down by one stuck seed reads
    differently from every seed underfitting.
    """
    import pandas as pd

    shapes: dict[tuple[str, int, int], list[RunResult]] = {}
    for r in fixed:
        c = r.config
        shapes.setdefault((c["dataset"], c["hidden_layers"], c["width"]), []).append(r)
    rows = []
    for (d, layers, width), runs in sorted(shapes.items(), key=lambda kv: (DATASETS.index(kv[0][0]),) + kv[0][1:]):
        runs = sorted(runs, key=lambda r: r.seed)
        acc = np.array([r.metrics["test_acc"] for r in runs], dtype=float)
        loss = np.array([r.curves["train_loss"][-1] for r in runs], dtype=float)
        below = [str(r.seed) for r, a in zip(runs, acc) if a < stuck_below]
        rows.append({
            "dataset": d, "hidden layers x width": f"{layers} x {width}", "seeds": len(runs),
            "test acc (%) per seed": " ".join(f"{100 * a:.1f}" for a in acc),
            "mean (std)": mean_std(100 * acc),
            "final train loss, min-max": f"{loss.min():.4f}-{loss.max():.4f}",
            f"seeds below {stuck_below:.0%}": ", ".join(below) or "none",
        })
    return pd.DataFrame(rows).set_index(["dataset", "hidden layers x width"])


def steepest_rate_rise(r: RunResult) -> float:
    """Largest per-step relative rise of the rate ``nu`` over one epoch, in percent.

    Adam moves the raw rate by about ``lr`` per step (somewhat more while the gradient
    grows faster than its second-moment average) and ``nu = softplus(raw)`` is close to
    ``e^raw`` for small rates, so a consistent push changes ``nu`` (and the width
    ``~ ln(1/(1-k)) / nu``) by about ``100 lr`` percent per step.
    """
    c = r.config
    steps = math.ceil(SYNTHETIC[c["dataset"]].split[0] / c["batch_size"])
    log_nu = np.log(np.asarray(r.curves["rate/1"], dtype=float))
    return float(100 * math.expm1(np.max(np.diff(log_nu)) / steps)) if log_nu.size > 1 else float("nan")


def diagnosis_table(results: Sequence[RunResult], at: Sequence[int] = (10, 25, 50)):
    """The short diagnosis runs: total width at epochs ``at``, validation accuracy at the end,
    the final rate and :func:`steepest_rate_rise` (means over seeds), one row per variant, in
    :data:`DIAGNOSIS_VARIANTS` order."""
    import pandas as pd

    rows: dict[str, list[dict[str, float]]] = {}
    for r in results:
        c = r.config
        if c["study"] != "diagnosis" or c["epochs"] > max(DIAG_EPOCHS, 3):
            continue
        epochs = r.curves["record_epoch"]
        total = total_width(r)
        row = {f"width @ {e}": float(total[epochs.index(e)]) for e in at if e in epochs}
        row["val acc (%)"] = 100 * r.curves["val_acc"][-1]
        row["rate at end"] = r.curves["rate/1"][-1]
        row["steepest rise of nu (%/step)"] = steepest_rate_rise(r)
        rows.setdefault(diagnosis_label(c), []).append(row)
    out = [{"variant": k, **pd.DataFrame(v).mean().round(3).to_dict(), "seeds": len(v)}
           for k in DIAGNOSIS_VARIANTS if (v := rows.get(k))]
    return pd.DataFrame(out).set_index("variant") if out else pd.DataFrame()


def long_diagnosis_table(results: Sequence[RunResult]):
    """Full-length Spiral runs on the public geometry: width and accuracy, both arms."""
    import pandas as pd

    frame = results_frame(select(results, study="diagnosis", epochs=TASKS["Spiral"]["epochs"]))
    if frame.empty:
        return frame
    g = frame.groupby("variant")
    out = pd.DataFrame({
        "total width (best epoch)": g["total_width"].agg(mean_std),
        "total width (end)": g["final_total_width"].agg(mean_std),
        "test acc (%)": g["test_acc"].agg(lambda v: mean_std(100 * v)),
        "seeds": g.size(),
    })
    out.loc["paper (Table 1, Spiral)"] = [paper_text("awnn/table1/spiral-awnn-width"), "-",
                                          paper_text("awnn/table1/spiral-awnn-accuracy"), 10]
    return out


def initial_scale_table(seed: int = 0):
    """At initialisation (Spiral, Eq. 14 arm): logit scale and the share of first-layer
    pre-activations above ReLU6's bound, for our inputs and for inputs times ``4 pi``."""
    import pandas as pd

    rows = []
    for label, overrides in (("ours (radius 1)", {}), ("inputs x 4 pi", {"input_scale": PUBLIC_RADIUS}),
                             ("public geometry", {"data": "spiral-r4pi-2turns"})):
        config = adaptive_config("Spiral", seed, **overrides)
        x = load_splits(config)["train"][0]
        torch.manual_seed(seed)
        model = build_model(config)
        with torch.no_grad():
            logits = model(x)
            pre = model.layers[0](x)
        rows.append({"inputs": label, "logit std": float(logits.std()),
                     "mean |z1 - z0|": float((logits[:, 1] - logits[:, 0]).abs().mean()),
                     "pre-activations > 6 (%)": float(100 * (pre > 6).float().mean())})
    return pd.DataFrame(rows).set_index("inputs").round(3)


def total_width(r: RunResult) -> np.ndarray:
    """Total hidden width of a stored run at every record (the sum of its ``width/l`` curves)."""
    layers = r.config["hidden_layers"]
    return np.sum([r.curves[f"width/{i + 1}"] for i in range(layers)], axis=0)


def cost_table(results: Sequence[RunResult]):
    """Measured CPU seconds per run (one thread), mean per dataset and arm, with the study's total."""
    frame = results_frame(results)
    table = frame.groupby(["study", "dataset", "arm"])["cpu_s"].agg(["mean", "count", "sum"])
    # units in the headers: CPU seconds per run, runs, CPU hours in all
    table = table.assign(sum=table["sum"] / 3600).round({"mean": 1, "sum": 2})
    return table.rename(columns={"mean": "CPU s per run (mean)", "count": "runs", "sum": "CPU hours (sum)"})


def plot_datasets(data_seed: int = 0):
    """Fig. 8: the three tasks (all splits), coloured by class; and the public geometry of Spiral."""
    from hacn_core.engine import plots

    fig, axes = plots.figure(ncols=4, height=2.2)
    colours = plots.categorical([0, 1])  # the two classes

    def scatter(ax, x, y) -> None:
        x = np.asarray(x)
        for label in (0, 1):
            mask = np.asarray(y) == label
            ax.scatter(x[mask, 0], x[mask, 1], color=colours[label], s=2, linewidths=0, label=f"class {label}")

    for ax, d in zip(axes[0], DATASETS):
        splits = synthetic_splits(d, data_seed)
        x = torch.cat([s[0] for s in splits.values()])
        y = torch.cat([s[1] for s in splits.values()])
        scatter(ax, x, y)
        ax.set_title(f"{d}\n(ours)")
    x, y = public_geometry_spiral(data_seed)
    scatter(axes[0, 3], np.asarray(x), y)
    axes[0, 3].set_title("Spiral\n(public geometry)")
    for ax in axes[0]:
        ax.set_aspect("equal")
        ax.set_xticks([])
        ax.set_yticks([])
    return fig


def plot_width_and_accuracy(results: Sequence[RunResult], fixed: Sequence[RunResult]):
    """Fig. 3: total width (left) and test accuracy (right) over epochs, mean over seeds.

    Solid: Eq. 14 (``none``); dashed: renormalised importances (``active``); dotted
    (right): the fixed-width MLP of ``awnn-tabular-fixed``.
    """
    from hacn_core.engine import plots

    fig, axes = plots.figure(ncols=2, height=3.0)
    colours = plots.categorical(DATASETS)
    for d in DATASETS:
        for arm, style in zip(ARMS, ("-", "--")):
            runs = select(results, study="table1", dataset=d, importance_norm=arm)
            if not runs:
                continue
            x = np.asarray(runs[0].curves["record_epoch"])
            label = d if arm == "none" else None
            plots.with_ci(axes[0, 0], x, np.stack([total_width(r) for r in runs]), label, color=colours[d],
                          linestyle=style)
            plots.with_ci(axes[0, 1], x, 100 * np.stack([r.curves["test_acc"] for r in runs]), label,
                          color=colours[d], linestyle=style)
        fx = table1_baseline_runs(fixed, d)
        if fx:
            xf = np.asarray(fx[0].curves["record_epoch"])
            plots.with_ci(axes[0, 1], xf, 100 * np.stack([r.curves["test_acc"] for r in fx]), None,
                          color=colours[d], linestyle=":")
        # Table 1's AWNN width and accuracy (mean, std over 10 runs), at the end of our curves
        x_end = max([line.get_xdata()[-1] for line in axes[0, 0].get_lines()], default=None)
        for ax, quantity in zip(axes[0], ("width", "accuracy")):
            paper = paper_items.item(f"awnn/table1/{d.lower()}-awnn-{quantity}")
            if x_end is not None and paper.paper_value is not None:
                plots.paper_point(ax, x_end, paper.paper_value, yerr=paper.paper_std, color=colours[d],
                                  markeredgecolor=plots.PAPER_COLOUR, markeredgewidth=1.2,
                                  label="_nolegend_")
    axes[0, 0].set(xscale="symlog", yscale="log", xlabel="epoch", ylabel="total width")
    axes[0, 1].set(xscale="symlog", xlabel="epoch", ylabel="test accuracy (%)", ylim=(45, 101))
    axes[0, 0].axhline(quantile_width(START_RATE), color="0.6", linewidth=0.8)
    # colour: the dataset; line style: the arm; so the legend shows both (and the grey marks)
    plots.encoding_legend(fig, colours, {
        "AWNN, Eq. 14 as written": {"linestyle": "-"},
        "AWNN, renormalised importances": {"linestyle": "--"},
        "fixed-width MLP (right)": {"linestyle": ":"},
        "starting width (Eq. 11)": {"color": "0.6", "linewidth": 0.8},
        "paper, Table 1 (AWNN)": {"marker": "D", "linestyle": "none", "markersize": 5,
                                  "markerfacecolor": "white", "markeredgecolor": plots.PAPER_COLOUR},
    }, ncols=3)
    return fig


def plot_elbo(results: Sequence[RunResult], seed: int = 0):
    """The terms of Eq. 13 per epoch (epoch means) for one seed per dataset, Eq. 14 arm."""
    from hacn_core.engine import plots

    fig, axes = plots.figure(ncols=3, height=2.6)
    for ax, d in zip(axes[0], DATASETS):
        runs = [r for r in select(results, study="table1", dataset=d, importance_norm="none") if r.seed == seed]
        if not runs:
            continue
        r = runs[0]
        x = np.asarray(r.curves["record_epoch"])
        for term in ("total", "predictive", "weight_prior"):
            ax.plot(x, r.curves[f"elbo/{term}"], label=term.replace("_", " "))
        ax.set(xscale="symlog", yscale="symlog", title=d, xlabel="epoch")
    plots.figure_legend(fig, axes[0, :1])
    return fig
