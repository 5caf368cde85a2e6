"""Exact items: numbers the papers state that follow from a definition, not from training.

One cheap run computes each of them from the library itself (a connectivity
strength from the rule, a parameter count from the model, a dataset size from
the generator or the offline files, a starting width from Eq. 11), so the ledger
can compare them with the papers like any trained result. Every profile computes the same thing.
"""

from __future__ import annotations

from typing import Any

import torch

from hacn_core.awnn import quantile_width
from hacn_core.hacn.connectivity import total_connectivity_strength
from hacn_core.engine.data import load_tudataset, synthetic_dataset
from hacn_core.engine.registry import Experiment, Link
from hacn_core.awnn.studies import init as awnn_init
from hacn_core.models.mixer import MixerConfig, MLPMixer, num_parameters
from hacn_core.models.resnet import preact_resnet, wide_resnet
from hacn_core.engine.results import RunContext


#: AWNN's starting rates: tabular (App. C.1), images (App. C.2), Multi30k (App. C.3)
AWNN_START_RATES: tuple[float, ...] = (0.01, 0.02, 0.004)


def _count(build) -> int:
    with torch.device("meta"):  # counts parameters without allocating them
        return num_parameters(build())


def compute_exact_items(config: dict[str, Any], context: RunContext) -> dict[str, Any]:
    """Connectivity strengths, parameter overheads, dataset sizes and AWNN's starting widths (module docstring)."""
    layers = 16
    mixer = {k: config[k] for k in ("image_size", "in_channels", "num_classes")}
    metrics: dict[str, float] = {
        # H-ACN Sec. 4: Gamma = ||a||_2 / sqrt(L) for a = 0 (ACN) and a = 1 (ResNet).
        "gamma_acn": total_connectivity_strength(torch.zeros(layers)),
        "gamma_resnet": total_connectivity_strength(torch.ones(layers)),
        # H-ACN Fig. 7: extra parameters of the 16-layer H-ACN Mixer over the ResNet Mixer,
        # with the paper's depth-adaptive LayerNorm off and on (Eq. 7 adds one s per layer).
        "mixer_extra_params": _count(lambda: MLPMixer(MixerConfig(**mixer, rule="hacn", depth_ln="none")))
        - _count(lambda: MLPMixer(MixerConfig(**mixer, rule="resnet", depth_ln="none"))),
        "mixer_extra_params_with_depthln": _count(lambda: MLPMixer(MixerConfig(**mixer, rule="hacn", depth_ln="paper")))
        - _count(lambda: MLPMixer(MixerConfig(**mixer, rule="resnet", depth_ln="none"))),
        # Residual Gates Sec. 3.2 and Table 6: one k per residual block.
        "gated_resnet5_extra_params": _count(lambda: preact_resnet(5, gated=True)) - _count(lambda: preact_resnet(5)),
        "gated_wrn_4_10_extra_params": _count(lambda: wide_resnet(28, 10, gated=True)) - _count(lambda: wide_resnet(28, 10)),
        "wrn_4_10_params_millions": _count(lambda: wide_resnet(28, 10, gated=True)) / 1e6,
    }
    # AWNN Table 2: sizes of the synthetic tasks (our generators) and of NCI1 (offline files).
    for name in ("DoubleMoon", "Spiral", "SpiralHard"):
        metrics[f"{name.lower()}_samples"] = len(synthetic_dataset(name, 0)[1])
    # AWNN Eq. 11: the starting width of each rate the paper uses (App. C.1-C.3 say "approximately").
    for rate in AWNN_START_RATES:
        metrics[f"awnn_start_width_rate{rate:g}"] = quantile_width(rate, 0.9)
    # AWNN Fig. 2 / Fig. 7 (left): Var[alpha^5] / Var[alpha^1] of the 5-layer ReLU AWNN MLP at
    # initialisation, averaged over 16 weight draws (Theorem 3.1 holds in expectation).
    for init in awnn_init.INITS:
        metrics[f"awnn_{init}_variance_ratio_l5_l1"] = awnn_init.depth_variance_ratio(init)
    if config["with_nci1"]:
        nci1 = load_tudataset("NCI1")
        metrics["nci1_samples"] = len(nci1)
        metrics["nci1_features"] = nci1.num_node_features
    return {"metrics": metrics, "device": "cpu"}


def _configs() -> list[dict[str, Any]]:
    return [{"image_size": 32, "in_channels": 3, "num_classes": 10, "with_nci1": True, "seed": 0}]


_LINKS = (
    ("hacn/sec4/gamma-acn", "gamma_acn", 0.0),
    ("hacn/sec4/gamma-resnet", "gamma_resnet", 0.0),
    ("hacn/fig7/extra-parameters", "mixer_extra_params", 0.0),
    ("gates/sec3.2/extra-parameters-resnet5", "gated_resnet5_extra_params", 0.0),
    ("gates/sec3.2/extra-parameters-wrn-4-10", "gated_wrn_4_10_extra_params", 0.0),
    ("gates/table6/wrn-4-10-parameters", "wrn_4_10_params_millions", 0.05),  # the paper rounds to 0.1M
    ("awnn/table2/doublemoon-samples", "doublemoon_samples", 0.0),
    ("awnn/table2/spiral-samples", "spiral_samples", 0.0),
    ("awnn/table2/spiralhard-samples", "spiralhard_samples", 0.0),
    ("awnn/table2/nci1-samples", "nci1_samples", 0.0),
    ("awnn/table2/nci1-features", "nci1_features", 0.0),
    # The paper's "approximately 256 / 128 / 512" are loose roundings: no tolerance, the row says "run".
    ("awnn/eq11/start-width-tabular-rate0.01", "awnn_start_width_rate0.01", None),
    ("awnn/eq11/start-width-image-rate0.02", "awnn_start_width_rate0.02", None),
    ("awnn/eq11/start-width-multi30k-rate0.004", "awnn_start_width_rate0.004", None),
    # Figures without a number: the ratio that carries each one's claim (the paper gives none, so "run").
    ("awnn/fig2/activation-variance", "awnn_kaiming_plus_variance_ratio_l5_l1", None),
    ("awnn/fig7-left/activation-variance", "awnn_kaiming_variance_ratio_l5_l1", None),
)

EXPERIMENT = Experiment(
    id="exact-checks",
    title="Numbers that follow from definitions: connectivity strengths, parameter counts, dataset sizes",
    train=compute_exact_items,
    configs={"smoke": _configs, "book": _configs, "paper": _configs},
    setting={p: "exact computation from the library (CIFAR-sized models, offline NCI1)" for p in ("smoke", "book", "paper")},
    links=tuple(Link(item, metric, tolerance=tol) for item, metric, tol in _LINKS),
)
