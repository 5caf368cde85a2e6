"""Fully connected MNIST networks of Residual Gates, Section 3.1 (Tables 1-2, Figs. 4-5).

"The networks consist of a linear layer with 50 neurons, followed by d layers
with 50 neurons each, and lastly a softmax layer for classification. Only the
d middle layers differ between the four architectures." Each middle layer is
**Dot-BN-ReLU** (a linear map, BatchNorm, ReLU), for plain *and* residual
networks ("we opted for the traditional Dot-BN-ReLU layer when designing
Residual Networks. Each residual block consists of two layers").

How ``d`` is counted
--------------------
``d`` counts *layers* (Table 1's "Depth = d + 2" adds the first linear layer
and the softmax layer). A residual network of depth ``d`` therefore has
``d / 2`` residual blocks of two Dot-BN-ReLU layers: Fig. 5 indexes the blocks
of the ``d = 100`` Gated ResNet from 1 to 50. So ``d`` must be even for the
residual kinds, and

==============  ====================================  =========
kind            middle part                           gates
==============  ====================================  =========
``plain``       d x  ``u = f(x)``                      0
``gated_plain`` d x  ``u = g(k) f(x) + (1-g(k)) x``    d
``resnet``      d/2 x ``u = f2(f1(x)) + x``            0
``gated_resnet`` d/2 x ``u = g(k) f2(f1(x)) + x``      d/2
==============  ====================================  =========

with ``f = ReLU(BN(W x + b))``. Each kind joins its middle units by one rule
of :class:`~hacn_core.hacn.connectivity.ResidualStack` (:data:`RULE_OF_KIND`):
``plain``, ``resnet``, ``gated_plain`` and ``gated`` (the Gated ResNet), so a
network may be named by its rule instead (``mnist_fc(rule="gated", depth=100)``
is ``mnist_fc("gated_resnet", 100)``). Only these four are built (they are
the networks of Sec. 3.1, and the per-layer rule of
:mod:`hacn_core.models.stacked_fc` covers exactly them); the stack's other
rules (``acn``, ``hacn``, ReZero, ...) apply to the Mixer. The residual function is the two layers as the
paper states them (ReLU inside the branch, nothing after the sum), not the
He et al. (2015b) variant ``ReLU(BN(W2 ReLU(BN(W1 x))) + x)``.

Choices the paper leaves open (named options here): the first layer is a bare
linear map (``stem="linear"``, the paper's wording) or a Dot-BN-ReLU layer
(``stem="dot_bn_relu"``); weight init is PyTorch's default or Keras's
Glorot-uniform (``init``); BatchNorm momentum in PyTorch's convention
(``bn_momentum=0.1`` is Keras's ``momentum=0.9``; Keras's default ``momentum=0.99`` is
``bn_momentum=0.01``) and epsilon (``bn_eps``: PyTorch's 1e-5, Keras's default 1e-3). The "softmax layer" is a
linear layer producing logits; the softmax is in the cross-entropy loss.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import asdict, dataclass
from typing import TypedDict, Unpack

from torch import Tensor, nn

from hacn_core.gates import (
    GATE_FUNCTIONS,
    GatedPlainLayer,
    GatedResidualLayer,
    PlainLayer,
    ResidualLayer,
)
from hacn_core.engine.checks import check_choice

KINDS: tuple[str, ...] = ("plain", "resnet", "gated_plain", "gated_resnet")
#: the ResidualStack rule that each kind's layers follow (Residual Gates Sec. 2.2)
RULE_OF_KIND: dict[str, str] = {
    "plain": "plain", "resnet": "resnet", "gated_plain": "gated_plain", "gated_resnet": "gated",
}
FC_RULES: tuple[str, ...] = tuple(RULE_OF_KIND.values())
STEMS: tuple[str, ...] = ("linear", "dot_bn_relu")
INITS: tuple[str, ...] = ("default", "glorot")


@dataclass(frozen=True)
class FCNetConfig:
    """Configuration of a fully connected network of Section 3.1.

    ``depth`` is the paper's ``d`` (middle layers, see the module docstring).
    ``kind`` (one of :data:`KINDS`) or ``rule`` (one of :data:`FC_RULES`) name the
    network; give either (neither: ``gated_resnet``). After construction both are set.
    """

    kind: str | None = None
    depth: int = 10
    width: int = 50
    in_features: int = 784
    num_classes: int = 10
    g: str = "relu"
    k_init: float = 1.0
    stem: str = "linear"
    init: str = "default"
    bn_momentum: float = 0.1
    bn_eps: float = 1e-5
    rule: str | None = None

    def __post_init__(self) -> None:
        if self.rule is not None:
            kind = {r: k for k, r in RULE_OF_KIND.items()}[check_choice("rule", self.rule, FC_RULES)]
            if self.kind is not None and self.kind != kind:
                raise ValueError(f"kind={self.kind!r} contradicts rule={self.rule!r} (kind {kind!r}); give one of them")
            object.__setattr__(self, "kind", kind)
        elif self.kind is None:
            object.__setattr__(self, "kind", "gated_resnet")
        if self.kind not in KINDS:
            raise ValueError(f"kind={self.kind!r} is not a network kind; allowed: {', '.join(KINDS)}")
        object.__setattr__(self, "rule", RULE_OF_KIND[self.kind])
        if not isinstance(self.depth, int) or isinstance(self.depth, bool) or self.depth < 1:
            raise ValueError(f"depth={self.depth!r} must be an integer >= 1 (the paper's d: 2, 10, 20, 50, 100)")
        if self.kind in ("resnet", "gated_resnet") and self.depth % 2:
            raise ValueError(
                f"depth={self.depth} must be even for kind={self.kind!r}: d counts layers and each "
                "residual block has two (allowed: 2, 4, 6, ...)"
            )
        for field in ("width", "in_features", "num_classes"):
            value = getattr(self, field)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{field}={value!r} must be an integer >= 1")
        if self.g not in GATE_FUNCTIONS:
            raise ValueError(f"g={self.g!r} is not a gate function; allowed: {', '.join(GATE_FUNCTIONS)}")
        if self.stem not in STEMS:
            raise ValueError(f"stem={self.stem!r} is not a stem; allowed: {', '.join(STEMS)}")
        if self.init not in INITS:
            raise ValueError(f"init={self.init!r} is not an init scheme; allowed: {', '.join(INITS)}")
        if not 0.0 <= self.bn_momentum <= 1.0:
            raise ValueError(f"bn_momentum={self.bn_momentum!r} must lie in [0, 1] (PyTorch convention)")
        if not isinstance(self.bn_eps, (int, float)) or isinstance(self.bn_eps, bool) or not self.bn_eps > 0:
            raise ValueError(f"bn_eps={self.bn_eps!r} must be a number > 0 (PyTorch 1e-5, Keras 1e-3)")

    @property
    def num_blocks(self) -> int:
        """Shape-preserving units in the middle: d layers, or d/2 residual blocks."""
        return self.depth // 2 if self.kind in ("resnet", "gated_resnet") else self.depth


def dot_bn_relu(in_features: int, out_features: int, bn_momentum: float = 0.1,
                bn_eps: float = 1e-5) -> nn.Sequential:
    """One "Dot-BN-ReLU" layer ``f(x) = ReLU(BN(W x + b))`` (Sec. 3.1); BN divides by ``sqrt(var + bn_eps)``."""
    return nn.Sequential(
        OrderedDict(
            linear=nn.Linear(in_features, out_features),
            bn=nn.BatchNorm1d(out_features, eps=bn_eps, momentum=bn_momentum),
            relu=nn.ReLU(),
        )
    )


class FCNet(nn.Module):
    """Linear stem -> d middle layers of one kind -> linear classifier (Sec. 3.1).

    Submodules: ``stem``, ``layers`` (an ``nn.Sequential`` of ``PlainLayer``,
    ``GatedPlainLayer``, ``ResidualLayer`` or ``GatedResidualLayer``), ``head``.
    Plain and gated networks of the same configuration share parameter names
    except the gates ``layers.<i>.k``, so weights copy between them.
    """

    def __init__(self, config: FCNetConfig) -> None:
        super().__init__()
        self.config = c = config
        if c.stem == "linear":
            self.stem: nn.Module = nn.Linear(c.in_features, c.width)
        else:
            self.stem = dot_bn_relu(c.in_features, c.width, c.bn_momentum, c.bn_eps)
        units: list[nn.Module] = []
        for _ in range(c.num_blocks):
            if c.kind == "plain":
                units.append(PlainLayer(dot_bn_relu(c.width, c.width, c.bn_momentum, c.bn_eps)))
            elif c.kind == "gated_plain":
                layer = dot_bn_relu(c.width, c.width, c.bn_momentum, c.bn_eps)
                units.append(GatedPlainLayer(layer, g=c.g, k_init=c.k_init))
            else:
                block = nn.Sequential(
                    OrderedDict(
                        layer1=dot_bn_relu(c.width, c.width, c.bn_momentum, c.bn_eps),
                        layer2=dot_bn_relu(c.width, c.width, c.bn_momentum, c.bn_eps),
                    )
                )
                if c.kind == "resnet":
                    units.append(ResidualLayer(block))
                else:
                    units.append(GatedResidualLayer(block, g=c.g, k_init=c.k_init))
        self.layers = nn.Sequential(*units)
        self.head = nn.Linear(c.width, c.num_classes)
        if c.init == "glorot":
            self._glorot_init()

    def _glorot_init(self) -> None:
        # Keras' Dense default: Glorot-uniform weights, zero biases.
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.xavier_uniform_(m.weight)
                nn.init.zeros_(m.bias)

    def features(self, x: Tensor) -> Tensor:
        """Output of the middle layers (the input of the softmax layer)."""
        return self.layers(self.stem(x.flatten(1)))

    def forward(self, x: Tensor) -> Tensor:
        """Logits for ``x`` of shape ``(B, in_features)`` or ``(B, 1, 28, 28)``."""
        return self.head(self.features(x))

    def extra_repr(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in asdict(self.config).items())


class FCOptions(TypedDict, total=False):
    """Keyword options of :func:`mnist_fc` (defaults: :class:`FCNetConfig`)."""

    rule: str
    in_features: int
    num_classes: int
    g: str
    k_init: float
    stem: str
    init: str
    bn_momentum: float
    bn_eps: float


def mnist_fc(
    kind: str | None = None, depth: int | None = None, width: int = 50, **options: Unpack[FCOptions]
) -> FCNet:
    """The fully connected MNIST network of Sec. 3.1: ``kind`` in ``KINDS`` (or ``rule=``), ``depth`` = d.

    ``mnist_fc("gated_resnet", 100)`` (or ``mnist_fc(rule="gated", depth=100)``) is
    the network of Fig. 5 (50 gated blocks). ``options``: :class:`FCOptions`.
    """
    return FCNet(FCNetConfig(kind=kind, depth=depth, width=width, **options))


def fc_param_count(kind: str, depth: int, width: int = 50, in_features: int = 784, num_classes: int = 10) -> int:
    """Closed-form parameter count of ``mnist_fc(kind, depth, width)`` with the linear stem.

    stem ``in*w + w`` + per layer ``w*w + w`` (Dot) ``+ 2w`` (BN gain/shift)
    + head ``w*c + c`` + one ``k`` per gated unit.
    """
    config = FCNetConfig(kind=kind, depth=depth, width=width, in_features=in_features, num_classes=num_classes)
    per_layer = width * width + width + 2 * width
    gates = config.num_blocks if kind.startswith("gated") else 0
    return (in_features + 1) * width + depth * per_layer + (width + 1) * num_classes + gates


__all__ = [
    "FC_RULES",
    "KINDS",
    "RULE_OF_KIND",
    "FCNet",
    "FCNetConfig",
    "FCOptions",
    "dot_bn_relu",
    "fc_param_count",
    "mnist_fc",
]
