"""Cost of the H-ACN rule and of layer-wise perplexity on a GPT-2 decoder, side by side in one run.

The language-model counterpart of ``bench_connectivity.py`` (H-ACN Sec. 3.4,
Fig. 4): a small character-level decoder (default 12 layers, d = 128, 4 heads,
vocabulary 65, batch 16 x 128 tokens, RoPE, causal SDPA) measures

1. **Training step** (forward + backward + AdamW) of the ``hacn`` rule against
   the ``resnet`` rule with the same blocks: time ratio and peak-memory ratio
   (targets: at most 1.05x). Both use ``depth_ln="none"`` so that only the
   residual rule differs; without ``--quick`` the paper's H-ACN (with
   Depth-adaptive LayerNorm) is timed too. Peak memory as in
   ``bench_connectivity``: ``torch.cuda.max_memory_allocated`` on CUDA, the live
   bytes of op outputs (``LiveTensorMemory``) on CPU; also the bytes autograd
   saves for backward (``saved_tensors_hooks``), device-independent.
2. **Layer-wise perplexity** (``GPTDecoder.layerwise_nll``: every exit of one
   pass through the shared head, cross-entropy chunk by chunk) against one
   ordinary forward pass with its loss (target at most 2x), in eval mode.

Timing: contestants interleaved (A B A B ...), median per contestant, CPU time
of this process on CPU (``time.process_time``), one thread by default.

Run: ``python benchmarks/bench_decoder.py [--quick] [--layers 12] [--dim 128] [--batch 16] [--seq 128]``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_connectivity import interleaved_median, peak_step_memory, verdict  # noqa: E402

from hacn_core.hacn.studies.common import saved_activation_bytes  # noqa: E402
from hacn_core.models.decoder import DecoderConfig, GPTDecoder  # noqa: E402


def lm_loss(model: GPTDecoder, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    logits = model(idx)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def make_step(model: GPTDecoder, idx: torch.Tensor, targets: torch.Tensor):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        lm_loss(model, idx, targets).backward()
        opt.step()

    return step


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds (about a minute on 1 CPU thread)")
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--vocab", type=int, default=65, help="65: Tiny Shakespeare's characters")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--chunk", type=int, default=4096, help="tokens per chunk of the layer-wise head")
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)

    device = torch.device(args.device)
    torch.set_num_threads(args.threads)
    rounds = 5 if args.quick else 15
    cfg = DecoderConfig(vocab_size=args.vocab, max_seq_len=args.seq, dim=args.dim, num_layers=args.layers,
                        num_heads=args.heads, dropout=0.0, depth_ln="none")
    g = torch.Generator().manual_seed(0)
    idx = torch.randint(0, args.vocab, (args.batch, args.seq), generator=g).to(device)
    targets = torch.randint(0, args.vocab, (args.batch, args.seq), generator=g).to(device)
    print(f"# bench_decoder: {args.layers} layers, d={args.dim}, {args.heads} heads, vocab {args.vocab}, "
          f"batch {args.batch} x {args.seq} tokens, device {device}, threads {torch.get_num_threads()}, "
          f"torch {torch.__version__}")

    # -- 1. training step --------------------------------------------------------------
    torch.manual_seed(1)
    res = GPTDecoder(cfg, rule="resnet").to(device)
    hacn = GPTDecoder(cfg, rule="hacn").to(device)
    hacn.load_state_dict(res.state_dict(), strict=False)  # same block weights
    models = {"resnet": res, "hacn": hacn}
    if not args.quick:
        dln = GPTDecoder(cfg, rule="hacn", depth_ln="paper").to(device)
        dln.load_state_dict(res.state_dict(), strict=False)
        models["hacn+depthln"] = dln
    saved = {name: saved_activation_bytes(m, (idx, targets)) for name, m in models.items()}
    steps = {name: make_step(m, idx, targets) for name, m in models.items()}
    t = interleaved_median(steps, rounds, device)
    mem = {name: peak_step_memory(step, device) for name, step in steps.items()}
    print("\n## training step (forward + backward + AdamW)")
    for name in steps:
        print(f"{name:>13}: {t[name] * 1e3:8.1f} ms/step   peak {mem[name] / 2**20:7.2f} MiB   "
              f"saved for backward {saved[name] / 2**20:7.2f} MiB")
    for name in [n for n in steps if n != "resnet"]:
        tr, mr, sr = t[name] / t["resnet"], mem[name] / mem["resnet"], saved[name] / saved["resnet"]
        print(f"{name} / resnet: time {tr:.3f}x {verdict(tr, 1.05, True)}; peak memory {mr:.3f}x "
              f"{verdict(mr, 1.05, True)}; saved tensors {sr:.3f}x")
    method = "torch.cuda.max_memory_allocated" if device.type == "cuda" else "LiveTensorMemory (live op outputs)"
    print(f"(peak memory method: {method})")

    # -- 2. layer-wise perplexity ------------------------------------------------------
    model = hacn.eval()
    L = cfg.num_layers
    with torch.no_grad():
        ce = model.layerwise_nll(idx, targets, args.chunk)[0] / targets.numel()
        assert torch.allclose(ce[-1].float(), lm_loss(model, idx, targets), atol=1e-4)

        def forward_loss():
            return lm_loss(model, idx, targets)

        def all_exits():
            return model.layerwise_nll(idx, targets, args.chunk)

        t = interleaved_median({"forward": forward_loss, "exits": all_exits}, rounds, device)
    r = t["exits"] / t["forward"]
    print(f"\n## layer-wise perplexity, {L + 1} exits, eval mode, no grad, chunks of {args.chunk} tokens")
    print(f"one forward pass + loss       : {t['forward'] * 1e3:8.1f} ms")
    print(f"all exits (layerwise_nll)     : {t['exits'] * 1e3:8.1f} ms")
    print(f"all exits / one forward       : {r:.2f}x {verdict(r, 2.0, True)}")


if __name__ == "__main__":
    main()
