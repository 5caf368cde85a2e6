"""H-ACN Vision Transformer study (H-ACN Sec. 3.3, Figs. 1a, 3a-c; Table 3's ImageNet Gamma).

One experiment, ``hacn-vit``, trains 12-layer ViTs (:class:`hacn_core.models.vit.ViT`)
whose blocks are joined by the ResNet, ACN or H-ACN rule (``a_i ~ N(0.25, 0.005)``,
Sec. 3.1) and measures, per run:

* the final test accuracy (Fig. 3b) and the validation accuracy after every epoch
  (Fig. 3a: accuracy against epochs);
* the training loss per epoch (Fig. 3b's claim, "H-ACN trains like a ResNet");
* the layer-wise test accuracy of every exit from one forward pass (the shared head
  on every partial sum; Fig. 4's layer-wise view, Figs. 2a / 7 for the Mixer);
* accuracy under zero-mean Gaussian input noise of standard deviation
  ``NOISE_STDS`` (:mod:`hacn_core.hacn.studies.common`) on the standardised test images, one fixed draw (Fig. 3c);
* for H-ACN: the residual weights every ``record_every_steps`` steps, hence
  ``Gamma`` over training and at the end (Table 3), ``Delta_t = ||a_T - a_t||``
  (Fig. 6a's settling test) and the converged ``a`` (Fig. 1a's connectivity matrix);
* cost: parameters, seconds per epoch, saved activation bytes of one batch.

Profiles
--------
``paper``: ImageNet-1k (torchvision ``ImageFolder`` layout under
``$HACN_DATA/imagenet/{train,val}``; the user downloads it, the error says how),
ViT-S/16 (224 px, width 384, 6 heads, MLP 1536, 12 layers; Beyer et al. 2022's
"simple ViT", the ``ViTConfig`` defaults), 300 epochs (Sec. 3.3), batch 1024,
AdamW lr 1e-3, cosine with 10k warmup steps, gradient clipping 1.0, Inception
crop + flip + RandAugment(2, 10) and Mixup with ``mixup = 0.2`` (Beyer et al.'s
recipe: App. A says only "We used the setup described in (Beyer et al., 2022)", and
Tables 4-5 list the GPT-2 settings, not the ViT's). Beyer et al.'s decoupled weight
decay 1e-4 is ``weight_decay = 0.1`` in ``torch.optim.AdamW``'s convention (decay
``lr x wd``: 1e-3 x 0.1). Mixup (:class:`hacn_core.engine.augment.Mixup`, Zhang et al.
2018) trains on ``x' = lam x + (1 - lam) x[perm]`` with the loss ``lam CE(y) +
(1 - lam) CE(y[perm])``, one ``lam ~ Beta(0.2, 0.2)`` per batch as in Beyer et al.'s
code; validation and test images are not mixed, so the recorded ``train_loss`` is the
Mixup objective while the accuracies and ``val_loss`` are on plain images. The
``mixup`` key exists in the paper profile's configurations only, so the book and smoke
configurations (and the hashes their stored runs are filed under) are unchanged.

``book``: Fashion-MNIST (offline), the paper's depth (12 layers) at a width that
fits a 2-core CPU: 28 px images in 7 x 7 patches (16 tokens), width 64, 4 heads,
MLP 256 (0.60M parameters), all 55,000 training images (5,000 held out for
validation), batch 128, ``BOOK_EPOCHS`` epochs, AdamW lr 1e-3, weight decay 0.01,
cosine with 5% warmup, clipping 1.0; seeds 0-2.

How the book size was chosen (measured, one CPU thread)
--------------------------------------------------------
``benchmarks/bench_transformer_studies.py`` times one AdamW step of each rule at
the book size, interleaved (process CPU time, one thread, median of 5 repeats x 3
steps, batch 128, AdamW with clipping; on this project's 2-core machine while two
other trainings ran):

=========  ===========  ===============
rule       ms / step    ratio to ResNet
=========  ===========  ===============
resnet     181          1.00
acn        177          0.99
hacn       186          1.03
=========  ===========  ===============

(a patch-4 ViT, 49 tokens at width 64 / MLP 128, took 441 ms a step: 2.4x the
cost for the same depth, so the book keeps the Mixer study's patch 7.) At about
0.18 s a step, 15 epochs (6,450 steps) are 19.1-20.0 CPU-minutes of training,
plus about a minute of evaluation (validation every epoch, then the test set
clean, layer-wise and at four noise levels): about 21 CPU-minutes a run, 9 runs
(3 rules x 3 seeds) about 3.1 CPU-hours.

``smoke``: 2 layers, width 16, 512 training images, one epoch, the first 1,000 test
images, seed 0: seconds.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import Tensor, nn

from hacn_core.engine.augment import Mixup, check_mixup_alpha
from hacn_core.engine.data import DatasetMissingError, data_root
from hacn_core.engine.registry import Experiment, with_overrides
from hacn_core.engine.results import RunContext
from hacn_core.engine.training import TrainConfig, fit
from hacn_core.hacn.connectivity import evaluate_layerwise
from hacn_core.hacn.studies import common as measure
from hacn_core.hacn.studies.mixer import load_data as load_image_splits
from hacn_core.models.mixer import num_parameters
from hacn_core.models.vit import ViT, ViTConfig

if TYPE_CHECKING:  # pragma: no cover
    from hacn_core.engine.dry_run import DryRunPlan

EXPERIMENT_ID = "hacn-vit"
DATASETS: tuple[str, ...] = ("FashionMNIST", "ImageNet")
#: the rules of Fig. 3; ``hacn_code_vit`` (the public code's ViT rule) is a named option
STUDY_RULES: tuple[str, ...] = ("resnet", "acn", "hacn")
RULE_OPTIONS: tuple[str, ...] = STUDY_RULES + ("hacn_code_vit",)
DEFAULT_MU: dict[str, float] = {"hacn": 0.25, "hacn_code_vit": 0.5}  # rules with Eq. 2 weights a_i: init mean
WEIGHTED_RULES: tuple[str, ...] = tuple(DEFAULT_MU)
SEEDS: tuple[int, ...] = (0, 1, 2)
BOOK_EPOCHS = 15
#: one AdamW step of the book-size model per rule, ms of process CPU time on one thread, as measured by
#: benchmarks/bench_transformer_studies.py (module docstring; two other trainings shared the 2-core
#: machine): what the book budget was sized from
BOOK_STEP_MS: dict[str, float] = {"resnet": 181.0, "acn": 177.0, "hacn": 186.0}
IMAGENET_FOLDER = "imagenet"  # under the data root: train/<wnid>/*.JPEG and val/<wnid>/*.JPEG
IMAGENET_MEAN_STD = ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))  # standardised like Fashion-MNIST's inputs
#: Beyer et al. (2022)'s Mixup concentration, ``lam ~ Beta(0.2, 0.2)``: a key of the paper profile only
PAPER_MIXUP = 0.2

_MODEL_KEYS = ("image_size", "in_channels", "num_classes", "patch_size", "dim", "num_layers", "num_heads", "mlp_dim")
_PAPER_MODEL = dict(image_size=224, in_channels=3, num_classes=1000, patch_size=16, dim=384, num_layers=12,
                    num_heads=6, mlp_dim=1536)
_BOOK_MODEL = dict(image_size=28, in_channels=1, num_classes=10, patch_size=7, dim=64, num_layers=12,
                   num_heads=4, mlp_dim=256)
_SMOKE_MODEL = dict(_BOOK_MODEL, dim=16, num_layers=2, num_heads=2, mlp_dim=32)


# ----------------------------------------------------------------------------- configurations


def make_config(rule: str, seed: int, *, profile: str = "book", alpha_mu: float | None = None,
                **overrides: Any) -> dict[str, Any]:
    """One run at ``profile``'s scale (module docstring). ``alpha_mu``: the mean of ``a_i ~ N(mu, 0.005)``
    for the weighted rules (default: the rule's, 0.25 for ``hacn``); ``None`` for the others."""
    if profile == "paper":
        model = _PAPER_MODEL
        data = dict(dataset="ImageNet", train_subset=None, test_subset=None, epochs=300, batch_size=1024,
                    weight_decay=0.1,
                    warmup_fraction=10_000 / (300 * math.ceil(1_281_167 / 1024)), record_every_steps=1000,
                    num_workers=8, mixup=PAPER_MIXUP)
    elif profile == "book":
        model = _BOOK_MODEL
        data = dict(dataset="FashionMNIST", train_subset=None, test_subset=None, epochs=BOOK_EPOCHS, batch_size=128,
                    weight_decay=0.01, warmup_fraction=0.05, record_every_steps=50, num_workers=0)
    elif profile == "smoke":
        model = _SMOKE_MODEL
        data = dict(dataset="FashionMNIST", train_subset=512, test_subset=1000, epochs=1, batch_size=64,
                    weight_decay=0.01,
                    warmup_fraction=0.05, record_every_steps=2, num_workers=0)
    else:
        raise ValueError(f"profile={profile!r} is not a profile; allowed: smoke, book, paper")
    config: dict[str, Any] = {
        **measure.residual_fields(rule, alpha_mu, DEFAULT_MU),
        **model,
        **data,
        **measure.ADAMW_COSINE,
        "seed": seed,
    }
    return with_overrides(config, overrides)


def check_config(config: dict[str, Any]) -> None:
    """Reject configurations this experiment cannot run, naming the field and the allowed values."""
    measure.check_choices(config, {"dataset": DATASETS, "rule": RULE_OPTIONS, **measure.TRAINER_CHOICES})
    measure.check_counts(config, _MODEL_KEYS + ("epochs", "batch_size", "record_every_steps"),
                         optional=("train_subset", "test_subset"))
    measure.check_residual_init(config, WEIGHTED_RULES)
    if config.get("mixup") is not None:  # absent (book, smoke) or None: no Mixup
        check_mixup_alpha(config["mixup"], "mixup")
    shape = (config["num_classes"], config["in_channels"], config["image_size"])
    if config["dataset"] == "FashionMNIST" and shape != (10, 1, 28):
        raise ValueError(f"FashionMNIST has 10 classes of 1 x 28 x 28 images; got num_classes={config['num_classes']}, "
                         f"in_channels={config['in_channels']}, image_size={config['image_size']}")
    if config["dataset"] == "ImageNet" and config["test_subset"] is not None:
        raise ValueError("test_subset must be None for ImageNet (the whole validation set is the test set)")


# ----------------------------------------------------------------------------- data and model


def imagenet_splits(config: dict[str, Any], root: str | Path | None = None) -> dict[str, Any]:
    """ImageNet-1k ``train`` / ``val`` ImageFolder datasets with Beyer et al.'s crops (module docstring).

    The images are not downloadable by script: the error names the folders and how to fill them.
    """
    base = data_root(root) / IMAGENET_FOLDER
    missing = [s for s in ("train", "val") if not (base / s).is_dir()]
    if missing:
        raise DatasetMissingError(
            f"ImageNet-1k not found: {', '.join(str(base / s) for s in missing)} missing. Download ILSVRC2012 "
            "(https://image-net.org/download, after accepting its terms: ILSVRC2012_img_train.tar and "
            "ILSVRC2012_img_val.tar) and unpack it in torchvision's ImageFolder layout, one folder per class "
            f"(wnid): {base}/train/n01440764/*.JPEG, {base}/val/n01440764/*.JPEG (the validation images sorted "
            "into class folders, e.g. with the valprep.sh script of the PyTorch ImageNet example). "
            "Set $HACN_DATA to put the data root elsewhere."
        )
    from torchvision import datasets, transforms

    size = config["image_size"]
    norm = transforms.Normalize(*IMAGENET_MEAN_STD)
    train_tf = transforms.Compose([transforms.RandomResizedCrop(size, scale=(0.05, 1.0)),  # Inception crop
                                   transforms.RandomHorizontalFlip(), transforms.RandAugment(2, 10),
                                   transforms.ToTensor(), norm])
    eval_tf = transforms.Compose([transforms.Resize(int(size * 256 / 224)), transforms.CenterCrop(size),
                                  transforms.ToTensor(), norm])
    return {"train": datasets.ImageFolder(str(base / "train"), train_tf),
            "test": datasets.ImageFolder(str(base / "val"), eval_tf)}


def build_model(config: dict[str, Any]) -> ViT:
    """The ViT of ``config``: its rule, its residual-weight init, Depth-adaptive LayerNorm for the ACN family."""
    alpha_init = measure.alpha_init_of(config)
    vit_config = ViTConfig(**{k: config[k] for k in _MODEL_KEYS}, rule=config["rule"], alpha_init=alpha_init,
                           depth_ln=config["depth_ln"])
    return ViT(vit_config, generator=torch.Generator().manual_seed(config["seed"]))


def train_config(config: dict[str, Any]) -> TrainConfig:
    """The trainer settings of one run (AdamW, cosine with warmup, clipping)."""
    return TrainConfig(
        epochs=config["epochs"], batch_size=config["batch_size"], lr=config["lr"], optimizer="adamw",
        weight_decay=config["weight_decay"],  # residual weights and norms are kept out of decay by their roles
        schedule="cosine", warmup_epochs=config["warmup_fraction"] * config["epochs"],
        grad_clip=config["grad_clip"], seed=config["seed"], record_every_steps=config["record_every_steps"],
        num_workers=config["num_workers"], checkpoint_every_minutes=5.0,
    )


@torch.no_grad()
def noise_accuracies_over(model: nn.Module, batches: Iterable[tuple[Tensor, Tensor]],
                          stds: Sequence[float] = measure.NOISE_STDS,
                          seed: int = measure.NOISE_SEED) -> dict[float, float]:
    """Accuracy at every noise level in one pass over ``batches`` (data too large to hold, e.g. ImageNet):
    batch ``k`` gets the draw of ``Generator(seed + k)``, the same for every run and every level."""
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    correct = dict.fromkeys(stds, 0)
    total = 0
    for k, (x, y) in enumerate(batches):
        noise = torch.randn(x.shape, generator=torch.Generator().manual_seed(seed + k), dtype=x.dtype)
        for std in stds:
            correct[std] += int((model((x + std * noise).to(device)).argmax(-1).cpu() == y).sum())
        total += len(y)
    model.train(was_training)
    return {std: c / max(total, 1) for std, c in correct.items()}


# ----------------------------------------------------------------------------- one run


def train_hacn_vit(config: dict[str, Any], context: RunContext) -> dict[str, Any]:
    """Train one ViT of the study and measure Fig. 3a-c, Table 3's Gamma and the layer-wise accuracy on it."""
    check_config(config)
    if config["dataset"] == "ImageNet":
        splits = imagenet_splits(config)
        train, val, test = splits["train"], None, splits["test"]
    else:
        splits = load_image_splits(config)  # the Mixer study's split: 5,000 validation images, standardised
        train, val, test = splits["train"], splits["val"], splits["test"]
        if config["test_subset"] is not None:  # the smoke profile: the first test images only
            test = (test[0][:config["test_subset"]], test[1][:config["test_subset"]])
    torch.manual_seed(config["seed"])
    model = build_model(config)
    mixup = Mixup(config["mixup"]) if config.get("mixup") is not None else None  # training batches only
    out = fit(model, train, train_config(config), val=val if val is not None else test, test=test,
              forward=mixup, checkpoint_dir=context.checkpoint_dir, progress=context.progress)
    c = out.curves
    device = next(model.parameters()).device
    if isinstance(test, tuple):
        test_x, test_y = test
        batches = [(test_x[i:i + 1000], test_y[i:i + 1000]) for i in range(0, len(test_x), 1000)]
        noise = {std: measure.noise_accuracy(model, test_x, test_y, std) for std in measure.NOISE_STDS}
        probe = (train[0][:config["batch_size"]].clone().to(device), train[1][:config["batch_size"]].to(device))
    else:  # an ImageFolder: read once per measurement through a loader
        from torch.utils.data import DataLoader

        loader = DataLoader(test, batch_size=256, num_workers=config["num_workers"])
        batches = loader
        noise = noise_accuracies_over(model, loader)
        x0, y0 = next(iter(DataLoader(test, batch_size=min(config["batch_size"], 64))))
        probe = (x0.to(device), y0.to(device))
    layerwise = evaluate_layerwise(model, batches, device=device).tolist()
    epoch_seconds = np.diff([0.0] + list(c["time_s"]))
    metrics: dict[str, Any] = {
        **measure.classifier_metrics(out, layerwise),
        "parameters": num_parameters(model),
        "epochs": config["epochs"],
        "steps": int(c["step"][-1]),
        "seconds_per_epoch": float(np.median(epoch_seconds)),
        "saved_activation_bytes": measure.saved_activation_bytes(model, probe),
    }
    metrics |= {f"noise_accuracy/{std:g}": acc for std, acc in noise.items()}
    if device.type == "cuda":
        metrics["peak_cuda_bytes"] = int(torch.cuda.max_memory_allocated(device))
    measure.keep_trained_weights(config, model, context)
    curves: dict[str, list] = {
        "epoch": c["epoch"], "train_loss": c["train_loss"], "time_s": c["time_s"],
        "eval_epoch": c["eval_epoch"], "val_accuracy": c["val_accuracy"], "val_loss": c["val_loss"],
        "record_step": c["record_step"], "layerwise_test_accuracy": layerwise,
    }
    weight_metrics, weight_curves = measure.residual_weight_summary(c, config["num_layers"])
    metrics |= weight_metrics
    curves |= weight_curves
    return {"metrics": metrics, "curves": curves, "device": out.device}


def dry_run_plan(config: dict[str, Any]) -> DryRunPlan:
    """One run's dry run: :func:`build_model` on synthetic images of the configuration's shape, AdamW as
    :func:`train_hacn_vit` trains, the training-set size of the dataset (Fashion-MNIST: 55,000 after the
    validation images, or ``train_subset``; ImageNet-1k: 1,281,167)."""
    from hacn_core.engine.dry_run import DryRunPlan, classification_batch

    check_config(config)
    total = 1_281_167 if config["dataset"] == "ImageNet" else 55_000
    n_train = min(total, config["train_subset"] or total)
    shape = (config["in_channels"], config["image_size"], config["image_size"])
    key = {k: config[k] for k in ("dataset", "rule", *_MODEL_KEYS, "depth_ln")}
    return DryRunPlan(key=key | {"residual_weights": config["alpha_mu"] is not None},
                      model=lambda: build_model(config), batch=classification_batch(shape, config["num_classes"]),
                      train=train_config(config), n_train=n_train)


EXPERIMENT = Experiment(
    id=EXPERIMENT_ID,
    title="H-ACN ViT: ResNet / ACN / H-ACN vision transformers (H-ACN Sec. 3.3, Figs. 1a, 3a-c, Table 3)",
    train=train_hacn_vit,
    plan=dry_run_plan,
    configs=measure.rule_grid(make_config, STUDY_RULES, SEEDS),
    setting={
        "smoke": "2-layer ViT (width 16), 512 Fashion-MNIST images, 1 epoch, seed 0",
        "book": f"12-layer ViT, width 64, 4 heads, MLP 256, patch 7 (0.60M parameters) on all 55,000 Fashion-MNIST "
                f"training images, {BOOK_EPOCHS} epochs at batch 128 (6,450 steps), AdamW 1e-3 cosine, seeds 0-2; "
                "sized from a measured 0.18 s per step on one CPU thread (ResNet 181 ms, ACN 177, H-ACN 186): "
                "about 21 CPU-minutes a run, 3.1 CPU-hours for the 9 runs",
        "paper": "ViT-S/16 (Beyer et al. 2022) on ImageNet-1k, 300 epochs, batch 1024, AdamW 1e-3 (wd 1e-4 "
                 "decoupled), cosine with 10k warmup steps, clipping 1.0, Inception crop + RandAugment, Mixup 0.2, "
                 "seeds 0-2",
    },
)
