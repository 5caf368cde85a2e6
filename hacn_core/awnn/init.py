"""Kaiming+ initialization of an adaptive layer (AWNN, Sec. 3.2, Theorem 3.1, Appendix A).

Rescaling activations by their importances (Eq. 14) shrinks the signal, so the
weights of layer ``l`` are drawn with a variance that undoes it (Theorem 3.1,
Eqs. 15, 19-20)::

    Var[W^l] = g / sum_j f_{l-1}(j)^2,   g = 2 (ReLU-like), 1 (sigma'(0) ~ 1, e.g. tanh)

which keeps the variance of the activations constant across layers at
initialization (Figs. 2, 7). ``kaiming`` (He et al., 2015) is ``g / D_{l-1}``.
"""

from __future__ import annotations

import math

from torch import Tensor

from hacn_core.awnn.checks import check_choice

#: activations of the adaptive MLP (the paper's ReLU, LeakyReLU and ReLU6, and tanh)
ACTIVATIONS: tuple[str, ...] = ("relu", "leaky_relu", "relu6", "tanh")
#: initial weight schemes (Sec. 3.2)
INITS: tuple[str, ...] = ("kaiming_plus", "kaiming")


def activation_gain(activation: str, negative_slope: float = 0.01) -> float:
    """The factor ``g`` in ``Var[w] = g / sum_j f(j)^2`` (Theorem 3.1, Eqs. 19-20, 41).

    2 for ReLU-like activations (Lemma A.1; ``2 / (1 + a^2)`` for LeakyReLU with
    slope ``a``), 1 for activations with ``sigma'(0) ~ 1`` (tanh, or no activation).
    """
    check_choice(activation, ACTIVATIONS + ("linear",), "activation")
    if activation in ("relu", "relu6"):
        return 2.0
    if activation == "leaky_relu":
        return 2.0 / (1.0 + negative_slope**2)
    return 1.0


def init_std(prev_importances: Tensor | None, fan_in: int, activation: str, scheme: str = "kaiming_plus",
             negative_slope: float = 0.01) -> float:
    """Weight standard deviation of a layer (Theorem 3.1, Appendix A).

    ``kaiming_plus``: ``sqrt(g / sum_j f_prev(j)^2)``, summed over the importances of
    the *previous* layer's ``D_prev`` neurons (the derivation, Eqs. 27-28 and 40-41;
    Eq. 15 writes ``f_l`` but all layers share their initial ``nu``). Inputs of the
    first layer are not rescaled (``prev_importances=None``, importances all 1),
    which gives plain kaiming there. ``kaiming``: ``sqrt(g / D_prev)`` (He et al., 2015).
    """
    check_choice(scheme, INITS, "init")
    g = activation_gain(activation, negative_slope)
    if scheme == "kaiming" or prev_importances is None:
        return math.sqrt(g / fan_in)
    return math.sqrt(g / float(prev_importances.double().pow(2).sum()))
