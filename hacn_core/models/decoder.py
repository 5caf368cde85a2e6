"""GPT-2 style decoder with RoPE and a pluggable residual rule (H-ACN Sec. 3.4, Appendix A Table 4).

Table 4's model is the default of :class:`DecoderConfig`: 24 layers, embedding
size ``d = 768``, 12 heads, vocabulary 50,304 (GPT-2's 50,257 padded to a
multiple of 64), sequence length 256, dropout 0.2, rotary position encoding,
208.54M parameters. The decoder is GPT-2 (Radford et al.) with pre-LN blocks
(:mod:`hacn_core.models.transformer`: one block = one H-ACN layer,
``f_i(x) = t + c``), causal attention through ``scaled_dot_product_attention``,
RoPE on queries and keys instead of learned position embeddings, a final
LayerNorm and a linear language-model head.

Which GPT-2 gives 208.54M
-------------------------
Counting by hand (``tests/test_decoder.py`` checks it on the meta device): 24
blocks of ``12 d^2`` weights are 169.87M and the token embedding ``V d`` is
38.63M. Linear maps and LayerNorms **without biases** and the output head **tied
to the input embedding** give ``38,633,472 + 169,869,312 + 37,632`` (LayerNorm
gains) ``= 208,540,416``, i.e. 208.54M. With biases it would be 208.74M, with
an untied head 247.17M, so those are the defaults here (``bias=False``,
``tie_embeddings=True``, as nanoGPT-style code writes GPT-2). The H-ACN model
adds one ``a_i`` and one DepthLN strength per layer (48 parameters, still 208.54M).

Residual rules and DepthLN
--------------------------
``rule`` is any rule of :class:`~hacn_core.hacn.connectivity.ResidualStack`
(``hacn`` by default; ``resnet`` is GPT-2; ``hacn_code_gpt`` is the public
code's ``x_i = f_i(x) + (1 - a_i) x`` with ``a_i`` starting near 1, i.e. an ACN).
``alpha_init`` is Table 6's choice (default ``N(0.25, 0.005)``). ``depth_ln="auto"``
puts the paper's Depth-adaptive LayerNorm (Eq. 7, Table 7) in the blocks of the
ACN family and plain LayerNorm elsewhere; the final norm is plain.

Layer-wise perplexity (Sec. 3.4, footnote 6: "computed in the same way as
layer-wise accuracy"): :meth:`GPTDecoder.layerwise_nll` applies the shared head
(final norm + tied output matrix) to every exit of ONE forward pass (partial sums
for ACN/H-ACN, the stream for ResNet) and sums the cross-entropy chunk by chunk
of tokens, so at most ``chunk_tokens x V`` logits exist at a time, never the
``(L+1) x B x T x V`` tensor.

Initialisation (GPT-2): linear and embedding weights ``N(0, 0.02)``, biases 0,
and the two maps that write into the stream (attention output, MLP output)
``N(0, 0.02 / sqrt(2 L))``. AWNN-``adaptive`` MLPs keep their own (kaiming+) init.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from hacn_core.hacn.connectivity import AlphaInit, ResidualStack
from hacn_core.models.mlp import Mlp, MlpLayer
from hacn_core.models.transformer import (
    AttentionSublayer,
    TransformerSettings,
    build_transformer_layers,
)


@dataclass(frozen=True)
class DecoderConfig(TransformerSettings):
    """Settings of :class:`GPTDecoder`; the defaults are H-ACN Table 4 (GPT-2, L = 24, d = 768).

    ``mlp_dim`` defaults to ``4 dim`` (GPT-2). ``bias`` and ``tie_embeddings``: see
    the module docstring (the 208.54M convention). ``mlp`` is the MLP kind
    (:mod:`hacn_core.models.mlp`); a kind name gets ``bias``, an ``adaptive``
    MLP keeps AWNN's biases. ``ignore_index`` marks target positions that are not scored.
    """

    positive_fields: ClassVar[tuple[str, ...]] = (
        "vocab_size", "max_seq_len", "dim", "num_layers", "num_heads",
    )

    vocab_size: int = 50304
    max_seq_len: int = 256
    dim: int = 768
    num_layers: int = 24
    num_heads: int = 12
    mlp_dim: int | None = None
    dropout: float = 0.2
    bias: bool = False
    tie_embeddings: bool = True
    rope_base: float = 10000.0
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
        if self.mlp_dim is not None and (isinstance(self.mlp_dim, bool) or not isinstance(self.mlp_dim, int)
                                         or self.mlp_dim < 1):
            raise ValueError(f"DecoderConfig.mlp_dim={self.mlp_dim!r} must be a positive integer or None (4 dim)")
        if (self.dim // self.num_heads) % 2:
            raise ValueError(
                f"DecoderConfig.dim / num_heads = {self.dim // self.num_heads} must be even: RoPE rotates "
                "pairs of channels of each head"
            )
        if not isinstance(self.tie_embeddings, bool):
            raise ValueError(f"DecoderConfig.tie_embeddings={self.tie_embeddings!r} must be True or False")
        if not (isinstance(self.rope_base, (int, float)) and self.rope_base > 1):
            raise ValueError(f"DecoderConfig.rope_base={self.rope_base!r} must be a number > 1")

    @property
    def hidden_mlp_dim(self) -> int:
        return self.mlp_dim or 4 * self.dim


class DecoderHead(nn.Module):
    """Shared head of every exit: final LayerNorm, then the (tied) output matrix: ``(..., d) -> (..., V)``."""

    def __init__(self, dim: int, vocab_size: int, bias: bool) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(dim, bias=bias)
        self.proj = nn.Linear(dim, vocab_size, bias=False)

    def forward(self, z: Tensor) -> Tensor:
        return self.proj(self.norm(z))


class GPTDecoder(nn.Module):
    """GPT-2 decoder with RoPE whose blocks are joined by any ``ResidualStack`` rule (Sec. 3.4).

    ``GPTDecoder()`` is Table 4's H-ACN decoder; ``GPTDecoder(rule="resnet")`` the
    GPT-2 baseline. Keyword arguments override fields of ``config``.
    ``forward(idx)`` maps token ids ``(B, T)`` to logits ``(B, T, V)``.
    """

    def __init__(
        self, config: DecoderConfig | None = None, *, generator: torch.Generator | None = None, **overrides: Any
    ) -> None:
        super().__init__()
        self.config = replace(config or DecoderConfig(), **overrides)
        c = self.config
        self.embed = nn.Embedding(c.vocab_size, c.dim)
        self.drop = nn.Dropout(c.dropout)
        self.stack = ResidualStack(
            build_transformer_layers(c, c.hidden_mlp_dim, causal=True, max_seq_len=c.max_seq_len,
                                     rope_base=float(c.rope_base)),
            c.rule,
            alpha_init=c.alpha_init,
            trainable=c.trainable_alpha,
            gate_fn=c.gate_fn,
            dense_base=c.dense_base,
            generator=generator,
        )
        self.head = DecoderHead(c.dim, c.vocab_size, c.bias)
        self._init_gpt2()
        if c.tie_embeddings:
            self.head.proj.weight = self.embed.weight

    def _init_gpt2(self) -> None:
        """GPT-2 initialisation (module docstring); adaptive MLPs are left to their own init."""
        std, out_std = 0.02, 0.02 / math.sqrt(2 * self.config.num_layers)
        nn.init.normal_(self.embed.weight, 0.0, std)
        nn.init.normal_(self.head.proj.weight, 0.0, std)
        for module in self.stack.modules():
            if isinstance(module, AttentionSublayer):
                linears = [module.attn.qkv, module.attn.proj]
            elif isinstance(module, Mlp):  # the fixed and gated kinds
                linears = [m for m in module if isinstance(m, nn.Linear)]
            else:
                continue
            for lin in linears:  # the last map of each sub-layer writes into the stream
                nn.init.normal_(lin.weight, 0.0, out_std if lin is linears[-1] else std)
                if lin.bias is not None:
                    nn.init.zeros_(lin.bias)

    # -- forward ---------------------------------------------------------------

    def _embed(self, idx: Tensor) -> Tensor:
        if idx.dim() != 2:
            raise ValueError(f"idx: expected token ids of shape (batch, time), got {tuple(idx.shape)}")
        if idx.shape[1] > self.config.max_seq_len:
            raise ValueError(f"idx: sequence length {idx.shape[1]} exceeds max_seq_len={self.config.max_seq_len}")
        return self.drop(self.embed(idx))  # (B, T, d)

    def features(self, idx: Tensor, num_layers: int | None = None) -> Tensor:
        """The stack's output ``y`` ``(B, T, d)`` (truncated after ``num_layers`` layers if given)."""
        return self.stack(self._embed(idx), num_layers=num_layers)

    def forward(self, idx: Tensor, num_layers: int | None = None) -> Tensor:
        """Logits ``(B, T, V)``; ``num_layers`` truncates the stack (a separate truncated network)."""
        return self.head(self.features(idx, num_layers))

    def exits(self, idx: Tensor) -> list[Tensor]:
        """The ``L + 1`` layer-wise exit representations ``(B, T, d)`` of one forward pass."""
        _, exits = self.stack(self._embed(idx), return_exits=True)
        return exits

    @torch.no_grad()
    def layerwise_nll(
        self, idx: Tensor, targets: Tensor, chunk_tokens: int = 4096, ignore_index: int = -100
    ) -> tuple[Tensor, int]:
        """Summed next-token negative log-likelihood at every exit, from one pass: ``((L+1,), tokens)``.

        Row ``i`` is the loss of the network stopped after layer ``i`` (row 0: the
        embedding alone; row ``L``: ``forward(idx)``). The shared head is applied to
        ``chunk_tokens`` tokens of one exit at a time. Sums are float64; positions
        with ``targets == ignore_index`` are not counted. Evaluation only (no grad).
        """
        if targets.shape != idx.shape:
            raise ValueError(f"targets: expected shape {tuple(idx.shape)} like idx, got {tuple(targets.shape)}")
        if isinstance(chunk_tokens, bool) or not isinstance(chunk_tokens, int) or chunk_tokens < 1:
            raise ValueError(f"chunk_tokens={chunk_tokens!r} must be a positive integer")
        flat_targets = targets.reshape(-1)
        count = int((flat_targets != ignore_index).sum())
        sums = []
        for z in self.exits(idx):
            flat = z.reshape(-1, z.shape[-1])  # (B*T, d)
            total = torch.zeros((), dtype=torch.float64, device=z.device)
            for start in range(0, flat.shape[0], chunk_tokens):
                logits = self.head(flat[start:start + chunk_tokens])  # (chunk, V): the only logits alive
                logits = logits.to(torch.promote_types(logits.dtype, torch.float32))  # bf16 -> fp32, fp64 kept
                total += F.cross_entropy(
                    logits, flat_targets[start:start + chunk_tokens],
                    reduction="sum", ignore_index=ignore_index,
                ).double()
            sums.append(total)
        return torch.stack(sums), count

    def layerwise_cross_entropy(self, idx: Tensor, targets: Tensor, chunk_tokens: int = 4096) -> Tensor:
        """Mean next-token cross-entropy (nats) at every exit ``(L+1,)``, from one pass (chunked)."""
        sums, count = self.layerwise_nll(idx, targets, chunk_tokens)
        return sums / max(count, 1)

    def layerwise_perplexity(self, idx: Tensor, targets: Tensor, chunk_tokens: int = 4096) -> Tensor:
        """Layer-wise perplexity ``exp(CE_i)`` (Sec. 3.4, Fig. 4) of one batch, ``(L+1,)``."""
        return self.layerwise_cross_entropy(idx, targets, chunk_tokens).exp()


@torch.no_grad()
def evaluate_layerwise_perplexity(
    model: GPTDecoder,
    batches: Iterable[tuple[Tensor, Tensor]],
    device: str | torch.device = "cpu",
    chunk_tokens: int = 4096,
) -> Tensor:
    """Layer-wise perplexity over ``batches`` of ``(idx, targets)``: ``exp`` of the token-weighted mean NLL."""
    was_training = model.training
    model.eval()
    total: Tensor | None = None
    count = 0
    try:
        for idx, targets in batches:
            sums, n = model.layerwise_nll(idx.to(device), targets.to(device), chunk_tokens)
            total = sums if total is None else total + sums
            count += n
    finally:
        model.train(was_training)
    if total is None or count == 0:
        raise ValueError("batches: no tokens to score")
    return (total.cpu() / count).exp()


__all__ = ["DecoderConfig", "DecoderHead", "GPTDecoder", "evaluate_layerwise_perplexity"]
