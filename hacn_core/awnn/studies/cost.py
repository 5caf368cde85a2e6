"""What adapting the width costs per training step (AWNN Sec. 3.3, Algorithm 1).

The paper's discussion of limitations says that "a minimal and naïve implementation
has up to 10x cost compared to a fixed network". :func:`measure_step_costs` times one training step
(width update, forward, backward, Adam step) on SpiralHard mini-batches (batch 128,
one CPU thread) for five models, interleaved repetition by repetition so that a
change of load on the machine hits all of them alike:

* ``awnn``   : :class:`hacn_core.awnn.AdaptiveMLP` (capacity stores, optimizer state
  kept), loss :func:`hacn_core.awnn.negative_elbo` without priors, with its fused node
  in C++ (:mod:`hacn_core.awnn.fast_cpp`; ``metrics["node"]`` says which node ran);
* ``python`` : the same AWNN, the same training run, in blocks of steps run with the
  Python node instead (same values bit for bit), so ``python/awnn`` is what the C++
  node saves (config ``python_node``; only when the C++ node is built);
* ``fixed``  : an ``nn.Sequential`` MLP (:func:`fixed_mlp`) at the AWNN's current
  widths (their mean over the AWNN's block of steps), loss :func:`scaled_ce`, the
  same two ops as the AWNN's predictive term;
* ``static`` : the AWNN's own layer at those widths, frozen, exact-size stores. It
  splits ``awnn/fixed`` into the cost of the layer itself (``static/fixed``) and what
  adapting adds (``awnn/static``);
* ``naive``  : :class:`NaiveAWNN` rebuilds its ``nn.Linear`` layers and its Adam at
  every step (surviving weights copied, new neurons N(0, 1), the state of resized
  tensors reset), compared with a fixed MLP at *its* widths.

Two phases: ``adapting`` runs Algorithm 1 as it is, Adam lr 0.01 (Table 3): the
width changes at about every other step, and over a long run the widths shrink from
the starting 231 towards the task's, so the per-repetition ratios show the cost
against the width. ``steady`` freezes the widths (the converged run of Fig. 3: the
quantile widths are still computed every step, no layer changes; the naive model
still rebuilds everything). Times are CPU time of this process (wall-clock ratios
are kept too).

Subnormal floats are flushed to zero while timing (config ``flush_denormal``, turned
off again afterwards). The AWNN trains on through every repetition while the fixed and
static models are built afresh for each; after some 800 steps the Adam moments of
dead ReLU units (``0.9^t`` times their last gradient) reach the subnormal range, where
x86 arithmetic is many times slower, so without flushing the comparison charges the
AWNN for having trained longer. A fixed MLP trained as long would pay the same. The
stored runs include the steady phase without flushing (:func:`step_cost_configs`), so
the book shows the size of the effect. The adapting phase is stored for several seeds
(:data:`ADAPTING_SEEDS`) and read pooled. ``benchmarks/bench_awnn.py`` is the command-line front end; the
stored runs of :data:`EXPERIMENT_ID` feed ``notebooks/awnn_01_width.ipynb`` through
:mod:`hacn_core.awnn.studies.cost_report` (tables, the pooled reading and the plot).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from hacn_core.awnn import fast_cpp
from hacn_core.awnn import AdaptiveMLP, negative_elbo, quantile_width
from hacn_core.engine.data import synthetic_splits
from hacn_core.engine.registry import Experiment, Link
from hacn_core.engine.results import RunContext

EXPERIMENT_ID = "awnn-step-cost"
PHASES = ("adapting", "steady")
#: our target for ``awnn/fixed`` per step: at most 15% slower than a fixed MLP at the same widths
#: (the paper gives only an upper bound, "up to 10x", for a naive implementation, Sec. 3.3)
TARGET_RATIO = 1.15

# (repetitions, steps per timed block) of each profile; the phases share them
_SIZES = {"smoke": (2, 3), "book": (40, 25), "paper": (40, 25)}
#: seeds of the stored adapting measurements. One run of it moves by a few hundredths from
#: one seed, or one run, to the next (the machine's speed drifts between the interleaved
#: blocks, and each seed takes the widths down another path), so the book stores several
#: and reads their repetitions pooled (:func:`adapting_summary`).
ADAPTING_SEEDS: dict[str, tuple[int, ...]] = {"smoke": (0,), "book": (0, 1, 2, 3, 4), "paper": (0, 1, 2, 3, 4)}


def fixed_mlp(in_dim: int, widths: Sequence[int], out_dim: int) -> nn.Sequential:
    """A plain ReLU MLP with hidden ``widths``: the fixed-width baseline of the timing.

    One width per layer, as the AWNN's layers have (they need not be equal, which
    :class:`hacn_core.awnn.baseline.MLP`, the grid-searched baseline, assumes).
    """
    layers: list[nn.Module] = []
    d = in_dim
    for w in widths:
        layers += [nn.Linear(d, w), nn.ReLU()]
        d = w
    layers.append(nn.Linear(d, out_dim))
    return nn.Sequential(*layers)


def scaled_ce(logits: torch.Tensor, y: torch.Tensor, n_train: int) -> torch.Tensor:
    """Eq. 13's predictive term ``(N/M) sum_b -log p(y_b | x_b)`` by the two ops
    :func:`~hacn_core.awnn.negative_elbo` uses (the baselines' loss)."""
    return F.cross_entropy(logits, y, reduction="sum") * (n_train / len(y))


class NaiveAWNN(nn.Module):
    """The naive scheme: new ``nn.Linear`` objects and a new optimizer at every step.

    Starts from ``like``'s rates and weights; :meth:`rebuild` recomputes the quantile
    widths (Eq. 12), copies the surviving weights into new layers (new neurons drawn
    from N(0, 1), Sec. 3), and carries the optimizer state only of tensors whose shape
    did not change. The forward rescales activations by importance (Eq. 14).
    """

    def __init__(self, like: AdaptiveMLP) -> None:
        super().__init__()
        self.k = like.config.k
        self.raw = nn.ParameterList([nn.Parameter(r.detach().clone()) for r in like.raw_rate])
        self.lins = nn.ModuleList()
        for lin in like.layers:
            new = nn.Linear(lin.in_features, lin.out_features)
            with torch.no_grad():
                new.weight.copy_(lin.weight)
                new.bias.copy_(lin.bias)
            self.lins.append(new)

    def widths(self) -> list[int]:
        return [lin.out_features for lin in self.lins[:-1]]

    def rebuild(self, old_opt: torch.optim.Optimizer, lr: float, keep_widths: bool = False,
                foreach: bool | None = None) -> torch.optim.Optimizer:
        """Recompute the widths, rebuild every layer and the optimizer; return the optimizer."""
        widths = self.widths() if keep_widths else [quantile_width(F.softplus(r).item(), self.k) for r in self.raw]
        dims = [self.lins[0].in_features] + widths + [self.lins[-1].out_features]
        old_state = {id(p): s for p, s in old_opt.state.items()}
        carried: dict[nn.Parameter, dict] = {}
        new_lins = []
        for i, old in enumerate(self.lins):
            lin = nn.Linear(dims[i], dims[i + 1], device=old.weight.device)  # on the GPU too (the backbones' bench)
            with torch.no_grad():
                nn.init.normal_(lin.weight)
                nn.init.normal_(lin.bias)
                o, j = min(old.out_features, dims[i + 1]), min(old.in_features, dims[i])
                lin.weight[:o, :j] = old.weight[:o, :j]
                lin.bias[:o] = old.bias[:o]
            for new_p, old_p in ((lin.weight, old.weight), (lin.bias, old.bias)):
                if new_p.shape == old_p.shape and id(old_p) in old_state:
                    carried[new_p] = old_state[id(old_p)]
            new_lins.append(lin)
        self.lins = nn.ModuleList(new_lins)
        opt = torch.optim.Adam(self.parameters(), lr=lr, foreach=foreach)
        for p, s in carried.items():
            opt.state[p] = s
        for r in self.raw:
            if id(r) in old_state:
                opt.state[r] = old_state[id(r)]
        return opt

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x
        for r, lin in zip(self.raw, self.lins[:-1]):
            nu = F.softplus(r)
            j = torch.arange(lin.out_features, dtype=x.dtype, device=x.device)
            h = F.relu(lin(h)) * (torch.exp(-nu * j) - torch.exp(-nu * (j + 1)))
        return self.lins[-1](h)


def step_cost_config(profile: str, phase: str) -> dict[str, Any]:
    """The measurement of ``phase`` at ``profile``'s repetitions (Table 3's starting rate)."""
    if phase not in PHASES:
        raise ValueError(f"phase must be one of {PHASES}, got {phase!r}")
    reps, steps = _SIZES[profile]
    return {"dataset": "SpiralHard", "phase": phase, "hidden_layers": 2, "rate_init": 0.01, "batch_size": 128,
            "lr": 0.01, "reps": reps, "steps": steps, "naive": True, "python_node": True, "foreach": None,
            "flush_denormal": True, "seed": 0}


def step_cost_configs(profile: str) -> list[dict[str, Any]]:
    """The stored measurements: the adapting phase for each of :data:`ADAPTING_SEEDS`, the
    steady one, and the steady one again with subnormals kept."""
    adapting = step_cost_config(profile, "adapting")
    return [adapting | {"seed": seed} for seed in ADAPTING_SEEDS[profile]] + [
        step_cost_config(profile, "steady"), step_cost_config(profile, "steady") | {"flush_denormal": False}]


def run_label(config: dict[str, Any]) -> str:
    """How tables name a stored measurement: its phase (with its seed, for the adapting
    phase), and whether subnormals were kept."""
    label = config["phase"] + (f", seed {config['seed']}" if config["phase"] == "adapting" else "")
    return label + ("" if config.get("flush_denormal", False) else ", subnormals kept")


def _check(config: dict[str, Any]) -> None:
    if config["phase"] not in PHASES:
        raise ValueError(f"phase must be one of {PHASES}, got {config['phase']!r}")
    for key in ("hidden_layers", "batch_size", "reps", "steps"):
        if not isinstance(config[key], int) or config[key] < 1:
            raise ValueError(f"{key} must be a positive integer, got {config[key]!r}")
    if config["steps"] < 2:
        raise ValueError(f"steps must be at least 2 (width changes are counted between steps), got {config['steps']}")


def measure_step_costs(config: dict[str, Any], context: RunContext | None = None) -> dict[str, Any]:
    """Time the five models of the module docstring, interleaved; return medians and per-rep curves.

    Each repetition times ``steps`` AWNN steps (after one untimed step) and, with
    ``python_node``, as many with the Python node (before or after, alternating), then the fixed
    and the static model at the AWNN's mean widths of that block (in alternating
    order), then the naive model and a fixed MLP at the naive model's widths. One CPU
    thread; the previous thread count is restored.
    """
    _check(config)
    steady = config["phase"] == "steady"
    layers, steps, reps, lr, foreach = (config[k] for k in ("hidden_layers", "steps", "reps", "lr", "foreach"))
    torch.manual_seed(config["seed"])
    x_tr, y_tr = synthetic_splits(config["dataset"])["train"]
    n_train = len(y_tr)
    gen = torch.Generator().manual_seed(config["seed"])

    def adam(params) -> torch.optim.Optimizer:
        return torch.optim.Adam(params, lr=lr, foreach=foreach)

    def batch() -> tuple[torch.Tensor, torch.Tensor]:
        idx = torch.randint(0, n_train, (config["batch_size"],), generator=gen)
        return x_tr[idx], y_tr[idx]

    awnn = AdaptiveMLP(in_dim=x_tr.shape[1], out_dim=int(y_tr.max()) + 1, n_hidden_layers=layers,
                       activation="relu", rate_init=config["rate_init"])
    opt = adam(awnn.parameters())
    naive = NaiveAWNN(awnn)
    naive_opt = [adam(naive.parameters())]
    if steady:
        awnn.freeze_widths()
    update_time = [0.0]

    def awnn_step(xb, yb) -> list[int]:
        t = time.process_time()
        if steady:
            awnn.target_widths()  # what update_width computes when no width changes
        else:
            awnn.update_width(opt)  # Algorithm 1, line 5
        update_time[0] += time.process_time() - t
        opt.zero_grad(set_to_none=True)
        negative_elbo(awnn, awnn(xb), yb, n_train=n_train).total.backward()
        opt.step()
        return awnn.widths()

    def naive_step(xb, yb) -> list[int]:
        naive_opt[0] = naive.rebuild(naive_opt[0], lr, steady, foreach)
        naive_opt[0].zero_grad(set_to_none=True)
        scaled_ce(naive(xb), yb, n_train).backward()
        naive_opt[0].step()
        return naive.widths()

    def time_block(step) -> tuple[float, float, list[list[int]]]:
        """Mean CPU and wall seconds of ``steps`` steps, after one untimed step."""
        data = [batch() for _ in range(steps)]
        step(*batch())
        seen = []
        c0, w0 = time.process_time(), time.perf_counter()
        for xb, yb in data:
            seen.append(step(xb, yb))
        return (time.process_time() - c0) / steps, (time.perf_counter() - w0) / steps, seen

    def mean_widths(seen: list[list[int]]) -> list[int]:
        return [max(1, round(statistics.fmean(w[i] for w in seen))) for i in range(layers)]

    def time_fixed(widths: list[int]) -> tuple[float, float]:
        net = fixed_mlp(x_tr.shape[1], widths, int(y_tr.max()) + 1)
        fopt = adam(net.parameters())

        def step(xb, yb):
            fopt.zero_grad(set_to_none=True)
            scaled_ce(net(xb), yb, n_train).backward()
            fopt.step()

        cpu, wall, _ = time_block(step)
        return cpu, wall

    def time_static(widths: list[int]) -> float:
        net = AdaptiveMLP(awnn.config)
        net.set_widths(widths)
        net.freeze_widths()
        for lin in net.layers:
            lin.compact_()
        sopt = adam(net.parameters())

        def step(xb, yb):
            net.target_widths()
            sopt.zero_grad(set_to_none=True)
            negative_elbo(net, net(xb), yb, n_train=n_train).total.backward()
            sopt.step()

        return time_block(step)[0]

    node = fast_cpp.active_backend()  # the node of the "awnn" blocks (and of "static")
    python_blocks = config.get("python_node", False) and node == "cpp"
    keys = ("awnn_s", "python_s", "fixed_s", "static_s", "update_width_s", "awnn_wall_ratio", "total_width",
            "naive_s", "naive_fixed_s", "naive_wall_ratio", "naive_total_width")
    curves: dict[str, list[float]] = {k: [] for k in keys}
    changes = 0
    start = awnn.widths()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    flush = bool(config.get("flush_denormal", False)) and torch.set_flush_denormal(True)
    try:
        for rep in range(reps):
            if python_blocks and rep % 2 == 1:  # alternate which node's block comes first
                with fast_cpp.use_backend("python"):
                    curves["python_s"].append(time_block(awnn_step)[0])
            update_time[0] = 0.0
            cpu, wall, seen = time_block(awnn_step)
            curves["update_width_s"].append(update_time[0] / (steps + 1))  # time_block runs steps + 1
            changes += sum(a != b for a, b in zip(seen, seen[1:]))
            widths = mean_widths(seen)
            if python_blocks and rep % 2 == 0:
                with fast_cpp.use_backend("python"):
                    curves["python_s"].append(time_block(awnn_step)[0])
            if rep % 2 == 0:
                (fcpu, fwall), scpu = time_fixed(widths), time_static(widths)
            else:
                scpu, (fcpu, fwall) = time_static(widths), time_fixed(widths)
            curves["awnn_s"].append(cpu)
            curves["fixed_s"].append(fcpu)
            curves["static_s"].append(scpu)
            curves["awnn_wall_ratio"].append(wall / fwall)
            curves["total_width"].append(sum(widths))
            if config["naive"]:
                ncpu, nwall, seen_n = time_block(naive_step)
                naive_widths = mean_widths(seen_n)
                nfcpu, nfwall = time_fixed(naive_widths)
                curves["naive_s"].append(ncpu)
                curves["naive_fixed_s"].append(nfcpu)
                curves["naive_wall_ratio"].append(nwall / nfwall)
                curves["naive_total_width"].append(sum(naive_widths))
    finally:
        torch.set_num_threads(threads)
        if flush:
            torch.set_flush_denormal(False)
    curves = {k: v for k, v in curves.items() if v}
    ratio = step_ratios(curves)
    med = statistics.median
    metrics: dict[str, Any] = {
        "awnn_us": 1e6 * med(curves["awnn_s"]), "fixed_us": 1e6 * med(curves["fixed_s"]),
        "static_us": 1e6 * med(curves["static_s"]), "update_width_us": 1e6 * med(curves["update_width_s"]),
        "awnn/fixed": med(ratio["awnn/fixed"]), "static/fixed": med(ratio["static/fixed"]),
        "awnn/static": med(ratio["awnn/static"]), "update_width/fixed": med(ratio["update_width/fixed"]),
        "awnn/fixed_wall": med(curves["awnn_wall_ratio"]), "width_start": sum(start), "width_end": sum(awnn.widths()),
        "widths_end": awnn.widths(), "width_changes": changes, "steps_compared": reps * (steps - 1),
        "node": node, "flushed_denormals": bool(flush),
    }
    if python_blocks:
        metrics |= {"python_us": 1e6 * med(curves["python_s"]), "python/fixed": med(ratio["python/fixed"]),
                    "python/awnn": med(ratio["python/awnn"])}
    if config["naive"]:
        metrics |= {"naive_us": 1e6 * med(curves["naive_s"]), "naive/fixed": med(ratio["naive/fixed"]),
                    "naive/fixed_wall": med(curves["naive_wall_ratio"]), "naive_widths_end": naive.widths()}
    return {"metrics": metrics, "curves": curves, "device": "cpu"}


def step_ratios(curves: dict[str, list[float]]) -> dict[str, list[float]]:
    """Per-repetition ratios of the CPU times of :func:`measure_step_costs`' curves: ``awnn/fixed``,
    ``static/fixed``, ``awnn/static``, ``update_width/fixed`` and, when timed, ``python/fixed``,
    ``python/awnn`` and ``naive/fixed``."""
    a, f, s, u = (curves[k] for k in ("awnn_s", "fixed_s", "static_s", "update_width_s"))
    out = {"awnn/fixed": [x / y for x, y in zip(a, f)], "static/fixed": [x / y for x, y in zip(s, f)],
           "awnn/static": [x / y for x, y in zip(a, s)], "update_width/fixed": [x / y for x, y in zip(u, f)]}
    if "python_s" in curves:
        p = curves["python_s"]
        out["python/fixed"] = [x / y for x, y in zip(p, f)]
        out["python/awnn"] = [x / y for x, y in zip(p, a)]
    if "naive_s" in curves:
        out["naive/fixed"] = [x / y for x, y in zip(curves["naive_s"], curves["naive_fixed_s"])]
    return out


EXPERIMENT = Experiment(
    id=EXPERIMENT_ID,
    title="AWNN: CPU time per training step against a fixed MLP and a naive rebuild, side by side",
    train=measure_step_costs,
    configs={p: (lambda p=p: step_cost_configs(p)) for p in _SIZES},
    setting={
        "smoke": "SpiralHard, 2 adaptive layers, batch 128, 2 repetitions x 3 steps",
        "book": "SpiralHard, 2 adaptive layers from 231 neurons, batch 128, one CPU thread, 40 repetitions x 25 steps; "
                "the adapting phase for 5 seeds",
        "paper": "as the book: the measurement has no reduced setting",
    },
    # the paper's "up to 10x" is a bound for its own naive code: our naive variant's ratio
    # is shown beside it ("run"), never called reproduced
    links=(Link("awnn/sec3.3/training-overhead", "naive/fixed", {"phase": "adapting"}),),
)
