"""AWNN: does the learned width depend on the hyper-parameters? Fig. 4, Fig. 10 and App. D (Errica et al.).

Two experiments.

``awnn-ablations`` (Sec. 5.2, Fig. 4; App. F, Fig. 10: training stability)
    SpiralHard, one :class:`~hacn_core.awnn.AdaptiveMLP` hidden layer, trained from
    different batch sizes and different starting rates ``nu_0`` (starting widths), for
    each non-linearity of the paper's grid. Per run and per recorded epoch: the width
    of every hidden layer and their total, the rate, validation and test accuracy.
    Per run: the final width, the *tail width* (mean over the last
    :data:`TAIL_FRACTION` of the records, what the spreads compare), the epoch from
    which the width stays within :data:`SETTLE_BAND` of the tail width
    (:func:`settle_epoch`, "epochs to converge"), the late drift of the width
    (:func:`late_drift`, App. F's "decreasing trend"), its record-to-record jitter in
    the tail (:func:`tail_jitter`, Sec. 5.2's "smaller batch sizes cause more
    instability"), the test accuracy at the end and at the best validation epoch.
    Across runs (:func:`width_spread`, :func:`spread_table`): the max/min ratio and
    the coefficient of variation of the tail widths across batch sizes and across
    starting rates, per activation - the paper's claims are that both are small, the
    second one only with the bounded ReLU6.

``awnn-fixed-plus`` (App. D, "Fixed+")
    The fixed-width MLP of ``awnn-tabular-fixed`` (every hyper-parameter unchanged:
    ReLU, Adam lr 0.01, batch 128, 1000 / 5000 epochs, test accuracy at the best
    validation epoch) retrained with every hidden layer at the average per-layer width
    AWNN learned, on Spiral and SpiralHard: with one hidden layer, and on SpiralHard also
    with two, the depth of Table 1's baseline there (:data:`FIXED_PLUS_DEPTHS`). Three width
    sources (:data:`FIXED_PLUS_WIDTHS`): ``paper`` (Table 1's 65.9 and 227.4, as the
    public code's Fixed+ configurations round them: 66 and 227 per layer),
    ``ours-eq14`` and ``ours-renormalised`` (the two importance arms of chapter 2's
    stored ``awnn-tabular-adaptive`` runs of the seeds :data:`WIDTH_SOURCE_SEEDS`: the
    mean over seeds of the total width at the best validation epoch, divided by the
    number of hidden layers, rounded half up; :func:`learned_layer_width` recomputes
    them and a test checks the literals).

The paper's setting, and where it is silent
    * Fig. 4 / Fig. 10 are images; the text does not list the batch sizes or starting
      rates. We take them from the public code's configurations of exactly these two
      studies (``batch_size_stability_spiralHard_Exponential.yml`` and
      ``starting_point_stability_spiralHard_Exponential.yml``, values read, nothing
      copied): batch sizes ``[32, 128, 256, 512, 1024]`` at rate 0.01, starting rates
      ``[0.001, 0.005, 0.01, 0.05, 0.1]`` (2303, 461, 231, 47 and 24 neurons at
      ``k = 0.9``) at batch 128, activations ReLU6, ReLU, LeakyReLU (Table 3's grid;
      App. F), one hidden layer, Adam with learning rate 0.01 (Table 3). The cell
      (batch 128, rate 0.01) belongs to both sweeps and runs once: 9 cells per
      activation, 27 in all (:func:`grid_cells`).
    * Epochs: the paper does not say; the public configurations train 20,000 epochs
      (Table 3's budget for SpiralHard is 5,000). ``paper`` uses 20,000.
    * Priors: Sec. 5.3 says that everything before it used an uninformative prior on
      the rates, so ``rate_prior=None``. The weight prior is uninformative too
      (``sigma_theta=None``) as in the SpiralHard study of Sec. 5.3 (the public
      configuration's ``sigma_theta = 100`` is nearly flat). With these choices the
      (ReLU6, 128, 0.01) cell is exactly chapter 3's control run (``awnn-compress``,
      ``rate_prior="none"``), which the notebook uses as a cross-check.
    * Not followed from the public configuration: it also averages over informative
      rate priors ``N(0.01, 0.001)`` and ``N(0.01, 0.01)`` ("averaged across the
      different configurations tried during model selection", Sec. 5.2), which pull
      every run towards the width 231 of the rate 0.01; it sets ``N`` to 2000 where
      the training set has 3500 points (we use the true size); it renormalises the
      importances (chapter 2's ``"active"`` arm; Eq. 14 as written is ours, the
      default, and the only arm of this study).
    * Data: the shared splits of chapter 2 (our own generators, radius 1).

Profiles
    ``paper``: the 27 cells x :data:`PAPER_SEEDS` (10) seeds x 20,000 epochs (recorded every
    10 epochs); Fixed+ 2 datasets x 3 width sources x 10 seeds.
    ``book`` (about 80 CPU-minutes at one thread, measured on the project's 2-core machine
    while other jobs ran, so upper bounds):

    * stability: :data:`BOOK_EPOCHS` (2,500) epochs, recorded every 5, one seed, and the
      starting rates :data:`BOOK_RATES` - the rate 0.001 is left out: its width grows from
      2,303 to 11,221 neurons in 300 epochs (ReLU6, 81 CPU-s, about 0.3 s per epoch and
      rising), so three such runs would take most of the budget. 24 cells. Measured CPU
      seconds per 100 epochs (ReLU6 unless said): over the first 100 epochs batch 32 10.6,
      batch 128 4.3, batch 1024 1.2, ReLU 4.4, LeakyReLU 3.8; over 1,000 epochs rate 0.005
      (ReLU) 9.0 and rate 0.1 3.6; chapter 3's (ReLU6, 128, 0.01) control took 100-123 s
      for 2,500 epochs. About 46 minutes in all.
    * Fixed+: the ``paper`` profile itself, 10 seeds per dataset and width source (every
      run is stored). CPU seconds per run, on the machine that made the first seeds
      (2026-11-22) and on the one that made the rest (2026-11-24, 3 to 4 times faster):
      Spiral 8-13 and 3-4, SpiralHard 112-138 and 39-40 at width 227, 101-109 and 31-33
      at widths 20 and 41.

    2,500 epochs are an eighth of the public configuration's 20,000 and half of Table 3's
    5,000: the book shows the first part of Figs. 4 and 10, and :func:`settle_epoch` says
    whether a width has settled by then.
    ``smoke``: :data:`SMOKE_EPOCHS` epochs per cell, all 27 cells, one seed; Fixed+ 3 epochs.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import torch

from hacn_core import paper_items
from hacn_core.awnn import ELBOLoss, WidthCallback, quantile_width
from hacn_core.engine.registry import Experiment, Link, with_overrides
from hacn_core.engine.tables import ClaimTable
from hacn_core.awnn.studies.adaptive import adam_train_config, build_model, load_splits
from hacn_core.awnn.studies.compress import _sig
from hacn_core.awnn.studies.tabular import TABLE1_SHAPES
from hacn_core.awnn.studies.tabular import TASKS as FIXED_TASKS
from hacn_core.awnn.studies.tabular import SplitAccuracy, is_table1_baseline, train_fixed_mlp
from hacn_core.awnn.baseline import MLP
from hacn_core.engine.results import RunContext, RunResult
from hacn_core.engine.training import fit

EXPERIMENT_ID = "awnn-ablations"
FIXED_PLUS_ID = "awnn-fixed-plus"

# ----------------------------------------------------------------------------- the grid (Figs. 4 and 10)

#: Table 3's non-linearities; App. F organises Fig. 10 by them (no tanh in the study)
ACTIVATIONS: tuple[str, ...] = ("relu6", "relu", "leaky_relu")
ACTIVATION_LABELS = {"relu6": "ReLU6", "relu": "ReLU", "leaky_relu": "LeakyReLU"}
#: the public batch-size stability configuration (the paper's figure does not list them in text)
BATCH_SIZES: tuple[int, ...] = (32, 128, 256, 512, 1024)
#: the public starting-point stability configuration
START_RATES: tuple[float, ...] = (0.001, 0.005, 0.01, 0.05, 0.1)
BASE_BATCH = 128  # Table 3: AWNN's batch on SpiralHard; the rate sweep runs at it
BASE_RATE = 0.01  # Table 3: AWNN's starting rate; the batch sweep runs at it
SWEEPS: tuple[str, ...] = ("batch_size", "rate_init")
SWEEP_LABELS = {"batch_size": "batch size", "rate_init": "starting rate"}
PAPER_EPOCHS = 20_000  # the public configurations of both studies
PAPER_SEEDS = tuple(range(10))  # "retrained 10 times" (Sec. 4); 10 runs per configuration in the public code
BOOK_EPOCHS = 2_500  # chapter 3's SpiralHard budget: the shared cell is its control run, bit for bit
BOOK_SEEDS = (0,)
BOOK_RATES: tuple[float, ...] = (0.005, 0.01, 0.05, 0.1)  # 0.001 left out (cost, see the docstring)
SMOKE_EPOCHS = 4

# ----------------------------------------------------------------------------- the per-run summaries

TAIL_FRACTION = 0.1  # the last 10% of the records make the "final" (tail) width
SETTLE_BAND = 0.1  # settled: within +-10% of the tail width from then on
DRIFT_WINDOW = 0.1  # late drift: the tail against the 10% window that ends at 80% of training
DRIFT_END = 0.8
JITTER_FRACTION = 0.25  # tail jitter: over the last 25% of the records
SIMILAR_RATIO = 1.5  # "a similar width": max/min of the tail widths at most 1.5 (our threshold)

# ----------------------------------------------------------------------------- Fixed+ (App. D)

FIXED_PLUS_DATASETS: tuple[str, ...] = ("Spiral", "SpiralHard")
WIDTH_SOURCES: tuple[str, ...] = ("paper", "ours-eq14", "ours-renormalised")
WIDTH_SOURCE_ARM = {"ours-eq14": "none", "ours-renormalised": "active"}  # awnn-tabular-adaptive's arms
#: Per-layer width of each Fixed+ run (literals, so every configuration is self-describing).
#: ``paper``: Table 1's AWNN widths 65.9 (Spiral) and 227.4 (SpiralHard), as the public
#: Fixed+ configurations round them (66 and 227 neurons in *every* layer; App. D says
#: "the average width over hidden layers ... reported in Table 1").
#: ``ours-*``: computed once by ``learned_layer_width`` from the stored chapter-2 runs of the
#: seeds :data:`WIDTH_SOURCE_SEEDS` (the ones stored when Fixed+ was set up; Spiral: 5 seeds,
#: 1 layer; SpiralHard: 1 seed, 2 layers): Eq. 14 - Spiral totals 18, 18, 14, 29, 15 (mean
#: 18.8), SpiralHard 39 / 2 layers = 19.5; renormalised - Spiral 26, 49, 34, 51, 32 (mean
#: 38.4), SpiralHard 82 / 2 = 41. ``tests/test_awnn_ablations.py`` checks these against the
#: stored runs; the chapter shows what all 10 seeds give beside them.
FIXED_PLUS_WIDTHS: dict[str, dict[str, int]] = {
    "paper": {"Spiral": 66, "SpiralHard": 227},
    "ours-eq14": {"Spiral": 19, "SpiralHard": 20},
    "ours-renormalised": {"Spiral": 38, "SpiralHard": 41},
}
#: Fixed+ depths per dataset: one hidden layer (the first reading) and, where it differs, the
#: depth of Table 1's baseline (``awnn_tabular.TABLE1_SHAPES``): App. D retrains "the best fixed
#: model" at the new width, so at the paper's setting the depth is the baseline's
FIXED_PLUS_DEPTHS: dict[str, tuple[int, ...]] = {"Spiral": (1,), "SpiralHard": (1, 2)}
#: the ``awnn-tabular-adaptive`` seeds whose learned widths make the ``ours-*`` literals
WIDTH_SOURCE_SEEDS: dict[str, tuple[int, ...]] = {"Spiral": tuple(range(5)), "SpiralHard": (0,)}
SMOKE_FIXED_PLUS_EPOCHS = 3


# ============================================================================= configurations


def grid_cells(batch_sizes: Sequence[int] = BATCH_SIZES, rates: Sequence[float] = START_RATES,
               activations: Sequence[str] = ACTIVATIONS) -> list[tuple[str, int, float]]:
    """The (activation, batch size, starting rate) cells of Figs. 4 and 10, without duplicates.

    Per activation: every batch size at :data:`BASE_RATE`, then every other starting
    rate at :data:`BASE_BATCH` (the cell ``(BASE_BATCH, BASE_RATE)`` is in both sweeps
    and appears once).
    """
    cells: list[tuple[str, int, float]] = []
    for act in activations:
        row = [(act, int(b), BASE_RATE) for b in batch_sizes] + [(act, BASE_BATCH, float(r)) for r in rates]
        for cell in row:
            if cell not in cells:
                cells.append(cell)
    return cells


def in_sweep(config: dict[str, Any], sweep: str) -> bool:
    """Whether a run belongs to the batch-size sweep (rate at :data:`BASE_RATE`) or the
    starting-rate sweep (batch at :data:`BASE_BATCH`); the shared cell is in both."""
    _check_choice("sweep", sweep, SWEEPS)
    if sweep == "batch_size":
        return config["rate_init"] == BASE_RATE
    return config["batch_size"] == BASE_BATCH


def stability_config(activation: str, batch_size: int, rate_init: float, seed: int, **overrides: Any) -> dict[str, Any]:
    """One flat run configuration of ``awnn-ablations`` (every choice in the module docstring)."""
    config = {
        "study": "stability",
        "dataset": "SpiralHard",
        "data": "shared",
        "data_seed": 0,
        "input_scale": 1.0,
        "seed": seed,
        "hidden_layers": 1,
        "activation": activation,
        "rate_init": rate_init,
        "k": 0.9,
        "importance_norm": "none",
        "init": "kaiming_plus",
        "grow_init": "normal",
        "sigma_theta": None,  # uninformative (Sec. 5.3's SpiralHard setting)
        "rate_prior": None,  # uninformative (Sec. 5.3: "so far, we have used an uninformative prior")
        "optimizer": "adam",
        "lr": 0.01,
        "batch_size": batch_size,
        "epochs": PAPER_EPOCHS,
        "record_every": 10,
    }
    config = with_overrides(config, overrides)
    check_stability_config(config)
    return config


def _check_choice(name: str, value: Any, allowed: Iterable[Any]) -> None:
    allowed = tuple(allowed)
    if value not in allowed:
        raise ValueError(f"{name}={value!r} is not allowed; allowed: {', '.join(map(str, allowed))}")


def check_stability_config(config: dict[str, Any]) -> None:
    """Refuse a configuration this study does not implement (the error names the field and the allowed values)."""
    _check_choice("study", config.get("study"), ("stability",))
    _check_choice("dataset", config.get("dataset"), ("SpiralHard",))
    _check_choice("data", config.get("data"), ("shared",))
    _check_choice("activation", config.get("activation"), ACTIVATIONS)
    _check_choice("batch_size", config.get("batch_size"), BATCH_SIZES)
    _check_choice("rate_init", config.get("rate_init"), START_RATES)
    _check_choice("importance_norm", config.get("importance_norm"), ("none", "active"))
    _check_choice("optimizer", config.get("optimizer"), ("adam",))
    if config.get("rate_prior") is not None:
        raise ValueError(f"rate_prior={config.get('rate_prior')!r} is not allowed; allowed: None (uninformative)")
    for key in ("epochs", "record_every", "hidden_layers"):
        v = config.get(key)
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{key}={v!r} is not allowed; allowed: an integer >= 1")


def _stability(seeds: Sequence[int], **overrides: Any) -> list[dict[str, Any]]:
    return [stability_config(a, b, r, s, **overrides) for a, b, r in grid_cells() for s in seeds]


def paper_configs() -> list[dict[str, Any]]:
    return _stability(PAPER_SEEDS)


def book_configs() -> list[dict[str, Any]]:
    return [stability_config(a, b, r, s, epochs=BOOK_EPOCHS, record_every=5)
            for a, b, r in grid_cells(rates=BOOK_RATES) for s in BOOK_SEEDS]


def smoke_configs() -> list[dict[str, Any]]:
    return _stability((0,), epochs=SMOKE_EPOCHS, record_every=1)


def fixed_plus_config(dataset: str, width_source: str, seed: int, **overrides: Any) -> dict[str, Any]:
    """One Fixed+ run: ``awnn-tabular-fixed``'s configuration with the width of ``width_source``."""
    _check_choice("dataset", dataset, FIXED_PLUS_DATASETS)
    _check_choice("width_source", width_source, WIDTH_SOURCES)
    task = FIXED_TASKS[dataset]
    config = {
        "dataset": dataset,
        "data_seed": 0,
        "seed": seed,
        "width": FIXED_PLUS_WIDTHS[width_source][dataset],
        "width_source": width_source,
        "hidden_layers": 1,
        "activation": "relu",
        "lr": 0.01,
        "batch_size": task["batch_size"],
        "epochs": task["epochs"],
    }
    return with_overrides(config, overrides)


def _fixed_plus(seeds: dict[tuple[str, str], Sequence[int]], **overrides: Any) -> list[dict[str, Any]]:
    # one hidden layer keeps the configuration of the first runs (no "hidden_layers" override: same hash)
    return [fixed_plus_config(d, w, s, **overrides, **({} if depth == 1 else {"hidden_layers": depth}))
            for d in FIXED_PLUS_DATASETS for depth in FIXED_PLUS_DEPTHS[d] for w in WIDTH_SOURCES for s in seeds[d, w]]


def _every(seeds: Sequence[int]) -> dict[tuple[str, str], Sequence[int]]:
    return {(d, w): seeds for d in FIXED_PLUS_DATASETS for w in WIDTH_SOURCES}


def fixed_plus_paper_configs() -> list[dict[str, Any]]:
    return _fixed_plus(_every(PAPER_SEEDS))


def fixed_plus_book_configs() -> list[dict[str, Any]]:
    """The book draws Fixed+'s paper profile itself (every run of it is stored)."""
    return fixed_plus_paper_configs()


def fixed_plus_smoke_configs() -> list[dict[str, Any]]:
    return _fixed_plus(_every((0,)), epochs=SMOKE_FIXED_PLUS_EPOCHS)


def build_fixed_plus_model(config: dict[str, Any]) -> MLP:
    """The fixed MLP of a Fixed+ configuration (the one
    :func:`~hacn_core.awnn.studies.tabular.train_fixed_mlp` builds)."""
    return MLP(2, 2, config["width"], config["hidden_layers"], config["activation"])


# ============================================================================= width of AWNN's learned layers


def round_half_up(x: float) -> int:
    """``x`` rounded to the nearest integer, halves up (19.5 -> 20; Python's ``round`` gives 20 too, but 18.5 -> 18)."""
    return int(math.floor(x + 0.5))


def learned_layer_width(results: Sequence[RunResult], dataset: str, arm: str) -> int:
    """App. D's width: the average width per hidden layer AWNN learned on ``dataset``.

    Over the ``table1`` runs of ``awnn-tabular-adaptive`` with ``importance_norm = arm``:
    the mean over seeds of ``total_width`` (Table 1's quantity, at the best validation
    epoch) divided by the number of hidden layers, rounded half up.
    """
    runs = [r for r in results if r.config.get("study") == "table1" and r.config["dataset"] == dataset
            and r.config["importance_norm"] == arm]
    if not runs:
        raise ValueError(f"no stored awnn-tabular-adaptive table1 runs for dataset={dataset!r}, arm={arm!r}")
    per_layer = [r.metrics["total_width"] / r.config["hidden_layers"] for r in runs]
    return round_half_up(float(np.mean(per_layer)))


# ============================================================================= per-run summaries


def tail_mean(values: Sequence[float], fraction: float = TAIL_FRACTION) -> float:
    """Mean of the last ``ceil(fraction * n)`` values (at least one)."""
    v = np.asarray(values, dtype=float)
    if v.size == 0:
        raise ValueError("values must not be empty")
    n = max(1, math.ceil(fraction * v.size))
    return float(v[-n:].mean())


def settle_epoch(epochs: Sequence[int], widths: Sequence[float], band: float = SETTLE_BAND,
                 fraction: float = TAIL_FRACTION) -> int:
    """"Epochs to converge": the first recorded epoch from which every later width stays within
    ``band`` (relative) of the tail width :func:`tail_mean`. A run that never settles gets an
    epoch inside its tail, so compare it with the length of training."""
    e = np.asarray(epochs)
    w = np.asarray(widths, dtype=float)
    if e.shape != w.shape or w.size == 0:
        raise ValueError(f"epochs ({e.size}) and widths ({w.size}) must be non-empty and of equal length")
    target = tail_mean(w, fraction)
    outside = np.flatnonzero(np.abs(w - target) > band * target)
    if outside.size == 0:
        return int(e[0])
    last = outside[-1]
    return int(e[min(last + 1, e.size - 1)])


def late_drift(epochs: Sequence[int], widths: Sequence[float], end: float = DRIFT_END,
               window: float = DRIFT_WINDOW, fraction: float = TAIL_FRACTION) -> float:
    """Relative change of the width late in training: the tail width over the mean width of the
    records in ``((end - window) E, end E]`` (``E`` the last epoch), minus 1. Negative: the
    width is still falling (App. F's "decreasing trend" of ReLU and LeakyReLU)."""
    e = np.asarray(epochs, dtype=float)
    w = np.asarray(widths, dtype=float)
    last = e[-1]
    mask = (e > (end - window) * last) & (e <= end * last)
    if not mask.any():
        return float("nan")
    return tail_mean(w, fraction) / float(w[mask].mean()) - 1.0


def tail_jitter(widths: Sequence[float], fraction: float = JITTER_FRACTION) -> float:
    """Standard deviation of the record-to-record change of ``log width`` over the last ``fraction``
    of the records: how much the width jumps around late in training (Sec. 5.2: smaller batches
    are less stable)."""
    w = np.asarray(widths, dtype=float)
    n = max(3, math.ceil(fraction * w.size))
    d = np.diff(np.log(w[-n:]))
    return float(d.std()) if d.size > 1 else float("nan")


def width_spread(values: Sequence[float]) -> dict[str, float]:
    """How far a set of learned widths is from "similar": ``ratio`` = max / min, ``cv`` = the
    coefficient of variation (population std / mean), and ``min``, ``max``, ``n``."""
    v = np.asarray(values, dtype=float)
    if v.size == 0 or np.any(v <= 0):
        raise ValueError(f"widths must be non-empty and positive, got {values!r}")
    return {"ratio": float(v.max() / v.min()), "cv": float(v.std() / v.mean()), "min": float(v.min()),
            "max": float(v.max()), "n": int(v.size)}


# ============================================================================= training


def train_stability(config: dict[str, Any], context: RunContext) -> dict[str, Any]:
    """Train one cell of the Fig. 4 / Fig. 10 grid and summarise its width trajectory."""
    check_stability_config(config)
    splits = load_splits(config)
    n_train = len(splits["train"][1])
    torch.manual_seed(config["seed"])
    model = build_model(config)
    elbo = ELBOLoss(model, n_train, sigma_theta=config["sigma_theta"], rate_prior=None)
    train_config = dataclasses.replace(adam_train_config(config), record_every=config["record_every"])
    cpu0 = time.process_time()
    out = fit(model, splits["train"], train_config, loss_fn=elbo,
              callbacks=[WidthCallback(elbo), SplitAccuracy(splits["val"], splits["test"])],
              checkpoint_dir=context.checkpoint_dir, progress=context.progress)
    cpu_s = time.process_time() - cpu0
    c = out.curves
    epochs = [int(round(e)) for e in c["record_epoch"]]
    layer_widths = c["awnn/widths"]
    total = [int(sum(w)) for w in layer_widths]
    curves: dict[str, list] = {"record_epoch": epochs, "total_width": total, "val_acc": c["val_acc"],
                               "test_acc": c["test_acc"]}
    for layer in range(config["hidden_layers"]):
        curves[f"width/{layer + 1}"] = [int(w[layer]) for w in layer_widths]
        curves[f"rate/{layer + 1}"] = _sig([r[layer] for r in c["awnn/rates"]], 5)
    val_acc = np.asarray(c["val_acc"], dtype=float)
    best = int(np.argmax(val_acc))  # first record with the best validation accuracy (chapter 2's protocol)
    metrics = {
        "start_width": total[0],
        "final_total_width": total[-1],
        "tail_width": tail_mean(total),
        "max_width": max(total),
        "settle_epoch": settle_epoch(epochs, total),
        "late_drift": late_drift(epochs, total),
        "tail_jitter": tail_jitter(total),
        "final_test_acc": float(c["test_acc"][-1]),
        "test_acc": float(c["test_acc"][best]),
        "best_epoch": epochs[best],
        "final_rate": float(c["awnn/rates"][-1][0]),
        "n_train": n_train,
        "cpu_s": round(cpu_s, 2),
    }
    return {"metrics": metrics, "curves": curves, "device": out.device}


def train_fixed_plus(config: dict[str, Any], context: RunContext) -> dict[str, Any]:
    """Train one Fixed+ run: exactly :func:`~hacn_core.awnn.studies.tabular.train_fixed_mlp`
    (the baseline's loop and selection), after checking the width against its source."""
    _check_choice("dataset", config.get("dataset"), FIXED_PLUS_DATASETS)
    _check_choice("width_source", config.get("width_source"), WIDTH_SOURCES)
    _check_choice("hidden_layers", config.get("hidden_layers"), FIXED_PLUS_DEPTHS[config["dataset"]])
    expected = FIXED_PLUS_WIDTHS[config["width_source"]][config["dataset"]]
    if config["width"] != expected:
        raise ValueError(f"width={config['width']!r} is not allowed for width_source={config['width_source']!r} "
                         f"on {config['dataset']}; allowed: {expected}")
    cpu0 = time.process_time()
    out = train_fixed_mlp(config, context)
    out["metrics"]["cpu_s"] = round(time.process_time() - cpu0, 2)
    return out


# ============================================================================= registry


def _stability_links() -> tuple[Link, ...]:
    relu6 = {"activation": "relu6"}
    return (
        # the quantity these figures plot is the learned width; the claims (spreads) are cross-run
        Link("awnn/fig4-left/width-vs-batch-size", "tail_width", relu6 | {"rate_init": BASE_RATE}),
        Link("awnn/fig4-right/width-vs-start-rate", "tail_width", relu6 | {"batch_size": BASE_BATCH}),
        Link("awnn/fig10/nonlinearity-ablation", "tail_width", {"study": "stability"}),
    )


def _fixed_plus_links() -> tuple[Link, ...]:
    links = []
    for d in FIXED_PLUS_DATASETS:
        # The mean within 1 point. Not the paper's run-to-run std: on SpiralHard it is 17 points
        # (runs that failed to converge), and a tolerance that wide would call any mean from
        # 66% to 100% a reproduction, including one without the failures the paper reports.
        # at the paper's setting: the paper's width at the depth of Table 1's baseline
        links.append(Link(f"awnn/appd/{d.lower()}-fixed-plus-accuracy", "test_acc",
                          {"dataset": d, "width_source": "paper", "hidden_layers": TABLE1_SHAPES[d][0]},
                          scale=100.0, tolerance=1.0))
    return tuple(links)


def _stability_setting(epochs: int, seeds: Sequence[int], rates: Sequence[float] = START_RATES) -> str:
    n = len(grid_cells(rates=rates))
    return (f"SpiralHard, 1 adaptive layer, Eq. 14, uninformative priors, Adam lr 0.01; batch sizes "
            f"{list(BATCH_SIZES)} at rate {BASE_RATE} and starting rates {list(rates)} at batch {BASE_BATCH}, "
            f"for ReLU6/ReLU/LeakyReLU ({n} cells); {epochs} epochs, {len(seeds)} seed(s); CPU; our generators")


def dry_run_plan(config: dict[str, Any]) -> DryRunPlan:
    """One cell's dry run (``hacn_core.engine.dry_run``): ``awnn-tabular-adaptive``'s (the same model,
    ELBO, Adam and width update) at the cell's activation, starting rate and batch."""
    from hacn_core.awnn.studies.adaptive import dry_run_plan as adaptive_plan

    check_stability_config(config)
    return adaptive_plan(config)


EXPERIMENT = Experiment(
    id=EXPERIMENT_ID,
    title="AWNN training stability: learned width vs batch size, starting rate and activation (Figs. 4, 10)",
    train=train_stability,
    plan=dry_run_plan,
    configs={"smoke": smoke_configs, "book": book_configs, "paper": paper_configs},
    setting={
        "smoke": f"{SMOKE_EPOCHS} epochs per cell, 27 cells, seed 0",
        "book": _stability_setting(BOOK_EPOCHS, BOOK_SEEDS, BOOK_RATES),
        "paper": _stability_setting(PAPER_EPOCHS, PAPER_SEEDS),
    },
    links=_stability_links(),
)

def fixed_plus_dry_run_plan(config: dict[str, Any]) -> DryRunPlan:
    """One Fixed+ run's dry run: ``awnn-tabular-fixed``'s, with :func:`build_fixed_plus_model`."""
    import dataclasses

    from hacn_core.awnn.studies.tabular import dry_run_plan as fixed_plan

    return dataclasses.replace(fixed_plan(config), model=lambda: build_fixed_plus_model(config))


FIXED_PLUS = Experiment(
    id=FIXED_PLUS_ID,
    title="Fixed+: the fixed MLP retrained at AWNN's learned width (AWNN App. D)",
    train=train_fixed_plus,
    plan=fixed_plus_dry_run_plan,
    configs={"smoke": fixed_plus_smoke_configs, "book": fixed_plus_book_configs,
             "paper": fixed_plus_paper_configs},
    setting={
        "smoke": f"{SMOKE_FIXED_PLUS_EPOCHS} epochs, seed 0",
        "book": ("the paper profile: awnn-tabular-fixed's setting (ReLU, Adam 0.01, batch 128, 1000/5000 epochs) "
                 "at the paper's and our learned widths per layer, 1 hidden layer and on SpiralHard also 2, "
                 f"{len(PAPER_SEEDS)} seeds"),
        "paper": ("awnn-tabular-fixed's setting (ReLU, Adam 0.01, batch 128, 1000/5000 epochs) at the paper's and "
                  f"our learned widths per layer, 1 hidden layer and on SpiralHard also 2, {len(PAPER_SEEDS)} seeds"),
    },
    links=_fixed_plus_links(),
)


# ============================================================================= notebook helpers


def _cells(results: Sequence[RunResult], **where: Any) -> list[RunResult]:
    return [r for r in results if all(r.config[k] == v for k, v in where.items())]


def sweep_values(sweep: str) -> tuple:
    """The values a sweep goes through (:data:`BATCH_SIZES` or :data:`START_RATES`)."""
    _check_choice("sweep", sweep, SWEEPS)
    return BATCH_SIZES if sweep == "batch_size" else START_RATES


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
                     "tail width": m["tail_width"], "settled at": m["settle_epoch"],
                     "late drift (%)": 100 * m["late_drift"], "jitter": m["tail_jitter"],
                     "test acc end (%)": 100 * m["final_test_acc"], "test acc best-val (%)": 100 * m["test_acc"],
                     "cpu_s": m["cpu_s"]})
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
    drifts = {a: [r.metrics["late_drift"] for r in _cells(results, activation=a)] for a in ACTIVATIONS}
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
        v = 100 * np.asarray([r.metrics["test_acc"] for r in runs], dtype=float)
        if v.size == 0:
            return "-"
        return f"{v[0]:.1f}" if v.size == 1 else f"{v.mean():.1f} ({v.std(ddof=1):.1f})"

    def paper(slug: str) -> str:
        it = paper_items.item(slug)
        return f"{it.paper_value:g} ({it.paper_std:g})"

    rows = []
    for d in FIXED_PLUS_DATASETS:
        fx = [r for r in fixed if r.config["dataset"] == d and is_table1_baseline(r.config)]
        slug = d.lower()
        layers, width = TABLE1_SHAPES[d]
        rows.append({"dataset": d, "model": f"Fixed ({layers} x {width})", "width per layer": f"{width}",
                     "test acc (%), ours": acc(fx), "paper": paper(f"awnn/table1/{slug}-fixed-accuracy"),
                     "seeds": len(fx)})
        for arm, label in (("none", "AWNN Eq. 14"), ("active", "AWNN renormalised")):
            runs = [r for r in adaptive if r.config.get("study") == "table1" and r.config["dataset"] == d
                    and r.config["importance_norm"] == arm]
            per_layer = [r.metrics["total_width"] / r.config["hidden_layers"] for r in runs]
            width = f"{np.mean(per_layer):.1f}" if runs else "-"
            rows.append({"dataset": d, "model": label, "width per layer": width, "test acc (%), ours": acc(runs),
                         "paper": paper(f"awnn/table1/{slug}-awnn-accuracy") if arm == "none" else "-",
                         "seeds": len(runs)})
        for depth in FIXED_PLUS_DEPTHS[d]:
            for src in WIDTH_SOURCES:
                runs = [r for r in fixed_plus if r.config["dataset"] == d and r.config["width_source"] == src
                        and r.config["hidden_layers"] == depth]
                at_paper = src == "paper" and depth == layers
                rows.append({"dataset": d, "model": f"Fixed+ ({src} width, {depth} layer{'s' * (depth > 1)})",
                             "width per layer": str(FIXED_PLUS_WIDTHS[src][d]), "test acc (%), ours": acc(runs),
                             "paper": paper(f"awnn/appd/{slug}-fixed-plus-accuracy") if at_paper else "-",
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
                runs = sorted((r for r in fixed_plus if r.config["dataset"] == d and r.config["width_source"] == src
                               and r.config["hidden_layers"] == depth), key=lambda r: r.seed)
                if not runs:
                    continue
                bad = [r.seed for r in runs if r.metrics["test_acc"] < threshold]
                rows.append({"dataset": d, "layers": depth, "width source": src, "width": FIXED_PLUS_WIDTHS[src][d],
                             "runs": len(runs), f"seeds below {100 * threshold:g}%": ", ".join(map(str, bad)) or "none",
                             "worst test acc (%)": round(100 * min(r.metrics["test_acc"] for r in runs), 1)})
    return pd.DataFrame(rows).set_index(["dataset", "layers", "width source"]) if rows else pd.DataFrame()


def cost_table(results: Sequence[RunResult]):
    """Measured CPU seconds per run (one thread): per experiment group, mean, count and sum."""
    import pandas as pd

    rows = []
    for r in results:
        c = r.config
        if "width_source" in c:
            group = ("Fixed+", c["dataset"], f"{c['width_source']}, {c['hidden_layers']} layer(s)")
        else:
            cell = f"batch {c['batch_size']}, rate {c['rate_init']:g}"
            group = ("stability", ACTIVATION_LABELS[c["activation"]], cell)
        rows.append({"study": group[0], "group": group[1], "cell": group[2], "cpu_s": r.metrics.get("cpu_s", np.nan)})
    if not rows:
        return pd.DataFrame()
    frame = pd.DataFrame(rows)
    return frame.groupby(["study", "group", "cell"], sort=False)["cpu_s"].agg(["mean", "count", "sum"]).round(1)


def _cell_key(config: dict[str, Any]) -> tuple:
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

    by_cell = {_cell_key(r.config): r for r in short}
    rows = []
    for r in sorted(long, key=lambda r: (ACTIVATIONS.index(r.config["activation"]), not in_sweep(r.config, "batch_size"),
                                         r.config["batch_size"], r.config["rate_init"])):
        c, m = r.config, r.metrics
        book = by_cell.get(_cell_key(c))
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
                "cpu_s": round(m["cpu_s"])}
        rows.append(row)
    return pd.DataFrame(rows).set_index(["activation", "batch", "rate"]) if rows else pd.DataFrame()


def seed_table(results: Sequence[RunResult]):
    """Cells with two or more seeds stored: the seeds, and the mean, std (ddof=1), min and max
    of the tail total width and the final test accuracy over them. The paper reports Figs. 4
    and 10 over 10 seeds; the long-run tables of the chapter show seed 0, this one how far
    the other seeds stored so far spread around it."""
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
    import seaborn as sns

    from hacn_core.engine import plots

    acts = [a for a in ACTIVATIONS if any(r.config["activation"] == a for r in long)]
    fig, axes = plots.figure(ncols=2, nrows=max(1, len(acts)), height=2.4, sharex=True, sharey=True)
    by_cell = {_cell_key(r.config): r for r in short}
    for i, act in enumerate(acts):
        for j, sweep in enumerate(SWEEPS):
            ax = axes[i, j]
            values = sweep_values(sweep)
            colours = dict(zip(values, sns.color_palette("viridis", len(values))))
            for r in sorted(long, key=lambda r: r.config[sweep]):  # legend in sweep order
                c = r.config
                if c["activation"] != act or not in_sweep(c, sweep):
                    continue
                colour = colours[c[sweep]]
                ax.plot(_x(r), r.curves["total_width"], color=colour, linewidth=0.9, label=f"{c[sweep]:g}")
                book = by_cell.get(_cell_key(c))
                if book is not None:
                    ax.plot(_x(book), book.curves["total_width"], color="0.2", linewidth=0.6, linestyle="--")
            ax.set(yscale="log", xlabel="epoch" if i == len(acts) - 1 else "", ylabel="total width")
            ax.set_title(f"{ACTIVATION_LABELS[act]}: {SWEEP_LABELS[sweep]}", fontsize=9)
            if ax.get_lines():
                ax.legend(title=SWEEP_LABELS[sweep], frameon=False, fontsize=7, title_fontsize=7)
    return fig


def _x(r: RunResult) -> np.ndarray:
    return np.asarray(r.curves["record_epoch"])


def _plot_sweep(ax, results: Sequence[RunResult], sweep: str, activations: Sequence[str], legend_title: str) -> None:
    import seaborn as sns

    values = sweep_values(sweep)
    colours = dict(zip(values, sns.color_palette("viridis", len(values))))
    from hacn_core.engine import plots

    for v in values:
        runs = [r for r in results if r.config["activation"] in activations and in_sweep(r.config, sweep)
                and r.config[sweep] == v]
        if not runs:
            continue
        n = min(len(r.curves["total_width"]) for r in runs)
        plots.with_ci(ax, _x(runs[0])[:n], np.stack([r.curves["total_width"][:n] for r in runs]), f"{v:g}",
                      color=colours[v])
    ax.set(yscale="log", xlabel="epoch", ylabel="total width")
    ax.legend(title=legend_title, frameon=False, fontsize=7, title_fontsize=7)


def plot_fig4(results: Sequence[RunResult]):
    """Fig. 4: total width over epochs. Left: one curve per batch size (rate 0.01), mean over the
    three activations and seeds ("averaged across the different configurations", Sec. 5.2).
    Right: one curve per starting rate (batch 128), ReLU6 (the caption's bounded non-linearity).
    Bands: one standard error."""
    from hacn_core.engine import plots

    fig, axes = plots.figure(ncols=2, height=3.0)
    _plot_sweep(axes[0, 0], results, "batch_size", ACTIVATIONS, "batch size")
    _plot_sweep(axes[0, 1], results, "rate_init", ("relu6",), r"starting rate $\nu_0$")
    axes[0, 0].set_title("all activations", fontsize=9)
    axes[0, 1].set_title("ReLU6", fontsize=9)
    return fig


def plot_fig10(results: Sequence[RunResult]):
    """Fig. 10: the same two sweeps organised by activation (rows: ReLU6, ReLU, LeakyReLU;
    left: batch sizes, right: starting rates), total width over epochs, log scale."""
    from hacn_core.engine import plots

    fig, axes = plots.figure(ncols=2, nrows=len(ACTIVATIONS), height=2.4, sharex=True, sharey=True)
    for i, act in enumerate(ACTIVATIONS):
        _plot_sweep(axes[i, 0], results, "batch_size", (act,), "batch size")
        _plot_sweep(axes[i, 1], results, "rate_init", (act,), r"$\nu_0$")
        axes[i, 0].set_title(f"{ACTIVATION_LABELS[act]}: batch sizes", fontsize=9)
        axes[i, 1].set_title(f"{ACTIVATION_LABELS[act]}: starting rates", fontsize=9)
        if i < len(ACTIVATIONS) - 1:
            for ax in axes[i]:
                ax.set_xlabel("")
        if i > 0:
            for ax in axes[i]:
                ax.get_legend().remove()
    return fig


def plot_accuracy(results: Sequence[RunResult]):
    """Test accuracy over epochs per cell (thin lines), one panel per activation: does every cell
    also learn the task?"""
    from hacn_core.engine import plots

    fig, axes = plots.figure(ncols=3, height=2.4, sharey=True)
    for ax, act in zip(axes[0], ACTIVATIONS):
        for r in _cells(results, activation=act):
            ax.plot(_x(r), 100 * np.asarray(r.curves["test_acc"]), linewidth=0.7, alpha=0.8,
                    label=f"b{r.config['batch_size']}, nu0 {r.config['rate_init']:g}")
        ax.set(title=ACTIVATION_LABELS[act], xlabel="epoch")
    axes[0, 0].set_ylabel("test accuracy (%)")
    return fig


def start_widths() -> dict[float, int]:
    """The starting width ``D = ceil(ln 10 / nu_0)`` (Eq. 11, ``k = 0.9``) of every starting rate."""
    return {r: quantile_width(r, 0.9) for r in START_RATES}
