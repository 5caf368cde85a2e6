"""AWNN: compressing during training (Fig. 5) and after training (Fig. 6) (Errica et al.).

Two studies, one experiment (``awnn-compress``).

``study="anneal"`` (Sec. 5.3, Fig. 5: online compression by an informative rate prior)
    SpiralHard, one hidden layer (the paper's ~800 neurons are what a single layer
    reaches; chapter 2's two-layer net is the Table 1 reading), ReLU6, uninformative
    weight prior (``sigma_theta=None``), chapter 2's optimizer (Adam, lr 0.01, batch
    128), 2,500 epochs. ``rate_prior="annealed"``: from epoch ``prior_start_epoch``
    (1000) every rate gets the prior ``p(lambda_l) = N(0.05, sigma)`` with ``sigma``
    going linearly from 1 to 0.1 at ``prior_end_epoch`` (2500)
    (:class:`~hacn_core.awnn.RatePriorSchedule`). ``rate_prior="none"`` is the
    control: the same run (same seed, same first 1000 epochs bit for bit) without the
    prior, so the book can show the width difference at equal epochs. Per epoch:
    width of the layer, rate, validation and test accuracy, the four terms of Eq. 13
    (epoch means; ``elbo/width_prior`` is Fig. 5's inset) and the rate penalty
    ``sum_l (nu_l - mu)^2 / (2 sigma^2)`` at the end of the epoch (the prior term
    without its constant ``log sigma``). Metrics: total width and test accuracy at the
    prior's start and at the end, and their ratio / difference.

``study="truncate"`` (Sec. 5.4, Fig. 6: post-hoc truncation)
    Spiral, chapter 2's setting (one hidden layer, ReLU6, ``sigma_theta = 10``,
    1,000 epochs). The *final* model is cut to every width ``D - m``,
    ``m = 0 .. D - 1`` neurons removed from the end (:func:`~hacn_core.awnn.truncate`),
    and its test accuracy recorded; :func:`lossless_fraction` is the largest removed
    fraction up to which every cut stays within 0.5 point of the untruncated
    accuracy. Fig. 6 (right): the Eq. 14 activations ``h_j = sigma(.)_j f(j)`` of the
    final model on every test sample, summarised per neuron (mean ``|h_j|`` and
    quantiles, :func:`activation_profile`), with a least-squares exponential fit of
    the mean (:func:`exponential_fit`).

Timing of the prior (a decision)
    "At epoch 1000" is read as: every optimizer step of 0-based epoch 1000 and later
    (i.e. after 1,000 completed epochs) uses the prior, none before;
    :class:`~hacn_core.awnn.WidthCallback` sets the prior for the epoch of the *next*
    step. The
    standard deviation of epoch ``e`` is ``1 + (e - 1000) / 1500 * (0.1 - 1)``
    (linear), so 1 at epoch 1000, 0.55 at 1750 and 0.1 from epoch 2500 on. In the
    stored curves, record ``r`` is taken after ``r`` completed epochs, so the last
    record without the prior is ``r = 1000`` ("before") and ``r = 2500`` is the end.

Two arms (``importance_norm``), as in chapter 2
    ``none`` (Eq. 14 as written, linked to the paper items) and ``active`` (the public
    code's renormalised importances). Both run: on our data Eq. 14 ends far below the
    paper's widths (chapter 2), and the prior's mean 0.05 corresponds to a width of
    ``ceil(ln 10 / 0.05) = 47`` neurons per layer, so whether the prior shrinks or
    grows the network depends on which side of 47 the run stands at epoch 1000.

Data: the shared splits of chapter 2 (``hacn_core.engine.data.synthetic_splits``, our own
generators, radius 1), ``N`` = the true training-set size. Model, trainer and protocol are
:mod:`hacn_core.awnn.studies.common`'s; the chapter's tables and plots are in
:mod:`hacn_core.awnn.studies.compress_report`.

Profiles
    ``paper``: 2 arms x {annealed, control} x 10 seeds on SpiralHard, 2 arms x 10 seeds
    on Spiral. ``book``: the same with :data:`BOOK_ANNEAL_SEEDS` (2) seeds on SpiralHard
    and :data:`BOOK_TRUNCATE_SEEDS` (5) on Spiral. CPU seconds per run at one thread,
    measured on the project's 2-core machine while other jobs ran: SpiralHard Eq. 14
    annealed 147, renormalised annealed 256 (the renormalised arm grows to ~2,500
    neurons before the prior, Eq. 14 to ~850), controls somewhat more (they stay
    wide); Spiral about 20. So ``book`` costs about 34 CPU-minutes and ``paper`` about
    160. ``smoke``: a few epochs with the prior window shrunk to epochs 2-5, one seed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from hacn_core.awnn import paper_items
from hacn_core.awnn import INTERPOLATIONS, AdaptiveMLP, RatePriorSchedule, WidthCallback, truncate
from hacn_core.awnn.studies import tabular
from hacn_core.awnn.studies.common import (
    ARMS,
    START_RATE,
    check_choice,
    elbo_curves,
    fit_adaptive,
    width_and_rate_curves,
)
from hacn_core.engine.registry import Experiment, Link, with_overrides
from hacn_core.engine.results import RunContext
from hacn_core.engine.stats import round_significant
from hacn_core.engine.training import evaluate

if TYPE_CHECKING:  # pragma: no cover
    from hacn_core.engine.dry_run import DryRunPlan

EXPERIMENT_ID = "awnn-compress"
STUDIES: tuple[str, ...] = ("anneal", "truncate")
RATE_PRIORS: tuple[str, ...] = ("annealed", "none")
STUDY_DATASET = {"anneal": "SpiralHard", "truncate": "Spiral"}
#: Sec. 5.3: N(0.05, 1) introduced at epoch 1000, std annealed to 0.1 at 2500, 2500 epochs in all
ANNEAL = {"prior_mu": 0.05, "prior_sigma_start": 1.0, "prior_sigma_end": 0.1, "prior_start_epoch": 1000,
          "prior_end_epoch": 2500, "prior_interpolation": "linear"}
ANNEAL_EPOCHS = 2500
TRUNCATE_EPOCHS = tabular.TASKS["Spiral"]["epochs"]  # Spiral's budget (Table 3): 1000
PAPER_SEEDS = tuple(range(10))  # "retrained 10 times" (Sec. 4)
#: CPU budget of the book run (45 CPU-minutes): the SpiralHard runs cost 150-340 s each, Spiral ~20 s
BOOK_ANNEAL_SEEDS = (0, 1)
BOOK_TRUNCATE_SEEDS = tuple(range(5))
LOSSLESS_TOLERANCE = 0.005  # "without loss": within 0.5 accuracy point of the untruncated model


def compress_config(study: str, seed: int, importance_norm: str = "none", rate_prior: str = "annealed",
                    **overrides: Any) -> dict[str, Any]:
    """One flat run configuration (see the module docstring for every choice)."""
    check_choice("study", study, STUDIES)
    anneal = study == "anneal"
    config = {
        "study": study,
        "dataset": STUDY_DATASET[study],
        "data": "shared",
        "data_seed": 0,
        "input_scale": 1.0,
        "seed": seed,
        "hidden_layers": 1,
        "activation": "relu6",
        "rate_init": START_RATE,
        "k": 0.9,
        "importance_norm": importance_norm,
        "init": "kaiming_plus",
        "grow_init": "normal",
        "sigma_theta": None if anneal else 10.0,  # Sec. 5.3: uninformative p(theta); chapter 2's 10 on Spiral
        "rate_prior": rate_prior if anneal else "none",
        **ANNEAL,
        "optimizer": "adam",
        "lr": 0.01,
        "batch_size": 128,
        "epochs": ANNEAL_EPOCHS if anneal else TRUNCATE_EPOCHS,
    }
    return with_overrides(config, overrides)


def check_config(config: dict[str, Any]) -> None:
    """Refuse a configuration this experiment does not implement (the error names field and allowed values)."""
    checks = {"study": STUDIES, "importance_norm": ARMS, "rate_prior": RATE_PRIORS, "data": ("shared",),
              "prior_interpolation": INTERPOLATIONS, "optimizer": ("adam",)}
    for key, allowed in checks.items():
        check_choice(key, config.get(key), allowed)
    expected = STUDY_DATASET[config["study"]]
    if config["dataset"] != expected:
        raise ValueError(f"dataset={config['dataset']!r} is not allowed for study={config['study']!r}; "
                         f"allowed: {expected}")
    if config["study"] == "truncate" and config["rate_prior"] != "none":
        raise ValueError(f"rate_prior={config['rate_prior']!r} is not allowed for study='truncate'; allowed: none")
    if config["study"] == "truncate" and config["hidden_layers"] != 1:
        raise ValueError(f"hidden_layers={config['hidden_layers']!r} is not allowed for study='truncate'; "
                         "allowed: 1 (Fig. 6 truncates a one-layer MLP)")
    if config["rate_prior"] == "annealed" and not config["prior_end_epoch"] <= config["epochs"]:
        raise ValueError(f"prior_end_epoch={config['prior_end_epoch']} must be <= epochs={config['epochs']}")
    prior_schedule(config)  # validates the prior's numbers


def prior_schedule(config: dict[str, Any]) -> RatePriorSchedule | None:
    """The annealed rate prior of a configuration (Sec. 5.3), ``None`` for the control."""
    if config["rate_prior"] == "none":
        return None
    return RatePriorSchedule(mu=config["prior_mu"], sigma_start=config["prior_sigma_start"],
                             sigma_end=config["prior_sigma_end"], start_epoch=config["prior_start_epoch"],
                             end_epoch=config["prior_end_epoch"], interpolation=config["prior_interpolation"])


def paper_configs() -> list[dict[str, Any]]:
    anneal = [compress_config("anneal", s, arm, prior) for arm in ARMS for prior in RATE_PRIORS for s in PAPER_SEEDS]
    return anneal + [compress_config("truncate", s, arm) for arm in ARMS for s in PAPER_SEEDS]


def book_configs() -> list[dict[str, Any]]:
    anneal = [compress_config("anneal", s, arm, prior) for arm in ARMS for prior in RATE_PRIORS for s in BOOK_ANNEAL_SEEDS]
    return anneal + [compress_config("truncate", s, arm) for arm in ARMS for s in BOOK_TRUNCATE_SEEDS]


SMOKE_ANNEAL = {"epochs": 6, "prior_start_epoch": 2, "prior_end_epoch": 5}


def smoke_configs() -> list[dict[str, Any]]:
    anneal = [compress_config("anneal", 0, arm, prior, **SMOKE_ANNEAL) for arm in ARMS for prior in RATE_PRIORS]
    return anneal + [compress_config("truncate", 0, arm, epochs=3) for arm in ARMS]


# ----------------------------------------------------------------------------- the prior's timing


def rate_penalty(rates: Sequence[float], prior) -> float:
    """``sum_l (nu_l - mu)^2 / (2 sigma^2)``: the width-prior term of Eq. 13 without ``log sigma`` (0 without a prior)."""
    if prior is None:
        return 0.0
    return float(sum((r - prior.mu) ** 2 for r in rates) / (2.0 * prior.sigma**2))


# ----------------------------------------------------------------------------- Fig. 6 helpers


def truncation_curve(model: AdaptiveMLP, test: tuple[torch.Tensor, torch.Tensor]) -> dict[str, list]:
    """Sec. 5.4: test accuracy of the one-hidden-layer ``model`` cut to every width.

    ``removed[m] = m`` neurons removed from the end (``m = 0 .. D - 1``), kept width
    ``D - m``, ``fraction[m] = m / D``, ``test_acc[m]`` the accuracy of
    :func:`~hacn_core.awnn.truncate` ``(model, widths=[D - m])`` (importances of the kept
    neurons unchanged). ``m = 0`` goes through ``truncate`` too, so it is the
    untruncated function.
    """
    if model.n_hidden_layers != 1:
        raise ValueError(f"n_hidden_layers={model.n_hidden_layers}: truncation_curve needs a one-layer MLP (allowed: 1)")
    (d,) = model.widths()
    removed, fraction, acc = [], [], []
    for m in range(d):
        cut = truncate(model, widths=[d - m])
        removed.append(m)
        fraction.append(m / d)
        acc.append(evaluate(cut, test, batch_size=4096)["accuracy"])
    return {"removed": removed, "fraction": fraction, "test_acc": acc}


def lossless_fraction(fractions: Sequence[float], accuracies: Sequence[float],
                      tolerance: float = LOSSLESS_TOLERANCE) -> float:
    """The largest removed fraction ``f`` such that every cut up to ``f`` keeps accuracy
    ``>= acc(0) - tolerance`` (Sec. 5.4's "without loss of accuracy").

    ``fractions`` must start at 0 (the untruncated model) and increase. The first cut
    that loses more than ``tolerance`` ends the lossless range: a later lucky cut does
    not count, because a user who truncates cannot know which cuts are lucky.
    """
    f = np.asarray(fractions, dtype=float)
    a = np.asarray(accuracies, dtype=float)
    if f.size == 0 or f.shape != a.shape:
        raise ValueError(f"fractions ({f.size}) and accuracies ({a.size}) must be non-empty and of equal length")
    if f[0] != 0 or np.any(np.diff(f) <= 0):
        raise ValueError("fractions must start at 0 (the untruncated model) and increase")
    if not tolerance >= 0:
        raise ValueError(f"tolerance={tolerance!r} must be >= 0")
    ok = a >= a[0] - tolerance - 1e-12
    bad = np.flatnonzero(~ok)
    last = (bad[0] - 1) if bad.size else f.size - 1
    return float(f[last])


def activation_profile(model: AdaptiveMLP, x: torch.Tensor, layer: int = 0) -> dict[str, list[float]]:
    """Fig. 6 (right): the Eq. 14 activations ``h_j = sigma(.)_j f(j)`` of hidden layer
    ``layer`` on every row of ``x``, per neuron ``j``: mean ``|h_j|`` and the 5/25/50/75/95%
    quantiles and maximum of ``h_j`` over the samples."""
    with torch.no_grad():
        _, _, hs = model.intermediates(x)
    h = hs[layer].double()
    q = torch.quantile(h, torch.tensor([0.05, 0.25, 0.5, 0.75, 0.95], dtype=h.dtype), dim=0)
    out = {"mean_abs": h.abs().mean(0).tolist(), "max": h.max(0).values.tolist()}
    out.update({f"q{p}": q[i].tolist() for i, p in enumerate((5, 25, 50, 75, 95))})
    return out


def exponential_fit(values: Sequence[float]) -> dict[str, float]:
    """Least-squares fit ``log v_j = log A - b j`` over the positive entries of ``values``.

    Returns ``A``, the decay rate ``b`` (per neuron; compare with the layer's rate
    ``nu``, the decay of the importances ``f(j) ~ e^{-nu j}``), the ``r2`` of the fit in
    log space and ``n_fit``, the number of positive entries used (dead neurons, with
    ``v_j = 0``, are left out).
    """
    v = np.asarray(values, dtype=float)
    j = np.flatnonzero(v > 0)
    if j.size < 2:
        return {"A": float("nan"), "b": float("nan"), "r2": float("nan"), "n_fit": int(j.size)}
    y = np.log(v[j])
    slope, intercept = np.polyfit(j, y, 1)
    resid = y - (intercept + slope * j)
    ss_tot = float(((y - y.mean()) ** 2).sum())
    r2 = 1.0 - float((resid**2).sum()) / ss_tot if ss_tot > 0 else float("nan")
    return {"A": float(math.exp(intercept)), "b": float(-slope), "r2": r2, "n_fit": int(j.size)}


# ----------------------------------------------------------------------------- training


def train_compress(config: dict[str, Any], context: RunContext) -> dict[str, Any]:
    """Train one run of either study and return its metrics and per-epoch curves."""
    check_config(config)
    schedule = prior_schedule(config)
    run = fit_adaptive(config, context, schedule=schedule)
    model, n_train, c = run.model, run.n_train, run.curves
    epochs = [int(round(e)) for e in c["record_epoch"]]
    widths = [int(sum(w)) for w in c["awnn/widths"]]
    rates = c["awnn/rates"]
    curves: dict[str, list] = {"record_epoch": epochs, "val_acc": c["val_acc"], "test_acc": c["test_acc"]}
    curves |= width_and_rate_curves(c, config["hidden_layers"]) | elbo_curves(c)
    # record r follows 0-based epoch r - 1, trained under schedule(r - 1)
    curves["rate_penalty"] = round_significant(
        [rate_penalty(r, schedule(e - 1) if schedule is not None and e > 0 else None)
         for e, r in zip(epochs, rates, strict=True)], 6)
    metrics: dict[str, Any] = {"n_train": n_train, "start_width": widths[0], "final_total_width": widths[-1],
                               "final_test_acc": float(c["test_acc"][-1]), "final_rate": float(rates[-1][0])}
    if config["study"] == "anneal":
        before = epochs.index(min(config["prior_start_epoch"], epochs[-1]))
        metrics |= {
            "width_before": widths[before], "width_after": widths[-1],
            "width_ratio": widths[-1] / widths[before],
            "test_acc_before": float(c["test_acc"][before]), "test_acc_after": float(c["test_acc"][-1]),
            "test_acc_change": float(c["test_acc"][-1] - c["test_acc"][before]),
            "min_test_acc_after_start": float(min(c["test_acc"][before:])),
        }
    else:
        test = run.splits["test"]
        curve = truncation_curve(model, test)
        profile = activation_profile(model, test[0])
        fit_ = exponential_fit(profile["mean_abs"])
        d = widths[-1]
        metrics |= {
            "truncation_width": d,
            "untruncated_test_acc": curve["test_acc"][0],
            "lossless_fraction": lossless_fraction(curve["fraction"], curve["test_acc"]),
            "acc_at_half": float(np.interp(0.5, curve["fraction"], curve["test_acc"])),
            "activation_decay": fit_["b"], "activation_fit_r2": fit_["r2"],
            "dead_neurons": d - fit_["n_fit"],
        }
        curves |= {f"truncation/{k}": v for k, v in curve.items()}
        curves |= {f"activation/{k}": round_significant(v, 6) for k, v in profile.items()}
    metrics["cpu_s"] = run.cpu_seconds()
    return {"metrics": metrics, "curves": curves, "device": run.device}


# ----------------------------------------------------------------------------- registry


def _links() -> tuple[Link, ...]:
    annealed = {"study": "anneal", "importance_norm": "none", "rate_prior": "annealed"}
    trunc = {"study": "truncate", "importance_norm": "none"}
    spiral_std = paper_items.item("awnn/table1/spiral-awnn-width").paper_std
    before = paper_items.item("awnn/fig5-left/width-before-annealing").paper_value
    after = paper_items.item("awnn/fig5-left/width-after-annealing").paper_value
    return (
        # "approximately 800" and "to 300": a tolerance of 20% of the paper's value
        Link("awnn/fig5-left/width-before-annealing", "width_before", annealed, tolerance=before / 5),
        Link("awnn/fig5-left/width-after-annealing", "width_after", annealed, tolerance=after / 5),
        Link("awnn/fig5-right/accuracy-under-compression", "test_acc_after", annealed, scale=100.0),
        # the width of the one network the paper truncated; Table 1's run-to-run std on Spiral
        Link("awnn/fig6-left/truncation-width", "truncation_width", trunc, tolerance=spiral_std),
        Link("awnn/fig6-left/lossless-truncation", "lossless_fraction", trunc, scale=100.0, tolerance=10.0),
        Link("awnn/fig6-right/activation-distribution", "activation_fit_r2", trunc),
    )


def _setting(anneal_seeds: Sequence[int], truncate_seeds: Sequence[int]) -> str:
    return (f"SpiralHard 1 layer, {ANNEAL_EPOCHS} epochs, prior N(0.05, 1 -> 0.1) over epochs 1000-2500 and the "
            f"control without it, {len(anneal_seeds)} seeds; Spiral {TRUNCATE_EPOCHS} epochs then post-hoc "
            f"truncation, {len(truncate_seeds)} seeds; both importance arms; CPU; our generators (radius 1)")


def dry_run_plan(config: dict[str, Any]) -> DryRunPlan:
    """One run's dry run (``hacn_core.engine.dry_run``): ``awnn-tabular-adaptive``'s (the same model, ELBO,
    Adam and width update), with the annealed rate prior's schedule in the width callback."""
    import dataclasses

    from hacn_core.awnn.studies.adaptive import dry_run_plan as adaptive_plan

    check_config(config)
    return dataclasses.replace(adaptive_plan(config),
                               callbacks=lambda elbo: [WidthCallback(elbo, prior_schedule(config))])


EXPERIMENT = Experiment(
    id=EXPERIMENT_ID,
    title="AWNN compression during training (annealed rate prior, Fig. 5) and after it (truncation, Fig. 6)",
    train=train_compress,
    plan=dry_run_plan,
    distributed=False,  # the widths change during training, which DistributedDataParallel cannot follow
    configs={"smoke": smoke_configs, "book": book_configs, "paper": paper_configs},
    setting={
        "smoke": "6 epochs with the prior over epochs 2-5 (SpiralHard), 3 epochs (Spiral), seed 0",
        "book": _setting(BOOK_ANNEAL_SEEDS, BOOK_TRUNCATE_SEEDS),
        "paper": _setting(PAPER_SEEDS, PAPER_SEEDS),
    },
    links=_links(),
)
