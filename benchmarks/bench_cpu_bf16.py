"""fp32 against bf16 autocast for the book's CPU trainings, side by side in one process.

A CPU with AMX (Intel Sapphire Rapids and later; ``lscpu`` lists ``amx_bf16``) runs bf16 matrix
products and convolutions on its tile units, so ``TrainConfig(precision="bf16")`` (autocast: weights,
optimizer state and reductions stay fp32) can shorten a step that the convolutions or large matrix
products dominate. This benchmark decides, per study, whether its book runs should use it: each
study's own book model, loss, optimizer and after-step work (the dry run's timed step,
:func:`hacn_core.engine.dry_run.time_on_device`, at the book batch) steps in fp32 and in bf16,
alternately in ``--rounds`` rounds so that a change in the machine's load hits both alike, and
prints the median step of each with their ratio.

On a CPU without native bf16 the products are emulated and bf16 is several times *slower*; the
benchmark says which the CPU has (``torch.backends.mkldnn`` and ``/proc/cpuinfo``).

Measured (2026-11-27, this project's 2-core Xeon with amx_bf16, one thread, two trainings running at nice 10;
``--rounds 2 --steps 3 --models 1``; median ms per step, fp32 / bf16):

    awnn-images         ResNet-20, adaptive head, MNIST, batch 128    588 / 363   1.62x
    awnn-text           2+2-layer d-64 Transformer, adaptive FFNs      666 / 680   0.98x
    awnn-graphs         GIN on NCI1, adaptive MLPs                      12 / 23    0.51x
    width-connectivity  16-layer d-32 adaptive Mixer                   169 / 187   0.90x
    hacn-mixer-long     16-layer Mixer (running study)                 155 / 154   1.01x

Only the convolutional ResNet-20 gains; the other models' products are too small for the tiles, and the
casts cost more than they save. The book keeps fp32 everywhere: 1.6x on one study of five would buy about
two CPU-hours at the price of a precision the paper does not use and of runs that a reader's CPU without
native bf16 would take several times longer to repeat.

Run: ``OMP_NUM_THREADS=1 python benchmarks/bench_cpu_bf16.py [--rounds 3] [--steps 5] [--study awnn-images ...]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from dataclasses import replace
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hacn_core import catalog  # noqa: E402
from hacn_core.engine.dry_run import DryRunPlan, time_on_device  # noqa: E402

#: the book studies not started when this was written, and one that is (hacn-mixer-long, for reference)
STUDIES: tuple[str, ...] = ("awnn-images", "awnn-text", "awnn-graphs", "width-connectivity", "hacn-mixer-long")


def amx() -> str:
    """What the CPU offers for bf16: AMX tiles, AVX-512 bf16, or neither (from /proc/cpuinfo)."""
    try:
        flags = set(Path("/proc/cpuinfo").read_text().split())
    except OSError:
        return "unknown (no /proc/cpuinfo)"
    have = [f for f in ("amx_bf16", "avx512_bf16") if f in flags]
    return ", ".join(have) if have else "no native bf16 (emulated: expect bf16 to be slower)"


def book_plans(study: str) -> list[tuple[str, DryRunPlan]]:
    """One dry-run plan per distinct model of ``study``'s book grid (labelled by its key)."""
    experiment = catalog.get(study)
    seen, plans = set(), []
    for config in experiment.runs("book"):
        for plan in (p if isinstance(p := experiment.plan(config), list) else [p]):
            key = tuple(sorted((k, str(v)) for k, v in plan.key.items()))
            if key not in seen:
                seen.add(key)
                plans.append((", ".join(f"{k}={v}" for k, v in plan.key.items()), plan))
    return plans


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--study", nargs="*", default=list(STUDIES), help="studies (default: %(default)s)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--models", type=int, default=2, help="distinct models per study, at most")
    args = parser.parse_args(argv)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s); CPU bf16: {amx()}")
    print(f"{'study':20s} {'model':60s} {'fp32 ms':>8s} {'bf16 ms':>8s} {'fp32/bf16':>9s}")
    for study in args.study:
        for label, plan in book_plans(study)[: args.models]:
            times: dict[str, list[float]] = {"fp32": [], "bf16": []}
            for _ in range(args.rounds):
                for precision in times:
                    p = replace(plan, train=replace(plan.train, precision=precision, compile=False))
                    m = time_on_device(p, "cpu", steps=args.steps, warmup=1)
                    times[precision].append(m.seconds_per_step)
            fp32, bf16 = (statistics.median(times[k]) for k in ("fp32", "bf16"))
            print(f"{study:20s} {label[:60]:60s} {1e3 * fp32:8.0f} {1e3 * bf16:8.0f} {fp32 / bf16:9.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
