"""AWNN on images: ResNet-20 with an adaptive classifier against fixed ones (Table 1's image rows, Fig. 9).

What one run is
    One ResNet-20 (:mod:`hacn_core.models.resnet20`, He et al. 2016) whose classifier
    on the pooled features is fixed (Table 4's hidden widths 0, 32, 128, 256, 512;
    0 is a linear classifier) or an :class:`~hacn_core.awnn.AdaptiveMLP` with one
    LeakyReLU hidden layer whose width is learned (Eqs. 11-14, Algorithm 1), trained
    on one image task. Stored per run: the test accuracy at the epoch with the best
    validation accuracy (AWNN Sec. 4's protocol, :func:`~hacn_core.awnn.studies.common.best_record`),
    the classifier's width at that epoch and at the end, per epoch the validation and
    test accuracy (and, adaptive, width, rate and the terms of Eq. 13), and the width
    every ``trace_every`` optimizer steps (Fig. 9's width curve,
    :class:`~hacn_core.awnn.callback.WidthTrace`).

The paper's setting (Sec. 4, App. B Table 2, App. C.2 Table 4), and how each point is read here
    * SGD, learning rate 0.1, momentum 0.9, weight decay 1e-4, x0.1 at epochs 50, 100
      and 150 of 200, batch 128 (Table 4). The weight decay goes to every weight the
      trainer decays by default (BatchNorm parameters, biases and the rate are kept
      out, :data:`~hacn_core.engine.optim.DEFAULT_NO_DECAY_ROLES`), the adaptive
      head's weights included (its prior of Eq. 13 comes on top).
    * Adaptive head: starting rate 0.02 (116 neurons at ``k = 0.9``, App. C.2's
      "approximately 128"), ``sigma_theta = 1`` (Table 4), uninformative rate prior,
      kaiming+ and new neurons from N(0, 1) (the library's defaults).
    * The loss of the adaptive runs is Eq. 13 divided by ``N``
      (``ELBOLoss(per_sample=True)``: the same minimiser). Undivided, the
      predictive term is ``N`` = 53,000 times a mean cross-entropy and SGD at
      learning rate 0.1 drives the rate to 0 within a step (we tried it: the
      width's quantile overflows); divided, the fixed and adaptive runs see
      gradients of the same scale, as Table 4's shared recipe presumes.
    * Splits (Table 2): the standard training set cut into an outer training and
      validation part, stratified and seeded (``data_seed``): MNIST 53,000 / 7,000,
      CIFAR 44,000 / 6,000; the standard test set (10,000). Fashion-MNIST, our
      second offline task, is cut like MNIST.
    * Preprocessing: "taken from the original paper" (Sec. 4): per-channel mean and
      std of the outer training part (He et al. subtract the per-pixel mean; we also
      divide by the std); on CIFAR He et al.'s augmentation, pad 4 and random crop
      with horizontal flip (:func:`hacn_core.engine.augment.random_crop_flip`; the
      zero padding is applied after the normalisation, as He et al. pad the
      mean-subtracted image). MNIST and Fashion-MNIST are not augmented.
    * Runs: the paper retrains its selected configuration 10 times; 10 seeds per arm.

Profiles, and why the book's schedule is short
    ``paper``: MNIST, CIFAR-10 and CIFAR-100 (downloaded by torchvision when allowed;
    offline a missing dataset raises :class:`~hacn_core.engine.data.DatasetMissingError`
    naming the folder and how to fetch it), 6 arms (adaptive and Table 4's 5 fixed
    widths) x 10 seeds at Table 4's 200 epochs: 180 runs, GPU-days.
    ``book``: MNIST and Fashion-MNIST (offline), the same 6 arms x seeds 0 and 1, the
    adaptive arm also seeds 2-4 (:data:`BOOK_ADAPTIVE_SEEDS`),
    :data:`BOOK_EPOCHS` = 4 epochs over the full 53,000 images with the x0.1 steps at
    epochs 1, 2 and 3 (Table 4's 50/100/150 of 200, scaled), everything else as in
    the paper: 30 runs. Measured cost (one torch thread, a 2-core machine shared with
    two other trainings, 2026-11-25; median process time of 5 steps after a warm-up,
    forward, backward, SGD step and width update): a training step at batch 128 on
    28x28 images took 0.41-0.43 s with the linear, the 512-wide and the adaptive
    head alike (the convolutions dominate), 0.42 s taken below; an epoch is 415
    steps, 175 s, plus 30 s to evaluate the 17,000 validation and test images
    (measured: 1.76 s per 1,000 images at batch 1,000), so about 205 s. The 24 runs
    of seeds 0-1 x 4 epochs x 205 s = 5.5 CPU-hours, within the ~6 CPU-hours the book
    first allotted to this grid; a fifth epoch would cost 1.4 CPU-hours more, and a
    single seed would give no run-to-run spread for Table 1. The width then moves over 1,660 steps, not 78,000,
    so Fig. 9's "width grows with difficulty" is judged early in training. Two seeds
    left that judgement to a Welch interval with about one degree of freedom (the 24
    runs of 2026-11-27, on an H100: Fashion-MNIST − MNIST width +39.5 ± 89.9), so the
    adaptive arm, whose width the claim is about, gets three more seeds per dataset:
    6 runs, about 1.4 CPU-hours.
    ``smoke``: both offline tasks, the adaptive arm and two fixed widths, 2 epochs on
    128 training images in batches of 64, 64 validation and 64 test images (evaluating them
    after every epoch costs more than the 4 training steps; the chapter trains all six in its smoke run).

Model, trainer and protocol pieces are the tabular studies' (:mod:`hacn_core.awnn.studies.common`).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import torch

from hacn_core.awnn import ELBOLoss, WidthCallback, paper_items, quantile_width
from hacn_core.awnn.callback import WidthTrace
from hacn_core.awnn.studies.common import SplitAccuracy, check_choice, check_count, elbo_curves, selected_epoch
from hacn_core.engine.augment import AugmentNormalize
from hacn_core.engine.data import IMAGE_TRAIN_SPLITS, image_tensors, stratified_split
from hacn_core.engine.registry import Experiment, Link, with_overrides
from hacn_core.engine.results import RunContext
from hacn_core.engine.stats import round_significant
from hacn_core.engine.training import TrainConfig, fit
from hacn_core.models.resnet20 import IMAGE_START_RATE, TABLE4_WIDTHS, ResNet20, ResNet20Config

if TYPE_CHECKING:  # pragma: no cover
    from hacn_core.engine.dry_run import DryRunPlan

EXPERIMENT_ID = "awnn-images"
#: the outer training / validation cut of the standard training set (Table 2; Fashion-MNIST as MNIST)
OUTER_SPLIT: dict[str, tuple[int, int]] = {
    "MNIST": (53_000, 7_000), "FashionMNIST": (53_000, 7_000),
    "CIFAR10": (44_000, 6_000), "CIFAR100": (44_000, 6_000),
}
DATASETS: tuple[str, ...] = tuple(OUTER_SPLIT)
HEADS: tuple[str, ...] = ("adaptive", "fixed")
#: the arms of one dataset: (head, hidden width of a fixed head)
ARMS: tuple[tuple[str, int], ...] = (("adaptive", 0),) + tuple(("fixed", w) for w in TABLE4_WIDTHS)
PAPER_DATASETS: tuple[str, ...] = ("MNIST", "CIFAR10", "CIFAR100")
BOOK_DATASETS: tuple[str, ...] = ("MNIST", "FashionMNIST")
PAPER_SEEDS = tuple(range(10))
BOOK_SEEDS = (0, 1)
#: the adaptive arm's seeds in the book profile: Fig. 9's width comparison needs more than two runs a dataset
BOOK_ADAPTIVE_SEEDS = (0, 1, 2, 3, 4)
PAPER_EPOCHS, PAPER_MILESTONES = 200, (50, 100, 150)
BOOK_EPOCHS, BOOK_MILESTONES = 4, (1, 2, 3)
EVAL_BATCH = 1000
#: the measured costs of the module docstring (process time, one torch thread, the 2-core machine shared with two
#: other trainings): seconds per training step at batch 128 on 28x28 images, and per 1,000 images evaluated
STEP_S, EVAL_S_PER_1000 = 0.42, 1.76


def image_config(dataset: str, head: str, head_width: int, seed: int, **overrides: Any) -> dict[str, Any]:
    """One run at Table 4's recipe (the module docstring gives every choice); ``overrides`` replace entries."""
    config = {
        "dataset": dataset,
        "head": head,
        "head_width": head_width,
        "seed": seed,
        "data_seed": 0,
        "train_subset": None,  # None: the whole outer training part; n: its first n images (smoke)
        "eval_subset": None,  # None: all validation and test images; n: the first n of each (smoke)
        "augment": dataset.startswith("CIFAR"),
        "epochs": PAPER_EPOCHS,
        "milestones": PAPER_MILESTONES,
        "lr": 0.1,
        "momentum": 0.9,
        "weight_decay": 1e-4,
        "batch_size": 128,
        "rate_init": IMAGE_START_RATE,
        "k": 0.9,
        "sigma_theta": 1.0,
        "trace_every": 100,
    }
    return with_overrides(config, overrides)


def paper_configs() -> list[dict[str, Any]]:
    return [image_config(d, h, w, s) for d in PAPER_DATASETS for h, w in ARMS for s in PAPER_SEEDS]


def book_configs() -> list[dict[str, Any]]:
    return [image_config(d, h, w, s, epochs=BOOK_EPOCHS, milestones=BOOK_MILESTONES, trace_every=20)
            for d in BOOK_DATASETS for h, w in ARMS for s in (BOOK_ADAPTIVE_SEEDS if h == "adaptive" else BOOK_SEEDS)]


def smoke_configs() -> list[dict[str, Any]]:
    return [image_config(d, h, w, 0, epochs=2, milestones=(1,), train_subset=128, eval_subset=64, trace_every=1,
                         batch_size=64)
            for d in BOOK_DATASETS for h, w in (("adaptive", 0), ("fixed", 0), ("fixed", 32))]


def check_config(config: dict[str, Any]) -> None:
    """Refuse a configuration this experiment does not implement (the error names field and allowed values)."""
    check_choice("dataset", config["dataset"], DATASETS)
    check_choice("head", config["head"], HEADS)
    check_count("head_width", config["head_width"], 0)
    if config["head"] == "adaptive" and config["head_width"] != 0:
        raise ValueError(f"head_width={config['head_width']!r} is for head='fixed'; allowed with head='adaptive': 0")
    for key in ("train_subset", "eval_subset"):
        if config[key] is not None:
            check_count(key, config[key], 1)
    check_count("trace_every", config["trace_every"], 1)
    if not isinstance(config["augment"], bool):
        raise ValueError(f"augment={config['augment']!r}; allowed: True, False")


# ----------------------------------------------------------------------------- data and model


def load_image_splits(config: dict[str, Any]) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """Normalised train / val / test tensors ``(N, C, H, W)`` of a run (Table 2's outer split).

    The standard training set is cut by :func:`~hacn_core.engine.data.stratified_split`
    (seed ``data_seed``) into :data:`OUTER_SPLIT`'s parts; every split is normalised
    with the per-channel mean and std of the outer training part. ``train_subset`` /
    ``eval_subset`` keep the first images of a part (smoke runs).
    """
    x, y = image_tensors(config["dataset"], train=True)
    x_test, y_test = image_tensors(config["dataset"], train=False)
    train_idx, val_idx = stratified_split(y, OUTER_SPLIT[config["dataset"]], config["data_seed"])
    parts = {"train": (x[train_idx], y[train_idx]), "val": (x[val_idx], y[val_idx]), "test": (x_test, y_test)}
    mean = parts["train"][0].mean(dim=(0, 2, 3), keepdim=True)
    std = parts["train"][0].std(dim=(0, 2, 3), keepdim=True)
    limits = {"train": config["train_subset"], "val": config["eval_subset"], "test": config["eval_subset"]}
    out = {}
    for name, (xs, ys) in parts.items():
        n = limits[name] or len(ys)
        out[name] = (((xs[:n] - mean) / std).contiguous(), ys[:n].contiguous())
    return out


def build_model(config: dict[str, Any]) -> ResNet20:
    """ResNet-20 with the configuration's classifier (weights from the current torch seed)."""
    split = IMAGE_TRAIN_SPLITS[config["dataset"]]
    return ResNet20(ResNet20Config(num_classes=split.classes, in_channels=split.shape[0], head=config["head"],
                                   head_width=config["head_width"], head_rate=config["rate_init"], k=config["k"],
                                   negative_slope=0.01))


def train_config(config: dict[str, Any]) -> TrainConfig:
    """Table 4's trainer: SGD with momentum, weight decay, x0.1 at the milestones."""
    return TrainConfig(
        epochs=config["epochs"], batch_size=config["batch_size"], lr=config["lr"], optimizer="sgd",
        momentum=config["momentum"], weight_decay=config["weight_decay"], schedule="multistep",
        milestones=tuple(config["milestones"]), gamma=0.1,
        fused=False,  # the adaptive head's parameters are strided views (hacn_core.awnn)
        seed=config["seed"], eval_batch_size=EVAL_BATCH, checkpoint_every_minutes=5.0)


def head_width(model: ResNet20) -> int:
    """The classifier's hidden width: the adaptive head's current width, a fixed head's, 0 if linear."""
    if model.config.head == "adaptive":
        return int(model.head.widths()[0])
    return model.config.head_width


# ----------------------------------------------------------------------------- training


def train_image_run(config: dict[str, Any], context: RunContext) -> dict[str, Any]:
    """Train one ResNet-20 run; report test accuracy and classifier width at the best validation epoch."""
    check_config(config)
    splits = load_image_splits(config)
    n_train = len(splits["train"][1])
    torch.manual_seed(config["seed"])
    model = build_model(config)
    adaptive = config["head"] == "adaptive"
    elbo = ELBOLoss(model, n_train, sigma_theta=config["sigma_theta"], per_sample=True) if adaptive else None
    trace = WidthTrace(config["trace_every"])
    callbacks: list[Any] = [SplitAccuracy(splits["val"], splits["test"], batch_size=EVAL_BATCH), trace]
    if adaptive:
        callbacks.insert(0, WidthCallback(elbo))
    channels = splits["train"][0].shape[1]
    forward = AugmentNormalize(torch.zeros(channels), torch.ones(channels)) if config["augment"] else None
    cpu_start = time.process_time()
    out = fit(model, splits["train"], train_config(config), loss_fn=elbo, forward=forward, callbacks=callbacks,
              checkpoint_dir=context.checkpoint_dir, progress=context.progress)
    c = out.curves
    best, curves, selected = selected_epoch(c)
    curves |= {"train_loss": round_significant(c["train_loss"], 6)} | trace.curves()
    if adaptive:
        curves["width"] = [int(w[0]) for w in c["awnn/widths"]]
        curves["rate"] = round_significant([r[0] for r in c["awnn/rates"]], 5)
        curves |= elbo_curves(c)
    widths = curves.get("width", [config["head_width"]] * len(curves["record_epoch"]))
    return {
        "metrics": selected | {
            "width": int(widths[best]),  # the classifier's hidden width at the best validation epoch
            "final_width": head_width(model),
            "start_width": int(widths[0]),
            "n_train": n_train,
            "cpu_s": round(time.process_time() - cpu_start, 2),
        },
        "curves": curves,
        "device": out.device,
    }


# ----------------------------------------------------------------------------- registry


def dry_run_plan(config: dict[str, Any]) -> DryRunPlan:
    """One run's dry run: ResNet-20 with the configuration's head, Table 4's SGD, and for the adaptive
    head the ELBO (divided by ``N``) and Algorithm 1's width update after the step."""
    from hacn_core.engine.dry_run import DryRunPlan, classification_batch

    split = IMAGE_TRAIN_SPLITS[config["dataset"]]
    n_train = config["train_subset"] or OUTER_SPLIT[config["dataset"]][0]
    adaptive = config["head"] == "adaptive"
    return DryRunPlan(
        key={k: config[k] for k in ("dataset", "head", "head_width", "rate_init", "k")},
        model=lambda: build_model(config), batch=classification_batch(split.shape, split.classes),
        train=train_config(config), n_train=n_train,
        loss=(lambda model: ELBOLoss(model, n_train, sigma_theta=config["sigma_theta"], per_sample=True))
        if adaptive else None,
        callbacks=(lambda elbo: [WidthCallback(elbo)]) if adaptive else None,
        note=f"head at its starting width, {quantile_width(config['rate_init'], config['k'])}" if adaptive else "")


def _links() -> tuple[Link, ...]:
    """The ledger's links: Table 1's AWNN cells, a mean over the adaptive runs of a dataset. The fixed cells
    are the width model selection picks, which no single link expresses: the ledger shows them as drawn
    in the chapter (``hacn_core.awnn.paper_items``)."""
    links = []
    for d in PAPER_DATASETS:
        where = {"dataset": d, "head": "adaptive"}
        std = paper_items.item(f"awnn/table1/{d.lower()}-awnn-width").paper_std
        links.append(Link(f"awnn/table1/{d.lower()}-awnn-accuracy", "test_acc", where, scale=100.0, tolerance=1.0))
        # within one run-to-run standard deviation of the paper's own 10 runs, as the tabular rows
        links.append(Link(f"awnn/table1/{d.lower()}-awnn-width", "width", where, tolerance=std))
    return tuple(links)


EXPERIMENT = Experiment(
    id=EXPERIMENT_ID,
    title="ResNet-20 with an adaptive or fixed classifier on images (AWNN Table 1, image rows; Table 4; Fig. 9)",
    train=train_image_run,
    plan=dry_run_plan,
    links=_links(),
    distributed=False,  # the head's width changes during training, which DistributedDataParallel cannot follow
    configs={"smoke": smoke_configs, "book": book_configs, "paper": paper_configs},
    setting={
        "smoke": "MNIST and Fashion-MNIST, adaptive and fixed 0 / 32 heads, 2 epochs on 128 images, seed 0",
        "book": ("MNIST and Fashion-MNIST (offline), adaptive head and Table 4's fixed widths 0-512, seeds 0-1 "
                 "(adaptive: 0-4), Table 4's recipe shortened to 4 epochs (x0.1 at epochs 1, 2, 3): 30 runs, about "
                 "6.9 CPU-hours at a measured 0.42 s per step on one thread"),
        "paper": ("MNIST, CIFAR-10, CIFAR-100 (downloaded), adaptive head and Table 4's fixed widths, 10 seeds, "
                  "Table 4's recipe: SGD 0.1, momentum 0.9, wd 1e-4, x0.1 at 50/100/150 of 200 epochs, batch 128"),
    },
)
