"""Adaptive Width Neural Networks (Errica et al.): each layer learns its width.

The paper's equations, and where they are implemented::

    f(x; nu) = e^{-nu x} - e^{-nu (x + 1)},  x = 0, 1, 2, ...     Eq. 12  discretized_exponential
    D = min{ D : sum_{x < D} f(x; nu) >= k }                       Eq. 11  quantile_width
    h_j = sigma(W h_prev + b)_j * f(j; nu)                         Eq. 14  AdaptiveMLP.intermediates
    std(W^l) from the importances of layer l - 1 (kaiming+)        Thm 3.1 init_std
    -ELBO = -log p(Y | X, theta) - log p(theta) - log p(nu)        Eq. 13  negative_elbo

Studies (``hacn_core.awnn.studies``) train these networks for the AWNN chapters;
the model, its width update and the fast path live in :mod:`hacn_core.awnn.model`.
"""

from hacn_core.awnn.model import (
    ACTIVATIONS,
    DEFAULT_RATE,
    ELBO_TERMS,
    GROW_INITS,
    IMPORTANCE_NORMS,
    INITS,
    INTERPOLATIONS,
    LIKELIHOODS,
    AdaptiveLinear,
    AdaptiveMLP,
    AWNNConfig,
    ELBOLoss,
    ELBOTerms,
    RatePrior,
    RatePriorSchedule,
    WidthCallback,
    activation_gain,
    adaptive_mlps,
    awnn_parameters,
    discretized_exponential,
    importance_log_shift,
    importance_mass,
    importance_scale,
    importances,
    init_std,
    model_widths,
    negative_elbo,
    quantile_width,
    rate_for_width,
    rate_from_raw,
    rate_parameters,
    raw_from_rate,
    repoint_optimizer,
    truncate,
    update_widths,
)
