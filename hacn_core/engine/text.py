"""Text tools shared by the papers' text studies: noise, a character tokenizer, GPT-2's BPE, Tiny Shakespeare.

Character noise (H-ACN Sec. 3.4, Table 1)
    "For each character, with probability p, we either remove it, insert another
    character, or swap it with the subsequent character." :func:`char_noise`
    draws, for every character of the input, whether it is edited (probability
    ``p``) and which edit (uniform over ``ops``): ``delete`` drops it, ``insert``
    puts a random character of ``alphabet`` before it (the character is kept),
    ``swap`` exchanges it with the next character (the pair is then done: the
    next character's own draw is not used; a swap on the last character does
    nothing). ``substitute`` (replace it by a different random character) is an
    extra op, off by default, for the reading "insert another character in its
    place". :func:`char_noise_with_log` also returns the edits applied. H-ACN's
    noisy cloze (:mod:`hacn_core.hacn.text`) and AWNN's denoising task
    (:mod:`hacn_core.awnn.studies.text`) both corrupt text with it.

Character tokenizer (nanoGPT's approach)
    :class:`CharTokenizer` maps each distinct character of a corpus to an id
    (65 for Tiny Shakespeare, sorted).

GPT-2's byte-level BPE (H-ACN Table 4, "Tokenizer: GPT-2"; AWNN Sec. 4, "a pretrained GPT-2 Tokenizer")
    :func:`gpt2_tokenizer` returns the one GPT-2 tokenizer of the project
    (:class:`GPT2Tokenizer`: ``encode``, ``decode``, ``vocab_size`` 50,257 and ``eot``,
    the id 50256 of ``<|endoftext|>``), read from ``<data root>/gpt2-tokenizer/tokenizer.json``,
    the tokenizer file of the Hugging Face Hub model ``openai-community/gpt2``. The file
    is a dataset of :data:`hacn_core.engine.data.DATASETS`: fetched by ``python -m
    hacn_core fetch gpt2-tokenizer`` (or on first use unless ``HACN_DOWNLOAD=0``), read
    offline after that. H-ACN's zero-shot benchmarks and its OpenWebText2 token files
    and AWNN's Multi30k runs all tokenise with it.
    Why Hugging Face's ``tokenizers`` package reads it: it is maintained (regular
    releases), it is the reference implementation of the ``tokenizer.json`` format the
    Hub file is written in (``transformers``' fast GPT-2 tokenizer is this code, so the
    ids are those GPT-2 models and tokenised corpora use), and its Rust core encodes
    batches on all cores, which a pre-training corpus needs. ``tiktoken`` gives the same ids but
    fetches its own copy of the vocabulary from OpenAI's servers (a second source for
    the same data); a BPE of our own would be one more implementation to keep right.

Tiny Shakespeare
    :func:`tiny_shakespeare` reads ``$HACN_DATA/tinyshakespeare/input.txt``
    through :func:`hacn_core.engine.data.load_text` (a missing file raises
    ``DatasetMissingError`` naming the folder and how to fetch it);
    :func:`split_text` is nanoGPT's 90 / 10 split of its characters.
"""

from __future__ import annotations

import os
import string
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from torch import Tensor

from hacn_core.engine.checks import check_choice
from hacn_core.engine.data import DATASETS, DatasetCorruptError, ensure_dataset, load_text

NOISE_OPS: tuple[str, ...] = ("delete", "insert", "swap", "substitute")
#: Table 1's edits
PAPER_NOISE_OPS: tuple[str, ...] = ("delete", "insert", "swap")
TOKEN_DTYPE = np.uint16

RngLike = int | np.random.Generator | None


def as_rng(rng: RngLike) -> np.random.Generator:
    """A numpy ``Generator`` from a seed, a generator (used as is) or ``None`` (fresh entropy)."""
    if isinstance(rng, np.random.Generator):
        return rng
    if rng is None or (isinstance(rng, int) and not isinstance(rng, bool)):
        return np.random.default_rng(rng)
    raise ValueError(f"rng={rng!r} must be a seed (int), a numpy Generator or None")


# ---------------------------------------------------------------------------
# Character noise (Table 1)
# ---------------------------------------------------------------------------


def char_noise_with_log(
    text: str,
    p: float,
    rng: RngLike = None,
    ops: Sequence[str] = PAPER_NOISE_OPS,
    alphabet: str = string.ascii_letters,
) -> tuple[str, dict[str, int]]:
    """Character noise of Table 1 (module docstring) and the number of edits of each kind applied.

    ``p``: probability that a character is edited; ``ops``: the edits, drawn
    uniformly; ``alphabet``: the characters ``insert`` / ``substitute`` draw from
    (pass a tokenizer's vocabulary to stay inside it).
    """
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0:
        raise ValueError(f"p={p!r} must be a probability in [0, 1]")
    ops = tuple(ops)
    if not ops:
        raise ValueError(f"ops: need at least one edit; allowed: {', '.join(NOISE_OPS)}")
    for op in ops:
        check_choice("ops", op, NOISE_OPS)
    if not alphabet and ({"insert", "substitute"} & set(ops)):
        raise ValueError("alphabet: insert and substitute need at least one character to draw from")
    g = as_rng(rng)
    n = len(text)
    edited = g.random(n) < p  # one draw per character, fixed before any edit is applied
    which = g.integers(len(ops), size=n)
    fresh = g.integers(max(len(alphabet), 1), size=n)  # the character an insert/substitute would use
    counts = {op: 0 for op in ops}
    out: list[str] = []
    i = 0
    while i < n:
        ch = text[i]
        if not edited[i]:
            out.append(ch)
            i += 1
            continue
        op = ops[which[i]]
        if op == "delete":
            counts[op] += 1
        elif op == "insert":
            out += [alphabet[fresh[i]], ch]
            counts[op] += 1
        elif op == "substitute":
            new = alphabet[fresh[i]]
            if new == ch and len(alphabet) > 1:  # a substitute must differ: take the next letter
                new = alphabet[(fresh[i] + 1) % len(alphabet)]
            out.append(new)
            counts[op] += 1
        elif i + 1 < n:  # swap with the next character; the pair is done
            out += [text[i + 1], ch]
            counts[op] += 1
            i += 2
            continue
        else:  # a swap on the last character has no partner
            out.append(ch)
        i += 1
    return "".join(out), counts


def char_noise(
    text: str,
    p: float,
    rng: RngLike = None,
    ops: Sequence[str] = PAPER_NOISE_OPS,
    alphabet: str = string.ascii_letters,
) -> str:
    """``text`` with Table 1's character noise at rate ``p`` (see :func:`char_noise_with_log`)."""
    return char_noise_with_log(text, p, rng, ops, alphabet)[0]

# ---------------------------------------------------------------------------
# Character tokenizer and Tiny Shakespeare
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class CharTokenizer:
    """One id per character: ``chars[i]`` has id ``i`` (Tiny Shakespeare: 65 sorted characters)."""

    chars: str

    def __post_init__(self) -> None:
        if not self.chars or len(set(self.chars)) != len(self.chars):
            raise ValueError("chars: the vocabulary must be a non-empty string of distinct characters")
        if len(self.chars) > np.iinfo(TOKEN_DTYPE).max + 1:
            raise ValueError(f"chars: {len(self.chars)} characters do not fit uint16 token ids")
        object.__setattr__(self, "_index", {c: i for i, c in enumerate(self.chars)})

    @classmethod
    def from_text(cls, text: str) -> CharTokenizer:
        """The sorted distinct characters of ``text``."""
        return cls("".join(sorted(set(text))))

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    def encode(self, text: str) -> np.ndarray:
        """Token ids of ``text`` (``uint16``); a character outside the vocabulary raises, naming it."""
        index = self._index  # type: ignore[attr-defined]
        try:
            return np.fromiter((index[c] for c in text), dtype=TOKEN_DTYPE, count=len(text))
        except KeyError as err:
            pos = next(i for i, c in enumerate(text) if c not in index)
            raise ValueError(
                f"text: character {err.args[0]!r} at position {pos} is not in the tokenizer's vocabulary "
                f"({self.vocab_size} characters)"
            ) from None

    def decode(self, ids: Sequence[int] | np.ndarray | Tensor) -> str:
        ids = ids.tolist() if isinstance(ids, (np.ndarray, Tensor)) else ids
        bad = [i for i in ids if not 0 <= int(i) < self.vocab_size]
        if bad:
            raise ValueError(f"ids: {bad[0]} is not a token id; allowed: 0..{self.vocab_size - 1}")
        return "".join(self.chars[int(i)] for i in ids)


def tiny_shakespeare(root: str | os.PathLike[str] | None = None, download: bool | None = None) -> tuple[str, CharTokenizer]:
    """Tiny Shakespeare's text (``$HACN_DATA/tinyshakespeare/input.txt``) and its character tokenizer."""
    text = load_text("tinyshakespeare", root, download)
    return text, CharTokenizer.from_text(text)


# ---------------------------------------------------------------------------
# GPT-2's byte-level BPE
# ---------------------------------------------------------------------------

#: the dataset of :data:`hacn_core.engine.data.DATASETS` that holds GPT-2's ``tokenizer.json``
GPT2_DATASET = "gpt2-tokenizer"
GPT2_EOT_TOKEN = "<|endoftext|>"
#: GPT-2's end-of-text id: the last of its 50,257 ids (50,000 merges after the 256 byte tokens)
GPT2_EOT = 50256
GPT2_INSTALL = "pip install tokenizers (a dependency of hacn-core: pip install -e . or pip install -r requirements.txt)"


@dataclass(frozen=True)
class GPT2Tokenizer:
    """GPT-2's BPE as read by ``tokenizers`` (module docstring); build it with :func:`gpt2_tokenizer`.

    ``encode`` treats its text as plain text: a literal ``<|endoftext|>`` in it is encoded
    as its characters, not as ``eot`` (tiktoken's ``encode_ordinary``, which nanoGPT's
    token files use), so ``eot`` appears only where a caller puts it. ``decode`` maps
    ``eot`` back to ``<|endoftext|>``; ``decode(encode(text)) == text`` for any text.
    """

    backend: Any = field(repr=False)  # a tokenizers.Tokenizer
    path: Path
    eot: int
    vocab_size: int

    def encode(self, text: str) -> list[int]:
        return self.backend.encode(text, add_special_tokens=False).ids

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        """``[encode(t) for t in texts]``, on all cores (the Rust library's batch encoder)."""
        return [e.ids for e in self.backend.encode_batch(list(texts), add_special_tokens=False)]

    def decode(self, ids: Sequence[int] | np.ndarray | Tensor) -> str:
        ids = [int(i) for i in (ids.tolist() if isinstance(ids, (np.ndarray, Tensor)) else ids)]
        bad = [i for i in ids if not 0 <= i < self.vocab_size]
        if bad:  # the library would drop an unknown id silently
            raise ValueError(f"ids: {bad[0]} is not a token id; allowed: 0..{self.vocab_size - 1}")
        return self.backend.decode(ids, skip_special_tokens=False)


def gpt2_tokenizer(root: str | os.PathLike[str] | None = None, download: bool | None = None) -> GPT2Tokenizer:
    """GPT-2's tokenizer from ``<data root>/gpt2-tokenizer/tokenizer.json`` (fetched first if missing and allowed).

    A missing file raises :class:`~hacn_core.engine.data.DatasetMissingError` naming the
    folder searched, ``python -m hacn_core fetch gpt2-tokenizer`` and the Hub model to
    download ``tokenizer.json`` from by hand; a missing ``tokenizers`` package raises
    ``ModuleNotFoundError`` naming the ``pip install``; a file that is not a tokenizer, or
    whose ``<|endoftext|>`` is not its last id (GPT-2's 50256 of 50,257), raises
    :class:`~hacn_core.engine.data.DatasetCorruptError`.
    """
    try:
        from tokenizers import Tokenizer
    except ImportError as err:
        raise ModuleNotFoundError(f"GPT-2's tokenizer is read by Hugging Face's 'tokenizers' package, which is not "
                                  f"installed: {GPT2_INSTALL}") from err
    spec = DATASETS[GPT2_DATASET]
    path = ensure_dataset(GPT2_DATASET, root, download) / spec.folder / spec.files[0]
    fix = f"delete it and fetch it again (python -m hacn_core fetch {GPT2_DATASET})"
    try:
        backend = Tokenizer.from_file(str(path))
    except Exception as err:  # noqa: BLE001 - the library raises a bare Exception for every parse error
        raise DatasetCorruptError(f"{path} is not a tokenizers file ({err}); {fix}") from None
    backend.encode_special_tokens = True  # text is text: a literal <|endoftext|> is not eot (class docstring)
    eot, size = backend.token_to_id(GPT2_EOT_TOKEN), backend.get_vocab_size(with_added_tokens=True)
    if eot != size - 1:  # GPT-2's convention, which the studies' special ids build on (eot + 1 pads in AWNN's)
        found = "no such token" if eot is None else f"id {eot} of {size}"
        raise DatasetCorruptError(f"{path}: GPT-2's {GPT2_EOT_TOKEN} is its last id, here {found}; "
                                  f"this is not GPT-2's tokenizer: {fix}")
    return GPT2Tokenizer(backend, path, eot, size)


def split_text(text: str, val_fraction: float = 0.1) -> tuple[str, str]:
    """nanoGPT's split: the first ``1 - val_fraction`` of the characters train, the rest is held out."""
    if not 0.0 < val_fraction < 1.0:
        raise ValueError(f"val_fraction={val_fraction!r} must be in (0, 1)")
    cut = int(len(text) * (1 - val_fraction))
    return text[:cut], text[cut:]


__all__ = ["GPT2_DATASET", "GPT2_EOT", "GPT2_EOT_TOKEN", "NOISE_OPS", "PAPER_NOISE_OPS", "TOKEN_DTYPE", "CharTokenizer",
           "GPT2Tokenizer", "RngLike", "as_rng", "char_noise", "char_noise_with_log", "gpt2_tokenizer", "split_text",
           "tiny_shakespeare"]
