"""Vision Transformer with a pluggable residual rule (H-ACN Sec. 3.3, Fig. 3).

The paper trains "a 12-layer ViT ... following the setup described in (Beyer et
al., 2022)" (Sec. 3.3, Appendix A), the "simple ViT" of *Better plain ViT
baselines for ImageNet-1k*: ViT-S/16 (224 x 224 images, 16 x 16 patches, width
384, 12 layers, 6 heads, MLP 1536), a linear patch embedding, a **fixed 2-d
sincos position embedding**, no class token, **global average pooling** after a
final LayerNorm, and a **linear head initialised to zero**. Those are the
defaults of :class:`ViTConfig`; image size, patch size, channels and classes are
arguments, so a small ViT runs on 28 x 28 x 1 Fashion-MNIST.

One H-ACN layer is one pre-LN transformer block, ``f_i(x) = t + c`` with
``t = Attn(LN_1(x))`` and ``c = MLP(LN_2(x + t))`` (reasons in
:mod:`hacn_core.models.transformer`): ``resnet`` is the standard ViT,
``layer_unit="sublayer"`` makes attention and MLP separate layers, and
``rule="hacn_code_vit"`` is the public code (attention residual kept, only the
MLP output hybrid, ``a_i`` initialised ``N(0.5, 0.005)``).

Depth-adaptive LayerNorm (Eq. 7): ``depth_ln="auto"`` uses it in the ACN family.
Layer-wise accuracy (Sec. 3.1): :meth:`ViT.layerwise_logits` applies the shared
head (final norm, mean over patches, linear) to every exit of one pass, shape
``(L + 1, batch, classes)``; exit 0 is the embedded patches alone.
MLP kinds (:mod:`hacn_core.models.mlp`): ``mlp="fixed"`` (GELU MLP, default),
``"adaptive"`` (AWNN) or ``"gated"``.

LayerNorm epsilon: PyTorch's default ``eps = 1e-5`` in every norm, where
big_vision's simple ViT (Flax ``nn.LayerNorm``) uses ``1e-6``; kept, since the
stored results were trained with it.

Initialisation (big_vision's simple ViT): linear maps Xavier-uniform, biases 0;
the head zero (``zero_head=True``; every exit then predicts uniform logits until
the head has trained, so tests of the exits use ``zero_head=False``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, ClassVar

import torch
from torch import Tensor, nn

from hacn_core.hacn.connectivity import AlphaInit, ResidualStack
from hacn_core.models.exits import LayerwiseClassifier
from hacn_core.models.mixer import MixerHead, PatchEmbedding
from hacn_core.models.mlp import Mlp, MlpLayer
from hacn_core.models.transformer import AttentionSublayer, TransformerSettings, build_transformer_layers


@dataclass(frozen=True)
class ViTConfig(TransformerSettings):
    """Settings of :class:`ViT`; the defaults are Beyer et al.'s ViT-S/16 on ImageNet-1k (Sec. 3.3).

    ``rule`` / ``alpha_init`` / ``trainable_alpha`` / ``gate_fn`` / ``dense_base`` go
    to :class:`~hacn_core.hacn.connectivity.ResidualStack`; ``layer_unit``,
    ``depth_ln`` and ``mlp`` as in :class:`~hacn_core.models.mixer.MixerConfig`.
    """

    positive_fields: ClassVar[tuple[str, ...]] = (
        "image_size", "in_channels", "num_classes", "patch_size", "dim", "num_layers", "num_heads", "mlp_dim",
    )

    image_size: int = 224
    in_channels: int = 3
    num_classes: int = 1000
    patch_size: int = 16
    dim: int = 384
    num_layers: int = 12
    num_heads: int = 6
    mlp_dim: int = 1536
    dropout: float = 0.0
    bias: bool = True
    zero_head: bool = True
    rule: str = "hacn"
    alpha_init: AlphaInit | str | float | None = None
    trainable_alpha: bool = True
    layer_unit: str = "block"
    depth_ln: str = "auto"
    depth_ln_strength: float = 0.05
    gate_fn: str = "relu"
    dense_base: str = "resnet"
    mlp: str | MlpLayer = "fixed"

    def __post_init__(self) -> None:
        self.check_common()
        if self.image_size % self.patch_size:
            raise ValueError(
                f"ViTConfig.image_size={self.image_size} is not divisible by ViTConfig.patch_size={self.patch_size}; "
                "the ViT needs whole patches"
            )
        if self.dim % 4:
            raise ValueError(
                f"ViTConfig.dim={self.dim} must be divisible by 4: the 2-d sincos position embedding "
                "spends dim/4 channels on each of sin(x), cos(x), sin(y), cos(y)"
            )
        if not isinstance(self.zero_head, bool):
            raise ValueError(f"ViTConfig.zero_head={self.zero_head!r} must be True or False")

    @property
    def grid(self) -> int:
        """Patches per side (14 for 224 / 16)."""
        return self.image_size // self.patch_size

    @property
    def num_patches(self) -> int:
        return self.grid**2


def sincos_position_embedding_2d(grid: int, dim: int, temperature: float = 10000.0) -> Tensor:
    """Fixed 2-d sincos position embedding ``(grid * grid, dim)`` (Beyer et al. 2022; MoCo v3).

    Patch ``(row y, column x)`` (row-major, like the patch embedding's flattening)
    gets ``[sin(x w), cos(x w), sin(y w), cos(y w)]`` with the ``dim / 4``
    frequencies ``w_j = temperature^{-j / (dim/4 - 1)}``.
    """
    if dim % 4:
        raise ValueError(f"dim={dim} must be divisible by 4 for the 2-d sincos embedding")
    quarter = dim // 4
    omega = 1.0 / temperature ** (torch.arange(quarter, dtype=torch.float32) / max(quarter - 1, 1))
    y, x = torch.meshgrid(torch.arange(grid, dtype=torch.float32), torch.arange(grid, dtype=torch.float32),
                          indexing="ij")
    xw = x.reshape(-1, 1) * omega[None]  # (N, dim/4)
    yw = y.reshape(-1, 1) * omega[None]
    return torch.cat([xw.sin(), xw.cos(), yw.sin(), yw.cos()], dim=1)


class ViT(LayerwiseClassifier):
    """Simple ViT whose blocks are joined by any ``ResidualStack`` rule (Sec. 3.3).

    ``ViT()`` is the H-ACN ViT-S/16 for ImageNet; ``ViT(rule="resnet")`` the
    standard one; ``ViT(image_size=28, patch_size=4, in_channels=1, num_classes=10,
    dim=64, num_heads=4, mlp_dim=128)`` a small one for Fashion-MNIST. Keyword
    arguments override fields of ``config``.
    """

    def __init__(
        self, config: ViTConfig | None = None, *, generator: torch.Generator | None = None, **overrides: Any
    ) -> None:
        super().__init__()
        self.config = replace(config or ViTConfig(), **overrides)
        c = self.config
        self.embed = PatchEmbedding(c.in_channels, c.dim, c.patch_size)
        self.register_buffer("pos_embed", sincos_position_embedding_2d(c.grid, c.dim), persistent=False)
        self.stack = ResidualStack(
            build_transformer_layers(c, c.mlp_dim, causal=False, max_seq_len=None),
            c.rule,
            alpha_init=c.alpha_init,
            trainable=c.trainable_alpha,
            gate_fn=c.gate_fn,
            dense_base=c.dense_base,
            generator=generator,
        )
        self.head = MixerHead(c.dim, c.num_classes)  # LayerNorm, mean over patches, linear
        self._init_simple_vit()

    def _init_simple_vit(self) -> None:
        """Xavier-uniform linear maps, zero biases, zero head (module docstring); adaptive MLPs keep theirs."""
        for module in self.stack.modules():
            if isinstance(module, AttentionSublayer):
                linears = [module.attn.qkv, module.attn.proj]
            elif isinstance(module, Mlp):
                linears = [m for m in module if isinstance(m, nn.Linear)]
            else:
                continue
            for lin in linears:
                nn.init.xavier_uniform_(lin.weight)
                if lin.bias is not None:
                    nn.init.zeros_(lin.bias)
        if self.config.zero_head:
            nn.init.zeros_(self.head.fc.weight)
            nn.init.zeros_(self.head.fc.bias)

    def tokens(self, images: Tensor) -> Tensor:
        """Embedded patches plus position embedding, ``(B, N, d)``: the stack's ``x_0``."""
        if images.dim() != 4:
            raise ValueError(f"images: expected (batch, channels, height, width), got {tuple(images.shape)}")
        c = self.config
        if images.shape[1:] != (c.in_channels, c.image_size, c.image_size):
            raise ValueError(
                f"images: expected (batch, {c.in_channels}, {c.image_size}, {c.image_size}), got {tuple(images.shape)}"
            )
        return self.embed(images) + self.pos_embed.to(images.dtype)



__all__ = ["ViT", "ViTConfig", "sincos_position_embedding_2d"]
