"""The loss: minus the evidence lower bound of an adaptive MLP (AWNN, Sec. 3, Eq. 13).

Eq. 13 at the first-order point of the variational distributions
(``lambda = nu``, ``theta = rho``)::

    -ELBO = -(N / M) sum_{i in batch} log p(y_i | x_i; rho, nu)     predictive
            - sum_{l, n <= D_l} log p(rho_ln) / q(rho_ln)            weight prior (Eqs. 4, 10)
            - sum_l log p(nu_l) / q(nu_l)                            width prior (Eqs. 3, 8)

with Gaussian priors ``p(rho) = N(0, sigma_theta)`` and ``p(lambda_l) = N(mu, sigma)``
(:class:`RatePrior`; annealed in Sec. 5.3 by :class:`RatePriorSchedule`).
:func:`negative_elbo` computes the terms (:class:`ELBOTerms`); :class:`ELBOLoss` is
the same as a ``loss_fn`` for :func:`hacn_core.engine.training.fit`. Outputs may have
any leading shape: ``(B, T, C)`` logits with ``(B, T)`` targets count ``B * T``
examples, like their flattened ``(B * T, C)`` and ``(B * T,)``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from hacn_core.awnn import fast_cpp
from hacn_core.awnn.checks import check_choice
from hacn_core.awnn.fast_store import AdaptiveLinear
from hacn_core.awnn.mlp import AdaptiveMLP, adaptive_mlps

#: ``categorical``: logits and integer targets; ``gaussian``: a mean with a fixed noise std
LIKELIHOODS: tuple[str, ...] = ("categorical", "gaussian")
#: how :class:`RatePriorSchedule` anneals the prior's std
INTERPOLATIONS: tuple[str, ...] = ("linear", "geometric")
#: the fields of :class:`ELBOTerms`, in order
ELBO_TERMS: tuple[str, ...] = ("total", "predictive", "weight_prior", "width_prior")


# ---------------------------------------------------------------------------
# The priors
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class RatePrior:
    """Gaussian prior ``p(lambda_l) = N(mu, sigma)`` on every rate (Eq. 3), ``sigma`` a std."""

    mu: float
    sigma: float

    def __post_init__(self) -> None:
        if not (isinstance(self.sigma, (int, float)) and self.sigma > 0):
            raise ValueError(f"sigma={self.sigma!r} must be > 0 (a standard deviation)")
        if not (isinstance(self.mu, (int, float)) and math.isfinite(self.mu)):
            raise ValueError(f"mu={self.mu!r} must be a finite number")


@dataclass(frozen=True)
class RatePriorSchedule:
    """The annealed rate prior of the compression experiment (Sec. 5.3, Fig. 5).

    Uninformative (``None``) before ``start_epoch``; from there ``N(mu, sigma)``
    with ``sigma`` going from ``sigma_start`` to ``sigma_end`` at ``end_epoch``
    (``linear`` or ``geometric`` interpolation), constant afterwards. Defaults:
    introduced at epoch 1000 as ``N(0.05, 1)``, annealed to ``sigma = 0.1`` at 2500.
    """

    mu: float = 0.05
    sigma_start: float = 1.0
    sigma_end: float = 0.1
    start_epoch: int = 1000
    end_epoch: int = 2500
    interpolation: str = "linear"

    def __post_init__(self) -> None:
        check_choice(self.interpolation, INTERPOLATIONS, "interpolation")
        RatePrior(self.mu, self.sigma_start)
        RatePrior(self.mu, self.sigma_end)
        if not (0 <= self.start_epoch <= self.end_epoch):
            raise ValueError(f"start_epoch={self.start_epoch}, end_epoch={self.end_epoch}: need 0 <= start_epoch <= end_epoch")

    def __call__(self, epoch: int) -> RatePrior | None:
        if epoch < self.start_epoch:
            return None
        span = self.end_epoch - self.start_epoch
        t = 1.0 if span == 0 else min(1.0, (epoch - self.start_epoch) / span)
        if self.interpolation == "linear":
            sigma = self.sigma_start + t * (self.sigma_end - self.sigma_start)
        else:
            sigma = self.sigma_start * (self.sigma_end / self.sigma_start) ** t
        return RatePrior(self.mu, sigma)


# ---------------------------------------------------------------------------
# Eq. 13: the terms
# ---------------------------------------------------------------------------

_ABSENT_TERMS: dict[torch.dtype, Tensor] = {}


def _absent_term(output: Tensor) -> Tensor:
    """The 0-d zero of a prior that is not in the loss. On the CPU one tensor per dtype is
    shared by all calls (a new one costs an op per training step, some 1% of a step of the
    paper's MLPs); elsewhere a fresh one."""
    if not output.is_cpu:
        return output.new_zeros(())
    zero = _ABSENT_TERMS.get(output.dtype)
    if zero is None:
        zero = _ABSENT_TERMS[output.dtype] = torch.zeros((), dtype=output.dtype)
    return zero


@dataclass(slots=True)
class ELBOTerms:
    """The negative ELBO of Eq. 13, term by term (each a 0-d tensor to minimise).

    ``predictive = (N/M) sum_batch -log p(y|x)``; ``weight_prior = -sum log p(rho)/q(rho)``
    over the active weights; ``width_prior = -sum_l log p(nu_l)/q(nu_l)``;
    ``total`` their sum. The term of a prior left out is zero (on the CPU one shared
    tensor: read the terms, do not modify them in place).
    """

    total: Tensor
    predictive: Tensor
    weight_prior: Tensor
    width_prior: Tensor

    def as_dict(self) -> dict[str, float]:
        """Plain floats for logging."""
        return {k: float(getattr(self, k).detach()) for k in ELBO_TERMS}


def awnn_parameters(model: nn.Module) -> list[Tensor]:
    """The active ``rho`` (biases and weights) of every :class:`AdaptiveLinear` in ``model`` (Eq. 13)."""
    if type(model) is AdaptiveMLP and model._own_modules_only():  # no walk over the modules (per step)
        return [lin._parameters["rho"] for lin in model._modules["layers"]._modules.values()]
    return [m.rho for m in model.modules() if isinstance(m, AdaptiveLinear)]


def raw_rate_parameters(model: nn.Module) -> list[Tensor]:
    """The raw rates ``raw_rate`` (``nu = softplus(raw)``) of every adaptive MLP in ``model``, in module order."""
    return [m._parameters["raw_rate"] for m in adaptive_mlps(model)]


def rate_parameters(model: nn.Module) -> list[Tensor]:
    """The rates ``nu_l`` of every adaptive MLP in ``model`` (differentiable)."""
    return [nu for m in adaptive_mlps(model) for nu in m.rates().unbind()]


class PriorTermsFunction(torch.autograd.Function):
    """The two priors of Eq. 13 in closed form, as one autograd node (the C++ node
    ``prior_terms`` of ``hacn_core/awnn/csrc/awnn_fused.cpp`` is the same, op for op).

    Forward: the weight prior ``w = sum_p sum(p^2) / (2 sigma_theta^2) [+ n log sigma_theta]
    [/ N]`` and the width prior ``r = sum_l (nu_l - mu)^2 / (2 sigma^2) [+ L log sigma] [/ N]``
    with ``nu = softplus(raw)``, by the ops of the autograd composition
    (``closed_form_priors=False`` of :func:`negative_elbo`) and so with its values. Backward:
    the closed forms ``dw/dp = p / sigma_theta^2`` (a weight decay on the active block) and
    ``dr/draw = (nu - mu) / sigma^2 * sigmoid(raw)``, computed by the ops autograd's backward
    of that composition runs (the division by the scalar, ``pow``'s backward ``g * (2 p)``,
    ``softplus_backward``), so the gradients are the same bit for bit - without building
    and walking a dozen autograd nodes per step.

    ``apply(n_rho, w_denom, w_const, r_mu, r_denom, r_const, per_sample_n, constants, *rhos_and_raws)``;
    a denominator ``2 sigma^2`` of 0 means that prior is absent; ``per_sample_n`` is ``N``
    or 0. Returns ``(w, r)``.
    """

    @staticmethod
    def forward(ctx, n_rho: int, w_denom: float, w_const: float, r_mu: float, r_denom: float, r_const: float,
                per_sample_n: float, constants: bool, *tensors: Tensor):
        rhos, raws = tensors[:n_rho], tensors[n_rho:]
        like = tensors[0]
        if w_denom > 0 and rhos:
            w = torch.stack([p.pow(2).sum() for p in rhos]).sum().div(w_denom)
            if constants:
                w = w.add(w_const)
            if per_sample_n > 0:
                w = w.div(per_sample_n)
        else:
            w = like.new_zeros(())
        if r_denom > 0 and raws:
            nus = [F.softplus(raw) for raw in raws]
            d = (nus[0] if len(nus) == 1 else torch.cat(nus)).sub(r_mu)  # cat of one tensor is a copy
            r = d.pow(2).sum().div(r_denom)
            if constants:
                r = r.add(r_const)
            if per_sample_n > 0:
                r = r.div(per_sample_n)
        else:
            d = like.new_zeros((0,))
            r = like.new_zeros(())
        ctx.save_for_backward(*tensors, d)
        ctx.args = (n_rho, w_denom, r_denom, per_sample_n)
        return w, r

    @staticmethod
    def backward(ctx, gw: Tensor | None, gr: Tensor | None):
        n_rho, w_denom, r_denom, per_sample_n = ctx.args
        *tensors, d = ctx.saved_tensors
        need = ctx.needs_input_grad[8:]
        out: list[Tensor | None] = [None] * len(tensors)
        if w_denom > 0 and gw is not None:
            g = gw.div(per_sample_n) if per_sample_n > 0 else gw  # the constant's add passes it on
            # pow's backward is grad * (2 * p); p * (2 * grad) is the same product (doubling is exact), one op
            g2 = g.div(w_denom).mul(2.0)
            for i in range(n_rho):
                if need[i]:
                    out[i] = tensors[i].mul(g2)
        if r_denom > 0 and gr is not None and len(tensors) > n_rho:
            g = gr.div(per_sample_n) if per_sample_n > 0 else gr
            gd = d.mul(g.div(r_denom).mul(2.0))  # through the subtraction (passes) and the concatenation (slices)
            offset = 0
            for i in range(n_rho, len(tensors)):
                raw = tensors[i]
                n = raw.numel()
                if need[i]:
                    out[i] = torch.ops.aten.softplus_backward(gd.narrow(0, offset, n).view(raw.shape), raw, 1, 20)
                offset += n
        return (None,) * 8 + tuple(out)


def prior_terms(rhos: Sequence[Tensor], raws: Sequence[Tensor], *, sigma_theta: float | None,
                rate_prior: RatePrior | None, include_constants: bool, per_sample_n: int) -> tuple[Tensor, Tensor]:
    """``(weight_prior, width_prior)`` of Eq. 13 by :class:`PriorTermsFunction` (or its C++ twin, with the
    C++ node of :mod:`hacn_core.awnn.fast_cpp`). ``per_sample_n``: ``N`` to divide by, or 0."""
    w_denom = 0.0 if sigma_theta is None or not rhos else 2.0 * sigma_theta**2
    w_const = sum(p.numel() for p in rhos) * math.log(sigma_theta) if w_denom and include_constants else 0.0
    if rate_prior is None or not raws:
        r_mu = r_denom = r_const = 0.0
    else:
        r_mu, r_denom = float(rate_prior.mu), 2.0 * rate_prior.sigma**2
        r_const = sum(raw.numel() for raw in raws) * math.log(rate_prior.sigma) if include_constants else 0.0
    ext = fast_cpp.module()
    if ext is not None:
        w, r = ext.prior_terms(list(rhos), list(raws), w_denom, w_const, r_mu, r_denom, r_const,
                               float(per_sample_n), include_constants)
        return w, r
    return PriorTermsFunction.apply(len(rhos), w_denom, w_const, r_mu, r_denom, r_const, float(per_sample_n),
                                    include_constants, *rhos, *raws)


def negative_elbo(model: nn.Module, output: Tensor, target: Tensor, *, n_train: int,
                  likelihood: str = "categorical", sigma_theta: float | None = None,
                  rate_prior: RatePrior | None = None, include_constants: bool = True,
                  per_sample: bool = False, ignore_index: int | None = None, noise_std: float = 1.0,
                  weight_params: Iterable[Tensor] | None = None, closed_form_priors: bool = True) -> ELBOTerms:
    """Eq. 13 as a loss: minus the ELBO at the first-order point ``lambda = nu, theta = rho``.

    * predictive: ``(N/M) sum_{i in batch} -log p(y_i | x_i)`` with ``N = n_train``
      (the true training-set size, counted in the same units as the batch's ``M``
      examples) - the mini-batch rescaling of Sec. 3. Every position of the leading
      dimensions is an example: ``(B, T, C)`` outputs hold ``M = B * T`` of them, as
      their flattened ``(B * T, C)``, so ``N`` counts positions too (tokens, nodes).
      ``likelihood``: ``categorical`` (logits ``(..., C)``, integer targets of shape
      ``(...)``; targets equal to ``ignore_index`` do not count in ``M``) or
      ``gaussian`` (mean ``output`` of shape ``(..., d)`` with ``M`` the size of
      ``...``, or ``(M,)`` scalars; ``target`` of the same shape; std ``noise_std``).
    * weight prior (Eqs. 4, 10): ``-log N(rho; 0, sigma_theta^2) + log N(rho; rho, 1)
      = rho^2 / (2 sigma_theta^2) + log sigma_theta`` summed over the *active* weights
      and biases (``weight_params``, default :func:`awnn_parameters`; inactive neurons
      have ``q = p`` and cancel). ``sigma_theta=None``: uninformative, term 0.
    * width prior (Eqs. 3, 8): the prior is on the rate ``lambda_l``, evaluated at
      ``nu_l``; ``q(nu_l; nu_l) = N(nu_l; nu_l, 1)`` is a constant, so the term is
      ``(nu_l - mu)^2 / (2 sigma^2) + log sigma``. ``rate_prior=None``: uninformative, 0.

    ``include_constants=False`` drops the parameter-free ``log sigma`` (and Gaussian
    ``log 2 pi``) constants, which change the logged value but not the gradient.
    ``per_sample=True`` divides every term by ``N`` (same minimiser; convenient with SGD).

    ``closed_form_priors`` (default): both priors are one autograd node whose backward is
    their closed-form gradient (:class:`PriorTermsFunction`; the same values and gradients
    bit for bit, ``tests/test_awnn_priors.py``); ``False`` builds them from autograd ops
    (differentiable twice; about a dozen more autograd nodes per training step).
    """
    check_choice(likelihood, LIKELIHOODS, "likelihood")
    _check_n_train(n_train)
    if likelihood == "categorical":
        if target.shape != output.shape[:-1]:
            raise ValueError(f"categorical likelihood: target shape {tuple(target.shape)} must be the output's "
                             f"leading shape {tuple(output.shape[:-1])} (logits (..., C), targets (...))")
        logits = output if output.dim() == 2 else output.reshape(-1, output.shape[-1])
        tgt = target if target.dim() == 1 else target.reshape(-1)
        if ignore_index is None:
            nll_sum = F.cross_entropy(logits, tgt, reduction="sum")
            m = tgt.numel()
        else:
            nll_sum = F.cross_entropy(logits, tgt, ignore_index=ignore_index, reduction="sum")
            m = int((tgt != ignore_index).sum())
    else:
        if output.shape != target.shape:
            raise ValueError(f"gaussian likelihood: output shape {tuple(output.shape)} != target shape {tuple(target.shape)}")
        if not noise_std > 0:
            raise ValueError(f"noise_std={noise_std!r} must be > 0")
        nll_sum = 0.5 * ((output - target) / noise_std).pow(2).sum()
        if include_constants:
            nll_sum = nll_sum + output.numel() * (math.log(noise_std) + 0.5 * math.log(2 * math.pi))
        m = math.prod(output.shape[:-1]) if output.dim() >= 2 else (output.shape[0] if output.dim() else 1)
    if m > n_train:
        raise ValueError(f"n_train={n_train} is smaller than the batch's M={m} targets: pass the training-set size")
    scale = 1.0 / max(m, 1) if per_sample else n_train / max(m, 1)
    predictive = nll_sum * scale
    total = predictive
    zero = _absent_term(output)

    weight_prior = zero
    if sigma_theta is not None and not sigma_theta > 0:
        raise ValueError(f"sigma_theta={sigma_theta!r} must be > 0 (or None for an uninformative prior)")
    if closed_form_priors and (sigma_theta is not None or rate_prior is not None):
        params = [] if sigma_theta is None else (awnn_parameters(model) if weight_params is None else list(weight_params))
        raws = [] if rate_prior is None else raw_rate_parameters(model)
        if params or raws:
            w, r = prior_terms(params, raws, sigma_theta=sigma_theta, rate_prior=rate_prior,
                               include_constants=include_constants, per_sample_n=n_train if per_sample else 0)
            # the order of the additions of the autograd composition below
            if params:
                weight_prior = w
                total = total + w
            if raws:
                total = total + r
                return ELBOTerms(total, predictive, weight_prior, r)
        return ELBOTerms(total, predictive, weight_prior, zero)
    if sigma_theta is not None:
        params = awnn_parameters(model) if weight_params is None else list(weight_params)
        if params:
            weight_prior = torch.stack([p.pow(2).sum() for p in params]).sum() / (2.0 * sigma_theta**2)
            if include_constants:
                weight_prior = weight_prior + sum(p.numel() for p in params) * math.log(sigma_theta)
            if per_sample:
                weight_prior = weight_prior / n_train
            total = total + weight_prior

    width_prior = zero
    if rate_prior is not None:
        nus = [m_.rates() for m_ in adaptive_mlps(model)]
        if nus:
            nu = torch.cat(nus)
            width_prior = (nu - rate_prior.mu).pow(2).sum() / (2.0 * rate_prior.sigma**2)
            if include_constants:
                width_prior = width_prior + nu.numel() * math.log(rate_prior.sigma)
            if per_sample:
                width_prior = width_prior / n_train
            total = total + width_prior
    return ELBOTerms(total, predictive, weight_prior, width_prior)


def _check_n_train(n_train: int) -> None:
    if isinstance(n_train, bool) or not isinstance(n_train, int) or n_train < 1:
        raise ValueError(f"n_train={n_train!r} must be the training-set size, a positive int")


# ---------------------------------------------------------------------------
# Eq. 13 as the trainer's loss_fn (Algorithm 1, line 7)
# ---------------------------------------------------------------------------


class ELBOLoss:
    """Eq. 13 as a ``loss_fn`` for :func:`hacn_core.engine.training.fit` (Algorithm 1, line 7).

    ``ELBOLoss(model, n_train, sigma_theta=..., rate_prior=...)(output, target)``
    returns ``negative_elbo(...).total`` with ``N = n_train`` (pass the true
    training-set size); the other keyword arguments go to :func:`negative_elbo`.
    While the model trains (``model.training`` and gradients on, so never during an
    evaluation), every term is added to a running sum; :meth:`pop_means` returns the
    mean of each term over the batches since the last call (what
    :class:`hacn_core.awnn.callback.WidthCallback` logs per epoch) and starts afresh. ``rate_prior`` is an
    attribute, so a :class:`RatePriorSchedule` can replace it during training.

    ``fused_priors=True`` (a named option; default off, which keeps the stored runs' values bit for bit):
    while the model trains, the loss is the predictive term alone and the priors act through their
    closed-form gradients, which the fused node of every adaptive MLP adds in its backward
    (:meth:`AdaptiveMLP.set_fused_prior`: the weight prior as a weight decay ``rho / sigma_theta^2`` on the
    active block, the rate prior as one scalar per layer) - no prior node, no sums in the graph, no
    values computed per step. The gradients equal the default's up to rounding (the sums run in another
    order; ``tests/test_awnn_fast_priors.py``). What changes besides: the loss a training step returns
    (and the trainer's ``train_loss``) is the predictive term; :meth:`pop_means` reports the mean
    predictive term over the batches and the priors' exact values *at the record*, on the parameters
    of that moment (:meth:`prior_values`), instead of their means over the batches; evaluation (eval
    mode or no gradients) returns the exact total. The prior gradients are added once per backward
    with unit weight, so the option assumes one backward of the loss per optimizer step, unscaled
    (``TrainConfig.accumulate == 1``, no gradient scaler), every adaptive MLP fused, no autocast.
    """

    def __init__(self, model: nn.Module, n_train: int, *, sigma_theta: float | None = None,
                 rate_prior: RatePrior | None = None, fused_priors: bool = False, **elbo_kwargs) -> None:
        _check_n_train(n_train)
        if not isinstance(fused_priors, bool):
            raise ValueError(f"fused_priors={fused_priors!r} must be True or False")
        if fused_priors and elbo_kwargs.get("weight_params") is not None:
            raise ValueError("fused_priors=True puts the weight prior on every adaptive MLP's layers; "
                             "weight_params= is allowed only with fused_priors=False")
        if sigma_theta is not None and not sigma_theta > 0:
            raise ValueError(f"sigma_theta={sigma_theta!r} must be > 0 (or None for an uninformative prior)")
        self.model, self.n_train = model, n_train
        self.fused_priors = fused_priors
        self.elbo_kwargs = elbo_kwargs
        self._sigma_theta, self._rate_prior = sigma_theta, rate_prior
        # the categorical likelihood without ignored targets: the predictive term by the ops of
        # negative_elbo without its Python around them (same values, see _predictive_terms)
        kw = elbo_kwargs
        self._lean = (kw.get("likelihood", "categorical") == "categorical" and kw.get("ignore_index") is None
                      and set(kw) <= {"likelihood", "per_sample", "include_constants", "closed_form_priors",
                                      "noise_std", "ignore_index"})
        self._install()
        self._sums: Tensor | None = None
        self._count = 0
        self.last: ELBOTerms | None = None

    # the priors are properties so that a schedule that sets them re-installs the fused gradients
    @property
    def sigma_theta(self) -> float | None:
        return self._sigma_theta

    @sigma_theta.setter
    def sigma_theta(self, value: float | None) -> None:
        self._sigma_theta = value
        self._install()

    @property
    def rate_prior(self) -> RatePrior | None:
        return self._rate_prior

    @rate_prior.setter
    def rate_prior(self, value: RatePrior | None) -> None:
        self._rate_prior = value
        self._install()

    def _install(self) -> None:
        """With ``fused_priors``: hand the priors' gradient coefficients to every adaptive MLP's node."""
        if not self.fused_priors:
            return
        mlps = adaptive_mlps(self.model)
        if not mlps:
            raise ValueError("fused_priors=True needs a model with an AdaptiveMLP (its fused node adds the priors)")
        n = self.n_train if self.elbo_kwargs.get("per_sample", False) else 1
        w_coef = 0.0 if self._sigma_theta is None else 1.0 / (self._sigma_theta**2 * n)
        if w_coef and sum(len(m.layers) for m in mlps) != len(awnn_parameters(self.model)):
            raise ValueError("fused_priors=True: the model has adaptive layers outside an AdaptiveMLP, which the "
                             "fused node cannot reach; use fused_priors=False")
        rp = self._rate_prior
        mu, r_coef = (0.0, 0.0) if rp is None else (float(rp.mu), 1.0 / (rp.sigma**2 * n))
        for m in mlps:
            m.set_fused_prior((w_coef, mu, r_coef))

    def prior_values(self) -> tuple[float, float]:
        """``(weight_prior, width_prior)`` of Eq. 13 on the current parameters, exactly as the loss computes
        them (0 for a prior left out), without autograd."""
        kw = self.elbo_kwargs
        params = [] if self._sigma_theta is None else awnn_parameters(self.model)
        raws = [] if self._rate_prior is None else raw_rate_parameters(self.model)
        if not params and not raws:
            return 0.0, 0.0
        with torch.no_grad():
            w, r = prior_terms(params, raws, sigma_theta=self._sigma_theta, rate_prior=self._rate_prior,
                               include_constants=kw.get("include_constants", True),
                               per_sample_n=self.n_train if kw.get("per_sample", False) else 0)
        return (float(w) if params else 0.0), (float(r) if raws else 0.0)

    def _predictive_terms(self, output: Tensor, target: Tensor) -> ELBOTerms | None:
        """The terms without priors by the ops of :func:`negative_elbo` (``nll_sum * scale``), for a
        categorical output ``(..., C)`` with targets ``(...)`` (the tokens ``(B, T, C)`` of a Transformer
        flattened as negative_elbo flattens them) whose input negative_elbo would accept; None for
        anything else."""
        if not self._lean or output.dim() < 2 or target.shape != output.shape[:-1]:
            return None
        if output.dim() > 2:
            output, target = output.reshape(-1, output.shape[-1]), target.reshape(-1)
        m = target.shape[0]
        if m > self.n_train or m == 0:
            return None  # negative_elbo says what is wrong
        scale = 1.0 / m if self.elbo_kwargs.get("per_sample", False) else self.n_train / m
        predictive = F.cross_entropy(output, target, reduction="sum") * scale
        zero = _absent_term(output)
        return ELBOTerms(predictive, predictive, zero, zero)

    def terms(self, output: Tensor, target: Tensor) -> ELBOTerms:
        """All terms of Eq. 13 for one batch (nothing is recorded)."""
        if self._sigma_theta is None and self._rate_prior is None:
            lean = self._predictive_terms(output, target)
            if lean is not None:
                return lean
        return negative_elbo(self.model, output, target, n_train=self.n_train, sigma_theta=self.sigma_theta,
                             rate_prior=self.rate_prior, **self.elbo_kwargs)

    def __call__(self, output: Tensor, target: Tensor) -> Tensor:
        if self.fused_priors and self.model.training and torch.is_grad_enabled():
            return self._fused_step(output, target)
        terms = self.terms(output, target)
        if self.model.training and torch.is_grad_enabled():
            self.last = terms
            sums = self._sums
            with torch.no_grad():
                if self._sigma_theta is None and self._rate_prior is None and (sums is None or sums.dim() == 0):
                    # no prior: total is the predictive term and the priors are 0, so one running sum
                    # (0-d) stands for all four; pop_means spreads it out, with the same float32 values
                    p = terms.predictive
                    p = p.detach() if p.dtype == torch.float32 else p.float()
                    self._sums = p if sums is None else sums + p
                else:  # one op per step instead of a detach and a cast per term
                    row = torch.stack([terms.total, terms.predictive, terms.weight_prior, terms.width_prior])
                    if row.dtype != torch.float32:
                        row = row.float()
                    self._sums = row if sums is None else self._four_sums() + row
            self._count += 1
        return terms.total

    def _four_sums(self) -> Tensor:
        """The running sums as the four terms (a 0-d sum of a run without priors: total = predictive, priors 0)."""
        s = self._sums
        if s.dim() == 0:
            zero = s.new_zeros(())
            s = torch.stack([s, s, zero, zero])
        return s

    def _fused_step(self, output: Tensor, target: Tensor) -> Tensor:
        """A training step with ``fused_priors``: the predictive term (the node adds the priors' gradients)."""
        if torch.is_autocast_enabled(output.device.type):
            raise ValueError("fused_priors=True does not run under autocast (the model then runs plain autograd "
                             "ops, which do not add the priors' gradients); use fused_priors=False")
        terms = self._predictive_terms(output, target)
        if terms is None:
            terms = negative_elbo(self.model, output, target, n_train=self.n_train, sigma_theta=None,
                                  rate_prior=None, **self.elbo_kwargs)
        self.last = terms
        p = terms.predictive
        with torch.no_grad():
            p = p.detach() if p.dtype == torch.float32 else p.float()
            self._sums = p if self._sums is None else self._sums + p
        self._count += 1
        return terms.total

    def pop_means(self) -> dict[str, float]:
        """Mean of each term over the training batches since the last call (NaN if none); with
        ``fused_priors``, the mean predictive term and the priors' values now (:meth:`prior_values`)."""
        if self.fused_priors and self._sums is not None and self._sums.dim() == 0:
            pred = float(self._sums) / self._count
            w, r = self.prior_values()
            self._sums, self._count = None, 0
            return {"total": pred + w + r, "predictive": pred, "weight_prior": w, "width_prior": r}
        if self._sums is None:
            means = {k: float("nan") for k in ELBO_TERMS}
        else:
            means = dict(zip(ELBO_TERMS, (self._four_sums() / self._count).tolist(), strict=True))
        self._sums, self._count = None, 0
        return means

    def state_dict(self) -> dict[str, object]:
        """The running sums of the epoch in progress (empty if none), for a checkpoint."""
        if self._sums is None:
            return {}
        sums = self._sums if self.fused_priors else self._four_sums()
        return {"sums": sums.tolist(), "count": self._count}

    def load_state_dict(self, state: dict[str, object]) -> None:
        """Restore the running sums of :meth:`state_dict` (an empty dict leaves them alone)."""
        if state:
            self._sums = torch.tensor(state["sums"], dtype=torch.float32)  # a float (fused_priors) or 4 terms
            self._count = int(state["count"])
