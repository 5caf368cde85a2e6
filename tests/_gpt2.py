"""A small GPT-2-style tokenizer file for the tests: the real ``tokenizers`` byte-level BPE, built in memory
with GPT-2's 256 byte tokens (ids 0-255 in GPT-2's order), a few hand-written merges and ``<|endoftext|>``
last, saved where :func:`hacn_core.engine.text.gpt2_tokenizer` looks (``<root>/gpt2-tokenizer/tokenizer.json``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

from hacn_core.engine.text import GPT2_EOT_TOKEN

#: hand-written merges, ranked in this order (the first merges first)
MERGES: list[tuple[str, str]] = [
    ("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("i", "n"), ("Ġ", "a"), ("e", "r"), ("o", "n"), ("Ġ", "c"),
    ("a", "n"), ("Ġ", "w"), ("Ġ", "s"), ("r", "e"), ("Ġ", "m"), ("Ġ", "p"), ("e", "s")]


def byte_order() -> list[int]:
    """The byte each of GPT-2's ids 0-255 stands for: the printable bytes ``!``..``~``, ``¡``..``¬``,
    ``®``..``ÿ`` (ids 0-187), then the other 68 in byte order (ids 188-255: byte 10 is 198, the space 220,
    as in GPT-2's ``encoder.json``)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    return printable + [b for b in range(256) if b not in set(printable)]


def byte_tokens() -> list[str]:
    """GPT-2's 256 byte tokens in id order: a printable byte stands for itself, the k-th other is ``chr(256 + k)``."""
    order = byte_order()
    return [chr(b) for b in order[:188]] + [chr(256 + k) for k in range(256 - 188)]


def write_gpt2_tokenizer(root: Path, merges: Sequence[tuple[str, str]] = MERGES,
                         eot_last: bool = True) -> dict[str, int]:
    """Save the tokenizer under ``root`` and return its vocabulary (token -> id); ``eot_last=False`` puts
    ``<|endoftext|>`` at id 256 instead of last (not GPT-2's convention)."""
    vocab = {s: i for i, s in enumerate(byte_tokens())}
    if not eot_last:
        vocab[GPT2_EOT_TOKEN] = len(vocab)
    for a, b in merges:
        vocab.setdefault(a + b, len(vocab))
    vocab.setdefault(GPT2_EOT_TOKEN, len(vocab))
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=list(merges)))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)  # GPT-2's split pattern, then bytes
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens([AddedToken(GPT2_EOT_TOKEN, special=True)])
    folder = root / "gpt2-tokenizer"
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(folder / "tokenizer.json"))
    return vocab
