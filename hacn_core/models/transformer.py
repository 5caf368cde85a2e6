"""Transformer pieces shared by the ViT and the GPT-2 decoder (H-ACN Sec. 3.3-3.4).

One pre-LayerNorm transformer block is one H-ACN layer ``f_i``, the way
:mod:`hacn_core.models.mixer` makes one Mixer layer one H-ACN layer::

    f_i(x) = t + c,    t = Attn(LN_1(x)),    c = MLP(LN_2(x + t))

* the paper counts transformer *layers* (a 12-layer ViT, a 24-layer GPT-2, Sec.
  3.3-3.4) and Appendix D's ablations put one ``a_i`` and one DepthLN gain on
  each of them, so a whole block carries one residual weight;
* Eq. 2 must give "a vanilla ResNet" at ``a_i = 1``:
  ``x + f(x) = (x + t) + MLP(LN_2(x + t))`` is exactly the standard pre-LN block
  (GPT-2, ViT). The short skip inside the block (the MLP reads ``x + t``) is
  therefore part of ``f_i``; at ``a_i = 0`` (ACN) the stream ``x_i = t + c``
  carries no identity path.

``parts(x) -> (t, c)`` exposes the two sub-layers to the public code's
``hacn_code_vit`` rule (``x' = x + t``, ``x_i = c + a_i x'``, ``s += c``: only the
MLP output goes through the hybrid rule, :mod:`hacn_core.hacn.connectivity`).
``layer_unit="sublayer"`` makes attention and MLP separate layers instead
(``2L`` residual weights; ``resnet`` is again the standard block).

Attention is :func:`torch.nn.functional.scaled_dot_product_attention`; the
decoder makes it causal and rotates queries and keys by RoPE (Su et al., 2024,
Eq. 34: pairs ``(2j, 2j+1)`` of each head rotated by ``m theta_j`` at position
``m``, ``theta_j = base^{-2j / d_head}``, ``base = 10000``), so that ``q_m . k_n``
depends on the positions only through ``m - n``.

Dropout (GPT-2 / nanoGPT placement): on the attention probabilities, and on each
sub-layer output (``t`` and ``c``) before it joins the stream; the MLP itself is
built without dropout, so every MLP kind (:mod:`hacn_core.models.mlp`) takes it.
"""

from __future__ import annotations

import math
from numbers import Real
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from hacn_core.hacn.connectivity import (
    ALPHA_RULES,
    DENSE_BASES,
    DEPTH_LN_CHOICES,
    RULES,
    TWO_PART_RULES,
    DepthGain,
    as_alpha_init,
    check_choice,
    make_norm,
    resolve_depth_ln,
)
from hacn_core.models.mlp import MLP_KINDS, MlpLayer, as_mlp_layer, mlp_layer

LAYER_UNITS: tuple[str, ...] = ("block", "sublayer")


# ---------------------------------------------------------------------------
# Rotary position embedding (RoPE, Su et al. 2024)
# ---------------------------------------------------------------------------


def rotary_tables(seq_len: int, head_dim: int, base: float = 10000.0) -> tuple[Tensor, Tensor]:
    """``cos`` and ``sin`` of the angles ``m theta_j``, each ``(seq_len, head_dim / 2)``, float32.

    ``theta_j = base^{-2j / head_dim}`` for ``j = 0..head_dim/2 - 1`` (RoPE, Eq. 15 of Su et al.).
    """
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} must be even for RoPE (it rotates pairs of channels)")
    theta = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)  # (hd/2,)
    angles = torch.arange(seq_len, dtype=torch.float32)[:, None] * theta[None, :]  # (T, hd/2)
    return angles.cos(), angles.sin()


def apply_rotary(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotate the channel pairs ``(2j, 2j+1)`` of ``x`` ``(..., T, hd)`` by the angles of ``cos``/``sin`` ``(T, hd/2)``.

    ``(x_{2j}, x_{2j+1}) -> (x_{2j} cos - x_{2j+1} sin, x_{2j} sin + x_{2j+1} cos)``.
    """
    even, odd = x[..., 0::2], x[..., 1::2]  # (..., T, hd/2) each
    cos, sin = cos.to(x.dtype), sin.to(x.dtype)
    return torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).flatten(-2)


# ---------------------------------------------------------------------------
# Attention, the two sub-layers, the block
# ---------------------------------------------------------------------------


class SelfAttention(nn.Module):
    """Multi-head self-attention ``(B, T, d) -> (B, T, d)`` through ``scaled_dot_product_attention``.

    ``causal``: token ``t`` attends to tokens ``<= t`` only (the decoder).
    ``max_seq_len``: with it, RoPE rotates queries and keys (tables for that many
    positions); without it (``None``) there is no position information here (the
    ViT adds a fixed 2-d sincos embedding to its patches instead).
    """

    def __init__(
        self,
        dim: int,
        num_heads: int,
        *,
        causal: bool = False,
        max_seq_len: int | None = None,
        rope_base: float = 10000.0,
        dropout: float = 0.0,
        bias: bool = True,
    ) -> None:
        super().__init__()
        if dim % num_heads:
            raise ValueError(f"dim={dim} is not divisible by num_heads={num_heads}")
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.causal = causal
        self.dropout = dropout
        self.qkv = nn.Linear(dim, 3 * dim, bias=bias)
        self.proj = nn.Linear(dim, dim, bias=bias)
        self.max_seq_len = max_seq_len
        if max_seq_len is not None:
            cos, sin = rotary_tables(max_seq_len, self.head_dim, rope_base)
            self.register_buffer("rope_cos", cos, persistent=False)
            self.register_buffer("rope_sin", sin, persistent=False)

    def forward(self, x: Tensor) -> Tensor:
        b, t, d = x.shape
        # (B, T, 3d) -> (3, B, H, T, hd)
        q, k, v = self.qkv(x).view(b, t, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        if self.max_seq_len is not None:
            if t > self.max_seq_len:
                raise ValueError(f"sequence length {t} exceeds max_seq_len={self.max_seq_len}")
            q = apply_rotary(q, self.rope_cos[:t], self.rope_sin[:t])
            k = apply_rotary(k, self.rope_cos[:t], self.rope_sin[:t])
        y = F.scaled_dot_product_attention(
            q, k, v, dropout_p=self.dropout if self.training else 0.0, is_causal=self.causal
        )  # (B, H, T, hd)
        return self.proj(y.transpose(1, 2).reshape(b, t, d))


class AttentionSublayer(nn.Module):
    """``t = Dropout(Attn(LN(x)))``: the first sub-layer of a block."""

    def __init__(self, norm: nn.Module, attention: SelfAttention, dropout: float = 0.0) -> None:
        super().__init__()
        self.norm = norm
        self.attn = attention
        self.drop = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.drop(self.attn(self.norm(x)))


class MlpSublayer(nn.Module):
    """``c = Dropout(MLP(LN(x)))``: the second sub-layer of a block; ``mlp`` any MLP kind."""

    def __init__(self, norm: nn.Module, mlp: nn.Module, dropout: float = 0.0) -> None:
        super().__init__()
        self.norm = norm
        self.mlp = mlp
        self.drop = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.drop(self.mlp(self.norm(x)))


class TransformerBlock(nn.Module):
    """One pre-LN transformer block as one H-ACN layer: ``f(x) = t + c``, ``c`` reading ``x + t``.

    ``x + f(x)`` is the standard block (the ``resnet`` rule); ``parts(x)`` returns
    ``(t, c)`` for ``hacn_code_vit``. Both norms share one DepthLN gain (Eq. 7).
    """

    def __init__(self, attention: AttentionSublayer, mlp: MlpSublayer) -> None:
        super().__init__()
        self.attention = attention
        self.feedforward = mlp

    def parts(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """``(t, c)``: attention output, and the MLP output at the attended stream ``x + t``."""
        t = self.attention(x)
        return t, self.feedforward(x + t)

    def forward(self, x: Tensor) -> Tensor:
        t, c = self.parts(x)
        return t + c


# ---------------------------------------------------------------------------
# Settings shared by the two configs, and the layers of the stack
# ---------------------------------------------------------------------------


class TransformerSettings:
    """What :class:`~hacn_core.models.vit.ViTConfig` and :class:`~hacn_core.models.decoder.DecoderConfig` share.

    A subclass is a frozen dataclass with the fields ``dim``, ``num_layers``,
    ``num_heads``, ``rule``, ``alpha_init``, ``layer_unit``, ``depth_ln``,
    ``depth_ln_strength``, ``dense_base``, ``dropout``, ``mlp``, ``bias`` and those
    named in ``positive_fields``. Errors name ``<class>.<field>`` and the allowed values.
    """

    positive_fields: ClassVar[tuple[str, ...]] = ()
    dim: int
    num_layers: int
    num_heads: int
    rule: str
    alpha_init: object
    layer_unit: str
    depth_ln: str
    depth_ln_strength: float
    dense_base: str
    dropout: float
    mlp: str | MlpLayer
    bias: bool

    def check_common(self) -> None:
        owner = type(self).__name__
        for name in self.positive_fields:
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{owner}.{name}={v!r} must be a positive integer")
        if self.dim % self.num_heads:
            raise ValueError(
                f"{owner}.dim={self.dim} is not divisible by {owner}.num_heads={self.num_heads}; "
                "every head needs dim / num_heads channels"
            )
        check_choice(f"{owner}.rule", self.rule, RULES)
        check_choice(f"{owner}.layer_unit", self.layer_unit, LAYER_UNITS)
        check_choice(f"{owner}.depth_ln", self.depth_ln, DEPTH_LN_CHOICES)
        check_choice(f"{owner}.dense_base", self.dense_base, DENSE_BASES)
        if self.rule in TWO_PART_RULES and self.layer_unit != "block":
            raise ValueError(
                f"{owner}.rule={self.rule!r} splits a block into its two sub-layers itself; "
                f"it needs {owner}.layer_unit='block'"
            )
        if self.alpha_init is not None:
            if self.rule not in ALPHA_RULES:
                raise ValueError(
                    f"{owner}.alpha_init is only used by the rules {', '.join(ALPHA_RULES)}; {owner}.rule={self.rule!r}"
                )
            as_alpha_init(self.alpha_init, self.rule, f"{owner}.alpha_init")  # raises on a bad spec
        s = self.depth_ln_strength
        if isinstance(s, bool) or not isinstance(s, Real) or not math.isfinite(s):
            raise ValueError(f"{owner}.depth_ln_strength={s!r} must be a finite number")
        if isinstance(self.dropout, bool) or not isinstance(self.dropout, Real) or not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"{owner}.dropout={self.dropout!r} must be in [0, 1)")
        if not isinstance(self.bias, bool):
            raise ValueError(f"{owner}.bias={self.bias!r} must be True or False")
        as_mlp_layer(self.mlp, f"{owner}.mlp", MLP_KINDS)  # raises on a bad kind

    @property
    def resolved_depth_ln(self) -> str:
        """``depth_ln`` with ``auto`` resolved: ``paper`` for the ACN family, else ``none``."""
        return resolve_depth_ln(self.depth_ln, self.rule)

    def mlp_builder(self) -> MlpLayer:
        """The MLP layer: a kind name gets this config's ``bias``; a spec or callable is used as given."""
        if isinstance(self.mlp, str) and self.mlp in ("fixed", "gated"):
            return mlp_layer(self.mlp, bias=self.bias)
        return as_mlp_layer(self.mlp, f"{type(self).__name__}.mlp")


def build_transformer_layers(
    c: TransformerSettings, mlp_dim: int, *, causal: bool, max_seq_len: int | None, rope_base: float = 10000.0
) -> list[nn.Module]:
    """The ``f_i`` of the stack: ``L`` :class:`TransformerBlock` s, or ``2L`` sub-layers (``layer_unit="sublayer"``).

    Layer ``i`` (from 1) has DepthLN depth ``i``; its two norms share one gain. Sub-layers
    get depths ``2i - 1`` (attention) and ``2i`` (MLP), each its own gain.
    """
    depth_ln = c.resolved_depth_ln
    build_mlp = c.mlp_builder()

    def attention() -> SelfAttention:
        return SelfAttention(
            c.dim, c.num_heads, causal=causal, max_seq_len=max_seq_len, rope_base=rope_base,
            dropout=c.dropout, bias=c.bias,
        )

    def norm(depth: int, gain: DepthGain | None = None) -> nn.Module:
        return make_norm(c.dim, depth, depth_ln, c.depth_ln_strength, gain=gain, bias=c.bias)

    layers: list[nn.Module] = []
    for i in range(1, c.num_layers + 1):
        if c.layer_unit == "block":
            gain = None if depth_ln == "none" else DepthGain(i, depth_ln, c.depth_ln_strength)
            att = AttentionSublayer(norm(i, gain), attention(), c.dropout)
            ff = MlpSublayer(norm(i, gain), build_mlp(c.dim, mlp_dim, c.dim, dropout=0.0), c.dropout)
            layers.append(TransformerBlock(att, ff))
        else:
            layers.append(AttentionSublayer(norm(2 * i - 1), attention(), c.dropout))
            layers.append(MlpSublayer(norm(2 * i), build_mlp(c.dim, mlp_dim, c.dim, dropout=0.0), c.dropout))
    return layers


__all__ = [
    "DEPTH_LN_CHOICES",
    "LAYER_UNITS",
    "AttentionSublayer",
    "MlpSublayer",
    "SelfAttention",
    "TransformerBlock",
    "TransformerSettings",
    "apply_rotary",
    "build_transformer_layers",
    "rotary_tables",
]
