"""Experiments: what a study trains, at which sizes, and what it reproduces.

An :class:`Experiment` is a training function plus, for each scale profile
(:mod:`hacn_core.engine.profiles`), the list of run configurations it stands for
(one per seed and setting), and the :class:`Link` s from its metrics to the paper
items of the ledger. Every run goes through :func:`hacn_core.engine.results.run_or_load`,
so a notebook that asks for an experiment gets the stored result when there is one.

The engine knows no experiment by name: each paper package's ``studies`` define
them, and :mod:`hacn_core.catalog` maps every id to its study module.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tqdm.auto import tqdm

from hacn_core.engine.profiles import PROFILES, check_profile
from hacn_core.engine.results import (
    DistributedRunError,
    PausedElsewhereError,
    PendingResultError,
    ResultsStore,
    RunInProgressError,
    RunResult,
    TrainFn,
    begin_training,
    check_can_store,
    config_hash,
    current_threads,
    default_store,
    filed_config,
    launched_world,
    pinned_threads,
    planned_execution,
    requested_threads,
    run_lock,
    run_or_load,
    shorten,
    store_trained,
    stored_or_pending,
    training_allowed,
    with_earlier_segments,
)


def with_overrides(config: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` with ``overrides`` applied; an override of a key ``config`` lacks is refused by name.

    Every study builds its run configurations through this, so a misspelt key
    fails at once instead of training a configuration nobody asked for.
    """
    unknown = set(overrides) - set(config)
    if unknown:
        raise ValueError(f"unknown configuration keys {sorted(unknown)}; allowed: {', '.join(config)}")
    return dict(config) | dict(overrides)


def matches(config: Mapping[str, Any], where: Mapping[str, Any] | None) -> bool:
    """True when every entry of ``where`` equals the same entry of ``config`` (a missing entry never matches)."""
    return all(k in config and config[k] == v for k, v in (where or {}).items())


class WhereError(ValueError):
    """A ``where`` selection that names no configuration: an unknown key, a value outside the grid, or an
    empty combination. The message lists what the configurations do have."""


def _kind(value: Any) -> str:
    """The JSON kind of a configuration value, for messages: ``number``, ``string``, ``boolean``, ``null``..."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "list"
    if isinstance(value, Mapping):
        return "mapping"
    return type(value).__name__


def _grid_values(configs: Sequence[Mapping[str, Any]], key: str) -> list[Any]:
    """The distinct values ``configs`` take at ``key`` (by ``==``, as :func:`matches` compares), each
    kind sorted where its values are ordered (numbers, strings), otherwise in order of appearance."""
    values: list[Any] = []
    for config in configs:
        if key in config and not any(_kind(v) == _kind(config[key]) and v == config[key] for v in values):
            values.append(config[key])
    kinds = list(dict.fromkeys(_kind(v) for v in values))
    ordered: list[Any] = []
    for kind in kinds:
        group = [v for v in values if _kind(v) == kind]
        ordered += sorted(group) if kind in ("number", "string") else group
    return ordered


def _describe_grid(values: Sequence[Any]) -> str:
    """``2, 10, 20 (numbers)``; ``'Spiral', 'DoubleMoon' (strings); None (null)`` for mixed kinds."""
    parts = []
    for kind in dict.fromkeys(_kind(v) for v in values):
        group = [v for v in values if _kind(v) == kind]
        plural = "null" if kind == "null" else f"{kind}s"
        parts.append(f"{', '.join(repr(v) for v in group)} ({plural})")
    return "; ".join(parts)


def check_where(
    configs: Sequence[Mapping[str, Any]], where: Mapping[str, Any] | None, *, context: str = "the configurations"
) -> list[dict[str, Any]]:
    """The configurations of ``configs`` that match ``where``; a ``where`` that selects none raises.

    Each entry of ``where`` is checked on its own first: a key no configuration has
    is refused with the list of the configurations' keys; a value no configuration
    has at that key with the list of the values the grid has there and their kind,
    so that ``depth='50'`` (a string) against a grid of numbers is explained. Entries
    that exist one by one but never together are refused with how many
    configurations each one matches. An empty or missing ``where`` selects all.
    ``context`` names the configurations in the message (e.g. the experiment and profile).

    Raises :class:`WhereError` (a ``ValueError``).
    """
    selected = [dict(c) for c in configs if matches(c, where)]
    if not where or selected:
        return selected
    if not configs:
        raise WhereError(f"{context} are empty; nothing can match where={shorten(repr(dict(where)))}")
    keys = list(dict.fromkeys(k for c in configs for k in c))
    for key, value in where.items():
        if key not in keys:
            raise WhereError(f"where: unknown key {shorten(repr(key))} for {context}; their keys: {', '.join(keys)}")
        grid = _grid_values(configs, key)
        if not any(matches(c, {key: value}) for c in configs):
            kinds = {_kind(v) for v in grid}
            given = f"{key}={shorten(repr(value))}" + (f" (a {_kind(value)})" if _kind(value) not in kinds else "")
            raise WhereError(f"where: {given} matches none of {context}; the grid has {key} = {_describe_grid(grid)}")
    counts = ", ".join(f"{k}={shorten(repr(v))} matches {sum(matches(c, {k: v}) for c in configs)}"
                       for k, v in where.items())
    raise WhereError(f"where={shorten(repr(dict(where)))} matches none of {context} together; one by one: {counts}")


def select(results: Sequence[RunResult], where: Mapping[str, Any] | None = None, **equal: Any) -> list[RunResult]:
    """The runs of ``results`` whose configuration matches ``where`` and the keyword entries."""
    wanted = {**(where or {}), **equal}
    return [r for r in results if matches(r.config, wanted)]


@dataclass(frozen=True)
class Link:
    """Ties a metric of an experiment's runs to one paper item of the ledger.

    ``where`` selects the runs (configuration entries that must match, e.g.
    ``{"dataset": "Spiral"}``); ``scale`` converts our metric to the paper's unit
    (100 for a fraction shown in percent); ``tolerance`` is the largest absolute
    difference still called "reproduced" when the run used the paper's setting; ``unit`` names the
    metric's unit for an item the paper gives no number (and so no unit) for.
    """

    item: str
    metric: str
    where: Mapping[str, Any] = field(default_factory=dict)
    scale: float = 1.0
    tolerance: float | None = None
    unit: str = ""  # the unit of the scaled metric where the item has none (a figure's quantity): "%", "Γ"


@dataclass(frozen=True)
class Experiment:
    """A named experiment: what to train, at which sizes, and what it reproduces."""

    id: str
    title: str
    train: TrainFn
    configs: Mapping[str, Callable[[], Sequence[Mapping[str, Any]]]]  # profile -> run configurations
    setting: Mapping[str, str]  # profile -> one-line description of data, model and budget
    links: tuple[Link, ...] = ()
    # Optional engine that trains many configurations in one process (e.g. a
    # stacked model): ``train_stacked(configs, checkpoint_dir, progress)`` returns
    # one training output per configuration; ``stack_key`` says which may share it
    # (equal keys), None for a configuration the stacked engine cannot express
    # (with ``stacked=True`` it is trained alone, by ``train``).
    train_stacked: Callable[[list[dict[str, Any]], Any, bool], list[Mapping[str, Any]]] | None = None
    stack_key: Callable[[dict[str, Any]], Any] | None = None
    # Optional dry run (hacn_core.engine.dry_run): ``plan(config)`` says how a configuration
    # trains (model, synthetic batch, loss, optimizer, schedule), one plan per model it trains.
    # None: the experiment trains no model (timings, exact checks).
    # config -> hacn_core.engine.dry_run.DryRunPlan (or several); typed loosely so that the registry does not
    # import the dry run, which imports the registry
    plan: Callable[[dict[str, Any]], Any] | None = None
    # Whether torchrun's ranks can train a run together (through fit's DDP). False for
    # models whose parameters change shape while training (AWNN's adaptive width):
    # DistributedDataParallel cannot follow them.
    distributed: bool = True

    def __post_init__(self) -> None:
        unknown = set(self.configs) - set(PROFILES)
        if unknown:
            raise ValueError(f"experiment {self.id!r}: unknown profiles {sorted(unknown)}; allowed: {PROFILES}")

    def runs(self, profile: str) -> list[dict[str, Any]]:
        """The run configurations of this experiment at ``profile``."""
        profile = check_profile(profile)
        if profile not in self.configs:
            raise ValueError(
                f"experiment {self.id!r} has no {profile!r} profile; it has: {', '.join(self.configs)}"
            )
        return [dict(c) for c in self.configs[profile]()]

    def paper_config_hashes(self) -> frozenset[str]:
        """Hashes of the paper-profile configurations: a stored run is "at the paper's
        setting" exactly when its configuration is one of these."""
        if "paper" not in self.configs:
            return frozenset()
        return frozenset(config_hash(c) for c in self.runs("paper"))


def where_context(experiment: Experiment, profile: str) -> str:
    """How :func:`check_where`'s messages name an experiment's configurations at a profile."""
    return f"the configurations of {experiment.id!r} at profile {profile!r}"


def check_distributed(experiment: Experiment, stacked: bool = False) -> None:
    """Under torchrun (``$WORLD_SIZE > 1``), refuse what its ranks cannot train together.

    Ranks share a run only inside :func:`hacn_core.engine.training.fit`. An
    experiment without a dry-run plan trains no model (timings, exact checks) and
    the stacked engine has its own loop: neither goes through ``fit``; an
    experiment with ``distributed=False`` says it cannot. (A train function that
    does not call ``fit`` although it has a plan is caught when its result is
    stored: :func:`hacn_core.engine.results.current_execution`.)
    """
    world, _ = launched_world()
    if world <= 1:
        return
    if stacked:
        raise DistributedRunError(f"{experiment.id}: the stacked engine trains in one process; run it without "
                                  f"torchrun (WORLD_SIZE={world}) or without --stacked")
    if experiment.plan is None:
        raise DistributedRunError(f"{experiment.id} trains no model through hacn_core.engine.training.fit "
                                  f"(timings or exact computations), so its {world} ranks cannot share it; "
                                  "run it without torchrun")
    if not experiment.distributed:
        raise DistributedRunError(f"{experiment.id} cannot be trained by {world} ranks together (its models change "
                                  "shape while training, which DistributedDataParallel cannot follow); run it "
                                  "without torchrun")


def run_experiment(
    experiment: Experiment,
    profile: str,
    *,
    store: ResultsStore | None = None,
    where: Mapping[str, Any] | None = None,
    allow_train: bool | None = None,
    progress: bool = True,
    stacked: bool = False,
    threads: int | None = None,
    skip_running: bool = False,
) -> list[RunResult]:
    """Run (or load) every configuration of an experiment at ``profile``.

    ``skip_running``: a configuration another live process is training now
    (:class:`~hacn_core.engine.results.RunInProgressError`) is skipped instead of
    raising, so two workers started on the same experiment share its runs (each
    takes the next one nobody holds); so is one paused under another execution
    (:class:`~hacn_core.engine.results.PausedElsewhereError`: other threads, whose
    message says how to resume it). The returned list then lacks those runs.

    ``where`` restricts to the configurations whose entries match it; one that
    matches none raises :class:`WhereError` naming the keys or values the grid has
    (:func:`check_where`).
    ``stacked`` trains the missing ones with the experiment's stacked engine
    (``Experiment.train_stacked``), many runs per process, before loading all.
    ``threads``: torch CPU threads of every run (default ``$HACN_THREADS`` or 1;
    see :func:`hacn_core.engine.results.run_or_load`). ``store`` defaults to
    :func:`hacn_core.engine.results.default_store` (a temporary one for smoke).
    """
    configs = check_where(experiment.runs(profile), where, context=where_context(experiment, profile))
    check_distributed(experiment, stacked)
    store = store or default_store(profile)
    if stacked:
        with pinned_threads(requested_threads(threads)):
            _train_stacked(experiment, configs, store, profile, allow_train, progress)
    results = []
    quiet = not progress or os.environ.get("HACN_QUIET") == "1" or len(configs) < 2
    for config in tqdm(configs, desc=experiment.id, disable=quiet, leave=False):
        try:
            results.append(run_or_load(experiment.id, config, experiment.train, store=store, profile=profile,
                                       allow_train=allow_train, progress=progress, threads=threads))
        except (RunInProgressError, PausedElsewhereError) as err:
            if not skip_running:
                raise
            print(f"skipped: {err}", file=sys.stderr)
    return results


def _train_stacked(experiment: Experiment, configs: Sequence[dict[str, Any]], store: ResultsStore, profile: str,
                   allow_train: bool | None, progress: bool) -> None:
    """Train the missing ``configs`` with the experiment's stacked engine, one group per ``stack_key``
    (those whose key is None are left to :func:`run_or_load`, which trains them one at a time).

    Call it with the threads pinned (:func:`run_experiment` does). A member whose
    file cannot be written is kept pending while the others are stored, and one
    :class:`PendingResultError` names them all.
    """
    if experiment.train_stacked is None or experiment.stack_key is None:
        raise WhereError(f"experiment {experiment.id!r} has no stacked engine; run it without stacked=True "
                         "(--stacked)")
    plan = planned_execution(current_threads())
    missing = [dict(c) for c in configs if stored_or_pending(store, experiment.id, filed_config(c, plan)) is None]
    if not missing or not training_allowed(allow_train):
        return  # run_or_load reports what is missing
    groups: dict[Any, list[dict[str, Any]]] = {}
    for config in missing:
        key = experiment.stack_key(config)
        if key is not None:  # None: the stacked engine cannot train it; run_or_load below trains it alone
            groups.setdefault(key, []).append(config)
    for group in groups.values():
        hashes = sorted(config_hash(filed_config(c, plan)) for c in group)
        check_can_store(store, experiment.id, {"stack": hashes}, profile)
        checkpoint_dir = store.checkpoint_dir(experiment.id, {"stack": hashes})
        with run_lock(checkpoint_dir, f"{experiment.id} (stack of {len(group)} runs)"):
            version = begin_training()
            started = time.perf_counter()
            outs = experiment.train_stacked(group, checkpoint_dir, progress)
            wall, segments = with_earlier_segments(time.perf_counter() - started)
        pending = []
        for config, out in zip(group, outs, strict=True):
            try:
                store_trained(experiment.id, config, out, store=store, profile=profile, version=version, wall_s=wall,
                              segments=segments,
                              engine={"name": "stacked", "members": len(group), "member_hashes": hashes})
            except PendingResultError as err:
                pending.append(err)
        if pending:
            raise PendingResultError("\n".join(str(err) for err in pending), pending[0].pending)
        shutil.rmtree(checkpoint_dir, ignore_errors=True)


def stored_runs(
    experiment: Experiment, profile: str, *, store: ResultsStore | None = None, where: Mapping[str, Any] | None = None
) -> list[RunResult]:
    """The runs of ``profile`` (matching ``where``) that are already stored; never trains.

    For chapters that show part of a long profile (e.g. the paper-setting runs
    that exist so far) next to the profile they render. None stored yet gives an
    empty list; a ``where`` that matches no configuration raises :class:`WhereError`.
    Runs are looked up as :func:`run_or_load` would file them now (``$HACN_THREADS``,
    torchrun's world size).
    """
    store = store or default_store(profile)
    plan = planned_execution()
    selected = check_where(experiment.runs(profile), where, context=where_context(experiment, profile))
    configs = [filed_config(c, plan) for c in selected]
    return [r for r in (store.load(experiment.id, c) for c in configs) if r is not None]


def by_id(*experiments: Experiment) -> dict[str, Experiment]:
    """The experiments keyed by id, in the given order; an id given twice is refused."""
    table: dict[str, Experiment] = {}
    for experiment in experiments:
        if experiment.id in table:
            raise ValueError(f"experiment id {experiment.id!r} is registered twice")
        table[experiment.id] = experiment
    return table
