"""Loop overhead of ``hacn_core.engine.training.fit`` against a bare hand-written loop.

CPU section: the same model, data, optimizer and in-memory index batches, timed
side by side (interleaved, repeated, medians; process CPU time with one torch
thread, so other jobs on the machine disturb it little); the ratio trainer / bare is the
per-step overhead of the engine (target <= 1.03). Two models: an MNIST-sized MLP
and the residual-gates paper's narrow deep MLP (width 50), whose short steps
make any per-step overhead visible.

GPU section (skipped without CUDA): samples/s of a small conv net with bf16
autocast and ``torch.compile`` on and off, plus the same bare-vs-trainer ratio.

    python benchmarks/bench_trainer.py [--quick]
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

from hacn_core.engine.training import TrainConfig, epoch_permutation, fit  # noqa: E402


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (under ~30 s on a 2-core CPU)")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1: stable timings)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
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
