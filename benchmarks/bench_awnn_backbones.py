"""Per-step training cost of AWNN's adaptive MLPs inside the backbones (AWNN Sec. 3.3, Sec. 4).

For each backbone of the image, graph and text experiments, one training step (width
update, forward, backward, Adam step) of

* ``adaptive``: the backbone with its adaptive MLPs (ResNet-20's classifier, all of
  GIN's MLPs, every FFN of the Transformer), Algorithm 1 as is;
* ``fixed``: the same backbone with fixed MLPs of the adaptive ones' starting widths
  (ResNet-20 ``head_width``, GIN ``hidden``, Transformer ``ffn_hidden``);
* ``naive``: the adaptive backbone whose adaptive MLPs are replaced by
  :class:`hacn_core.awnn.studies.cost.NaiveAWNN` (new ``nn.Linear`` layers from the
  current rates at every step, a new Adam for the whole model, state carried only for
  tensors whose shape did not change; ReLU hidden units in every backbone).

The three run interleaved, repetition by repetition, in one process on one CPU thread,
small sizes (below); printed are the medians over repetitions of the CPU time per step
and the ratios to ``fixed``. The target is adaptive/fixed <= 1.15.

    python benchmarks/bench_awnn_backbones.py [--reps 12] [--steps 3] [--only resnet20,gin,transformer]
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
from torch import nn  # noqa: E402

from hacn_core.awnn import AdaptiveMLP, ELBOLoss, adaptive_mlps, model_widths, update_widths  # noqa: E402
from hacn_core.awnn.studies.cost import NaiveAWNN  # noqa: E402
from hacn_core.models.gin import GIN  # noqa: E402
from hacn_core.models.resnet20 import resnet20  # noqa: E402
from hacn_core.models.seq2seq import Seq2SeqTransformer  # noqa: E402

TARGET_RATIO = 1.15
LR = 1e-3


class NaiveBackbone:
    """A backbone whose adaptive MLPs are :class:`NaiveAWNN`s, rebuilt with the optimizer at every step."""

    def __init__(self, model: nn.Module) -> None:
        self.model = model
        self.slots: list[tuple[nn.Module, str]] = []
        for name, mod in list(model.named_modules()):
            if isinstance(mod, AdaptiveMLP):
                parent_name, _, attr = name.rpartition(".")
                parent = model.get_submodule(parent_name) if parent_name else model
                setattr(parent, attr, NaiveAWNN(mod))
                self.slots.append((parent, attr))
        self.opt = torch.optim.Adam(model.parameters(), lr=LR)

    def rebuild(self) -> None:
        carried: dict[nn.Parameter, dict] = {}
        for parent, attr in self.slots:
            part_opt = getattr(parent, attr).rebuild(self.opt, LR)  # new layers; state of unchanged shapes
            carried.update(part_opt.state)
        old = {id(p): s for p, s in self.opt.state.items()}
        self.opt = torch.optim.Adam(self.model.parameters(), lr=LR)
        for p in self.model.parameters():
            if p in carried:
                self.opt.state[p] = carried[p]
            elif id(p) in old:
                self.opt.state[p] = old[id(p)]

    def widths(self) -> list[int]:
        return [w for parent, attr in self.slots for w in getattr(parent, attr).widths()]


def _steppers(build: Callable[[str, int | None], nn.Module], forward: Callable[[nn.Module], torch.Tensor],
              target: torch.Tensor, n_train: int) -> tuple[dict[str, Callable[[], None]], Callable[[], dict]]:
    """The three step functions of one backbone, and a function giving their widths."""
    torch.manual_seed(0)
    adaptive = build("adaptive", None)
    start = model_widths(adaptive)
    if len(set(start)) != 1:
        raise RuntimeError(f"the adaptive MLPs start at different widths {start}")
    torch.manual_seed(0)
    fixed = build("fixed", start[0])
    torch.manual_seed(0)
    naive = NaiveBackbone(build("adaptive", None))
    a_opt = torch.optim.Adam(adaptive.parameters(), lr=LR)
    f_opt = torch.optim.Adam(fixed.parameters(), lr=LR)
    elbo = ELBOLoss(adaptive, n_train)
    for m in adaptive_mlps(adaptive):
        m.attach_optimizer(a_opt)

    def ce(out: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(out.reshape(-1, out.shape[-1]), target.reshape(-1), reduction="sum") * (
            n_train / target.numel())

    def step_adaptive() -> None:
        update_widths(adaptive, a_opt)
        a_opt.zero_grad(set_to_none=True)
        elbo(forward(adaptive), target).backward()
        a_opt.step()

    def step_fixed() -> None:
        f_opt.zero_grad(set_to_none=True)
        ce(forward(fixed)).backward()
        f_opt.step()

    def step_naive() -> None:
        naive.rebuild()
        naive.opt.zero_grad(set_to_none=True)
        ce(forward(naive.model)).backward()
        naive.opt.step()

    def widths() -> dict:
        return {"start": start[0], "adaptive": model_widths(adaptive), "naive": naive.widths()}

    return {"adaptive": step_adaptive, "fixed": step_fixed, "naive": step_naive}, widths


def resnet20_case() -> tuple:
    """ResNet-20 (16/32/64 channels) on 1x28x28 images, batch 32, 10 classes; adaptive head at rate 0.02."""
    x, y = torch.randn(32, 1, 28, 28), torch.randint(0, 10, (32,))

    def build(kind: str, width: int | None) -> nn.Module:
        return resnet20(in_channels=1, head=kind, head_width=width or 0)

    return "ResNet-20, MNIST-sized batch of 32", build, (lambda m: m(x)), y, 53_000


def gin_case() -> tuple:
    """GIN, 2 layers, sum pooling, embeddings 64, on 32 random graphs of 30 nodes and 37 features (NCI1-sized)."""
    g, n = 32, 30
    x = torch.randn(g * n, 37)
    edges = []
    for b in range(g):
        ring = torch.arange(n) + b * n
        for shift in (1, 3):  # a ring and chords: 60 undirected edges per graph
            edges.append(torch.stack([ring, ring.roll(shift)]))
    ei = torch.cat(edges, dim=1)
    ei = torch.cat([ei, ei.flip(0)], dim=1)
    batch = torch.arange(g).repeat_interleave(n)
    y = torch.randint(0, 2, (g,))

    def build(kind: str, width: int | None) -> nn.Module:
        return GIN(in_features=37, num_classes=2, layers=2, pooling="sum", dim=64, mlp=kind, hidden=width or 64)

    return "GIN (2 layers, 3 MLPs), 32 graphs x 30 nodes", build, (lambda m: m(x, ei, batch)), y, 3_329


def transformer_case() -> tuple:
    """Transformer d 64, 4 heads, 2+2 layers, batch 16 x 16 tokens, vocab 200; adaptive FFNs at rate 0.004."""
    src, tgt = torch.randint(1, 200, (16, 16)), torch.randint(1, 200, (16, 17))
    dec_in, dec_out = tgt[:, :-1], tgt[:, 1:]

    def build(kind: str, width: int | None) -> nn.Module:
        return Seq2SeqTransformer(src_vocab=200, tgt_vocab=200, d_model=64, heads=4, encoder_layers=2,
                                  decoder_layers=2, ffn=kind, ffn_hidden=width or 2048, dropout=0.0)

    return "Transformer d 64, 2+2 layers, 16 x 16 tokens", build, (lambda m: m(src, dec_in)), dec_out, 29_000 * 16


CASES = {"resnet20": resnet20_case, "gin": gin_case, "transformer": transformer_case}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=12)
    ap.add_argument("--steps", type=int, default=3, help="steps per timed block")
    ap.add_argument("--only", default=",".join(CASES), help="comma-separated: " + ", ".join(CASES))
    ap.add_argument("--no-naive", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(1)
    print(f"1 CPU thread, Adam lr {LR}, {args.reps} interleaved reps x {args.steps} steps, CPU time per step")
    for name in args.only.split(","):
        if name not in CASES:
            ap.error(f"--only: {name!r} is not a case; allowed: {', '.join(CASES)}")
        title, build, forward, target, n_train = CASES[name]()
        steps, widths = _steppers(build, forward, target, n_train)
        if args.no_naive:
            steps.pop("naive")
        for fn in steps.values():  # warm-up (C++ node, allocator)
            fn()
        times: dict[str, list[float]] = {k: [] for k in steps}
        for _ in range(args.reps):
            for key, fn in steps.items():
                t = time.process_time()
                for _ in range(args.steps):
                    fn()
                times[key].append((time.process_time() - t) / args.steps)
        med = {k: statistics.median(v) for k, v in times.items()}
        w = widths()
        print(f"\n{name}: {title}; fixed width {w['start']}, adaptive widths now {w['adaptive']}"
              + ("" if args.no_naive else f", naive {w['naive']}"))
        for key in steps:
            ratio = med[key] / med["fixed"]
            note = "" if key != "adaptive" else ("  (target <= %.2f: %s)" % (
                TARGET_RATIO, "met" if ratio <= TARGET_RATIO else "NOT met"))
            print(f"  {key:9s} {1000 * med[key]:8.2f} ms/step   x{ratio:.3f}{note}")


if __name__ == "__main__":
    main()
