"""Training cost of the H-ACN Mixer study: seeds stacked into one batched model against one run at a time.

The converged Mixer study (``hacn-mixer-long``) trains three seeds of every
configuration. Stacking them into one model (``torch.func.stack_module_state``
+ ``vmap`` over ``functional_call``: every weight gains a leading seed axis and
every matmul becomes a batched one) saves Python and dispatch overhead per
step; it pays off only if that overhead, not arithmetic, dominates a step. This
benchmark times, interleaved repetition by repetition, one AdamW training step
(batch 128 per seed, Fashion-MNIST-sized random inputs, each seed its own batch)
of

* ``stacked``: one step of the ``S``-seed stacked model;
* ``single`` : one step of each of the same ``S`` models on its own (what the study does),

and prints samples per second of each (process CPU time, one thread unless
``--threads``) and the median per-repetition speed-up ``single / stacked``.

    python benchmarks/bench_mixer_stack.py [--quick] [--seeds 3] [--rule hacn]
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

import torch  # noqa: E402
from torch import nn  # noqa: E402
from torch.func import functional_call, stack_module_state, vmap  # noqa: E402

from hacn_core.hacn.studies.mixer import build_model, long_configs  # noqa: E402


def measure(rule: str, seeds: int, repeats: int, steps: int) -> dict[str, float]:
    config = next(c for c in long_configs() if c["rule"] == rule and c["num_classes"] == 10)
    models = []
    for s in range(seeds):
        torch.manual_seed(s)
        models.append(build_model(dict(config, seed=s), image_size=28, in_channels=1))
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(seeds, config["batch_size"], 1, 28, 28, generator=gen)
    y = torch.randint(0, 10, (seeds, config["batch_size"]), generator=gen)

    opts = [torch.optim.AdamW(m.parameters(), lr=1e-3, weight_decay=0.01) for m in models]

    def single() -> None:
        for i, m in enumerate(models):
            loss = nn.functional.cross_entropy(m(x[i]), y[i])
            opts[i].zero_grad(set_to_none=True)
            loss.backward()
            opts[i].step()

    params, buffers = stack_module_state(models)
    params = {k: v.detach().requires_grad_() for k, v in params.items()}
    skeleton = copy.deepcopy(models[0]).to("meta")

    def member_loss(p, b, xb, yb):
        return nn.functional.cross_entropy(functional_call(skeleton, (p, b), (xb,)), yb)

    batched_loss = vmap(member_loss)
    opt = torch.optim.AdamW(params.values(), lr=1e-3, weight_decay=0.01)

    def stacked() -> None:
        loss = batched_loss(params, buffers, x, y).sum()  # members are independent: the sum's gradients are theirs
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    times = {"single": [], "stacked": []}
    for fn in (single, stacked):
        fn()  # warm-up
    for _ in range(repeats):
        for name, fn in (("single", single), ("stacked", stacked)):
            t0 = time.process_time()
            for _ in range(steps):
                fn()
            times[name].append((time.process_time() - t0) / steps)
    samples = seeds * config["batch_size"]
    return {"single_samples_per_s": samples / statistics.median(times["single"]),
            "stacked_samples_per_s": samples / statistics.median(times["stacked"]),
            "speedup": statistics.median(s / t for s, t in zip(times["single"], times["stacked"]))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 repeats x 1 step (a check that it runs)")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--rule", default="hacn", choices=("resnet", "acn", "hacn"))
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    repeats, steps = (2, 1) if args.quick else (7, 3)
    m = measure(args.rule, args.seeds, repeats, steps)
    print(f"H-ACN Mixer study, rule {args.rule}, {args.seeds} seeds, batch 128 each, {args.threads} thread(s), "
          f"{repeats} interleaved repeats x {steps} steps")
    print(f"  one run at a time: {m['single_samples_per_s']:8.0f} samples/s")
    print(f"  seeds stacked    : {m['stacked_samples_per_s']:8.0f} samples/s")
    print(f"  speed-up of stacking (median over repeats): {m['speedup']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
