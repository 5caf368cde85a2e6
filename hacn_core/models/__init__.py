"""The backbones: networks built from a residual rule and blocks, shared by the papers' studies.

- ``mixer``       MLP-Mixer and the DenseNet-style Mixer (H-ACN Sec. 3.1); the layers join by any
                  :class:`~hacn_core.hacn.connectivity.ResidualStack` rule
- ``resnet``      pre-activation ResNets and Wide ResNets for CIFAR, gated or not (Residual Gates Sec. 3.2)
- ``fc``          fully connected MNIST networks: plain, ResNet, Gated PlainNet, Gated ResNet (Residual Gates Sec. 3.1)
- ``stacked_fc``  many ``fc`` networks trained as one batched model (seeds and settings side by side)
"""

from __future__ import annotations

from typing import Any

from torch import nn

MODEL_NAMES: tuple[str, ...] = ("mnist_fc", "preact_resnet", "wide_resnet")


def build_model(name: str, **kwargs: Any) -> nn.Module:
    """Build the Residual Gates backbone ``name`` (one of ``MODEL_NAMES``) from keyword arguments.

    ``build_model("mnist_fc", kind="gated_resnet", depth=100)``,
    ``build_model("wide_resnet", depth=28, width=10, dropout=0.3, gated=True)``.
    """
    # Imported here so that importing the package stays cheap.
    if name == "mnist_fc":
        from hacn_core.models.fc import mnist_fc

        return mnist_fc(**kwargs)
    if name == "preact_resnet":
        from hacn_core.models.resnet import preact_resnet

        return preact_resnet(**kwargs)
    if name == "wide_resnet":
        from hacn_core.models.resnet import wide_resnet

        return wide_resnet(**kwargs)
    raise ValueError(f"name={name!r} is not a model; allowed: {', '.join(MODEL_NAMES)}")
