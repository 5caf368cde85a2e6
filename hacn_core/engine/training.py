"""The training engine: one loop that every experiment of the book trains through.

``fit(model, train, config, val=..., test=...)`` trains ``model`` with the
optimizer, schedule and tricks named by a :class:`TrainConfig` and returns a
:class:`TrainResult` (final metrics plus JSON-serialisable per-epoch curves).

Data
    ``train`` / ``val`` / ``test`` are either tensors kept on the device — a
    ``(X, y)`` tuple (any number of tensors sharing the first dimension) or a
    ``TensorDataset`` — batched by indexing (the fast path for MNIST-sized data),
    or any ``torch.utils.data.Dataset``, read through a ``DataLoader`` with
    workers and pinned memory (``collate_fn`` for e.g. torch-geometric graphs).

Order and resume
    Epoch ``e`` visits the training set in the order ``epoch_permutation(n, seed,
    e)``, a permutation derived from ``(seed, e)`` only. Optimizer step ``s`` of an
    epoch uses positions ``[s*B*A, (s+1)*B*A)`` of that order (``B`` the batch
    size, ``A`` the accumulation count), so a run can restart at any step: a
    checkpoint stores the model, optimizer, schedule, grad scaler, the Python /
    NumPy / torch / CUDA random states and the position (epoch, step in epoch).
    A run killed anywhere and restarted with the same command ends with the same
    parameters (bit for bit on CPU) as an uninterrupted run. This holds for
    in-memory data and for Datasets read with ``num_workers=0`` (random
    augmentation drawn in the main process is restored); the random streams of
    DataLoader worker processes are not checkpointed.

Checkpoint cadence
    With a ``checkpoint_dir``, ``last.pt`` is written at the end and, by
    default, at the end of every epoch or every 60 s, whichever comes first,
    but never sooner after the last checkpoint than 100 times what that one
    took to write: saving costs about 1% of the wall time at most, even when
    epochs last milliseconds (``benchmarks/bench_trainer.py --checkpoint-cost``
    measures it). The config's ``checkpoint_every_steps`` /
    ``checkpoint_every_minutes`` add exact triggers. The user picks another
    cadence with ``$HACN_CHECKPOINT_EVERY`` (``60s``, ``5m``, ``500steps`` or
    ``500``; ``python -m hacn_core run --checkpoint-every`` sets it), which
    replaces all of these (``hacn_core.engine.config.checkpoint_cadence``).

Signals
    During ``fit`` (handlers installed by the main thread, the previous ones
    restored on return), SIGINT (Ctrl-C), SIGTERM (a cluster scheduler) and
    SIGHUP (a closing terminal or ssh connection) let the current optimizer step
    finish, write ``last.pt`` (rank 0) and raise :class:`TrainingInterrupted` with
    the signal's name, the checkpoint and the conventional exit code (130, 143,
    129); its one-line message
    says how to resume: run the same command again. A second signal stops at
    once and keeps the last checkpoint. SIGKILL cannot be caught: the run
    resumes from the last periodic checkpoint.

Segments
    A run that was interrupted and resumed trains in several segments
    (processes). The checkpoint carries the wall time so far and the number of
    segments; a resumed ``fit`` continues both (``TrainResult.wall_time_s``,
    ``TrainResult.segments``), and :func:`segments_summary` sums them over the
    fits since :func:`reset_segments` (the results store records them in a
    run's provenance).

Damaged checkpoints
    A ``last.pt`` that cannot be read (cut short, or not a checkpoint of
    ``fit``) raises :class:`CorruptCheckpointError`, naming the file and the
    ``mv`` command that moves it aside; ``$HACN_DISCARD_BAD_CHECKPOINT=1``
    moves it aside automatically (to ``last.pt.corrupt``) and starts again.

Distributed
    Launched by ``torchrun``, ``fit`` joins the process group and shards every
    (micro-)batch across ranks like ``DistributedSampler`` (rank ``r`` takes
    positions ``r, r + world, ...``). ``batch_size`` is the *global* batch and
    each rank's loss is weighted by its share of the samples, so the averaged
    gradient is the one-process gradient and the curve is the same (for models
    without batch statistics: BatchNorm normalises each rank's shard, and rank
    0's running statistics are used for evaluation). Only rank 0 writes
    checkpoints; a non-finite loss on any rank stops every rank at that step.
    Every 16 steps and at each epoch's end the ranks agree on whether to
    checkpoint (rank 0's clock decides) and whether to stop (a signal on any
    rank stops all of them at the same step).

Hot path
    No host synchronisation per step on accelerators: step losses stay on the
    device and are read every ``sync_every`` steps (finite check, progress bar,
    epoch loss). On CPU there is nothing to synchronise with, so every step's
    loss is checked before the optimizer update.

Shared pieces
    A loop that cannot go through ``fit`` (the stacked engine of the MNIST
    residual-gates study) reuses its bookkeeping: ``save_training_checkpoint``
    and ``restore_training_checkpoint`` (atomic checkpoint with every random
    state), ``first_nonfinite``, ``nonfinite_checkpoint_path`` and
    :class:`NonFiniteLossError` (the NaN guard), and ``progress_bar``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import random
import signal
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.data import DataLoader, Dataset, TensorDataset

from hacn_core.engine.checkpoint import (
    CHECKPOINT_NAME,
    CheckpointWriteError,
    DISCARD_BAD_CHECKPOINT_ENV,
    NONFINITE_NAME,
    CorruptCheckpointError,
    load_checkpoint,
    load_resumable_checkpoint,
    nonfinite_checkpoint_path,
    record_segments,
    reset_segments,
    restore_training_checkpoint,
    rng_state,
    save_checkpoint,
    save_training_checkpoint,
    segment_devices,
    segments_summary,
    set_rng_state,
)
from hacn_core.engine.config import (
    CHECKPOINT_BUDGET,
    CHECKPOINT_EVERY_ENV,
    DEFAULT_CHECKPOINT_SECONDS,
    DEVICE_PATTERN,
    PRECISIONS,
    CheckpointCadence,
    TrainConfig,
    TrainConfigError,
    checkpoint_cadence,
    invalid,
    optimizer_for,
    parse_checkpoint_every,
    schedule_for,
)
from hacn_core.engine.roles import TAGGED_ROLES, named_parameter_roles

__all__ = [
    "CHECKPOINT_EVERY_ENV",
    "DISCARD_BAD_CHECKPOINT_ENV",
    "PRECISIONS",
    "QUIET_ENV",
    "Callback",
    "CheckpointWriteError",
    "CheckpointCadence",
    "CorruptCheckpointError",
    "NonFiniteLossError",
    "TrainingInterrupted",
    "checkpoint_cadence",
    "parse_checkpoint_every",
    "reset_segments",
    "segments_summary",
    "segment_devices",
    "TrainConfig",
    "TrainConfigError",
    "optimizer_for",
    "schedule_for",
    "TrainResult",
    "TrainState",
    "accuracy",
    "autocast_dtype",
    "epoch_permutation",
    "evaluate",
    "first_nonfinite",
    "fit",
    "load_checkpoint",
    "load_resumable_checkpoint",
    "nonfinite_checkpoint_path",
    "progress_bar",
    "resolve_device",
    "restore_training_checkpoint",
    "rng_state",
    "save_checkpoint",
    "save_training_checkpoint",
    "set_rng_state",
    "steps_per_epoch",
    "stop_on_signals",
]

QUIET_ENV = "HACN_QUIET"
# what fit turns into TrainingInterrupted: Ctrl-C, a scheduler's stop, a closing terminal or ssh connection
STOP_SIGNALS: tuple[str, ...] = tuple(name for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))
_ACCEL_SYNC_EVERY = 32  # steps between host reads of the loss on accelerators
_DDP_POLL_EVERY = 16  # steps between the ranks' agreements on "checkpoint now" / "stop now"
# Fields that may differ between a checkpoint and the resuming run: they change
# speed or bookkeeping, not the optimisation trajectory.
_RESUME_FREE_FIELDS = frozenset(
    {"device", "compile", "tf32", "num_workers", "checkpoint_every_steps", "checkpoint_every_minutes",
     "sync_every", "eval_batch_size"}
)


class NonFiniteLossError(RuntimeError):
    """The training loss became NaN or infinite.

    ``step`` is the optimizer step (0-based: the ``step + 1``-th update) whose loss
    was not finite, ``checkpoint`` the file saved for inspection (or None);
    ``detail`` names what diverged when a loop trains several models at once.
    """

    def __init__(self, step: int, epoch: int, loss: float, checkpoint: Path | None, saved_step: int,
                 detail: str = "") -> None:
        self.step, self.epoch, self.loss, self.checkpoint = step, epoch, loss, checkpoint
        if checkpoint is None:
            where = "rank 0 saved the checkpoint"
        elif saved_step == step:
            where = f"saved the state before that update to {checkpoint}"
        else:
            where = f"saved the state before update {saved_step} to {checkpoint}"
        what = f" of {detail}" if detail else ""
        super().__init__(f"non-finite training loss {loss}{what} at step {step} (epoch {epoch}); {where}")


class TrainingInterrupted(KeyboardInterrupt):
    """SIGINT, SIGTERM or SIGHUP stopped :func:`fit`; the state was saved to resume from.

    ``signal`` is the signal's name (``"SIGINT"``, ``"SIGTERM"``, ``"SIGHUP"``), ``checkpoint``
    the ``last.pt`` to resume from (None without a ``checkpoint_dir``),
    ``step`` the optimizer steps it holds, ``exit_code`` the shell's convention
    for a process ended by that signal (128 + its number: 130, 143, 129).
    ``saved`` is False after a second signal, which stops at once: ``checkpoint``
    is then the last periodic one (at an earlier step). A subclass of
    ``KeyboardInterrupt``, so ``except Exception`` does not swallow it. The
    message is one line and says how to resume.
    """

    def __init__(self, signal_name: str, checkpoint: Path | None, step: int, total_steps: int,
                 saved: bool = True) -> None:
        self.signal, self.checkpoint, self.step, self.saved = signal_name, checkpoint, step, saved
        self.total_steps = total_steps
        self.exit_code = 128 + int(signal.Signals[signal_name])
        if checkpoint is None:
            detail = ("nothing was saved (fit had no checkpoint_dir), so a rerun starts again at step 0"
                      if saved else "no checkpoint was saved yet, so a rerun starts again at step 0")
        elif saved:
            detail = f"saved {checkpoint}; to resume, run the same command again"
        else:
            detail = f"the last checkpoint {checkpoint} (step {step}) is kept; to resume, run the same command again"
        how = f"after step {step} of {total_steps}" if saved else f"at once by a second {signal_name}"
        super().__init__(f"training interrupted by {signal_name} {how}: {detail}")

    def __reduce__(self) -> tuple[Any, ...]:  # picklable (e.g. across processes) despite the custom arguments
        return type(self), (self.signal, self.checkpoint, self.step, self.total_steps, self.saved)


@dataclass
class TrainResult:
    """What :func:`fit` returns.

    ``metrics``: final ``train_loss`` and ``val_<m>`` / ``test_<m>`` for each metric.
    ``curves``: per-epoch lists ``epoch``, ``step``, ``train_loss``, ``lr``, ``time_s``;
    per-evaluation ``eval_epoch`` and ``val_<m>``; per-record ``record_step``,
    ``record_epoch``, ``param/<name>`` (every role-tagged parameter) and whatever
    callbacks return. ``wall_time_s`` sums all resumed segments of the run;
    ``segments`` counts them (1: trained in one go).
    """

    metrics: dict[str, float]
    curves: dict[str, list]
    device: str
    steps: int
    wall_time_s: float
    config: dict[str, Any] = field(default_factory=dict)
    segments: int = 1

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class TrainState:
    """The live state handed to callbacks (one object, updated in place).

    ``model`` is the plain module (not the DDP / compiled wrapper). ``step`` counts
    optimizer steps taken; ``epoch`` is 0-based. Setting ``stop = True`` ends
    training after the current epoch (early stopping).
    """

    model: nn.Module
    optimizer: torch.optim.Optimizer
    config: TrainConfig
    device: torch.device
    steps_per_epoch: int
    n_train: int
    curves: dict[str, list]
    rank: int = 0
    world_size: int = 1
    epoch: int = 0
    step: int = 0
    step_in_epoch: int = 0
    lr: float = 0.0
    stop: bool = False


class Callback:
    """Base class for training callbacks; override what you need.

    ``on_train_begin`` runs once the optimizer exists (also when resuming; e.g.
    to attach it to a model that resizes itself); ``on_step_end`` runs after
    every optimizer step; ``on_record`` runs at record
    points (every ``record_every`` epochs, or ``record_every_steps`` steps, and
    once before training) and returns a dict of JSON-serialisable values that
    are appended to the run's curves (return the same keys every time). A plain
    function ``fn(state) -> dict | None`` is treated as ``on_record``. State that
    must survive a resume goes through ``state_dict`` / ``load_state_dict``.
    """

    def on_train_begin(self, state: TrainState) -> None:
        """Called once before the first step of this call of ``fit``."""

    def on_step_end(self, state: TrainState) -> None:
        """Called after each optimizer step."""

    def on_record(self, state: TrainState) -> Mapping[str, Any] | None:
        """Values to append to the curves at a record point."""
        return None

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        pass


# ----------------------------------------------------------------------------- helpers


def resolve_device(spec: str = "auto", local_rank: int | None = None) -> torch.device:
    """``auto`` picks CUDA (``cuda:LOCAL_RANK`` under torchrun), then Apple MPS, then CPU."""
    if not isinstance(spec, str) or not DEVICE_PATTERN.match(spec):
        invalid("device", spec, "auto, cpu, cuda, cuda:<index>, mps")
    if spec == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda", local_rank or 0)
        if torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    dev = torch.device(spec)
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            invalid("device", spec, "auto, cpu (CUDA is not available here)")
        if dev.index is None:
            dev = torch.device("cuda", local_rank or 0)
    if dev.type == "mps" and not torch.backends.mps.is_available():
        invalid("device", spec, "auto, cpu (MPS is not available here)")
    return dev


PRECISION_ENV = "HACN_PRECISION"
_PRECISIONS_USED: set[str] = set()  # what the fits since reset_precisions() computed in (for the provenance)


def run_precision(precision: str) -> str:
    """``$HACN_PRECISION`` when set, else ``precision``: how a run executes, like its device.

    The override lets a study that names ``auto`` (bf16 autocast on a CUDA GPU) train in fp32 on a
    GPU, so that its runs compute as the CPU runs of the same study do; the stored result records the
    precision used (``provenance["precision"]``).
    """
    raw = os.environ.get(PRECISION_ENV, "").strip()
    if not raw:
        return precision
    if raw not in PRECISIONS:
        invalid(f"${PRECISION_ENV}", raw, ", ".join(PRECISIONS))
    return raw


def precision_name(dtype: torch.dtype | None) -> str:
    """``fp32``, ``bf16 autocast`` or ``fp16 autocast``: the arithmetic an autocast dtype means."""
    return {None: "fp32", torch.bfloat16: "bf16 autocast", torch.float16: "fp16 autocast"}[dtype]


def reset_precisions() -> None:
    """Forget the precisions recorded so far (``results.begin_training`` calls it)."""
    _PRECISIONS_USED.clear()


def precisions_used() -> str | None:
    """The precisions of the fits since :func:`reset_precisions`, joined by ``", "``; None if none ran."""
    return ", ".join(sorted(_PRECISIONS_USED)) or None


def autocast_dtype(precision: str, device: torch.device) -> torch.dtype | None:
    """``auto``: bf16 on CUDA GPUs that support it, fp32 elsewhere."""
    if precision == "auto":
        ok = device.type == "cuda" and torch.cuda.is_bf16_supported()
        return torch.bfloat16 if ok else None
    return {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}[precision]


def _derive_seed(*parts: int) -> int:
    """A well-mixed 63-bit seed from integers (so nearby seeds give unrelated streams)."""
    return int(np.random.SeedSequence([int(p) for p in parts]).generate_state(1, dtype=np.uint64)[0] >> 1)


def epoch_permutation(n: int, seed: int, epoch: int, shuffle: bool = True) -> Tensor:
    """Order (CPU int64) in which epoch ``epoch`` visits the ``n`` training samples."""
    if not shuffle:
        return torch.arange(n)
    g = torch.Generator()
    g.manual_seed(_derive_seed(seed, epoch))
    return torch.randperm(n, generator=g)


def steps_per_epoch(n: int, batch_size: int, accumulate: int = 1, drop_last: bool = False) -> int:
    """Optimizer steps in one epoch of ``n`` samples."""
    per_step = batch_size * accumulate
    return n // per_step if drop_last else -(-n // per_step)


def _plan_step(n: int, batch: int, accumulate: int, world: int, rank: int, step: int
               ) -> tuple[int, tuple[tuple[slice, float], ...]]:
    """Samples of one optimizer step and this rank's pieces ``(positions, weight)``.

    The step covers positions ``[start, end)`` of the epoch order, cut into micro
    batches of ``batch``; in each, the rank takes positions ``a + rank, a + rank +
    world, ...`` (a ``slice`` of the epoch order).
    ``weight`` rescales the piece's mean loss so that, after DDP averages over
    ranks, the gradient is the mean over the whole step. A rank left without a
    sample (tiny last batch) gets one sample with weight 0 so collectives still match.
    """
    start = step * batch * accumulate
    end = min(n, start + batch * accumulate)
    n_step = end - start
    pieces = []
    for a in range(start, end, batch):
        b = min(a + batch, end)
        count = len(range(a + rank, b, world))
        if count == 0:
            pieces.append((slice(a, a + 1), 0.0))
        else:
            pieces.append((slice(a + rank, b, world if world > 1 else None), count * world / n_step))
    return n_step, tuple(pieces)


def accuracy(output: Tensor, target: Tensor) -> Tensor:
    """Top-1 accuracy of logits ``output`` (class dimension last) against ``target``.

    ``target`` is class indices, or class probabilities of ``output``'s shape (a Mixup
    target, :class:`hacn_core.engine.augment.Mixup`): then each example scores the target's
    mass at the predicted class, ``lam [pred = y_a] + (1 - lam) [pred = y_b]`` for Mixup,
    which is plain accuracy for one-hot targets.
    """
    pred = output.argmax(-1)
    if output.dim() >= 2 and target.is_floating_point() and target.shape == output.shape:
        return target.gather(-1, pred.unsqueeze(-1)).float().mean()
    return (pred == target).float().mean()


def _cross_entropy(label_smoothing: float) -> Callable[[Tensor, Tensor], Tensor]:
    """Mean cross-entropy with label smoothing; logits with extra dims are flattened."""

    def loss(output: Tensor, target: Tensor) -> Tensor:
        if output.dim() > 2:  # sequence models: (B, T, V) against (B, T)
            output, target = output.reshape(-1, output.shape[-1]), target.reshape(-1)
        return F.cross_entropy(output, target, label_smoothing=label_smoothing)

    return loss


def _default_forward(model: nn.Module, batch: Any) -> tuple[Any, Any]:
    """``(X..., y)`` tuples give ``model(*X), y``; objects with ``.y`` (torch-geometric
    batches) give ``model(batch), batch.y``."""
    if isinstance(batch, (tuple, list)):
        return model(*batch[:-1]), batch[-1]
    if hasattr(batch, "y"):
        return model(batch), batch.y
    raise TypeError(f"cannot split a batch of type {type(batch).__name__} into input and target; pass forward=")


def _to_device(batch: Any, device: torch.device) -> Any:
    """Move tensors (in tuples, lists, dicts, or objects with ``.to``) to ``device``."""
    if isinstance(batch, Tensor):
        return batch.to(device, non_blocking=True)
    if isinstance(batch, (tuple, list)):
        return type(batch)(_to_device(b, device) for b in batch)
    if isinstance(batch, dict):
        return {k: _to_device(v, device) for k, v in batch.items()}
    if hasattr(batch, "to"):
        try:
            return batch.to(device, non_blocking=True)
        except TypeError:  # a .to without non_blocking
            return batch.to(device)
    return batch


def _jsonable(v: Any) -> Any:
    if isinstance(v, Tensor):
        v = v.detach().cpu()
        return v.item() if v.numel() == 1 else v.tolist()
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, Mapping):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    return v


def _quiet(progress: bool | None) -> bool:
    return progress is False or os.environ.get(QUIET_ENV, "") not in ("", "0")


def progress_bar(total: int, *, desc: str, initial: int = 0, unit: str = "step", progress: bool | None = None):
    """A tqdm bar for a training loop, or None when ``progress`` is False or ``$HACN_QUIET`` is set.

    The loop advances it with ``bar.update(done - bar.n)`` and closes it at the end.
    """
    if _quiet(progress):
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=initial, unit=unit, dynamic_ncols=True, desc=desc, leave=True)


def first_nonfinite(values: Iterable[float]) -> int | None:
    """The NaN guard's test: index of the first NaN or infinite value, None when every value is finite."""
    return next((i for i, v in enumerate(values) if not math.isfinite(v)), None)


# ----------------------------------------------------------------------------- checkpoints


def _seed_everything(seed: int) -> None:
    """Seed Python, NumPy and torch (CPU and the accelerators actually present)."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.default_generator.manual_seed(seed)  # torch.manual_seed would also queue lazy seeding of absent devices
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)
    if torch.backends.mps.is_available():
        torch.mps.manual_seed(seed)


# ----------------------------------------------------------------------------- data


class _TensorBatches(Dataset):
    """Tensors read through a DataLoader a whole batch at a time (``__getitems__``)."""

    def __init__(self, tensors: Sequence[Tensor]) -> None:
        self.tensors = tuple(tensors)

    def __len__(self) -> int:
        return len(self.tensors[0])

    def __getitem__(self, i: int) -> tuple[Tensor, ...]:
        return tuple(t[i] for t in self.tensors)

    def __getitems__(self, idx: list[int]) -> tuple[Tensor, ...]:
        index = torch.as_tensor(idx)
        return tuple(t[index] for t in self.tensors)


def _identity(batch: Any) -> Any:
    return batch


def _leave_ctrl_c_to_the_trainer(worker_id: int) -> None:
    """DataLoader workers ignore SIGINT: Ctrl-C reaches a terminal's whole process group, and the main
    process stops the run cleanly (:class:`TrainingInterrupted`) while the workers keep serving."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _as_tensors(data: Any, name: str) -> tuple[Tensor, ...] | None:
    """The tensors of an in-memory split, or None for a generic Dataset."""
    if isinstance(data, DataLoader):
        raise TypeError(f"{name}: pass the Dataset, not a DataLoader (fit builds its own loader so the "
                        "order is reproducible and resumable)")
    if isinstance(data, TensorDataset):
        tensors = tuple(data.tensors)
    elif isinstance(data, (tuple, list)) and data and all(isinstance(t, Tensor) for t in data):
        tensors = tuple(data)
    elif isinstance(data, Dataset):
        return None
    else:
        raise TypeError(f"{name}: expected an (X, y) tuple of tensors, a TensorDataset or a Dataset, "
                        f"got {type(data).__name__}")
    if len({len(t) for t in tensors}) != 1:
        raise ValueError(f"{name}: tensors differ in their first dimension {[len(t) for t in tensors]}")
    return tensors


class _Split:
    """One data split: on-device tensors batched by index, or a Dataset behind a DataLoader."""

    def __init__(self, data: Any, name: str, device: torch.device, keep_on_device: bool, num_workers: int,
                 collate_fn: Callable | None, to_device: Callable[[Any, torch.device], Any]) -> None:
        tensors = _as_tensors(data, name)
        self.device = device
        self.to_device = to_device
        self.loader: DataLoader | None = None
        if tensors is not None and keep_on_device:
            self.tensors: tuple[Tensor, ...] | None = tuple(t.to(device) for t in tensors)
            self.n = len(tensors[0])
            return
        self.tensors = None
        if tensors is not None:
            dataset, collate = _TensorBatches(tensors), _identity
        else:
            dataset, collate = data, collate_fn
        self.n = len(dataset)
        self.sampler = _IndexListSampler()
        workers = num_workers
        self.generator = torch.Generator()  # keeps the DataLoader off the global RNG (resume)
        self.loader = DataLoader(
            dataset, batch_sampler=self.sampler, num_workers=workers, collate_fn=collate,
            pin_memory=device.type == "cuda", persistent_workers=workers > 0, generator=self.generator,
            worker_init_fn=_leave_ctrl_c_to_the_trainer if workers > 0 else None,
        )

    def batches(self, index_lists: Iterable[Tensor]) -> Iterator[Any]:
        """Batches for the given index tensors (positions already resolved)."""
        if self.tensors is not None:
            tensors = self.tensors
            for idx in index_lists:
                yield tuple(t[idx] for t in tensors)
            return
        self.sampler.lists = (idx.tolist() for idx in index_lists)
        to_device, device = self.to_device, self.device
        for batch in self.loader:  # type: ignore[union-attr]
            yield to_device(batch, device)


class _IndexListSampler:
    """Batch sampler that replays index lists chosen by the trainer."""

    lists: Iterable[list[int]] = ()

    def __iter__(self) -> Iterator[list[int]]:
        yield from self.lists

    def __len__(self) -> int:  # only used for DataLoader's len(); never relied on
        return 0


# ----------------------------------------------------------------------------- evaluation


@torch.no_grad()
def _evaluate_split(model: nn.Module, split: _Split, batch_size: int, metrics: Mapping[str, Callable],
                    forward: Callable, autocast: torch.dtype | None, rank: int, world: int,
                    comm_device: torch.device) -> dict[str, float]:
    """Sample-weighted means of every metric over a split (sharded across ranks)."""
    was_training = model.training
    model.eval()
    n = split.n
    if world == 1 and split.tensors is not None:
        index_lists: Iterator[Any] = (slice(a, min(a + batch_size, n)) for a in range(0, n, batch_size))
    else:
        local = torch.arange(rank, n, world, device=split.device if split.tensors is not None else "cpu")
        index_lists = (local[a:a + batch_size] for a in range(0, len(local), batch_size))
    sums: Tensor | None = None
    count = 0
    ctx = (lambda: torch.autocast(split.device.type, dtype=autocast)) if autocast else contextlib.nullcontext
    try:
        for batch in split.batches(index_lists):
            with ctx():
                out, target = forward(model, batch)
                vals = torch.stack([fn(out, target).detach().float().reshape(()) for fn in metrics.values()])
            m = int(target.shape[0])
            sums = vals * m if sums is None else sums + vals * m
            count += m
    finally:
        model.train(was_training)
    if sums is None:
        sums = torch.zeros(len(metrics), device=split.device)
    if world > 1:
        import torch.distributed as dist

        packed = torch.cat([sums.to(comm_device, torch.float64), torch.tensor([count], dtype=torch.float64,
                                                                                 device=comm_device)])
        dist.all_reduce(packed)
        sums, count = packed[:-1], int(packed[-1].item())
    values = (sums.double() / max(count, 1)).tolist()
    return dict(zip(metrics, values))


def evaluate(model: nn.Module, data: Any, *, metrics: Mapping[str, Callable] | None = None,
             loss_fn: Callable | None = None, forward: Callable | None = None, batch_size: int = 1024,
             device: str | torch.device | None = None, precision: str = "fp32",
             collate_fn: Callable | None = None) -> dict[str, float]:
    """Mean ``loss`` (cross-entropy unless ``loss_fn``) and ``metrics`` (default:
    ``accuracy``) of ``model`` over ``data``, each weighted by batch size.

    A metric is ``fn(output, target) -> scalar tensor`` (the batch mean).
    """
    dev = torch.device(device) if device is not None else next(model.parameters()).device
    if precision not in PRECISIONS:
        invalid("precision", precision, ", ".join(PRECISIONS))
    split = _Split(data, "data", dev, True, 0, collate_fn, _to_device)
    allm = {"loss": loss_fn or _cross_entropy(0.0), **(metrics if metrics is not None else {"accuracy": accuracy})}
    return _evaluate_split(model.to(dev), split, batch_size, allm, forward or _default_forward,
                           autocast_dtype(precision, dev), 0, 1, dev)


# ----------------------------------------------------------------------------- the loop


class _Run:
    """One call of :func:`fit` (kept as an object so the hot loop reads plain attributes)."""

    def __init__(self, model: nn.Module, train: Any, config: TrainConfig, *, val: Any, test: Any,
                 loss_fn: Callable | None, forward: Callable | None, batch_to_device: Callable | None,
                 collate_fn: Callable | None, metrics: Mapping[str, Callable] | None,
                 callbacks: Sequence[Callback | Callable], checkpoint_dir: str | os.PathLike | None,
                 progress: bool | None) -> None:
        self.t_start = time.monotonic()
        cfg = self.cfg = config
        if loss_fn is not None and cfg.label_smoothing:
            invalid("label_smoothing", cfg.label_smoothing,
                  "0 when a custom loss_fn is given (put the smoothing into your loss)")
        # distributed
        self.rank, self.world, local_rank = _init_distributed(cfg.device)
        self.device = resolve_device(cfg.device, local_rank)
        if self.device.type == "cuda":
            torch.cuda.set_device(self.device)
        self.comm_device = self.device if self.world > 1 and _backend() == "nccl" else torch.device("cpu")
        self.autocast = autocast_dtype(run_precision(cfg.precision), self.device)
        _PRECISIONS_USED.add(precision_name(self.autocast))
        self.model = model.to(self.device)
        self.forward = forward or _default_forward
        self.loss_fn = loss_fn or _cross_entropy(cfg.label_smoothing)
        to_dev = batch_to_device or _to_device
        def split(data: Any, name: str) -> _Split | None:
            if data is None:
                return None
            return _Split(data, name, self.device, cfg.keep_on_device, cfg.num_workers, collate_fn, to_dev)

        self.train = split(train, "train")
        self.val, self.test = split(val, "val"), split(test, "test")
        self.metrics = {"loss": self.loss_fn if loss_fn is not None else _cross_entropy(0.0),
                        **(metrics if metrics is not None else {"accuracy": accuracy})}
        if cfg.schedule == "plateau" and cfg.plateau_metric != "train_loss":
            if self.val is None:
                invalid("schedule", cfg.schedule, "constant, cosine, multistep (plateau on "
                      f"{cfg.plateau_metric!r} needs val=), or set plateau_metric='train_loss'")
            if cfg.plateau_metric[4:] not in self.metrics:
                invalid("plateau_metric", cfg.plateau_metric,
                      ", ".join(["train_loss"] + [f"val_{m}" for m in self.metrics]))
        self.n_train = self.train.n
        self.S = steps_per_epoch(self.n_train, cfg.batch_size, cfg.accumulate, cfg.drop_last)
        if self.S == 0:
            invalid("batch_size", cfg.batch_size,
                  f"at most {self.n_train // cfg.accumulate} with drop_last=True and accumulate={cfg.accumulate} "
                  f"({self.n_train} training samples)")
        self.total_steps = cfg.epochs * self.S
        self.plan = [_plan_step(self.n_train, cfg.batch_size, cfg.accumulate, self.world, self.rank, s)
                     for s in range(self.S)]
        self.ckpt_dir = Path(checkpoint_dir) if checkpoint_dir is not None else None
        self.cadence = checkpoint_cadence(cfg)
        self.stop_signal: int | None = None  # set by the SIGINT / SIGTERM / SIGHUP handler of fit
        self.quiet = _quiet(progress) or self.rank != 0
        self.sync_every = cfg.sync_every or (1 if self.device.type == "cpu" else _ACCEL_SYNC_EVERY)
        # callbacks
        self.callbacks = list(callbacks)
        self.step_cbs = [cb.on_step_end for cb in self.callbacks
                         if hasattr(cb, "on_step_end") and getattr(type(cb), "on_step_end", None)
                         is not Callback.on_step_end]
        self.record_cbs = [cb.on_record if hasattr(cb, "on_record") else cb for cb in self.callbacks]
        # position and accumulators
        self.epoch = 0
        self.step_in_epoch = 0
        self.global_step = 0
        self.finished = False
        self.loss_sum = 0.0  # sum over steps of (step mean loss * step samples) / world
        self.loss_n = 0
        self.pending: list[tuple[Tensor, int, int]] = []
        self.prior_wall = 0.0  # wall time of the earlier segments (from the checkpoint)
        self.segments = 1  # processes this run has trained in, this one included
        self.devices: list[str] = []  # the device of each segment (set in setup: earlier ones from the checkpoint)
        self.saved_step: int | None = None  # the step last.pt holds
        self.last_ckpt_time = time.monotonic()
        self.last_ckpt_cost = 0.0
        self._update_triggers()
        self.curves: dict[str, list] = {}
        self.last_loss = math.nan

    # -- setup -----------------------------------------------------------------------

    def setup(self) -> None:
        cfg = self.cfg
        ckpt = self._find_checkpoint()
        if ckpt is not None:
            # model first: the optimizer must be built over the parameters the
            # checkpoint describes (a module may resize them on load)
            self.model.load_state_dict(ckpt["model"])
        self.optimizer = optimizer_for(self.model, cfg, self.device.type)
        self.schedule = schedule_for(cfg, self.S)
        self.scaler = torch.amp.GradScaler(self.device.type) if self.autocast == torch.float16 else None
        self.optimizer.zero_grad(set_to_none=True)
        if ckpt is not None:
            self._restore(ckpt)
        else:
            _seed_everything(cfg.seed + self.rank)
        self.state = TrainState(self.model, self.optimizer, cfg, self.device, self.S, self.n_train, self.curves,
                                self.rank, self.world, self.epoch, self.global_step, self.step_in_epoch)
        net: nn.Module = self.model
        if self.world > 1:
            from torch.nn.parallel import DistributedDataParallel

            net = DistributedDataParallel(net, device_ids=[self.device.index] if self.device.type == "cuda" else None)
        self.ddp = net if self.world > 1 else None
        self.net = torch.compile(net) if cfg.compile else net
        self.cur_lr = self.schedule.lr(self.global_step)
        for g in self.optimizer.param_groups:
            g["lr"] = self.cur_lr
        self._sync_state()
        for cb in self.callbacks:
            if hasattr(cb, "on_train_begin"):
                cb.on_train_begin(self.state)
        if ckpt is None:
            self._record()  # values before training

    def _find_checkpoint(self) -> dict[str, Any] | None:
        if self.ckpt_dir is None:
            return None
        path = self.ckpt_dir / CHECKPOINT_NAME
        # on the CPU: random states must stay CPU tensors; load_state_dict copies to the device
        ckpt = load_resumable_checkpoint(path, self.rank)
        if ckpt is None:
            return None
        old, new = ckpt["config"], self.cfg.to_dict()
        diff = [k for k in new if k not in _RESUME_FREE_FIELDS and old.get(k) != new[k]]
        if diff:
            detail = "; ".join(f"{k}: {old.get(k)!r} in the checkpoint, {new[k]!r} now" for k in diff)
            raise TrainConfigError(f"cannot resume from {path}: configuration differs ({detail}); "
                                   "use the same configuration or another checkpoint_dir")
        return ckpt

    def _restore(self, ckpt: dict[str, Any]) -> None:
        self.schedule.load_state_dict(ckpt["schedule"])
        if self.scaler is not None and ckpt.get("scaler"):
            self.scaler.load_state_dict(ckpt["scaler"])
        pos = ckpt["position"]
        self.epoch, self.step_in_epoch = int(pos["epoch"]), int(pos["step_in_epoch"])
        self.global_step, self.finished = int(pos["global_step"]), bool(pos["finished"])
        self.loss_sum, self.loss_n = float(ckpt["epoch_loss"][0]), int(ckpt["epoch_loss"][1])
        self.curves.update(ckpt["curves"])
        self.prior_wall = float(ckpt["wall_time_s"])
        self.segments = int(ckpt.get("segments", 1)) + 1
        earlier = list(ckpt.get("devices", []))
        self.devices = ["not recorded"] * (self.segments - 1 - len(earlier)) + earlier
        self.saved_step = self.global_step
        for cb, state in zip(self.callbacks, ckpt.get("callbacks", [])):
            if state is not None and hasattr(cb, "load_state_dict"):
                cb.load_state_dict(state)
        restore_training_checkpoint(ckpt, self.optimizer, rank=self.rank, world_size=self.world)

    # -- checkpoints -------------------------------------------------------------------

    def _checkpoint(self, name: str = CHECKPOINT_NAME) -> Path | None:
        """Write a checkpoint (rank 0; every rank contributes its random state).

        Without a ``checkpoint_dir`` only the non-finite-loss checkpoint is written,
        into a fresh temporary folder (named in the error).
        """
        started = time.monotonic()
        if name == NONFINITE_NAME:
            on_disk = self.ckpt_dir is not None or self.rank == 0  # a temporary folder on rank 0 only
            path = nonfinite_checkpoint_path(self.ckpt_dir) if on_disk else None
        elif self.ckpt_dir is None:
            return None
        else:
            path = self.ckpt_dir / name
        self._flush()
        rng = rng_state()
        if self.world > 1:
            import torch.distributed as dist

            rngs: list[Any] = [None] * self.world
            dist.all_gather_object(rngs, rng)
        else:
            rngs = [rng]
        if path is not None and self.rank == 0:
            save_training_checkpoint(
                path, self.model, self.optimizer,
                position={"epoch": self.epoch, "step_in_epoch": self.step_in_epoch,
                          "global_step": self.global_step, "finished": self.finished,
                          "total_steps": self.S * self.cfg.epochs},  # read by `status` only
                curves=self.curves, wall_time_s=self._wall(), rngs=rngs,
                config=self.cfg.to_dict(),
                schedule=self.schedule.state_dict(),
                scaler=self.scaler.state_dict() if self.scaler is not None else None,
                epoch_loss=[self.loss_sum, self.loss_n],
                callbacks=[cb.state_dict() if hasattr(cb, "state_dict") else None for cb in self.callbacks],
                world_size=self.world,
                segments=self.segments,
                devices=self._devices(),
            )
        if self.world > 1:
            import torch.distributed as dist

            dist.barrier()
        if name == CHECKPOINT_NAME:
            self.saved_step = self.global_step
        self.last_ckpt_time = time.monotonic()
        self.last_ckpt_cost = self.last_ckpt_time - started
        self._update_triggers()
        return path

    # -- cadence and signals -------------------------------------------------------------

    def _update_triggers(self) -> None:
        """Seconds after the last checkpoint at which the next one is due, at any step (``time_trigger``)
        and at an epoch's end (``epoch_trigger``; None: not at epoch ends); see :class:`CheckpointCadence`."""
        cad = self.cadence
        if self.ckpt_dir is None:
            self.time_trigger, self.epoch_trigger = math.inf, None
            return
        gap = self.last_ckpt_cost / CHECKPOINT_BUDGET  # the default cadence's spacing: cost <= budget
        triggers = [cad.seconds] if cad.seconds is not None else []
        if cad.default:
            triggers.append(max(DEFAULT_CHECKPOINT_SECONDS, gap))
        self.time_trigger = min(triggers, default=math.inf)
        self.epoch_trigger = gap if cad.default else None

    def on_signal(self, signum: int, frame: Any) -> None:
        """The SIGINT / SIGTERM / SIGHUP handler: stop after the current step; a second signal stops at once."""
        if self.stop_signal is None:
            self.stop_signal = signum
            return
        raise self._stopped_at_once(signum)

    def _stopped_at_once(self, signum: int) -> TrainingInterrupted:
        """The error of a stop that saves nothing: the last checkpoint (if any) is what a rerun resumes from."""
        kept = self.ckpt_dir is not None and self.saved_step is not None
        return TrainingInterrupted(signal.Signals(signum).name, self.ckpt_dir / CHECKPOINT_NAME if kept else None,
                                   self.saved_step or 0, self.total_steps, saved=False)

    def _agree(self, due: bool, sig: int | None) -> tuple[bool, int | None]:
        """Under DDP: rank 0's clock decides ``due``, and a signal on any rank stops every rank."""
        import torch.distributed as dist

        flags = torch.tensor([int(due and self.rank == 0), sig or 0], dtype=torch.int64, device=self.comm_device)
        dist.all_reduce(flags, op=dist.ReduceOp.MAX)
        return bool(flags[0].item()), int(flags[1].item()) or None

    def _poll(self, epoch_end: bool = False) -> None:
        """After a step (every step; every ``_DDP_POLL_EVERY`` under DDP) and at an epoch's end: checkpoint
        when due (:meth:`_update_triggers`); after a signal, checkpoint and raise :class:`TrainingInterrupted`."""
        since = time.monotonic() - self.last_ckpt_time
        due = since >= self.time_trigger or (epoch_end and self.epoch_trigger is not None
                                             and since >= self.epoch_trigger)
        sig = self.stop_signal
        if self.world > 1:
            due, sig = self._agree(due, sig)
        if sig is not None:
            path = self._checkpoint()
            raise TrainingInterrupted(signal.Signals(sig).name, path, self.global_step, self.total_steps)
        if due:
            self._checkpoint()

    def _wall(self) -> float:
        return self.prior_wall + time.monotonic() - self.t_start

    # -- loss bookkeeping ---------------------------------------------------------------

    def _flush(self) -> None:
        """Read the pending step losses (the one host sync), check them, add them up."""
        pending = self.pending
        if not pending:
            return
        if len(pending) == 1:
            values = [pending[0][0].item()]
        else:
            values = torch.stack([p[0].float() for p in pending]).tolist()
        bad = first_nonfinite(values)
        if self.world > 1:
            import torch.distributed as dist

            first = pending[bad][2] if bad is not None else 2**62
            flag = torch.tensor([first], dtype=torch.int64, device=self.comm_device)
            dist.all_reduce(flag, op=dist.ReduceOp.MIN)
            first = int(flag.item())
            if first < 2**62:
                bad = next((i for i, p in enumerate(pending) if p[2] >= first), len(pending) - 1)
                bad_step = first
            else:
                bad_step = None
        else:
            bad_step = pending[bad][2] if bad is not None else None
        good = values if bad is None else values[:bad]
        world = self.world
        for v, (_, n, _) in zip(good, pending):
            self.loss_sum += v * n / world if world > 1 else v * n
            self.loss_n += n
        if good:
            self.last_loss = good[-1]
        pending.clear()
        if bad_step is not None:
            value = values[bad] if bad is not None and bad < len(values) else math.nan
            path = self._checkpoint(NONFINITE_NAME)
            raise NonFiniteLossError(bad_step, self.epoch, value, path, self.global_step)

    # -- records and evaluation -----------------------------------------------------------

    def _append(self, key: str, value: Any) -> None:
        self.curves.setdefault(key, []).append(_jsonable(value))

    def _record(self) -> None:
        """Snapshot role-tagged parameters and callback values into the curves."""
        self._append("record_step", self.global_step)
        self._append("record_epoch", self.global_step / self.S)
        with torch.no_grad():
            for name, p, role in named_parameter_roles(self.model):
                if role in TAGGED_ROLES:
                    self._append(f"param/{name}", p.detach().float())
        st = self.state if hasattr(self, "state") else None
        if st is not None:
            self._sync_state()
        for fn in self.record_cbs:
            out = fn(st)
            if out:
                for k, v in out.items():
                    self._append(k, v)

    def _sync_state(self) -> None:
        st = self.state
        st.epoch, st.step, st.step_in_epoch, st.lr = self.epoch, self.global_step, self.step_in_epoch, self.cur_lr

    def _evaluate(self, split: _Split) -> dict[str, float]:
        if self.world > 1:  # each rank updated its own running statistics (BatchNorm): use rank 0's
            import torch.distributed as dist

            for buf in self.model.buffers():
                dist.broadcast(buf.data, 0)
        bs = self.cfg.eval_batch_size or self.cfg.batch_size
        return _evaluate_split(self.model, split, bs, self.metrics, self.forward, self.autocast, self.rank,
                               self.world, self.comm_device)

    # -- training ---------------------------------------------------------------------

    def _micro(self, batch: Any, weight: float) -> Tensor:
        """Forward, loss and backward of one micro batch; returns the weighted loss."""
        if self.autocast is not None:
            with torch.autocast(self.device.type, dtype=self.autocast):
                out, target = self.forward(self.net, batch)
                loss = self.loss_fn(out, target)
        else:
            out, target = self.forward(self.net, batch)
            loss = self.loss_fn(out, target)
        if weight != 1.0:
            loss = loss * weight
        if self.scaler is not None:
            self.scaler.scale(loss).backward()
        else:
            loss.backward()
        return loss

    def run(self) -> TrainResult:
        cfg = self.cfg
        self.last_ckpt_time = time.monotonic()
        bar = progress_bar(self.total_steps, initial=self.global_step, desc=f"train {cfg.optimizer} lr={cfg.lr:g}",
                           progress=not self.quiet)
        self.bar = bar
        self.bar_time, self.bar_step = time.monotonic(), self.global_step
        try:
            while not self.finished and self.epoch < cfg.epochs:
                self._run_epoch()
                self._end_epoch()
                if not self.finished:
                    self._poll(epoch_end=True)
            self.finished = True
            if bar is not None:
                bar.update(self.global_step - bar.n)
        except NonFiniteLossError:
            raise
        except Exception as err:
            if self.stop_signal is None:
                raise
            # the signal also ended something the step relied on (e.g. DataLoader workers killed by a
            # SIGTERM sent to the whole process group): the step is abandoned, the last checkpoint kept
            raise self._stopped_at_once(self.stop_signal) from err
        finally:
            if bar is not None:
                bar.close()
        metrics: dict[str, float] = {}
        if self.curves.get("train_loss"):
            metrics["train_loss"] = self.curves["train_loss"][-1]
        for prefix, split in (("val", self.val), ("test", self.test)):
            if split is not None:
                if prefix == "val" and self.curves.get("eval_epoch", [None])[-1] == self.epoch:
                    res = {m: self.curves[f"val_{m}"][-1] for m in self.metrics}
                else:
                    res = self._evaluate(split)
                metrics.update({f"{prefix}_{k}": v for k, v in res.items()})
        path = self._checkpoint()
        sig = self.stop_signal
        if self.world > 1:
            _, sig = self._agree(False, sig)
        if sig is not None:  # a signal during the final evaluation: the finished run is saved, stop anyway
            raise TrainingInterrupted(signal.Signals(sig).name, path, self.global_step, self.total_steps)
        return TrainResult(metrics, self.curves, str(self.device), self.global_step, self._wall(), cfg.to_dict(),
                           self.segments)

    def _devices(self) -> list[str]:
        """The device of every segment of this run so far, this process's last."""
        from hacn_core.engine.results import device_description

        return self.devices + [device_description(str(self.device))]

    def _run_epoch(self) -> None:
        cfg = self.cfg
        start = self.step_in_epoch
        if start >= self.S:
            return
        perm = epoch_permutation(self.n_train, cfg.seed, self.epoch, cfg.shuffle)
        split = self.train
        if split.tensors is not None:
            perm = perm.to(self.device)
        else:
            split.generator.manual_seed(_derive_seed(cfg.seed, self.epoch, 1))
        plan = self.plan
        if split.tensors is not None:  # index the on-device tensors directly (no generator per batch)
            tensors = split.tensors
            if len(tensors) == 2:
                t0, t1 = tensors

                def fetch(slc: slice) -> tuple[Tensor, ...]:
                    idx = perm[slc]
                    return t0[idx], t1[idx]
            else:

                def fetch(slc: slice) -> tuple[Tensor, ...]:
                    idx = perm[slc]
                    return tuple(t[idx] for t in tensors)
        else:
            it = split.batches(perm[slc] for s in range(start, self.S) for slc, _ in plan[s][1])

            def fetch(slc: slice) -> Any:
                return next(it)

        fast_check = self.sync_every == 1 and self.world == 1  # CPU: read each loss at once
        micro = self._micro
        schedule, groups, optimizer, scaler = self.schedule, self.optimizer.param_groups, self.optimizer, self.scaler
        clip, ddp = cfg.grad_clip, self.ddp
        pending, sync_every, step_cbs = self.pending, self.sync_every, self.step_cbs
        ckpt_every, record_steps = self.cadence.steps, cfg.record_every_steps
        poll, poll_every = self._poll, 1 if self.world == 1 else _DDP_POLL_EVERY
        bar, last = self.bar, self.S - 1
        for s in range(start, self.S):
            lr = schedule.lr(self.global_step)
            if lr != self.cur_lr:
                for g in groups:
                    g["lr"] = lr
                self.cur_lr = lr
            n_step, pieces = plan[s]
            if len(pieces) == 1:
                slc, weight = pieces[0]
                step_loss = micro(fetch(slc), weight)
            else:
                step_loss = None
                k = len(pieces) - 1
                for i, (slc, weight) in enumerate(pieces):
                    ctx = ddp.no_sync() if ddp is not None and i < k else contextlib.nullcontext()
                    with ctx:
                        d = micro(fetch(slc), weight).detach()
                    step_loss = d if step_loss is None else step_loss + d
            # the loss is checked before the update, so a bad loss never reaches the parameters
            if fast_check:
                v = step_loss.item()  # type: ignore[union-attr]
                if math.isfinite(v):
                    self.loss_sum += v * n_step
                    self.loss_n += n_step
                    self.last_loss = v
                else:
                    pending.append((step_loss, n_step, self.global_step))  # type: ignore[arg-type]
                    self._flush()  # raises NonFiniteLossError
            else:
                pending.append((step_loss.detach(), n_step, self.global_step))  # type: ignore[union-attr]
                if len(pending) >= sync_every or s == last:
                    self._flush()
            if scaler is not None:
                if clip is not None:
                    scaler.unscale_(optimizer)
                    torch.nn.utils.clip_grad_norm_([p for g in groups for p in g["params"]], clip)
                scaler.step(optimizer)
                scaler.update()
            else:
                if clip is not None:
                    torch.nn.utils.clip_grad_norm_([p for g in groups for p in g["params"]], clip)
                optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            self.global_step += 1
            self.step_in_epoch = s + 1
            if step_cbs:
                self._sync_state()
                for fn in step_cbs:
                    fn(self.state)
            if record_steps is not None and self.global_step % record_steps == 0:
                self._record()
            if ckpt_every is not None and self.global_step % ckpt_every == 0:
                self._checkpoint()
            if poll_every == 1 or self.global_step % poll_every == 0:
                poll()  # a checkpoint when due; after SIGINT / SIGTERM / SIGHUP, save and raise TrainingInterrupted
            if bar is not None and time.monotonic() - self.bar_time > 0.5:
                self._update_bar()

    def _update_bar(self) -> None:
        now = time.monotonic()
        steps = self.global_step - self.bar_step
        rate = steps * self.cfg.batch_size * self.cfg.accumulate / max(now - self.bar_time, 1e-9)
        self.bar.update(self.global_step - self.bar.n)
        self.bar.set_postfix(loss=f"{self.last_loss:.4g}", samples_per_s=f"{rate:.4g}", refresh=False)
        self.bar_time, self.bar_step = now, self.global_step

    def _end_epoch(self) -> None:
        cfg = self.cfg
        self._flush()
        loss_sum, loss_n = self.loss_sum, self.loss_n
        if self.world > 1:
            import torch.distributed as dist

            t = torch.tensor([loss_sum], dtype=torch.float64, device=self.comm_device)
            dist.all_reduce(t)
            loss_sum = float(t.item())
        train_loss = loss_sum / max(loss_n, 1)
        self.epoch += 1
        self.step_in_epoch = 0
        self.loss_sum, self.loss_n = 0.0, 0
        self._append("epoch", self.epoch)
        self._append("step", self.global_step)
        self._append("train_loss", train_loss)
        # the rate of the epoch's last step (``cur_lr`` is that, except after a resume at an epoch boundary,
        # where it was set to the next step's rate before any step of this process ran)
        self._append("lr", self.schedule.lr(self.global_step - 1) if self.global_step > 0 else self.cur_lr)
        self._append("time_s", self._wall())
        watched = train_loss if cfg.plateau_metric == "train_loss" else None
        if self.val is not None and (self.epoch % cfg.eval_every == 0 or self.epoch == cfg.epochs):
            res = self._evaluate(self.val)
            self._append("eval_epoch", self.epoch)
            for k, v in res.items():
                self._append(f"val_{k}", v)
            if cfg.plateau_metric != "train_loss":
                watched = res.get(cfg.plateau_metric[4:])
        if watched is not None:
            self.schedule.observe(watched)
        if cfg.record_every_steps is None and cfg.record_every and self.epoch % cfg.record_every == 0:
            self._record()
        if self.state.stop or self.epoch == cfg.epochs:
            self.finished = True
            if self.curves["record_step"][-1] != self.global_step:
                self._record()  # the final values are always recorded
        if self.bar is not None:
            self._update_bar()


def _backend() -> str:
    import torch.distributed as dist

    return dist.get_backend()


def _init_distributed(device_spec: str) -> tuple[int, int, int | None]:
    """(rank, world size, local rank); joins the process group when run by torchrun."""
    import torch.distributed as dist

    if not dist.is_available():
        return 0, 1, None
    if not dist.is_initialized():
        if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
            return 0, 1, None
        use_cuda = device_spec.startswith("cuda") or (device_spec == "auto" and torch.cuda.is_available())
        dist.init_process_group(backend="nccl" if use_cuda else "gloo")
    local = os.environ.get("LOCAL_RANK")
    return dist.get_rank(), dist.get_world_size(), int(local) if local is not None else None


@contextlib.contextmanager
def stop_on_signals(handler: Callable[[int, Any], None]) -> Iterator[None]:
    """``handler`` for SIGINT, SIGTERM and SIGHUP (:data:`STOP_SIGNALS`) while the block runs, the previous
    handlers after it.

    Only the main thread may install handlers: elsewhere (a training thread) the
    block runs with the process's handlers unchanged.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous: dict[int, Any] = {}
    try:
        for name in STOP_SIGNALS:
            signum = signal.Signals[name]
            previous[signum] = signal.getsignal(signum)
            signal.signal(signum, handler)
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old if old is not None else signal.SIG_DFL)  # None: set outside Python


@contextlib.contextmanager
def _fast_paths(device: torch.device, tf32: bool) -> Iterator[None]:
    """TF32 matmuls and cudnn autotuning on CUDA for the duration of the run."""
    if device.type != "cuda":
        yield
        return
    old_prec, old_bench = torch.get_float32_matmul_precision(), torch.backends.cudnn.benchmark
    if tf32:
        torch.set_float32_matmul_precision("high")
    torch.backends.cudnn.benchmark = True
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(old_prec)
        torch.backends.cudnn.benchmark = old_bench


def fit(model: nn.Module, train: Any, config: TrainConfig | Mapping[str, Any], *, val: Any = None,
        test: Any = None, loss_fn: Callable[[Any, Any], Tensor] | None = None,
        forward: Callable[[nn.Module, Any], tuple[Any, Any]] | None = None,
        batch_to_device: Callable[[Any, torch.device], Any] | None = None, collate_fn: Callable | None = None,
        metrics: Mapping[str, Callable[[Any, Any], Tensor]] | None = None,
        callbacks: Sequence[Callback | Callable[[TrainState], Mapping[str, Any] | None]] = (),
        checkpoint_dir: str | os.PathLike | None = None, progress: bool | None = None) -> TrainResult:
    """Train ``model`` on ``train`` as ``config`` says; return metrics and curves.

    Parameters
    ----------
    train, val, test
        ``(X, y)`` tensors / ``TensorDataset`` (kept on the device, batched by
        index) or any ``Dataset`` (read by a DataLoader; ``collate_fn`` for
        custom batches such as torch-geometric graphs).
    loss_fn
        ``loss_fn(output, target) -> scalar``, a mean over the batch (plus any
        batch-independent terms, e.g. an ELBO's prior: close over the model and
        the dataset size). Default: cross-entropy with ``config.label_smoothing``.
        Also reported as the ``loss`` metric (the default reports plain
        cross-entropy, without smoothing).
    forward
        ``forward(model, batch) -> (output, target)``; default ``model(*X), y`` for
        tuples and ``model(batch), batch.y`` for objects with ``.y``.
    batch_to_device
        ``fn(batch, device)`` for DataLoader batches; default moves tensors,
        containers and objects with ``.to``.
    metrics
        ``{name: fn(output, target) -> scalar batch mean}`` for validation/test;
        default ``{"accuracy": accuracy}``. ``loss`` is always added.
    callbacks
        :class:`Callback` objects or functions ``fn(state) -> dict`` (records).
    checkpoint_dir
        Where ``last.pt`` is written: by default at the end of every epoch or
        every 60 s, whichever comes first, about 1% of the time at most (plus every
        ``checkpoint_every_steps`` steps / ``checkpoint_every_minutes`` minutes
        where set); ``$HACN_CHECKPOINT_EVERY`` (``60s``, ``5m``, ``500steps``)
        replaces that cadence. Always at the end and on SIGINT / SIGTERM / SIGHUP. If it
        exists, the run resumes from it; a finished run is not trained again.
    progress
        tqdm progress bar with loss and throughput; off when False or when
        ``$HACN_QUIET=1``.

    Raises :class:`NonFiniteLossError` when the loss becomes NaN/inf (after
    saving ``nonfinite.pt`` in ``checkpoint_dir``, or in a temporary folder
    named in the message), :class:`TrainingInterrupted` on SIGINT / SIGTERM / SIGHUP
    (after saving ``last.pt``), :class:`CorruptCheckpointError` for a
    ``last.pt`` that cannot be resumed from, and :class:`TrainConfigError`
    for a configuration that cannot work with the given data.
    """
    cfg = config if isinstance(config, TrainConfig) else TrainConfig.from_dict(config)
    run = _Run(model, train, cfg, val=val, test=test, loss_fn=loss_fn, forward=forward,
               batch_to_device=batch_to_device, collate_fn=collate_fn, metrics=metrics, callbacks=callbacks,
               checkpoint_dir=checkpoint_dir, progress=progress)
    with stop_on_signals(run.on_signal), _fast_paths(run.device, cfg.tf32):
        run.setup()
        result = run.run()
    record_segments(result.wall_time_s, run.prior_wall, result.segments, run._devices())
    return result
