"""A configuration is never trained by two processes at once (engine.results.run_lock)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from hacn_core.engine.registry import Experiment, run_experiment
from hacn_core.engine.results import LOCK_NAME, ResultsStore, RunInProgressError, config_hash, run_lock, run_or_load


def _train(config, context):
    return {"metrics": {"value": float(config["x"])}}


def test_second_holder_is_refused_and_lock_released(tmp_path):
    with run_lock(tmp_path, "run A") as lock:
        assert json.loads(lock.read_text())["pid"] == os.getpid()
        with pytest.raises(RunInProgressError, match="run A is being trained by pid"):
            with run_lock(tmp_path, "run A"):
                pass
    assert not (tmp_path / LOCK_NAME).exists()
    with run_lock(tmp_path, "run A"):  # free again
        pass


def test_lock_released_when_training_raises(tmp_path):
    with pytest.raises(KeyError):
        with run_lock(tmp_path, "run A"):
            raise KeyError("boom")
    assert not (tmp_path / LOCK_NAME).exists()


def test_stale_lock_of_a_dead_process_is_taken_over(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    pid = int(dead.stdout)
    import platform
    (tmp_path / LOCK_NAME).write_text(json.dumps({"host": platform.node(), "pid": pid, "since": "x"}))
    with run_lock(tmp_path, "run A") as lock:
        assert json.loads(lock.read_text())["pid"] == os.getpid()
    (tmp_path / LOCK_NAME).write_text("{not json")  # a writer died mid-write: stale too
    with run_lock(tmp_path, "run A"):
        pass


def test_run_or_load_refuses_a_held_configuration_and_run_experiment_skips_it(tmp_path, capsys):
    store = ResultsStore(tmp_path)
    held = {"x": 1}
    with run_lock(store.checkpoint_dir("exp", held), "held"):
        with pytest.raises(RunInProgressError):
            run_or_load("exp", held, _train, store=store, progress=False)
        experiment = Experiment(id="exp", title="t", train=_train, configs={"book": lambda: [{"x": 1}, {"x": 2}]}, setting={"book": "t"})
        results = run_experiment(experiment, "book", store=store, progress=False, skip_running=True)
    assert [r.config["x"] for r in results] == [2]  # the held one was skipped, the free one trained
    assert "skipped" in capsys.readouterr().err
    assert store.load("exp", held) is None
    assert run_or_load("exp", held, _train, store=store, progress=False).metrics["value"] == 1.0  # lock gone
    assert not store.checkpoint_dir("exp", held).exists()  # checkpoints and lock removed with the stored result
    assert config_hash(held)


def test_noise_accuracy_is_clean_accuracy_at_zero_and_deterministic():
    import torch
    from torch import nn

    from hacn_core.hacn.studies.mixer import noise_accuracy

    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(4, 3))
    x, y = torch.randn(50, 1, 2, 2), torch.randint(0, 3, (50,))
    clean = float((model(x).argmax(-1) == y).float().mean())
    assert noise_accuracy(model, x, y, 0.0, batch=7) == pytest.approx(clean)
    a, b = noise_accuracy(model, x, y, 0.5), noise_accuracy(model, x, y, 0.5, batch=13)
    assert a == b  # the same noise whatever the batch: one generator drawn in order
    gen = torch.Generator().manual_seed(1234)
    noisy = x + 0.5 * torch.randn(x.shape, generator=gen)
    assert a == pytest.approx(float((model(noisy).argmax(-1) == y).float().mean()))


def _sleeper() -> subprocess.Popen:
    """A live process that is not this one (its pid stands for one reused after a restart)."""
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])


def test_a_lock_whose_pid_now_belongs_to_another_process_is_stale(tmp_path):
    """After a restart pids are reused: a lock naming a live pid whose process started at another time
    (or, in a lock written before locks recorded start times, after the lock) is taken over."""
    import datetime as dt
    import platform

    from hacn_core.engine.processes import process_start_time

    other = _sleeper()
    try:
        started = process_start_time(other.pid)
        assert started is not None and abs(started - time.time()) < 120
        lock = tmp_path / LOCK_NAME
        held = {"host": platform.node(), "pid": other.pid, "since": "2026-01-01T00:00:00+00:00", "started": started}
        lock.write_text(json.dumps(held))  # the same process: still held
        with pytest.raises(RunInProgressError, match=rf"pid {other.pid} .*lock taken .* ago"):
            with run_lock(tmp_path, "run A"):
                pass
        lock.write_text(json.dumps(held | {"started": started - 3600}))  # that pid was another process then
        with run_lock(tmp_path, "run A") as taken:
            record = json.loads(taken.read_text())
            assert record["pid"] == os.getpid() and record["started"] == process_start_time(os.getpid())
        an_hour_ago = (dt.datetime.now(dt.timezone.utc) - dt.timedelta(hours=1)).isoformat(timespec="seconds")
        lock.write_text(json.dumps({"host": platform.node(), "pid": other.pid, "since": an_hour_ago}))  # old format
        with run_lock(tmp_path, "run A"):  # the process behind that pid began after the lock: not its owner
            pass
    finally:
        other.kill()
        other.wait()


def test_status_shows_a_live_lock_with_its_age_and_a_reused_pid_as_paused(tmp_path):
    import datetime as dt
    import platform

    import torch

    from hacn_core.engine.progress import progress_lines, study_progress
    from hacn_core.engine.processes import process_start_time

    experiment = Experiment(id="exp", title="t", train=_train, configs={"book": lambda: [{"x": 1}]},
                            setting={"book": "t"})
    store = ResultsStore(tmp_path)
    folder = store.checkpoint_dir("exp", {"x": 1})
    folder.mkdir(parents=True)
    position = {"epoch": 1, "step_in_epoch": 0, "global_step": 40, "finished": False, "total_steps": 100}
    torch.save({"position": position, "wall_time_s": 20.0}, folder / "last.pt")
    other = _sleeper()
    try:
        since = (dt.datetime.now(dt.timezone.utc) - dt.timedelta(minutes=12)).isoformat(timespec="seconds")
        owner = {"host": platform.node(), "pid": other.pid, "since": since, "started": process_start_time(other.pid)}
        (folder / LOCK_NAME).write_text(json.dumps(owner))
        (line,) = progress_lines(study_progress(experiment, "book", store))[1:]
        assert line.startswith("  training") and line.endswith(f"pid {other.pid} on {platform.node()}, "
                                                               "lock taken 12 min ago")
        (folder / LOCK_NAME).write_text(json.dumps(owner | {"started": owner["started"] - 86400}))  # reused pid
        (line,) = progress_lines(study_progress(experiment, "book", store))[1:]
        assert line.startswith("  paused") and "pid" not in line
    finally:
        other.kill()
        other.wait()


def test_the_command_exits_75_when_another_process_holds_a_run(tmp_path, monkeypatch, capsys):
    """A script can tell "skipped: another process is training it" (75, EX_TEMPFAIL) from "all stored" (0)."""
    from hacn_core import catalog
    from hacn_core.__main__ import main

    experiment = Experiment(id="exp-held", title="t", train=_train, configs={"book": lambda: [{"x": 1}, {"x": 2}]},
                            setting={"book": "t"})
    monkeypatch.setitem(catalog.EXPERIMENTS, "exp-held", experiment)
    command = ["run", "exp-held", "--profile", "book", "--results", str(tmp_path)]
    with run_lock(ResultsStore(tmp_path).checkpoint_dir("exp-held", {"x": 1}), "held"):
        assert main(command) == 75
    out, err = capsys.readouterr()
    assert err.startswith("skipped: exp-held (config hash") and len(out.splitlines()) == 1  # the other one stored
    assert main(command) == 0  # the lock is gone: trained now, every run stored


def test_another_hosts_lock_holds_while_its_lease_lasts_and_the_owner_renews_it(tmp_path, monkeypatch):
    """Another host's processes cannot be seen: its lock is held while touched within its lease (15 min)."""
    from hacn_core.engine import processes

    lock = tmp_path / LOCK_NAME
    record = {"host": "elsewhere", "pid": 42, "since": "2026-01-01T00:00:00+00:00", "lease_s": 900.0}
    lock.write_text(json.dumps(record))
    with pytest.raises(RunInProgressError, match="pid 42 on elsewhere"):  # touched just now
        with run_lock(tmp_path, "run A"):
            pass
    os.utime(lock, (time.time() - 3600, time.time() - 3600))  # an hour without a heartbeat: that host is gone
    with run_lock(tmp_path, "run A"):
        pass
    lock.write_text(json.dumps({k: v for k, v in record.items() if k != "lease_s"}))  # written before leases
    os.utime(lock, (time.time() - 3600, time.time() - 3600))
    with pytest.raises(RunInProgressError):
        with run_lock(tmp_path, "run A"):
            pass
    lock.unlink()
    monkeypatch.setattr(processes, "LOCK_HEARTBEAT_S", 0.05)
    with run_lock(tmp_path, "run A") as held:
        os.utime(held, (time.time() - 3600, time.time() - 3600))
        time.sleep(0.5)
        assert time.time() - held.stat().st_mtime < 5  # renewed by the owner's heartbeat
