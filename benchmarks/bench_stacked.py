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

``--keras`` times the stacks of ``gates-keras``' confirmation instead (its
``paper`` profile at each depth: ``keras-all`` and ``k-init-0.5``, seeds 0-2,
six Gated PlainNets whose BatchNorms differ, so two ``batch_norm`` calls per
layer), with the ``k_clip`` hook of its stacked engine after every step.

    python benchmarks/bench_stacked.py [--quick] [--members 12] [--depths 10 50 100] [--keras]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from hacn_core.gates.studies import keras_defaults  # noqa: E402
from hacn_core.models.fc import KINDS, FCNet, mnist_fc  # noqa: E402
from hacn_core.models.stacked_fc import StackedFCNet  # noqa: E402


def kinds_networks(depth: int, members: int) -> list[FCNet]:
    """``members`` networks of the MNIST study at ``depth``, the four kinds cycled."""
    return [mnist_fc(KINDS[i % len(KINDS)], depth) for i in range(members)]


def keras_configs(depth: int) -> list[dict]:
    """The runs of ``gates-keras``' paper profile at ``depth``, in the member order of its stacked engine."""
    configs = [c for c in keras_defaults.paper_configs() if c["depth"] == depth]
    return sorted(configs, key=lambda c: (c["bn_momentum"], c["bn_eps"]))


def measure(build: Callable[[], list[FCNet]], repeats: int, steps: int,
            after_step: Callable[[StackedFCNet], None] | None = None) -> dict[str, float]:
    """Median per-step times of ``build()``'s networks stacked and one at a time (see the module doc)."""
    stacked, singles = StackedFCNet(build()), build()
    members = len(singles)
    opt = torch.optim.NAdam(stacked.parameters(), lr=0.002)
    opts = [torch.optim.NAdam(m.parameters(), lr=0.002) for m in singles]
    g = torch.Generator().manual_seed(0)
    x = torch.rand(members, 128, 784, generator=g)
    y = torch.randint(0, 10, (members, 128), generator=g)

    def stacked_step() -> None:
        opt.zero_grad(set_to_none=True)
        stacked.member_losses(stacked(x), y).sum().backward()
        opt.step()
        if after_step is not None:
            after_step(stacked)

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
    parser.add_argument("--keras", action="store_true",
                        help="the six networks of gates-keras' paper profile per depth (default depths 50, 100)")
    args = parser.parse_args(argv)
    if args.members < 1:
        parser.error(f"--members={args.members} must be >= 1")
    torch.set_num_threads(args.threads)
    if args.keras:
        depths = args.depths or [50, 100]
        what = "gates-keras paper profile: keras-all + k-init-0.5 x seeds 0-2 (6 networks)"
    else:
        depths = args.depths or ([10, 50] if args.quick else [2, 10, 20, 50, 100])
        what = f"{args.members} networks"
    repeats, steps = (3, 2) if args.quick else (5, 4)
    print(f"one NAdam step, batch 128, {what}, {args.threads} thread(s), CPU process time; "
          f"median of {repeats} interleaved repetitions")
    print(f"{'d':>4} {'stacked ms':>11} {'single ms (all)':>16} {'speed-up':>9}")
    for d in depths:
        if args.keras:
            configs = keras_configs(d)
            r = measure(lambda: [keras_defaults.build_model(c) for c in configs], repeats, steps,
                        after_step=lambda model: keras_defaults.clip_stacked_gates(model, configs))
        else:
            r = measure(lambda: kinds_networks(d, args.members), repeats, steps)
        print(f"{d:>4} {r['stacked_ms']:>11.1f} {r['single_ms']:>16.1f} {r['speedup']:>8.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
