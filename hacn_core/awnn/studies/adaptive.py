"""AWNN on the tabular tasks: the adaptive rows of Table 1 and Figs. 3 and 8 (Errica et al.).

What one run is
    One :class:`~hacn_core.awnn.AdaptiveMLP` (``2 -> D_1 [-> D_2] -> 2``) trained on
    DoubleMoon, Spiral or SpiralHard with the negative ELBO of Eq. 13
    (:class:`~hacn_core.awnn.ELBOLoss`, ``N`` = the true training-set size) by the
    book's trainer (:func:`hacn_core.engine.training.fit`, Adam, ``fused=False``), the width
    updated after every optimizer step (:class:`~hacn_core.awnn.WidthCallback`,
    Algorithm 1). Stored per run: test accuracy at the epoch with the best validation
    accuracy (the protocol of ``awnn-tabular-fixed``: same splits, same selection),
    the total width at that epoch and at the end, and per epoch the validation and
    test accuracy, the width of every hidden layer, the rates and the four terms of
    Eq. 13 (epoch means).

The paper's setting (App. C.1, Table 3), and how each point is read here
    * Adam, learning rate 0.01, batch 32 (DoubleMoon) or 128 (Spiral, SpiralHard),
      500 / 1000 / 5000 epochs; ``k = 0.9``; starting rate 0.01 ("approximately 256"
      neurons; our closed form of Eq. 11 gives 231, see
      :func:`hacn_core.awnn.quantile_width`); uninformative prior over the rates
      (``rate_prior=None``); kaiming+ (Sec. 3.2); new neurons from N(0, 1) (Sec. 3).
    * Hidden layers: 1 on DoubleMoon and Spiral. SpiralHard's grid is [1, 2, 4] and
      the selected depth is not reported; Table 1's 227 neurons are far below the
      ~800 a single layer reaches (Sec. 5.3, Fig. 5) and Sec. 5.1 says the
      multi-layer total width is the lower one, so Table 1 shows a multi-layer net:
      we take the smallest, 2 hidden layers.
    * Non-linearity: the grid is [ReLU, LeakyReLU, ReLU6]; the paper recommends a
      bounded one (Sec. 5.2, App. F) and its SpiralHard studies use ReLU6, so ReLU6.
    * ``sigma_theta``: the grid is [1, 10]. We take 10: with 1 the weight prior
      wins over the likelihood (short runs in the notebook's diagnosis).
    * The paper selected these by an inner validation split; we do not repeat the
      model selection (AWNN's grid has 18 configurations).

Two arms (``importance_norm``)
    ``none``: Eq. 14 as written (importances ``f(j)`` of Eq. 12, the library's
    default). ``active``: importances renormalised over the active neurons, as the
    public code does. The notebook's diagnosis shows why the difference matters: with
    Eq. 12 any push for larger logits also raises the rate (shrinks the width).
    Table 1's items are linked to the ``none`` arm (the paper's equation).

The diagnosis study (``study="diagnosis"``, Spiral only)
    Short runs (``DIAG_EPOCHS`` epochs) that change one factor at a time from the
    ``none`` arm (weight prior, initialisation, activation, ``N``, batch size,
    importance normalisation, input scale, data geometry), and full-length runs on
    a spiral with the public generator's geometry (``data="spiral-r4pi-2turns"``:
    two turns, radius 4 pi, noise 0.3; our own sampler) with both arms.

Data
    The shared splits ``hacn_core.engine.data.synthetic_splits(name, data_seed=0)`` of the
    fixed baseline, read by :func:`hacn_core.awnn.studies.common.load_splits` (which also
    draws the public geometry, :func:`~hacn_core.awnn.studies.common.public_geometry_spiral`).
    These generators are our own. The paper's supplement has its
    code (the public code's generator): its points are 10 to 12.6 times larger
    (moons of radius 10, spirals of radius 4 pi), its Spiral has two turns and its
    SpiralHard four; ours have radius 1 and 1.5 turns. ``input_scale`` multiplies
    the inputs (diagnosis only).

Profiles
    ``paper``: 3 datasets x 2 arms x 10 seeds at the paper's budget, plus the
    diagnosis. ``book`` is the ``paper`` profile: all of its runs are stored. CPU
    seconds per run on one thread (the notebook's cost table has every run), on two
    of the project's 2-core machines: DoubleMoon 33-42, Spiral 17-21 and SpiralHard
    247-253 (both arms) on the one that made seeds 0-4 (2026-11-22, other jobs beside
    them), and 10-11, 6 and 63-70 on the one that made the rest (2026-11-24, one
    other training beside them). The diagnosis takes about 3 minutes in all.
    ``smoke``: 3 epochs, 2 seeds, a few diagnosis runs.

Model, trainer and protocol are :mod:`hacn_core.awnn.studies.common`'s; the chapter's tables
and plots (Table 1, Figs. 3 and 8, the diagnosis) are in :mod:`hacn_core.awnn.studies.adaptive_report`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from hacn_core.awnn import paper_items
from hacn_core.awnn import ELBOLoss, WidthCallback, quantile_width
from hacn_core.awnn.studies import tabular
from hacn_core.awnn.studies.common import (
    ARMS,
    PUBLIC_RADIUS,
    START_RATE,
    adam_train_config,
    best_record,
    build_model,
    check_choice,
    elbo_curves,
    fit_adaptive,
    width_and_rate_curves,
)
from hacn_core.engine.data import SYNTHETIC
from hacn_core.engine.registry import Experiment, Link, with_overrides
from hacn_core.engine.results import RunContext

if TYPE_CHECKING:  # pragma: no cover
    from hacn_core.engine.dry_run import DryRunPlan

EXPERIMENT_ID = "awnn-tabular-adaptive"
FIXED_ID = tabular.EXPERIMENT_ID  # the fixed MLPs of Table 1 that the chapter shows beside these runs
DATASETS: tuple[str, ...] = ("DoubleMoon", "Spiral", "SpiralHard")
#: Per task: the paper's budget and batch (Table 3, as the fixed baseline runs them), our reading
#: of its depth (see the module docstring).
TASKS: dict[str, dict[str, int]] = {
    d: {"epochs": tabular.TASKS[d]["epochs"], "batch_size": tabular.TASKS[d]["batch_size"], "hidden_layers": layers}
    for d, layers in (("DoubleMoon", 1), ("Spiral", 1), ("SpiralHard", 2))
}
STUDIES: tuple[str, ...] = ("table1", "diagnosis")
DATA_VARIANTS: tuple[str, ...] = ("shared", "spiral-r4pi-2turns")
PAPER_SEEDS = tuple(range(10))  # "retrained 10 times" (Sec. 4)
DIAG_EPOCHS = 50
DIAG_SEEDS = (0, 1, 2)


def adaptive_config(dataset: str, seed: int, importance_norm: str = "none", **overrides: Any) -> dict[str, Any]:
    """One flat run configuration: Table 1's run on ``dataset`` (the module docstring gives every
    choice); ``overrides`` replace entries (the diagnosis), an unknown key is refused by name."""
    task = TASKS[dataset]
    config = {
        "study": "table1",
        "dataset": dataset,
        "data": "shared",
        "data_seed": 0,
        "input_scale": 1.0,
        "seed": seed,
        "hidden_layers": task["hidden_layers"],
        "activation": "relu6",
        "rate_init": START_RATE,
        "k": 0.9,
        "importance_norm": importance_norm,
        "init": "kaiming_plus",
        "grow_init": "normal",
        "sigma_theta": 10.0,
        "rate_prior": None,  # uninformative (Table 3)
        "n_train_scale": 1.0,  # N = n_train_scale x the training-set size (diagnosis only)
        "optimizer": "adam",
        "lr": 0.01,
        "batch_size": task["batch_size"],
        "epochs": task["epochs"],
    }
    return with_overrides(config, overrides)


# One factor at a time away from the ``none`` arm on Spiral (label -> overrides).
DIAGNOSIS_VARIANTS: dict[str, dict[str, Any]] = {
    "Eq. 14 (ReLU6, sigma_theta 10)": {},
    "sigma_theta = 1": {"sigma_theta": 1.0},
    "uninformative weight prior": {"sigma_theta": None},
    "N x 10": {"n_train_scale": 10.0},
    "N / 10": {"n_train_scale": 0.1},
    "kaiming instead of kaiming+": {"init": "kaiming"},
    "ReLU instead of ReLU6": {"activation": "relu"},
    "batch 32": {"batch_size": 32},
    "renormalised importances": {"importance_norm": "active"},
    "inputs x 4 pi": {"input_scale": PUBLIC_RADIUS},
    "inputs x 4 pi, renormalised": {"input_scale": PUBLIC_RADIUS, "importance_norm": "active"},
    "public geometry": {"data": "spiral-r4pi-2turns"},
    "public geometry, renormalised": {"data": "spiral-r4pi-2turns", "importance_norm": "active"},
}


def _diag(label: str, seed: int, epochs: int) -> dict[str, Any]:
    return adaptive_config("Spiral", seed, **{"study": "diagnosis", "epochs": epochs, **DIAGNOSIS_VARIANTS[label]})


def diagnosis_label(config: dict[str, Any]) -> str:
    """The :data:`DIAGNOSIS_VARIANTS` label of a diagnosis configuration."""
    base = adaptive_config("Spiral", config["seed"], study="diagnosis", epochs=config["epochs"])
    diff = {k: v for k, v in config.items() if base.get(k) != v}
    for label, overrides in DIAGNOSIS_VARIANTS.items():
        if diff == overrides:
            return label
    raise ValueError(f"configuration differs from every diagnosis variant: {diff}")


def _diagnosis(short_epochs: int, long_epochs: int, seeds: Sequence[int]) -> list[dict[str, Any]]:
    runs = [_diag(label, s, short_epochs) for label in DIAGNOSIS_VARIANTS for s in seeds]
    # full length on the public geometry, both arms: does it reach the paper's width?
    runs += [_diag(label, s, long_epochs) for label in ("public geometry", "public geometry, renormalised")
             for s in seeds]
    return runs


def _table1(seeds: dict[str, Sequence[int]]) -> list[dict[str, Any]]:
    return [adaptive_config(d, s, arm) for d in DATASETS for arm in ARMS for s in seeds[d]]


def paper_configs() -> list[dict[str, Any]]:
    return _table1({d: PAPER_SEEDS for d in DATASETS}) + _diagnosis(DIAG_EPOCHS, TASKS["Spiral"]["epochs"], DIAG_SEEDS)


def book_configs() -> list[dict[str, Any]]:
    """The book draws the paper profile itself (every run of it is stored)."""
    return paper_configs()


SMOKE_DIAGNOSIS = ("Eq. 14 (ReLU6, sigma_theta 10)", "renormalised importances", "public geometry, renormalised")


def smoke_configs() -> list[dict[str, Any]]:
    table = [adaptive_config(d, s, arm, epochs=3) for d in DATASETS for arm in ARMS for s in (0, 1)]
    return table + [_diag(label, 0, 3) for label in SMOKE_DIAGNOSIS]


def check_config(config: dict[str, Any]) -> None:
    """Refuse a configuration this experiment does not implement (the error names field and allowed values)."""
    checks = {"study": STUDIES, "dataset": DATASETS, "data": DATA_VARIANTS, "importance_norm": ARMS}
    for key, allowed in checks.items():
        check_choice(key, config[key], allowed)
    if config["data"] != "shared" and config["dataset"] != "Spiral":
        raise ValueError(f"data={config['data']!r} exists for dataset='Spiral' only")
    if config["rate_prior"] is not None:
        raise ValueError("rate_prior must be None (uninformative, Table 3)")
    if config["optimizer"] != "adam":
        raise ValueError(f"optimizer={config['optimizer']!r}: the paper uses adam")


# ----------------------------------------------------------------------------- training


def train_adaptive_mlp(config: dict[str, Any], context: RunContext) -> dict[str, Any]:
    """Train one AWNN run; report test accuracy and width at the best validation epoch."""
    check_config(config)
    run = fit_adaptive(config, context)
    c = run.curves
    best = best_record(c["val_acc"])  # first record with the best validation accuracy
    widths = c["awnn/widths"]
    curves: dict[str, list] = {
        "record_epoch": [int(round(e)) for e in c["record_epoch"]],
        "val_acc": c["val_acc"],
        "test_acc": c["test_acc"],
    }
    curves |= width_and_rate_curves(c, config["hidden_layers"]) | elbo_curves(c)
    return {
        "metrics": {
            "test_acc": float(c["test_acc"][best]),
            "val_acc": float(c["val_acc"][best]),
            "best_epoch": int(curves["record_epoch"][best]),
            "total_width": int(sum(widths[best])),  # at the best validation epoch
            "final_total_width": int(sum(widths[-1])),
            "final_test_acc": float(c["test_acc"][-1]),
            "start_width": int(sum(widths[0])),
            "n_train": run.n_train,
            "cpu_s": run.cpu_seconds(),
        },
        "curves": curves,
        "device": run.device,
    }


# ----------------------------------------------------------------------------- registry


def _links() -> tuple[Link, ...]:
    links = []
    for d in DATASETS:
        where = {"study": "table1", "dataset": d, "importance_norm": "none"}
        std = paper_items.item(f"awnn/table1/{d.lower()}-awnn-width").paper_std
        links.append(Link(f"awnn/table1/{d.lower()}-awnn-accuracy", "test_acc", where, scale=100.0, tolerance=1.0))
        # within one run-to-run standard deviation of the paper's own 10 runs
        links.append(Link(f"awnn/table1/{d.lower()}-awnn-width", "total_width", where, tolerance=std))
    return tuple(links)


def dry_run_plan(config: dict[str, Any]) -> DryRunPlan:
    """One AWNN run's dry run (``hacn_core.engine.dry_run``): :func:`build_model` at its starting width,
    the negative ELBO of Eq. 13 (``N`` as the run's), Adam, and Algorithm 1's width update after the step
    (:class:`~hacn_core.awnn.WidthCallback`). Also the plan of the other studies that train this model."""
    from hacn_core.engine.dry_run import DryRunPlan, classification_batch

    n_train = SYNTHETIC[config["dataset"]].split[0]  # the public-geometry spiral is split like Spiral
    n_elbo = round(n_train * config.get("n_train_scale", 1.0))
    return DryRunPlan(
        key={k: config[k] for k in ("hidden_layers", "activation", "k", "rate_init", "importance_norm")},
        model=lambda: build_model(config), batch=classification_batch((2,), 2), train=adam_train_config(config),
        n_train=n_train, loss=lambda model: ELBOLoss(model, n_elbo, sigma_theta=config["sigma_theta"]),
        callbacks=lambda elbo: [WidthCallback(elbo)],
        note=f"at the starting width, {quantile_width(config['rate_init'], config['k'])} per layer")


EXPERIMENT = Experiment(
    id=EXPERIMENT_ID,
    title="AWNN on DoubleMoon, Spiral, SpiralHard (AWNN Table 1, adaptive rows; Fig. 3)",
    train=train_adaptive_mlp,
    plan=dry_run_plan,
    distributed=False,  # the widths change during training, which DistributedDataParallel cannot follow
    configs={"smoke": smoke_configs, "book": book_configs, "paper": paper_configs},
    setting={
        "smoke": "3 epochs, 2 seeds, 3 diagnosis runs",
        "book": "the paper profile: paper's budget (500/1000/5000 epochs), 10 seeds, both arms; diagnosis on Spiral",
        "paper": "paper's budget (500/1000/5000 epochs), 10 seeds, both arms; diagnosis on Spiral",
    },
    links=_links(),
)
