"""The installed environment: torch and torchvision work together, pins agree."""

import re
import struct
from pathlib import Path

import numpy as np
import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
MIRROR = REPO.parent / "shared" / "data"


def _write_idx(path: Path, array: np.ndarray) -> None:
    # IDX format: magic (0, 0, dtype 0x08 = ubyte, ndim), big-endian dims, then the bytes.
    header = struct.pack(">BBBB", 0, 0, 0x08, array.ndim) + struct.pack(f">{array.ndim}I", *array.shape)
    path.write_bytes(header + array.astype(np.uint8).tobytes())


def test_torchvision_imports_next_to_torch_and_runs_a_compiled_op():
    import torchvision
    from torchvision.ops import nms

    assert torch.__version__.split("+")[0] == "2.13.0"
    assert torchvision.__version__.split("+")[0] == "0.28.0"
    kept = nms(torch.tensor([[0.0, 0, 1, 1], [0, 0, 1, 1], [2, 2, 3, 3]]), torch.tensor([0.9, 0.8, 0.7]), 0.5)
    assert kept.tolist() == [0, 2]


def test_torchvision_mnist_reads_idx_files(tmp_path):
    import torchvision

    raw = tmp_path / "MNIST" / "raw"
    raw.mkdir(parents=True)
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (5, 28, 28), dtype=np.uint8)
    labels = np.array([3, 1, 4, 1, 5], dtype=np.uint8)
    for split in ("train", "t10k"):
        _write_idx(raw / f"{split}-images-idx3-ubyte", images)
        _write_idx(raw / f"{split}-labels-idx1-ubyte", labels)
    ds = torchvision.datasets.MNIST(str(tmp_path), train=True, download=False)
    image, label = ds[2]
    assert label == 4
    assert np.array_equal(np.asarray(image), images[2])


@pytest.mark.data
@pytest.mark.skipif(not MIRROR.is_dir(), reason="offline data mirror ../shared/data not present")
def test_torchvision_mnist_reads_the_real_offline_sample(tmp_path):
    import torchvision

    from hacn_core.engine.data import link_mirror

    root = link_mirror(MIRROR, tmp_path / "data")
    ds = torchvision.datasets.MNIST(str(root), train=False, download=False)
    image, label = ds[0]
    assert len(ds) == 10000 and image.size == (28, 28)
    assert label == 7  # the first MNIST test digit is a 7


def _pins(lines):
    pins = {}
    for line in lines:
        line = line.split("#")[0].strip().lstrip("- ").strip()
        m = re.match(r"^([A-Za-z0-9_.\-]+)\s*(===?|>=)\s*(\S+)$", line)
        if m:
            pins[m.group(1).lower()] = m.group(2) + m.group(3)
    return pins


def test_environment_yml_has_the_same_pins_as_requirements():
    req = _pins((REPO / "requirements.txt").read_text().splitlines())
    env = _pins((REPO / "environment.yml").read_text().splitlines())
    assert req and req == {k: v for k, v in env.items() if k in req}
    assert set(req) <= set(env)
    assert req["jupyter-book"].startswith("==1.")
