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
    ``acc_norm`` of lm-evaluation-harness), which are stored beside it: the paper
    does not say which one it reports. The per-character score divides by the
    length of the ending *without* its leading space, as the harness does: it
    scores ``" " + choice`` (its ``target_delimiter``) but divides by
    ``len(choice)`` (:func:`hacn_core.hacn.text.continuation_chars`). Counting the
    space too favours short endings, and changes the pick where endings of different
    lengths score closely (``tests/test_zeroshot.py`` has such an item).

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
    ``zeroshot/arc_easy/ARC-Easy-Test.jsonl`` (never downloaded). A missing file
    raises :class:`~hacn_core.engine.data.DatasetMissingError` naming where it
    looked and the benchmark's official source; a malformed one raises
    :class:`~hacn_core.engine.data.DatasetCorruptError` naming the file and line.

GPT-2 BPE (Table 4: "Tokenizer: GPT-2")
    The items are tokenised by the project's one GPT-2 tokenizer,
    :func:`hacn_core.engine.text.gpt2_tokenizer` (``gpt2-tokenizer/tokenizer.json``
    under the data root, read by Hugging Face's ``tokenizers``), the one the
    OpenWebText2 token files are made with (:func:`hacn_core.hacn.text.tokenize_documents`).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from hacn_core.engine.checks import check_choice
from hacn_core.engine.data import DatasetCorruptError, DatasetMissingError, data_root
from hacn_core.engine.text import GPT2Tokenizer, gpt2_tokenizer
from hacn_core.hacn.text import ClozeItem, choice_accuracies

ZEROSHOT_FOLDER = "zeroshot"  # under the data root, one folder per benchmark
#: Table 1's noise levels
PAPER_NOISE: tuple[float, ...] = (0.0, 0.01, 0.03)


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

    tokenizer: GPT2Tokenizer | None
    items: dict[str, list[ClozeItem]]
    not_evaluated: dict[str, str]
    dropped_long: dict[str, int] = field(default_factory=dict)


def prepare_zeroshot(benchmarks: Sequence[str], root: str | os.PathLike[str] | None = None,
                     vocab_size: int | None = None, max_items: int | None = None,
                     max_len: int | None = None) -> ZeroShotSuite:
    """Read the tokenizer and the benchmarks (before training, so a malformed file stops the run at once).

    A missing file is not an error: the benchmark goes to ``not_evaluated`` with the message that
    names the path and the source (all of them when GPT-2's ``tokenizer.json`` is missing and cannot be
    fetched, :func:`~hacn_core.engine.text.gpt2_tokenizer`). ``vocab_size``:
    the model's; a tokenizer with more ids raises. ``max_items``: keep the first items of each.
    ``max_len``: the model's longest input; an item with an ending of more than ``max_len // 2``
    tokens is left out and counted in ``dropped_long`` (the scorer cuts context, never an ending,
    and the half leaves room for the tokens that noise adds; with Table 4's 256 tokens that is 128).
    """
    for name in benchmarks:
        check_choice("zeroshot_benchmarks", name, tuple(BENCHMARKS))
    try:
        tokenizer: GPT2Tokenizer | None = gpt2_tokenizer(root)
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
    "PAPER_NOISE",
    "ZEROSHOT_FOLDER",
    "Benchmark",
    "ZeroShotSuite",
    "benchmark_folder",
    "evaluate_zeroshot",
    "hellaswag_preprocess",
    "load_benchmark",
    "prepare_zeroshot",
    "read_arc",
    "read_hellaswag",
    "read_piqa",
]
