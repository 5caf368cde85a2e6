"""One launcher for an experiment's missing runs: in this process, or as jobs through submitit.

``python -m hacn_core run EXP --profile P --launcher {inline,local,slurm}``:

``inline`` (the default)
    trains the missing runs one after the other in this process (:func:`~hacn_core.engine.registry.run_experiment`).
``local``
    submits one job per missing run to submitit's ``LocalExecutor``: each job is a process of this
    machine, in a session of its own (a signal to the launcher's terminal or process group does not
    reach it), with ``--gpus`` of its own (job ``k`` gets the ``k``-th group of GPUs, round robin:
    :func:`local_gpus`); how this machine and CI test the launcher. ``--max-jobs N`` runs at most ``N``
    of the experiment's jobs at once (the rest on a later call). With ``--wait`` the launcher stays
    (:func:`launch_and_wait`): it keeps at most ``N`` jobs running, submits the next missing run when one
    ends and returns when none is missing; SIGTERM, SIGINT or SIGHUP stops it: nothing more is submitted,
    the signal goes on to every running job (its trainer saves a checkpoint and stops; a second signal
    stops at once), and once they have ended it exits with 128 + the signal's number. The background
    scripts ``tools/train_background.sh`` and ``tools/device_runs.sh`` are this command with their set-up.
``slurm``
    submits them to a SLURM cluster through submitit's ``SlurmExecutor``, as one job array (at most
    ``--array-parallelism`` at a time), each job with its GPUs, CPUs, time limit and partition. A job
    that needs several GPUs runs ``--tasks`` ranks (``tasks_per_node``): submitit sets the rank and
    world size, and the run trains under ``torch.distributed`` as under ``torchrun``
    (:func:`hacn_core.engine.results.launched_world`).

Every job runs :class:`RunJob`: ``run_or_load`` of one configuration, which resumes from the run's
checkpoint when one is there and stores the result atomically. On a SLURM time limit or preemption,
submitit's signal (``USR2``, ``--signal-delay-s`` before the end) calls :meth:`RunJob.checkpoint`, which
requeues the same job (submitit's checkpointing protocol); the scheduler's ``SIGTERM`` that follows
makes the trainer save its checkpoint and stop (the trainer's own handler), and the requeued job
resumes from it. A job killed outright (``SIGKILL``, a lost node) resumes from the last periodic
checkpoint when the command is run again: a run is submitted only while it is neither stored nor
held by a live job.

Options come from the command line or a TOML file (``--launch-config FILE``, keys as the
:class:`LaunchOptions` fields, e.g. ``gpus = 8``, ``partition = "gpu"``, ``time_min = 1440``,
``max_jobs = 2``); the command line wins. The jobs' ids are kept in
``<results>/.launch/<experiment>.json`` (with their submitit folder), which ``status`` reads to show
each run's job id and state.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import json
import os
import signal
import subprocess
import sys
import time
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hacn_core.engine.results import ResultsStore, write_atomic

if TYPE_CHECKING:
    from hacn_core.engine.registry import Experiment

LAUNCHERS: tuple[str, ...] = ("inline", "local", "slurm")
JOBS_FOLDER = ".launch"  # under the results root: <experiment>.json and submitit's folders
#: what stops a waiting launcher (:func:`launch_and_wait`) and, passed on, its jobs' trainers
STOP_SIGNALS: tuple[signal.Signals, ...] = tuple(getattr(signal, n) for n in ("SIGINT", "SIGTERM", "SIGHUP")
                                                 if hasattr(signal, n))


class LaunchError(ValueError):
    """A launcher option out of its range, or a launch configuration file that cannot be read."""


@dataclass(frozen=True)
class LaunchOptions:
    """Resources of every job: GPUs and CPUs per task, ranks (tasks) per job, the time limit in minutes, the
    SLURM partition, the most array tasks that run at once and how long before the limit submitit signals;
    ``max_jobs``: the most local jobs of the experiment that run at once (None: one per missing run)."""

    gpus: int = 0
    cpus: int = 1
    tasks: int = 1
    time_min: int = 24 * 60
    partition: str | None = None
    array_parallelism: int = 256
    signal_delay_s: int = 120
    max_jobs: int | None = None

    def __post_init__(self) -> None:
        for name in ("gpus", "cpus", "tasks", "time_min", "array_parallelism", "signal_delay_s"):
            value = getattr(self, name)
            low = 0 if name in ("gpus", "signal_delay_s") else 1
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise LaunchError(f"{name}={value!r}: allowed an integer >= {low}")
        if self.max_jobs is not None and (isinstance(self.max_jobs, bool) or not isinstance(self.max_jobs, int)
                                          or self.max_jobs < 1):
            raise LaunchError(f"max_jobs={self.max_jobs!r}: allowed an integer >= 1 (or none: every missing run "
                              "at once)")
        if self.partition is not None and not (isinstance(self.partition, str) and self.partition):
            raise LaunchError(f"partition={self.partition!r}: allowed a SLURM partition name")

    @classmethod
    def load(cls, path: str | os.PathLike[str] | None, **overrides: Any) -> LaunchOptions:
        """The options of a TOML file (or the defaults), then the ``overrides`` that are not ``None``."""
        values: dict[str, Any] = {}
        if path is not None:
            try:
                values = tomllib.loads(Path(path).read_text(encoding="utf-8"))
            except (OSError, tomllib.TOMLDecodeError) as err:
                raise LaunchError(f"--launch-config {path}: {err}") from err
            fields = {f.name for f in dataclasses.fields(cls)}
            unknown = sorted(set(values) - fields)
            if unknown:
                raise LaunchError(f"--launch-config {path}: unknown keys {', '.join(unknown)}; allowed: "
                                  f"{', '.join(sorted(fields))}")
        return cls(**(values | {k: v for k, v in overrides.items() if v is not None}))


def check_launcher(launcher: str) -> str:
    if launcher not in LAUNCHERS:
        raise LaunchError(f"--launcher {launcher!r} is unknown; allowed: {', '.join(LAUNCHERS)}")
    return launcher


def check_options(launcher: str, options: LaunchOptions, wait: bool = False) -> None:
    """The options that go with ``launcher`` only: ``max_jobs`` and waiting are the local launcher's."""
    if check_launcher(launcher) == "slurm" and options.max_jobs is not None:
        raise LaunchError(f"max_jobs={options.max_jobs}: allowed with --launcher local only; on SLURM the job "
                          f"array's array_parallelism (now {options.array_parallelism}) caps the jobs that run at once")
    if wait and launcher != "local":
        raise LaunchError(f"--wait: allowed with --launcher local only (a {launcher} launch returns once its jobs "
                          "are submitted)")


class RunJob:
    """One run as a submitit job: ``run_or_load`` of one configuration (resuming from its checkpoint).

    ``lookup`` finds a registered experiment by its id (the caller's registry, e.g. ``hacn_core.catalog.get``;
    the engine knows no paper's experiments): a job of a registered experiment carries only its id and finds
    it again in the job's process; one outside the registry (a test's toy) is pickled with the job.
    """

    def __init__(self, experiment: Experiment, profile: str, config: Mapping[str, Any], results: str,
                 threads: int | None, lookup: Callable[[str], Experiment] | None = None) -> None:
        self.experiment_id, self.lookup = experiment.id, lookup
        self.experiment = None if lookup is not None and _registered(lookup, experiment) else experiment
        self.profile, self.config, self.results, self.threads = profile, dict(config), results, threads

    def __call__(self) -> dict[str, Any]:
        if os.environ.get("SUBMITIT_EXECUTOR") == "local":
            _stop_on_signals()
        from hacn_core.engine.results import run_or_load
        from hacn_core.engine.training import TrainingInterrupted

        experiment = self.experiment or self.lookup(self.experiment_id)
        _export_ranks()
        try:
            result = run_or_load(experiment.id, self.config, experiment.train, store=ResultsStore(self.results),
                                 profile=self.profile, progress=False, threads=self.threads)
        except TrainingInterrupted as stop:  # its checkpoint is saved; no result file: the job shows as ENDED
            print(stop, file=sys.stderr, flush=True)
            raise SystemExit(stop.exit_code) from None
        return {"config_hash": result.config_hash, "metrics": result.metrics}

    def checkpoint(self, *args: Any, **kwargs: Any) -> Any:
        """submitit's requeue on a time limit or preemption: the same job again; the trainer saves its
        checkpoint on the scheduler's SIGTERM that follows, and the requeued job resumes from it."""
        import submitit

        return submitit.helpers.DelayedSubmission(self, *args, **kwargs)


def _stop_on_signals() -> None:
    """In a local job, outside the trainer's own handlers (loading data, storing the result): SIGTERM, SIGINT
    or SIGHUP ends the job with 128 + its number (submitit's job ignores SIGTERM, which would leave a waiting
    launcher waiting for a whole run). Inside ``fit`` the trainer's handlers save the checkpoint first."""

    def stop(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)

    for signum in STOP_SIGNALS:
        signal.signal(signum, stop)


def _export_ranks() -> None:
    """In a job of several tasks, torchrun's variables (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR``,
    ``MASTER_PORT``) from submitit's, so that the run trains under ``torch.distributed`` as under torchrun."""
    import submitit

    try:
        tasks = submitit.JobEnvironment().num_tasks
    except RuntimeError:  # not inside a submitit job (a test calling the job directly)
        return
    if tasks > 1:
        submitit.helpers.TorchDistributedEnvironment().export(set_cuda_visible_devices=False)


def _executor(launcher: str, folder: Path, options: LaunchOptions, name: str) -> Any:
    import submitit

    executor = submitit.AutoExecutor(folder=folder, cluster=launcher)
    params: dict[str, Any] = dict(name=name, timeout_min=options.time_min, gpus_per_node=options.gpus,
                                  cpus_per_task=options.cpus, tasks_per_node=options.tasks, nodes=1)
    if launcher == "slurm":
        params |= dict(slurm_array_parallelism=options.array_parallelism,
                       slurm_signal_delay_s=options.signal_delay_s)
        if options.partition:
            params["slurm_partition"] = options.partition
    executor.update_parameters(**params)
    return executor


def local_gpus(k: int, gpus: int, count: int | None = None) -> tuple[int, ...]:
    """The GPUs of local job ``k`` asking for ``gpus``: consecutive ones, round robin over the ``count`` GPUs
    of this machine (default: CUDA's count), so that eight one-GPU jobs on an 8-GPU node get one each."""
    if count is None:
        import torch

        count = torch.cuda.device_count()
    if count < gpus:
        raise LaunchError(f"gpus={gpus}: this machine has {count} GPU{'s' * (count != 1)}")
    slots = count // gpus
    return tuple(range((k % slots) * gpus, (k % slots) * gpus + gpus))


def jobs_file(store: ResultsStore, experiment_id: str) -> Path:
    return store.root / JOBS_FOLDER / f"{experiment_id}.json"


def read_jobs(store: ResultsStore, experiment_id: str) -> dict[str, dict[str, Any]]:
    """``config hash -> {"job_id", "launcher", "folder", "submitted"}`` of the experiment's submitted jobs."""
    path = jobs_file(store, experiment_id)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, json.JSONDecodeError) as err:
        raise LaunchError(f"{path} cannot be read ({err}); delete it to forget the submitted jobs") from err


def _registered(lookup: Callable[[str], Experiment], experiment: Experiment) -> bool:
    """Whether ``lookup`` finds this very experiment under its id."""
    try:
        return lookup(experiment.id) is experiment
    except (KeyError, ValueError):
        return False


def _missing(experiment: Experiment, profile: str, store: ResultsStore, where: Mapping[str, Any] | None,
             threads: int | None) -> list[tuple[str, dict[str, Any]]]:
    """``(config hash, configuration)`` of each run of ``experiment`` at ``profile`` (matching ``where``) that
    is neither stored nor held by a live process (its ``run.lock``) or a live local job (its record)."""
    from hacn_core.engine.progress import study_progress
    from hacn_core.engine.registry import matches
    from hacn_core.engine.results import config_hash, filed_config, planned_execution

    states = {p.config_hash: p.state for p in study_progress(experiment, profile, store, threads)}
    live = {digest for digest, record in read_jobs(store, experiment.id).items() if _local_job_alive(record)}
    plan = planned_execution(threads)
    out = []
    for config in experiment.runs(profile):
        digest = config_hash(filed_config(dict(config), plan))
        if matches(config, where) and states.get(digest) in ("not started", "paused") and digest not in live:
            out.append((digest, dict(config)))
    return out


@contextlib.contextmanager
def _own_sessions() -> Any:
    """submitit's local controllers start in sessions of their own while the block runs: a signal to the
    launcher's terminal or process group (Ctrl-C, a closing terminal) reaches the launcher only, which passes
    it on once, not every process of the job at the same time (the trainer stops at once on a second one)."""
    from submitit.local import local

    class Subprocess:  # stands in for the subprocess module inside submitit.local.local
        def __getattr__(self, name: str) -> Any:
            return getattr(subprocess, name)

        @staticmethod
        def Popen(*args: Any, **kwargs: Any) -> subprocess.Popen[bytes]:  # noqa: N802 - subprocess's name
            return subprocess.Popen(*args, **kwargs, start_new_session=True)

    module = local.subprocess
    local.subprocess = Subprocess()  # type: ignore[assignment]
    try:
        yield
    finally:
        local.subprocess = module


def _submit(experiment: Experiment, profile: str, launcher: str, store: ResultsStore,
            runs: Sequence[tuple[str, dict[str, Any]]], threads: int | None, options: LaunchOptions,
            lookup: Callable[[str], Experiment] | None, gpu_slots: Sequence[int] | None = None) -> list[Any]:
    """One job per ``(hash, configuration)`` of ``runs`` (a job array on SLURM; local job ``i`` on the GPUs of
    slot ``gpu_slots[i]``, default ``i``), recorded in ``.launch/<experiment>.json``; returns the jobs."""
    folder = store.root / JOBS_FOLDER / experiment.id
    executor = _executor(launcher, folder, options, experiment.id)
    jobs = []
    if launcher == "slurm":
        with executor.batch():  # one sbatch: a job array
            jobs = [executor.submit(RunJob(experiment, profile, c, str(store.root), threads, lookup)) for _, c in runs]
    else:
        with _own_sessions():
            for k, (_, config) in enumerate(runs):
                if options.gpus:  # job k on its own GPUs, round robin over the machine's (submitit's default: 0..g-1)
                    slot = k if gpu_slots is None else gpu_slots[k]
                    executor.update_parameters(visible_gpus=local_gpus(slot, options.gpus))
                jobs.append(executor.submit(RunJob(experiment, profile, config, str(store.root), threads, lookup)))
    now = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    with _jobs_file_locked(store, experiment.id):
        recorded = read_jobs(store, experiment.id)
        for (digest, _), job in zip(runs, jobs):
            recorded[digest] = {"job_id": str(job.job_id), "launcher": launcher, "folder": str(folder),
                                "submitted": now}
        write_atomic(jobs_file(store, experiment.id), json.dumps(recorded, indent=1, sort_keys=True) + "\n")
    return jobs


@contextlib.contextmanager
def _jobs_file_locked(store: ResultsStore, experiment_id: str) -> Any:
    """The experiment's jobs file held against another launcher's update (two waiting launchers of one
    store, e.g. tools/device_runs.sh's GPU and CPU jobs of one experiment), where ``fcntl`` exists."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not on POSIX
        yield
        return
    path = jobs_file(store, experiment_id).with_suffix(".lock")
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def launch(experiment: Experiment, profile: str, *, launcher: str, store: ResultsStore,
           where: Mapping[str, Any] | None = None, threads: int | None = None,
           options: LaunchOptions = LaunchOptions(), lookup: Callable[[str], Experiment] | None = None) -> list[Any]:
    """Submit every configuration of ``experiment`` at ``profile`` (matching ``where``) that is neither
    stored nor held by a live process or job, one submitit job each (a job array on SLURM); returns the
    submitit jobs (none when nothing is missing). With ``options.max_jobs`` (local), at most that many of
    the experiment's local jobs run at once: the runs beyond it are left to a later call (or to
    :func:`launch_and_wait`). ``inline`` is :func:`run_experiment`'s, not this.
    ``lookup``: the registry's lookup by id (:class:`RunJob`)."""
    from hacn_core.engine.registry import check_where, where_context

    if check_launcher(launcher) == "inline":
        raise LaunchError("launch() submits jobs: use run_experiment for --launcher inline")
    check_options(launcher, options)
    check_where(experiment.runs(profile), where, context=where_context(experiment, profile))
    missing = _missing(experiment, profile, store, where, threads)
    if options.max_jobs is not None:
        running = sum(_local_job_alive(r) for r in read_jobs(store, experiment.id).values())
        missing = missing[:max(0, options.max_jobs - running)]
    if not missing:
        return []
    return _submit(experiment, profile, launcher, store, missing, threads, options, lookup)


def launch_and_wait(experiment: Experiment, profile: str, *, store: ResultsStore,
                    where: Mapping[str, Any] | None = None, threads: int | None = None,
                    options: LaunchOptions = LaunchOptions(), lookup: Callable[[str], Experiment] | None = None,
                    report: Callable[[str], None] | None = None, poll_s: float = 0.2) -> int:
    """``run --launcher local --wait``: local jobs of the missing runs, at most ``options.max_jobs`` at once
    (default: all at once); the next missing run is submitted when a job ends, each run at most once in
    this call. Returns when none is missing and no job runs: 0 when every selected run is stored (or held
    by another live process), 1 when a job ended without storing its run (``report`` names its log).

    SIGTERM, SIGINT or SIGHUP (:data:`STOP_SIGNALS`, main thread only): nothing more is submitted, the
    signal goes on to each running job's tasks (the trainer saves its checkpoint and stops; a second
    signal, passed on as well, stops it at once), and once every job has ended this returns 128 + the
    first signal's number; the same command resumes each run from its checkpoint. Each job's id is
    recorded as :func:`launch` records it; ``report`` gets one line per submission and a summary."""
    from hacn_core.engine.progress import study_progress
    from hacn_core.engine.registry import check_where, where_context

    say = report or (lambda line: print(line, flush=True))
    check_options("local", options, wait=True)
    check_where(experiment.runs(profile), where, context=where_context(experiment, profile))
    slots = _gpu_slots(options.gpus)
    cap = options.max_jobs or sys.maxsize
    received: list[int] = []
    previous = {s: signal.signal(s, lambda signum, frame: received.append(signum)) for s in STOP_SIGNALS}
    running: dict[str, tuple[Any, int]] = {}  # config hash -> (job, its GPU slot)
    ended: dict[str, Any] = {}
    passed_on: dict[int, int] = {}  # a job's task pid -> how many of the received signals it was sent
    try:
        look = True  # a job ended (or none started yet): look for missing runs again
        while True:
            for digest, (job, _) in list(running.items()):
                if job._process.poll() is not None:
                    ended[digest] = running.pop(digest)[0]
                    look = True
            if received:
                _pass_on(received, [job for job, _ in running.values()], passed_on)
                if not running:
                    break
            elif look and len(running) < cap:
                look = False
                todo = [(d, c) for d, c in _missing(experiment, profile, store, where, threads)
                        if d not in ended and d not in running][:cap - len(running)]
                if not todo and not running:
                    break
                busy = [slot for _, slot in running.values()]
                picked: list[int] = []
                for _ in todo:  # each new job on the slot of GPUs the fewest running jobs use
                    picked.append(min(range(slots), key=lambda s: ((busy + picked).count(s), s)))
                jobs = (_submit(experiment, profile, "local", store, todo, threads, options, lookup, picked)
                        if todo else [])
                for (digest, _), job, slot in zip(todo, jobs, picked):
                    running[digest] = (job, slot)
                    cap_note = f", at most {options.max_jobs} at once" if options.max_jobs else ""
                    say(f"{experiment.id} ({profile}): local job {job.job_id} trains {digest} "
                        f"({len(running)} running{cap_note})")
            time.sleep(poll_s)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)
    if received:
        name = signal.Signals(received[0]).name
        say(f"{experiment.id} ({profile}): stopped by {name}; {len(ended)} job(s) ended, the runs not stored "
            f"resume from their checkpoints when the same command runs again")
        return 128 + received[0]
    if not ended:
        say(f"{experiment.id} ({profile}): no run to submit in {store.root} (every run is stored or held by a "
            "live process or job)")
        return 0
    states = {p.config_hash: p.state for p in study_progress(experiment, profile, store, threads)}
    failed = {d: job for d, job in ended.items() if states.get(d) not in ("stored", "training")}
    stored = sum(states.get(d) == "stored" for d in ended)
    say(f"{experiment.id} ({profile}): {len(ended)} job(s) ended, {stored} stored their run"
        + (f"; {len(failed)} did not (their logs: "
           f"{', '.join(str(job.paths.stderr) for job in failed.values())}); run the command again to retry"
           if failed else "; no run left to submit"))
    return 1 if failed else 0


def _gpu_slots(gpus: int) -> int:
    """How many jobs of ``gpus`` GPUs each this machine runs side by side (1 for CPU jobs)."""
    if not gpus:
        return 1
    import torch

    count = torch.cuda.device_count()
    local_gpus(0, gpus, count)  # the machine has them, or a one-line error
    return count // gpus


def _job_tasks(pid: int) -> list[int] | None:
    """The processes a local job's controller ``pid`` started (its tasks); None where /proc cannot say."""
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except (OSError, ValueError):
        return None


def _pass_on(received: Sequence[int], jobs: Sequence[Any], passed_on: dict[int, int]) -> None:
    """Send each running job's tasks the signals received that they have not been sent yet (a task that
    starts later gets them when it appears). Without /proc: SIGTERM to the controller, which forwards it."""
    for job in jobs:
        pid = job._process.pid
        tasks = _job_tasks(pid)
        for target in tasks if tasks is not None else [pid]:
            while passed_on.get(target, 0) < len(received):
                signum = received[passed_on.get(target, 0)] if tasks is not None else signal.SIGTERM
                with contextlib.suppress(ProcessLookupError):
                    os.kill(target, signum)
                passed_on[target] = passed_on.get(target, 0) + 1


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _local_job_alive(record: Mapping[str, Any]) -> bool:
    """Whether a recorded local job's controller still runs: its pid lives and, where /proc shows it, is
    submitit's controller of the recorded folder (not a process that reuses the pid, nor a reaped zombie)."""
    job_id = str(record.get("job_id", ""))
    if record.get("launcher") != "local" or not job_id.isdigit() or not _pid_alive(int(job_id)):
        return False
    try:
        cmdline = Path(f"/proc/{job_id}/cmdline").read_bytes()
    except OSError:
        return not Path("/proc/self").exists()  # no /proc: the pid alone; on Linux: gone meanwhile
    return b"submitit" in cmdline and str(record.get("folder", "")).encode() in cmdline


def job_state(record: Mapping[str, Any]) -> str:
    """A submitted job's state: SLURM's (``sacct`` through submitit: PENDING, RUNNING, COMPLETED, ...), or for
    a local job RUNNING while its process lives, else COMPLETED / FAILED from its result file, or ENDED."""
    import submitit

    folder, job_id = Path(record["folder"]), str(record["job_id"])
    if record["launcher"] == "slurm":
        return str(submitit.SlurmJob(folder, job_id).state)
    job = submitit.Job(folder, job_id)
    if _local_job_alive(record):  # a local job's id is its controller's process id
        return "RUNNING"
    if job.paths.result_pickle.exists():
        outcome = submitit.core.utils.pickle_load(job.paths.result_pickle)[0]
        return "COMPLETED" if outcome == "success" else "FAILED"
    return "ENDED"  # killed before it finished: running the command again resumes the run


def job_lines(store: ResultsStore, experiment_id: str, hashes: Sequence[str] | None = None) -> list[str]:
    """``status``'s lines of the submitted jobs: config hash, launcher, job id and state."""
    jobs = read_jobs(store, experiment_id)
    keep = [h for h in (hashes if hashes is not None else sorted(jobs)) if h in jobs]
    if not keep:
        return []
    lines = [f"jobs ({len(keep)} submitted, {JOBS_FOLDER}/{experiment_id}.json):"]
    for digest in keep:
        record = jobs[digest]
        lines.append(f"  {digest}  {record['launcher']} job {record['job_id']}: {job_state(record)} "
                     f"(submitted {record['submitted']})")
    return lines


__all__ = ["LAUNCHERS", "STOP_SIGNALS", "LaunchError", "LaunchOptions", "RunJob", "check_launcher", "check_options",
           "job_lines", "job_state", "launch", "launch_and_wait", "local_gpus", "read_jobs"]
