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
    fixed baseline. These generators are our own. The paper's supplement has its
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
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from hacn_core import paper_items
from hacn_core.awnn import AdaptiveMLP, AWNNConfig, ELBOLoss, WidthCallback, quantile_width
from hacn_core.engine.data import SYNTHETIC, stratified_split, synthetic_splits
from hacn_core.engine.registry import Experiment, Link, with_overrides
from hacn_core.awnn.studies.tabular import SplitAccuracy, is_table1_baseline
from hacn_core.engine.results import RunContext, RunResult
from hacn_core.engine.training import TrainConfig, fit

EXPERIMENT_ID = "awnn-tabular-adaptive"
FIXED_ID = "awnn-tabular-fixed"
DATASETS: tuple[str, ...] = ("DoubleMoon", "Spiral", "SpiralHard")
# Per task: the paper's budget and batch (Table 3), our reading of its depth.
TASKS: dict[str, dict[str, int]] = {
    "DoubleMoon": {"epochs": 500, "batch_size": 32, "hidden_layers": 1},
    "Spiral": {"epochs": 1000, "batch_size": 128, "hidden_layers": 1},
    "SpiralHard": {"epochs": 5000, "batch_size": 128, "hidden_layers": 2},
}
ARMS: tuple[str, ...] = ("none", "active")  # AWNNConfig.importance_norm
STUDIES: tuple[str, ...] = ("table1", "diagnosis")
DATA_VARIANTS: tuple[str, ...] = ("shared", "spiral-r4pi-2turns")
PAPER_SEEDS = tuple(range(10))  # "retrained 10 times" (Sec. 4)
DIAG_EPOCHS = 50
DIAG_SEEDS = (0, 1, 2)
PUBLIC_RADIUS = 4 * math.pi  # the public generator's spiral: angle up to 720 degrees = radius 4 pi
PUBLIC_NOISE = 0.3
START_RATE = 0.01


def _config(dataset: str, seed: int, importance_norm: str = "none", **overrides: Any) -> dict[str, Any]:
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
    return _config("Spiral", seed, **{"study": "diagnosis", "epochs": epochs, **DIAGNOSIS_VARIANTS[label]})


def diagnosis_label(config: dict[str, Any]) -> str:
    """The :data:`DIAGNOSIS_VARIANTS` label of a diagnosis configuration."""
    base = _config("Spiral", config["seed"], study="diagnosis", epochs=config["epochs"])
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
    return [_config(d, s, arm) for d in DATASETS for arm in ARMS for s in seeds[d]]


def paper_configs() -> list[dict[str, Any]]:
    return _table1({d: PAPER_SEEDS for d in DATASETS}) + _diagnosis(DIAG_EPOCHS, TASKS["Spiral"]["epochs"], DIAG_SEEDS)


def book_configs() -> list[dict[str, Any]]:
    """The book draws the paper profile itself (every run of it is stored)."""
    return paper_configs()


SMOKE_DIAGNOSIS = ("Eq. 14 (ReLU6, sigma_theta 10)", "renormalised importances", "public geometry, renormalised")


def smoke_configs() -> list[dict[str, Any]]:
    table = [_config(d, s, arm, epochs=3) for d in DATASETS for arm in ARMS for s in (0, 1)]
    return table + [_diag(label, 0, 3) for label in SMOKE_DIAGNOSIS]


def _check_config(config: dict[str, Any]) -> None:
    checks = {"study": STUDIES, "dataset": DATASETS, "data": DATA_VARIANTS, "importance_norm": ARMS}
    for key, allowed in checks.items():
        if config[key] not in allowed:
            raise ValueError(f"{key}={config[key]!r} is not allowed; allowed: {', '.join(allowed)}")
    if config["data"] != "shared" and config["dataset"] != "Spiral":
        raise ValueError(f"data={config['data']!r} exists for dataset='Spiral' only")
    if config["rate_prior"] is not None:
        raise ValueError("rate_prior must be None (uninformative, Table 3)")
    if config["optimizer"] != "adam":
        raise ValueError(f"optimizer={config['optimizer']!r}: the paper uses adam")


# ----------------------------------------------------------------------------- data


def public_geometry_spiral(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Two spirals with the geometry of the paper's public generator, from our sampler.

    2,500 points (Table 2), one arm per class, two turns, radius ``4 pi`` and
    Gaussian noise of std 0.3, where our shared Spiral has 1.5 turns, radius 1 and
    noise 0.02. Only the geometry is taken over (two turns, radius and noise, read
    off the public code); the sampling is ``hacn_core.engine.data``'s.
    """
    from hacn_core.engine.data import spiral_arms

    rng = np.random.default_rng(seed)
    x, y = spiral_arms(SYNTHETIC["Spiral"].n_samples // 2, rng, arms_per_class=1, turns=2.0,
                    noise=PUBLIC_NOISE / PUBLIC_RADIUS)
    order = rng.permutation(len(y))
    x = torch.as_tensor(x[order] * PUBLIC_RADIUS, dtype=torch.float32)
    return x, torch.as_tensor(y[order], dtype=torch.long)


def load_splits(config: dict[str, Any]) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """Train / validation / test tensors of a run (the shared splits unless the diagnosis asks)."""
    if config["data"] == "shared":
        splits = synthetic_splits(config["dataset"], config["data_seed"])
    else:
        x, y = public_geometry_spiral(config["data_seed"])
        parts = stratified_split(y, SYNTHETIC["Spiral"].split, config["data_seed"])
        splits = {k: (x[i], y[i]) for k, i in zip(("train", "val", "test"), parts, strict=True)}
    scale = float(config["input_scale"])
    return {k: (x * scale, y) for k, (x, y) in splits.items()}


# ----------------------------------------------------------------------------- training


def _sig(values: Sequence[float], digits: int) -> list[float]:
    """Round to ``digits`` significant digits (keeps the stored curves small)."""
    return [float(f"{v:.{digits}g}") if math.isfinite(v) else v for v in values]


def build_model(config: dict[str, Any]) -> AdaptiveMLP:
    """The adaptive MLP of a configuration (weights drawn from the current torch seed)."""
    return AdaptiveMLP(AWNNConfig(
        in_dim=2, out_dim=2, n_hidden_layers=config["hidden_layers"], activation=config["activation"],
        k=config["k"], rate_init=config["rate_init"], init=config["init"], grow_init=config["grow_init"],
        importance_norm=config["importance_norm"]))


def adam_train_config(config: dict[str, Any]) -> TrainConfig:
    """The trainer settings of every AWNN tabular run: Adam, the config's epochs, batch and rate, CPU."""
    return TrainConfig(
        epochs=config["epochs"], batch_size=config["batch_size"], lr=config["lr"], optimizer="adam",
        fused=False,  # the adaptive layers' parameters are strided views (hacn_core.awnn)
        seed=config["seed"], device="cpu", checkpoint_every_minutes=5.0)


def train_adaptive_mlp(config: dict[str, Any], context: RunContext) -> dict[str, Any]:
    """Train one AWNN run; report test accuracy and width at the best validation epoch."""
    _check_config(config)
    splits = load_splits(config)
    n_train = round(len(splits["train"][1]) * config["n_train_scale"])
    torch.manual_seed(config["seed"])
    model = build_model(config)
    elbo = ELBOLoss(model, n_train, sigma_theta=config["sigma_theta"], rate_prior=None)
    train_config = adam_train_config(config)
    cpu0 = time.process_time()
    out = fit(model, splits["train"], train_config, loss_fn=elbo,
              callbacks=[WidthCallback(elbo), SplitAccuracy(splits["val"], splits["test"])],
              checkpoint_dir=context.checkpoint_dir, progress=context.progress)
    cpu_s = time.process_time() - cpu0
    c = out.curves
    val_acc = np.asarray(c["val_acc"], dtype=float)
    best = int(np.argmax(val_acc))  # first record with the best validation accuracy
    widths = c["awnn/widths"]
    n_layers = config["hidden_layers"]
    curves: dict[str, list] = {
        "record_epoch": [int(round(e)) for e in c["record_epoch"]],
        "val_acc": c["val_acc"],
        "test_acc": c["test_acc"],
    }
    for layer in range(n_layers):
        curves[f"width/{layer + 1}"] = [int(w[layer]) for w in widths]
        curves[f"rate/{layer + 1}"] = _sig([r[layer] for r in c["awnn/rates"]], 5)
    for term in ("total", "predictive", "weight_prior", "width_prior"):
        curves[f"elbo/{term}"] = _sig(c[f"elbo/{term}"], 6)
    return {
        "metrics": {
            "test_acc": float(c["test_acc"][best]),
            "val_acc": float(val_acc[best]),
            "best_epoch": int(curves["record_epoch"][best]),
            "total_width": int(sum(widths[best])),  # at the best validation epoch
            "final_total_width": int(sum(widths[-1])),
            "final_test_acc": float(c["test_acc"][-1]),
            "start_width": int(sum(widths[0])),
            "n_train": n_train,
            "cpu_s": round(cpu_s, 2),
        },
        "curves": curves,
        "device": out.device,
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
    configs={"smoke": smoke_configs, "book": book_configs, "paper": paper_configs},
    setting={
        "smoke": "3 epochs, 2 seeds, 3 diagnosis runs",
        "book": "the paper profile: paper's budget (500/1000/5000 epochs), 10 seeds, both arms; diagnosis on Spiral",
        "paper": "paper's budget (500/1000/5000 epochs), 10 seeds, both arms; diagnosis on Spiral",
    },
    links=_links(),
)


# ----------------------------------------------------------------------------- notebook helpers


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


def _mean_std(values) -> str:
    values = np.asarray(values, dtype=float)
    if values.size == 0:
        return "-"
    if values.size == 1:
        return f"{values[0]:.1f}"
    return f"{values.mean():.1f} ({values.std(ddof=1):.1f})"


def table1(results: Sequence[RunResult], fixed: Sequence[RunResult]):
    """Table 1's tabular rows, ours (mean (std) over seeds) beside the paper's.

    One row per dataset and quantity: test accuracy (%) and total width at the best
    validation epoch (the protocol), and the total width at the end of training.
    Columns: the fixed MLP (``awnn-tabular-fixed``), the two AWNN arms, the paper.
    """
    import pandas as pd

    frame = results_frame([r for r in results if r.config["study"] == "table1"])
    rows = []
    for d in DATASETS:
        slug = d.lower()
        fx = [r for r in fixed if r.config["dataset"] == d and is_table1_baseline(r.config)]
        ours = {arm: frame[(frame.dataset == d) & (frame.arm == arm)] for arm in ARMS}

        def paper(name: str) -> str:
            it = paper_items.item(f"awnn/table1/{slug}-{name}")
            return f"{it.paper_value:g}" + ("" if it.paper_std is None else f" ({it.paper_std:g})")

        fixed_width = ", ".join(sorted({str(r.metrics["total_width"]) for r in fx})) or "-"
        for quantity, metric, scale in (("test acc (%)", "test_acc", 100.0), ("total width", "total_width", 1.0),
                                        ("total width at the end", "final_total_width", 1.0)):
            is_acc = metric == "test_acc"
            rows.append({
                "dataset": d, "quantity": quantity,
                "fixed (ours)": _mean_std([100 * r.metrics["test_acc"] for r in fx]) if is_acc else fixed_width,
                "fixed (paper)": paper("fixed-accuracy" if is_acc else "fixed-width"),
                "AWNN Eq. 14 (ours)": _mean_std(scale * ours["none"][metric]) if len(ours["none"]) else "-",
                "AWNN renormalised (ours)": _mean_std(scale * ours["active"][metric]) if len(ours["active"]) else "-",
                "AWNN (paper)": paper("awnn-accuracy" if is_acc else "awnn-width") if metric != "final_total_width"
                else "-",
                "seeds (AWNN arms, fixed)": f"{len(ours['none'])}, {len(ours['active'])}, {len(fx)}",
            })
    return pd.DataFrame(rows).set_index(["dataset", "quantity"])


def fixed_seed_table(fixed: Sequence[RunResult], *, stuck_below: float = 0.95):
    """The fixed MLPs of Table 1 seed by seed, one row per dataset and shape (hidden layers x
    width per layer): where the baseline's mean falls short of the paper's, and whether
    another shape of the same total width (``awnn_tabular.GRID_DEPTHS``) closes the gap.

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
            "mean (std)": _mean_std(100 * acc),
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
        total = _total_width(r)
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

    frame = results_frame([r for r in results if r.config["study"] == "diagnosis"
                           and r.config["epochs"] == TASKS["Spiral"]["epochs"]])
    if frame.empty:
        return frame
    g = frame.groupby("variant")
    out = pd.DataFrame({
        "total width (best epoch)": g["total_width"].agg(_mean_std),
        "total width (end)": g["final_total_width"].agg(_mean_std),
        "test acc (%)": g["test_acc"].agg(lambda v: _mean_std(100 * v)),
        "seeds": g.size(),
    })
    it = paper_items.item("awnn/table1/spiral-awnn-width")
    out.loc["paper (Table 1, Spiral)"] = [f"{it.paper_value:g} ({it.paper_std:g})", "-", "99.8 (0.1)", 10]
    return out


def initial_scale_table(seed: int = 0):
    """At initialisation (Spiral, Eq. 14 arm): logit scale and the share of first-layer
    pre-activations above ReLU6's bound, for our inputs and for inputs times ``4 pi``."""
    import pandas as pd

    rows = []
    for label, overrides in (("ours (radius 1)", {}), ("inputs x 4 pi", {"input_scale": PUBLIC_RADIUS}),
                             ("public geometry", {"data": "spiral-r4pi-2turns"})):
        config = _config("Spiral", seed, **overrides)
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


def _total_width(r: RunResult) -> np.ndarray:
    layers = r.config["hidden_layers"]
    return np.sum([r.curves[f"width/{i + 1}"] for i in range(layers)], axis=0)


def cost_table(results: Sequence[RunResult]):
    """Measured CPU seconds per run (one thread), mean per dataset and arm, with the study's total."""
    frame = results_frame(results)
    table = frame.groupby(["study", "dataset", "arm"])["cpu_s"].agg(["mean", "count", "sum"]).round(1)
    return table


def plot_datasets(data_seed: int = 0):
    """Fig. 8: the three tasks (all splits), coloured by class; and the public geometry of Spiral."""
    from hacn_core.engine import plots

    fig, axes = plots.figure(ncols=4, height=2.4)
    for ax, d in zip(axes[0], DATASETS):
        splits = synthetic_splits(d, data_seed)
        x = torch.cat([s[0] for s in splits.values()])
        y = torch.cat([s[1] for s in splits.values()])
        ax.scatter(x[:, 0], x[:, 1], c=y, cmap="coolwarm", s=2, linewidths=0)
        ax.set_title(f"{d} (ours)", fontsize=9)
    x, y = public_geometry_spiral(data_seed)
    axes[0, 3].scatter(x[:, 0], x[:, 1], c=y, cmap="coolwarm", s=2, linewidths=0)
    axes[0, 3].set_title("Spiral, public geometry", fontsize=9)
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
    import seaborn as sns

    from hacn_core.engine import plots

    fig, axes = plots.figure(ncols=2, height=3.0)
    colours = dict(zip(DATASETS, sns.color_palette(plots.PALETTE)))
    for d in DATASETS:
        for arm, style in zip(ARMS, ("-", "--")):
            runs = [r for r in results if r.config["study"] == "table1" and r.config["dataset"] == d
                    and r.config["importance_norm"] == arm]
            if not runs:
                continue
            x = np.asarray(runs[0].curves["record_epoch"])
            label = d if arm == "none" else None
            plots.with_ci(axes[0, 0], x, np.stack([_total_width(r) for r in runs]), label, color=colours[d],
                          linestyle=style)
            plots.with_ci(axes[0, 1], x, 100 * np.stack([r.curves["test_acc"] for r in runs]), label,
                          color=colours[d], linestyle=style)
        fx = [r for r in fixed if r.config["dataset"] == d and is_table1_baseline(r.config)]
        if fx:
            xf = np.asarray(fx[0].curves["record_epoch"])
            plots.with_ci(axes[0, 1], xf, 100 * np.stack([r.curves["test_acc"] for r in fx]), None,
                          color=colours[d], linestyle=":")
    axes[0, 0].set(xscale="symlog", yscale="log", xlabel="epoch", ylabel="total width")
    axes[0, 1].set(xscale="symlog", xlabel="epoch", ylabel="test accuracy (%)", ylim=(45, 101))
    axes[0, 0].axhline(quantile_width(START_RATE), color="0.6", linewidth=0.8)
    axes[0, 0].legend(frameon=False, fontsize=8)
    return fig


def plot_elbo(results: Sequence[RunResult], seed: int = 0):
    """The terms of Eq. 13 per epoch (epoch means) for one seed per dataset, Eq. 14 arm."""
    from hacn_core.engine import plots

    fig, axes = plots.figure(ncols=3, height=2.6)
    for ax, d in zip(axes[0], DATASETS):
        runs = [r for r in results if r.config["study"] == "table1" and r.config["dataset"] == d
                and r.config["importance_norm"] == "none" and r.seed == seed]
        if not runs:
            continue
        r = runs[0]
        x = np.asarray(r.curves["record_epoch"])
        for term in ("total", "predictive", "weight_prior"):
            ax.plot(x, r.curves[f"elbo/{term}"], label=term)
        ax.set(xscale="symlog", yscale="symlog", title=d, xlabel="epoch")
    axes[0, 0].legend(frameon=False, fontsize=8)
    return fig
