"""Datasets: one data root, offline-aware loaders and the AWNN synthetic tasks.

Data root
    ``$HACN_DATA`` if set, else ``$XDG_CACHE_HOME/hacn-book/data`` (``~/.cache/...``).
    Inside it the standard layouts are read as they are: torchvision's
    ``MNIST/raw`` and ``FashionMNIST/raw``, torch-geometric's
    ``TUDataset/<name>/raw``, ``cifar-10-batches-py``, and plain text files.

Downloads
    With ``$HACN_DOWNLOAD`` unset (or ``1``) a missing dataset is downloaded the way
    torchvision / torch-geometric do it (Multi30k and GPT-2's ``tokenizer.json``: from
    the Hugging Face Hub with the ``huggingface_hub`` package). With ``HACN_DOWNLOAD=0``, or when the
    download fails, a :class:`DatasetMissingError` names the dataset, the folder
    that was searched, the files expected there and the command that fetches them.

Damaged files
    Before torchvision reads an MNIST / Fashion-MNIST split, the length of each IDX
    file is checked against its header (:func:`idx_shape`); a truncated download
    raises a :class:`DatasetCorruptError` naming the file, instead of a reshape error.

Synthetic data
    DoubleMoon, Spiral and SpiralHard (AWNN, Appendix B, Table 2: 2,500 / 2,500 /
    5,000 points, 2 features, 2 balanced classes, stratified 70/10/20 split).
    The paper ships their generator only as supplementary code, so the generators
    here are ours, written to the paper's description; they are reproducible by seed.
"""

from __future__ import annotations

import math
import os
import tempfile
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

DATA_ENV = "HACN_DATA"
DOWNLOAD_ENV = "HACN_DOWNLOAD"


def data_root(root: str | os.PathLike[str] | None = None) -> Path:
    """The data root: ``root`` if given, else ``$HACN_DATA``, else the user cache."""
    if root is not None:
        return Path(root).expanduser()
    env = os.environ.get(DATA_ENV)
    if env:
        return Path(env).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache) / "hacn-book" / "data"


def downloads_allowed(download: bool | None = None) -> bool:
    """Whether loaders may download: ``download`` if given, else ``$HACN_DOWNLOAD`` (default yes)."""
    if download is not None:
        return download
    value = os.environ.get(DOWNLOAD_ENV, "1").strip().lower()
    if value in {"1", "true", "yes", "on", ""}:
        return True
    if value in {"0", "false", "no", "off"}:
        return False
    raise ValueError(f"{DOWNLOAD_ENV}={value!r} is not understood; use 1 (allow downloads) or 0 (offline)")


@dataclass(frozen=True)
class DatasetSpec:
    """Where a dataset lives under the data root and which files make it complete."""

    name: str
    folder: str  # relative to the data root
    files: tuple[str, ...]
    source: str  # where a download comes from (for the error message)


DATASETS: dict[str, DatasetSpec] = {
    spec.name: spec
    for spec in (
        DatasetSpec(
            "MNIST",
            "MNIST/raw",
            ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
            "torchvision.datasets.MNIST mirrors",
        ),
        DatasetSpec(
            "FashionMNIST",
            "FashionMNIST/raw",
            ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
            "torchvision.datasets.FashionMNIST mirrors",
        ),
        DatasetSpec(
            "CIFAR10",
            "cifar-10-batches-py",
            tuple(f"data_batch_{i}" for i in range(1, 6)) + ("test_batch", "batches.meta"),
            "torchvision.datasets.CIFAR10 (www.cs.toronto.edu/~kriz)",
        ),
        DatasetSpec(
            "CIFAR100",
            "cifar-100-python",
            ("train", "test", "meta"),
            "torchvision.datasets.CIFAR100 (www.cs.toronto.edu/~kriz)",
        ),
        DatasetSpec(
            "NCI1",
            "TUDataset/NCI1/raw",
            ("NCI1_A.txt", "NCI1_graph_indicator.txt", "NCI1_graph_labels.txt", "NCI1_node_labels.txt"),
            "torch_geometric.datasets.TUDataset (TU Dortmund graph collection)",
        ),
        DatasetSpec(
            "MUTAG",
            "TUDataset/MUTAG/raw",
            ("MUTAG_A.txt", "MUTAG_graph_indicator.txt", "MUTAG_graph_labels.txt", "MUTAG_node_labels.txt"),
            "torch_geometric.datasets.TUDataset (TU Dortmund graph collection)",
        ),
        DatasetSpec(
            "REDDIT-BINARY",
            "TUDataset/REDDIT-BINARY/raw",
            ("REDDIT-BINARY_A.txt", "REDDIT-BINARY_graph_indicator.txt", "REDDIT-BINARY_graph_labels.txt"),
            "torch_geometric.datasets.TUDataset (TU Dortmund graph collection)",
        ),
        DatasetSpec(
            "tinyshakespeare",
            "tinyshakespeare",
            ("input.txt",),
            "the char-rnn repository (github.com/karpathy/char-rnn)",
        ),
        DatasetSpec(
            "Multi30k",
            "multi30k",
            ("train.jsonl", "val.jsonl", "test.jsonl"),
            "the Hugging Face Hub dataset bentrevett/multi30k, fetched with the huggingface_hub package "
            "(pip install huggingface_hub)",
        ),
        DatasetSpec(
            "gpt2-tokenizer",
            "gpt2-tokenizer",
            ("tokenizer.json",),
            "the tokenizer.json of the Hugging Face Hub model openai-community/gpt2, fetched with the "
            "huggingface_hub package (installed with tokenizers), or downloaded by hand from "
            "https://huggingface.co/openai-community/gpt2 (Files and versions)",
        ),
    )
}

TINY_SHAKESPEARE_URL = "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt"
#: files fetched from the Hugging Face Hub: dataset name -> (repository, repository type)
HUB_REPOSITORIES: dict[str, tuple[str, str]] = {
    "Multi30k": ("bentrevett/multi30k", "dataset"),
    "gpt2-tokenizer": ("openai-community/gpt2", "model"),
}


class DatasetMissingError(FileNotFoundError):
    """A dataset is not under the data root and could not (or may not) be downloaded."""


class DatasetCorruptError(ValueError):
    """A dataset file is on disk but damaged (e.g. a truncated download); the message names the file."""


def _spec(name: str) -> DatasetSpec:
    try:
        return DATASETS[name]
    except KeyError:
        raise ValueError(f"dataset={name!r} is unknown; known datasets: {', '.join(DATASETS)}") from None


def missing_files(name: str, root: str | os.PathLike[str] | None = None) -> list[str]:
    """Files of dataset ``name`` that are not present under the data root."""
    spec = _spec(name)
    folder = data_root(root) / spec.folder
    return [f for f in spec.files if not (folder / f).is_file()]


def missing_error(name: str, root: str | os.PathLike[str] | None = None, reason: str = "") -> DatasetMissingError:
    """The error raised for a dataset that is not on disk: where, what, and how to get it."""
    spec = _spec(name)
    folder = data_root(root) / spec.folder
    missing = missing_files(name, root)
    lines = [
        f"dataset {spec.name!r} is not available offline.",
        f"  looked in: {folder}",
        f"  expected files: {', '.join(spec.files)}",
        f"  missing: {', '.join(missing) if missing else '(none)'}",
    ]
    if reason:
        lines.append(f"  download: {reason}")
    lines += [
        f"  to fetch it (needs a network): python -m hacn_core fetch {spec.name}",
        f"  or point {DATA_ENV} at a folder that holds {spec.folder}/ (source: {spec.source}).",
    ]
    return DatasetMissingError("\n".join(lines))


def ensure_dataset(name: str, root: str | os.PathLike[str] | None = None, download: bool | None = None) -> Path:
    """Return the data root holding ``name``, downloading it if missing and allowed."""
    base = data_root(root)
    if not missing_files(name, base):
        return base
    if not downloads_allowed(download):
        raise missing_error(name, base, reason=f"disabled ({DOWNLOAD_ENV}=0 or download=False)")
    try:
        _download(name, base)
    except Exception as err:  # noqa: BLE001 - every download failure becomes the same clear error
        raise missing_error(name, base, reason=f"failed ({type(err).__name__}: {err})") from err
    if missing_files(name, base):
        raise missing_error(name, base, reason="finished but files are still missing")
    return base


def _download(name: str, base: Path) -> None:
    """Download ``name`` the way its standard loader does."""
    base.mkdir(parents=True, exist_ok=True)
    if name in {"MNIST", "FashionMNIST", "CIFAR10", "CIFAR100"}:
        import torchvision.datasets as tvd

        cls = getattr(tvd, name)
        for train in (True, False):
            cls(str(base), train=train, download=True)
    elif name in {"NCI1", "MUTAG", "REDDIT-BINARY"}:
        from torch_geometric.datasets import TUDataset

        TUDataset(str(base / "TUDataset"), name)
    elif name == "tinyshakespeare":
        target = base / "tinyshakespeare" / "input.txt"
        target.parent.mkdir(parents=True, exist_ok=True)
        with urllib.request.urlopen(TINY_SHAKESPEARE_URL, timeout=60) as response:
            _atomic_write_bytes(target, response.read())
    elif name in HUB_REPOSITORIES:
        from huggingface_hub import hf_hub_download

        repo, kind = HUB_REPOSITORIES[name]
        spec = _spec(name)
        for file in spec.files:
            hf_hub_download(repo, file, repo_type=kind, local_dir=base / spec.folder)
    else:  # pragma: no cover - guarded by _spec
        raise ValueError(name)


def _atomic_write_bytes(path: Path, payload: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# --------------------------------------------------------------------------- images

IMAGE_DATASETS = ("MNIST", "FashionMNIST", "CIFAR10", "CIFAR100")

#: IDX element types (the third byte of the magic number) and their size in bytes
IDX_ITEM_SIZES: dict[int, int] = {0x08: 1, 0x09: 1, 0x0B: 2, 0x0C: 4, 0x0D: 4, 0x0E: 8}


def idx_shape(path: str | os.PathLike[str], name: str = "") -> tuple[int, ...]:
    """The shape an IDX file's header declares, once its length has been checked against it.

    IDX (the MNIST / Fashion-MNIST format): a magic number ``0, 0, type, ndim``, then
    ``ndim`` big-endian 32-bit sizes, then the elements. A file whose length is not
    ``4 + 4 ndim + prod(sizes) * itemsize`` (a truncated download, say) raises a
    :class:`DatasetCorruptError` naming the file and both lengths; torchvision's
    reader would fail with a reshape error that names neither. Reads the header only.
    """
    path = Path(path)
    size = path.stat().st_size
    with open(path, "rb") as handle:
        magic = handle.read(4)
        ndim = magic[3] if len(magic) == 4 else 0
        dims = handle.read(4 * ndim)
    fix = f"delete it and fetch it again (python -m hacn_core fetch {name})" if name else "delete it and fetch it again"
    if len(magic) < 4 or magic[:2] != b"\0\0" or magic[2] not in IDX_ITEM_SIZES or ndim == 0:
        raise DatasetCorruptError(f"{path} is not an IDX file (its magic number is {magic.hex() or 'missing'}); {fix}")
    if len(dims) < 4 * ndim:
        raise DatasetCorruptError(f"{path} is truncated inside its header ({size} bytes); {fix}")
    shape = tuple(int.from_bytes(dims[4 * i:4 * i + 4], "big") for i in range(ndim))
    expected = 4 + 4 * ndim + math.prod(shape) * IDX_ITEM_SIZES[magic[2]]
    if size != expected:
        state = "truncated" if size < expected else "longer than its header says"
        raise DatasetCorruptError(
            f"{path} is {state}: {size:,} bytes, but its header declares shape {shape}, {expected:,} bytes; {fix}"
        )
    return shape


def check_idx_split(name: str, train: bool, root: str | os.PathLike[str] | None = None) -> None:
    """Check the images and labels IDX files of one split of MNIST / Fashion-MNIST (:func:`idx_shape`),
    and that they hold the same number of items."""
    folder = data_root(root) / _spec(name).folder
    prefix = "train" if train else "t10k"
    images = idx_shape(folder / f"{prefix}-images-idx3-ubyte", name)
    labels = idx_shape(folder / f"{prefix}-labels-idx1-ubyte", name)
    if images[0] != labels[0]:
        raise DatasetCorruptError(
            f"{folder}: {prefix}-images-idx3-ubyte holds {images[0]:,} images but {prefix}-labels-idx1-ubyte "
            f"{labels[0]:,} labels; fetch {name} again (python -m hacn_core fetch {name})"
        )


def _idx_split(name: str, train: bool, base: Path) -> tuple[Tensor, Tensor]:
    """One split of MNIST / Fashion-MNIST from its IDX files under the data root ``base``: images ``uint8``
    (N, H, W) and labels ``int64`` (N,), the arrays torchvision's ``MNIST`` / ``FashionMNIST`` hold as
    ``data`` / ``targets`` (tested), checked first (:func:`check_idx_split`)."""
    check_idx_split(name, train, base)
    prefix = "train" if train else "t10k"
    out = []
    for kind in ("images-idx3-ubyte", "labels-idx1-ubyte"):
        path = base / _spec(name).folder / f"{prefix}-{kind}"
        shape = idx_shape(path, name)
        raw = np.fromfile(path, dtype=np.uint8, offset=4 + 4 * len(shape))  # big-endian header, then the bytes
        out.append(torch.from_numpy(raw.reshape(shape)))
    return out[0], out[1].long()


def load_image_dataset(
    name: str, train: bool = True, root: str | os.PathLike[str] | None = None, download: bool | None = None, **kwargs: Any
):
    """The torchvision dataset ``name`` (``MNIST``, ``FashionMNIST``, ``CIFAR10``, ``CIFAR100``)."""
    if name not in IMAGE_DATASETS:
        raise ValueError(f"dataset={name!r} is not an image dataset; allowed: {', '.join(IMAGE_DATASETS)}")
    import torchvision.datasets as tvd

    base = ensure_dataset(name, root, download)
    if name in ("MNIST", "FashionMNIST"):
        check_idx_split(name, train, base)
    return getattr(tvd, name)(str(base), train=train, download=False, **kwargs)


def image_tensors(
    name: str, train: bool = True, root: str | os.PathLike[str] | None = None, download: bool | None = None
) -> tuple[Tensor, Tensor]:
    """Whole split as tensors: images ``float32`` in [0, 1], shape (N, C, H, W); labels ``int64``.

    Pixels are only scaled to [0, 1] (the residual-gates paper's MNIST setting);
    models that want normalisation do it themselves. Small enough to keep on the
    device for the in-memory training path.
    """
    if name in ("MNIST", "FashionMNIST"):  # IDX files, read directly: torchvision's import alone costs seconds
        images, labels = _idx_split(name, train, ensure_dataset(name, root, download))
        return images.unsqueeze(1).contiguous().float().div_(255.0), labels
    ds = load_image_dataset(name, train, root, download)
    data = ds.data
    images = torch.as_tensor(np.asarray(data))
    if images.ndim == 3:  # (N, H, W) greyscale
        images = images.unsqueeze(1)
    else:  # (N, H, W, C) colour
        images = images.permute(0, 3, 1, 2)
    labels = torch.as_tensor(np.asarray(ds.targets), dtype=torch.long)
    return images.contiguous().float().div_(255.0), labels


# --------------------------------------------------------------------------- graphs and text


def load_tudataset(name: str, root: str | os.PathLike[str] | None = None, download: bool | None = None,
                   transform: Any = None):
    """torch-geometric's ``TUDataset(<root>/TUDataset, name)``; writes ``processed/`` beside ``raw/``.

    ``transform`` (a callable ``Data -> Data``) is applied to every graph when it is read,
    never to the processed file, so one ``processed/`` serves every transform.
    """
    from torch_geometric.datasets import TUDataset

    base = ensure_dataset(name, root, download)
    return TUDataset(str(base / "TUDataset"), name, transform=transform)


def load_text(name: str = "tinyshakespeare", root: str | os.PathLike[str] | None = None, download: bool | None = None) -> str:
    """A plain-text corpus (Tiny Shakespeare: ``<root>/tinyshakespeare/input.txt``), UTF-8 and not empty;
    another file raises :class:`DatasetCorruptError` naming it."""
    spec = _spec(name)
    base = ensure_dataset(name, root, download)
    path = base / spec.folder / spec.files[0]
    fix = f"move it aside and fetch it again (python -m hacn_core fetch {name})"
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise DatasetCorruptError(f"{path}: not UTF-8 text (byte {err.start}: {err.reason}); {fix}") from err
    except IsADirectoryError as err:
        raise DatasetCorruptError(f"{path}: a folder, not the {name} text file; {fix}") from err
    if not text.strip():
        raise DatasetCorruptError(f"{path}: the file is empty; {fix}")
    return text


def link_mirror(source: str | os.PathLike[str], target: str | os.PathLike[str]) -> Path:
    """Make ``target`` a writable data root whose files are symlinks into ``source``.

    Used for the read-only offline mirror: loaders may add ``processed/`` folders
    in ``target`` without ever writing into ``source``. Idempotent.
    """
    src, dst = Path(source).resolve(), Path(target)
    if not src.is_dir():
        raise FileNotFoundError(f"offline data mirror not found: {src}")
    for path in src.rglob("*"):
        if path.is_file():
            link = dst / path.relative_to(src)
            link.parent.mkdir(parents=True, exist_ok=True)
            if link.is_symlink() or link.exists():
                continue
            link.symlink_to(path)
    return dst


# --------------------------------------------------------------------------- AWNN synthetic


@dataclass(frozen=True)
class SyntheticSpec:
    """Size and split of an AWNN synthetic task (AWNN Appendix B, Table 2)."""

    name: str
    n_samples: int
    split: tuple[int, int, int]  # outer train / validation / test


SYNTHETIC: dict[str, SyntheticSpec] = {
    "DoubleMoon": SyntheticSpec("DoubleMoon", 2500, (1750, 250, 500)),
    "Spiral": SyntheticSpec("Spiral", 2500, (1750, 250, 500)),
    "SpiralHard": SyntheticSpec("SpiralHard", 5000, (3500, 500, 1000)),
}


def _double_moon(n_per_class: int, rng: np.random.Generator, noise: float = 0.1) -> tuple[np.ndarray, np.ndarray]:
    # Two interleaved half circles of radius 1; the lower one shifted right and down.
    t0 = rng.uniform(0.0, math.pi, n_per_class)
    t1 = rng.uniform(0.0, math.pi, n_per_class)
    upper = np.stack([np.cos(t0), np.sin(t0)], axis=1)
    lower = np.stack([1.0 - np.cos(t1), 0.5 - np.sin(t1)], axis=1)
    x = np.concatenate([upper, lower]) + rng.normal(0.0, noise, (2 * n_per_class, 2))
    return x, np.repeat([0, 1], n_per_class)


def spiral_arms(
    n_per_class: int, rng: np.random.Generator, arms_per_class: int, turns: float, noise: float
) -> tuple[np.ndarray, np.ndarray]:
    """Two-class spiral points: ``2 * arms_per_class`` Archimedean arms, ``n_per_class`` points per class.

    Arm ``m`` is ``r = t``, angle ``2 pi turns t + 2 pi m / n_arms`` with ``t`` in
    (0.05, 1], classes alternating between arms, plus Gaussian ``noise`` (a
    standard deviation). Our generator for Spiral / SpiralHard (AWNN Table 2);
    the paper's own is unpublished.
    """
    n_arms = 2 * arms_per_class
    xs, ys = [], []
    for label in (0, 1):
        counts = np.full(arms_per_class, n_per_class // arms_per_class)
        counts[: n_per_class % arms_per_class] += 1
        for a, count in enumerate(counts):
            arm = 2 * a + label
            t = np.sqrt(rng.uniform(0.0025, 1.0, count))  # sqrt: uniform density along the arm's area
            angle = 2 * math.pi * turns * t + 2 * math.pi * arm / n_arms
            pts = np.stack([t * np.cos(angle), t * np.sin(angle)], axis=1)
            xs.append(pts + rng.normal(0.0, noise, pts.shape))
            ys.append(np.full(count, label))
    return np.concatenate(xs), np.concatenate(ys)


def synthetic_dataset(name: str, seed: int = 0) -> tuple[Tensor, Tensor]:
    """Generate DoubleMoon, Spiral or SpiralHard: ``(X float32 (N, 2), y int64 (N,))``.

    Classes are exactly balanced and the points shuffled; the same seed gives the
    same data. Spiral is one arm per class (1.5 turns); SpiralHard, the paper's
    "double spiral", is two arms per class (1.5 turns), with twice the points.
    """
    try:
        spec = SYNTHETIC[name]
    except KeyError:
        raise ValueError(f"dataset={name!r} is not synthetic; allowed: {', '.join(SYNTHETIC)}") from None
    rng = np.random.default_rng(seed)
    n_per_class = spec.n_samples // 2
    if name == "DoubleMoon":
        x, y = _double_moon(n_per_class, rng)
    elif name == "Spiral":
        x, y = spiral_arms(n_per_class, rng, arms_per_class=1, turns=1.5, noise=0.02)
    else:
        x, y = spiral_arms(n_per_class, rng, arms_per_class=2, turns=1.5, noise=0.015)
    order = rng.permutation(len(y))
    return torch.as_tensor(x[order], dtype=torch.float32), torch.as_tensor(y[order], dtype=torch.long)


def stratified_split(labels: Tensor, sizes: Sequence[int], seed: int = 0) -> list[Tensor]:
    """Split indices into parts of (about) the given ``sizes``, keeping class proportions.

    Each class is cut at the rounded cumulative fractions of ``sizes``; the part
    sizes are exact when every class divides evenly (a balanced 2,500-point set
    split 1750/250/500 gets 875/125/250 per class), otherwise within one per class.
    """
    y = np.asarray(labels)
    if sum(sizes) != len(y):
        raise ValueError(f"sizes={list(sizes)} must add up to the number of samples ({len(y)})")
    rng = np.random.default_rng(seed)
    cuts = np.cumsum(sizes)[:-1] / len(y)
    parts: list[list[np.ndarray]] = [[] for _ in sizes]
    for cls in np.unique(y):
        idx = rng.permutation(np.flatnonzero(y == cls))
        for p, chunk in enumerate(np.split(idx, np.round(cuts * len(idx)).astype(int))):
            parts[p].append(chunk)
    return [torch.as_tensor(np.sort(np.concatenate(chunks)), dtype=torch.long) for chunks in parts]


def synthetic_splits(name: str, seed: int = 0) -> dict[str, tuple[Tensor, Tensor]]:
    """The outer train / validation / test split of AWNN Table 2 for a synthetic task.

    The data are generated with ``seed`` and split with ``seed`` too, so one
    number fixes the whole dataset.
    """
    x, y = synthetic_dataset(name, seed)
    parts = stratified_split(y, SYNTHETIC[name].split, seed)
    return {key: (x[idx], y[idx]) for key, idx in zip(("train", "val", "test"), parts, strict=True)}


@dataclass(frozen=True)
class ImageSplit:
    """The training split of a standard image dataset: images, shape of one image, classes."""

    n_train: int
    shape: tuple[int, int, int]
    classes: int


#: training splits of the image datasets the studies use (torchvision's standard splits)
IMAGE_TRAIN_SPLITS: dict[str, ImageSplit] = {
    "MNIST": ImageSplit(60_000, (1, 28, 28), 10),
    "FashionMNIST": ImageSplit(60_000, (1, 28, 28), 10),
    "CIFAR10": ImageSplit(50_000, (3, 32, 32), 10),
    "CIFAR100": ImageSplit(50_000, (3, 32, 32), 100),
}
