"""Command line: ``python -m hacn_core {list,run,ledger,fetch}``.

    python -m hacn_core list                      # experiments and their settings
    python -m hacn_core run awnn-tabular-fixed --profile book
    python -m hacn_core run awnn-tabular-fixed --profile smoke --where dataset=Spiral
    python -m hacn_core run gates-mnist --profile paper --where depth=50 --stacked
    torchrun --nproc_per_node 2 -m hacn_core run gates-mnist --profile book   # ranks train each run together
    python -m hacn_core run gates-cifar --profile paper --dry-run   # cost of a profile, trains nothing
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
otherwise (``dataset=Spiral``; ``depth='"50"'`` forces the string "50"). A key the
configurations lack, a value outside their grid, or entries that never occur together
stop the command with the keys or values the grid has.

Bad input (an unknown experiment, profile or dataset, a ``--where`` that selects
nothing, a stored result that is missing while training is disabled) prints one
``error: ...`` message to stderr and exits with status 2; ``--debug`` shows the
traceback instead. Any other exception shows its traceback as usual.

``run`` checkpoints every epoch or every 60 s, whichever comes first (about 1% of
the time at most); ``--checkpoint-every`` (``60s``, ``5m``, ``500steps`` or ``500``; it sets
``$HACN_CHECKPOINT_EVERY``) picks another cadence. Ctrl-C (SIGINT) or SIGTERM saves a
checkpoint, prints one line and exits with 130 / 143; the same command resumes.

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
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from hacn_core.engine.profiles import PROFILES, ProfileError, current_profile

if TYPE_CHECKING:
    from hacn_core.engine.registry import Experiment


class UsageError(Exception):
    """Bad input on the command line: printed as one ``error:`` message, exit status 2."""


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
    where = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"--where expects KEY=VALUE (e.g. depth=50 or dataset=Spiral), got {pair!r}")
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
             json_path: str | None = None, compiled: bool = False) -> int:
    """``run --dry-run [--time-steps N] [--json FILE]``: the report of :func:`hacn_core.engine.dry_run.dry_run`."""
    from hacn_core.engine.dry_run import dry_run, format_report, report_record
    from hacn_core.engine.results import write_atomic

    if time_steps < 0:
        raise UsageError(f"--time-steps: {time_steps} is negative; allowed: 0 (time nothing) or a step count")
    started = time.monotonic()
    report = dry_run(experiment, profile, where=where, progress=lambda line: print(line, file=sys.stderr),
                     time_steps=time_steps, compile=True if compiled else None)
    print(format_report(report))
    if json_path:
        record = report_record(report, wall_seconds=time.monotonic() - started)
        write_atomic(Path(json_path), json.dumps(record, indent=1, default=str) + "\n")
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
    """A run stopped by SIGINT / SIGTERM (``TrainingInterrupted``: its checkpoint is saved) or a damaged
    checkpoint (``CorruptCheckpointError``) ends with its one-line message on stderr and its exit code
    (130 / 143, 1), without a traceback; so does a checkpoint that cannot be written (a full disk).
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
                print(f"error: {err}", file=sys.stderr)
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
    run_p.add_argument("--where", nargs="*", default=[], metavar="KEY=VALUE",
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
    try:
        return _command(args)
    except user_errors() as err:
        if args.debug:
            raise
        print(f"error: {err}", file=sys.stderr)
        return 2


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
        from hacn_core.engine.registry import run_experiment
        from hacn_core.engine.results import SMOKE_STORE, ResultsStore, default_store, launched_world

        profile = current_profile() if args.profile is None else args.profile
        try:
            experiment = get(args.experiment)
        except KeyError as err:
            raise UsageError(err.args[0]) from err
        where = _selection(experiment, profile, args.where)
        if args.dry_run:
            return _dry_run(experiment, profile, where, args.time_steps, args.json, args.compiled)
        if args.time_steps or args.json or args.compiled:
            raise UsageError("--time-steps, --compiled and --json go with --dry-run")
        if not _use_checkpoint_every(args.checkpoint_every):
            return 2
        store = ResultsStore(args.results) if args.results else default_store(profile)
        rank0 = launched_world()[1] == 0  # under torchrun every rank returns rank 0's results: print them once
        if store.root == SMOKE_STORE and rank0:
            print(f"smoke profile: results go to {store.root} (a temporary folder, never results/; "
                  "--results DIR to choose)")
        results = run_experiment(experiment, profile, store=store, where=where, stacked=args.stacked,
                                 threads=args.threads, skip_running=True)
        for result in results if rank0 else ():
            metrics = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in result.metrics.items())
            print(f"{result.config_hash} seed={result.seed}: {metrics}")
        return 0
    if args.command == "status":
        from hacn_core.catalog import get
        from hacn_core.engine.profiles import check_profile
        from hacn_core.engine.progress import progress_lines, study_progress
        from hacn_core.engine.results import ResultsStore, default_store

        profile = check_profile(current_profile() if args.profile is None else args.profile)
        try:
            experiment = get(args.experiment)
        except KeyError as err:
            raise UsageError(err.args[0]) from err
        if profile not in experiment.configs:
            raise UsageError(f"experiment {experiment.id!r} has no {profile!r} profile; it has: "
                             f"{', '.join(experiment.configs)}")
        store = ResultsStore(args.results) if args.results else default_store(profile)
        print(f"{experiment.id} ({profile}) in {store.root}:")
        print("\n".join(progress_lines(study_progress(experiment, profile, store, args.threads))))
        return 0
    if args.command == "ledger":
        from hacn_core.engine.results import ResultsStore
        from hacn_core.ledger import format_ledger, ledger_csv, ledger_json

        store = ResultsStore(args.results)
        if args.format == "text":
            print(format_ledger(store))
        else:
            sys.stdout.write((ledger_csv if args.format == "csv" else ledger_json)(store))
        return 0
    if args.command == "fetch":
        from hacn_core.engine.data import data_root, ensure_dataset

        try:
            path = ensure_dataset(args.dataset, download=True)
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
