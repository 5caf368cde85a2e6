"""What the AWNN tabular studies share: the data of a run, its model, its trainer and its protocol.

Every tabular study of the AWNN chapters (``tabular``, ``adaptive``, ``compress``,
``ablations``) follows the protocol of AWNN Sec. 4 and App. C.1: the outer 70/10/20
split of DoubleMoon, Spiral or SpiralHard (Table 2), Adam, and the test accuracy at
the epoch with the best validation accuracy. The pieces of that protocol live here,
public and documented, so that no study reaches into another:

* :class:`SplitAccuracy` and :func:`best_record`: the validation / test accuracy at
  every record point, and the record the protocol selects;
* :func:`load_splits` (with :func:`public_geometry_spiral`): the tensors an adaptive
  run trains on, from its configuration;
* :func:`build_model`, :func:`adam_train_config` and :func:`fit_adaptive`: an
  :class:`~hacn_core.awnn.AdaptiveMLP` trained with the negative ELBO of Eq. 13
  (``N`` = the training-set size), its width updated after every optimizer step
  (Algorithm 1), and :func:`width_and_rate_curves` / :func:`elbo_curves`, the
  per-record curves such a run stores;
* :data:`ARMS` (the two importance normalisations the chapters compare),
  :func:`check_choice` and :func:`check_count` (a refused value names its field and the allowed values);
* :func:`selected_epoch`: the record the protocol selects, with its curves and metrics;
* :func:`paper_text`: a paper item printed as the paper prints it, ``value (std)``.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch

from hacn_core.awnn import paper_items
from hacn_core.awnn import DEFAULT_RATE, AdaptiveMLP, AWNNConfig, ELBOLoss, RatePriorSchedule, WidthCallback
from hacn_core.engine.data import SYNTHETIC, spiral_arms, stratified_split, synthetic_splits
from hacn_core.engine.results import RunContext
from hacn_core.engine.stats import round_significant
from hacn_core.engine.training import Callback, TrainConfig, TrainState, evaluate, fit

#: ``AWNNConfig.importance_norm`` of the two arms: ``none`` is Eq. 14 as written (the
#: importances ``f(j)`` of Eq. 12), ``active`` renormalises them over the active neurons.
ARMS: tuple[str, ...] = ("none", "active")
#: AWNN's starting rate on the tabular tasks (App. C.1, Table 3): 231 neurons at ``k = 0.9`` (Eq. 11)
START_RATE: float = DEFAULT_RATE
#: the public generator's spiral: angle up to 720 degrees, so radius 4 pi, and noise 0.3
PUBLIC_RADIUS = 4 * math.pi
PUBLIC_NOISE = 0.3


def check_choice(name: str, value: Any, allowed: Iterable[Any]) -> None:
    """Refuse ``value`` unless it is one of ``allowed``; the error names ``name`` and the allowed values."""
    allowed = tuple(allowed)
    if value not in allowed:
        raise ValueError(f"{name}={value!r} is not allowed; allowed: {', '.join(map(str, allowed))}")


def check_count(name: str, value: Any, low: int, high: int | None = None) -> None:
    """Refuse ``value`` unless it is an integer ``>= low`` (and ``<= high``); the error names ``name`` and the range."""
    if isinstance(value, bool) or not isinstance(value, int) or value < low or (high is not None and value > high):
        span = f"in [{low}, {high}]" if high is not None else f">= {low}"
        raise ValueError(f"{name}={value!r} must be an integer {span}")


def paper_text(item_id: str) -> str:
    """The paper's value of ``item_id`` as printed: ``"65.9 (8.7)"``, or ``"16"`` without a spread."""
    it = paper_items.item(item_id)
    if it.paper_value is None:
        raise ValueError(f"item {item_id!r} is qualitative: it has no paper value to print")
    return f"{it.paper_value:g}" + ("" if it.paper_std is None else f" ({it.paper_std:g})")


def paper_printed(item_id: str) -> str:
    """What the paper prints for ``item_id``: :func:`paper_text` of a number, else the text its note quotes
    (Table 1's fixed widths: the note reads "The paper writes 'Linear': ..." or "... '(96-320)': ...")."""
    it = paper_items.item(item_id)
    if it.paper_value is not None:
        return paper_text(item_id)
    quoted = re.search(r"writes '([^']+)'", it.note or "")
    if quoted is None:
        raise ValueError(f"item {item_id!r} has no paper value and its note quotes no printed text")
    return quoted.group(1)


# ----------------------------------------------------------------------------- the protocol


class SplitAccuracy(Callback):
    """Validation and test accuracy at every record point, for best-epoch selection.

    ``val`` and ``test`` are ``(X, y)`` tensors or any dataset that
    :func:`~hacn_core.engine.training.evaluate` reads with ``forward`` and
    ``collate_fn`` (graphs: torch-geometric batches), ``batch_size`` at a time.
    ``patience`` (records; ``None``: never) is patience-based early stopping
    (AWNN App. C): training stops once the best validation accuracy is
    ``patience`` records old. It reads the stored ``val_acc`` curve, so a resumed
    run stops where the uninterrupted one does.
    """

    def __init__(self, val: Any, test: Any, *, batch_size: int = 4096, forward: Callable | None = None,
                 collate_fn: Callable | None = None, patience: int | None = None):
        if patience is not None and (isinstance(patience, bool) or not isinstance(patience, int) or patience < 1):
            raise ValueError(f"patience={patience!r} must be None (no early stopping) or an integer >= 1 (records)")
        self.val, self.test = val, test
        self.options = {"batch_size": batch_size, "forward": forward, "collate_fn": collate_fn}
        self.patience = patience

    def on_record(self, state: TrainState) -> dict[str, float]:
        model = state.model
        was_training = model.training
        val = evaluate(model, self.val, **self.options)
        test = evaluate(model, self.test, **self.options)
        model.train(was_training)
        if self.patience is not None:
            history = [*state.curves.get("val_acc", []), val["accuracy"]]
            if len(history) - 1 - best_record(history) >= self.patience:
                state.stop = True
        return {"val_acc": val["accuracy"], "test_acc": test["accuracy"]}


def best_record(val_acc: Sequence[float]) -> int:
    """Index of the first record with the best validation accuracy (the selected epoch of Sec. 4)."""
    return int(np.argmax(np.asarray(val_acc, dtype=float)))


def selected_epoch(curves: dict[str, list]) -> tuple[int, dict[str, list], dict[str, Any]]:
    """The protocol's reading of a run recorded by :class:`SplitAccuracy`: ``(best, curves, metrics)``.

    ``best`` is :func:`best_record` of ``val_acc``; ``curves`` holds ``record_epoch``
    (integers), ``val_acc`` and ``test_acc``; ``metrics`` the test and validation
    accuracy at ``best``, its epoch and the test accuracy after the last epoch.
    """
    best = best_record(curves["val_acc"])
    epochs = [int(round(e)) for e in curves["record_epoch"]]
    kept = {"record_epoch": epochs, "val_acc": curves["val_acc"], "test_acc": curves["test_acc"]}
    metrics = {"test_acc": float(curves["test_acc"][best]), "val_acc": float(curves["val_acc"][best]),
               "best_epoch": epochs[best], "final_test_acc": float(curves["test_acc"][-1])}
    return best, kept, metrics


# ----------------------------------------------------------------------------- data


def public_geometry_spiral(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Two spirals with the geometry of the paper's public generator, from our sampler.

    2,500 points (Table 2), one arm per class, two turns, radius ``4 pi`` and
    Gaussian noise of std 0.3, where our shared Spiral has 1.5 turns, radius 1 and
    noise 0.02. Only the geometry is taken over (two turns, radius and noise, read
    off the public code); the sampling is ``hacn_core.engine.data``'s.
    Shapes: ``x`` ``(2500, 2)`` float32, ``y`` ``(2500,)`` long.
    """
    rng = np.random.default_rng(seed)
    x, y = spiral_arms(SYNTHETIC["Spiral"].n_samples // 2, rng, arms_per_class=1, turns=2.0,
                       noise=PUBLIC_NOISE / PUBLIC_RADIUS)
    order = rng.permutation(len(y))
    x = torch.as_tensor(x[order] * PUBLIC_RADIUS, dtype=torch.float32)
    return x, torch.as_tensor(y[order], dtype=torch.long)


def load_splits(config: dict[str, Any]) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """Train / validation / test tensors of an adaptive run.

    ``config["data"]`` is ``"shared"`` (``synthetic_splits(dataset, data_seed)``, the
    splits of the fixed baseline) or ``"spiral-r4pi-2turns"`` (:func:`public_geometry_spiral`,
    split as Spiral); the inputs are multiplied by ``config["input_scale"]``.
    """
    if config["data"] == "shared":
        splits = synthetic_splits(config["dataset"], config["data_seed"])
    else:
        x, y = public_geometry_spiral(config["data_seed"])
        parts = stratified_split(y, SYNTHETIC["Spiral"].split, config["data_seed"])
        splits = {k: (x[i], y[i]) for k, i in zip(("train", "val", "test"), parts, strict=True)}
    scale = float(config["input_scale"])
    return {k: (x * scale, y) for k, (x, y) in splits.items()}


# ----------------------------------------------------------------------------- model and training


def build_model(config: dict[str, Any]) -> AdaptiveMLP:
    """The adaptive MLP ``2 -> D_1 [-> D_2 ...] -> 2`` of a configuration (weights from the current torch seed)."""
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


@dataclass
class AdaptiveFit:
    """One trained adaptive run: the final model, the data it saw and the trainer's curves.

    ``curves`` has, per record, ``record_epoch``, ``val_acc``, ``test_acc``,
    ``awnn/widths`` and ``awnn/rates`` (one entry per hidden layer) and the terms
    ``elbo/*`` of Eq. 13 (epoch means); ``cpu_start`` is the process time when
    training began.
    """

    model: AdaptiveMLP
    splits: dict[str, tuple[torch.Tensor, torch.Tensor]]
    n_train: int
    curves: dict[str, list]
    device: str
    cpu_start: float

    def cpu_seconds(self) -> float:
        """CPU seconds of this process since training began, to two decimals."""
        return round(time.process_time() - self.cpu_start, 2)


def fit_adaptive(config: dict[str, Any], context: RunContext, *, schedule: RatePriorSchedule | None = None,
                 record_every: int | None = None) -> AdaptiveFit:
    """Train the adaptive MLP of ``config`` on its splits with the negative ELBO of Eq. 13.

    ``N`` is the training-set size times ``config["n_train_scale"]`` (1 when absent),
    the weight prior ``N(0, sigma_theta^2)`` (uninformative for ``None``), the rate
    prior uninformative or ``schedule`` (Sec. 5.3's annealed prior), the widths
    updated after every optimizer step (:class:`~hacn_core.awnn.WidthCallback`).
    The model is drawn with ``torch.manual_seed(config["seed"])`` after the data is
    loaded, so every study that trains the same configuration trains the same run.
    """
    splits = load_splits(config)
    n_train = round(len(splits["train"][1]) * config.get("n_train_scale", 1.0))
    torch.manual_seed(config["seed"])
    model = build_model(config)
    elbo = ELBOLoss(model, n_train, sigma_theta=config["sigma_theta"], rate_prior=None)
    train_config = adam_train_config(config)
    if record_every is not None:
        train_config = replace(train_config, record_every=record_every)
    cpu_start = time.process_time()
    out = fit(model, splits["train"], train_config, loss_fn=elbo,
              callbacks=[WidthCallback(elbo, schedule), SplitAccuracy(splits["val"], splits["test"])],
              checkpoint_dir=context.checkpoint_dir, progress=context.progress)
    return AdaptiveFit(model, splits, n_train, out.curves, out.device, cpu_start)


def width_and_rate_curves(curves: dict[str, list], hidden_layers: int) -> dict[str, list]:
    """``width/l`` (neurons) and ``rate/l`` (5 significant digits) of every hidden layer ``l = 1..L``."""
    out: dict[str, list] = {}
    for layer in range(hidden_layers):
        out[f"width/{layer + 1}"] = [int(w[layer]) for w in curves["awnn/widths"]]
        out[f"rate/{layer + 1}"] = round_significant([r[layer] for r in curves["awnn/rates"]], 5)
    return out


def elbo_curves(curves: dict[str, list]) -> dict[str, list]:
    """The four terms of Eq. 13 per record (epoch means, 6 significant digits)."""
    return {f"elbo/{term}": round_significant(curves[f"elbo/{term}"], 6)
            for term in ("total", "predictive", "weight_prior", "width_prior")}
