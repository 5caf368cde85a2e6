"""Connectivity and width learned together: H-ACN with AWNN layers (new work, not a reproduction).

Neither paper has this experiment. H-ACN (Sec. 2, Eq. 2) learns how strongly each
layer feeds the next, ``x_i = f_i(x_{i-1}) + a_i x_{i-1}``; AWNN (Sec. 3, Eqs. 11-14)
learns how wide each layer is, ``D_i = quantile_k f(.; nu_i)``. Here every layer
``f_i`` holds an AWNN adaptive MLP and the layers are joined by ResNet
(``a_i = 1``), ACN (``a_i = 0``) or H-ACN (``a_i ~ N(0.25, 0.005)``, trained) connections;
the equations are in :mod:`hacn_core.beyond`. The loss is AWNN's negative ELBO
(Eq. 13) divided by ``N`` (``ELBOLoss(per_sample=True)``, as the ResNet-20 study of
:mod:`hacn_core.awnn.studies.images` does for the same reason: AdamW and the
H-ACN recipe see gradients of a cross-entropy's scale); the widths follow the rates
after every optimizer step (AWNN Algorithm 1, :class:`~hacn_core.awnn.WidthCallback`).

Two settings (``setting``)
--------------------------
``mixer``
    The H-ACN Mixer of ``hacn-mixer-long`` (:mod:`hacn_core.hacn.studies.mixer`), its
    configurations, data and budget *reused as they are*: the configurations are
    ``hacn-mixer-long``'s own (:func:`hacn_core.hacn.studies.mixer.long_configs`, rules
    ResNet / ACN / H-ACN with ``mu = 0.25``, 10 and 2 classes, seeds 0-2) with the
    width fields added, the data is its :func:`~hacn_core.hacn.studies.mixer.load_data`
    (Fashion-MNIST, all 55,000 training images, 5,000 held out for validation), the
    model its :func:`~hacn_core.hacn.studies.mixer.build_model` with the channel-mixing
    MLPs made adaptive, starting at ``channel_mlp_dim`` neurons (128 at the book
    size, the fixed runs' width). Token-mixing MLPs stay fixed. Each fixed-width run
    of ``hacn-mixer-long`` is therefore the control of exactly one learning run here
    (same configuration minus the width fields, same seed, same data order), so the
    report compares them pair by pair.
``stack``
    A residual MLP stack on AWNN's tabular SpiralHard (:mod:`hacn_core.beyond.stack`,
    AWNN Table 2's data and split): embedding ``2 -> 32``, 16 pre-norm layers each an
    adaptive MLP ``32 -> D_i -> 32`` starting at 32 neurons, shared head; the same
    rules, trainer (AdamW, lr 1e-3, weight decay 0.01, cosine with 5% warmup,
    batch 128) and measurements as the Mixer. A fast second setting: it runs in
    minutes, so the same questions get answers with more seeds if needed.

The adaptive MLPs use AWNN's defaults where the Mixer has none: ``k = 0.9``, ReLU
(AWNN has no GELU; the fixed Mixer's MLPs use GELU, a difference the report names),
kaiming+ init, new neurons from ``N(0, 1)``, the weight prior ``N(0, 1)``
(``sigma_theta = 1``, AWNN's image setting, Table 4) on the adaptive weights,
an uninformative rate prior. AdamW's weight decay reaches the adaptive weights too
(they are ``weight`` parameters); the ``a_i``, rates and norm gains are kept out of
it by their roles.

The frozen-width twin (``learn_width``)
---------------------------------------
The fixed-width ``hacn-mixer-long`` run differs from its adaptive run in more than
width learning: GELU against ReLU, PyTorch's default ``Linear`` init against AWNN's
kaiming+, no weight prior against the ``N(0, 1)`` prior of Eq. 13. So the study has
a second control that differs *only* in whether the width is learned: the same
configuration with ``learn_width=False`` (:func:`frozen_width_config`). Its model is
built by the same code from the same random draws (same activation, init, starting
width ``channel_mlp_dim``, importances ``f(j; nu)`` at the starting rate, weight prior,
loss, data order and seed), and then its rates stop training (``requires_grad=False``:
no gradient, not in the optimizer) and Algorithm 1's width update becomes a no-op
(:func:`~hacn_core.beyond.combined.freeze_width_learning`), so every width stays at
its start. The rate prior is uninformative here, so the loss of Eq. 13 is the same
function of the other parameters in both arms: the two runs share their first forward
pass and first loss, and part only through the rates' update and what follows from it.
The twin's trainable parameters are the learning run's at the start less the ``L`` rates.
The report pairs each learning run with its twin seed by seed (the clean comparison)
and names the ``hacn-mixer-long`` control as differing in activation, init and prior too.

Measured per run
----------------
* the final test accuracy and the layer-wise test accuracy at every exit
  (H-ACN Sec. 3.1), the best validation accuracy, the train loss per epoch;
* ``Gamma = ||a||_2 / sqrt(L)`` (H-ACN Sec. 4) at the end (1 for ResNet, 0 for ACN by
  definition) and, for H-ACN, over training, with ``Delta_t`` and every ``a_i`` at every
  record (:func:`hacn_core.hacn.studies.common.residual_weight_summary`);
* the width of every layer at every record (``record_every_steps``) and at the end,
  the total width, the rates and the terms of Eq. 13;
* the trainable parameters at the start and the end, those of the fixed-width control,
  and per exit (:func:`~hacn_core.beyond.combined.parameters_by_exit`);
* time: wall seconds per epoch and per step while training (median over epochs, an
  epoch's validation included: as ``hacn-mixer-long`` reports them), and CPU milliseconds per
  optimizer step (one thread, interleaved, :func:`~hacn_core.hacn.studies.common.interleaved_step_times`)
  of the trained adaptive model (with its width update), its fixed-width twin at the
  trained widths (:func:`~hacn_core.beyond.combined.fixed_width_twin`) and the
  fixed-width control model at its own width (in a frozen-width twin the first of
  these is its own step: no rate gradient, a no-op width update);
* the truncation grid (AWNN Sec. 5.4 x H-ACN Sec. 3.1): the test accuracy of every
  (exit depth, kept width fraction) pair, one truncated copy and one pass per fraction
  (:func:`~hacn_core.beyond.combined.truncation_grid`).

Profiles
--------
``paper``: the Mixer at H-ACN Appendix A's size on CIFAR-10 and CIFAR-2 (300 epochs,
batch 64; ``hacn-mixer``'s paper configurations, the adaptive MLPs starting at
``D_C = 512``), and the stack at AWNN's SpiralHard budget (5,000 epochs, Table 3);
seeds 0-2; no frozen-width twins. ``book``: ``hacn-mixer-long``'s 18 book runs
(16-layer d-32 Mixer, 12,900 optimizer steps each; the 2-class task as many steps)
and the stack for :data:`BOOK_STACK_EPOCHS` epochs (28 steps an epoch), 3 rules x 3
seeds, plus the frozen-width twins of the H-ACN Mixer runs
(:data:`FROZEN_MIXER_RULES`: both tasks, seeds 0-2, 6 runs) and of all 9 stack runs:
42 runs in all. ``smoke``: ``hacn-mixer``'s smoke Mixers (2 layers, 2,000 images, one
epoch) and a 2-layer stack for 3 epochs with the frozen twin of its H-ACN run, seed 0.

Cost, measured, and the book's arithmetic
    One torch thread, process (CPU) time, on the project's 2-core machine while it was
    loaded by two other trainings (load average about 5); median of 3 repeats of 5
    interleaved steps after a warm-up step, each step forward, loss, backward, AdamW
    step and, adaptive, the width update (C++ node), at the starting widths:

    =====================  ===============  ====================
    model (batch 128)      adaptive (ms)    fixed control (ms)
    =====================  ===============  ====================
    book Mixer, ResNet     90               81
    book Mixer, H-ACN      98               93
    stack (16 layers)      17               16
    =====================  ===============  ====================

    A layer-wise pass over the 10,000 test images cost 3.6-5.6 s. A Mixer run is
    12,900 steps x about 0.095 s = 1,230 s, plus 30 validations of 5,000 images
    (about 2 s each, 60 s) and six test passes at the end (the exits and five
    truncation fractions, about 30 s): about 22 CPU-minutes, so the 18 Mixer runs take
    about 6.6 CPU-hours (more if the widths grow: the channel MLPs' cost follows
    their width). A whole 100-epoch stack run (2,800 steps, with its validations and
    final measurements) took 52 CPU-seconds, so :data:`BOOK_STACK_EPOCHS` = 1,000
    epochs (28,000 steps, a fifth of AWNN's 5,000 epochs; widths move slowly at
    AdamW's 1e-3: +7 neurons in all over the 100-epoch probe) cost about 9 minutes a
    run and 1.3 CPU-hours for the 9 runs.

    The frozen-width twin, measured the same way (one thread, the machine again loaded
    by two trainings, load average about 4), 9 repeats of 5 interleaved steps of the
    learning model, its twin and, for the Mixer, the fixed control, at the starting
    widths:

    =====================  ===============  ===============  ====================
    model (batch 128)      learning (ms)    frozen (ms)      fixed control (ms)
    =====================  ===============  ===============  ====================
    book Mixer, ResNet     91               87               88
    book Mixer, H-ACN      98               105              95
    stack (16 layers)      13               12               -
    =====================  ===============  ===============  ====================

    (a first probe of 3 repeats gave 110 / 138 / 128 ms for the H-ACN Mixer: under this
    load the three differ by no more than the noise). Freezing drops only the rates'
    gradient and the width update, both small next to the Mixer's matmuls, so a frozen
    run costs what a learning run at the starting width costs: about 22 CPU-minutes a
    Mixer run, 9 minutes a stack run. The 6 frozen H-ACN Mixers add 2.2 CPU-hours and the
    9 frozen stacks 1.3. Frozen ResNet Mixers would add another 2.2 CPU-hours (a fifth
    more on the whole profile) for a control of a rule the question does not centre on,
    so :data:`FROZEN_MIXER_RULES` holds H-ACN only (add ``"resnet"`` there to run them).
    The book profile: about 11.5 CPU-hours, on two workers about 6 hours of wall time on
    an idle machine.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import Tensor, nn

from hacn_core.awnn import ACTIVATIONS, ELBOLoss, WidthCallback, update_widths
from hacn_core.beyond.combined import (
    check_fraction,
    fixed_width_twin,
    freeze_width_learning,
    layer_widths,
    parameters_by_exit,
    truncation_grid,
)
from hacn_core.beyond.stack import ResidualMLPStack, StackConfig
from hacn_core.engine.data import SYNTHETIC, synthetic_splits
from hacn_core.engine.registry import Experiment, with_overrides
from hacn_core.engine.results import RunContext
from hacn_core.engine.stats import round_significant
from hacn_core.engine.training import TrainConfig, fit
from hacn_core.hacn.connectivity import evaluate_layerwise, total_connectivity_strength
from hacn_core.hacn.studies import mixer as hm
from hacn_core.hacn.studies.common import (
    alpha_history,
    alpha_init_of,
    check_choices,
    check_counts,
    check_residual_init,
    classifier_metrics,
    interleaved_step_times,
    residual_fields,
    residual_weight_summary,
    step_cost_metrics,
)
from hacn_core.models.mixer import num_parameters
from hacn_core.models.mlp import MlpLayer, mlp_layer

if TYPE_CHECKING:  # pragma: no cover
    from hacn_core.engine.dry_run import DryRunPlan

EXPERIMENT_ID = "width-connectivity"
SETTINGS: tuple[str, ...] = ("mixer", "stack")
#: the connectivity rules compared (H-ACN Eq. 1-2): a_i = 1, a_i = 0, a_i learned from N(0.25, 0.005)
STUDY_RULES: tuple[str, ...] = ("resnet", "acn", "hacn")
SEEDS: tuple[int, ...] = (0, 1, 2)
#: the fields this study adds to a configuration of ``hacn-mixer-long`` (what makes its MLPs adaptive)
WIDTH_FIELDS: tuple[str, ...] = ("setting", "learn_width", "awnn_k", "awnn_activation", "sigma_theta",
                                 "truncation_fractions", "timing_repeats", "timing_steps")
#: the rules whose book Mixer runs get a frozen-width twin (``learn_width=False``; module docstring, "Cost")
FROZEN_MIXER_RULES: tuple[str, ...] = ("hacn",)
#: kept width fractions of the truncation grid (1: the trained widths)
FRACTIONS: tuple[float, ...] = (1.0, 0.75, 0.5, 0.25, 0.1)
#: the stack's budget in the book profile (28 optimizer steps an epoch on SpiralHard's 3,500 training points)
BOOK_STACK_EPOCHS = 1000
#: AWNN Table 3's SpiralHard budget (the paper profile of the stack)
PAPER_STACK_EPOCHS = 5000
TEST_BATCH = 1000  # images per evaluation batch of the layer-wise and truncation passes


# ----------------------------------------------------------------------------- configurations


def width_fields(profile: str) -> dict[str, Any]:
    """The entries that make a run's MLPs adaptive (AWNN defaults, module docstring) and its extra measurements.

    ``learn_width``: True, the rates train and the widths follow them (the study); False, the frozen-width
    twin (:func:`frozen_width_config`)."""
    smoke = profile == "smoke"
    return {"learn_width": True, "awnn_k": 0.9, "awnn_activation": "relu", "sigma_theta": 1.0,
            "truncation_fractions": [1.0, 0.5] if smoke else list(FRACTIONS),
            "timing_repeats": 1 if smoke else 3, "timing_steps": 1 if smoke else 5}


def _is_compared_mixer(config: dict[str, Any]) -> bool:
    """A configuration of ``hacn-mixer`` / ``hacn-mixer-long`` this study makes adaptive: the Mixer under
    ResNet, ACN or H-ACN at the paper's ``mu = 0.25`` (not the Table 2 means, not the half budget)."""
    return (config["arch"] == "mixer" and config["rule"] in STUDY_RULES
            and config["alpha_mu"] in (None, 0.25))


def mixer_configs(profile: str) -> list[dict[str, Any]]:
    """The Mixer runs: the fixed-width study's own configurations at ``profile`` plus :func:`width_fields`.

    ``book``: ``hacn-mixer-long``'s full-budget runs (30 epochs on 55,000 images);
    ``paper`` / ``smoke``: ``hacn-mixer``'s (Appendix A on CIFAR; 2-layer smoke Mixers).
    """
    if profile == "book":
        base = [c for c in hm.long_configs() if c["epochs"] == hm.LONG_EPOCHS]
    elif profile == "paper":
        base = hm.paper_configs()
    elif profile == "smoke":
        base = hm.smoke_configs()
    else:
        raise ValueError(f"profile={profile!r} is not a profile; allowed: smoke, book, paper")
    return [{"setting": "mixer", **c, **width_fields(profile)} for c in base if _is_compared_mixer(c)]


_STACK_SIZES = {
    "smoke": dict(hidden_dim=8, num_layers=2, channel_mlp_dim=8, epochs=3, record_every_steps=10),
    "book": dict(hidden_dim=32, num_layers=16, channel_mlp_dim=32, epochs=BOOK_STACK_EPOCHS, record_every_steps=100),
    "paper": dict(hidden_dim=32, num_layers=16, channel_mlp_dim=32, epochs=PAPER_STACK_EPOCHS,
                  record_every_steps=500),
}


def stack_config(rule: str, seed: int, *, profile: str = "book", alpha_mu: float | None = None,
                 **overrides: Any) -> dict[str, Any]:
    """One run of the tabular stack on SpiralHard at ``profile``'s size (module docstring)."""
    if profile not in _STACK_SIZES:
        raise ValueError(f"profile={profile!r} is not a profile; allowed: smoke, book, paper")
    config: dict[str, Any] = {
        "setting": "stack",
        "dataset": "SpiralHard",
        "data_seed": 0,  # AWNN Table 2's split, shared with the AWNN tabular chapters
        "num_classes": 2,
        **residual_fields(rule, alpha_mu, {"hacn": 0.25}),
        **_STACK_SIZES[profile],
        "batch_size": 128,
        "optimizer": "adamw",
        "lr": 1e-3,
        "weight_decay": 0.01,
        "schedule": "cosine",
        "warmup_fraction": 0.05,
        "seed": seed,
        **width_fields(profile),
    }
    return with_overrides(config, overrides)


def frozen_width_config(config: dict[str, Any]) -> dict[str, Any]:
    """The frozen-width twin of a run: the same configuration with ``learn_width=False`` (same model, init,
    starting width, prior, loss, data order and seed; the rates do not train and the widths stay put)."""
    return config | {"learn_width": False}


def configs(profile: str) -> list[dict[str, Any]]:
    """Every run at ``profile``: the Mixer runs (:func:`mixer_configs`), then the stack, seed by seed.

    ``book`` adds the frozen-width twins (:func:`frozen_width_config`): of the Mixer runs of
    :data:`FROZEN_MIXER_RULES` (both tasks, every seed), after the learning Mixer runs, and of every stack
    run, right after it. ``smoke`` adds the twin of its H-ACN stack run (the path exercised); ``paper`` none.
    """
    seeds = SEEDS[:1] if profile == "smoke" else SEEDS
    mixers = mixer_configs(profile)
    stack = []
    for seed in seeds:
        for rule in STUDY_RULES:
            config = stack_config(rule, seed, profile=profile)
            stack.append(config)
            if profile == "book" or (profile == "smoke" and rule == "hacn"):
                stack.append(frozen_width_config(config))
    if profile == "book":
        mixers += [frozen_width_config(c) for c in mixers if c["rule"] in FROZEN_MIXER_RULES]
    return mixers + stack


def fixed_control_config(config: dict[str, Any]) -> dict[str, Any]:
    """The fixed-width configuration a Mixer run is paired with: the run's own minus :data:`WIDTH_FIELDS`
    (a configuration of ``hacn-mixer-long`` at the book profile, of ``hacn-mixer`` otherwise)."""
    if config["setting"] != "mixer":
        raise ValueError(f"setting={config['setting']!r}: only the mixer runs have stored fixed-width controls "
                         "(allowed: mixer)")
    return {k: v for k, v in config.items() if k not in WIDTH_FIELDS}


def check_config(config: dict[str, Any]) -> None:
    """Reject a configuration this experiment cannot run; the error names the field and the allowed values."""
    check_choices(config, {"setting": SETTINGS, "rule": STUDY_RULES, "awnn_activation": ACTIVATIONS})
    if config["setting"] == "mixer":
        hm.check_config(config)
        check_choices(config, {"arch": ("mixer",)})
    else:
        check_choices(config, {"dataset": tuple(SYNTHETIC), "num_classes": (2,), "optimizer": ("adamw",),
                               "schedule": ("cosine",)})
        check_counts(config, ("hidden_dim", "num_layers", "channel_mlp_dim", "epochs", "batch_size",
                              "record_every_steps"))
    check_residual_init(config, ("hacn",))
    k = config["awnn_k"]
    if isinstance(k, bool) or not isinstance(k, (int, float)) or not 0 < k < 1:
        raise ValueError(f"awnn_k={k!r} must be in (0, 1) (the quantile of Eq. 11; AWNN uses 0.9)")
    s = config["sigma_theta"]
    if s is not None and (isinstance(s, bool) or not isinstance(s, (int, float)) or not s > 0):
        raise ValueError(f"sigma_theta={s!r} must be None (uninformative weight prior) or a number > 0")
    fractions = config["truncation_fractions"]
    if not isinstance(fractions, (list, tuple)) or not fractions:
        raise ValueError(f"truncation_fractions={fractions!r} must be a non-empty list of numbers in (0, 1]")
    for r in fractions:
        check_fraction(r, "truncation_fractions")
    check_counts(config, ("timing_repeats", "timing_steps"))
    if not isinstance(config.get("learn_width"), bool):  # not check_choices: 1 == True would pass it
        raise ValueError(f"learn_width={config.get('learn_width')!r} must be True (the rates train and the widths "
                         "follow them) or False (the frozen-width twin)")


# ----------------------------------------------------------------------------- data and models


def adaptive_layer(config: dict[str, Any]) -> MlpLayer:
    """The channel MLPs of a run: AWNN's adaptive MLP (one hidden layer), ``k`` and activation of ``config``."""
    return mlp_layer("adaptive", k=config["awnn_k"], activation=config["awnn_activation"])


def build_model(config: dict[str, Any], input_shape: Sequence[int], *, mlp: str | MlpLayer | None = None) -> nn.Module:
    """The model of ``config`` for inputs of ``input_shape`` (one example: ``(C, H, W)`` or ``(features,)``).

    ``mlp``: the layer MLPs; default the adaptive ones of :func:`adaptive_layer`; ``"fixed"`` builds the
    fixed-width control (for the Mixer, exactly ``hacn-mixer-long``'s model of this configuration).
    With ``learn_width=False`` the adaptive MLPs are built the same (same draws) and then frozen
    (:func:`~hacn_core.beyond.combined.freeze_width_learning`).
    The ``a_i`` are drawn from a generator seeded with ``config["seed"]``, the rest from torch's global one.
    """
    mlp = adaptive_layer(config) if mlp is None else mlp
    if config["setting"] == "mixer":
        model = hm.build_model(config, image_size=input_shape[-1], in_channels=input_shape[0], mlp=mlp)
    else:
        stack = StackConfig(in_features=int(input_shape[0]), num_classes=config["num_classes"],
                            hidden_dim=config["hidden_dim"], num_layers=config["num_layers"],
                            mlp_dim=config["channel_mlp_dim"], rule=config["rule"], alpha_init=alpha_init_of(config),
                            depth_ln=config["depth_ln"], mlp=mlp)
        model = ResidualMLPStack(stack, generator=torch.Generator().manual_seed(config["seed"]))
    return model if config["learn_width"] else freeze_width_learning(model)


def load_data(config: dict[str, Any]) -> dict[str, tuple[Tensor, Tensor]]:
    """``train`` / ``val`` / ``test`` tensors: the Mixer's (:func:`hacn_core.hacn.studies.mixer.load_data`)
    or AWNN Table 2's split of the synthetic task (:func:`hacn_core.engine.data.synthetic_splits`)."""
    if config["setting"] == "mixer":
        return hm.load_data(config)
    return synthetic_splits(config["dataset"], config["data_seed"])


def epochs_of(config: dict[str, Any], n_train: int) -> int:
    """The run's epochs: the Mixer's equal-step rule for 2 classes (:func:`hacn_core.hacn.studies.mixer.epochs_for`)."""
    return hm.epochs_for(config, n_train) if config["setting"] == "mixer" else config["epochs"]


def train_config(config: dict[str, Any], epochs: int) -> TrainConfig:
    """AdamW with a cosine schedule and warmup (H-ACN's recipe, as ``hacn-mixer``), on adaptive layers."""
    return TrainConfig(
        epochs=epochs, batch_size=config["batch_size"], lr=config["lr"], optimizer="adamw",
        weight_decay=config["weight_decay"], schedule="cosine", warmup_epochs=config["warmup_fraction"] * epochs,
        fused=False,  # the adaptive layers' parameters are strided views (hacn_core.awnn)
        seed=config["seed"], record_every_steps=config["record_every_steps"], checkpoint_every_minutes=5.0)


# ----------------------------------------------------------------------------- measurements


def width_curves(curves: dict[str, list]) -> dict[str, list]:
    """Per record: ``widths`` (every layer's ``D_i``), ``total_width``, ``rates`` (6 digits), the terms of Eq. 13."""
    out: dict[str, list] = {
        "widths": [[int(w) for w in ws] for ws in curves["awnn/widths"]],
        "total_width": [int(t) for t in curves["awnn/total_width"]],
        "rates": [round_significant(r, 6) for r in curves["awnn/rates"]],
    }
    for term in ("total", "predictive", "weight_prior", "width_prior"):
        out[f"elbo/{term}"] = round_significant(curves[f"elbo/{term}"], 6)
    return out


def step_times(config: dict[str, Any], model: nn.Module, control: nn.Module, batch: tuple[Tensor, Tensor],
               n_train: int) -> dict[str, float]:
    """CPU ms per optimizer step, interleaved: ``adaptive`` (a copy of the trained model: ELBO, AdamW, width
    update), ``twin`` (its fixed-width twin at the trained widths) and ``fixed`` (the fixed-width control at
    its own width), with ratios to ``fixed`` (:func:`hacn_core.hacn.studies.common.step_cost_metrics`)."""
    device = batch[0].device
    adaptive = copy.deepcopy(model)
    models = {"adaptive": adaptive, "twin": fixed_width_twin(model), "fixed": control}
    opts = {n: torch.optim.AdamW(m.parameters(), lr=config["lr"], weight_decay=config["weight_decay"],
                                 foreach=False) for n, m in models.items()}
    elbo = ELBOLoss(adaptive, n_train, sigma_theta=config["sigma_theta"], per_sample=True)
    x, y = batch

    def step(name: str) -> None:
        m, opt = models[name], opts[name]
        out = m(x)
        loss = elbo(out, y) if name == "adaptive" else nn.functional.cross_entropy(out, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if name == "adaptive":
            update_widths(m, opt)  # Algorithm 1, line 5: part of an adaptive step

    times = interleaved_step_times({n: (lambda n=n: step(n)) for n in models}, repeats=config["timing_repeats"],
                                   timed=config["timing_steps"], device=device)
    return step_cost_metrics(times, "fixed")


def train_width_connectivity(config: dict[str, Any], context: RunContext) -> dict[str, Any]:
    """Train one run of the study and measure it (module docstring, "Measured per run")."""
    check_config(config)
    data = load_data(config)
    X, y = data["train"]
    torch.manual_seed(config["seed"])
    model = build_model(config, X.shape[1:])
    epochs = epochs_of(config, len(X))
    start_widths = layer_widths(model)
    start_parameters = num_parameters(model)
    elbo = ELBOLoss(model, len(X), sigma_theta=config["sigma_theta"], per_sample=True)
    out = fit(model, data["train"], train_config(config, epochs), val=data["val"], test=data["test"], loss_fn=elbo,
              callbacks=[WidthCallback(elbo)], checkpoint_dir=context.checkpoint_dir, progress=context.progress)
    c = out.curves
    device = next(model.parameters()).device
    test_x, test_y = data["test"]
    batches = [(test_x[i:i + TEST_BATCH], test_y[i:i + TEST_BATCH]) for i in range(0, len(test_x), TEST_BATCH)]
    layerwise = evaluate_layerwise(model, batches, device=device).tolist()
    grid = truncation_grid(model, batches, config["truncation_fractions"], device=device)
    widths = layer_widths(model)
    L = len(model.stack.blocks)

    epoch_seconds = np.diff([0.0] + list(c["time_s"]))
    epoch_steps = np.diff([0] + list(c["step"]))
    torch.manual_seed(config["seed"])  # the control's weights: those of the fixed-width run of this seed
    control = build_model(config, X.shape[1:], mlp="fixed").to(device)
    metrics: dict[str, Any] = {
        **classifier_metrics(out, layerwise),
        "total_width": int(sum(widths)),
        "start_total_width": int(sum(start_widths)),
        "mean_width": float(np.mean(widths)),
        "parameters": num_parameters(model),
        "start_parameters": start_parameters,
        "fixed_parameters": num_parameters(control),
        "epochs": epochs,
        "steps": int(c["step"][-1]),
        "seconds_per_epoch": float(np.median(epoch_seconds)),
        "seconds_per_step": float(np.median(epoch_seconds / np.maximum(epoch_steps, 1))),
        "gamma": total_connectivity_strength(model.stack.residual_weights()),  # 1: ResNet, 0: ACN
    }
    curves: dict[str, list] = {
        "epoch": c["epoch"], "train_loss": c["train_loss"], "time_s": c["time_s"],
        "eval_epoch": c["eval_epoch"], "val_accuracy": c["val_accuracy"],
        "record_step": c["record_step"], "layerwise_test_accuracy": layerwise,
        **width_curves(c),
        "final_widths": widths,
        "parameters_by_exit": parameters_by_exit(model),
        "truncation_fractions": grid["fractions"], "truncation_accuracy": grid["accuracy"],
        "truncation_widths": grid["widths"], "truncation_parameters": grid["parameters"],
    }
    weight_metrics, weight_curves = residual_weight_summary(c, L)  # H-ACN: Gamma over training, Delta_t, a_i
    metrics |= weight_metrics
    curves |= weight_curves
    alphas = alpha_history(c, L)
    if alphas is not None:
        curves["alphas"] = [round_significant(row, 6) for row in alphas.tolist()]
    probe = (X[:config["batch_size"]].clone().to(device), y[:config["batch_size"]].to(device))
    metrics |= step_times(config, model, control, probe, len(X))
    return {"metrics": metrics, "curves": curves, "device": out.device}


# ----------------------------------------------------------------------------- dry run and registry


def dry_run_plan(config: dict[str, Any]) -> DryRunPlan:
    """One run's dry run (``hacn_core.engine.dry_run``): :func:`build_model` (adaptive) on synthetic inputs,
    the ELBO divided by ``N`` and Algorithm 1's width update after the step, AdamW as :func:`train_config`.
    The Mixer takes ``hacn-mixer``'s plan (its epochs and training-set size) with this model and loss."""
    from hacn_core.engine.dry_run import DryRunPlan, classification_batch

    check_config(config)
    if config["setting"] == "mixer":
        base = hm.dry_run_plan(config)
        shape = base.batch(1)[0].shape[1:]
        n_train, epochs, batch = base.n_train, base.train.epochs, base.batch
    else:
        n_train, epochs = SYNTHETIC[config["dataset"]].split[0], config["epochs"]
        shape, batch = (2,), classification_batch((2,), config["num_classes"])
    key = {k: config.get(k) for k in ("setting", "dataset", "rule", "num_classes", "hidden_dim", "num_layers",
                                      "channel_mlp_dim", "patch_size", "token_mlp_dim", "depth_ln", "awnn_k",
                                      "awnn_activation", "learn_width")}
    return DryRunPlan(
        key=key | {"residual_weights": config["alpha_mu"] is not None},
        model=lambda: build_model(config, shape), batch=batch, train=train_config(config, epochs), n_train=n_train,
        loss=lambda model: ELBOLoss(model, n_train, sigma_theta=config["sigma_theta"], per_sample=True),
        callbacks=lambda elbo: [WidthCallback(elbo)],
        note=f"adaptive MLPs at their starting width, {config['channel_mlp_dim']}")


EXPERIMENT = Experiment(
    id=EXPERIMENT_ID,
    title="Beyond the papers: connectivity (ResNet / ACN / H-ACN) and width (AWNN) learned together",
    train=train_width_connectivity,
    plan=dry_run_plan,
    configs={"smoke": lambda: configs("smoke"), "book": lambda: configs("book"), "paper": lambda: configs("paper")},
    setting={
        "smoke": "2-layer Mixers with adaptive channel MLPs, 2,000 Fashion-MNIST images, 1 epoch; a 2-layer "
                 "stack on SpiralHard, 3 epochs, and its H-ACN run's frozen-width twin; seed 0",
        "book": f"hacn-mixer-long's 16-layer d-32 Mixer with adaptive channel MLPs, all 55,000 Fashion-MNIST "
                f"images, {hm.LONG_EPOCHS} epochs (10 and 2 classes); a 16-layer adaptive stack on SpiralHard, "
                f"{BOOK_STACK_EPOCHS} epochs; ResNet / ACN / H-ACN, seeds 0-2; frozen-width twins of the H-ACN "
                "Mixers and of every stack run",
        "paper": "Appendix A's Mixer with adaptive channel MLPs on CIFAR-10 / CIFAR-2, 300 epochs; the stack on "
                 f"SpiralHard, {PAPER_STACK_EPOCHS} epochs; seeds 0-2",
    },
    distributed=False,  # the widths change during training, which DistributedDataParallel cannot follow
)
