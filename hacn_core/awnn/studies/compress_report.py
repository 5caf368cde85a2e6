"""What AWNN chapter 3 shows of compression: Fig. 5 (annealed rate prior) and Fig. 6 (truncation).

Reads the stored runs of :mod:`hacn_core.awnn.studies.compress` (``awnn-compress``):
:func:`anneal_table` and :func:`prior_effect_table` (Sec. 5.3, Fig. 5 in numbers),
:func:`truncation_table` (Sec. 5.4, Fig. 6 in numbers), :func:`cost_table`, and the
figures :func:`plot_anneal` (Fig. 5) and :func:`plot_truncation` (Fig. 6).
"""

from __future__ import annotations

from collections.abc import Sequence
import numpy as np

from hacn_core.awnn import paper_items
from hacn_core.awnn.studies.common import ARMS
from hacn_core.awnn.studies.compress import RATE_PRIORS, exponential_fit
from hacn_core.engine.registry import select
from hacn_core.engine.results import RunResult
from hacn_core.engine.tables import mean_std


#: how the tables and legends name the two importance arms (:data:`~hacn_core.awnn.studies.common.ARMS`)
ARM_LABELS = {"none": "Eq. 14", "active": "renormalised"}


def anneal_table(results: Sequence[RunResult]):
    """Fig. 5 in numbers: total width and test accuracy (%) at the prior's start and at the
    end, annealed runs beside their controls, mean (std) over seeds, and the paper's values."""
    import pandas as pd

    rows = []
    for arm in ARMS:
        for prior in RATE_PRIORS:
            runs = select(results, study="anneal", importance_norm=arm, rate_prior=prior)
            if not runs:
                continue
            m = {k: [r.metrics[k] for r in runs] for k in runs[0].metrics}
            start, end = runs[0].config["prior_start_epoch"], runs[0].config["epochs"]
            rows.append({
                "arm": ARM_LABELS[arm], "rate prior": "annealed" if prior == "annealed" else "none (control)",
                f"width @ {start}": mean_std(m["width_before"]), f"width @ {end}": mean_std(m["width_after"]),
                "after / before": mean_std(m["width_ratio"], 2),
                f"test acc @ {start} (%)": mean_std(100 * np.asarray(m["test_acc_before"])),
                f"test acc @ {end} (%)": mean_std(100 * np.asarray(m["test_acc_after"])),
                "seeds": len(runs),
            })
    if not rows:
        return pd.DataFrame()
    before = paper_items.item("awnn/fig5-left/width-before-annealing").paper_value
    after = paper_items.item("awnn/fig5-left/width-after-annealing").paper_value
    cols = list(rows[0])
    rows.append(dict(zip(cols, ["paper (Fig. 5)", "annealed", f"~{before:g}", f"~{after:g}",
                                f"~{after / before:.2f}", "not given", "'without any degradation'", "-"], strict=True)))
    return pd.DataFrame(rows).set_index(["arm", "rate prior"])


def prior_effect_table(results: Sequence[RunResult]):
    """The prior's effect at equal epochs: per arm and seed, the width and test accuracy at
    the end of the annealed run and of its control (same seed, identical until the prior
    starts), and the ratio of the two widths."""
    import pandas as pd

    rows = []
    for arm in ARMS:
        controls = {r.seed: r for r in select(results, study="anneal", importance_norm=arm, rate_prior="none")}
        for r in sorted(select(results, study="anneal", importance_norm=arm, rate_prior="annealed"), key=lambda r: r.seed):
            c = controls.get(r.seed)
            if c is None:
                continue
            rows.append({"arm": ARM_LABELS[arm], "seed": r.seed, "width @ start": r.metrics["width_before"],
                         "width, annealed": r.metrics["width_after"], "width, control": c.metrics["width_after"],
                         "annealed / control": round(r.metrics["width_after"] / c.metrics["width_after"], 3),
                         "test acc, annealed (%)": round(100 * r.metrics["test_acc_after"], 1),
                         "test acc, control (%)": round(100 * c.metrics["test_acc_after"], 1)})
    return pd.DataFrame(rows).set_index(["arm", "seed"]) if rows else pd.DataFrame()


def truncation_table(results: Sequence[RunResult]):
    """Fig. 6 in numbers, per arm (mean (std) over seeds) beside the paper: the width that is
    cut, the untruncated test accuracy, the lossless fraction, the accuracy with half the
    neurons removed, and the exponential fit of the per-neuron activations (decay per
    neuron beside the layer's rate ``nu``, and the fit's R^2 in log space)."""
    import pandas as pd

    rows = []
    for arm in ARMS:
        runs = select(results, study="truncate", importance_norm=arm)
        if not runs:
            continue
        m = {k: np.asarray([r.metrics[k] for r in runs], dtype=float) for k in runs[0].metrics}
        rows.append({
            "arm": ARM_LABELS[arm], "hidden width": mean_std(m["truncation_width"]),
            "test acc (%)": mean_std(100 * m["untruncated_test_acc"]),
            "lossless cut (%)": mean_std(100 * m["lossless_fraction"]),
            "test acc, half cut (%)": mean_std(100 * m["acc_at_half"]),
            "activation decay b": mean_std(m["activation_decay"], 3), "rate nu": mean_std(m["final_rate"], 3),
            "fit R^2": mean_std(m["activation_fit_r2"], 2), "dead neurons": mean_std(m["dead_neurons"]),
            "seeds": len(runs),
        })
    if not rows:
        return pd.DataFrame()
    width = paper_items.item("awnn/fig6-left/truncation-width").paper_value
    lossless = paper_items.item("awnn/fig6-left/lossless-truncation").paper_value
    rows.append(dict(zip(rows[0], ["paper (Fig. 6)", f"{width:g}", "-", f"{lossless:g}", "-", "-", "-",
                                   "'exponential-like'", "-", "-"], strict=True)))
    return pd.DataFrame(rows).set_index("arm")


def cost_table(results: Sequence[RunResult]):
    """Measured CPU seconds per run (one thread): mean, count and sum per study, arm and prior."""
    import pandas as pd

    frame = pd.DataFrame([{"study": r.config["study"], "arm": ARM_LABELS[r.config["importance_norm"]],
                           "rate prior": r.config["rate_prior"], "cpu_s": r.metrics["cpu_s"]} for r in results])
    table = frame.groupby(["study", "arm", "rate prior"])["cpu_s"].agg(["mean", "count", "sum"])
    # units in the headers: CPU seconds per run, runs, CPU hours in all
    table = table.assign(sum=table["sum"] / 3600).round({"mean": 1, "sum": 2})
    return table.rename(columns={"mean": "CPU s per run (mean)", "count": "runs", "sum": "CPU hours (sum)"})


def plot_anneal(results: Sequence[RunResult]):
    """Fig. 5: total width (left, log scale), test accuracy (middle) and the width term of
    Eq. 13 (right, Fig. 5's inset: ``log p(nu)/q(nu)`` = minus the logged term, epoch means)
    over epochs, mean over seeds with a band of one standard error. Solid: annealed prior;
    dashed: control; colours: the two arms. Grey band: the prior's window; crosses: the
    paper's ~800 at the start and ~300 at the end."""
    from hacn_core.engine import plots

    fig, axes = plots.figure(ncols=3, height=2.8)
    colours = plots.categorical(ARMS)
    window = None
    for arm in ARMS:
        for prior, style in zip(RATE_PRIORS, ("-", "--")):
            runs = select(results, study="anneal", importance_norm=arm, rate_prior=prior)
            if not runs:
                continue
            c0 = runs[0].config
            window = (c0["prior_start_epoch"], c0["prior_end_epoch"])
            x = np.asarray(runs[0].curves["record_epoch"])
            label = f"{ARM_LABELS[arm]}, {'annealed prior' if prior == 'annealed' else 'no prior'}"
            plots.with_ci(axes[0, 0], x, np.stack([r.curves["width/1"] for r in runs]), label,
                          color=colours[arm], linestyle=style)
            plots.with_ci(axes[0, 1], x, 100 * np.stack([r.curves["test_acc"] for r in runs]), None,
                          color=colours[arm], linestyle=style)
            if prior == "annealed":
                term = -np.stack([r.curves["elbo/width_prior"] for r in runs])
                plots.with_ci(axes[0, 2], x[1:], term[:, 1:], ARM_LABELS[arm], color=colours[arm])
    if window is not None:
        for ax in axes[0]:
            ax.axvspan(*window, color="0.85", zorder=0, linewidth=0)
        before = paper_items.item("awnn/fig5-left/width-before-annealing").paper_value
        after = paper_items.item("awnn/fig5-left/width-after-annealing").paper_value
        plots.paper_point(axes[0, 0], window[0], before, label=f"paper (~{before:g} → ~{after:g})")
        plots.paper_point(axes[0, 0], window[1], after, label="_nolegend_")
    axes[0, 0].set(xlabel="epoch", ylabel="total width")
    if axes[0, 0].get_lines():
        plots.clip_log_axis(axes[0, 0])
    axes[0, 1].set(xlabel="epoch", ylabel="test accuracy (%)")
    axes[0, 2].set(xlabel="epoch", ylabel=r"$\log p(\nu)/q(\nu)$ (maximised)")
    plots.figure_legend(fig, axes[0, :1], ncols=3)
    return fig


def plot_truncation(results: Sequence[RunResult], seed: int | None = None):
    """Fig. 6. Left: test accuracy against the percentage of last neurons removed, mean over
    seeds per arm with a band of one standard error (each run's curve interpolated on a common
    grid); the paper's lossless 30% as a vertical line. Right: the Eq. 14 activations of every
    hidden neuron over the test set for one run per arm (``seed``, default the smallest): the
    mean ``|h_j|`` (dots) with a line up to its 95% quantile, the least-squares exponential fit
    of the means (dotted, drawn inside the frame only), and the neurons that are never active on
    the test set (a mean six decades or more under the largest) as crosses on a labelled floor under
    the smallest active mean."""
    from hacn_core.engine import plots

    fig, axes = plots.figure(ncols=2, height=3.0)
    colours = plots.categorical(ARMS)
    grid = np.linspace(0.0, 0.95, 96)
    profiles = {}  # arm -> (seed, activation profile)
    for arm in ARMS:
        runs = select(results, study="truncate", importance_norm=arm)
        if not runs:
            continue
        acc = np.stack([np.interp(grid, r.curves["truncation/fraction"], r.curves["truncation/test_acc"],
                                  right=np.nan) for r in runs])
        plots.with_ci(axes[0, 0], 100 * grid, 100 * acc, ARM_LABELS[arm], color=colours[arm])
        pick = min(runs, key=lambda r: r.seed if seed is None else abs(r.seed - seed))
        profiles[arm] = (pick.seed, {k[len("activation/"):]: np.asarray(v, dtype=float)
                                     for k, v in pick.curves.items() if k.startswith("activation/")})
    lossless = paper_items.item("awnn/fig6-left/lossless-truncation").paper_value
    plots.paper_line(axes[0, 0], lossless, orientation="vertical", text=False, in_legend=False)
    axes[0, 0].set(xlabel="last neurons removed (%)", ylabel="test accuracy (%)")
    ax = axes[0, 1]
    # active: a mean within six decades of the largest (a dead ReLU's mean of 1e-45 is not a signal)
    active = {arm: prof["mean_abs"] > 1e-6 * np.nanmax(prof["mean_abs"]) for arm, (_, prof) in profiles.items()}
    if profiles:
        low = min(float(prof["mean_abs"][active[arm]].min()) for arm, (_, prof) in profiles.items())
        high = max(float(np.nanmax(prof["q95"])) for _, prof in profiles.values())
        floor = low / 4  # where the never-active neurons are drawn, labelled
        for arm, (pick_seed, prof) in profiles.items():
            j = np.arange(prof["mean_abs"].size)
            on, mean = active[arm], prof["mean_abs"]
            ax.vlines(j[on], mean[on], np.maximum(prof["q95"][on], mean[on]), color=colours[arm], linewidth=0.8,
                      alpha=0.6)
            ax.plot(j[on], mean[on], "o", markersize=3, color=colours[arm])
            ax.plot(j[~on], np.full((~on).sum(), floor), "x", markersize=4, color=colours[arm])
            fit_ = exponential_fit(mean)
            curve = fit_["A"] * np.exp(-fit_["b"] * j)
            inside = (curve >= floor) & (curve <= high * 2)
            ax.plot(j[inside], curve[inside], color=colours[arm], linestyle=":")
        ax.axhline(floor, color="0.75", linewidth=0.6, zorder=0)
        ax.annotate("never active", xy=(0.0, floor), xycoords=("axes fraction", "data"), xytext=(2, 3),
                    textcoords="offset points", ha="left", va="bottom", fontsize=plots.FONT_SIZES["legend.fontsize"],
                    color="0.4")
        ax.set_yscale("log")
        ax.set_ylim(floor / 2, high * 2)
        seeds = sorted({s for s, _ in profiles.values()})
        ax.set_title(f"activations of one run per arm (seed {', '.join(map(str, seeds))})")
    ax.set(xlabel="neuron j", ylabel=r"$|h_j|$ over the test set")
    plots.integer_ticks(ax, "x")
    plots.encoding_legend(fig, {ARM_LABELS[a]: colours[a] for a in ARMS}, {
        "mean $|h_j|$ (right)": {"marker": "o", "markersize": 3, "linestyle": "none"},
        "up to its 95% quantile": {"linewidth": 0.8},
        "exponential fit (right)": {"linestyle": ":"},
        "never active (right)": {"marker": "x", "markersize": 4, "linestyle": "none"},
        f"paper: lossless up to {lossless:g}%": {"linestyle": "--", "color": plots.PAPER_COLOUR, "linewidth": 1.0},
    }, ncols=4)
    return fig
