"""Where a study stands: which runs are stored, which are training or paused, and how far.

A long study (hundreds of CPU-minutes per run, trained by background workers over
several sessions, ``tools/train_background.sh``) is seen through its store:

- a run is **stored** when its result file exists (``<store>/<experiment>/<hash>.json``);
- it is **training** when its checkpoint folder holds a ``run.lock`` of a live process,
  and **paused** when the folder holds a checkpoint but no live owner (the next
  ``python -m hacn_core run`` resumes it from there);
- it is **damaged** when its result file or its checkpoint cannot be read (the line
  says why; ``run`` stops on it with the way out);
- otherwise it is **not started**.

A run paused under another execution (started with other ``--threads``, another
``$HACN_PRECISION`` or under torchrun, all part of its hash) is listed as paused, with
the flags that resume it. A live worker's lock shows its age.

``python -m hacn_core status EXPERIMENT`` prints this table; nothing is trained or
changed. A run with a checkpoint also shows its planned steps and how long it has left
at its own pace so far (the checkpoint's wall time over its steps, evaluation included;
early stopping can only shorten it); the summary line gives the median wall time of the
stored runs, what one more costs. A stacked engine's checkpoint folder is named after
the stack (``{"stack": [hashes]}``), not after one run, and is listed as such.
"""

from __future__ import annotations

import datetime as _dt
import json
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hacn_core.engine.checkpoint import CHECKPOINT_NAME, load_checkpoint
from hacn_core.engine.processes import lock_age, lock_holder_alive, lock_owner, plain_text
from hacn_core.engine.results import (
    LOCK_NAME,
    ResultError,
    ResultsStore,
    config_hash,
    filed_config,
    paused_elsewhere,
    planned_execution,
)

STATES = ("stored", "training", "paused", "damaged", "not started")


@dataclass(frozen=True)
class RunProgress:
    """One run (or one stack of runs) of a study, as its store shows it."""

    label: str  # the configuration keys that tell this run from the others, or "stack of n runs"
    config_hash: str
    state: str  # one of STATES
    global_step: int | None = None  # optimizer steps done at the last checkpoint
    epoch: int | None = None
    checkpoint_time: _dt.datetime | None = None  # when the last checkpoint was written (UTC)
    owner: str = ""  # "pid 123 on host, lock taken 5 min ago" while training; what is wrong when damaged
    total_steps: int | None = None  # the run's planned optimizer steps (an upper bound with early stopping)
    wall_time_s: float | None = None  # training wall time up to the checkpoint; for a stored run, the whole run

    @property
    def seconds_left(self) -> float | None:
        """Wall time the run still needs at its own pace so far (``None`` when that is unknown)."""
        if not (self.total_steps and self.global_step and self.wall_time_s):
            return None
        return max(self.total_steps - self.global_step, 0) * self.wall_time_s / self.global_step


def varying_keys(configs: Sequence[Mapping[str, Any]]) -> list[str]:
    """The configuration keys whose value differs between ``configs`` (in first-seen order)."""
    keys: list[str] = []
    for config in configs:
        keys += [k for k in config if k not in keys]
    return [k for k in keys if len({json.dumps(c.get(k), sort_keys=True) for c in configs}) > 1]


def _total_steps(position: Mapping[str, Any], config: Mapping[str, Any] | None) -> int | None:
    """Planned steps of a checkpoint written before ``position`` held them: epochs x steps per epoch,
    the latter read off a position past the first epoch (``None`` within it)."""
    epoch, in_epoch, step = position.get("epoch"), position.get("step_in_epoch"), position.get("global_step")
    if not (config and config.get("epochs") and epoch and in_epoch is not None and step is not None):
        return None
    return int(config["epochs"]) * ((int(step) - int(in_epoch)) // int(epoch))


def _checkpoint_state(folder: Path) -> dict[str, Any]:
    """State, step, epoch, time and owner of one checkpoint folder (``{}`` when it holds nothing)."""
    out: dict[str, Any] = {}
    ckpt = folder / CHECKPOINT_NAME
    if ckpt.exists():
        try:  # the position is a few integers, but they sit inside the checkpoint (written atomically)
            if ckpt.is_dir():
                raise IsADirectoryError("a folder, not a checkpoint file")
            saved = load_checkpoint(ckpt, map_location="cpu")
            position = saved["position"]
            out |= {"global_step": int(position["global_step"]), "epoch": position.get("epoch"),
                    "total_steps": position.get("total_steps", _total_steps(position, saved.get("config"))),
                    "wall_time_s": saved.get("wall_time_s"),
                    "checkpoint_time": _dt.datetime.fromtimestamp(ckpt.stat().st_mtime, _dt.timezone.utc)}
        except Exception as err:  # noqa: BLE001 - torch.load raises many types on a damaged file
            first = (plain_text(str(err)).strip().splitlines() or [""])[0][:120]
            out |= {"state": "damaged", "owner": f"checkpoint {ckpt} cannot be resumed from "
                                                  f"({type(err).__name__}: {first}); `run` says how to move it aside"}
    lock = folder / LOCK_NAME
    if lock.is_file():
        owner = lock_owner(lock)
        if owner is not None and lock_holder_alive(owner):
            out |= {"state": "training", "owner": f"pid {owner['pid']} on {owner['host']}, {lock_age(owner)}"}
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
        path = store.path_for(experiment.id, filed)
        if path.exists():
            try:  # checked as a chapter reads it: intact, filed under its own hash, numbers match the checksum
                wall = store.read(path).provenance.get("wall_time_s")
            except ResultError as err:
                out.append(RunProgress(label, digest, "damaged", owner=f"result {_first_line(err)}"))
                continue
            out.append(RunProgress(label, digest, "stored", wall_time_s=wall))
            continue
        state = _checkpoint_state(store.checkpoint_dir(experiment.id, filed))
        if not state:  # paused under other threads, precision or ranks: say how to resume it
            for folder, execution in paused_elsewhere(store, experiment.id, config, plan)[:1]:
                state = _checkpoint_state(folder)
                if state.get("state") == "paused":
                    known.add(folder.name)
                    state["owner"] = f"under {execution.flags()}: resume it with {execution.flags()}"
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
    damaged = f", {counts['damaged']} damaged" if counts["damaged"] else ""
    lines = [f"{counts['stored']} of {len(runs)} runs stored; {counts['training']} training, "
             f"{counts['paused']} paused{damaged}, {counts['not started']} not started"]
    walls = sorted(p.wall_time_s for p in runs if p.state == "stored" and p.wall_time_s)
    if walls:
        lines[0] += f"; a stored run took {_duration(statistics.median(walls))} (median wall time)"
    for p in progress:
        if p.state == "stored":
            continue
        where = ""
        if p.global_step is not None:
            age = (now - p.checkpoint_time).total_seconds() / 60 if p.checkpoint_time else float("nan")
            of = f" of {p.total_steps:,}" if p.total_steps else ""
            where = f" at step {p.global_step:,}{of} (epoch {p.epoch}), checkpoint {age:.0f} min ago"
            if p.seconds_left is not None:
                where += f", about {_duration(p.seconds_left)} left at its pace so far"
        owner = f", {p.owner}" if p.owner else ""
        lines.append(f"  {p.state:11s} {p.config_hash}  {p.label}{where}{owner}")
    return lines


def _first_line(err: BaseException, limit: int = 200) -> str:
    return (str(err).strip().splitlines() or [""])[0][:limit]


def _duration(seconds: float) -> str:
    """``"42 min"`` or ``"3.1 h"``."""
    return f"{seconds / 60:.0f} min" if seconds < 5400 else f"{seconds / 3600:.1f} h"


__all__ = ["STATES", "RunProgress", "progress_lines", "study_progress", "varying_keys"]
