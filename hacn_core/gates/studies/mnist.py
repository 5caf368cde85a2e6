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
    (``BOOK_EPOCHS`` = 20; ``cost_table`` reads the seconds per epoch off the runs), because one seed of the
    full study takes 4.5-7.5 CPU-hours on this 2-core machine and 20 epochs
    about 55-90 CPU-minutes. ``smoke``: d in {2, 10}, two epochs on a
    4,000-image subset.
"""

from __future__ import annotations

import functools
import json
import math
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from hacn_core import gates
from hacn_core.engine.data import image_tensors
from hacn_core.engine.registry import Experiment, Link, with_overrides
from hacn_core.engine.stats import cell_means
from hacn_core.engine.tables import ClaimTable
from hacn_core.models.fc import KINDS, mnist_fc
from hacn_core.models.stacked_fc import StackedFCNet
from hacn_core.engine.results import RunContext, RunResult
from hacn_core.engine.training import (
    Callback,
    TrainConfig,
    TrainState,
    epoch_permutation,
    evaluate,
    fit,
    load_checkpoint,
    resolve_device,
    save_checkpoint,
    steps_per_epoch,
)

EXPERIMENT_ID = "gates-mnist"
DEPTHS: tuple[int, ...] = (2, 10, 20, 50, 100)  # the paper's d (Table 1)
PAPER_SEEDS: tuple[int, ...] = (0, 1, 2)
PAPER_EPOCHS = 100
BOOK_EPOCHS = 20  # about 90 CPU-minutes for the 20 runs on one thread (see cost_table)
SMOKE_DEPTHS: tuple[int, ...] = (2, 10)
SMOKE_TRAIN_SUBSET = 4000
RESIDUAL_KINDS: tuple[str, ...] = ("resnet", "gated_resnet")
GATED_KINDS: tuple[str, ...] = ("gated_plain", "gated_resnet")
NADAM_MOMENTUM_DECAY = 0.004  # torch.optim.NAdam's default = Keras Nadam's schedule_decay
RANDOM_REMOVAL_ORDERS = 5  # random pruning orders averaged for Fig. 5 (right); the paper shows one curve
SUBSET_SEED = 0  # the training subset (smoke) is the same for every run

# The paper's numbers, in the order of KINDS (Table 1: test error %, Table 2: mean k).
_ARCH_SLUG = {"plain": "plain", "resnet": "resnet", "gated_plain": "gated-plain", "gated_resnet": "gated-resnet"}
KIND_LABELS = {"plain": "Plain", "resnet": "ResNet", "gated_plain": "Gated PlainNet", "gated_resnet": "Gated ResNet"}
PAPER_TABLE1: dict[int, dict[str, float]] = {
    2: {"plain": 2.29, "resnet": 2.20, "gated_plain": 2.04, "gated_resnet": 2.17},
    10: {"plain": 2.22, "resnet": 1.64, "gated_plain": 1.78, "gated_resnet": 1.60},
    20: {"plain": 2.21, "resnet": 1.61, "gated_plain": 1.59, "gated_resnet": 1.57},
    50: {"plain": 60.37, "resnet": 1.62, "gated_plain": 1.36, "gated_resnet": 1.48},
    100: {"plain": 90.20, "resnet": 1.50, "gated_plain": 1.29, "gated_resnet": 1.26},
}
PAPER_TABLE2: dict[int, dict[str, float]] = {
    2: {"gated_plain": 10.57, "gated_resnet": 5.58},
    10: {"gated_plain": 1.19, "gated_resnet": 2.54},
    20: {"gated_plain": 0.64, "gated_resnet": 1.73},
    50: {"gated_plain": 0.46, "gated_resnet": 1.04},
    100: {"gated_plain": 0.41, "gated_resnet": 0.67},
}
TABLE1_TOLERANCE = 0.3  # percentage points (the target)
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


def stack_key(config: dict[str, Any]) -> tuple:
    """Runs that may train together in one ``StackedFCNet``: equal in all but kind, seed and removal."""
    return tuple(sorted((k, json.dumps(v)) for k, v in config.items() if k not in STACK_FREE_KEYS))


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


def train_gates_mnist_stacked(configs: Sequence[dict[str, Any]], checkpoint_dir, progress: bool = True, *,
                              checkpoint_every_s: float = 300.0) -> list[dict[str, Any]]:
    """Train several runs of Sec. 3.1 at once as one ``StackedFCNet``; one result per configuration.

    Every member is the run ``train_gates_mnist`` would train: the same
    initial weights (``torch.manual_seed(seed)`` before building it), the same
    epoch orders (``epoch_permutation(n, seed, epoch)``), batches of 128 with a
    short last batch, NAdam with the configured ``momentum_decay``, a test pass
    before training and after every epoch, and the same measurements
    (``_measure``). Only the floating-point rounding differs (see
    ``hacn_core.models.stacked_fc``). Checkpoints (atomic) at the end of an
    epoch once ``checkpoint_every_s`` seconds have passed; a rerun resumes from the last one.
    """
    configs = [dict(c) for c in configs]
    if not configs:
        raise ValueError("configs: need at least one configuration")
    for c in configs:
        _check_config(c)
        if stack_key(c) != stack_key(configs[0]):
            raise ValueError(f"configs differ in more than {STACK_FREE_KEYS}; they cannot train together")
    c0 = configs[0]
    device = resolve_device("auto")
    X, y = mnist_tensors(True)
    X, y = (t.to(device) for t in training_subset(X, y, c0["train_subset"]))
    test = mnist_tensors(False)
    test_on_device = tuple(t.to(device) for t in test)
    model = StackedFCNet([_build_model(c) for c in configs]).to(device)
    optimizer = torch.optim.NAdam(model.parameters(), lr=c0["lr"], betas=tuple(c0["betas"]), eps=c0["eps"],
                                  weight_decay=c0["weight_decay"], momentum_decay=c0["nadam_momentum_decay"])
    n, batch, epochs = len(X), c0["batch_size"], c0["epochs"]
    steps = steps_per_epoch(n, batch)
    S = model.num_members
    gate_names = [[name for name, _ in gates.gate_parameters(m)] for m in model.members]
    curves: list[dict[str, list]] = [{} for _ in range(S)]
    path = Path(checkpoint_dir) / "stacked.pt"
    epoch, elapsed = 0, 0.0
    if path.exists():
        ckpt = load_checkpoint(path, map_location=device)
        model.load_state_dict(ckpt["model"])
        optimizer.load_state_dict(ckpt["optimizer"])
        epoch, elapsed, curves = ckpt["epoch"], ckpt["elapsed"], ckpt["curves"]
    started = time.perf_counter() - elapsed
    last_ckpt = time.monotonic()

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
    bar = None
    if progress and os.environ.get("HACN_QUIET") != "1":
        from tqdm.auto import tqdm

        bar = tqdm(total=epochs, initial=epoch, unit="epoch", desc=f"stacked x{S} d={c0['depth']}")
    model.train()
    while epoch < epochs:
        order = torch.stack([epoch_permutation(n, c["seed"], epoch) for c in configs]).to(device)  # (S, n)
        loss_sum = torch.zeros(S, dtype=torch.float64, device=device)
        for step in range(steps):
            idx = order[:, step * batch:(step + 1) * batch]
            losses = model.member_losses(model(X[idx]), y[idx])
            if not torch.isfinite(losses).all():
                bad = [f"{configs[s]['kind']} seed {configs[s]['seed']}" for s in range(S)
                       if not math.isfinite(losses[s].item())]
                raise FloatingPointError(f"non-finite training loss at epoch {epoch + 1}, step {step}: {bad}")
            optimizer.zero_grad(set_to_none=True)
            losses.sum().backward()
            optimizer.step()
            loss_sum += losses.detach().double() * idx.shape[1]
        epoch += 1
        wall = time.perf_counter() - started
        for s in range(S):
            c = curves[s]
            for key, value in (("epoch", epoch), ("step", epoch * steps), ("train_loss", loss_sum[s].item() / n),
                               ("lr", c0["lr"]), ("time_s", wall)):
                c.setdefault(key, []).append(value)
        record(epoch * steps)
        if bar is not None:
            bar.update(1)
        if epoch < epochs and time.monotonic() - last_ckpt >= checkpoint_every_s:
            save_checkpoint({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": epoch,
                             "elapsed": time.perf_counter() - started, "curves": curves}, path)
            last_ckpt = time.monotonic()
    if bar is not None:
        bar.close()
    model.cpu()
    members = model.write_back()
    outs = []
    for s, (config, member) in enumerate(zip(configs, members)):
        member.eval()
        final = evaluate(member, test)
        metrics = {"test_accuracy": final["accuracy"], "test_loss": final["loss"],
                   "train_loss": curves[s]["train_loss"][-1]}
        out = _measure(config, member, curves[s], metrics, test)
        out["device"] = str(device)
        outs.append(out)
    return outs


# ----------------------------------------------------------------------------- tables for the notebook


def results_frame(results: Sequence[RunResult]):
    """One row per run: configuration essentials and the final metrics (a pandas DataFrame)."""
    import pandas as pd

    rows = []
    for r in results:
        rows.append({"kind": r.config["kind"], "depth": r.config["depth"], "seed": r.config["seed"],
                     "epochs": r.config["epochs"], **r.metrics})
    return pd.DataFrame.from_records(rows)


def _mean_n(frame, column: str):
    grouped = frame.groupby(["depth", "kind"])[column]
    return grouped.mean(), grouped.std(ddof=1), grouped.count()


def table1(results: Sequence[RunResult]):
    """Table 1: test error (%) after the last epoch, ours (mean, std, seeds) beside the paper's."""
    import pandas as pd

    frame = results_frame(results)
    mean, std, n = _mean_n(frame, "test_error")
    best, _, _ = _mean_n(frame, "best_test_error")
    rows = []
    for (depth, kind), value in mean.items():
        rows.append({"d": depth, "kind": KIND_LABELS[kind], "paper": PAPER_TABLE1[depth][kind],
                     "ours": 100 * value, "std": 100 * std[(depth, kind)], "seeds": int(n[(depth, kind)]),
                     "ours - paper": 100 * value - PAPER_TABLE1[depth][kind],
                     "best epoch (test-selected)": 100 * best[(depth, kind)]})
    order = {KIND_LABELS[k]: i for i, k in enumerate(KINDS)}
    table = pd.DataFrame.from_records(rows)
    return table.sort_values(["d", "kind"], key=lambda s: s.map(order) if s.name == "kind" else s).reset_index(
        drop=True)


def table2(results: Sequence[RunResult]):
    """Table 2: mean final ``k`` of the gated kinds, ours (mean, seeds) beside the paper's."""
    import pandas as pd

    frame = results_frame(results)
    frame = frame[frame["kind"].isin(GATED_KINDS)]
    mean, std, n = _mean_n(frame, "mean_k")
    rows = []
    for (depth, kind), value in mean.items():
        rows.append({"d": depth, "kind": KIND_LABELS[kind], "paper": PAPER_TABLE2[depth][kind], "ours": value,
                     "std": std[(depth, kind)], "seeds": int(n[(depth, kind)]),
                     "closed gates (k <= 0)": frame[(frame.depth == depth) & (frame.kind == kind)][
                         "gates_closed"].mean()})
    return pd.DataFrame.from_records(rows).sort_values(["kind", "d"]).reset_index(drop=True)


def _cell_means(results: Sequence[RunResult], metric: str) -> dict[tuple[str, int], float]:
    """Mean of ``metric`` over seeds per (kind, depth), for the runs that have it."""
    return cell_means(results, metric, ("kind", "depth"))


def claims(results: Sequence[RunResult]):
    """The paper's qualitative claims of Sec. 3.1, each checked on ``results`` (seed means per cell).

    Returns a DataFrame with the claim, where the paper makes it, our evidence
    and whether it holds (``None`` when the runs cannot tell).
    """
    err = _cell_means(results, "test_error")
    loss = _cell_means(results, "train_loss")
    mean_k = _cell_means(results, "mean_k")
    depths = sorted({d for _, d in err})
    table = ClaimTable()
    add = table.add

    for gated, base in (("gated_plain", "plain"), ("gated_resnet", "resnet")):
        pairs = [d for d in depths if (gated, d) in err and (base, d) in err]
        wins = [d for d in pairs if err[(gated, d)] < err[(base, d)]]
        add(f"{KIND_LABELS[gated]} has lower test error than {KIND_LABELS[base]} at every depth", "Table 1",
            f"at d = {wins} of {pairs}", len(wins) == len(pairs) if pairs else None)
    pairs = [d for d in depths if ("gated_plain", d) in err and ("resnet", d) in err]
    wins = [d for d in pairs if err[("gated_plain", d)] < err[("resnet", d)]]
    deep_pairs = {d for d in pairs if d >= 20}
    add("Gated PlainNet has lower test error than ResNet at d >= 20 (and d = 2)", "Table 1",
        f"at d = {wins} of {pairs}", set(wins) >= deep_pairs if deep_pairs else None)
    deep = [d for d in depths if d >= 50 and ("plain", d) in err]
    add("Plain networks fail to converge at d = 50 and 100 (test error 60% and 90%)", "Table 1",
        ", ".join(f"d = {d}: {100 * err[('plain', d)]:.2f}%" for d in deep) or "no run at d >= 50",
        all(err[("plain", d)] > 0.5 for d in deep) if deep else None)
    gaps = {d: loss[("plain", d)] / loss[("gated_plain", d)] for d in depths
            if ("plain", d) in loss and ("gated_plain", d) in loss}
    add("The training-loss gap between plain and gated plain grows with depth", "Fig. 4",
        "final loss ratio plain / gated: " + ", ".join(f"d = {d}: {g:.3g}" for d, g in gaps.items()),
        bool(np.all(np.diff(list(gaps.values())) > 0)) if len(gaps) > 1 else None)
    for kind in GATED_KINDS:
        ks = [(d, mean_k[(kind, d)]) for d in depths if (kind, d) in mean_k]
        add(f"Mean k of {KIND_LABELS[kind]} decreases with depth", "Table 2",
            ", ".join(f"d = {d}: {k:.2f}" for d, k in ks),
            bool(np.all(np.diff([k for _, k in ks]) < 0)) if len(ks) > 1 else None)
    removal = [r for r in results if r.config.get("removal")]
    if removal:
        top = max(r.config["depth"] for r in removal)
        g = [r for r in removal if r.config["kind"] == "gated_resnet" and r.config["depth"] == top]
        p = [r for r in removal if r.config["kind"] == "resnet" and r.config["depth"] == top]
        if g:
            dip = float(np.mean([r.metrics["k_middle_dip"] for r in g]))
            add(f"Middle blocks of Gated ResNet (d = {top}) have smaller k than the first and last ones",
                "Fig. 5 (left)", f"min(first, last third) - middle third = {dip:.3f}", dip > 0)
            greedy = float(np.mean([np.mean(r.curves["removal_greedy_acc"]) for r in g]))
            rand = float(np.mean([np.mean(r.curves["removal_random_acc_mean"]) for r in g]))
            add("Greedy removal (smallest k first) is slightly better than random", "Fig. 5 (right)",
                f"mean accuracy over the curve: greedy {100 * greedy:.1f}%, random {100 * rand:.1f}%", greedy > rand)
            kept = float(np.mean([r.metrics["retained_half_removed_random"] for r in g]))
            add("Gated ResNet keeps over 90% of its performance with half its blocks randomly removed",
                "Abstract, Fig. 5", f"{100 * kept:.1f}% kept", kept > 0.9)
        if g and p:
            kept_p = float(np.mean([r.metrics["retained_half_removed_random"] for r in p]))
            add("ResNet degrades more under random removal than Gated ResNet", "Fig. 5 (right)",
                f"ResNet keeps {100 * kept_p:.1f}% with half its blocks removed", kept_p < kept)
    return table.frame()


def gate_gradients_at_init(kind: str, depth: int, *, batches: int = 20, batch_size: int = 128, seed: int = 0,
                           data: tuple[torch.Tensor, torch.Tensor] | None = None) -> dict[str, np.ndarray]:
    """Why a deep Gated PlainNet keeps ``k`` near 1: the gradient of every gate at initialisation.

    At ``k = 1`` the network *is* the plain network. Over ``batches`` training
    mini-batches (a fixed, seeded draw) of the untrained network we record
    ``dL/dk_l`` per gate and return, per gate ``l`` (input side first):

    * ``mean_abs``: mean ``|dL/dk_l|`` (how strongly the loss reacts to the gate);
    * ``sign_agreement``: ``|mean sign(dL/dk_l)|``, 1 when every batch pushes ``k_l``
      the same way and near 0 when the sign is a coin flip. Adam's step is
      about ``lr * mean(g) / rms(g)``, so with random signs ``k`` only jitters.
    """
    X, y = data if data is not None else mnist_tensors(True)
    torch.manual_seed(seed)
    model = mnist_fc(kind, depth).train()
    gen = torch.Generator().manual_seed(seed)
    grads = []
    for _ in range(batches):
        idx = torch.randint(0, len(X), (batch_size,), generator=gen)
        model.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(model(X[idx]), y[idx]).backward()
        grads.append([float(p.grad) for _, p in gates.gate_parameters(model)])
    g = np.asarray(grads)  # (batches, gates)
    return {"mean_abs": np.abs(g).mean(0), "sign_agreement": np.abs(np.sign(g).mean(0))}


def gate_gradient_table(depths: Sequence[int] = DEPTHS, **kwargs):
    """``gate_gradients_at_init`` for the Gated PlainNet at each depth, summarised per third of the gates."""
    import pandas as pd

    rows = []
    for d in depths:
        out = gate_gradients_at_init("gated_plain", d, **kwargs)
        row: dict[str, Any] = {"d": d}
        for part, idx in zip(("first", "middle", "last"), np.array_split(np.arange(d), 3)):
            if idx.size:
                row[f"|dL/dk| {part} third"] = float(out["mean_abs"][idx].mean())
                row[f"sign agreement {part} third"] = float(out["sign_agreement"][idx].mean())
        rows.append(row)
    return pd.DataFrame(rows).set_index("d")


def epoch_seconds(result: RunResult) -> float:
    """Median wall-clock seconds per training epoch of a stored run (its ``time_s`` curve).

    ``time_s`` is cumulative and includes the per-epoch test evaluation; the
    median ignores a slow first epoch.
    """
    times = np.asarray(result.curves["time_s"], dtype=float)
    return float(np.median(np.diff(np.concatenate([[0.0], times]))))


def cost_table(results: Sequence[RunResult]):
    """Seconds per epoch of every stored run (seed mean per cell) and the CPU-minutes of both budgets.

    Read off the runs themselves, so they say which machine and load they were
    measured under (wall time; the provenance records the device).
    """
    import pandas as pd

    cells: dict[tuple[int, str], list[float]] = {}
    for r in results:
        if "engine" in r.provenance:  # a stacked run's clock is its whole group's (see stacked_groups)
            continue
        cells.setdefault((r.config["depth"], r.config["kind"]), []).append(epoch_seconds(r))
    frame = pd.DataFrame({KIND_LABELS[k]: {d: float(np.mean(cells[(d, k)])) for d in DEPTHS if (d, k) in cells}
                          for k in KINDS if any((d, k) in cells for d in DEPTHS)})
    frame.index.name = "d"
    total = float(np.nansum(frame.to_numpy()))
    frame.loc["sum over d"] = frame.sum()
    summary = {f"all cells x {PAPER_EPOCHS} epochs (paper, one seed), minutes": total * PAPER_EPOCHS / 60,
               f"all cells x {BOOK_EPOCHS} epochs (book), minutes": total * BOOK_EPOCHS / 60}
    return frame, summary


def stacked_groups(results: Sequence[RunResult]):
    """One row per group of runs trained together by the stacked engine: size, budget and wall time.

    The wall time is the group's (all members at once), read off the runs'
    provenance; ``minutes per run`` divides it by the members.
    """
    import pandas as pd

    groups: dict[tuple[str, ...], list[RunResult]] = {}
    for r in results:
        engine = r.provenance.get("engine")
        if engine and engine.get("name") == "stacked":
            groups.setdefault(tuple(engine["member_hashes"]), []).append(r)
    rows = []
    for members in groups.values():
        r = members[0]
        wall = r.provenance["wall_time_s"] / 60
        size = r.provenance["engine"]["members"]
        rows.append({"d": r.config["depth"], "epochs": r.config["epochs"], "runs": size,
                     "kinds x seeds": f"{len({m.config['kind'] for m in members})} x "
                                      f"{sorted({m.seed for m in members})}",
                     "wall minutes (group)": round(wall, 1), "minutes per run": round(wall / size, 1),
                     "device": r.provenance.get("device", "?")})
    return pd.DataFrame.from_records(rows).sort_values("d").reset_index(drop=True) if rows else pd.DataFrame()


# ----------------------------------------------------------------------------- figures


# Colour by family (plain / residual), solid for gated and dashed for ungated networks.
_KIND_STYLE = {"plain": {"color": "C0", "linestyle": "--"}, "gated_plain": {"color": "C0"},
               "resnet": {"color": "C1", "linestyle": "--"}, "gated_resnet": {"color": "C1"}}


def plot_training_loss(results: Sequence[RunResult]):
    """Fig. 4: training loss per epoch, one panel per depth, one line per kind (mean over seeds)."""
    from hacn_core.engine import plots

    depths = sorted({r.config["depth"] for r in results})
    fig, axes = plots.figure(ncols=min(len(depths), 3), nrows=-(-len(depths) // 3), height=2.6,
                             sharey=True)
    flat = axes.ravel()
    for ax, depth in zip(flat, depths):
        for kind in KINDS:
            runs = [r for r in results if r.config["depth"] == depth and r.config["kind"] == kind]
            if not runs:
                continue
            loss = np.array([r.curves["train_loss"] for r in runs], dtype=float)
            plots.with_ci(ax, runs[0].curves["epoch"], loss, label=KIND_LABELS[kind], **_KIND_STYLE[kind])
        ax.set_yscale("log")
        ax.set_title(f"d = {depth}")
        ax.set_xlabel("epoch")
    for ax in flat[len(depths):]:
        ax.set_visible(False)
    flat[0].set_ylabel("training loss")
    flat[0].legend(frameon=False, fontsize="small")
    fig.tight_layout()
    return fig


def plot_mean_k(results: Sequence[RunResult]):
    """Mean ``k`` against epochs (Table 2 is its last point), one panel per gated kind, one line per depth."""
    from hacn_core.engine import plots

    fig, axes = plots.figure(ncols=2, height=2.8)
    for ax, kind in zip(axes[0], GATED_KINDS):
        for depth in sorted({r.config["depth"] for r in results}):
            runs = [r for r in results if r.config["kind"] == kind and r.config["depth"] == depth]
            if runs:
                k = np.array([r.curves["mean_k"] for r in runs], dtype=float)
                plots.with_ci(ax, runs[0].curves["record_epoch"], k, label=f"d = {depth}")
        ax.set_yscale("log")
        ax.set_title(KIND_LABELS[kind])
        ax.set_xlabel("epoch")
    axes[0, 0].set_ylabel("mean k")
    axes[0, 0].legend(frameon=False, fontsize="small")
    fig.tight_layout()
    return fig


def plot_long_runs(runs: Sequence[RunResult]):
    """Training loss, test error and mean ``k`` per epoch of runs at the paper's full budget (one line each)."""
    from hacn_core.engine import plots

    fig, axes = plots.figure(ncols=3, height=2.8)
    for r in sorted(runs, key=lambda r: (r.config["depth"], r.config["kind"], r.seed)):
        lbl = f"{KIND_LABELS[r.config['kind']]}, d = {r.config['depth']}, seed {r.seed}"
        axes[0, 0].plot(r.curves["epoch"], r.curves["train_loss"], label=lbl)
        axes[0, 1].plot(r.curves["record_epoch"], 100 * np.asarray(r.curves["test_error"]), label=lbl)
        if "mean_k" in r.curves:
            axes[0, 2].plot(r.curves["record_epoch"], r.curves["mean_k"], label=lbl)
    for ax, name in zip(axes[0], ("training loss", "test error (%)", "mean k")):
        ax.set_xlabel("epoch")
        ax.set_title(name)
    axes[0, 0].legend(frameon=False, fontsize="x-small")
    fig.tight_layout()
    return fig


def plot_removal(results: Sequence[RunResult]):
    """Fig. 5: final ``k`` per block (left) and accuracy vs removed layers (right), deepest residual nets."""
    from hacn_core.engine import plots

    with_removal = [r for r in results if r.config.get("removal")]
    if not with_removal:
        raise ValueError("no run with removal curves among the results")
    depth = max(r.config["depth"] for r in with_removal)
    gated = [r for r in with_removal if r.config["depth"] == depth and r.config["kind"] == "gated_resnet"]
    plain = [r for r in with_removal if r.config["depth"] == depth and r.config["kind"] == "resnet"]
    fig, axes = plots.figure(ncols=2, height=3.0)
    left, right = axes[0]
    for r in gated:
        k = r.curves["k_per_block"]
        left.plot(np.arange(1, len(k) + 1), k, marker=".", label=f"seed {r.config['seed']}")
    left.axhline(0, color="0.6", linewidth=0.8)
    left.xaxis.get_major_locator().set_params(integer=True)
    left.set_xlabel("residual block")
    left.set_ylabel("final k")
    left.set_title(f"Gated ResNet, d = {depth}")
    left.legend(frameon=False, fontsize="small")
    layers = (gated or plain)[0].curves["removal_layers"]
    for runs, key, label in ((gated, "removal_greedy_acc", "Gated ResNet, greedy"),
                             (gated, "removal_random_acc_mean", "Gated ResNet, random"),
                             (plain, "removal_random_acc_mean", "ResNet, random")):
        if runs:
            plots.with_ci(right, layers, 100 * np.array([r.curves[key] for r in runs]), label=label)
    right.set_xlabel("removed layers")
    right.set_ylabel("test accuracy (%)")
    right.set_title("layer removal")
    right.legend(frameon=False, fontsize="small")
    fig.tight_layout()
    return fig


def dry_run_plan(config: dict[str, Any]) -> DryRunPlan:
    """One run's dry run (``hacn_core.engine.dry_run``): the study's network (:func:`_build_model`) on
    flattened 784-pixel inputs, NAdam as :func:`train_gates_mnist` trains, MNIST's 60,000 training
    images (or ``train_subset``)."""
    from hacn_core.engine.dry_run import IMAGE_TRAIN_SPLITS, DryRunPlan, classification_batch

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
                 tolerance=round(TABLE2_RELATIVE_TOLERANCE * PAPER_TABLE2[d][k], 4))
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
