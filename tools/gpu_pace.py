"""Training steps per second of the book's Mixer on this machine's GPU, with N such processes at once.

Sizes a lent GPU's share of the background studies (tools/device_runs.sh): at the book's size (155k
parameters, batch 128) a step is a few thousand small kernels, so one process leaves the GPU mostly idle
and several can share it; this tells how many before they slow each other down.

    python tools/gpu_pace.py SECONDS [ARCH]   # one process; launch N at once and add up their steps/s

ARCH: ``mixer`` (default), ``dense_mixer``, or ``awnn_mixer``: the width-learning H-ACN Mixer of the
width + connectivity study (AWNN's loss, Eq. 13, and a width update after every step, Algorithm 1);
``awnn_mixer_per_mlp`` is the same with the rates read to the host once per adaptive MLP (16 reads a
step) instead of once for all (``update_widths(one_read=...)``), to measure what the one read saves.

Prints one line: the process's steps per second over the last two thirds of SECONDS (fp32, AdamW, the
trainer's gradient clipping; random inputs of the study's shape).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from hacn_core.hacn.studies.mixer import build_model, make_config  # noqa: E402


def build(arch: str):
    """``(model, loss, after_step)`` of ``arch`` on the GPU (module docstring)."""
    if arch.startswith("awnn_mixer"):
        from hacn_core.awnn import ELBOLoss, adaptive_mlps, update_widths
        from hacn_core.beyond import width_connectivity as wc

        config = next(c for c in wc.configs("book") if c["setting"] == "mixer" and c["rule"] == "hacn"
                      and c["learn_width"] and c["num_classes"] == 10)
        model = wc.build_model(config, (1, 28, 28)).cuda()
        elbo = ELBOLoss(model, 55_000, sigma_theta=config["sigma_theta"], per_sample=True)
        mlps, one_read = adaptive_mlps(model), not arch.endswith("_per_mlp")
        return model, elbo, lambda opt: update_widths(mlps, opt, one_read=one_read)
    rule = "resnet" if arch == "dense_mixer" else "hacn"
    config = make_config(rule, 0, arch=arch, train_subset=None, epochs=30)
    return build_model(config, image_size=28, in_channels=1).cuda(), F.cross_entropy, lambda opt: None


def main() -> None:
    seconds = float(sys.argv[1])
    arch = sys.argv[2] if len(sys.argv) > 2 else "mixer"
    torch.set_num_threads(1)
    model, loss_fn, after_step = build(arch)
    # the adaptive layers' parameters are strided views: the trainer steps them one by one (foreach=False)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01,
                            **({"foreach": False} if arch.startswith("awnn") else {}))
    x = torch.randn(128, 1, 28, 28, device="cuda")
    y = torch.randint(0, 10, (128,), device="cuda")
    start = time.perf_counter()
    steps, counted_from, t0 = 0, None, start
    while (now := time.perf_counter()) - start < seconds:
        if counted_from is None and now - start > seconds / 3:
            torch.cuda.synchronize()
            counted_from, t0 = steps, time.perf_counter()
        loss = loss_fn(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        after_step(opt)
        steps += 1
        if steps % 32 == 0:
            loss.item()  # the trainer reads the loss every 32 steps on accelerators
    torch.cuda.synchronize()
    rate = (steps - (counted_from or 0)) / (time.perf_counter() - t0)
    print(f"{arch}: {rate:.1f} steps/s ({1000 / rate:.1f} ms per step)", flush=True)


if __name__ == "__main__":
    main()
