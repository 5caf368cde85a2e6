"""Two processes under torchrun on CPU (gloo): DDP through ``fit`` against one process, and the ``run``
command under torchrun storing one result.

One torchrun launch (``ranks``: tests/_ddp_worker.py in two ranks) serves every test here: a launch costs
three processes that import torch (the launcher and two ranks), and the ranks first run the command
line as ``torchrun --nproc_per_node=2 -m hacn_core run ...`` does, then the DDP checks.
"""

from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from hacn_core.awnn.studies import tabular
from hacn_core.engine import results as R
from hacn_core.engine.results import ResultsStore, config_hash, run_or_load
from hacn_core.engine.training import fit

HERE = Path(__file__).parent
spec = importlib.util.spec_from_file_location("_ddp_worker", HERE / "_ddp_worker.py")
worker = importlib.util.module_from_spec(spec)
spec.loader.exec_module(worker)

pytestmark = pytest.mark.skipif(not dist.is_available(), reason="torch.distributed is not available")


@pytest.fixture(scope="module")
def ranks(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    """``torchrun --standalone --nproc_per_node=2 tests/_ddp_worker.py OUT``: its OUT folder and the
    finished launch (both ranks ended with 0)."""
    out = tmp_path_factory.mktemp("ranks")
    proc = worker.torchrun([str(HERE / "_ddp_worker.py"), str(out)])
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return out, proc


def test_two_process_ddp_matches_one_process(ranks):
    out, _ = ranks
    got = torch.load(out / "rank0.pt", weights_only=True)
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
    assert [int((out / f"nan_rank{r}.txt").read_text()) for r in (0, 1)] == [1, 1]
    assert (out / "nan" / "nonfinite.pt").exists()
    # only rank 0 writes checkpoints
    assert int((out / "saves_rank0.txt").read_text()) > 0
    assert int((out / "saves_rank1.txt").read_text()) == 0


def test_two_torchrun_ranks_store_one_self_consistent_result(ranks, tmp_path):
    """The CLI under torchrun (``run awnn-tabular-fixed --profile smoke --where dataset=DoubleMoon seed=0``,
    the command's ``main`` in each rank, first thing: _ddp_worker.CLI_ARGS): the ranks train one model
    through fit; rank 0 alone writes, and prints, the result. (No stored result misstates how it was made:
    torchrun's world size is part of the filed configuration; see also tests/test_store_safety.py.)"""
    out, proc = ranks
    store = out / "store"
    files = sorted(store.glob("*/*.json"))
    assert len(files) == 1
    stored = ResultsStore(store).read(files[0])  # checksum verified
    assert stored.config["world_size"] == 2 and "threads" not in stored.config
    assert stored.provenance["world_size"] == 2 and stored.provenance["backend"] == "gloo"
    assert "rank_dependent" not in stored.provenance
    assert stored.metrics["final_test_acc"] == stored.curves["test_acc"][-1]
    best = stored.metrics["best_epoch"]
    assert stored.metrics["test_acc"] == stored.curves["test_acc"][stored.curves["record_epoch"].index(best)]
    assert proc.stdout.count(f"{stored.config_hash} seed=0") == 1  # printed once, by rank 0
    assert not any(p.is_file() for p in (store / ".checkpoints").rglob("*"))

    single = ResultsStore(tmp_path / "single")  # the same configuration in one process
    config = R.study_config(stored.config)
    one = run_or_load(tabular.EXPERIMENT_ID, config, tabular.train_fixed_mlp, store=single, progress=False)
    assert one.config_hash == config_hash(config) != stored.config_hash
    assert one.metrics == stored.metrics  # fit's sharded gradient is the one-process gradient
    assert one.curves["train_loss"] == pytest.approx(stored.curves["train_loss"], rel=1e-5)
