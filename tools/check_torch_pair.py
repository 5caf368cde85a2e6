"""Fail loudly unless torch and torchvision load together (see requirements.txt).

A CPU-only local build of torch next to the PyPI torchvision wheel imports torch
fine but breaks at `import torchvision` ("operator torchvision::nms does not
exist"). Catching that at install time is cheaper than at the first notebook.
"""

import sys

import torch

try:
    import torchvision
    from torchvision.ops import nms
except Exception as err:  # noqa: BLE001 - we re-raise with advice
    sys.exit(
        f"torch {torch.__version__} and torchvision do not work together: {err}\n"
        "Reinstall the pinned pair: pip install 'torch===2.13.0' torchvision==0.28.0"
    )

boxes = torch.tensor([[0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 1.0, 1.0]])
kept = nms(boxes, torch.tensor([0.9, 0.8]), 0.5)
assert kept.tolist() == [0], kept
print(f"[setup] torch {torch.__version__} + torchvision {torchvision.__version__}: OK")
