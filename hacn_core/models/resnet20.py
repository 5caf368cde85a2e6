"""ResNet-20 with a fixed or adaptive classifier: the image backbone of AWNN (Sec. 4, App. C.2, Table 4).

The convolutional part is the CIFAR ResNet of He et al. (2016, Sec. 4.2) with
``n = 3``: a 3x3 convolution with 16 channels, three stages of ``n`` *post-activation*
basic blocks with 16, 32 and 64 channels (strides 1, 2, 2), global average pooling::

    block(x) = ReLU( BN(conv3x3(ReLU(BN(conv3x3(x))))) + s(x) )

``6n + 2 = 20`` weighted layers. The shortcut ``s`` is the identity, or, where a block
halves the resolution and doubles the channels, He et al.'s option A: subsample by 2
and pad the new channels with zeros (no parameters), so that the network with a
linear classifier has 269,722 parameters for 10 classes ("0.27M", He et al. Table 6).
(:mod:`hacn_core.models.resnet` holds the *pre-activation* ResNets of Residual Gates.)

AWNN changes only the classifier on the flattened pooled features (App. C.2):

* ``head="fixed"``: ``head_width = 0`` is a linear classifier, ``head_width = D > 0``
  an MLP ``64 -> D -> classes`` with LeakyReLU (the fixed kind of
  :mod:`hacn_core.models.mlp`); Table 4 tries ``D`` in 0, 32, 128, 256, 512;
* ``head="adaptive"``: an :class:`~hacn_core.awnn.AdaptiveMLP` with one LeakyReLU
  hidden layer whose width is learned (Eq. 11-14), starting at rate ``nu_0 = 0.02``
  (Table 4), i.e. ``ceil(ln 10 / 0.02) = 116`` neurons at ``k = 0.9`` (App. C.2:
  "approximately 128").

Inputs are ``(B, in_channels, H, W)`` of any size (the pooling is global): 3x32x32
for CIFAR, 1x28x28 for MNIST. Train the adaptive head with
:class:`~hacn_core.awnn.ELBOLoss` and :class:`~hacn_core.awnn.WidthCallback`, which
find the head inside the model.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor, nn

from hacn_core.awnn.distribution import quantile_width
from hacn_core.engine.checks import check_choice
from hacn_core.models.mlp import UNGATED_MLP_KINDS, make_mlp
from hacn_core.models.conv import ZeroPadShortcut, conv3x3

#: classifier widths of the fixed baseline (AWNN Table 4; 0 = linear classifier)
TABLE4_WIDTHS: tuple[int, ...] = (0, 32, 128, 256, 512)
#: starting rate of the adaptive classifier (AWNN Table 4)
IMAGE_START_RATE = 0.02


def _count(field: str, value: object, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{field}={value!r} must be an integer >= {minimum}")
    return value


@dataclass(frozen=True)
class ResNet20Config:
    """A CIFAR ResNet (He et al. 2016) with an AWNN classifier (AWNN App. C.2).

    ``blocks_per_stage`` is ``n`` (3: ResNet-20); ``widths`` the channels of the three
    stages. ``head`` is the classifier's MLP kind (``fixed`` or ``adaptive``);
    ``head_width`` the hidden width of a fixed head (0: linear); ``head_rate`` and
    ``k`` the starting rate and quantile of an adaptive head (whose width is learned,
    so ``head_width`` must stay 0). ``negative_slope`` is the heads' LeakyReLU slope;
    ``bn_momentum`` is in PyTorch's convention.
    """

    num_classes: int = 10
    in_channels: int = 3
    blocks_per_stage: int = 3
    widths: tuple[int, int, int] = (16, 32, 64)
    head: str = "fixed"
    head_width: int = 0
    head_rate: float = IMAGE_START_RATE
    k: float = 0.9
    negative_slope: float = 0.01
    bn_momentum: float = 0.1

    def __post_init__(self) -> None:
        _count("num_classes", self.num_classes, 1)
        _count("in_channels", self.in_channels, 1)
        _count("blocks_per_stage", self.blocks_per_stage, 1)
        if len(self.widths) != 3:
            raise ValueError(f"widths={self.widths!r} must list the channels of the 3 stages")
        for w in self.widths:
            _count("widths", w, 1)
        check_choice("head", self.head, UNGATED_MLP_KINDS)
        _count("head_width", self.head_width, 0)
        if self.head == "adaptive" and self.head_width != 0:
            raise ValueError(f"head_width={self.head_width!r} is for head='fixed'; an adaptive head learns its "
                             f"width, starting at Eq. 11's quantile of head_rate (allowed: head_width=0)")
        if isinstance(self.head_rate, bool) or not isinstance(self.head_rate, (int, float)) or not self.head_rate > 0:
            raise ValueError(f"head_rate={self.head_rate!r} must be a rate > 0 (Table 4: 0.02)")
        if not 0.0 <= self.bn_momentum <= 1.0:
            raise ValueError(f"bn_momentum={self.bn_momentum!r} must lie in [0, 1] (PyTorch convention)")

    @property
    def depth(self) -> int:
        """Weighted layers ``6n + 2`` (the classifier counted as one)."""
        return 6 * self.blocks_per_stage + 2


class BasicBlock(nn.Module):
    """Post-activation basic block (He et al. 2016): ``ReLU(BN(conv(ReLU(BN(conv(x))))) + s(x))``.

    ``s`` is the identity, or option A (:class:`~hacn_core.models.conv.ZeroPadShortcut`)
    where the block changes the resolution or the channels.
    """

    def __init__(self, in_channels: int, out_channels: int, stride: int, bn_momentum: float) -> None:
        super().__init__()
        self.conv1 = conv3x3(in_channels, out_channels, stride)
        self.bn1 = nn.BatchNorm2d(out_channels, momentum=bn_momentum)
        self.conv2 = conv3x3(out_channels, out_channels)
        self.bn2 = nn.BatchNorm2d(out_channels, momentum=bn_momentum)
        changes = stride != 1 or in_channels != out_channels
        self.shortcut: nn.Module = ZeroPadShortcut(in_channels, out_channels, stride) if changes else nn.Identity()

    def forward(self, x: Tensor) -> Tensor:  # (B, C_in, H, W) -> (B, C_out, H / stride, W / stride)
        h = self.bn1(self.conv1(x)).relu()
        h = self.bn2(self.conv2(h))
        return (h + self.shortcut(x)).relu()


def classifier(config: ResNet20Config, features: int) -> nn.Module:
    """The classifier ``(B, features) -> (B, classes)`` of ``config`` (AWNN Table 4)."""
    c = config
    if c.head == "adaptive":
        start = quantile_width(float(c.head_rate), c.k)  # Eq. 11: 116 neurons at nu = 0.02, k = 0.9
        return make_mlp("adaptive", features, start, c.num_classes, activation="leaky_relu",
                        negative_slope=c.negative_slope, rate_init=float(c.head_rate), k=c.k)
    if c.head_width == 0:
        return nn.Linear(features, c.num_classes)
    return make_mlp("fixed", features, c.head_width, c.num_classes, activation="leaky_relu",
                    negative_slope=c.negative_slope)


class ResNet20(nn.Module):
    """ResNet-20 (``n = 3``; any ``n`` gives ResNet-``6n+2``) with the classifier of ``config``.

    Submodules: ``stem`` (conv-BN-ReLU), ``stages`` (``stages.<s>.<b>`` a
    :class:`BasicBlock`), ``head`` (the classifier). ``features(x)`` is the pooled,
    flattened ``(B, 64)`` representation the head classifies.
    """

    def __init__(self, config: ResNet20Config | None = None, **kwargs) -> None:
        super().__init__()
        if config is None:
            config = ResNet20Config(**kwargs)
        elif kwargs:
            raise ValueError(f"pass either a config or keyword arguments, not both (got {sorted(kwargs)})")
        self.config = c = config
        m = c.bn_momentum
        self.stem = nn.Sequential(conv3x3(c.in_channels, c.widths[0]), nn.BatchNorm2d(c.widths[0], momentum=m),
                                  nn.ReLU())
        stages, channels = [], c.widths[0]
        for width, stride in zip(c.widths, (1, 2, 2)):
            blocks = []
            for b in range(c.blocks_per_stage):
                blocks.append(BasicBlock(channels, width, stride if b == 0 else 1, m))
                channels = width
            stages.append(nn.Sequential(*blocks))
        self.stages = nn.Sequential(*stages)
        self.pool = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self._init_convolutions()
        self.head = classifier(c, channels)  # its own initialisation (kaiming+ for the adaptive head)

    def _init_convolutions(self) -> None:
        # He et al. (2015) normal initialisation of the convolutions ("as in [13]", He et al. 2016), unit BN gains
        for mod in self.modules():
            if isinstance(mod, nn.Conv2d):
                nn.init.kaiming_normal_(mod.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(mod, nn.BatchNorm2d):
                nn.init.ones_(mod.weight)
                nn.init.zeros_(mod.bias)

    def features(self, x: Tensor) -> Tensor:
        """``(B, in_channels, H, W) -> (B, widths[-1])``: the flattened pooled features."""
        return self.pool(self.stages(self.stem(x)))

    def forward(self, x: Tensor) -> Tensor:
        """``(B, in_channels, H, W) -> (B, num_classes)`` logits."""
        return self.head(self.features(x))


def resnet20(**kwargs) -> ResNet20:
    """``ResNet20(ResNet20Config(**kwargs))``, e.g. ``resnet20(head="adaptive", in_channels=1)`` for MNIST."""
    return ResNet20(ResNet20Config(**kwargs))


__all__ = ["IMAGE_START_RATE", "TABLE4_WIDTHS", "BasicBlock", "ResNet20", "ResNet20Config", "classifier", "resnet20"]
