"""Two-process DDP on CPU (gloo, launched by torchrun) against one process."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from hacn_core.engine.training import fit

HERE = Path(__file__).parent
spec = importlib.util.spec_from_file_location("_ddp_worker", HERE / "_ddp_worker.py")
worker = importlib.util.module_from_spec(spec)
spec.loader.exec_module(worker)


@pytest.mark.skipif(not dist.is_available(), reason="torch.distributed is not available")
def test_two_process_ddp_matches_one_process(tmp_path):
    proc = worker.torchrun([str(HERE / "_ddp_worker.py"), str(tmp_path)])
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    got = torch.load(tmp_path / "rank0.pt", weights_only=True)
    assert got["world"] == 2

    train, val, cfg = worker.problem()
    model = worker.Net()
    ref = fit(model, train, cfg, val=val, progress=False)
    for name, p in model.state_dict().items():
        torch.testing.assert_close(got["params"][name], p, rtol=1e-5, atol=1e-6, msg=name)
    for key in ("train_loss", "val_loss", "val_accuracy", "lr", "step"):
        assert got["curves"][key] == pytest.approx(ref.curves[key], rel=1e-5), key
    # killed and resumed under DDP == straight under DDP, bit for bit (dropout streams per rank)
    for name, p in got["straight"].items():
        assert torch.equal(got["resumed"][name], p), name
    # a NaN on one rank stops both at the same step (no rank left waiting in a collective)
    assert [int((tmp_path / f"nan_rank{r}.txt").read_text()) for r in (0, 1)] == [1, 1]
    assert (tmp_path / "nan" / "nonfinite.pt").exists()
    # only rank 0 writes checkpoints
    assert int((tmp_path / "saves_rank0.txt").read_text()) > 0
    assert int((tmp_path / "saves_rank1.txt").read_text()) == 0
