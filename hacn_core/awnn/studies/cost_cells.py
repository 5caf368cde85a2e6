"""AWNN's per-step cost against a fixed MLP, cell by cell, on the objectives the book trains (Sec. 3.3).

:mod:`hacn_core.awnn.studies.cost` times the loss without priors on one shape; this module
times a grid of *cells* - objective x hidden layers x phase x starting width - in one
interleaved run (``benchmarks/bench_awnn.py`` prints it):

* objectives (:data:`OBJECTIVES`): ``likelihood`` is Eq. 13's predictive term only;
  ``elbo`` adds the Gaussian weight prior ``N(0, sigma_theta)`` (``sigma_theta = 10``,
  chapter 2's Table 1 runs) and the rate prior ``N(mu, sigma)`` of Sec. 5.3
  (``N(0.05, 1)``), both through :class:`~hacn_core.awnn.ELBOLoss`, which also records
  the per-batch terms as the trainer's runs do;
* the AWNN step is that of :func:`hacn_core.engine.training.fit` with a
  :class:`~hacn_core.awnn.WidthCallback`: zero the gradients, forward, the loss, backward,
  Adam (lr 0.01, Table 3), then the width update of Algorithm 1 (``adapting``) or, with
  the widths frozen, the quantile widths alone (``steady``);
* the baselines: a plain ``nn.Linear`` MLP with the same activation (ReLU6) built at the
  AWNN's current widths (their mean over the AWNN's block of steps; rebuilt every
  repetition) with the same predictive loss (``fixed``), and the same MLP trained by
  Adam with the weight decay whose gradient equals the weight prior's,
  ``weight_decay = 1 / sigma_theta^2`` (``fixed+wd``; the ``elbo`` cells are compared with
  it, the ``likelihood`` cells with ``fixed``).

Each repetition times a block of ``steps`` steps of every model of a cell (after one
untimed step), the order alternating from one repetition to the next; a cell's ratio
is the median over repetitions of the per-repetition ratios of CPU times. Subnormal
floats are flushed while timing (see :mod:`hacn_core.awnn.studies.cost`).
:func:`cells_table` turns the rows into the table the book shows.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from hacn_core.awnn import AdaptiveMLP, AWNNConfig, ELBOLoss, RatePrior, fast_cpp, update_widths
from hacn_core.engine.data import synthetic_splits
from hacn_core.engine.registry import Experiment

OBJECTIVES: tuple[str, ...] = ("likelihood", "elbo")
#: the AWNN step's named options: ``default`` (the stored runs' step, every value as before) and
#: ``fused_priors`` (``ELBOLoss(fused_priors=True)``: the priors' gradients inside the fused node;
#: for the ``likelihood`` objective, which has no priors, it is the default step and is not repeated)
OPTIONS: tuple[str, ...] = ("default", "fused_priors")
PHASES: tuple[str, ...] = ("adapting", "steady")
#: the weight prior of the book's Table 1 runs (chapter 2) and the rate prior of Sec. 5.3 at its start
SIGMA_THETA = 10.0
RATE_PRIOR = RatePrior(mu=0.05, sigma=1.0)
#: our target for AWNN / fixed per training step in every cell (stretch: 1.05)
TARGET_RATIO = 1.10


def fixed_relu6_mlp(in_dim: int, widths: Sequence[int], out_dim: int) -> nn.Sequential:
    """A plain ``nn.Linear`` MLP with ReLU6 (the book's AWNN activation) and hidden ``widths``."""
    layers: list[nn.Module] = []
    d = in_dim
    for w in widths:
        layers += [nn.Linear(d, w), nn.ReLU6()]
        d = w
    layers.append(nn.Linear(d, out_dim))
    return nn.Sequential(*layers)


def measure_cells(widths: Sequence[int] = (30, 100, 400), layers: Sequence[int] = (1, 2),
                  objectives: Sequence[str] = OBJECTIVES, phases: Sequence[str] = PHASES, *, reps: int = 9,
                  steps: int = 12, batch_size: int = 128, lr: float = 0.01, seed: int = 0,
                  options: Sequence[str] = ("default",)) -> list[dict[str, Any]]:
    """Time every cell (objective x layers x phase x starting width); one row per cell and option.

    ``options`` (:data:`OPTIONS`): the AWNN steps timed in each cell, each in every repetition beside
    the others and the baselines (built at the first option's mean widths); a row's ``option`` says
    which.

    A row has the cell's keys, ``width`` (the mean total hidden width over the timed
    blocks), the medians ``awnn_us``, ``fixed_us``, ``fixed_wd_us`` (microseconds of CPU
    per step), ``awnn/fixed``, ``awnn/fixed+wd`` and ``ratio`` (against ``fixed+wd`` for
    ``elbo``, ``fixed`` for ``likelihood``), ``node`` (``cpp`` or ``python``) and ``reps``.
    """
    for o in objectives:
        if o not in OBJECTIVES:
            raise ValueError(f"objective={o!r} is not allowed; allowed: {', '.join(OBJECTIVES)}")
    for p in phases:
        if p not in PHASES:
            raise ValueError(f"phase={p!r} is not allowed; allowed: {', '.join(PHASES)}")
    for o in options:
        if o not in OPTIONS:
            raise ValueError(f"option={o!r} is not allowed; allowed: {', '.join(OPTIONS)}")
    if not options:
        raise ValueError(f"options is empty; allowed: {', '.join(OPTIONS)}")
    data = SpiralBatches(batch_size, seed)
    in_dim, out_dim, n_train = data.in_dim, data.out_dim, data.n_train

    def time_block(step) -> tuple[float, list[list[int]]]:
        return time_steps(step, data, steps)

    def fixed_block(hidden: list[int], weight_decay: float) -> float:
        return time_block(fixed_parts_for(hidden, in_dim, out_dim, n_train, lr, weight_decay).step)[0]

    rows = []
    with timing_conditions():
        for objective in objectives:
            for n_layers in layers:
                for phase in phases:
                    for width in widths:
                        steady = phase == "steady"
                        cell_options = [o for o in options if objective == "elbo" or o == "default"] or ["default"]
                        steps_of = {o: awnn_step_for(o, objective, n_layers, width, steady, in_dim, out_dim,
                                                     n_train, lr, seed) for o in cell_options}
                        times: dict[str, list[float]] = {"fixed": [], "fixed_wd": []}
                        times.update({o: [] for o in cell_options})
                        total_widths: list[float] = []
                        for rep in range(reps):
                            order = cell_options if rep % 2 == 0 else cell_options[::-1]
                            mean_w: list[int] = []
                            for o in order:
                                t, seen = time_block(steps_of[o])
                                times[o].append(t)
                                if o == cell_options[0]:
                                    mean_w = [max(1, round(statistics.fmean(w[i] for w in seen)))
                                              for i in range(n_layers)]
                            total_widths.append(sum(mean_w))
                            wd = 1.0 / SIGMA_THETA**2
                            if rep % 2 == 0:
                                f, fw = fixed_block(mean_w, 0.0), fixed_block(mean_w, wd)
                            else:
                                fw, f = fixed_block(mean_w, wd), fixed_block(mean_w, 0.0)
                            times["fixed"].append(f)
                            times["fixed_wd"].append(fw)
                        med = statistics.median
                        for o in cell_options:
                            r_f = [a / b for a, b in zip(times[o], times["fixed"])]
                            r_w = [a / b for a, b in zip(times[o], times["fixed_wd"])]
                            row = {
                                "objective": objective, "layers": n_layers, "phase": phase, "start_width": width,
                                "width": round(statistics.fmean(total_widths) / n_layers),
                                "awnn_us": 1e6 * med(times[o]), "fixed_us": 1e6 * med(times["fixed"]),
                                "fixed_wd_us": 1e6 * med(times["fixed_wd"]), "awnn/fixed": med(r_f),
                                "awnn/fixed+wd": med(r_w), "ratio": med(r_w) if objective == "elbo" else med(r_f),
                                "node": fast_cpp.active_backend(), "reps": reps}
                            if options != ("default",) and list(options) != ["default"]:
                                row["option"] = o
                            rows.append(row)
    return rows


@dataclass(frozen=True)
class StepParts:
    """One training step as the calls it is made of, in the order :meth:`step` makes them.

    :meth:`step` is the step the cells time; :mod:`hacn_core.awnn.studies.cost_phases` times the same
    calls one by one (the phases of :data:`STEP_PARTS`), so a phase profile and a cell time one step.
    """

    zero_grad: Callable[[], None]  # the optimizer's gradients to None
    forward: Callable[[Tensor], Tensor]  # (batch, in_dim) -> (batch, out_dim) logits
    loss: Callable[[Tensor, Tensor], Tensor]  # (logits, targets) -> the scalar loss
    backward: Callable[[Tensor], None]  # the loss's backward pass
    optimizer_step: Callable[[], None]  # Adam's update
    width_update: Callable[[], list[int]]  # the widths after the step (a fixed MLP: its own)

    def step(self, xb: Tensor, yb: Tensor) -> list[int]:
        """One training step on the batch ``(xb, yb)``; returns the widths it leaves."""
        self.zero_grad()
        self.backward(self.loss(self.forward(xb), yb))
        self.optimizer_step()
        return self.width_update()


#: the phases of a step, :class:`StepParts`'s fields in the order a step runs them
STEP_PARTS: tuple[str, ...] = ("zero_grad", "forward", "loss", "backward", "optimizer_step", "width_update")


def _backward(loss: Tensor) -> None:
    loss.backward()


def awnn_parts_for(option: str, objective: str, n_layers: int, width: int, steady: bool, in_dim: int, out_dim: int,
                   n_train: int, lr: float, seed: int) -> StepParts:
    """A fresh AWNN (seeded) and its training step with ``option`` (:data:`OPTIONS`), as parts: zero the
    gradients, forward, the loss (:class:`~hacn_core.awnn.ELBOLoss`, with the priors for ``elbo``), backward,
    Adam, then the width update (``steady``: the widths frozen, the quantile widths alone)."""
    if option not in OPTIONS:
        raise ValueError(f"option={option!r} is not allowed; allowed: {', '.join(OPTIONS)}")
    if objective not in OBJECTIVES:
        raise ValueError(f"objective={objective!r} is not allowed; allowed: {', '.join(OBJECTIVES)}")
    torch.manual_seed(seed)
    model = AdaptiveMLP(AWNNConfig(in_dim=in_dim, out_dim=out_dim, n_hidden_layers=n_layers, activation="relu6",
                                   initial_width=width))
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    model.attach_optimizer(opt)
    fused = option == "fused_priors"
    if objective == "elbo":
        loss_fn = ELBOLoss(model, n_train, sigma_theta=SIGMA_THETA, rate_prior=RATE_PRIOR, fused_priors=fused)
    else:
        loss_fn = ELBOLoss(model, n_train)
    if steady:
        model.freeze_widths()

    def zero_grad() -> None:
        opt.zero_grad(set_to_none=True)

    def width_update() -> list[int]:
        if steady:
            model.target_widths()  # what a width update computes when none changes
        else:
            update_widths(model, opt)  # WidthCallback.on_step_end
        return model.widths()

    return StepParts(zero_grad, model, loss_fn, _backward, opt.step, width_update)


def awnn_step_for(option: str, objective: str, n_layers: int, width: int, steady: bool, in_dim: int, out_dim: int,
                  n_train: int, lr: float, seed: int) -> Callable[[Tensor, Tensor], list[int]]:
    """:func:`awnn_parts_for`'s step: ``step(xb, yb)`` trains one batch and returns the widths it trained."""
    return awnn_parts_for(option, objective, n_layers, width, steady, in_dim, out_dim, n_train, lr, seed).step


def fixed_parts_for(hidden: Sequence[int], in_dim: int, out_dim: int, n_train: int, lr: float,
                    weight_decay: float) -> StepParts:
    """A fresh :func:`fixed_relu6_mlp` at widths ``hidden`` and its training step as parts: the predictive
    loss scaled to the training set as the ELBO's (``n_train / batch``), Adam with ``weight_decay`` (the
    baseline ``fixed+wd`` takes the weight prior's ``1 / sigma_theta^2``); its width update returns
    ``hidden``."""
    net = fixed_relu6_mlp(in_dim, hidden, out_dim)
    opt = torch.optim.Adam(net.parameters(), lr=lr, weight_decay=weight_decay)
    widths = list(hidden)

    def zero_grad() -> None:
        opt.zero_grad(set_to_none=True)

    def loss(out: Tensor, yb: Tensor) -> Tensor:
        return F.cross_entropy(out, yb, reduction="sum") * (n_train / len(yb))

    def width_update() -> list[int]:
        return widths

    return StepParts(zero_grad, net, loss, _backward, opt.step, width_update)


class SpiralBatches:
    """The SpiralHard training split (seed 0) and a seeded stream of random batches of ``batch_size``."""

    def __init__(self, batch_size: int = 128, seed: int = 0) -> None:
        splits = synthetic_splits("SpiralHard", 0)
        self.x, self.y = splits["train"]  # (n_train, in_dim), (n_train,)
        self.n_train, self.in_dim = len(self.y), self.x.shape[1]
        self.out_dim = int(self.y.max()) + 1
        self.batch_size = batch_size
        self._gen = torch.Generator().manual_seed(seed)

    def __call__(self) -> tuple[Tensor, Tensor]:
        idx = torch.randint(0, self.n_train, (self.batch_size,), generator=self._gen)
        return self.x[idx], self.y[idx]


def time_steps(step: Callable[[Tensor, Tensor], list[int]], batches: Callable[[], tuple[Tensor, Tensor]],
               steps: int) -> tuple[float, list[list[int]]]:
    """``steps`` timed calls of ``step`` on fresh batches after one untimed one: (CPU seconds per step, the
    widths each timed step returned). The batches are drawn before the clock starts."""
    data = [batches() for _ in range(steps)]
    step(*batches())
    seen: list[list[int]] = []
    c0 = time.process_time()
    for xb, yb in data:
        seen.append(step(xb, yb))
    return (time.process_time() - c0) / steps, seen


@contextlib.contextmanager
def timing_conditions() -> Iterator[None]:
    """One torch thread and subnormal floats flushed (see :mod:`hacn_core.awnn.studies.cost`) while timing;
    the caller's settings restored after."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    flush = torch.set_flush_denormal(True)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
        if flush:
            torch.set_flush_denormal(False)


def cells_table(rows: Sequence[dict[str, Any]], before: Sequence[dict[str, Any]] | None = None):
    """The cells as a DataFrame indexed by (objective, layers, phase, start width): mean width
    per layer, us per step of the AWNN and its baselines, ``AWNN / fixed``, ``AWNN / fixed+wd``,
    the cell's ratio and whether it meets :data:`TARGET_RATIO`; with ``before`` (rows of an
    earlier measurement of the same cells), its ratio beside the new one."""
    import pandas as pd

    if not rows:
        raise ValueError("no cells to tabulate: measure_cells returned no rows")
    key = ("objective", "layers", "phase", "start_width")
    index = list(key) + (["option"] if any("option" in r for r in rows) else [])
    table = pd.DataFrame([{
        "objective": r["objective"], "layers": r["layers"], "phase": r["phase"], "start_width": r["start_width"],
        **({"option": r.get("option", "default")} if len(index) > len(key) else {}),
        "width/layer": r["width"], "AWNN (us/step)": r["awnn_us"], "fixed (us/step)": r["fixed_us"],
        "fixed+wd (us/step)": r["fixed_wd_us"], "AWNN / fixed": r["awnn/fixed"],
        "AWNN / fixed+wd": r["awnn/fixed+wd"], "ratio": r["ratio"], f"<= {TARGET_RATIO}": r["ratio"] <= TARGET_RATIO,
    } for r in rows]).set_index(index)
    if before is not None:  # an earlier run's ratio of the same cell (its default step)
        old = {tuple(r[k] for k in key): r["ratio"] for r in before if r.get("option", "default") == "default"}
        table.insert(table.columns.get_loc("ratio"), "ratio before",
                     [old.get(tuple(idx[:len(key)]), float("nan")) for idx in table.index])
    return table


def options_table(rows: Sequence[dict[str, Any]]):
    """Rows of one measurement with several step options (``awnn-step-cells-fast``) as one line per cell:
    mean width per layer, the baseline's us per step (``fixed+wd`` for ``elbo``, ``fixed`` for
    ``likelihood``), each option's us per step and ratio (NaN where the option does not apply: the
    likelihood has no priors) and ``at target``, the options at or under :data:`TARGET_RATIO` joined by
    ", " (``"none"`` if no option is)."""
    import pandas as pd

    if not rows:
        raise ValueError("no cells to tabulate: measure_cells returned no rows")
    key = ("objective", "layers", "phase", "start_width")
    cells: dict[tuple, dict[str, Any]] = {}
    for r in rows:
        option = r.get("option", "default")
        line = cells.setdefault(tuple(r[k] for k in key), {
            **{k: r[k] for k in key}, "width/layer": r["width"],
            "baseline (us/step)": r["fixed_wd_us"] if r["objective"] == "elbo" else r["fixed_us"],
            **{c: float("nan") for o in OPTIONS for c in (f"{o} (us/step)", f"{o} / baseline")}, "at target": []})
        line[f"{option} (us/step)"] = r["awnn_us"]
        line[f"{option} / baseline"] = r["ratio"]
        if r["ratio"] <= TARGET_RATIO:
            line["at target"].append(option)
    for line in cells.values():
        line["at target"] = ", ".join(line["at target"]) or "none"
    return pd.DataFrame(list(cells.values())).set_index(list(key))


# ----------------------------------------------------------------------------- the stored measurement

CELLS_ID = "awnn-step-cells"
ROW_KEYS: tuple[str, ...] = ("objective", "layers", "phase", "start_width", "width", "awnn_us", "fixed_us",
                             "fixed_wd_us", "awnn/fixed", "awnn/fixed+wd", "ratio", "node", "reps")


def cells_config(profile: str) -> dict[str, Any]:
    """The grid of cells and the repetitions of ``profile`` (smoke: one width, one layer, 2 x 2 steps)."""
    if profile == "smoke":
        return {"widths": [30], "layers": [1], "reps": 2, "steps": 2, "seed": 0}
    return {"widths": [30, 100, 400], "layers": [1, 2], "reps": 9, "steps": 12, "seed": 0}


def measure_stored(config: dict[str, Any], context: Any) -> dict[str, Any]:
    """The experiment's train function: :func:`measure_cells` on ``config``'s grid, stored column by column
    (``curves[key][i]`` is row ``i``'s value) with each cell's ratio as a metric."""
    rows = measure_cells(config["widths"], config["layers"], reps=config["reps"], steps=config["steps"],
                         seed=config["seed"])
    metrics = {f"{r['objective']}/{r['layers']}/{r['phase']}/{r['start_width']}": r["ratio"] for r in rows}
    metrics["cells_at_target"] = sum(r["ratio"] <= TARGET_RATIO for r in rows)
    metrics["cells"] = len(rows)
    return {"metrics": metrics, "curves": {k: [r[k] for r in rows] for k in ROW_KEYS}, "device": "cpu"}


def rows_from_curves(result: Any, keys: Sequence[str]) -> list[dict[str, Any]]:
    """The table rows a cost measurement stored column by column in its curves (one list per key)."""
    curves = result.curves
    return [{k: curves[k][i] for k in keys} for i in range(len(curves["ratio"]))]


def stored_rows(result: Any) -> list[dict[str, Any]]:
    """The rows of a stored ``awnn-step-cells`` result, as :func:`measure_cells` returned them."""
    return rows_from_curves(result, ROW_KEYS)


FAST_ID = "awnn-step-cells-fast"
FAST_ROW_KEYS: tuple[str, ...] = ROW_KEYS + ("option",)


def fast_config(profile: str) -> dict[str, Any]:
    """:func:`cells_config` with every step option of :data:`OPTIONS` timed side by side."""
    return cells_config(profile) | {"options": list(OPTIONS)}


def measure_fast_stored(config: dict[str, Any], context: Any) -> dict[str, Any]:
    """The train function of ``awnn-step-cells-fast``: :func:`measure_cells` with ``config["options"]``;
    a metric per cell and option (``<objective>/<layers>/<phase>/<width>/<option>``)."""
    rows = measure_cells(config["widths"], config["layers"], reps=config["reps"], steps=config["steps"],
                         seed=config["seed"], options=tuple(config["options"]))
    for r in rows:
        r.setdefault("option", "default")
    metrics = {f"{r['objective']}/{r['layers']}/{r['phase']}/{r['start_width']}/{r['option']}": r["ratio"]
               for r in rows}
    best: dict[tuple, float] = {}
    for r in rows:
        k = (r["objective"], r["layers"], r["phase"], r["start_width"])
        best[k] = min(best.get(k, float("inf")), r["ratio"])
    metrics["cells_at_target"] = sum(v <= TARGET_RATIO for v in best.values())  # with the best option per cell
    metrics["cells"] = len(best)
    return {"metrics": metrics, "curves": {k: [r[k] for r in rows] for k in FAST_ROW_KEYS}, "device": "cpu"}


def stored_fast_rows(result: Any) -> list[dict[str, Any]]:
    """The rows of a stored ``awnn-step-cells-fast`` result."""
    return rows_from_curves(result, FAST_ROW_KEYS)


FAST = Experiment(
    id=FAST_ID,
    title="AWNN: per-step cost against a fixed MLP, cell by cell, each named step option side by side",
    train=measure_fast_stored,
    configs={p: (lambda p=p: [fast_config(p)]) for p in ("smoke", "book", "paper")},
    setting={"smoke": "1 layer, width 30, 2 repetitions x 2 steps, every step option",
             "book": "as awnn-step-cells (book), with the step options default and fused_priors timed side by "
                     "side in every repetition",
             "paper": "as the book: the measurement has no reduced setting"},
)

CELLS = Experiment(
    id=CELLS_ID,
    title="AWNN: per-step cost against a fixed MLP, cell by cell (objective x layers x phase x width)",
    train=measure_stored,
    configs={p: (lambda p=p: [cells_config(p)]) for p in ("smoke", "book", "paper")},
    setting={"smoke": "1 layer, width 30, 2 repetitions x 2 steps",
             "book": "SpiralHard, 1 and 2 layers, starting widths 30 / 100 / 400, likelihood and ELBO, adapting "
                     "and steady, 9 interleaved repetitions x 12 steps, one CPU thread",
             "paper": "as the book: the measurement has no reduced setting"},
)
