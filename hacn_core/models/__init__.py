"""Network architectures of the book.

Residual Gates (Savarese & Figueiredo), Section 3:

- ``gated_mlp``    fully connected MNIST networks (plain / ResNet / gated), Sec. 3.1
- ``resnet_cifar`` pre-activation ResNets and Wide ResNets, gated or not, Sec. 3.2

``build_model(name, **kwargs)`` builds one of them by name (for configs).
"""

from __future__ import annotations

from typing import Any

from torch import nn

MODEL_NAMES: tuple[str, ...] = ("mnist_fc", "preact_resnet", "wide_resnet")


def build_model(name: str, **kwargs: Any) -> nn.Module:
    """Build the Residual Gates model ``name`` (one of ``MODEL_NAMES``) from keyword arguments.

    ``build_model("mnist_fc", kind="gated_resnet", depth=100)``,
    ``build_model("wide_resnet", depth=28, width=10, dropout=0.3, gated=True)``.
    """
    # Imported here so that importing the package stays cheap.
    if name == "mnist_fc":
        from hacn_core.models.gated_mlp import mnist_fc

        return mnist_fc(**kwargs)
    if name == "preact_resnet":
        from hacn_core.models.resnet_cifar import preact_resnet

        return preact_resnet(**kwargs)
    if name == "wide_resnet":
        from hacn_core.models.resnet_cifar import wide_resnet

        return wide_resnet(**kwargs)
    raise ValueError(f"name={name!r} is not a model; allowed: {', '.join(MODEL_NAMES)}")
