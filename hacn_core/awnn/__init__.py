"""Adaptive Width Neural Networks (Errica et al., "Adaptive Width Neural Networks"): each layer learns its width.

The paper's equations, and where they are implemented::

    f(x; nu) = e^{-nu x} - e^{-nu (x + 1)},  x = 0, 1, 2, ...     Eq. 12  distribution.discretized_exponential
    D = min{ D : sum_{x < D} f(x; nu) >= k }                       Eq. 11  distribution.quantile_width
    h_j = sigma(W h_prev + b)_j * f(j; nu)                         Eq. 14  importance.importances,
                                                                           mlp.AdaptiveMLP.intermediates
    std(W^l) from the importances of layer l - 1 (kaiming+)        Thm 3.1 init.init_std
    -ELBO = -log p(Y | X, theta) - log p(theta) - log p(nu)        Eq. 13  elbo.negative_elbo
    D_l <- quantile of f(.; nu_l) before every step                Alg. 1  mlp.AdaptiveMLP.update_width,
                                                                           callback.WidthCallback

Modules, the equations first:

* :mod:`~hacn_core.awnn.distribution` (Eqs. 11-12), :mod:`~hacn_core.awnn.importance`
  (Eq. 14), :mod:`~hacn_core.awnn.init` (Theorem 3.1), :mod:`~hacn_core.awnn.elbo` (Eq. 13);
* :mod:`~hacn_core.awnn.mlp`: the model (:class:`AWNNConfig`, :class:`AdaptiveMLP`,
  Algorithm 1, truncation of Sec. 5.4); :mod:`~hacn_core.awnn.callback`: Algorithm 1
  inside :func:`hacn_core.engine.training.fit`; :mod:`~hacn_core.awnn.baseline`: the
  fixed-width MLP of Table 1;
* the fast path: :mod:`~hacn_core.awnn.fast_store` (layers on stores with spare
  capacity that keep the optimizer state across width changes),
  :mod:`~hacn_core.awnn.fast_node` (the whole MLP as one autograd node) and
  :mod:`~hacn_core.awnn.fast_cpp` (the same node in C++, and the choice between them).

The adaptive MLP takes inputs of any leading shape ``(..., in_dim)`` (a batch, the
tokens of a transformer, the nodes of a graph). Studies (``hacn_core.awnn.studies``)
train these networks for the AWNN chapters.
"""

from hacn_core.awnn.callback import WidthCallback, WidthTrace
from hacn_core.awnn.distribution import (
    discretized_exponential,
    importance_mass,
    quantile_width,
    rate_for_width,
    rate_from_raw,
    raw_from_rate,
)
from hacn_core.awnn.elbo import (
    ELBO_TERMS,
    INTERPOLATIONS,
    LIKELIHOODS,
    ELBOLoss,
    ELBOTerms,
    RatePrior,
    RatePriorSchedule,
    awnn_parameters,
    negative_elbo,
    rate_parameters,
)
from hacn_core.awnn.fast_store import AdaptiveLinear, repoint_optimizer
from hacn_core.awnn.importance import IMPORTANCE_NORMS, importance_log_shift, importance_scale, importances
from hacn_core.awnn.init import ACTIVATIONS, INITS, activation_gain, init_std
from hacn_core.awnn.mlp import (
    DEFAULT_RATE,
    GROW_INITS,
    AdaptiveMLP,
    AWNNConfig,
    adaptive_mlps,
    model_widths,
    truncate,
    update_widths,
)

__all__ = [
    "activation_gain",
    "ACTIVATIONS",
    "adaptive_mlps",
    "AdaptiveLinear",
    "AdaptiveMLP",
    "awnn_parameters",
    "AWNNConfig",
    "DEFAULT_RATE",
    "discretized_exponential",
    "ELBO_TERMS",
    "ELBOLoss",
    "ELBOTerms",
    "GROW_INITS",
    "importance_log_shift",
    "importance_mass",
    "IMPORTANCE_NORMS",
    "importance_scale",
    "importances",
    "init_std",
    "INITS",
    "INTERPOLATIONS",
    "LIKELIHOODS",
    "model_widths",
    "negative_elbo",
    "quantile_width",
    "rate_for_width",
    "rate_from_raw",
    "rate_parameters",
    "RatePrior",
    "RatePriorSchedule",
    "raw_from_rate",
    "repoint_optimizer",
    "truncate",
    "update_widths",
    "WidthCallback",
    "WidthTrace",
]
