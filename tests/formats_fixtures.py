"""Tiny files in each published format the paper profiles read, written by the tests (never downloaded).

:func:`write_all` fills a data root laid out as ``$HACN_DATA`` is (the README's data section) with a few
examples of every dataset, each in its published format, so that the real loaders read them unchanged:

==================  ==============================================================  =====================
dataset             files (under the data root)                                      format
==================  ==============================================================  =====================
MNIST               ``MNIST/raw/{train,t10k}-{images-idx3,labels-idx1}-ubyte``       IDX (big-endian)
CIFAR-10            ``cifar-10-batches-py/data_batch_1..5, test_batch, batches.meta``  python pickles
CIFAR-100           ``cifar-100-python/{train,test,meta}``                           python pickles
ImageNet-1k         ``imagenet/{train,val}/<wnid>/*.JPEG``                           ImageFolder of JPEGs
OpenWebText2        ``openwebtext2/documents/*.jsonl`` -> ``openwebtext2/{train,val}.bin``  jsonl records
                                                                                     -> flat uint16 GPT-2 ids
PG-19               ``pg19/{train,validation}/<id>.txt``                              one book a file
NCI1, REDDIT-B      ``TUDataset/<name>/raw/<name>_{A,graph_indicator,...}.txt``      TU Dortmund text files
Multi30k            ``multi30k/{train,val,test}.jsonl``                              Hub jsonl (en, de)
zero-shot           ``zeroshot/hellaswag/hellaswag_val.jsonl``, ``zeroshot/piqa/      published jsonl and
                    valid.jsonl`` + ``valid-labels.lst``, ``zeroshot/arc_easy/          label files
                    ARC-Easy-Test.jsonl``
GPT-2 BPE           ``gpt2-tokenizer/tokenizer.json``                                Hugging Face tokenizers
==================  ==============================================================  =====================

What a fixture cannot be: the published bytes. torchvision checks the MD5 of CIFAR's published files
(:func:`cifar_md5_check_off` turns that one check off in a test), and AWNN's image study splits exactly
the 60,000 / 50,000 published training images (the tests give the fixture's sizes instead). The GPT-2
tokenizer is a byte-level BPE with GPT-2's byte tokens, a few merges and ``<|endoftext|>`` at GPT-2's id
50,256 (filler tokens in between), so that every id is where GPT-2's would be checked. OpenWebText2's
plug-and-play archive stores the same jsonl records compressed with zstd (``*.jsonl.zst``); the fixture
writes them uncompressed, and :func:`tokenize_corpus` turns the documents (or PG-19's books) into the
token files as the README tells a user to.
"""

from __future__ import annotations

import contextlib
import json
import pickle
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from hacn_core.engine.text import GPT2_EOT_TOKEN

N_TRAIN = 40  # training images per image dataset (4 per class for 10 classes)
N_TEST = 20
#: GPT-2's end-of-text id (the last of its 50,257 tokens)
GPT2_EOT_ID = 50256

WORDS = ("the cat sat on the mat and the dog ran to the park where a man was reading the paper while "
         "children were playing near the water and the sun was warm on the stones").split()


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _sentence(rng: np.random.Generator, n: int) -> str:
    return " ".join(rng.choice(WORDS, n)).capitalize() + "."


def _write_jsonl(path: Path, records: Sequence[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


# ----------------------------------------------------------------------------- images


def _labels(n: int, classes: int) -> np.ndarray:
    return np.arange(n) % classes  # every class present, balanced


def write_mnist(root: Path, n_train: int = N_TRAIN, n_test: int = N_TEST) -> None:
    """``MNIST/raw``: IDX files, magic ``0 0 8 ndim`` (unsigned bytes), big-endian sizes, then the bytes."""
    folder = root / "MNIST" / "raw"
    folder.mkdir(parents=True, exist_ok=True)
    rng = _rng(0)
    for prefix, n in (("train", n_train), ("t10k", n_test)):
        images = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
        labels = _labels(n, 10).astype(np.uint8)
        for kind, array in (("images-idx3", images), ("labels-idx1", labels)):
            header = bytes([0, 0, 8, array.ndim]) + b"".join(int(d).to_bytes(4, "big") for d in array.shape)
            (folder / f"{prefix}-{kind}-ubyte").write_bytes(header + array.tobytes())


def _pickle(path: Path, record: dict) -> None:
    with open(path, "wb") as handle:
        pickle.dump(record, handle)


def _cifar_rows(n: int, rng: np.random.Generator) -> np.ndarray:
    return rng.integers(0, 256, (n, 3 * 32 * 32), dtype=np.uint8)  # row: 1,024 red, then green, then blue


def write_cifar10(root: Path, n_train: int = N_TRAIN, n_test: int = N_TEST) -> None:
    """``cifar-10-batches-py``: five training batches and a test batch, each a pickled dict with ``data``
    ``(n, 3072)`` uint8 and ``labels``, and ``batches.meta`` with the ``label_names``."""
    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True, exist_ok=True)
    rng = _rng(1)
    labels = _labels(n_train, 10)
    for i, part in enumerate(np.array_split(np.arange(n_train), 5), start=1):
        _pickle(folder / f"data_batch_{i}", {"batch_label": f"training batch {i} of 5",
                                             "labels": labels[part].tolist(), "data": _cifar_rows(len(part), rng),
                                             "filenames": [f"img_{j}.png" for j in part]})
    _pickle(folder / "test_batch", {"batch_label": "testing batch 1 of 1", "labels": _labels(n_test, 10).tolist(),
                                    "data": _cifar_rows(n_test, rng)})
    _pickle(folder / "batches.meta", {"label_names": [f"class{c}" for c in range(10)], "num_cases_per_batch": 10000,
                                      "num_vis": 3072})


def write_cifar100(root: Path, n_train: int = 2 * N_TRAIN + 20, n_test: int = N_TEST) -> None:
    """``cifar-100-python``: ``train`` and ``test`` pickles with ``data``, ``fine_labels`` and
    ``coarse_labels``, and ``meta`` with the ``fine_label_names``."""
    folder = root / "cifar-100-python"
    folder.mkdir(parents=True, exist_ok=True)
    rng = _rng(2)
    for name, n in (("train", n_train), ("test", n_test)):
        fine = _labels(n, 100)
        _pickle(folder / name, {"data": _cifar_rows(n, rng), "fine_labels": fine.tolist(),
                                "coarse_labels": (fine // 5).tolist(),
                                "filenames": [f"{name}_{j}.png" for j in range(n)]})
    _pickle(folder / "meta", {"fine_label_names": [f"fine{c}" for c in range(100)],
                              "coarse_label_names": [f"coarse{c}" for c in range(20)]})


@contextlib.contextmanager
def cifar_md5_check_off() -> Iterator[None]:
    """torchvision's CIFAR loaders check each file's MD5 against the published archive's; fixtures differ."""
    import pytest
    from torchvision.datasets import cifar

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(cifar, "check_integrity", lambda path, md5=None: Path(path).is_file())
        yield


IMAGENET_WNIDS = ("n01440764", "n01443537", "n01484850")


def write_imagenet(root: Path, per_class: int = 2) -> None:
    """``imagenet/{train,val}/<wnid>/*.JPEG``: torchvision's ImageFolder layout, small JPEGs of odd sizes
    (the Inception crop and the resize handle any size)."""
    from PIL import Image

    rng = _rng(3)
    for split in ("train", "val"):
        for c, wnid in enumerate(IMAGENET_WNIDS):
            folder = root / "imagenet" / split / wnid
            folder.mkdir(parents=True, exist_ok=True)
            for k in range(per_class):
                pixels = rng.integers(0, 256, (40 + 7 * k, 52 - 5 * c, 3), dtype=np.uint8)
                Image.fromarray(pixels).save(folder / f"{wnid}_{k}.JPEG", format="JPEG", quality=85)


# ----------------------------------------------------------------------------- text


def write_gpt2_tokenizer(root: Path) -> None:
    """``gpt2-tokenizer/tokenizer.json``: a byte-level BPE with GPT-2's 256 byte tokens (ids 0-255 in GPT-2's
    order), the merges of ``tests/_gpt2.py``, filler tokens, and ``<|endoftext|>`` at id 50,256 as in GPT-2."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    from _gpt2 import MERGES, byte_tokens

    vocab = {s: i for i, s in enumerate(byte_tokens())}
    for a, b in MERGES:
        vocab.setdefault(a + b, len(vocab))
    for i in range(len(vocab), GPT2_EOT_ID):
        vocab[f"<filler{i}>"] = i  # never produced: no merge leads to them
    vocab[GPT2_EOT_TOKEN] = GPT2_EOT_ID
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=list(MERGES)))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens([AddedToken(GPT2_EOT_TOKEN, special=True)])
    folder = root / "gpt2-tokenizer"
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(folder / "tokenizer.json"))


def write_openwebtext2_documents(root: Path, n: int = 12) -> Path:
    """``openwebtext2/documents/*.jsonl``: OpenWebText2's records (``text`` and ``meta``), one document a line."""
    rng = _rng(4)
    records = [{"text": "\n\n".join(_sentence(rng, 12) for _ in range(3)),
                "meta": {"url": f"https://example.org/{i}", "timestamp": 1_500_000_000 + i, "domain": "example.org",
                         "title": f"Post {i}", "reddit_scores": [int(rng.integers(3, 100))]}}
               for i in range(n)]
    folder = root / "openwebtext2" / "documents"
    _write_jsonl(folder / "part-00.jsonl", records[: n // 2])
    _write_jsonl(folder / "part-01.jsonl", records[n // 2:])
    return folder


def write_pg19_books(root: Path, n: int = 3) -> Path:
    """``pg19/{train,validation}/<gutenberg id>.txt``: PG-19's layout, one book (plain text) a file."""
    rng = _rng(5)
    for split, first in (("train", 10000), ("validation", 20000)):
        folder = root / "pg19" / split
        folder.mkdir(parents=True, exist_ok=True)
        for i in range(n):
            chapters = [f"CHAPTER {c + 1}\n\n" + " ".join(_sentence(rng, 10) for _ in range(8)) for c in range(3)]
            (folder / f"{first + i}.txt").write_text(f"BOOK {first + i}\n\n" + "\n\n".join(chapters), encoding="utf-8")
    return root / "pg19"


def documents(folder: Path) -> Iterator[str]:
    """The documents under ``folder``: each line's ``text`` of every ``*.jsonl`` (OpenWebText2's records) and
    each ``*.txt`` whole (a PG-19 book), in file-name order."""
    for path in sorted(folder.iterdir()):
        if path.suffix == ".jsonl":
            with open(path, encoding="utf-8") as handle:
                yield from (json.loads(line)["text"] for line in handle if line.strip())
        elif path.suffix == ".txt":
            yield path.read_text(encoding="utf-8")


def tokenize_corpus(root: Path, train: Path, val: Path, target: str) -> None:
    """``<root>/<target>/{train,val}.bin`` from two folders of documents, as the README tells a user to:
    ``tokenize_documents`` with GPT-2's BPE (:func:`hacn_core.engine.text.gpt2_tokenizer`)."""
    from hacn_core.engine.text import gpt2_tokenizer
    from hacn_core.hacn.text import tokenize_documents

    tokenizer = gpt2_tokenizer(root)
    for name, folder in (("train", train), ("val", val)):
        tokenize_documents(documents(folder), tokenizer, root / target / f"{name}.bin")


def write_openwebtext2(root: Path) -> None:
    """OpenWebText2 documents, the held-out ones apart, tokenised into ``openwebtext2/{train,val}.bin``."""
    folder = write_openwebtext2_documents(root)
    held_out = root / "openwebtext2" / "held-out"
    held_out.mkdir(parents=True, exist_ok=True)
    (folder / "part-01.jsonl").rename(held_out / "part-01.jsonl")
    tokenize_corpus(root, folder, held_out, "openwebtext2")


def write_multi30k(root: Path, n: int = 12) -> None:
    """``multi30k/{train,val,test}.jsonl``: the Hub dataset ``bentrevett/multi30k``'s lines ``{"en", "de"}``."""
    rng = _rng(6)
    for split in ("train", "val", "test"):
        _write_jsonl(root / "multi30k" / f"{split}.jsonl",
                     [{"en": _sentence(rng, 8), "de": _sentence(rng, 9)} for _ in range(n)])


def write_zeroshot(root: Path) -> None:
    """HellaSwag's ``hellaswag_val.jsonl``, PIQA's ``valid.jsonl`` + ``valid-labels.lst`` and ARC-Easy's
    ``ARC-Easy-Test.jsonl``, three items each, in the published fields."""
    rng = _rng(7)
    base = root / "zeroshot"
    _write_jsonl(base / "hellaswag" / "hellaswag_val.jsonl", [
        {"ind": i, "activity_label": "Walking the dog", "ctx_a": _sentence(rng, 8), "ctx_b": "the dog",
         "ctx": "", "endings": [_sentence(rng, 5) for _ in range(4)], "source_id": f"activitynet~{i}",
         "split": "val", "split_type": "indomain", "label": i % 4} for i in range(3)])
    _write_jsonl(base / "piqa" / "valid.jsonl", [
        {"goal": _sentence(rng, 7), "sol1": _sentence(rng, 6), "sol2": _sentence(rng, 6)} for _ in range(3)])
    (base / "piqa" / "valid-labels.lst").write_text("0\n1\n0\n", encoding="utf-8")
    _write_jsonl(base / "arc_easy" / "ARC-Easy-Test.jsonl", [
        {"id": f"Mercury_{i}", "question": {"stem": _sentence(rng, 9), "choices": [
            {"text": _sentence(rng, 3), "label": label} for label in "ABCD"]}, "answerKey": "ABCD"[i]}
        for i in range(3)])


# ----------------------------------------------------------------------------- graphs


def write_tudataset(root: Path, name: str, graphs: int = 40, node_labels: int | None = None) -> None:
    """``TUDataset/<name>/raw``: the TU Dortmund text files. ``_A``: one edge ``i, j`` a line (1-based node ids,
    both directions); ``_graph_indicator``: each node's graph (1-based); ``_graph_labels``: one label a graph
    (REDDIT-BINARY's are -1 / 1); ``_node_labels`` (NCI1: 37 kinds of atom): one label a node."""
    rng = _rng(8)
    folder = root / "TUDataset" / name / "raw"
    folder.mkdir(parents=True, exist_ok=True)
    edges, indicator, labels = [], [], []
    first = 1
    for g in range(graphs):
        n = int(rng.integers(6, 14))
        ring = [(first + k, first + (k + 1) % n) for k in range(n)]
        chord = [(first, first + n // 2)]
        edges += [e for a, b in ring + chord for e in ((a, b), (b, a))]
        indicator += [g + 1] * n
        labels.append(g % 2)
        first += n
    (folder / f"{name}_A.txt").write_text("".join(f"{a}, {b}\n" for a, b in edges))
    (folder / f"{name}_graph_indicator.txt").write_text("".join(f"{g}\n" for g in indicator))
    mapped = [2 * y - 1 for y in labels] if name == "REDDIT-BINARY" else labels
    (folder / f"{name}_graph_labels.txt").write_text("".join(f"{y}\n" for y in mapped))
    if node_labels:
        (folder / f"{name}_node_labels.txt").write_text("".join(f"{k % node_labels}\n" for k in range(len(indicator))))


# ----------------------------------------------------------------------------- all


def write_all(root: Path) -> Path:
    """Every fixture above under ``root`` (a data root); returns ``root``."""
    root.mkdir(parents=True, exist_ok=True)
    write_mnist(root)
    write_cifar10(root)
    write_cifar100(root)
    write_imagenet(root)
    write_gpt2_tokenizer(root)
    write_openwebtext2(root)
    write_pg19_books(root)
    write_multi30k(root)
    write_zeroshot(root)
    write_tudataset(root, "NCI1", node_labels=37)
    write_tudataset(root, "REDDIT-BINARY")
    return root
