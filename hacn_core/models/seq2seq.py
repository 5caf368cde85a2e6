"""An encoder-decoder Transformer whose FFNs are MLP kinds: the text backbone of AWNN (Sec. 4, App. C.3).

The base Transformer of Vaswani et al. (2017, Sec. 3, Table 3 "base"): 6 encoder and 6
decoder layers, model width ``d = 512``, 8 attention heads, dropout 0.1, sinusoidal
positions added to token embeddings scaled by ``sqrt(d)``, post-LN sub-layers::

    encoder layer:  h = LN(h + Drop(SelfAttn(h)));         h = LN(h + Drop(FFN(h)))
    decoder layer:  y = LN(y + Drop(CausalSelfAttn(y)));   y = LN(y + Drop(CrossAttn(y, h_enc)))
                    y = LN(y + Drop(FFN(y)))

and a linear map of the decoder's output to target-vocabulary logits. Every FFN
``(B, T, d) -> (B, T, d)`` is built from an MLP kind (:mod:`hacn_core.models.mlp`):
``fixed`` is ``Linear(d, ffn_hidden) -> ReLU -> Linear(ffn_hidden, d)`` (Vaswani's
2048; AWNN App. C.3 tries 128, 256, 512, 1024, 2048), ``adaptive`` an
:class:`~hacn_core.awnn.AdaptiveMLP` applied token by token whose hidden width is
learned, starting at rate ``nu_0 = 0.004`` (App. C.3: "approximately 512 neurons";
Eq. 11 gives 576 at ``k = 0.9``). The FFN's dropout is the residual dropout above
(the adaptive kind has none of its own).

Padding: source and target positions holding ``pad_index`` are masked out of the
attention keys (``None``: nothing is padding). The loss (not part of the model)
ignores the padded targets (App. B: "ignoring any token beyond the length of the
actual target"), e.g. ``ELBOLoss(model, n_tokens, ignore_index=pad_index)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from hacn_core.awnn.distribution import quantile_width
from hacn_core.awnn.init import ACTIVATIONS
from hacn_core.engine.checks import check_choice
from hacn_core.models.mlp import UNGATED_MLP_KINDS, make_mlp

#: starting rate of the adaptive FFNs (AWNN App. C.3)
TEXT_START_RATE = 0.004
#: FFN widths of the fixed Transformer tried in AWNN App. C.3
FFN_WIDTHS: tuple[int, ...] = (128, 256, 512, 1024, 2048)


def _count(field: str, value: object, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{field}={value!r} must be an integer >= {minimum}")
    return value


@dataclass(frozen=True)
class TransformerConfig:
    """An encoder-decoder Transformer (Vaswani et al. 2017, base) with FFNs of an MLP kind.

    ``ffn`` is the FFNs' kind (``fixed`` or ``adaptive``), ``ffn_hidden`` the fixed
    FFNs' width, ``ffn_rate`` and ``k`` the adaptive FFNs' starting rate and quantile,
    ``activation`` the FFNs' hidden activation (ReLU, as Vaswani et al.). ``max_len``
    bounds the sequence length (sinusoidal table). ``pad_index`` marks padding
    (``None``: no padding).
    """

    src_vocab: int
    tgt_vocab: int
    d_model: int = 512
    heads: int = 8
    encoder_layers: int = 6
    decoder_layers: int = 6
    ffn: str = "fixed"
    ffn_hidden: int = 2048
    ffn_rate: float = TEXT_START_RATE
    k: float = 0.9
    activation: str = "relu"
    dropout: float = 0.1
    max_len: int = 512
    pad_index: int | None = 0

    def __post_init__(self) -> None:
        _count("src_vocab", self.src_vocab)
        _count("tgt_vocab", self.tgt_vocab)
        _count("d_model", self.d_model)
        _count("heads", self.heads)
        if self.d_model % self.heads:
            raise ValueError(f"d_model={self.d_model} must be a multiple of heads={self.heads}")
        _count("encoder_layers", self.encoder_layers)
        _count("decoder_layers", self.decoder_layers)
        check_choice("ffn", self.ffn, UNGATED_MLP_KINDS)
        _count("ffn_hidden", self.ffn_hidden)
        if isinstance(self.ffn_rate, bool) or not isinstance(self.ffn_rate, (int, float)) or not self.ffn_rate > 0:
            raise ValueError(f"ffn_rate={self.ffn_rate!r} must be a rate > 0 (App. C.3: 0.004)")
        check_choice("activation", self.activation, ACTIVATIONS)
        if not (isinstance(self.dropout, (int, float)) and 0.0 <= self.dropout < 1.0):
            raise ValueError(f"dropout={self.dropout!r} must lie in [0, 1) (Vaswani base: 0.1)")
        _count("max_len", self.max_len)
        if self.pad_index is not None:
            _count("pad_index", self.pad_index, 0)
            if self.pad_index >= min(self.src_vocab, self.tgt_vocab):
                raise ValueError(f"pad_index={self.pad_index} must be a token of both vocabularies "
                                 f"(< {min(self.src_vocab, self.tgt_vocab)}) or None")


def ffn(config: TransformerConfig) -> nn.Module:
    """One FFN ``(..., d) -> (..., d)`` of ``config.ffn``'s kind."""
    c = config
    if c.ffn == "adaptive":
        return make_mlp("adaptive", c.d_model, quantile_width(float(c.ffn_rate), c.k), c.d_model,
                        activation=c.activation, rate_init=float(c.ffn_rate), k=c.k)
    return make_mlp("fixed", c.d_model, c.ffn_hidden, c.d_model, activation=c.activation)


def sinusoidal_positions(length: int, d: int) -> Tensor:
    """``(length, d)``: ``PE[p, 2i] = sin(p / 10000^(2i/d))``, ``PE[p, 2i+1] = cos(...)`` (Vaswani Sec. 3.5)."""
    pos = torch.arange(length, dtype=torch.float64)[:, None]
    freq = torch.exp(-math.log(10000.0) * torch.arange(0, d, 2, dtype=torch.float64) / d)
    pe = torch.zeros(length, d, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(pos * freq)
    pe[:, 1::2] = torch.cos(pos * freq)[:, : d // 2]
    return pe.to(torch.get_default_dtype())


class EncoderLayer(nn.Module):
    """Post-LN encoder layer: self-attention, then the FFN, each ``LN(x + Drop(sublayer(x)))``."""

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        c = config
        self.attn = nn.MultiheadAttention(c.d_model, c.heads, dropout=c.dropout, batch_first=True)
        self.ffn = ffn(c)
        self.norm1, self.norm2 = nn.LayerNorm(c.d_model), nn.LayerNorm(c.d_model)
        self.drop = nn.Dropout(c.dropout)

    def forward(self, h: Tensor, pad: Tensor | None) -> Tensor:  # (B, S, d), pad (B, S) bool -> (B, S, d)
        h = self.norm1(h + self.drop(self.attn(h, h, h, key_padding_mask=pad, need_weights=False)[0]))
        return self.norm2(h + self.drop(self.ffn(h)))


class DecoderLayer(nn.Module):
    """Post-LN decoder layer: causal self-attention, cross-attention to the encoder, the FFN."""

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        c = config
        self.self_attn = nn.MultiheadAttention(c.d_model, c.heads, dropout=c.dropout, batch_first=True)
        self.cross_attn = nn.MultiheadAttention(c.d_model, c.heads, dropout=c.dropout, batch_first=True)
        self.ffn = ffn(c)
        self.norm1, self.norm2, self.norm3 = (nn.LayerNorm(c.d_model) for _ in range(3))
        self.drop = nn.Dropout(c.dropout)

    def forward(self, y: Tensor, memory: Tensor, causal: Tensor, tgt_pad: Tensor | None,
                src_pad: Tensor | None) -> Tensor:  # y (B, T, d), memory (B, S, d) -> (B, T, d)
        a = self.self_attn(y, y, y, attn_mask=causal, key_padding_mask=tgt_pad, need_weights=False)[0]
        y = self.norm1(y + self.drop(a))
        a = self.cross_attn(y, memory, memory, key_padding_mask=src_pad, need_weights=False)[0]
        y = self.norm2(y + self.drop(a))
        return self.norm3(y + self.drop(self.ffn(y)))


class Seq2SeqTransformer(nn.Module):
    """``forward(src (B, S), tgt (B, T)) -> (B, T, tgt_vocab)`` logits of the next target tokens.

    ``tgt`` is the decoder's input (the target shifted right); position ``t`` attends to
    target positions ``<= t`` only. Submodules ``src_embed``, ``tgt_embed``,
    ``encoder`` / ``decoder`` (lists of layers, each with an ``ffn``), ``out``.
    """

    def __init__(self, config: TransformerConfig | None = None, **kwargs) -> None:
        super().__init__()
        if config is None:
            config = TransformerConfig(**kwargs)
        elif kwargs:
            raise ValueError(f"pass either a config or keyword arguments, not both (got {sorted(kwargs)})")
        self.config = c = config
        self.src_embed = nn.Embedding(c.src_vocab, c.d_model, padding_idx=c.pad_index)
        self.tgt_embed = nn.Embedding(c.tgt_vocab, c.d_model, padding_idx=c.pad_index)
        self.register_buffer("positions", sinusoidal_positions(c.max_len, c.d_model), persistent=False)
        self.drop = nn.Dropout(c.dropout)
        self.encoder = nn.ModuleList(EncoderLayer(c) for _ in range(c.encoder_layers))
        self.decoder = nn.ModuleList(DecoderLayer(c) for _ in range(c.decoder_layers))
        self.out = nn.Linear(c.d_model, c.tgt_vocab)

    def _embed(self, embedding: nn.Embedding, tokens: Tensor, name: str) -> Tensor:
        if tokens.dim() != 2:
            raise ValueError(f"{name} must be (batch, length) token ids, got shape {tuple(tokens.shape)}")
        if tokens.shape[1] > self.config.max_len:
            raise ValueError(f"{name} length {tokens.shape[1]} exceeds max_len={self.config.max_len}")
        scale = math.sqrt(self.config.d_model)  # Vaswani Sec. 3.4
        return self.drop(embedding(tokens) * scale + self.positions[: tokens.shape[1]])

    def _pad(self, tokens: Tensor) -> Tensor | None:
        return None if self.config.pad_index is None else tokens == self.config.pad_index

    def encode(self, src: Tensor) -> Tensor:
        """``(B, S) -> (B, S, d)``: the encoder's output (the decoder's memory)."""
        pad = self._pad(src)
        h = self._embed(self.src_embed, src, "src")
        for layer in self.encoder:
            h = layer(h, pad)
        return h

    def decode(self, tgt: Tensor, memory: Tensor, src: Tensor) -> Tensor:
        """``(B, T)`` decoder inputs and the ``(B, S, d)`` memory of ``src`` -> ``(B, T, tgt_vocab)``."""
        t = tgt.shape[1]
        causal = torch.ones(t, t, dtype=torch.bool, device=tgt.device).triu(1)  # True: masked (a later position)
        y = self._embed(self.tgt_embed, tgt, "tgt")
        tgt_pad, src_pad = self._pad(tgt), self._pad(src)
        for layer in self.decoder:
            y = layer(y, memory, causal, tgt_pad, src_pad)
        return self.out(y)

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        return self.decode(tgt, self.encode(src), src)


__all__ = ["FFN_WIDTHS", "TEXT_START_RATE", "DecoderLayer", "EncoderLayer", "Seq2SeqTransformer",
           "TransformerConfig", "ffn", "sinusoidal_positions"]
