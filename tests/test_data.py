from pathlib import Path

import pytest
import torch

from hacn_core.engine import data
from hacn_core.engine.data import (
    DatasetMissingError,
    data_root,
    downloads_allowed,
    ensure_dataset,
    link_mirror,
    stratified_split,
    synthetic_dataset,
    synthetic_splits,
)

MIRROR = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def test_data_root_resolution(monkeypatch, tmp_path):
    monkeypatch.setenv("HACN_DATA", str(tmp_path / "env"))
    assert data_root() == tmp_path / "env"
    assert data_root(tmp_path / "arg") == tmp_path / "arg"  # explicit argument wins
    monkeypatch.delenv("HACN_DATA")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert data_root() == tmp_path / "cache" / "hacn-book" / "data"


def test_download_switch(monkeypatch):
    monkeypatch.delenv("HACN_DOWNLOAD", raising=False)
    assert downloads_allowed() is True
    monkeypatch.setenv("HACN_DOWNLOAD", "0")
    assert downloads_allowed() is False
    assert downloads_allowed(True) is True
    monkeypatch.setenv("HACN_DOWNLOAD", "maybe")
    with pytest.raises(ValueError, match="HACN_DOWNLOAD"):
        downloads_allowed()


def test_offline_error_names_dataset_folder_files_and_command(tmp_path):
    with pytest.raises(DatasetMissingError) as err:
        ensure_dataset("MNIST", tmp_path, download=False)
    message = str(err.value)
    assert "'MNIST'" in message
    assert str(tmp_path / "MNIST" / "raw") in message
    assert "train-images-idx3-ubyte" in message and "t10k-labels-idx1-ubyte" in message
    assert "python -m hacn_core fetch MNIST" in message
    assert not (tmp_path / "MNIST").exists()  # nothing was written


def test_failed_download_becomes_the_same_clear_error(tmp_path, monkeypatch):
    def no_network(name, base):
        raise OSError("network is unreachable")

    monkeypatch.setattr(data, "_download", no_network)
    with pytest.raises(DatasetMissingError, match="network is unreachable") as err:
        ensure_dataset("tinyshakespeare", tmp_path, download=True)
    assert "input.txt" in str(err.value)


def test_unknown_dataset_lists_known_ones():
    with pytest.raises(ValueError, match="known datasets: MNIST"):
        ensure_dataset("ImageNet-22k")


def test_link_mirror_makes_writable_root_without_touching_source(tmp_path):
    src = tmp_path / "src" / "tinyshakespeare"
    src.mkdir(parents=True)
    (src / "input.txt").write_text("To be, or not to be")
    root = link_mirror(tmp_path / "src", tmp_path / "root")
    link = root / "tinyshakespeare" / "input.txt"
    assert link.is_symlink() and link.read_text() == "To be, or not to be"
    (root / "tinyshakespeare" / "processed").mkdir()  # loaders may write beside raw files
    assert sorted(p.name for p in src.iterdir()) == ["input.txt"]
    link_mirror(tmp_path / "src", tmp_path / "root")  # idempotent
    assert data.load_text(root=root, download=False).startswith("To be")


@pytest.mark.parametrize("name,size", [("DoubleMoon", 2500), ("Spiral", 2500), ("SpiralHard", 5000)])
def test_synthetic_shapes_balance_and_determinism(name, size):
    x, y = synthetic_dataset(name, seed=3)
    assert x.shape == (size, 2) and x.dtype == torch.float32
    assert y.shape == (size,) and set(y.tolist()) == {0, 1}
    assert int((y == 0).sum()) == int((y == 1).sum()) == size // 2
    x2, y2 = synthetic_dataset(name, seed=3)
    assert torch.equal(x, x2) and torch.equal(y, y2)
    x3, _ = synthetic_dataset(name, seed=4)
    assert not torch.equal(x, x3)


def test_synthetic_classes_are_separable_by_nearest_neighbour():
    # The tasks are meant to be learnable to ~100%: a 1-NN classifier on the
    # split must already be near perfect, i.e. the noise does not mix the classes.
    for name in ("DoubleMoon", "Spiral", "SpiralHard"):
        s = synthetic_splits(name, seed=0)
        (xtr, ytr), (xte, yte) = s["train"], s["test"]
        nearest = torch.cdist(xte, xtr).argmin(dim=1)
        accuracy = (ytr[nearest] == yte).float().mean().item()
        assert accuracy > 0.97, (name, accuracy)


def test_spiral_hard_is_harder_than_spiral_for_a_linear_model():
    # A least-squares linear classifier: near chance on both spirals, far better on the moons.
    def linear_accuracy(name):
        x, y = synthetic_dataset(name, 0)
        a = torch.cat([x, torch.ones(len(x), 1)], 1).double()
        w = torch.linalg.lstsq(a, (2.0 * y - 1).double().unsqueeze(1)).solution
        return ((a @ w).squeeze(1) > 0).long().eq(y).double().mean().item()

    assert linear_accuracy("DoubleMoon") > 0.8
    assert linear_accuracy("Spiral") < 0.75 and linear_accuracy("SpiralHard") < 0.65


@pytest.mark.parametrize("name,sizes", [("DoubleMoon", (1750, 250, 500)), ("SpiralHard", (3500, 500, 1000))])
def test_outer_split_sizes_and_stratification(name, sizes):
    s = synthetic_splits(name, seed=1)
    assert tuple(len(s[k][1]) for k in ("train", "val", "test")) == sizes
    for part in s.values():
        assert int(part[1].sum()) * 2 == len(part[1])  # balanced in every part


def test_stratified_split_is_a_partition_and_seeded():
    y = torch.tensor([0] * 30 + [1] * 70)
    parts = stratified_split(y, (70, 10, 20), seed=5)
    joined = torch.cat(parts).sort().values
    assert torch.equal(joined, torch.arange(100))
    assert [int(y[p].sum()) for p in parts] == [49, 7, 14]
    again = stratified_split(y, (70, 10, 20), seed=5)
    assert all(torch.equal(a, b) for a, b in zip(parts, again))
    with pytest.raises(ValueError, match="sizes"):
        stratified_split(y, (50, 10), seed=0)


def test_unknown_synthetic_name():
    with pytest.raises(ValueError, match="DoubleMoon, Spiral, SpiralHard"):
        synthetic_dataset("Checkerboard")


@pytest.mark.data
@pytest.mark.skipif(not MIRROR.is_dir(), reason="offline data mirror ../shared/data not present")
def test_offline_mirror_loads_through_standard_loaders(tmp_path):
    root = link_mirror(MIRROR, tmp_path / "data")
    x, y = data.image_tensors("FashionMNIST", train=False, root=root, download=False)
    assert x.shape == (10000, 1, 28, 28) and 0.0 <= float(x.min()) and float(x.max()) <= 1.0
    assert torch.bincount(y).tolist() == [1000] * 10
    text = data.load_text(root=root, download=False)
    assert len(text) == 1115394
    mutag = data.load_tudataset("MUTAG", root=root, download=False)
    assert len(mutag) == 188 and mutag.num_classes == 2
    assert not any(p.name == "processed" for p in MIRROR.rglob("*"))  # the mirror stays read-only


@pytest.mark.data
@pytest.mark.skipif(not MIRROR.is_dir(), reason="offline data mirror ../shared/data not present")
@pytest.mark.parametrize("name", ["MNIST", "FashionMNIST"])
def test_idx_files_read_directly_equal_torchvisions_datasets(tmp_path, name):
    """image_tensors reads MNIST / Fashion-MNIST's IDX bytes itself (importing torchvision costs seconds in
    every process): the same images and labels, bit for bit, as torchvision's dataset classes hold."""
    root = link_mirror(MIRROR, tmp_path / "data")
    x, y = data.image_tensors(name, train=False, root=root, download=False)
    ds = data.load_image_dataset(name, train=False, root=root, download=False)  # torchvision's class
    assert torch.equal(x, ds.data.unsqueeze(1).float() / 255.0) and torch.equal(y, ds.targets)
    assert (x.dtype, y.dtype, x.is_contiguous()) == (torch.float32, torch.int64, True)
