"""Per-step training cost of AWNN's adaptive MLPs inside the backbones (AWNN Sec. 3.3, Sec. 4).

For each backbone of the image, graph and text experiments, one training step (width
update, forward, backward, Adam step) of

* ``adaptive``: the backbone with its adaptive MLPs (ResNet-20's classifier, all of
  GIN's MLPs, every FFN of the Transformer), Algorithm 1 as is;
* ``fixed``: the same backbone with fixed MLPs (``Linear -> act -> Linear``) at the
  adaptive MLPs' *current* widths, MLP by MLP: they start at the adaptive ones' starting
  width (ResNet-20 ``head_width``, GIN ``hidden``, Transformer ``ffn_hidden``) and, before
  every timed block, follow the widths the adaptive backbone has reached (surviving
  weights and Adam state kept, :class:`FollowWidths`). The widths do move during the
  benchmark (GIN from 116 to about 118, the Transformer's FFNs from 576 to 540-590), so
  a fixed arm left at the starting widths would be compared with other sizes. Within a
  block of ``--steps`` steps they move by a neuron or so;
* ``naive``: the adaptive backbone whose adaptive MLPs are replaced by
  :class:`hacn_core.awnn.studies.cost.NaiveAWNN` (new ``nn.Linear`` layers from the
  current rates at every step, a new Adam for the whole model, state carried only for
  tensors whose shape did not change; ReLU hidden units in every backbone);
* ``adaptive@REV`` (``--compare-node REV``): ``adaptive`` with AWNN's C++ node as of the
  git revision ``REV`` (its source built under its own name, then swapped in with
  :func:`hacn_core.awnn.fast_cpp.use_build`), so that a change of the node is timed
  against the old one in the same run.

The arms run interleaved, repetition by repetition, in one process on one CPU thread,
small sizes (below); printed are the medians over repetitions of the CPU time per step,
their ratios to ``fixed``, and the median and quartiles of the per-repetition ratios
(each arm's block over the ``fixed`` block of the same repetition: a change of load that
hits neighbouring blocks alike cancels out). The target is adaptive/fixed <= 1.15 on
the ratio of the medians. On a shared machine the ratios move by a few hundredths
from one run to the next; repeat to see the spread.

    python benchmarks/bench_awnn_backbones.py [--reps 12] [--steps 3] [--only resnet20,gin,transformer]
                                              [--no-naive] [--compare-node REV] [--device cuda] [--json FILE]

``--device cuda`` runs the same arms on a GPU (``tools/gpu_checks.sh`` does): times are then wall
times of each block, the GPU synchronised before and after it, and every arm's **host reads per
step** are counted as well: the synchronising CUDA operations of one step (``.item()``, ``.tolist()``,
a copy to the host, ...), as ``torch.cuda.set_sync_debug_mode("warn")`` reports them one warning each.
Each read waits for every kernel queued before it, so on a GPU they, not the arithmetic, decide the
pace of small networks; the target is at most one read per step for the adaptive arm (the widths'
update reads all rates at once: :func:`hacn_core.awnn.update_widths`). On the CPU there is no queue to
wait for and nothing is counted. ``--json FILE`` writes the medians, ratios and counts with the
device, versions and settings (a record for ``benchmarks/gpu-records/``).

Measured (one thread, the 2-core machine loaded by two trainings, ``--compare-node 38931fb``,
the node before its input gradient was made contiguous; ratio of the medians, six runs of
12-40 repetitions): GIN adaptive/fixed 1.00-1.18 with this node, 1.16-1.32 with the old one
(the strided input gradient of the old node made GIN's scatter-sum backward, a gather, 8x
slower); Transformer 1.05-1.23 with either (the FFN alone, forward and backward: 1.29x a fixed
FFN, the old node 1.34x); ResNet-20 0.99-1.03.

Measured on a quieter machine (2026-11-27: one training on the other core instead of two,
``--reps 24``, two runs): GIN 1.14 and 1.12 (per-repetition quartiles 1.11-1.16), Transformer
1.06 and 1.14 (1.07-1.15), ResNet-20 0.98: the target met by every backbone in both runs. The
wider spread above comes from the load of a second training sharing the benchmark's core.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

from hacn_core.awnn import (  # noqa: E402
    AdaptiveMLP,
    ELBOLoss,
    adaptive_mlps,
    fast_cpp,
    model_widths,
    repoint_optimizer,
    update_widths,
)
from hacn_core.awnn.studies.cost import NaiveAWNN  # noqa: E402
from hacn_core.models.mlp import Mlp  # noqa: E402
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


class FollowWidths:
    """Keeps the fixed backbone's MLPs at the hidden widths of the adaptive backbone's MLPs.

    The adaptive MLPs (one hidden layer each) and the fixed ``Mlp``s are paired in module
    order. :meth:`sync` resizes every fixed MLP whose hidden width differs from its adaptive
    twin's: new ``nn.Linear`` parameters holding the surviving weights (new neurons
    initialised as ``nn.Linear`` does), the Adam state of the surviving entries carried over
    (:func:`hacn_core.awnn.repoint_optimizer`; new entries start at zero).
    """

    def __init__(self, adaptive: nn.Module, fixed: nn.Module, optimizer: torch.optim.Optimizer) -> None:
        a = adaptive_mlps(adaptive)
        f = [m for m in fixed.modules() if isinstance(m, Mlp)]
        if len(a) != len(f) or any(m.n_hidden_layers != 1 for m in a):
            raise RuntimeError(f"cannot pair {len(a)} adaptive MLPs with {len(f)} fixed ones (one hidden layer each)")
        self.pairs = [(m, [lin for lin in mlp if isinstance(lin, nn.Linear)]) for m, mlp in zip(a, f)]
        self.optimizer = optimizer

    def widths(self) -> list[int]:
        return [lins[0].out_features for _, lins in self.pairs]

    def sync(self) -> None:
        for mlp, (first, last) in self.pairs:
            w = mlp.widths()[0]
            if first.out_features != w:
                self._resize(first, w, first.in_features)
                self._resize(last, last.out_features, w)

    def _resize(self, lin: nn.Linear, out_features: int, in_features: int) -> None:
        new = nn.Linear(in_features, out_features, bias=lin.bias is not None, device=lin.weight.device)
        o, i = min(out_features, lin.out_features), min(in_features, lin.in_features)
        with torch.no_grad():
            new.weight[:o, :i] = lin.weight[:o, :i]
            if lin.bias is not None:
                new.bias[:o] = lin.bias[:o]
        for name in ("weight", "bias"):
            old_p = getattr(lin, name)
            if old_p is None:
                continue
            new_p = nn.Parameter(getattr(new, name).detach())
            repoint_optimizer(self.optimizer, old_p, new_p)  # leading block of the state kept, the rest 0
            setattr(lin, name, new_p)
        lin.in_features, lin.out_features = in_features, out_features


def node_of_revision(rev: str) -> ModuleType:
    """AWNN's C++ node as of git revision ``rev``: its source, built under its own name (cached)."""
    root = Path(__file__).resolve().parents[1]
    rel = fast_cpp.SOURCE.relative_to(root).as_posix()
    shown = subprocess.run(["git", "-C", str(root), "show", f"{rev}:{rel}"], capture_output=True, text=True)
    if shown.returncode != 0:
        raise SystemExit(f"--compare-node {rev}: git show {rev}:{rel} failed: {shown.stderr.strip()}")
    key = (shown.stdout + " ".join(fast_cpp.CFLAGS) + torch.__version__).encode()
    digest = hashlib.sha256(key).hexdigest()[:12]
    folder = Path(tempfile.gettempdir()) / f"hacn_awnn_node_{digest}"
    folder.mkdir(exist_ok=True)
    source = folder / "awnn_fused.cpp"
    source.write_text(shown.stdout)
    from torch.utils.cpp_extension import load
    return load(name=f"hacn_awnn_fused_rev_{digest}", sources=[str(source)], extra_cflags=list(fast_cpp.CFLAGS))


def _steppers(build: Callable[[str, int | None], nn.Module], forward: Callable[[nn.Module], torch.Tensor],
              target: torch.Tensor, n_train: int, naive: bool = True, old_node: tuple[str, ModuleType] | None = None
              ) -> tuple[dict[str, Callable[[], None]], Callable[[], None], Callable[[], dict]]:
    """The step functions of one backbone's arms, the hook run before every timed block (the
    fixed arm follows the widths), and a function giving the widths."""

    def adaptive_arm() -> tuple[nn.Module, Callable[[], None]]:
        torch.manual_seed(0)
        model = build("adaptive", None)
        opt = torch.optim.Adam(model.parameters(), lr=LR)
        elbo = ELBOLoss(model, n_train)
        for m in adaptive_mlps(model):
            m.attach_optimizer(opt)

        def step() -> None:
            update_widths(model, opt)
            opt.zero_grad(set_to_none=True)
            elbo(forward(model), target).backward()
            opt.step()

        return model, step

    adaptive, step_adaptive = adaptive_arm()
    start = model_widths(adaptive)
    if len(set(start)) != 1:
        raise RuntimeError(f"the adaptive MLPs start at different widths {start}")
    torch.manual_seed(0)
    fixed = build("fixed", start[0])
    f_opt = torch.optim.Adam(fixed.parameters(), lr=LR)
    follow = FollowWidths(adaptive, fixed, f_opt)

    def ce(out: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(out.reshape(-1, out.shape[-1]), target.reshape(-1), reduction="sum") * (
            n_train / target.numel())

    def step_fixed() -> None:
        f_opt.zero_grad(set_to_none=True)
        ce(forward(fixed)).backward()
        f_opt.step()

    steps = {"adaptive": step_adaptive, "fixed": step_fixed}
    if old_node is not None:
        rev, ext = old_node
        _, step_old_inner = adaptive_arm()

        def step_old() -> None:
            with fast_cpp.use_build(ext):
                step_old_inner()

        steps[f"adaptive@{rev}"] = step_old
    nb = None
    if naive:
        torch.manual_seed(0)
        nb = NaiveBackbone(build("adaptive", None))

        def step_naive() -> None:
            nb.rebuild()
            nb.opt.zero_grad(set_to_none=True)
            ce(forward(nb.model)).backward()
            nb.opt.step()

        steps["naive"] = step_naive

    def widths() -> dict:
        return {"start": start[0], "adaptive": model_widths(adaptive), "fixed": follow.widths(),
                "naive": nb.widths() if nb is not None else None}

    return steps, follow.sync, widths


def resnet20_case(device: torch.device) -> tuple:
    """ResNet-20 (16/32/64 channels) on 1x28x28 images, batch 32, 10 classes; adaptive head at rate 0.02."""
    x, y = torch.randn(32, 1, 28, 28, device=device), torch.randint(0, 10, (32,), device=device)

    def build(kind: str, width: int | None) -> nn.Module:
        return resnet20(in_channels=1, head=kind, head_width=width or 0).to(device)

    return "ResNet-20, MNIST-sized batch of 32", build, (lambda m: m(x)), y, 53_000


def gin_case(device: torch.device) -> tuple:
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
    x, ei, batch, y = x.to(device), ei.to(device), batch.to(device), y.to(device)

    def build(kind: str, width: int | None) -> nn.Module:
        return GIN(in_features=37, num_classes=2, layers=2, pooling="sum", dim=64, mlp=kind,
                   hidden=width or 64).to(device)

    return "GIN (2 layers, 3 MLPs), 32 graphs x 30 nodes", build, (lambda m: m(x, ei, batch)), y, 3_329


def transformer_case(device: torch.device) -> tuple:
    """Transformer d 64, 4 heads, 2+2 layers, batch 16 x 16 tokens, vocab 200; adaptive FFNs at rate 0.004."""
    src, tgt = torch.randint(1, 200, (16, 16), device=device), torch.randint(1, 200, (16, 17), device=device)
    dec_in, dec_out = tgt[:, :-1], tgt[:, 1:]

    def build(kind: str, width: int | None) -> nn.Module:
        return Seq2SeqTransformer(src_vocab=200, tgt_vocab=200, d_model=64, heads=4, encoder_layers=2,
                                  decoder_layers=2, ffn=kind, ffn_hidden=width or 2048, dropout=0.0).to(device)

    return "Transformer d 64, 2+2 layers, 16 x 16 tokens", build, (lambda m: m(src, dec_in)), dec_out, 29_000 * 16


CASES = {"resnet20": resnet20_case, "gin": gin_case, "transformer": transformer_case}


def _quartiles(values: list[float]) -> tuple[float, float, float]:
    q = statistics.quantiles(values, n=4, method="inclusive") if len(values) > 1 else [values[0]] * 3
    return q[0], q[1], q[2]


def host_reads(step: Callable[[], None]) -> int:
    """The synchronising CUDA operations of one ``step()`` (host reads: ``.item()``, ``.tolist()``, copies to
    the host), one warning each under ``torch.cuda.set_sync_debug_mode("warn")``."""
    torch.cuda.synchronize()
    previous = torch.cuda.get_sync_debug_mode()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            step()
        finally:
            torch.cuda.set_sync_debug_mode(previous)
    return sum("synchronizing" in str(w.message) for w in caught)


def timed_block(fn: Callable[[], None], steps: int, device: torch.device) -> float:
    """Seconds per step of ``steps`` calls of ``fn``: CPU time on the CPU (one thread), wall time between two
    synchronisations on a GPU (the kernels queued by the block included)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        t = time.perf_counter()
        for _ in range(steps):
            fn()
        torch.cuda.synchronize(device)
        return (time.perf_counter() - t) / steps
    t = time.process_time()
    for _ in range(steps):
        fn()
    return (time.process_time() - t) / steps


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=12)
    ap.add_argument("--steps", type=int, default=3, help="steps per timed block")
    ap.add_argument("--only", default=",".join(CASES), help="comma-separated: " + ", ".join(CASES))
    ap.add_argument("--no-naive", action="store_true")
    ap.add_argument("--compare-node", metavar="REV", default=None,
                    help="also time the adaptive backbone with AWNN's C++ node of git revision REV (built once)")
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"),
                    help="where the arms run (cuda: wall time per step and host reads per step)")
    ap.add_argument("--json", type=Path, default=None, help="also write the measurements to this file")
    args = ap.parse_args(argv)
    names = args.only.split(",")
    for name in names:
        if name not in CASES:
            ap.error(f"--only: {name!r} is not a case; allowed: {', '.join(CASES)}")
    if args.reps < 1 or args.steps < 1:
        ap.error(f"--reps {args.reps} --steps {args.steps}: both must be at least 1")
    if args.device == "cuda" and not torch.cuda.is_available():
        ap.error("--device cuda: no CUDA device is available here")
    device = torch.device(args.device)
    if device.type == "cpu":
        torch.set_num_threads(1)
    old_node = None
    if args.compare_node is not None:
        if fast_cpp.active_backend() != "cpp":
            ap.error("--compare-node needs this checkout's C++ node (it did not build, or the backend is python)")
        old_node = (args.compare_node, node_of_revision(args.compare_node))
    clock = "CPU time per step, 1 CPU thread" if device.type == "cpu" else \
        f"wall time per step on {torch.cuda.get_device_name(device)}"
    print(f"{args.device}: Adam lr {LR}, {args.reps} interleaved reps x {args.steps} steps, {clock}")
    started = time.perf_counter()
    record: dict = {"device": args.device if device.type == "cpu" else torch.cuda.get_device_name(device),
                    "clock": clock, "reps": args.reps, "steps": args.steps, "target_ratio": TARGET_RATIO,
                    "awnn_node": fast_cpp.active_backend(), "torch": torch.__version__,
                    "python": platform.python_version(), "threads": torch.get_num_threads(), "cases": {}}
    for name in names:
        title, build, forward, target, n_train = CASES[name](device)
        steps, before_block, widths = _steppers(build, forward, target, n_train, naive=not args.no_naive,
                                                old_node=old_node)
        for fn in steps.values():  # warm-up (C++ node, allocator, CUDA kernels)
            fn()
        reads = {k: host_reads(fn) for k, fn in steps.items()} if device.type == "cuda" else None
        times: dict[str, list[float]] = {k: [] for k in steps}
        for _ in range(args.reps):
            before_block()  # the fixed MLPs take the adaptive ones' current widths
            for key, fn in steps.items():
                times[key].append(timed_block(fn, args.steps, device))
        med = {k: statistics.median(v) for k, v in times.items()}
        w = widths()
        print(f"\n{name}: {title}; starting width {w['start']}, adaptive widths now {w['adaptive']}, "
              f"fixed {w['fixed']}" + ("" if w["naive"] is None else f", naive {w['naive']}"))
        case: dict = {"title": title, "widths": w, "arms": {}}
        for key in steps:
            ratio = med[key] / med["fixed"]
            paired = [a / f for a, f in zip(times[key], times["fixed"])]
            lo, mid, hi = _quartiles(paired)
            note = "" if not key.startswith("adaptive") else ("  (target <= %.2f: %s)" % (
                TARGET_RATIO, "met" if ratio <= TARGET_RATIO else "NOT met"))
            spread = "" if key == "fixed" else f"   per rep x{mid:.3f} [{lo:.3f}, {hi:.3f}]"
            read = "" if reads is None else f"   {reads[key]} host read(s) a step"
            print(f"  {key:18s} {1000 * med[key]:8.2f} ms/step   x{ratio:.3f}{spread}{read}{note}")
            case["arms"][key] = {"ms_per_step": 1000 * med[key], "ratio_to_fixed": ratio,
                                 "per_rep_ratio_quartiles": [lo, mid, hi],
                                 "host_reads_per_step": None if reads is None else reads[key]}
        record["cases"][name] = case
    record["wall_s"] = time.perf_counter() - started
    record["command"] = "python benchmarks/bench_awnn_backbones.py " + " ".join(sys.argv[1:] if argv is None else argv)
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        tmp = args.json.with_suffix(args.json.suffix + ".tmp")
        tmp.write_text(json.dumps(record, indent=1) + "\n")
        tmp.replace(args.json)
    return record


if __name__ == "__main__":
    main()
