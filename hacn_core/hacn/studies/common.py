"""Measurements shared by the H-ACN training studies (Mixer, ViT, decoder).

Each study trains one model per configuration through :func:`hacn_core.engine.training.fit`
and measures it with the same tools:

* :func:`residual_weight_summary`: from the residual weights ``a_1..a_L`` that ``fit``
  records every ``record_every_steps`` steps (``param/stack.alpha.<i>``), the total
  connectivity strength ``Gamma_t = ||a_t||_2 / sqrt(L)`` (Sec. 4, Table 3, Fig. 6b)
  and the convergence distance ``Delta_t = ||a_T - a_t||_2`` (Sec. 4, Fig. 6a);
* :func:`noise_accuracy`: accuracy under zero-mean Gaussian input noise with one fixed
  draw (Fig. 3c), on standardised inputs;
* :func:`saved_activation_bytes`: the activation memory of one training step;
* :func:`interleaved_step_times`: the CPU (or CUDA) time of one optimizer step of
  several models, interleaved so that load changes hit all of them alike; the
  studies size their ``book`` profiles from it;
* :func:`keep_trained_weights`: the trained weights, kept outside the results store
  when ``$HACN_KEEP_MODELS`` names a folder.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from hacn_core.engine.checkpoint import save_checkpoint
from hacn_core.engine.results import RunContext
from hacn_core.hacn.connectivity import AlphaInit, convergence_distance, total_connectivity_strength

KEEP_MODELS_ENV = "HACN_KEEP_MODELS"  # a folder: keep each trained model's weights there
#: standard deviations of the zero-mean Gaussian input noise of the robustness test (Fig. 3c's 0.1 and 0.3 and
#: two stronger levels), in units of the standardised inputs (unit variance per channel)
NOISE_STDS: tuple[float, ...] = (0.1, 0.3, 0.5, 1.0)
NOISE_SEED = 1234  # the same noise for every run, so rules are compared on identical noisy images


def rule_grid(make_config: Callable[..., dict[str, Any]], rules: Sequence[str],
              seeds: Sequence[int] = (0, 1, 2)) -> dict[str, Callable[[], list[dict[str, Any]]]]:
    """An experiment's ``configs``: per profile, ``make_config(rule, seed, profile=...)`` for every seed and,
    within a seed, every rule (so the first runs to finish are a complete comparison); smoke: seed 0 only."""
    def grid(profile: str, profile_seeds: Sequence[int]) -> Callable[[], list[dict[str, Any]]]:
        return lambda: [make_config(rule, seed, profile=profile) for seed in profile_seeds for rule in rules]

    return {"smoke": grid("smoke", seeds[:1]), "book": grid("book", seeds), "paper": grid("paper", seeds)}


#: the trainer entries every transformer study shares (Table 5's optimizer: AdamW at 1e-3, cosine, clipping 1.0)
ADAMW_COSINE: dict[str, Any] = {"optimizer": "adamw", "lr": 1e-3, "schedule": "cosine", "grad_clip": 1.0}
#: what the studies' trainers accept of those entries
TRAINER_CHOICES: dict[str, tuple[str, ...]] = {"optimizer": ("adamw",), "schedule": ("cosine",)}


#: App. D's depth-dependent initialisations of the residual weights (Table 6), by the name a configuration's
#: ``alpha_init`` gives them. Both have one mean for the first layer (``alpha_mu``) and one for the last
#: (``alpha_mu_end``), the same noise ``alpha_sigma`` everywhere:
#: ``half_layers``: ``N(alpha_mu, sigma)`` for the first ``ceil(L/2)`` layers, ``N(alpha_mu_end, sigma)`` for the rest
#: (Table 6: 0.4 / 0.15); ``exp_decay``: mean ``alpha_mu (alpha_mu_end / alpha_mu)^((l-1)/(L-1))`` at layer ``l``,
#: falling exponentially from 0.25 to 0.1 in Table 6. The default, ``a_i ~ N(alpha_mu, alpha_sigma)`` (Sec. 3.1),
#: is named by leaving ``alpha_init`` out, so every configuration written before these existed keeps its hash.
DEPTH_INITS: tuple[str, ...] = ("half_layers", "exp_decay")


def residual_fields(rule: str, alpha_mu: float | None, default_mu: Mapping[str, float], *,
                    alpha_init: str = "normal", alpha_mu_end: float | None = None) -> dict[str, Any]:
    """The configuration entries of a run's residual rule: ``rule``, ``alpha_mu`` / ``alpha_sigma`` of
    ``a_i ~ N(mu, 0.005)`` (Sec. 3.1) for the rules with weights (the keys of ``default_mu``, which gives
    each one's mean when ``alpha_mu`` is None), None for the others, and ``depth_ln="auto"`` (Eq. 7's
    Depth-adaptive LayerNorm in the ACN family). ``alpha_init`` one of :data:`DEPTH_INITS` adds the entries
    ``alpha_init`` and ``alpha_mu_end`` (the last layer's mean); ``"normal"`` adds nothing."""
    weighted = rule in default_mu
    mu = (default_mu[rule] if alpha_mu is None else alpha_mu) if weighted else None
    fields = {"rule": rule, "alpha_mu": mu, "alpha_sigma": 0.005 if weighted else None, "depth_ln": "auto"}
    if alpha_init != "normal" or alpha_mu_end is not None:  # the default stays unnamed (hash unchanged)
        fields |= {"alpha_init": alpha_init, "alpha_mu_end": alpha_mu_end}
    return fields


def alpha_init_of(config: Mapping[str, Any]) -> AlphaInit | None:
    """The :class:`~hacn_core.hacn.connectivity.AlphaInit` of a configuration checked by
    :func:`check_residual_init` (None for a rule without residual weights): ``N(alpha_mu, alpha_sigma)``, or the
    ``alpha_init`` of :data:`DEPTH_INITS` from ``alpha_mu`` to ``alpha_mu_end``."""
    mu, sigma = config["alpha_mu"], config["alpha_sigma"]
    if mu is None:
        return None
    scheme, end = config.get("alpha_init", "normal"), config.get("alpha_mu_end")
    if scheme == "half_layers":
        return AlphaInit(strategy="half_layers", sigma=sigma, first_mu=mu, second_mu=end)
    if scheme == "exp_decay":
        return AlphaInit(strategy="exp_decay", sigma=sigma, start_mu=mu, end_mu=end)
    return AlphaInit(mu=mu, sigma=sigma)


def classifier_metrics(out: Any, layerwise: Sequence[float]) -> dict[str, float]:
    """The accuracy metrics of an image classifier trained by ``fit`` (its ``TrainResult`` ``out``) and its
    layer-wise test accuracy ``layerwise`` (``L + 1`` exits): final, best validation, last and middle exit."""
    return {
        "test_accuracy": out.metrics["test_accuracy"],
        "test_loss": out.metrics["test_loss"],
        "train_loss": out.metrics["train_loss"],
        "best_val_accuracy": float(max(out.curves["val_accuracy"])),
        "final_exit_accuracy": layerwise[-1],
        "first_half_exit_accuracy": layerwise[len(layerwise) // 2],
    }


def check_choices(config: Mapping[str, Any], allowed: Mapping[str, Sequence[Any]]) -> None:
    """Raise ``ValueError`` naming the first field of ``allowed`` whose value is not among its choices."""
    for name, choices in allowed.items():
        if config.get(name) not in choices:
            raise ValueError(f"{name}={config.get(name)!r} is not supported; allowed: {', '.join(map(str, choices))}")


def check_counts(config: Mapping[str, Any], positive: Sequence[str], optional: Sequence[str] = ()) -> None:
    """Raise ``ValueError`` for a field of ``positive`` that is not an integer >= 1, or of ``optional``
    that is neither None nor one (``True`` is not a count)."""
    for name in (*positive, *optional):
        v = config.get(name)
        if v is None and name in optional:
            continue
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name}={v!r} must be " + ("None or " if name in optional else "") + "a positive integer")


def _finite(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)


def check_residual_init(config: Mapping[str, Any], weighted_rules: Sequence[str]) -> None:
    """``alpha_mu`` (the mean of ``a_i ~ N(mu, alpha_sigma)``) is a number exactly for the rules with weights,
    ``alpha_sigma`` a standard deviation; an ``alpha_init`` entry names one of :data:`DEPTH_INITS` and comes with
    ``alpha_mu_end``, the last layer's mean (``exp_decay``: both means > 0)."""
    if (config["alpha_mu"] is None) != (config["rule"] not in weighted_rules):
        raise ValueError(f"alpha_mu={config['alpha_mu']!r}: the rules {', '.join(weighted_rules)} need a number, "
                         f"the others None (rule={config['rule']!r})")
    weighted = config["alpha_mu"] is not None
    if weighted and not _finite(config["alpha_mu"]):
        raise ValueError(f"alpha_mu={config['alpha_mu']!r} must be a finite number")
    sigma = config["alpha_sigma"]
    if weighted and not (_finite(sigma) and sigma >= 0):
        raise ValueError(f"alpha_sigma={sigma!r} must be a finite number >= 0 (the standard deviation of a_i)")
    if "alpha_init" in config or "alpha_mu_end" in config:
        scheme, end = config.get("alpha_init"), config.get("alpha_mu_end")
        if scheme not in DEPTH_INITS:
            raise ValueError(f"alpha_init={scheme!r} is not supported; allowed: {', '.join(DEPTH_INITS)} (leave "
                             "alpha_init and alpha_mu_end out for the default a_i ~ N(alpha_mu, alpha_sigma))")
        if not weighted:
            raise ValueError(f"alpha_init={scheme!r} needs a rule with residual weights ({', '.join(weighted_rules)}), "
                             f"got rule={config['rule']!r}")
        if not _finite(end):
            raise ValueError(f"alpha_mu_end={end!r} must be a finite number: the mean of the last layer's a_i "
                             f"(alpha_init={scheme!r})")
        if scheme == "exp_decay" and (config["alpha_mu"] <= 0 or end <= 0):
            raise ValueError(f"alpha_mu={config['alpha_mu']!r} and alpha_mu_end={end!r} must be > 0 for "
                             "alpha_init='exp_decay' (an exponential decay between two means)")
    if not 0.0 <= config["warmup_fraction"] < 1.0:
        raise ValueError(f"warmup_fraction={config['warmup_fraction']!r} must be in [0, 1)")


def saved_activation_bytes(model: nn.Module, batch: tuple[Tensor, Tensor]) -> int:
    """Bytes of the tensors autograd saves for backward in one training step on ``batch``.

    The activation memory of a forward pass, measured the same way on any device
    (``torch.autograd.graph.saved_tensors_hooks``); parameters saved for backward
    (weights of linear layers) are counted once each. A rule that caches every
    layer output (DenseFormer) shows up here. Logits with a class dimension last
    (``(B, T, V)`` of a language model) are scored against targets ``(B, T)``.
    """
    seen: set[int] = set()
    total = 0
    params = {p.data_ptr() for p in model.parameters()}

    def pack(t: Tensor) -> Tensor:
        nonlocal total
        key = t.untyped_storage().data_ptr()
        if key not in seen and key not in params:
            seen.add(key)
            total += t.untyped_storage().nbytes()
        return t

    was_training = model.training
    model.train()
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = model(batch[0])
        loss = nn.functional.cross_entropy(out.reshape(-1, out.shape[-1]), batch[1].reshape(-1))
    loss.backward()
    model.zero_grad(set_to_none=True)
    model.train(was_training)
    return total


@torch.no_grad()
def noise_accuracy(model: nn.Module, x: Tensor, y: Tensor, std: float, *, seed: int = NOISE_SEED,
                   batch: int = 1000) -> float:
    """Accuracy on ``x + std * N(0, 1)`` (Fig. 3c's test, here on standardised images), one fixed noise draw."""
    device = next(model.parameters()).device
    noise = torch.randn(x.shape, generator=torch.Generator().manual_seed(seed), dtype=x.dtype)  # one draw
    was_training = model.training
    model.eval()
    correct = 0
    for i in range(0, len(x), batch):
        noisy = x[i:i + batch] + std * noise[i:i + batch]
        correct += int((model(noisy.to(device)).argmax(-1).cpu() == y[i:i + batch]).sum())
    model.train(was_training)
    return correct / len(x)


def alpha_history(curves: Mapping[str, list], num_layers: int) -> np.ndarray | None:
    """``(records, L)`` residual weights ``a_1..a_L`` at every record point, or None without weights."""
    names = [f"param/stack.alpha.{i}" for i in range(num_layers)]
    if names[0] not in curves:
        return None
    return np.array([curves[n] for n in names], dtype=float).T


def gamma_history(alphas: np.ndarray) -> np.ndarray:
    """``Gamma_t = ||a_t||_2 / sqrt(L)`` for every row of ``alphas`` (Sec. 4)."""
    return np.array([total_connectivity_strength(torch.as_tensor(a)) for a in alphas])


def residual_weight_summary(curves: Mapping[str, list], num_layers: int) -> tuple[dict[str, float], dict[str, list]]:
    """Metrics and curves of the recorded residual weights; ``({}, {})`` for a rule without them.

    Metrics: the final ``gamma``, its maximum over training ``gamma_max`` and the final
    mean ``alpha_mean``. Curves (one entry per record point of ``record_step``):
    ``gamma`` (Fig. 6b), ``delta`` = ``Delta_t`` (Fig. 6a; 0 at the end by definition)
    and ``alpha_final`` (the converged ``a``, Fig. 2c).
    """
    alphas = alpha_history(curves, num_layers)
    if alphas is None:
        return {}, {}
    gammas = gamma_history(alphas)
    metrics = {"gamma": float(gammas[-1]), "gamma_max": float(gammas.max()), "alpha_mean": float(alphas[-1].mean())}
    series = {"alpha_final": alphas[-1].tolist(), "gamma": gammas.tolist(),
              "delta": convergence_distance(torch.as_tensor(alphas)).tolist()}
    return metrics, series


def keep_trained_weights(config: Mapping[str, Any], model: nn.Module, context: RunContext) -> Path | None:
    """Save ``model``'s weights under ``$HACN_KEEP_MODELS/<experiment>/`` (for measurements added after a run;
    not part of the result); None when the variable is unset."""
    keep = os.environ.get(KEEP_MODELS_ENV)
    if not keep:
        return None
    target = Path(keep) / context.experiment / f"{context.checkpoint_dir.name}.pt"
    target.parent.mkdir(parents=True, exist_ok=True)
    save_checkpoint({"config": dict(config), "model": model.state_dict()}, target)
    return target


def interleaved_step_times(steps: Mapping[str, Callable[[], None]], *, repeats: int, timed: int,
                           device: torch.device, peak: dict[str, int] | None = None) -> dict[str, list[float]]:
    """Seconds per call of every ``steps[name]`` (one optimizer step each), ``repeats`` times, interleaved.

    Each repeat runs every step function once untimed (caches and allocator warm for
    that model), then ``timed`` times under the clock, name after name, so a change of
    machine load hits all of them alike. CPU: process CPU time on one thread (other
    processes on the machine do not count); CUDA: wall time between synchronisations,
    and ``peak[name]`` gets the largest ``max_memory_allocated`` of its blocks.
    """
    def clock() -> float:
        if device.type == "cuda":
            torch.cuda.synchronize(device)
            return time.perf_counter()
        return time.process_time()

    threads = torch.get_num_threads()
    if device.type == "cpu":
        torch.set_num_threads(1)
    times: dict[str, list[float]] = {n: [] for n in steps}
    try:
        for _ in range(repeats):
            for name, step in steps.items():
                step()
                if device.type == "cuda":
                    torch.cuda.reset_peak_memory_stats(device)
                t0 = clock()
                for _ in range(timed):
                    step()
                times[name].append((clock() - t0) / timed)
                if device.type == "cuda" and peak is not None:
                    peak[name] = max(peak.get(name, 0), int(torch.cuda.max_memory_allocated(device)))
    finally:
        torch.set_num_threads(threads)
    return times


def step_cost_metrics(times: Mapping[str, list[float]], reference: str) -> dict[str, float]:
    """``<name>/ms_per_step`` (median) and ``<name>/ratio_to_<reference>`` (median of per-repeat ratios)."""
    out: dict[str, float] = {}
    for name, ts in times.items():
        out[f"{name}/ms_per_step"] = 1000 * float(np.median(ts))
        out[f"{name}/ratio_to_{reference}"] = float(np.median([t / r for t, r in zip(ts, times[reference])]))
    return out


__all__ = [
    "ADAMW_COSINE",
    "TRAINER_CHOICES",
    "KEEP_MODELS_ENV",
    "NOISE_SEED",
    "NOISE_STDS",
    "alpha_history",
    "check_choices",
    "classifier_metrics",
    "check_counts",
    "check_residual_init",
    "gamma_history",
    "interleaved_step_times",
    "keep_trained_weights",
    "noise_accuracy",
    "residual_fields",
    "residual_weight_summary",
    "rule_grid",
    "saved_activation_bytes",
    "step_cost_metrics",
]
