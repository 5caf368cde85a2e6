"""The launcher over submitit (``hacn_core.engine.launch``, ``run --launcher {inline,local,slurm}``).

The toy run of ``tests/_interrupt_cli.py`` (256 steps of a small MLP with dropout through ``fit``) is
submitted as jobs: with submitit's ``LocalExecutor`` (processes of this machine) a job killed with
SIGKILL mid-run resumes, when the command runs again, from its checkpoint in a second job, which stores
the same result as an uninterrupted run; a SLURM submission is checked against submitit's own test
double of ``sbatch`` / ``sacct`` (``submitit.slurm.test_slurm.mocked_slurm``), the job executed in this
process as the cluster would. The waiting local launcher (``--max-jobs N --wait``) runs three runs at
most two at a time and returns when all are stored; SIGTERM to it reaches its job, which stops, and
nothing more is submitted; with ``-m extended``, the job is a training whose trainer leaves a
checkpoint the run resumes from.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import platform
import signal
import sys
import threading
import time
from pathlib import Path

import cloudpickle
import pytest

import _interrupt_cli  # tests/_interrupt_cli.py: the toy experiment
from hacn_core.__main__ import main
from hacn_core.engine import launch as L
from hacn_core.engine.progress import study_progress
from hacn_core.engine.results import ResultsStore, run_or_load

TOY = _interrupt_cli.EXPERIMENT


@pytest.fixture(autouse=True)
def toy_by_value():
    """The job's process cannot import tests/: the toy's functions travel inside the pickled job."""
    cloudpickle.register_pickle_by_value(_interrupt_cli)
    yield
    cloudpickle.unregister_pickle_by_value(_interrupt_cli)


def _stored(store: ResultsStore):
    (path,) = list((store.root / TOY.id).glob("*.json"))
    return store.read(path)


def _children(pid: int) -> list[int]:
    """The processes ``pid`` started (a local job: submitit's controller starts the task that trains)."""
    return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def _wait(condition, what: str, timeout: float = 300.0) -> None:
    started = time.monotonic()
    while not condition():
        if time.monotonic() - started > timeout:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def test_local_jobs_train_and_a_killed_job_resumes_to_the_same_result(tmp_path, monkeypatch):
    """A local job trains from step 0 and is killed past its first checkpoint; the command run again submits
    a second job, which resumes from the checkpoint, stores the run (its job COMPLETED) and leaves nothing
    to submit; the stored result is that of an uninterrupted run (trained here, in this process: each job
    is a process that imports torch, some 7 CPU-seconds before its first step)."""
    monkeypatch.setenv("HACN_CHECKPOINT_EVERY", "40steps")
    killed = ResultsStore(tmp_path / "killed")
    marker = tmp_path / "held"
    monkeypatch.setenv(_interrupt_cli.HOLD_ENV, f"60:{marker}")  # after step 60: slow steps, a window to kill
    (first,) = L.launch(TOY, "smoke", launcher="local", store=killed)
    _wait(marker.exists, "the job to reach step 60")
    checkpoints = killed.root / ".checkpoints" / TOY.id
    _wait(lambda: any(checkpoints.rglob("*.pt")), "a checkpoint")
    for task in _children(first._process.pid):  # the run itself: no handler runs, the periodic checkpoint is left
        os.kill(task, signal.SIGKILL)
    first._process.wait()  # submitit's controller of the job reaps it and ends
    (digest, record), = L.read_jobs(killed, TOY.id).items()
    assert L.job_state(record) == "ENDED"
    assert f"local job {first.job_id}: ENDED" in "\n".join(L.job_lines(killed, TOY.id))
    (second,) = L.launch(TOY, "smoke", launcher="local", store=killed)  # resumes from the checkpoint
    assert second.result()["config_hash"] == digest == _stored(killed).config_hash
    assert L.launch(TOY, "smoke", launcher="local", store=killed) == []  # stored: nothing to submit
    record = L.read_jobs(killed, TOY.id)[digest]
    assert record["job_id"] == str(second.job_id) and L.job_state(record) == "COMPLETED"

    monkeypatch.delenv(_interrupt_cli.HOLD_ENV)
    straight = ResultsStore(tmp_path / "straight")  # the run uninterrupted, as a job's process runs it
    reference = run_or_load(TOY.id, TOY.runs("smoke")[0], TOY.train, store=straight, profile="smoke",
                            progress=False)
    resumed = _stored(killed)
    assert resumed.metrics == reference.metrics and resumed.curves == reference.curves
    assert resumed.config_hash == reference.config_hash
    assert resumed.provenance["segments"] == 2 and reference.provenance["segments"] == 1


def test_slurm_job_array_against_submitits_mocked_sbatch(tmp_path):
    """Two runs missing: one sbatch of a two-task job array with the options' resources; the first task,
    executed here as the cluster would, stores its run."""
    from submitit.core import submission
    from submitit.slurm.test_slurm import mocked_slurm

    two = dataclasses.replace(TOY, configs={"smoke": lambda: [dict(_interrupt_cli.CONFIG),
                                                              dict(_interrupt_cli.CONFIG, seed=4)]})
    store = ResultsStore(tmp_path / "store")
    options = L.LaunchOptions(gpus=1, cpus=4, time_min=90, partition="gpu", signal_delay_s=60)
    handlers = {s: signal.getsignal(s) for s in (signal.SIGUSR2, signal.SIGTERM, signal.SIGINT, signal.SIGCONT)}
    platform.processor()  # cached now: the mock answers only sbatch / sacct / scancel, not the `uname -p` it runs
    try:
        with mocked_slurm() as mock:
            jobs = L.launch(two, "smoke", launcher="slurm", store=store, options=options)
            assert [j.job_id for j in jobs] == ["12_0", "12_1"]
            sbatch = jobs[0].paths.submission_file.read_text()
            for line in ("#SBATCH --array=0-1%2", "#SBATCH --partition=gpu", "#SBATCH --gpus-per-node=1",
                         "#SBATCH --cpus-per-task=4", "#SBATCH --ntasks-per-node=1", "#SBATCH --time=90",
                         "#SBATCH --signal=USR2@60", f"#SBATCH --job-name={TOY.id}"):
                assert line in sbatch, line
            lines = "\n".join(L.job_lines(store, TOY.id))
            assert "slurm job 12_0: RUNNING" in lines and "slurm job 12_1: RUNNING" in lines
            with mock.job_context(jobs[0].job_id):  # the cluster runs the first task: here, in this process
                submission.process_job(jobs[0].paths.folder)
            (stored,) = list((store.root / TOY.id).glob("*.json"))
            assert jobs[0].result()["config_hash"] == store.read(stored).config_hash
    finally:
        for s, handler in handlers.items():
            signal.signal(s, handler)
    delayed = L.RunJob(TOY, "smoke", TOY.runs("smoke")[0], str(store.root), None).checkpoint()
    assert isinstance(delayed.function, L.RunJob)  # on a time limit or preemption: the same job, requeued


def test_launch_options_from_a_file_and_the_flags(tmp_path):
    path = tmp_path / "launch.toml"
    path.write_text('gpus = 8\npartition = "gpu"\ntime_min = 600\n')
    assert L.LaunchOptions.load(path, gpus=2, cpus=None) == L.LaunchOptions(gpus=2, partition="gpu", time_min=600)
    path.write_text("gpu = 8\n")
    with pytest.raises(L.LaunchError, match="unknown keys gpu; allowed: array_parallelism, cpus, gpus"):
        L.LaunchOptions.load(path)
    with pytest.raises(L.LaunchError, match="cpus=0: allowed an integer >= 1"):
        L.LaunchOptions(cpus=0)


def test_local_jobs_get_gpus_of_their_own():
    """Eight one-GPU jobs on an 8-GPU node: one GPU each; two-GPU jobs: consecutive pairs, round robin."""
    assert [L.local_gpus(k, 1, 8) for k in range(9)] == [(k % 8,) for k in range(9)]
    assert [L.local_gpus(k, 2, 4) for k in range(3)] == [(0, 1), (2, 3), (0, 1)]
    with pytest.raises(L.LaunchError, match="gpus=2: this machine has 1 GPU$"):
        L.local_gpus(0, 2, 1)


def _controllers(store: ResultsStore) -> int:
    """How many local jobs of ``store`` run now: submitit's controllers among this process's children."""
    count = 0
    for child in _children(os.getpid()):
        try:
            cmdline = Path(f"/proc/{child}/cmdline").read_bytes()  # empty for a zombie: it has ended
        except OSError:
            continue
        count += b"submitit.local._local" in cmdline and str(store.root).encode() in cmdline
    return count


QUICK_STARTED = "TOY_QUICK_STARTED"  # a file the quick run creates when it starts (a signal lands in the run)


def _quick(config: dict, context) -> dict:
    """A run that trains nothing (it sleeps ``sleep_s``): the launcher's jobs, each the cost of a process
    that imports torch."""
    if os.environ.get(QUICK_STARTED):
        Path(os.environ[QUICK_STARTED]).touch()
    time.sleep(config.get("sleep_s", 0.3))
    return {"metrics": {"seed": float(config["seed"])}}


def _quick_experiment(runs: list[dict]):
    return dataclasses.replace(TOY, id="toy-quick", train=_quick, configs={"smoke": functools.partial(list, runs)})


@pytest.fixture
def quick_by_value():
    """The quick run's function travels inside the pickled job (the job's process cannot import tests/)."""
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    yield
    cloudpickle.unregister_pickle_by_value(sys.modules[__name__])


@contextlib.contextmanager
def _watching(store: ResultsStore, peak: list[int], marker: Path | None = None):
    """While the block runs, a thread keeps ``peak[0]``, the most jobs of ``store`` seen at once, and sends
    this process SIGTERM once ``marker`` exists."""
    done = threading.Event()

    def watch() -> None:
        sent = marker is None
        while not done.is_set():
            peak[0] = max(peak[0], _controllers(store))
            if not sent and marker.exists():
                os.kill(os.getpid(), signal.SIGTERM)
                sent = True
            time.sleep(0.02)

    watcher = threading.Thread(target=watch, daemon=True)
    late = signal.signal(signal.SIGTERM, lambda *_: None)  # a SIGTERM after the launcher's return ends no test
    watcher.start()
    try:
        yield
    finally:
        done.set()
        watcher.join()
        signal.signal(signal.SIGTERM, late)


def test_waiting_launcher_runs_at_most_max_jobs_and_returns_when_every_run_is_stored(tmp_path, quick_by_value):
    """Three runs, at most two jobs at once: the third is submitted when one of the first two ends, and the
    launcher returns 0 only when all three are stored and no job runs."""
    quick = _quick_experiment([{"seed": seed} for seed in (1, 2, 3)])
    store, peak, lines = ResultsStore(tmp_path / "store"), [0], []
    with _watching(store, peak):
        assert L.launch_and_wait(quick, "smoke", store=store, options=L.LaunchOptions(max_jobs=2),
                                 report=lines.append) == 0
        assert _controllers(store) == 0
    assert all(p.state == "stored" for p in study_progress(quick, "smoke", store))
    assert peak[0] == 2, peak  # the two first jobs at once, never a third beside them
    submitted = [line.split(" (")[-1] for line in lines if " trains " in line]
    assert len(submitted) == 3 and submitted[:2] == ["1 running, at most 2 at once)", "2 running, at most 2 at once)"]
    assert lines[-1].endswith("3 job(s) ended, 3 stored their run; no run left to submit")
    records = L.read_jobs(store, quick.id)
    assert len(records) == 3 and {L.job_state(r) for r in records.values()} == {"COMPLETED"}
    assert L.launch_and_wait(quick, "smoke", store=store, report=lines.append) == 0  # nothing to submit
    assert "no run to submit" in lines[-1]


def test_a_signal_to_the_waiting_launcher_stops_its_job_and_submits_nothing_more(tmp_path, monkeypatch,
                                                                                 quick_by_value):
    """Two runs of two minutes, one job at a time; SIGTERM to the launcher once the first has started: the
    signal goes on to the job, which ends at once (ENDED, nothing stored), the second run is never
    submitted, and the launcher returns 143."""
    slow = _quick_experiment([{"seed": seed, "sleep_s": 120} for seed in (1, 2)])
    store, marker, lines = ResultsStore(tmp_path / "store"), tmp_path / "started", []
    monkeypatch.setenv(QUICK_STARTED, str(marker))
    started = time.monotonic()
    with _watching(store, [0], marker):
        assert L.launch_and_wait(slow, "smoke", store=store, options=L.LaunchOptions(max_jobs=1),
                                 report=lines.append) == 143
        assert _controllers(store) == 0
    assert time.monotonic() - started < 110  # the job did not sleep its two minutes
    assert "stopped by SIGTERM" in lines[-1] and sum(" trains " in line for line in lines) == 1
    (record,) = L.read_jobs(store, slow.id).values()
    assert L.job_state(record) == "ENDED"
    assert [p.state for p in study_progress(slow, "smoke", store)] == ["not started", "not started"]


@pytest.mark.extended  # a fit job (torch._dynamo's import: some 15 CPU-seconds); CI checks the stop above
def test_a_signal_to_the_waiting_launcher_leaves_a_resumable_checkpoint(tmp_path, monkeypatch):
    """SIGTERM to the waiting launcher once its job's run is past step 40: the signal goes on to the job,
    whose trainer saves its checkpoint and stops; the launcher returns 143 when the job has ended, the run
    paused there (the job: ENDED), and the run resumes from that checkpoint (two segments)."""
    short = dict(_interrupt_cli.CONFIG, epochs=4)  # 128 steps
    one = dataclasses.replace(TOY, configs={"smoke": functools.partial(list, [short])})
    store, marker, lines = ResultsStore(tmp_path / "store"), tmp_path / "held", []
    monkeypatch.setenv(_interrupt_cli.HOLD_ENV, f"40:{marker}")  # after step 40: slow steps, a window to signal
    with _watching(store, [0], marker):
        assert L.launch_and_wait(one, "smoke", store=store, report=lines.append) == 143
        assert _controllers(store) == 0
    assert "stopped by SIGTERM" in lines[-1]
    (run,) = study_progress(one, "smoke", store)
    assert run.state == "paused" and run.global_step >= 40, run
    (record,) = L.read_jobs(store, TOY.id).values()
    assert L.job_state(record) == "ENDED"
    log = Path(record["folder"]) / f"{record['job_id']}_0_log.err"
    assert "training interrupted by SIGTERM" in log.read_text()
    monkeypatch.delenv(_interrupt_cli.HOLD_ENV)
    resumed = run_or_load(TOY.id, short, TOY.train, store=store, profile="smoke", progress=False)
    assert resumed.config_hash == run.config_hash and resumed.provenance["segments"] == 2


def test_bad_launcher_values_are_one_line_errors(capsys, tmp_path):
    for args, expected in ((["--launcher", "sge"], "--launcher 'sge' is unknown; allowed: inline, local, slurm"),
                           (["--gpus", "2"], "go with --launcher local or slurm"),
                           (["--launcher", "local", "--cpus", "0"], "cpus=0: allowed an integer >= 1"),
                           (["--launcher", "local", "--max-jobs", "0", "--wait"],
                            "max_jobs=0: allowed an integer >= 1"),
                           (["--max-jobs", "2"], "--max-jobs and --wait: local"),
                           (["--launcher", "slurm", "--max-jobs", "2"],
                            "max_jobs=2: allowed with --launcher local only; on SLURM the job array's "
                            "array_parallelism (now 256) caps"),
                           (["--launcher", "slurm", "--wait"], "--wait: allowed with --launcher local only")):
        assert main(["run", "awnn-tabular-fixed", "--profile", "smoke", "--results", str(tmp_path), *args]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and expected in err, err
    assert not list(Path(tmp_path).iterdir())
