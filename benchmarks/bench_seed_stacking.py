"""Training cost of the H-ACN studies: seeds stacked into one batched model against one run at a time.

The book trains three seeds of every configuration of the converged Mixer study
(``hacn-mixer-long``), the ViT study (``hacn-vit``) and the decoder study
(``hacn-decoder``). Stacking the seeds into one model (``torch.func.stack_module_state``
+ ``vmap`` over ``functional_call``: every weight gains a leading seed axis and every
matmul becomes a batched one) saves Python and dispatch overhead per step; it pays off
only if that overhead, not arithmetic, dominates a step. This benchmark times,
interleaved repetition by repetition, one AdamW training step (each seed its own batch
of the study's book size, random inputs of the study's shape) of

* ``stacked``: one step of the ``S``-seed stacked model;
* ``single`` : one step of each of the same ``S`` models on its own (what the studies do),

and prints samples per second of each (process CPU time, one thread unless
``--threads``) and the median per-repetition speed-up ``single / stacked``.

    python benchmarks/bench_seed_stacking.py [--study mixer|vit|decoder] [--quick] [--seeds 3] [--rule hacn]

Measured (one thread, 2026-11-27, the 2-core machine with one training on the other
core, H-ACN, 3 seeds, 7 repeats x 3 steps): Mixer 1.02x, ViT 0.81x, decoder 0.83x. At the
book's sizes a step is arithmetic (large enough matmuls that one thread is busy), and the
batched kernels of the stacked model are slower than three plain ones; so every run of
these studies trains on its own, and the chapters' budget sections say so.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

import torch  # noqa: E402
from torch import Tensor, nn  # noqa: E402
from torch.func import functional_call, stack_module_state, vmap  # noqa: E402

STUDIES = ("mixer", "vit", "decoder")


def study_models(study: str, rule: str, seeds: int) -> tuple[list[nn.Module], Tensor, Tensor, Callable, str]:
    """The study's book model for ``seeds`` seeds, a batch per seed (leading seed axis), the loss, a label."""
    gen = torch.Generator().manual_seed(0)
    if study == "mixer":
        from hacn_core.hacn.studies.mixer import build_model, long_configs

        config = next(c for c in long_configs() if c["rule"] == rule and c["num_classes"] == 10)
        models = [build_model(dict(config, seed=s), image_size=28, in_channels=1) for s in range(seeds)]
        x = torch.randn(seeds, config["batch_size"], 1, 28, 28, generator=gen)
        y = torch.randint(0, 10, (seeds, config["batch_size"]), generator=gen)
        return models, x, y, nn.functional.cross_entropy, "Mixer (hacn-mixer-long, 10 classes)"
    if study == "vit":
        from hacn_core.hacn.studies import vit

        configs = [vit.make_config(rule, s, profile="book") for s in range(seeds)]
        models = [vit.build_model(c) for c in configs]
        x = torch.randn(seeds, configs[0]["batch_size"], 1, 28, 28, generator=gen)
        y = torch.randint(0, 10, (seeds, configs[0]["batch_size"]), generator=gen)
        return models, x, y, nn.functional.cross_entropy, "ViT (hacn-vit)"
    from hacn_core.hacn.studies import decoder

    configs = [decoder.make_config(rule, s, profile="book") for s in range(seeds)]
    models = [decoder.build_model(c) for c in configs]
    c = configs[0]
    x = torch.randint(0, c["vocab_size"], (seeds, c["batch_size"], c["block_size"]), generator=gen)
    y = torch.randint(0, c["vocab_size"], (seeds, c["batch_size"], c["block_size"]), generator=gen)
    return models, x, y, decoder.lm_loss, "decoder (hacn-decoder)"


def measure(study: str, rule: str, seeds: int, repeats: int, steps: int) -> dict[str, float | str]:
    models, x, y, loss_fn, label = study_models(study, rule, seeds)
    opts = [torch.optim.AdamW(m.parameters(), lr=1e-3, weight_decay=0.01) for m in models]

    def single() -> None:
        for i, m in enumerate(models):
            loss = loss_fn(m(x[i]), y[i])
            opts[i].zero_grad(set_to_none=True)
            loss.backward()
            opts[i].step()

    params, buffers = stack_module_state(models)
    params = {k: v.detach().requires_grad_() for k, v in params.items()}
    # the module the stacked weights are called through; kept on the CPU, not "meta": tensors a model
    # caches outside its parameters and buffers (the decoder's rotary tables) must stay real
    skeleton = copy.deepcopy(models[0])

    def member_loss(p, b, xb, yb):
        return loss_fn(functional_call(skeleton, (p, b), (xb,)), yb)

    batched_loss = vmap(member_loss, randomness="different")  # each seed its own dropout draws, if any
    opt = torch.optim.AdamW(params.values(), lr=1e-3, weight_decay=0.01)

    def stacked() -> None:
        loss = batched_loss(params, buffers, x, y).sum()  # members are independent: the sum's gradients are theirs
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    times: dict[str, list[float]] = {"single": [], "stacked": []}
    for fn in (single, stacked):
        fn()  # warm-up
    for _ in range(repeats):
        for name, fn in (("single", single), ("stacked", stacked)):
            t0 = time.process_time()
            for _ in range(steps):
                fn()
            times[name].append((time.process_time() - t0) / steps)
    samples = seeds * x.shape[1]
    return {"label": label, "batch": x.shape[1],
            "single_samples_per_s": samples / statistics.median(times["single"]),
            "stacked_samples_per_s": samples / statistics.median(times["stacked"]),
            "speedup": statistics.median(s / t for s, t in zip(times["single"], times["stacked"]))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--study", default="mixer", choices=STUDIES)
    parser.add_argument("--quick", action="store_true", help="2 repeats x 1 step (a check that it runs)")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--rule", default="hacn", choices=("resnet", "acn", "hacn"))
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    repeats, steps = (2, 1) if args.quick else (7, 3)
    m = measure(args.study, args.rule, args.seeds, repeats, steps)
    print(f"{m['label']}, rule {args.rule}, {args.seeds} seeds, batch {m['batch']} each, {args.threads} thread(s), "
          f"{repeats} interleaved repeats x {steps} steps")
    print(f"  one run at a time: {m['single_samples_per_s']:8.0f} samples/s")
    print(f"  seeds stacked    : {m['stacked_samples_per_s']:8.0f} samples/s")
    print(f"  speed-up of stacking (median over repeats): {m['speedup']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
