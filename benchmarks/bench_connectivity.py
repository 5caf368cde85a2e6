"""Cost of the H-ACN rule and of layer-wise exits, measured side by side in one run.

Answers the public review's request for wall-clock evidence of "ResNet-like
training efficiency" (H-ACN Sec. 3, Appendix B) on Appendix A's MLP-Mixer
(16 layers, d = 128, CIFAR-sized 32 x 32 x 3 input):

1. **Training step** (forward + backward + AdamW step) of the ``hacn`` rule
   against the ``resnet`` rule on the same Mixer: time ratio and peak-memory
   ratio (targets: at most 1.05x each). Both use ``depth_ln="none"`` so that
   only the residual rule differs; the full run also reports the paper's H-ACN
   (with Depth-adaptive LayerNorm) against the ResNet.
2. **Layer-wise exits** (Sec. 3.1): all ``L + 1`` exits of one pass through the
   shared head (``layerwise_logits``) against one ordinary forward pass
   (target at most 2x), and against evaluating exits one at a time with
   truncated networks (target at least 10x faster). A truncated evaluation
   runs ``0 + 1 + ... + L = L(L+1)/2`` layers instead of ``L``, so with the
   same batch its cost ratio is bounded by ``(L+1)/2`` (8.5x for L = 16): the
   10x target is out of reach for a 16-layer network by construction and is
   printed against that bound. The public ACN code evaluates truncated
   networks with test batch size 1; that protocol is timed too.

Timing: ``torch.set_num_threads(1)`` on CPU, the contestants interleaved
(A B A B ...) one call at a time over several rounds after warm-up, median time
per contestant, ratio of medians. On CPU the clock is the process's CPU time
(``time.process_time``), so other jobs on a shared machine do not distort it.

Peak memory: on CUDA ``torch.cuda.max_memory_allocated`` above the memory held
before the step. On CPU there is no allocator statistic, so
:class:`LiveTensorMemory` (a ``TorchDispatchMode``) counts the bytes of every
tensor storage created by an ATen op during the step -- forward activations,
saved tensors, gradients, optimizer temporaries -- while it is alive (a
finalizer subtracts it when the storage is freed) and records the maximum.
Parameters and optimizer state that exist before the step are not counted;
scratch memory inside a single kernel is invisible to it (the same for both
rules).

Run: ``python benchmarks/bench_connectivity.py [--quick] [--batch N] [--device cpu|cuda]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import weakref
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hacn_core.models.mixer import MLPMixer  # noqa: E402


class LiveTensorMemory(TorchDispatchMode):
    """CPU peak-memory accounting: live bytes of storages created by ops inside the mode."""

    def __init__(self) -> None:
        super().__init__()
        self.live = 0
        self.peak = 0
        self._tracked: set[int] = set()

    def _free(self, key: int, nbytes: int) -> None:
        self._tracked.discard(key)
        self.live -= nbytes

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in tree_leaves(out):
            if isinstance(t, torch.Tensor):
                storage = t.untyped_storage()
                key = storage._cdata
                if key in self._tracked:  # a view or an in-place result: already counted
                    continue
                nbytes = storage.nbytes()
                self._tracked.add(key)
                self.live += nbytes
                self.peak = max(self.peak, self.live)
                weakref.finalize(storage, self._free, key, nbytes)
        return out


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def make_step(model: MLPMixer, x: torch.Tensor, y: torch.Tensor) -> Callable[[], None]:
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), y).backward()
        opt.step()

    return step


def interleaved_median(
    fns: dict[str, Callable[[], object]], rounds: int, device: torch.device
) -> dict[str, float]:
    """Median seconds per call of each function, one call each in turn (A B A B ...) for ``rounds``.

    On CPU the clock is ``time.process_time`` (CPU seconds of this process), which other
    processes on a shared machine do not inflate; on CUDA it is wall-clock after a sync.
    """
    clock = time.perf_counter if device.type == "cuda" else time.process_time
    for fn in fns.values():  # warm-up
        fn()
        fn()
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            sync(device)
            t0 = clock()
            fn()
            sync(device)
            times[name].append(clock() - t0)
    return {k: statistics.median(v) for k, v in times.items()}


def peak_step_memory(step: Callable[[], None], device: torch.device) -> int:
    """Peak bytes allocated during one training step above what was held before it."""
    step()  # optimizer state exists from here on
    if device.type == "cuda":
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        step()
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated() - base
    with LiveTensorMemory() as mem:
        step()
    return mem.peak


def verdict(ratio: float, target: float, at_most: bool) -> str:
    ok = ratio <= target if at_most else ratio >= target
    return ("ok" if ok else "MISS") + f" (target {'<=' if at_most else '>='} {target}x)"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds, smaller batch (about 30 s on 1 CPU thread)")
    parser.add_argument("--batch", type=int, default=None, help="batch size (default 8 quick, 32 full)")
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--threads", type=int, default=1, help="CPU threads (torch.set_num_threads)")
    args = parser.parse_args(argv)

    device = torch.device(args.device)
    torch.set_num_threads(args.threads)
    batch = args.batch or (8 if args.quick else 32)
    rounds = 6 if args.quick else 20
    torch.manual_seed(0)
    x = torch.randn(batch, 3, 32, 32, device=device)
    y = torch.randint(0, 10, (batch,), device=device)
    print(f"# bench_connectivity: Appendix A Mixer (16 layers, d=128, 32x32x3), batch {batch}, "
          f"device {device}, threads {torch.get_num_threads()}, torch {torch.__version__}")

    # -- 1. training step: H-ACN rule vs ResNet rule ------------------------------------
    torch.manual_seed(1)
    res = MLPMixer(rule="resnet", depth_ln="none").to(device)
    hacn = MLPMixer(rule="hacn", depth_ln="none").to(device)
    hacn.load_state_dict(res.state_dict(), strict=False)  # same block weights
    contestants = {"resnet": make_step(res, x, y), "hacn": make_step(hacn, x, y)}
    if not args.quick:
        hacn_dln = MLPMixer(rule="hacn").to(device)  # paper default: DepthLN for the ACN family
        hacn_dln.load_state_dict(res.state_dict(), strict=False)
        contestants["hacn+depthln"] = make_step(hacn_dln, x, y)
    t = interleaved_median(contestants, rounds, device)
    mem = {name: peak_step_memory(step, device) for name, step in contestants.items()}
    print("\n## training step (forward + backward + AdamW)")
    for name in contestants:
        extra = (mem[name] - mem["resnet"]) / 2**10
        print(
            f"{name:>13}: {t[name] * 1e3:8.1f} ms/step   "
            f"peak {mem[name] / 2**20:7.2f} MiB ({extra:+.1f} KiB vs resnet)"
        )
    for name in [n for n in contestants if n != "resnet"]:
        tr, mr = t[name] / t["resnet"], mem[name] / mem["resnet"]
        print(
            f"{name} / resnet: time {tr:.3f}x {verdict(tr, 1.05, True)}; "
            f"peak memory {mr:.3f}x {verdict(mr, 1.05, True)}"
        )
    mem_method = (
        "torch.cuda.max_memory_allocated" if device.type == "cuda" else "LiveTensorMemory (live op-output storages)"
    )
    print(f"(peak memory method: {mem_method})")

    # -- 2. layer-wise exits ------------------------------------------------------------
    model = hacn.eval()
    L = model.config.num_layers

    def one_forward():
        return model(x)

    def all_exits():
        return model.layerwise_logits(x)

    def truncated():
        return [model(x, num_layers=i) for i in range(L + 1)]

    with torch.no_grad():
        ref = model.layerwise_logits(x)
        assert all(torch.allclose(ref[i], model(x, num_layers=i), atol=1e-5) for i in range(L + 1))
        fns = {"forward": one_forward, "exits": all_exits, "truncated": truncated}
        t = interleaved_median(fns, rounds, device)
        n1 = min(batch, 4 if args.quick else 16)

        def truncated_batch1():  # the public ACN code's protocol: test batch size 1
            for b in range(n1):
                for i in range(L + 1):
                    model(x[b : b + 1], num_layers=i)

        t_b1 = interleaved_median({"b1": truncated_batch1}, 3, device)["b1"] * batch / n1  # per `batch` images
    print(f"\n## layer-wise exits, {L + 1} exits, eval mode, no grad")
    print(f"one forward pass        : {t['forward'] * 1e3:8.1f} ms")
    print(f"all exits, one pass     : {t['exits'] * 1e3:8.1f} ms")
    print(f"truncated, one at a time: {t['truncated'] * 1e3:8.1f} ms")
    print(f"truncated, batch size 1 : {t_b1 * 1e3:8.1f} ms (extrapolated from {n1} images)")
    r1 = t["exits"] / t["forward"]
    r2 = t["truncated"] / t["exits"]
    r3 = t_b1 / t["exits"]
    print(f"all exits / one forward            : {r1:.2f}x {verdict(r1, 2.0, True)}")
    print(f"truncated / all exits (same batch) : {r2:.2f}x {verdict(r2, 10.0, False)}; "
          f"bound for L={L}: (L+1)/2 = {(L + 1) / 2:.1f}x")
    print(f"truncated batch 1 / all exits      : {r3:.1f}x {verdict(r3, 10.0, False)}")


if __name__ == "__main__":
    main()
