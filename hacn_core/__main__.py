"""Command line: ``python -m hacn_core {list,run,ledger,fetch}``.

    python -m hacn_core list                      # experiments and their settings
    python -m hacn_core run awnn-tabular-fixed --profile book
    python -m hacn_core run awnn-tabular-fixed --profile smoke --where dataset=Spiral
    python -m hacn_core run gates-mnist --profile paper --where depth=50 --stacked
    python -m hacn_core run gates-cifar --profile paper --dry-run   # cost of a profile, trains nothing
    python -m hacn_core run gates-mnist --profile book --checkpoint-every 5m     # or 500steps, 60s
    python -m hacn_core ledger                    # the reproduction ledger (text)
    python -m hacn_core ledger --format csv > ledger.csv            # or json: for pandas and scripts
    python -m hacn_core fetch MNIST               # download a dataset into the data root

``run --dry-run`` stores nothing. For every group of configurations that build the
same model on the same input shape it builds the study's model, takes one training
step (forward, loss, backward, optimizer step; AWNN: the ELBO and the width update)
on synthetic data on the CPU, at a reduced batch when the paper's would take more
than a few seconds there, and prints the parameter count, the FLOPs of one step at
the paper's batch (``torch.utils.flop_counter.FlopCounterMode`` at the batch it ran
at, scaled linearly), the optimizer steps of the schedule (epochs x steps per
epoch) and an estimate of GPU-hours on an assumption it prints
(``hacn_core.engine.dry_run``). Experiments that train no model say so.

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
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from hacn_core.engine.profiles import PROFILES, current_profile

if TYPE_CHECKING:
    from hacn_core.engine.registry import Experiment


def _parse_where(pairs: Sequence[str]) -> dict:
    where = {}
    for pair in pairs:
        if "=" not in pair:
            raise SystemExit(f"--where expects key=value, got {pair!r}")
        key, value = pair.split("=", 1)
        try:
            where[key] = json.loads(value)
        except json.JSONDecodeError:
            where[key] = value
    return where


def _dry_run(experiment: Experiment, profile: str, where: dict[str, Any]) -> int:
    """``run --dry-run``: the report of :func:`hacn_core.engine.dry_run.dry_run`, or one line on bad input."""
    from hacn_core.engine.dry_run import dry_run, format_report

    try:
        experiment.runs(profile)
    except ValueError as err:  # an unknown profile, or one this experiment lacks
        print(f"error: {err}", file=sys.stderr)
        return 2
    report = dry_run(experiment, profile, where=where, progress=lambda line: print(line, file=sys.stderr))
    print(format_report(report))
    return 0


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
    (130 / 143, 1), without a traceback."""

    @functools.wraps(command)
    def wrapper(argv: Sequence[str] | None = None) -> int:
        try:
            return command(argv)
        except BaseException as err:
            training = sys.modules.get("hacn_core.engine.training")  # imported by whatever raised these
            if training is not None and isinstance(err, training.TrainingInterrupted):
                print(err, file=sys.stderr)
                return err.exit_code
            if training is not None and isinstance(err, training.CorruptCheckpointError):
                print(f"error: {err}", file=sys.stderr)
                return 1
            raise

    return wrapper


@_exits_cleanly
def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hacn_core", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="list the experiments")
    run_p = sub.add_parser("run", help="run (or load) every configuration of an experiment")
    run_p.add_argument("experiment")
    run_p.add_argument("--profile", default=None, help=f"one of {', '.join(PROFILES)} (default: $HACN_PROFILE or book)")
    run_p.add_argument("--where", nargs="*", default=[], metavar="KEY=VALUE", help="only configurations matching these")
    run_p.add_argument("--results", default=None, help="results folder (default: $HACN_RESULTS or results/)")
    run_p.add_argument("--stacked", action="store_true",
                       help="train missing runs together with the experiment's stacked engine (gates-mnist)")
    run_p.add_argument("--dry-run", action="store_true",
                       help="train nothing: build each distinct model, take one training step on the CPU and print "
                            "parameters, FLOPs per step, optimizer steps and estimated GPU-hours")
    run_p.add_argument("--checkpoint-every", default=None, metavar="EVERY",
                       help="checkpoint every 60s, 5m or 500steps (sets $HACN_CHECKPOINT_EVERY; "
                            "default: every epoch or 60 s, whichever comes first)")
    ledger_p = sub.add_parser("ledger", help="print the reproduction ledger")
    ledger_p.add_argument("--results", default=None, help="results folder (default: $HACN_RESULTS or results/)")
    ledger_p.add_argument("--format", default="text", choices=("text", "csv", "json"),
                          help="text (default, for reading), csv or json (one row per paper item, for pandas)")
    fetch_p = sub.add_parser("fetch", help="download a dataset into the data root")
    fetch_p.add_argument("dataset")
    args = parser.parse_args(argv)

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
        from hacn_core.engine.results import ResultsStore

        profile = current_profile() if args.profile is None else args.profile
        try:
            experiment = get(args.experiment)
        except KeyError as err:
            print(f"error: {err.args[0]}", file=sys.stderr)
            return 2
        if args.dry_run:
            return _dry_run(experiment, profile, _parse_where(args.where))
        if not _use_checkpoint_every(args.checkpoint_every):
            return 2
        results = run_experiment(experiment, profile, store=ResultsStore(args.results),
                                 where=_parse_where(args.where), stacked=args.stacked)
        for result in results:
            metrics = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in result.metrics.items())
            print(f"{result.config_hash} seed={result.seed}: {metrics}")
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

        path = ensure_dataset(args.dataset, download=True)
        print(f"{args.dataset} is in {data_root(path)}")
        return 0
    return 2  # pragma: no cover


if __name__ == "__main__":
    sys.exit(main())
