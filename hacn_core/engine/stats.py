"""Statistics the chapters and the ledger share: a mean with its confidence interval, cell means, the ratio of
two paired variances, rounding to significant digits, and the verdicts a chapter reads off a difference's
interval.

Our value of a paper item is the mean over the stored runs (one per seed) with
the half-width of a Student-t 95% confidence interval; one run has no interval.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from hacn_core.engine.results import RunResult


@dataclass(frozen=True)
class Estimate:
    """Mean of ``n`` values with the half-width of its 95% confidence interval."""

    mean: float
    half_width: float
    n: int

    def __str__(self) -> str:
        if self.n == 1 or not math.isfinite(self.half_width):
            return f"{self.mean:.4g}"
        return f"{self.mean:.4g} ± {self.half_width:.2g}"


def t_quantile(q: float, df: float) -> float:
    """The ``q`` quantile of Student's t on ``df`` degrees of freedom: ``scipy.stats.t.ppf(q, df)``, bit for bit.

    Inside its domain (``0 < q < 1``, ``df > 0``) that is ``scipy.special.stdtrit(df, q)``, which is what
    ``t.ppf`` computes there (``* scale + loc`` with scale 1 and loc 0: the ``+ 0.0`` below, which turns a
    -0.0 into 0.0 as it does). Importing ``scipy.special`` alone costs a fifth of the CPU time of
    ``scipy.stats`` (about 0.3 s against 1.5 s), which the ledger and every chapter that prints an interval
    would otherwise pay. Outside the domain ``t.ppf`` itself answers (nan, or +-inf at the ends).
    """
    if 0 < q < 1 and df > 0:
        from scipy.special import stdtrit

        return float(stdtrit(df, q)) + 0.0
    from scipy import stats

    return float(stats.t.ppf(q, df=df))


def estimate(values: Sequence[float], confidence: float = 0.95) -> Estimate:
    """Mean and Student-t confidence half-width of ``values`` (``nan`` width for one value)."""
    x = np.asarray(values, dtype=float)
    if x.size == 0:
        raise ValueError("values must not be empty")
    if x.size == 1:
        return Estimate(float(x[0]), float("nan"), 1)
    sem = x.std(ddof=1) / math.sqrt(x.size)
    t = t_quantile(0.5 + confidence / 2, x.size - 1)
    return Estimate(float(x.mean()), float(t * sem), int(x.size))


def difference(a: Sequence[float], b: Sequence[float], confidence: float = 0.95) -> Estimate:
    """``mean(a) - mean(b)`` with Welch's confidence half-width (unequal variances, Welch-Satterthwaite
    degrees of freedom); ``n`` is the smaller sample. ``nan`` width when either side has one value, or
    when both have zero spread (then the difference is exact: width 0)."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.size == 0 or y.size == 0:
        raise ValueError("a and b must not be empty")
    sx = float(x.std(ddof=1)) if x.size > 1 else float("nan")
    sy = float(y.std(ddof=1)) if y.size > 1 else float("nan")
    return difference_from_summary(float(x.mean()), sx, x.size, float(y.mean()), sy, y.size, confidence)


def difference_from_summary(mean_a: float, std_a: float, n_a: int, mean_b: float, std_b: float, n_b: int,
                            confidence: float = 0.95) -> Estimate:
    """:func:`difference` from each side's mean, sample std and count (a paper's "mean (std)" over n runs)."""
    if n_a < 1 or n_b < 1:
        raise ValueError(f"n_a={n_a} and n_b={n_b} must both be at least 1")
    diff = float(mean_a - mean_b)
    n = int(min(n_a, n_b))
    if n_a < 2 or n_b < 2:
        return Estimate(diff, float("nan"), n)
    vx, vy = std_a**2 / n_a, std_b**2 / n_b
    if vx + vy == 0:
        return Estimate(diff, 0.0, n)
    df = (vx + vy) ** 2 / (vx**2 / (n_a - 1) + vy**2 / (n_b - 1))
    t = t_quantile(0.5 + confidence / 2, df)
    return Estimate(diff, float(t * math.sqrt(vx + vy)), n)


def pooled_std(groups: Sequence[Sequence[float]]) -> tuple[float, int]:
    """The pooled within-group sample std of ``groups`` and its degrees of freedom ``sum(n_g - 1)``, over the
    groups of two or more values (``(nan, 0)`` when none has two): the seed-to-seed spread of several cells
    that share one noise level, for comparing cells that have one seed each."""
    ss, df = 0.0, 0
    for g in groups:
        x = np.asarray(g, dtype=float)
        if x.size >= 2:
            ss += float(((x - x.mean()) ** 2).sum())
            df += x.size - 1
    return (math.sqrt(ss / df), df) if df else (float("nan"), 0)


def difference_pooled(a: Sequence[float], b: Sequence[float], std: float, df: int,
                      confidence: float = 0.95) -> Estimate:
    """``mean(a) - mean(b)`` with a Student-t half-width from a pooled std (:func:`pooled_std`) on ``df`` degrees
    of freedom: ``t * std * sqrt(1/n_a + 1/n_b)``. Unlike :func:`difference` it gives an interval when a side
    has one value, borrowing the spread of the cells that have more; ``nan`` width when ``df`` is 0."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.size == 0 or y.size == 0:
        raise ValueError("a and b must not be empty")
    diff, n = float(x.mean() - y.mean()), int(min(x.size, y.size))
    if df < 1 or not math.isfinite(std):
        return Estimate(diff, float("nan"), n)
    t = t_quantile(0.5 + confidence / 2, df)
    return Estimate(diff, float(t * std * math.sqrt(1 / x.size + 1 / y.size)), n)


def signed(d: Estimate, scale: float = 1.0, digits: int = 1) -> str:
    """``+x ± w`` of a difference estimate (its 95% interval) times ``scale``; ``+x (n=1)`` without one.
    A mean that rounds to zero prints as ``+0.0``, never ``-0.0``."""
    mean = round(scale * d.mean, digits) + 0.0  # adding 0.0 turns -0.0 into 0.0
    if not math.isfinite(d.half_width):
        return f"{mean:+.{digits}f} (n=1)"
    return f"{mean:+.{digits}f} ± {scale * d.half_width:.{digits}f}"


def sign_verdict(d: Estimate, threshold: float = 0.0) -> bool | None:
    """True if the whole 95% interval of a difference is above ``threshold`` (default 0), False if it is
    below, None if it straddles it (or there is no interval: one value). A negative threshold judges
    "not worse by more than": ``sign_verdict(d, -0.005)`` holds when the difference is surely above -0.005."""
    if not math.isfinite(d.half_width):
        return None
    if d.mean - d.half_width > threshold:
        return True
    if d.mean + d.half_width < threshold:
        return False
    return None


def within_verdict(d: Estimate, margin: float) -> bool | None:
    """Whether two things "match": True if the whole 95% interval of their difference lies within
    ``[-margin, margin]``, False if it lies wholly outside it, None otherwise (or with no interval)."""
    if margin <= 0:
        raise ValueError(f"margin={margin!r} must be > 0")
    if not math.isfinite(d.half_width):
        return None
    low, high = d.mean - d.half_width, d.mean + d.half_width
    if -margin <= low and high <= margin:
        return True
    if high < -margin or low > margin:
        return False
    return None


@dataclass(frozen=True)
class VarianceRatio:
    """``var(a) / var(b)`` of paired samples with its confidence interval ``[low, high]`` over ``n`` pairs."""

    ratio: float
    low: float
    high: float
    n: int

    def __str__(self) -> str:
        return f"{self.ratio:.2f} [{self.low:.2f}, {self.high:.2f}]"


def paired_variance_ratio(a: Sequence[float], b: Sequence[float], confidence: float = 0.95) -> VarianceRatio:
    """The ratio of the variances of two paired samples (``a[i]`` and ``b[i]`` measured on the same fold or
    seed) with the Pitman-Morgan confidence interval, which allows for their correlation ``r``.

    ``var(a) = theta var(b)`` is tested by the correlation of ``a / sqrt(theta) + b`` and
    ``a / sqrt(theta) - b``, which is zero exactly then (Pitman 1939, Morgan 1939); inverting the t test of
    that correlation (``n - 2`` degrees of freedom) gives the interval
    ``F (K -+ sqrt(K^2 - 1))`` with ``F`` the ratio of the sample variances and
    ``K = 1 + 2 (1 - r^2) t^2 / (n - 2)``. Needs three pairs or more and spread in both samples.
    """
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"a and b must be paired: shapes {x.shape} and {y.shape}")
    if x.size < 3:
        raise ValueError(f"a paired variance ratio needs 3 pairs or more, got {x.size}")
    vx, vy = float(x.var(ddof=1)), float(y.var(ddof=1))
    if vx == 0 or vy == 0:
        raise ValueError("a paired variance ratio needs spread in both samples")
    r = float(np.corrcoef(x, y)[0, 1])
    t = t_quantile(0.5 + confidence / 2, x.size - 2)
    k = 1 + 2 * (1 - r * r) * t * t / (x.size - 2)
    f, root = vx / vy, math.sqrt(k * k - 1)
    return VarianceRatio(f, f * (k - root), f * (k + root), int(x.size))


def round_significant(values: Sequence[float], digits: int) -> list[float]:
    """``values`` rounded to ``digits`` significant digits (non-finite values unchanged).

    For the curves a run stores: six digits keep every plotted value and make the
    stored file several times smaller than the full float repr.
    """
    if digits < 1:
        raise ValueError(f"digits={digits} must be >= 1")
    return [float(f"{v:.{digits}g}") if math.isfinite(v) else v for v in values]


def cell_means(results: Sequence[RunResult], metric: str, keys: Sequence[str]) -> dict[tuple, float]:
    """Mean of ``metric`` over the runs of each cell, a cell being the values of ``keys`` in the config.

    Runs without ``metric`` are skipped (e.g. ``mean_k`` of ungated networks).
    """
    values: dict[tuple, list[float]] = {}
    for r in results:
        if metric in r.metrics:
            values.setdefault(tuple(r.config[k] for k in keys), []).append(float(r.metrics[metric]))
    return {cell: sum(v) / len(v) for cell, v in values.items()}
