"""MLP-Mixer with a pluggable residual rule (H-ACN Sec. 3.2, Appendix A, Fig. 7).

The Mixer of Tolstikhin et al. (2021): a per-patch linear embedding, ``L``
Mixer layers, and a head (LayerNorm, mean over tokens, linear). Appendix A's
CIFAR-10 setting is the default of :class:`MixerConfig`: 16 layers, hidden size
``d = 128``, ``4 x 4`` patches of a ``32 x 32 x 3`` image (64 tokens), channel
MLP ``D_C = 512``, token MLP ``D_S = 64``. Image size, channels and classes are
arguments, so the same model runs on ``28 x 28 x 1`` Fashion-MNIST (49 tokens).

What one H-ACN layer ``f_i`` is
-------------------------------
A Mixer layer has two sub-layers, token mixing ``t = T(LN(x))`` (an MLP across
tokens) and channel mixing ``c = C(LN(x + t))`` (an MLP across channels, fed the
token-mixed stream). We take **one Mixer layer as one H-ACN layer**, with

    f_i(x) = t + c,    t = T(LN_1(x)),    c = C(LN_2(x + t)),

because (1) the paper counts 16 layers and "only 16 extra parameters" for the
16-layer Mixer (Appendix B), one ``a_i`` per Mixer layer, and (2) Eq. 2 must give
"a vanilla ResNet" at ``a_i = 1``: ``x + f(x) = (x + t) + C(LN(x + t))`` is
exactly the standard Mixer layer. The short skip inside the layer (channel
mixing reads ``x + t``) is therefore part of ``f_i``; at ``a_i = 0`` (ACN) the
stream ``x_i = t + c`` carries no identity path. Named alternatives:

* ``layer_unit="sublayer"``: every sub-layer is its own ``f`` (``2L`` layers
  and ``2L`` residual weights; ``resnet`` is again the standard Mixer).
* ``rule="hacn_code_mixer"``: the public code, ``s += c + a t`` and
  ``x_i = c + a (t + x)``, i.e. ``a`` scales the token-mixing output as well
  (``hacn_core.hacn.connectivity``). At ``a = 1`` it is the standard Mixer too.

Two more pieces of the public code's Mixer are options of :class:`MixerConfig`:
``class_token=True`` puts a learnable token (init 0) in front of the patches, mixed
by every layer like the others and read alone by the head (after its LayerNorm)
instead of the mean over tokens; ``alpha_dtype="float64"`` keeps the residual
weights in double precision (the code draws them so); ``block="code"`` is the public
code's layer (:class:`MixerBlock`): its channel part is
``c = DLN(ReLU(W C(DLN(x + t))) + x)``, an extra ``d x d`` linear map and ReLU after
the channel MLP, a short skip from the layer's input ``x`` and one more
depth-adaptive norm on the result. The product ``a_i x`` stays
float32, since a 0-d tensor does not promote a float32 one; what changes is that
``a_i``, its gradient and its optimizer state are float64.

Depth-adaptive LayerNorm (Eq. 7) scales both norms of layer ``i`` by one gain
``alpha_i`` (one extra parameter per layer). ``depth_ln="auto"`` uses the
paper's form for the ACN family (footnote 3: "another technique we employ to
enhance the forward pass of H-ACNs and ACNs") and plain LayerNorm otherwise.

Layer-wise accuracy (Sec. 3.1): :meth:`MLPMixer.layerwise_logits` applies the
shared head to every exit of one forward pass (partial sums for ACN/H-ACN,
the stream for ResNet), shape ``(L + 1, batch, classes)``; exit 0 is the
embedding alone.

MLP kinds (:mod:`hacn_core.models.mlp`): ``mlp`` picks the channel-mixing MLPs
and ``token_mlp`` the token-mixing MLPs: ``fixed`` (Appendix A's GELU MLP, the
default), ``adaptive`` (AWNN's ``AdaptiveMLP``, its hidden width learned,
starting at ``channel_mlp_dim`` / ``token_mlp_dim``) or ``gated`` (the MLP
times a Residual Gates scalar ``g(k)``). ``MLPMixer(rule="hacn",
mlp="adaptive")`` is an H-ACN Mixer whose channel MLPs learn their width.

LayerNorm epsilon: every norm here (the sub-layers', Depth-adaptive LayerNorm's
and the head's) uses PyTorch's default ``eps = 1e-5``, where the reference Mixer
(Tolstikhin et al.'s Flax code, whose ``nn.LayerNorm`` defaults to ``1e-6``) uses
``1e-6``. We keep ``1e-5``: the stored results were trained with it, and the
difference only matters for features whose variance is near ``1e-5``.

:class:`DenseMixer` is Fig. 7's DenseNet-style mixer: concatenation instead of
addition, 10 layers with a parameter count comparable to the 16-layer Mixer
(footnote 12).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, ClassVar

import torch
from torch import Tensor, nn

from hacn_core.hacn.connectivity import (
    ALPHA_RULES,
    DENSE_BASES,
    DEPTH_LN_CHOICES,
    RULES,
    TWO_PART_RULES,
    AlphaInit,
    DepthGain,
    ResidualStack,
    as_alpha_init,
    check_choice,
    make_norm,
    resolve_depth_ln,
)
from hacn_core.models.exits import LayerwiseClassifier
from hacn_core.models.mlp import MLP_KINDS, UNGATED_MLP_KINDS, MlpLayer, as_mlp_layer, mlp_kind

LAYER_UNITS: tuple[str, ...] = ("block", "sublayer")
#: the form of one Mixer layer: ``paper`` (Appendix A, the standard Mixer layer) or ``code`` (the public code's)
BLOCKS: tuple[str, ...] = ("paper", "code")
#: the dtype of the residual weights a_i (``float64``: the public code draws them in double precision)
ALPHA_DTYPES: tuple[str, ...] = ("float32", "float64")


class MixerSettings:
    """What :class:`MixerConfig` and :class:`DenseMixerConfig` share: geometry, MLP kinds, their checks.

    A subclass is a frozen dataclass with the fields ``image_size``,
    ``patch_size``, ``dropout``, ``mlp``, ``token_mlp`` and those named in
    ``positive_fields``; errors name ``<class>.<field>`` and the allowed values.
    """

    #: the integer fields that must be >= 1, in the order they are checked
    positive_fields: ClassVar[tuple[str, ...]] = ()
    #: the MLP kinds the token and channel MLPs may take (``hacn_core.models.mlp``)
    mlp_kinds: ClassVar[tuple[str, ...]] = MLP_KINDS
    # fields every subclass declares (annotations only: the subclasses' dataclass fields)
    image_size: int
    patch_size: int
    dropout: float
    mlp: str | MlpLayer
    token_mlp: str | MlpLayer

    def check_geometry(self) -> None:
        """Positive sizes, and whole patches: ``image_size`` divisible by ``patch_size``."""
        owner = type(self).__name__
        for name in self.positive_fields:
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{owner}.{name}={v!r} must be a positive integer")
        if self.image_size % self.patch_size:
            raise ValueError(
                f"{owner}.image_size={self.image_size} is not divisible by {owner}.patch_size={self.patch_size}; "
                "the Mixer needs whole patches"
            )

    def check_mlps(self) -> None:
        """``dropout`` in [0, 1); ``mlp`` / ``token_mlp`` of an allowed kind (``adaptive``: no dropout)."""
        owner = type(self).__name__
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"{owner}.dropout={self.dropout!r} must be in [0, 1)")
        for name in ("mlp", "token_mlp"):
            spec = as_mlp_layer(getattr(self, name), f"{owner}.{name}", self.mlp_kinds)
            if self.dropout and mlp_kind(spec) == "adaptive":
                raise ValueError(
                    f"{owner}.dropout={self.dropout!r} is not available with {owner}.{name}='adaptive' "
                    "(AWNN Eq. 14 has no dropout); allowed: dropout=0.0"
                )

    @property
    def num_patches(self) -> int:
        """Tokens per image: ``(image_size / patch_size)^2`` (64 for CIFAR, 49 for Fashion-MNIST)."""
        return (self.image_size // self.patch_size) ** 2


@dataclass(frozen=True)
class MixerConfig(MixerSettings):
    """Settings of :class:`MLPMixer`; the defaults are H-ACN Appendix A (Mixer / CIFAR-10).

    ``rule`` / ``alpha_init`` / ``trainable_alpha`` / ``gate_fn`` / ``dense_base``
    go to :class:`~hacn_core.hacn.connectivity.ResidualStack`; ``layer_unit`` and
    ``depth_ln`` are explained in the module docstring. ``mlp`` is the MLP layer
    of the channel-mixing MLPs and ``token_mlp`` that of the token-mixing MLPs:
    a kind of :data:`~hacn_core.models.mlp.MLP_KINDS` (``fixed``, Appendix A's
    GELU MLP, by default), ``mlp_layer(kind, **options)`` or a callable
    (:mod:`hacn_core.models.mlp`).
    """

    positive_fields: ClassVar[tuple[str, ...]] = (
        "image_size", "in_channels", "num_classes", "patch_size", "hidden_dim", "num_layers",
        "token_mlp_dim", "channel_mlp_dim",
    )

    image_size: int = 32
    in_channels: int = 3
    num_classes: int = 10
    patch_size: int = 4
    hidden_dim: int = 128
    num_layers: int = 16
    token_mlp_dim: int = 64
    channel_mlp_dim: int = 512
    rule: str = "hacn"
    alpha_init: AlphaInit | str | float | None = None
    trainable_alpha: bool = True
    layer_unit: str = "block"
    depth_ln: str = "auto"
    depth_ln_strength: float = 0.05
    gate_fn: str = "relu"
    dense_base: str = "resnet"
    dropout: float = 0.0
    mlp: str | MlpLayer = "fixed"
    token_mlp: str | MlpLayer = "fixed"
    class_token: bool = False
    alpha_dtype: str = "float32"
    block: str = "paper"

    def __post_init__(self) -> None:
        self.check_geometry()
        check_choice("MixerConfig.rule", self.rule, RULES)
        check_choice("MixerConfig.alpha_dtype", self.alpha_dtype, ALPHA_DTYPES)
        check_choice("MixerConfig.block", self.block, BLOCKS)
        if self.block == "code" and self.layer_unit != "block":
            raise ValueError("MixerConfig.block='code' is a whole Mixer layer; it needs MixerConfig.layer_unit='block'")
        if not isinstance(self.class_token, bool):
            raise ValueError(f"MixerConfig.class_token={self.class_token!r} must be True or False")
        check_choice("MixerConfig.layer_unit", self.layer_unit, LAYER_UNITS)
        check_choice("MixerConfig.depth_ln", self.depth_ln, DEPTH_LN_CHOICES)
        check_choice("MixerConfig.dense_base", self.dense_base, DENSE_BASES)
        if self.rule in TWO_PART_RULES and self.layer_unit != "block":
            raise ValueError(
                f"MixerConfig.rule={self.rule!r} splits a Mixer layer into its two sub-layers itself; "
                "it needs MixerConfig.layer_unit='block'"
            )
        if self.alpha_init is not None:
            if self.rule not in ALPHA_RULES:
                raise ValueError(
                    f"MixerConfig.alpha_init is only used by the rules {', '.join(ALPHA_RULES)}; "
                    f"MixerConfig.rule={self.rule!r}"
                )
            as_alpha_init(self.alpha_init, self.rule, "MixerConfig.alpha_init")  # raises on a bad spec
        self.check_mlps()

    @property
    def num_tokens(self) -> int:
        """Tokens the layers mix: the patches, plus one with ``class_token``."""
        return self.num_patches + int(self.class_token)

    @property
    def resolved_depth_ln(self) -> str:
        """``depth_ln`` with ``auto`` resolved: ``paper`` for the ACN family, else ``none``."""
        return resolve_depth_ln(self.depth_ln, self.rule)


class PatchEmbedding(nn.Module):
    """Per-patch linear embedding: ``(B, C, H, W) -> (B, N, d)`` (a strided convolution)."""

    def __init__(self, in_channels: int, dim: int, patch_size: int) -> None:
        super().__init__()
        self.proj = nn.Conv2d(in_channels, dim, kernel_size=patch_size, stride=patch_size)

    def forward(self, images: Tensor) -> Tensor:
        return self.proj(images).flatten(2).transpose(1, 2)


class TokenMixing(nn.Module):
    """Token-mixing sub-layer ``T(LN(x))``: one MLP across the ``N`` tokens, shared by the channels.

    ``mlp`` is the MLP layer (:mod:`hacn_core.models.mlp`); it sees ``(B, d, N)``.
    """

    def __init__(
        self, num_tokens: int, hidden: int, norm: nn.Module, dropout: float = 0.0, mlp: str | MlpLayer = "fixed"
    ) -> None:
        super().__init__()
        self.norm = norm
        self.mlp = as_mlp_layer(mlp, "token_mlp")(num_tokens, hidden, num_tokens, dropout=dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.mlp(self.norm(x).transpose(-1, -2)).transpose(-1, -2)


class ChannelMixing(nn.Module):
    """Channel-mixing sub-layer ``C(LN(x))``: one MLP across channels, shared by the tokens.

    ``mlp`` is the MLP layer (:mod:`hacn_core.models.mlp`); it sees ``(B, N, d)``.
    """

    def __init__(
        self,
        dim: int,
        hidden: int,
        norm: nn.Module,
        out_dim: int | None = None,
        dropout: float = 0.0,
        mlp: str | MlpLayer = "fixed",
    ) -> None:
        super().__init__()
        self.norm = norm
        self.mlp = as_mlp_layer(mlp, "mlp")(dim, hidden, out_dim or dim, dropout=dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.mlp(self.norm(x))


class MixerBlock(nn.Module):
    """One Mixer layer as one H-ACN layer: ``f(x) = t + c``, ``t = T(LN(x))``, ``c = C(LN(x + t))``.

    ``x + f(x)`` is the standard Mixer layer (the ``resnet`` rule). ``parts(x)``
    returns ``(t, c)`` for the public-code rules. ``depth`` is the layer index
    ``l`` of Depth-adaptive LayerNorm (Eq. 7); both norms share one gain.
    ``mlp`` / ``token_mlp``: the MLP layers of ``C`` and ``T`` (:mod:`hacn_core.models.mlp`).
    """

    def __init__(
        self,
        num_tokens: int,
        dim: int,
        token_mlp_dim: int,
        channel_mlp_dim: int,
        depth: int = 0,
        depth_ln: str = "none",
        depth_ln_strength: float = 0.05,
        dropout: float = 0.0,
        mlp: str | MlpLayer = "fixed",
        token_mlp: str | MlpLayer = "fixed",
        block: str = "paper",
    ) -> None:
        super().__init__()
        self.block = check_choice("block", block, BLOCKS)
        gain = None if depth_ln == "none" else DepthGain(depth, depth_ln, depth_ln_strength)
        self.token = TokenMixing(
            num_tokens, token_mlp_dim, make_norm(dim, depth, depth_ln, depth_ln_strength, gain), dropout, token_mlp
        )
        self.channel = ChannelMixing(
            dim, channel_mlp_dim, make_norm(dim, depth, depth_ln, depth_ln_strength, gain), dropout=dropout, mlp=mlp
        )
        if block == "code":  # the public code's extra map after the channel MLP, and the norm after its skip
            self.post = nn.Linear(dim, dim)
            self.post_norm = make_norm(dim, depth, depth_ln, depth_ln_strength, gain)

    def parts(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """The two sub-layer outputs ``(t, c)``; ``c`` reads the token-mixed stream ``x + t``.

        ``block="code"``: ``c = DLN(ReLU(W C(DLN(x + t))) + x)``, the skip from the layer's input ``x``.
        """
        t = self.token(x)
        c = self.channel(x + t)
        if self.block == "code":
            c = self.post_norm(torch.relu(self.post(c)) + x)
        return t, c

    def forward(self, x: Tensor) -> Tensor:
        t, c = self.parts(x)
        return t + c


class MixerHead(nn.Module):
    """Shared classifier head: LayerNorm, mean over tokens (or the first token, a class token), linear.

    Works on ``(..., N, d)``. ``class_token=True`` reads token 0 instead of the mean.
    """

    def __init__(self, dim: int, num_classes: int, class_token: bool = False) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.fc = nn.Linear(dim, num_classes)
        self.class_token = class_token

    def forward(self, z: Tensor) -> Tensor:
        z = self.norm(z)
        return self.fc(z[..., 0, :] if self.class_token else z.mean(dim=-2))


def build_mixer_layers(config: MixerConfig) -> list[nn.Module]:
    """The ``f_i`` of the stack: ``L`` :class:`MixerBlock` s, or ``2L`` sub-layers for ``layer_unit="sublayer"``."""
    c = config
    depth_ln = c.resolved_depth_ln
    if c.layer_unit == "block":
        return [
            MixerBlock(
                c.num_tokens, c.hidden_dim, c.token_mlp_dim, c.channel_mlp_dim,
                depth=i, depth_ln=depth_ln, depth_ln_strength=c.depth_ln_strength, dropout=c.dropout,
                mlp=c.mlp, token_mlp=c.token_mlp, block=c.block,
            )
            for i in range(1, c.num_layers + 1)
        ]
    layers: list[nn.Module] = []
    for i in range(1, c.num_layers + 1):
        d_tok, d_ch = 2 * i - 1, 2 * i
        token_norm = make_norm(c.hidden_dim, d_tok, depth_ln, c.depth_ln_strength)
        channel_norm = make_norm(c.hidden_dim, d_ch, depth_ln, c.depth_ln_strength)
        layers.append(TokenMixing(c.num_tokens, c.token_mlp_dim, token_norm, c.dropout, c.token_mlp))
        layers.append(ChannelMixing(c.hidden_dim, c.channel_mlp_dim, channel_norm, dropout=c.dropout, mlp=c.mlp))
    return layers


class MLPMixer(LayerwiseClassifier):
    """MLP-Mixer whose layers are joined by any rule of :class:`~hacn_core.hacn.connectivity.ResidualStack`.

    ``MLPMixer()`` is Appendix A's H-ACN Mixer for CIFAR-10;
    ``MLPMixer(rule="resnet")`` the standard Mixer; ``MLPMixer(image_size=28,
    in_channels=1)`` runs on Fashion-MNIST; ``MLPMixer(mlp="adaptive")`` is the
    H-ACN Mixer whose channel MLPs learn their width (AWNN, train it with
    ``ELBOLoss`` and ``WidthCallback``). Keyword arguments override fields of
    ``config``.
    """

    def __init__(
        self, config: MixerConfig | None = None, *, generator: torch.Generator | None = None, **overrides: Any
    ) -> None:
        super().__init__()
        self.config = replace(config or MixerConfig(), **overrides)
        c = self.config
        self.embed = PatchEmbedding(c.in_channels, c.hidden_dim, c.patch_size)
        self.stack = ResidualStack(
            build_mixer_layers(c),
            c.rule,
            alpha_init=c.alpha_init,
            trainable=c.trainable_alpha,
            gate_fn=c.gate_fn,
            dense_base=c.dense_base,
            generator=generator,
        )
        if c.alpha_dtype == "float64" and isinstance(getattr(self.stack, "alpha", None), nn.ParameterList):
            for p in self.stack.alpha:  # a 0-d float64 a_i times a float32 stream stays float32; a_i's update is float64
                p.data = p.data.double()
        self.head = MixerHead(c.hidden_dim, c.num_classes, class_token=c.class_token)
        if c.class_token:  # a learnable token in front of the patches, read by the head (the public code's Mixer)
            self.cls = nn.Parameter(torch.zeros(1, 1, c.hidden_dim))

    def tokens(self, images: Tensor) -> Tensor:
        """The patch embedding ``(B, N, d)`` (``N + 1`` with the class token first): the stack's input (exit 0)."""
        z = self.embed(images)
        if self.config.class_token:
            z = torch.cat([self.cls.expand(z.shape[0], -1, -1), z], dim=1)
        return z


# ---------------------------------------------------------------------------
# DenseNet-style Mixer (Appendix B, Fig. 7)
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class DenseMixerConfig(MixerSettings):
    """Settings of :class:`DenseMixer` (Fig. 7): 10 layers, parameter count near the 16-layer Mixer.

    Layer ``i`` reads the concatenation of the embedding and all earlier layer
    outputs, ``hidden_dim + (i - 1) * growth`` channels, and adds ``growth``
    channels. With ``growth = 64`` and ``channel_mlp_dim = 448`` the model has
    2.27M parameters against 2.26M for Appendix A's residual Mixer (footnote 12:
    "a 10-layer DenseNet with a parameter count comparable to the 16-layer
    counterparts"; the paper gives no widths, these are ours). ``mlp`` /
    ``token_mlp`` as in :class:`MixerConfig`, but not ``gated``: a dense layer's
    output is concatenated, not added to an identity path that a gate could
    regulate (:mod:`hacn_core.models.mlp`).
    """

    positive_fields: ClassVar[tuple[str, ...]] = (
        "image_size", "in_channels", "num_classes", "patch_size", "hidden_dim", "num_layers", "growth",
        "token_mlp_dim", "channel_mlp_dim",
    )
    mlp_kinds: ClassVar[tuple[str, ...]] = UNGATED_MLP_KINDS

    image_size: int = 32
    in_channels: int = 3
    num_classes: int = 10
    patch_size: int = 4
    hidden_dim: int = 128
    num_layers: int = 10
    growth: int = 64
    token_mlp_dim: int = 64
    channel_mlp_dim: int = 448
    dropout: float = 0.0
    mlp: str | MlpLayer = "fixed"
    token_mlp: str | MlpLayer = "fixed"

    def __post_init__(self) -> None:
        self.check_geometry()
        self.check_mlps()

    @property
    def out_dim(self) -> int:
        """Channels of the final concatenation: ``hidden_dim + num_layers * growth``."""
        return self.hidden_dim + self.num_layers * self.growth


class DenseMixerLayer(nn.Module):
    """A Mixer layer on concatenated features: ``t = T(LN(z))``, output ``C(LN(z + t))`` with ``growth`` channels.

    ``mlp`` / ``token_mlp``: ``fixed`` or ``adaptive`` MLP layers (not ``gated``, see :class:`DenseMixerConfig`).
    """

    def __init__(
        self,
        num_tokens: int,
        in_dim: int,
        growth: int,
        token_mlp_dim: int,
        channel_mlp_dim: int,
        dropout: float = 0.0,
        mlp: str | MlpLayer = "fixed",
        token_mlp: str | MlpLayer = "fixed",
    ) -> None:
        super().__init__()
        token_mlp = as_mlp_layer(token_mlp, "token_mlp", UNGATED_MLP_KINDS)
        mlp = as_mlp_layer(mlp, "mlp", UNGATED_MLP_KINDS)
        self.token = TokenMixing(num_tokens, token_mlp_dim, nn.LayerNorm(in_dim), dropout, token_mlp)
        self.channel = ChannelMixing(
            in_dim, channel_mlp_dim, nn.LayerNorm(in_dim), out_dim=growth, dropout=dropout, mlp=mlp
        )

    def forward(self, z: Tensor) -> Tensor:
        return self.channel(z + self.token(z))


class DenseMixer(nn.Module):
    """DenseNet-style MLP-Mixer (Appendix B, Fig. 7): ``h_i = F_i([h_0, ..., h_{i-1}])``.

    The head reads the concatenation of all ``h_i``. Layer-wise exit ``i`` is the
    head applied to ``[h_0, ..., h_i, 0, ..., 0]`` (later layers' channels set to
    zero, the concatenation analogue of an ACN's partial sum), from one pass.
    """

    def __init__(self, config: DenseMixerConfig | None = None, **overrides: Any) -> None:
        super().__init__()
        self.config = replace(config or DenseMixerConfig(), **overrides)
        c = self.config
        self.embed = PatchEmbedding(c.in_channels, c.hidden_dim, c.patch_size)
        self.layers = nn.ModuleList(
            DenseMixerLayer(
                c.num_patches, c.hidden_dim + i * c.growth, c.growth, c.token_mlp_dim, c.channel_mlp_dim, c.dropout,
                mlp=c.mlp, token_mlp=c.token_mlp,
            )
            for i in range(c.num_layers)
        )
        self.head = MixerHead(c.out_dim, c.num_classes)

    def features(self, images: Tensor) -> Tensor:
        """The final concatenation ``[h_0, ..., h_L]``, ``(B, N, hidden_dim + L * growth)``."""
        z = self.embed(images)
        for layer in self.layers:
            z = torch.cat([z, layer(z)], dim=-1)
        return z

    def forward(self, images: Tensor) -> Tensor:
        return self.head(self.features(images))

    def layerwise_logits(self, images: Tensor) -> Tensor:
        """Head at every exit ``(L + 1, B, classes)``: exit ``i`` zeroes the channels of layers after ``i``."""
        z = self.features(images)
        c = self.config
        widths = torch.tensor([c.hidden_dim + i * c.growth for i in range(c.num_layers + 1)], device=z.device)
        mask = (torch.arange(c.out_dim, device=z.device)[None, :] < widths[:, None]).to(z.dtype)  # (L+1, D)
        return self.head(z[None] * mask[:, None, None, :])


def num_parameters(model: nn.Module) -> int:
    """Number of trainable parameters (shared ones counted once)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
