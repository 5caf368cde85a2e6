"""No stored result misstates how it was made, and no training is lost to the store.

Folders are checked before training; a result that cannot be written waits as
``pending.json`` and is stored by the next run without training; the torch
thread count and torchrun's world size are part of the filed configuration;
smoke runs never reach the committed ``results/``; stray JSON files are skipped;
a checksum catches edited numbers. The CLI under torchrun (two ranks, one stored result) is checked in
tests/test_ddp.py, on that file's one torchrun launch.

A process a test needs of its own (a writer killed midway, a run in a private mount namespace) is a
fork of this one: a second interpreter would cost some 5 CPU-seconds of imports (torch) each.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from hacn_core import catalog
from hacn_core.__main__ import main
from hacn_core.engine import results as R
from hacn_core.engine.checkpoint import save_checkpoint
from hacn_core.engine.registry import Experiment, Link, run_experiment
from hacn_core.engine.results import (
    CorruptResultError,
    DistributedRunError,
    PendingResultError,
    ResultError,
    ResultsStore,
    StoreNotWritableError,
    check_folder,
    config_hash,
    result_checksum,
    run_or_load,
    store_trained,
)
from hacn_core.ledger import ledger_rows

HERE = Path(__file__).parent

CONFIG = {"dataset": "Spiral", "width": 16, "seed": 2}


def _recording_train(calls):
    """A training function that records its calls, the thread count it ran with, and writes a checkpoint."""

    def train(config, context):
        calls.append({"config": dict(config), "threads": torch.get_num_threads()})
        context.checkpoint_dir.mkdir(parents=True, exist_ok=True)
        (context.checkpoint_dir / "last.pt").write_bytes(b"trained state")
        return {"metrics": {"test_acc": 0.75 + config["seed"] / 100}, "curves": {"test_acc": [0.5, 0.75]}}

    return train


def _fail_if_called(config, context):
    raise AssertionError("trained although a result was stored or pending")


# ----------------------------------------------------------------------------- 1. folders checked before training


def test_check_folder_refuses_a_file_in_place_of_the_folder(tmp_path):
    (tmp_path / "store").write_text("not a folder")
    with pytest.raises(StoreNotWritableError, match=f"results folder {tmp_path / 'store' / 'exp'} is not writable"):
        check_folder(tmp_path / "store" / "exp", 1, "results folder")


def test_check_folder_refuses_a_full_disk_and_leaves_no_folder(tmp_path, monkeypatch):
    monkeypatch.setattr(R.shutil, "disk_usage", lambda p: shutil._ntuple_diskusage(10 * 2**20, 10 * 2**20, 2**20))
    with pytest.raises(StoreNotWritableError, match=r"checkpoint folder .*new/ck has 1\.0 MiB free.*16\.0 MiB"):
        check_folder(tmp_path / "new" / "ck", 16 * 2**20, "checkpoint folder")
    assert not (tmp_path / "new").exists()  # the folders made for the probe are gone again
    check_folder(tmp_path / "new" / "ck", 2**19, "checkpoint folder")  # room enough: passes


def test_checkpoint_estimate_is_twice_the_largest_existing_checkpoint(tmp_path):
    store = ResultsStore(tmp_path)
    assert R.checkpoint_estimate(store, "exp-a") == R.CHECKPOINT_ESTIMATE_BYTES
    folder = store.checkpoint_dir("exp-a", {"seed": 9})
    folder.mkdir(parents=True)
    (folder / "last.pt").write_bytes(b"x" * 3000)
    assert R.checkpoint_estimate(store, "exp-a") == 6000


def test_unwritable_results_or_checkpoint_folder_is_refused_before_training(tmp_path, monkeypatch):
    calls = []
    (tmp_path / "exp-a").write_text("a file where the experiment's folder should be")
    with pytest.raises(StoreNotWritableError, match="results folder .*exp-a.*nothing was trained"):
        run_or_load("exp-a", CONFIG, _recording_train(calls), store=ResultsStore(tmp_path))
    (tmp_path / "exp-b").mkdir()
    (tmp_path / ".checkpoints").write_text("a file where the checkpoints go")
    with pytest.raises(StoreNotWritableError, match=r"checkpoint folder .*\.checkpoints/exp-b"):
        run_or_load("exp-b", CONFIG, _recording_train(calls), store=ResultsStore(tmp_path))
    (tmp_path / ".checkpoints").unlink()
    monkeypatch.setattr(R.shutil, "disk_usage", lambda p: shutil._ntuple_diskusage(2**30, 2**30, 2**20))
    with pytest.raises(StoreNotWritableError, match="1.0 MiB free"):
        run_or_load("exp-b", CONFIG, _recording_train(calls), store=ResultsStore(tmp_path))
    assert calls == []


CLONE_NEWNS = 0x00020000  # <sched.h>: unshare(2)'s flag for a mount namespace of one's own


def _in_a_child(action) -> str:
    """``action()`` in a forked child of this process; its return value, or ``"<ExceptionType>: message"``.
    The child exits at once after it (no pytest teardown), whatever it did to itself (its user, its mounts)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        try:
            os.close(read)
            try:
                out = str(action())
            except BaseException as err:  # noqa: BLE001
                out = f"{type(err).__name__}: {err}"
            os.write(write, out.encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        out = pipe.read()
    os.waitpid(pid, 0)
    return out


def _read_only_bind(folder: Path) -> str | None:
    """What ``unshare --mount sh -c "mount --bind -o ro FOLDER FOLDER"`` does, to this process (a forked
    child): a private mount namespace of its own, ``folder`` bound read-only in it. None, or why not."""
    libc = ctypes.CDLL(None, use_errno=True)
    if not hasattr(libc, "unshare"):
        return "no unshare(2) here"
    if libc.unshare(CLONE_NEWNS) != 0:
        return f"unshare: {os.strerror(ctypes.get_errno())}"
    for cmd in (["mount", "--make-rprivate", "/"], ["mount", "--bind", "-o", "ro", str(folder), str(folder)]):
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            return f"{' '.join(cmd)}: {proc.stderr.strip()[-200:]}"
    return None


def test_read_only_store_is_refused_before_training(tmp_path):
    """A real read-only folder: chmod for a normal user; for root (whom chmod does not stop) a
    read-only bind mount in a private mount namespace (a forked child's, which tries the run)."""
    store = tmp_path / "store"
    store.mkdir()

    def train(config, context):
        raise AssertionError("trained")

    def run() -> str:
        if os.access(store, os.W_OK):  # root
            why = _read_only_bind(store)
            if why is not None:
                return f"NO MOUNT: {why}"
        try:
            run_or_load("exp-a", {"seed": 0}, train, store=ResultsStore(store))
        except StoreNotWritableError as err:
            return f"REFUSED: {err}"
        return "not refused"

    store.chmod(0o555)
    try:
        if os.access(store, os.W_OK) and not shutil.which("mount"):
            pytest.skip("running as root without mount: no way to make a folder read-only")
        out = _in_a_child(run)
    finally:
        store.chmod(0o755)
    if out.startswith("NO MOUNT: "):
        pytest.skip(f"no read-only bind mount here: {out}")
    assert out.startswith("REFUSED: "), out
    assert f"results folder {store / 'exp-a'} is not writable" in out
    assert "Read-only file system" in out or "Permission denied" in out
    assert list(store.iterdir()) == []


# ----------------------------------------------------------------------------- 1. a failed final write


def test_a_failed_final_write_keeps_the_result_pending_and_the_rerun_stores_it(tmp_path):
    store, calls = ResultsStore(tmp_path), []
    folder = tmp_path / "exp-a"
    train = _recording_train(calls)

    def train_then_lose_the_folder(config, context):
        out = train(config, context)
        folder.write_text("the results folder became a file while training")  # e.g. a full or unmounted disk
        return out

    with pytest.raises(PendingResultError, match="run the same command again") as info:
        run_or_load("exp-a", CONFIG, train_then_lose_the_folder, store=store, profile="book")
    pending = store.pending_path("exp-a", CONFIG)
    assert info.value.pending == pending and pending.is_file() and str(pending) in str(info.value)
    assert (pending.parent / "last.pt").read_bytes() == b"trained state"  # the checkpoint is kept
    assert len(calls) == 1

    with pytest.raises(PendingResultError, match="could still not be stored"):  # folder still broken
        run_or_load("exp-a", CONFIG, _fail_if_called, store=store)
    folder.unlink()
    result = run_or_load("exp-a", CONFIG, _fail_if_called, store=store)  # stored without training
    assert result.metrics == {"test_acc": 0.77} and result.profile == "book"
    assert store.load("exp-a", CONFIG).metrics == result.metrics
    assert not pending.parent.exists()  # the stored result supersedes the checkpoints
    assert run_or_load("exp-a", CONFIG, _fail_if_called, store=store).metrics == result.metrics


def test_an_edited_pending_result_is_refused(tmp_path, monkeypatch):
    store = ResultsStore(tmp_path)
    monkeypatch.setattr(ResultsStore, "save", lambda self, result: (_ for _ in ()).throw(OSError(28, "No space")))
    with pytest.raises(PendingResultError, match="No space"):
        run_or_load("exp-a", CONFIG, _recording_train([]), store=store)
    monkeypatch.undo()
    pending = store.pending_path("exp-a", CONFIG)
    data = json.loads(pending.read_text())
    data["metrics"]["test_acc"] = 0.99
    pending.write_text(json.dumps(data))
    with pytest.raises(CorruptResultError, match="pending.json: its metrics or curves do not match"):
        run_or_load("exp-a", CONFIG, _fail_if_called, store=store)


# ----------------------------------------------------------------------------- 2. threads


def test_threads_are_pinned_recorded_and_part_of_the_hash(tmp_path, monkeypatch):
    store, calls = ResultsStore(tmp_path), []
    before = torch.get_num_threads()
    one = run_or_load("exp-a", CONFIG, _recording_train(calls), store=store)
    two = run_or_load("exp-a", CONFIG, _recording_train(calls), store=store, threads=2)
    assert [c["threads"] for c in calls] == [1, 2]  # each trained with its count pinned
    assert torch.get_num_threads() == before  # and the previous count is back
    assert all(c["config"] == CONFIG for c in calls)  # the study's configuration, without the key
    assert one.config == CONFIG and one.config_hash == config_hash(CONFIG)  # one thread: the hash of old
    assert two.config == {**CONFIG, "threads": 2} and two.config_hash != one.config_hash
    assert one.provenance["threads"] == 1 and two.provenance["threads"] == 2
    assert "2 torch threads" in two.provenance["device"] and two.provenance["world_size"] == 1
    assert R.study_config(two.config) == CONFIG
    monkeypatch.setenv("HACN_THREADS", "2")  # the environment variable asks for the same
    assert run_or_load("exp-a", CONFIG, _fail_if_called, store=store).config_hash == two.config_hash
    monkeypatch.setenv("HACN_THREADS", "two")
    with pytest.raises(ValueError, match=r"\$HACN_THREADS='two' is not an integer"):
        run_or_load("exp-a", CONFIG, _fail_if_called, store=store)
    with pytest.raises(ValueError, match="threads=0 is not allowed; allowed: a positive integer"):
        run_or_load("exp-a", CONFIG, _fail_if_called, store=store, threads=0)


def test_store_trained_files_a_run_under_the_threads_it_ran_with(tmp_path):
    store, before = ResultsStore(tmp_path), torch.get_num_threads()
    torch.set_num_threads(3)
    try:
        stored = store_trained("exp-a", CONFIG, {"metrics": {"acc": 1.0}}, store=store, profile=None,
                               version=R.code_version(), wall_s=0.0)
    finally:
        torch.set_num_threads(before)
    assert stored.config["threads"] == 3 and stored.provenance["threads"] == 3


def test_a_configuration_key_named_like_an_execution_key_is_refused(tmp_path):
    with pytest.raises(ValueError, match=r"\['threads'\] are reserved"):
        run_or_load("exp-a", {**CONFIG, "threads": 4}, _fail_if_called, store=ResultsStore(tmp_path))


def test_the_cli_takes_threads(tmp_path, monkeypatch, capsys):
    calls = []
    experiment = Experiment(id="toy-store", title="toy", train=_recording_train(calls),
                            configs={"book": lambda: [CONFIG]}, setting={"book": "toy"})
    monkeypatch.setitem(catalog.EXPERIMENTS, experiment.id, experiment)
    assert main(["run", "toy-store", "--profile", "book", "--results", str(tmp_path), "--threads", "2"]) == 0
    assert calls[0]["threads"] == 2
    assert capsys.readouterr().out.startswith(config_hash({**CONFIG, "threads": 2}))


# ----------------------------------------------------------------------------- 3. distributed


# the CLI under torchrun, one stored result of two ranks: tests/test_ddp.py


def test_what_ranks_cannot_share_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")
    store = ResultsStore(tmp_path)
    with pytest.raises(DistributedRunError, match="exact-checks trains no model through"):
        run_experiment(catalog.get("exact-checks"), "smoke", store=store)
    with pytest.raises(DistributedRunError, match="stacked engine trains in one process"):
        run_experiment(catalog.get("gates-mnist"), "smoke", store=store, stacked=True)
    fixed_shape = Experiment(id="toy-awnn", title="toy", train=_fail_if_called, configs={"smoke": lambda: [CONFIG]},
                             setting={"smoke": "toy"}, plan=lambda c: [], distributed=False)
    with pytest.raises(DistributedRunError, match="change shape while training"):
        run_experiment(fixed_shape, "smoke", store=store)
    # a train function that never joined a process group: every rank trained alone; nothing is stored
    assert not (dist.is_available() and dist.is_initialized())
    with pytest.raises(DistributedRunError, match="does not train through hacn_core.engine.training.fit"):
        run_or_load("exp-a", CONFIG, _recording_train([]), store=store)
    assert list(store.iter_results()) == []


def test_the_ledger_counts_a_setting_once_whatever_threads_or_ranks_ran_it(tmp_path, monkeypatch):
    item = "awnn/table1/spiral-fixed-accuracy"  # paper: 99.5
    experiment = Experiment(
        id="toy-ledger", title="toy", train=lambda c, ctx: {"metrics": {"test_acc": c["acc"]}},
        configs={"paper": lambda: [{"acc": 0.995, "seed": 0}, {"acc": 0.993, "seed": 1}]},
        setting={"paper": "the paper's"}, links=(Link(item, "test_acc", scale=100.0, tolerance=0.3),))
    monkeypatch.setitem(catalog.EXPERIMENTS, experiment.id, experiment)
    store = ResultsStore(tmp_path)
    run_experiment(experiment, "paper", store=store, where={"seed": 0}, threads=2)
    row = next(r for r in ledger_rows(store) if r.item.id == item)
    assert row.status == "reproduced" and row.values == (99.5,)  # the paper's setting on two threads
    assert row.setting == "paper setting (the paper's); 1 of its 2 runs stored"
    run_experiment(experiment, "paper", store=store)  # both seeds on one thread
    row = next(r for r in ledger_rows(store) if r.item.id == item)
    assert row.seeds == (0, 1) and row.values == (99.5, 99.3)  # seed 0 counted once


# ----------------------------------------------------------------------------- 4. smoke runs


def test_smoke_runs_never_write_into_the_committed_store(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("HACN_RESULTS")
    monkeypatch.setattr(R, "SMOKE_STORE", tmp_path / "smoke")
    assert R.default_store("smoke").root == tmp_path / "smoke"
    assert R.default_store("book").root == R.COMMITTED_STORE
    calls = []
    with pytest.raises(ResultError, match="smoke runs are never stored in the committed"):
        run_or_load("exp-a", CONFIG, _recording_train(calls), store=ResultsStore(R.COMMITTED_STORE), profile="smoke")
    assert calls == []
    experiment = Experiment(id="toy-store", title="toy", train=_recording_train(calls),
                            configs={"smoke": lambda: [CONFIG]}, setting={"smoke": "toy"})
    monkeypatch.setitem(catalog.EXPERIMENTS, experiment.id, experiment)
    assert main(["run", "toy-store", "--profile", "smoke"]) == 0
    assert f"smoke profile: results go to {tmp_path / 'smoke'}" in capsys.readouterr().out
    assert [p.name for p in (tmp_path / "smoke" / "toy-store").iterdir()] == [f"{config_hash(CONFIG)}.json"]
    assert not (R.COMMITTED_STORE / "toy-store").exists()


# ----------------------------------------------------------------------------- 5. stray files


def test_the_ledger_skips_a_stray_json_with_a_warning(tmp_path):
    store = ResultsStore(tmp_path)
    run_or_load("exp-a", CONFIG, _recording_train([]), store=store)
    (tmp_path / "exp-a" / "summary.json").write_text(json.dumps({"mean": 0.75}))
    (tmp_path / "awnn-tabular-fixed").mkdir()
    (tmp_path / "awnn-tabular-fixed" / "notes.json").write_text("my notes, not JSON")
    with pytest.warns(UserWarning, match="summary.json: not a result file"):
        assert [r.experiment for r in store.iter_results("exp-a")] == ["exp-a"]
    with pytest.warns(UserWarning, match="notes.json: not a result file"):
        rows = ledger_rows(store)
    assert all(row.ours is None for row in rows)  # nothing read from the stray files (exact rows need no run)
    (tmp_path / "exp-a" / "0123456789abcdef.json").write_text('{"experiment": ')  # a damaged result still raises
    with pytest.raises(CorruptResultError, match="0123456789abcdef.json: cannot be read"):
        list(store.iter_results("exp-a"))


# ----------------------------------------------------------------------------- 6. checksums


@pytest.mark.parametrize("part", ["metrics", "curves"])
def test_an_edited_number_is_reported_as_corrupt(tmp_path, part):
    store = ResultsStore(tmp_path)
    stored = run_or_load("exp-a", CONFIG, _recording_train([]), store=store)
    assert stored.checksum == result_checksum(stored.metrics, stored.curves)
    path = store.path_for("exp-a", CONFIG)
    data = json.loads(path.read_text())
    data[part]["test_acc"] = 0.99 if part == "metrics" else [0.5, 0.99]
    path.write_text(json.dumps(data, indent=1))
    with pytest.raises(CorruptResultError, match=f"{path}: its metrics or curves do not match the checksum"):
        run_or_load("exp-a", CONFIG, _fail_if_called, store=store)


def test_a_file_read_again_is_checked_again_only_when_its_bytes_changed(tmp_path, monkeypatch):
    """The ledger reads every result twice: the second read of the same bytes skips the hash and
    checksum checks, but an edit after a read (same path, other bytes) is still caught."""
    store = ResultsStore(tmp_path)
    stored = run_or_load("exp-a", CONFIG, _recording_train([]), store=store)
    path = store.path_for("exp-a", CONFIG)
    calls, real = [], R.result_checksum

    def counted(metrics, curves):
        calls.append(1)
        return real(metrics, curves)

    monkeypatch.setattr(R, "result_checksum", counted)
    monkeypatch.setattr(R, "_VERIFIED_READS", set())  # as in a fresh process
    assert store.read(path).metrics == stored.metrics and store.read(path).metrics == stored.metrics
    assert len(calls) == 1  # checked once
    data = json.loads(path.read_text())
    data["metrics"]["test_acc"] = 0.99
    path.write_text(json.dumps(data, indent=1))
    with pytest.raises(CorruptResultError, match="do not match the checksum"):
        store.read(path)
    with pytest.raises(CorruptResultError, match="do not match the checksum"):  # and every time after
        store.read(path)


def test_files_without_a_checksum_load_with_one_warning(tmp_path, monkeypatch):
    monkeypatch.setattr(R, "_unchecked_warned", False)
    store = ResultsStore(tmp_path)
    for seed in (1, 2):
        run_or_load("exp-a", {**CONFIG, "seed": seed}, _recording_train([]), store=store)
    texts = {}
    for path in sorted((tmp_path / "exp-a").glob("*.json")):  # as stored before checksums existed
        data = json.loads(path.read_text())
        del data["checksum"]
        texts[path] = R._result_text(data)
        path.write_text(texts[path])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert len(list(store.iter_results())) == 2
    assert [str(w.message) for w in caught if "no checksum" in str(w.message)] == [
        f"{sorted(texts)[0]} has no checksum (and maybe other files): its numbers cannot be verified; "
        "add checksums with: python tools/add_checksums.py"]
    # the maintenance command adds the checksum and changes nothing else
    assert R.add_checksums(tmp_path) == sorted(texts)
    for path, old in texts.items():
        new = path.read_text().splitlines()
        added = [line for line in new if line.startswith(' "checksum": "sha256:')]
        assert len(added) == 1 and [line for line in new if line not in added] == old.splitlines()
        store.read(path)
    assert R.add_checksums(tmp_path) == []


def test_every_committed_result_carries_a_checksum_that_verifies():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no stray file, no file without a checksum
        stored = list(ResultsStore(R.COMMITTED_STORE).iter_results())
    assert len(stored) > 500 and all(r.checksum and r.checksum.startswith("sha256:") for r in stored)
    # every committed run was made with one torch thread in one process: it keeps its hash (a CPU's device string
    # carries the thread count; a GPU run records it as "threads")
    assert all(re.search(r", 1 torch threads\)$", r.provenance["device"]) if r.provenance["device"].startswith("cpu")
               else r.provenance["device"].startswith("cuda: ") and r.provenance["threads"] == 1 for r in stored)
    assert not any(set(R.EXECUTION_KEYS) & set(r.config) for r in stored)


def test_the_checksum_survives_a_round_trip_with_nan_and_nested_curves():
    metrics = {"loss": float("nan"), "acc": 0.1 + 0.2, "n": 3}
    curves = {"width/1": [[1, 2], [3]], "loss": [float("inf"), -0.0]}
    text = json.dumps({"metrics": metrics, "curves": curves}, indent=1, allow_nan=True)
    again = json.loads(text)
    assert result_checksum(again["metrics"], again["curves"]) == result_checksum(metrics, curves)
    assert result_checksum({**metrics, "acc": 0.3}, curves) != result_checksum(metrics, curves)


# ----------------------------------------------------------------------------- 7. modes, debris and room


def _as_another_user(action) -> str:
    """``action()`` in a forked child running as user ``nobody`` (a real second user); its return value, or
    ``"<ExceptionType>: message"``."""

    def as_nobody():
        os.setgid(65534)
        os.setuid(65534)
        return action()

    return _in_a_child(as_nobody)


@pytest.fixture
def shared_folder():
    """A folder other users can reach (pytest's own tmp_path is the owner's alone)."""
    folder = Path(tempfile.mkdtemp(prefix="hacn-shared-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as a second user")
def test_results_take_the_umask_mode_and_another_user_reads_them(shared_folder):
    store = ResultsStore(shared_folder)
    old = os.umask(0o022)
    try:
        result = run_or_load("exp-a", CONFIG, _recording_train([]), store=store)
        os.umask(0o077)
        private = run_or_load("exp-a", {**CONFIG, "seed": 3}, _recording_train([]), store=store)
    finally:
        os.umask(old)
    path, private_path = store.path_for("exp-a", result.config), store.path_for("exp-a", private.config)
    assert path.stat().st_mode & 0o777 == 0o644 and private_path.stat().st_mode & 0o777 == 0o600
    assert _as_another_user(lambda: store.read(path).metrics) == str(result.metrics)
    message = _as_another_user(lambda: store.read(private_path))
    assert message.startswith("UnreadableResultError: ") and "chmod a+r" in message and "aside" not in message


def _killed_while_writing(kind: str, path: Path) -> None:
    """A process of its own (a fork of this one) writes ``path``, the final result's write (``result``) or a
    checkpoint's, with ``os.fsync`` made to hang: SIGKILL once it says its temporary file is written."""
    weights = {"w": torch.ones(9)}
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the writer: it never returns (killed, or _exit if it never reached fsync)
        try:
            os.close(read)
            os.fsync = lambda fd: (os.write(write, b"WRITING\n"), time.sleep(120))
            if kind == "result":
                R.write_atomic(path, "x" * 100000)
            else:
                save_checkpoint(weights, path)
        except BaseException as err:  # noqa: BLE001 - said on the pipe, for the assertion below
            os.write(write, f"{type(err).__name__}: {err}\n".encode())
        finally:
            os._exit(1)
    os.close(write)
    try:
        with os.fdopen(read) as pipe:
            assert pipe.readline().strip() == "WRITING"  # the temporary file is written, not yet renamed
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


def test_a_write_killed_midway_leaves_nothing_once_the_run_has_finished(tmp_path):
    """Real SIGKILLs during the final result write and during two checkpoint writes (fsync made to hang):
    the next write removes their temporary files, and the finished run leaves none anywhere."""
    store = ResultsStore(tmp_path)
    target = store.path_for("exp-a", CONFIG)
    checkpoint = store.checkpoint_dir("exp-a", CONFIG) / "last.pt"
    for kind, path in (("result", target), ("checkpoint", checkpoint), ("checkpoint", checkpoint)):
        _killed_while_writing(kind, path)
    # the second checkpoint writer removed the first one's copy before writing its own: one at most
    (left,) = checkpoint.parent.glob(".*.tmp-*")
    assert len(list(target.parent.glob(".*.tmp-*"))) == 1
    assert R.checkpoint_estimate(store, "exp-a") == 2 * left.stat().st_size  # counted as a checkpoint

    def train(config, context):
        save_checkpoint({"w": torch.zeros(3)}, context.checkpoint_dir / "last.pt")
        assert not list(context.checkpoint_dir.glob(".*.tmp-*"))  # the killed writers' copies are gone
        return {"metrics": {"test_acc": 0.5}}

    run_or_load("exp-a", CONFIG, train, store=store)
    assert [p.name for p in target.parent.iterdir()] == [target.name]
    assert not checkpoint.parent.exists()


def test_a_spare_pending_result_is_found_and_removed_once_stored(tmp_path, monkeypatch):
    store = ResultsStore(tmp_path)
    config = {**CONFIG, "seed": os.getpid()}  # the spare copy lives in the shared temporary folder
    spare = R.spare_pending_path("exp-a", config)
    spare.unlink(missing_ok=True)
    blocked = tmp_path / "a file"
    blocked.write_text("")
    monkeypatch.setattr(ResultsStore, "save", lambda self, result: (_ for _ in ()).throw(OSError(28, "No space")))
    monkeypatch.setattr(ResultsStore, "pending_path", lambda self, e, c: blocked / "pending.json")
    with pytest.raises(PendingResultError, match=f"kept in {spare}. Fix the folder and run the same command again"):
        run_or_load("exp-a", config, _recording_train([]), store=store)
    monkeypatch.undo()
    assert spare.is_file()
    result = run_or_load("exp-a", config, _fail_if_called, store=store)  # stored from the spare, no copying by hand
    assert store.load("exp-a", config).metrics == result.metrics and not spare.exists()


FREE_SPACE_RUN = """
import os, platform, sys
from pathlib import Path
from hacn_core.engine import results as R
store = R.ResultsStore(sys.argv[1])
config = {"seed": 1}
mine, other = store.checkpoint_dir("exp", config), store.checkpoint_dir("exp", {"seed": 2})
for folder in (mine, other):
    folder.mkdir(parents=True)
(other / "last.pt").write_bytes(b"c" * 2**19)  # 0.5 MiB: a checkpoint needs about 1 MiB of room
dead = int(sys.argv[2])
(mine / f".last.pt.tmp-{platform.node()}-{dead}-").write_bytes(b"t" * 3 * 2**19)  # left by a killed writer
R.check_can_store(store, "exp", config, "book")
print("ROOM AFTER SWEEP", sorted(p.name for p in mine.iterdir()))
(other / f".last.pt.tmp-{platform.node()}-{os.getpid()}-").write_bytes(b"t" * 3 * 2**18)  # a live writer's
try:
    R.check_can_store(store, "exp", config, "book")
except R.StoreNotWritableError as err:
    print("REFUSED:", err)
"""


@pytest.mark.skipif(not (shutil.which("unshare") and shutil.which("mount") and os.geteuid() == 0),
                    reason="needs root, unshare and mount for a small real file system")
def test_the_free_space_check_counts_temporary_checkpoints_on_a_small_file_system(tmp_path):
    """A real 2.5 MiB tmpfs: a dead writer's 1.5 MiB temporary checkpoint is removed to make room; a live
    writer's 0.75 MiB temporary file counts as a checkpoint (twice it is asked for, 1.5 MiB)."""
    store = tmp_path / "store"
    store.mkdir()
    script = tmp_path / "room.py"
    script.write_text(FREE_SPACE_RUN)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE.parent), os.environ.get("PYTHONPATH", "")])}
    dead_pid = dead.stdout.strip()
    inner = f"mount -t tmpfs -o size=2560k tmpfs {store} && exec {sys.executable} {script} {store} {dead_pid}"
    proc = subprocess.run(["unshare", "--mount", "sh", "-c", inner], env=env, capture_output=True, text=True,
                          timeout=600)
    if proc.returncode != 0 and "mount" in proc.stderr:
        pytest.skip(f"no tmpfs here: {proc.stderr.strip()[-200:]}")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "ROOM AFTER SWEEP []" in proc.stdout
    assert "REFUSED:" in proc.stdout and "this run needs about 1.5 MiB there" in proc.stdout
