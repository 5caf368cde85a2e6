"""What the H-ACN transformer chapters show of the ViT and decoder studies (H-ACN Secs. 3.3, 3.4 and 4).

The studies (:mod:`hacn_core.hacn.studies.vit`, experiment ``hacn-vit``;
:mod:`hacn_core.hacn.studies.decoder`, experiment ``hacn-decoder``, and its App. D ablations
:mod:`hacn_core.hacn.studies.decoder_ablations`, ``hacn-decoder-ablations``) train and measure the
runs; this module reads them, beside the paper's numbers (from :mod:`hacn_core.hacn.paper_items`):

* both chapters: which cells are stored, the book budget from the studies' measured step
  cost, whether the residual weights settled (``Delta_t = ||a_T - a_t||_2``, Sec. 4), the
  learned Direct Layer Connectivity Matrix ``C[i][j] = prod_{l=i+1..j-1} a_l`` (Eq. 4,
  Fig. 1) and the claims table;
* the ViT chapter: accuracy against epochs (Fig. 3a), best accuracy (Fig. 3b), accuracy
  under zero-mean Gaussian input noise (Fig. 3c), ``Gamma = ||a||_2 / sqrt(L)`` beside
  Table 3's ImageNet value;
* the decoder chapter: layer-wise validation perplexity (Fig. 4a/b), the zero-shot cloze
  under character noise (Table 1, Fig. 4c), the initialisation and DepthLN ablations
  (App. D, Tables 6-7), the connectivity during and after training (App. E Fig. 9, Fig. 1b).

Block structure (Fig. 1b, Sec. 4: "language tasks develop connectivity matrices with
distinct block structures") is judged by :func:`block_split`: for a split of the layers
``0..L`` into consecutive blocks, at every distance ``d = j - i >= 2`` the mean entry of
``C`` within blocks minus the mean entry across blocks, averaged over the distances that
have both (weighted by ``n_within n_across / (n_within + n_across)``); the block contrast
``B`` is the largest such value over all splits into 2 to ``MAX_BLOCKS`` blocks of at least
``MIN_BLOCK`` layers. Comparing entries at the *same* distance makes a connectivity that
only decays with distance (the near-diagonal pattern of vision, Fig. 1a; any uniform ``a``)
score exactly 0, and a ResNet (every entry 1) too; a matrix that is 1 within blocks and 0
across scores 1. ``B`` is in the units of ``C`` (a ResNet's connection is 1).
``BLOCK_HOLDS = 0.3``: twelve layers in three modules of four, joined by ``a = 0.8``
inside and cut by ``a = 0.2`` at the two boundaries, score 0.31 (tested); weights at their
initial ``N(0.25, 0.005)`` draw score below 0.01.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from types import ModuleType
from typing import Any

import numpy as np

from hacn_core.engine import plots
from hacn_core.engine.results import RunResult
from hacn_core.engine.stats import difference, difference_pooled, estimate, pooled_std, sign_verdict, signed
from hacn_core.engine.tables import ClaimTable
from hacn_core.hacn.connectivity import connectivity_heatmap, hacn_connectivity, resolve_depth_ln
from hacn_core.hacn.paper_items import item
from hacn_core.hacn.studies import decoder as hd
from hacn_core.hacn.studies import decoder_ablations as hda
from hacn_core.hacn.studies import mixer_report as hmr
from hacn_core.hacn.studies import vit as hv
from hacn_core.hacn.studies.common import NOISE_STDS
from hacn_core.models.mixer import num_parameters

RULES: tuple[str, ...] = ("resnet", "acn", "hacn")  # the rules of Figs. 3-4 (both studies train these three)
COLOURS = plots.categorical([hmr.RULE_LABELS[r] for r in RULES])  # the Mixer chapters' colours, by label
#: the runs of the main comparison: the paper's init N(0.25, 0.005) and Depth-adaptive LayerNorm (Sec. 3.1, App. D)
MAIN_CELL: dict[str, dict[str, Any]] = {
    "resnet": {"rule": "resnet", "depth_ln": "auto"},
    "acn": {"rule": "acn", "depth_ln": "auto"},
    "hacn": {"rule": "hacn", "alpha_mu": 0.25, "alpha_sigma": 0.005, "depth_ln": "auto"},
}
MAX_BLOCKS = 4  # block_split tries 2..MAX_BLOCKS consecutive blocks (Fig. 1b shows three modules)
MIN_BLOCK = 3  # layers per block: the fewest that hold a connection over a distance of 2
BLOCK_HOLDS = 0.3  # block contrast at which a connectivity counts as block-structured (module docstring)
#: App. E: "the connectivity structure is largely established by 50-60% of training"; held when the residual
#: weights have at most this share of their total displacement left at 60% of training
SET_BY = 0.6
SET_LEFT = 0.2
#: "on par" final perplexity: |log(ppl_H-ACN / ppl_ResNet)| within this many nats (2%; the paper's gaps are
#: -0.2% on OWT-2 and +0.8% on PG-19, footnote 8)
PAR_NATS = 0.02
#: "matches the ResNet's training speed": mean validation accuracy over the epochs at most this many points lower
MATCH_POINTS = hmr.MATCH_POINTS
PEARSON_HOLDS = hmr.PEARSON_HOLDS
TABLE3_IMAGENET = hmr.TABLE3_IMAGENET
PEARSON_GPT = "hacn/sec4/alpha-correlation-gpt2-owt2"
#: Fig. 3b's item of each rule's ViT, and Fig. 4's final perplexities (OWT-2 and PG-19), for the ledger
VIT_ITEMS: dict[str, str] = {rule: f"hacn/fig3b/vit-imagenet-{'res' if rule == 'resnet' else rule}"
                             for rule in ("resnet", "acn", "hacn")}
FINAL_PPL_ITEMS: tuple[str, ...] = tuple(f"hacn/fig4/{data}-final-ppl-{rule}" for data in ("owt2", "pg19")
                                         for rule in ("hacn", "res"))


# ----------------------------------------------------------------------------- runs and cells


def main_runs(results: Sequence[RunResult]) -> dict[str, list[RunResult]]:
    """The three rules of the main comparison (``MAIN_CELL``), each in seed order (empty when none stored; a
    depth-dependent init of App. D, ``alpha_init``, is never the main cell)."""
    return {rule: [r for r in hmr.cell_runs(results, arch=None, **where) if "alpha_init" not in r.config]
            for rule, where in MAIN_CELL.items()}


def init_label(config: Mapping[str, Any]) -> str:
    """How Table 6 names the initialisation of ``a`` in ``config`` ("" for a rule without residual weights):
    ``N(mu, sigma)``, ``half layers: N(mu, sigma) / N(mu_end, sigma)`` or ``exp. decay: N(mu, sigma) → N(mu_end,
    sigma)`` (:data:`hacn_core.hacn.studies.common.DEPTH_INITS`)."""
    mu, sigma = config["alpha_mu"], config.get("alpha_sigma")
    if mu is None:
        return ""
    first = f"N({mu:g}, {sigma:g})"
    scheme = config.get("alpha_init")
    if scheme is None:
        return first
    last = f"N({config['alpha_mu_end']:g}, {sigma:g})"
    return f"half layers: {first} / {last}" if scheme == "half_layers" else f"exp. decay: {first} → {last}"


def transformer_cell(config: Mapping[str, Any]) -> dict[str, Any]:
    """The columns that name a cell of the transformer studies: architecture, init, DepthLN and budget."""
    if "epochs" in config:
        budget = f"{config['epochs']} epoch" + ("s" if config["epochs"] != 1 else "")
    else:
        budget = f"{config['steps']:,} steps"
    return {"architecture": hmr.label(dict(config)),
            "init of a": init_label(config),
            "DepthLN": "yes" if resolve_depth_ln(config["depth_ln"], config["rule"]) != "none" else "no",
            "budget": budget}


def coverage_table(planned: Sequence[dict[str, Any]], results: Sequence[RunResult]):
    """Every cell of a transformer study: seeds planned and seeds stored (:func:`mixer_report.coverage_table`)."""
    return hmr.coverage_table(planned, results, describe=transformer_cell)


def _values(runs: Sequence[RunResult], key: str) -> list[float]:
    return [float(r.metrics[key]) for r in runs if key in r.metrics]


def _diff(a: Sequence[RunResult], b: Sequence[RunResult], key: str, transform: Callable[[float], float] = float):
    """Welch difference of ``transform(metric)`` between two cells, or None when either has no value."""
    x, y = [transform(v) for v in _values(a, key)], [transform(v) for v in _values(b, key)]
    return difference(x, y) if x and y else None


def interval_verdict(values: Sequence[float], threshold: float) -> bool | None:
    """True when the 95% interval of the mean of ``values`` lies above ``threshold``, False when below, None when
    it contains it or there is one value (no interval)."""
    if len(values) < 2:
        return None
    e = estimate(values)
    if e.mean - e.half_width > threshold:
        return True
    if e.mean + e.half_width < threshold:
        return False
    return None


def par_verdict(d, tolerance: float) -> bool | None:
    """An equivalence test: True when the 95% interval of a difference lies inside ``±tolerance``, False when it
    lies wholly outside, None otherwise (or one seed: no interval)."""
    if d is None or not math.isfinite(d.half_width):
        return None
    if abs(d.mean) + d.half_width <= tolerance:
        return True
    if abs(d.mean) - d.half_width > tolerance:
        return False
    return None


def _interval(values: Sequence[float], digits: int = 3) -> str:
    e = estimate(values)
    if not math.isfinite(e.half_width):
        return f"{e.mean:.{digits}f} (n=1)"
    return f"{e.mean:.{digits}f} ± {e.half_width:.{digits}f} (n={e.n})"


# ----------------------------------------------------------------------------- budget and cost


def _steps(study: ModuleType, config: dict[str, Any]) -> int:
    """Optimizer steps of one run: the decoder's ``steps``; the ViT's epochs x batches of its training set."""
    if "steps" in config:
        return int(config["steps"])
    return int(config["epochs"] * math.ceil(study.dry_run_plan(config).n_train / config["batch_size"]))


def _seen(study: ModuleType, config: dict[str, Any]) -> tuple[int, str]:
    """What one run trains on: tokens (decoder) or images (ViT), counted from its configuration."""
    if "steps" in config:
        return config["steps"] * config["batch_size"] * config["accumulate"] * config["block_size"], "tokens"
    return config["epochs"] * study.dry_run_plan(config).n_train, "images"


def budget_lines(study: ModuleType) -> list[str]:
    """Why the book budget is what it is, from the study's measured step cost (``BOOK_STEP_MS``), as plain lines:
    steps and CPU time of one book run per rule and of the whole study, and the paper profile's steps beside."""
    book = {rule: study.make_config(rule, 0, profile="book") for rule in RULES}
    paper = study.make_config("resnet", 0, profile="paper")
    steps = _steps(study, book["resnet"])
    ms = study.BOOK_STEP_MS
    planned = study.EXPERIMENT.runs("book")
    hours = sum(steps * ms[c["rule"]] for c in planned) / 3600e3
    seen, unit = _seen(study, book["resnet"])
    paper_steps = _steps(study, paper)
    paper_seen, _ = _seen(study, paper)
    per_rule = ", ".join(f"{hmr.RULE_LABELS[r]} {ms[r]:.0f} ms" for r in RULES)
    return [
        f"one AdamW step of the book model, one CPU thread (measured: {per_rule}; the machine was shared with two "
        "other trainings)",
        f"one book run: {steps:,} steps ({seen:,} {unit}), {steps * min(ms.values()) / 60e3:.0f}-"
        f"{steps * max(ms.values()) / 60e3:.0f} CPU-minutes of training steps",
        f"the book study: {len(planned)} runs, about {hours:.1f} CPU-hours of training steps (evaluation extra), "
        "trained in the background over several sessions",
        f"the paper profile: {paper_steps:,} steps of batch {paper['batch_size']:,}"
        + (f" x {paper['accumulate']} accumulated" if paper.get("accumulate", 1) > 1 else "") + " "
        f"({paper_seen:,} {unit}), {paper_seen / seen:,.0f} times the book's {unit}; it needs a GPU and a download",
    ]


def clock_ms_per_step(r: RunResult) -> float:
    """A stored run's own training clock in ms per step (wall time; other jobs on the machine slow it)."""
    m = r.metrics
    if "seconds_per_epoch" in m:  # the ViT: the median epoch's wall time over the steps of one epoch
        return 1000 * m["seconds_per_epoch"] * m["epochs"] / m["steps"]
    return 1000 * m["seconds"] / m["steps"]


def cost_table(study: ModuleType, results: Sequence[RunResult]):
    """Per rule: parameters, the measured benchmark step (the budget's basis) and the stored runs' own clocks."""
    import pandas as pd

    rows = []
    for rule, runs in main_runs(results).items():
        rows.append({"architecture": hmr.RULE_LABELS[rule],
                     "parameters (book model)": num_parameters(study.build_model(study.make_config(rule, 0,
                                                                                                 profile="book"))),
                     "ms / step, benchmark (book model)": study.BOOK_STEP_MS[rule],
                     "ms / step, training clock (stored runs)": hmr.seed_cell([clock_ms_per_step(r) for r in runs],
                                                                              digits=0)})
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------- settling (Delta_t, Gamma)


def settling_table(results: Sequence[RunResult]):
    """Every H-ACN run: steps, total displacement of ``a``, the share moved in the last fifth, settled?"""
    return hmr.settling_table(main_runs(results)["hacn"], describe=lambda c: {"rule": hmr.label(c)},
                              order=lambda r: r.seed)


def plot_settling(results: Sequence[RunResult], paper_gamma: Sequence[tuple[float, str]] = ()):
    """``Delta_t`` (a) and ``Gamma`` (b) of the H-ACN runs over training; ``paper_gamma`` as dotted lines in (b)."""
    runs = main_runs(results)["hacn"]
    return hmr.plot_settling([("ours, H-ACN", runs, COLOURS["H-ACN"], "-")],
                             [(value, name, plots.PAPER_COLOUR) for value, name in paper_gamma])


def settled_share(results: Sequence[RunResult]) -> tuple[int, int]:
    """``(settled, total)``: H-ACN runs whose weights moved less than ``SETTLED_FRACTION`` in the last fifth."""
    runs = main_runs(results)["hacn"]
    return sum(hmr.last_fifth_fraction(r) < hmr.SETTLED_FRACTION for r in runs), len(runs)


# ----------------------------------------------------------------------------- connectivity and block structure


@dataclass(frozen=True)
class BlockSplit:
    """The best split of layers ``0..L`` into consecutive blocks and its block contrast (module docstring).

    ``blocks``: ``(first, last)`` layer of each block; empty, with ``contrast`` NaN, when no split into
    two or more blocks of ``MIN_BLOCK`` layers exists (fewer than ``2 * MIN_BLOCK`` layers), and empty when no
    split scores above 0 (then every split ties, e.g. a connectivity that only decays with distance)."""

    contrast: float
    blocks: tuple[tuple[int, int], ...]

    def describe(self) -> str:
        """``"0-4 | 5-8 | 9-12"`` (layers of each block), or ``"-"`` without a split."""
        return " | ".join(f"{a}-{b}" for a, b in self.blocks) if self.blocks else "-"


@lru_cache(maxsize=16)
def _splits(n: int, max_blocks: int, min_block: int) -> tuple[np.ndarray, tuple[tuple[int, ...], ...]]:
    """Every split of ``n`` ordered layers into 2..``max_blocks`` consecutive blocks of at least ``min_block``:
    block labels ``(splits, n)`` and the cut points of each (the first layer of every block but the first)."""
    labels, cuts = [], []
    for k in range(1, max_blocks):
        for cut in itertools.combinations(range(1, n), k):
            edges = (0, *cut, n)
            if min(b - a for a, b in zip(edges, edges[1:])) >= min_block:
                labels.append(np.searchsorted(np.array(cut), np.arange(n), side="right"))
                cuts.append(cut)
    return np.array(labels, dtype=int).reshape(len(labels), n), tuple(cuts)


def block_split(c, max_blocks: int = MAX_BLOCKS, min_block: int = MIN_BLOCK) -> BlockSplit:
    """The block contrast ``B`` of a connectivity matrix ``c`` (``(L+1) x (L+1)``, or with the readout column)
    and the split that attains it (module docstring): for every split into consecutive blocks, at every
    distance ``d >= 2`` the mean within-block entry minus the mean across-block entry, averaged over
    distances weighted by ``n_w n_x / (n_w + n_x)``; ``B`` is the largest over splits."""
    m = np.asarray(c, dtype=float)
    if m.ndim != 2 or m.shape[0] < 2 or m.shape[1] not in (m.shape[0], m.shape[0] + 1):
        raise ValueError(f"c: expected shape (L+1, L+1) or (L+1, L+2) with L >= 1, got {m.shape}")
    n = m.shape[0]
    m = m[:, :n]  # the readout column (every layer output into y) is not a connection between layers
    labels, cuts = _splits(n, max_blocks, min_block)
    if not len(labels):
        return BlockSplit(float("nan"), ())
    num = np.zeros(len(labels))
    den = np.zeros(len(labels))
    for d in range(2, n):
        values = np.diagonal(m, offset=d)  # C[i][i+d], i = 0..n-d-1
        same = labels[:, :-d] == labels[:, d:]  # (splits, n - d): within a block?
        n_w, n_x = same.sum(1), (~same).sum(1)
        ok = (n_w > 0) & (n_x > 0)
        within = np.where(ok, (same * values).sum(1) / np.maximum(n_w, 1), 0.0)
        across = np.where(ok, (~same * values).sum(1) / np.maximum(n_x, 1), 0.0)
        weight = np.where(ok, n_w * n_x / np.maximum(n_w + n_x, 1), 0.0)
        num += weight * (within - across)
        den += weight
    score = np.where(den > 0, num / np.where(den > 0, den, 1.0), -np.inf)
    best = int(np.argmax(score))
    if not np.isfinite(score[best]):
        return BlockSplit(float("nan"), ())
    if score[best] <= 1e-12:  # no split separates anything: no blocks to name
        return BlockSplit(float(score[best]), ())
    edges = (0, *cuts[best], n)
    return BlockSplit(float(score[best]), tuple((a, b - 1) for a, b in zip(edges, edges[1:])))


def block_contrast(alphas: Sequence[float]) -> float:
    """``B`` of the H-ACN connectivity of residual weights ``a_1..a_L`` (Eq. 4)."""
    return block_split(hacn_connectivity(list(alphas)).numpy()).contrast


def _alphas_at(r: RunResult, at: float) -> list[float]:
    """A run's residual weights at fraction ``at`` of training: the recorded history when the run has one
    (the decoder's ``alpha_history``), else only the end (``at = 1``)."""
    if at >= 1.0 or "alpha_history" not in r.curves:
        if at < 1.0:
            raise ValueError(f"at={at}: run seed {r.seed} stored no alpha_history, only the converged weights")
        return list(r.curves["alpha_final"])
    steps = np.asarray(r.curves["record_step"], dtype=float)
    i = int(np.searchsorted(steps, at * steps[-1]))
    return list(r.curves["alpha_history"][min(i, len(steps) - 1)])


def mean_connectivity(runs: Sequence[RunResult], at: float = 1.0) -> np.ndarray:
    """``C`` of every H-ACN run at fraction ``at`` of training, averaged entry by entry over the runs."""
    return np.mean([hacn_connectivity(_alphas_at(r, at)).numpy() for r in runs], axis=0)


def block_table(runs: Sequence[RunResult]):
    """Per H-ACN run: ``Gamma``, the block contrast at the start (when the history is stored) and at the end, and
    the blocks of the best split."""
    import pandas as pd

    rows = []
    for r in runs:
        end = block_split(hacn_connectivity(r.curves["alpha_final"]).numpy())
        row = {"seed": r.seed, "Γ": r.metrics["gamma"]}
        if "alpha_history" in r.curves:
            row["block contrast B at start"] = block_contrast(r.curves["alpha_history"][0])
        row |= {"block contrast B at end": end.contrast, "blocks (layers)": end.describe()}
        rows.append(row)
    return pd.DataFrame(rows)


def plot_connectivity(runs: Sequence[RunResult], fractions: Sequence[float] = (1.0,), title: str = ""):
    """Heatmaps of ``C`` (mean over the runs) at each fraction of training, on one colour scale (Figs. 1, 9)."""
    cs = [mean_connectivity(runs, at) for at in fractions]
    vmax = max(1.0, max(float(c.max()) for c in cs))
    fig, axes = plots.figure(ncols=len(cs), height=2.8 if len(cs) > 1 else 3.6,
                             width=plots.FIG_WIDTH if len(cs) > 1 else plots.FIG_WIDTH * 0.6)
    for ax, c, at in zip(axes[0], cs, fractions):
        connectivity_heatmap(ax, c, title=title or f"{100 * at:.0f}% of training", vmax=vmax,
                             cbar=ax is axes[0][-1], tick_every=2 if len(cs) > 1 else "auto")  # small panels
        ax.set_xlabel("target layer j")
        ax.set_ylabel("source layer i" if ax is axes[0][0] else "")
    return fig


def block_contrast_curves(runs: Sequence[RunResult], points: int = 21) -> tuple[np.ndarray, np.ndarray]:
    """``(progress %, B)``: the block contrast of every run (rows) at ``points`` evenly spaced fractions of
    training, read from the recorded ``alpha_history``."""
    fractions = np.linspace(0.0, 1.0, points)
    return 100 * fractions, np.array([[block_contrast(_alphas_at(r, f)) for f in fractions] for r in runs])


def plot_block_contrast(runs: Sequence[RunResult]):
    """The block contrast ``B`` over training, one line per seed, with ``BLOCK_HOLDS`` as a reference."""
    x, b = block_contrast_curves(runs)
    fig, axes = plots.figure(height=2.6)
    ax = axes[0][0]
    for r, row in zip(runs, b):
        ax.plot(x, row, label=f"seed {r.seed}", color=COLOURS["H-ACN"], alpha=0.5 + 0.5 / len(runs),
                linestyle=("-", "--", ":", "-.")[r.seed % 4])
    ax.axhline(BLOCK_HOLDS, color="grey", linewidth=0.8, linestyle=":", label=f"threshold {BLOCK_HOLDS:g}")
    ax.set_xlabel("training progress (% of steps)")
    ax.set_ylabel("block contrast B")
    plots.legend(ax, frameon=False)
    return fig


# ----------------------------------------------------------------------------- layer-wise exits


def plot_exits(results: Sequence[RunResult], key: str, ylabel: str, *, scale: float = 1.0, log: bool = False,
               ax=None):
    """One curve per rule (mean and standard error over seeds) of a per-exit curve ``key`` (exit 0 = embedding)."""
    if ax is None:
        fig, axes = plots.figure()
        ax = axes[0][0]
    else:
        fig = ax.figure
    for rule, runs in main_runs(results).items():
        if runs:
            y = scale * np.array([r.curves[key] for r in runs])
            plots.with_ci(ax, np.arange(y.shape[1]), y, label=hmr.RULE_LABELS[rule], color=COLOURS[hmr.RULE_LABELS[rule]],
                          marker="o", markersize=3)
    ax.set_xlabel("exit (layers used)")
    ax.set_ylabel(ylabel)
    if log and ax.get_lines():
        plots.clip_log_axis(ax)
    plots.legend(ax, frameon=False)
    return fig


def exits_table(results: Sequence[RunResult], key: str, name: str, *, scale: float = 1.0, digits: int = 1):
    """A per-exit curve at exits ``L/4, L/2, 3L/4, L``: mean (std) over seeds, per rule."""
    import pandas as pd

    rows = []
    for rule, runs in main_runs(results).items():
        if not runs:
            continue
        y = np.array([r.curves[key] for r in runs])
        last = y.shape[1] - 1
        row = {"rule": hmr.RULE_LABELS[rule]}
        for e in sorted({last // 4, last // 2, 3 * last // 4, last}):
            row[f"{name}, exit {e}"] = hmr.seed_cell(y[:, e], scale, digits)
        rows.append(row)
    return pd.DataFrame(rows)


# ============================================================================= the ViT chapter (Sec. 3.3)


def vit_paper(rule: str) -> float:
    """Fig. 3b: the paper's best final ImageNet top-1 (%) of ``rule``."""
    return item(f"hacn/fig3b/vit-imagenet-{'res' if rule == 'resnet' else rule}").paper_value


def vit_noise_paper(rule: str, std: float) -> float | None:
    """Fig. 3c: the paper's top-1 (%) at noise ``std`` (0 is Fig. 3b's value); None where it gives none."""
    if std == 0:
        return vit_paper(rule)
    try:
        return item(f"hacn/fig3c/vit-noise{std:g}-{'res' if rule == 'resnet' else rule}").paper_value
    except KeyError:
        return None


def plot_accuracy_vs_epochs(results: Sequence[RunResult]):
    """Fig. 3a: validation accuracy after every epoch, per rule (mean and standard error over seeds)."""
    fig, axes = plots.figure()
    ax = axes[0][0]
    for rule, runs in main_runs(results).items():
        if runs:
            acc = 100 * np.array([r.curves["val_accuracy"] for r in runs])
            plots.with_ci(ax, runs[0].curves["eval_epoch"], acc, label=hmr.RULE_LABELS[rule],
                          color=COLOURS[hmr.RULE_LABELS[rule]], marker="o", markersize=3)
    ax.set_xlabel("epoch")
    ax.set_ylabel("validation accuracy (%)")
    plots.legend(ax, frameon=False)
    return fig


def mean_val_accuracy(r: RunResult) -> float:
    """The mean validation accuracy over a run's epochs: the area under Fig. 3a's curve, a speed of training."""
    return float(np.mean(r.curves["val_accuracy"]))


def best_accuracy_table(results: Sequence[RunResult]):
    """Fig. 3b: per rule the paper's ImageNet top-1 and its gap to the ResNet, beside our test accuracy, best
    validation accuracy and gap to the ResNet (95% Welch interval over seeds)."""
    import pandas as pd

    runs = main_runs(results)
    rows = []
    for rule in RULES:
        gap = _diff(runs[rule], runs["resnet"], "test_accuracy") if rule != "resnet" else None
        rows.append({"rule": hmr.RULE_LABELS[rule], "paper, ImageNet top-1 (%)": vit_paper(rule),
                     "paper, − ResNet (points)": f"{vit_paper(rule) - vit_paper('resnet'):+.2f}" if rule != "resnet"
                     else "", "ours, test accuracy (%)": hmr.seed_cell(_values(runs[rule], "test_accuracy"), 100.0),
                     "ours, best validation accuracy (%)": hmr.seed_cell(_values(runs[rule], "best_val_accuracy"),
                                                                         100.0, 1),
                     "ours, − ResNet (points)": signed(gap, 100, 2) if gap is not None else ""})
    return pd.DataFrame(rows)


def _noise_metric(std: float) -> str:
    return "test_accuracy" if std == 0 else f"noise_accuracy/{std:g}"


def noise_gap_table(results: Sequence[RunResult]):
    """Fig. 3c: at each noise level, H-ACN − ResNet accuracy (points), the paper's (where it gives one) beside
    ours (95% Welch interval), and ACN − ResNet (ours; the paper gives no ACN under noise)."""
    import pandas as pd

    runs = main_runs(results)
    rows = []
    for std in (0.0,) + NOISE_STDS:
        paper_h, paper_r = vit_noise_paper("hacn", std), vit_noise_paper("resnet", std)
        hacn, acn = (_diff(runs[r], runs["resnet"], _noise_metric(std)) for r in ("hacn", "acn"))
        rows.append({"noise σ": std,
                     "paper, H-ACN − ResNet (points)": f"{paper_h - paper_r:+.2f}" if paper_h is not None
                     else "not reported",
                     "ours, H-ACN − ResNet (points)": signed(hacn, 100, 2) if hacn else "not stored",
                     "ours, ACN − ResNet (points)": signed(acn, 100, 2) if acn else "not stored"})
    return pd.DataFrame(rows)


def plot_vit_gaps(results: Sequence[RunResult]):
    """Figs. 3b and 3c as the gap to the ResNet, the paper's (grey) beside ours (95% Welch interval): (b) final
    accuracy of ACN and H-ACN, (c) H-ACN at every noise level the paper reports."""
    runs = main_runs(results)
    fig, axes = plots.figure(ncols=2, height=2.8)
    gaps = [(_diff(runs[r], runs["resnet"], "test_accuracy"), vit_paper(r) - vit_paper("resnet"))
            for r in ("acn", "hacn")]
    stds = [s for s in (0.0,) + NOISE_STDS if vit_noise_paper("hacn", s) is not None]
    noisy = [(_diff(runs["hacn"], runs["resnet"], _noise_metric(s)),
              vit_noise_paper("hacn", s) - vit_noise_paper("resnet", s)) for s in stds]
    for ax, pairs, labels, title in ((axes[0][0], gaps, ["ACN", "H-ACN"], "(b) final accuracy − ResNet"),
                                     (axes[0][1], noisy, [f"σ = {s:g}" for s in stds], "(c) H-ACN − ResNet")):
        ours = [100 * d.mean if d else np.nan for d, _ in pairs]
        err = [100 * d.half_width if d and math.isfinite(d.half_width) else 0.0 for d, _ in pairs]
        plots.paper_vs_ours(ax, labels, [p for _, p in pairs], ours, ours_err=err, ylabel="points",
                            ours_colour=COLOURS["H-ACN"])
        ax.axhline(0, color="grey", linewidth=0.8)
        ax.set_title(title)
    return fig


def plot_noise(results: Sequence[RunResult]):
    """Test accuracy against the input noise's standard deviation, per rule (:func:`mixer_report.plot_noise`)."""
    return hmr.plot_noise(results, arch=None)


def noise_table(results: Sequence[RunResult]):
    """Test accuracy (%) at every noise level, per rule (:func:`mixer_report.noise_table`)."""
    return hmr.noise_table(results, arch=None)


def gamma_table(results: Sequence[RunResult]):
    """Table 3: our ViT's final ``Gamma`` beside the paper's ImageNet ViT and, for the same number of classes,
    its CIFAR-10 Mixer; with the share of our runs whose weights settled."""
    import pandas as pd

    runs = main_runs(results)["hacn"]
    settled, total = settled_share(results)
    return pd.DataFrame([
        {"model and task": "ViT, ImageNet-1k (1000 classes)", "source": "paper, Table 3",
         "Γ": f"{item(TABLE3_IMAGENET).paper_value:.3f}", "runs settled": ""},
        {"model and task": "MLP-Mixer, CIFAR-10 (10 classes)", "source": "paper, Table 3",
         "Γ": f"{item('hacn/table3/cifar10-gamma').paper_value:.3f}", "runs settled": ""},
        {"model and task": "ViT, Fashion-MNIST (10 classes)", "source": "ours",
         "Γ": hmr.seed_cell(_values(runs, "gamma"), digits=3), "runs settled": f"{settled} of {total}"},
    ])


def vit_claims(results: Sequence[RunResult]):
    """The paper's ViT claims (Sec. 3.3, Fig. 3; Fig. 1a) judged on the stored runs: claim, where, ours, verdict.

    Directional claims hold when the 95% Welch interval of our difference lies on the paper's side of 0
    (:func:`~hacn_core.engine.stats.sign_verdict`); "matches" holds when the interval lies above
    -``MATCH_POINTS`` points (does not hold below it, cannot be told across it); the connectivity claim holds
    when the interval of the block contrast lies below ``BLOCK_HOLDS``. A cell without runs leaves its claims out; one seed cannot tell.
    """
    table = ClaimTable()
    runs = main_runs(results)
    r, a, h = runs["resnet"], runs["acn"], runs["hacn"]

    def speed(cell: Sequence[RunResult]) -> list[float]:
        return [mean_val_accuracy(x) for x in cell]

    if h and r:
        d = difference(speed(h), speed(r))
        table.add("H-ACN matches the ResNet's training speed", "Sec. 3.3, Fig. 3a",
                  f"mean validation accuracy over the epochs, H-ACN − ResNet: {signed(d, 100)} points",
                  sign_verdict(d, -MATCH_POINTS / 100), items=("hacn/fig3a/vit-accuracy-vs-epochs",))
    if a and r:
        d = difference(speed(r), speed(a))
        epochs = item("hacn/fig3a/acn-epochs-to-match").paper_value
        table.add(f"The ACN trains more slowly than the ResNet (paper: about {epochs:.0f} epochs to catch up; "
                  "tested here: a lower validation accuracy on average over the epochs)", "Sec. 3.3, Fig. 3a",
                  f"mean validation accuracy over the epochs, ResNet − ACN: {signed(d, 100)} points",
                  sign_verdict(d), items=("hacn/fig3a/acn-epochs-to-match",))
    for other in ("resnet", "acn"):
        if h and runs[other]:
            d = _diff(h, runs[other], "test_accuracy")
            paper = vit_paper("hacn") - vit_paper(other)
            table.add(f"H-ACN has a better final accuracy than the {hmr.RULE_LABELS[other]} (paper: {paper:+.2f} "
                      "points)", "Sec. 3.3, Fig. 3b",
                      f"test accuracy, H-ACN − {hmr.RULE_LABELS[other]}: {signed(d, 100, 2)} points",
                      sign_verdict(d), items=(VIT_ITEMS["hacn"], VIT_ITEMS[other]),
                      under=f"against the {hmr.RULE_LABELS[other]}")
    for std in NOISE_STDS:
        paper_h = vit_noise_paper("hacn", std)
        if h and r and paper_h is not None:
            d = _diff(h, r, _noise_metric(std))
            table.add(f"H-ACN is more robust to Gaussian input noise than the ResNet at σ = {std:g} "
                      f"(paper: {paper_h - vit_noise_paper('resnet', std):+.2f} points)", "Sec. 3.3, Fig. 3c",
                      f"accuracy at σ = {std:g}, H-ACN − ResNet: {signed(d, 100, 2)} points", sign_verdict(d),
                      items=(f"hacn/fig3c/vit-noise{std:g}-hacn", f"hacn/fig3c/vit-noise{std:g}-res"))
    contrasts = [block_contrast(x.curves["alpha_final"]) for x in h]
    contrasts = [c for c in contrasts if math.isfinite(c)]
    if contrasts:
        holds = interval_verdict(contrasts, BLOCK_HOLDS)
        table.add(f"Vision connectivity is near-diagonal, not block-structured (block contrast below {BLOCK_HOLDS:g})",
                  "Sec. 4, Fig. 1a", f"block contrast B of the converged C: {_interval(contrasts)}",
                  None if holds is None else not holds, items=("hacn/fig1a/vision-connectivity",))
    return table.frame()


# ============================================================================= the decoder chapter (Sec. 3.4)


def _log_ppl(ppl: float) -> float:
    return math.log(ppl)


def plot_perplexity(results: Sequence[RunResult]):
    """Fig. 4a/b: (a) layer-wise validation perplexity per rule (log scale); (b) validation perplexity over
    training, from the fixed held-out windows (log scale)."""
    fig, axes = plots.figure(ncols=2)
    plot_exits(results, "layerwise_val_perplexity", "validation perplexity", log=True, ax=axes[0][0])
    ax = axes[0][1]
    for rule, runs in main_runs(results).items():
        if runs:
            ppl = np.exp(np.array([x.curves["val_eval_loss"] for x in runs]))
            plots.with_ci(ax, runs[0].curves["loss_step"], ppl, label=hmr.RULE_LABELS[rule],
                          color=COLOURS[hmr.RULE_LABELS[rule]])
    ax.set_xlabel("step")
    ax.set_ylabel("validation perplexity")
    if ax.get_lines():
        plots.clip_log_axis(ax)
    for a, title in zip(axes[0], ("(a) every exit, after training", "(b) during training")):
        a.set_title(title)
        if a.get_legend():
            a.get_legend().remove()
    plots.figure_legend(fig)
    return fig


def perplexity_table(results: Sequence[RunResult]):
    """Fig. 4a/b as numbers: validation perplexity at exits ``L/4 .. L`` and over the whole held-out text."""
    table = exits_table(results, "layerwise_val_perplexity", "perplexity", digits=2)
    if len(table):
        runs = main_runs(results)
        table["whole held-out text"] = [hmr.seed_cell(_values(runs[rule], "val_perplexity"), digits=2)
                                        for rule in RULES if runs[rule]]
    return table


def final_ratio_table(results: Sequence[RunResult]):
    """Footnote 8: final (top-1) validation perplexity of H-ACN ÷ ResNet, the paper's OWT-2 and PG-19 beside ours
    (the exponential of the Welch difference of the log perplexities, with its 95% interval)."""
    import pandas as pd

    rows = []
    for data, slug in (("OpenWebText2", "owt2"), ("PG-19", "pg19")):
        h, r = (item(f"hacn/fig4/{slug}-final-ppl-{a}").paper_value for a in ("hacn", "res"))
        rows.append({"data": data, "source": "paper (footnote 8)", "H-ACN": f"{h:.2f}", "ResNet": f"{r:.2f}",
                     "H-ACN ÷ ResNet": f"{h / r:.3f}"})
    runs = main_runs(results)
    d = _diff(runs["hacn"], runs["resnet"], "val_perplexity", _log_ppl)
    if d is not None:
        ratio = f"{math.exp(d.mean):.3f}" + (f" [{math.exp(d.mean - d.half_width):.3f}, "
                                              f"{math.exp(d.mean + d.half_width):.3f}]"
                                              if math.isfinite(d.half_width) else " (n=1)")
        rows.append({"data": "Tiny Shakespeare (characters)", "source": "ours",
                     "H-ACN": hmr.seed_cell(_values(runs["hacn"], "val_perplexity"), digits=2),
                     "ResNet": hmr.seed_cell(_values(runs["resnet"], "val_perplexity"), digits=2),
                     "H-ACN ÷ ResNet": ratio})
    return pd.DataFrame(rows)


def _cloze_metric(p: float) -> str:
    return f"cloze_accuracy/{p:g}"


def hellaswag_paper(rule: str, p: float) -> tuple[float, float | None]:
    """Table 1: the paper's HellaSwag accuracy (%) of ``rule`` at character noise ``p`` and its ± (or None)."""
    it = item(f"hacn/table1/hellaswag-p{p:g}-{'res' if rule == 'resnet' else rule}")
    return it.paper_value, it.paper_std


def cloze_table(results: Sequence[RunResult]):
    """Table 1's analogue: per noise rate ``p``, the paper's HellaSwag accuracy (%) of ResNet and H-ACN beside our
    cloze accuracy (%) per rule, and H-ACN − ResNet of both (ours with its 95% Welch interval)."""
    import pandas as pd

    def paper(rule: str, p: float) -> str:
        v, sd = hellaswag_paper(rule, p)
        return f"{v:.2f}" + (f" ± {sd:.2f}" if sd else "")

    runs = main_runs(results)
    rows = []
    for p in hd.CLOZE_NOISE:
        gap = _diff(runs["hacn"], runs["resnet"], _cloze_metric(p))
        ph, pr = hellaswag_paper("hacn", p)[0], hellaswag_paper("resnet", p)[0]
        row = {"noise p": p, "paper ResNet (%)": paper("resnet", p), "paper H-ACN (%)": paper("hacn", p),
               "paper H-ACN − ResNet": f"{ph - pr:+.2f}"}
        for rule in RULES:
            row[f"ours {hmr.RULE_LABELS[rule]} (%)"] = hmr.seed_cell(_values(runs[rule], _cloze_metric(p)), 100.0)
        row["ours H-ACN − ResNet"] = signed(gap, 100, 1) if gap else "not stored"
        rows.append(row)
    return pd.DataFrame(rows)


def cloze_reading(results: Sequence[RunResult], within: float = 2.0) -> str:
    """One sentence on whether the cloze can rank the models at all: chance is ``1 / cloze_choices``, a
    model's accuracy on ``n`` items has the binomial standard error ``sqrt(c (1 - c) / n)`` at chance ``c``,
    and when every rule's mean over its seeds lies within ``within`` standard errors of chance at every
    noise rate, the gaps between rules are read as noise around chance, not as robustness."""
    runs = {rule: cell for rule, cell in main_runs(results).items() if cell}
    if not runs:
        return "No run is stored, so the cloze cannot be read."
    first = next(iter(runs.values()))[0].config
    k, n = first["cloze_choices"], first["cloze_items"]
    chance = 1.0 / k
    se = math.sqrt(chance * (1 - chance) / n)
    means = {(rule, p): float(np.mean(_values(cell, _cloze_metric(p)))) for rule, cell in runs.items()
             for p in hd.CLOZE_NOISE if _values(cell, _cloze_metric(p))}
    if not means:
        return "No stored run has cloze accuracies, so the cloze cannot be read."
    worst = max(abs(m - chance) for m in means.values())
    lo, hi = min(means.values()), max(means.values())
    seeds = sorted({len(cell) for cell in runs.values()})
    n_seeds = (f"{seeds[0]} seed" + "s" * (seeds[0] != 1)) if len(seeds) == 1 else f"{seeds[0]}-{seeds[-1]} seeds"
    facts = (f"Chance is {100 * chance:.0f}% ({k} choices), and one model's accuracy on {n} items has a standard "
             f"error of {100 * se:.1f} points there. With {n_seeds} per rule, the rules' means run from "
             f"{100 * lo:.1f}% to {100 * hi:.1f}%, at most {worst / se:.1f} standard errors from chance")
    if worst <= within * se:
        return (facts + ". At this budget the cloze cannot rank the models: the decoders do not yet use the "
                "context to pick the true next line, so the gaps between rules, with or without noise, are noise "
                "around chance and say nothing about robustness.")
    best = max(means, key=means.get)
    return (facts + f". The models read the context: {hmr.RULE_LABELS[best[0]]} is furthest above chance "
            f"({100 * means[best]:.1f}% at p = {best[1]:g}), and the gaps between rules can be read with their "
            "intervals.")


def plot_cloze(results: Sequence[RunResult]):
    """Table 1 / Fig. 4c: (a) cloze accuracy against the noise rate per rule (chance: one in ``cloze_choices``);
    (b) H-ACN − ResNet at each rate, the paper's HellaSwag gap (grey) beside ours."""
    runs = main_runs(results)
    fig, axes = plots.figure(ncols=2, height=2.8)
    ax = axes[0][0]
    ps = np.array(hd.CLOZE_NOISE)
    for rule, cell in runs.items():
        if cell:
            acc = 100 * np.array([[x.metrics[_cloze_metric(p)] for p in ps] for x in cell])
            plots.with_ci(ax, ps, acc, label=hmr.RULE_LABELS[rule], color=COLOURS[hmr.RULE_LABELS[rule]], marker="o",
                          markersize=3)
    stored = [x for cell in runs.values() for x in cell]
    if stored:
        ax.axhline(100 / stored[0].config["cloze_choices"], color="grey", linewidth=0.8, linestyle=":",
                   label="chance")
    ax.set_xlabel("character noise p")
    ax.set_ylabel("cloze accuracy (%)")
    ax.set_title("(a) accuracy")
    plots.legend(ax, frameon=False)
    gaps = [_diff(runs["hacn"], runs["resnet"], _cloze_metric(p)) for p in ps]
    plots.paper_vs_ours(axes[0][1], [f"p = {p:g}" for p in ps],
                        [hellaswag_paper("hacn", p)[0] - hellaswag_paper("resnet", p)[0] for p in ps],
                        [100 * d.mean if d else np.nan for d in gaps],
                        ours_err=[100 * d.half_width if d and math.isfinite(d.half_width) else 0.0 for d in gaps],
                        ylabel="points", ours_colour=COLOURS["H-ACN"])
    axes[0][1].axhline(0, color="grey", linewidth=0.8)
    axes[0][1].set_title("(b) H-ACN − ResNet")
    return fig


#: App. D's ablation rows: (initialisation, DepthLN "paper" (Eq. 7) or "none", paper item, the decoder
#: configuration entries of the cell: :data:`hacn_core.hacn.studies.decoder_ablations.INITS`). Table 6's
#: N(0.25, 0.005) row with DepthLN is hacn-decoder's H-ACN; every other row is a cell of hacn-decoder-ablations.
ABLATIONS: tuple[tuple[str, str, str, dict[str, Any]], ...] = (
    tuple((init_label(where), "paper", f"hacn/table6/init-{slug}", where) for slug, where in hda.INITS.items())
    + tuple((init_label(hda.INITS[slug]), "none", f"hacn/table7/init-{slug}-no-depthln", hda.INITS[slug])
            for slug in hda.TABLE7_INITS)
)


def _ablation_runs(results: Sequence[RunResult], where: Mapping[str, Any], depth_ln: str) -> list[RunResult]:
    """The H-ACN runs of an ablation cell, in seed order: ``where``'s init entries (a run with a depth-dependent
    ``alpha_init`` only in the cell that names it) and DepthLN."""
    ln = "auto" if depth_ln == "paper" else depth_ln  # the studies' "auto" is Eq. 7's DepthLN for H-ACN
    return [r for r in hmr.cell_runs(results, arch=None, rule="hacn", depth_ln=ln, **where)
            if r.config.get("alpha_init") == where.get("alpha_init")]


def _planned(experiment_id: str, config: dict[str, Any]) -> RunResult:
    """A planned configuration as a run without measurements, so the run selectors can ask whether a grid has
    a cell."""
    return RunResult(experiment=experiment_id, config=config, config_hash="", seed=config["seed"], metrics={})


def ablation_table(results: Sequence[RunResult], ablation_results: Sequence[RunResult] = (), *,
                   profile: str = "book"):
    """Tables 6-7: the paper's validation perplexity (PG-19, 6B tokens) of each initialisation with and without
    DepthLN, beside ours: ``results`` are hacn-decoder's runs (Table 6's N(0.25, 0.005) row), ``ablation_results``
    hacn-decoder-ablations' (the other rows). Per row: the experiment whose grid at ``profile`` has the cell, and
    ours where runs of the cell are stored, else "not stored" ("not run here" for a cell of neither grid)."""
    import pandas as pd

    grids = [(e.id, [_planned(e.id, c) for c in e.runs(profile)]) for e in (hd.EXPERIMENT, hda.EXPERIMENT)]
    stored = [*results, *ablation_results]
    rows = []
    for init, depth_ln, item_id, where in ABLATIONS:
        it = item(item_id)
        runs = _ablation_runs(stored, where, depth_ln)
        owner = [eid for eid, planned in grids if _ablation_runs(planned, where, depth_ln)]
        rows.append({"initialisation of a": init, "DepthLN": "yes" if depth_ln == "paper" else "no",
                     "paper": it.item,
                     "paper perplexity": f"{it.paper_value:.2f} ± {it.paper_std:.2f}",
                     "experiment": ", ".join(owner) or "-",
                     "ours perplexity": hmr.seed_cell(_values(runs, "val_perplexity"), digits=2) if runs
                     else "not stored" if owner else "not run here"})
    return pd.DataFrame(rows)


def ablation_budget_lines() -> list[str]:
    """Why the ablation has the seeds it has: its book runs, their CPU-hours at the decoder's measured step cost
    (:func:`hacn_core.hacn.studies.decoder_ablations.book_cpu_hours`), two seeds of every row, and the main
    comparison's, all at the book size."""
    runs = len(hda.book_configs())
    every_row = 2 * len(hda.ROWS)
    main = hd.EXPERIMENT.runs("book")
    main_hours = sum(c["steps"] * hd.BOOK_STEP_MS[c["rule"]] / 60e3 + hd.BOOK_EVAL_MINUTES for c in main) / 60
    return [f"{hda.EXPERIMENT_ID} trains the {len(hda.ROWS)} rows that are not hacn-decoder's H-ACN: seed 0 of "
            f"every row and seed 1 of Table 7's {len(hda.BOOK_SECOND_SEED)} cells (two seeds are the fewest that "
            f"give its with-minus-without difference a spread), {runs} runs of about {hda.run_cpu_minutes():.1f} "
            f"CPU-minutes at the measured {hd.BOOK_STEP_MS['hacn']:.0f} ms per H-ACN step: about "
            f"{hda.book_cpu_hours():.1f} CPU-hours, within its budget of {hda.BUDGET_CPU_HOURS:g}; two seeds of "
            f"every row ({every_row} runs) would be {hda.book_cpu_hours(every_row):.1f}, and the main comparison's "
            f"{len(main)} runs are {main_hours:.1f}"]


def seed_correlations(results: Sequence[RunResult]):
    """Sec. 4: Pearson correlation of the converged ``a`` between every pair of H-ACN seeds, beside GPT-2's 95%."""
    return hmr.correlation_table(main_runs(results)["hacn"], PEARSON_GPT, "GPT-2/OWT-2")


#: Table 6's initialisations that depend on depth ("did not provide any improvement", App. D)
DEPTH_INIT_SLUGS: tuple[str, ...] = ("half-layers", "exp-decay")


def _log_ppls(runs: Sequence[RunResult]) -> list[float]:
    return [math.log(v) for v in _values(runs, "val_perplexity")]


def ablation_claims(results: Sequence[RunResult], ablation_results: Sequence[RunResult],
                    table: ClaimTable | None = None):
    """App. D's claims judged on the stored runs, into ``table`` (a new one by default; its frame is returned).

    Table 6 trains one seed of most rows, so a row is compared with N(0.25, 0.005) on log perplexity with the
    seed-to-seed spread pooled over every cell that has two seeds or more (:func:`difference_pooled`): all rows
    share one decoder, data and budget and differ only in a few scalars' starting values. "N(0.25, 0.005) is
    best": holds when every other row's interval lies above 0, fails when one lies below. "Depth-dependent
    initialisations give no improvement": holds when both lie above ``-PAR_NATS`` (not better by 2% or more),
    fails when one lies below 0. Table 7 ("DepthLN consistently improves"): the differences without − with
    DepthLN paired by seed over both initialisations, holding when their 95% interval lies above 0."""
    table = ClaimTable() if table is None else table
    stored = [*results, *ablation_results]
    cells = {(slug, ln): _ablation_runs(stored, where, ln) for slug, where in hda.INITS.items()
             for ln in ("paper", "none")}
    std, df = pooled_std([_log_ppls(runs) for runs in cells.values()])
    spread = f"seed spread pooled over the cells with 2+ seeds: {std:.3f} nats on {df} df" if df else "no cell has 2 seeds"
    best = _log_ppls(cells[hda.MAIN_INIT, "paper"])
    others = {slug: _log_ppls(cells[slug, "paper"]) for slug in hda.INITS if slug != hda.MAIN_INIT}
    diffs = {slug: difference_pooled(x, best, std, df) for slug, x in others.items() if x and best}
    if diffs:
        verdicts = [sign_verdict(d) for d in diffs.values()]
        every = len(diffs) == len(others) and all(v is True for v in verdicts)
        table.add(f"{init_label(hda.INITS[hda.MAIN_INIT])} gives the lowest perplexity of Table 6's initialisations",
                  "App. D, Table 6",
                  "log perplexity, row − " + init_label(hda.INITS[hda.MAIN_INIT]) + ": "
                  + "; ".join(f"{init_label(hda.INITS[slug])} {signed(d, digits=3)}" for slug, d in diffs.items())
                  + f" nats ({spread})", False if False in verdicts else True if every else None,
                  items=tuple(f"hacn/table6/init-{slug}" for slug in hda.INITS))
    depth = {slug: diffs[slug] for slug in DEPTH_INIT_SLUGS if slug in diffs}
    if depth:
        verdicts = [False if sign_verdict(d) is False else sign_verdict(d, -PAR_NATS) for d in depth.values()]
        table.add(f"Initialisations that depend on depth give no improvement (here: not {100 * PAR_NATS:.0f}% "
                  "lower perplexity)", "App. D, Table 6",
                  "log perplexity, row − " + init_label(hda.INITS[hda.MAIN_INIT]) + ": "
                  + "; ".join(f"{init_label(hda.INITS[slug])} {signed(d, digits=3)}" for slug, d in depth.items())
                  + " nats", False if False in verdicts else True if len(depth) == len(DEPTH_INIT_SLUGS)
                  and all(v is True for v in verdicts) else None,
                  items=tuple(f"hacn/table6/init-{slug}" for slug in DEPTH_INIT_SLUGS))
    pairs = []  # (init slug, seed, log ppl without - with DepthLN)
    for slug in hda.TABLE7_INITS:
        with_ = {r.seed: math.log(r.metrics["val_perplexity"]) for r in cells[slug, "paper"]}
        without = {r.seed: math.log(r.metrics["val_perplexity"]) for r in cells[slug, "none"]}
        pairs += [(slug, seed, without[seed] - with_[seed]) for seed in sorted(with_.keys() & without.keys())]
    if pairs:
        paper = [math.log(item(f"hacn/table7/init-{slug}-no-depthln").paper_value
                          / item(f"hacn/table6/init-{slug}").paper_value) for slug in hda.TABLE7_INITS]
        diffs_ = [d for _, _, d in pairs]
        table.add("DepthLN consistently improves H-ACN's perplexity (paper, without − with: "
                  + " and ".join(f"{v:+.3f}" for v in paper) + " nats)", "App. D, Table 7",
                  f"log perplexity, without − with DepthLN, paired by seed: {_interval(diffs_)} nats ("
                  + ", ".join(f"{init_label(hda.INITS[slug])} seed {seed} {d:+.3f}" for slug, seed, d in pairs) + ")",
                  interval_verdict(diffs_, 0.0),
                  items=tuple(f"hacn/table7/init-{slug}-no-depthln" for slug in hda.TABLE7_INITS))
    return table.frame()


def decoder_claims(results: Sequence[RunResult], vit_results: Sequence[RunResult] = (),
                   ablation_results: Sequence[RunResult] = ()):
    """The paper's decoder claims (Sec. 3.4, Sec. 4, App. E; Figs. 1b, 4, 9; Table 1) judged on the stored runs.

    Directional claims: :func:`mixer_report.sign_verdict` of the 95% Welch interval; "on par": judged as "no
    worse", the interval of ResNet − H-ACN log perplexity above ``-PAR_NATS`` (so a clearly better H-ACN holds
    it too); thresholds on one quantity
    (block contrast ``BLOCK_HOLDS``, Pearson ``PEARSON_HOLDS``, displacement left ``SET_LEFT``): the 95% interval
    over seeds on one side (:func:`interval_verdict`). ``vit_results``: the ViT study's runs, for the comparison of
    the two modalities; ``ablation_results``: hacn-decoder-ablations' runs, for App. D's claims
    (:func:`ablation_claims`). A cell without runs leaves its claims out; one seed cannot tell.
    """
    table = ClaimTable()
    runs = main_runs(results)
    r, a, h = runs["resnet"], runs["acn"], runs["hacn"]
    if h and r:
        # "on par" judged one-sided, as "no worse": an H-ACN with a clearly lower perplexity than the ResNet's
        # meets the paper's claim and more, so the verdict must not read "does not hold" for it
        d = _diff(r, h, "val_perplexity", _log_ppl)
        owt = (item("hacn/fig4/owt2-final-ppl-hacn").paper_value, item("hacn/fig4/owt2-final-ppl-res").paper_value)
        better = "H-ACN lower" if d.mean > 0 else "H-ACN higher"
        table.add(f"H-ACN's final perplexity is no worse than the ResNet's: at most {100 * PAR_NATS:.0f}% higher "
                  f"(paper: on par, {owt[0]:g} vs {owt[1]:g} on OWT-2)", "Sec. 3.4, Fig. 4, footnote 8",
                  f"log perplexity, ResNet − H-ACN: {signed(d, digits=3)} nats ({better})",
                  sign_verdict(d, -PAR_NATS), items=FINAL_PPL_ITEMS)
        d = _diff(r, h, "half_depth_exit_perplexity", _log_ppl)
        table.add("H-ACN's intermediate layers have far lower perplexity than the ResNet's", "Sec. 3.4, Fig. 4a/b",
                  f"log perplexity at the half-depth exit, ResNet − H-ACN: {signed(d, digits=2)} nats",
                  sign_verdict(d), items=("hacn/fig4a/owt2-layerwise-ppl", "hacn/fig4b/pg19-layerwise-ppl"))
    if a and r:
        d = _diff(a, r, "val_perplexity", _log_ppl)
        table.add("The ACN underperforms the ResNet at the same steps", "Sec. 3.4, footnote 5",
                  f"log perplexity, ACN − ResNet: {signed(d, digits=3)} nats", sign_verdict(d))
    if h and r:
        zs = item("hacn/fig4c/zero-shot-average-hacn").paper_value - item("hacn/fig4c/zero-shot-average-res").paper_value
        d = _diff(h, r, _cloze_metric(0.0))
        table.add(f"H-ACN generalises better zero-shot (paper: {zs:+.1f} points on average)", "Sec. 3.4, Fig. 4c",
                  f"cloze accuracy without noise, H-ACN − ResNet: {signed(d, 100)} points", sign_verdict(d),
                  items=("hacn/fig4c/zero-shot-average-hacn", "hacn/fig4c/zero-shot-average-res",
                         "hacn/table1/hellaswag-p0-hacn", "hacn/table1/hellaswag-p0-res"))
        for p in hd.CLOZE_NOISE[1:]:
            d = _diff(h, r, _cloze_metric(p))
            paper = hellaswag_paper("hacn", p)[0] - hellaswag_paper("resnet", p)[0]
            table.add(f"H-ACN is more robust to character noise at p = {p:g} (paper: {paper:+.2f} points)",
                      "Sec. 3.4, Table 1", f"cloze accuracy at p = {p:g}, H-ACN − ResNet: {signed(d, 100)} points",
                      sign_verdict(d), items=(f"hacn/table1/hellaswag-p{p:g}-hacn", f"hacn/table1/hellaswag-p{p:g}-res"))
    if len(h) >= 2:
        corr = seed_correlations(results)
        mean = float(corr.loc["without a_L", "mean Pearson (%)"])
        paper = item(PEARSON_GPT).paper_value
        table.add(f"The converged a hardly depend on the seed (Pearson {paper:g}%; holds here at ≥ {PEARSON_HOLDS:g}%)",
                  "Sec. 4", f"mean Pearson over seed pairs, without a_L: {mean:.1f}%", mean >= PEARSON_HOLDS,
                  items=(PEARSON_GPT,), values=hmr.pair_pearsons(h), unit="%")
    contrasts = [c for c in (block_contrast(x.curves["alpha_final"]) for x in h) if math.isfinite(c)]
    if contrasts:
        start = [block_contrast(x.curves["alpha_history"][0]) for x in h if "alpha_history" in x.curves]
        before = f" (at the start: {_interval(start)})" if start else ""
        table.add(f"Language develops block-structured, modular connectivity (block contrast ≥ {BLOCK_HOLDS:g})",
                  "Sec. 4, Fig. 1b", f"block contrast B of the converged C: {_interval(contrasts)}{before}",
                  interval_verdict(contrasts, BLOCK_HOLDS), items=("hacn/fig1b/language-connectivity",))
        vit_h = main_runs(vit_results)["hacn"]
        vit = [c for c in (block_contrast(x.curves["alpha_final"]) for x in vit_h) if math.isfinite(c)]
        if vit:
            d = difference(contrasts, vit)
            table.add("Language connectivity is more block-structured than vision's", "Sec. 4, Fig. 1",
                      f"block contrast, decoder − ViT: {signed(d, digits=3)}", sign_verdict(d))
    left = [hmr.fraction_left(x, SET_BY) for x in h if "delta" in x.curves]
    if left:
        early = interval_verdict(left, SET_LEFT)  # True: more than SET_LEFT left, the claim does not hold
        table.add(f"The connectivity is largely set by {100 * SET_BY:.0f}% of training (here: at most "
                  f"{100 * SET_LEFT:.0f}% of the weights' displacement left)", "App. E, Fig. 9",
                  f"share of ‖a_T − a_0‖ left at {100 * SET_BY:.0f}% of training: "
                  f"{_interval([100 * v for v in left], 1)} %",
                  None if early is None else not early, items=("hacn/fig9/connectivity-evolution",))
    if ablation_results:
        ablation_claims(results, ablation_results, table)
    return table.frame()


# ============================================================================= both chapters: the reading


def findings_markdown(claims, stored: int, planned: int) -> str:
    """What the stored runs show, as Markdown written from the claims table (no number typed by hand); a line
    on the runs only when some of the ``planned`` ones are missing."""
    if not stored:
        return f"**None of the {planned} planned runs of this profile is stored**, so no claim is judged here."
    holds = [c for c, v in zip(claims["claim"], claims["holds"]) if v is True]
    fails = [c for c, v in zip(claims["claim"], claims["holds"]) if v is False]
    open_ = [c for c, v in zip(claims["claim"], claims["holds"]) if v is None]
    runs = "" if stored >= planned else f"**{stored} of {planned} planned runs stored.** "
    lines = [f"{runs}Of the {len(claims)} claims the runs bear on, {len(holds)} hold, {len(fails)} do not hold "
             f"and {len(open_)} cannot be told (one seed, or an interval across the line)."]
    for name, group in (("Holds", holds), ("Does not hold", fails), ("Cannot be told", open_)):
        if group:
            lines.append(f"- **{name}:** " + "; ".join(group) + ".")
    return "\n".join(lines)


__all__ = [
    "ABLATIONS", "BLOCK_HOLDS", "BlockSplit", "MAX_BLOCKS", "MIN_BLOCK", "ablation_budget_lines", "ablation_table",
    "block_contrast", "block_contrast_curves", "block_split", "block_table", "best_accuracy_table", "budget_lines",
    "cloze_table", "cost_table", "coverage_table", "decoder_claims", "exits_table", "final_ratio_table",
    "findings_markdown", "gamma_table", "init_label", "interval_verdict", "main_runs", "mean_connectivity",
    "noise_gap_table", "noise_table", "par_verdict", "perplexity_table", "plot_accuracy_vs_epochs",
    "plot_block_contrast", "plot_cloze", "plot_connectivity", "plot_exits", "plot_noise", "plot_perplexity",
    "plot_settling", "plot_vit_gaps", "seed_correlations", "settled_share", "settling_table", "vit_claims",
]
