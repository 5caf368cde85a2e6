"""H-ACN decoder ablations: how the residual weights start, and Depth-adaptive LayerNorm (H-ACN App. D, Tables 6-7).

App. D trains the H-ACN GPT-2 (Eq. 2: ``x_{i+1} = a_i x_i + f_i(x_i)``, summed into the output) on
PG-19 for 6B tokens with six initialisations of the residual weights ``a_1..a_L`` (Table 6):

* ``N(0.15, 0.01)``, ``N(0.25, 0.01)``, ``N(0.15, 0.005)`` and ``N(0.25, 0.005)`` (Sec. 3.1's default, the
  best): every ``a_i ~ N(mu, sigma)``;
* "half layers": ``N(0.4, 0.005)`` for the first half of the layers, ``N(0.15, 0.005)`` for the rest
  (here the first ``ceil(L/2)``);
* "exp. decay": the mean "decays exponentially from 0.25 to 0.1 with increasing depth", noise 0.005:
  ``mu_l = 0.25 (0.1 / 0.25)^((l-1)/(L-1))`` at layer ``l = 1..L``;

and, for the two ``sigma = 0.01`` rows, once more without Depth-adaptive LayerNorm (Table 7),
``DepthLN(x_l) = (1 + l s) LN(x_l)`` with ``s`` learnable from 0.05 (Eq. 7).

This experiment, ``hacn-decoder-ablations``, trains the seven cells of Tables 6-7 that the decoder
study (:mod:`hacn_core.hacn.studies.decoder`, ``hacn-decoder``) does not: Table 6's five other
initialisations with DepthLN, and Table 7's two rows without it. Each run is ``hacn-decoder``'s H-ACN
configuration at the same profile with only the init entries (``alpha_mu``, ``alpha_sigma`` and, for the
depth-dependent rows, ``alpha_init`` / ``alpha_mu_end``: :data:`hacn_core.hacn.studies.common.DEPTH_INITS`)
and ``depth_ln`` changed, trained and measured by the same function
(:func:`hacn_core.hacn.studies.decoder.train_hacn_decoder`). Table 6's ``N(0.25, 0.005)`` row with DepthLN
is ``hacn-decoder``'s own H-ACN run, at the same budget, and is read from there
(:func:`hacn_core.hacn.studies.transformer_report.ablation_table`).

Profiles
--------
``smoke``: the decoder's smoke size (2 layers, d 16, 20 steps), seed 0, all seven rows: seconds each.

``book``: the decoder's book size and budget (12-layer character-level decoder on Tiny Shakespeare,
2,500 steps of batch 32). Nothing new is measured: the decoder study's measured 493 ms per H-ACN step
(``decoder.BOOK_STEP_MS``, one CPU thread on the loaded 2-core machine) and its estimate of about a
minute of evaluation a run make a run about 21.5 CPU-minutes. Seed 0 of all seven rows (7 runs) is
about 2.5 CPU-hours; a second seed of every row (14 runs, 5.0 CPU-hours) does not fit the ablation's
budget of about 4 CPU-hours, so seed 1 is trained only for Table 7's four cells (``N(0.15, 0.01)`` and
``N(0.25, 0.01)``, with and without DepthLN): Table 7's claim is a difference between two cells, and two
seeds a cell are the fewest that give it a spread. 11 runs, about 3.9 CPU-hours
(:func:`book_cpu_hours`), seed 0 of every row first.

``paper``: Tables 4-5's decoder and training, exactly ``hacn-decoder``'s paper profile (OpenWebText2,
240k steps of batch 128 x 4), seeds 0-2. App. D's own runs are on PG-19 for 6B tokens, which the studies
do not offer; the main study's budget is kept so that its ``N(0.25, 0.005)`` run is Table 6's row.
"""

from __future__ import annotations

from typing import Any

from hacn_core.engine.registry import Experiment
from hacn_core.hacn.studies import decoder as hd

EXPERIMENT_ID = "hacn-decoder-ablations"
#: Table 6's initialisations, by the slug of their paper item (``hacn/table6/init-<slug>``): the entries of
#: :func:`hacn_core.hacn.studies.decoder.make_config` that express them
INITS: dict[str, dict[str, Any]] = {
    "n0.15-0.01": {"alpha_mu": 0.15, "alpha_sigma": 0.01},
    "n0.25-0.01": {"alpha_mu": 0.25, "alpha_sigma": 0.01},
    "n0.15-0.005": {"alpha_mu": 0.15, "alpha_sigma": 0.005},
    "n0.25-0.005": {"alpha_mu": 0.25, "alpha_sigma": 0.005},
    "half-layers": {"alpha_init": "half_layers", "alpha_mu": 0.4, "alpha_mu_end": 0.15, "alpha_sigma": 0.005},
    "exp-decay": {"alpha_init": "exp_decay", "alpha_mu": 0.25, "alpha_mu_end": 0.1, "alpha_sigma": 0.005},
}
MAIN_INIT = "n0.25-0.005"  # hacn-decoder's own H-ACN (Sec. 3.1's default, with DepthLN): not trained here
#: Table 7's initialisations, each also trained without DepthLN
TABLE7_INITS: tuple[str, ...] = ("n0.15-0.01", "n0.25-0.01")
#: the cells this experiment trains: (init slug, depth_ln); "auto" is Eq. 7's DepthLN for H-ACN, as in hacn-decoder
ROWS: tuple[tuple[str, str], ...] = (tuple((slug, "auto") for slug in INITS if slug != MAIN_INIT)
                                     + tuple((slug, "none") for slug in TABLE7_INITS))
#: the book's second seed: Table 7's four cells (module docstring)
BOOK_SECOND_SEED: tuple[tuple[str, str], ...] = tuple((slug, ln) for slug, ln in ROWS if slug in TABLE7_INITS)
BUDGET_CPU_HOURS = 4.0  # what the book's ablation may cost


def make_config(slug: str, depth_ln: str, seed: int, *, profile: str = "book") -> dict[str, Any]:
    """The H-ACN run of ``hacn-decoder`` at ``profile`` with Table 6's initialisation ``slug`` (a key of
    :data:`INITS`) and ``depth_ln`` ``"auto"`` (DepthLN, Eq. 7) or ``"none"`` (Table 7's ablation)."""
    if slug not in INITS:
        raise ValueError(f"slug={slug!r} is not one of Table 6's initialisations; allowed: {', '.join(INITS)}")
    if depth_ln not in ("auto", "none"):
        raise ValueError(f"depth_ln={depth_ln!r} is not an ablation setting; allowed: auto, none")
    return hd.make_config("hacn", seed, profile=profile, depth_ln=depth_ln, **INITS[slug])


def smoke_configs() -> list[dict[str, Any]]:
    return [make_config(slug, ln, 0, profile="smoke") for slug, ln in ROWS]


def book_configs() -> list[dict[str, Any]]:
    """Seed 0 of every row, then seed 1 of Table 7's four cells (the order the background workers take)."""
    return ([make_config(slug, ln, 0) for slug, ln in ROWS]
            + [make_config(slug, ln, 1) for slug, ln in BOOK_SECOND_SEED])


def paper_configs() -> list[dict[str, Any]]:
    return [make_config(slug, ln, seed, profile="paper") for seed in hd.SEEDS for slug, ln in ROWS]


def run_cpu_minutes() -> float:
    """CPU-minutes of one book run: ``BOOK_STEPS`` steps at the decoder's measured H-ACN step cost, plus its
    evaluation (``decoder.BOOK_EVAL_MINUTES``)."""
    return hd.BOOK_STEPS * hd.BOOK_STEP_MS["hacn"] / 60e3 + hd.BOOK_EVAL_MINUTES


def book_cpu_hours(runs: int | None = None) -> float:
    """CPU-hours of ``runs`` book runs (default: the book profile's), from :func:`run_cpu_minutes`."""
    return (len(book_configs()) if runs is None else runs) * run_cpu_minutes() / 60


EXPERIMENT = Experiment(
    id=EXPERIMENT_ID,
    title="H-ACN GPT-2 decoder ablations: initialisation of the residual weights and Depth-adaptive LayerNorm "
          "(H-ACN App. D, Tables 6-7)",
    train=hd.train_hacn_decoder,
    plan=hd.dry_run_plan,
    configs={"smoke": smoke_configs, "book": book_configs, "paper": paper_configs},
    setting={
        "smoke": "hacn-decoder's smoke H-ACN (2 layers, d 16, 20 steps of batch 8) with Table 6's five other "
                 "initialisations and Table 7's two rows without DepthLN, seed 0",
        "book": f"hacn-decoder's book H-ACN (12 layers, d 64, Tiny Shakespeare characters, {hd.BOOK_STEPS:,} steps "
                f"of batch 32) with Table 6's five other initialisations (N(0.15, 0.01), N(0.25, 0.01), "
                f"N(0.15, 0.005), half layers 0.4 / 0.15, exp. decay 0.25 -> 0.1) and Table 7's two rows without "
                f"DepthLN; seed 0 of all seven, seed 1 of Table 7's four cells: {len(book_configs())} runs of about "
                f"{run_cpu_minutes():.1f} CPU-minutes (the decoder's measured {hd.BOOK_STEP_MS['hacn']:.0f} ms per "
                f"H-ACN step on one thread, plus about a minute of evaluation), about {book_cpu_hours():.1f} CPU-hours",
        "paper": "hacn-decoder's paper H-ACN (Tables 4-5: 24 layers, d 768, OpenWebText2, 240k steps of batch "
                 "128 x 4) with Table 6's five other initialisations and Table 7's two rows without DepthLN, "
                 "seeds 0-2 (App. D itself: PG-19, 6B tokens)",
    },
)
