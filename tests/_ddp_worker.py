"""Worker for tests/test_ddp.py, launched as ``torchrun --nproc_per_node=2 _ddp_worker.py OUT``.

First the command line, as ``torchrun ... -m hacn_core run awnn-tabular-fixed --profile smoke
--results OUT/store --where dataset=DoubleMoon seed=0`` runs it (:data:`CLI_ARGS`: the same ``main``,
called in each rank before anything else, so that its ``fit`` joins the process group as under
``-m hacn_core``); a rank whose command does not return 0 ends with its code. Then it trains the same
small problem as the single-process reference (``problem()``), then a run killed after step 3 and
resumed from its step-2 checkpoint, then a run whose loss is NaN on rank 1 only. Rank 0
writes what it saw to ``OUT/rank0.pt``; every rank writes how many checkpoint
files it wrote (after the command) to ``OUT/saves_rank<r>.txt`` and the step its NaN error named to
``OUT/nan_rank<r>.txt``. One launch does both: each torchrun launch costs three processes that import
torch (the launcher and two ranks), some 15 CPU-seconds before anything trains.

``torchrun(args)`` launches two CPU (gloo) processes for the tests.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

import hacn_core.engine.checkpoint as checkpoint
import hacn_core.engine.training as training
from hacn_core.engine.training import Callback, TrainConfig, fit


REPO = Path(__file__).resolve().parents[1]
#: the command run first by every rank (``{out}``: the worker's OUT folder)
CLI_ARGS = ("run", "awnn-tabular-fixed", "--profile", "smoke", "--results", "{out}/store",
            "--where", "dataset=DoubleMoon", "seed=0")


def torchrun(args: Sequence[str], env: Mapping[str, str] | None = None,
             timeout: float = 900) -> subprocess.CompletedProcess:
    """``torchrun --standalone --nproc_per_node=2 ARGS`` with one thread per rank, quiet, this checkout first.

    ``timeout`` is that of a hung launch, not of a slow one: on a 2-core machine at a load of 12, two
    ranks take minutes just to import torch (a limit of 180 s failed there)."""
    full = {**os.environ, "OMP_NUM_THREADS": "1", "HACN_QUIET": "1", **(env or {})}
    full["PYTHONPATH"] = os.pathsep.join([str(REPO), full.get("PYTHONPATH", "")])
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", *args]
    return subprocess.run(cmd, env=full, capture_output=True, text=True, timeout=timeout, cwd=REPO)


class Net(nn.Module):
    def __init__(self, dropout: float = 0.0) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.a = nn.Linear(5, 12)
        self.drop = nn.Dropout(dropout)
        self.b = nn.Linear(12, 3)

    def forward(self, x):
        return self.b(self.drop(F.relu(self.a(x))))


def problem():
    """Data and configuration shared with the single-process reference.

    70 samples, global batch 8 with accumulate=2: 5 steps per epoch, the last one
    has 6 samples (micro batches of 6 and 0 -> uneven shards and loss weights).
    """
    g = torch.Generator().manual_seed(1)
    X = torch.randn(70, 5, generator=g)
    y = X[:, :3].argmax(1)
    val = (X[:21], y[:21])
    cfg = TrainConfig(epochs=3, batch_size=8, accumulate=2, lr=0.05, optimizer="sgd", momentum=0.9,
                      schedule="cosine", warmup_epochs=1, grad_clip=5.0, checkpoint_every_steps=2, seed=4)
    return (X, y), val, cfg


class KillAt(Callback):
    def __init__(self, at: int) -> None:
        self.at = at

    def on_step_end(self, state):
        if state.step == self.at:
            raise RuntimeError("killed")


def main(out: Path) -> None:
    import torch.distributed as dist

    from hacn_core.__main__ import main as cli

    code = cli([arg.format(out=out) for arg in CLI_ARGS])
    if code != 0:
        raise SystemExit(code)
    saves = []
    real_save = checkpoint.save_checkpoint

    def counting_save(obj, path):
        saves.append(str(path))
        return real_save(obj, path)

    checkpoint.save_checkpoint = counting_save  # every checkpoint write goes through it
    train, val, cfg = problem()
    model = Net()
    res = fit(model, train, cfg, val=val, progress=False)
    rank = dist.get_rank()
    # kill + resume with dropout (per-rank random streams must come back)
    ck = out / "ck"
    straight = Net(dropout=0.2)
    fit(straight, train, cfg, val=val, progress=False)
    try:
        fit(Net(dropout=0.2), train, cfg, val=val, callbacks=[KillAt(3)], checkpoint_dir=ck, progress=False)
    except RuntimeError as err:
        assert "killed" in str(err)
    resumed = Net(dropout=0.2)
    with torch.no_grad():
        for p in resumed.parameters():
            p.add_(1.0)  # a different start: the checkpoint must restore it
    fit(resumed, train, cfg, val=val, checkpoint_dir=ck, progress=False)
    # a NaN on rank 1 only (its 3rd micro batch = step 1): every rank must stop at that step, none may hang
    calls = []

    def nan_on_rank1(output, target):
        calls.append(1)
        loss = F.cross_entropy(output, target)
        return loss * float("nan") if rank == 1 and len(calls) == 3 else loss

    try:
        fit(Net(), train, cfg, loss_fn=nan_on_rank1, checkpoint_dir=out / "nan", progress=False)
        nan_step = -1
    except training.NonFiniteLossError as err:
        nan_step = err.step
    (out / f"nan_rank{rank}.txt").write_text(str(nan_step))
    (out / f"saves_rank{rank}.txt").write_text(str(len(saves)))
    if rank == 0:
        torch.save({
            "params": model.state_dict(), "curves": res.curves, "metrics": res.metrics, "world": dist.get_world_size(),
            "straight": straight.state_dict(), "resumed": resumed.state_dict(),
        }, out / "rank0.pt")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
