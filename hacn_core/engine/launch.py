"""One launcher for an experiment's missing runs: in this process, or as jobs through submitit.

``python -m hacn_core run EXP --profile P --launcher {inline,local,slurm}``:

``inline`` (the default)
    trains the missing runs one after the other in this process (:func:`~hacn_core.engine.registry.run_experiment`).
``local``
    submits one job per missing run to submitit's ``LocalExecutor``: each job is a process of this
    machine, with ``--gpus`` of its own (job ``k`` gets the ``k``-th group of GPUs, round robin:
    :func:`local_gpus`); how this machine and CI test the launcher.
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
:class:`LaunchOptions` fields, e.g. ``gpus = 8``, ``partition = "gpu"``, ``time_min = 1440``); the
command line wins. The jobs' ids are kept in ``<results>/.launch/<experiment>.json`` (with their
submitit folder), which ``status`` reads to show each run's job id and state.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import os
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


class LaunchError(ValueError):
    """A launcher option out of its range, or a launch configuration file that cannot be read."""


@dataclass(frozen=True)
class LaunchOptions:
    """Resources of every job: GPUs and CPUs per task, ranks (tasks) per job, the time limit in minutes, the
    SLURM partition, the most array tasks that run at once and how long before the limit submitit signals."""

    gpus: int = 0
    cpus: int = 1
    tasks: int = 1
    time_min: int = 24 * 60
    partition: str | None = None
    array_parallelism: int = 256
    signal_delay_s: int = 120

    def __post_init__(self) -> None:
        for name in ("gpus", "cpus", "tasks", "time_min", "array_parallelism", "signal_delay_s"):
            value = getattr(self, name)
            low = 0 if name in ("gpus", "signal_delay_s") else 1
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise LaunchError(f"{name}={value!r}: allowed an integer >= {low}")
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
        from hacn_core.engine.results import run_or_load

        experiment = self.experiment or self.lookup(self.experiment_id)
        _export_ranks()
        result = run_or_load(experiment.id, self.config, experiment.train, store=ResultsStore(self.results),
                             profile=self.profile, progress=False, threads=self.threads)
        return {"config_hash": result.config_hash, "metrics": result.metrics}

    def checkpoint(self, *args: Any, **kwargs: Any) -> Any:
        """submitit's requeue on a time limit or preemption: the same job again; the trainer saves its
        checkpoint on the scheduler's SIGTERM that follows, and the requeued job resumes from it."""
        import submitit

        return submitit.helpers.DelayedSubmission(self, *args, **kwargs)


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


def launch(experiment: Experiment, profile: str, *, launcher: str, store: ResultsStore,
           where: Mapping[str, Any] | None = None, threads: int | None = None,
           options: LaunchOptions = LaunchOptions(), lookup: Callable[[str], Experiment] | None = None) -> list[Any]:
    """Submit every configuration of ``experiment`` at ``profile`` (matching ``where``) that is neither
    stored nor held by a live process or job, one submitit job each (a job array on SLURM); returns the
    submitit jobs (none when nothing is missing). ``inline`` is :func:`run_experiment`'s, not this.
    ``lookup``: the registry's lookup by id (:class:`RunJob`)."""
    from hacn_core.engine.progress import study_progress
    from hacn_core.engine.registry import check_where, matches, where_context

    if check_launcher(launcher) == "inline":
        raise LaunchError("launch() submits jobs: use run_experiment for --launcher inline")
    check_where(experiment.runs(profile), where, context=where_context(experiment, profile))
    states = {p.config_hash: p.state for p in study_progress(experiment, profile, store, threads)}
    from hacn_core.engine.results import config_hash, filed_config, planned_execution

    plan = planned_execution(threads)
    missing = [c for c in experiment.runs(profile) if matches(c, where)
               and states.get(config_hash(filed_config(dict(c), plan))) in ("not started", "paused")]
    if not missing:
        return []
    folder = store.root / JOBS_FOLDER / experiment.id
    executor = _executor(launcher, folder, options, experiment.id)
    if launcher == "slurm":
        with executor.batch():  # one sbatch: a job array
            jobs = [executor.submit(RunJob(experiment, profile, c, str(store.root), threads, lookup)) for c in missing]
    else:
        jobs = []
        for k, config in enumerate(missing):
            if options.gpus:  # job k on its own GPUs, round robin over the machine's (submitit's default: 0..g-1)
                executor.update_parameters(visible_gpus=local_gpus(k, options.gpus))
            jobs.append(executor.submit(RunJob(experiment, profile, config, str(store.root), threads, lookup)))
    recorded = read_jobs(store, experiment.id)
    now = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    for config, job in zip(missing, jobs):
        recorded[config_hash(filed_config(dict(config), plan))] = {
            "job_id": str(job.job_id), "launcher": launcher, "folder": str(folder), "submitted": now}
    write_atomic(jobs_file(store, experiment.id), json.dumps(recorded, indent=1, sort_keys=True) + "\n")
    return jobs


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def job_state(record: Mapping[str, Any]) -> str:
    """A submitted job's state: SLURM's (``sacct`` through submitit: PENDING, RUNNING, COMPLETED, ...), or for
    a local job RUNNING while its process lives, else COMPLETED / FAILED from its result file, or ENDED."""
    import submitit

    folder, job_id = Path(record["folder"]), str(record["job_id"])
    if record["launcher"] == "slurm":
        return str(submitit.SlurmJob(folder, job_id).state)
    job = submitit.Job(folder, job_id)
    if job_id.isdigit() and _pid_alive(int(job_id)):  # a local job's id is its process id
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


__all__ = ["LAUNCHERS", "LaunchError", "LaunchOptions", "RunJob", "check_launcher", "job_lines", "job_state",
           "launch", "local_gpus", "read_jobs"]
