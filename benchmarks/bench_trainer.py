"""Loop overhead of ``hacn_core.engine.training.fit`` against a bare hand-written loop.

CPU section: the same model, data, optimizer and in-memory index batches, timed
side by side (interleaved, repeated, medians; process CPU time with one torch
thread, so other jobs on the machine disturb it little); the ratio trainer / bare is the
per-step overhead of the engine (target <= 1.03). Two models: an MNIST-sized MLP
and the residual-gates paper's narrow deep MLP (width 50), whose short steps
make any per-step overhead visible.

GPU section (skipped without CUDA): samples/s of a small conv net with bf16
autocast and ``torch.compile`` on and off, plus the same bare-vs-trainer ratio.

``--checkpoint-cost`` (instead of the above): what the default checkpoint cadence
(every epoch or every 60 s, about 1% of the time at most) costs in real book-profile
trainings on one CPU thread: the AWNN fixed-width MLP on Spiral (1000 epochs of 14
steps, the worst case: epochs of milliseconds) and DoubleMoon (500 epochs), and
with ``--mnist`` a residual-gates MNIST network (plain, d = 2, the book's 20
epochs). Each run trains through its study's train function into a fresh
checkpoint folder (after an untimed one-epoch warm-up), once with the default
cadence and once with only the final checkpoint (``$HACN_CHECKPOINT_EVERY`` = 10^9
steps), interleaved; it prints the wall-clock medians side by side, their ratio
(and that of process CPU times, less disturbed by other jobs), and the share of
the default run's wall time spent inside ``save_training_checkpoint`` (the direct,
least noisy measure, fsync included; the checkpoint of a finished run is counted;
the rest of a checkpoint, gathering the random states and state dicts, adds about
a tenth to it).

    python benchmarks/bench_trainer.py [--quick]
    python benchmarks/bench_trainer.py --checkpoint-cost [--repeats 3] [--mnist]
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("HACN_QUIET", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

import hacn_core.engine.training as training  # noqa: E402
from hacn_core.engine.training import CHECKPOINT_EVERY_ENV, TrainConfig, epoch_permutation, fit  # noqa: E402


def mlp(d_in: int, width: int, depth: int, classes: int = 10) -> nn.Sequential:
    layers: list[nn.Module] = [nn.Linear(d_in, width), nn.ReLU()]
    for _ in range(depth - 1):
        layers += [nn.Linear(width, width), nn.ReLU()]
    return nn.Sequential(*layers, nn.Linear(width, classes))


def _clock(X: torch.Tensor):
    """CPU: process time (one torch thread), robust to other jobs sharing the cores; GPU: wall time."""
    return time.perf_counter if X.is_cuda else time.process_time


def bare_loop(model: nn.Module, X: torch.Tensor, y: torch.Tensor, epochs: int, batch: int, lr: float,
              sync: bool) -> float:
    """The loop a reader would write by hand; returns seconds per step."""
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0,
                            fused=True if X.is_cuda else None)
    n = len(X)
    steps = 0
    clock = _clock(X)
    if X.is_cuda:
        torch.cuda.synchronize()
    t0 = clock()
    for epoch in range(epochs):
        perm = epoch_permutation(n, 0, epoch).to(X.device)
        for a in range(0, n, batch):
            idx = perm[a:a + batch]
            loss = F.cross_entropy(model(X[idx]), y[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            steps += 1
        if sync:
            loss.item()
    if X.is_cuda:
        torch.cuda.synchronize()
    return (clock() - t0) / steps


def trainer(model: nn.Module, X: torch.Tensor, y: torch.Tensor, cfg: TrainConfig) -> float:
    """The whole ``fit`` call (setup included), in seconds per step."""
    clock = _clock(X)
    if X.is_cuda:
        torch.cuda.synchronize()
    t0 = clock()
    res = fit(model, (X, y), cfg, progress=False)
    if X.is_cuda:
        torch.cuda.synchronize()
    return (clock() - t0) / res.steps


def side_by_side(name: str, make_model, X, y, epochs: int, batch: int, repeats: int) -> float:
    base = make_model().to(X.device)
    # like for like: fp32 without TF32, as the bare loop runs
    cfg = TrainConfig(epochs=epochs, batch_size=batch, lr=1e-3, device=str(X.device), precision="fp32",
                      tf32=False, record_every=0)
    # warm up both paths (lazy imports, allocator, kernels)
    bare_loop(copy.deepcopy(base), X, y, 1, batch, 1e-3, True)
    trainer(copy.deepcopy(base), X, y, cfg.replace(epochs=1))
    t_bare, t_fit = [], []
    for r in range(repeats):
        order = ("bare", "fit") if r % 2 == 0 else ("fit", "bare")
        for which in order:
            m = copy.deepcopy(base)
            if which == "bare":
                t_bare.append(bare_loop(m, X, y, epochs, batch, 1e-3, True))
            else:
                t_fit.append(trainer(m, X, y, cfg))
    mb, mf = statistics.median(t_bare), statistics.median(t_fit)
    print(f"{name:<44} bare {mb * 1e6:8.1f} us/step   fit {mf * 1e6:8.1f} us/step   ratio {mf / mb:.3f}")
    return mf / mb


def gpu_section(quick: bool, dev: torch.device, compile_modes: tuple[bool, ...] = (False, True)) -> None:
    """Throughput with bf16 / compile on and off, and the overhead ratio, on ``dev``."""
    name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else str(dev)
    print(f"\nGPU: {name}")
    n = 10240 if quick else 51200
    g = torch.Generator().manual_seed(0)
    X = torch.randn(n, 3, 32, 32, generator=g).to(dev)
    y = torch.randint(0, 10, (n,), generator=g).to(dev)

    def convnet() -> nn.Module:
        torch.manual_seed(0)
        return nn.Sequential(
            nn.Conv2d(3, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
            nn.Conv2d(64, 128, 3, padding=1, stride=2), nn.BatchNorm2d(128), nn.ReLU(),
            nn.Conv2d(128, 256, 3, padding=1, stride=2), nn.BatchNorm2d(256), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(256, 10),
        )

    epochs = 3
    print(f"conv net, {n} CIFAR-sized samples on the device, batch 512, {epochs} epochs "
          "(throughput of the epochs after the first)")
    for precision in ("fp32", "bf16"):
        for compiled in compile_modes:
            cfg = TrainConfig(epochs=epochs, batch_size=512, lr=1e-3, precision=precision, compile=compiled,
                              record_every=0, device=str(dev))
            res = fit(convnet().to(dev), (X, y), cfg, progress=False)
            t = res.curves["time_s"]
            sps = (epochs - 1) * n / (t[-1] - t[0])
            print(f"  precision={precision:<5} compile={compiled!s:<5}  {sps:12.0f} samples/s")
    reps = 3 if quick else 7
    side_by_side(f"MLP 784-256-256-10, batch 128, fp32 ({dev.type})", lambda: mlp(784, 256, 2),
                 torch.randn(8192, 784, device=dev), torch.randint(0, 10, (8192,), device=dev), 2, 128, reps)


def checkpoint_cost(repeats: int, with_mnist: bool) -> None:
    """The default cadence against only the final checkpoint, in real book-profile runs (see the module doc)."""
    import tempfile

    from hacn_core.awnn.studies import tabular
    from hacn_core.engine.results import RunContext

    inside: list[float] = []  # seconds spent in each checkpoint write of the current run
    real_save = training.save_training_checkpoint

    def timed_save(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return real_save(*args, **kwargs)
        finally:
            inside.append(time.perf_counter() - t0)

    training.save_training_checkpoint = timed_save
    from hacn_core.engine.data import SYNTHETIC

    def tabular_run(dataset: str):
        config = tabular.fixed_config(dataset, 0)
        steps = training.steps_per_epoch(SYNTHETIC[dataset].split[0], config["batch_size"])
        name = f"awnn-tabular-fixed {dataset}, {config['epochs']} epochs x {steps} steps"
        return name, tabular.train_fixed_mlp, config

    runs = [tabular_run("Spiral"), tabular_run("DoubleMoon")]
    if with_mnist:
        from hacn_core.gates.studies import mnist

        config = mnist.make_config("plain", 2, 0, epochs=mnist.BOOK_EPOCHS)
        steps = training.steps_per_epoch(60000, config["batch_size"])
        runs.append((f"gates-mnist plain d=2, {config['epochs']} epochs x {steps} steps", mnist.train_gates_mnist,
                     config))
    print(f"CPU, {torch.get_num_threads()} thread(s); wall-clock medians of {repeats} interleaved repeats")
    worst = 0.0
    for name, train, config in runs:
        with tempfile.TemporaryDirectory() as folder:  # warm-up: data loading, lazy imports, allocator
            train(dict(config, epochs=1), RunContext("bench", Path(folder) / "ck", False))
        walls: dict[str, list[float]] = {"default": [], "final only": []}
        cpus: dict[str, list[float]] = {"default": [], "final only": []}
        shares, counts = [], []
        for r in range(repeats):
            for which in (("default", "final only") if r % 2 == 0 else ("final only", "default")):
                if which == "default":
                    os.environ.pop(CHECKPOINT_EVERY_ENV, None)
                else:
                    os.environ[CHECKPOINT_EVERY_ENV] = f"{10**9}steps"
                inside.clear()
                with tempfile.TemporaryDirectory() as folder:
                    t0, c0 = time.perf_counter(), time.process_time()
                    train(dict(config), RunContext("bench", Path(folder) / "ck", False))
                    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
                walls[which].append(wall)
                cpus[which].append(cpu)
                if which == "default":
                    shares.append(sum(inside) / wall)
                    counts.append(len(inside))
        os.environ.pop(CHECKPOINT_EVERY_ENV, None)
        md, mf = statistics.median(walls["default"]), statistics.median(walls["final only"])
        cpu_ratio = statistics.median(cpus["default"]) / statistics.median(cpus["final only"])
        share = statistics.median(shares)
        worst = max(worst, share)
        print(f"{name}\n    default cadence {md:7.2f} s ({statistics.median(counts):.0f} checkpoints, "
              f"{share:.2%} of it writing them)   final checkpoint only {mf:7.2f} s   ratio {md / mf:.4f} "
              f"(CPU time: {cpu_ratio:.4f})")
    training.save_training_checkpoint = real_save
    print(f"largest share of the wall time spent writing checkpoints: {worst:.2%} (target < 2%)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (under ~30 s on a 2-core CPU)")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1: stable timings)")
    parser.add_argument("--checkpoint-cost", action="store_true",
                        help="only the cost of the default checkpoint cadence in book-profile runs")
    parser.add_argument("--repeats", type=int, default=3, help="repeats of --checkpoint-cost (default 3)")
    parser.add_argument("--mnist", action="store_true",
                        help="--checkpoint-cost also on a residual-gates MNIST run (a few minutes; needs MNIST)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.checkpoint_cost:
        checkpoint_cost(args.repeats, args.mnist)
        return
    n = 4096 if args.quick else 16384
    repeats = 15 if args.quick else 41  # many short interleaved runs: a shared machine is noisy
    g = torch.Generator().manual_seed(0)
    X = torch.randn(n, 784, generator=g)
    y = torch.randint(0, 10, (n,), generator=g)
    print(f"CPU, {torch.get_num_threads()} thread(s), {n} MNIST-sized samples in memory, AdamW, "
          f"median of {repeats} interleaved repeats")
    ratios = [
        side_by_side("MLP 784-256-256-10, batch 128", lambda: mlp(784, 256, 2), X, y, 1, 128, repeats),
        side_by_side("gates MLP 784-(50 x 10)-10, batch 128", lambda: mlp(784, 50, 10), X, y, 1, 128, repeats),
    ]
    print(f"worst CPU ratio {max(ratios):.3f} (target <= 1.03)")
    if torch.cuda.is_available():
        gpu_section(args.quick, torch.device("cuda"))
    else:
        print("\nGPU section skipped: CUDA is not available")


if __name__ == "__main__":
    main()
