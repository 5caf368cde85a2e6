"""Why a deep Gated PlainNet keeps ``k`` near 1 here: every gate's gradient at initialisation (Sec. 3.1).

At ``k = 1`` a Gated PlainNet (Residual Gates Sec. 2.2, ``u = g(k) f(x) + (1 - g(k)) x``)
*is* the plain network. Over ``batches`` training mini-batches of the untrained
network (a fixed, seeded draw) we record ``dL/dk_l`` for every gate ``l`` and keep,
per gate (input side first):

* ``mean_abs``: mean ``|dL/dk_l|``, how strongly the loss reacts to the gate;
* ``sign_agreement``: ``|mean sign(dL/dk_l)|``, 1 when every batch pushes ``k_l`` the
  same way and near 0 when the sign is a coin flip. Adam's step is about
  ``lr * mean(g) / rms(g)``, so with random signs ``k`` only jitters.

One experiment, ``gates-gate-gradients``, stores these per depth of Table 1, so the
chapter reads them like any other result (a book build needs no data).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from hacn_core import gates
from hacn_core.engine.registry import Experiment
from hacn_core.engine.results import RunContext
from hacn_core.gates.studies.mnist import DEPTHS, mnist_tensors
from hacn_core.models.fc import KINDS, mnist_fc

EXPERIMENT_ID = "gates-gate-gradients"


def gate_gradients_at_init(kind: str, depth: int, *, batches: int = 20, batch_size: int = 128, seed: int = 0,
                           data: tuple[torch.Tensor, torch.Tensor] | None = None) -> dict[str, np.ndarray]:
    """``mean_abs`` and ``sign_agreement`` of ``dL/dk`` per gate of an untrained ``kind`` net of depth ``depth``."""
    if kind not in KINDS or not kind.startswith("gated"):
        raise ValueError(f"kind={kind!r} has no gates; allowed: {', '.join(k for k in KINDS if k.startswith('gated'))}")
    torch.manual_seed(seed)
    g = gate_gradient_samples(mnist_fc(kind, depth), data, batches=batches, batch_size=batch_size, seed=seed)
    return {"mean_abs": np.abs(g).mean(0), "sign_agreement": np.abs(np.sign(g).mean(0))}


def gate_gradient_samples(model: torch.nn.Module, data: tuple[torch.Tensor, torch.Tensor] | None = None, *,
                          batches: int = 20, batch_size: int = 128, seed: int = 0) -> np.ndarray:
    """``dL/dk`` of every gate of ``model`` (in training mode) on ``batches`` seeded mini-batches of ``data``
    (MNIST's training split by default): an array of shape ``(batches, gates)``."""
    X, y = data if data is not None else mnist_tensors(True)
    model.train()
    gen = torch.Generator().manual_seed(seed)
    grads = []
    for _ in range(batches):
        idx = torch.randint(0, len(X), (batch_size,), generator=gen)
        model.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(model(X[idx]), y[idx]).backward()
        grads.append([float(p.grad) for _, p in gates.gate_parameters(model)])
    return np.asarray(grads)


def make_config(depth: int, *, kind: str = "gated_plain", batches: int = 20, seed: int = 0) -> dict[str, Any]:
    """One measurement: ``batches`` mini-batches of 128 MNIST images through an untrained ``kind`` net."""
    return {"kind": kind, "depth": depth, "batches": batches, "batch_size": 128, "seed": seed}


def measure(config: dict[str, Any], context: RunContext) -> dict[str, Any]:
    """The train function of the experiment: per-gate curves and their mean per third of the depth."""
    out = gate_gradients_at_init(config["kind"], config["depth"], batches=config["batches"],
                                 batch_size=config["batch_size"], seed=config["seed"])
    metrics: dict[str, Any] = {}
    for part, idx in zip(("first", "middle", "last"), np.array_split(np.arange(config["depth"]), 3)):
        if idx.size:
            metrics[f"mean_abs/{part}"] = float(out["mean_abs"][idx].mean())
            metrics[f"sign_agreement/{part}"] = float(out["sign_agreement"][idx].mean())
    return {"metrics": metrics, "curves": {k: v.tolist() for k, v in out.items()}, "device": "cpu"}


EXPERIMENT = Experiment(
    id=EXPERIMENT_ID,
    title="Residual Gates: gradient of every gate at initialisation, Gated PlainNet (why k stays near 1)",
    train=measure,
    configs={"smoke": lambda: [make_config(d, batches=2) for d in (2, 10)],
             "book": lambda: [make_config(d) for d in DEPTHS],
             "paper": lambda: [make_config(d) for d in DEPTHS]},
    setting={"smoke": "d 2 and 10, 2 mini-batches", "book": "Table 1's depths, 20 mini-batches of 128, seed 0",
             "paper": "Table 1's depths, 20 mini-batches of 128, seed 0 (a measurement: the same as book)"},
)
