"""The training configuration: every knob of :func:`hacn_core.engine.training.fit`, validated.

:class:`TrainConfig` names the optimizer, schedule, precision, batching, checkpointing
and distributed settings of one run; a bad value raises :class:`TrainConfigError`
naming the field and its allowed values. :func:`optimizer_for` and
:func:`schedule_for` turn a config into the plain arguments of
:mod:`hacn_core.engine.optim`, which itself knows nothing of configs.

How often a run checkpoints is the user's choice, not the experiment's: the
environment variable ``$HACN_CHECKPOINT_EVERY`` (set by ``python -m hacn_core
run --checkpoint-every``) read by :func:`checkpoint_cadence` overrides the
config's ``checkpoint_every_*`` fields (which are resume-free: they never enter
a stored result's configuration).
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from hacn_core.engine.optim import (
    DEFAULT_NO_DECAY_ROLES,
    FUSED_OPTIMIZERS,
    MILESTONE_UNITS,
    OPTIMIZERS,
    PLATEAU_MODES,
    SCHEDULE_UNITS,
    SCHEDULES,
    LRSchedule,
    build_optimizer,
)
from hacn_core.engine.roles import ROLES

PRECISIONS: tuple[str, ...] = ("auto", "fp32", "bf16", "fp16")
CHECKPOINT_EVERY_ENV = "HACN_CHECKPOINT_EVERY"
CHECKPOINT_EVERY_FORMS = ("<S>s (seconds, e.g. 60s), <M>m (minutes, e.g. 5m), "
                          "<N>steps or <N> (optimizer steps, e.g. 500steps)")
DEFAULT_CHECKPOINT_SECONDS = 60.0  # the default cadence: every epoch or every minute, whichever comes first
CHECKPOINT_BUDGET = 0.01  # the default cadence spends about this fraction of the wall time on checkpoints, at most
DEVICE_PATTERN = re.compile(r"^(auto|cpu|mps|cuda(:\d+)?)$")  # what ``device`` may name


class TrainConfigError(ValueError):
    """A bad training configuration; the message names the field and the allowed values."""


# ----------------------------------------------------------------------------- config


def invalid(name: str, value: Any, allowed: str) -> None:
    """Raise :class:`TrainConfigError` for field ``name``, listing what ``allowed`` values it takes."""
    raise TrainConfigError(f"{name}={value!r} is invalid; allowed: {allowed}")


def _is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool) and math.isfinite(v)


@dataclass
class TrainConfig:
    """Everything that decides how a model is trained (JSON-serialisable).

    Fields are validated on construction; a bad value raises
    :class:`TrainConfigError` naming the field and its allowed values.
    Epoch-valued fields (``warmup_epochs``, ``milestones``) may be fractional.
    ``batch_size`` is the global batch of one forward/backward pass (summed over
    DDP ranks); an optimizer step sees ``batch_size * accumulate`` samples.

    Less obvious fields: ``milestone_unit`` says whether ``milestones`` are epochs
    or fractions of training; ``plateau_metric`` is ``"train_loss"`` or
    ``"val_<metric>"``; ``precision="auto"`` is bf16 autocast on CUDA GPUs that
    support it and fp32 elsewhere (``"fp16"`` adds a grad scaler);
    ``keep_on_device`` keeps tensor datasets on the device (False: stream them
    through a DataLoader); ``eval_batch_size`` defaults to ``batch_size``;
    ``record_every`` (epochs, 0 = only before and after training) or
    ``record_every_steps`` set how often parameters and callback values are
    recorded; ``sync_every`` is how many steps the losses stay on an accelerator
    before being read (0 = auto: 1 on CPU, 32 otherwise); ``tf32`` allows
    TensorFloat-32 matmuls on CUDA; ``checkpoint_every_steps`` /
    ``checkpoint_every_minutes`` add exact checkpoint triggers to the default
    cadence, and ``$HACN_CHECKPOINT_EVERY`` replaces them all
    (:func:`checkpoint_cadence`).
    """

    epochs: int
    batch_size: int
    lr: float
    # optimizer (hacn_core.engine.optim)
    optimizer: str = "adamw"
    weight_decay: float = 0.0
    momentum: float = 0.9  # sgd only
    nesterov: bool = False  # sgd only; Adam with Nesterov momentum is optimizer="nadam"
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    fused: bool | None = None  # None: fused kernels on CUDA (adam, adamw, sgd)
    no_decay_roles: tuple[str, ...] = DEFAULT_NO_DECAY_ROLES
    # schedule (per step, or once an epoch with schedule_unit="epoch")
    schedule: str = "constant"
    schedule_unit: str = "step"
    warmup_epochs: float = 0.0
    min_lr: float = 0.0
    milestones: tuple[float, ...] = ()
    milestone_unit: str = "epoch"
    gamma: float = 0.1
    plateau_patience: int = 10
    plateau_metric: str = "val_loss"
    plateau_mode: str = "min"
    # loss and gradients
    label_smoothing: float = 0.0
    grad_clip: float | None = None
    accumulate: int = 1
    # data order
    shuffle: bool = True
    drop_last: bool = False
    # hardware
    device: str = "auto"
    precision: str = "auto"
    compile: bool = False
    tf32: bool = True
    keep_on_device: bool = True
    num_workers: int = 0
    eval_batch_size: int | None = None
    # bookkeeping
    seed: int = 0
    eval_every: int = 1
    record_every: int = 1
    record_every_steps: int | None = None
    checkpoint_every_steps: int | None = None
    checkpoint_every_minutes: float | None = None
    sync_every: int = 0

    def __post_init__(self) -> None:
        self.betas = tuple(self.betas)  # type: ignore[assignment]
        self.no_decay_roles = tuple(self.no_decay_roles)
        self.milestones = tuple(self.milestones)
        for name in ("epochs", "batch_size", "accumulate"):
            v = getattr(self, name)
            if not _is_int(v) or v < 1:
                invalid(name, v, "an integer >= 1")
        if not _is_num(self.lr) or self.lr <= 0:
            invalid("lr", self.lr, "a finite number > 0")
        if self.optimizer not in OPTIMIZERS:
            invalid("optimizer", self.optimizer, ", ".join(OPTIMIZERS))
        if not _is_num(self.weight_decay) or self.weight_decay < 0:
            invalid("weight_decay", self.weight_decay, "a number >= 0")
        if not _is_num(self.momentum) or not 0 <= self.momentum < 1:
            invalid("momentum", self.momentum, "a number in [0, 1)")
        if not isinstance(self.nesterov, bool):
            invalid("nesterov", self.nesterov, "True or False")
        if self.nesterov and self.optimizer != "sgd":
            invalid("nesterov", self.nesterov,
                  "True only with optimizer='sgd' (for Adam with Nesterov momentum use optimizer='nadam')")
        if self.nesterov and self.momentum == 0:
            invalid("nesterov", self.nesterov, "True only with momentum > 0")
        if len(self.betas) != 2 or not all(_is_num(b) and 0 <= b < 1 for b in self.betas):
            invalid("betas", self.betas, "two numbers in [0, 1)")
        if not _is_num(self.eps) or self.eps <= 0:
            invalid("eps", self.eps, "a number > 0")
        if self.fused is not None and not isinstance(self.fused, bool):
            invalid("fused", self.fused, "None (auto), True or False")
        if self.fused and self.optimizer not in FUSED_OPTIMIZERS:
            invalid("fused", self.fused, f"True only with optimizer in {', '.join(FUSED_OPTIMIZERS)}")
        bad_roles = [r for r in self.no_decay_roles if r not in ROLES]
        if bad_roles:
            invalid("no_decay_roles", self.no_decay_roles, f"a subset of {', '.join(ROLES)}")
        if self.schedule not in SCHEDULES:
            invalid("schedule", self.schedule, ", ".join(SCHEDULES))
        if self.schedule_unit not in SCHEDULE_UNITS:
            invalid("schedule_unit", self.schedule_unit, ", ".join(SCHEDULE_UNITS))
        if not _is_num(self.warmup_epochs) or self.warmup_epochs < 0:
            invalid("warmup_epochs", self.warmup_epochs, "a number >= 0")
        if self.warmup_epochs > self.epochs or (self.schedule == "cosine" and self.warmup_epochs >= self.epochs
                                                 and self.warmup_epochs > 0):
            invalid("warmup_epochs", self.warmup_epochs,
                  f"a number of epochs shorter than training (epochs={self.epochs})")
        if not _is_num(self.min_lr) or not 0 <= self.min_lr <= self.lr:
            invalid("min_lr", self.min_lr, f"a number in [0, lr={self.lr}]")
        if self.milestone_unit not in MILESTONE_UNITS:
            invalid("milestone_unit", self.milestone_unit, ", ".join(MILESTONE_UNITS))
        if self.milestones and self.schedule != "multistep":
            invalid("milestones", self.milestones, "() unless schedule='multistep'")
        if self.schedule == "multistep":
            top = self.epochs if self.milestone_unit == "epoch" else 1
            ok = (len(self.milestones) > 0 and all(_is_num(m) and 0 < m <= top for m in self.milestones)
                  and list(self.milestones) == sorted(set(self.milestones)))
            if not ok:
                invalid("milestones", self.milestones,
                      f"a non-empty increasing sequence in (0, {top}] ({self.milestone_unit}s)")
        if not _is_num(self.gamma) or not 0 < self.gamma <= 1:
            invalid("gamma", self.gamma, "a number in (0, 1]")
        if not _is_int(self.plateau_patience) or self.plateau_patience < 0:
            invalid("plateau_patience", self.plateau_patience, "an integer >= 0")
        if not isinstance(self.plateau_metric, str) or not (
            self.plateau_metric == "train_loss" or self.plateau_metric.startswith("val_")
        ):
            invalid("plateau_metric", self.plateau_metric, "'train_loss' or 'val_<metric>' (e.g. 'val_loss')")
        if self.plateau_mode not in PLATEAU_MODES:
            invalid("plateau_mode", self.plateau_mode, ", ".join(PLATEAU_MODES))
        if not _is_num(self.label_smoothing) or not 0 <= self.label_smoothing < 1:
            invalid("label_smoothing", self.label_smoothing, "a number in [0, 1)")
        if self.grad_clip is not None and (not _is_num(self.grad_clip) or self.grad_clip <= 0):
            invalid("grad_clip", self.grad_clip, "None or a number > 0")
        for name in ("shuffle", "drop_last", "compile", "tf32", "keep_on_device"):
            if not isinstance(getattr(self, name), bool):
                invalid(name, getattr(self, name), "True or False")
        if not isinstance(self.device, str) or not DEVICE_PATTERN.match(self.device):
            invalid("device", self.device, "auto, cpu, cuda, cuda:<index>, mps")
        if self.precision not in PRECISIONS:
            invalid("precision", self.precision, ", ".join(PRECISIONS))
        for name in ("num_workers", "sync_every", "record_every"):
            v = getattr(self, name)
            if not _is_int(v) or v < 0:
                invalid(name, v, "an integer >= 0" + (" (0 = auto)" if name == "sync_every" else ""))
        if not _is_int(self.seed) or self.seed < 0:
            invalid("seed", self.seed, "an integer >= 0")
        if not _is_int(self.eval_every) or self.eval_every < 1:
            invalid("eval_every", self.eval_every, "an integer >= 1")
        for name in ("eval_batch_size", "record_every_steps", "checkpoint_every_steps"):
            v = getattr(self, name)
            if v is not None and (not _is_int(v) or v < 1):
                invalid(name, v, "None or an integer >= 1")
        m = self.checkpoint_every_minutes
        if m is not None and (not _is_num(m) or m <= 0):
            invalid("checkpoint_every_minutes", m, "None or a number > 0")

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-serialisable dict (tuples become lists)."""
        return {f.name: (list(v) if isinstance(v := getattr(self, f.name), tuple) else v)
                for f in dataclasses.fields(self)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TrainConfig:
        """Inverse of :meth:`to_dict`; unknown keys are an error naming the allowed fields."""
        names = [f.name for f in dataclasses.fields(cls)]
        unknown = [k for k in data if k not in names]
        if unknown:
            raise TrainConfigError(f"unknown TrainConfig field(s) {unknown}; allowed: {', '.join(names)}")
        missing = [n for n in ("epochs", "batch_size", "lr") if n not in data]
        if missing:
            raise TrainConfigError(f"missing TrainConfig field(s) {missing}")
        return cls(**dict(data))

    def replace(self, **changes: Any) -> TrainConfig:
        """A copy with ``changes`` applied (validated again)."""
        return dataclasses.replace(self, **changes)


def optimizer_for(model: nn.Module, config: TrainConfig, device_type: str = "cpu") -> torch.optim.Optimizer:
    """The optimizer ``config`` names, over ``model``'s parameter groups by role."""
    return build_optimizer(model, config.optimizer, lr=config.lr, weight_decay=config.weight_decay,
                           no_decay_roles=config.no_decay_roles, betas=config.betas, eps=config.eps,
                           momentum=config.momentum, nesterov=config.nesterov, fused=config.fused,
                           device_type=device_type)


def schedule_for(config: TrainConfig, steps_per_epoch: int) -> LRSchedule:
    """The learning-rate schedule of ``config``: its epochs and fractions of training become steps
    (``schedule_unit="epoch"``: epochs, the schedule stepping once an epoch and holding its rate through it)."""
    per_epoch = config.schedule_unit == "epoch"
    unit = 1 if per_epoch else steps_per_epoch  # the schedule's own steps in one epoch
    total = config.epochs * unit
    warmup = round(config.warmup_epochs * unit)
    if config.warmup_epochs > 0:
        warmup = max(1, warmup)
    per_unit = unit if config.milestone_unit == "epoch" else total
    return LRSchedule(
        config.schedule,
        config.lr,
        total,
        warmup_steps=min(warmup, total),
        milestone_steps=[round(m * per_unit) for m in config.milestones],
        gamma=config.gamma,
        min_lr=config.min_lr,
        plateau_patience=config.plateau_patience,
        plateau_mode=config.plateau_mode,
        unit_steps=steps_per_epoch if per_epoch else 1,
    )


# ----------------------------------------------------------------------------- checkpoint cadence


@dataclass(frozen=True)
class CheckpointCadence:
    """When :func:`hacn_core.engine.training.fit` writes ``last.pt`` (besides once at the end).

    A checkpoint is written after optimizer step ``s`` when ``steps`` divides
    ``s``, or once ``seconds`` have passed since the last one. ``default`` adds
    the default cadence: at the end of every epoch or after
    :data:`DEFAULT_CHECKPOINT_SECONDS`, whichever comes first, but never sooner
    after the last checkpoint than ``1 / CHECKPOINT_BUDGET`` times what that one
    took to write (so that saving costs about :data:`CHECKPOINT_BUDGET` of the
    wall time at most, even when epochs last milliseconds).
    """

    steps: int | None = None
    seconds: float | None = None
    default: bool = False


_CADENCE = re.compile(r"^\s*(?P<n>\d+(?:\.\d*)?|\.\d+)\s*(?P<unit>s|m|steps?|)\s*$")


def parse_checkpoint_every(text: str, name: str = CHECKPOINT_EVERY_ENV) -> CheckpointCadence:
    """The cadence a user wrote: ``60s`` / ``1.5s`` (seconds), ``5m`` (minutes), ``500steps`` or ``500``
    (optimizer steps). ``name`` (the variable or flag it came from) goes into the error."""
    match = _CADENCE.match(text) if isinstance(text, str) else None
    if match is None or float(match["n"]) <= 0:
        invalid(name, text, CHECKPOINT_EVERY_FORMS)
    number, unit = match["n"], match["unit"]  # type: ignore[index]
    if unit in ("", "step", "steps"):
        if not number.isdigit():
            invalid(name, text, f"a whole number of steps; {CHECKPOINT_EVERY_FORMS}")
        return CheckpointCadence(steps=int(number))
    return CheckpointCadence(seconds=float(number) * (60.0 if unit == "m" else 1.0))


def checkpoint_cadence(config: TrainConfig | None, environ: Mapping[str, str] | None = None,
                       name: str = CHECKPOINT_EVERY_ENV) -> CheckpointCadence:
    """The cadence a run of ``config`` uses: ``$HACN_CHECKPOINT_EVERY`` when set (it replaces everything
    else); otherwise the default cadence plus the config's ``checkpoint_every_steps`` /
    ``checkpoint_every_minutes`` where set (exact triggers, no budget). ``environ`` defaults to
    ``os.environ``; a bad value raises :class:`TrainConfigError` naming ``name`` (the variable, or the
    flag that set it)."""
    text = (os.environ if environ is None else environ).get(CHECKPOINT_EVERY_ENV, "")
    if text.strip():
        return parse_checkpoint_every(text, name)
    if config is None:
        return CheckpointCadence(default=True)
    minutes = config.checkpoint_every_minutes
    return CheckpointCadence(steps=config.checkpoint_every_steps,
                             seconds=minutes * 60.0 if minutes is not None else None, default=True)
