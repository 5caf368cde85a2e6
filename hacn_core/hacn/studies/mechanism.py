"""Why H-ACN's residual weights learn under the public Mixer code and not under Eq. 2 (issue 42).

The converged Mixer study (``hacn-mixer-long``) found that under the paper's Eq. 2,
``x_i = f_i(x_{i-1}) + a_i x_{i-1}``, the residual weights end where they started
(``Gamma`` about 0.25 from ``a_i ~ N(0.25, 0.005)``) and the converged weights of
different seeds hardly correlate, while under the public code's rule
(``hacn_code_mixer``: ``x_i = c + a_i (t + x_{i-1})``, ``s += c + a_i t``) they rise.
This experiment, ``hacn-mechanism``, measures *why*: it records, at every optimizer
step, the gradient every residual scalar receives and how it moves, and sums these
per window of ``record_every_steps`` steps into statistics that add up exactly over
any longer window (so a report can pool windows without the per-step values).

What is measured, per residual scalar ``a_i`` (and ``b_i`` of the split-gain rule)
----------------------------------------------------------------------------------
With ``g_t`` the gradient of the scalar at step ``t`` and ``Delta a_t`` its change
by the optimizer step, over a window of ``n`` steps:

* gradient signal-to-noise ratio ``|mean g| / std g`` (sample std). For a gradient
  with no common direction its expected value is ``sqrt(2 / (pi n))``, the *noise
  floor* (:func:`snr_noise_floor`): 0.027 for 860 steps;
* sign agreement: the share of steps whose ``g_t`` has the sign of the window's mean
  (0.5 plus about ``0.4 / sqrt(n)`` when there is no common direction);
* drift efficiency ``|sum Delta a| / sum |Delta a|``: 1 when every step moves the
  scalar the same way, near 0 for a random walk;
* the gradient's parts. Writing ``t_i`` for layer ``i``'s token-mixing output,
  ``x_i`` the stream, ``y`` the head's input (the sum of layer outputs) and
  ``G_z = dL/dz``, the gradient of the code rule's ``a_i`` is exactly

      <G_y, t_i>  +  <G_{x_i}, t_i>  +  <G_{x_i}, x_{i-1}>
      (gain on t in the readout) (gain on t in the stream) (residual path)

  the first two being ``a_i``'s job as a gain on the token-mixing output and the
  last Eq. 2's own gradient ``<dL/dx_i, x_{i-1}>``. Under Eq. 2 only the last part
  reaches ``a_i`` (the first two are what a gain on ``t`` *would* receive); under
  the split-gain rule ``x_i = c + b_i t + a_i x_{i-1}`` the first two reach ``b_i``
  and the last ``a_i``. :class:`ResidualGradientProbe` computes the three from the
  training step's own forward and backward pass (hooks, no extra pass) and the
  tests check that they add up to autograd's gradient.

The runs (``book``)
-------------------
The converged study's runs themselves, cut short: the book's 16-layer d-32 Mixer on
all 55,000 Fashion-MNIST training images, 10 classes, AdamW at 1e-3 with weight
decay 0.01 (not on the residual weights), batch 128, the cosine schedule of its 30
epochs with 5% warmup, and the same seeds, initialisations and data order, stopped
after ``stop_after_epochs = 2`` epochs (860 steps: the 645 warmup steps and 215 at the
peak rate). Six variants, three seeds each (18 runs): Eq. 2 from ``N(0.25, 0.005)``,
the code's rule, the split-gain rule (``hacn_split_gain``, both gains from the same
draw), Eq. 2 from ``N(0.75, 0.005)`` and ``N(1, 0.005)`` (Table 2's other means), and
Eq. 2 from ``N(0.25, 0.005)`` in the public code's layer (``block='code'``).
The budget is what one CPU thread trains in about an hour: a step of this Mixer costs
about 90 ms of CPU time on one thread (``hacn-mixer-cost``) and 250 ms when the machine is
loaded, so 18 runs x 860 steps is 23 to 65 CPU-minutes. Because the trajectory is the long
runs' own, their Gamma, recorded every 50 steps, can be checked against these runs'.

``smoke``: the 3-layer smoke Mixer on 2,000 images, one epoch, two seeds: seconds.
``paper``: Appendix A's Mixer on CIFAR-10, the first 2 of its 300 epochs.

What the chapter shows of the runs is in :mod:`hacn_core.hacn.studies.mechanism_report`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor, nn

from hacn_core.engine.registry import Experiment
from hacn_core.engine.results import RunContext
from hacn_core.engine.training import Callback, TrainConfig, TrainState, fit
from hacn_core.hacn.connectivity import total_connectivity_strength
from hacn_core.hacn.studies import mixer

if TYPE_CHECKING:  # pragma: no cover
    from hacn_core.engine.dry_run import DryRunPlan

EXPERIMENT_ID = "hacn-mechanism"
#: (rule, mean of the a_i init, Mixer layer): the runs of one seed, in the order the worker takes them. The last
#: is Eq. 2 in the public code's layer (``block='code'``, whose channel part carries its own skip from x_{i-1}):
#: the piece of the public code's recipe that moves Eq. 2's weights down (``hacn-code-recipe``'s ablations)
VARIANTS: tuple[tuple[str, float, str], ...] = (
    ("hacn", 0.25, "paper"), ("hacn_code_mixer", 0.25, "paper"), ("hacn_split_gain", 0.25, "paper"),
    ("hacn", 0.75, "paper"), ("hacn", 1.0, "paper"), ("hacn", 0.25, "code"),
)
MECHANISM_RULES: tuple[str, ...] = ("hacn", "hacn_code_mixer", "hacn_split_gain")
SEEDS: tuple[int, ...] = (0, 1, 2)
#: the three parts of a residual scalar's gradient (module docstring), in the order they are stored
PARTS: tuple[str, ...] = ("readout_t", "stream_t", "residual")
#: the per-window sums stored for every residual scalar (``probe/<name>/<stat>``, one value per layer)
STATS: tuple[str, ...] = ("sum_g", "sum_g2", "n_pos", "n_neg", "sum_da", "sum_abs_da")


def make_config(rule: str, seed: int, *, profile: str = "book", alpha_mu: float = 0.25,
                block: str = "paper") -> dict[str, Any]:
    """One run: the converged study's configuration (``hacn-mixer-long``) at ``profile``, stopped early; ``block``
    the Mixer layer (an entry only when it is the code's, so the paper-layer runs keep their hashes)."""
    if profile == "book":
        size: dict[str, Any] = dict(train_subset=None, epochs=mixer.LONG_EPOCHS, record_every_steps=50)
        stop = 2
    elif profile == "smoke":
        size, stop = dict(num_layers=3, record_every_steps=5), 1
    elif profile == "paper":
        size, stop = {}, 2
    else:
        raise ValueError(f"profile={profile!r} is not a profile; allowed: smoke, book, paper")
    config = mixer.make_config(rule, seed, profile=profile, num_classes=10, **size)
    config |= {"alpha_mu": alpha_mu, "alpha_sigma": 0.005, "stop_after_epochs": stop}
    if block != "paper":
        config["block"] = block
    return config


def configs(profile: str, seeds: Sequence[int] = SEEDS) -> list[dict[str, Any]]:
    """Every variant of :data:`VARIANTS` for every seed (seed by seed, so the first runs are a full comparison)."""
    return [make_config(rule, seed, profile=profile, alpha_mu=mu, block=block)
            for seed in seeds for rule, mu, block in VARIANTS]


def check_config(config: dict[str, Any]) -> None:
    """The Mixer study's checks, a rule of :data:`MECHANISM_RULES` and a positive ``stop_after_epochs``."""
    mixer.check_config(config)
    if config["rule"] not in MECHANISM_RULES:
        raise ValueError(f"rule={config['rule']!r} is not supported here; allowed: {', '.join(MECHANISM_RULES)}")
    stop = config.get("stop_after_epochs")
    if isinstance(stop, bool) or not isinstance(stop, int) or stop < 1:
        raise ValueError(f"stop_after_epochs={stop!r} must be a positive integer (epochs trained of the schedule)")
    check_trainer_pieces(config)


def check_trainer_pieces(config: dict[str, Any]) -> None:
    """The entries of :data:`CODE_TRAINER` that ``config`` has, each of an allowed value."""
    clip = config.get("clip_before_unscale", 1.0)
    if isinstance(clip, bool) or not isinstance(clip, (int, float)) or not clip > 0:
        raise ValueError(f"clip_before_unscale={clip!r} must be a number > 0 (the max norm of the scaled gradients)")
    if not isinstance(config.get("decay_every_parameter", False), bool):
        raise ValueError(f"decay_every_parameter={config['decay_every_parameter']!r} must be True or False")
    smoothing = config.get("label_smoothing", 0.0)
    if isinstance(smoothing, bool) or not isinstance(smoothing, (int, float)) or not 0.0 <= smoothing < 1.0:
        raise ValueError(f"label_smoothing={smoothing!r} must be a number in [0, 1)")


#: the public code's trainer, as optional configuration entries (left out: the converged study's trainer, so
#: every configuration written without them keeps its hash): label smoothing 0.1, AdamW's decay on every
#: parameter (the residual weights included), a fixed 10-epoch warmup, a cosine down to 1e-6, and
#: ``clip_grad_norm_(1.0)`` on the float16-scaled gradients (:class:`ClipBeforeUnscale`). Its cosine steps
#: once per epoch; ours steps every optimizer step.
CODE_TRAINER: dict[str, Any] = {"label_smoothing": 0.1, "decay_every_parameter": True, "warmup_epochs": 10,
                                "min_lr": 1e-6, "clip_before_unscale": 1.0}


def train_config(config: dict[str, Any], epochs: int) -> TrainConfig:
    """The trainer of ``hacn-mixer-long`` (:func:`hacn_core.hacn.studies.mixer.train_hacn_mixer`): AdamW,
    weight decay on the weights only (the residual scalars are ``mixing`` parameters, kept out of decay by
    role), the cosine schedule of ``epochs`` epochs with its warmup, recording every ``record_every_steps``;
    with any entry of :data:`CODE_TRAINER` in ``config``, that piece of the public code's trainer instead."""
    extra: dict[str, Any] = {}
    if "label_smoothing" in config:
        extra["label_smoothing"] = config["label_smoothing"]
    if config.get("decay_every_parameter"):
        extra["no_decay_roles"] = ()
    if "min_lr" in config:
        extra["min_lr"] = config["min_lr"]
    if "schedule_unit" in config:  # the public code's cosine steps once an epoch
        extra["schedule_unit"] = config["schedule_unit"]
    warmup = config["warmup_epochs"] if "warmup_epochs" in config else config["warmup_fraction"] * epochs
    return TrainConfig(epochs=epochs, batch_size=config["batch_size"], lr=config["lr"], optimizer="adamw",
                       weight_decay=config["weight_decay"], schedule="cosine", warmup_epochs=warmup,
                       seed=config["seed"], record_every_steps=config["record_every_steps"],
                       checkpoint_every_minutes=5.0, **extra)


# ----------------------------------------------------------------------------- the probe


def _dot(a: Tensor, b: Tensor) -> float:
    return float(torch.dot(a.reshape(-1).double(), b.reshape(-1).double()))


class ResidualGradientProbe(Callback):
    """Per-step gradients of a Mixer's residual scalars and their three parts, summed per record window.

    Hooks on the model (added by :meth:`attach`, removed by :meth:`close`) capture, during the
    training step's own backward pass: each scalar's accumulated gradient, each layer's input
    ``x_{i-1}`` and token-mixing output ``t_i`` with the gradients ``G_{x_i}`` and ``G_y``. After the
    step, :meth:`on_step_end` adds the step to the window's sums; :meth:`on_record` returns them (one
    value per layer under ``probe/<name>/<stat>``, ``probe/parts/<part>``, and ``probe/n`` steps) and
    starts the next window. ``stop_after_epochs`` ends training after that many epochs (``fit``'s
    early stop), so a run follows the first epochs of a longer schedule.
    """

    def __init__(self, model: nn.Module, stop_after_epochs: int | None = None) -> None:
        stack = model.stack
        self.model, self.stack, self.stop_after = model, stack, stop_after_epochs
        self.layers = len(stack.blocks)
        self.names = [n for n in ("alpha", "beta") if isinstance(getattr(stack, n, None), nn.ParameterList)]
        if not self.names:
            raise ValueError(f"rule={stack.rule!r} has no trainable residual scalars to probe")
        self._handles: list[Any] = []
        self._reset_window()
        self._clear_step()
        self._prev: dict[str, Tensor] = {}

    # -- hooks ------------------------------------------------------------------------

    def attach(self) -> None:
        """Add the hooks (once; :meth:`on_train_begin` calls it)."""
        if self._handles:
            return
        for name in self.names:
            for i, p in enumerate(getattr(self.stack, name)):
                self._handles.append(p.register_post_accumulate_grad_hook(
                    lambda p, name=name, i=i: self._grads[name].__setitem__(i, float(p.grad))))
        for i, block in enumerate(self.stack.blocks):
            self._handles.append(block.token.register_forward_hook(lambda m, args, out, i=i: self._saw(i, args[0], out)))
        self._handles.append(self.model.head.register_forward_pre_hook(lambda m, args: self._saw_readout(args[0])))

    def close(self) -> None:
        """Remove the hooks."""
        for handle in self._handles:
            handle.remove()
        self._handles = []

    def _saw(self, i: int, x: Tensor, t: Tensor) -> None:
        """Block ``i`` (0-based) read the stream ``x`` (``x_i``) and made ``t``: keep both, and ``G_{x_i}``."""
        if not (torch.is_grad_enabled() and t.requires_grad):
            return  # an evaluation pass
        self._x[i], self._t[i] = x.detach(), t.detach()
        if x.requires_grad:
            x.register_hook(lambda g, i=i: self._gx.__setitem__(i, g))

    def _saw_readout(self, y: Tensor) -> None:
        if torch.is_grad_enabled() and y.requires_grad:
            y.register_hook(lambda g: setattr(self, "_gy", g))

    def _clear_step(self) -> None:
        self._grads = {n: [0.0] * self.layers for n in self.names}  # a scalar nothing reaches gets 0 (a_L, Eq. 2)
        self._x: dict[int, Tensor] = {}
        self._t: dict[int, Tensor] = {}
        self._gx: dict[int, Tensor] = {}
        self._gy: Tensor | None = None

    def step_parts(self) -> dict[str, list[float]]:
        """The three parts of the last backward pass, per layer (module docstring); 0 where nothing flowed."""
        parts = {p: [0.0] * self.layers for p in PARTS}
        for i in range(self.layers):
            t = self._t.get(i)
            if t is None:
                continue
            if self._gy is not None:
                parts["readout_t"][i] = _dot(self._gy, t)
            g_next = self._gx.get(i + 1)  # G_{x_{i+1}}: the gradient of this layer's stream output
            if g_next is not None:
                parts["stream_t"][i] = _dot(g_next, t)
                parts["residual"][i] = _dot(g_next, self._x[i])
        return parts

    def step_grads(self) -> dict[str, list[float]]:
        """The gradient of every probed scalar in the last backward pass (``{name: per layer}``)."""
        return {n: list(v) for n, v in self._grads.items()}

    # -- windows ----------------------------------------------------------------------

    def _reset_window(self) -> None:
        self.n = 0
        self.sums = {n: {s: [0.0] * self.layers for s in STATS} for n in self.names}
        self.part_sums = {p: [0.0] * self.layers for p in PARTS}

    def _values(self, name: str) -> Tensor:
        return torch.stack([p.detach() for p in getattr(self.stack, name)]).double()

    def on_train_begin(self, state: TrainState) -> None:
        self.attach()
        self._prev = {n: self._values(n) for n in self.names}

    def on_step_end(self, state: TrainState) -> None:
        self.n += 1
        for name in self.names:
            now = self._values(name)
            da = (now - self._prev[name]).tolist()
            self._prev[name] = now
            acc = self.sums[name]
            for i, g in enumerate(self._grads[name]):
                acc["sum_g"][i] += g
                acc["sum_g2"][i] += g * g
                acc["n_pos"][i] += g > 0
                acc["n_neg"][i] += g < 0
                acc["sum_da"][i] += da[i]
                acc["sum_abs_da"][i] += abs(da[i])
        for part, values in self.step_parts().items():
            for i, v in enumerate(values):
                self.part_sums[part][i] += v
        self._clear_step()
        if self.stop_after is not None and state.epoch >= self.stop_after - 1:
            state.stop = True  # fit ends after this epoch

    def on_record(self, state: TrainState) -> dict[str, Any]:
        out: dict[str, Any] = {"probe/n": self.n}
        for name in self.names:
            out |= {f"probe/{name}/{s}": list(v) for s, v in self.sums[name].items()}
        out |= {f"probe/parts/{p}": list(v) for p, v in self.part_sums.items()}
        self._reset_window()
        return out

    def state_dict(self) -> dict[str, Any]:
        return {"n": self.n, "sums": self.sums, "part_sums": self.part_sums}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.n, self.sums, self.part_sums = state["n"], state["sums"], state["part_sums"]


# ----------------------------------------------------------------------------- the public code's clipping


def grad_scaler_scale(step: int, init_scale: float = 2.0**16, growth_factor: float = 2.0,
                      growth_interval: int = 2000) -> float:
    """The loss scale ``torch.amp.GradScaler`` (its defaults) uses at optimizer step ``step`` when no
    gradient ever overflows: ``init_scale * growth_factor ** (step // growth_interval)``."""
    return init_scale * growth_factor ** (step // growth_interval)


class ClipBeforeUnscale(Callback):
    """The public code's clipping, emulated in float32: ``clip_grad_norm_(max_norm)`` applied to the
    *scaled* gradients, before ``GradScaler.unscale_``.

    With loss scale ``S`` the code clips ``S g`` to norm ``max_norm`` and then divides by ``S``, so the
    gradient the optimizer sees is ``g * min(1, max_norm / (S ||g|| + 1e-6))`` (``clip_grad_norm_``'s
    coefficient): clipping to a norm of ``max_norm / S`` in true units, about ``1.5e-5`` at ``S = 2^16``.
    An optimizer step pre-hook (added by :meth:`on_train_begin`) applies exactly that to every
    parameter's gradient, with ``S`` from :func:`grad_scaler_scale`. What it cannot reproduce is float16
    itself: a real run backs the scale off after an overflow, which never happens in float32.
    """

    def __init__(self, max_norm: float = 1.0, init_scale: float = 2.0**16, growth_interval: int = 2000) -> None:
        self.max_norm, self.init_scale, self.growth_interval = float(max_norm), float(init_scale), int(growth_interval)
        self.step = 0
        self._handle: Any = None

    def attach(self, optimizer: torch.optim.Optimizer) -> None:
        """Clip before every ``optimizer.step()``; counts the steps itself."""
        if self._handle is None:
            self._handle = optimizer.register_step_pre_hook(lambda opt, args, kwargs: self._clip(opt))

    def on_train_begin(self, state: TrainState) -> None:
        self.step = state.step
        self.attach(state.optimizer)

    @torch.no_grad()
    def _clip(self, optimizer: torch.optim.Optimizer) -> None:
        grads = [p.grad for g in optimizer.param_groups for p in g["params"] if p.grad is not None]
        scale = grad_scaler_scale(self.step, self.init_scale, growth_interval=self.growth_interval)
        norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g.double()) for g in grads]))
        coef = min(1.0, self.max_norm / (scale * float(norm) + 1e-6))
        for g in grads:
            g.mul_(coef)
        self.step += 1


# ----------------------------------------------------------------------------- statistics of the windows


def snr_noise_floor(steps: int) -> float:
    """``E|mean g| / std g`` for ``steps`` independent gradients with mean 0: ``sqrt(2 / (pi n))``."""
    return math.sqrt(2.0 / (math.pi * steps))


def pooled(curves: dict[str, list], name: str, first_step: int = 0, last_step: int | None = None) -> dict[str, Any]:
    """The window sums of scalar family ``name`` (``alpha``, ``beta`` or ``parts``) added over the windows
    that end in ``(first_step, last_step]``: ``{"n": steps, stat: per-layer sums}``."""
    ends = curves["record_step"]
    keep = [k for k, end in enumerate(ends) if end > first_step and (last_step is None or end <= last_step)]
    keys = PARTS if name == "parts" else STATS
    out: dict[str, Any] = {"n": sum(curves["probe/n"][k] for k in keep)}
    for s in keys:
        rows = [curves[f"probe/{name}/{s}"][k] for k in keep]
        out[s] = [sum(col) for col in zip(*rows)] if rows else []
    return out


def gradient_statistics(sums: dict[str, Any]) -> dict[str, list[float]]:
    """Per layer, from pooled sums: ``snr`` (|mean| / sample std), ``sign_agreement``, ``drift_efficiency``,
    ``mean_g`` and ``total_da`` (NaN where a scalar got no gradient, e.g. Eq. 2's ``a_L``)."""
    n = sums["n"]
    out: dict[str, list[float]] = {k: [] for k in ("snr", "sign_agreement", "drift_efficiency", "mean_g", "total_da")}
    for i in range(len(sums["sum_g"])):
        mean = sums["sum_g"][i] / n
        var = max(sums["sum_g2"][i] - n * mean * mean, 0.0) / max(n - 1, 1)
        std = math.sqrt(var)
        pos, neg = sums["n_pos"][i], sums["n_neg"][i]
        out["snr"].append(abs(mean) / std if std > 0 else math.nan)
        out["sign_agreement"].append((pos if mean > 0 else neg) / n if pos + neg else math.nan)
        moved = sums["sum_abs_da"][i]
        out["drift_efficiency"].append(abs(sums["sum_da"][i]) / moved if moved > 0 else math.nan)
        out["mean_g"].append(mean)
        out["total_da"].append(sums["sum_da"][i])
    return out


def _median(values: Sequence[float]) -> float:
    finite = sorted(v for v in values if math.isfinite(v))
    return float(torch.tensor(finite).median()) if finite else math.nan


def summary_metrics(curves: dict[str, list], names: Sequence[str], layers: int) -> dict[str, Any]:
    """The run's headline numbers: per probed scalar family, the median over layers ``1..L-1`` (``a_L``
    has no gradient under Eq. 2, so every rule is summarised on the same layers) of the whole run's SNR,
    sign agreement and drift efficiency; the parts' shares of the summed gradient; ``gamma`` at the end."""
    metrics: dict[str, Any] = {"probe_steps": pooled(curves, names[0])["n"]}
    inner = slice(0, layers - 1)
    for name in names:
        stats = gradient_statistics(pooled(curves, name))
        for key in ("snr", "sign_agreement", "drift_efficiency"):
            metrics[f"{name}/{key}_median"] = _median(stats[key][inner])
        final = [curves[f"param/stack.{name}.{i}"][-1] for i in range(layers)]
        metrics[f"{name}/gamma"] = total_connectivity_strength(final)
        metrics[f"{name}/moved_up"] = sum(d > 0 for d in stats["total_da"][inner])
    parts = pooled(curves, "parts")
    total = {p: sum(abs(v) for v in parts[p][inner]) for p in PARTS}
    whole = sum(total.values())
    metrics |= {f"parts/{p}_share": total[p] / whole if whole else math.nan for p in PARTS}
    metrics["gamma"] = metrics["alpha/gamma"]
    return metrics


# ----------------------------------------------------------------------------- training


def train_mechanism(config: dict[str, Any], context: RunContext) -> dict[str, Any]:
    """Train one run of the study with the probe attached; the result holds the window sums as curves."""
    check_config(config)
    data = mixer.load_data(config)
    X, _ = data["train"]
    torch.manual_seed(config["seed"])  # as train_hacn_mixer: the same model, data order and trajectory
    model = mixer.build_model(config, image_size=X.shape[-1], in_channels=X.shape[1])
    epochs = mixer.epochs_for(config, len(X))
    probe = ResidualGradientProbe(model, stop_after_epochs=config["stop_after_epochs"])
    callbacks: list[Callback] = [probe]
    if "clip_before_unscale" in config:  # the public code's clipping of the scaled gradients
        callbacks.append(ClipBeforeUnscale(max_norm=config["clip_before_unscale"]))
    try:
        out = fit(model, data["train"], train_config(config, epochs), val=data["val"], test=data["test"],
                  callbacks=callbacks, checkpoint_dir=context.checkpoint_dir, progress=context.progress)
    finally:
        probe.close()
    c = out.curves
    keep = ("epoch", "step", "train_loss", "lr", "time_s", "eval_epoch", "val_accuracy", "record_step")
    curves = {k: c[k] for k in keep} | {k: v for k, v in c.items() if k.startswith(("probe/", "param/stack."))}
    metrics = {"test_accuracy": out.metrics["test_accuracy"], "steps": out.steps, "epochs_of_schedule": epochs,
               **summary_metrics(curves, probe.names, probe.layers)}
    return {"metrics": metrics, "curves": curves, "device": out.device}


def dry_run_plan(config: dict[str, Any]) -> DryRunPlan:
    """The Mixer study's dry run for this configuration, trained for ``stop_after_epochs`` epochs."""
    check_config(config)
    plan = mixer.dry_run_plan(config)
    return dataclasses.replace(plan, train=plan.train.replace(epochs=config["stop_after_epochs"]))


EXPERIMENT = Experiment(
    id=EXPERIMENT_ID,
    title="H-ACN Mixer: why the residual weights learn under the public code's rule and not under Eq. 2",
    train=train_mechanism,
    plan=dry_run_plan,
    configs={"smoke": lambda: configs("smoke", (0, 1)), "book": lambda: configs("book"),
             "paper": lambda: configs("paper")},
    setting={
        "smoke": "3-layer Mixer, 2,000 Fashion-MNIST images, 1 epoch, seeds 0-1, 5 rules",
        "book": "the converged study's 16-layer d-32 Mixer on 55,000 Fashion-MNIST images, the first 2 of its 30 "
                "epochs (860 steps), 5 rules, seeds 0-2, every residual scalar's gradient at every step",
        "paper": "Appendix A Mixer on CIFAR-10, the first 2 of 300 epochs, 5 rules, seeds 0-2",
    },
)
