"""Helper of tests/test_interrupts.py: ``python -m hacn_core`` with a toy experiment registered.

    python tests/_interrupt_cli.py run toy-interrupts --profile smoke --results DIR [--checkpoint-every 40steps]

runs :func:`hacn_core.__main__.main` exactly as ``python -m hacn_core`` does, after
adding :data:`EXPERIMENT` to the catalog (the test-only hook). The toy run trains
a small MLP with dropout (so a resume must restore the random streams) and a
cosine schedule through :func:`~hacn_core.engine.training.fit`: 256 steps over 8
epochs, sleeping ``pause_s`` (0: none) after every step.

``$TOY_HOLD_AT=STEP:FILE`` makes the run say when it is ready for a signal, whatever the
machine's load: after step ``STEP`` it creates ``FILE`` and sleeps 0.1 s after every
later step of this process (a window of seconds, in which the test signals it). It
changes no number, and a rerun (``FILE`` exists) runs at full speed.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

if __name__ == "__main__":  # run as a script: the checkout first on the path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
from torch import nn  # noqa: E402

from hacn_core.engine.registry import Experiment  # noqa: E402
from hacn_core.engine.results import RunContext  # noqa: E402
from hacn_core.engine.training import Callback, TrainConfig, TrainState, fit  # noqa: E402

TOY_ID = "toy-interrupts"
#: 1024 samples in batches of 32: 32 steps per epoch, 256 steps in all (a process's cost is its imports and
#: its first optimizer, some 7 CPU-seconds, and then about 3 ms a step). The run says when it is ready for a
#: signal ($TOY_HOLD_AT): it needs no pause of its own.
CONFIG: dict[str, Any] = {"seed": 3, "epochs": 8, "n": 1024, "batch_size": 32, "width": 64, "lr": 3e-3,
                          "dropout": 0.2, "pause_s": 0.0}


HOLD_ENV = "TOY_HOLD_AT"
HOLD_PAUSE_S = 0.1  # the pause after every step once the run said it is ready for a signal


class Pause(Callback):
    """Sleeps after every optimizer step (the toy's steps would otherwise take microseconds); see
    ``$TOY_HOLD_AT`` in the module's docstring."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        step, _, marker = os.environ.get(HOLD_ENV, "").partition(":")
        self.hold_at, self.marker = (int(step), Path(marker)) if marker else (None, None)

    def on_step_end(self, state: TrainState) -> None:
        if state.step == self.hold_at and not self.marker.exists():
            self.marker.touch()
            self.seconds = HOLD_PAUSE_S
        time.sleep(self.seconds)


def toy_data(n: int) -> tuple[tuple[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]:
    """``n`` training and 256 validation samples: 16 features, 4 classes from a fixed linear map."""
    g = torch.Generator().manual_seed(0)
    X = torch.randn(n + 256, 16, generator=g)
    y = (X @ torch.randn(16, 4, generator=g)).argmax(1)
    return (X[:n], y[:n]), (X[n:], y[n:])


def train_toy(config: dict[str, Any], context: RunContext) -> dict[str, Any]:
    """One toy run through ``fit`` (checkpoints in the run's ``checkpoint_dir``)."""
    train, val = toy_data(config["n"])
    torch.manual_seed(config["seed"])
    w = config["width"]
    model = nn.Sequential(nn.Linear(16, w), nn.ReLU(), nn.Dropout(config["dropout"]), nn.Linear(w, w), nn.ReLU(),
                          nn.Linear(w, 4))
    cfg = TrainConfig(epochs=config["epochs"], batch_size=config["batch_size"], lr=config["lr"], seed=config["seed"],
                      schedule="cosine", device="cpu", checkpoint_every_minutes=5.0)
    out = fit(model, train, cfg, val=val, callbacks=[Pause(config["pause_s"])],
              checkpoint_dir=context.checkpoint_dir, progress=context.progress)
    curves = {k: v for k, v in out.curves.items() if k != "time_s"}  # wall-clock times differ run to run
    return {"metrics": out.metrics, "curves": curves, "device": out.device}


EXPERIMENT = Experiment(id=TOY_ID, title="toy run for the interrupt tests", train=train_toy,
                        configs={"smoke": lambda: [dict(CONFIG)]}, setting={"smoke": "256 steps of a small MLP"})


def main(argv: list[str]) -> int:
    from hacn_core import catalog
    from hacn_core.__main__ import main as cli

    catalog.EXPERIMENTS[TOY_ID] = EXPERIMENT
    return cli(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
