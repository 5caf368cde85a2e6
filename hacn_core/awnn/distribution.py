"""The discretized exponential over neuron positions and its quantile width (AWNN, Sec. 3, Eqs. 11-12).

Every adaptive hidden layer ``l`` owns a rate ``nu_l`` of a discretized exponential
distribution over neuron positions (Eq. 12)::

    f(x; nu) = e^{-nu x} - e^{-nu (x + 1)} = q^x (1 - q),   q = e^{-nu},   x = 0, 1, 2, ...

and its width ``D_l`` is the quantile of ``f`` at ``k`` (Eq. 11, default k = 0.9)::

    D = min{ D : sum_{x < D} f(x; nu) >= k } = ceil(ln(1 / (1 - k)) / nu)

Conventions (decisions this module takes)
-----------------------------------------
* **Index convention.** ``f`` is a distribution over ``x in {0, 1, 2, ...}`` (the
  discretization of Roy, 2003, so it sums to 1). The paper numbers neurons from 1
  (Eq. 14) and speaks of support over N+: its neuron ``j = 1..D`` is our position
  ``x = j - 1``. The normalized distribution on N+ is exactly this one shifted
  (``f(j) / e^{-nu} = f(j - 1)``), so nothing is lost; the literal ``f(j)`` with
  ``j >= 1`` would only multiply every importance by the constant ``e^{-nu}``.
* **Positive rate.** ``nu_l = softplus(raw_l)`` (:func:`rate_from_raw`); the raw
  values are the learnable parameter, initialised to ``softplus^{-1}(nu_0)``
  (:func:`raw_from_rate`). Softplus behaves like ``exp`` for the small rates used in
  practice (0.004-0.02), so Adam moves ``nu`` by a roughly constant *relative*
  amount per step, and it never reaches 0.
* **Width.** The closed form above: the smallest ``D`` whose first ``D``
  probabilities hold mass ``1 - e^{-nu D} >= k`` (:func:`importance_mass`).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from hacn_core.awnn.checks import check_k, check_rate, check_width

# ---------------------------------------------------------------------------
# The rate nu = softplus(raw)
# ---------------------------------------------------------------------------


def rate_from_raw(raw: Tensor) -> Tensor:
    """Positive rate ``nu = softplus(raw)`` (our parametrization of ``nu_l`` in Eq. 13)."""
    return F.softplus(raw)


def float_softplus(x: float) -> float:
    """``log(1 + e^x)`` of a Python float (stable; the rates are computed in float64
    from the raw parameter, identically for the widths and the importances)."""
    return x + math.log1p(math.exp(-x)) if x > 0 else math.log1p(math.exp(x))


def raw_from_rate(rate: float) -> float:
    """Inverse softplus: the raw value whose softplus is ``rate`` (> 0)."""
    check_rate(rate, "rate")
    rate = float(rate)
    # log(e^r - 1) = r + log(1 - e^{-r}); the second form is stable for large r
    return rate + math.log(-math.expm1(-rate))


# ---------------------------------------------------------------------------
# Eq. 12: the discretized exponential
# ---------------------------------------------------------------------------


def discretized_exponential(x: Tensor, nu: Tensor | float) -> Tensor:
    """Eq. 12: ``f(x; nu) = e^{-nu x} - e^{-nu (x+1)} = e^{-nu x} (1 - e^{-nu})``.

    ``x`` holds positions 0, 1, 2, ... (see the module's index convention). The
    factored form with ``expm1`` keeps precision for small ``nu``.
    """
    nu = torch.as_tensor(nu, dtype=x.dtype if x.is_floating_point() else torch.get_default_dtype(), device=x.device)
    with torch.no_grad():
        if not bool(torch.all(torch.isfinite(nu) & (nu > 0))):
            raise ValueError(f"nu={nu.detach().cpu().tolist()} must be a finite rate > 0 (Eq. 12)")
    return geometric_importances(x, nu)


def geometric_importances(x: Tensor, nu: Tensor) -> Tensor:
    """Eq. 12 without the rate check, for the model's own callers: their rates are
    ``softplus`` of a parameter, positive by construction (as the fused node assumes)."""
    nu = torch.as_tensor(nu, dtype=x.dtype if x.is_floating_point() else torch.get_default_dtype(), device=x.device)
    x = x.to(nu.dtype)
    neg = -nu
    # q^x (1 - q) with q = e^{-nu}: the geometric form of the same distribution
    return torch.exp(neg).pow(x) * -torch.expm1(neg)


def importance_mass(nu: float, width: int) -> float:
    """Mass ``sum_{x < width} f(x; nu) = 1 - e^{-nu width}`` of the first ``width`` neurons."""
    return -math.expm1(-float(nu) * width)


# ---------------------------------------------------------------------------
# Eq. 11: the quantile width
# ---------------------------------------------------------------------------


def quantile_width(nu: float | Tensor, k: float = 0.9, max_width: int | None = None) -> int:
    """Eq. 11: the truncated width ``D``, the quantile of ``f(.; nu)`` at ``k``.

    Closed form ``D = ceil(ln(1/(1-k)) / nu)``: the smallest ``D`` with
    ``1 - e^{-nu D} >= k`` (positions ``0..D-1`` hold mass ``>= k``, ``0..D-2`` do
    not). The ceiling is corrected by one step where floating point rounding puts
    it on the wrong side. ``max_width`` optionally caps the result.
    """
    nu = float(nu)
    check_rate(nu, "nu")
    check_k(k)
    c = -math.log1p(-k)  # ln(1 / (1 - k))
    ratio = c / nu
    if not math.isfinite(ratio) or ratio > 2**62:
        raise ValueError(f"nu={nu!r} is too small: the quantile width {ratio:.3g} is not a usable width")
    d = max(1, math.ceil(ratio))
    if importance_mass(nu, d) < k:
        d += 1
    elif d > 1 and importance_mass(nu, d - 1) >= k:
        d -= 1
    if max_width is not None:
        d = min(d, max_width)
    return d


def rate_for_width(width: int, k: float = 0.9) -> float:
    """A rate whose quantile width (Eq. 11) is ``width``.

    Any ``nu`` in ``[c / width, c / (width - 1))`` with ``c = ln(1/(1-k))`` works;
    we take ``c / (width - 1/2)``, away from both ends. For example the paper's
    starting rate 0.01 gives 231 neurons at k = 0.9 (Appendix C.1 says "approximately 256").
    """
    check_width(width, "width")
    check_k(k)
    return -math.log1p(-k) / (width - 0.5)
