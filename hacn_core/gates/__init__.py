"""Residual Gates (Savarese & Figueiredo): one scalar gate k per layer decides how much of it is used.

The paper's rules (Sec. 2.2), implemented in :mod:`hacn_core.gates.layers`::

    Gated PlainNet layer    u = g(k) f(x) + (1 - g(k)) x      gated_plain,    GatedPlainLayer
    Gated ResNet layer      u = g(k) f_r(x) + x               gated_residual, GatedResidualLayer
    g = ReLU by default, k initialised to 1 (Sec. 3.2)

A layer whose ``k`` reaches 0 is an identity and can be removed without changing
the network (Sec. 3.1, Table 2, Fig. 5): ``removal_order``, ``prune``,
``removal_curve``. The studies (``hacn_core.gates.studies``) train the MNIST
fully connected networks and the CIFAR (wide) ResNets of ``hacn_core.models``.
"""

from hacn_core.gates.layers import (
    GATE_FUNCTIONS,
    REMOVAL_STRATEGIES,
    GatedPlainLayer,
    GatedResidualLayer,
    PlainLayer,
    RemovableLayer,
    RemovalPoint,
    ResidualLayer,
    SkippedLayer,
    gate_parameters,
    gate_value,
    gate_values,
    gated_plain,
    gated_residual,
    mean_gate,
    prune,
    removable_layers,
    removal_curve,
    removal_order,
    remove_layers,
    set_gates,
)

__all__ = [
    "GATE_FUNCTIONS",
    "REMOVAL_STRATEGIES",
    "GatedPlainLayer",
    "GatedResidualLayer",
    "PlainLayer",
    "RemovableLayer",
    "RemovalPoint",
    "ResidualLayer",
    "SkippedLayer",
    "gate_parameters",
    "gate_value",
    "gate_values",
    "gated_plain",
    "gated_residual",
    "mean_gate",
    "prune",
    "removable_layers",
    "removal_curve",
    "removal_order",
    "remove_layers",
    "set_gates",
]
