"""Neuron importances: the rescaling of activations (AWNN, Sec. 3.1, Eq. 14).

The activation of neuron ``j`` of an adaptive layer is rescaled by its importance,
the probability of its position under Eq. 12 (:mod:`hacn_core.awnn.distribution`)::

    h_j = sigma(W h_prev + b)_j * f(j; nu),   f(j; nu) = c q^j,   q = e^{-nu},   j = 0..D-1

so the network sees a soft order of importance among neurons. Eq. 14 as written has
``c = 1 - q`` (the first ``D`` importances then hold mass ``1 - e^{-nu D} ~ k``).
The public code instead renormalises over the ``M = D`` active neurons,
``p(j) = f(j) / sum_{i<M} f(i)``, so ``c = (1 - q) / (1 - q^M)``
(``importance_norm="active"``; ``"none"`` follows Eq. 14).

The rate gradient of an importance is ``d log f(j) / d nu = s - j`` with the shift
``s`` of :func:`importance_log_shift`; the model's fused backward uses it.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from hacn_core.awnn.distribution import discretized_exponential

#: ``none``: Eq. 14 as written; ``active``: importances renormalised over the active neurons (public code)
IMPORTANCE_NORMS: tuple[str, ...] = ("none", "active")


def importances(nu: Tensor | float, width: int) -> Tensor:
    """Importances ``f(0), ..., f(width - 1)`` of the first ``width`` neurons (Eq. 14)."""
    if isinstance(width, bool) or not isinstance(width, int) or width < 1:
        raise ValueError(f"width={width!r} must be a positive int (>= 1): a layer keeps at least one neuron")
    nu_t = torch.as_tensor(nu)
    dtype = nu_t.dtype if nu_t.is_floating_point() else torch.get_default_dtype()
    return discretized_exponential(torch.arange(width, dtype=dtype, device=nu_t.device), nu_t.to(dtype))


def importance_scale(nu: float, norm_width: int | None = None) -> float:
    """The constant factor ``c`` of ``f(j) = c q^j`` (``q = e^{-nu}``) used in Eq. 14.

    ``c = 1 - q`` for Eq. 12 as written (``norm_width=None``). With ``norm_width = M``
    the importances are renormalised over the first ``M`` neurons,
    ``p(j) = f(j) / sum_{i<M} f(i)``, so ``c = (1 - q) / (1 - q^M)`` and the ``M``
    importances sum to 1 (``importance_norm="active"``, the public code's behaviour).
    """
    if norm_width is None:
        return -math.expm1(-nu)
    return math.expm1(-nu) / math.expm1(-nu * norm_width)


def importance_log_shift(nu: float, norm_width: int | None = None) -> float:
    """``s`` in ``d log f(j) / d nu = s - j`` (the rate gradient of Eq. 14's importances).

    Eq. 12: ``s = 1 / (e^nu - 1)``; renormalised over ``M`` neurons it loses
    ``M / (e^{nu M} - 1)``, the derivative of ``log(1 - e^{-nu M})``. That term removes
    the pull of a uniform gain on ``nu``: ``sum_{j<M} p(j) (s - j) = 0``.
    """
    shift = 1.0 / math.expm1(nu)
    if norm_width is not None:
        shift -= norm_width / math.expm1(nu * norm_width)
    return shift
