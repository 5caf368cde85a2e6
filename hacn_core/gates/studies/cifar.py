"""Residual gates on CIFAR: Tables 3-6 and Figs. 6-7 of Savarese et al., Section 3.2.

What one run is
    One pre-activation (wide) ResNet (``hacn_core.models.resnet``) in one
    ``variant``: ``original`` (``u = f_r(x) + x``), ``gated`` (``u = g(k) f_r(x)
    + x``, one ``k`` per block, no weight decay on ``k``) or ``gated_kdecay``
    (the same with weight decay also on ``k``: the paper's "k decay", Table 3),
    trained with SGD on one dataset. Stored per run: the training loss of every
    epoch, the training and test error after every epoch (Fig. 7), the ``k`` of
    every block after every epoch, and at the end the test error on the whole
    test set (Tables 3-6), the mean ``k``, the final ``k`` per block with the
    blocks that change the feature-map dimension (Fig. 6) and the parameter count.

The paper's setting (Sec. 3.2), and how each point is read here
    * Pre-activation ResNet (He et al., 2016), "Resnet 5" = ``n = 5``
      (ResNet-32): "initial learning rate of 0.1, ... decrease it by a factor
      of 10 after 50% and 75% epochs. SGD with Nesterov momentum of 0.9 ...
      only pre-processing consists of mean subtraction. Weight decay of 0.0001
      ... Batch Normalization's momentum is set to 0.9" (PyTorch's 0.1).
      The number of epochs is not given: we take the 64k iterations of
      He et al. (2015b) at batch 128, i.e. ``RESNET_EPOCHS`` = 164 (the
      pre-activation reference code's 164 epochs, milestones 82 and 123).
    * Wide ResNets (Zagoruyko & Komodakis, 2016): "learning rate ... 0.1, and
      decreases by a factor of 5 after 30%, 60% and 80% epochs. Images are
      mean/std normalized, ... weight decay of 0.0005 ... 0.3 dropout ...
      between convolutions, whenever specified. All other details are the same
      as for ResNets" (so SGD Nesterov 0.9, batch 128). Epochs: the WRN
      paper's 200 (``WRN_EPOCHS``).
    * Augmentation for both: pad 4 pixels, random 32x32 crop, horizontal flip
      with probability 0.5 (:func:`hacn_core.engine.augment.random_crop_flip`). We pad with zeros in
      pixel space (black, as torchvision's ``RandomCrop(32, padding=4)``) and
      normalise afterwards; the normalisation statistics are per channel over
      the training split.
    * Gates start at ``k = 1`` with ``g = ReLU``. "k decay" applies "the same
      magnitude of the weight decay" to ``k``. Other parameters: the reference
      Torch codes of both recipes decay every parameter (BatchNorm gains and
      biases included), so ``decay_norm_bias=True``; the trainer's default would
      keep them out (``hacn_core.engine.optim.DEFAULT_NO_DECAY_ROLES``).
    * Shortcuts: 1x1 projection where a block changes dimension (the WRN
      reference design; ``shortcut`` in the configuration). The paper's
      ResNet-5 "adds 15 parameters" by gating either way.
    * Precision: ``precision="auto"`` (bf16 autocast on a CUDA GPU, fp32 on CPU):
      the 200-epoch WRN runs are only practical on a GPU.
    * The paper reports one number per cell and does not say how many runs it
      averages or how the epoch was chosen; we report the test error after the
      last epoch, mean over seeds.

Profiles
    ``paper``: every run of Tables 3-6 on CIFAR-10/100 (downloaded), seeds 0-2:
    14 CIFAR-10 cells (ResNet-5 and WRN (4,10) + dropout in three variants,
    WRN (2,4), (4,10), (8,1), (6,10) + dropout original / gated) and 8
    CIFAR-100 cells (Table 5), 66 runs in all (GPU-days).
    ``book``: a **scaled analogue** on offline data: Fashion-MNIST padded to
    32x32 (1 channel), a fixed 8,000-image training subset, a small WRN of
    the same shape (``MINI_WRN``: 2 blocks per stage, widths 8/16/32, a
    4-channel stem so that block 1 also changes dimension as in WRN (4,10)),
    the WRN recipe for 10 epochs, with and without dropout 0.3, in the three
    variants, seeds 0 and 1 (12 runs; ``cifar_report.cost_table`` reads their
    time off the runs). ``smoke``: the book's runs at seed 0 for 2 epochs on
    256 images.

This module is the study: the setting, the configurations, the training and
the ``EXPERIMENT`` with its links to the paper's cells. What the chapter
shows of the runs (tables beside the paper's values, the claims, the
figures) is in :mod:`hacn_core.gates.studies.cifar_report`.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from hacn_core import gates
from hacn_core.engine.augment import AugmentNormalize
from hacn_core.engine.data import image_tensors
from hacn_core.engine.registry import Experiment, Link, with_overrides
from hacn_core.engine.results import RunContext
from hacn_core.engine.training import Callback, TrainConfig, TrainState, evaluate, fit
from hacn_core.models.resnet import ResNetCifar, ResNetCifarConfig

if TYPE_CHECKING:  # pragma: no cover
    from hacn_core.engine.dry_run import DryRunPlan

EXPERIMENT_ID = "gates-cifar"
VARIANTS: tuple[str, ...] = ("original", "gated", "gated_kdecay")
DATASETS: tuple[str, ...] = ("CIFAR10", "CIFAR100", "FashionMNIST32")
NORMALIZATIONS: tuple[str, ...] = ("mean", "mean_std")
NUM_CLASSES = {"CIFAR10": 10, "CIFAR100": 100, "FashionMNIST32": 10}
PAPER_SEEDS: tuple[int, ...] = (0, 1, 2)
RESNET_EPOCHS = 164  # 64k iterations at batch 128 (He et al., 2015b); the paper gives fractions only
WRN_EPOCHS = 200  # Zagoruyko & Komodakis (2016)
SUBSET_SEED = 0  # fixed training / curve subsets, the same for every run
CURVE_SUBSET = 2000  # images of the train and test sets evaluated after every epoch (Fig. 7 curves)
EVAL_BATCH = 500
TABLE_TOLERANCE = {"CIFAR10": 0.3, "CIFAR100": 0.6}  # percentage points, for the ledger's verdict

# The two recipes of Sec. 3.2 (everything that is not the network).
RECIPES: dict[str, dict[str, Any]] = {
    "resnet": {"lr": 0.1, "momentum": 0.9, "nesterov": True, "weight_decay": 1e-4, "milestones": [0.5, 0.75],
               "gamma": 0.1, "normalize": "mean", "epochs": RESNET_EPOCHS},
    "wrn": {"lr": 0.1, "momentum": 0.9, "nesterov": True, "weight_decay": 5e-4, "milestones": [0.3, 0.6, 0.8],
            "gamma": 0.2, "normalize": "mean_std", "epochs": WRN_EPOCHS},
}


def _wrn(n: int, k: int, dropout: float = 0.0) -> dict[str, Any]:
    """The paper's "Wide ResNet (n, k)": ``n`` blocks per stage, widths 16k/32k/64k (WRN-(6n+4)-k)."""
    return {"recipe": "wrn", "blocks_per_stage": n, "widths": [16 * k, 32 * k, 64 * k], "stem_channels": 16,
            "dropout": dropout}


# The paper's networks (Tables 3-6), by the slug its paper-item ids use.
PAPER_MODELS: dict[str, dict[str, Any]] = {
    "resnet5": {"recipe": "resnet", "blocks_per_stage": 5, "widths": [16, 32, 64], "stem_channels": 16,
                "dropout": 0.0},
    "wrn-2-4": _wrn(2, 4),
    "wrn-4-10": _wrn(4, 10),
    "wrn-4-10-dropout": _wrn(4, 10, 0.3),
    "wrn-8-1": _wrn(8, 1),
    "wrn-6-10-dropout": _wrn(6, 10, 0.3),
}
# (dataset, model) -> variants the paper reports (Table 3: three variants; Tables 4-5: two).
PAPER_CELLS: dict[tuple[str, str], tuple[str, ...]] = {
    ("CIFAR10", "resnet5"): VARIANTS,
    ("CIFAR10", "wrn-2-4"): ("original", "gated"),
    ("CIFAR10", "wrn-4-10"): ("original", "gated"),
    ("CIFAR10", "wrn-4-10-dropout"): VARIANTS,
    ("CIFAR10", "wrn-8-1"): ("original", "gated"),
    ("CIFAR10", "wrn-6-10-dropout"): ("original", "gated"),
    ("CIFAR100", "wrn-2-4"): ("original", "gated"),
    ("CIFAR100", "wrn-4-10"): ("original", "gated"),
    ("CIFAR100", "wrn-4-10-dropout"): ("original", "gated"),
    ("CIFAR100", "wrn-8-1"): ("original", "gated"),
}

# The book's scaled analogue: the shape of WRN (4,10) (every stage opens with a dimension-changing
# block, block 1 included, since the stem is narrower than the first stage) at a size one CPU
# thread trains in minutes. Analogue of the paper model named in ``analogue_of``.
MINI_WRN: dict[str, Any] = {"recipe": "wrn", "blocks_per_stage": 2, "widths": [8, 16, 32], "stem_channels": 4}
BOOK_MODELS: dict[str, dict[str, Any]] = {
    "mini-wrn": MINI_WRN | {"dropout": 0.0, "analogue_of": "wrn-4-10"},
    "mini-wrn-dropout": MINI_WRN | {"dropout": 0.3, "analogue_of": "wrn-4-10-dropout"},
}
BOOK_SEEDS: tuple[int, ...] = (0, 1)
BOOK_EPOCHS = 10
BOOK_TRAIN_SUBSET = 8000
SMOKE_EPOCHS = 2
SMOKE_TRAIN_SUBSET = 256
SMOKE_CURVE_SUBSET = 128
SMOKE_TEST_SUBSET = 256


# ----------------------------------------------------------------------------- paper items


def paper_item_ids(dataset: str, model: str, variant: str) -> list[str]:
    """Paper-item ids (``hacn_core.paper_items``) of one cell of Tables 3-6 (empty if none).

    A cell can appear in several tables: WRN (4,10) + Dropout is in Tables 3,
    4/5 and 6.
    """
    if variant not in PAPER_CELLS.get((dataset, model), ()):
        return []
    ids = []
    if dataset == "CIFAR10" and model in ("resnet5", "wrn-4-10-dropout"):
        suffix = {"original": "original", "gated": "gated", "gated_kdecay": "gated-kdecay"}[variant]
        ids.append(f"gates/table3/cifar10-{model}-{suffix}")
    if model != "resnet5" and variant != "gated_kdecay":
        table = "table4" if dataset == "CIFAR10" else "table5"
        ids.append(f"gates/{table}/{dataset.lower()}-{model}-{variant}")
    if model == "wrn-4-10-dropout" and variant != "gated_kdecay":
        short = {"CIFAR10": "c10", "CIFAR100": "c100"}[dataset]
        ids.append(f"gates/table6/{short}-wrn-4-10" if variant == "original"
                   else f"gates/table6/{short}-wide-gated-resnet-4-10-dropout")
    return ids


# ----------------------------------------------------------------------------- augmentation


# ----------------------------------------------------------------------------- data


@functools.lru_cache(maxsize=4)
def dataset_tensors(dataset: str, train: bool) -> tuple[Tensor, Tensor]:
    """A split as ``(X, y)``: float32 pixels in [0, 1], ``(N, C, 32, 32)``.

    ``FashionMNIST32`` is Fashion-MNIST (28x28) padded with 2 black pixels on
    every side to CIFAR's 32x32, one channel (the book's offline analogue).
    CIFAR is downloaded when missing and allowed (``hacn_core.engine.data``).
    """
    if dataset not in DATASETS:
        raise ValueError(f"dataset={dataset!r} is not supported; allowed: {', '.join(DATASETS)}")
    if dataset == "FashionMNIST32":
        X, y = image_tensors("FashionMNIST", train=train)
        return F.pad(X, (2, 2, 2, 2)), y
    return image_tensors(dataset, train=train)


def fixed_subset(n_total: int, n: int | None, salt: int = 0) -> Tensor | None:
    """Indices of a fixed random subset of size ``n`` (``None``: everything)."""
    if n is None:
        return None
    if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= n_total:
        raise ValueError(f"subset size {n!r} must be None or an integer in 1..{n_total}")
    gen = torch.Generator().manual_seed(SUBSET_SEED + salt)
    return torch.randperm(n_total, generator=gen)[:n]


def channel_stats(X: Tensor, normalize: str) -> tuple[Tensor, Tensor]:
    """Per-channel mean and std over a training split (std = 1 for ``normalize="mean"``)."""
    if normalize not in NORMALIZATIONS:
        raise ValueError(f"normalize={normalize!r} is unknown; allowed: {', '.join(NORMALIZATIONS)}")
    mean = X.mean(dim=(0, 2, 3))
    std = X.std(dim=(0, 2, 3)) if normalize == "mean_std" else torch.ones_like(mean)
    return mean, std


# ----------------------------------------------------------------------------- configurations

_NETWORK_KEYS = ("recipe", "blocks_per_stage", "widths", "stem_channels", "dropout")


def make_config(dataset: str, model: str, variant: str, seed: int, **overrides: Any) -> dict[str, Any]:
    """One run at the paper's setting (Sec. 3.2), with ``overrides`` applied.

    ``model`` is a paper network (``PAPER_MODELS``) or a book analogue
    (``BOOK_MODELS``); the recipe (schedule, weight decay, normalisation,
    epochs) follows the network's family.
    """
    if variant not in VARIANTS:
        raise ValueError(f"variant={variant!r} is unknown; allowed: {', '.join(VARIANTS)}")
    if dataset not in DATASETS:
        raise ValueError(f"dataset={dataset!r} is not supported; allowed: {', '.join(DATASETS)}")
    spec = PAPER_MODELS.get(model) or BOOK_MODELS.get(model)
    if spec is None:
        raise ValueError(f"model={model!r} is unknown; allowed: {', '.join([*PAPER_MODELS, *BOOK_MODELS])}")
    recipe = RECIPES[spec["recipe"]]
    config = {
        "dataset": dataset,
        "model": model,
        "analogue_of": spec.get("analogue_of"),
        "variant": variant,
        **{k: spec[k] for k in _NETWORK_KEYS},
        "shortcut": "projection",
        "g": "relu",
        "k_init": 1.0,
        "bn_momentum": 0.1,  # the paper's 0.9 in Torch's convention
        "normalize": recipe["normalize"],
        "pad": 4,
        "flip": True,
        "optimizer": "sgd",
        "lr": recipe["lr"],
        "momentum": recipe["momentum"],
        "nesterov": recipe["nesterov"],
        "weight_decay": recipe["weight_decay"],
        "decay_norm_bias": True,
        "milestones": list(recipe["milestones"]),
        "gamma": recipe["gamma"],
        "batch_size": 128,
        "epochs": recipe["epochs"],
        "train_subset": None,
        "curve_subset": CURVE_SUBSET,
        "test_subset": None,
        "precision": "auto",
        "seed": seed,
    }
    config = with_overrides(config, overrides)
    check_config(config)
    return config


def paper_configs() -> list[dict[str, Any]]:
    """Every cell of Tables 3-6 at the paper's setting, seeds 0-2 (66 runs)."""
    return [make_config(d, m, v, s) for (d, m), variants in PAPER_CELLS.items() for v in variants
            for s in PAPER_SEEDS]


def book_configs() -> list[dict[str, Any]]:
    """The scaled analogue: mini WRN with / without dropout x 3 variants x 2 seeds on Fashion-MNIST (12 runs)."""
    return [make_config("FashionMNIST32", m, v, s, epochs=BOOK_EPOCHS, train_subset=BOOK_TRAIN_SUBSET)
            for m in BOOK_MODELS for v in VARIANTS for s in BOOK_SEEDS]


def smoke_configs() -> list[dict[str, Any]]:
    """The book's runs at seed 0, 2 epochs on 256 images, curves on 128, final test on 256 (6 runs)."""
    return [make_config("FashionMNIST32", m, v, 0, epochs=SMOKE_EPOCHS, train_subset=SMOKE_TRAIN_SUBSET,
                        curve_subset=SMOKE_CURVE_SUBSET, test_subset=SMOKE_TEST_SUBSET)
            for m in BOOK_MODELS for v in VARIANTS]


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def check_config(config: dict[str, Any]) -> None:
    """Raise ``ValueError`` naming the field and its allowed values for a bad configuration."""
    choices = {"dataset": DATASETS, "variant": VARIANTS, "normalize": NORMALIZATIONS, "recipe": tuple(RECIPES),
               "optimizer": ("sgd",)}
    for key, allowed in choices.items():
        if config.get(key) not in allowed:
            raise ValueError(f"{key}={config.get(key)!r} is not supported; allowed: {', '.join(allowed)}")
    widths = config.get("widths")
    if not isinstance(widths, (list, tuple)) or len(widths) != 3 or not all(_is_int(w) and w >= 1 for w in widths):
        raise ValueError(f"widths={widths!r} must list 3 integers >= 1 (channels of the three stages)")
    for key in ("blocks_per_stage", "stem_channels", "batch_size", "epochs", "pad", "curve_subset"):
        v = config.get(key)
        low = 0 if key == "pad" else 1
        if not _is_int(v) or v < low:
            raise ValueError(f"{key}={v!r} must be an integer >= {low}")
    if not _is_int(config.get("seed")) or config["seed"] < 0:
        raise ValueError(f"seed={config.get('seed')!r} must be an integer >= 0")
    for key in ("train_subset", "test_subset"):
        sub = config.get(key)
        if sub is not None and (not _is_int(sub) or sub < 1):
            raise ValueError(f"{key}={sub!r} must be None or an integer >= 1")
    for key in ("flip", "nesterov", "decay_norm_bias"):
        if not isinstance(config.get(key), bool):
            raise ValueError(f"{key}={config.get(key)!r} must be True or False")


def network_config(config: dict[str, Any]) -> ResNetCifarConfig:
    """The ``ResNetCifarConfig`` a run configuration describes (gated unless ``original``)."""
    return ResNetCifarConfig(
        blocks_per_stage=config["blocks_per_stage"],
        widths=tuple(config["widths"]),
        num_classes=NUM_CLASSES[config["dataset"]],
        in_channels=1 if config["dataset"] == "FashionMNIST32" else 3,
        stem_channels=config["stem_channels"],
        dropout=config["dropout"],
        gated=config["variant"] != "original",
        g=config["g"],
        k_init=config["k_init"],
        shortcut=config["shortcut"],
        bn_momentum=config["bn_momentum"],
    )


def build_model(config: dict[str, Any]) -> ResNetCifar:
    """The network of a run configuration (weights drawn from the global RNG)."""
    check_config(config)
    return ResNetCifar(network_config(config))


def no_decay_roles(config: dict[str, Any]) -> tuple[str, ...]:
    """Parameter roles kept out of weight decay: ``gate`` unless k decay; norm / bias unless ``decay_norm_bias``."""
    roles: tuple[str, ...] = () if config["variant"] == "gated_kdecay" else ("gate",)
    return roles + (() if config["decay_norm_bias"] else ("norm", "bias"))


def train_config(config: dict[str, Any]) -> TrainConfig:
    """The trainer's configuration for a run: SGD (Nesterov), multistep schedule at fractions of training."""
    check_config(config)
    return TrainConfig(
        epochs=config["epochs"],
        batch_size=config["batch_size"],
        lr=config["lr"],
        optimizer="sgd",
        momentum=config["momentum"],
        nesterov=config["nesterov"],
        weight_decay=config["weight_decay"],
        no_decay_roles=no_decay_roles(config),
        schedule="multistep",
        milestones=tuple(config["milestones"]),
        milestone_unit="fraction",
        gamma=config["gamma"],
        precision=config["precision"],
        eval_batch_size=EVAL_BATCH,
        seed=config["seed"],
        record_every=1,
        checkpoint_every_minutes=5.0,
    )


# ----------------------------------------------------------------------------- training


def dimension_changing_blocks(model: ResNetCifar) -> list[int]:
    """1-based indices of the blocks whose shortcut is not the identity (Fig. 6: 1, 5, 9 of WRN (4,10))."""
    blocks = [b for stage in model.stages for b in stage]
    return [i + 1 for i, b in enumerate(blocks) if getattr(b, "shortcut", None) is not None]


def k_pattern(k: Sequence[float], changing: Sequence[int]) -> dict[str, float]:
    """Fig. 6 in numbers: mean ``k`` of the dimension-changing blocks and of the others.

    ``k_dim_change_gap`` = mean(other blocks) - mean(dimension-changing blocks)
    is positive when the blocks that change dimension have the smaller ``k``;
    ``k_last_is_max`` is 1.0 when the last block has the largest ``k``.
    """
    k = np.asarray(k, dtype=float)
    mask = np.zeros(k.size, dtype=bool)
    mask[np.asarray(changing, dtype=int) - 1] = True
    if mask.all() or not mask.any():
        raise ValueError("k_pattern needs both dimension-changing and dimension-preserving blocks")
    return {"k_dim_change_mean": float(k[mask].mean()), "k_other_mean": float(k[~mask].mean()),
            "k_dim_change_gap": float(k[~mask].mean() - k[mask].mean()),
            "k_last_is_max": float(np.argmax(k) == k.size - 1)}


class _EpochErrors(Callback):
    """At every record point: error on fixed train / test subsets (no augmentation) and mean ``k``."""

    def __init__(self, train: tuple[Tensor, Tensor], test: tuple[Tensor, Tensor], forward: AugmentNormalize,
                 precision: str) -> None:
        self.train, self.test, self.forward = train, test, forward
        self.precision = "fp32" if precision == "auto" else precision

    def on_record(self, state: TrainState) -> dict[str, float]:
        out = {}
        for name, data in (("train_error", self.train), ("test_error", self.test)):
            res = evaluate(state.model, data, forward=self.forward, batch_size=EVAL_BATCH, device=state.device,
                           precision=self.precision)
            out[name] = 1.0 - res["accuracy"]
        if gates.gate_parameters(state.model):
            out["mean_k"] = gates.mean_gate(state.model)
        return out


def train_gates_cifar(config: dict[str, Any], context: RunContext) -> dict[str, Any]:
    """Train one network of Sec. 3.2 and measure Tables 3-6 and Figs. 6-7 on it."""
    check_config(config)
    X, y = dataset_tensors(config["dataset"], True)
    Xt, yt = dataset_tensors(config["dataset"], False)
    test_idx = fixed_subset(len(Xt), config["test_subset"], salt=3)
    if test_idx is not None:  # smoke only: the final error on part of the test set
        Xt, yt = Xt[test_idx], yt[test_idx]
    mean, std = channel_stats(X, config["normalize"])  # over the whole training split
    idx = fixed_subset(len(X), config["train_subset"])
    train = (X, y) if idx is None else (X[idx], y[idx])
    n_curve = min(config["curve_subset"], len(train[0]), len(Xt))
    tr_idx = fixed_subset(len(train[0]), n_curve, salt=1)
    te_idx = fixed_subset(len(Xt), n_curve, salt=2)
    forward = AugmentNormalize(mean, std, config["pad"], config["flip"])
    torch.manual_seed(config["seed"])  # the weight init
    model = build_model(config)
    tc = train_config(config)
    tracker = _EpochErrors((train[0][tr_idx], train[1][tr_idx]), (Xt[te_idx], yt[te_idx]), forward, tc.precision)
    out = fit(model, train, tc, test=(Xt, yt), forward=forward, callbacks=[tracker],
              checkpoint_dir=context.checkpoint_dir, progress=context.progress)
    c = out.curves
    metrics: dict[str, Any] = {
        "test_error": 1.0 - out.metrics["test_accuracy"],  # whole test set (test_subset=None), after the last epoch
        "test_loss": out.metrics["test_loss"],
        "train_loss": out.metrics["train_loss"],
        "train_error_subset": c["train_error"][-1],
        "parameters": sum(p.numel() for p in model.parameters()),
        "wall_time_s": out.wall_time_s,
    }
    changing = dimension_changing_blocks(model)
    curves: dict[str, list] = {
        "epoch": c["epoch"],
        "train_loss": c["train_loss"],
        "lr": c["lr"],
        "record_epoch": c["record_epoch"],
        "train_error": c["train_error"],
        "test_error": c["test_error"],
        "time_s": c["time_s"],
        "dim_change_blocks": changing,
    }
    gate_names = [name for name, _ in gates.gate_parameters(model)]
    if gate_names:
        history = np.array([c[f"param/{name}"] for name in gate_names], dtype=float)  # (blocks, records)
        k_final = history[:, -1]
        metrics |= {"mean_k": float(k_final.mean()), "n_gates": len(gate_names),
                    "gates_closed": int((k_final <= 0).sum()),
                    "k_min_block": int(np.argmin(k_final)) + 1}
        if 0 < len(changing) < len(gate_names):
            metrics |= k_pattern(k_final, changing)
        curves |= {"mean_k": c["mean_k"], "k_per_block": k_final.tolist(), "k_history": history.tolist()}
    return {"metrics": metrics, "curves": curves, "device": out.device}


def _links() -> tuple[Link, ...]:
    """Every paper cell's test error, Table 6's parameter count and Figs. 6-7, at the paper's setting only.

    ``where`` names the CIFAR dataset, so the book's Fashion-MNIST analogue
    never lands on a paper item.
    """
    links = []
    for (dataset, model), variants in PAPER_CELLS.items():
        for variant in variants:
            for item_id in paper_item_ids(dataset, model, variant):
                links.append(Link(item_id, "test_error", {"dataset": dataset, "model": model, "variant": variant},
                                  scale=100.0, tolerance=TABLE_TOLERANCE[dataset]))
    links.append(Link("gates/table6/wrn-4-10-parameters", "parameters",
                      {"dataset": "CIFAR10", "model": "wrn-4-10-dropout", "variant": "original"},
                      scale=1e-6, tolerance=0.05))
    links.append(Link("gates/fig6/k-per-block-wrn", "k_dim_change_gap",
                      {"dataset": "CIFAR10", "model": "wrn-4-10", "variant": "gated"}))
    links.append(Link("gates/fig7/wrn-train-test-curves", "train_error_subset",
                      {"dataset": "CIFAR10", "model": "wrn-4-10-dropout", "variant": "gated"}, scale=100.0))
    return tuple(links)


def dry_run_plan(config: dict[str, Any]) -> DryRunPlan:
    """One run's dry run (``hacn_core.engine.dry_run``): :func:`build_model` on synthetic 32x32 images of
    the dataset's channels, the SGD of :func:`train_config`, the training split (or ``train_subset``)."""
    from hacn_core.engine.data import IMAGE_TRAIN_SPLITS
    from hacn_core.engine.dry_run import DryRunPlan, classification_batch

    network = network_config(config)
    split = IMAGE_TRAIN_SPLITS["FashionMNIST" if config["dataset"] == "FashionMNIST32" else config["dataset"]]
    return DryRunPlan(
        key={"dataset": config["dataset"], "gated": network.gated, **{k: config[k] for k in _NETWORK_KEYS},
             "shortcut": config["shortcut"], "g": config["g"]},
        model=lambda: build_model(config),
        batch=classification_batch((network.in_channels, 32, 32), network.num_classes),
        train=train_config(config), n_train=config["train_subset"] or split.n_train)


EXPERIMENT = Experiment(
    id=EXPERIMENT_ID,
    title="Residual gates on CIFAR: (wide) ResNets original / gated / k decay (Residual Gates Tables 3-6, "
          "Figs. 6-7)",
    train=train_gates_cifar,
    plan=dry_run_plan,
    configs={"smoke": smoke_configs, "book": book_configs, "paper": paper_configs},
    setting={
        "smoke": f"mini WRN on {SMOKE_TRAIN_SUBSET} Fashion-MNIST images (32x32), {SMOKE_EPOCHS} epochs, seed 0",
        "book": (f"scaled analogue: mini WRN (2 blocks/stage, widths 8/16/32) on {BOOK_TRAIN_SUBSET} "
                 f"Fashion-MNIST images padded to 32x32, WRN recipe, {BOOK_EPOCHS} epochs, seeds 0-1"),
        "paper": "CIFAR-10/100, ResNet-32 (164 ep) and WRNs (200 ep), SGD Nesterov, batch 128, seeds 0-2",
    },
    links=_links(),
)
