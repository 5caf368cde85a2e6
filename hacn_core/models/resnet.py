"""CIFAR networks of Residual Gates, Section 3.2 (Tables 3-6, Figs. 6-7).

Two families, both built from pre-activation basic blocks
``f_r = BN-ReLU-Conv3x3-BN-ReLU-[Dropout]-Conv3x3`` (the paper's "in our case,
BN-ReLU-Conv-BN-ReLU-Conv", Sec. 2.2), three stages with strides 1, 2, 2, a
final BN-ReLU, global average pooling and a linear classifier:

- ``preact_resnet(n)``: pre-activation ResNet (He et al., 2016), stage widths
  16/32/64, ``6n + 2`` layers. The paper's "Resnet 5" is ``n = 5``: ResNet-32,
  15 blocks, so gating "adds 15 parameters" (Table 3).
- ``wide_resnet(depth, width)``: WRN-depth-width (Zagoruyko & Komodakis,
  2016), stage widths ``16k/32k/64k`` with ``depth = 6n + 4``, optional
  dropout (0.3 in the paper) between the two convolutions. The paper writes
  "Wide ResNet (n, k)" with ``n`` blocks per stage: (4,10) is WRN-28-10
  (36.5M parameters, Table 6; 12 blocks -> "adds 12 parameters"), (2,4) is
  WRN-16-4, (8,1) WRN-52-1, (6,10) WRN-40-10. ``wrn_depth(n)`` converts.

Residual rule: ``rule="resnet"`` (default) or ``rule="gated"`` (the same
names as :class:`~hacn_core.hacn.connectivity.ResidualStack`'s rules;
``gated=True`` is the older spelling of ``rule="gated"``, and both keep
working). Only these two (:data:`RESNET_RULES`) are built: the rules that
add up the outputs of all layers (``acn``, ``hacn``, DenseFormer) need one
shape throughout, but the first block of stages 2 and 3 changes channels and
resolution; the other scaled residuals (ReZero, LAuReL) are not part of the
Sec. 3.2 study.

Gated variants (``rule="gated"``) wrap every block as
``u = g(k) f_r(h) + s(h)`` (``hacn_core.gates.GatedResidualLayer``): one ``k``
per block, on the residual branch only. Where a block changes the number of
channels or the resolution, ``s`` is a 1x1 convolution projection
(``shortcut="projection"``, default) applied, as in the pre-activation and WRN
reference designs, after a BN-ReLU shared by both branches (``h = ReLU(BN(x))``);
the projection is not gated, so ``k = 0`` leaves ``u = s(h)``; the paper
reads small ``k`` in those blocks (1, 5, 9 of WRN (4,10), Fig. 6) as "the
convolution performed in the shortcut connection ... is more important than
the residual block itself". ``shortcut="zero_pad"`` is He et al. (2015b)'s
parameter-free option A (subsample, pad channels with zeros; ResNet-32 then
has 0.46M parameters).

Inputs: ``in_channels=3`` for CIFAR, 1 for the MNIST / Fashion-MNIST
analogues (any spatial size; pooling is global). BatchNorm momentum is in
PyTorch's convention: the paper's "momentum 0.9" (Torch/Keras style) is
``bn_momentum=0.1``, PyTorch's default.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import asdict, dataclass
from typing import TypedDict, Unpack

from torch import Tensor, nn

from hacn_core.gates import GATE_FUNCTIONS, GatedResidualLayer, ResidualLayer
from hacn_core.engine.checks import check_choice
from hacn_core.models.conv import ZeroPadShortcut, conv3x3

SHORTCUTS: tuple[str, ...] = ("projection", "zero_pad")
#: the ResidualStack rules a pre-activation block can take (module docstring)
RESNET_RULES: tuple[str, ...] = ("resnet", "gated")


def wrn_depth(n: int) -> int:
    """Depth of the paper's "Wide ResNet (n, k)": ``6n + 4`` (e.g. n = 4 -> WRN-28)."""
    return 6 * n + 4


@dataclass(frozen=True)
class ResNetCifarConfig:
    """A pre-activation (wide) ResNet for 32x32 images (Sec. 3.2).

    ``blocks_per_stage`` is ``n``; ``widths`` the channels of the three stages.
    ``rule`` (one of :data:`RESNET_RULES`) and ``gated`` say the same thing: give
    either; after construction both are set (``rule=None`` reads ``gated``).
    """

    blocks_per_stage: int = 5
    widths: tuple[int, int, int] = (16, 32, 64)
    num_classes: int = 10
    in_channels: int = 3
    stem_channels: int = 16
    dropout: float = 0.0
    gated: bool = False
    g: str = "relu"
    k_init: float = 1.0
    shortcut: str = "projection"
    bn_momentum: float = 0.1
    rule: str | None = None

    def __post_init__(self) -> None:
        if self.rule is None:
            object.__setattr__(self, "rule", "gated" if self.gated else "resnet")
        check_choice("rule", self.rule, RESNET_RULES)
        if self.gated and self.rule != "gated":
            raise ValueError(f"gated=True contradicts rule={self.rule!r}; give rule='gated' or gated=False")
        object.__setattr__(self, "gated", self.rule == "gated")
        _positive_int("blocks_per_stage", self.blocks_per_stage)
        if len(self.widths) != 3:
            raise ValueError(f"widths={self.widths!r} must list the channels of the 3 stages")
        for w in self.widths:
            _positive_int("widths", w)
        _positive_int("num_classes", self.num_classes)
        _positive_int("in_channels", self.in_channels)
        _positive_int("stem_channels", self.stem_channels)
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout={self.dropout!r} must lie in [0, 1) (the paper uses 0 or 0.3)")
        if self.g not in GATE_FUNCTIONS:
            raise ValueError(f"g={self.g!r} is not a gate function; allowed: {', '.join(GATE_FUNCTIONS)}")
        if self.shortcut not in SHORTCUTS:
            raise ValueError(f"shortcut={self.shortcut!r} is not a shortcut type; allowed: {', '.join(SHORTCUTS)}")
        if not 0.0 <= self.bn_momentum <= 1.0:
            raise ValueError(f"bn_momentum={self.bn_momentum!r} must lie in [0, 1] (PyTorch convention)")

    @property
    def num_blocks(self) -> int:
        """Residual blocks (= gates of the gated variant): ``3n``."""
        return 3 * self.blocks_per_stage


class ResNetOptions(TypedDict, total=False):
    """Keyword options of :func:`preact_resnet` and :func:`wide_resnet`; defaults in :class:`ResNetCifarConfig`."""

    rule: str
    in_channels: int
    g: str
    k_init: float
    shortcut: str
    bn_momentum: float


def _positive_int(field: str, value: object) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{field}={value!r} must be an integer >= 1")


def preact_block(
    in_channels: int, out_channels: int, stride: int, config: ResNetCifarConfig
) -> ResidualLayer:
    """One pre-activation basic block as a (gated) residual layer (Sec. 2.2, 3.2).

    Identity block: ``u = [g(k)] f_r(x) + x`` with
    ``f_r = BN-ReLU-Conv-BN-ReLU-[Dropout]-Conv``. Dimension-changing block
    with ``projection``: ``h = ReLU(BN(x))`` shared, ``u = [g(k)] f_r'(h) + P(h)``
    where ``f_r'`` is ``f_r`` without its leading BN-ReLU and ``P`` a 1x1
    convolution. With ``zero_pad``: ``u = [g(k)] f_r(x) + A(x)``.
    """
    m = config.bn_momentum

    def bn_relu(channels: int) -> list[tuple[str, nn.Module]]:
        return [("bn1", nn.BatchNorm2d(channels, momentum=m)), ("relu1", nn.ReLU())]

    tail: list[tuple[str, nn.Module]] = [
        ("conv1", conv3x3(in_channels, out_channels, stride)),
        ("bn2", nn.BatchNorm2d(out_channels, momentum=m)),
        ("relu2", nn.ReLU()),
    ]
    if config.dropout > 0:
        tail.append(("dropout", nn.Dropout(config.dropout)))  # "between convolutions" (Sec. 3.2)
    tail.append(("conv2", conv3x3(out_channels, out_channels)))

    changes = stride != 1 or in_channels != out_channels
    pre: nn.Module | None = None
    shortcut: nn.Module | None = None
    if changes and config.shortcut == "projection":
        pre = nn.Sequential(OrderedDict(bn_relu(in_channels)))
        block = nn.Sequential(OrderedDict(tail))
        shortcut = nn.Conv2d(in_channels, out_channels, 1, stride=stride, bias=False)
    else:
        block = nn.Sequential(OrderedDict(bn_relu(in_channels) + tail))
        if changes:
            shortcut = ZeroPadShortcut(in_channels, out_channels, stride)
    if config.gated:
        return GatedResidualLayer(block, shortcut=shortcut, pre=pre, g=config.g, k_init=config.k_init)
    return ResidualLayer(block, shortcut=shortcut, pre=pre)


class ResNetCifar(nn.Module):
    """Pre-activation (wide) ResNet: conv3x3 stem, 3 stages of ``n`` blocks, BN-ReLU-pool-linear.

    Submodules ``stem``, ``stages`` (``stages.<s>.<b>`` is block ``b`` of stage
    ``s``: a ``ResidualLayer`` / ``GatedResidualLayer``), ``head``. The blocks
    come in forward order, so ``gate_values`` lists ``k`` by block index as in
    Fig. 6. Gated and ungated models share parameter names except the gates.
    """

    def __init__(self, config: ResNetCifarConfig) -> None:
        super().__init__()
        self.config = c = config
        self.stem = conv3x3(c.in_channels, c.stem_channels)
        stages = []
        channels = c.stem_channels
        for s, (width, stride) in enumerate(zip(c.widths, (1, 2, 2))):
            blocks = []
            for b in range(c.blocks_per_stage):
                blocks.append(preact_block(channels, width, stride if b == 0 else 1, c))
                channels = width
            stages.append(nn.Sequential(*blocks))
        self.stages = nn.Sequential(*stages)
        self.head = nn.Sequential(
            OrderedDict(
                bn=nn.BatchNorm2d(channels, momentum=c.bn_momentum),
                relu=nn.ReLU(),
                pool=nn.AdaptiveAvgPool2d(1),
                flatten=nn.Flatten(),
                fc=nn.Linear(channels, c.num_classes),
            )
        )
        self._init_weights()

    def _init_weights(self) -> None:
        # He et al. (2015a) normal init for convolutions (fan_out, as in the
        # reference ResNet/WRN code), unit BN gains, zero biases.
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Linear):
                nn.init.zeros_(m.bias)

    def forward(self, x: Tensor) -> Tensor:
        """Logits for images ``(B, in_channels, H, W)``."""
        return self.head(self.stages(self.stem(x)))

    def extra_repr(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in asdict(self.config).items())


def preact_resnet(n: int, num_classes: int = 10, gated: bool = False, **options: Unpack[ResNetOptions]) -> ResNetCifar:
    """Pre-activation ResNet-(6n+2) for CIFAR, optionally gated (Table 3: "Resnet 5" is n = 5).

    ``options``: :class:`ResNetOptions` (``rule``, ``in_channels``, ``g``, ``k_init``,
    ``shortcut``, ``bn_momentum``), defaults as in :class:`ResNetCifarConfig`.
    """
    _positive_int("n", n)
    return ResNetCifar(
        ResNetCifarConfig(blocks_per_stage=n, widths=(16, 32, 64), num_classes=num_classes, gated=gated, **options)
    )


def wide_resnet(
    depth: int,
    width: int,
    num_classes: int = 10,
    dropout: float = 0.0,
    gated: bool = False,
    **options: Unpack[ResNetOptions],
) -> ResNetCifar:
    """WRN-depth-width (``depth = 6n + 4``), optionally gated and with dropout (Tables 3-6).

    The paper's "Wide ResNet (4,10) + Dropout" is ``wide_resnet(28, 10, dropout=0.3)``;
    ``options`` as in :func:`preact_resnet`.
    """
    if not isinstance(depth, int) or isinstance(depth, bool) or depth < 10 or (depth - 4) % 6:
        raise ValueError(f"depth={depth!r} must be of the form 6n + 4 with n >= 1 (allowed: 10, 16, 22, 28, 34, 40, ...)")
    _positive_int("width", width)
    return ResNetCifar(
        ResNetCifarConfig(
            blocks_per_stage=(depth - 4) // 6,
            widths=(16 * width, 32 * width, 64 * width),
            num_classes=num_classes,
            dropout=dropout,
            gated=gated,
            **options,
        )
    )


__all__ = [
    "RESNET_RULES",
    "SHORTCUTS",
    "ResNetOptions",
    "ResNetCifarConfig",
    "ResNetCifar",
    "ZeroPadShortcut",
    "conv3x3",
    "preact_block",
    "preact_resnet",
    "wide_resnet",
    "wrn_depth",
]
