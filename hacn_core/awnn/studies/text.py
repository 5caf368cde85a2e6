"""AWNN on text: an encoder-decoder Transformer with every FFN adaptive, against fixed FFNs (Table 1, Multi30k).

What one run is
    One encoder-decoder Transformer (:mod:`hacn_core.models.seq2seq`, Vaswani et al.
    2017) whose every FFN, one per encoder and decoder layer, is ``fixed``
    (``Linear(d, h) -> ReLU -> Linear(h, d)`` with ``h = ffn_hidden``) or an
    :class:`~hacn_core.awnn.AdaptiveMLP` with one hidden layer whose width is learned
    (Eqs. 11-14, Algorithm 1), trained on one sequence-to-sequence task with the
    decoder fed the clean target shifted right (teacher forcing). Stored per run, at
    the epoch with the lowest validation loss (App. C.3: the patience is "applied to
    the validation loss"): the per-token test and validation cross-entropy of the
    target (Table 1's Multi30k metric, "the cross-entropy loss over the translated
    words"), the teacher-forced character (token) accuracy (the argmax of the next
    token given the true prefix, not a greedy decoding), the hidden width of every
    FFN (encoder layers first, then decoder layers), their sum (Table 1's "total
    width") and the FFN parameter count ``sum_l (2 d h_l + h_l + d)`` (weights and
    biases of both linear maps; the adaptive rates left out); per epoch the train
    loss, learning rate, validation and test loss and accuracy and, adaptive, the
    widths, rates and the four terms of Eq. 13.

The paper's setting (Sec. 4, App. B Table 2, App. C.3), and how each point is read here
    * Multi30k (Elliott et al. 2016), 29,000 / 1,014 / 1,000 sentence pairs (Table 2
      rounds the validation split to 1,000), tokenised with the pretrained GPT-2
      tokenizer (50,257 tokens), at most 128 tokens per sequence, the loss
      "ignoring any token beyond the length of the actual target" (App. B). Sec. 4
      names the pair "English-German" without a direction; we translate German
      into English (``direction="de-en"``, the usual direction on Multi30k;
      ``"en-de"`` is allowed).
    * Where the data and the tokenizer come from (a network is needed once): the
      three JSON-lines files of the Hugging Face Hub dataset ``bentrevett/multi30k``
      (Multi30k's task 1, ``{"en": ..., "de": ...}`` a line) and GPT-2's
      ``tokenizer.json`` (Hub model ``openai-community/gpt2``), fetched into the data
      root by ``python -m hacn_core fetch Multi30k`` and ``... fetch gpt2-tokenizer``
      (or on first use, unless ``HACN_DOWNLOAD=0``) with the ``huggingface_hub``
      package, and read offline after that: the tokenizer by the project's one GPT-2
      tokenizer, :func:`hacn_core.engine.text.gpt2_tokenizer` (Hugging Face's
      ``tokenizers``, a dependency of the package, which brings ``huggingface_hub``).
      torchtext's Multi30k loader, which many tutorials use, is no longer developed
      (its 0.18 of 2024 was the last release). A missing file raises
      :class:`~hacn_core.engine.data.DatasetMissingError` naming the folder searched
      and the fetch command; a missing package, an error naming the ``pip install``.
    * Special tokens: GPT-2's ``<|endoftext|>`` (50256) starts the decoder's input
      and ends the source and the target; an extra token 50257 pads, so the
      vocabulary has 50,258 entries (Table 2's "128x50257" counts GPT-2's tokens).
    * 6 + 6 layers, ``d = 512``, 8 heads, dropout 0.1 (Vaswani's base); FFN widths
      128, 256, 512, 1024, 2048 for the fixed model; the adaptive FFNs start at rate
      0.004 (576 neurons at ``k = 0.9``, "approximately 512") with ``sigma_theta = 1``
      (App. C.3 writes ``sigma_l^alpha = 1``, a symbol Eqs. 3-4 do not define; read
      as the weight prior's ``sigma_l^theta`` of Eq. 4, which Table 4 sets to 1.0 for
      images) and an uninformative rate prior.
    * Adam, learning rate 0.01, weight decay 5e-4 (Adam's L2 term; biases, norms and
      rates are kept out, :data:`~hacn_core.engine.optim.DEFAULT_NO_DECAY_ROLES`),
      ``eps = 5e-9``, batch 128, 500 epochs with patience 250 on the validation
      loss; the learning rate is multiplied by 0.9 when the validation loss
      plateaus (the engine's ``plateau`` schedule; the patience of that plateau is
      not given: PyTorch's default of 10 epochs).
    * The loss of the adaptive runs is Eq. 13 divided by ``N``, the number of target
      tokens of the training set (``ELBOLoss(per_sample=True)``: the same minimiser;
      every token is an example, so ``N`` counts tokens as the batch's ``M`` does).
      Divided, both arms see gradients of one scale, so the shared weight decay and
      ``eps`` act alike on them.
    * Runs: the paper retrains its selected configuration 10 times: 10 seeds per arm.

The book's task: denoising Tiny Shakespeare lines (offline)
    Multi30k and the GPT-2 tokenizer need a network; the book trains the same model
    on a task built from the offline Tiny Shakespeare: the source is a line with
    H-ACN's character noise (:func:`hacn_core.engine.text.char_noise`: each character
    deleted, preceded by an inserted letter, or swapped with the next, with
    probability ``noise_p`` = 0.1), the target is the clean line. The lines are those
    of 16 to 64 characters (this drops speaker names such as "ROMEO:" and blank
    lines); the training lines come from the first 90% of the text (22,864 lines),
    the validation and test lines from the first and second half of the held-out
    10% (1,231 and 1,232 lines; nanoGPT's split, :func:`~hacn_core.engine.text.split_text`).
    Each line is corrupted once (not afresh every epoch), by one generator per split
    seeded with ``(data_seed, split)``. Tokens are characters: ids 0, 1, 2 pad, start and end,
    then Tiny Shakespeare's 65 characters (vocabulary 68).

Profiles, and how the book's budget was sized
    ``paper``: Multi30k, the adaptive arm and the 5 fixed widths x seeds 0-9 at
    App. C.3's recipe (60 runs; GPU-days). ``book``: the denoising task with a model
    scaled down by 8 in width: ``d = 64``, 4 heads, 2 + 2 layers, dropout 0.1; the
    fixed widths 16, 64 and 256 (App. C.3's grid divided by 8: its ends and middle)
    with seed 0, and the adaptive arm with seeds 0-2, starting at rate 0.036, i.e.
    64 neurons per FFN (the middle of the scaled grid, as 512 is of App. C.3's);
    App. C.3's optimizer (Adam 0.01, weight decay 5e-4, ``eps`` 5e-9), batch 64,
    :data:`BOOK_EPOCHS` = 10 epochs with patience 5 (App. C.3's 250 of 500, scaled),
    the learning rate x0.9 after every epoch that does not lower the validation loss
    (``plateau_patience=0``: 10 epochs leave no room for a longer plateau). A short
    check kept App. C.3's learning rate: after 120 steps of the fixed 64-wide model
    the validation loss was 2.21 at 0.01 and 2.41 at 1e-3, and one epoch of the
    adaptive model at 0.01 reached 0.95 (72% of the characters right) with no
    divergence.
    Measured cost (one torch thread, a 2-core machine shared with two other
    trainings, load average 4.4, 2026-11-26; median process time of 5 steps after
    a warm-up of 3, on batches of 64 real lines: forward with the padding columns
    cut, loss, backward, Adam step and, adaptive, the width update): 0.37 s
    (adaptive, starting at 64 per FFN), 0.35 s (fixed 16), 0.27 s (fixed 64), 0.37 s
    (fixed 256); the step is dominated by attention and the 68-way output layer, so
    the FFN width matters little. Evaluating the 2,463 validation and test lines
    took 3.6 s. One epoch is 358 steps (22,864 lines at batch 64), so with 0.37 s
    for every step: 6 runs x 10 epochs x 358 steps x 0.37 s = 7,946 s, plus 6 x 11
    evaluations x 3.6 s = 238 s: 8,200 s, about 2.3 CPU-hours, within the ~3 the
    book allots to this study (early stopping only shortens it; an adaptive width
    that grows past 256 per FFN would cost more: in the check above it grew from 64
    to about 100 in the first epoch). A third fixed seed or a fourth fixed width
    would cost 0.37 CPU-hours each; more epochs were preferred to more arms.
    ``smoke``: 64 training and 32 evaluation lines, ``d = 16``, 1 + 1 layers, both
    arms, 2 epochs: seconds.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from hacn_core.awnn import ELBOLoss, WidthCallback, model_widths, paper_items, quantile_width
from hacn_core.awnn.studies.common import check_choice, check_count, elbo_curves
from hacn_core.engine.data import DatasetCorruptError, ensure_dataset
from hacn_core.engine.registry import Experiment, Link, with_overrides
from hacn_core.engine.results import RunContext
from hacn_core.engine.stats import round_significant
from hacn_core.engine.text import (
    GPT2_EOT,
    NOISE_OPS,
    PAPER_NOISE_OPS,
    RngLike,
    as_rng,
    char_noise,
    gpt2_tokenizer,
    split_text,
    tiny_shakespeare,
)
from hacn_core.engine.training import Callback, TrainConfig, TrainState, accuracy, evaluate, fit
from hacn_core.models.seq2seq import FFN_WIDTHS, TEXT_START_RATE, Seq2SeqTransformer, TransformerConfig

if TYPE_CHECKING:  # pragma: no cover
    from hacn_core.engine.dry_run import DryRunPlan

EXPERIMENT_ID = "awnn-text"
#: ``tinyshakespeare``: the book's denoising task; ``Multi30k``: App. C.3's translation task
DATASETS: tuple[str, ...] = ("tinyshakespeare", "Multi30k")
FFNS: tuple[str, ...] = ("adaptive", "fixed")
DIRECTIONS: tuple[str, ...] = ("de-en", "en-de")
#: the arms of the paper: (ffn, hidden width of the fixed FFNs; 0 for the adaptive arm)
PAPER_ARMS: tuple[tuple[str, int], ...] = (("adaptive", 0),) + tuple(("fixed", w) for w in FFN_WIDTHS)
PAPER_SEEDS = tuple(range(10))
#: the book's arms: App. C.3's grid divided by 8 (its ends and middle) at seed 0, the adaptive arm at seeds 0-2
BOOK_FIXED_WIDTHS: tuple[int, ...] = (16, 64, 256)
BOOK_ADAPTIVE_SEEDS: tuple[int, ...] = (0, 1, 2)
#: starting rate of the book's adaptive FFNs: 64 neurons at k = 0.9 (Eq. 11), the middle of the scaled grid
BOOK_START_RATE = 0.036
BOOK_EPOCHS, BOOK_PATIENCE = 10, 5
#: the measured CPU seconds of one book training step per arm ``(ffn, ffn_hidden)``, and of one evaluation of
#: the validation and test lines (module docstring: one thread, a loaded 2-core machine, 2026-11-26)
BOOK_STEP_S: dict[tuple[str, int], float] = {("adaptive", 0): 0.37, ("fixed", 16): 0.35, ("fixed", 64): 0.27,
                                             ("fixed", 256): 0.37}
BOOK_EVAL_S = 3.6
EVAL_BATCH = 256

# ----------------------------------------------------------------------------- tokens


@dataclass(frozen=True)
class Specials:
    """The ids of the padding, start and end tokens of a task's vocabulary."""

    pad: int
    bos: int
    eos: int


#: the denoising task: 0, 1, 2 are pad, start and end; character ``i`` of the tokenizer is id ``3 + i``
CHAR_SPECIALS = Specials(pad=0, bos=1, eos=2)
CHAR_OFFSET = 3
#: Tiny Shakespeare's characters (the tokenizer's vocabulary) and the book task's clean lines per split, counted
#: from the corpus (``denoising_lines`` at the book profile; tests/test_awnn_text.py recounts them), so that a
#: chapter can state them where the corpus is not on disk (the book renders with an empty data root)
SHAKESPEARE_CHARS = 65
BOOK_LINES: dict[str, int] = {"train": 22_864, "val": 1_231, "test": 1_232}
#: GPT-2's ``<|endoftext|>`` (``GPT2_EOT``, 50256) starts and ends sequences; one extra id pads (module docstring)
GPT2_SPECIALS = Specials(pad=GPT2_EOT + 1, bos=GPT2_EOT, eos=GPT2_EOT)
GPT2_VOCAB = GPT2_EOT + 2


def pair_tensors(sources: Sequence[Sequence[int]], targets: Sequence[Sequence[int]], specials: Specials,
                 max_len: int) -> tuple[Tensor, Tensor, Tensor]:
    """Token pairs as the padded tensors ``(src, tgt_in, tgt_out)`` the trainer reads, each ``(N, L)`` int64.

    ``src = source + [eos]``, ``tgt_in = [bos] + target`` (the decoder's input) and
    ``tgt_out = target + [eos]`` (what it predicts at each position), each cut to
    ``max_len`` tokens (a cut sequence keeps its first ``max_len - 1`` tokens and the
    end token; App. B's 128) and right-padded with ``pad`` to the longest row.
    """
    check_count("max_len", max_len, 2)
    if len(sources) != len(targets):
        raise ValueError(f"sources and targets must pair up: {len(sources)} sources, {len(targets)} targets")
    keep = max_len - 1
    rows = {"src": [list(s[:keep]) + [specials.eos] for s in sources],
            "tgt_in": [[specials.bos] + list(t[:keep]) for t in targets],
            "tgt_out": [list(t[:keep]) + [specials.eos] for t in targets]}
    out = []
    for seqs in rows.values():
        width = max((len(s) for s in seqs), default=1)
        x = torch.full((len(seqs), width), specials.pad, dtype=torch.long)
        for i, s in enumerate(seqs):
            x[i, : len(s)] = torch.tensor(s, dtype=torch.long)
        out.append(x)
    return out[0], out[1], out[2]


def seq2seq_forward(model: nn.Module, batch: Sequence[Tensor], pad: int) -> tuple[Tensor, Tensor]:
    """The trainer's ``forward``: ``(n, V)`` logits and ``(n,)`` targets of the batch's ``n`` real target tokens.

    The batch is ``(src, tgt_in, tgt_out)``, each ``(B, L)``; the columns that are
    padding in every row are cut first (the rows are padded to the longest line of the
    whole split). Keeping only the real target tokens makes every token one example:
    the trainer's batch means and its evaluation (weighted by the number of targets)
    are then means per token, and the padding is ignored (App. B).
    """
    src, tgt_in, tgt_out = batch
    s = int((src != pad).sum(1).max())  # one host sync per step: worth it, lines are far shorter than the longest
    t = int((tgt_out != pad).sum(1).max())
    logits = model(src[:, :s], tgt_in[:, :t])  # (B, t, V)
    target = tgt_out[:, :t]
    real = target != pad
    return logits[real], target[real]


def token_cross_entropy(output: Tensor, target: Tensor) -> Tensor:
    """Mean cross-entropy over the tokens of a batch (``seq2seq_forward`` keeps only real targets)."""
    return F.cross_entropy(output, target)


#: the validation metrics the trainer records every epoch (``val_token_loss`` drives the plateau schedule)
TOKEN_METRICS: dict[str, Callable[[Tensor, Tensor], Tensor]] = {"token_loss": token_cross_entropy,
                                                               "char_acc": accuracy}

# ----------------------------------------------------------------------------- configurations


def text_config(dataset: str, ffn: str, ffn_hidden: int, seed: int, **overrides: Any) -> dict[str, Any]:
    """One run at App. C.3's recipe (the module docstring gives every choice); ``overrides`` replace entries."""
    config = {
        "dataset": dataset,
        "direction": "de-en",  # Multi30k only
        "ffn": ffn,
        "ffn_hidden": ffn_hidden,  # the fixed FFNs' width; 0 for the adaptive arm
        "seed": seed,
        "data_seed": 0,
        "train_subset": None,  # None: every training pair; n: the first n (smoke)
        "eval_subset": None,  # None: every validation and test pair; n: the first n of each (smoke)
        "max_len": 128,
        "noise_p": 0.1,  # tinyshakespeare only
        "noise_ops": PAPER_NOISE_OPS,
        "min_chars": 16,
        "max_chars": 64,
        "d_model": 512,
        "heads": 8,
        "encoder_layers": 6,
        "decoder_layers": 6,
        "dropout": 0.1,
        "rate_init": TEXT_START_RATE,
        "k": 0.9,
        "sigma_theta": 1.0,
        "lr": 0.01,
        "weight_decay": 5e-4,
        "eps": 5e-9,
        "batch_size": 128,
        "epochs": 500,
        "patience": 250,
        "plateau_factor": 0.9,
        "plateau_patience": 10,
    }
    return with_overrides(config, overrides)


def paper_configs() -> list[dict[str, Any]]:
    return [text_config("Multi30k", f, w, s) for f, w in PAPER_ARMS for s in PAPER_SEEDS]


BOOK_MODEL: dict[str, Any] = {"d_model": 64, "heads": 4, "encoder_layers": 2, "decoder_layers": 2,
                              "rate_init": BOOK_START_RATE, "batch_size": 64, "epochs": BOOK_EPOCHS,
                              "patience": BOOK_PATIENCE, "plateau_patience": 0}


def book_configs() -> list[dict[str, Any]]:
    arms = [("adaptive", 0, s) for s in BOOK_ADAPTIVE_SEEDS] + [("fixed", w, 0) for w in BOOK_FIXED_WIDTHS]
    return [text_config("tinyshakespeare", f, w, s, **BOOK_MODEL) for f, w, s in arms]


SMOKE_MODEL: dict[str, Any] = {"d_model": 16, "heads": 2, "encoder_layers": 1, "decoder_layers": 1,
                               "rate_init": 0.15, "batch_size": 16, "epochs": 2, "patience": 5,
                               "plateau_patience": 0, "train_subset": 64, "eval_subset": 32}


def smoke_configs() -> list[dict[str, Any]]:
    return [text_config("tinyshakespeare", f, w, 0, **SMOKE_MODEL) for f, w in (("adaptive", 0), ("fixed", 16))]


def check_config(config: dict[str, Any]) -> None:
    """Refuse a configuration this experiment does not implement (the error names field and allowed values)."""
    check_choice("dataset", config["dataset"], DATASETS)
    check_choice("ffn", config["ffn"], FFNS)
    check_choice("direction", config["direction"], DIRECTIONS)
    check_count("ffn_hidden", config["ffn_hidden"], 0)
    if config["ffn"] == "adaptive" and config["ffn_hidden"] != 0:
        raise ValueError(f"ffn_hidden={config['ffn_hidden']!r} is for ffn='fixed'; allowed with ffn='adaptive': 0")
    if config["ffn"] == "fixed" and config["ffn_hidden"] == 0:
        raise ValueError("ffn_hidden=0 is for ffn='adaptive'; allowed with ffn='fixed': an integer >= 1")
    for key in ("train_subset", "eval_subset"):
        if config[key] is not None:
            check_count(key, config[key], 1)
    for key in ("d_model", "heads", "encoder_layers", "decoder_layers", "batch_size", "epochs", "patience"):
        check_count(key, config[key], 1)
    check_count("plateau_patience", config["plateau_patience"], 0)
    check_count("max_len", config["max_len"], 2)
    check_count("min_chars", config["min_chars"], 1)
    check_count("max_chars", config["max_chars"], config["min_chars"])
    if config["d_model"] % config["heads"]:
        raise ValueError(f"d_model={config['d_model']} must be a multiple of heads={config['heads']}")
    ops = tuple(config["noise_ops"])
    if not ops:
        raise ValueError(f"noise_ops=() needs at least one edit; allowed: {', '.join(NOISE_OPS)}")
    for op in ops:
        check_choice("noise_ops", op, NOISE_OPS)
    p = config["noise_p"]
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0:
        raise ValueError(f"noise_p={p!r} must be a probability in [0, 1]")
    f = config["plateau_factor"]
    if isinstance(f, bool) or not isinstance(f, (int, float)) or not 0.0 < f <= 1.0:
        raise ValueError(f"plateau_factor={f!r} must lie in (0, 1] (App. C.3: 0.9)")


# ----------------------------------------------------------------------------- data


@dataclass
class TextSplits:
    """A task's ``train`` / ``val`` / ``test`` tensors ``(src, tgt_in, tgt_out)``, its vocabulary and specials."""

    train: tuple[Tensor, Tensor, Tensor]
    val: tuple[Tensor, Tensor, Tensor]
    test: tuple[Tensor, Tensor, Tensor]
    vocab: int
    specials: Specials

    def target_tokens(self, split: str = "train") -> int:
        """The number of real target tokens (end tokens included) of ``split``: Eq. 13's ``N`` for ``train``."""
        tgt_out = getattr(self, split)[2]
        return int((tgt_out != self.specials.pad).sum())


def shakespeare_lines(text: str, min_chars: int, max_chars: int) -> list[str]:
    """The lines of ``text`` with ``min_chars`` to ``max_chars`` characters, in order."""
    return [line for line in text.split("\n") if min_chars <= len(line) <= max_chars]


def corrupt_lines(lines: Sequence[str], p: float, ops: Sequence[str], alphabet: str, rng: RngLike) -> list[str]:
    """Every line with H-ACN's character noise at rate ``p`` (:func:`hacn_core.engine.text.char_noise`).

    One generator (``rng``: a seed or a numpy ``Generator``) corrupts the lines in
    order, so the corrupted set depends on the seed and the lines only. A line whose
    every character was deleted stays empty: its source is the end token alone.
    """
    g = as_rng(rng)
    return [char_noise(line, p, g, tuple(ops), alphabet) for line in lines]


def denoising_lines(config: dict[str, Any], root: str | Path | None = None) -> tuple[dict[str, list[str]], Any]:
    """The clean lines of the book's task, ``{"train", "val", "test"}`` (before any subset), and the tokenizer.

    Training lines from the first 90% of Tiny Shakespeare, validation and test lines the
    first and second half of the held-out 10% (nanoGPT's split); fast, as nothing is
    corrupted or tokenised.
    """
    text, tokenizer = tiny_shakespeare(root)
    train_text, held_out = split_text(text)
    lines = {"train": shakespeare_lines(train_text, config["min_chars"], config["max_chars"])}
    rest = shakespeare_lines(held_out, config["min_chars"], config["max_chars"])
    lines["val"], lines["test"] = rest[: len(rest) // 2], rest[len(rest) // 2:]
    return lines, tokenizer


def denoising_splits(config: dict[str, Any], root: str | Path | None = None) -> TextSplits:
    """The book's task: (corrupted line, clean line) pairs of Tiny Shakespeare (module docstring)."""
    lines, tokenizer = denoising_lines(config, root)
    letters = "".join(c for c in tokenizer.chars if c.isalpha())  # inserted characters stay in the vocabulary
    limits = {"train": config["train_subset"], "val": config["eval_subset"], "test": config["eval_subset"]}
    out = {}
    for i, (name, clean) in enumerate(lines.items()):
        clean = clean[: limits[name] or len(clean)]
        # one generator per split, seeded by (data_seed, split): a split's noise does not depend on another's size
        rng = np.random.default_rng((config["data_seed"], i))
        noisy = corrupt_lines(clean, config["noise_p"], config["noise_ops"], letters, rng)
        ids = [[CHAR_OFFSET + int(c) for c in tokenizer.encode(line)] for line in noisy]
        clean_ids = [[CHAR_OFFSET + int(c) for c in tokenizer.encode(line)] for line in clean]
        out[name] = pair_tensors(ids, clean_ids, CHAR_SPECIALS, config["max_len"])
    return TextSplits(out["train"], out["val"], out["test"], CHAR_OFFSET + tokenizer.vocab_size, CHAR_SPECIALS)


#: Multi30k's files as stored under the data root (the Hub dataset's names)
MULTI30K_FILES = {"train": "train.jsonl", "val": "val.jsonl", "test": "test.jsonl"}


def multi30k_splits(config: dict[str, Any], root: str | Path | None = None,
                    encode: Callable[[str], list[int]] | None = None) -> TextSplits:
    """Multi30k's train / validation / test pairs in ``config["direction"]``, GPT-2 tokens (module docstring).

    The three JSON-lines files of the Hub dataset ``bentrevett/multi30k`` (one
    ``{"en": ..., "de": ...}`` object a line) are read from ``<data root>/multi30k``,
    fetched first when downloads are allowed (``$HACN_DOWNLOAD``); offline, a missing
    file raises :class:`~hacn_core.engine.data.DatasetMissingError` naming the folder
    and the command that fetches it. ``encode`` maps a sentence to token ids
    (default: GPT-2's, :func:`hacn_core.engine.text.gpt2_tokenizer`).
    """
    base = ensure_dataset("Multi30k", root) / "multi30k"
    if encode is None:
        tokenizer = gpt2_tokenizer(root)
        if tokenizer.eot != GPT2_EOT:  # the specials and the vocabulary below are GPT-2's
            raise DatasetCorruptError(f"{tokenizer.path}: <|endoftext|> is id {tokenizer.eot}; GPT-2's is {GPT2_EOT}")
        encode = tokenizer.encode
    src_lang, tgt_lang = config["direction"].split("-")
    limits = {"train": config["train_subset"], "val": config["eval_subset"], "test": config["eval_subset"]}
    out = {}
    for name, file in MULTI30K_FILES.items():
        with open(base / file, encoding="utf-8") as handle:
            rows = [json.loads(line) for line in handle if line.strip()]
        rows = rows[: limits[name] or len(rows)]
        out[name] = pair_tensors([encode(r[src_lang]) for r in rows], [encode(r[tgt_lang]) for r in rows],
                                 GPT2_SPECIALS, config["max_len"])
    return TextSplits(out["train"], out["val"], out["test"], GPT2_VOCAB, GPT2_SPECIALS)


def load_splits(config: dict[str, Any], root: str | Path | None = None) -> TextSplits:
    """The splits of ``config["dataset"]``."""
    if config["dataset"] == "Multi30k":
        return multi30k_splits(config, root)
    return denoising_splits(config, root)


# ----------------------------------------------------------------------------- model and trainer


def build_model(config: dict[str, Any], vocab: int, pad: int) -> Seq2SeqTransformer:
    """The Transformer of a configuration (weights from the current torch seed)."""
    fixed = {"ffn_hidden": config["ffn_hidden"]} if config["ffn"] == "fixed" else {}
    return Seq2SeqTransformer(TransformerConfig(
        src_vocab=vocab, tgt_vocab=vocab, d_model=config["d_model"], heads=config["heads"],
        encoder_layers=config["encoder_layers"], decoder_layers=config["decoder_layers"], ffn=config["ffn"],
        ffn_rate=config["rate_init"], k=config["k"], dropout=config["dropout"], max_len=config["max_len"],
        pad_index=pad, **fixed))


def train_config(config: dict[str, Any]) -> TrainConfig:
    """App. C.3's trainer: Adam with weight decay and ``eps``, x``plateau_factor`` on a validation-loss plateau."""
    return TrainConfig(
        epochs=config["epochs"], batch_size=config["batch_size"], lr=config["lr"], optimizer="adam",
        weight_decay=config["weight_decay"], eps=config["eps"], schedule="plateau", gamma=config["plateau_factor"],
        plateau_patience=config["plateau_patience"], plateau_metric="val_token_loss",
        fused=False,  # the adaptive layers' parameters are strided views (hacn_core.awnn)
        seed=config["seed"], eval_batch_size=EVAL_BATCH, checkpoint_every_minutes=5.0)


def ffn_widths(model: Seq2SeqTransformer) -> list[int]:
    """Hidden width of every FFN, encoder layers first (adaptive: learned; fixed: ``ffn_hidden``)."""
    c = model.config
    if c.ffn == "adaptive":
        return model_widths(model)
    return [c.ffn_hidden] * (c.encoder_layers + c.decoder_layers)


def ffn_parameters(widths: Sequence[int], d_model: int) -> int:
    """Weights and biases of FFNs ``d -> h -> d`` of hidden widths ``widths``: ``sum_l (2 d h_l + h_l + d)``."""
    return int(sum(2 * d_model * h + h + d_model for h in widths))


class HeldOutTokens(Callback):
    """The test split's per-token loss and accuracy at every record, and patience on the validation loss.

    The trainer evaluates the validation split every epoch (``val_token_loss``,
    which also drives the plateau schedule); this callback adds ``test_token_loss``
    and ``test_char_acc`` and stops training once the lowest validation loss is
    ``patience`` epochs old (App. C.3's patience), reading the stored curve, so a
    resumed run stops where the uninterrupted one does.
    """

    def __init__(self, test: Sequence[Tensor], forward: Callable, patience: int, batch_size: int = EVAL_BATCH):
        self.test, self.forward, self.patience, self.batch_size = test, forward, patience, batch_size

    def on_record(self, state: TrainState) -> dict[str, float]:
        res = evaluate(state.model, self.test, metrics={"char_acc": accuracy}, forward=self.forward,
                       batch_size=self.batch_size)  # "loss": the default cross-entropy, per token
        history = state.curves.get("val_token_loss", [])
        if history and len(history) - 1 - int(np.argmin(history)) >= self.patience:
            state.stop = True
        return {"test_token_loss": res["loss"], "test_char_acc": res["char_acc"]}


# ----------------------------------------------------------------------------- training


def train_text_run(config: dict[str, Any], context: RunContext) -> dict[str, Any]:
    """Train one Transformer run; report the test loss and the FFN widths at the best validation epoch."""
    check_config(config)
    data = load_splits(config)
    n_tokens = data.target_tokens("train")
    torch.manual_seed(config["seed"])
    model = build_model(config, data.vocab, data.specials.pad)
    forward = partial(seq2seq_forward, pad=data.specials.pad)
    adaptive = config["ffn"] == "adaptive"
    elbo = ELBOLoss(model, n_tokens, sigma_theta=config["sigma_theta"], per_sample=True) if adaptive else None
    callbacks: list[Any] = [HeldOutTokens(data.test, forward, config["patience"])]
    if adaptive:
        callbacks.insert(0, WidthCallback(elbo))
    cpu_start = time.process_time()
    out = fit(model, data.train, train_config(config), val=data.val, loss_fn=elbo, forward=forward,
              metrics=TOKEN_METRICS, callbacks=callbacks, checkpoint_dir=context.checkpoint_dir,
              progress=context.progress)
    c = out.curves
    # the selected epoch: the lowest validation loss (evaluated after epochs 1..E); its record holds the test scores
    best = int(np.argmin(c["val_token_loss"]))
    best_epoch = int(c["eval_epoch"][best])
    record_epochs = [int(round(e)) for e in c["record_epoch"]]
    r = record_epochs.index(best_epoch)
    curves: dict[str, list] = {
        "record_epoch": record_epochs,
        "test_token_loss": round_significant(c["test_token_loss"], 6),
        "test_char_acc": c["test_char_acc"],
        "eval_epoch": [int(e) for e in c["eval_epoch"]],
        "val_token_loss": round_significant(c["val_token_loss"], 6),
        "val_char_acc": c["val_char_acc"],
        "train_loss": round_significant(c["train_loss"], 6),
        "lr": round_significant(c["lr"], 6),
    }
    final = ffn_widths(model)
    if adaptive:
        curves["widths"] = [[int(w) for w in ws] for ws in c["awnn/widths"]]
        curves["rates"] = [round_significant(nu, 5) for nu in c["awnn/rates"]]
        curves |= elbo_curves(c)
        widths = curves["widths"][r]
    else:
        widths = final
    metrics: dict[str, Any] = {
        "test_token_loss": float(c["test_token_loss"][r]),
        "test_char_acc": float(c["test_char_acc"][r]),
        "val_token_loss": float(c["val_token_loss"][best]),
        "val_char_acc": float(c["val_char_acc"][best]),
        "best_epoch": best_epoch,
        "epochs_run": record_epochs[-1],
        "final_test_token_loss": float(c["test_token_loss"][-1]),
        "widths": widths,  # every FFN's hidden width at the selected epoch, encoder layers first
        "total_width": int(sum(widths)),
        "ffn_params": ffn_parameters(widths, config["d_model"]),
        "final_widths": final,
        "final_total_width": int(sum(final)),
        "final_ffn_params": ffn_parameters(final, config["d_model"]),
        "n_train": len(data.train[0]),
        "n_train_tokens": n_tokens,
        "cpu_s": round(time.process_time() - cpu_start, 2),
    }
    if adaptive:  # the terms of Eq. 13 (epoch means, divided by N) of the selected epoch
        metrics |= {f"elbo_{t}": float(curves[f"elbo/{t}"][r])
                    for t in ("total", "predictive", "weight_prior", "width_prior")}
    return {"metrics": metrics, "curves": curves, "device": out.device}


# ----------------------------------------------------------------------------- registry

#: sequence lengths the dry run assumes: Multi30k sentences are 10-30 GPT-2 tokens, the book's lines up to 64 characters
DRY_RUN_LENGTH = {"Multi30k": 32, "tinyshakespeare": 64}
DRY_RUN_N_TRAIN = {"Multi30k": 29_000, "tinyshakespeare": 22_864}


class _PairInput(nn.Module):
    """The dry run's view of the model: one ``(B, 2, L)`` input holds the source and the decoder's input."""

    def __init__(self, model: Seq2SeqTransformer) -> None:
        super().__init__()
        self.model = model

    def forward(self, x: Tensor) -> Tensor:  # (B, 2, L) -> (B * L, V), as seq2seq_forward gives it
        logits = self.model(x[:, 0], x[:, 1])
        return logits.reshape(-1, logits.shape[-1])


def dry_run_plan(config: dict[str, Any]) -> DryRunPlan:
    """One run's dry run on random tokens of :data:`DRY_RUN_LENGTH`: the configuration's Transformer, Adam, and
    for the adaptive arm Eq. 13 (divided by ``N`` tokens) and Algorithm 1's width update after the step."""
    from hacn_core.engine.dry_run import DryRunPlan

    multi30k = config["dataset"] == "Multi30k"
    vocab, specials = (GPT2_VOCAB, GPT2_SPECIALS) if multi30k else (CHAR_OFFSET + SHAKESPEARE_CHARS, CHAR_SPECIALS)
    length = DRY_RUN_LENGTH[config["dataset"]]
    n_train = config["train_subset"] or DRY_RUN_N_TRAIN[config["dataset"]]
    n_tokens = n_train * length
    adaptive = config["ffn"] == "adaptive"

    def batch(b: int) -> tuple[Tensor, Tensor]:  # tokens in [3, vocab - 1): never a special token
        g = torch.Generator().manual_seed(0)
        x = torch.randint(CHAR_OFFSET, vocab - 1, (b, 2, length), generator=g)
        return x, torch.randint(CHAR_OFFSET, vocab - 1, (b * length,), generator=g)

    return DryRunPlan(
        key={k: config[k] for k in ("dataset", "ffn", "ffn_hidden", "d_model", "encoder_layers", "rate_init")},
        model=lambda: _PairInput(build_model(config, vocab, specials.pad)), batch=batch, train=train_config(config),
        n_train=n_train,
        loss=(lambda model: ELBOLoss(model, n_tokens, sigma_theta=config["sigma_theta"], per_sample=True))
        if adaptive else None,
        callbacks=(lambda elbo: [WidthCallback(elbo)]) if adaptive else None,
        note=(f"{length}-token pairs; adaptive FFNs at {quantile_width(config['rate_init'], config['k'])} neurons"
              if adaptive else f"{length}-token pairs"))


def _links() -> tuple[Link, ...]:
    """The ledger's links: Table 1's AWNN cells of the Multi30k row, a mean over the adaptive runs. The fixed
    cells are the width the grid selects, which no single link expresses (the ledger shows them as drawn in
    the chapter). Offline the task is character-level denoising, so the ledger calls these a scaled analogue."""
    where = {"ffn": "adaptive"}
    loss, width = (paper_items.item(f"awnn/table1/multi30k-awnn-{q}") for q in ("loss", "width"))
    return (Link(loss.id, "test_token_loss", where, tolerance=loss.paper_std),
            Link(width.id, "total_width", where, tolerance=width.paper_std))


EXPERIMENT = Experiment(
    id=EXPERIMENT_ID,
    title="Transformer with adaptive or fixed FFNs on text (AWNN Table 1, Multi30k row; App. C.3)",
    train=train_text_run,
    plan=dry_run_plan,
    links=_links(),
    distributed=False,  # the widths change during training, which DistributedDataParallel cannot follow
    configs={"smoke": smoke_configs, "book": book_configs, "paper": paper_configs},
    setting={
        "smoke": "Tiny Shakespeare denoising, 64 lines, d 16, 1 + 1 layers, adaptive and fixed 16, 2 epochs",
        "book": ("Tiny Shakespeare denoising (corrupted line in, clean line out; offline), d 64, 4 heads, 2 + 2 "
                 "layers; fixed FFNs 16 / 64 / 256 at seed 0, adaptive FFNs (start 64) at seeds 0-2; App. C.3's "
                 "Adam, 10 epochs, patience 5, batch 64: about 2.3 CPU-hours at a measured 0.37 s per step"),
        "paper": ("Multi30k de-en with the GPT-2 tokenizer (downloaded), 6 + 6 layers, d 512, 8 heads; adaptive "
                  "FFNs (rate 0.004) and fixed 128-2048, seeds 0-9; Adam 0.01, wd 5e-4, eps 5e-9, x0.9 on "
                  "plateau, 500 epochs, patience 250, batch 128"),
    },
)
