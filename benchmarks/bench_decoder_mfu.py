"""Tokens per second and model FLOPs utilisation of the paper's GPT-2 decoder on a GPU (H-ACN Table 4).

The decoder of ``hacn-decoder``'s paper profile (24 layers, d 768, 12 heads, RoPE, dropout 0.2,
sequence 256, vocabulary 50,304: 208.54M parameters), built by the study's own ``build_model`` and
trained by its optimizer (AdamW, fused on CUDA) on its loss, one micro-batch per step (the paper's
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
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hacn_core.catalog import get  # noqa: E402
from hacn_core.engine.results import code_version, device_description  # noqa: E402
from hacn_core.engine.training import optimizer_for  # noqa: E402
from hacn_core.hacn.studies.decoder import build_model, lm_loss, train_config  # noqa: E402

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
    """Median seconds per training step (bf16 autocast on CUDA), peak memory and losses of ``config``'s decoder."""
    torch.manual_seed(0)
    model = build_model(config).to(device).train()
    opt = optimizer_for(model, train_config(config), device.type)
    forward = torch.compile(model) if compiled else model
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(0, config["vocab_size"], (batch, config["block_size"] + 1), generator=gen).to(device)
    x, y = ids[:, :-1], ids[:, 1:]
    amp = torch.bfloat16 if device.type == "cuda" else None

    def step() -> float:
        with torch.autocast(device.type, dtype=amp, enabled=amp is not None):
            loss = lm_loss(forward(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), config["grad_clip"])
        opt.step()
        return float(loss.detach())

    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    started = time.perf_counter()
    first = step()
    for _ in range(warmup - 1):
        step()
    sync()
    warm_s = time.perf_counter() - started
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    times = []
    for _ in range(steps):
        sync()
        t0 = time.perf_counter()
        last = step()
        sync()
        times.append(time.perf_counter() - t0)
    peak = torch.cuda.max_memory_allocated(device) if device.type == "cuda" else 0
    params = sum(p.numel() for p in model.parameters())
    del model, opt, forward
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return {"seconds_per_step": statistics.median(times), "peak_bytes": peak, "warmup_seconds": warm_s,
            "parameters": params, "losses": [first, last]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=128, help="sequences per step (the paper's micro-batch: 128)")
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
    device = torch.device(args.device)
    torch.backends.cuda.matmul.allow_tf32 = True
    paper = {c["rule"]: c for c in get("hacn-decoder").runs("paper") if c["seed"] == 0}
    rules = {"resnet": paper["resnet"], "hacn": paper["hacn"]}
    for cfg in rules.values():
        if args.layers:
            cfg["num_layers"] = args.layers
        if args.dim:
            cfg["dim"], cfg["mlp_dim"], cfg["num_heads"] = args.dim, 4 * args.dim, max(1, args.dim // 64)
    cfg = rules["resnet"]
    peak, peak_note = peak_flops(device)
    print(f"# bench_decoder_mfu: {cfg['num_layers']} layers, d {cfg['dim']}, {cfg['num_heads']} heads, "
          f"vocab {cfg['vocab_size']}, batch {args.batch} x {cfg['block_size']} tokens, dropout {cfg['dropout']}, "
          f"device {device_description(str(device))}, torch {torch.__version__}")
    print(f"# MFU over the {peak_note}; nanoGPT's FLOPs per token 6N + 12 L H Q T")
    modes = [False] if args.no_compile else [False, True]
    rows = []
    for compiled in modes:
        for rule, config in rules.items():
            r = time_training(config, device, args.batch, args.steps, args.warmup, compiled)
            head_dim = config["dim"] // config["num_heads"]
            per_token = nanogpt_flops_per_token(r["parameters"], config["num_layers"], config["num_heads"],
                                                head_dim, config["block_size"])
            tokens_s = args.batch * config["block_size"] / r["seconds_per_step"]
            r |= {"rule": rule, "compiled": compiled, "tokens_per_s": tokens_s,
                  "flops_per_token": per_token, "mfu": per_token * tokens_s / peak}
            rows.append(r)
            print(f"{rule:>7} {'compiled' if compiled else 'eager':>8}: {r['seconds_per_step'] * 1e3:8.1f} ms/step  "
                  f"{tokens_s:12,.0f} tokens/s  MFU {100 * r['mfu']:5.1f}%  peak {r['peak_bytes'] / 2**30:6.2f} GiB  "
                  f"warm-up {r['warmup_seconds']:.0f} s  loss {r['losses'][0]:.3f} -> {r['losses'][1]:.3f}")
    for compiled in modes:
        res, hacn = (next(r for r in rows if r["rule"] == k and r["compiled"] == compiled) for k in ("resnet", "hacn"))
        tr = hacn["seconds_per_step"] / res["seconds_per_step"]
        mr = hacn["peak_bytes"] / res["peak_bytes"] if res["peak_bytes"] else float("nan")
        print(f"hacn / resnet ({'compiled' if compiled else 'eager'}): time {tr:.3f}x, peak memory {mr:.3f}x "
              f"(target at most 1.05x)")
    if len(modes) == 2:
        for rule in rules:
            e, c = (next(r for r in rows if r["rule"] == rule and r["compiled"] == m) for m in (False, True))
            print(f"{rule}: compiled / eager tokens/s {c['tokens_per_s'] / e['tokens_per_s']:.2f}x")
    if args.json:
        record = {"benchmark": "bench_decoder_mfu", "device": device_description(str(device)),
                  "torch": torch.__version__, "code": code_version(), "batch": args.batch,
                  "steps": args.steps, "warmup": args.warmup, "peak_flops": peak, "peak_note": peak_note,
                  "config": {k: cfg[k] for k in ("num_layers", "dim", "num_heads", "mlp_dim", "vocab_size",
                                                 "block_size", "dropout")},
                  "rows": rows}
        Path(args.json).write_text(json.dumps(record, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
