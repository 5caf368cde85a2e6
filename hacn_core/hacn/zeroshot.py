"""Zero-shot multiple choice of the H-ACN GPT-2 study: HellaSwag, PIQA, ARC-E (Sec. 3.4, Fig. 4c, Table 1).

The paper evaluates the OpenWebText2-pretrained decoders zero-shot "on popular
downstream benchmarks, namely HellaSwag (commonsense inference with grounded
scenarios), PIQA (physical reasoning about everyday situations), and ARC-E
(grade-school level multiple-choice questions)" (Sec. 3.4; Fig. 4c gives the
average, 41.8% H-ACN vs 41.2% Res), and HellaSwag again under character noise:
"For each character, with probability p, we either remove it, insert another
character, or swap it with the subsequent character" at p = 0, 0.01, 0.03
(Table 1, mean +- sd at p > 0, so over several noise draws).

Scoring
    Each item is a context and candidate endings; every ending is scored by the
    log-likelihood of its tokens given the context under the decoder, and the
    best one is the prediction (:func:`hacn_core.hacn.text.choice_accuracies`).
    The primary ranking divides by the ending's length in tokens (the
    length-normalised score of the offline cloze); the same forward pass also
    gives the unnormalised sum and the per-character normalisation (the
    ``acc_norm`` of common harnesses), which are stored beside it: the paper
    does not say which one it reports.

Noise
    The paper does not say which part of an item the noise hits; as in the
    offline cloze (:func:`hacn_core.hacn.text.noisy_item`) it hits the context
    and every ending, one draw per character, inserting ASCII letters. Draw
    ``d`` of a noise level uses seed ``d`` for every benchmark and every run, so
    the rules are compared on the same corrupted items. Table 1 reports
    HellaSwag only; PIQA and ARC-E are evaluated at the same levels as extras.

Published formats (read as they are) and the prompt of each item
    HellaSwag ``hellaswag_val.jsonl`` (10,042 items): one JSON object per line
    with ``activity_label``, ``ctx_a``, ``ctx_b`` (and ``ctx``, their join),
    ``endings`` (4) and ``label``. The context is the usual preprocessing of
    zero-shot harnesses: ``activity_label + ": " + ctx_a + " " +
    ctx_b.capitalize()`` (``capitalize`` also lowercases the rest of ``ctx_b``),
    then :func:`hellaswag_preprocess` on it and on every ending (strip,
    ``" [title]"`` -> ``". "``, drop other ``[...]`` tags, double spaces to one).
    A record with ``ctx`` but no ``ctx_a`` uses ``ctx``.
    PIQA ``valid.jsonl`` + ``valid-labels.lst`` (1,838 items): ``goal``,
    ``sol1``, ``sol2`` per line; the label file has one ``0`` / ``1`` per line.
    Prompt ``"Question: {goal}\\nAnswer:"``, endings ``" {sol1}"``, ``" {sol2}"``.
    ARC-Easy ``ARC-Easy-Test.jsonl`` (2,376 items): ``question.stem``,
    ``question.choices[].text`` / ``.label`` and ``answerKey``. The answer is the
    choice whose label equals the key; labels and keys are letters (``A``..) on
    most items and digits (``1``..) on some, and a key of the other kind is
    matched by position (``"1"`` is ``"A"``). Prompt ``"Question: {stem}\\nAnswer:"``,
    endings ``" {text}"``.
    Every ending carries its leading space: ``context + ending`` is the scored text.

Folder layout under the data root (``$HACN_DATA``)
    ``zeroshot/hellaswag/hellaswag_val.jsonl``,
    ``zeroshot/piqa/valid.jsonl`` and ``zeroshot/piqa/valid-labels.lst``,
    ``zeroshot/arc_easy/ARC-Easy-Test.jsonl``, and the GPT-2 BPE vocabulary
    ``gpt2/encoder.json`` + ``gpt2/vocab.bpe`` (OpenAI's names; Hugging Face's
    ``vocab.json`` + ``merges.txt`` hold the same and are read too). A missing file
    raises :class:`~hacn_core.engine.data.DatasetMissingError` naming where it
    looked and the benchmark's official source; a malformed one raises
    :class:`~hacn_core.engine.data.DatasetCorruptError` naming the file and line.

GPT-2 BPE (Table 4: "Tokenizer: GPT-2")
    :class:`GPT2BPE` is the byte-level BPE of GPT-2 written from its published
    definition: text is split by GPT-2's pattern (contractions ``'s 't 're 've 'm
    'll 'd``, `` ?letters``, `` ?digits``, `` ?other symbols``, whitespace runs that
    leave their last character to the next word), each piece's UTF-8 bytes are
    mapped to printable characters (:func:`bytes_to_unicode`), and adjacent pairs
    are merged lowest rank first. Letters and numbers are Unicode categories L*
    and N* (:mod:`unicodedata`), whitespace is Unicode's White_Space, as in the
    pattern's ``\\p{L}``, ``\\p{N}``, ``\\s``. It gives the ids the OpenWebText2
    token files were made with (``hacn_core.hacn.studies.decoder``).
"""

from __future__ import annotations

import json
import os
import re
import unicodedata
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from hacn_core.engine.checks import check_choice
from hacn_core.engine.data import DatasetCorruptError, DatasetMissingError, data_root
from hacn_core.hacn.text import ClozeItem, choice_accuracies

ZEROSHOT_FOLDER = "zeroshot"  # under the data root, one folder per benchmark
GPT2_FOLDER = "gpt2"  # under the data root
#: the vocabulary files, OpenAI's names first, then Hugging Face's (same content)
GPT2_FILES: tuple[tuple[str, str], ...] = (("encoder.json", "vocab.bpe"), ("vocab.json", "merges.txt"))
#: Table 1's noise levels
PAPER_NOISE: tuple[float, ...] = (0.0, 0.01, 0.03)


# ---------------------------------------------------------------------------
# GPT-2 byte-level BPE
# ---------------------------------------------------------------------------


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's map of the 256 byte values to printable characters.

    The printable bytes ``!``..``~``, ``¡``..``¬``, ``®``..``ÿ`` stand for themselves; the
    other 68 (controls, space, soft hyphen, ...) get ``chr(256 + k)`` in byte order,
    so every token of the vocabulary file is a visible string (a space is ``Ġ``).
    """
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    table = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + extra)
            extra += 1
    return dict(sorted(table.items()))


_CONTRACTIONS = ("'s", "'t", "'re", "'ve", "'m", "'ll", "'d")  # in the pattern's order (none is a prefix of another)
# Unicode White_Space (the pattern's \s); Python's str.isspace() adds U+001C..U+001F, which are not White_Space
_NOT_WHITE_SPACE = frozenset("\x1c\x1d\x1e\x1f")


def _char_class(ch: str) -> str:
    """``"s"`` whitespace, ``"L"`` letter, ``"N"`` number, ``"o"`` anything else."""
    if ch.isspace() and ch not in _NOT_WHITE_SPACE:
        return "s"
    kind = unicodedata.category(ch)[0]
    return kind if kind in "LN" else "o"


def gpt2_pieces(text: str) -> list[str]:
    """``text`` split by GPT-2's pre-tokenisation pattern (module docstring); the pieces join back to ``text``.

    The pattern, tried in order at each position: a contraction; an optional space and a run of
    letters, or of numbers, or of other non-space symbols; a whitespace run not followed by a
    non-space (so a run before a word leaves its last space to the word: ``"a  b"`` ->
    ``"a", " ", " b"``); any whitespace run.
    """
    kinds = [_char_class(ch) for ch in text]
    n, i = len(text), 0
    pieces: list[str] = []
    while i < n:
        if text[i] == "'":
            hit = next((c for c in _CONTRACTIONS if text.startswith(c, i)), None)
            if hit:
                pieces.append(hit)
                i += len(hit)
                continue
        # " ?X+" for X in letters, numbers, others: an optional leading space joins a run of one class
        j = i + 1 if text[i] == " " and i + 1 < n and kinds[i + 1] != "s" else i
        if kinds[j] != "s":
            kind, end = kinds[j], j + 1
            while end < n and kinds[end] == kind:
                end += 1
            pieces.append(text[i:end])
            i = end
            continue
        end = i + 1  # a whitespace run text[i:end]
        while end < n and kinds[end] == "s":
            end += 1
        if end < n and end - i > 1:
            end -= 1  # "\s+(?!\S)": the run's last character goes with the next piece
        pieces.append(text[i:end])
        i = end
    return pieces


class GPT2BPE:
    """GPT-2's byte-level BPE from its vocabulary (``token -> id``) and its ranked merges (module docstring)."""

    def __init__(self, encoder: Mapping[str, int], merges: Sequence[tuple[str, str]]) -> None:
        ids = list(encoder.values())
        if any(isinstance(v, bool) or not isinstance(v, int) or v < 0 for v in ids) or len(set(ids)) != len(ids):
            raise ValueError("encoder: token ids must be distinct non-negative integers")
        self.byte_encoder = bytes_to_unicode()
        missing = [s for s in self.byte_encoder.values() if s not in encoder]
        if missing:
            raise ValueError(f"encoder: {len(missing)} of the 256 byte tokens are missing (e.g. {missing[0]!r}); "
                             "a byte-level BPE vocabulary holds every byte")
        self.encoder = dict(encoder)
        self.decoder = {v: k for k, v in self.encoder.items()}
        self.byte_decoder = {s: b for b, s in self.byte_encoder.items()}
        self.ranks = {tuple(pair): r for r, pair in enumerate(merges)}
        self._cache: dict[str, list[str]] = {}

    @property
    def vocab_size(self) -> int:
        """One more than the largest id (50,257 for GPT-2: 50,000 merges, 256 bytes, end-of-text)."""
        return max(self.encoder.values()) + 1

    def bpe(self, piece: str) -> list[str]:
        """The tokens of one pre-tokenised piece (already byte-mapped): merge the best-ranked pair until none is ranked."""
        if piece in self._cache:
            return self._cache[piece]
        word = list(piece)
        while len(word) > 1:
            pair = min(zip(word, word[1:]), key=lambda p: self.ranks.get(p, float("inf")))
            if pair not in self.ranks:
                break
            merged: list[str] = []
            k = 0
            while k < len(word):  # every occurrence of the pair, left to right
                if k + 1 < len(word) and (word[k], word[k + 1]) == pair:
                    merged.append(word[k] + word[k + 1])
                    k += 2
                else:
                    merged.append(word[k])
                    k += 1
            word = merged
        self._cache[piece] = word
        return word

    def encode(self, text: str) -> list[int]:
        ids: list[int] = []
        for piece in gpt2_pieces(text):
            mapped = "".join(self.byte_encoder[b] for b in piece.encode("utf-8"))
            for token in self.bpe(mapped):
                try:
                    ids.append(self.encoder[token])
                except KeyError:
                    raise ValueError(f"encoder: the merges make {token!r}, which the vocabulary lacks") from None
        return ids

    def decode(self, ids: Sequence[int] | np.ndarray | Tensor) -> str:
        ids = ids.tolist() if isinstance(ids, (np.ndarray, Tensor)) else ids
        try:
            chars = "".join(self.decoder[int(i)] for i in ids)
        except KeyError as err:
            raise ValueError(f"ids: {err.args[0]} is not a token id of this vocabulary") from None
        return bytes(self.byte_decoder[c] for c in chars).decode("utf-8", errors="replace")

    @classmethod
    def from_files(cls, encoder_path: str | os.PathLike[str], merges_path: str | os.PathLike[str]) -> GPT2BPE:
        """Read ``encoder.json`` (``{token: id}``) and ``vocab.bpe`` (``#version`` line, then one ``a b`` merge a line)."""
        try:
            encoder = json.loads(Path(encoder_path).read_text(encoding="utf-8"))
        except ValueError as err:
            raise DatasetCorruptError(f"{encoder_path}: not a JSON object of tokens and ids ({err})") from None
        if not isinstance(encoder, dict):
            raise DatasetCorruptError(f"{encoder_path}: expected a JSON object {{token: id}}")
        merges = []
        for n, line in enumerate(Path(merges_path).read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip() or (n == 1 and line.startswith("#version")):
                continue
            parts = line.split()
            if len(parts) != 2:
                raise DatasetCorruptError(f"{merges_path}:{n}: expected one merge 'a b', got {line!r}")
            merges.append((parts[0], parts[1]))
        try:
            return cls(encoder, merges)
        except ValueError as err:
            raise DatasetCorruptError(f"{encoder_path}: {err}") from None


def gpt2_tokenizer(root: str | os.PathLike[str] | None = None) -> GPT2BPE:
    """The GPT-2 BPE from ``<data root>/gpt2/`` (``encoder.json`` + ``vocab.bpe``, or ``vocab.json`` + ``merges.txt``)."""
    folder = data_root(root) / GPT2_FOLDER
    for names in GPT2_FILES:
        if all((folder / f).is_file() for f in names):
            return GPT2BPE.from_files(*(folder / f for f in names))
    raise DatasetMissingError(
        f"GPT-2 BPE vocabulary not found: looked for {folder / 'encoder.json'} and {folder / 'vocab.bpe'} (or "
        "vocab.json and merges.txt there). Obtain the two vocabulary files of OpenAI's GPT-2 release (encoder.json "
        "and vocab.bpe, which the download script of OpenAI's gpt-2 repository fetches with every model; Hugging "
        f"Face's gpt2 model ships the same as vocab.json and merges.txt) and put them in {folder}. "
        "Set $HACN_DATA to put the data root elsewhere."
    )


# ---------------------------------------------------------------------------
# Benchmark readers (the published formats)
# ---------------------------------------------------------------------------


def _jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, record) of every non-blank line; a line that is not a JSON object raises naming it."""
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError as err:
                raise DatasetCorruptError(f"{path}:{n}: not a JSON line ({err})") from None
            if not isinstance(record, dict):
                raise DatasetCorruptError(f"{path}:{n}: expected a JSON object, got {type(record).__name__}")
            yield n, record


def _get(record: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    """``record[key]`` if present and of ``kind``; otherwise a ``DatasetCorruptError`` naming ``where`` and the field."""
    if key not in record:
        raise DatasetCorruptError(f"{where}: field {key!r} missing")
    value = record[key]
    if isinstance(value, bool) or not isinstance(value, kind):
        raise DatasetCorruptError(f"{where}: field {key!r} has a {type(value).__name__}, not the expected type")
    return value


def _item(context: str, endings: Sequence[str], label: int, where: str) -> ClozeItem:
    if not context.strip():
        raise DatasetCorruptError(f"{where}: empty context")
    if len(endings) < 2:
        raise DatasetCorruptError(f"{where}: {len(endings)} ending(s); a multiple-choice item needs at least 2")
    if not 0 <= label < len(endings):
        raise DatasetCorruptError(f"{where}: label {label} is not an index of the {len(endings)} endings")
    return ClozeItem(context, tuple(endings), label)


def hellaswag_preprocess(text: str) -> str:
    """The usual HellaSwag clean-up (module docstring): strip, ``" [title]"`` -> ``". "``, drop ``[...]``, ``"  "`` -> ``" "``."""
    text = text.strip().replace(" [title]", ". ")
    text = re.sub(r"\[.*?\]", "", text)
    return text.replace("  ", " ")


def read_hellaswag(path: str | os.PathLike[str]) -> list[ClozeItem]:
    """HellaSwag items from its published jsonl (``hellaswag_val.jsonl``; module docstring for the prompt)."""
    path = Path(path)
    items = []
    for n, r in _jsonl(path):
        where = f"{path}:{n}"
        if "ctx_a" in r:
            ctx = _get(r, "ctx_a", str, where) + " " + str(r.get("ctx_b") or "").capitalize()
        else:
            ctx = _get(r, "ctx", str, where)
        if "activity_label" in r:
            ctx = _get(r, "activity_label", str, where) + ": " + ctx
        if r.get("label") in (None, ""):
            raise DatasetCorruptError(f"{where}: no label (the test split's labels are not public; use the "
                                      "validation split, hellaswag_val.jsonl)")
        label = r["label"]
        if isinstance(label, str) and label.strip().isdigit():
            label = int(label)
        if isinstance(label, bool) or not isinstance(label, int):
            raise DatasetCorruptError(f"{where}: label {r['label']!r} is not an ending index")
        endings = _get(r, "endings", list, where)
        if not all(isinstance(e, str) for e in endings):
            raise DatasetCorruptError(f"{where}: every entry of 'endings' must be a string")
        items.append(_item(hellaswag_preprocess(ctx), [" " + hellaswag_preprocess(e) for e in endings], label, where))
    return items


def read_piqa(path: str | os.PathLike[str], labels_path: str | os.PathLike[str]) -> list[ClozeItem]:
    """PIQA items from ``valid.jsonl`` (``goal``, ``sol1``, ``sol2``) and ``valid-labels.lst`` (one 0 / 1 a line)."""
    path, labels_path = Path(path), Path(labels_path)
    records = list(_jsonl(path))
    labels = [(n, line.strip()) for n, line in enumerate(labels_path.read_text(encoding="utf-8").splitlines(), 1)
              if line.strip()]
    if len(labels) != len(records):
        raise DatasetCorruptError(f"{labels_path}: {len(labels)} labels for the {len(records)} questions of {path} "
                                  "(one label a line, in the questions' order)")
    items = []
    for (n, r), (m, label) in zip(records, labels):
        if label not in ("0", "1"):
            raise DatasetCorruptError(f"{labels_path}:{m}: label {label!r}; allowed: 0 (sol1), 1 (sol2)")
        where = f"{path}:{n}"
        goal, sol1, sol2 = (_get(r, k, str, where) for k in ("goal", "sol1", "sol2"))
        items.append(_item(f"Question: {goal}\nAnswer:", [" " + sol1, " " + sol2], int(label), where))
    return items


def _choice_position(label: str) -> int | None:
    """``"A"`` / ``"a"`` / ``"1"`` -> 0, ``"B"`` / ``"2"`` -> 1, ...; None for anything else."""
    label = label.strip()
    if len(label) == 1 and label.isalpha() and label.isascii():
        return ord(label.upper()) - ord("A")
    if label.isdigit() and int(label) >= 1:
        return int(label) - 1
    return None


def read_arc(path: str | os.PathLike[str]) -> list[ClozeItem]:
    """ARC items from its published jsonl (``ARC-Easy-Test.jsonl``: ``question.stem``, ``question.choices``, ``answerKey``).

    The answer is the choice whose label equals ``answerKey``; a key of the other kind (a digit for
    letter labels, or the reverse) is matched by position, ``"1"`` with ``"A"`` (module docstring).
    """
    path = Path(path)
    items = []
    for n, r in _jsonl(path):
        where = f"{path}:{n}"
        question = _get(r, "question", dict, where)
        stem = _get(question, "stem", str, where + " question")
        choices = _get(question, "choices", list, where + " question")
        if not all(isinstance(c, dict) for c in choices):
            raise DatasetCorruptError(f"{where}: every entry of question.choices must be an object")
        texts = [_get(c, "text", str, f"{where} choice {k}") for k, c in enumerate(choices)]
        labels = [str(_get(c, "label", (str, int), f"{where} choice {k}")).strip() for k, c in enumerate(choices)]
        key = str(_get(r, "answerKey", (str, int), where)).strip()
        if len(set(labels)) != len(labels):
            raise DatasetCorruptError(f"{where}: repeated choice labels {labels}")
        if key in labels:
            answer = labels.index(key)
        else:  # a digit key for letter labels or the reverse: match by position
            positions = [_choice_position(lab) for lab in labels]
            pos = _choice_position(key)
            if pos is None or pos not in positions:
                raise DatasetCorruptError(f"{where}: answerKey {key!r} names none of the choices {labels}")
            answer = positions.index(pos)
        items.append(_item(f"Question: {stem}\nAnswer:", [" " + t for t in texts], answer, where))
    return items


@dataclass(frozen=True)
class Benchmark:
    """Where a benchmark's published files sit under ``<data root>/zeroshot/<name>/`` and how to obtain them."""

    name: str
    title: str
    files: tuple[str, ...]
    split: str
    source: str
    reader: Callable[..., list[ClozeItem]] = field(repr=False)


BENCHMARKS: dict[str, Benchmark] = {b.name: b for b in (
    Benchmark("hellaswag", "HellaSwag", ("hellaswag_val.jsonl",), "the validation split (10,042 items)",
              "the HellaSwag authors' GitHub repository (rowanz/hellaswag, folder data/)", read_hellaswag),
    Benchmark("piqa", "PIQA", ("valid.jsonl", "valid-labels.lst"), "the validation split (1,838 items)",
              "the PIQA authors' release (the data folder of the PIQA project page, yonatanbisk.com/piqa, or "
              "AI2's physicaliqa train-dev archive)", read_piqa),
    Benchmark("arc_easy", "ARC-Easy", ("ARC-Easy-Test.jsonl",), "the test split of ARC-Easy (2,376 items)",
              "AI2's ARC release (the ARC-V1-Feb2018 archive of the AI2 Reasoning Challenge page, folder "
              "ARC-Easy/)", read_arc),
)}


def benchmark_folder(name: str, root: str | os.PathLike[str] | None = None) -> Path:
    """``<data root>/zeroshot/<name>``."""
    check_choice("benchmark", name, tuple(BENCHMARKS))
    return data_root(root) / ZEROSHOT_FOLDER / name


def load_benchmark(name: str, root: str | os.PathLike[str] | None = None) -> list[ClozeItem]:
    """The items of benchmark ``name`` (``hellaswag``, ``piqa``, ``arc_easy``) from its published files."""
    folder = benchmark_folder(name, root)  # checks the name
    spec = BENCHMARKS[name]
    missing = [folder / f for f in spec.files if not (folder / f).is_file()]
    if missing:
        raise DatasetMissingError(
            f"{spec.title} not found: {', '.join(map(str, missing))} missing. Obtain {spec.split} from "
            f"{spec.source} and put {' and '.join(spec.files)} in {folder} as published. "
            "Set $HACN_DATA to put the data root elsewhere."
        )
    return spec.reader(*(folder / f for f in spec.files))


# ---------------------------------------------------------------------------
# The evaluation of the decoder study
# ---------------------------------------------------------------------------


@dataclass
class ZeroShotSuite:
    """What a run will evaluate: the tokenizer, the items of each benchmark found, why the others are not."""

    tokenizer: GPT2BPE | None
    items: dict[str, list[ClozeItem]]
    not_evaluated: dict[str, str]
    dropped_long: dict[str, int] = field(default_factory=dict)


def prepare_zeroshot(benchmarks: Sequence[str], root: str | os.PathLike[str] | None = None,
                     vocab_size: int | None = None, max_items: int | None = None,
                     max_len: int | None = None) -> ZeroShotSuite:
    """Read the tokenizer and the benchmarks (before training, so a malformed file stops the run at once).

    A missing file is not an error: the benchmark goes to ``not_evaluated`` with the message that
    names the path and the source (all of them when the GPT-2 vocabulary is missing). ``vocab_size``:
    the model's; a tokenizer with more ids raises. ``max_items``: keep the first items of each.
    ``max_len``: the model's longest input; an item with an ending of more than ``max_len // 2``
    tokens is left out and counted in ``dropped_long`` (the scorer cuts context, never an ending,
    and the half leaves room for the tokens that noise adds; with Table 4's 256 tokens that is 128).
    """
    for name in benchmarks:
        check_choice("zeroshot_benchmarks", name, tuple(BENCHMARKS))
    try:
        tokenizer: GPT2BPE | None = gpt2_tokenizer(root)
        lacking = None
    except DatasetMissingError as err:
        tokenizer, lacking = None, str(err)
    if tokenizer is not None and vocab_size is not None and tokenizer.vocab_size > vocab_size:
        raise ValueError(f"vocab_size={vocab_size}: the GPT-2 BPE found has {tokenizer.vocab_size} token ids")
    suite = ZeroShotSuite(tokenizer, {}, {})
    for name in benchmarks:
        try:
            items = load_benchmark(name, root)
        except DatasetMissingError as err:
            suite.not_evaluated[name] = str(err)
            continue
        if lacking is not None:
            suite.not_evaluated[name] = lacking
            continue
        items = items[:max_items] if max_items else items
        if max_len is not None:
            assert tokenizer is not None
            fits = [all(len(tokenizer.encode(e)) <= max_len // 2 for e in it.endings) for it in items]
            suite.dropped_long[name] = len(items) - sum(fits)
            items = [it for it, ok in zip(items, fits) if ok]
        if items:
            suite.items[name] = items
        else:
            suite.not_evaluated[name] = f"no item of {name} has all its endings within {max_len // 2} tokens"
    return suite


def evaluate_zeroshot(
    model: torch.nn.Module,
    suite: ZeroShotSuite,
    noise: Sequence[float] = PAPER_NOISE,
    draws: int = 3,
    max_len: int | None = None,
    device: str | torch.device = "cpu",
) -> tuple[dict[str, Any], dict[str, list[float]]]:
    """Accuracy of ``model`` on every benchmark of ``suite`` at every noise level, in eval mode.

    Metrics, ``key = zeroshot/<name>/<p>``: ``key`` the mean over the noise draws of the
    token-normalised accuracy, ``key/unnormalized`` and ``key/per_char`` the other two rankings,
    ``key/sd`` the sample sd over draws (p > 0; ``draws`` draws, one at p = 0),
    ``zeroshot/<name>/items`` (and ``/dropped_long``, :func:`prepare_zeroshot`);
    ``zeroshot/<name>/not_evaluated`` the reason for a benchmark that
    was not; ``zeroshot/average/0`` Fig. 4c's mean of the three at p = 0 when all ran. Curves:
    ``key/draws`` the token-normalised accuracy of each draw.
    """
    if isinstance(draws, bool) or not isinstance(draws, int) or draws < 1:
        raise ValueError(f"draws={draws!r} must be a positive integer")
    metrics: dict[str, Any] = {f"zeroshot/{name}/not_evaluated": why for name, why in suite.not_evaluated.items()}
    curves: dict[str, list[float]] = {}
    if not suite.items:
        return metrics, curves
    assert suite.tokenizer is not None
    encode = suite.tokenizer.encode
    was_training = model.training
    model.eval()
    try:
        for name, items in suite.items.items():
            metrics[f"zeroshot/{name}/items"] = len(items)
            if name in suite.dropped_long:
                metrics[f"zeroshot/{name}/dropped_long"] = suite.dropped_long[name]
            for p in noise:
                runs = [choice_accuracies(model, items, encode, noise_p=p, seed=d, max_len=max_len, device=device)
                        for d in range(draws if p else 1)]
                key = f"zeroshot/{name}/{p:g}"
                per_draw = [r["tokens"] for r in runs]
                metrics[key] = float(np.mean(per_draw))
                metrics[f"{key}/unnormalized"] = float(np.mean([r["none"] for r in runs]))
                metrics[f"{key}/per_char"] = float(np.mean([r["chars"] for r in runs]))
                if len(runs) > 1:
                    metrics[f"{key}/sd"] = float(np.std(per_draw, ddof=1))
                curves[f"{key}/draws"] = per_draw
    finally:
        model.train(was_training)
    if set(suite.items) == set(BENCHMARKS) and 0 in noise:
        metrics["zeroshot/average/0"] = float(np.mean([metrics[f"zeroshot/{b}/0"] for b in BENCHMARKS]))
    return metrics, curves


__all__ = [
    "BENCHMARKS",
    "GPT2_FILES",
    "GPT2_FOLDER",
    "PAPER_NOISE",
    "ZEROSHOT_FOLDER",
    "Benchmark",
    "GPT2BPE",
    "ZeroShotSuite",
    "benchmark_folder",
    "bytes_to_unicode",
    "evaluate_zeroshot",
    "gpt2_pieces",
    "gpt2_tokenizer",
    "hellaswag_preprocess",
    "load_benchmark",
    "prepare_zeroshot",
    "read_arc",
    "read_hellaswag",
    "read_piqa",
]
