"""Where a study stands: which runs are stored, which are training or paused, and how far.

A long study (hundreds of CPU-minutes per run, trained by background workers over
several sessions, ``tools/train_background.sh``) is seen through its store:

- a run is **stored** when its result file exists (``<store>/<experiment>/<hash>.json``);
- it is **training** when its checkpoint folder holds a ``run.lock`` of a live process,
  and **paused** when the folder holds a checkpoint but no live owner (the next
  ``python -m hacn_core run`` resumes it from there);
- otherwise it is **not started**.

``python -m hacn_core status EXPERIMENT`` prints this table; nothing is trained or
changed. A stacked engine's checkpoint folder is named after the stack
(``{"stack": [hashes]}``), not after one run, and is listed as such.
"""

from __future__ import annotations

import datetime as _dt
import json
import platform
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hacn_core.engine.checkpoint import CHECKPOINT_NAME
from hacn_core.engine.results import (
    LOCK_NAME,
    ResultsStore,
    pid_alive,
    config_hash,
    filed_config,
    planned_execution,
)

STATES = ("stored", "training", "paused", "not started")


@dataclass(frozen=True)
class RunProgress:
    """One run (or one stack of runs) of a study, as its store shows it."""

    label: str  # the configuration keys that tell this run from the others, or "stack of n runs"
    config_hash: str
    state: str  # one of STATES
    global_step: int | None = None  # optimizer steps done at the last checkpoint
    epoch: int | None = None
    checkpoint_time: _dt.datetime | None = None  # when the last checkpoint was written (UTC)
    owner: str = ""  # "pid 123 on host" while training


def varying_keys(configs: Sequence[Mapping[str, Any]]) -> list[str]:
    """The configuration keys whose value differs between ``configs`` (in first-seen order)."""
    keys: list[str] = []
    for config in configs:
        keys += [k for k in config if k not in keys]
    return [k for k in keys if len({json.dumps(c.get(k), sort_keys=True) for c in configs}) > 1]


def _checkpoint_state(folder: Path) -> dict[str, Any]:
    """State, step, epoch, time and owner of one checkpoint folder (``{}`` when it holds nothing)."""
    out: dict[str, Any] = {}
    ckpt = folder / CHECKPOINT_NAME
    if ckpt.is_file():
        import torch

        try:  # the position is a few integers, but they sit inside the pickled checkpoint
            position = torch.load(ckpt, map_location="cpu", weights_only=False).get("position", {})
        except Exception:  # noqa: BLE001 - being written, or damaged: training resumes or reports it
            position = {}
        out |= {"global_step": position.get("global_step"), "epoch": position.get("epoch"),
                "checkpoint_time": _dt.datetime.fromtimestamp(ckpt.stat().st_mtime, _dt.timezone.utc)}
    lock = folder / LOCK_NAME
    if lock.is_file():
        try:
            owner = json.loads(lock.read_text())
            pid, host = int(owner["pid"]), str(owner["host"])
        except (OSError, ValueError, KeyError, TypeError):
            pid, host = -1, ""
        if pid > 0 and (host != platform.node() or pid_alive(pid)):
            out |= {"state": "training", "owner": f"pid {pid} on {host}"}
    if out and "state" not in out:
        out["state"] = "paused" if "global_step" in out else "not started"
    return out


def study_progress(experiment: Any, profile: str, store: ResultsStore,
                   threads: int | None = None) -> list[RunProgress]:
    """Every run of ``experiment`` at ``profile`` with its state in ``store``, then any stack folders.

    ``experiment`` is a registry :class:`~hacn_core.engine.registry.Experiment`; ``threads``
    the thread count the runs were started with (default: as ``run`` would start them),
    which is part of the hash a run is filed under.
    """
    configs = [dict(c) for c in experiment.runs(profile)]
    keys = varying_keys(configs)
    plan = planned_execution(threads)
    out: list[RunProgress] = []
    known: set[str] = set()
    for config in configs:
        filed = filed_config(config, plan)
        digest = config_hash(filed)
        known.add(digest)
        label = ", ".join(f"{k}={config[k]}" for k in keys if config.get(k) is not None) or "(the only run)"
        if store.path_for(experiment.id, filed).is_file():
            out.append(RunProgress(label, digest, "stored"))
            continue
        state = _checkpoint_state(store.checkpoint_dir(experiment.id, filed))
        out.append(RunProgress(label, digest, state.pop("state", "not started"), **state))
    root = store.root / ".checkpoints" / experiment.id
    for folder in sorted(root.iterdir()) if root.is_dir() else ():
        if folder.name not in known and folder.is_dir():
            state = _checkpoint_state(folder)
            if state:  # a stack (or a run of another profile or thread count) with something in it
                out.append(RunProgress("stack or other run", folder.name, state.pop("state"), **state))
    return out


def progress_lines(progress: Sequence[RunProgress], now: _dt.datetime | None = None) -> list[str]:
    """The status table as text: a summary line, then one line per run that is not stored."""
    now = now or _dt.datetime.now(_dt.timezone.utc)
    runs = [p for p in progress if p.label != "stack or other run"]
    counts = {s: sum(p.state == s for p in runs) for s in STATES}
    lines = [f"{counts['stored']} of {len(runs)} runs stored; {counts['training']} training, "
             f"{counts['paused']} paused, {counts['not started']} not started"]
    for p in progress:
        if p.state == "stored":
            continue
        where = ""
        if p.global_step is not None:
            age = (now - p.checkpoint_time).total_seconds() / 60 if p.checkpoint_time else float("nan")
            where = f" at step {p.global_step:,} (epoch {p.epoch}), checkpoint {age:.0f} min ago"
        owner = f", {p.owner}" if p.owner else ""
        lines.append(f"  {p.state:11s} {p.config_hash}  {p.label}{where}{owner}")
    return lines


__all__ = ["STATES", "RunProgress", "progress_lines", "study_progress", "varying_keys"]
