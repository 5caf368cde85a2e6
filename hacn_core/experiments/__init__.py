"""The registry of runnable experiments.

An :class:`Experiment` is a training function plus, for each scale profile
(``hacn_core.profiles``), the list of run configurations it stands for (one per
seed and setting), and the paper items (``hacn_core.paper_items``) its metrics
reproduce. Everything goes through :func:`hacn_core.results.run_or_load`, so a
notebook that asks for an experiment gets the stored result when there is one.

Experiment modules register themselves on import; :func:`registry` imports them
all. Run one from the shell with ``python -m hacn_core run <id> --profile book``.
"""

from __future__ import annotations

import importlib
import os
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tqdm.auto import tqdm

from hacn_core.profiles import PROFILES, check_profile
from hacn_core.results import (
    ResultsStore,
    RunResult,
    TrainFn,
    begin_training,
    config_hash,
    run_or_load,
    store_trained,
    training_allowed,
)

# Modules that define experiments; each calls ``register`` at import time.
EXPERIMENT_MODULES: tuple[str, ...] = (
    "hacn_core.experiments.awnn_tabular",
    "hacn_core.experiments.exact_checks",
    "hacn_core.experiments.gates_mnist",
    "hacn_core.experiments.awnn_init",
    "hacn_core.experiments.awnn_adaptive",
    "hacn_core.experiments.hacn_mixer",
    "hacn_core.experiments.gates_cifar",
    "hacn_core.experiments.awnn_compress",
    "hacn_core.experiments.awnn_ablations",
    "hacn_core.experiments.awnn_cost",
)


@dataclass(frozen=True)
class Link:
    """Ties a metric of an experiment's runs to one paper item of the ledger.

    ``where`` selects the runs (configuration entries that must match, e.g.
    ``{"dataset": "Spiral"}``); ``scale`` converts our metric to the paper's unit
    (100 for a fraction shown in percent); ``tolerance`` is the largest absolute
    difference still called "reproduced" when the run used the paper's setting.
    """

    item: str
    metric: str
    where: Mapping[str, Any] = field(default_factory=dict)
    scale: float = 1.0
    tolerance: float | None = None


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
    # one training output per configuration; ``stack_key`` says which may share it.
    train_stacked: Callable[[list[dict[str, Any]], Any, bool], list[Mapping[str, Any]]] | None = None
    stack_key: Callable[[dict[str, Any]], Any] | None = None

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


_REGISTRY: dict[str, Experiment] = {}


def register(experiment: Experiment) -> Experiment:
    """Add ``experiment`` to the registry (ids are unique)."""
    if experiment.id in _REGISTRY and _REGISTRY[experiment.id] is not experiment:
        raise ValueError(f"experiment id {experiment.id!r} is registered twice")
    unknown = set(experiment.configs) - set(PROFILES)
    if unknown:
        raise ValueError(f"experiment {experiment.id!r}: unknown profiles {sorted(unknown)}; allowed: {PROFILES}")
    _REGISTRY[experiment.id] = experiment
    return experiment


def registry() -> dict[str, Experiment]:
    """Every registered experiment, by id."""
    for module in EXPERIMENT_MODULES:
        importlib.import_module(module)
    return dict(sorted(_REGISTRY.items()))


def get(experiment_id: str) -> Experiment:
    """The experiment named ``experiment_id``; the error lists the known ids."""
    experiments = registry()
    try:
        return experiments[experiment_id]
    except KeyError:
        raise KeyError(f"unknown experiment {experiment_id!r}; known: {', '.join(experiments)}") from None


def run(
    experiment_id: str,
    profile: str,
    *,
    store: ResultsStore | None = None,
    where: Mapping[str, Any] | None = None,
    allow_train: bool | None = None,
    progress: bool = True,
    stacked: bool = False,
) -> list[RunResult]:
    """Run (or load) every configuration of an experiment at ``profile``.

    ``where`` restricts to the configurations whose entries match it.
    ``stacked`` trains the missing ones with the experiment's stacked engine
    (``Experiment.train_stacked``), many runs per process, before loading all.
    """
    experiment = get(experiment_id)
    configs = [c for c in experiment.runs(profile) if all(c.get(k) == v for k, v in (where or {}).items())]
    if stacked:
        _train_stacked(experiment, configs, store or ResultsStore(), profile, allow_train, progress)
    results = []
    quiet = not progress or os.environ.get("HACN_QUIET") == "1" or len(configs) < 2
    for config in tqdm(configs, desc=experiment_id, disable=quiet, leave=False):
        results.append(
            run_or_load(
                experiment.id,
                config,
                experiment.train,
                store=store,
                profile=profile,
                allow_train=allow_train,
                progress=progress,
            )
        )
    return results


def _train_stacked(experiment: Experiment, configs: Sequence[dict[str, Any]], store: ResultsStore, profile: str,
                   allow_train: bool | None, progress: bool) -> None:
    """Train the missing ``configs`` with the experiment's stacked engine, one group per ``stack_key``."""
    if experiment.train_stacked is None or experiment.stack_key is None:
        raise ValueError(f"experiment {experiment.id!r} has no stacked engine; run it without stacked=True")
    missing = [dict(c) for c in configs if store.load(experiment.id, c) is None]
    if not missing or not training_allowed(allow_train):
        return  # run_or_load reports what is missing
    groups: dict[Any, list[dict[str, Any]]] = {}
    for config in missing:
        groups.setdefault(experiment.stack_key(config), []).append(config)
    for group in groups.values():
        hashes = sorted(config_hash(c) for c in group)
        checkpoint_dir = store.checkpoint_dir(experiment.id, {"stack": hashes})
        version = begin_training()
        started = time.perf_counter()
        outs = experiment.train_stacked(group, checkpoint_dir, progress)
        wall = time.perf_counter() - started
        for config, out in zip(group, outs, strict=True):
            store_trained(experiment.id, config, out, store=store, profile=profile, version=version, wall_s=wall,
                          engine={"name": "stacked", "members": len(group), "member_hashes": hashes})
        shutil.rmtree(checkpoint_dir, ignore_errors=True)


def stored(
    experiment_id: str, profile: str, *, store: ResultsStore | None = None, where: Mapping[str, Any] | None = None
) -> list[RunResult]:
    """The runs of ``profile`` (matching ``where``) that are already stored; never trains.

    For chapters that show part of a long profile (e.g. the paper-setting runs
    that exist so far) next to the profile they render.
    """
    experiment = get(experiment_id)
    store = store or ResultsStore()
    configs = [c for c in experiment.runs(profile) if all(c.get(k) == v for k, v in (where or {}).items())]
    return [r for r in (store.load(experiment.id, c) for c in configs) if r is not None]


def cell_means(results: Sequence[RunResult], metric: str, keys: Sequence[str]) -> dict[tuple, float]:
    """Mean of ``metric`` over the runs of each cell, a cell being the values of ``keys`` in the config.

    Runs without ``metric`` are skipped (e.g. ``mean_k`` of ungated networks).
    """
    values: dict[tuple, list[float]] = {}
    for r in results:
        if metric in r.metrics:
            values.setdefault(tuple(r.config[k] for k in keys), []).append(float(r.metrics[metric]))
    return {cell: sum(v) / len(v) for cell, v in values.items()}


class ClaimTable:
    """Rows of a chapter's "the paper's claims, checked on our runs" table.

    ``add(claim, source, evidence, holds)`` records one claim: where the paper
    makes it, our evidence, and whether it holds (``None`` when the runs cannot
    tell); ``frame()`` is the DataFrame the notebook shows.
    """

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []

    def add(self, claim: str, source: str, evidence: str, holds: bool | None) -> None:
        self.rows.append({"claim": claim, "paper": source, "ours": evidence, "holds": holds})

    def frame(self):
        import pandas as pd

        return pd.DataFrame.from_records(self.rows, columns=["claim", "paper", "ours", "holds"])
