"""Convolution pieces shared by the CIFAR ResNets of two papers (no paper's code is imported here).

* :func:`conv3x3`: the 3x3 convolution of every ResNet basic block (He et al. 2016);
* :class:`ZeroPadShortcut`: He et al. (2015b)'s parameter-free shortcut "option A".

Used by :mod:`hacn_core.models.resnet` (Residual Gates, pre-activation) and
:mod:`hacn_core.models.resnet20` (AWNN, post-activation ResNet-20), so that
ResNet-20 does not pull in the gates package.
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn


def conv3x3(in_channels: int, out_channels: int, stride: int = 1) -> nn.Conv2d:
    """3x3 convolution, padding 1, no bias (BatchNorm follows)."""
    return nn.Conv2d(in_channels, out_channels, 3, stride=stride, padding=1, bias=False)


class ZeroPadShortcut(nn.Module):
    """Option A shortcut (He et al., 2015b): subsample by ``stride``, zero-pad the new channels."""

    def __init__(self, in_channels: int, out_channels: int, stride: int) -> None:
        super().__init__()
        self.extra, self.stride = out_channels - in_channels, stride

    def forward(self, x: Tensor) -> Tensor:
        x = x[:, :, :: self.stride, :: self.stride]
        return F.pad(x, (0, 0, 0, 0, 0, self.extra))


__all__ = ["ZeroPadShortcut", "conv3x3"]
