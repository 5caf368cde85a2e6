"""Per-step training cost of an AWNN MLP vs a fixed-width MLP (AWNN Sec. 3.3).

The paper reports "up to 10x" overhead for a naive implementation that changes
the network at every step. This benchmark times one training step (width update,
forward, backward, Adam step) on SpiralHard mini-batches (batch 128, CPU, one
thread) for three models, interleaved repetition by repetition:

* ``awnn``  : ``hacn_core.awnn.AdaptiveMLP`` (capacity stores, optimizer state kept);
* ``fixed`` : an ``nn.Sequential`` MLP built at the AWNN's current widths (the mean
  width over the AWNN's block of steps), same loss, same Adam;
* ``naive`` : rebuilds its ``nn.Linear`` layers and its Adam optimizer at every step
  (surviving weights copied, new neurons N(0, 1), state of resized tensors reset),
  as the paper's public code does; compared with a fixed MLP at *its* widths.

Two phases: ``adapting`` (Algorithm 1 as is, Adam lr 0.01 as in Table 3: the
first steps of a run, when the width changes at about every other step) and
``steady`` (the width has converged, Fig. 3: the rates still learn and the
quantile widths are still computed every step, but no layer changes; the naive
model still rebuilds everything). Each timed block starts with one untimed step; times are
CPU time of this process (the machine may be shared; wall-clock ratios are shown
too). Printed: median per-step times and the median over repetitions of the
per-repetition ratio. Target: awnn/fixed <= 1.15.

    python benchmarks/bench_awnn.py [--quick] [--layers 2] [--rate 0.01]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

from hacn_core.awnn import AdaptiveMLP, negative_elbo, quantile_width  # noqa: E402
from hacn_core.data import synthetic_splits  # noqa: E402


def fixed_mlp(in_dim: int, widths: list[int], out_dim: int) -> nn.Sequential:
    layers: list[nn.Module] = []
    d = in_dim
    for w in widths:
        layers += [nn.Linear(d, w), nn.ReLU()]
        d = w
    layers.append(nn.Linear(d, out_dim))
    return nn.Sequential(*layers)


class NaiveAWNN(nn.Module):
    """The naive scheme: new ``nn.Linear`` objects (and a new optimizer) at every step."""

    def __init__(self, like: AdaptiveMLP) -> None:
        super().__init__()
        self.k = like.config.k
        # same starting point as the AWNN model: its rates and (kaiming+) weights
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

    def rebuild(self, old_opt: torch.optim.Optimizer, lr: float, keep_widths: bool = False) -> torch.optim.Optimizer:
        """Recompute the widths, rebuild every layer and the optimizer (every step)."""
        widths = [quantile_width(F.softplus(r).item(), self.k) for r in self.raw]
        if keep_widths:
            widths = self.widths()
        dims = [self.lins[0].in_features] + widths + [self.lins[-1].out_features]
        old_state = {id(p): s for p, s in old_opt.state.items()}
        carried: dict[nn.Parameter, dict] = {}
        new_lins = []
        for i, old in enumerate(self.lins):
            lin = nn.Linear(dims[i], dims[i + 1])
            with torch.no_grad():
                nn.init.normal_(lin.weight)  # new neurons ~ N(0, 1)
                nn.init.normal_(lin.bias)
                o, j = min(old.out_features, dims[i + 1]), min(old.in_features, dims[i])
                lin.weight[:o, :j] = old.weight[:o, :j]
                lin.bias[:o] = old.bias[:o]
            for new_p, old_p in ((lin.weight, old.weight), (lin.bias, old.bias)):
                if new_p.shape == old_p.shape and id(old_p) in old_state:
                    carried[new_p] = old_state[id(old_p)]  # unchanged shape: state kept
            new_lins.append(lin)
        self.lins = nn.ModuleList(new_lins)
        opt = torch.optim.Adam(self.parameters(), lr=lr)
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
            j = torch.arange(lin.out_features, dtype=x.dtype)
            h = F.relu(lin(h)) * (torch.exp(-nu * j) - torch.exp(-nu * (j + 1)))
        return self.lins[-1](h)


def run_phase(args, name: str, steady: bool, reps: int, steps: int) -> None:
    torch.manual_seed(0)
    x_tr, y_tr = synthetic_splits("SpiralHard")["train"]
    n_train = len(y_tr)
    gen = torch.Generator().manual_seed(0)

    def batch() -> tuple[torch.Tensor, torch.Tensor]:
        idx = torch.randint(0, n_train, (args.batch,), generator=gen)
        return x_tr[idx], y_tr[idx]

    awnn = AdaptiveMLP(in_dim=2, out_dim=2, n_hidden_layers=args.layers, activation="relu", rate_init=args.rate)
    opt = torch.optim.Adam(awnn.parameters(), lr=args.lr)
    naive = NaiveAWNN(awnn)
    naive_opt = [torch.optim.Adam(naive.parameters(), lr=args.lr)]
    if steady:
        awnn.freeze_widths()

    def awnn_step(xb, yb) -> list[int]:
        if steady:
            awnn.target_widths()  # what update_width computes when no width changes
        else:
            awnn.update_width(opt)  # Algorithm 1, line 5
        opt.zero_grad(set_to_none=True)
        negative_elbo(awnn, awnn(xb), yb, n_train=n_train).total.backward()
        opt.step()
        return awnn.widths()

    def naive_step(xb, yb) -> list[int]:
        naive_opt[0] = naive.rebuild(naive_opt[0], args.lr, steady)
        o = naive_opt[0]
        o.zero_grad(set_to_none=True)
        (F.cross_entropy(naive(xb), yb, reduction="sum") * (n_train / len(yb))).backward()
        o.step()
        return naive.widths()

    def time_block(step) -> tuple[float, float, list[list[int]]]:
        """Mean CPU and wall time of ``steps`` steps, after one untimed step (warm caches)."""
        data = [batch() for _ in range(steps)]
        step(*batch())
        seen = []
        c0, w0 = time.process_time(), time.perf_counter()
        for xb, yb in data:
            seen.append(step(xb, yb))
        return (time.process_time() - c0) / steps, (time.perf_counter() - w0) / steps, seen

    def time_fixed(widths_seen: list[list[int]]) -> tuple[float, float]:
        mean_w = [max(1, round(statistics.fmean(w[i] for w in widths_seen))) for i in range(args.layers)]
        net = fixed_mlp(2, mean_w, 2)
        fopt = torch.optim.Adam(net.parameters(), lr=args.lr)

        def step(xb, yb):
            fopt.zero_grad(set_to_none=True)
            (F.cross_entropy(net(xb), yb, reduction="sum") * (n_train / len(yb))).backward()
            fopt.step()
            return mean_w

        cpu, wall, _ = time_block(step)  # its untimed first step also creates the Adam state
        return cpu, wall

    res: dict[str, list[float]] = {k: [] for k in ("a", "fa", "n", "fn", "ra", "rn", "wa", "wn")}
    changes = 0
    start = awnn.widths()
    for _ in range(reps):
        cpu, wall, seen = time_block(awnn_step)
        changes += sum(a != b for a, b in zip(seen, seen[1:]))
        fcpu, fwall = time_fixed(seen)
        res["a"].append(cpu), res["fa"].append(fcpu), res["ra"].append(cpu / fcpu), res["wa"].append(wall / fwall)
        if not args.no_naive:
            cpu, wall, seen_n = time_block(naive_step)
            fcpu, fwall = time_fixed(seen_n)
            res["n"].append(cpu), res["fn"].append(fcpu), res["rn"].append(cpu / fcpu), res["wn"].append(wall / fwall)

    med = statistics.median
    print(f"[{name}] AWNN widths {start} -> {awnn.widths()}, width changed at {changes} of {reps * (steps - 1)} steps")
    print(f"  awnn  {med(res['a']) * 1e6:7.0f} us/step  fixed@same widths {med(res['fa']) * 1e6:7.0f} us/step  "
          f"ratio {med(res['ra']):.3f} (wall-clock {med(res['wa']):.3f})  [target <= 1.15]")
    if not args.no_naive:
        print(f"  naive {med(res['n']) * 1e6:7.0f} us/step  fixed@same widths {med(res['fn']) * 1e6:7.0f} us/step  "
              f"ratio {med(res['rn']):.3f} (wall-clock {med(res['wn']):.3f})  widths {naive.widths()}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer repetitions (about 15 s)")
    ap.add_argument("--layers", type=int, default=2, help="adaptive hidden layers (SpiralHard: 1, 2, 4)")
    ap.add_argument("--rate", type=float, default=0.01, help="starting rate (0.01: 231 neurons)")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--reps", type=int, default=None)
    ap.add_argument("--steps", type=int, default=None, help="steps per timed block")
    ap.add_argument("--phase", choices=("both", "adapting", "steady"), default="both")
    ap.add_argument("--no-naive", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(1)
    reps = args.reps or (10 if args.quick else 40)
    steps = args.steps or (15 if args.quick else 25)
    print(f"SpiralHard-like input (2-d), batch {args.batch}, {args.layers} adaptive hidden layers, "
          f"starting rate {args.rate} ({quantile_width(args.rate)} neurons), Adam lr {args.lr}, "
          f"1 CPU thread, {reps} interleaved reps x {steps} steps")
    if args.phase in ("both", "adapting"):
        run_phase(args, "adapting", False, reps, steps)
    if args.phase in ("both", "steady"):
        run_phase(args, "steady", True, reps, steps)


if __name__ == "__main__":
    main()
