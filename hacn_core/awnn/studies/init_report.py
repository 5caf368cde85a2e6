"""What AWNN chapter 1 shows of how a width is set: Figs. 1, 2 and 7 (Errica et al.).

Reads :mod:`hacn_core.awnn.studies.init` (the analytic pieces and the stored runs of
``awnn-kaiming-plus``):

Fig. 1 (analytic)
    :func:`start_width_table` and :func:`plot_importance`: the discretized
    exponential ``f(x; nu)`` (Eq. 12), its quantile width ``D`` at ``k`` (Eq. 11)
    beside the paper's "approximately" (App. C.1-C.3), and the activations
    rescaled by ``f(j)`` (Eq. 14), all from ``hacn_core.awnn``.

Fig. 2 and Fig. 7 (left)
    :func:`variance_table` and :func:`plot_variances`: ``Var[alpha^l]`` per layer at
    initialisation, measured (:func:`~hacn_core.awnn.studies.init.activation_variances`)
    beside Appendix A's prediction (:func:`~hacn_core.awnn.studies.init.theory_variances`);
    :func:`gradient_table`: how much the data can move each layer at the first step.

Fig. 7 (right)
    :func:`results_frame`, :func:`summary` and :func:`plot_convergence`: SpiralHard
    training with kaiming and kaiming+.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch

from hacn_core import awnn
from hacn_core.awnn.studies.init import (
    BATCH_SIZE,
    CONVERGED_ACC,
    DATASET,
    HIDDEN_LAYERS,
    INIT_LABELS,
    INITS,
    K,
    RATE,
    activation_variances,
    build_model,
    elbo_loss,
    make_config,
    theory_variances,
)
from hacn_core.engine.data import synthetic_splits
from hacn_core.engine.registry import select
from hacn_core.engine.results import RunResult
from hacn_core.awnn import paper_items
from hacn_core.awnn.paper_items import item as paper_item

# Paper values of the starting widths (Eq. 11, App. C.1-C.3): item id per rate.
START_WIDTH_ITEMS: dict[float, str] = {
    0.01: "awnn/eq11/start-width-tabular-rate0.01",
    0.02: "awnn/eq11/start-width-image-rate0.02",
    0.004: "awnn/eq11/start-width-multi30k-rate0.004",
}


# --------------------------------------------------------------------------- Fig. 1


def start_width_table(k: float = K):
    """The starting width ``D`` (Eq. 11) of each rate the paper uses, beside its "approximately".

    Columns: ``rate``, ``paper`` (the paper's rounded figure), ``ours``
    (:func:`hacn_core.awnn.quantile_width`), ``ln(1/(1-k))/rate`` (the real-valued
    quantile before the ceiling), ``mass of D`` (``1 - e^{-rate D} >= k``) and the
    relative difference.
    """
    import pandas as pd

    rows = []
    for rate, item_id in START_WIDTH_ITEMS.items():
        d = awnn.quantile_width(rate, k)
        paper = paper_item(item_id).paper_value
        rows.append({
            "rate": rate,
            "source": paper_item(item_id).source,
            "paper (approx.)": int(paper),
            "ours D": d,
            "ln(1/(1-k))/rate": -math.log1p(-k) / rate,
            "mass of first D": awnn.importance_mass(rate, d),
            "ours / paper - 1": d / paper - 1.0,
            "item": item_id,
        })
    return pd.DataFrame.from_records(rows)


def plot_importance(rates: Sequence[float] = (0.02, 0.01, 0.004), k: float = K, seed: int = 0,
                    activation_rate: float = 0.02):
    """Fig. 1 (middle, right): ``f(x; nu)`` with its quantile width, and rescaled activations.

    Left: Eq. 12 for each rate, the first ``D`` positions shaded and ``D`` marked.
    Right: one hidden layer of width ``D`` (rate ``activation_rate``) on one input
    (seeded): ``alpha_j = ReLU(w_j x)`` before and ``h_j = alpha_j f(j)`` after the
    rescaling of Eq. 14 (right axis).
    """
    from hacn_core.engine import plots

    fig, axes = plots.figure(2, height=3.2)
    ax = axes[0, 0]
    x_max = int(1.3 * awnn.quantile_width(min(rates), k))
    x = torch.arange(x_max, dtype=torch.float64)
    for rate in rates:
        f = awnn.discretized_exponential(x, rate).numpy()
        d = awnn.quantile_width(rate, k)
        (line,) = ax.plot(x.numpy(), f, label=f"$\\nu$ = {rate:g}: D = {d}")
        ax.fill_between(x.numpy()[:d], f[:d], color=line.get_color(), alpha=0.15, linewidth=0)
        ax.axvline(d, color=line.get_color(), linestyle="--", linewidth=1)
        paper_d = _paper_start_width(rate)
        if paper_d is not None:  # the paper's "approximately D" (App. C), on our curve
            plots.paper_point(ax, paper_d, float(awnn.discretized_exponential(torch.tensor(paper_d, dtype=torch.float64),
                                                                               rate)),
                              label="_nolegend_")
    plots.paper_key(ax, "paper's D (approx.)")
    ax.set_xlabel("neuron position x")
    ax.set_ylabel("importance f(x; $\\nu$)")
    ax.set_title(f"Eq. 12; D = quantile at k = {k:g} (Eq. 11)")
    plots.legend(ax, outside="below", ncols=2)

    ax = axes[0, 1]
    d = awnn.quantile_width(activation_rate, k)
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(d, 2, generator=g, dtype=torch.float64)
    inp = torch.randn(2, generator=g, dtype=torch.float64)
    alpha = torch.relu(w @ inp)
    h = alpha * awnn.importances(torch.tensor(activation_rate, dtype=torch.float64), d)
    j = np.arange(d)
    # alpha_j as bars on the left axis, h_j as dots on the right: two scales (f(j) < nu shrinks h_j about
    # fiftyfold) with their zeros at one height, so a dot on the floor is a neuron whose alpha_j is 0
    ax.bar(j, alpha.numpy(), width=0.8, color="0.55", label="$\\alpha_j$ = ReLU($w_j x$)")
    ax.set_xlabel("neuron position j")
    ax.set_ylabel("$\\alpha_j$ (before)")
    ax2 = plots.twin_axes(ax)
    ax2.plot(j, h.numpy(), ".", markersize=4, color=plots.HOUSE_COLOURS[0], label="$h_j = \\alpha_j f(j)$")
    ax2.set_ylabel("$h_j$ (after, Eq. 14)", color=plots.HOUSE_COLOURS[0])
    plots.align_zeros(ax, ax2)
    ax.set_title(f"one layer, $\\nu$ = {activation_rate:g}, D = {d}")
    handles = ax.get_legend_handles_labels()
    handles2 = ax2.get_legend_handles_labels()
    plots.legend_outside(ax, "below", handles=handles[0] + handles2[0], labels=handles[1] + handles2[1], ncols=2)
    return fig


def _paper_start_width(rate: float) -> float | None:
    """The starting width the paper gives for ``rate`` (App. C: "approximately D"), from its paper items."""
    for it in paper_items.ITEMS:
        if it.id.startswith("awnn/eq11/start-width-") and float(it.id.rsplit("rate", 1)[1]) == rate:
            return it.paper_value
    return None



# --------------------------------------------------------------------------- Fig. 2 / Fig. 7 (left)


def variance_table(hidden_layers: int = HIDDEN_LAYERS, rate: float = RATE, n_inputs: int = 4096, seed: int = 0):
    """Measured and predicted ``Var[alpha^l]`` per layer for kaiming and kaiming+ (a DataFrame)."""
    import pandas as pd

    rows = []
    for init in INITS:
        measured = activation_variances(init, hidden_layers=hidden_layers, rate=rate, n_inputs=n_inputs, seed=seed)
        theory = theory_variances(init, hidden_layers=hidden_layers, rate=rate)
        for layer, (m, t) in enumerate(zip(measured, theory), start=1):
            rows.append({"init": INIT_LABELS[init], "layer": layer, "measured": m, "theory": t,
                         "measured / theory": m / t})
    return pd.DataFrame.from_records(rows)


def plot_variances(table):
    """Fig. 2 / Fig. 7 (left): ``Var[alpha^l]`` per layer, measured (markers) and theory (lines)."""
    from hacn_core.engine import plots

    fig, axes = plots.figure(1, height=3.2)
    ax = axes[0, 0]
    for i, init in enumerate(INITS):
        sub = table[table["init"] == INIT_LABELS[init]]
        ax.plot(sub["layer"], sub["theory"], "-", color=f"C{i}", label=f"{INIT_LABELS[init]}: theory")
        ax.plot(sub["layer"], sub["measured"], "o", color=f"C{i}", label=f"{INIT_LABELS[init]}: measured")
    ax.set_yscale("log")
    ax.set_xlabel("hidden layer l")
    ax.set_ylabel("Var[$\\alpha^l$] at initialisation")
    ax.set_xticks(sorted(table["layer"].unique()))
    plots.legend(ax)
    return fig


def gradient_table(batch_size: int = BATCH_SIZE, seed: int = 0):
    """Root-mean-square gradient of the predictive term of Eq. 13 at initialisation, per layer.

    One SpiralHard training batch, the run's network (:func:`build_model`) under
    each init, ``N = 3500``, no weight prior: how much the data can move each
    layer's weights (``rho``, biases excluded) at the first step. ``layer``
    ``L + 1`` is the output layer.
    """
    import pandas as pd

    splits = synthetic_splits(DATASET, 0)
    x, y = (t[:batch_size] for t in splits["train"])
    n_train = len(splits["train"][1])
    rows = []
    for init in INITS:
        model = build_model(make_config(init, seed))
        model.zero_grad()
        elbo_loss(model, n_train, None)(model(x), y).backward()
        for layer, lin in enumerate(model.layers, start=1):
            g = lin.rho.grad[:, lin.col0:]
            rows.append({"init": INIT_LABELS[init], "layer": layer,
                         "weight rms": float(lin.weight.detach().pow(2).mean().sqrt()),
                         "data gradient rms": float(g.pow(2).mean().sqrt())})
    return pd.DataFrame.from_records(rows)


# --------------------------------------------------------------------------- Fig. 7 (right)


def results_frame(results: Sequence[RunResult]):
    """One row per run: init, seed and the metrics."""
    import pandas as pd

    frame = pd.DataFrame.from_records(
        [{"init": INIT_LABELS[r.config["init"]], "seed": r.seed, "epochs": r.config["epochs"], **r.metrics,
          "wall_s": r.provenance.get("wall_time_s")} for r in results])
    return frame.sort_values(["init", "seed"]).reset_index(drop=True)


#: the per-run table's columns as the chapter shows them (the summary table's names, units where they have one)
RUN_COLUMNS: dict[str, str] = {
    "epochs_to_converge": "epochs to converge", "best_epoch": "best epoch (val)",
    "final_train_loss": "final train loss", "final_train_acc": "final train acc", "final_test_acc": "final test acc",
    "test_acc": "test acc (best val)", "final_total_width": "final total width", "wall_s": "wall time (s)",
}
#: one precision per kind of quantity in the per-run table (accuracies as fractions, as the summary shows them)
RUN_FORMATS: dict[str, str] = {
    "final train acc": ".3f", "final test acc": ".3f", "test acc (best val)": ".3f", "final train loss": ".4g",
    "final total width": ",.0f", "wall time (s)": ",.0f", "epochs to converge": ",.0f", "best epoch (val)": ",.0f",
}


def _stack(results: Sequence[RunResult], key: str) -> tuple[np.ndarray, np.ndarray]:
    xs = "record_epoch" if key != "train_loss" else "epoch"
    n = min(len(r.curves[key]) for r in results)
    x = np.asarray(results[0].curves[xs][:n], dtype=float)
    return x, np.asarray([r.curves[key][:n] for r in results], dtype=float)


def summary(results: Sequence[RunResult]):
    """Per init: seeds, how many reached ``CONVERGED_ACC`` training accuracy and when, final accuracies and width."""
    import pandas as pd

    frame = results_frame(results)
    rows = []
    for init in INITS:
        sub = frame[frame["init"] == INIT_LABELS[init]]
        if sub.empty:
            continue
        reached = sub["epochs_to_converge"].dropna()
        rows.append({
            "init": INIT_LABELS[init],
            "seeds": len(sub),
            "epochs": int(sub["epochs"].iloc[0]),
            f"reached {CONVERGED_ACC:.0%} train acc": f"{len(reached)} of {len(sub)}",
            "epoch reached (mean)": float(reached.mean()) if len(reached) else float("nan"),
            "final train acc": float(sub["final_train_acc"].mean()),
            "final test acc": float(sub["final_test_acc"].mean()),
            "test acc (best val)": float(sub["test_acc"].mean()),
            "final total width": float(sub["final_total_width"].mean()),
        })
    return pd.DataFrame.from_records(rows)


def plot_convergence(results: Sequence[RunResult]):
    """Fig. 7 (right): training cross-entropy, test accuracy and total width over epochs, per init
    (mean over seeds with a band of one standard error)."""
    from hacn_core.engine import plots

    fig, axes = plots.figure(3, height=3.0)
    panels = [("train_nll", "training cross-entropy"), ("test_acc", "test accuracy"),
              ("total_width", "total hidden width")]
    for i, init in enumerate(INITS):
        runs = select(results, init=init)
        if not runs:
            continue
        for ax, (key, label) in zip(axes[0], panels):
            x, y = _stack(runs, key)
            seeds = f"{len(runs)} seed" + ("s" if len(runs) > 1 else "")
            plots.with_ci(ax, x, y, label=f"{INIT_LABELS[init]} ({seeds})", color=f"C{i}")
            ax.set_ylabel(label)
            ax.set_xlabel("epoch")
    plots.clip_log_axis(axes[0, 0])  # the cross-entropy: fitted to the curves, not to their bands
    plots.figure_legend(fig, axes[0, :1])
    return fig
