"""Dry run of an experiment's profile: build every model, take one training step, estimate the cost.

No paper profile has run on the hardware it is meant for. Before a reader rents a
GPU, ``python -m hacn_core run <experiment> --profile paper --dry-run`` checks,
on the CPU and in seconds, that each configuration's model builds and trains,
and says what the whole profile costs:

* configurations that build the same model on the same input shape (equal
  :attr:`DryRunPlan.key`) form a group, and one dry run stands for all of them;
* per group: the study's own model is built and takes **one training step** on
  synthetic data of the right shape (forward, the study's loss, backward, the
  optimizer step, then what the study does after a step, e.g. AWNN's width
  update, Algorithm 1 line 5), at a reduced batch when the paper's batch would
  not fit in a few seconds on a CPU (:data:`DEFAULT_FLOP_BUDGET`);
* it reports the **parameter count** of the model as built (AWNN: at its
  starting width), the **FLOPs of one training step at the paper's batch**
  (counted as :class:`torch.utils.flop_counter.FlopCounterMode` counts them, at the
  batch the step ran at and scaled linearly: matrix products and convolutions, forward 2
  and backward 4 per multiply-add, except the input gradient of the first layer,
  which is never computed; element-wise work, normalisation and the optimizer
  update are not counted), the **optimizer steps** of the schedule
  (``epochs x ceil(n_train / batch)``, evaluation passes not included), and
  **GPU-hours**: total FLOPs over an assumed sustained throughput
  (:class:`Throughput`), or, when more, the time to launch the step's kernels:
  eager PyTorch launches about one GPU kernel per ATen operator (views launch
  none, so the count errs high), and the operators of forward and backward are
  counted during the step; small models are bound by launches, not arithmetic.
  Both rates are assumptions (:data:`H100_ASSUMED`), not measurements; data
  loading and evaluation are not included.

With ``data`` (``run --dry-run --data``), each group's step is taken on a batch read from the
data root (``$HACN_DATA``) through the study's own loader, in the published file format, instead
of synthetic tensors (:mod:`hacn_core.paper_data` says, per experiment, which loader and which
preprocessing): the FLOPs are then counted on that batch, and the report names the files read.

Nothing is written to the results store and the caller's random state is
restored. A study opts in with ``Experiment.plan``: ``plan(config)`` returns a
:class:`DryRunPlan` (or one per model, when a configuration trains several)
built from the study's own model builder and trainer settings. An experiment
without a plan trains no model (timings, exact checks) and is skipped with a
line that says so.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import flop_registry

from hacn_core.engine.training import Callback, TrainConfig, TrainState, optimizer_for, steps_per_epoch

if TYPE_CHECKING:
    from hacn_core.engine.registry import Experiment

LossFn = Callable[[Tensor, Tensor], Tensor]

#: FLOPs one CPU step may take before the batch is reduced (about 20 GFLOP: a few seconds on one core)
DEFAULT_FLOP_BUDGET = 2e10
#: H100 SXM dense bf16 tensor-core peak (NVIDIA's H100 datasheet, without sparsity)
H100_BF16_DENSE_PEAK = 989e12


@dataclass(frozen=True)
class Throughput:
    """The GPU the estimate assumes: a sustained FLOP rate and the time of one kernel launch."""

    description: str
    flops_per_s: float
    launch_s: float  # per ATen operator of forward and backward

    def hours(self, flops: float, steps: int, ops_per_step: int) -> float:
        """GPU-hours of ``steps`` optimizer steps doing ``flops`` in all: arithmetic or launches, the larger."""
        return max(flops / self.flops_per_s, steps * ops_per_step * self.launch_s) / 3600.0


#: The assumption the estimate prints: 35% of the H100's dense bf16 peak sustained (an assumed
#: utilisation for convolutional and MLP models in eager PyTorch with bf16 autocast), and 5 microseconds
#: per kernel launch (eager PyTorch's overhead per operator). Neither is measured here.
H100_ASSUMED = Throughput("35% of an H100 SXM's dense bf16 peak of 989 TFLOP/s, and 5 us per kernel launch",
                          0.35 * H100_BF16_DENSE_PEAK, 5e-6)


class StepCounter(TorchDispatchMode):
    """Counts, in one pass, the FLOPs that :class:`~torch.utils.flop_counter.FlopCounterMode` counts and the
    ATen operators dispatched.

    FLOPs: torch's own formulas (``torch.utils.flop_counter.flop_registry``: matrix products, convolutions,
    attention), applied as FlopCounterMode applies them: an operator without a formula that has a composite
    kernel is decomposed and its parts counted. Operators: those the step dispatches, about one GPU kernel
    each in eager PyTorch; the parts of a decomposition are no kernels of their own and are not counted.
    One mode where FlopCounterMode and a second, operator-counting mode ran: FlopCounterMode's bookkeeping per
    module (hooks on every module call, for a per-module breakdown the dry run does not print) and the second
    mode cost several times what this one does on the small networks (a forward and backward of gates-mnist's
    depth-100 network at batch 128 on one CPU thread: 0.7 s counted by the two, 0.15 s by this one, 0.06 s
    uncounted). tests/test_dry_run.py checks both counts against FlopCounterMode's and a plain operator counter's.
    """

    #: Operators with a composite kernel that do no matrix product or convolution, run whole instead of
    #: decomposed (the FLOPs are the same, none): batch norm's decomposition is a dozen element-wise prims,
    #: each dispatched through Python, which cost more than the arithmetic of a BatchNorm network's step.
    UNDECOMPOSED = frozenset(getattr(packet, name) for packet in (
        torch.ops.aten.native_batch_norm, torch.ops.aten._native_batch_norm_legit,
        torch.ops.aten._native_batch_norm_legit_no_training) for name in packet.overloads())
    _handling: dict[Any, tuple[Any, bool]] = {}  # per operator: its FLOP formula, and whether it is decomposed

    def __init__(self) -> None:
        super().__init__()
        self.flops = 0
        self.ops = 0
        self._decomposing = 0  # depth of decompositions under way: their parts are not operators of the step

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # TorchDispatchMode wraps a subclass's __torch_dispatch__ in torch._disable_dynamo (so that a function
        # compiled under the mode does not compile the mode's code), a wrapper around every operator's dispatch;
        # nothing is compiled under this mode (the counted CPU step runs eagerly).
        return False

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        if not self._decomposing:
            self.ops += 1
        formula, decomposes = self._handling.get(func) or self.handling(func)
        if decomposes:
            self._decomposing += 1
            try:
                with self:
                    out = func.decompose(*args, **kwargs)
            finally:
                self._decomposing -= 1
            if out is not NotImplemented:
                return out
        out = func(*args, **kwargs)
        if formula is not None:
            self.flops += formula(*args, **kwargs, out_val=out)
        return out

    @classmethod
    def handling(cls, func: Any) -> tuple[Any, bool]:
        """``func``'s FLOP formula, and whether it is decomposed: as FlopCounterMode decomposes an operator
        without a formula that has a composite kernel, but for :data:`UNDECOMPOSED` (cached per operator: the
        formulas and kernels are registered once, at import)."""
        formula = flop_registry.get(func._overloadpacket)
        key = torch._C.DispatchKey.CompositeImplicitAutograd
        decomposes = (formula is None and func not in cls.UNDECOMPOSED and func is not torch.ops.prim.device.default
                      and (key in func.py_kernels or torch._C._dispatch_has_kernel_for_dispatch_key(func.name(), key)))
        cls._handling[func] = formula, decomposes
        return formula, decomposes


def classification_batch(shape: Sequence[int], classes: int, seed: int = 0) -> Callable[[int], tuple[Tensor, Tensor]]:
    """A batch maker: ``make(b)`` returns standard-normal inputs ``(b, *shape)`` and uniform labels ``(b,)``."""
    shape = tuple(int(s) for s in shape)

    def make(batch_size: int) -> tuple[Tensor, Tensor]:
        gen = torch.Generator().manual_seed(seed)
        return torch.randn(batch_size, *shape, generator=gen), torch.randint(0, classes, (batch_size,), generator=gen)

    return make


@dataclass(frozen=True)
class DryRunPlan:
    """What the dry run needs to know about one configuration's training.

    ``key``: the configuration entries (or values derived from them) that the model
    and the shape of one input depend on; configurations with equal keys share one
    dry run. ``model()`` builds the configuration's model with the study's own
    builder. ``batch(b)`` returns synthetic ``(inputs, targets)`` of batch ``b``.
    ``train``: the run's trainer settings, whose optimizer the step uses and whose
    ``batch_size`` and ``epochs`` are the paper's; ``n_train``: training examples per
    epoch. ``loss(model)`` returns the training loss (default: mean cross-entropy);
    ``callbacks(loss)`` the study's callbacks whose ``on_train_begin`` and
    ``on_step_end`` run around the step (AWNN's width update). ``note``: a line
    printed with the group (e.g. what the parameter count means). ``forward``: the trainer's forward
    hook, when the study trains with one. ``source``: the files ``batch`` reads (empty: synthetic).
    ``timing_batch``: the batch a step timed on a device runs at, when the planned batch folds several
    micro-batches of gradient accumulation into one (:func:`time_on_device`; device-hours scale by the
    batch ratio).
    """

    key: Mapping[str, Any]
    model: Callable[[], nn.Module]
    batch: Callable[[int], tuple[Tensor, Tensor]]
    train: TrainConfig
    n_train: int
    loss: Callable[[nn.Module], LossFn] | None = None
    callbacks: Callable[[LossFn], Sequence[Callback]] | None = None
    note: str = ""
    timing_batch: int | None = None  # the batch a timed step runs at (default train.batch_size)
    #: the trainer's ``forward(model, (x, y)) -> (output, target)`` hook (augmentation, a graph batch); default
    #: ``model(x), y``
    forward: Callable[[nn.Module, tuple[Any, Any]], tuple[Tensor, Tensor]] | None = None
    source: str = ""  # where ``batch`` reads its examples from (a data plan of ``dry_run(..., data=...)``)

    @property
    def steps_per_epoch(self) -> int:
        return steps_per_epoch(self.n_train, self.train.batch_size, self.train.accumulate, self.train.drop_last)

    @property
    def optimizer_steps(self) -> int:
        """Optimizer steps of the whole schedule: ``epochs x ceil(n_train / batch)``."""
        return self.train.epochs * self.steps_per_epoch


@dataclass(frozen=True)
class Schedule:
    """One training schedule among a group's configurations, and how many configurations follow it."""

    batch_size: int
    n_train: int
    epochs: int
    steps_per_epoch: int
    configs: int

    @property
    def optimizer_steps(self) -> int:
        return self.epochs * self.steps_per_epoch


@dataclass(frozen=True)
class StepMeasure:
    """One training step that ran: the model's class, its batch, counted FLOPs and ATen operators of
    forward and backward, wall time, loss and the model's parameters (as built, before the step)."""

    model: str
    batch_size: int
    flops: int
    ops: int
    seconds: float
    loss: float
    parameters: int


@dataclass(frozen=True)
class GroupResult:
    """The dry run of one group: configurations with the same model on the same input shape."""

    key: dict[str, Any]
    input_shape: tuple[int, ...]
    step: StepMeasure
    paper_batch: int  # the batch of the group's first configuration (the one the step stands for)
    schedules: tuple[Schedule, ...]
    device: str  # TrainConfig.device of the study's runs
    note: str = ""
    measured: DeviceMeasure | None = None  # steps timed on a device (``dry_run(..., time_steps=N)``)
    source: str = ""  # the data the step read (``dry_run(..., data=...)``); empty: synthetic

    @property
    def configs(self) -> int:
        return sum(s.configs for s in self.schedules)

    @property
    def parameters(self) -> int:
        """Parameters of the model as built (before the step)."""
        return self.step.parameters

    @property
    def reduced(self) -> bool:
        return self.step.batch_size < self.paper_batch

    def flops_per_step(self, batch_size: int | None = None) -> float:
        """FLOPs of one training step at ``batch_size`` (default: the paper's), scaled from the measured step."""
        return self.step.flops * (batch_size or self.paper_batch) / self.step.batch_size

    @property
    def optimizer_steps(self) -> int:
        """Optimizer steps of all the group's configurations together."""
        return sum(s.configs * s.optimizer_steps for s in self.schedules)

    @property
    def total_flops(self) -> float:
        return sum(s.configs * s.optimizer_steps * self.flops_per_step(s.batch_size) for s in self.schedules)

    def gpu_hours(self, throughput: Throughput = H100_ASSUMED) -> float:
        """GPU-hours of every configuration of the group, one after the other."""
        return sum(s.configs * self.run_hours(s, throughput) for s in self.schedules)

    def run_hours(self, schedule: Schedule, throughput: Throughput = H100_ASSUMED) -> float:
        """GPU-hours of one configuration that follows ``schedule``."""
        steps = schedule.optimizer_steps
        return throughput.hours(steps * self.flops_per_step(schedule.batch_size), steps, self.step.ops)

    def measured_run_hours(self, schedule: Schedule) -> float:
        """Device-hours of one configuration's training steps at the measured time per step (scaled
        linearly when the schedule's batch differs from the one timed); ``nan`` when nothing was timed."""
        if self.measured is None:
            return float("nan")
        per_step = self.measured.seconds_per_step * schedule.batch_size / self.measured.batch_size
        return schedule.optimizer_steps * per_step / 3600.0

    @property
    def measured_hours(self) -> float:
        """Device-hours of every configuration of the group, one after the other, at the measured pace."""
        return sum(s.configs * self.measured_run_hours(s) for s in self.schedules)

    @property
    def measured_flops_per_s(self) -> float:
        """FLOPs per second the timed steps sustained (FLOPs as counted by FlopCounterMode)."""
        if self.measured is None:
            return float("nan")
        return self.flops_per_step(self.measured.batch_size) / self.measured.seconds_per_step


@dataclass(frozen=True)
class DryRunReport:
    """The dry run of one experiment at one profile."""

    experiment: str
    profile: str
    configs: int
    groups: tuple[GroupResult, ...]
    throughput: Throughput
    flop_budget: float
    skipped: str = ""  # why nothing ran (an experiment that trains no model)

    @property
    def total_flops(self) -> float:
        return sum(g.total_flops for g in self.groups)

    @property
    def gpu_hours(self) -> float:
        return sum(g.gpu_hours(self.throughput) for g in self.groups)

    @property
    def measured_hours(self) -> float:
        """Device-hours of the whole profile at the measured pace (``nan`` unless every group was timed)."""
        return sum(g.measured_hours for g in self.groups)


def _plans(experiment: Experiment, config: dict[str, Any]) -> list[DryRunPlan]:
    plans = experiment.plan(config)
    return [plans] if isinstance(plans, DryRunPlan) else list(plans)


def _key(plan: DryRunPlan) -> tuple:
    return tuple(sorted((k, repr(v)) for k, v in plan.key.items())) + (tuple(plan.batch(1)[0].shape[1:]),)


def smallest_batch(model: nn.Module, paper: int) -> int:
    """One sample, two when the model has BatchNorm over features (``nn.BatchNorm1d`` needs two in training
    mode); never more than the paper's batch."""
    return min(paper, 2 if any(isinstance(m, nn.BatchNorm1d) for m in model.modules()) else 1)


def affordable_batch(forward_flops: float, counted_at: int, paper: int,
                     flop_budget: float = DEFAULT_FLOP_BUDGET) -> int:
    """The paper's batch, or the largest batch whose training step stays within ``flop_budget`` FLOPs.

    A step is taken as 3 forward passes (the backward costs about two), from ``forward_flops``, the
    forward's FLOPs counted at batch ``counted_at`` (:func:`smallest_batch`); never below ``counted_at``.
    """
    per_sample = 3 * max(forward_flops, 1) / counted_at
    return min(paper, max(counted_at, int(flop_budget // per_sample)))


def training_step(plan: DryRunPlan, batch_size: int | None = None,
                  flop_budget: float = DEFAULT_FLOP_BUDGET) -> StepMeasure:
    """Build the plan's model and take one training step on the CPU, counting its FLOPs and operators.

    The step is the trainer's: ``on_train_begin`` of the callbacks, forward, loss,
    ``zero_grad``, backward, optimizer step, ``on_step_end``; at ``batch_size``, or
    when it is ``None`` at :func:`affordable_batch`. Weights a builder draws from the
    global generator come from seed 0; the caller's random state is restored.
    Raises if the loss is not finite.
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return _step(plan, batch_size, flop_budget)


def _prepare(plan: DryRunPlan, device: torch.device):
    """The plan's model, its parameter count (as built), optimizer, loss, callbacks (begun) and trainer state
    on ``device``."""
    model = plan.model().to("cpu").train()
    parameters = sum(p.numel() for p in model.parameters())
    model = model.to(device)
    optimizer = optimizer_for(model, plan.train, device.type)
    loss_fn = plan.loss(model) if plan.loss is not None else F.cross_entropy
    callbacks = list(plan.callbacks(loss_fn)) if plan.callbacks is not None else []
    state = TrainState(model=model, optimizer=optimizer, config=plan.train, device=device,
                       steps_per_epoch=plan.steps_per_epoch, n_train=plan.n_train, curves={})
    for callback in callbacks:
        callback.on_train_begin(state)
    return model, parameters, optimizer, loss_fn, callbacks, state


def _train_step(forward: Callable[[Tensor], Tensor], loss_fn: LossFn, optimizer: torch.optim.Optimizer,
                callbacks: Sequence[Callback], state: TrainState, x: Tensor, y: Tensor,
                autocast: torch.dtype | None = None, counters: Sequence[Any] = (),
                hook: Callable[[Any, tuple[Any, Any]], tuple[Tensor, Tensor]] | None = None,
                go_on: Callable[[], bool] | None = None) -> Tensor | None:
    """One step as the trainer takes it: forward and loss (under ``autocast``), backward, gradient clipping
    (``TrainConfig.grad_clip``), optimizer step, ``on_step_end``. ``counters`` (context managers) wrap
    forward and backward; ``hook``: the trainer's ``forward(model, (x, y)) -> (output, target)``.
    ``go_on()`` is asked after the forward, inside the counters: when it says no, the step stops there
    (no loss, gradient or update) and returns ``None``."""
    with contextlib.ExitStack() as stack:
        for counter in counters:
            stack.enter_context(counter)
        with torch.autocast(x.device.type, dtype=autocast) if autocast else contextlib.nullcontext():
            out, target = hook(forward, (x, y)) if hook is not None else (forward(x), y)
            if go_on is not None and not go_on():
                return None
            loss = loss_fn(out, target)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
    if state.config.grad_clip is not None:
        torch.nn.utils.clip_grad_norm_(state.model.parameters(), state.config.grad_clip)
    optimizer.step()  # element-wise: no FLOPs FlopCounterMode counts, and fused into a few kernels on a GPU
    state.step += 1
    state.step_in_epoch += 1
    for callback in callbacks:
        callback.on_step_end(state)
    return loss.detach()


def _step(plan: DryRunPlan, batch_size: int | None, flop_budget: float) -> StepMeasure:
    """The counted CPU step. Without a ``batch_size``, the forward that chooses it is the step's own.

    The step starts at the smallest batch, under its counter; the FLOPs of its forward give the affordable
    batch. When that is the smallest (the big networks: the decoder, the WRNs) the step goes on from that
    forward; otherwise it stops before any loss, gradient or update, the random state and the buffers
    (BatchNorm's running statistics) are put back as they were, and the step is taken afresh at the
    affordable batch. The choice is the one a separate counting forward would make (the count depends on
    shapes alone), without that forward: counted on meta, it ran many operators through Python kernels and
    cost as much as a real step on the small networks; counted for real, the big networks ran it twice.
    """
    setup = _prepare(plan, torch.device("cpu"))
    if batch_size is not None:
        return _measured(plan, setup, batch_size)
    model, paper = setup[0], plan.train.batch_size
    smallest = smallest_batch(model, paper)
    rng = torch.get_rng_state()
    buffers = [(module._buffers, name, t, t.clone()) for module in model.modules()
               for name, t in module._buffers.items() if t is not None]
    step = _measured(plan, setup, smallest,
                     choose=lambda forward_flops: affordable_batch(forward_flops, smallest, paper, flop_budget))
    if isinstance(step, StepMeasure):
        return step
    torch.set_rng_state(rng)  # as if the stopped forward had never run
    with torch.no_grad():
        for table, name, tensor, saved in buffers:
            table[name] = tensor.copy_(saved)
    return _measured(plan, setup, step)


def _measured(plan: DryRunPlan, setup: tuple, batch_size: int,
              choose: Callable[[int], int] | None = None) -> StepMeasure | int:
    """The step at ``batch_size`` under a :class:`StepCounter`. ``choose(forward_flops)``, asked after
    the forward, may want another batch: the step then stops there, and that batch is returned instead."""
    model, parameters, optimizer, loss_fn, callbacks, state = setup
    x, y = plan.batch(batch_size)
    counter = StepCounter()
    wanted = batch_size

    def go_on() -> bool:
        nonlocal wanted
        if choose is not None:
            wanted = choose(counter.flops)
        return wanted == batch_size

    started = time.perf_counter()
    loss = _train_step(model, loss_fn, optimizer, callbacks, state, x, y, counters=(counter,), hook=plan.forward,
                       go_on=go_on)
    seconds = time.perf_counter() - started
    if loss is None:
        return wanted
    if not torch.isfinite(loss).all():
        raise FloatingPointError(f"the dry-run step's loss is {loss.item()} (model {type(model).__name__})")
    return StepMeasure(type(model).__name__, batch_size, int(counter.flops), counter.ops, seconds, float(loss),
                       parameters)


@dataclass(frozen=True)
class DeviceMeasure:
    """Training steps timed on a device at the paper's batch (the trainer's precision and compile settings).

    ``seconds_per_step``: the median of ``steps`` timed steps after ``warmup`` untimed ones (compilation
    and the allocator's first requests fall in the warm-up); ``peak_bytes``: the device's peak allocated
    memory over the timed steps (CUDA; 0 elsewhere); ``losses``: first and last training loss, which
    show that the steps trained.
    """

    device: str  # e.g. "cuda: NVIDIA H100 80GB HBM3" or "cpu"
    batch_size: int
    steps: int
    warmup: int
    seconds_per_step: float
    peak_bytes: int
    precision: str  # "bf16 autocast", "fp16 autocast" or "fp32"
    compiled: bool
    torch_version: str
    losses: tuple[float, float]
    parameters: int = 0  # of the model as built
    warmup_seconds: float = 0.0  # the untimed steps together (compilation happens there)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_on_device(plan: DryRunPlan, device: str | torch.device = "cuda", *, steps: int = 20, warmup: int = 5,
                   compile: bool | None = None) -> DeviceMeasure:
    """Time ``steps`` training steps of the plan at the paper's batch on ``device`` (:class:`DeviceMeasure`)
    (at ``plan.timing_batch`` when set: one micro-batch of an accumulated step).

    The step is :func:`training_step`'s (the study's loss and after-step callbacks, the study's optimizer),
    under the autocast the trainer would use there (``TrainConfig.precision``: ``auto`` is bf16 on a CUDA
    GPU) and compiled when ``compile`` (default: the trainer setting ``TrainConfig.compile``). The same
    batch is fed every step: the time of data loading is not included, nor that of evaluation passes.
    Weights come from seed 0; the caller's random state is restored.
    """
    from hacn_core.engine.results import device_description
    from hacn_core.engine.training import autocast_dtype, resolve_device, run_precision

    if steps < 1 or warmup < 0:
        raise ValueError(f"time_on_device: steps={steps}, warmup={warmup}; allowed: steps >= 1, warmup >= 0")
    device = resolve_device(device) if isinstance(device, str) else device
    compile = plan.train.compile if compile is None else compile
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        torch.manual_seed(0)
        model, parameters, optimizer, loss_fn, callbacks, state = _prepare(plan, device)
        batch_size = plan.timing_batch or plan.train.batch_size
        x, y = (t.to(device) for t in plan.batch(batch_size))
        autocast = autocast_dtype(run_precision(plan.train.precision), device)
        forward = torch.compile(model) if compile else model
        started = time.perf_counter()
        losses = [float(_train_step(forward, loss_fn, optimizer, callbacks, state, x, y, autocast, hook=plan.forward))
                  for _ in range(warmup)]
        _sync(device)
        warmup_seconds = time.perf_counter() - started
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        times = []
        for _ in range(steps):
            _sync(device)
            started = time.perf_counter()
            loss = _train_step(forward, loss_fn, optimizer, callbacks, state, x, y, autocast, hook=plan.forward)
            _sync(device)
            times.append(time.perf_counter() - started)
        losses.append(float(loss))
        peak = torch.cuda.max_memory_allocated(device) if device.type == "cuda" else 0
    precision = {None: "fp32", torch.bfloat16: "bf16 autocast", torch.float16: "fp16 autocast"}[autocast]
    return DeviceMeasure(device_description(str(device)), batch_size, steps, warmup, statistics.median(times), peak,
                         precision, bool(compile), torch.__version__, (losses[0], losses[-1]), parameters,
                         warmup_seconds)


def dry_run(experiment: Experiment, profile: str = "paper", *, where: Mapping[str, Any] | None = None,
            flop_budget: float = DEFAULT_FLOP_BUDGET, throughput: Throughput = H100_ASSUMED,
            progress: Callable[[str], None] | None = None, time_steps: int = 0,
            device: str = "auto", compile: bool | None = None,
            data: Callable[[dict[str, Any], DryRunPlan], DryRunPlan] | None = None) -> DryRunReport:
    """Dry-run the configurations of ``experiment`` at ``profile`` (matching ``where``); see the module docstring.

    ``progress(line)`` is told about each group as it runs. With ``time_steps > 0`` each group also
    trains that many timed steps at the paper's batch on ``device`` (:func:`time_on_device`; ``auto``:
    the GPU when there is one; compiled when ``compile``, default the study's ``TrainConfig.compile``),
    and the report gives device-hours at the measured pace beside the assumed ones.
    ``data(config, plan)``: the plan whose ``batch`` reads real examples (``hacn_core.paper_data.data_plan``);
    each group's step (and timing) then runs on it.
    """
    from hacn_core.engine.registry import check_where, where_context

    configs = check_where(experiment.runs(profile), where, context=where_context(experiment, profile))
    if experiment.plan is None:
        return DryRunReport(experiment.id, profile, len(configs), (), throughput, flop_budget,
                            skipped=f"{experiment.id} trains no model (it measures or computes: "
                                    f"{experiment.title}); nothing to dry-run")
    groups: dict[tuple, list[DryRunPlan]] = {}
    first_config: dict[tuple, dict[str, Any]] = {}
    for config in configs:
        for plan in _plans(experiment, config):
            groups.setdefault(_key(plan), []).append(plan)
            first_config.setdefault(_key(plan), config)
    results = []
    for i, (key, plans) in enumerate(groups.items(), start=1):
        first = plans[0]
        if progress is not None:
            progress(f"[{i}/{len(groups)}] {_describe(first.key)} ({len(plans)} configurations)")
        stepped = first if data is None else data(first_config[key], first)
        step = training_step(stepped, flop_budget=flop_budget)
        counts: dict[tuple[int, int, int, int], int] = {}
        for p in plans:
            sched = (p.train.batch_size, p.n_train, p.train.epochs, p.steps_per_epoch)
            counts[sched] = counts.get(sched, 0) + 1
        schedules = tuple(Schedule(*s, configs=n) for s, n in counts.items())
        measured = time_on_device(stepped, device, steps=time_steps, compile=compile) if time_steps > 0 else None
        results.append(GroupResult(dict(first.key), tuple(first.batch(1)[0].shape[1:]), step,
                                   first.train.batch_size, schedules, first.train.device, first.note, measured,
                                   stepped.source))
    return DryRunReport(experiment.id, profile, len(configs), tuple(results), throughput, flop_budget)


def _describe(key: Mapping[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in key.items()) or "(one model)"


def _count(n: float) -> str:
    return f"{n:,.0f}" if n < 1e6 else f"{n:.3g}"


def format_report(report: DryRunReport) -> str:
    """The report as the command line prints it: the method and assumptions, one block per group, the total."""
    if report.skipped:
        return f"dry run of {report.experiment} at the {report.profile} profile: {report.skipped}"
    tp = report.throughput
    shared = {k: v for k, v in report.groups[0].key.items()
              if all(k in g.key and repr(g.key[k]) == repr(v) for g in report.groups)} if report.groups else {}
    lines = [
        f"Dry run of {report.experiment} at the {report.profile} profile: {report.configs} configurations in "
        f"{len(report.groups)} groups (configurations that build the same model on the same input shape).",
        "Per group: the study's own model takes one training step on the CPU on "
        + ("a batch read from the data root through the study's own loader (each group's data line)"
           if any(g.source for g in report.groups) else "synthetic data of the right shape")
        + " (forward, loss, backward, optimizer step, the study's after-step work); nothing is stored.",
        "FLOPs: counted as torch.utils.flop_counter.FlopCounterMode counts them (matrix products and convolutions) at "
        "the batch the step ran at and scaled linearly to the paper's batch; the batch is reduced when the paper's "
        f"would take more than {report.flop_budget / 1e9:.3g} GFLOP (a few seconds on a CPU).",
        "Optimizer steps = epochs x ceil(examples / batch); evaluation passes are not counted.",
        f"GPU-hours assume {tp.description}: per run max(FLOPs / {tp.flops_per_s / 1e12:.0f} TFLOP/s, "
        f"steps x ATen operators of forward and backward per step x {tp.launch_s * 1e6:g} us).",
    ]
    if shared:
        lines.append(f"Every group has {_describe(shared)}.")
    for i, g in enumerate(report.groups, start=1):
        step = g.step
        own = {k: v for k, v in g.key.items() if k not in shared}
        lines += ["", f"[{i}] {_describe(own)}: stands for {g.configs} configuration{'s' * (g.configs != 1)}",
                  f"    model {step.model}, input {g.input_shape}: {g.parameters:,} parameters"
                  + (f" ({g.note})" if g.note else "")]
        if g.reduced:
            ran = (f"step ran at a reduced batch of {step.batch_size}: the paper's {g.paper_batch} would take "
                   f"{g.flops_per_step() / 1e9:.3g} GFLOP on the CPU")
        else:
            ran = f"step ran at the paper's batch of {step.batch_size}"
        lines.append(f"    {ran}; loss {step.loss:.4g}, {step.seconds:.2f} s, {step.ops:,} ATen operators")
        if g.source:
            lines.append(f"    data: {g.source}")
        scale = f" (counted at batch {step.batch_size}, x{g.paper_batch / step.batch_size:.4g})" if g.reduced else ""
        lines.append(f"    FLOPs per training step at the paper's batch of {g.paper_batch}: "
                     f"{g.flops_per_step():.4g}{scale}")
        for sched in g.schedules:
            flops = sched.optimizer_steps * g.flops_per_step(sched.batch_size)
            other = ""
            if sched.batch_size != g.paper_batch:
                other = f", {g.flops_per_step(sched.batch_size):.4g} FLOPs/step"
            lines.append(f"    {sched.configs} run{'s' * (sched.configs != 1)} of {sched.epochs:,} epochs x "
                         f"{sched.steps_per_epoch:,} steps ({sched.n_train:,} examples, batch {sched.batch_size}"
                         f"{other}) = {sched.optimizer_steps:,} optimizer steps, {flops:.3g} FLOPs, "
                         f"{g.run_hours(sched, tp):.3g} GPU-hours per run")
        cpu = "; the study trains these on the CPU (device='cpu')" if g.device == "cpu" else ""
        lines.append(f"    group: {_count(g.optimizer_steps)} optimizer steps, {g.total_flops:.3g} FLOPs, "
                     f"{g.gpu_hours(tp):.3g} GPU-hours{cpu}")
        if g.measured is not None:
            lines += _measured_lines(g)
    lines += ["", f"Total: {report.configs} configurations, {report.total_flops:.3g} training FLOPs, "
                  f"{report.gpu_hours:.3g} GPU-hours one after the other (on the assumptions above)."]
    if report.groups and all(g.measured is not None for g in report.groups):
        lines.append(f"Measured on {report.groups[0].measured.device}: {report.measured_hours:.3g} device-hours one "
                     "after the other (training steps at the timed pace; evaluation passes and data loading not "
                     "included).")
    return "\n".join(lines)


def _measured_lines(g: GroupResult) -> list[str]:
    m = g.measured
    assert m is not None
    rate = g.measured_flops_per_s
    memory = f", peak memory {m.peak_bytes / 2**30:.3g} GiB" if m.peak_bytes else ""
    lines = [f"    timed on {m.device} ({m.precision}, {'compiled' if m.compiled else 'eager'}, torch "
             f"{m.torch_version}): {m.seconds_per_step * 1e3:.3g} ms per step at batch {m.batch_size} "
             f"({m.batch_size / m.seconds_per_step:,.0f} examples/s; median of {m.steps} steps after {m.warmup} "
             f"untimed), {rate / 1e12:.3g} TFLOP/s = {100 * rate / H100_BF16_DENSE_PEAK:.1f}% of an H100's dense "
             f"bf16 peak{memory}; loss {m.losses[0]:.4g} -> {m.losses[1]:.4g}"]
    for sched in g.schedules:
        lines.append(f"    at that pace: {g.measured_run_hours(sched):.3g} device-hours per run of "
                     f"{sched.optimizer_steps:,} steps (batch {sched.batch_size})")
    return lines


def report_record(report: DryRunReport, wall_seconds: float | None = None) -> dict[str, Any]:
    """The report as a JSON-ready record: per group its key, parameters, FLOPs per step, schedules, the
    assumed GPU-hours and, where steps were timed, the measurement; with the code version, the torch
    thread count and ``wall_seconds`` (the dry run's, when the caller timed it)."""
    from dataclasses import asdict

    from hacn_core.engine.results import code_version, library_versions

    def group(g: GroupResult) -> dict[str, Any]:
        return {
            "key": {k: repr(v) if not isinstance(v, (int, float, str, bool, type(None))) else v
                    for k, v in g.key.items()},
            "input_shape": list(g.input_shape), "parameters": g.parameters, "paper_batch": g.paper_batch,
            "data": g.source or "synthetic",
            "flops_per_step": g.flops_per_step(), "cpu_step": asdict(g.step),
            "schedules": [asdict(s) | {"optimizer_steps": s.optimizer_steps} for s in g.schedules],
            "assumed_gpu_hours": g.gpu_hours(report.throughput),
            "measured": None if g.measured is None else asdict(g.measured) | {
                "flops_per_s": g.measured_flops_per_s, "device_hours": g.measured_hours,
                "fraction_of_h100_bf16_peak": g.measured_flops_per_s / H100_BF16_DENSE_PEAK},
        }

    return {"experiment": report.experiment, "profile": report.profile, "configs": report.configs,
            "throughput_assumed": asdict(report.throughput), "flop_budget": report.flop_budget,
            "groups": [group(g) for g in report.groups], "assumed_gpu_hours": report.gpu_hours,
            "measured_device_hours": report.measured_hours if report.groups and all(
                g.measured is not None for g in report.groups) else None,
            "code": code_version(), "versions": library_versions(), "threads": torch.get_num_threads(),
            "wall_seconds": wall_seconds, "skipped": report.skipped}
