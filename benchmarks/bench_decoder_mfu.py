"""Tokens per second and model FLOPs utilisation of the paper's GPT-2 decoder on a GPU (H-ACN Table 4).

The decoder of ``hacn-decoder``'s paper profile (24 layers, d 768, 12 heads, RoPE, dropout 0.2,
sequence 256, vocabulary 50,304: 208.54M parameters), built by the study's own ``build_model`` and
trained by its optimizer (AdamW, fused on CUDA), loss and clipping, the dry run's timed step
(``run --dry-run --time-steps``), one micro-batch per step (the paper's
128 sequences; Table 4 accumulates 4 of them per optimizer step), under bf16 autocast, eager and
``torch.compile``d, for the ResNet rule and the paper's H-ACN (with Depth-adaptive LayerNorm), side
by side in one process:

* **tokens/s** = batch x sequence / median step time (steps timed after untimed warm-up steps, which
  take the compilation);
* **MFU** with nanoGPT's formula (``estimate_mfu`` in its ``model.py``): FLOPs per token
  ``6 N + 12 L H Q T`` (N parameters, the token embedding counted once as it is tied with the output
  layer; L layers, H heads, Q head size, T sequence), times tokens per second, over the GPU's dense
  bf16 peak (989 TFLOP/s for an H100 SXM, NVIDIA's datasheet);
* **H-ACN / ResNet** ratios of time and of peak memory (``torch.cuda.max_memory_allocated``), the
  GPU counterpart of ``bench_decoder.py``'s target of at most 1.05x.

Needs CUDA for the paper's size; ``--device cpu --layers 2 --dim 64 --batch 2`` runs the same code
small, for a check. ``--json FILE`` writes the numbers with the device and versions.

Run: ``python benchmarks/bench_decoder_mfu.py [--batch 128] [--steps 10] [--no-compile] [--json FILE]``.

The micro-batch is the lever on MFU that a GPU's memory allows (Table 4's 512 sequences per optimizer step
are 4 of 128; 2 of 256 on a GPU that holds them): ``--batches 128,256 --rules resnet --compile-only``
times the compiled ResNet at each (``tools/gpu_checks.sh`` runs it after the main record, into its own
file: a sweep has several rows per rule and mode).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hacn_core.catalog import get  # noqa: E402
from hacn_core.engine.dry_run import time_on_device  # noqa: E402
from hacn_core.engine.results import code_version, device_description  # noqa: E402
from hacn_core.hacn.studies.decoder import dry_run_plan  # noqa: E402

PEAK_BF16 = {"H100": 989e12, "H200": 989e12, "A100": 312e12}  # dense bf16 tensor-core peaks (datasheets)


def nanogpt_flops_per_token(params: int, layers: int, heads: int, head_dim: int, seq: int) -> int:
    """nanoGPT's ``6 N + 12 L H Q T``: weights (forward 2, backward 4 per multiply-add) plus attention scores."""
    return 6 * params + 12 * layers * heads * head_dim * seq


def peak_flops(device: torch.device) -> tuple[float, str]:
    """The device's dense bf16 peak from :data:`PEAK_BF16` (an H100's when the name is unknown)."""
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    for key, value in PEAK_BF16.items():
        if key in name:
            return value, f"{key} dense bf16 peak {value / 1e12:.0f} TFLOP/s"
    return PEAK_BF16["H100"], f"no known peak for {name!r}: an H100's {PEAK_BF16['H100'] / 1e12:.0f} TFLOP/s"


def time_training(config: dict, device: torch.device, batch: int, steps: int, warmup: int,
                  compiled: bool) -> dict:
    """Median seconds per training step, peak memory and losses of ``config``'s decoder: the dry run's
    timed step (:func:`hacn_core.engine.dry_run.time_on_device`) on the study's plan, one micro-batch of
    ``batch`` sequences (bf16 autocast on CUDA, as the trainer's ``precision="auto"``)."""
    plan = replace(dry_run_plan(config), timing_batch=batch)
    m = time_on_device(plan, device, steps=steps, warmup=warmup, compile=compiled)
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return {"seconds_per_step": m.seconds_per_step, "peak_bytes": m.peak_bytes, "warmup_seconds": m.warmup_seconds,
            "parameters": m.parameters, "losses": list(m.losses)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=128, help="sequences per step (the paper's micro-batch: 128)")
    parser.add_argument("--batches", default=None, help="comma-separated micro-batches to sweep (replaces --batch)")
    parser.add_argument("--rules", default="resnet,hacn", help="comma-separated, of: resnet, hacn")
    parser.add_argument("--compile-only", action="store_true", help="compiled only")
    parser.add_argument("--steps", type=int, default=10, help="timed steps per contestant")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps first (compilation happens here)")
    parser.add_argument("--no-compile", action="store_true", help="eager only")
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--layers", type=int, default=None, help="override the paper's 24 (small checks)")
    parser.add_argument("--dim", type=int, default=None, help="override the paper's 768 (small checks)")
    parser.add_argument("--json", default=None, help="also write the results to this file")
    args = parser.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        print("error: --device cuda: CUDA is not available here; the paper-size decoder needs a GPU "
              "(--device cpu --layers 2 --dim 64 --batch 2 runs the same code small)", file=sys.stderr)
        return 2
    try:
        batches = [int(b) for b in args.batches.split(",")] if args.batches else [args.batch]
    except ValueError:
        batches = []
    if not batches or min(batches) < 1:
        parser.error(f"--batches {args.batches!r}: allowed: comma-separated positive integers, e.g. 128,256")
    wanted = args.rules.split(",")
    if not wanted or any(r not in ("resnet", "hacn") for r in wanted):
        parser.error(f"--rules {args.rules!r}: allowed: resnet, hacn (comma-separated)")
    if args.no_compile and args.compile_only:
        parser.error("--no-compile and --compile-only: allowed: one of them")
    device = torch.device(args.device)
    torch.backends.cuda.matmul.allow_tf32 = True
    paper = {c["rule"]: c for c in get("hacn-decoder").runs("paper") if c["seed"] == 0}
    rules = {rule: paper[rule] for rule in ("resnet", "hacn") if rule in wanted}
    for cfg in rules.values():
        if args.layers:
            cfg["num_layers"] = args.layers
        if args.dim:
            cfg["dim"], cfg["mlp_dim"], cfg["num_heads"] = args.dim, 4 * args.dim, max(1, args.dim // 64)
    cfg = next(iter(rules.values()))
    peak, peak_note = peak_flops(device)
    print(f"# bench_decoder_mfu: {cfg['num_layers']} layers, d {cfg['dim']}, {cfg['num_heads']} heads, "
          f"vocab {cfg['vocab_size']}, batch {'/'.join(map(str, batches))} x {cfg['block_size']} tokens, "
          f"dropout {cfg['dropout']}, "
          f"device {device_description(str(device))}, torch {torch.__version__}")
    print(f"# MFU over the {peak_note}; nanoGPT's FLOPs per token 6N + 12 L H Q T")
    modes = [False] if args.no_compile else [True] if args.compile_only else [False, True]
    rows = []
    for batch in batches:
        for compiled in modes:
            for rule, config in rules.items():
                try:
                    r = time_training(config, device, batch, args.steps, args.warmup, compiled)
                except torch.cuda.OutOfMemoryError:  # a sweep's batch too big for this GPU: say so, go on
                    torch.cuda.empty_cache()
                    rows.append({"rule": rule, "compiled": compiled, "batch": batch, "error": "out of memory"})
                    print(f"{rule:>7} {'compiled' if compiled else 'eager':>8} batch {batch:4d}: out of memory")
                    continue
                head_dim = config["dim"] // config["num_heads"]
                per_token = nanogpt_flops_per_token(r["parameters"], config["num_layers"], config["num_heads"],
                                                    head_dim, config["block_size"])
                tokens_s = batch * config["block_size"] / r["seconds_per_step"]
                r |= {"rule": rule, "compiled": compiled, "batch": batch, "tokens_per_s": tokens_s,
                      "flops_per_token": per_token, "mfu": per_token * tokens_s / peak}
                rows.append(r)
                print(f"{rule:>7} {'compiled' if compiled else 'eager':>8} batch {batch:4d}: "
                      f"{r['seconds_per_step'] * 1e3:8.1f} ms/step  {tokens_s:12,.0f} tokens/s  "
                      f"MFU {100 * r['mfu']:5.1f}%  peak {r['peak_bytes'] / 2**30:6.2f} GiB  warm-up "
                      f"{r['warmup_seconds']:.0f} s  loss {r['losses'][0]:.3f} -> {r['losses'][1]:.3f}")
    if len(batches) > 1 or len(rules) < 2 or any("error" in r for r in rows):  # a sweep: the rows are the result
        _write(args, device, peak, peak_note, batches, cfg, rows)
        return 0
    for compiled in modes:
        res, hacn = (next(r for r in rows if r["rule"] == k and r["compiled"] == compiled) for k in ("resnet", "hacn"))
        tr = hacn["seconds_per_step"] / res["seconds_per_step"]
        mr = f"{hacn['peak_bytes'] / res['peak_bytes']:.3f}x" if res["peak_bytes"] else "not measured (CPU)"
        print(f"hacn / resnet ({'compiled' if compiled else 'eager'}): time {tr:.3f}x, peak memory {mr} "
              f"(target at most 1.05x)")
    if len(modes) == 2:
        for rule in rules:
            e, c = (next(r for r in rows if r["rule"] == rule and r["compiled"] == m) for m in (False, True))
            print(f"{rule}: compiled / eager tokens/s {c['tokens_per_s'] / e['tokens_per_s']:.2f}x")
    _write(args, device, peak, peak_note, batches, cfg, rows)
    return 0


def _write(args: argparse.Namespace, device: torch.device, peak: float, peak_note: str, batches: list[int],
           cfg: dict, rows: list[dict]) -> None:
    """The record, to ``--json`` when given (``batch``: the one micro-batch, or the list of a sweep)."""
    if not args.json:
        return
    record = {"benchmark": "bench_decoder_mfu", "device": device_description(str(device)),
              "torch": torch.__version__, "code": code_version(), "batch": batches[0] if len(batches) == 1 else batches,
              "steps": args.steps, "warmup": args.warmup, "peak_flops": peak, "peak_note": peak_note,
              "config": {k: cfg[k] for k in ("num_layers", "dim", "num_heads", "mlp_dim", "vocab_size",
                                             "block_size", "dropout")},
              "rows": rows}
    Path(args.json).write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    sys.exit(main())
