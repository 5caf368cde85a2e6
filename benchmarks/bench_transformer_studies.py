"""Per-step cost of the ViT and decoder studies at their book size: how their budgets were sized.

For each study (``hacn-vit``, ``hacn-decoder``) this builds the book profile's model
for every rule (ResNet / ACN / H-ACN, seed 0), exactly as the study's
``build_model`` does, and times one AdamW training step of each, interleaved
(:func:`hacn_core.hacn.studies.common.interleaved_step_times`: process CPU time on
one thread, or CUDA wall time), at the book's batch (ViT: 128 Fashion-MNIST-shaped
images; decoder: 32 windows of 128 characters). It prints ms per step, the ratio to
ResNet, and the training CPU-minutes of one book run that follow (steps x time).

Run: ``python benchmarks/bench_transformer_studies.py [--repeats 5] [--steps 3]``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hacn_core.hacn.studies import decoder as hd  # noqa: E402
from hacn_core.hacn.studies import vit as hv  # noqa: E402
from hacn_core.hacn.studies.common import interleaved_step_times, step_cost_metrics  # noqa: E402


def _step(model: torch.nn.Module, inputs: torch.Tensor, targets: torch.Tensor, lr: float):
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)

    def step() -> None:
        loss = hd.lm_loss(model(inputs), targets) if inputs.dtype == torch.long else \
            torch.nn.functional.cross_entropy(model(inputs), targets)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()

    return step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--steps", type=int, default=3)
    args = parser.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    gen = torch.Generator().manual_seed(0)
    for name, study, make_batch, steps_of in (
        ("hacn-vit", hv,
         lambda c: (torch.randn(c["batch_size"], 1, 28, 28, generator=gen), torch.randint(0, 10, (c["batch_size"],))),
         lambda c: c["epochs"] * -(-55_000 // c["batch_size"])),
        ("hacn-decoder", hd,
         lambda c: tuple(torch.randint(0, 65, (c["batch_size"], c["block_size"]), generator=gen) for _ in range(2)),
         lambda c: c["steps"]),
    ):
        steps, configs = {}, {}
        for rule in study.STUDY_RULES:
            config = study.make_config(rule, 0, profile="book")
            torch.manual_seed(0)
            model = study.build_model(config).to(device)
            x, y = make_batch(config)
            steps[rule] = _step(model, x.to(device), y.to(device), config["lr"])
            configs[rule] = config
        times = interleaved_step_times(steps, repeats=args.repeats, timed=args.steps, device=device)
        metrics = step_cost_metrics(times, "resnet")
        print(f"{name} (book size, {device}, one thread on CPU):")
        for rule in steps:
            ms = metrics[f"{rule}/ms_per_step"]
            minutes = ms / 1000 * steps_of(configs[rule]) / 60
            print(f"  {rule:7s} {ms:7.1f} ms/step  ratio to resnet {metrics[f'{rule}/ratio_to_resnet']:.3f}  "
                  f"-> {steps_of(configs[rule]):,} steps = {minutes:.1f} min of training")


if __name__ == "__main__":
    main()
