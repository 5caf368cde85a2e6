"""The public code's Mixer, whole: does its recipe give the paper's residual weights? (issue 42, item 3)

The converged Mixer study (``hacn-mixer-long``) trains the book's Mixer with Appendix A's
recipe as the paper states it. Its residual weights stay near their start under Eq. 2
(``Gamma`` 0.247 on 10 classes against Table 3's 0.428; seed-to-seed Pearson 9.6% against
Sec. 4's 92%) and rise under the public code's rule (``hacn_code_mixer``). The public code
differs in more than the rule. This experiment, ``hacn-code-recipe``, trains the same Mixer on
the same data and budget with the public code's *whole* recipe, each piece a configuration
entry that can be switched on its own:

=========================  =======================================================================
entry                      the public code's choice (and ours when the entry is left out)
=========================  =======================================================================
``block``                  ``code``: ``c = DLN(ReLU(W C(DLN(x + t))) + x)`` (:class:`~hacn_core.models.mixer.MixerBlock`);
                           ours ``paper``, ``c = C(LN(x + t))``
``class_token``            a learnable token read by the head; ours: the mean over the patches
``alpha_dtype``            ``float64`` residual weights; ours ``float32``
``random_crop_pad``        random crops after zero-padding 4 pixels (no flip); ours: none
``autoaugment``            AutoAugment's CIFAR-10 policy, per image (:class:`~hacn_core.engine.augment.BatchAutoAugment`)
``cutmix_prob``            CutMix on half the batches, ``lam ~ Beta(1, 1)`` (:class:`~hacn_core.engine.augment.CutMix`)
``label_smoothing``        0.1; ours 0
``decay_every_parameter``  AdamW's decay 0.01 on every parameter, the residual weights too; ours: weights only
``warmup_epochs``          10 of 300 epochs, scaled here to 1 of 30; ours 5% of training (1.5 epochs)
``schedule_unit``          ``epoch``: the cosine steps once an epoch; ours every step
``min_lr``                 1e-6 at the end of the cosine; ours 0
``clip_before_unscale``    ``clip_grad_norm_(1.0)`` on the float16-scaled gradients, emulated in float32
                           (:class:`~hacn_core.hacn.studies.mechanism.ClipBeforeUnscale`); ours: no clipping
=========================  =======================================================================

The pieces of the trainer (label smoothing to clipping) are
:data:`hacn_core.hacn.studies.mechanism.CODE_TRAINER`. What the emulation cannot give is
float16 arithmetic itself (the stream here stays float32) and a loss scale that backs off
after an overflow.

The runs (``book``)
-------------------
The converged study's Mixer, data and budget (16 layers, d = 32, all 55,000 Fashion-MNIST
training images, 30 epochs, batch 128, AdamW at 1e-3), with :data:`CODE_RECIPE`, under Eq. 2
(``hacn``) and under the code's rule (``hacn_code_mixer``), on 10 and 2 classes, seeds 0-2:
12 runs. The third corner, the code's rule with our recipe, is ``hacn-mixer-long``'s own. Then
:data:`ABLATIONS`: the one piece that changes what Eq. 2's residual path does, switched alone (2 runs), and
the code's rule with the code's recipe without that piece, on both tasks (2 runs).
A step costs about twice the converged study's on one CPU thread (AutoAugment on the CPU,
about 90 ms for a batch of 128 against the Mixer's 50-90 ms), about 20-40 minutes a run.

``smoke``: the 2-layer smoke Mixer on 2,000 images, two epochs, both rules on 10 classes, seed 0, and the
ablations.
``paper``: Appendix A's Mixer on CIFAR-10 with the public code's whole recipe, 300 epochs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor, nn

from hacn_core.engine.augment import BatchAutoAugment, CutMix, random_crop_flip
from hacn_core.engine.registry import Experiment
from hacn_core.engine.results import RunContext
from hacn_core.engine.training import Callback, fit
from hacn_core.hacn.studies import mechanism, mixer
from hacn_core.hacn.studies.common import residual_weight_summary

if TYPE_CHECKING:  # pragma: no cover
    from hacn_core.engine.dry_run import DryRunPlan

EXPERIMENT_ID = "hacn-code-recipe"
RULES: tuple[str, ...] = ("hacn", "hacn_code_mixer")
SEEDS: tuple[int, ...] = (0, 1, 2)
#: the public code's Mixer and trainer (module docstring), at the book's 30-epoch budget
CODE_RECIPE: dict[str, Any] = {
    "block": "code", "class_token": True, "alpha_dtype": "float64",
    "random_crop_pad": 4, "autoaugment": True, "cutmix_prob": 0.5,
    **mechanism.CODE_TRAINER, "warmup_epochs": 1, "schedule_unit": "epoch",
}
#: Which piece moves Eq. 2's weights below their start under the public code's recipe? One piece, the public
#: code's layer (``block='code'``, whose channel part carries its own skip from the layer's input, so the
#: stream already holds x_{i-1} without a_i), added alone to the paper's recipe and taken alone out of the
#: whole recipe: Eq. 2, 10 classes, seed 0 (the report sets the whole recipe's seed spread beside it)
ABLATIONS: dict[str, dict[str, Any]] = {
    "the paper's recipe with the code's layer": {"block": "code"},
    "the code's recipe without the code's layer": {k: v for k, v in CODE_RECIPE.items() if k != "block"},
}
ABLATION_RULE, ABLATION_CLASSES, ABLATION_SEED = "hacn", 10, 0
#: The same layer taken out under the code's rule, on both tasks (seed 0): with the layer's pull on the residual
#: weights gone, what do the code's rule and the rest of the code's recipe give against Table 3's 0.428 / 0.326?
RULE_ABLATION = "the code's recipe without the code's layer"
#: the model pieces (read by :func:`hacn_core.hacn.studies.mixer.build_model`) and the augmentation pieces
MODEL_PIECES: tuple[str, ...] = ("block", "class_token", "alpha_dtype")
AUGMENT_PIECES: tuple[str, ...] = ("random_crop_pad", "autoaugment", "cutmix_prob")


def make_config(rule: str, seed: int, *, profile: str = "book", num_classes: int = 10,
                recipe: dict[str, Any] | None = None) -> dict[str, Any]:
    """One run: the converged study's configuration at ``profile`` with ``recipe`` (default the whole
    :data:`CODE_RECIPE`; pass a part of it to switch pieces one at a time)."""
    if profile == "book":
        size: dict[str, Any] = dict(train_subset=None, epochs=mixer.LONG_EPOCHS, record_every_steps=50)
    elif profile == "smoke":
        size = dict(epochs=2, record_every_steps=5)  # two epochs: the recipe's one of warmup, one of cosine
    elif profile == "paper":
        size = {}
    else:
        raise ValueError(f"profile={profile!r} is not a profile; allowed: smoke, book, paper")
    pieces = dict(CODE_RECIPE if recipe is None else recipe)
    if profile == "paper" and "warmup_epochs" in pieces:
        pieces["warmup_epochs"] = 10  # the public code's own 10 of 300 epochs
    return mixer.make_config(rule, seed, profile=profile, num_classes=num_classes, **size) | pieces


def configs(profile: str, seeds: Sequence[int] = SEEDS) -> list[dict[str, Any]]:
    """Both rules on 10 classes for every seed, then on 2 classes (what finishes first is a comparison); then
    the :data:`ABLATIONS`."""
    return [make_config(rule, seed, profile=profile, num_classes=k)
            for k in (10, 2) for seed in seeds for rule in RULES] + ablation_configs(profile)


def ablation_configs(profile: str) -> list[dict[str, Any]]:
    """The :data:`ABLATIONS` at ``profile`` (Eq. 2, 10 classes, seed 0, one piece switched each), then
    :func:`rule_ablation_configs`."""
    return [make_config(ABLATION_RULE, ABLATION_SEED, profile=profile, num_classes=ABLATION_CLASSES, recipe=recipe)
            for recipe in ABLATIONS.values()] + rule_ablation_configs(profile)


def rule_ablation_configs(profile: str) -> list[dict[str, Any]]:
    """:data:`RULE_ABLATION` under the code's rule on 10 and 2 classes, seed 0."""
    return [make_config("hacn_code_mixer", ABLATION_SEED, profile=profile, num_classes=k,
                        recipe=ABLATIONS[RULE_ABLATION]) for k in (10, 2)]


def check_config(config: dict[str, Any]) -> None:
    """The Mixer study's checks and each piece's allowed values (the field and the values in the message)."""
    mixer.check_config(config)
    if config["arch"] != "mixer":
        raise ValueError(f"arch={config['arch']!r} is not supported here; allowed: mixer")
    pad = config.get("random_crop_pad", 0)
    if isinstance(pad, bool) or not isinstance(pad, int) or pad < 0:
        raise ValueError(f"random_crop_pad={pad!r} must be an integer >= 0 (pixels of zero padding; 0: no crops)")
    if not isinstance(config.get("autoaugment", False), bool):
        raise ValueError(f"autoaugment={config['autoaugment']!r} must be True or False")
    prob = config.get("cutmix_prob", 0.0)
    if isinstance(prob, bool) or not isinstance(prob, (int, float)) or not 0.0 <= prob <= 1.0:
        raise ValueError(f"cutmix_prob={prob!r} must be a number in [0, 1] (the share of batches mixed)")
    if config.get("schedule_unit", "step") not in ("step", "epoch"):
        raise ValueError(f"schedule_unit={config['schedule_unit']!r} is not valid; allowed: step, epoch")
    mechanism.check_trainer_pieces(config)


class CodeRecipeAugment:
    """The trainer's ``forward`` hook of the public code's augmentation, on standardised batches.

    Training batches only: back to pixels (``x std + mean``), random crops of the zero-padded image
    (``random_crop_pad``), AutoAugment on ``uint8`` pixels (``autoaugment``), standardised again, then
    CutMix on a share ``cutmix_prob`` of the batches. Evaluation sees the plain batch.
    """

    def __init__(self, mean: Tensor, std: Tensor, *, pad: int = 0, autoaugment: bool = False,
                 cutmix_prob: float = 0.0) -> None:
        self.mean, self.std, self.pad = mean, std, pad
        self.autoaugment = BatchAutoAugment("cifar10") if autoaugment else None
        self.cutmix = CutMix(alpha=1.0, prob=cutmix_prob) if cutmix_prob > 0 else None

    def pixels(self, x: Tensor) -> Tensor:
        """The standardised batch ``x`` augmented in pixel space (crops, AutoAugment), standardised again."""
        if not (self.pad or self.autoaugment):
            return x
        p = x * self.std + self.mean
        if self.pad:
            p = random_crop_flip(p, self.pad, flip=False)
        if self.autoaugment is not None:
            p = self.autoaugment((p * 255).round().clamp(0, 255).to(torch.uint8)).float() / 255
        return (p - self.mean) / self.std

    def __call__(self, model: nn.Module, batch: Sequence[Tensor]) -> tuple[Tensor, Tensor]:
        x, y = batch
        if not model.training:
            return model(x), y
        x = self.pixels(x)
        if self.cutmix is not None:
            return self.cutmix(model, (x, y))
        return model(x), y


def train_code_recipe(config: dict[str, Any], context: RunContext) -> dict[str, Any]:
    """Train one Mixer with the pieces of the public code's recipe ``config`` names; ``Gamma`` and the
    converged residual weights as ``hacn-mixer-long`` records them."""
    check_config(config)
    data = mixer.load_data(config)
    mean, std = mixer.standardisation(config)
    X, _ = data["train"]
    torch.manual_seed(config["seed"])
    model = mixer.build_model(config, image_size=X.shape[-1], in_channels=X.shape[1])
    epochs = mixer.epochs_for(config, len(X))
    augment = augment_for(config, mean, std)
    callbacks: list[Callback] = []
    if "clip_before_unscale" in config:
        callbacks.append(mechanism.ClipBeforeUnscale(max_norm=config["clip_before_unscale"]))
    out = fit(model, data["train"], mechanism.train_config(config, epochs), val=data["val"], test=data["test"],
              forward=augment, callbacks=callbacks, checkpoint_dir=context.checkpoint_dir,
              progress=context.progress)
    c = out.curves
    weight_metrics, weight_curves = residual_weight_summary(c, config["num_layers"])
    metrics = {"test_accuracy": out.metrics["test_accuracy"], "epochs": epochs, "steps": out.steps,
               **weight_metrics}
    curves = {k: c[k] for k in ("epoch", "train_loss", "lr", "time_s", "eval_epoch", "val_accuracy", "record_step")}
    return {"metrics": metrics, "curves": curves | weight_curves, "device": out.device}


def augment_for(config: dict[str, Any], mean: Tensor, std: Tensor) -> CodeRecipeAugment:
    """The forward hook of ``config``'s augmentation pieces, for images standardised with ``mean`` / ``std``."""
    return CodeRecipeAugment(mean, std, pad=config.get("random_crop_pad", 0),
                             autoaugment=config.get("autoaugment", False), cutmix_prob=config.get("cutmix_prob", 0.0))


def dry_run_plan(config: dict[str, Any]) -> DryRunPlan:
    """The Mixer study's dry run for this configuration's model, trainer and augmentation (on the synthetic
    batch, read as pixels: standardisation ``(0, 1)``; with ``--data``, the real one)."""
    check_config(config)
    plan = mixer.dry_run_plan(config)
    identity = (torch.zeros(1, 1, 1, 1), torch.ones(1, 1, 1, 1))
    return dataclasses.replace(plan, key=plan.key | {k: config.get(k) for k in MODEL_PIECES},
                               train=mechanism.train_config(config, plan.train.epochs),
                               forward=augment_for(config, *identity))


EXPERIMENT = Experiment(
    id=EXPERIMENT_ID,
    title="H-ACN Mixer with the public code's whole recipe: its residual weights under Eq. 2 and the code's rule",
    train=train_code_recipe,
    plan=dry_run_plan,
    configs={"smoke": lambda: configs("smoke", (0,))[:2] + ablation_configs("smoke"), "book": lambda: configs("book"),
             "paper": lambda: configs("paper")},
    setting={
        "smoke": "2-layer Mixer, 2,000 Fashion-MNIST images, 2 epochs, the public code's recipe, 2 rules, 10 classes, "
                 "seed 0; the code's layer switched alone (4 runs)",
        "book": "the converged study's 16-layer d-32 Mixer on 55,000 Fashion-MNIST images, 30 epochs, the public "
                "code's whole recipe, Eq. 2 and the code's rule, 10 and 2 classes, seeds 0-2; the code's layer "
                "switched alone (Eq. 2, 10 classes, seed 0) and taken out under the code's rule (10 and 2 classes)",
        "paper": "Appendix A Mixer on CIFAR-10 / CIFAR-2 with the public code's whole recipe, 300 epochs, seeds 0-2",
    },
)
