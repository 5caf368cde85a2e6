"""``python -m hacn_core status``: a study's runs as stored, training, paused or not started."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import torch

from hacn_core.__main__ import main
from hacn_core.engine.checkpoint import CHECKPOINT_NAME
from hacn_core.engine.progress import progress_lines, study_progress, varying_keys
from hacn_core.engine.results import (
    LOCK_NAME,
    ResultsStore,
    RunResult,
    config_hash,
    filed_config,
    planned_execution,
    result_checksum,
)

CONFIGS = [{"rule": r, "seed": s, "epochs": 3, "mu": None if r == "resnet" else 0.25}
           for r in ("resnet", "hacn") for s in (0, 1)]


def _dead_pid() -> int:
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(proc.stdout)  # that process has exited


def _checkpoint(folder: Path, step: int, epoch: int, pid: int | None, **saved) -> None:
    folder.mkdir(parents=True)
    position = {"epoch": epoch, "step_in_epoch": 0, "global_step": step, "finished": False}
    torch.save({"position": position | saved.pop("position", {}), **saved}, folder / CHECKPOINT_NAME)
    if pid is not None:
        (folder / LOCK_NAME).write_text(json.dumps({"host": os.uname().nodename, "pid": pid, "since": "x"}))


def test_varying_keys_are_the_ones_that_tell_runs_apart():
    assert varying_keys(CONFIGS) == ["rule", "seed", "mu"]
    assert varying_keys(CONFIGS[:1]) == []


def test_each_state_is_read_from_the_store(tmp_path):
    experiment = SimpleNamespace(id="toy", runs=lambda profile: [dict(c) for c in CONFIGS])
    store = ResultsStore(tmp_path)
    filed = [filed_config(c, planned_execution(None)) for c in CONFIGS]
    store.save(RunResult("toy", filed[0], config_hash(filed[0]), 0, {"acc": 1.0},
                         provenance={"wall_time_s": 1500.0}, checksum=result_checksum({"acc": 1.0}, {})))
    # a live owner: training; 1,200 of 1,500 steps in 600 s, so 150 s left at its pace
    _checkpoint(store.checkpoint_dir("toy", filed[1]), 1200, 4, os.getpid(), position={"total_steps": 1500},
                wall_time_s=600.0)
    # its owner died: paused. Written before positions held total_steps: 3 epochs x 250 steps, read off
    # the position (epoch 1, 50 steps into it) and the TrainConfig
    _checkpoint(store.checkpoint_dir("toy", filed[2]), 300, 1, _dead_pid(), position={"step_in_epoch": 50},
                config={"epochs": 3})
    _checkpoint(store.checkpoint_dir("toy", {"stack": ["a", "b"]}), 50, 0, None)  # a stacked engine's folder

    progress = study_progress(experiment, "book", store)
    assert [p.state for p in progress] == ["stored", "training", "paused", "not started", "paused"]
    assert [p.config_hash for p in progress[:4]] == [config_hash(f) for f in filed]
    assert (progress[1].global_step, progress[1].epoch) == (1200, 4)
    assert progress[1].owner == f"pid {os.getpid()} on {os.uname().nodename}, lock age unknown"  # since: "x"
    assert (progress[2].global_step, progress[2].owner, progress[2].total_steps) == (300, "", 750)
    assert progress[1].seconds_left == 150.0 and progress[2].seconds_left is None  # no wall time stored
    assert progress[0].wall_time_s == 1500.0
    assert progress[0].label == "rule=resnet, seed=0"  # a None value is left out
    assert progress[4].label == "stack or other run" and progress[4].global_step == 50

    now = progress[1].checkpoint_time + dt.timedelta(minutes=7)
    lines = progress_lines(progress, now=now)
    assert lines[0] == ("1 of 4 runs stored; 1 training, 1 paused, 1 not started; "
                        "a stored run took 25 min (median wall time)")
    assert "at step 1,200 of 1,500 (epoch 4), checkpoint 7 min ago, about 2 min left at its pace so far, pid" \
        in lines[1]
    assert "at step 300 of 750 (epoch 1), checkpoint" in lines[2] and "left" not in lines[2]
    assert len(lines) == 5  # the summary, then every run not stored (the stack included)


def test_cli_status_of_an_unknown_experiment_or_profile_says_what_exists(capsys):
    assert main(["status", "no-such-study"]) == 2
    assert "known: " in capsys.readouterr().err
    assert main(["status", "hacn-mixer-long", "--profile", "huge"]) == 2
    assert "valid profiles: smoke, book, paper" in capsys.readouterr().err


def test_cli_status_counts_a_fresh_store(tmp_path, capsys):
    from hacn_core.catalog import get

    n = len(get("hacn-mixer-long").runs("book"))
    assert main(["status", "hacn-mixer-long", "--profile", "book", "--results", str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1] == f"0 of {n} runs stored; 0 training, 0 paused, {n} not started"


def test_cli_output_cut_short_by_its_reader_ends_without_a_traceback():
    # a command printing far more than a pipe holds (64 KB), read by `head -n 1`, which then exits
    repo = Path(__file__).resolve().parents[1]
    script = ("import sys; from hacn_core.__main__ import _exits_cleanly\n"
              "def command(argv):\n"
              "    for i in range(100_000): print(f'line {i} of a long listing')\n"
              "    return 0\n"
              "sys.exit(_exits_cleanly(command)(None))\n")
    proc = subprocess.run(f"'{sys.executable}' -c \"$SCRIPT\" | head -n 1; echo \"${{PIPESTATUS[0]}}\"",
                          shell=True, executable="/bin/bash", cwd=repo, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(repo), "SCRIPT": script})
    assert proc.stdout.splitlines() == ["line 0 of a long listing", "141"]  # 128 + SIGPIPE, as Unix tools
    assert proc.stderr == ""
