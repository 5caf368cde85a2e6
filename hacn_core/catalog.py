"""Every experiment of the book, by id, and the module that defines it.

Read the table below to follow an experiment id to its code: each study module
defines its :class:`~hacn_core.engine.registry.Experiment` (the setting, the
per-profile configurations, the train function and the links to the ledger);
its report module beside it holds the tables, claims and plots a chapter shows.

Run one from the shell with ``python -m hacn_core run <id> --profile book``, or
from a notebook with :func:`run`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hacn_core import exact_checks
from hacn_core.awnn.studies import (ablations, adaptive, compress, cost, cost_cells, cost_phases, graphs, images, init,
                                       tabular, text)
from hacn_core.beyond import width_connectivity
from hacn_core.engine.registry import Experiment, by_id, run_experiment, stored_runs
from hacn_core.engine.results import ResultsStore, RunResult
from hacn_core.gates.studies import cifar, gradients, keras_defaults, mnist
from hacn_core.hacn.studies import code_recipe, decoder, decoder_ablations, mechanism, mixer, vit

#: experiment id -> experiment, in the order of the book's parts
EXPERIMENTS: dict[str, Experiment] = by_id(
    # H-ACN (hacn_core/hacn/studies/)
    mixer.EXPERIMENT,  # hacn-mixer: Mixer rules, Tables 2-3, Figs. 2, 5, 7
    mixer.LONG,  # hacn-mixer-long: the same study trained until the residual weights settle
    mixer.COST,  # hacn-mixer-cost: time and memory per step of each rule
    mechanism.EXPERIMENT,  # hacn-mechanism: why the residual weights learn under the code's rule, not Eq. 2
    code_recipe.EXPERIMENT,  # hacn-code-recipe: the public code's whole Mixer recipe, Eq. 2 and the code's rule
    vit.EXPERIMENT,  # hacn-vit: ViT rules, Fig. 3a-c, layer-wise accuracy, Gamma / Delta_t
    decoder.EXPERIMENT,  # hacn-decoder: GPT-2 decoder rules, Fig. 4 layer-wise perplexity, Table 1's noisy cloze
    decoder_ablations.EXPERIMENT,  # hacn-decoder-ablations: the decoder's init and DepthLN ablations, Tables 6-7
    # AWNN (hacn_core/awnn/studies/)
    tabular.EXPERIMENT,  # awnn-tabular-fixed: Table 1's fixed MLPs and Table 3's grid
    adaptive.EXPERIMENT,  # awnn-tabular-adaptive: Table 1's AWNN rows, Figs. 3 and 8
    init.EXPERIMENT,  # awnn-kaiming-plus: Figs. 1, 2 and 7: the width and kaiming+
    compress.EXPERIMENT,  # awnn-compress: truncation and annealing, Figs. 5-6
    ablations.EXPERIMENT,  # awnn-ablations: batch size, activation, starting rate, Figs. 4 and 10
    ablations.FIXED_PLUS,  # awnn-fixed-plus: App. D's fixed MLP at the learned width
    cost.EXPERIMENT,  # awnn-step-cost: Sec. 3.3's cost of a training step
    cost_cells.CELLS,  # awnn-step-cells: the same, cell by cell, with and without the priors
    cost_cells.FAST,  # awnn-step-cells-fast: the same cells, each named step option side by side
    cost_phases.PHASES_EXPERIMENT,  # awnn-step-phases: a few cells' steps phase by phase
    images.EXPERIMENT,  # awnn-images: ResNet-20 with an adaptive or fixed classifier, Table 4, Fig. 9
    graphs.EXPERIMENT,  # awnn-graphs: GIN with adaptive or fixed MLPs, Errica et al.'s folds, Table 5, Fig. 11
    text.EXPERIMENT,  # awnn-text: Transformer with adaptive or fixed FFNs, denoising / Multi30k, App. C.3
    # Residual Gates (hacn_core/gates/studies/)
    mnist.EXPERIMENT,  # gates-mnist: Sec. 3.1, Tables 1-2, Figs. 4-5
    gradients.EXPERIMENT,  # gates-gate-gradients: every gate's gradient at initialisation
    keras_defaults.EXPERIMENT,  # gates-keras: why the deep Gated PlainNet fails here (Keras defaults, d = 50)
    cifar.EXPERIMENT,  # gates-cifar: Sec. 3.2, Tables 3-6, Figs. 6-7
    # all three papers (hacn_core/exact_checks.py)
    exact_checks.EXPERIMENT,  # exact-checks: numbers that follow from definitions
    # beyond the papers, new work (hacn_core/beyond/)
    width_connectivity.EXPERIMENT,  # width-connectivity: H-ACN connectivity and AWNN widths learned together
)


def registry() -> dict[str, Experiment]:
    """Every experiment, by id (sorted)."""
    return dict(sorted(EXPERIMENTS.items()))


def get(experiment_id: str) -> Experiment:
    """The experiment named ``experiment_id``; the error lists the known ids."""
    try:
        return EXPERIMENTS[experiment_id]
    except KeyError:
        raise KeyError(f"unknown experiment {experiment_id!r}; known: {', '.join(sorted(EXPERIMENTS))}") from None


def run(experiment_id: str, profile: str, **options: Any) -> list[RunResult]:
    """Run (or load) every configuration of experiment ``experiment_id`` at ``profile``.

    The options are :func:`hacn_core.engine.registry.run_experiment`'s (``store``,
    ``where``, ``allow_train``, ``progress``, ``stacked``). A ``where`` that matches no
    configuration (a misspelt key, a value outside the grid) raises ``ValueError``
    naming the keys or values there are (:func:`hacn_core.engine.registry.check_where`).
    """
    return run_experiment(get(experiment_id), profile, **options)


def stored(experiment_id: str, profile: str, *, store: ResultsStore | None = None,
           where: Mapping[str, Any] | None = None) -> list[RunResult]:
    """The runs of ``profile`` (matching ``where``) already stored; never trains.

    None stored yet gives ``[]``; a ``where`` that matches no configuration raises
    ``ValueError``, as in :func:`run`.
    """
    return stored_runs(get(experiment_id), profile, store=store, where=where)
