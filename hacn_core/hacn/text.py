"""Text utilities of the H-ACN language-modelling study (Sec. 3.4, Table 1, Fig. 4).

The paper pre-trains GPT-2 decoders on OpenWebText2 / PG-19 and evaluates them
zero-shot on HellaSwag, PIQA and ARC-E, also under character-level noise
(Table 1). Offline, the book trains a character-level decoder on Tiny
Shakespeare and evaluates it on a multiple-choice cloze of held-out lines with
the same scorer and the same noise. This module holds the pieces:

Character noise (Table 1), the character tokenizer and Tiny Shakespeare
    :func:`char_noise` (and :func:`char_noise_with_log`), :class:`CharTokenizer`,
    :func:`tiny_shakespeare` and :func:`split_text` live in
    :mod:`hacn_core.engine.text`, which AWNN's denoising task shares; they are
    imported here under the same names.

Multiple-choice scoring (the zero-shot protocol)
    :func:`score_endings` scores each ending by the log-likelihood of its tokens
    given the context (and the ending's earlier tokens) under a model that maps
    token ids ``(B, T)`` to logits ``(B, T, V)``, normalised by the ending's
    length in tokens (``normalize="tokens"``, the default) or not (``"none"``);
    the prediction is the best-scoring ending. One batched, right-padded forward
    pass per question (a causal model never sees the padding).
    :func:`choice_accuracies` scores a list of items under any tokenizer and
    ranks them three ways from the same pass (per token, summed, per character);
    the readers of the paper's benchmarks (HellaSwag, PIQA, ARC-E) are in
    :mod:`hacn_core.hacn.zeroshot`, the GPT-2 BPE in :mod:`hacn_core.engine.text`.

Token files (nanoGPT's approach)
    :func:`tokenize_to_file` tokenises a text once into a flat ``uint16`` file
    read back as a ``numpy.memmap`` (:func:`read_tokens`), with a sidecar
    ``.json`` (text hash, vocabulary, length) so that a second call re-uses the
    file; :func:`get_batch` draws training windows from it. The paper's corpora
    (OpenWebText2, PG-19) are made the same way by :func:`tokenize_documents`: every
    document in GPT-2 BPE ids (:func:`hacn_core.engine.text.gpt2_tokenizer`) followed
    by the end-of-text id 50256, streamed into one flat ``uint16`` file.

Multiple-choice cloze from held-out Tiny Shakespeare
    :func:`shakespeare_cloze`: each item is ``context_lines`` lines of the
    held-out text, its true next line, and ``n_choices - 1`` other lines drawn
    from elsewhere in the held-out text, in a seeded random order.
"""

from __future__ import annotations

import hashlib
import json
import os
import string
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np
import torch
from torch import Tensor

from hacn_core.engine.checks import check_choice
from hacn_core.engine.text import (
    NOISE_OPS,
    PAPER_NOISE_OPS,
    TOKEN_DTYPE,
    CharTokenizer,
    GPT2Tokenizer,
    RngLike,
    as_rng,
    char_noise,
    char_noise_with_log,
    split_text,
    tiny_shakespeare,
)

NORMALIZATIONS: tuple[str, ...] = ("tokens", "none")


# ---------------------------------------------------------------------------
# Multiple-choice scoring by length-normalised log-likelihood
# ---------------------------------------------------------------------------


def _as_ids(ids: Sequence[int] | Tensor | np.ndarray, name: str) -> list[int]:
    if isinstance(ids, (Tensor, np.ndarray)):
        if ids.ndim != 1:
            raise ValueError(f"{name}: expected a 1-d sequence of token ids, got shape {tuple(ids.shape)}")
        return [int(v) for v in ids.tolist()]
    return [int(v) for v in ids]


@torch.no_grad()
def score_endings(
    model: Callable[[Tensor], Tensor],
    context: Sequence[int] | Tensor,
    endings: Sequence[Sequence[int] | Tensor],
    normalize: str = "tokens",
    max_len: int | None = None,
    device: str | torch.device = "cpu",
    pad_id: int = 0,
) -> Tensor:
    """Score of each ending given the context, ``(n_endings,)`` float64 (higher is more likely).

    ``score_k = sum_j log p(e_kj | context, e_k1..e_k(j-1))``, divided by the
    ending's length in tokens for ``normalize="tokens"``. ``model`` maps ids
    ``(B, T)`` to logits ``(B, T, V)`` (e.g. a ``GPTDecoder``, or
    ``lambda ids: decoder(ids, num_layers=i)`` for an early exit). ``max_len``:
    the model's longest input; longer inputs lose context tokens from the left.
    """
    check_choice("normalize", normalize, NORMALIZATIONS)
    ctx = _as_ids(context, "context")
    ends = [_as_ids(e, f"endings[{k}]") for k, e in enumerate(endings)]
    if not ctx:
        raise ValueError("context: needs at least one token (the first ending token is predicted from it)")
    if not ends or any(len(e) == 0 for e in ends):
        raise ValueError("endings: need at least one ending, each with at least one token")
    rows, starts = [], []
    for e in ends:
        seq = ctx + e
        inp = seq[:-1]  # the model reads seq[:-1] and predicts seq[1:]
        first = len(ctx) - 1  # input position whose prediction is the ending's first token
        if max_len is not None and len(inp) > max_len:
            if len(e) > max_len:
                raise ValueError(f"endings: an ending of {len(e)} tokens does not fit max_len={max_len}")
            cut = len(inp) - max_len
            inp, first = inp[cut:], first - cut
        rows.append(inp)
        starts.append(first)
    width = max(len(r) for r in rows)
    batch = torch.full((len(rows), width), pad_id, dtype=torch.long)
    for k, r in enumerate(rows):
        batch[k, : len(r)] = torch.tensor(r)  # right padding: a causal model never sees it
    logp = torch.log_softmax(model(batch.to(device)).double(), dim=-1).cpu()  # (E, T, V)
    scores = []
    for k, e in enumerate(ends):
        pos = torch.arange(starts[k], starts[k] + len(e))
        total = logp[k, pos, torch.tensor(e)].sum()
        scores.append(total / len(e) if normalize == "tokens" else total)
    return torch.stack(scores)


# ---------------------------------------------------------------------------
# Token files, batches
# ---------------------------------------------------------------------------


def write_tokens(ids: Sequence[int] | np.ndarray, path: str | os.PathLike[str]) -> Path:
    """Write token ids as a flat little-endian ``uint16`` file (atomically: a temp file, then rename)."""
    arr = np.asarray(ids)
    if arr.ndim != 1:
        raise ValueError(f"ids: expected a 1-d sequence of token ids, got shape {arr.shape}")
    if arr.size and (arr.min() < 0 or arr.max() > np.iinfo(TOKEN_DTYPE).max):
        raise ValueError(f"ids: values must be in 0..{np.iinfo(TOKEN_DTYPE).max} to be stored as uint16")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    arr.astype("<u2").tofile(tmp)
    os.replace(tmp, path)
    return path


def read_tokens(path: str | os.PathLike[str]) -> np.memmap:
    """The token file at ``path`` as a read-only ``uint16`` memmap (nothing is loaded until indexed)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"token file not found: {path}")
    if path.stat().st_size % 2:
        raise ValueError(f"{path}: {path.stat().st_size} bytes is not a whole number of uint16 tokens")
    return np.memmap(path, dtype="<u2", mode="r")


def tokenize_to_file(text: str, tokenizer: CharTokenizer, path: str | os.PathLike[str]) -> np.memmap:
    """Tokenise ``text`` once into ``path`` (+ ``path.json``) and return it as a memmap.

    If the sidecar records the same text hash and vocabulary, the existing file
    is returned without tokenising again.
    """
    path = Path(path)
    meta_path = path.with_name(path.name + ".json")
    meta = {
        "sha256": hashlib.sha256(text.encode("utf-8")).hexdigest(),
        "chars": tokenizer.chars,
        "tokens": len(text),
        "dtype": "uint16",
    }
    if path.is_file() and meta_path.is_file():
        try:
            if json.loads(meta_path.read_text(encoding="utf-8")) == meta and path.stat().st_size == 2 * len(text):
                return read_tokens(path)
        except (OSError, ValueError):
            pass  # an unreadable sidecar: tokenise again
    write_tokens(tokenizer.encode(text), path)
    tmp = meta_path.with_name(meta_path.name + ".tmp")
    tmp.write_text(json.dumps(meta), encoding="utf-8")
    os.replace(tmp, meta_path)
    return read_tokens(path)


def tokenize_documents(documents: Iterable[str], tokenizer: GPT2Tokenizer, path: str | os.PathLike[str],
                       chunk: int = 1024) -> np.memmap:
    """A corpus as one flat ``uint16`` token file, every document followed by ``tokenizer.eot`` (nanoGPT's
    OpenWebText files), returned as a memmap (:func:`read_tokens`).

    The documents are encoded ``chunk`` at a time (``tokenizer.encode_batch``, on all cores) and
    appended to a temporary file that is renamed at the end, so a corpus larger than memory
    streams through and an interrupted call leaves no partial ``path``.
    """
    limit = np.iinfo(TOKEN_DTYPE).max + 1
    if tokenizer.vocab_size > limit:
        raise ValueError(f"tokenizer: {tokenizer.vocab_size} token ids do not fit uint16 (at most {limit})")
    if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1:
        raise ValueError(f"chunk={chunk!r} must be a positive integer")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")

    def flush(batch: list[str], handle: BinaryIO) -> None:
        ids = [i for doc in tokenizer.encode_batch(batch) for i in (*doc, tokenizer.eot)]
        np.asarray(ids, dtype="<u2").tofile(handle)

    try:
        with open(tmp, "wb") as handle:
            batch: list[str] = []
            for doc in documents:
                batch.append(doc)
                if len(batch) == chunk:
                    flush(batch, handle)
                    batch = []
            if batch:
                flush(batch, handle)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return read_tokens(path)


def get_batch(
    tokens: np.ndarray, batch_size: int, block_size: int, rng: RngLike = None
) -> tuple[Tensor, Tensor]:
    """``batch_size`` random windows ``x`` ``(B, block_size)`` and their next tokens ``y`` (int64), nanoGPT style."""
    if len(tokens) < block_size + 1:
        raise ValueError(f"tokens: {len(tokens)} tokens are too few for block_size={block_size} (+1 target)")
    g = as_rng(rng)
    starts = g.integers(0, len(tokens) - block_size, size=batch_size)
    x = np.stack([np.asarray(tokens[s:s + block_size], dtype=np.int64) for s in starts])
    y = np.stack([np.asarray(tokens[s + 1:s + 1 + block_size], dtype=np.int64) for s in starts])
    return torch.from_numpy(x), torch.from_numpy(y)


# ---------------------------------------------------------------------------
# Multiple-choice cloze from held-out Tiny Shakespeare
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ClozeItem:
    """A context, candidate endings and the index of the true one."""

    context: str
    endings: tuple[str, ...]
    label: int


def shakespeare_cloze(
    held_out: str,
    n_items: int = 500,
    n_choices: int = 4,
    context_lines: int = 4,
    min_chars: int = 20,
    seed: int = 0,
) -> list[ClozeItem]:
    """Multiple-choice cloze items from held-out text (e.g. ``split_text(text)[1]``), seeded.

    Item: ``context_lines`` consecutive lines (each ending in ``"\\n"``), the true
    next line as one ending, and ``n_choices - 1`` lines drawn from elsewhere in
    ``held_out`` (more than ``context_lines`` lines away, different text). Answer
    and distractor lines have at least ``min_chars`` characters, which leaves out
    speaker names ("ROMEO:") and blank lines. Endings carry no newline.
    """
    for name, v, low in (("n_items", n_items, 1), ("n_choices", n_choices, 2), ("context_lines", context_lines, 1),
                         ("min_chars", min_chars, 1)):
        if isinstance(v, bool) or not isinstance(v, int) or v < low:
            raise ValueError(f"{name}={v!r} must be an integer >= {low}")
    lines = held_out.split("\n")
    long_lines = [j for j, line in enumerate(lines) if len(line) >= min_chars]
    answers = [j for j in long_lines if j >= context_lines]
    if len(answers) < n_items:
        raise ValueError(
            f"held_out: only {len(answers)} lines of >= {min_chars} characters can be answers; n_items={n_items}"
        )
    g = as_rng(seed)
    pool = np.asarray(long_lines)
    items = []
    for j in g.choice(answers, size=n_items, replace=False):
        j = int(j)
        true = lines[j]
        picked: list[str] = []
        for k in g.permutation(pool):
            line = lines[int(k)]
            if abs(int(k) - j) > context_lines and line != true and line not in picked:
                picked.append(line)
                if len(picked) == n_choices - 1:
                    break
        if len(picked) < n_choices - 1:
            raise ValueError(f"held_out: too few distinct lines for n_choices={n_choices}")
        label = int(g.integers(n_choices))
        endings = picked[:label] + [true] + picked[label:]
        context = "".join(line + "\n" for line in lines[j - context_lines:j])
        items.append(ClozeItem(context, tuple(endings), label))
    return items


def noisy_item(item: ClozeItem, p: float, rng: RngLike, ops: Sequence[str] = PAPER_NOISE_OPS,
               alphabet: str = string.ascii_letters) -> ClozeItem:
    """The item with Table 1's character noise applied to its context and to every ending."""
    g = as_rng(rng)
    return ClozeItem(
        char_noise(item.context, p, g, ops, alphabet),
        tuple(char_noise(e, p, g, ops, alphabet) or e for e in item.endings),  # never an empty ending
        item.label,
    )


#: how :func:`choice_accuracies` ranks the endings: log-likelihood per token, summed, per character
ACCURACY_NORMALIZATIONS: tuple[str, ...] = ("tokens", "none", "chars")
#: what lm-evaluation-harness puts between a context and a continuation (its ``target_delimiter``)
TARGET_DELIMITER = " "


def continuation_chars(ending: str) -> int:
    """The characters ``acc_norm`` divides an ending's log-likelihood by: the ending without its leading
    :data:`TARGET_DELIMITER`. lm-evaluation-harness scores ``target_delimiter + choice`` and divides by
    ``len(choice)``; our endings carry that space, so it is left out of the count (at least 1)."""
    return max(len(ending.removeprefix(TARGET_DELIMITER)), 1)


def choice_accuracies(
    model: Callable[[Tensor], Tensor],
    items: Sequence[ClozeItem],
    encode: Callable[[str], Sequence[int] | np.ndarray],
    noise_p: float = 0.0,
    seed: int = 0,
    alphabet: str = string.ascii_letters,
    max_len: int | None = None,
    device: str | torch.device = "cpu",
) -> dict[str, float]:
    """Fraction of ``items`` whose true ending scores best, under each ranking of ``ACCURACY_NORMALIZATIONS``.

    One forward pass per item (:func:`score_endings` with ``normalize="none"``) gives the summed
    log-likelihood ``S_k`` of each ending; ``"tokens"`` ranks by ``S_k / n_tokens(e_k)`` (the
    length-normalised score of :func:`score_endings`), ``"none"`` by ``S_k``, ``"chars"`` by
    ``S_k / len(e_k)`` in characters without the leading space (:func:`continuation_chars`: the ``acc_norm`` of
    lm-evaluation-harness, which does not count its target delimiter). Ties go to the
    first ending (``argmax``). ``encode`` maps a string to token ids. With ``noise_p > 0`` each item is
    corrupted by :func:`noisy_item` (context and every ending), inserting characters of ``alphabet``,
    from one generator seeded by ``seed``.
    """
    if not items:
        raise ValueError("items: no questions to score")
    g = as_rng(seed)
    correct = dict.fromkeys(ACCURACY_NORMALIZATIONS, 0)
    for item in items:
        if noise_p:
            item = noisy_item(item, noise_p, g, alphabet=alphabet)
        endings = [encode(e) for e in item.endings]
        total = score_endings(model, encode(item.context), endings, normalize="none", max_len=max_len,
                              device=device)  # (E,) float64
        ranked = {
            "tokens": total / torch.tensor([float(len(e)) for e in endings], dtype=torch.float64),
            "none": total,
            "chars": total / torch.tensor([float(continuation_chars(e)) for e in item.endings], dtype=torch.float64),
        }
        for name, score in ranked.items():
            correct[name] += int(score.argmax()) == item.label
    return {name: c / len(items) for name, c in correct.items()}


def multiple_choice_accuracy(
    model: Callable[[Tensor], Tensor],
    items: Sequence[ClozeItem],
    tokenizer: CharTokenizer,
    noise_p: float = 0.0,
    seed: int = 0,
    normalize: str = "tokens",
    max_len: int | None = None,
    device: str | torch.device = "cpu",
) -> float:
    """Fraction of ``items`` whose true ending scores best (:func:`score_endings`), optionally under noise.

    With ``noise_p > 0`` each item is corrupted by :func:`noisy_item`, inserting
    only letters of the tokenizer's vocabulary, from one seeded generator
    (:func:`choice_accuracies` with the character tokenizer).
    """
    check_choice("normalize", normalize, NORMALIZATIONS)
    letters = "".join(c for c in tokenizer.chars if c.isalpha()) or tokenizer.chars
    return choice_accuracies(model, items, tokenizer.encode, noise_p, seed, letters, max_len, device)[normalize]


__all__ = [
    "ACCURACY_NORMALIZATIONS",
    "TARGET_DELIMITER",
    "NOISE_OPS",
    "NORMALIZATIONS",
    "PAPER_NOISE_OPS",
    "CharTokenizer",
    "ClozeItem",
    "as_rng",
    "char_noise",
    "char_noise_with_log",
    "choice_accuracies",
    "continuation_chars",
    "get_batch",
    "multiple_choice_accuracy",
    "noisy_item",
    "read_tokens",
    "score_endings",
    "shakespeare_cloze",
    "split_text",
    "tiny_shakespeare",
    "tokenize_documents",
    "tokenize_to_file",
    "write_tokens",
]
