"""Residual gates on MNIST: Tables 1-2 and Figs. 4-5 of Savarese et al., Section 3.1.

What one run is
    One fully connected network (``hacn_core.models.fc.mnist_fc``: a
    linear layer of 50 units, ``d`` middle layers of width 50, a softmax layer)
    of one kind (``plain``, ``resnet``, ``gated_plain``, ``gated_resnet``) and
    one depth ``d`` in {2, 10, 20, 50, 100}, trained on MNIST with pixels divided
    by 255 and flattened. Stored per run: the training loss of every epoch
    (Fig. 4), the test error after the last epoch (Table 1) and after every
    epoch, the mean final ``k`` (Table 2), the final ``k`` of every gated unit
    (Fig. 5 left) and, for the residual kinds at the largest depth, the test
    accuracy as residual blocks are removed greedily (smallest ``k`` first,
    gated only) and in random orders (Fig. 5 right).

The paper's setting (Sec. 3.1), and how each point is read here
    * "Adam with Nesterov momentum (Dozat) ... 100 epochs ... mini-batches of
      size 128 ... learning rate and momentum fixed to 0.002 and 0.9": the
      trainer's ``optimizer="nadam"`` (``torch.optim.NAdam``), ``lr = 0.002``,
      ``betas = (0.9, 0.999)``, constant rate. NAdam multiplies ``beta1`` by the
      momentum warm-up of Dozat (2016), ``mu_t = beta1 (1 - 0.5 * 0.96^(0.004 t))``
      (``momentum_decay = 0.004``, PyTorch's default and the ``schedule_decay``
      default of Keras' ``Nadam``, whose default learning rate is exactly the
      paper's 0.002: the paper, implemented in Keras, most likely ran those
      defaults). So the momentum rises from 0.45 to 0.80 after 20 epochs and
      0.89 after 50; "fixed to 0.9" is read as ``beta1 = 0.9``. The trainer
      does not expose ``momentum_decay``; the configuration records it and the
      run checks that the optimizer really uses it.
    * Weight decay: the paper names none for MNIST ("k decay" is a CIFAR
      ablation), so ``weight_decay = 0``; the gates ``k`` are in the trainer's
      no-decay group anyway (role ``gate``).
    * Validation: the paper mentions a validation set only for its initial
      tests of pre-activation blocks; it describes no held-out split and no
      model selection for Table 1. We train on all 60,000 training images with
      no validation set and report the test error **after the last epoch**
      (``test_error``). The lowest test error over epochs (``best_test_error``)
      is stored too, clearly labelled: it is selected on the test set, so it is
      optimistic and only shows how much the choice of epoch could matter.
    * Gates start at ``k = 1`` with ``g = ReLU`` (Sec. 3.2); a gated residual
      block gates both of its two Dot-BN-ReLU layers with one ``k``.
    * Choices the paper leaves open (the model's defaults, recorded in every
      configuration): bare linear first layer, PyTorch's default init,
      BatchNorm momentum 0.1 (PyTorch convention).

Profiles
    ``paper``: 4 kinds x 5 depths x seeds 0, 1, 2, 100 epochs (60 runs; the
    paper does not say how many runs its tables average, so three seeds).
    ``book``: seed 0 of every kind and depth at a reduced number of epochs
    (``BOOK_EPOCHS`` = 20; ``mnist_report.cost_table`` reads the seconds per
    epoch off the runs), because one seed of the full study takes 4.5-7.5
    CPU-hours on this 2-core machine and 20 epochs about 55-90 CPU-minutes.
    ``smoke``: d in {2, 10}, two epochs on a 4,000-image subset.

This module is the study: the setting, the configurations, the training
(one network at a time with ``fit``, or many at once with the stacked
engine) and the ``EXPERIMENT``. What the chapter shows of the runs (Tables
1-2 beside the paper's values, the claims, the figures) is in
:mod:`hacn_core.gates.studies.mnist_report`.
"""

from __future__ import annotations

import functools
import json
import math
import signal
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from hacn_core import gates
from hacn_core.engine.data import image_tensors
from hacn_core.engine.registry import Experiment, Link, with_overrides
from hacn_core.engine.results import RunContext
from hacn_core.engine.config import CHECKPOINT_BUDGET, checkpoint_cadence
from hacn_core.engine.training import (
    Callback,
    NonFiniteLossError,
    TrainConfig,
    TrainState,
    epoch_permutation,
    evaluate,
    first_nonfinite,
    fit,
    load_checkpoint,
    nonfinite_checkpoint_path,
    progress_bar,
    record_segments,
    resolve_device,
    restore_training_checkpoint,
    save_training_checkpoint,
    steps_per_epoch,
    stop_on_signals,
    TrainingInterrupted,
)
from hacn_core.models.fc import KINDS, mnist_fc
from hacn_core.models.stacked_fc import StackedFCNet
from hacn_core.gates.paper_items import item

if TYPE_CHECKING:  # pragma: no cover
    from hacn_core.engine.dry_run import DryRunPlan

EXPERIMENT_ID = "gates-mnist"
DEPTHS: tuple[int, ...] = (2, 10, 20, 50, 100)  # the paper's d (Table 1)
PAPER_SEEDS: tuple[int, ...] = (0, 1, 2)
PAPER_EPOCHS = 100
BOOK_EPOCHS = 20  # about 90 CPU-minutes for the 20 runs on one thread (mnist_report.cost_table)
SMOKE_DEPTHS: tuple[int, ...] = (2, 10)
SMOKE_TRAIN_SUBSET = 4000
RESIDUAL_KINDS: tuple[str, ...] = ("resnet", "gated_resnet")
GATED_KINDS: tuple[str, ...] = ("gated_plain", "gated_resnet")
NADAM_MOMENTUM_DECAY = 0.004  # torch.optim.NAdam's default = Keras Nadam's schedule_decay
RANDOM_REMOVAL_ORDERS = 5  # random pruning orders averaged for Fig. 5 (right); the paper shows one curve
SUBSET_SEED = 0  # the training subset (smoke) is the same for every run

# How the paper-item ids of Tables 1-2 spell each kind (the values: hacn_core.paper_items, read by mnist_report).
_ARCH_SLUG = {"plain": "plain", "resnet": "resnet", "gated_plain": "gated-plain", "gated_resnet": "gated-resnet"}
TABLE1_TOLERANCE = 0.3  # percentage points of test error still called "reproduced" by the ledger
TABLE2_RELATIVE_TOLERANCE = 0.2  # mean k within 20% of the paper's value


def table1_item(kind: str, depth: int) -> str:
    """Paper-item id of a Table 1 cell (``hacn_core.paper_items``)."""
    return f"gates/table1/mnist-d{depth}-{_ARCH_SLUG[kind]}"


def table2_item(kind: str, depth: int) -> str:
    """Paper-item id of a Table 2 cell (gated kinds only)."""
    return f"gates/table2/mnist-d{depth}-{_ARCH_SLUG[kind]}-mean-k"


# ----------------------------------------------------------------------------- data


@functools.lru_cache(maxsize=2)
def mnist_tensors(train: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """MNIST split as ``(X, y)``: ``X`` float32 in [0, 1], flattened to 784 (Sec. 3.1 preprocessing)."""
    X, y = image_tensors("MNIST", train=train)
    return X.flatten(1), y


def training_subset(X: torch.Tensor, y: torch.Tensor, n: int | None) -> tuple[torch.Tensor, torch.Tensor]:
    """The first ``n`` images of a fixed permutation (``SUBSET_SEED``); all of them for ``None``."""
    if n is None:
        return X, y
    if not 1 <= n <= len(X):
        raise ValueError(f"train_subset={n!r} must be None or an integer in 1..{len(X)}")
    idx = torch.randperm(len(X), generator=torch.Generator().manual_seed(SUBSET_SEED))[:n]
    return X[idx], y[idx]


# ----------------------------------------------------------------------------- configurations


def make_config(kind: str, depth: int, seed: int, **overrides: Any) -> dict[str, Any]:
    """One run at the paper's setting (Sec. 3.1), with ``overrides`` applied.

    ``removal`` (layer-removal curves at the end) is on for the residual kinds
    at d = 100, the networks of Fig. 5.
    """
    if kind not in KINDS:
        raise ValueError(f"kind={kind!r} is not a network kind; allowed: {', '.join(KINDS)}")
    config = {
        "dataset": "MNIST",
        "kind": kind,
        "depth": depth,
        "width": 50,
        "stem": "linear",
        "init": "default",
        "bn_momentum": 0.1,
        "g": "relu",
        "k_init": 1.0,
        "optimizer": "nadam",
        "lr": 0.002,
        "betas": [0.9, 0.999],
        "eps": 1e-8,
        "nadam_momentum_decay": NADAM_MOMENTUM_DECAY,
        "weight_decay": 0.0,
        "batch_size": 128,
        "epochs": PAPER_EPOCHS,
        "train_subset": None,
        "removal": kind in RESIDUAL_KINDS and depth == max(DEPTHS),
        "removal_orders": RANDOM_REMOVAL_ORDERS,
        "seed": seed,
    }
    return with_overrides(config, overrides)


def paper_configs() -> list[dict[str, Any]]:
    """Every run of Tables 1-2 and Figs. 4-5 at the paper's setting, three seeds (60 runs)."""
    return [make_config(k, d, s) for d in DEPTHS for k in KINDS for s in PAPER_SEEDS]


def book_configs() -> list[dict[str, Any]]:
    """What the book stores: every kind and depth, seed 0, ``BOOK_EPOCHS`` epochs (20 runs)."""
    return [make_config(k, d, 0, epochs=BOOK_EPOCHS) for d in DEPTHS for k in KINDS]


def smoke_configs() -> list[dict[str, Any]]:
    """Tiny: d in {2, 10}, two epochs on 4,000 images; removal curves at d = 10 (8 runs)."""
    top = max(SMOKE_DEPTHS)
    return [
        make_config(k, d, 0, epochs=2, train_subset=SMOKE_TRAIN_SUBSET,
                    removal=k in RESIDUAL_KINDS and d == top, removal_orders=2)
        for d in SMOKE_DEPTHS
        for k in KINDS
    ]


# ----------------------------------------------------------------------------- training


class _TestErrorAndGates(Callback):
    """At every record point (before training and after each epoch): test error and mean ``k``.

    It also checks once that the optimizer is the NAdam the configuration names.
    """

    def __init__(self, test: tuple[torch.Tensor, torch.Tensor], momentum_decay: float) -> None:
        self.test = test
        self.momentum_decay = momentum_decay
        self.checked = False

    def on_record(self, state: TrainState) -> dict[str, float]:
        if not self.checked:
            group = state.optimizer.param_groups[0]
            if not isinstance(state.optimizer, torch.optim.NAdam) or group["momentum_decay"] != self.momentum_decay:
                raise ValueError(
                    f"nadam_momentum_decay={self.momentum_decay!r} but the trainer built "
                    f"{type(state.optimizer).__name__} with momentum_decay={group.get('momentum_decay')!r}"
                )
            self.checked = True
        out = {"test_error": 1.0 - evaluate(state.model, self.test, batch_size=2000)["accuracy"]}
        if gates.gate_parameters(state.model):
            out["mean_k"] = gates.mean_gate(state.model)
        return out


def _check_config(config: dict[str, Any]) -> None:
    if config.get("dataset") != "MNIST":
        raise ValueError(f"dataset={config.get('dataset')!r} is not supported; allowed: MNIST")
    if config.get("optimizer") != "nadam":
        raise ValueError(f"optimizer={config.get('optimizer')!r} is not supported here; allowed: nadam (Sec. 3.1)")
    if config.get("removal") and config["kind"] not in RESIDUAL_KINDS:
        raise ValueError(f"removal=True needs kind in {RESIDUAL_KINDS} (residual blocks), got {config['kind']!r}")
    if not isinstance(config.get("removal_orders"), int) or config["removal_orders"] < 1:
        raise ValueError(f"removal_orders={config.get('removal_orders')!r} must be an integer >= 1")


def k_profile_summary(k: Sequence[float]) -> dict[str, float]:
    """Fig. 5 (left) in three numbers: mean ``k`` of the first, middle and last third of the blocks.

    ``k_middle_dip`` = min(first, last) - middle is positive when the middle
    blocks have smaller ``k`` than both ends, as the paper observes.
    """
    k = np.asarray(k, dtype=float)
    if k.size < 3:
        raise ValueError(f"k: need at least 3 gated units for thirds, got {k.size}")
    first, middle, last = (float(part.mean()) for part in np.array_split(k, 3))
    return {"k_first_third": first, "k_middle_third": middle, "k_last_third": last,
            "k_middle_dip": min(first, last) - middle}


def count_reopened(closed: np.ndarray) -> int:
    """Gates closed (``k <= 0``) at some record and open at a later one; rows are gates, columns records.

    With ``g = ReLU`` the gradient of a closed gate is 0, so under plain
    gradient descent this count is 0; a momentum optimizer only carries a
    closed gate further below 0 (the momentum that closed it decays).
    """
    closed = np.asarray(closed, dtype=bool)
    count = 0
    for row in closed:
        hits = np.flatnonzero(row)
        if hits.size and not row[hits[0]:].all():
            count += 1
    return count


def removal_curves(model: torch.nn.Module, test: tuple[torch.Tensor, torch.Tensor], orders: int,
                   seed: int) -> dict[str, list]:
    """Fig. 5 (right): test accuracy against removed residual blocks, at the end of training.

    Random removal for every residual network (``orders`` seeded permutations,
    seeds ``1000 * seed + i``), plus greedy removal (smallest ``k`` first) when
    the network is gated. Lists are indexed by the number of removed blocks
    (0 .. all); ``removal_layers`` counts weight layers (2 per block).
    """

    def acc(m: torch.nn.Module) -> float:
        return evaluate(m, test, batch_size=2000)["accuracy"]

    curves: dict[str, list] = {}
    random_acc = []
    for i in range(orders):
        points = gates.removal_curve(model, acc, "random", seed=1000 * seed + i)
        random_acc.append([p.accuracy for p in points])
    curves["removal_blocks"] = [p.blocks_removed for p in points]
    curves["removal_layers"] = [p.layers_removed for p in points]
    curves["removal_random_acc"] = random_acc
    curves["removal_random_acc_mean"] = np.mean(random_acc, axis=0).tolist()
    if gates.gate_parameters(model):
        greedy = gates.removal_curve(model, acc, "greedy")
        curves["removal_greedy_acc"] = [p.accuracy for p in greedy]
        curves["removal_greedy_order"] = list(greedy[-1].removed)
    return curves


def _build_model(config: dict[str, Any]) -> torch.nn.Module:
    torch.manual_seed(config["seed"])  # the weight init
    return mnist_fc(config["kind"], config["depth"], config["width"], g=config["g"], k_init=config["k_init"],
                    stem=config["stem"], init=config["init"], bn_momentum=config["bn_momentum"])


def train_gates_mnist(config: dict[str, Any], context: RunContext) -> dict[str, Any]:
    """Train one network of Sec. 3.1 and measure Tables 1-2 and Figs. 4-5 on it."""
    _check_config(config)
    X, y = mnist_tensors(True)
    train = training_subset(X, y, config["train_subset"])
    test = mnist_tensors(False)
    model = _build_model(config)
    train_config = TrainConfig(
        epochs=config["epochs"],
        batch_size=config["batch_size"],
        lr=config["lr"],
        optimizer="nadam",
        betas=tuple(config["betas"]),
        eps=config["eps"],
        weight_decay=config["weight_decay"],  # the gates' role keeps them out of decay in any case
        seed=config["seed"],
        precision="fp32",  # the paper's precision; "auto" would autocast to bf16 on a GPU
        record_every=1,
        checkpoint_every_minutes=5.0,
    )
    tracker = _TestErrorAndGates(test, config["nadam_momentum_decay"])
    out = fit(model, train, train_config, test=test, callbacks=[tracker], checkpoint_dir=context.checkpoint_dir,
              progress=context.progress)
    return _measure(config, model, out.curves, out.metrics, test) | {"device": out.device}


def _measure(config: dict[str, Any], model: torch.nn.Module, c: dict[str, list], final: dict[str, float],
             test: tuple[torch.Tensor, torch.Tensor]) -> dict[str, Any]:
    """Metrics and curves of one trained network (either engine): Tables 1-2, Figs. 4-5.

    ``c`` holds the training curves (``epoch``, ``train_loss``, ``record_epoch``,
    ``test_error``, ``time_s``, ``mean_k``, ``param/<gate name>``); ``final`` the
    final ``test_accuracy``, ``test_loss`` and ``train_loss``.
    """
    test_error = np.asarray(c["test_error"][1:], dtype=float)  # index 0 is before training
    best = int(np.argmin(test_error))
    metrics: dict[str, Any] = {
        "test_error": 1.0 - final["test_accuracy"],
        "test_loss": final["test_loss"],
        "train_loss": final["train_loss"],
        "best_test_error": float(test_error[best]),  # selected on the test set: optimistic
        "best_epoch": best + 1,
        "parameters": sum(p.numel() for p in model.parameters()),
    }
    curves: dict[str, list] = {
        "epoch": c["epoch"],
        "train_loss": c["train_loss"],
        "record_epoch": c["record_epoch"],
        "test_error": c["test_error"],
        "time_s": c["time_s"],
    }
    gate_names = [name for name, _ in gates.gate_parameters(model)]
    if gate_names:
        history = np.array([c[f"param/{name}"] for name in gate_names], dtype=float)  # (gates, records)
        closed = history <= 0  # g(k) = ReLU(k) = 0: the unit is an identity
        reopened = count_reopened(closed)
        k_final = history[:, -1]
        metrics |= {
            "mean_k": float(k_final.mean()),
            "n_gates": len(gate_names),
            "gates_closed": int((k_final <= 0).sum()),
            "gates_reopened": int(reopened),
        }
        if len(gate_names) >= 3:
            metrics |= k_profile_summary(k_final)
        curves |= {"mean_k": c["mean_k"], "k_per_block": k_final.tolist(), "gates_closed": closed.sum(0).tolist()}
    if config["removal"]:
        removal = removal_curves(model, test, config["removal_orders"], config["seed"])
        curves |= removal
        half = removal["removal_blocks"][-1] // 2  # half of the blocks (25 of 50 at d = 100)
        full = removal["removal_random_acc_mean"][0]
        metrics |= {
            "removal_half_blocks": half,
            "acc_half_removed_random": removal["removal_random_acc_mean"][half],
            "retained_half_removed_random": removal["removal_random_acc_mean"][half] / full,
        }
        if "removal_greedy_acc" in removal:
            metrics["acc_half_removed_greedy"] = removal["removal_greedy_acc"][half]
    return {"metrics": metrics, "curves": curves}


# ----------------------------------------------------------------------------- stacked engine

STACK_FREE_KEYS: tuple[str, ...] = ("kind", "seed", "removal", "removal_orders")


def stack_key(config: dict[str, Any], free: Sequence[str] = STACK_FREE_KEYS) -> tuple:
    """Runs that may train together in one ``StackedFCNet``: equal in all but kind, seed and removal
    (or the keys ``free`` names: a study whose runs differ in more per-member options passes them)."""
    return tuple(sorted((k, json.dumps(v)) for k, v in config.items() if k not in free))


@torch.no_grad()
def _stacked_test_errors(model: StackedFCNet, test: tuple[torch.Tensor, torch.Tensor],
                         batch_size: int = 2000) -> list[float]:
    """Test error of every member (eval-mode BatchNorm), one pass over the test set."""
    was = model.training
    model.eval()
    X, y = test
    wrong = torch.zeros(model.num_members)
    for a in range(0, len(X), batch_size):
        xb = X[a:a + batch_size].unsqueeze(0).expand(model.num_members, -1, -1)
        wrong += (model(xb).argmax(-1) != y[a:a + batch_size]).sum(1)
    model.train(was)
    return (wrong / len(X)).tolist()


STACKED_CHECKPOINT = "stacked.pt"  # the stacked engine's checkpoint in its checkpoint_dir


def train_gates_mnist_stacked(configs: Sequence[dict[str, Any]], checkpoint_dir, progress: bool = True, *,
                              checkpoint_every_s: float | None = None) -> list[dict[str, Any]]:
    """Train several runs of Sec. 3.1 at once as one ``StackedFCNet``; one result per configuration.

    The runs of :func:`train_gates_mnist`, through :func:`train_fc_stacked` (whose
    docstring says what stays the same per member and how the loop keeps the
    engine's bookkeeping).
    """
    return train_fc_stacked(configs, checkpoint_dir, progress, check_config=_check_config, build_model=_build_model,
                            stack_key=stack_key, measure=_measure, checkpoint_every_s=checkpoint_every_s)


#: what a study's stacked engine plugs into :func:`train_fc_stacked`
MeasureFn = Callable[[dict[str, Any], torch.nn.Module, dict[str, list], dict[str, float],
                      tuple[torch.Tensor, torch.Tensor]], dict[str, Any]]


def train_fc_stacked(configs: Sequence[dict[str, Any]], checkpoint_dir, progress: bool = True, *,
                     check_config: Callable[[dict[str, Any]], None],
                     build_model: Callable[[dict[str, Any]], torch.nn.Module],
                     stack_key: Callable[[dict[str, Any]], Any],
                     measure: MeasureFn,
                     after_step: Callable[[StackedFCNet, Sequence[dict[str, Any]]], None] | None = None,
                     label: str = "kind",
                     checkpoint_every_s: float | None = None) -> list[dict[str, Any]]:
    """Train several MNIST runs of Sec. 3.1 at once as one ``StackedFCNet``; one result per configuration.

    The study gives its pieces: ``check_config`` (raises on a bad
    configuration), ``build_model`` (one run's ``FCNet``, seeded as its single
    run), ``stack_key`` (every configuration must have the first one's, and not
    None), ``measure`` (``_measure``'s signature: the result of one trained
    member), ``after_step`` (called after every optimizer step, as a
    ``Callback.on_step_end`` of ``fit``, with the stacked model and the
    configurations in member order) and ``label`` (the
    configuration key that names a member in errors). The members are trained
    ordered by their BatchNorm ``(momentum, eps)`` (one ``batch_norm`` call per
    pair in ``StackedFCNet``); the results come back in the order of ``configs``.

    Every member is the run the study's single engine (``train_gates_mnist``,
    ``keras_defaults.train_gates_keras``) would train: the same initial weights
    (``build_model``), the same epoch orders (``epoch_permutation(n, seed,
    epoch)``), batches of 128 with a short last batch, NAdam with the configured
    ``eps`` and ``momentum_decay`` (shared: ``stack_key`` must keep them equal),
    a test pass before training and after every epoch, and the same measurements
    (``measure``). Only the floating-point rounding differs (see
    ``hacn_core.models.stacked_fc``).

    The loop keeps the engine's bookkeeping (``hacn_core.engine.training``):
    atomic checkpoints (``save_training_checkpoint``: weights, optimizer, random
    states, position, the epoch's running losses, curves, wall time) from which a
    rerun resumes, mid-epoch included, at the cadence ``fit`` uses
    (``$HACN_CHECKPOINT_EVERY`` / ``run --checkpoint-every``, else every epoch
    within the engine's checkpoint budget; ``checkpoint_every_s`` replaces it);
    SIGINT / SIGTERM finish the step, save, and raise ``TrainingInterrupted``
    (a second signal stops at once); the wall time over resumed segments; the NaN
    guard before every update (a non-finite loss of any member saves the state
    to ``nonfinite.pt`` and raises ``NonFiniteLossError``); a progress bar in
    epochs unless ``progress`` is False or ``$HACN_QUIET`` is set.
    """
    if not configs:
        raise ValueError("configs: need at least one configuration")
    for i, c in enumerate(configs):
        check_config(c)
        if stack_key(c) is None:
            raise ValueError(f"configs[{i}] ({label} {c[label]!r}) cannot be stacked (its stack_key is None); "
                             "train it alone")
        if stack_key(c) != stack_key(configs[0]):
            raise ValueError(f"configs[{i}] differs from configs[0] in more than a stacked model lets members "
                             "differ in (their stack_key); they cannot train together")
    nets = [build_model(c) for c in configs]
    by_bn = sorted(range(len(configs)), key=lambda i: (nets[i].config.bn_momentum, nets[i].config.bn_eps))
    configs, nets = [dict(configs[i]) for i in by_bn], [nets[i] for i in by_bn]
    c0 = configs[0]
    device = resolve_device("auto")
    X, y = mnist_tensors(True)
    X, y = (t.to(device) for t in training_subset(X, y, c0["train_subset"]))
    test = mnist_tensors(False)
    test_on_device = tuple(t.to(device) for t in test)
    model = StackedFCNet(nets).to(device)
    optimizer = torch.optim.NAdam(model.parameters(), lr=c0["lr"], betas=tuple(c0["betas"]), eps=c0["eps"],
                                  weight_decay=c0["weight_decay"], momentum_decay=c0["nadam_momentum_decay"])
    n, batch, epochs = len(X), c0["batch_size"], c0["epochs"]
    steps = steps_per_epoch(n, batch)
    S = model.num_members
    gate_names = [[name for name, _ in gates.gate_parameters(m)] for m in model.members]
    curves: list[dict[str, list]] = [{} for _ in range(S)]
    path = Path(checkpoint_dir) / STACKED_CHECKPOINT
    epoch, start_step, prior_wall, segments, resumed_loss = 0, 0, 0.0, 1, None
    if path.exists():
        ckpt = load_checkpoint(path)  # on the CPU (random states); load_state_dict copies to the device
        model.load_state_dict(ckpt["model"])
        restore_training_checkpoint(ckpt, optimizer)
        epoch, start_step = int(ckpt["position"]["epoch"]), int(ckpt["position"]["step_in_epoch"])
        prior_wall, curves, segments = ckpt["wall_time_s"], ckpt["curves"], int(ckpt.get("segments", 1)) + 1
        resumed_loss = ckpt.get("epoch_loss")
    started = time.perf_counter() - prior_wall
    cadence = checkpoint_cadence(None)
    if checkpoint_every_s is not None:
        cadence = type(cadence)(seconds=checkpoint_every_s)
    last_ckpt, last_cost = time.monotonic(), 0.0
    stop: dict[str, int | None] = {"signal": None}
    loss_sum = torch.zeros(S, dtype=torch.float64, device=device)

    def checkpoint(target: Path, step_in_epoch: int = 0) -> Path:
        nonlocal last_ckpt, last_cost
        began = time.monotonic()
        position = {"epoch": epoch, "step_in_epoch": step_in_epoch, "global_step": epoch * steps + step_in_epoch,
                    "finished": False}
        saved = save_training_checkpoint(target, model, optimizer, position=position, curves=curves,
                                         wall_time_s=time.perf_counter() - started, members=len(configs),
                                         segments=segments, epoch_loss=loss_sum.tolist() if step_in_epoch else None)
        last_ckpt, last_cost = time.monotonic(), time.monotonic() - began
        return saved

    def due(global_step: int, at_epoch_end: bool) -> bool:
        """Whether the cadence asks for a checkpoint after ``global_step`` optimizer steps (``fit``'s rules;
        an explicit ``checkpoint_every_s`` is looked at only at the end of an epoch)."""
        now = time.monotonic()
        if checkpoint_every_s is not None and not at_epoch_end:
            return False
        if cadence.steps is not None and global_step % cadence.steps == 0:
            return True
        if cadence.seconds is not None and now - last_ckpt >= cadence.seconds:
            return True
        return cadence.default and at_epoch_end and now - last_ckpt >= last_cost / CHECKPOINT_BUDGET

    def on_signal(signum: int, frame: Any) -> None:
        if stop["signal"] is not None:  # a second signal: stop at once, keep the last checkpoint
            raise TrainingInterrupted(signal.Signals(signum).name, path if path.exists() else None,
                                      epoch * steps, epochs * steps, saved=False)
        stop["signal"] = signum

    def record(step: int) -> None:
        errors = _stacked_test_errors(model, test_on_device)
        for s in range(S):
            c = curves[s]
            c.setdefault("record_step", []).append(step)
            c.setdefault("record_epoch", []).append(step / steps)
            c.setdefault("test_error", []).append(errors[s])
            k = model.member_gates(s)
            for name, value in zip(gate_names[s], k):
                c.setdefault(f"param/{name}", []).append(value)
            if k:
                c.setdefault("mean_k", []).append(sum(k) / len(k))

    if epoch == 0 and not curves[0]:
        record(0)
    bar = progress_bar(epochs, initial=epoch, unit="epoch", desc=f"stacked x{S} d={c0['depth']}", progress=progress)
    model.train()
    try:
        with stop_on_signals(on_signal):
            while epoch < epochs:
                order = torch.stack([epoch_permutation(n, c["seed"], epoch) for c in configs]).to(device)  # (S, n)
                loss_sum = torch.zeros(S, dtype=torch.float64, device=device)
                if resumed_loss is not None:  # resumed inside this epoch: its running losses so far
                    loss_sum = torch.tensor(resumed_loss, dtype=torch.float64, device=device)
                    resumed_loss = None
                for step in range(start_step, steps):
                    idx = order[:, step * batch:(step + 1) * batch]
                    losses = model.member_losses(model(X[idx]), y[idx])  # (S,)
                    values = losses.tolist()
                    bad = first_nonfinite(values)  # checked before the update, as in fit
                    if bad is not None:
                        saved = checkpoint(nonfinite_checkpoint_path(checkpoint_dir), step)
                        at, member = epoch * steps + step, configs[bad]
                        raise NonFiniteLossError(at, epoch, values[bad], saved, at,
                                                 detail=f"member {bad} ({member[label]}, seed {member['seed']})")
                    optimizer.zero_grad(set_to_none=True)
                    losses.sum().backward()
                    optimizer.step()
                    if after_step is not None:
                        after_step(model, configs)
                    loss_sum += losses.detach().double() * idx.shape[1]
                    if stop["signal"] is not None:
                        name = signal.Signals(stop["signal"]).name
                        raise TrainingInterrupted(name, checkpoint(path, step + 1), epoch * steps + step + 1,
                                                  epochs * steps)
                    if step + 1 < steps and due(epoch * steps + step + 1, at_epoch_end=False):
                        checkpoint(path, step + 1)
                start_step = 0
                epoch += 1
                wall = time.perf_counter() - started
                for s in range(S):
                    c = curves[s]
                    for key, value in (("epoch", epoch), ("step", epoch * steps),
                                       ("train_loss", loss_sum[s].item() / n), ("lr", c0["lr"]), ("time_s", wall)):
                        c.setdefault(key, []).append(value)
                record(epoch * steps)
                if bar is not None:
                    bar.update(epoch - bar.n)
                if epoch < epochs and due(epoch * steps, at_epoch_end=True):
                    checkpoint(path)
    finally:
        if bar is not None:
            bar.close()
    record_segments(time.perf_counter() - started, prior_wall, segments)
    model.cpu()
    members = model.write_back()
    outs = []
    for s, (config, member) in enumerate(zip(configs, members)):
        member.eval()
        final = evaluate(member, test)
        metrics = {"test_accuracy": final["accuracy"], "test_loss": final["loss"],
                   "train_loss": curves[s]["train_loss"][-1]}
        out = measure(config, member, curves[s], metrics, test)
        out["device"] = str(device)
        outs.append(out)
    return [outs[by_bn.index(i)] for i in range(len(outs))]  # back in the order of the caller's configs


def dry_run_plan(config: dict[str, Any]) -> DryRunPlan:
    """One run's dry run (``hacn_core.engine.dry_run``): the study's network (:func:`_build_model`) on
    flattened 784-pixel inputs, NAdam as :func:`train_gates_mnist` trains, MNIST's 60,000 training
    images (or ``train_subset``)."""
    from hacn_core.engine.data import IMAGE_TRAIN_SPLITS
    from hacn_core.engine.dry_run import DryRunPlan, classification_batch

    _check_config(config)
    split = IMAGE_TRAIN_SPLITS["MNIST"]
    return DryRunPlan(
        key={k: config[k] for k in ("kind", "depth", "width", "stem", "g")},
        model=lambda: _build_model(config), batch=classification_batch((math.prod(split.shape),), split.classes),
        train=TrainConfig(epochs=config["epochs"], batch_size=config["batch_size"], lr=config["lr"],
                          optimizer="nadam", betas=tuple(config["betas"]), eps=config["eps"],
                          weight_decay=config["weight_decay"], precision="fp32"),
        n_train=config["train_subset"] or split.n_train)


EXPERIMENT = Experiment(
    id=EXPERIMENT_ID,
    title="Residual gates on MNIST: plain / ResNet / gated, d = 2..100 (Residual Gates Tables 1-2, Figs. 4-5)",
    train=train_gates_mnist,
    plan=dry_run_plan,
    train_stacked=train_gates_mnist_stacked,
    stack_key=stack_key,
    configs={"smoke": smoke_configs, "book": book_configs, "paper": paper_configs},
    setting={
        "smoke": "d in {2, 10}, 2 epochs on 4,000 MNIST images, seed 0",
        "book": f"paper's setting but {BOOK_EPOCHS} of 100 epochs, seed 0",
        "paper": "MNIST, NAdam lr 0.002, batch 128, 100 epochs, seeds 0-2",
    },
    links=(
        tuple(
            Link(table1_item(k, d), "test_error", {"kind": k, "depth": d}, scale=100.0,
                 tolerance=TABLE1_TOLERANCE)
            for d in DEPTHS
            for k in KINDS
        )
        + tuple(
            Link(table2_item(k, d), "mean_k", {"kind": k, "depth": d},
                 tolerance=round(TABLE2_RELATIVE_TOLERANCE * item(table2_item(k, d)).paper_value, 4))
            for d in DEPTHS
            for k in GATED_KINDS
        )
        + (
            Link("gates/fig4/mnist-train-loss", "train_loss", {"kind": "gated_resnet", "depth": 100}),
            Link("gates/fig5-left/k-per-block", "k_middle_dip", {"kind": "gated_resnet", "depth": 100}),
            Link("gates/fig5-right/layer-removal", "acc_half_removed_greedy",
                 {"kind": "gated_resnet", "depth": 100}, scale=100.0),
            # "retains over 90% of its performance": a lower bound, so no tolerance (status "run")
            Link("gates/fig5-right/retained-performance-half-removed", "retained_half_removed_random",
                 {"kind": "gated_resnet", "depth": 100}, scale=100.0),
        )
    ),
)
