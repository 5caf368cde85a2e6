"""Command line: ``python -m hacn_core {list,run,ledger,fetch}``.

    python -m hacn_core list                      # experiments and their settings
    python -m hacn_core run awnn-tabular-fixed --profile book
    python -m hacn_core run awnn-tabular-fixed --profile smoke --where dataset=Spiral
    python -m hacn_core run gates-mnist --profile paper --where depth=50 --stacked
    torchrun --nproc_per_node 2 -m hacn_core run gates-mnist --profile book   # ranks train each run together
    python -m hacn_core run gates-cifar --profile paper --dry-run   # cost of a profile, trains nothing
    python -m hacn_core run gates-cifar --profile paper --dry-run --data   # one step on the data root's files
    python -m hacn_core run hacn-vit --profile paper --launcher slurm --partition gpu --gpus 1   # a job per missing run
    python -m hacn_core run hacn-vit --profile book --launcher local --max-jobs 2 --wait   # 2 jobs at a time till done
    python -m hacn_core run gates-mnist --profile book --checkpoint-every 5m     # or 500steps, 60s
    python -m hacn_core status hacn-mixer-long --profile book   # stored, training, paused runs
    python -m hacn_core ledger                    # the reproduction ledger (text)
    python -m hacn_core ledger --format csv > ledger.csv            # or json: for pandas and scripts
    python -m hacn_core fetch MNIST               # download a dataset into the data root
    python -m hacn_core course hacn_02_mixer ~/course/mixer   # a chapter's course pack (hacn_core/course.py)

``run`` never trains a configuration twice at once: a run another live process is
training (its ``run.lock`` beside the checkpoints) is skipped with a line saying so,
so two background workers started on the same experiment share its runs, and a
worker started again after an interruption resumes each run from its checkpoint.
A run paused under other ``--threads`` (or ``$HACN_PRECISION``, or ranks: all part of
its hash) is skipped too, with the flags that resume it. ``run`` then exits with
status 75 (EX_TEMPFAIL) after the others, so that a script can tell it from a run
whose every configuration is stored.

``run --dry-run`` stores nothing. For every group of configurations that build the
same model on the same input shape it builds the study's model, takes one training
step (forward, loss, backward, optimizer step; AWNN: the ELBO and the width update)
on synthetic data on the CPU, at a reduced batch when the paper's would take more
than a few seconds there, and prints the parameter count, the FLOPs of one step at
the paper's batch (``torch.utils.flop_counter.FlopCounterMode`` at the batch it ran
at, scaled linearly), the optimizer steps of the schedule (epochs x steps per
epoch) and an estimate of GPU-hours on an assumption it prints
(``hacn_core.engine.dry_run``). Experiments that train no model say so.

``--where KEY=VALUE`` reads each value as JSON when it can (``depth=50`` is a number,
``rate_init=0.001`` too, ``removal=true`` a boolean, ``rule=null`` None) and as a string
otherwise (``dataset=Spiral``; ``depth='"50"'`` forces the string "50"). A key given
twice, a key the configurations lack, a value outside their grid, or entries that never
occur together stop the command with the keys or values the grid has.

Bad input (an unknown experiment, profile or dataset, a ``--where`` that selects
nothing, ``--threads 0``, a results folder that does not exist, a stored result that
is missing while training is disabled) prints one ``error: ...`` message to stderr
and exits with status 2; ``--debug`` shows the traceback instead. Any other
exception shows its traceback as usual. An environment variable named ``HACN_...``
that the package does not read (a typo, or ``HACN_DEVICE``) gets a one-line warning
listing those it reads (:data:`ENVIRONMENT`).

``run`` checkpoints every epoch or every 60 s, whichever comes first (about 1% of
the time at most); ``--checkpoint-every`` (``60s``, ``5m``, ``500steps`` or ``500``; it sets
``$HACN_CHECKPOINT_EVERY``) picks another cadence. Ctrl-C (SIGINT) or SIGTERM saves a
checkpoint, prints one line and exits with 130 / 143; so does SIGHUP (a closing
terminal or ssh connection) with 129. The same command resumes.

``ledger --format csv`` / ``--format json`` print one row per paper item with the
columns id, paper, item, quantity, paper value, paper std, our mean, our std (sample
standard deviation over the stored runs), seeds (the number of runs), setting,
status, experiment; numbers unrounded, empty (CSV) or null (JSON) where there is no
value; the JSON rows also list the seeds (``seed list``). ``--results DIR`` reads
another store.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time
from pathlib import Path
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from hacn_core.engine.profiles import PROFILES, ProfileError, current_profile

if TYPE_CHECKING:
    from hacn_core.engine.registry import Experiment


class UsageError(Exception):
    """Bad input on the command line: printed as one ``error:`` message, exit status 2."""


#: Every environment variable the package, its tools and its tests read, with what it sets.
ENVIRONMENT: dict[str, str] = {
    "HACN_PROFILE": "run size: smoke, book, paper", "HACN_RESULTS": "results folder",
    "HACN_DATA": "data root", "HACN_DOWNLOAD": "0 forbids downloads", "HACN_THREADS": "torch CPU threads of a run",
    "HACN_PRECISION": "auto, fp32, bf16, fp16 (part of a run's hash unless fp32)",
    "HACN_CHECKPOINT_EVERY": "checkpoint cadence", "HACN_DISCARD_BAD_CHECKPOINT": "move a damaged checkpoint aside",
    "HACN_ALLOW_TRAIN": "0 forbids training", "HACN_QUIET": "1 hides progress bars",
    "HACN_AWNN_BACKEND": "auto, cpp, python", "HACN_KEEP_MODELS": "folder for trained weights",
    "HACN_GIT_COMMIT": "commit of a copy without its .git", "HACN_INSTALLER": "make env: uv or pip",
    "HACN_PYTHON": "tools: the interpreter", "HACN_VENV": "tools: the virtual environment",
    "HACN_RUNS": "tools: run folder", "HACN_RUN_ARGS": "tools: run arguments", "HACN_TASK": "tools: task",
    "HACN_GPU_EXPERIMENTS": "tools: experiments for a lent GPU", "HACN_GPU_TESTS": "tests: GPU tests",
    "HACN_MFU_BATCHES": "tools: micro-batches of the GPU MFU sweep",
    "HACN_GPU_TEST_SECONDS": "tests: GPU test budget", "HACN_TEST_DATA": "tests: skip the data tests",
    "HACN_MPS": "tools: NVIDIA's multi-process service", "HACN_CHROMIUM": "tools: the browser of the layout check",
    "HACN_TRACE_READS": "course packs: log of the results a notebook reads",
}


def _warn_unknown_environment(environ: Mapping[str, str] | None = None) -> None:
    """One line on stderr per ``HACN_*`` variable that nothing reads (it would be silently ignored)."""
    environ = os.environ if environ is None else environ
    for name in sorted(k for k in environ if k.startswith("HACN_") and k not in ENVIRONMENT):
        print(f"warning: ${name} is not a setting of hacn_core and is ignored; the settings are "
              f"{', '.join(ENVIRONMENT)} (the device is chosen by each study: a GPU when there is one)",
              file=sys.stderr)


def user_errors() -> tuple[type[Exception], ...]:
    """The library's errors about what the user asked for, which the command prints as one
    ``error: <message>`` (their messages name the field or file and the choices) and exits with 2.

    :class:`UsageError` (an unknown experiment or dataset name, ``--where`` that selects
    nothing, a profile the experiment lacks), ``ProfileError``, ``DatasetMissingError``,
    ``DatasetCorruptError`` (e.g. a truncated MNIST file), ``ResultError`` (a stored result
    missing while training is disabled, a corrupt or mismatched stored file) and
    ``TrainConfigError``. Imported when an error occurs, so that ``--help`` does not load torch.
    """
    from hacn_core.engine.config import TrainConfigError
    from hacn_core.engine.data import DatasetCorruptError, DatasetMissingError
    from hacn_core.engine.results import ResultError

    return UsageError, ProfileError, DatasetMissingError, DatasetCorruptError, ResultError, TrainConfigError


def _parse_where(pairs: Sequence[str]) -> dict[str, Any]:
    """``["depth=50", "dataset=Spiral"]`` -> ``{"depth": 50, "dataset": "Spiral"}`` (values read as JSON when they parse)."""
    from hacn_core.engine.results import shorten

    where: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"--where expects KEY=VALUE (e.g. depth=50 or dataset=Spiral), got {shorten(repr(pair))}")
        if key in where:
            raise UsageError(f"--where gives {shorten(key)} twice ({shorten(repr(where[key]))} and "
                             f"{shorten(repr(value))}); give each key once")
        try:
            where[key] = json.loads(value)
        except json.JSONDecodeError:
            where[key] = value
    return where


def _selection(experiment: Experiment, profile: str, pairs: Sequence[str]) -> dict[str, Any]:
    """The parsed ``--where`` of ``run``, once the profile and the selection have been checked.

    An unknown profile, one this experiment lacks, or a ``--where`` that selects no
    configuration (:func:`hacn_core.engine.registry.check_where`) becomes a :class:`UsageError`.
    """
    from hacn_core.engine.registry import check_where

    where = _parse_where(pairs)
    try:
        check_where(experiment.runs(profile), where,
                    context=f"the configurations of {experiment.id!r} at profile {profile!r}")
    except ValueError as err:
        raise UsageError(str(err)) from err
    return where


def _dry_run(experiment: Experiment, profile: str, where: dict[str, Any], time_steps: int = 0,
             json_path: str | None = None, compiled: bool = False, data: bool = False) -> int:
    """``run --dry-run [--data] [--time-steps N] [--json FILE]``: the report of
    :func:`hacn_core.engine.dry_run.dry_run`; with ``--data`` each step reads the data root through the
    study's own loader (:mod:`hacn_core.paper_data`)."""
    from hacn_core.engine.dry_run import dry_run, format_report, report_record
    from hacn_core.engine.results import write_atomic

    if time_steps < 0:
        raise UsageError(f"--time-steps: {time_steps} is negative; allowed: 0 (time nothing) or a step count")
    started = time.monotonic()
    reader = None
    if data:
        from hacn_core.paper_data import data_plan

        try:
            reader = data_plan(experiment.id) if experiment.plan is not None else None
        except KeyError as err:
            raise UsageError(err.args[0]) from err
    report = dry_run(experiment, profile, where=where, progress=lambda line: print(line, file=sys.stderr),
                     time_steps=time_steps, compile=True if compiled else None, data=reader)
    print(format_report(report))
    if json_path:
        record = report_record(report, wall_seconds=time.monotonic() - started)
        write_atomic(Path(json_path), json.dumps(record, indent=1, default=str) + "\n")
    return 0


def _launch(experiment: Experiment, profile: str, store: Any, where: dict[str, Any], args: argparse.Namespace) -> int:
    """``run --launcher local|slurm``: submit the missing runs as submitit jobs (hacn_core.engine.launch)."""
    from hacn_core import catalog
    from hacn_core.engine.launch import (LaunchError, LaunchOptions, check_launcher, check_options, launch,
                                         launch_and_wait)

    try:
        if check_launcher(args.launcher) == "inline":
            raise LaunchError("--gpus, --cpus, --tasks, --time-min, --partition, --max-jobs, --wait and "
                              "--launch-config go with --launcher local or slurm (--max-jobs and --wait: local)")
        if args.stacked:
            raise LaunchError("--stacked trains in this process: use it with --launcher inline")
        options = LaunchOptions.load(args.launch_config, gpus=args.gpus, cpus=args.cpus, tasks=args.tasks,
                                     time_min=args.time_min, partition=args.partition, max_jobs=args.max_jobs)
        check_options(args.launcher, options, wait=args.wait)
        if args.wait:
            return launch_and_wait(experiment, profile, store=store, where=where, threads=args.threads,
                                   options=options, lookup=catalog.get)
        jobs = launch(experiment, profile, launcher=args.launcher, store=store, where=where, threads=args.threads,
                      options=options, lookup=catalog.get)
    except LaunchError as err:
        raise UsageError(str(err)) from err
    if not jobs:
        print(f"{experiment.id} ({profile}): no run to submit in {store.root} (every run is stored or held by a "
              "live job)")
        return 0
    print(f"{experiment.id} ({profile}): submitted {len(jobs)} {args.launcher} job{'s' * (len(jobs) != 1)} "
          f"({', '.join(str(j.job_id) for j in jobs)}); python -m hacn_core status {experiment.id} --profile "
          f"{profile} --results {store.root} follows them")
    return 0


DEBUG_HELP = "on bad input, show the traceback instead of the one-line error"


def _use_checkpoint_every(value: str | None) -> bool:
    """``run --checkpoint-every``: set ``$HACN_CHECKPOINT_EVERY`` (read by every ``fit`` of this process).
    A bad flag or variable prints one line and returns False, before anything trains."""
    from hacn_core.engine.training import CHECKPOINT_EVERY_ENV, TrainConfigError, checkpoint_cadence

    try:
        if value is not None:
            checkpoint_cadence(None, {CHECKPOINT_EVERY_ENV: value}, name="--checkpoint-every")
            os.environ[CHECKPOINT_EVERY_ENV] = value
        checkpoint_cadence(None)
    except TrainConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return False
    return True


def _exits_cleanly(command: Callable[[Sequence[str] | None], int]) -> Callable[[Sequence[str] | None], int]:
    """A run stopped by SIGINT / SIGTERM / SIGHUP (``TrainingInterrupted``: its checkpoint is saved) or a
    damaged checkpoint (``CorruptCheckpointError``) ends with its one-line message on stderr and its exit
    code (130 / 143 / 129, 1), without a traceback; so do a checkpoint that cannot be written (a full disk)
    and an AWNN width update that cannot be made (``WidthUpdateError``: the last checkpoint is kept).
    Output piped into a reader that stops early (``| head``) ends quietly, as Unix tools do."""

    @functools.wraps(command)
    def wrapper(argv: Sequence[str] | None = None) -> int:
        try:
            return command(argv)
        except BrokenPipeError:
            # stdout's reader is gone: point stdout at /dev/null so the flush at exit does not raise again
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 141  # 128 + SIGPIPE, the status a shell gives a tool killed by a closed pipe
        except BaseException as err:
            training = sys.modules.get("hacn_core.engine.training")  # imported by whatever raised these
            if training is not None and isinstance(err, training.TrainingInterrupted):
                print(err, file=sys.stderr)
                return err.exit_code
            if training is not None and isinstance(err, (training.CorruptCheckpointError,
                                                         training.CheckpointWriteError)):
                print(f"error: {_plain(err)}", file=sys.stderr)
                return 1
            mlp = sys.modules.get("hacn_core.awnn.mlp")  # a width update that cannot be made: the run stops
            if mlp is not None and isinstance(err, mlp.WidthUpdateError):
                print(f"error: {_plain(err)}", file=sys.stderr)
                return 1
            raise

    return wrapper


@_exits_cleanly
def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hacn_core", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--debug", action="store_true", help=DEBUG_HELP)
    sub = parser.add_subparsers(dest="command", required=True)
    debug = argparse.ArgumentParser(add_help=False)  # --debug also after the command
    debug.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=DEBUG_HELP)
    sub.add_parser("list", help="list the experiments", parents=[debug])
    run_p = sub.add_parser("run", help="run (or load) every configuration of an experiment", parents=[debug])
    run_p.add_argument("experiment")
    run_p.add_argument("--profile", default=None, help=f"one of {', '.join(PROFILES)} (default: $HACN_PROFILE or book)")
    run_p.add_argument("--where", nargs="*", action="extend", default=[], metavar="KEY=VALUE",
                       help="only configurations matching these (VALUE read as JSON if it parses, else a string)")
    run_p.add_argument("--results", default=None, help="results folder (default: $HACN_RESULTS or results/; for "
                                                      "--profile smoke a temporary folder, never results/)")
    run_p.add_argument("--threads", type=int, default=None,
                       help="torch CPU threads of each run (default: $HACN_THREADS or 1); a run with another count "
                            "is stored under its own hash")
    run_p.add_argument("--stacked", action="store_true",
                       help="train missing runs together with the experiment's stacked engine "
                            "(gates-mnist, gates-keras)")
    run_p.add_argument("--dry-run", action="store_true",
                       help="train nothing: build each distinct model, take one training step on the CPU and print "
                            "parameters, FLOPs per step, optimizer steps and estimated GPU-hours")
    run_p.add_argument("--time-steps", type=int, default=0, metavar="N",
                       help="with --dry-run: also time N training steps of each model at the paper's batch on the "
                            "GPU (or the CPU without one) and give device-hours at that pace")
    run_p.add_argument("--compiled", action="store_true",
                       help="with --time-steps: time the steps under torch.compile (default: as the study trains)")
    run_p.add_argument("--json", default=None, metavar="FILE", help="with --dry-run: also write the report as JSON")
    run_p.add_argument("--data", action="store_true",
                       help="with --dry-run: take each step on a batch read from the data root ($HACN_DATA) through "
                            "the study's own loader, in the published format, instead of synthetic tensors")
    run_p.add_argument("--launcher", default="inline", metavar="{inline,local,slurm}",
                       help="inline (default): train the missing runs here, one after the other; local / slurm: "
                            "submit each as a job through submitit, on this machine or a SLURM cluster "
                            "(hacn_core.engine.launch)")
    for flag, kind, text in (("--gpus", int, "GPUs per job (default 0)"), ("--cpus", int, "CPUs per task (default 1)"),
                             ("--tasks", int, "ranks per job, under torch.distributed (default 1)"),
                             ("--time-min", int, "time limit of a job in minutes (default 1440)"),
                             ("--partition", str, "SLURM partition"),
                             ("--launch-config", str, "TOML file of these job options (the flags win)")):
        run_p.add_argument(flag, type=kind, default=None, help=f"with --launcher local/slurm: {text}")
    run_p.add_argument("--max-jobs", type=int, default=None, metavar="N",
                       help="with --launcher local: at most N of the experiment's jobs at once (default: one per "
                            "missing run, all at once)")
    run_p.add_argument("--wait", action="store_true",
                       help="with --launcher local: stay until no run is missing, submitting the next one when a job "
                            "ends; SIGTERM/SIGINT/SIGHUP pass on to the jobs (each saves its checkpoint), then exit "
                            "128 + the signal")
    run_p.add_argument("--checkpoint-every", default=None, metavar="EVERY",
                       help="checkpoint every 60s, 5m or 500steps (sets $HACN_CHECKPOINT_EVERY; "
                            "default: every epoch or 60 s, whichever comes first)")
    status_p = sub.add_parser("status", help="which runs of an experiment are stored, training or paused, and how far",
                              parents=[debug])
    status_p.add_argument("experiment")
    status_p.add_argument("--profile", default=None, help=f"one of {', '.join(PROFILES)} (default: $HACN_PROFILE or book)")
    status_p.add_argument("--results", default=None, help="results folder (default: $HACN_RESULTS or results/)")
    status_p.add_argument("--threads", type=int, default=None,
                          help="the thread count the runs were started with (default: $HACN_THREADS or 1)")
    ledger_p = sub.add_parser("ledger", help="print the reproduction ledger", parents=[debug])
    ledger_p.add_argument("--results", default=None, help="results folder (default: $HACN_RESULTS or results/)")
    ledger_p.add_argument("--format", default="text", choices=("text", "csv", "json"),
                          help="text (default, for reading), csv or json (one row per paper item, for pandas)")
    fetch_p = sub.add_parser("fetch", help="download a dataset into the data root", parents=[debug])
    fetch_p.add_argument("dataset")
    course_p = sub.add_parser("course", help="write a chapter's course pack: notebook, the stored runs it reads, "
                                             "exercises, the package's wheel and a README", parents=[debug])
    course_p.add_argument("chapter", help="a chapter's notebook name, e.g. hacn_02_mixer")
    course_p.add_argument("dir", help="a new (or empty) folder for the pack")
    course_p.add_argument("--wheel", default=None, help="ship this hacn_core wheel (default: build one from "
                                                        "this checkout)")
    course_p.add_argument("--results", default=None, help="copy runs from here (default: $HACN_RESULTS or results/)")
    args = parser.parse_args(argv)
    _warn_unknown_environment()
    try:
        return _command(args)
    except user_errors() as err:
        if args.debug:
            raise
        print(f"error: {_plain(err)}", file=sys.stderr)
        return 2


def _plain(err: BaseException) -> str:
    """An error's message without terminal escape codes (some libraries colour theirs)."""
    from hacn_core.engine.results import plain_text

    return plain_text(str(err))


def _store(path: str | None, profile: str | None) -> Any:
    """The store ``--results`` names (else the default one); a folder named there or in ``$HACN_RESULTS``
    that does not exist, or a file, is a :class:`UsageError` (it would read as an empty store)."""
    from hacn_core.engine.results import RESULTS_ENV, ResultsStore, default_store

    store = ResultsStore(path) if path else default_store(profile)
    named = "--results" if path else f"${RESULTS_ENV}" if os.environ.get(RESULTS_ENV, "").strip() else None
    if store.root.exists() and not store.root.is_dir():
        raise UsageError(f"{named or 'the results folder'} {store.root} is a file, not a results folder")
    if named is not None and not store.root.exists():
        raise UsageError(f"{named} {store.root} does not exist; give the folder that holds the results "
                         "(one subfolder per experiment)")
    return store


def _check_threads(threads: int | None) -> None:
    """``--threads`` (or ``$HACN_THREADS``) must be a positive integer: checked before anything loads."""
    from hacn_core.engine.results import requested_precision, requested_threads

    requested_threads(threads, "--threads")
    requested_precision()


def _command(args: argparse.Namespace) -> int:
    """Run the parsed command; bad input raises one of :func:`user_errors`."""
    if args.command == "list":
        from hacn_core.catalog import registry

        for exp in registry().values():
            print(f"{exp.id}: {exp.title}")
            for profile in exp.configs:
                print(f"    {profile:6s} {len(exp.runs(profile)):3d} runs  {exp.setting.get(profile, '')}")
        return 0
    if args.command == "run":
        from hacn_core.catalog import get
        from hacn_core.engine.registry import check_where, run_experiment
        from hacn_core.engine.results import SKIPPED_EXIT_CODE, SMOKE_STORE, ResultsStore, default_store, launched_world

        profile = current_profile() if args.profile is None else args.profile
        try:
            experiment = get(args.experiment)
        except KeyError as err:
            raise UsageError(err.args[0]) from err
        where = _selection(experiment, profile, args.where)
        if args.dry_run:
            return _dry_run(experiment, profile, where, args.time_steps, args.json, args.compiled, args.data)
        if args.time_steps or args.json or args.compiled or args.data:
            raise UsageError("--time-steps, --compiled, --json and --data go with --dry-run")
        if not _use_checkpoint_every(args.checkpoint_every):
            return 2
        _check_threads(args.threads)
        if args.stacked and experiment.train_stacked is None:
            raise UsageError(f"--stacked: experiment {experiment.id!r} has no stacked engine; run it without "
                             "--stacked (experiments with one: gates-mnist, gates-keras)")
        store = ResultsStore(args.results) if args.results else default_store(profile)
        if store.root.exists() and not store.root.is_dir():
            raise UsageError(f"--results {store.root} is a file, not a results folder")
        if args.launcher != "inline" or args.launch_config or args.wait or any(
                getattr(args, k) is not None for k in ("gpus", "cpus", "tasks", "time_min", "partition", "max_jobs")):
            return _launch(experiment, profile, store, where, args)
        rank0 = launched_world()[1] == 0  # under torchrun every rank returns rank 0's results: print them once
        if store.root == SMOKE_STORE and rank0:
            print(f"smoke profile: results go to {store.root} (a temporary folder, never results/; "
                  "--results DIR to choose)")
        results = run_experiment(experiment, profile, store=store, where=where, stacked=args.stacked,
                                 threads=args.threads, skip_running=True)
        for result in results if rank0 else ():
            metrics = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in result.metrics.items())
            print(f"{result.config_hash} seed={result.seed}: {metrics}")
        selected = check_where(experiment.runs(profile), where)
        return SKIPPED_EXIT_CODE if len(results) < len(selected) else 0  # skipped: another process holds one
    if args.command == "status":
        from hacn_core.catalog import get
        from hacn_core.engine.profiles import check_profile
        from hacn_core.engine.progress import progress_lines, study_progress

        profile = check_profile(current_profile() if args.profile is None else args.profile)
        try:
            experiment = get(args.experiment)
        except KeyError as err:
            raise UsageError(err.args[0]) from err
        if profile not in experiment.configs:
            raise UsageError(f"experiment {experiment.id!r} has no {profile!r} profile; it has: "
                             f"{', '.join(experiment.configs)}")
        _check_threads(args.threads)
        store = _store(args.results, profile)
        from hacn_core.engine.launch import job_lines

        print(f"{experiment.id} ({profile}) in {store.root}:")
        progress = study_progress(experiment, profile, store, args.threads)
        print("\n".join(progress_lines(progress) + job_lines(store, experiment.id, [p.config_hash for p in progress])))
        return 0
    if args.command == "ledger":
        from hacn_core.ledger import format_ledger, ledger_csv, ledger_json

        store = _store(args.results, None)
        if args.format == "text":
            print(format_ledger(store))
        else:
            sys.stdout.write((ledger_csv if args.format == "csv" else ledger_json)(store))
        return 0
    if args.command == "fetch":
        from hacn_core.engine.data import data_root, ensure_dataset

        try:
            path = ensure_dataset(args.dataset)  # downloads unless $HACN_DOWNLOAD=0
        except ValueError as err:  # an unknown dataset name (the list of known ones is in the message)
            raise UsageError(str(err)) from err
        print(f"{args.dataset} is in {data_root(path)}")
        return 0
    if args.command == "course":
        from hacn_core.course import CourseError, write_pack

        try:
            pack = write_pack(args.chapter, args.dir, wheel=args.wheel, results=args.results)
        except CourseError as err:
            raise UsageError(str(err)) from err
        print(f"{pack.chapter}: {pack.runs} stored runs of {len(pack.experiments)} experiment(s), the notebook, "
              f"its exercises and {pack.wheel} in {pack.folder} (its README.md says how to run it)")
        return 0
    return 2  # pragma: no cover


if __name__ == "__main__":
    sys.exit(main())
