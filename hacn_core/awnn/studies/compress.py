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
generators, radius 1), ``N`` = the true training-set size.

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
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from hacn_core import paper_items
from hacn_core.awnn import (
    INTERPOLATIONS,
    AdaptiveMLP,
    ELBOLoss,
    RatePriorSchedule,
    WidthCallback,
    truncate,
)
from hacn_core.engine.registry import Experiment, Link, with_overrides
from hacn_core.awnn.studies.adaptive import ARMS, adam_train_config, build_model, load_splits
from hacn_core.awnn.studies.tabular import SplitAccuracy
from hacn_core.engine.results import RunContext, RunResult
from hacn_core.engine.training import evaluate, fit

EXPERIMENT_ID = "awnn-compress"
STUDIES: tuple[str, ...] = ("anneal", "truncate")
RATE_PRIORS: tuple[str, ...] = ("annealed", "none")
STUDY_DATASET = {"anneal": "SpiralHard", "truncate": "Spiral"}
#: Sec. 5.3: N(0.05, 1) introduced at epoch 1000, std annealed to 0.1 at 2500, 2500 epochs in all
ANNEAL = {"prior_mu": 0.05, "prior_sigma_start": 1.0, "prior_sigma_end": 0.1, "prior_start_epoch": 1000,
          "prior_end_epoch": 2500, "prior_interpolation": "linear"}
ANNEAL_EPOCHS = 2500
TRUNCATE_EPOCHS = 1000  # Spiral's budget (Table 3)
PAPER_SEEDS = tuple(range(10))  # "retrained 10 times" (Sec. 4)
#: CPU budget of the book run (45 CPU-minutes): the SpiralHard runs cost 150-340 s each, Spiral ~20 s
BOOK_ANNEAL_SEEDS = (0, 1)
BOOK_TRUNCATE_SEEDS = tuple(range(5))
LOSSLESS_TOLERANCE = 0.005  # "without loss": within 0.5 accuracy point of the untruncated model
START_RATE = 0.01


def _config(study: str, seed: int, importance_norm: str = "none", rate_prior: str = "annealed",
            **overrides: Any) -> dict[str, Any]:
    """One flat run configuration (see the module docstring for every choice)."""
    if study not in STUDIES:
        raise ValueError(f"study={study!r} is not allowed; allowed: {', '.join(STUDIES)}")
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
        if config.get(key) not in allowed:
            raise ValueError(f"{key}={config.get(key)!r} is not allowed; allowed: {', '.join(allowed)}")
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
    anneal = [_config("anneal", s, arm, prior) for arm in ARMS for prior in RATE_PRIORS for s in PAPER_SEEDS]
    return anneal + [_config("truncate", s, arm) for arm in ARMS for s in PAPER_SEEDS]


def book_configs() -> list[dict[str, Any]]:
    anneal = [_config("anneal", s, arm, prior) for arm in ARMS for prior in RATE_PRIORS for s in BOOK_ANNEAL_SEEDS]
    return anneal + [_config("truncate", s, arm) for arm in ARMS for s in BOOK_TRUNCATE_SEEDS]


SMOKE_ANNEAL = {"epochs": 6, "prior_start_epoch": 2, "prior_end_epoch": 5}


def smoke_configs() -> list[dict[str, Any]]:
    anneal = [_config("anneal", 0, arm, prior, **SMOKE_ANNEAL) for arm in ARMS for prior in RATE_PRIORS]
    return anneal + [_config("truncate", 0, arm, epochs=3) for arm in ARMS]


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


def _sig(values: Sequence[float], digits: int) -> list[float]:
    """Round to ``digits`` significant digits (keeps the stored curves small)."""
    return [float(f"{v:.{digits}g}") if math.isfinite(v) else v for v in values]


def train_compress(config: dict[str, Any], context: RunContext) -> dict[str, Any]:
    """Train one run of either study and return its metrics and per-epoch curves."""
    check_config(config)
    splits = load_splits(config)
    n_train = len(splits["train"][1])
    torch.manual_seed(config["seed"])
    model = build_model(config)
    schedule = prior_schedule(config)
    elbo = ELBOLoss(model, n_train, sigma_theta=config["sigma_theta"], rate_prior=None)
    train_config = adam_train_config(config)
    cpu0 = time.process_time()
    out = fit(model, splits["train"], train_config, loss_fn=elbo,
              callbacks=[WidthCallback(elbo, schedule), SplitAccuracy(splits["val"], splits["test"])],
              checkpoint_dir=context.checkpoint_dir, progress=context.progress)
    c = out.curves
    epochs = [int(round(e)) for e in c["record_epoch"]]
    widths = [int(sum(w)) for w in c["awnn/widths"]]
    rates = c["awnn/rates"]
    curves: dict[str, list] = {"record_epoch": epochs, "val_acc": c["val_acc"], "test_acc": c["test_acc"],
                               "width/1": [int(w[0]) for w in c["awnn/widths"]], "rate/1": _sig([r[0] for r in rates], 5)}
    for term in ("total", "predictive", "weight_prior", "width_prior"):
        curves[f"elbo/{term}"] = _sig(c[f"elbo/{term}"], 6)
    # record r follows 0-based epoch r - 1, trained under schedule(r - 1)
    curves["rate_penalty"] = _sig([rate_penalty(r, schedule(e - 1) if schedule is not None and e > 0 else None)
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
        test = splits["test"]
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
        curves |= {f"activation/{k}": _sig(v, 6) for k, v in profile.items()}
    metrics["cpu_s"] = round(time.process_time() - cpu0, 2)
    return {"metrics": metrics, "curves": curves, "device": out.device}


# ----------------------------------------------------------------------------- registry


def _links() -> tuple[Link, ...]:
    annealed = {"study": "anneal", "importance_norm": "none", "rate_prior": "annealed"}
    trunc = {"study": "truncate", "importance_norm": "none"}
    spiral_std = paper_items.item("awnn/table1/spiral-awnn-width").paper_std
    return (
        # "approximately 800" and "to 300": a tolerance of 20% of the paper's value
        Link("awnn/fig5-left/width-before-annealing", "width_before", annealed, tolerance=160.0),
        Link("awnn/fig5-left/width-after-annealing", "width_after", annealed, tolerance=60.0),
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
    configs={"smoke": smoke_configs, "book": book_configs, "paper": paper_configs},
    setting={
        "smoke": "6 epochs with the prior over epochs 2-5 (SpiralHard), 3 epochs (Spiral), seed 0",
        "book": _setting(BOOK_ANNEAL_SEEDS, BOOK_TRUNCATE_SEEDS),
        "paper": _setting(PAPER_SEEDS, PAPER_SEEDS),
    },
    links=_links(),
)


# ----------------------------------------------------------------------------- notebook helpers

ARM_LABELS = {"none": "Eq. 14", "active": "renormalised"}


def _mean_std(values, digits: int = 1) -> str:
    values = np.asarray(values, dtype=float)
    if values.size == 0:
        return "-"
    if values.size == 1:
        return f"{values[0]:.{digits}f}"
    return f"{values.mean():.{digits}f} ({values.std(ddof=1):.{digits}f})"


def _runs(results: Sequence[RunResult], study: str, **where: Any) -> list[RunResult]:
    return [r for r in results if r.config["study"] == study and all(r.config[k] == v for k, v in where.items())]


def anneal_table(results: Sequence[RunResult]):
    """Fig. 5 in numbers: total width and test accuracy (%) at the prior's start and at the
    end, annealed runs beside their controls, mean (std) over seeds, and the paper's values."""
    import pandas as pd

    rows = []
    for arm in ARMS:
        for prior in RATE_PRIORS:
            runs = _runs(results, "anneal", importance_norm=arm, rate_prior=prior)
            if not runs:
                continue
            m = {k: [r.metrics[k] for r in runs] for k in runs[0].metrics}
            start, end = runs[0].config["prior_start_epoch"], runs[0].config["epochs"]
            rows.append({
                "arm": ARM_LABELS[arm], "rate prior": "annealed" if prior == "annealed" else "none (control)",
                f"width @ {start}": _mean_std(m["width_before"]), f"width @ {end}": _mean_std(m["width_after"]),
                "after / before": _mean_std(m["width_ratio"], 2),
                f"test acc @ {start} (%)": _mean_std(100 * np.asarray(m["test_acc_before"])),
                f"test acc @ {end} (%)": _mean_std(100 * np.asarray(m["test_acc_after"])),
                "seeds": len(runs),
            })
    if not rows:
        return pd.DataFrame()
    before = paper_items.item("awnn/fig5-left/width-before-annealing").paper_value
    after = paper_items.item("awnn/fig5-left/width-after-annealing").paper_value
    cols = list(rows[0])
    rows.append(dict(zip(cols, ["paper (Fig. 5)", "annealed", f"~{before:g}", f"~{after:g}",
                                f"~{after / before:.2f}", "not given", "'without any degradation'", "-"], strict=True)))
    return pd.DataFrame(rows).set_index(["arm", "rate prior"])


def prior_effect_table(results: Sequence[RunResult]):
    """The prior's effect at equal epochs: per arm and seed, the width and test accuracy at
    the end of the annealed run and of its control (same seed, identical until the prior
    starts), and the ratio of the two widths."""
    import pandas as pd

    rows = []
    for arm in ARMS:
        controls = {r.seed: r for r in _runs(results, "anneal", importance_norm=arm, rate_prior="none")}
        for r in sorted(_runs(results, "anneal", importance_norm=arm, rate_prior="annealed"), key=lambda r: r.seed):
            c = controls.get(r.seed)
            if c is None:
                continue
            rows.append({"arm": ARM_LABELS[arm], "seed": r.seed, "width @ start": r.metrics["width_before"],
                         "width, annealed": r.metrics["width_after"], "width, control": c.metrics["width_after"],
                         "annealed / control": round(r.metrics["width_after"] / c.metrics["width_after"], 3),
                         "test acc, annealed (%)": round(100 * r.metrics["test_acc_after"], 1),
                         "test acc, control (%)": round(100 * c.metrics["test_acc_after"], 1)})
    return pd.DataFrame(rows).set_index(["arm", "seed"]) if rows else pd.DataFrame()


def truncation_table(results: Sequence[RunResult]):
    """Fig. 6 in numbers, per arm (mean (std) over seeds) beside the paper: the width that is
    cut, the untruncated test accuracy, the lossless fraction, the accuracy with half the
    neurons removed, and the exponential fit of the per-neuron activations (decay per
    neuron beside the layer's rate ``nu``, and the fit's R^2 in log space)."""
    import pandas as pd

    rows = []
    for arm in ARMS:
        runs = _runs(results, "truncate", importance_norm=arm)
        if not runs:
            continue
        m = {k: np.asarray([r.metrics[k] for r in runs], dtype=float) for k in runs[0].metrics}
        rows.append({
            "arm": ARM_LABELS[arm], "hidden width": _mean_std(m["truncation_width"]),
            "test acc (%)": _mean_std(100 * m["untruncated_test_acc"]),
            "lossless cut (%)": _mean_std(100 * m["lossless_fraction"]),
            "test acc, half cut (%)": _mean_std(100 * m["acc_at_half"]),
            "activation decay b": _mean_std(m["activation_decay"], 3), "rate nu": _mean_std(m["final_rate"], 3),
            "fit R^2": _mean_std(m["activation_fit_r2"], 2), "dead neurons": _mean_std(m["dead_neurons"]),
            "seeds": len(runs),
        })
    if not rows:
        return pd.DataFrame()
    width = paper_items.item("awnn/fig6-left/truncation-width").paper_value
    lossless = paper_items.item("awnn/fig6-left/lossless-truncation").paper_value
    rows.append(dict(zip(rows[0], ["paper (Fig. 6)", f"{width:g}", "-", f"{lossless:g}", "-", "-", "-",
                                   "'exponential-like'", "-", "-"], strict=True)))
    return pd.DataFrame(rows).set_index("arm")


def cost_table(results: Sequence[RunResult]):
    """Measured CPU seconds per run (one thread): mean, count and sum per study, arm and prior."""
    import pandas as pd

    frame = pd.DataFrame([{"study": r.config["study"], "arm": ARM_LABELS[r.config["importance_norm"]],
                           "rate prior": r.config["rate_prior"], "cpu_s": r.metrics["cpu_s"]} for r in results])
    return frame.groupby(["study", "arm", "rate prior"])["cpu_s"].agg(["mean", "count", "sum"]).round(1)


def plot_anneal(results: Sequence[RunResult]):
    """Fig. 5: total width (left, log scale), test accuracy (middle) and the width term of
    Eq. 13 (right, Fig. 5's inset: ``log p(nu)/q(nu)`` = minus the logged term, epoch means)
    over epochs, mean over seeds with a band of one standard error. Solid: annealed prior;
    dashed: control; colours: the two arms. Grey band: the prior's window; crosses: the
    paper's ~800 at the start and ~300 at the end."""
    import seaborn as sns

    from hacn_core.engine import plots

    fig, axes = plots.figure(ncols=3, height=2.8)
    colours = dict(zip(ARMS, sns.color_palette(plots.PALETTE)))
    window = None
    for arm in ARMS:
        for prior, style in zip(RATE_PRIORS, ("-", "--")):
            runs = _runs(results, "anneal", importance_norm=arm, rate_prior=prior)
            if not runs:
                continue
            c0 = runs[0].config
            window = (c0["prior_start_epoch"], c0["prior_end_epoch"])
            x = np.asarray(runs[0].curves["record_epoch"])
            label = f"{ARM_LABELS[arm]}, {'annealed prior' if prior == 'annealed' else 'no prior'}"
            plots.with_ci(axes[0, 0], x, np.stack([r.curves["width/1"] for r in runs]), label,
                          color=colours[arm], linestyle=style)
            plots.with_ci(axes[0, 1], x, 100 * np.stack([r.curves["test_acc"] for r in runs]), None,
                          color=colours[arm], linestyle=style)
            if prior == "annealed":
                term = -np.stack([r.curves["elbo/width_prior"] for r in runs])
                plots.with_ci(axes[0, 2], x[1:], term[:, 1:], ARM_LABELS[arm], color=colours[arm])
    if window is not None:
        for ax in axes[0]:
            ax.axvspan(*window, color="0.85", zorder=0, linewidth=0)
        before = paper_items.item("awnn/fig5-left/width-before-annealing").paper_value
        after = paper_items.item("awnn/fig5-left/width-after-annealing").paper_value
        axes[0, 0].plot(list(window), [before, after], "kx", label="paper (~800 -> ~300)")
    axes[0, 0].set(yscale="log", xlabel="epoch", ylabel="total width")
    axes[0, 1].set(xlabel="epoch", ylabel="test accuracy (%)")
    axes[0, 2].set(xlabel="epoch", ylabel=r"$\log p(\nu)/q(\nu)$ (maximised)")
    axes[0, 0].legend(frameon=False, fontsize=7)
    return fig


def plot_truncation(results: Sequence[RunResult], seed: int | None = None):
    """Fig. 6. Left: test accuracy against the percentage of last neurons removed, mean over
    seeds per arm (each run's curve interpolated on a common grid); the paper's lossless
    30% as a vertical line. Right: per-neuron Eq. 14 activations over the test set for one
    run per arm (``seed``, default the smallest): median and 5-95% band of ``h_j``, mean
    ``|h_j|`` (dots) and its exponential fit (line), log scale."""
    import seaborn as sns

    from hacn_core.engine import plots

    fig, axes = plots.figure(ncols=2, height=3.0)
    colours = dict(zip(ARMS, sns.color_palette(plots.PALETTE)))
    grid = np.linspace(0.0, 0.95, 96)
    for arm in ARMS:
        runs = _runs(results, "truncate", importance_norm=arm)
        if not runs:
            continue
        acc = np.stack([np.interp(grid, r.curves["truncation/fraction"], r.curves["truncation/test_acc"],
                                  right=np.nan) for r in runs])
        plots.with_ci(axes[0, 0], 100 * grid, 100 * acc, ARM_LABELS[arm], color=colours[arm])
        pick = min(runs, key=lambda r: r.seed if seed is None else abs(r.seed - seed))
        prof = {k[len("activation/"):]: np.asarray(v) for k, v in pick.curves.items() if k.startswith("activation/")}
        j = np.arange(prof["mean_abs"].size)
        ax = axes[0, 1]
        ax.fill_between(j, np.maximum(prof["q5"], 1e-6), np.maximum(prof["q95"], 1e-6), color=colours[arm],
                        alpha=0.2, linewidth=0)
        ax.plot(j, np.maximum(prof["q50"], 1e-6), color=colours[arm], linewidth=0.8)
        ax.plot(j, prof["mean_abs"], ".", color=colours[arm], label=f"{ARM_LABELS[arm]} (seed {pick.seed})")
        fit_ = exponential_fit(prof["mean_abs"])
        ax.plot(j, fit_["A"] * np.exp(-fit_["b"] * j), color=colours[arm], linestyle=":")
    lossless = paper_items.item("awnn/fig6-left/lossless-truncation").paper_value
    axes[0, 0].axvline(lossless, color="0.5", linestyle="--", linewidth=0.8, label="paper: lossless up to 30%")
    axes[0, 0].set(xlabel="last neurons removed (%)", ylabel="test accuracy (%)")
    axes[0, 0].legend(frameon=False, fontsize=7)
    axes[0, 1].set(yscale="log", xlabel="neuron j", ylabel=r"$h_j$ over test samples")
    axes[0, 1].legend(frameon=False, fontsize=7)
    return fig
