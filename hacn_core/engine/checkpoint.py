"""Checkpoints: atomic save and load, every random state, the segments of a resumed run.

A checkpoint of :func:`hacn_core.engine.training.fit` holds the model, the optimizer,
the Python / NumPy / torch / CUDA random states, the position in training, the curves
so far and the wall time of every earlier segment, so a run killed anywhere and
started again with the same command ends with the same parameters. A checkpoint that
cannot be read raises :class:`CorruptCheckpointError` naming the file and how to move
it aside (or ``$HACN_DISCARD_BAD_CHECKPOINT=1`` to do so and restart). Loops that do
not go through ``fit`` (the stacked engine of the MNIST gates study) use the same
functions.
"""

from __future__ import annotations

import contextlib
import os
import random
import shlex
import shutil
import tempfile
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from hacn_core.engine.config import invalid
from hacn_core.engine.processes import plain_text, remove_stale_temporaries, temporary_name

DISCARD_BAD_CHECKPOINT_ENV = "HACN_DISCARD_BAD_CHECKPOINT"
CHECKPOINT_NAME = "last.pt"
NONFINITE_NAME = "nonfinite.pt"
# What fit's checkpoint holds (save_training_checkpoint's keys and fit's extras): a file without one is damaged.
_CHECKPOINT_KEYS = ("model", "optimizer", "rng", "position", "curves", "wall_time_s", "config", "schedule",
                    "epoch_loss")


class CorruptCheckpointError(RuntimeError):
    """``last.pt`` cannot be resumed from: cut short, or not a checkpoint of :func:`fit`.

    ``path`` is the file; the message gives the ``mv`` command that moves it
    aside and names ``$HACN_DISCARD_BAD_CHECKPOINT``, which makes ``fit`` do so.
    """

    def __init__(self, path: Path, reason: str) -> None:
        reason = plain_text(reason)  # torch's unpickling errors carry terminal colour codes
        self.path, self.reason = path, reason
        aside = path.with_name(path.name + ".corrupt")
        super().__init__(
            f"cannot resume from {path}: {reason}. fit writes its checkpoints atomically, so this file was damaged "
            f"on disk, copied incompletely or put there by something else. Either move it aside and start this run "
            f"again from step 0:  mv {shlex.quote(str(path))} {shlex.quote(str(aside))}  -- or set "
            f"{DISCARD_BAD_CHECKPOINT_ENV}=1 to have fit move it aside and start again by itself.")

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self.path, self.reason)


class CheckpointWriteError(OSError):
    """A checkpoint could not be written (a full disk, a folder that became read-only); names the file."""


def save_checkpoint(obj: Any, path: str | os.PathLike) -> Path:
    """``torch.save`` to a temporary file in the same folder, fsync, then ``os.replace``:
    a reader sees the old checkpoint or the new one, never half of one.

    The temporary file names its writer (``.last.pt.tmp-<host>-<pid>-``); one left by
    a writer killed mid-write is removed before the next write, so a run killed many
    times keeps one full-size copy at most besides its checkpoint.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(path.parent, path.name)
    tmp = path.with_name(temporary_name(path))
    try:
        with open(tmp, "wb") as f:
            torch.save(obj, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except (OSError, RuntimeError) as err:  # a full disk surfaces from torch.save as a RuntimeError
        tmp.unlink(missing_ok=True)
        free = shutil.disk_usage(path.parent).free if path.parent.exists() else None
        room = f"; {free / 2**20:.0f} MiB free there" if free is not None else ""
        raise CheckpointWriteError(f"could not write the checkpoint {path} ({type(err).__name__}: "
                                   f"{str(err).strip().splitlines()[0][:160] if str(err).strip() else 'no detail'}"
                                   f"{room}); the previous checkpoint, if any, is unchanged. Free some space or "
                                   f"point HACN_RESULTS at another disk, then run the same command again") from err
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def load_checkpoint(path: str | os.PathLike, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Load a checkpoint written by :func:`fit` (safe ``weights_only`` unpickling).

    Keys (:func:`save_training_checkpoint`): ``model`` (state dict), ``optimizer``,
    ``rng``, ``position`` (``epoch``, ``step_in_epoch``, ``global_step``,
    ``finished``), ``curves``, ``wall_time_s``; from :func:`fit` also ``schedule``,
    ``scaler``, ``config``, ``epoch_loss``, ``callbacks``, ``world_size`` and
    ``segments`` (the processes the run has trained in so far, this one included).
    """
    return torch.load(Path(path), map_location=map_location, weights_only=True)


def save_training_checkpoint(path: str | os.PathLike, model: nn.Module, optimizer: torch.optim.Optimizer, *,
                             position: Mapping[str, Any], curves: Mapping[str, list], wall_time_s: float,
                             rngs: Sequence[Mapping[str, Any]] | None = None, **extra: Any) -> Path:
    """Checkpoint a training loop atomically (:func:`save_checkpoint`); returns the path.

    Stores the model and optimizer states, the random states (``rngs``: one per
    rank, default this process's :func:`rng_state`), the loop's ``position``
    (``epoch``, ``step_in_epoch``, ``global_step``, ``finished``), its curves and
    wall time, and the caller's ``extra`` entries. The inverse is
    :func:`load_checkpoint` then :func:`restore_training_checkpoint`.
    """
    return save_checkpoint({
        "format": 1,
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "rng": list(rngs) if rngs is not None else [rng_state()],
        "position": dict(position),
        "curves": curves,
        "wall_time_s": float(wall_time_s),
        **extra,
    }, path)


def restore_training_checkpoint(ckpt: Mapping[str, Any], optimizer: torch.optim.Optimizer, *, rank: int = 0,
                                world_size: int = 1) -> None:
    """Load the optimizer state and the random states of a loaded checkpoint.

    The random states are ``rank``'s own when the checkpoint has ``world_size``
    of them, else rank 0's (a resume on another number of ranks: not bit-exact).
    The caller loads the model first: a module may resize its parameters on
    load, and the optimizer must be built over those.
    """
    optimizer.load_state_dict(ckpt["optimizer"])
    rngs = ckpt["rng"]
    set_rng_state(rngs[rank] if len(rngs) == world_size else rngs[0])


def discard_bad_checkpoint_requested() -> bool:
    """``$HACN_DISCARD_BAD_CHECKPOINT``: move a damaged ``last.pt`` aside and start again (1) or stop (0)."""
    value = os.environ.get(DISCARD_BAD_CHECKPOINT_ENV, "").strip().lower()
    if value in ("", "0", "false", "no", "off"):
        return False
    if value in ("1", "true", "yes", "on"):
        return True
    invalid(DISCARD_BAD_CHECKPOINT_ENV, value, "1 (move a damaged checkpoint aside and start again) or 0")
    return False  # pragma: no cover


def load_resumable_checkpoint(path: Path, rank: int = 0) -> dict[str, Any] | None:
    """The checkpoint of :func:`fit` at ``path``, loaded on the CPU, or None when there is none.

    A file that cannot be read or lacks a key of :func:`fit`'s checkpoint raises
    :class:`CorruptCheckpointError`; with ``$HACN_DISCARD_BAD_CHECKPOINT=1`` rank 0
    moves it to ``<name>.corrupt`` instead (with a warning) and None is returned.
    """
    if not path.exists():
        return None
    try:
        if path.is_dir():
            raise IsADirectoryError(f"{path.name} is a folder, not a checkpoint file")
        ckpt = load_checkpoint(path, map_location="cpu")
        missing = [k for k in _CHECKPOINT_KEYS if k not in ckpt] if isinstance(ckpt, dict) else None
        if missing is None:
            raise TypeError(f"it holds a {type(ckpt).__name__}, not a dict")
        if missing:
            raise KeyError(f"keys {missing} are missing")
        return ckpt
    except PermissionError:  # not a damaged file: moving it aside would not help
        raise
    except Exception as err:  # noqa: BLE001 -- torch.load raises many types on a damaged file
        first = (str(err).strip().splitlines() or [""])[0][:200]
        reason = f"{type(err).__name__}: {first}" if first else type(err).__name__
        if not discard_bad_checkpoint_requested():
            raise CorruptCheckpointError(path, reason) from err
        aside = path.with_name(path.name + ".corrupt")
        if rank == 0:
            with contextlib.suppress(FileNotFoundError):  # another process moved it meanwhile
                os.replace(path, aside)
            warnings.warn(f"{DISCARD_BAD_CHECKPOINT_ENV}: {path} could not be resumed from ({reason}); moved it to "
                          f"{aside} and starting this run again from step 0", stacklevel=2)
        return None


# ----------------------------------------------------------------------------- segments

_SEGMENTS: list[tuple[float, float, int]] = []  # per finished fit: (wall of all segments, earlier, segments)


_SEGMENT_DEVICES: list[str] = []  # the distinct devices of those fits' segments, first seen first


def reset_segments() -> None:
    """Forget the fits recorded so far; call where a run begins (``results.begin_training`` does)."""
    _SEGMENTS.clear()
    _SEGMENT_DEVICES.clear()


def segment_devices() -> list[str]:
    """The distinct devices the fits since :func:`reset_segments` trained on, in the order first used
    (more than one when a run was resumed on another machine, e.g. begun on a lent GPU)."""
    return list(_SEGMENT_DEVICES)


def segments_summary() -> dict[str, float | int] | None:
    """Wall time and segments of the :func:`fit` calls that finished since :func:`reset_segments`.

    ``wall_s``: their wall time summed over every segment (process) each took;
    ``earlier_wall_s``: the part spent in earlier processes (carried by the
    checkpoints they left); ``segments``: the most segments one of them took (1:
    none was resumed). None when no fit finished since the reset.
    """
    if not _SEGMENTS:
        return None
    return {"wall_s": sum(r[0] for r in _SEGMENTS), "earlier_wall_s": sum(r[1] for r in _SEGMENTS),
            "segments": max(r[2] for r in _SEGMENTS)}


def nonfinite_checkpoint_path(directory: str | os.PathLike | None) -> Path:
    """Where the NaN guard saves the state before the bad update: ``nonfinite.pt`` in ``directory``,
    or in a fresh temporary folder (named in :class:`NonFiniteLossError`) when there is none."""
    folder = Path(directory) if directory is not None else Path(tempfile.mkdtemp(prefix="hacn-nonfinite-"))
    return folder / NONFINITE_NAME


def rng_state() -> dict[str, Any]:
    """Every random state a step can touch, in plain types (loadable with weights_only)."""
    version, mt, gauss = random.getstate()
    kind, keys, pos, has_gauss, cached = np.random.get_state(legacy=True)
    state: dict[str, Any] = {
        "python": [version, list(mt), gauss],
        "numpy": [kind, torch.from_numpy(np.asarray(keys, dtype=np.int64)), int(pos), int(has_gauss), float(cached)],
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    if torch.backends.mps.is_available():
        state["mps"] = torch.mps.get_rng_state()
    return state


def set_rng_state(state: Mapping[str, Any]) -> None:
    """Inverse of :func:`rng_state`: Python, NumPy, torch and the accelerators present."""
    version, mt, gauss = state["python"]
    random.setstate((version, tuple(mt), gauss))
    kind, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((kind, keys.numpy().astype(np.uint32), pos, has_gauss, cached))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    if "mps" in state and torch.backends.mps.is_available():
        torch.mps.set_rng_state(state["mps"])



def record_segments(wall_s: float, earlier_wall_s: float, segments: int, devices: Sequence[str] = ()) -> None:
    """Add one finished ``fit``'s wall time over all its segments (``earlier_wall_s`` of them spent in
    earlier processes) to :func:`segments_summary`; ``devices``: the device each segment trained on."""
    _SEGMENTS.append((wall_s, earlier_wall_s, segments))
    _SEGMENT_DEVICES.extend(d for d in devices if d not in _SEGMENT_DEVICES)
