"""A residual MLP stack for tabular inputs, its layers joined by any H-ACN rule (new work, not a reproduction).

The tabular setting of :mod:`hacn_core.beyond.width_connectivity`: AWNN's tabular
tasks (AWNN Sec. 4, Appendix B Table 2: DoubleMoon, Spiral, SpiralHard, 2-d inputs)
fed to a *deep* network whose layers are joined by the residual rules of H-ACN
(Sec. 2, Eq. 2)::

    x_0 = E x_in                                   (Linear(in_features, d): the embedding, exit 0)
    f_i(x) = MLP_i(LN_i(x))                        (a pre-norm MLP d -> D_i -> d, i = 1..L)
    x_i = f_i(x_{i-1}) + a_i x_{i-1},   y = sum_{i=0..L} f_i(x_{i-1})     (H-ACN Eq. 2, any rule)
    logits = W_head LN(y)

Neither paper has this network: AWNN's MLPs are plain (no residual connections), and
H-ACN's backbones are Mixers and transformers. It is the Mixer's channel-mixing
sub-layer without the tokens, so both settings of the study share one layer type.
``mlp="adaptive"`` (the default) makes every ``MLP_i`` AWNN's adaptive MLP
(Eqs. 11-14), starting at width ``mlp_dim``; ``mlp="fixed"`` is the fixed-width
twin (any kind of :mod:`hacn_core.models.mlp`). Depth-adaptive LayerNorm (H-ACN
Eq. 7) follows the Mixer's ``depth_ln="auto"`` convention: the paper's form for the
ACN family, plain LayerNorm otherwise. Layer-wise exits (H-ACN Sec. 3.1) come from
:class:`~hacn_core.models.exits.LayerwiseClassifier`: the shared head at every exit
of one pass, ``(L + 1, batch, classes)``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from torch import Tensor, nn

from hacn_core.hacn.connectivity import (
    ALPHA_RULES,
    DEPTH_LN_CHOICES,
    RULES,
    TWO_PART_RULES,
    AlphaInit,
    ResidualStack,
    as_alpha_init,
    check_choice,
    make_norm,
    resolve_depth_ln,
)
from hacn_core.models.exits import LayerwiseClassifier
from hacn_core.models.mlp import MLP_KINDS, MlpLayer, as_mlp_layer

#: rules a stack of single-output blocks can take (the two-part rules need a Mixer's ``(t, c)``)
STACK_RULES: tuple[str, ...] = tuple(r for r in RULES if r not in TWO_PART_RULES)


@dataclass(frozen=True)
class StackConfig:
    """Settings of :class:`ResidualMLPStack`; errors name ``StackConfig.<field>`` and the allowed values.

    ``hidden_dim`` is the stream width ``d``; ``mlp_dim`` the hidden width of every
    layer's MLP (the *starting* width of an adaptive one). ``rule``, ``alpha_init``,
    ``trainable_alpha`` go to :class:`~hacn_core.hacn.connectivity.ResidualStack`.
    """

    in_features: int = 2
    num_classes: int = 2
    hidden_dim: int = 32
    num_layers: int = 8
    mlp_dim: int = 32
    rule: str = "hacn"
    alpha_init: AlphaInit | str | float | None = None
    trainable_alpha: bool = True
    depth_ln: str = "auto"
    depth_ln_strength: float = 0.05
    mlp: str | MlpLayer = "adaptive"

    def __post_init__(self) -> None:
        for name in ("in_features", "num_classes", "hidden_dim", "num_layers", "mlp_dim"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"StackConfig.{name}={v!r} must be a positive integer")
        check_choice("StackConfig.rule", self.rule, STACK_RULES)
        check_choice("StackConfig.depth_ln", self.depth_ln, DEPTH_LN_CHOICES)
        if self.alpha_init is not None:
            if self.rule not in ALPHA_RULES:
                raise ValueError(f"StackConfig.alpha_init is only used by the rules {', '.join(ALPHA_RULES)}; "
                                 f"StackConfig.rule={self.rule!r}")
            as_alpha_init(self.alpha_init, self.rule, "StackConfig.alpha_init")  # raises on a bad spec
        as_mlp_layer(self.mlp, "StackConfig.mlp", MLP_KINDS)

    @property
    def resolved_depth_ln(self) -> str:
        """``depth_ln`` with ``auto`` resolved: ``paper`` (Eq. 7) for the ACN family, else ``none``."""
        return resolve_depth_ln(self.depth_ln, self.rule)


class StackBlock(nn.Module):
    """One layer ``f_i(x) = MLP(LN(x))``: ``(..., d) -> (..., d)``; the stack adds the connections."""

    def __init__(self, dim: int, hidden: int, depth: int, depth_ln: str, depth_ln_strength: float,
                 mlp: str | MlpLayer) -> None:
        super().__init__()
        self.norm = make_norm(dim, depth, depth_ln, depth_ln_strength)
        self.mlp = as_mlp_layer(mlp, "mlp")(dim, hidden, dim)

    def forward(self, x: Tensor) -> Tensor:
        return self.mlp(self.norm(x))


class StackHead(nn.Module):
    """Shared classifier head ``W LN(z)`` on ``(..., d)`` (every exit of the stack goes through it)."""

    def __init__(self, dim: int, num_classes: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.fc = nn.Linear(dim, num_classes)

    def forward(self, z: Tensor) -> Tensor:
        return self.fc(self.norm(z))


class ResidualMLPStack(LayerwiseClassifier):
    """Embedding, ``L`` :class:`StackBlock` s joined by ``rule``, shared head (module docstring).

    ``forward(x)`` maps ``(B, in_features)`` to logits ``(B, classes)``;
    ``forward(x, num_layers=n)`` is the network cut after layer ``n``;
    ``layerwise_logits(x)`` gives every exit of one pass. Keyword arguments override
    fields of ``config``; ``generator`` draws the ``a_i`` (as :class:`~hacn_core.models.mixer.MLPMixer`).
    """

    def __init__(self, config: StackConfig | None = None, *, generator: Any = None, **overrides: Any) -> None:
        super().__init__()
        self.config = replace(config or StackConfig(), **overrides)
        c = self.config
        depth_ln = c.resolved_depth_ln
        self.embed = nn.Linear(c.in_features, c.hidden_dim)
        self.stack = ResidualStack(
            [StackBlock(c.hidden_dim, c.mlp_dim, i, depth_ln, c.depth_ln_strength, c.mlp)
             for i in range(1, c.num_layers + 1)],
            c.rule, alpha_init=c.alpha_init, trainable=c.trainable_alpha, generator=generator)
        self.head = StackHead(c.hidden_dim, c.num_classes)

    def tokens(self, x: Tensor) -> Tensor:
        """The embedding ``x_0 = E x``, ``(B, d)``: the stack's input (exit 0)."""
        return self.embed(x)


__all__ = ["STACK_RULES", "ResidualMLPStack", "StackBlock", "StackConfig", "StackHead"]
