"""Image augmentation inside the trainer: He et al. (2016)'s pad-crop-flip, Zhang et al. (2018)'s Mixup,
Yun et al. (2019)'s CutMix and Cubuk et al. (2019)'s AutoAugment.

:func:`random_crop_flip` (pad 4, random crop, horizontal flip: the "moderate data
augmentation" of the CIFAR ResNets, used by Residual Gates Sec. 3.2 and AWNN App. C.2)
and :class:`AugmentNormalize`, the :func:`~hacn_core.engine.training.fit` ``forward``
hook that augments training batches only, normalises and calls the model. Random
numbers come from the global generator, which the trainer checkpoints, so a resumed
run draws the same crops.

Mixup (Zhang et al. 2018, "mixup: Beyond empirical risk minimization") trains on convex
combinations of pairs of training examples and of their labels:

    x' = lam x + (1 - lam) x[perm],        lam ~ Beta(alpha, alpha),
    loss = lam CE(f(x'), y) + (1 - lam) CE(f(x'), y[perm])
         = CE(f(x'), lam onehot(y) + (1 - lam) onehot(y[perm]))   (CE is linear in the target)

with ``perm`` a uniformly random permutation of the batch. :class:`Mixup` is a ``forward``
hook that returns the soft target of the second line, which the trainer's default
cross-entropy takes as class probabilities: the same loss, no custom ``loss_fn``.

One ``lam`` per batch: Beyer et al. (2022)'s ImageNet ViT-S/16 recipe (the ViT setup
H-ACN App. A adopts, Sec. 3.3) sets the Mixup concentration to 0.2, and their
big_vision configuration draws it without folding in the host, device or example, i.e.
one mixing weight for the whole batch; they pair each image with its neighbour in the
already shuffled batch and give the batch's own image the larger weight
(``max(lam, 1 - lam)``). Here, as in Zhang et al., ``lam`` is unsorted and the partner
comes from a random permutation. Not sorting changes nothing in distribution (the pair
``(i, perm(i))`` at ``1 - lam`` is the pair ``(perm(i), i)`` at ``lam``, ``perm`` and its
inverse are equally likely, and batch order does not enter the mean loss). Per image,
the permuted partner (uniform over the batch) differs from the neighbour (uniform over
the other images) only in that it is the image itself with probability ``1 / B``: about
one unmixed image per batch. In
:func:`~hacn_core.engine.training.fit` the hook runs once per micro batch, so with
gradient accumulation or several ranks each micro batch (rank shard) gets its own ``lam``.

``lam`` is drawn on the CPU and ``perm`` on the batch's device, both from the global
generators, which the trainer checkpoints: a resumed run draws the same mixes. Only
training batches are mixed (``model.training``); evaluation sees the plain batch and
its labels. The trainer records no training accuracy (its ``train_loss`` is the mean
of the objective trained, here the Mixup loss); against a soft target
:func:`~hacn_core.engine.training.accuracy` scores the target's mass at the predicted
class, ``lam [pred = y] + (1 - lam) [pred = y[perm]]``, plain accuracy for one-hot targets.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def random_crop_flip(x: Tensor, pad: int = 4, flip: bool = True, generator: torch.Generator | None = None) -> Tensor:
    """Sec. 3.2's "moderate data augmentation", per image of a batch ``(B, C, H, W)``.

    Pads every side with ``pad`` zeros, takes a random ``H x W`` crop (offsets
    uniform in ``0..2*pad``) and, with ``flip``, mirrors it left-right with
    probability 0.5. Crop and flip are one gather: a flipped crop reads the
    window's columns in reverse order. Random numbers come from ``generator``
    (on ``x``'s device), else the global generator, which the trainer
    checkpoints, so a resumed run draws the same crops.
    """
    if x.dim() != 4:
        raise ValueError(f"x: expected a batch of images (B, C, H, W), got shape {tuple(x.shape)}")
    if not isinstance(pad, int) or isinstance(pad, bool) or pad < 0:
        raise ValueError(f"pad={pad!r} must be an integer >= 0 (the paper uses 4)")
    b, _, h, w = x.shape
    dev = x.device
    padded = F.pad(x, (pad, pad, pad, pad)) if pad else x
    oy = torch.randint(0, 2 * pad + 1, (b,), device=dev, generator=generator)
    ox = torch.randint(0, 2 * pad + 1, (b,), device=dev, generator=generator)
    rows = oy[:, None] + torch.arange(h, device=dev)  # (B, H)
    cols = torch.arange(w, device=dev).expand(b, w)
    if flip:
        mirrored = torch.rand(b, device=dev, generator=generator) < 0.5
        cols = torch.where(mirrored[:, None], cols.flip(-1), cols)
    cols = ox[:, None] + cols  # (B, W)
    out = padded[torch.arange(b, device=dev)[:, None, None], :, rows[:, :, None], cols[:, None, :]]  # (B, H, W, C)
    return out.permute(0, 3, 1, 2).contiguous()


def check_mixup_alpha(alpha: Any, name: str = "alpha") -> float:
    """``alpha`` as a float if it is a finite number > 0 (Beta(alpha, alpha) needs a positive
    concentration), else ``ValueError`` naming ``name``."""
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not math.isfinite(alpha) or alpha <= 0:
        raise ValueError(f"{name}={alpha!r} must be a finite number > 0: the concentration of Mixup's "
                         "Beta(alpha, alpha) (Beyer et al. 2022 use 0.2)")
    return float(alpha)


def mix_inputs(x: Tensor, lam: float, perm: Tensor) -> Tensor:
    """``lam x + (1 - lam) x[perm]`` for a batch ``x`` of any shape ``(B, ...)``."""
    return lam * x + (1 - lam) * x[perm]


def mix_targets(y: Tensor, lam: float, perm: Tensor, num_classes: int) -> Tensor:
    """The soft target ``lam onehot(y) + (1 - lam) onehot(y[perm])``, ``(B, num_classes)`` float32, of class
    indices ``y`` ``(B,)``. (``F.one_hot`` with a given ``num_classes`` skips its range check on CUDA: no sync.)"""
    a = F.one_hot(y, num_classes).float()
    return lam * a + (1 - lam) * a[perm]


class Mixup:
    """The trainer's ``forward`` hook for Mixup (module docstring): ``forward(model, (x, y)) -> (logits, target)``.

    In training mode it draws ``lam ~ Beta(alpha, alpha)`` and a permutation ``perm`` of the
    batch (:meth:`draw`), calls the model on :func:`mix_inputs` and returns the soft target
    :func:`mix_targets` (its width read from the logits), which the trainer's cross-entropy
    takes as class probabilities. In eval mode it is ``model(x), y``.
    """

    def __init__(self, alpha: float) -> None:
        self.alpha = check_mixup_alpha(alpha)
        # float64: 4% of Beta(0.2, 0.2)'s mass lies within 1e-7 of 0 or 1, where a float32 lam near 1
        # rounds to 1 (scipy's Beta cdf: 2 F(1e-7) = 0.042)
        concentration = torch.tensor(self.alpha, dtype=torch.float64)
        self.beta = torch.distributions.Beta(concentration, concentration)

    def draw(self, batch_size: int, device: torch.device | str = "cpu") -> tuple[float, Tensor]:
        """``(lam, perm)``: ``lam`` from the global CPU generator (a Python float, so mixing a batch on an
        accelerator reads no device value), ``perm`` ``(batch_size,)`` from ``device``'s global generator."""
        lam = float(self.beta.sample())
        perm = torch.randperm(batch_size, device=device)
        return lam, perm

    def __call__(self, model: nn.Module, batch: Sequence[Tensor]) -> tuple[Tensor, Tensor]:
        x, y = batch
        if not model.training:
            return model(x), y
        lam, perm = self.draw(x.shape[0], x.device)
        out = model(mix_inputs(x, lam, perm))  # (B, num_classes)
        return out, mix_targets(y, lam, perm, out.shape[-1])


class AugmentNormalize:
    """The trainer's ``forward`` hook: augment (training only), normalise, call the model.

    ``forward(model, (x, y)) -> (logits, y)``. Augmentation runs only while
    ``model.training`` (the trainer evaluates in eval mode), on the batch's
    device, so in-memory CIFAR on a GPU is augmented on the GPU.
    ``mean``/``std`` are per-channel tensors; ``std`` of ones is the ResNet
    recipe's mean subtraction. With ``mixup`` (a :class:`Mixup`), the cropped
    and normalised training batch is mixed and the target is its soft target
    (normalising is affine per channel and ``lam + (1 - lam) = 1``, so mixing
    before or after it gives the same batch).
    """

    def __init__(self, mean: Tensor, std: Tensor, pad: int = 4, flip: bool = True,
                 mixup: Mixup | None = None) -> None:
        self.mean = mean.reshape(1, -1, 1, 1).float()
        self.std = std.reshape(1, -1, 1, 1).float()
        self.pad, self.flip = pad, flip
        self.mixup = mixup
        self._on: dict[torch.device, tuple[Tensor, Tensor]] = {}

    def normalize(self, x: Tensor) -> Tensor:
        """``(x - mean) / std`` per channel."""
        if x.device not in self._on:
            self._on[x.device] = (self.mean.to(x.device), self.std.to(x.device))
        mean, std = self._on[x.device]
        return (x - mean) / std

    def __call__(self, model: nn.Module, batch: Sequence[Tensor]) -> tuple[Tensor, Tensor]:
        x, y = batch
        if model.training and (self.pad or self.flip):
            x = random_crop_flip(x, self.pad, self.flip)
        if self.mixup is not None:
            return self.mixup(model, (self.normalize(x), y))  # mixes in training mode only
        return model(self.normalize(x)), y


# ----------------------------------------------------------------------------- CutMix


def cutmix_box(height: int, width: int, lam: float, cy: int, cx: int) -> tuple[int, int, int, int]:
    """CutMix's box (Yun et al. 2019, Sec. 3.1): sides ``sqrt(1 - lam)`` of the image's, centred at
    ``(cy, cx)``, clipped to the image. Returns ``(top, bottom, left, right)`` (bottom / right exclusive)."""
    cut = math.sqrt(1.0 - lam)
    ch, cw = int(height * cut), int(width * cut)
    top, bottom = max(cy - ch // 2, 0), min(cy + ch // 2, height)
    left, right = max(cx - cw // 2, 0), min(cx + cw // 2, width)
    return top, bottom, left, right


class CutMix:
    """The trainer's ``forward`` hook for CutMix (Yun et al. 2019): ``forward(model, (x, y)) -> (logits, target)``.

    In training mode, with probability ``prob`` per batch, it draws ``lam ~ Beta(alpha, alpha)``, a box
    (:func:`cutmix_box`, centre uniform over the image) and a permutation ``perm`` of the batch, pastes the
    box of ``x[perm]`` into every image, and returns the soft target ``lam' onehot(y) + (1 - lam')
    onehot(y[perm])`` with ``lam' = 1 - box area / image area`` (the share of each image that is its own).
    Otherwise (and in eval mode) ``model(x), y``. Random numbers come from the global generators, which the
    trainer checkpoints.
    """

    def __init__(self, alpha: float = 1.0, prob: float = 0.5) -> None:
        self.alpha = check_mixup_alpha(alpha, "cutmix alpha")
        if isinstance(prob, bool) or not isinstance(prob, (int, float)) or not 0.0 <= prob <= 1.0:
            raise ValueError(f"cutmix prob={prob!r} must be a number in [0, 1] (the share of batches mixed)")
        self.prob = float(prob)
        concentration = torch.tensor(self.alpha, dtype=torch.float64)
        self.beta = torch.distributions.Beta(concentration, concentration)

    def mix(self, x: Tensor, y: Tensor, num_classes: int) -> tuple[Tensor, Tensor] | None:
        """``(mixed x, soft target)``, or None when this batch is not mixed (probability ``1 - prob``)."""
        if not float(torch.rand(())) < self.prob:
            return None
        lam = float(self.beta.sample())
        h, w = x.shape[-2:]
        cy, cx = int(torch.randint(h, ())), int(torch.randint(w, ()))
        top, bottom, left, right = cutmix_box(h, w, lam, cy, cx)
        perm = torch.randperm(x.shape[0], device=x.device)
        mixed = x.clone()
        mixed[..., top:bottom, left:right] = x[perm][..., top:bottom, left:right]
        own = 1.0 - (bottom - top) * (right - left) / (h * w)
        return mixed, mix_targets(y, own, perm, num_classes)

    def __call__(self, model: nn.Module, batch: Sequence[Tensor]) -> tuple[Tensor, Tensor]:
        x, y = batch
        if model.training:
            num_classes = getattr(getattr(model, "config", None), "num_classes", None)
            if num_classes is None:
                raise ValueError("CutMix needs the number of classes: a model with config.num_classes")
            drawn = self.mix(x, y, num_classes)
            if drawn is not None:
                return model(drawn[0]), drawn[1]
        return model(x), y


# ----------------------------------------------------------------------------- AutoAugment


class BatchAutoAugment:
    """Cubuk et al. (2019)'s AutoAugment, drawn per image, applied to a whole batch.

    ``torchvision.transforms.v2.AutoAugment`` draws one sub-policy per call, so a batch tensor gets one
    draw for all its images; per image in a Python loop it costs about 4 ms an image on one CPU thread
    (0.5 s for a batch of 128, ten times the book Mixer's step). Here every image draws its own
    sub-policy (uniform over the policy's 25), and for each of the sub-policy's two operations whether it
    applies (its probability) and, for signed operations, the sign of its magnitude, exactly as
    torchvision's per-image call does; then images that drew the same operation, magnitude and sign
    are transformed together by torchvision's own operation (first operations, then second ones).
    Every operation acts on each image of a batch alone, so the result is image for image the
    per-image transform with the same draws (tested). Input and output: ``uint8`` images
    ``(B, C, H, W)``. Random numbers come from the global generator (checkpointed by the trainer).
    """

    def __init__(self, policy: str = "cifar10") -> None:
        from torchvision.transforms import v2  # torchvision is only needed where AutoAugment is used

        policies = {p.value.lower(): p for p in v2.AutoAugmentPolicy}
        if policy not in policies:
            raise ValueError(f"policy={policy!r} is not an AutoAugment policy; allowed: {', '.join(policies)}")
        self.transform = v2.AutoAugment(policies[policy])
        self.policies = self.transform._policies  # ((op, probability, magnitude index), (op, ...)) x 25

    def draw(self, n: int, height: int, width: int) -> list[list[tuple[str, float] | None]]:
        """Per image, its two steps: ``(operation, signed magnitude)`` or None where the step is skipped."""
        space = self.transform._AUGMENTATION_SPACE
        plans = []
        for _ in range(n):
            policy = self.policies[int(torch.randint(len(self.policies), ()))]
            steps: list[tuple[str, float] | None] = []
            for op, probability, index in policy:
                if not float(torch.rand(())) <= probability:
                    steps.append(None)
                    continue
                magnitudes_fn, signed = space[op]
                magnitudes = magnitudes_fn(10, height, width)
                magnitude = float(magnitudes[index]) if magnitudes is not None else 0.0
                if magnitudes is not None and signed and float(torch.rand(())) <= 0.5:
                    magnitude = -magnitude
                steps.append((op, magnitude))
            plans.append(steps)
        return plans

    def apply(self, images: Tensor, plans: list[list[tuple[str, float] | None]]) -> Tensor:
        """``images`` with every image's drawn steps applied, grouped by identical step."""
        out = images.clone()
        t = self.transform
        for k in range(2):
            groups: dict[tuple[str, float], list[int]] = {}
            for i, steps in enumerate(plans):
                if steps[k] is not None:
                    groups.setdefault(steps[k], []).append(i)
            for (op, magnitude), idx in groups.items():
                rows = torch.tensor(idx, device=images.device)
                out[rows] = t._apply_image_or_video_transform(out[rows], op, magnitude,
                                                              interpolation=t.interpolation, fill=t._fill)
        return out

    def __call__(self, images: Tensor) -> Tensor:
        if images.dtype != torch.uint8 or images.dim() != 4:
            raise ValueError(f"images: expected uint8 (B, C, H, W), got {images.dtype} {tuple(images.shape)}")
        return self.apply(images, self.draw(images.shape[0], *images.shape[-2:]))


__all__ = ["AugmentNormalize", "BatchAutoAugment", "CutMix", "Mixup", "check_mixup_alpha", "cutmix_box",
           "mix_inputs", "mix_targets", "random_crop_flip"]
