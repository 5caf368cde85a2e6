"""Image augmentation inside the trainer: He et al. (2016)'s pad-crop-flip, on a batch's device.

:func:`random_crop_flip` (pad 4, random crop, horizontal flip: the "moderate data
augmentation" of the CIFAR ResNets, used by Residual Gates Sec. 3.2 and AWNN App. C.2)
and :class:`AugmentNormalize`, the :func:`~hacn_core.engine.training.fit` ``forward``
hook that augments training batches only, normalises and calls the model. Random
numbers come from the global generator, which the trainer checkpoints, so a resumed
run draws the same crops.
"""

from __future__ import annotations

from collections.abc import Sequence

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


class AugmentNormalize:
    """The trainer's ``forward`` hook: augment (training only), normalise, call the model.

    ``forward(model, (x, y)) -> (logits, y)``. Augmentation runs only while
    ``model.training`` (the trainer evaluates in eval mode), on the batch's
    device, so in-memory CIFAR on a GPU is augmented on the GPU.
    ``mean``/``std`` are per-channel tensors; ``std`` of ones is the ResNet
    recipe's mean subtraction.
    """

    def __init__(self, mean: Tensor, std: Tensor, pad: int = 4, flip: bool = True) -> None:
        self.mean = mean.reshape(1, -1, 1, 1).float()
        self.std = std.reshape(1, -1, 1, 1).float()
        self.pad, self.flip = pad, flip
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
        return model(self.normalize(x)), y


__all__ = ["AugmentNormalize", "random_crop_flip"]
