"""What the CIFAR chapter shows of the residual-gates study (Savarese et al., Sec. 3.2-3.3).

The study (:mod:`hacn_core.gates.studies.cifar`) trains and measures the runs;
this module reads them: our test errors beside the paper's cells of Tables 3-6
(values from :mod:`hacn_core.paper_items`), the k-decay ablation (Table 3), the
final ``k`` per block (Fig. 6), the claims of Sec. 3.2 checked on the runs, the
cost of the runs and the Figs. 6-7 analogues.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from hacn_core.engine.results import RunResult
from hacn_core.engine.stats import cell_means
from hacn_core.engine.tables import ClaimTable
from hacn_core.gates.studies.cifar import PAPER_CELLS, VARIANTS, paper_item_ids
from hacn_core.gates.paper_items import item

VARIANT_LABELS = {"original": "Original", "gated": "Gated", "gated_kdecay": "Gated (k decay)"}
MODEL_LABELS = {"resnet5": "ResNet 5", "wrn-2-4": "Wide ResNet (2,4)", "wrn-4-10": "Wide ResNet (4,10)",
                "wrn-4-10-dropout": "Wide ResNet (4,10) + Dropout", "wrn-8-1": "Wide ResNet (8,1)",
                "wrn-6-10-dropout": "Wide ResNet (6,10) + Dropout",
                "mini-wrn": "mini WRN (2, 8/16/32)", "mini-wrn-dropout": "mini WRN (2, 8/16/32) + Dropout"}


def paper_value(dataset: str, model: str, variant: str) -> float | None:
    """The paper's test error (%) for a cell of Tables 3-6, or None where it reports none."""
    ids = paper_item_ids(dataset, model, variant)
    return item(ids[0]).paper_value if ids else None


def _table_names(ids) -> str:
    """The paper's tables an item id list names, as the paper writes them: ``gates/table3/...`` -> "Table 3"."""
    return ", ".join(sorted({i.split("/")[1].replace("table", "Table ") for i in ids}))


# ----------------------------------------------------------------------------- tables


def results_frame(results: Sequence[RunResult]):
    """One row per run: configuration essentials and the final metrics (a pandas DataFrame)."""
    import pandas as pd

    rows = []
    for r in results:
        cfg = r.config
        rows.append({"dataset": cfg["dataset"], "model": cfg["model"], "analogue_of": cfg["analogue_of"],
                     "variant": cfg["variant"], "seed": cfg["seed"], "epochs": cfg["epochs"], **r.metrics})
    return pd.DataFrame.from_records(rows)


def _paper_cell(dataset: str, model: str, analogue_of: str | None) -> tuple[str, str]:
    """The paper's (dataset, model) a group of runs stands for (CIFAR-10 for the Fashion-MNIST analogue)."""
    if analogue_of is None:
        return dataset, model
    return "CIFAR10", analogue_of


def comparison_table(results: Sequence[RunResult]):
    """Test error (%) per network and variant: ours (mean, std over seeds) beside the paper's cell.

    For the book's analogue the paper column is the CIFAR-10 cell of the
    network it stands for (``analogue_of``): not comparable number for number.
    """
    import pandas as pd

    frame = results_frame(results)
    rows = []
    for (dataset, model, variant), g in frame.groupby(["dataset", "model", "variant"], sort=False):
        pd_, pm = _paper_cell(dataset, model, g["analogue_of"].iloc[0])
        ids = paper_item_ids(pd_, pm, variant)
        rows.append({
            "dataset": dataset, "model": MODEL_LABELS.get(model, model), "variant": VARIANT_LABELS[variant],
            "paper cell": f"{MODEL_LABELS[pm]}, {pd_}", "tables": _table_names(ids),
            "paper (%)": paper_value(pd_, pm, variant), "ours (%)": 100 * g["test_error"].mean(),
            "std": 100 * g["test_error"].std(ddof=1) if len(g) > 1 else np.nan, "seeds": len(g),
            "mean k": g["mean_k"].mean() if "mean_k" in g else np.nan,
            "parameters": int(g["parameters"].iloc[0]),
        })
    order = {v: i for i, v in enumerate(VARIANT_LABELS.values())}
    table = pd.DataFrame.from_records(rows)
    return table.sort_values(["dataset", "model", "variant"],
                             key=lambda s: s.map(order) if s.name == "variant" else s).reset_index(drop=True)


def paper_cells_table(results: Sequence[RunResult] = ()):
    """Every own cell of Tables 3-6 (test error %, the paper's value) with ours where CIFAR runs are stored.

    The literature rows of Table 6 are not reproduced here. ``ours`` is the
    mean over seeds of the ``paper``-profile runs of that cell, else empty.
    """
    import pandas as pd

    ours: dict[tuple[str, str, str], list[float]] = {}
    for r in results:
        ours.setdefault((r.config["dataset"], r.config["model"], r.config["variant"]), []).append(
            100 * float(r.metrics["test_error"]))
    rows = []
    for (dataset, model), variants in PAPER_CELLS.items():
        for variant in variants:
            ids = paper_item_ids(dataset, model, variant)
            mine = ours.get((dataset, model, variant), [])
            rows.append({"dataset": dataset, "model": MODEL_LABELS[model], "variant": VARIANT_LABELS[variant],
                         "tables": _table_names(ids),
                         "paper (%)": paper_value(dataset, model, variant),
                         "ours (%)": float(np.mean(mine)) if mine else np.nan, "seeds": len(mine)})
    return pd.DataFrame.from_records(rows)


def kdecay_table(results: Sequence[RunResult]):
    """The k-decay ablation (Table 3): per network, original / gated / gated + k decay, and the differences.

    Differences are in percentage points of test error, paired by seed
    (mean over the seeds present in both variants); the paper's differences
    from Table 3 beside them where it has the cell.
    """
    import pandas as pd

    frame = results_frame(results)
    rows = []
    for (dataset, model), g in frame.groupby(["dataset", "model"], sort=False):
        err = {v: g[g.variant == v].set_index("seed")["test_error"] * 100 for v in VARIANTS}
        if err["gated_kdecay"].empty:
            continue
        pd_, pm = _paper_cell(dataset, model, g["analogue_of"].iloc[0])
        paper = {v: paper_value(pd_, pm, v) for v in VARIANTS}

        def diff(a: str, b: str) -> float:
            return float((err[a] - err[b]).dropna().mean())

        def pdiff(a: str, b: str) -> float:
            return paper[a] - paper[b] if paper[a] is not None and paper[b] is not None else np.nan

        k = {v: g[g.variant == v]["mean_k"].mean() for v in ("gated", "gated_kdecay")}
        rows.append({"dataset": dataset, "model": MODEL_LABELS.get(model, model),
                     **{f"{VARIANT_LABELS[v]} (%)": err[v].mean() for v in VARIANTS},
                     "gated - original": diff("gated", "original"), "paper: gated - original": pdiff("gated", "original"),
                     "k decay - gated": diff("gated_kdecay", "gated"),
                     "paper: k decay - gated": pdiff("gated_kdecay", "gated"),
                     "mean k (gated)": k["gated"], "mean k (k decay)": k["gated_kdecay"]})
    return pd.DataFrame.from_records(rows)


def k_per_block_table(results: Sequence[RunResult]):
    """Fig. 6 in a table: final ``k`` of every block (mean over seeds) of the gated runs, dimension changes marked."""
    import pandas as pd

    rows = []
    groups: dict[tuple[str, str, str], list[RunResult]] = {}
    for r in results:
        if r.config["variant"] != "original":
            groups.setdefault((r.config["dataset"], r.config["model"], r.config["variant"]), []).append(r)
    for (dataset, model, variant), runs in groups.items():
        k = np.mean([r.curves["k_per_block"] for r in runs], axis=0)
        changing = set(runs[0].curves["dim_change_blocks"])
        row = {"dataset": dataset, "model": MODEL_LABELS.get(model, model), "variant": VARIANT_LABELS[variant],
               "seeds": len(runs)}
        row |= {f"{i}{'*' if i in changing else ''}": float(v) for i, v in enumerate(k, start=1)}
        rows.append(row)
    return pd.DataFrame.from_records(rows)


def _group_means(results: Sequence[RunResult], metric: str) -> dict[tuple[str, str, str], float]:
    return cell_means(results, metric, ("dataset", "model", "variant"))


def claims(results: Sequence[RunResult]):
    """The paper's claims of Sec. 3.2, each checked on ``results`` (means over seeds per cell).

    Returns a DataFrame with the claim, where the paper makes it, our evidence
    and whether it holds (``None`` when the runs cannot tell).
    """
    err = _group_means(results, "test_error")
    gap = _group_means(results, "k_dim_change_gap")
    last = _group_means(results, "k_last_is_max")
    nets = sorted({(d, m) for d, m, _ in err})
    table = ClaimTable()
    add = table.add

    for d, m in nets:
        label = f"{MODEL_LABELS.get(m, m)} on {d}"
        if (d, m, "gated") in err and (d, m, "original") in err:
            g, o = 100 * err[(d, m, "gated")], 100 * err[(d, m, "original")]
            add(f"{label}: gated has lower test error than original", "Tables 3-5",
                f"{g:.2f}% vs {o:.2f}%", g < o)
        if (d, m, "gated_kdecay") in err and (d, m, "gated") in err:
            kd, g = 100 * err[(d, m, "gated_kdecay")], 100 * err[(d, m, "gated")]
            add(f"{label}: k decay hurts (higher error than gated without it)", "Table 3",
                f"{kd:.2f}% vs {g:.2f}%", kd > g)
        if (d, m, "gated") in gap:
            add(f"{label}: dimension-changing blocks have the smallest k", "Fig. 6",
                f"mean k of other blocks - dimension-changing ones = {gap[(d, m, 'gated')]:.3f}",
                gap[(d, m, "gated")] > 0)
        if (d, m, "gated") in last:
            add(f"{label}: the last block has the largest k", "Fig. 6",
                f"in {100 * last[(d, m, 'gated')]:.0f}% of the seeds", last[(d, m, "gated")] == 1.0)
    return table.frame()


def cost_table(results: Sequence[RunResult]):
    """Wall-clock minutes per run (mean over seeds) for each network and variant, and the total.

    Read off the stored runs (``wall_time_s``: the whole run with its per-epoch
    evaluations), so it names the cost on the machine in their provenance.
    """
    import pandas as pd

    rows: dict[tuple[str, str], list[float]] = {}
    for r in results:
        rows.setdefault((r.config["model"], r.config["variant"]), []).append(r.metrics["wall_time_s"] / 60)
    frame = pd.DataFrame([{"network": m, "variant": v, "runs": len(t), "minutes per run": float(np.mean(t)),
                           "minutes in all": float(np.sum(t))} for (m, v), t in sorted(rows.items())])
    if len(frame):
        frame.loc[len(frame)] = {"network": "all", "variant": "", "runs": int(frame["runs"].sum()),
                                 "minutes per run": float("nan"), "minutes in all": float(frame["minutes in all"].sum())}
    return frame


# ----------------------------------------------------------------------------- figures

#: one colour per variant (the house categorical palette: C0, C1, C2)
_VARIANT_STYLE = {"original": {"color": "C0"}, "gated": {"color": "C1"}, "gated_kdecay": {"color": "C2"}}


def _models(results: Sequence[RunResult]) -> list[tuple[str, str]]:
    seen: dict[tuple[str, str], None] = {}
    for r in results:
        seen[(r.config["dataset"], r.config["model"])] = None
    return list(seen)


def plot_k_per_block(results: Sequence[RunResult], variants: Sequence[str] = ("gated", "gated_kdecay")):
    """Fig. 6 analogue: final ``k`` per block (mean over seeds, dots per seed), one panel per network.

    Grey bands mark the blocks that change the feature-map dimension (the
    paper's blocks 1, 5, 9 of WRN (4,10)).
    """
    from hacn_core.engine import plots

    nets = [(d, m) for d, m in _models(results)
            if any(r.config["variant"] != "original" for r in results if (r.config["dataset"], r.config["model"]) == (d, m))]
    if not nets:
        raise ValueError("no gated run among the results")
    fig, axes = plots.figure(ncols=min(len(nets), 2), nrows=-(-len(nets) // 2), height=2.8, sharey=True)
    flat = axes.ravel()
    for ax, (d, m) in zip(flat, nets):
        changing: list[int] = []
        for variant in variants:
            runs = [r for r in results if (r.config["dataset"], r.config["model"], r.config["variant"]) == (d, m, variant)]
            if not runs:
                continue
            k = np.array([r.curves["k_per_block"] for r in runs], dtype=float)
            blocks = np.arange(1, k.shape[1] + 1)
            changing = runs[0].curves["dim_change_blocks"]
            style = _VARIANT_STYLE[variant]
            ax.plot(blocks, k.mean(0), marker="o", label=VARIANT_LABELS[variant], **style)
            for row in k:
                ax.plot(blocks, row, linestyle="none", marker=".", alpha=0.5, **style)
        for b in changing:
            ax.axvspan(b - 0.4, b + 0.4, color="0.85", zorder=0, linewidth=0)
        ax.axhline(1.0, color="0.6", linewidth=0.8, linestyle=":")
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.set_title(f"{MODEL_LABELS.get(m, m)}\n{d}")
        ax.set_xlabel("residual block (grey: changes dimension)")
    for ax in flat[len(nets):]:
        ax.set_visible(False)
    flat[0].set_ylabel("final k")
    plots.figure_legend(fig, flat[:1])
    return fig


def plot_curves(results: Sequence[RunResult], variants: Sequence[str] = ("original", "gated")):
    """Fig. 7 analogue: per network, training error (dashed) and test error (solid) per epoch, and the
    training loss below, one colour per variant (mean over seeds with a band)."""
    from hacn_core.engine import plots

    nets = _models(results)
    fig, axes = plots.figure(ncols=len(nets), nrows=2, height=2.6, sharex="col")
    for col, (d, m) in enumerate(nets):
        top, bottom = axes[0, col], axes[1, col]
        for variant in variants:
            runs = [r for r in results if (r.config["dataset"], r.config["model"], r.config["variant"]) == (d, m, variant)]
            if not runs:
                continue
            style = _VARIANT_STYLE[variant]
            x = runs[0].curves["record_epoch"]
            plots.with_ci(top, x, 100 * np.array([r.curves["test_error"] for r in runs]),
                          label=f"{VARIANT_LABELS[variant]}, test", **style)
            plots.with_ci(top, x, 100 * np.array([r.curves["train_error"] for r in runs]),
                          label=f"{VARIANT_LABELS[variant]}, train", linestyle="--", **style)
            plots.with_ci(bottom, runs[0].curves["epoch"], np.array([r.curves["train_loss"] for r in runs]),
                          label=VARIANT_LABELS[variant], **style)
            for pid in paper_item_ids(d, m, variant)[:1]:  # Tables 3-5: the paper's final test error
                plots.paper_point(top, x[-1], item(pid).paper_value, color=style["color"],
                                  markeredgecolor=plots.PAPER_COLOUR, markeredgewidth=1.2, label="_nolegend_")
                if top.get_legend_handles_labels()[1].count("paper, test error") == 0:
                    plots.paper_key(top, "paper, test error")
        top.set_title(f"{MODEL_LABELS.get(m, m)}\n{d}")
        if top.get_lines():
            plots.clip_log_axis(top)
        bottom.set_xlabel("epoch")
    axes[0, 0].set_ylabel("error (%)")
    axes[1, 0].set_ylabel("training loss")
    plots.figure_legend(fig, axes[:1, :1], ncols=3)
    return fig
