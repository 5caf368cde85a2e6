"""Why our deep Gated PlainNet fails where the paper's trains: what a 2017 Keras run did differently.

The question (Residual Gates, Sec. 3.1, Tables 1-2)
    At the paper's setting (MNIST, fully connected width 50, Dot-BN-ReLU
    layers, gate ``u = g(k) f(x) + (1 - g(k)) x`` with ``g = ReLU`` and ``k``
    starting at 1, NAdam at 0.002, batches of 128, pixels in [0, 1]) the
    study ``gates-mnist`` trains the Gated PlainNet well up to d = 20 but not
    at d = 50 and 100 (39-90% test error after 100 epochs, mean ``k`` near 1,
    no gate closed), where the paper reports 1.36% / 1.29% test error and mean
    ``k`` 0.46 / 0.41. The paper ran in Keras; Sec. 3.1 does not state the
    settings a Keras user inherits without writing them. This study changes
    them one at a time on the d = 50 Gated PlainNet, then all together.

The hypotheses (:data:`HYPOTHESES`; each is a set of configuration changes from ``baseline``)
    1. ``glorot``: Keras' ``Dense`` default, Glorot-uniform kernels
       ``U(-sqrt(6 / (n_in + n_out)), +...)`` and zero biases, instead of
       PyTorch's ``Linear`` default ``U(-1/sqrt(n_in), 1/sqrt(n_in))`` for both
       (kernel variance 1/50 against 1/150 in a 50x50 layer). BatchNorm
       removes the kernels' scale from the forward pass, but not from the
       optimizer: Adam's steps have a fixed size, so smaller weights turn
       with larger relative steps.
    2. ``keras-bn``: Keras' ``BatchNormalization(momentum=0.99, epsilon=1e-3)``,
       which is PyTorch's ``BatchNorm1d(momentum=0.01, eps=1e-3)`` (Keras'
       momentum weighs the old running value, PyTorch's the new batch value),
       instead of PyTorch's ``momentum=0.1, eps=1e-5``.
    3. The optimizer. Keras 2.0's ``Nadam(lr=0.002, beta_1=0.9, beta_2=0.999,
       epsilon=1e-8, schedule_decay=0.004)`` against ``torch.optim.NAdam``,
       term by term from their documented equations (step ``t`` from 1,
       ``psi`` = ``schedule_decay`` = ``momentum_decay``, ``g_t`` the gradient):

       ============================  ==============================================  ==============================================
       term                          Keras 2.0 ``Nadam.get_updates``                  ``torch.optim.NAdam`` (documented algorithm)
       ============================  ==============================================  ==============================================
       momentum schedule             ``mu_t = b1 (1 - 0.5 * 0.96^(t psi))``            ``mu_t = b1 (1 - 0.5 * 0.96^(t psi))``
       next momentum                 ``mu_{t+1}``, same formula at ``t + 1``           same
       products                      ``m_schedule_new = prod_{i<=t} mu_i``,             ``prod_{i<=t} mu_i``, ``prod_{i<=t+1} mu_i``
                                     ``m_schedule_next = prod_{i<=t+1} mu_i``
       first moment                  ``m_t = b1 m_{t-1} + (1 - b1) g_t``               ``m_t = b1 m_{t-1} + (1 - b1) g_t``
       second moment                 ``v_t = b2 v_{t-1} + (1 - b2) g_t^2``             same
       corrected gradient            ``g' = g_t / (1 - prod_{i<=t} mu_i)``             the same factor in ``m_hat``
       corrected moment              ``m' = m_t / (1 - prod_{i<=t+1} mu_i)``           the same factor in ``m_hat``
       Nesterov mix                  ``m_bar = (1 - mu_t) g' + mu_{t+1} m'``           ``m_hat = mu_{t+1} m' + (1 - mu_t) g'``
       second-moment correction      ``v' = v_t / (1 - b2^t)``                         ``v_hat = v_t / (1 - b2^t)``
       update                        ``p -= lr * m_bar / (sqrt(v') + eps)``            ``p -= lr * m_hat / (sqrt(v_hat) + eps)``
       defaults                      ``lr 0.002, eps 1e-8, psi 0.004``                 ``lr 0.002, eps 1e-8, psi 0.004``
       ============================  ==============================================  ==============================================

       The rules are the same, term for term, and so are the defaults; the
       only difference across Keras versions is ``epsilon``: Keras 2.0 has
       1e-8, later 2.x versions ``K.epsilon()`` = 1e-7. So no Keras optimizer
       is written here: :func:`keras_nadam_reference` transcribes Keras' update
       for the test that holds ``torch.optim.NAdam`` to it step by step, and
       the one run of this hypothesis (``nadam-eps-1e-7``) changes ``eps``.
    4. The gate. ``g-clip01``: ``g(k) = min(max(k, 0), 1)`` (gate function
       ``clip01`` of :mod:`hacn_core.gates.layers`): above 1 the gate stays
       fully open and ``k`` gets no gradient, where ReLU keeps a gradient of 1
       and lets ``g(k)`` exceed 1 (``1 - g(k)`` then turns negative).
       ``k-clip``: ``k`` projected into [0, 1] after every optimizer step, as a
       Keras ``constraint=`` on the weight would do (Keras applies constraints
       to the new value after the update). ``k-init-0.5``: ``k`` starting at
       0.5 instead of the paper's 1 (Sec. 3.2), a probe rather than a Keras
       default: at 0.5 each layer starts half identity.
    5. The input and the first layer. The pixels are already divided by 255
       (in [0, 1], Sec. 3.1) in ``gates-mnist`` (``engine.data.image_tensors``),
       so there is nothing to change: the configuration records
       ``input_scale = "unit"`` and the test checks the inputs. The first
       layer's width cannot differ from 50: every gated layer adds its input
       to its output, so the first layer's output has the middle width. What
       the paper leaves open there is whether "a linear layer with 50
       neurons" is a bare ``Dense`` or a Dot-BN-ReLU like the others:
       ``stem-dot-bn-relu``.
    Together: ``keras-all`` = ``glorot`` + ``keras-bn`` (the Keras 2.0
    optimizer is ours already; the gate options are not Keras defaults).

What the screen found (stored runs, ``results/gates-keras``; table: ``keras_report``)
    No Keras default makes the d = 50 Gated PlainNet train within 5 epochs:
    all end at 38-63% test error (the baseline at 38.5%) with mean ``k``
    between 0.985 and 1.012 and no gate closed; all Keras defaults together
    are still at 62.6% after 10 epochs (mean ``k`` 1.004). At initialisation
    the gate gradients are large and their signs nearly random under every
    hypothesis (``keras_report.gate_gradients_by_hypothesis``: sign agreement
    0.19-0.21 over 20 batches), so Adam's steps on ``k`` only jitter. The one
    run whose gates move is the probe ``k-init-0.5``: ``k`` keeps falling
    (mean 0.31 after 10 epochs, 43 of 50 gates below 0.5) and the test error
    falls with it, to 11.6% after 10 epochs. Starting the layers half open
    does what the paper's gates did on their own; no stated or default Keras
    setting does it here.

What the confirmation found (``paper`` profile, 100 epochs, seeds 0-2, two stacks of three per depth)
    ``keras-all`` fails at both depths (85.3% at d = 50, 90.1% at d = 100).
    ``k-init-0.5`` trains at d = 50 (2.21%, paper 1.36%; mean final ``k``
    0.18, paper 0.46) but not reliably at d = 100 (6.74%, 28.68% and
    90.42% by seed, paper 1.29%). So no hypothesis reproduces the paper's
    d = 100 Gated PlainNet; ``keras_report.confirmation_markdown`` writes this
    reading from the stored runs for the chapter.

What one run is
    The Gated PlainNet of ``gates-mnist`` (``hacn_core.models.fc.mnist_fc``)
    trained with the engine's ``fit`` exactly as
    :func:`hacn_core.gates.studies.mnist.train_gates_mnist` trains it (NAdam,
    batch 128, no decay, no validation split, test error and every ``k``
    recorded before training and after each epoch), with the hypothesis'
    changes. Stored per run: the ``gates-mnist`` metrics and curves, plus
    ``gates_below_half`` (gates with ``k < 0.5``, the level below which a
    Gated PlainNet layer passes more of its input than of ``f(x)``, Sec. 3.1)
    and ``k_min``.

    Many runs at once (``run gates-keras --stacked``): :func:`train_gates_keras_stacked`
    trains the runs of one depth, budget and optimizer as one ``StackedFCNet``
    (the engine of ``gates-mnist``, :func:`hacn_core.gates.studies.mnist.train_fc_stacked`).
    The members may differ in every option that belongs to one network: the
    hypothesis, the init (drawn per member before stacking), ``k_init``, the gate
    function ``g``, BatchNorm's momentum and epsilon, and ``k_clip`` (the
    projection of :class:`ClipGates`, applied to the clipped members' gates after
    every step). The optimizer's ``eps`` and ``momentum_decay`` are shared by
    one optimizer, so :func:`stack_key` keeps them equal; the ``dot_bn_relu`` stem
    is not in the stacked model, so such a run has no key and trains alone.

Profiles
    ``book``: the screen, every hypothesis at d = 50, seed 0, ``SCREEN_EPOCHS``
    epochs on all 60,000 training images (about 15-20 CPU-seconds per epoch on
    one thread here; the nine runs took 21 CPU-minutes), then a longer look (``LONGER_EPOCHS``) at ``LONGER_HYPOTHESES``:
    all Keras defaults together, and ``k`` starting at 0.5, the only run of the
    screen whose gates moved (its first epochs are those of the 5-epoch run, bit for bit).
    ``paper``: the confirmation at the paper's budget for
    ``CONFIRM_HYPOTHESES`` (d = 50 and 100, 100 epochs, seeds 0-2); with
    ``--stacked`` it trains as two stacks of six (one per depth: both
    hypotheses, three seeds).
    ``smoke``: d = 4, one epoch on 2,000 images, three hypotheses.
    :mod:`hacn_core.gates.studies.keras_report` builds the table of the runs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch

from hacn_core import gates
from hacn_core.engine.registry import Experiment, with_overrides
from hacn_core.engine.results import RunContext
from hacn_core.engine.training import Callback, TrainConfig, TrainState, fit
from hacn_core.gates.studies import mnist
from hacn_core.models.fc import mnist_fc
from hacn_core.models.stacked_fc import StackedFCNet

if TYPE_CHECKING:  # pragma: no cover
    from hacn_core.engine.dry_run import DryRunPlan

EXPERIMENT_ID = "gates-keras"
SCREEN_DEPTH = 50
SCREEN_EPOCHS = 5
SCREEN_SEED = 0
LONGER_EPOCHS = 10  # a longer look at the screen's most telling runs (book profile)
LONGER_HYPOTHESES: tuple[str, ...] = ("k-init-0.5", "keras-all")
CONFIRM_DEPTHS: tuple[int, ...] = (50, 100)
SMOKE_DEPTH = 4
SMOKE_TRAIN_SUBSET = 2000
SMOKE_HYPOTHESES: tuple[str, ...] = ("baseline", "k-clip", "keras-all")
INPUT_SCALES: tuple[str, ...] = ("unit",)  # pixels / 255 in [0, 1] (Sec. 3.1); the only one the data gives
KERAS_BN = {"bn_momentum": 0.01, "bn_eps": 1e-3}  # Keras BatchNormalization(momentum=0.99, epsilon=1e-3)

#: hypothesis -> (changes from the baseline, what it tests)
HYPOTHESES: dict[str, tuple[dict[str, Any], str]] = {
    "baseline": ({}, "gates-mnist as it is: PyTorch defaults"),
    "glorot": ({"init": "glorot"}, "1. Keras Dense init: Glorot-uniform kernels, zero biases"),
    "keras-bn": (dict(KERAS_BN), "2. Keras BatchNorm: momentum 0.99 (torch 0.01), epsilon 1e-3"),
    "nadam-eps-1e-7": ({"eps": 1e-7}, "3. Keras Nadam (same rule as torch NAdam) with K.epsilon() = 1e-7"),
    "g-clip01": ({"g": "clip01"}, "4. gate g(k) = min(max(k, 0), 1): no gradient above k = 1"),
    "k-clip": ({"k_clip": True}, "4. k projected into [0, 1] after every step (a Keras constraint)"),
    "k-init-0.5": ({"k_init": 0.5}, "4. k starts at 0.5 instead of 1 (a probe, not a Keras default)"),
    "stem-dot-bn-relu": ({"stem": "dot_bn_relu"}, "5. first layer Dot-BN-ReLU instead of a bare linear map"),
    "keras-all": ({"init": "glorot", **KERAS_BN}, "all Keras defaults: Glorot init + Keras BatchNorm"),
}
#: the hypotheses the paper profile confirms at the full budget (see the module doc); the baseline at
#: that budget is gates-mnist's Gated PlainNet (the same training: the screen's baseline run reproduces
#: its first five epochs bit for bit)
CONFIRM_HYPOTHESES: tuple[str, ...] = ("keras-all", "k-init-0.5")
GATE_OPEN_BELOW = 0.5  # k < 0.5: the layer passes more of x than of f(x) (Sec. 3.1, Table 2 discussion)


# ----------------------------------------------------------------------------- Keras' Nadam, for the test


def keras_nadam_reference(grads: Sequence[float], p0: float, *, lr: float = 0.002, beta_1: float = 0.9,
                          beta_2: float = 0.999, epsilon: float = 1e-8,
                          schedule_decay: float = 0.004) -> list[float]:
    """A scalar parameter's values after each step of Keras 2.0's ``Nadam`` (its ``get_updates``, in floats).

    ``grads[t - 1]`` is the gradient at step ``t``. Written from Keras' update
    (Dozat's momentum schedule, see the module doc) to compare with
    ``torch.optim.NAdam``; it is not used to train.
    """
    p, m, v, m_schedule = float(p0), 0.0, 0.0, 1.0
    out = []
    for t, g in enumerate(grads, start=1):
        momentum_cache_t = beta_1 * (1.0 - 0.5 * 0.96 ** (t * schedule_decay))
        momentum_cache_t_1 = beta_1 * (1.0 - 0.5 * 0.96 ** ((t + 1) * schedule_decay))
        m_schedule_new = m_schedule * momentum_cache_t
        m_schedule_next = m_schedule * momentum_cache_t * momentum_cache_t_1
        m_schedule = m_schedule_new
        g_prime = g / (1.0 - m_schedule_new)
        m = beta_1 * m + (1.0 - beta_1) * g
        m_prime = m / (1.0 - m_schedule_next)
        v = beta_2 * v + (1.0 - beta_2) * g * g
        v_prime = v / (1.0 - beta_2 ** t)
        m_bar = (1.0 - momentum_cache_t) * g_prime + momentum_cache_t_1 * m_prime
        p = p - lr * m_bar / (math.sqrt(v_prime) + epsilon)
        out.append(p)
    return out


# ----------------------------------------------------------------------------- configurations


def make_config(hypothesis: str, depth: int = SCREEN_DEPTH, seed: int = SCREEN_SEED,
                **overrides: Any) -> dict[str, Any]:
    """The ``gates-mnist`` Gated PlainNet run with ``hypothesis``' changes, then ``overrides``."""
    if hypothesis not in HYPOTHESES:
        raise ValueError(f"hypothesis={hypothesis!r} is not a hypothesis; allowed: {', '.join(HYPOTHESES)}")
    base = mnist.make_config("gated_plain", depth, seed, removal=False)
    base |= {"bn_eps": 1e-5, "k_clip": False, "input_scale": "unit", "hypothesis": hypothesis}
    return with_overrides(with_overrides(base, HYPOTHESES[hypothesis][0]), overrides)


def book_configs() -> list[dict[str, Any]]:
    """The screen: every hypothesis at d = 50, seed 0, ``SCREEN_EPOCHS`` epochs, all training images;
    then ``LONGER_HYPOTHESES`` for ``LONGER_EPOCHS`` epochs."""
    return ([make_config(h, SCREEN_DEPTH, SCREEN_SEED, epochs=SCREEN_EPOCHS) for h in HYPOTHESES]
            + [make_config(h, SCREEN_DEPTH, SCREEN_SEED, epochs=LONGER_EPOCHS) for h in LONGER_HYPOTHESES])


def paper_configs() -> list[dict[str, Any]]:
    """The confirmation: ``CONFIRM_HYPOTHESES`` at d = 50 and 100, 100 epochs, seeds 0-2."""
    return [make_config(h, d, s) for h in CONFIRM_HYPOTHESES for d in CONFIRM_DEPTHS for s in mnist.PAPER_SEEDS]


def smoke_configs() -> list[dict[str, Any]]:
    """Tiny: d = 4, one epoch on 2,000 images, three hypotheses (the clip path included)."""
    return [make_config(h, SMOKE_DEPTH, 0, epochs=1, train_subset=SMOKE_TRAIN_SUBSET) for h in SMOKE_HYPOTHESES]


def check_config(config: dict[str, Any]) -> None:
    """``gates-mnist``'s checks plus this study's keys."""
    mnist._check_config(config)
    if config.get("kind") != "gated_plain":
        raise ValueError(f"kind={config.get('kind')!r} is not studied here; allowed: gated_plain")
    if config.get("hypothesis") not in HYPOTHESES:
        raise ValueError(f"hypothesis={config.get('hypothesis')!r} is not a hypothesis; "
                         f"allowed: {', '.join(HYPOTHESES)}")
    if not isinstance(config.get("k_clip"), bool):
        raise ValueError(f"k_clip={config.get('k_clip')!r} must be True or False")
    if config.get("input_scale") not in INPUT_SCALES:
        raise ValueError(f"input_scale={config.get('input_scale')!r} is not supported; allowed: "
                         f"{', '.join(INPUT_SCALES)}")


# ----------------------------------------------------------------------------- training


class ClipGates(Callback):
    """After every optimizer step, ``k <- min(max(k, lo), hi)`` for every gate (a Keras weight constraint).

    Only the value is projected; the optimizer's moments are left as they are,
    as with Keras' ``constraint=`` (applied to the updated variable).
    """

    def __init__(self, lo: float = 0.0, hi: float = 1.0) -> None:
        if not lo < hi:
            raise ValueError(f"lo={lo!r} must be below hi={hi!r}")
        self.lo, self.hi = lo, hi

    @torch.no_grad()
    def on_step_end(self, state: TrainState) -> None:
        for _, k in gates.gate_parameters(state.model):
            k.clamp_(self.lo, self.hi)


def build_model(config: dict[str, Any]) -> torch.nn.Module:
    """The run's network, its weights drawn after ``torch.manual_seed(seed)`` (as ``gates-mnist``)."""
    torch.manual_seed(config["seed"])
    return mnist_fc(config["kind"], config["depth"], config["width"], g=config["g"], k_init=config["k_init"],
                    stem=config["stem"], init=config["init"], bn_momentum=config["bn_momentum"],
                    bn_eps=config["bn_eps"])


def _train_config(config: dict[str, Any]) -> TrainConfig:
    return TrainConfig(epochs=config["epochs"], batch_size=config["batch_size"], lr=config["lr"], optimizer="nadam",
                       betas=tuple(config["betas"]), eps=config["eps"], weight_decay=config["weight_decay"],
                       seed=config["seed"], precision="fp32", record_every=1, checkpoint_every_minutes=5.0)


def train_gates_keras(config: dict[str, Any], context: RunContext) -> dict[str, Any]:
    """Train one Gated PlainNet under one hypothesis; measure it as ``gates-mnist`` does."""
    check_config(config)
    X, y = mnist.mnist_tensors(True)
    train = mnist.training_subset(X, y, config["train_subset"])
    test = mnist.mnist_tensors(False)
    model = build_model(config)
    callbacks: list[Callback] = [mnist._TestErrorAndGates(test, config["nadam_momentum_decay"])]
    if config["k_clip"]:
        callbacks.append(ClipGates(0.0, 1.0))
    out = fit(model, train, _train_config(config), test=test, callbacks=callbacks,
              checkpoint_dir=context.checkpoint_dir, progress=context.progress)
    return measure(config, model, out.curves, out.metrics, test) | {"device": out.device}


def measure(config: dict[str, Any], model: torch.nn.Module, curves: dict[str, list], final: dict[str, float],
            test: tuple[torch.Tensor, torch.Tensor]) -> dict[str, Any]:
    """``gates-mnist``'s measurements of one trained network (either engine), plus ``gates_below_half``
    and ``k_min``."""
    result = mnist._measure(config, model, curves, final, test)
    k = torch.tensor(result["curves"]["k_per_block"])
    result["metrics"] |= {"gates_below_half": int((k < GATE_OPEN_BELOW).sum()), "k_min": float(k.min())}
    return result


# ----------------------------------------------------------------------------- stacked engine

#: what members of one StackedFCNet may differ in (beyond gates-mnist's kind, seed and removal): the
#: hypothesis' options that belong to one network (see the module doc)
STACK_FREE_KEYS: tuple[str, ...] = mnist.STACK_FREE_KEYS + (
    "hypothesis", "init", "k_init", "g", "bn_momentum", "bn_eps", "k_clip")


def stack_key(config: dict[str, Any]) -> tuple | None:
    """Runs that may train together: equal in all but :data:`STACK_FREE_KEYS`. None (train alone) for a
    ``dot_bn_relu`` stem, which ``StackedFCNet`` does not have."""
    if config["stem"] != "linear":
        return None
    return mnist.stack_key(config, free=STACK_FREE_KEYS)


@torch.no_grad()
def clip_stacked_gates(model: StackedFCNet, members: Sequence[dict[str, Any]]) -> None:
    """:class:`ClipGates` for the ``k_clip`` members of a stacked model (``members[s]`` is member ``s``'s
    configuration): their column of ``k`` (``(depth, S)``; the Gated PlainNet gates every layer, so the
    whole column) is projected into [0, 1]."""
    for s, config in enumerate(members):
        if config["k_clip"]:
            model.k[:, s].clamp_(0.0, 1.0)


def train_gates_keras_stacked(configs: Sequence[dict[str, Any]], checkpoint_dir, progress: bool = True, *,
                              checkpoint_every_s: float | None = None) -> list[dict[str, Any]]:
    """Train several runs of :func:`train_gates_keras` at once as one ``StackedFCNet``; one result each
    (``mnist.train_fc_stacked``, with :func:`clip_stacked_gates` after every step)."""
    return mnist.train_fc_stacked(configs, checkpoint_dir, progress, check_config=check_config,
                                  build_model=build_model, stack_key=stack_key, measure=measure,
                                  after_step=clip_stacked_gates, label="hypothesis",
                                  checkpoint_every_s=checkpoint_every_s)


def dry_run_plan(config: dict[str, Any]) -> DryRunPlan:
    """One run's dry run: :func:`build_model` on flattened MNIST inputs, NAdam as trained here."""
    from hacn_core.engine.data import IMAGE_TRAIN_SPLITS
    from hacn_core.engine.dry_run import DryRunPlan, classification_batch

    check_config(config)
    split = IMAGE_TRAIN_SPLITS["MNIST"]
    train = _train_config(config)
    return DryRunPlan(
        key={k: config[k] for k in ("hypothesis", "depth", "stem", "g", "init", "bn_eps")},
        model=lambda: build_model(config), batch=classification_batch((math.prod(split.shape),), split.classes),
        train=TrainConfig(epochs=train.epochs, batch_size=train.batch_size, lr=train.lr, optimizer="nadam",
                          betas=train.betas, eps=train.eps, weight_decay=train.weight_decay, precision="fp32"),
        n_train=config["train_subset"] or split.n_train)


EXPERIMENT = Experiment(
    id=EXPERIMENT_ID,
    title="Why the deep Gated PlainNet fails here: Keras 2017 defaults, one at a time (Residual Gates Sec. 3.1)",
    train=train_gates_keras,
    plan=dry_run_plan,
    train_stacked=train_gates_keras_stacked,
    stack_key=stack_key,
    configs={"smoke": smoke_configs, "book": book_configs, "paper": paper_configs},
    setting={
        "smoke": f"d = {SMOKE_DEPTH}, 1 epoch on {SMOKE_TRAIN_SUBSET:,} MNIST images, seed 0, "
                 f"{len(SMOKE_HYPOTHESES)} hypotheses",
        "book": f"screen: d = {SCREEN_DEPTH}, {SCREEN_EPOCHS} of 100 epochs, all 60,000 images, seed 0, "
                f"{len(HYPOTHESES)} hypotheses; {', '.join(LONGER_HYPOTHESES)} also {LONGER_EPOCHS} epochs",
        "paper": f"confirmation of {', '.join(CONFIRM_HYPOTHESES)}: d = 50 and 100, 100 epochs, seeds 0-2",
    },
)
