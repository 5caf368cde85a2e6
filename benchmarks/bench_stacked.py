"""Training cost of the MNIST gate study: the stacked engine against one network at a time.

``hacn_core.models.stacked_fc.StackedFCNet`` trains ``S`` networks of Residual
Gates Sec. 3.1 (one per kind and seed) as one batched model. This benchmark
times, interleaved repetition by repetition, one NAdam training step (batch
128, MNIST-sized random inputs) of

* ``stacked``: one step of the ``S``-member stacked model (the 4 kinds, cycled);
* ``single`` : one step of each of the same ``S`` networks trained on its own
  (``FCNet`` + ``torch.optim.NAdam``, what ``fit`` does per step),

and prints the median per-step CPU process time of each and the median
per-repetition speed-up ``single / stacked``. One CPU thread unless
``--threads``.

    python benchmarks/bench_stacked.py [--quick] [--members 12] [--depths 10 50 100]
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

from hacn_core.models.fc import KINDS, mnist_fc  # noqa: E402
from hacn_core.models.stacked_fc import StackedFCNet  # noqa: E402


def measure(depth: int, members: int, repeats: int, steps: int) -> dict[str, float]:
    nets = [mnist_fc(KINDS[i % len(KINDS)], depth) for i in range(members)]
    singles = [mnist_fc(KINDS[i % len(KINDS)], depth) for i in range(members)]
    stacked = StackedFCNet(nets)
    opt = torch.optim.NAdam(stacked.parameters(), lr=0.002)
    opts = [torch.optim.NAdam(m.parameters(), lr=0.002) for m in singles]
    g = torch.Generator().manual_seed(0)
    x = torch.rand(members, 128, 784, generator=g)
    y = torch.randint(0, 10, (members, 128), generator=g)

    def stacked_step() -> None:
        opt.zero_grad(set_to_none=True)
        stacked.member_losses(stacked(x), y).sum().backward()
        opt.step()

    def single_steps() -> None:
        for s, (m, o) in enumerate(zip(singles, opts)):
            o.zero_grad(set_to_none=True)
            F.cross_entropy(m(x[s]), y[s]).backward()
            o.step()

    def timed(fn) -> float:
        fn()  # untimed warm-up of this block
        start = time.process_time()
        for _ in range(steps):
            fn()
        return (time.process_time() - start) / steps

    t_stacked, t_single = [], []
    for _ in range(repeats):
        t_stacked.append(timed(stacked_step))
        t_single.append(timed(single_steps))
    ratios = [b / a for a, b in zip(t_stacked, t_single)]
    return {"stacked_ms": 1e3 * statistics.median(t_stacked), "single_ms": 1e3 * statistics.median(t_single),
            "speedup": statistics.median(ratios)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="d = 10 and 50, fewer repetitions (about 30 s)")
    parser.add_argument("--members", type=int, default=12, help="networks per stack (default 12: 4 kinds x 3 seeds)")
    parser.add_argument("--depths", type=int, nargs="*", default=None, help="the paper's d values to time")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    if args.members < 1:
        parser.error(f"--members={args.members} must be >= 1")
    torch.set_num_threads(args.threads)
    depths = args.depths or ([10, 50] if args.quick else [2, 10, 20, 50, 100])
    repeats, steps = (3, 2) if args.quick else (5, 4)
    print(f"one NAdam step, batch 128, {args.members} networks, {args.threads} thread(s), CPU process time; "
          f"median of {repeats} interleaved repetitions")
    print(f"{'d':>4} {'stacked ms':>11} {'single ms (all)':>16} {'speed-up':>9}")
    for d in depths:
        r = measure(d, args.members, repeats, steps)
        print(f"{d:>4} {r['stacked_ms']:>11.1f} {r['single_ms']:>16.1f} {r['speedup']:>8.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
