"""H-ACN MLP-Mixer studies (H-ACN Sec. 3.1 and 4, Appendix B; Figs. 2, 5-7, Tables 2-3).

One experiment, ``hacn-mixer``, trains MLP-Mixers that differ only in how their
layers are joined (``hacn_core.hacn.connectivity`` rules) and measures, per run:

* the final test accuracy and the layer-wise test accuracy of every exit from one
  forward pass (Fig. 2a, Fig. 7);
* the training loss per epoch (Fig. 2b) and the validation accuracy per epoch;
* for the rules with residual weights: every ``a_i`` every ``record_every_steps``
  optimizer steps, hence ``Gamma = ||a||_2 / sqrt(L)`` over training (Figs. 5, 6b,
  Table 3), the convergence distance ``Delta_t = ||a_T - a_t||_2`` (Fig. 6a) and the
  converged ``a`` (Fig. 2c, cross-seed Pearson correlation of Sec. 4);
* cost: parameters, seconds per epoch, and the bytes autograd saves for the
  backward pass of one training batch (activation memory, device independent),
  plus peak CUDA memory when trained on a GPU (chapter 3, "equal budgets").

Which runs (``rule``, ``alpha_mu``, ``num_classes``, ``arch``) serve which figure:

=================  ===================================================================
Fig. 2a-c, Tab. 3  resnet / acn / hacn (mu 0.25), 10 classes and 2 classes
Table 2, Fig. 5    hacn with mu in {0.25, 0.75, 1}, 10 classes
Fig. 6, Pearson    the hacn mu 0.25 runs (one per seed)
Fig. 7             + denseformer (DenseFormer-style rule) and arch dense_mixer (DenseNet-style)
paper vs code      hacn_code_mixer (the rule of the authors' public Mixer code) beside hacn
chapter 3          + rezero and laurel: every scaled residual on the same Mixer and budget
=================  ===================================================================

Profiles
--------
``paper``: CIFAR-10 (download), Appendix A's Mixer (16 layers, d 128, patch 4,
``D_C`` 512, ``D_S`` 64), AdamW lr 1e-3, cosine schedule with warmup, batch 64,
300 epochs (Sec. 3.1), seeds 0-2. Appendix A names neither the warmup length nor
the weight decay: we take 5% warmup and weight decay 0.01 from the paper's own
GPT-2 recipe (Table 5). The 2-class task ("CIFAR-2") keeps classes 0 and 1 and is
trained for the same number of optimizer steps (the paper trains it "until the
models achieve comparable performance"; it gives no count).

``book``: a scaled analogue that fits this project's 2-core CPU. Fashion-MNIST
(offline), a 16-layer Mixer scaled down to d 32, patch 7 (16 tokens), ``D_C`` 128,
``D_S`` 32 (155k parameters against 2.26M), 20,000 training images for 6 epochs
(about 940 steps at batch 128); the 2-class task (classes 0 "T-shirt/top" and 1
"Trouser") gets the same number of steps. Three seeds. Same optimizer and
schedule shape as the paper profile.

``smoke``: 2 layers, 2,000 images, one epoch, one seed, evaluated on the first
:data:`SMOKE_EVAL_SUBSET` validation and test images: seconds.

This module is the study (configurations, data, model, measurements, the
training and the ``EXPERIMENT`` / ``COST`` definitions). What the chapters
show of the runs (tables beside the paper's values, figures) is in
:mod:`hacn_core.hacn.studies.mixer_report`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import Tensor, nn

from hacn_core.engine.data import image_tensors
from hacn_core.engine.registry import Experiment, Link
from hacn_core.engine.results import RunContext
from hacn_core.engine.training import TrainConfig, fit
from hacn_core.hacn.connectivity import RULES, AlphaInit, evaluate_layerwise
from hacn_core.hacn.studies.common import (
    NOISE_STDS,
    classifier_metrics,
    interleaved_step_times,
    keep_trained_weights,
    noise_accuracy,
    residual_weight_summary,
    saved_activation_bytes,
    step_cost_metrics,
)
from hacn_core.models.mixer import DenseMixer, DenseMixerConfig, MixerConfig, MLPMixer, num_parameters
from hacn_core.models.mlp import MlpLayer

if TYPE_CHECKING:  # pragma: no cover
    from hacn_core.engine.dry_run import DryRunPlan

EXPERIMENT_ID = "hacn-mixer"
DATASETS: tuple[str, ...] = ("FashionMNIST", "CIFAR10")
ARCHS: tuple[str, ...] = ("mixer", "dense_mixer")
#: the rules this experiment compares (all from ``hacn_core.hacn.connectivity``)
STUDY_RULES: tuple[str, ...] = ("resnet", "acn", "hacn", "hacn_code_mixer", "denseformer", "rezero", "laurel")
WEIGHTED_RULES: tuple[str, ...] = ("hacn", "hacn_code_mixer")  # rules with Eq. 2 weights a_i
TABLE2_MUS: tuple[float, ...] = (0.25, 0.75, 1.0)
SEEDS: tuple[int, ...] = (0, 1, 2)
SUBSET_SEED = 0  # the training subset and the validation split are the same for every run
VAL_SIZE = 5000  # images held out of the training set for per-epoch validation accuracy
#: validation and test images a smoke run evaluates on (its own entry ``eval_subset``, present in smoke
#: configurations only, so the book's and the paper's configurations and stored hashes are unchanged):
#: the whole test set's 10,000 images, evaluated at every exit and at four noise levels, cost several
#: times a smoke run's 16 training steps
SMOKE_EVAL_SUBSET = 1000


def table2_item(mu: float) -> str:
    """Paper-item id (``hacn_core.paper_items``) of H-ACN Table 2's accuracy at init mean ``mu``."""
    return f"hacn/table2/mixer-mu{mu:g}"


def table3_item(num_classes: int) -> str:
    """Paper-item id of H-ACN Table 3's ``Gamma`` on the task a run stands for (2 classes: CIFAR-2, 10: CIFAR-10)."""
    return f"hacn/table3/cifar{num_classes}-gamma"


# ----------------------------------------------------------------------------- configurations

_PAPER_MODEL = dict(patch_size=4, hidden_dim=128, num_layers=16, token_mlp_dim=64, channel_mlp_dim=512,
                    dense_layers=10, dense_growth=64, dense_channel_mlp_dim=448)
_BOOK_MODEL = dict(patch_size=7, hidden_dim=32, num_layers=16, token_mlp_dim=32, channel_mlp_dim=128,
                   dense_layers=10, dense_growth=16, dense_channel_mlp_dim=112)
_SMOKE_MODEL = dict(patch_size=7, hidden_dim=16, num_layers=2, token_mlp_dim=8, channel_mlp_dim=32,
                    dense_layers=2, dense_growth=8, dense_channel_mlp_dim=32)


def make_config(rule: str, seed: int, *, profile: str = "book", arch: str = "mixer", num_classes: int = 10,
                alpha_mu: float | None = None, **overrides: Any) -> dict[str, Any]:
    """One run of the study at ``profile``'s scale (see the module docstring).

    ``alpha_mu`` is the mean of ``a_i ~ N(mu, 0.005)`` for the weighted rules
    (default 0.25, Sec. 3.1) and ``None`` for the others.
    """
    if profile == "paper":
        model, data = _PAPER_MODEL, dict(dataset="CIFAR10", train_subset=None, epochs=300, batch_size=64)
    elif profile == "book":
        model, data = _BOOK_MODEL, dict(dataset="FashionMNIST", train_subset=20000, epochs=6, batch_size=128)
    elif profile == "smoke":
        model, data = _SMOKE_MODEL, dict(dataset="FashionMNIST", train_subset=2000, epochs=1, batch_size=128,
                                         eval_subset=SMOKE_EVAL_SUBSET)
    else:
        raise ValueError(f"profile={profile!r} is not a profile; allowed: smoke, book, paper")
    if rule in WEIGHTED_RULES and alpha_mu is None:
        alpha_mu = 0.25
    config: dict[str, Any] = {
        "arch": arch,
        "rule": rule if arch == "mixer" else None,
        "alpha_mu": alpha_mu if rule in WEIGHTED_RULES and arch == "mixer" else None,
        "alpha_sigma": 0.005 if rule in WEIGHTED_RULES and arch == "mixer" else None,
        "depth_ln": "auto",
        "num_classes": num_classes,
        **model,
        **data,
        "optimizer": "adamw",
        "lr": 1e-3,
        "weight_decay": 0.01,
        "schedule": "cosine",
        "warmup_fraction": 0.05,
        "equal_steps": True,  # the 2-class task runs for as many optimizer steps as the 10-class one
        "record_every_steps": 25 if profile != "paper" else 500,
        "seed": seed,
    }
    config.update(overrides)
    return config


def _study(profile: str, seeds: Sequence[int], *, rules: Sequence[str] = STUDY_RULES,
           mus: Sequence[float] = TABLE2_MUS, two_class: bool = True, dense: bool = True) -> list[dict[str, Any]]:
    configs = []
    for seed in seeds:
        for rule in rules:
            configs.append(make_config(rule, seed, profile=profile))
        if two_class:
            for rule in ("resnet", "acn", "hacn"):
                configs.append(make_config(rule, seed, profile=profile, num_classes=2))
        for mu in mus:
            if mu != 0.25:
                configs.append(make_config("hacn", seed, profile=profile, alpha_mu=mu))
        if dense:
            configs.append(make_config("resnet", seed, profile=profile, arch="dense_mixer"))
    return configs


def paper_configs() -> list[dict[str, Any]]:
    """Every run at Appendix A's setting on CIFAR-10 / CIFAR-2, seeds 0-2 (39 runs)."""
    return _study("paper", SEEDS)


def book_configs() -> list[dict[str, Any]]:
    """The scaled Fashion-MNIST analogue the book renders, seeds 0-2 (39 runs)."""
    return _study("book", SEEDS)


def smoke_configs() -> list[dict[str, Any]]:
    """Seconds-long runs for the notebook tests: ResNet / ACN / H-ACN on 10 and 2 classes, seed 0."""
    return _study("smoke", (0,), rules=("resnet", "acn", "hacn"), mus=(0.25,), dense=False)


#: epochs of the converged study over the 55,000 training images (430 steps an epoch, 12,900 steps a run)
LONG_EPOCHS = 30


def long_configs() -> list[dict[str, Any]]:
    """The converged study (``hacn-mixer-long``): the book's Mixer on all 55,000 training images, 30 epochs.

    In the order the background workers take them, so that what finishes first answers the most:
    ResNet / ACN / H-ACN on 10 and 2 classes seed by seed (18 runs); then the half-budget H-ACN runs that
    test whether the residual weights had settled (15 epochs, 6 runs at half the cost); then Table 2's
    mu = 0.75 and 1 and the public-code rule (9); then the public-code rule on 2 classes (3), added once
    its 10-class runs had ended near Table 3's CIFAR-10 Gamma while Eq. 2's stayed at 0.25, so that Table 3's
    task-difficulty claim is judged under that rule too; last the equal-budget rules (12). 48 runs.
    """
    long = dict(train_subset=None, epochs=LONG_EPOCHS, record_every_steps=50)
    configs = [make_config(rule, seed, num_classes=k, **long)
               for seed in SEEDS for k in (10, 2) for rule in ("resnet", "acn", "hacn")]
    half = long | {"epochs": LONG_EPOCHS // 2}
    configs += [make_config("hacn", seed, num_classes=k, **half) for seed in SEEDS for k in (10, 2)]
    for seed in SEEDS:
        configs += [make_config("hacn", seed, alpha_mu=mu, **long) for mu in TABLE2_MUS if mu != 0.25]
        configs.append(make_config("hacn_code_mixer", seed, **long))
    configs += [make_config("hacn_code_mixer", seed, num_classes=2, **long) for seed in SEEDS]
    for seed in SEEDS:
        configs += [make_config(rule, seed, **long) for rule in ("denseformer", "rezero", "laurel")]
        configs.append(make_config("resnet", seed, arch="dense_mixer", **long))
    return configs


def check_config(config: dict[str, Any]) -> None:
    """Reject configurations this experiment cannot run, naming the field and the allowed values."""
    def choice(name: str, allowed: Sequence[Any]) -> None:
        if config.get(name) not in allowed:
            raise ValueError(f"{name}={config.get(name)!r} is not supported; allowed: {', '.join(map(str, allowed))}")

    choice("dataset", DATASETS)
    choice("arch", ARCHS)
    if config["arch"] == "mixer":
        choice("rule", RULES)
    if config["num_classes"] not in (2, 10):
        raise ValueError(f"num_classes={config['num_classes']!r}: allowed 10 (all classes) or 2 (classes 0 and 1)")
    if config.get("optimizer") != "adamw":
        raise ValueError(f"optimizer={config.get('optimizer')!r} is not supported here; allowed: adamw (Appendix A)")
    for key in ("train_subset", "eval_subset"):
        n = config.get(key)
        if n is not None and (not isinstance(n, int) or n < 1):
            raise ValueError(f"{key}={n!r} must be None or a positive integer")


# ----------------------------------------------------------------------------- data and model


def load_data(config: dict[str, Any]) -> dict[str, tuple[Tensor, Tensor]]:
    """``train`` / ``val`` / ``test`` tensors, standardised with the training mean and std per channel.

    The validation split is ``VAL_SIZE`` images of the training set (fixed
    permutation, ``SUBSET_SEED``); ``train_subset`` then keeps the first images
    of the rest. ``num_classes = 2`` keeps classes 0 and 1 only (before the
    subset: the book's 2-class task has 10,800 training images, fewer than its
    subset of 20,000, so it uses every image of its two classes).
    """
    X, y, Xt, yt, train_idx, val_idx = _splits(config)
    mean, std = _standardisation(X[train_idx])

    def norm(images: Tensor) -> Tensor:
        return (images - mean) / std

    return {"train": (norm(X[train_idx]), y[train_idx]), "val": (norm(X[val_idx]), y[val_idx]),
            "test": (norm(Xt), yt)}


def _splits(config: dict[str, Any]) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
    X, y = image_tensors(config["dataset"], train=True)
    Xt, yt = image_tensors(config["dataset"], train=False)
    if config["num_classes"] == 2:
        keep, keep_t = y < 2, yt < 2
        X, y, Xt, yt = X[keep], y[keep], Xt[keep_t], yt[keep_t]
    perm = torch.randperm(len(X), generator=torch.Generator().manual_seed(SUBSET_SEED))
    n_val = min(VAL_SIZE, len(X) // 10)
    val_idx, train_idx = perm[:n_val], perm[n_val:]
    if config["train_subset"] is not None:
        train_idx = train_idx[: config["train_subset"]]
    if config.get("eval_subset") is not None:  # smoke runs: the first images of the validation and test sets
        val_idx, Xt, yt = val_idx[: config["eval_subset"]], Xt[: config["eval_subset"]], yt[: config["eval_subset"]]
    return X, y, Xt, yt, train_idx, val_idx


def _standardisation(train_images: Tensor) -> tuple[Tensor, Tensor]:
    return train_images.mean(dim=(0, 2, 3), keepdim=True), train_images.std(dim=(0, 2, 3), keepdim=True)


def standardisation(config: dict[str, Any]) -> tuple[Tensor, Tensor]:
    """The per-channel ``(mean, std)``, ``(1, C, 1, 1)``, :func:`load_data` standardises with (pixels =
    ``x * std + mean``, for augmentations that work on pixels)."""
    X, _, _, _, train_idx, _ = _splits(config)
    return _standardisation(X[train_idx])


def build_model(config: dict[str, Any], image_size: int, in_channels: int, *,
                mlp: str | MlpLayer = "fixed") -> nn.Module:
    """The Mixer of ``config`` (its rule and residual-weight init), or the DenseNet-style Mixer.

    ``mlp`` is the MLP layer of the channel-mixing MLPs (:mod:`hacn_core.models.mlp`): this study's runs
    use Appendix A's fixed GELU MLP; a study of learned widths passes an adaptive one.
    """
    common = dict(image_size=image_size, in_channels=in_channels, num_classes=config["num_classes"],
                  patch_size=config["patch_size"], hidden_dim=config["hidden_dim"],
                  token_mlp_dim=config["token_mlp_dim"])
    generator = torch.Generator().manual_seed(config["seed"])
    if config["arch"] == "dense_mixer":
        return DenseMixer(DenseMixerConfig(num_layers=config["dense_layers"], growth=config["dense_growth"],
                                           channel_mlp_dim=config["dense_channel_mlp_dim"], mlp=mlp, **common))
    alpha_init = None
    if config["alpha_mu"] is not None:
        alpha_init = AlphaInit(mu=config["alpha_mu"], sigma=config["alpha_sigma"])
    # the public code's model pieces (hacn-code-recipe), each its own entry; left out, Appendix A's Mixer
    code = {k: config[k] for k in ("block", "class_token", "alpha_dtype") if k in config}
    return MLPMixer(MixerConfig(num_layers=config["num_layers"], channel_mlp_dim=config["channel_mlp_dim"],
                                rule=config["rule"], alpha_init=alpha_init, depth_ln=config["depth_ln"], mlp=mlp,
                                **common, **code),
                    generator=generator)


def epochs_for(config: dict[str, Any], n_train: int) -> int:
    """Epochs of this run: ``epochs`` for 10 classes; for 2 classes as many as give the 10-class step count."""
    if config["num_classes"] == 10 or not config["equal_steps"]:
        return config["epochs"]
    full = {"FashionMNIST": 60000, "CIFAR10": 50000}[config["dataset"]] - VAL_SIZE
    n10 = min(config["train_subset"] or full, full)
    steps10 = config["epochs"] * math.ceil(n10 / config["batch_size"])
    return max(1, round(steps10 / math.ceil(n_train / config["batch_size"])))


# ----------------------------------------------------------------------------- measurements


def train_hacn_mixer(config: dict[str, Any], context: RunContext) -> dict[str, Any]:
    """Train one Mixer of the study and measure Figs. 2, 5-7 and Tables 2-3 on it."""
    check_config(config)
    data = load_data(config)
    X, _ = data["train"]
    torch.manual_seed(config["seed"])
    model = build_model(config, image_size=X.shape[-1], in_channels=X.shape[1])
    epochs = epochs_for(config, len(X))
    train_config = TrainConfig(
        epochs=epochs,
        batch_size=config["batch_size"],
        lr=config["lr"],
        optimizer="adamw",
        weight_decay=config["weight_decay"],  # residual weights and norms are kept out of decay by their roles
        schedule="cosine",
        warmup_epochs=config["warmup_fraction"] * epochs,
        seed=config["seed"],
        record_every_steps=config["record_every_steps"],
        checkpoint_every_minutes=5.0,
    )
    out = fit(model, data["train"], train_config, val=data["val"], test=data["test"],
              checkpoint_dir=context.checkpoint_dir, progress=context.progress)
    c = out.curves
    device = next(model.parameters()).device
    test_x, test_y = data["test"]
    batches = [(test_x[i:i + 1000], test_y[i:i + 1000]) for i in range(0, len(test_x), 1000)]
    layerwise = evaluate_layerwise(model, batches, device=device).tolist()
    # a copy, so the probe's input is not a view of the whole training set's storage
    probe = (X[:config["batch_size"]].clone().to(device), data["train"][1][:config["batch_size"]].to(device))
    epoch_seconds = np.diff([0.0] + list(c["time_s"])) if "time_s" in c else []
    metrics: dict[str, Any] = {
        **classifier_metrics(out, layerwise),
        "parameters": num_parameters(model),
        "epochs": epochs,
        "steps": int(c["step"][-1]) if c.get("step") else None,
        "seconds_per_epoch": float(np.median(epoch_seconds)) if len(epoch_seconds) else None,
        "saved_activation_bytes": saved_activation_bytes(model, probe),
    }
    for std in NOISE_STDS:
        metrics[f"noise_accuracy/{std:g}"] = noise_accuracy(model, test_x, test_y, std)
    if device.type == "cuda":
        metrics["peak_cuda_bytes"] = int(torch.cuda.max_memory_allocated(device))
    keep_trained_weights(config, model, context)  # only with $HACN_KEEP_MODELS (not part of the result)
    curves: dict[str, list] = {
        "epoch": c["epoch"], "train_loss": c["train_loss"], "time_s": c["time_s"],
        "eval_epoch": c["eval_epoch"], "val_accuracy": c["val_accuracy"],
        "record_step": c["record_step"], "layerwise_test_accuracy": layerwise,
    }
    if config["arch"] == "mixer":
        weight_metrics, weight_curves = residual_weight_summary(c, config["num_layers"])
        metrics |= weight_metrics
        curves |= weight_curves
        if config["rule"] == "hacn":
            twin = dict(config, rule="resnet", alpha_mu=None, alpha_sigma=None)
            metrics["extra_parameters"] = metrics["parameters"] - num_parameters(
                build_model(twin, image_size=X.shape[-1], in_channels=X.shape[1]))
    return {"metrics": metrics, "curves": curves, "device": out.device}


def dry_run_plan(config: dict[str, Any]) -> DryRunPlan:
    """One run's dry run (``hacn_core.engine.dry_run``): :func:`build_model` on synthetic images of the
    dataset's shape, AdamW as :func:`train_hacn_mixer` trains, the epochs of :func:`epochs_for` and the
    training-set size of :func:`load_data` (balanced classes; 2 classes keep 2/10 of them, then the
    validation images and ``train_subset``)."""
    from hacn_core.engine.data import IMAGE_TRAIN_SPLITS
    from hacn_core.engine.dry_run import DryRunPlan, classification_batch

    check_config(config)
    split = IMAGE_TRAIN_SPLITS[config["dataset"]]
    total = split.n_train * config["num_classes"] // split.classes
    n_train = min(total - min(VAL_SIZE, total // 10), config["train_subset"] or total)
    train = TrainConfig(epochs=epochs_for(config, n_train), batch_size=config["batch_size"], lr=config["lr"],
                        optimizer="adamw", weight_decay=config["weight_decay"], schedule="cosine")
    key = {k: config[k] for k in ("dataset", "arch", "rule", "num_classes", *_PAPER_MODEL, "depth_ln")}
    return DryRunPlan(key=key | {"residual_weights": config["alpha_mu"] is not None},
                      model=lambda: build_model(config, image_size=split.shape[-1], in_channels=split.shape[0]),
                      batch=classification_batch(split.shape, config["num_classes"]), train=train, n_train=n_train)


EXPERIMENT = Experiment(
    id=EXPERIMENT_ID,
    title="H-ACN MLP-Mixer: ResNet / ACN / H-ACN and scaled residuals (H-ACN Figs. 2, 5-7, Tables 2-3)",
    train=train_hacn_mixer,
    plan=dry_run_plan,
    configs={"smoke": smoke_configs, "book": book_configs, "paper": paper_configs},
    setting={
        "smoke": "2-layer Mixer, 2,000 Fashion-MNIST images, 1 epoch, seed 0",
        "book": "16-layer Mixer scaled to d 32 / patch 7 on 20,000 Fashion-MNIST images, 6 epochs "
                "(2-class: equal steps), AdamW cosine, seeds 0-2",
        "paper": "Appendix A Mixer on CIFAR-10 (and CIFAR-2), AdamW lr 1e-3 cosine, batch 64, 300 epochs, seeds 0-2",
    },
)


LONG_ID = "hacn-mixer-long"

LONG = Experiment(
    id=LONG_ID,
    title="H-ACN MLP-Mixer trained until the residual weights settle (H-ACN Figs. 2, 3c, 5-7, Tables 2-3)",
    train=train_hacn_mixer,
    plan=dry_run_plan,
    configs={"smoke": smoke_configs, "book": long_configs, "paper": paper_configs},
    setting={
        "smoke": "2-layer Mixer, 2,000 Fashion-MNIST images, 1 epoch, seed 0",
        "book": f"16-layer Mixer scaled to d 32 / patch 7 on all 55,000 Fashion-MNIST training images, "
                f"{LONG_EPOCHS} epochs (12,900 steps; 2-class: equal steps), AdamW cosine, seeds 0-2",
        "paper": "Appendix A Mixer on CIFAR-10 (and CIFAR-2), AdamW lr 1e-3 cosine, batch 64, 300 epochs, seeds 0-2",
    },
    # The ledger reads the converged runs (chapter 2; the half-budget check runs excluded); the short-budget
    # study above is chapter 3's.
    links=(
        tuple(Link(table2_item(mu), "test_accuracy",
                   {"arch": "mixer", "rule": "hacn", "alpha_mu": mu, "num_classes": 10, "epochs": LONG_EPOCHS}, scale=100.0,
                   tolerance=1.0) for mu in TABLE2_MUS)
        + (
            Link(table3_item(10), "gamma", {"rule": "hacn", "alpha_mu": 0.25, "num_classes": 10, "epochs": LONG_EPOCHS}, tolerance=0.05),
            Link(table3_item(2), "gamma", {"rule": "hacn", "alpha_mu": 0.25, "num_classes": 2, "epochs": LONG_EPOCHS}, tolerance=0.05),
            Link("hacn/fig7/extra-parameters", "extra_parameters",
                 {"rule": "hacn", "alpha_mu": 0.25, "num_classes": 10, "epochs": LONG_EPOCHS}, tolerance=0.0),
            Link("hacn/fig2a/layerwise-accuracy", "first_half_exit_accuracy",
                 {"rule": "hacn", "alpha_mu": 0.25, "num_classes": 10, "epochs": LONG_EPOCHS}, scale=100.0, unit="%"),
            Link("hacn/fig6b/gamma-evolution", "gamma_max",
                 {"rule": "hacn", "alpha_mu": 0.25, "num_classes": 10, "epochs": LONG_EPOCHS}, unit="Γ"),
        )
    ),
)


# ----------------------------------------------------------------------------- cost, measured side by side

COST_ID = "hacn-mixer-cost"
COST_ARCHS: tuple[tuple[str, str], ...] = tuple(("mixer", r) for r in STUDY_RULES) + (("dense_mixer", "resnet"),)


def cost_config(profile: str) -> dict[str, Any]:
    """The step-cost measurement at ``profile``'s Mixer size (the training runs' model and batch)."""
    base = make_config("resnet", 0, profile=profile)
    keep = ("dataset", "patch_size", "hidden_dim", "num_layers", "token_mlp_dim", "channel_mlp_dim", "dense_layers",
            "dense_growth", "dense_channel_mlp_dim", "depth_ln", "batch_size", "lr", "weight_decay", "seed")
    return {k: base[k] for k in keep} | {"num_classes": 10, "repeats": 3 if profile == "smoke" else 9,
                                         "steps": 2 if profile == "smoke" else 5}


def measure_step_costs(config: dict[str, Any], context: RunContext) -> dict[str, Any]:
    """Time one AdamW training step of every architecture, interleaved, on one device.

    Each repeat times ``steps`` steps of every architecture in turn (after one
    untimed step), so load changes hit all of them alike. CPU: process CPU time
    on one thread; CUDA: wall time between synchronisations, and the peak memory
    of each architecture's block. Reported: median ms per step, the median over
    repeats of the ratio to the ResNet rule, saved activation bytes, parameters.
    """
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    size = {"FashionMNIST": (28, 1), "CIFAR10": (32, 3)}[config["dataset"]]
    gen = torch.Generator().manual_seed(config["seed"])
    x = torch.randn(config["batch_size"], size[1], size[0], size[0], generator=gen).to(device)
    y = torch.randint(0, 10, (config["batch_size"],), generator=gen).to(device)
    models, opts, names = [], [], []
    for arch, rule in COST_ARCHS:
        cfg = make_config(rule, config["seed"], profile="book", arch=arch) | {
            k: config[k] for k in config if k not in ("repeats", "steps")}
        check_config(cfg)
        torch.manual_seed(config["seed"])
        m = build_model(cfg, image_size=size[0], in_channels=size[1]).to(device)
        models.append(m)
        opts.append(torch.optim.AdamW(m.parameters(), lr=config["lr"], weight_decay=config["weight_decay"]))
        names.append("dense_mixer" if arch == "dense_mixer" else rule)

    def step(i: int) -> None:
        loss = nn.functional.cross_entropy(models[i](x), y)
        opts[i].zero_grad(set_to_none=True)
        loss.backward()
        opts[i].step()

    peak: dict[str, int] = {}
    times = interleaved_step_times({n: (lambda i=i: step(i)) for i, n in enumerate(names)},
                                   repeats=config["repeats"], timed=config["steps"], device=device, peak=peak)
    metrics: dict[str, Any] = step_cost_metrics(times, "resnet")
    for i, n in enumerate(names):
        metrics[f"{n}/parameters"] = num_parameters(models[i])
        metrics[f"{n}/saved_activation_bytes"] = saved_activation_bytes(models[i], (x, y))
        if device.type == "cuda":
            metrics[f"{n}/peak_cuda_bytes"] = peak[n]
    return {"metrics": metrics, "curves": {f"{n}/seconds_per_step": times[n] for n in names},
            "device": str(device)}


def cost_dry_run_plan(config: dict[str, Any]) -> list[DryRunPlan]:
    """The dry run of the cost measurement: one plan per architecture :func:`measure_step_costs` builds,
    each taking ``repeats x (1 untimed + steps timed)`` AdamW steps on one batch of ``batch_size``
    (written as ``repeats`` epochs over ``(steps + 1) x batch_size`` images)."""
    from hacn_core.engine.data import IMAGE_TRAIN_SPLITS
    from hacn_core.engine.dry_run import DryRunPlan, classification_batch

    split = IMAGE_TRAIN_SPLITS[config["dataset"]]
    train = TrainConfig(epochs=config["repeats"], batch_size=config["batch_size"], lr=config["lr"], optimizer="adamw",
                        weight_decay=config["weight_decay"], no_decay_roles=())  # torch.optim.AdamW on every parameter
    plans = []
    for arch, rule in COST_ARCHS:
        run = make_config(rule, config["seed"], profile="book", arch=arch) | {
            k: config[k] for k in config if k not in ("repeats", "steps")}
        check_config(run)
        plans.append(DryRunPlan(
            key={k: run[k] for k in ("dataset", "arch", "rule", *_PAPER_MODEL, "depth_ln")}
            | {"residual_weights": run["alpha_mu"] is not None},
            model=lambda run=run: build_model(run, image_size=split.shape[-1], in_channels=split.shape[0]),
            batch=classification_batch(split.shape, 10), train=train,
            n_train=(config["steps"] + 1) * config["batch_size"]))
    return plans


COST = Experiment(
    id=COST_ID,
    title="H-ACN Mixer: step time, activation memory and parameters of every residual rule, side by side",
    train=measure_step_costs,
    plan=cost_dry_run_plan,
    configs={p: (lambda p=p: [cost_config(p)]) for p in ("smoke", "book", "paper")},
    setting={
        "smoke": "2-layer Mixer, 3 x 2 timed steps per architecture",
        "book": "the book's 16-layer d-32 Mixer, batch 128, 9 repeats x 5 steps, one CPU thread",
        "paper": "Appendix A's Mixer, batch 64, 9 repeats x 5 steps (on a GPU when there is one)",
    },
)
