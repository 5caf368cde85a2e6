"""Character-level text tools shared by the papers' text studies: noise, a character tokenizer, Tiny Shakespeare.

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
from dataclasses import dataclass

import numpy as np
from torch import Tensor

from hacn_core.engine.checks import check_choice
from hacn_core.engine.data import load_text

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


def split_text(text: str, val_fraction: float = 0.1) -> tuple[str, str]:
    """nanoGPT's split: the first ``1 - val_fraction`` of the characters train, the rest is held out."""
    if not 0.0 < val_fraction < 1.0:
        raise ValueError(f"val_fraction={val_fraction!r} must be in (0, 1)")
    cut = int(len(text) * (1 - val_fraction))
    return text[:cut], text[cut:]


__all__ = ["NOISE_OPS", "PAPER_NOISE_OPS", "TOKEN_DTYPE", "CharTokenizer", "RngLike", "as_rng", "char_noise",
           "char_noise_with_log", "split_text", "tiny_shakespeare"]
