"""What the H-ACN Mixer chapters show of the Mixer study (H-ACN Sec. 3.2, 4 and App. B).

The study (:mod:`hacn_core.hacn.studies.mixer`) trains and measures the runs;
this module reads them: the layer-wise accuracy (Fig. 2a), Tables 2 and 3
beside the paper's values and the cross-seed Pearson correlation of Sec. 4
(paper values from :mod:`hacn_core.paper_items`), every rule on the same
budget with its measured cost (chapter 3), the paper's rule against the public
code's, and Figs. 2, 5, 6 and 7.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from hacn_core.engine import plots, tables
from hacn_core.engine.registry import select
from hacn_core.engine.results import RunResult
from hacn_core.engine.stats import difference, sign_verdict, signed
from hacn_core.hacn.connectivity import pairwise_pearson
from hacn_core.hacn.studies.mixer import STUDY_RULES, TABLE2_MUS, WEIGHTED_RULES, table2_item, table3_item
from hacn_core.hacn.paper_items import item

RULE_LABELS = {
    "resnet": "ResNet", "acn": "ACN", "hacn": "H-ACN", "hacn_code_mixer": "H-ACN (public code rule)",
    "denseformer": "DenseFormer-style", "rezero": "ReZero", "laurel": "LAuReL-style", "dense_mixer": "DenseNet-style",
}
# H-ACN Table 3: our number of classes beside the paper's task; its ImageNet row is not run here.
TABLE3_TASKS: tuple[tuple[int, str], ...] = ((2, "CIFAR-2"), (10, "CIFAR-10"))
TABLE3_IMAGENET = "hacn/table3/imagenet-gamma"
PEARSON_MIXER = "hacn/sec4/alpha-correlation-mixer-cifar10"  # Sec. 4, "Robustness of initialization"


def label(config: dict[str, Any]) -> str:
    """Display name of a run's architecture (rule, or the DenseNet-style Mixer); a study without an ``arch``
    key (the ViT, the decoder) is named by its rule."""
    return RULE_LABELS["dense_mixer"] if config.get("arch") == "dense_mixer" else RULE_LABELS[config["rule"]]


# ----------------------------------------------------------------------------- tables


def cell_runs(results: Sequence[RunResult], *, arch: str | None = "mixer", **where: Any) -> list[RunResult]:
    """The runs whose configuration matches ``arch`` and every ``where`` entry, in seed order.

    ``arch=None`` selects on ``where`` alone (the ViT and decoder studies have no ``arch`` key)."""
    wanted = where if arch is None else {"arch": arch, **where}
    return sorted(select(results, **wanted), key=lambda r: r.seed)


def seed_cell(values: Sequence[float], scale: float = 1.0, digits: int = 1) -> str:
    """``mean (std), n=k`` of ``values`` times ``scale``: the book's spread convention (sample std over seeds)."""
    from hacn_core.engine.tables import mean_std

    values = [scale * v for v in values if v is not None]
    if not values:
        return "-"
    return f"{mean_std(values, digits)}, n={len(values)}"


def main_runs(results: Sequence[RunResult], num_classes: int = 10,
              arch: str | None = "mixer") -> dict[str, list[RunResult]]:
    """Fig. 2's three architectures at ``num_classes``: ResNet, ACN, H-ACN (mu 0.25); ``arch`` as in
    :func:`cell_runs` (None for the ViT study, which has the same three rules)."""
    return {"resnet": cell_runs(results, arch=arch, rule="resnet", num_classes=num_classes),
            "acn": cell_runs(results, arch=arch, rule="acn", num_classes=num_classes),
            "hacn": cell_runs(results, arch=arch, rule="hacn", alpha_mu=0.25, num_classes=num_classes)}


def layerwise_table(results: Sequence[RunResult]):
    """Fig. 2a as numbers: test accuracy (%) at a few exits, mean (std) over seeds."""
    import pandas as pd

    rows = []
    for classes in (10, 2):
        for rule, runs in main_runs(results, classes).items():
            if not runs:
                continue
            acc = np.array([r.curves["layerwise_test_accuracy"] for r in runs])
            L = acc.shape[1] - 1
            row = {"task": f"{classes} classes", "rule": RULE_LABELS[rule]}
            for exit_ in sorted({L // 4, L // 2, 3 * L // 4, L}):
                row[f"exit {exit_}"] = seed_cell(acc[:, exit_], 100.0)
            rows.append(row)
    return pd.DataFrame(rows).set_index(["task", "rule"])


def table2(results: Sequence[RunResult]):
    """Table 2: final test accuracy (%) of the H-ACN Mixer per init mean ``mu``, beside the paper's CIFAR-10."""
    import pandas as pd

    rows = []
    for mu in TABLE2_MUS:
        runs = cell_runs(results, rule="hacn", alpha_mu=mu, num_classes=10)
        rows.append({"mu": mu, "paper (CIFAR-10, %)": item(table2_item(mu)).paper_value,
                     "ours (%)": seed_cell([r.metrics["test_accuracy"] for r in runs], 100.0),
                     "final Gamma (ours)": seed_cell([r.metrics["gamma"] for r in runs], digits=3)})
    return pd.DataFrame(rows).set_index("mu")


def table3(results: Sequence[RunResult]):
    """Table 3: final ``Gamma`` of H-ACN (mu 0.25) on the easy (2-class) and the 10-class task, by Eq. 2
    (``ours Gamma``) and by the public code's rule (``hacn_code_mixer``, its own column)."""
    import pandas as pd

    def gammas(runs: Sequence[RunResult]) -> str:
        return seed_cell([r.metrics["gamma"] for r in runs], digits=3)

    rows = []
    for classes, paper_name in TABLE3_TASKS:
        eq2, code = (cell_runs(results, rule=rule, alpha_mu=0.25, num_classes=classes)
                     for rule in ("hacn", "hacn_code_mixer"))
        rows.append({"task": f"{classes} classes", "paper task": paper_name,
                     "paper Gamma": item(table3_item(classes)).paper_value,
                     "ours Gamma": gammas(eq2),
                     "ours test acc (%)": seed_cell([r.metrics["test_accuracy"] for r in eq2], 100.0),
                     "ours Gamma, public code rule": gammas(code)})
    rows.append({"task": "-", "paper task": "ImageNet", "paper Gamma": item(TABLE3_IMAGENET).paper_value,
                 "ours Gamma": "not run", "ours test acc (%)": "-", "ours Gamma, public code rule": "not run"})
    return pd.DataFrame(rows).set_index("task")


def seed_correlations(results: Sequence[RunResult], rule: str = "hacn", num_classes: int = 10):
    """Sec. 4's robustness check: Pearson correlation of converged ``a`` between every pair of seeds.

    Two columns: over all ``L`` weights (as the paper counts them) and without
    ``a_L``, which receives no gradient (it only feeds ``x_L``, which the output
    never reads) and so keeps its random initial value.
    """
    import pandas as pd

    return correlation_table(cell_runs(results, rule=rule, alpha_mu=0.25, num_classes=num_classes), PEARSON_MIXER,
                             "Mixer/CIFAR-10")


def seed_correlations_by_rule(results: Sequence[RunResult], rules: Sequence[str] = ("hacn", "hacn_code_mixer"),
                              num_classes: int = 10):
    """:func:`seed_correlations` of each rule in ``rules`` with at least two seeds stored, one table with a
    ``rule`` column (Eq. 2's H-ACN beside the public code's rule); an empty frame when none has two."""
    import pandas as pd

    parts = [seed_correlations(results, rule=rule, num_classes=num_classes).reset_index()
             .assign(rule=RULE_LABELS[rule]) for rule in rules]
    parts = [p for p in parts if len(p)]
    if not parts:
        return pd.DataFrame()
    table = pd.concat(parts, ignore_index=True)
    return table[["rule"] + [c for c in table.columns if c != "rule"]]


def pair_pearsons(runs: Sequence[RunResult]) -> list[float]:
    """The Pearson correlation (%) of the converged ``a`` without ``a_L`` of every pair of ``runs`` (the values
    whose mean :func:`correlation_table` reports); empty for fewer than two runs."""
    if len(runs) < 2:
        return []
    corr = pairwise_pearson(torch.as_tensor(np.array([r.curves["alpha_final"] for r in runs])[:, :-1])).numpy()
    return [float(v) for v in 100 * corr[np.triu_indices(len(runs), k=1)]]


def correlation_table(runs: Sequence[RunResult], paper_item: str, paper_setting: str):
    """Pearson correlation of the converged ``a`` (``alpha_final``) between every pair of ``runs`` (seeds of one
    cell), over all ``L`` weights and without ``a_L``, beside the paper's value of ``paper_item``; an empty
    frame for fewer than two runs."""
    import pandas as pd

    if len(runs) < 2:
        return pd.DataFrame()
    finals = np.array([r.curves["alpha_final"] for r in runs])
    paper = item(paper_item).paper_value
    rows = []
    for name, block in (("all L weights", finals), ("without a_L", finals[:, :-1])):
        corr = pairwise_pearson(torch.as_tensor(block)).numpy()
        off = corr[np.triu_indices(len(runs), k=1)]
        rows.append({"weights": name, "seed pairs": len(off), "mean Pearson (%)": 100 * off.mean(),
                     "min (%)": 100 * off.min(), f"paper ({paper_setting}, %)": paper})
    return pd.DataFrame(rows).set_index("weights")


def comparison_table(results: Sequence[RunResult], cost: RunResult | None = None, num_classes: int = 10):
    """Every architecture on the same Mixer and budget (chapter 3): accuracy, exits, cost; mean (std) over seeds.

    With ``cost`` (the ``hacn-mixer-cost`` run) the step time, its ratio to the
    ResNet rule and the activation memory come from that side-by-side
    measurement; without it, from the training runs' own clocks (which other
    jobs on the machine may have slowed by different amounts).
    """
    import pandas as pd

    groups = comparison_groups(results, num_classes)
    reference = groups.get("resnet", [])
    rows = []
    for key, runs in groups.items():
        m = [r.metrics for r in runs]
        row = {
            "architecture": RULE_LABELS[key],
            "test acc (%)": seed_cell([x["test_accuracy"] for x in m], 100.0),
            "half-depth exit acc (%)": seed_cell([x["first_half_exit_accuracy"] for x in m], 100.0),
        }
        if reference:  # Welch 95% intervals of the differences of the means over seeds
            for metric, name in (("test_accuracy", "test acc − ResNet (points)"),
                                 ("first_half_exit_accuracy", "half-depth exit − ResNet (points)")):
                row[name] = ("reference" if key == "resnet" else
                             signed(_against_resnet(runs, reference, metric), 100.0))
        row |= {"Γ": seed_cell([x["gamma"] for x in m], digits=3) if "gamma" in m[0] else "-",
                "parameters": m[0]["parameters"]}
        if cost is not None and f"{key}/ms_per_step" in cost.metrics:
            c = cost.metrics
            row |= {"ms / step": round(c[f"{key}/ms_per_step"], 1),
                    "step time / ResNet": round(c[f"{key}/ratio_to_resnet"], 3),
                    "saved activations (MB / batch)": round(c[f"{key}/saved_activation_bytes"] / 2**20, 1)}
            if f"{key}/peak_cuda_bytes" in c:
                row["peak CUDA memory (MB)"] = round(c[f"{key}/peak_cuda_bytes"] / 2**20, 1)
        else:
            row |= {"s / epoch (training clock)": seed_cell([x["seconds_per_epoch"] for x in m], digits=1),
                    "saved activations (MB / batch)": round(m[0]["saved_activation_bytes"] / 2**20, 1)}
        rows.append(row)
    return pd.DataFrame(rows).set_index("architecture")


def comparison_groups(results: Sequence[RunResult], num_classes: int = 10) -> dict[str, list[RunResult]]:
    """The runs of every design of chapter 3 that has any, in the table's order: each rule of the study
    (the weighted ones at mu = 0.25) on the Mixer, then the DenseNet-style Mixer."""
    groups = {rule: cell_runs(results, rule=rule, num_classes=num_classes,
                              **({"alpha_mu": 0.25} if rule in WEIGHTED_RULES else {}))
              for rule in STUDY_RULES}
    groups["dense_mixer"] = cell_runs(results, arch="dense_mixer", num_classes=num_classes)
    return {key: runs for key, runs in groups.items() if runs}


def _against_resnet(runs: Sequence[RunResult], reference: Sequence[RunResult], metric: str):
    return difference([r.metrics[metric] for r in runs], [r.metrics[metric] for r in reference])


def budget_reading(results: Sequence[RunResult], cost: RunResult | None = None, num_classes: int = 10) -> str:
    """Chapter 3's summary, written from the runs: Markdown bullets on accuracy, early exits, step time and
    activation memory of every design against the ResNet rule (Welch 95% intervals over seeds)."""
    groups = comparison_groups(results, num_classes)
    reference = groups.get("resnet")
    if not reference or len(groups) < 2:
        return "The ResNet rule and at least one other design must be stored to compare them."

    def judged(metric: str) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {"above": [], "below": [], "open": []}
        for key, runs in groups.items():
            if key == "resnet":
                continue
            d = _against_resnet(runs, reference, metric)
            verdict = sign_verdict(d)
            side = "open" if verdict is None else ("above" if verdict else "below")
            out[side].append(f"{RULE_LABELS[key]} ({signed(d, 100.0)})")
        return out

    def sentence(j: dict[str, list[str]], what: str) -> str:
        parts = [f"{label} for {', '.join(j[side])}" for side, label in
                 (("above", "higher"), ("below", "lower"), ("open", "not told apart")) if j[side]]
        return f"{what} against the ResNet rule's (points, 95% interval): " + "; ".join(parts) + "."

    additive = [k for k in groups if k != "dense_mixer"]
    # scaled before the mean, as the table's seed_cell does, so the two print the same digits
    means = {k: float(np.mean([100 * r.metrics["test_accuracy"] for r in groups[k]])) for k in groups}
    spread = max(means[k] for k in additive) - min(means[k] for k in additive)
    exits = {k: float(np.mean([100 * r.metrics["first_half_exit_accuracy"] for r in groups[k]])) for k in groups}
    seeds = sorted({len(runs) for runs in groups.values()})
    lines = [
        f"- **Accuracy.** The {len(additive)} additive designs end {spread:.1f} points apart at most "
        f"(mean test accuracy {min(means[k] for k in additive):.1f}-{max(means[k] for k in additive):.1f}%). "
        + sentence(judged("test_accuracy"), "Test accuracy"),
        "- **Early exits** (the shared head after half of the layers, mean over seeds): "
        + ", ".join(f"{RULE_LABELS[k]} {exits[k]:.1f}%" for k in sorted(exits, key=exits.get, reverse=True))
        + ". " + sentence(judged("first_half_exit_accuracy"), "Exit accuracy"),
    ]
    if cost is not None:
        c = cost.metrics
        timed = {k: c[f"{k}/ratio_to_resnet"] for k in groups if f"{k}/ratio_to_resnet" in c and k != "resnet"}
        if timed:
            slow = max(timed, key=timed.get)
            lines.append(
                f"- **Time** (one training step, measured side by side on {cost.provenance.get('device', '?')}): "
                + ", ".join(f"{RULE_LABELS[k]} {v:.2f}×" for k, v in sorted(timed.items(), key=lambda kv: kv[1]))
                + f" the ResNet rule's; {RULE_LABELS[slow]} costs the most.")
        saved = {k: c[f"{k}/saved_activation_bytes"] / c["resnet/saved_activation_bytes"]
                 for k in groups if f"{k}/saved_activation_bytes" in c and "resnet/saved_activation_bytes" in c
                 and k != "resnet"}
        if saved:
            lines.append("- **Activation memory** (bytes autograd saves for one batch, against the ResNet rule): "
                         + ", ".join(f"{RULE_LABELS[k]} {v:.2f}×"
                                     for k, v in sorted(saved.items(), key=lambda kv: kv[1])) + ".")
    lines.append(f"- **Seeds.** {', '.join(map(str, seeds))} per design; an interval that contains 0 means the "
                 "difference is smaller than the spread between seeds can resolve.")
    return "\n".join(lines)


def step_cost_table(cost: RunResult):
    """One side-by-side cost run (``hacn-mixer-cost``): ms per step, ratio to the ResNet rule and saved
    activations (MB per batch) of every architecture it measured."""
    import pandas as pd

    c = cost.metrics
    return pd.DataFrame({RULE_LABELS[key]: {"ms / step": c[f"{key}/ms_per_step"],
                               "step time / ResNet": c[f"{key}/ratio_to_resnet"],
                               "saved activations (MB / batch)": c[f"{key}/saved_activation_bytes"] / 2**20}
                         for key in RULE_LABELS if f"{key}/ms_per_step" in c}).T


def code_rule_table(results: Sequence[RunResult]):
    """The paper's H-ACN rule against the public code's Mixer rule (``a`` also scales token mixing)."""
    import pandas as pd

    rows = []
    for rule in ("hacn", "hacn_code_mixer"):
        runs = cell_runs(results, rule=rule, alpha_mu=0.25, num_classes=10)
        if runs:
            rows.append({"rule": RULE_LABELS[rule],
                         "test acc (%)": seed_cell([r.metrics["test_accuracy"] for r in runs], 100.0),
                         "half-depth exit acc (%)": seed_cell([r.metrics["first_half_exit_accuracy"] for r in runs], 100.0),
                         "final Gamma": seed_cell([r.metrics["gamma"] for r in runs], digits=3)})
    return pd.DataFrame(rows).set_index("rule")


# ----------------------------------------------------------------------------- figures

# One fixed colour per architecture from the house palette, so that the same rule has the same colour in
# every figure that draws the residual family together (Fig. 2, Fig. 7: at most six on an axis). ReZero and
# LAuReL share colours with ACN and the public code's rule: they are drawn only in chapter 3's comparison,
# whose panels colour their own designs (plots.categorical) and carry their own legends.
_CB = plots.HOUSE_COLOURS
_STYLE = {"resnet": _CB[0], "acn": _CB[1], "hacn": _CB[2], "hacn_code_mixer": _CB[3], "denseformer": _CB[4],
          "dense_mixer": _CB[5], "rezero": _CB[1], "laurel": _CB[3]}
_TWO_CLASSES = _CB[4]  # the 2-class H-ACN beside the 10-class one (green)
_MU_COLOURS = (_CB[2], _CB[4], _CB[0])  # Table 2's init means 0.25 (ACN-like), 0.75, 1 (ResNet-like)


def code_rule_reading(results: Sequence[RunResult]) -> str:
    """What the public code's rule shows beside Eq. 2's (H-ACN, μ 0.25, the full budget), as Markdown
    computed from the runs: how far the residual weights move on 10 classes, Γ on each task beside Table 3,
    the 10 − 2 classes difference with its verdict, and how many runs settled. Empty without code-rule runs."""
    full, _ = split_budgets(results)
    cells = {(rule, k): cell_runs(full, rule=rule, alpha_mu=0.25, num_classes=k)
             for rule in ("hacn", "hacn_code_mixer") for k in (10, 2)}
    code = cells["hacn_code_mixer", 10] + cells["hacn_code_mixer", 2]
    if not code:
        return ""

    def moved(runs: Sequence[RunResult]) -> str:
        values = sorted(r.curves["delta"][0] for r in runs)
        return f"{values[0]:.2f}" if len(values) == 1 else f"{values[0]:.2f}-{values[-1]:.2f}"

    def gamma(runs: Sequence[RunResult]) -> str:
        return seed_cell([r.metrics["gamma"] for r in runs], digits=3) if runs else "not stored"

    paper = {k: item(table3_item(k)).paper_value for k in (10, 2)}
    out = []
    if cells["hacn_code_mixer", 10] and cells["hacn", 10]:
        out.append(f"On 10 classes its residual weights travel {moved(cells['hacn_code_mixer', 10])} in total "
                   f"(‖a_T − a_0‖ per seed), against {moved(cells['hacn', 10])} under Eq. 2.")
    out.append(f"Its Γ ends at {gamma(cells['hacn_code_mixer', 10])} on 10 classes and "
               f"{gamma(cells['hacn_code_mixer', 2])} on 2 classes (Table 3: {paper[10]:g} on CIFAR-10, "
               f"{paper[2]:g} on CIFAR-2), where Eq. 2's ends at {gamma(cells['hacn', 10])} and "
               f"{gamma(cells['hacn', 2])}.")
    if len(cells["hacn_code_mixer", 10]) >= 2 and len(cells["hacn_code_mixer", 2]) >= 2:
        d = _difference([r.metrics["gamma"] for r in cells["hacn_code_mixer", 10]],
                        [r.metrics["gamma"] for r in cells["hacn_code_mixer", 2]])
        eq2 = (_difference([r.metrics["gamma"] for r in cells["hacn", 10]], [r.metrics["gamma"] for r in cells["hacn", 2]])
               if len(cells["hacn", 10]) >= 2 and len(cells["hacn", 2]) >= 2 else None)
        beside = "" if eq2 is None else {
            True: f", as under Eq. 2 ({signed(eq2, digits=3)})",
            False: f", where under Eq. 2 it is reversed ({signed(eq2, digits=3)})",
            None: f", where under Eq. 2 it does not show beyond the seeds ({signed(eq2, digits=3)})"}[sign_verdict(eq2)]
        out.append(f"Γ, 10 − 2 classes, is {signed(d, digits=3)}: " + {
            True: f"Table 3's effect of task difficulty shows under this rule{beside}.",
            False: "the easier task ends with the larger Γ, against Table 3.",
            None: "the seeds cannot tell whether Γ depends on the task under this rule."}[sign_verdict(d)])
    settled = sum(last_fifth_fraction(r) < SETTLED_FRACTION for r in code)
    out.append(f"{settled} of its {len(code)} runs settled by the criterion above.")
    return " ".join(out)


def plot_layerwise(results: Sequence[RunResult]):
    """Fig. 2a: layer-wise test accuracy of ResNet, ACN, H-ACN; solid 10 classes, dashed 2 classes."""
    fig, axes = plots.figure(ncols=2)
    for ax, classes in zip(axes[0], (10, 2)):
        for rule, runs in main_runs(results, classes).items():
            if runs:
                acc = 100 * np.array([r.curves["layerwise_test_accuracy"] for r in runs])
                plots.with_ci(ax, np.arange(acc.shape[1]), acc, label=RULE_LABELS[rule], color=_STYLE[rule],
                              linestyle="-" if classes == 10 else "--")
        ax.set_xlabel("exit (layers used)")
        ax.set_ylabel("test accuracy (%)")
        ax.set_title(f"{classes} classes")
    plots.figure_legend(fig)
    return fig


def plot_train_loss(results: Sequence[RunResult]):
    """Fig. 2b: training loss per epoch (10 classes), mean and standard error over seeds."""
    fig, axes = plots.figure()
    ax = axes[0][0]
    for rule, runs in main_runs(results, 10).items():
        if runs:
            loss = np.array([r.curves["train_loss"] for r in runs])
            plots.with_ci(ax, runs[0].curves["epoch"], loss, label=RULE_LABELS[rule], color=_STYLE[rule])
    ax.set_xlabel("epoch")
    ax.set_ylabel("training loss")
    ax.set_yscale("log")
    plots.legend(ax, frameon=False)
    return fig


def plot_alphas(results: Sequence[RunResult]):
    """Fig. 2c: converged residual weights per layer, 10 vs 2 classes (mean over seeds, standard error)."""
    fig, axes = plots.figure()
    ax = axes[0][0]
    for classes, style in ((10, "-"), (2, "--")):
        runs = cell_runs(results, rule="hacn", alpha_mu=0.25, num_classes=classes)
        if runs:
            a = np.array([r.curves["alpha_final"] for r in runs])
            plots.with_ci(ax, np.arange(1, a.shape[1] + 1), a, label=f"{classes} classes", linestyle=style,
                          marker="o", markersize=3, color=_STYLE["hacn"] if classes == 10 else _TWO_CLASSES)
    ax.axhline(0.25, color="grey", linewidth=0.8, linestyle=":", label="init mean 0.25")
    ax.set_xlabel("layer i")
    ax.set_ylabel("converged $a_i$")
    plots.legend(ax, frameon=False)
    return fig


def _progress(r: RunResult) -> np.ndarray:
    steps = np.asarray(r.curves["record_step"], dtype=float)
    return steps / steps[-1]


def plot_gamma_by_mu(results: Sequence[RunResult]):
    """Fig. 5: ``Gamma`` over training for ``a_i ~ N(mu, 0.005)``, mu in {0.25, 0.75, 1}."""
    fig, axes = plots.figure()
    ax = axes[0][0]
    for mu, colour in zip(TABLE2_MUS, _MU_COLOURS):
        runs = cell_runs(results, rule="hacn", alpha_mu=mu, num_classes=10)
        if runs:
            plots.with_ci(ax, 100 * _progress(runs[0]), np.array([r.curves["gamma"] for r in runs]),
                          label=f"μ = {mu:g}", color=colour)
    ax.set_xlabel("training progress (% of steps)")
    ax.set_ylabel(r"$\Gamma = \|a\|_2 / \sqrt{L}$")
    plots.legend(ax, frameon=False)
    return fig


def plot_delta_gamma(results: Sequence[RunResult], *, paper_gamma: bool = False):
    """Fig. 6: convergence distance ``Delta_t`` (a) and ``Gamma`` (b) of H-ACN (mu 0.25) during training.

    ``paper_gamma`` draws Table 3's final ``Gamma`` (CIFAR-10 and CIFAR-2) as dashed lines in (b), the paper's
    value beside ours (the paper's own Fig. 6 curves are not given as numbers)."""
    colours = {10: _STYLE["hacn"], 2: _TWO_CLASSES}
    groups = [(f"ours, {classes} classes", cell_runs(results, rule="hacn", alpha_mu=0.25, num_classes=classes),
               colours[classes], style) for classes, style in ((10, "-"), (2, "--"))]
    lines = [(item(table3_item(classes)).paper_value, f"paper Table 3, {paper_name}", colours[classes])
             for classes, paper_name in TABLE3_TASKS] if paper_gamma else []
    return plot_settling(groups, lines)


def plot_settling(groups: Sequence[tuple[str, Sequence[RunResult], Any, str]],
                  paper_gamma: Sequence[tuple[float, str, Any]] = ()):
    """Convergence distance ``Delta_t`` (a) and ``Gamma`` (b) over training progress, one mean curve with its
    standard-error band per group ``(label, runs, colour, linestyle)`` (a group without runs is skipped);
    ``paper_gamma``: the paper's final ``Gamma`` values ``(value, label, colour)`` as dotted lines in (b)."""
    fig, axes = plots.figure(ncols=2)
    for name, runs, colour, style in groups:
        if not runs:
            continue
        x = 100 * _progress(runs[0])
        for ax, key in zip(axes[0], ("delta", "gamma")):
            plots.with_ci(ax, x, np.array([r.curves[key] for r in runs]), label=name, linestyle=style, color=colour)
    for value, name, colour in paper_gamma:
        axes[0][1].axhline(value, color=colour, alpha=0.8, linewidth=1.2, linestyle=(0, (1, 1.5)), label=name)
    for ax, title in zip(axes[0], (r"(a) $\Delta_t = \|a_T - a_t\|_2$", r"(b) $\Gamma$")):
        ax.set_xlabel("training progress (% of steps)")
        ax.set_title(title)
    plots.figure_legend(fig)
    return fig


def plot_fig7(results: Sequence[RunResult]):
    """Fig. 7: H-ACN against ResNet, ACN, DenseFormer-style and DenseNet-style Mixers.

    Left: layer-wise test accuracy (the DenseNet-style Mixer has 10 layers; its
    exits are drawn at their fraction of depth on the 16-layer axis). Right:
    validation accuracy per epoch.
    """
    fig, axes = plots.figure(ncols=2)
    groups = [(rule, cell_runs(results, rule=rule, num_classes=10, **({"alpha_mu": 0.25} if rule == "hacn" else {})))
              for rule in ("resnet", "acn", "hacn", "denseformer")]
    groups.append(("dense_mixer", cell_runs(results, arch="dense_mixer", num_classes=10)))
    depth = None
    for key, runs in groups:
        if not runs:
            continue
        acc = 100 * np.array([r.curves["layerwise_test_accuracy"] for r in runs])
        depth = depth or (acc.shape[1] - 1 if key != "dense_mixer" else None)
        x = np.arange(acc.shape[1]) if key != "dense_mixer" else np.linspace(0, depth or acc.shape[1] - 1, acc.shape[1])
        plots.with_ci(axes[0][0], x, acc, label=RULE_LABELS[key], color=_STYLE[key])
        val = 100 * np.array([r.curves["val_accuracy"] for r in runs])
        plots.with_ci(axes[0][1], runs[0].curves["eval_epoch"], val, label=RULE_LABELS[key], color=_STYLE[key])
    axes[0][0].set_xlabel("exit (layers of 16; DenseNet-style: fraction of its 10)")
    axes[0][0].set_ylabel("test accuracy (%)")
    axes[0][1].set_xlabel("epoch")
    axes[0][1].set_ylabel("validation accuracy (%)")
    plots.figure_legend(fig)
    return fig


#: chapter 3's small multiples: the designs whose output is the last stream, and those built on a sum of outputs
COMPARISON_PANELS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("output = the last layer's stream", ("resnet", "rezero", "laurel", "denseformer", "dense_mixer")),
    ("output = sum of layer outputs", ("resnet", "acn", "hacn", "hacn_code_mixer")),
)


def plot_comparison(results: Sequence[RunResult]):
    """Chapter 3: layer-wise test accuracy of every design on the same Mixer and budget (every design of
    the chapter's table, the 10-layer DenseNet-style Mixer included).

    Small multiples: nine designs are more than one axis can tell apart by colour, so two panels of at
    most five, each with its own colours (:func:`plots.categorical`, the ResNet rule first and so blue in
    both, as the common reference) and its own legend below it."""
    fig, axes = plots.figure(ncols=2, sharey=True, height=3.6)
    for ax, (title, rules) in zip(axes[0], COMPARISON_PANELS):
        colours = plots.categorical(rules)
        for rule in rules:
            runs = (cell_runs(results, arch="dense_mixer", num_classes=10) if rule == "dense_mixer" else
                    cell_runs(results, rule=rule, num_classes=10,
                              **({"alpha_mu": 0.25} if rule in WEIGHTED_RULES else {})))
            if runs:
                acc = 100 * np.array([r.curves["layerwise_test_accuracy"] for r in runs])
                plots.with_ci(ax, np.arange(acc.shape[1]), acc, label=RULE_LABELS[rule], color=colours[rule])
        ax.set_xlabel("exit (layers used)")
        plots.integer_ticks(ax, "x")
        ax.set_title(title, fontsize="medium")
        plots.legend_outside(ax, "below", ncols=2)
    axes[0][0].set_ylabel("test accuracy (%)")
    return fig


# ----------------------------------------------------------------------------- the converged study (hacn-mixer-long)

#: a run's residual weights count as settled when they moved less than this fraction of their total
#: displacement ``||a_T - a_0||`` over the last fifth of training (``Delta_{0.8 T} / Delta_0``)
SETTLED_FRACTION = 0.05
#: a claim about accuracy "matching" holds when our mean difference is at least this far above -x points
MATCH_POINTS = 0.5
#: Sec. 4's seed robustness counts as reproduced at a mean cross-seed Pearson correlation of at least this (%)
PEARSON_HOLDS = 80.0
#: what a verdict on Table 3, Sec. 4 or Fig. 5 holds under (the ledger shows it): the rule and the recipe
#: (the paper's recipe: Appendix A as stated; the public code's whole recipe is hacn-code-recipe's)
EQ2_PAPER_RECIPE = "Eq. 2, the paper's recipe"
CODE_RULE_PAPER_RECIPE = "the code's rule, the paper's recipe"


def mixer_cell(config: dict[str, Any]) -> dict[str, Any]:
    """The columns that name a cell of the Mixer studies: architecture, classes, init mean, epochs."""
    return {"architecture": label(config), "classes": config["num_classes"],
            "init mean μ": config["alpha_mu"] if config["alpha_mu"] is not None else "", "epochs": config["epochs"]}


def coverage_table(planned: Sequence[dict[str, Any]], results: Sequence[RunResult],
                   describe: Callable[[dict[str, Any]], dict[str, Any]] = mixer_cell):
    """Which cells of a study are stored: per cell (the columns ``describe`` gives a configuration; the Mixer's
    by default), the seeds planned and the seeds stored (a study fills in over several background sessions)."""
    return tables.coverage_table(planned, results, cell=describe)


def split_budgets(results: Sequence[RunResult]) -> tuple[list[RunResult], list[RunResult]]:
    """``(full, shorter)``: the runs at the study's largest ``epochs`` and the rest (the half-budget check)."""
    if not results:
        return [], []
    longest = max(r.config["epochs"] for r in results)
    return ([r for r in results if r.config["epochs"] == longest],
            [r for r in results if r.config["epochs"] != longest])


def fraction_left(r: RunResult, at: float) -> float:
    """``Delta_{at T} / Delta_0``: the distance the residual weights still had to go at fraction ``at`` of
    training, as a share of their total displacement ``||a_T - a_0||`` (0 when they never moved)."""
    steps = np.asarray(r.curves["record_step"], dtype=float)
    delta = np.asarray(r.curves["delta"], dtype=float)
    if delta[0] == 0:
        return 0.0
    i = int(np.searchsorted(steps, at * steps[-1]))
    return float(delta[min(i, len(delta) - 1)] / delta[0])


def last_fifth_fraction(r: RunResult) -> float:
    """``Delta_{0.8 T} / Delta_0``: the share of the weights' total displacement made in the last fifth of training."""
    return fraction_left(r, 0.8)


#: where the scalars of the rules without a drawn init start (chapter 3): ReZero's a_i = 0, LAuReL's a_i = b_i = 1
FIXED_STARTS = {"rezero": 0.0, "laurel": 1.0}


def _mixer_settling_cell(config: dict[str, Any]) -> dict[str, Any]:
    start = config["alpha_mu"] if config["alpha_mu"] is not None else FIXED_STARTS.get(config["rule"])
    return {"rule": label(config), "init mean μ": start, "classes": config["num_classes"]}


def _mixer_order(r: RunResult) -> tuple:
    return (r.config["rule"] or "", r.config["num_classes"], r.config["alpha_mu"] or 0, r.config["epochs"], r.seed)


def settling_table(results: Sequence[RunResult], *,
                   describe: Callable[[dict[str, Any]], dict[str, Any]] = _mixer_settling_cell,
                   order: Callable[[RunResult], Any] = _mixer_order):
    """Every run with residual weights: steps, total displacement, share moved in the last fifth, settled?

    ``describe`` gives the columns that name a run's cell (the Mixer's rule, init mean and classes by
    default), ``order`` the sort key of the rows."""
    import pandas as pd

    rows = []
    for r in sorted(results, key=order):
        if "delta" not in r.curves:
            continue
        frac = last_fifth_fraction(r)
        rows.append({**describe(r.config), "seed": r.seed, "steps": r.metrics["steps"],
                     "total displacement ‖a_T − a_0‖": r.curves["delta"][0],
                     "moved in the last fifth (%)": 100 * frac,
                     "Γ at start": r.curves["gamma"][0], "Γ at end": r.metrics["gamma"],
                     "settled": "yes" if frac < SETTLED_FRACTION else "no"})
    return pd.DataFrame(rows)


def budget_check_table(results: Sequence[RunResult]):
    """H-ACN (mu 0.25) at the full budget against half of it: does ``Gamma`` still change with more steps?"""
    import pandas as pd

    full, half = split_budgets(results)
    rows = []
    for classes in (10, 2):
        a = cell_runs(full, rule="hacn", alpha_mu=0.25, num_classes=classes)
        b = cell_runs(half, rule="hacn", alpha_mu=0.25, num_classes=classes)
        if not a or not b:
            continue
        d = _difference([r.metrics["gamma"] for r in a], [r.metrics["gamma"] for r in b])
        rows.append({"classes": classes, "steps (half budget)": b[0].metrics["steps"],
                     "Γ (half budget)": seed_cell([r.metrics["gamma"] for r in b], digits=3),
                     "steps (full budget)": a[0].metrics["steps"],
                     "Γ (full budget)": seed_cell([r.metrics["gamma"] for r in a], digits=3),
                     "change": signed(d, digits=3)})
    return pd.DataFrame(rows)


def noise_table(results: Sequence[RunResult], num_classes: int = 10, arch: str | None = "mixer"):
    """Fig. 3c's test: test accuracy (%) under zero-mean Gaussian input noise, per rule (the Mixer's runs by
    default; ``arch=None`` for the ViT study's)."""
    import pandas as pd

    from hacn_core.hacn.studies.mixer import NOISE_STDS

    rows = []
    for rule, runs in main_runs(results, num_classes, arch).items():
        runs = [r for r in runs if "noise_accuracy/0.1" in r.metrics]
        if not runs:
            continue
        row = {"rule": RULE_LABELS[rule], "no noise": seed_cell([r.metrics["test_accuracy"] for r in runs], 100.0)}
        for std in NOISE_STDS:
            row[f"σ = {std:g}"] = seed_cell([r.metrics[f"noise_accuracy/{std:g}"] for r in runs], 100.0)
        rows.append(row)
    return pd.DataFrame(rows)


def plot_noise(results: Sequence[RunResult], num_classes: int = 10, arch: str | None = "mixer", ax=None):
    """Test accuracy against the input noise's standard deviation, per rule (mean and standard error); on
    ``ax`` when given (then the figure is ``ax``'s), else on a new figure."""
    from hacn_core.hacn.studies.mixer import NOISE_STDS

    if ax is None:
        fig, axes = plots.figure()
        ax = axes[0][0]
    else:
        fig = ax.figure
    stds = (0.0,) + NOISE_STDS
    for rule, runs in main_runs(results, num_classes, arch).items():
        runs = [r for r in runs if "noise_accuracy/0.1" in r.metrics]
        if runs:
            acc = 100 * np.array([[r.metrics["test_accuracy"]] + [r.metrics[f"noise_accuracy/{s:g}"] for s in NOISE_STDS]
                                  for r in runs])
            plots.with_ci(ax, np.array(stds), acc, label=RULE_LABELS[rule], color=_STYLE[rule], marker="o", markersize=3)
    ax.set_xlabel("input noise standard deviation σ (standardised images)")
    ax.set_ylabel("test accuracy (%)")
    plots.legend(ax, frameon=False)
    return fig


def _difference(a: Sequence[float], b: Sequence[float]):
    from hacn_core.engine.stats import difference

    return difference(a, b)


def claims(results: Sequence[RunResult]):
    """The paper's Mixer claims judged on the converged runs: claim, where, our evidence, verdict.

    Verdicts: a directional claim holds when the 95% Welch interval of our
    difference lies on the paper's side of 0, does not hold when it lies on the
    other side, and cannot be told (``None``) when it straddles 0 or a cell has
    no runs yet. "Matches" holds when the whole interval lies above -``MATCH_POINTS``
    points, does not hold when it lies below, and cannot be told when it straddles it.
    Every threshold is a module constant, shown in the chapter.
    """
    from hacn_core.engine.tables import ClaimTable

    full, _ = split_budgets(results)
    table = ClaimTable()
    m10, m2 = main_runs(full, 10), main_runs(full, 2)

    def metric(runs: Sequence[RunResult], key: str) -> list[float]:
        return [r.metrics[key] for r in runs]

    if m10["hacn"] and m10["resnet"]:
        d = _difference(metric(m10["hacn"], "test_accuracy"), metric(m10["resnet"], "test_accuracy"))
        table.add("H-ACN's final accuracy matches the ResNet's", "Sec. 3.2, Fig. 2a",
                  f"H-ACN − ResNet: {signed(d, 100)} points",
                  sign_verdict(d, -MATCH_POINTS / 100),  # surely not more than MATCH_POINTS lower
                  items=("hacn/fig2a/layerwise-accuracy",), under="final accuracy")
    for rule in ("hacn", "acn"):
        if m10[rule] and m10["resnet"]:
            d = _difference(metric(m10[rule], "first_half_exit_accuracy"),
                            metric(m10["resnet"], "first_half_exit_accuracy"))
            table.add(f"{RULE_LABELS[rule]} compresses: its half-depth exit beats the ResNet's", "Sec. 3.2, Fig. 2a",
                      f"half-depth exit, {RULE_LABELS[rule]} − ResNet: {signed(d, 100)} points", sign_verdict(d),
                      items=("hacn/fig2a/layerwise-accuracy",), under=f"{RULE_LABELS[rule]} auto-compression")
    if m10["hacn"] and m2["hacn"]:
        def share(runs: Sequence[RunResult]) -> list[float]:
            return [r.metrics["first_half_exit_accuracy"] / r.metrics["test_accuracy"] for r in runs]

        d = _difference(share(m2["hacn"]), share(m10["hacn"]))
        table.add("On 2 classes H-ACN compresses more", "Sec. 3.2.1, Fig. 2a (dashed)",
                  f"half-depth exit ÷ final accuracy, 2 − 10 classes: {signed(d, 100)} points", sign_verdict(d),
                  items=("hacn/fig2a/layerwise-accuracy",), under="2 classes")
    if m10["acn"] and m10["hacn"]:
        d = _difference(metric(m10["acn"], "train_loss"), metric(m10["hacn"], "train_loss"))
        table.add("H-ACN trains faster than an ACN (the ACN needs ~100 more epochs of 300)", "Sec. 3.2, Fig. 2b",
                  f"final training loss, ACN − H-ACN: {signed(d, digits=3)}", sign_verdict(d),
                  items=("hacn/fig2b/train-loss", "hacn/fig2b/acn-extra-epochs"))
    if m10["hacn"] and m2["hacn"]:
        d = _difference(metric(m10["hacn"], "gamma"), metric(m2["hacn"], "gamma"))
        g10, g2 = item(table3_item(10)).paper_value, item(table3_item(2)).paper_value
        table.add(f"Γ is larger on the harder task (Table 3: {g10:g} on CIFAR-10, {g2:g} on CIFAR-2)",
                  "Sec. 3.2.1, Table 3",
                  f"Γ, 10 − 2 classes: {signed(d, digits=3)}", sign_verdict(d),
                  items=(table3_item(10), table3_item(2), "hacn/fig2c/learned-alpha"), under=EQ2_PAPER_RECIPE)
    code = {k: cell_runs(full, rule="hacn_code_mixer", alpha_mu=0.25, num_classes=k) for k in (10, 2)}
    if code[10] and code[2]:
        d = _difference(metric(code[10], "gamma"), metric(code[2], "gamma"))
        table.add("Under the public code's rule, Γ is larger on the harder task", "Table 3; public code",
                  f"Γ, 10 − 2 classes, public code rule: {signed(d, digits=3)}", sign_verdict(d),
                  items=(table3_item(10), table3_item(2), "hacn/fig2c/learned-alpha"),
                  under=CODE_RULE_PAPER_RECIPE)
    if len(m10["hacn"]) >= 2:
        corr = seed_correlations(full)
        mean = float(corr.loc["without a_L", "mean Pearson (%)"])
        paper = item(PEARSON_MIXER).paper_value
        table.add(f"The converged a hardly depend on the seed (Pearson {paper:g}%; holds here at ≥ {PEARSON_HOLDS:g}%)",
                  "Sec. 4", f"mean Pearson over seed pairs, a_1..a_15: {mean:.1f}%", mean >= PEARSON_HOLDS,
                  items=(PEARSON_MIXER,), values=pair_pearsons(cell_runs(full, rule="hacn", alpha_mu=0.25,
                                                                        num_classes=10)), unit="%", under=EQ2_PAPER_RECIPE)
    code10 = cell_runs(full, rule="hacn_code_mixer", alpha_mu=0.25, num_classes=10)
    if len(code10) >= 2:
        pairs = pair_pearsons(code10)
        paper = item(PEARSON_MIXER).paper_value
        table.add(f"Under the public code's rule, the converged a hardly depend on the seed (Pearson {paper:g}%; "
                  f"holds here at ≥ {PEARSON_HOLDS:g}%)", "Sec. 4; public code",
                  f"mean Pearson over seed pairs, a_1..a_15, public code rule: {np.mean(pairs):.1f}%",
                  bool(np.mean(pairs) >= PEARSON_HOLDS), items=(PEARSON_MIXER,), values=pairs, unit="%",
                  under=CODE_RULE_PAPER_RECIPE)
    mu = {m: cell_runs(full, rule="hacn", alpha_mu=m, num_classes=10) for m in TABLE2_MUS}
    if mu[0.25] and mu[1.0]:
        d = _difference(metric(mu[0.25], "test_accuracy"), metric(mu[1.0], "test_accuracy"))
        table.add("Starting near an ACN (μ 0.25) beats starting near a ResNet (μ 1)", "Table 2",
                  f"test accuracy, μ 0.25 − μ 1: {signed(d, 100)} points", sign_verdict(d),
                  items=tuple(table2_item(m) for m in TABLE2_MUS))
        d = _difference(metric(mu[1.0], "gamma"), metric(mu[0.25], "gamma"))
        table.add("ResNet-like starts stay more densely connected", "Fig. 5",
                  f"final Γ, μ 1 − μ 0.25: {signed(d, digits=3)}", sign_verdict(d),
                  items=("hacn/fig5/gamma-vs-init-mean",), under=EQ2_PAPER_RECIPE)
    others = {"denseformer": cell_runs(full, rule="denseformer", num_classes=10),
              "dense_mixer": cell_runs(full, arch="dense_mixer", num_classes=10)}
    for key, runs in others.items():  # App. B.1: H-ACN "above all other architectures"
        if m10["hacn"] and runs:
            d = _difference(metric(m10["hacn"], "test_accuracy"), metric(runs, "test_accuracy"))
            table.add(f"H-ACN ends more accurate than the {RULE_LABELS[key]} Mixer", "App. B.1, Fig. 7",
                      f"test accuracy, H-ACN − {RULE_LABELS[key]}: {signed(d, 100)} points", sign_verdict(d),
                      items=("hacn/fig7/vs-denseformer-densenet",), under=f"against the {RULE_LABELS[key]} Mixer")
    noisy = [r for r in m10["hacn"] if "noise_accuracy/0.3" in r.metrics]
    base = [r for r in m10["resnet"] if "noise_accuracy/0.3" in r.metrics]
    if noisy and base:
        d = _difference(metric(noisy, "noise_accuracy/0.3"), metric(base, "noise_accuracy/0.3"))
        vit = item("hacn/fig3c/vit-noise0.3-hacn").paper_value - item("hacn/fig3c/vit-noise0.3-res").paper_value
        table.add(f"H-ACN is more robust to input noise than the ResNet (ViT: {vit:+.2f} points at σ 0.3)",
                  "Sec. 3.3, Fig. 3c",
                  f"accuracy at σ 0.3, H-ACN − ResNet: {signed(d, 100)} points", sign_verdict(d))
    return table.frame()
