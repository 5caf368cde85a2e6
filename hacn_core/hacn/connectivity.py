"""Inter-layer connectivity: one residual stack, many forward rules, and the analysis of C.

Hybrid Auto-Compressing Networks (H-ACN) write feed-forward networks, ResNets and
Auto-Compressing Networks (ACN) as one forward rule (Sec. 2, Eq. 1-2)::

    x_i = f_i(x_{i-1}) + a_i x_{i-1},        y = sum_{i=0..L} f_i(x_{i-1}),   f_0 = x_0

with ``a_i = 0`` an ACN and ``a_i = 1`` a ResNet; trainable ``a_i`` initialised
``N(0.25, 0.005)`` (sigma a standard deviation) is an H-ACN. Appendix G's
Algorithm 1 is the same recursion with a running sum ``current``.
:class:`ResidualStack` takes any list of shape-preserving blocks ``f_i`` and
applies a *named rule*:

=====================  ==========================================================  ===========
rule                   one layer                                                   output / exits
=====================  ==========================================================  ===========
``plain``              ``x_i = f_i(x_{i-1})``                                      stream ``x_i``
``resnet``             ``x_i = x_{i-1} + f_i(x_{i-1})``                            stream
``acn``                ``x_i = f_i(x_{i-1})``, ``s_i = s_{i-1} + f_i(x_{i-1})``    sum ``s_i``
``hacn``               ``x_i = f_i(x_{i-1}) + a_i x_{i-1}``, ``s_i`` as ACN         sum
``hacn_code_mixer``    public Mixer code: ``x_i = c + a_i (t + x)``, ``s += c + a_i t``  sum
``hacn_code_vit``      public ViT code: ``x' = x + t``, ``x_i = c + a_i x'``, ``s += c``  sum
``hacn_code_gpt``      public GPT code: ``x_i = f_i(x) + (1 - a_i) x``, ``s`` as ACN  sum
``hacn_split_gain``    ``x_i = c + b_i t + a_i x_{i-1}``, ``s += c + b_i t``           sum
``rezero``             ``x_i = x_{i-1} + a_i f_i(x_{i-1})``, ``a_i`` init 0          stream
``laurel``             ``x_i = a_i f_i(x_{i-1}) + b_i x_{i-1}``, init 1, 1           stream
``denseformer``        ``X_i = B_i(Y_{i-1})``, ``Y_i = sum_{j<=i} w_ij X_j``          ``Y_i``
``gated``              ``x_i = g(k_i) f_i(x_{i-1}) + x_{i-1}`` (Residual Gates)      stream
``gated_plain``        ``x_i = g(k_i) f_i(x) + (1 - g(k_i)) x`` (Residual Gates)     stream
=====================  ==========================================================  ===========

``s_0 = x_0``. The paper's rules (first four) are the defaults everywhere; the
``hacn_code_*`` rules are what the paper's public code does, offered so
a reader can run both. ``hacn_code_mixer`` / ``hacn_code_vit`` split each layer
into two sub-layers, ``t`` (token mixing / attention) and ``c`` (channel MLP
evaluated at ``x + t``), so their blocks must provide ``parts(x) -> (t, c)``;
with ``f = t + c`` the paper's ``hacn`` adds both parts to the sum and to the
stream unscaled. ``hacn_code_gpt`` parametrises the residual weight as
``1 - a_i`` with ``a_i`` initialised near 1, so training starts as an ACN.

``hacn_split_gain`` separates the two jobs the Mixer code gives ``a_i``: the
token-mixing output gets its own trainable gain ``b_i`` (in the stream and in the
sum), and ``a_i`` keeps only the residual path. ``b_i`` starts equal to ``a_i``, so
at initialisation it *is* ``hacn_code_mixer``; with ``b_i = 1`` held it is Eq. 2's
``hacn`` (tested). It is a rule of our own, not the paper's or its code's: the
mechanism study (:mod:`hacn_core.hacn.studies.mechanism`) uses it to ask which of
the two jobs makes the code's residual weights learn.

Facts that follow from the equations (tested):

* ``hacn`` with every ``a_i = 1`` *is* ``resnet``, bit for bit: ``s_i = x_i`` at
  every depth, because ``s_i = s_{i-1} + h_i`` and ``x_i = h_i + 1 * x_{i-1}``
  start from the same ``x_0``. With ``a_i = 0`` it is ``acn``, bit for bit.
* ``a_L`` (the last layer's weight) never reaches the output: ``x_L`` is not
  used by ``y`` (Algorithm 1 computes it and drops it), so its gradient is 0 and
  it keeps its initial value. The paper still counts ``L`` weights ("only 16
  extra parameters") and ``Gamma`` divides by ``sqrt(L)``; we do the same.

Scaled-residual baselines the public review asked for (ReZero, LAuReL-RW,
DenseFormer's depth-weighted average, residual gates) are rules of the same
module, so every rule shares blocks, exits and connectivity analysis.

Direct Layer Connectivity Matrix (Eq. 3-5, Appendix C, Fig. 8)
---------------------------------------------------------------
Index convention: sources and targets are *layers* ``0..L``, layer 0 being the
embedding (``h_0 = x_0``) and ``h_i = f_i(x_{i-1})`` the output of layer ``i``.
Column ``k`` holds the weights with which layer ``k``'s input is built from the
outputs of earlier layers, ``x_{k-1} = input_k = sum_{i<k} C[i][k] h_i`` (Eq. 3),
so ``C`` is ``(L+1) x (L+1)``, strictly upper triangular, column 0 empty and
``C[k-1][k] = 1`` for the feed-forward connection. For H-ACN,
``C[i][j] = prod_{l=i+1..j-1} a_l`` (Eq. 4). The classifier's input (the
*readout* ``y``) is not a layer, so ``C`` alone cannot show an ACN's long
connections to the output (its layer inputs are those of a plain network).
:func:`connectivity_matrix` therefore has three layouts (``output=``):

``"none"``    ``(L+1) x (L+1)``: layer inputs only, exactly Eq. 3-5.
``"column"``  ``(L+1) x (L+2)``: plus a last column ``out`` with
              ``y = sum_i C[i][out] h_i`` (ones for ACN/H-ACN/ResNet, ``e_L`` for plain).
``"figure"``  ``(L+1) x (L+1)`` as Fig. 8 draws it: column ``L`` also shows the
              readout's connections from sources ``i < L`` (entry-wise maximum
              of the two), which gives Fig. 8c's ``C[i][L] = 1`` for ACN while
              leaving FFN (Fig. 8b) and ResNet (Fig. 8a) unchanged.

:meth:`ResidualStack.connectivity` computes ``C`` from the *rule itself*: it
runs the stack's mixing arithmetic with each block replaced by a one-hot vector
``e_i`` standing for ``h_i``; since every rule mixes layer outputs linearly, the
vectors that arrive at each layer are the columns of ``C``. This works for every
single-output rule (ReZero, LAuReL, DenseFormer, gates included), and tests check
it against the closed forms of Eq. 4 / Appendix C.

Analysis (Sec. 4): :func:`total_connectivity_strength` ``Gamma = ||a||_2 / sqrt(L)``,
:func:`convergence_distance` ``Delta_t = ||a_T - a_t||_2``,
:func:`pairwise_pearson` / :func:`seed_correlation` (correlation of converged
alphas across seeds), :func:`layerwise_accuracy` (Sec. 3.1).
Presentation: :func:`connectivity_frame` (``C`` as a labelled ``DataFrame``) and
:func:`connectivity_heatmap` (Fig. 8's drawing, seaborn);
:func:`forward_from_connectivity` runs a network from ``C`` and its blocks alone.

Layer-wise exits (Sec. 3.1): ``forward(x, return_exits=True)`` returns, from one
pass, the representation the shared head sees when the network stops after
layer ``i`` -- the partial sum ``s_i`` for ACN-type rules, the stream ``x_i``
otherwise. They equal truncated networks (``forward(x, num_layers=i)``) exactly.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from numbers import Real

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from hacn_core.engine.checks import check_choice
from hacn_core.gates import GATE_FUNCTIONS, gated_plain, gated_residual
from hacn_core.engine.roles import tag

# ---------------------------------------------------------------------------
# Names and validation
# ---------------------------------------------------------------------------

PAPER_RULES: tuple[str, ...] = ("plain", "resnet", "acn", "hacn")
CODE_RULES: tuple[str, ...] = ("hacn_code_mixer", "hacn_code_vit", "hacn_code_gpt")
BASELINE_RULES: tuple[str, ...] = ("rezero", "laurel", "denseformer", "gated", "gated_plain")
#: rules of our own that take the code's rules apart (module docstring)
MECHANISM_RULES: tuple[str, ...] = ("hacn_split_gain",)
RULES: tuple[str, ...] = PAPER_RULES + CODE_RULES + BASELINE_RULES + MECHANISM_RULES

#: rules with one residual weight ``a_i`` per layer, initialised by ``AlphaInit``
ALPHA_RULES: tuple[str, ...] = ("hacn",) + CODE_RULES + MECHANISM_RULES
#: rules whose blocks must provide ``parts(x) -> (t, c)``
TWO_PART_RULES: tuple[str, ...] = ("hacn_code_mixer", "hacn_code_vit", "hacn_split_gain")
#: rules whose output (and exits) is the running sum of layer outputs
SUM_RULES: tuple[str, ...] = ("acn", "hacn") + CODE_RULES + MECHANISM_RULES
#: ACN family: the rules footnote 3 pairs with Depth-adaptive LayerNorm
ACN_FAMILY: tuple[str, ...] = SUM_RULES

INIT_STRATEGIES: tuple[str, ...] = ("normal", "half_layers", "exp_decay", "constant")
DENSE_BASES: tuple[str, ...] = ("resnet", "plain")
DEPTH_LN_FORMS: tuple[str, ...] = ("paper", "code")
#: a backbone's ``depth_ln`` setting: ``auto`` (:func:`resolve_depth_ln`), ``none`` (plain LayerNorm) or a form
DEPTH_LN_CHOICES: tuple[str, ...] = ("auto", "none") + DEPTH_LN_FORMS
CONNECTIVITY_LAYOUTS: tuple[str, ...] = ("none", "column", "figure")


def resolve_depth_ln(depth_ln: str, rule: str) -> str:
    """A backbone's ``depth_ln`` with ``auto`` resolved: ``paper`` (Eq. 7) for the ACN family (footnote 3: "another
    technique we employ to enhance the forward pass of H-ACNs and ACNs"), else ``none``."""
    if depth_ln != "auto":
        return depth_ln
    return "paper" if rule in ACN_FAMILY else "none"


# ---------------------------------------------------------------------------
# Initialisation of the residual weights (Sec. 3.1, Sec. 4, Appendix D Table 6)
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class AlphaInit:
    """How the residual weights ``a_1..a_L`` start (Sec. 3.1 and Appendix D, Table 6).

    ``strategy``:

    ``normal``       ``a_i ~ N(mu, sigma)``, sigma a standard deviation; the
                     paper's default ``N(0.25, 0.005)`` (Sec. 3.1).
    ``half_layers``  ``N(first_mu, sigma)`` for the first ``ceil(L/2)`` layers,
                     ``N(second_mu, sigma)`` for the rest (Table 6: 0.4 / 0.15).
    ``exp_decay``    mean decaying exponentially with depth from ``start_mu`` to
                     ``end_mu``: ``mu_l = start (end/start)^((l-1)/(L-1))``
                     (Table 6: 0.25 -> 0.1), noise ``sigma``.
    ``constant``     every ``a_i = value`` (0 gives an ACN, 1 a ResNet).
    """

    strategy: str = "normal"
    mu: float = 0.25
    sigma: float = 0.005
    first_mu: float = 0.4
    second_mu: float = 0.15
    start_mu: float = 0.25
    end_mu: float = 0.1
    value: float = 0.25

    def __post_init__(self) -> None:
        check_choice("alpha_init.strategy", self.strategy, INIT_STRATEGIES)
        # Any finite mean is a valid a_i (0: ACN, 1: ResNet, the code variants' 0.5 and 1.0);
        # a NaN or infinite one would only surface as a non-finite loss many steps later.
        for name in ("mu", "first_mu", "second_mu", "start_mu", "end_mu", "value"):
            number = getattr(self, name)
            if isinstance(number, bool) or not isinstance(number, Real) or not math.isfinite(number):
                raise ValueError(f"alpha_init.{name}={number!r} must be a finite number")
        if isinstance(self.sigma, bool) or not isinstance(self.sigma, Real) or not (
                math.isfinite(self.sigma) and self.sigma >= 0):
            raise ValueError(f"alpha_init.sigma={self.sigma!r} must be a finite number >= 0 (a standard deviation)")
        if self.strategy == "exp_decay" and (self.start_mu <= 0 or self.end_mu <= 0):
            raise ValueError(
                f"alpha_init.start_mu={self.start_mu!r} and end_mu={self.end_mu!r} must be > 0 for exp_decay"
            )

    def means(self, num_layers: int) -> Tensor:
        """The per-layer means ``mu_1..mu_L`` of the strategy (before noise)."""
        n = num_layers
        if self.strategy == "normal":
            return torch.full((n,), float(self.mu))
        if self.strategy == "constant":
            return torch.full((n,), float(self.value))
        if self.strategy == "half_layers":
            first = (n + 1) // 2
            return torch.tensor([self.first_mu] * first + [self.second_mu] * (n - first), dtype=torch.float32)
        # exp_decay: geometric interpolation between the two means
        if n == 1:
            return torch.tensor([float(self.start_mu)])
        ratio = self.end_mu / self.start_mu
        depth = torch.arange(n, dtype=torch.float64) / (n - 1)
        return (self.start_mu * ratio**depth).float()


#: Default initialisation per rule: the paper's N(0.25, 0.005) for ``hacn``, the
#: public code's choices for the code variants.
DEFAULT_ALPHA_INIT: dict[str, AlphaInit] = {
    "hacn": AlphaInit(),
    "hacn_code_mixer": AlphaInit(),
    "hacn_code_vit": AlphaInit(mu=0.5),
    "hacn_code_gpt": AlphaInit(mu=1.0),  # gate 1 - a_i starts near 0: an ACN
    "hacn_split_gain": AlphaInit(),  # and b_i = a_i: the Mixer code's rule at initialisation
}


def as_alpha_init(
    spec: AlphaInit | str | float | int | None, rule: str = "hacn", field_name: str = "alpha_init"
) -> AlphaInit:
    """Normalise an init spec: an ``AlphaInit``, a strategy name, a constant, or ``None`` (rule default)."""
    if spec is None:
        return DEFAULT_ALPHA_INIT.get(rule, AlphaInit())
    if isinstance(spec, AlphaInit):
        return spec
    if isinstance(spec, bool):
        raise ValueError(f"{field_name}={spec!r} is not an init; give an AlphaInit, a strategy name or a number")
    if isinstance(spec, (int, float)):
        return AlphaInit(strategy="constant", value=float(spec))
    if isinstance(spec, str):
        return AlphaInit(strategy=check_choice(field_name, spec, INIT_STRATEGIES))
    raise ValueError(f"{field_name}={spec!r} is not an init; give an AlphaInit, a strategy name or a number")


def init_alphas(
    num_layers: int, init: AlphaInit | str | float | None = None, generator: torch.Generator | None = None
) -> Tensor:
    """Draw ``a_1..a_L`` (a float32 vector) by the strategy of ``init`` (Sec. 3.1, Table 6)."""
    if num_layers < 1:
        raise ValueError(f"num_layers={num_layers!r} must be >= 1")
    spec = as_alpha_init(init)
    means = spec.means(num_layers)
    if spec.strategy == "constant" or spec.sigma == 0:
        return means.clone()
    noise = torch.randn(num_layers, generator=generator)
    return means + spec.sigma * noise


# ---------------------------------------------------------------------------
# Depth-adaptive LayerNorm (Appendix D, Eq. 7)
# ---------------------------------------------------------------------------


class DepthGain(nn.Module):
    """The scalar ``alpha_l`` of Depth-adaptive LayerNorm (Appendix D, Eq. 7).

    ``form="paper"``: ``alpha_l = 1 + l * s`` with ``s`` learnable, init
    ``strength_init = 0.05`` (the gradient reaching ``s`` is ``l`` times the
    gradient of ``alpha_l``). ``form="code"``: the public code's one learnable
    gain per layer, initialised to ``1 + 0.05 l``. Both start at the same value.
    The parameter is tagged ``norm_gain``. One gain may be shared by several
    norms of a layer ("one extra parameter per layer").
    """

    def __init__(self, depth: int, form: str = "paper", strength_init: float = 0.05) -> None:
        super().__init__()
        self.form = check_choice("depth_ln", form, DEPTH_LN_FORMS)
        if depth < 0:
            raise ValueError(f"depth={depth!r} must be >= 0")
        self.depth = int(depth)
        if form == "paper":
            self.strength = tag(nn.Parameter(torch.tensor(float(strength_init))), "norm_gain")
        else:
            self.gain = tag(nn.Parameter(torch.tensor(1.0 + float(strength_init) * depth)), "norm_gain")

    def forward(self) -> Tensor:
        """The current ``alpha_l``."""
        if self.form == "paper":
            return 1.0 + self.depth * self.strength
        return self.gain

    def extra_repr(self) -> str:
        return f"depth={self.depth}, form={self.form!r}"


class DepthLayerNorm(nn.Module):
    """``DepthLN(x) = alpha_l * LN(x)`` (Appendix D, Eq. 7); see :class:`DepthGain`.

    Pass ``gain=`` to share one :class:`DepthGain` between the norms of a layer.
    ``bias=False`` drops LayerNorm's additive term (the bias-free GPT-2 decoders).
    """

    def __init__(
        self,
        dim: int,
        depth: int = 0,
        form: str = "paper",
        strength_init: float = 0.05,
        eps: float = 1e-5,
        gain: DepthGain | None = None,
        bias: bool = True,
    ) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(dim, eps=eps, bias=bias)
        self.gain = gain if gain is not None else DepthGain(depth, form, strength_init)

    def forward(self, x: Tensor) -> Tensor:
        # alpha (xhat w + b) = xhat (alpha w) + alpha b: folding the gain into the affine
        # parameters keeps LayerNorm's own saved tensors and adds no activation to memory.
        g = self.gain()
        n = self.norm
        bias = None if n.bias is None else n.bias * g
        return F.layer_norm(x, n.normalized_shape, n.weight * g, bias, n.eps)


def make_norm(
    dim: int, depth: int, depth_ln: str, strength_init: float = 0.05, gain: DepthGain | None = None,
    bias: bool = True,
) -> nn.Module:
    """A plain ``LayerNorm`` (``depth_ln="none"``) or a :class:`DepthLayerNorm` of the given form.

    ``bias=False``: no additive term (``nn.LayerNorm(dim, bias=False)``).
    """
    check_choice("depth_ln", depth_ln, ("none",) + DEPTH_LN_FORMS)
    if depth_ln == "none":
        return nn.LayerNorm(dim, bias=bias)
    return DepthLayerNorm(dim, depth, depth_ln, strength_init, gain=gain, bias=bias)


# ---------------------------------------------------------------------------
# The residual stack
# ---------------------------------------------------------------------------


@dataclass
class StackTrace:
    """Everything one forward pass of a :class:`ResidualStack` went through.

    ``inputs[k-1]`` is ``x_{k-1}``, the input of layer ``k``; ``outputs[0]`` is
    ``h_0 = x_0`` and ``outputs[k]`` is ``h_k = f_k(x_{k-1})`` (a ``(t, c)`` pair for
    two-part rules); ``exits[i]`` the exit after layer ``i``; ``output`` is ``y``.
    """

    inputs: list[Tensor] = field(default_factory=list)
    outputs: list = field(default_factory=list)
    exits: list[Tensor] = field(default_factory=list)
    output: Tensor | None = None


LayerFn = Callable[[int, Tensor], "Tensor | tuple[Tensor, Tensor]"]


def check_block_output(index: int, block: nn.Module, x: Tensor,
                       out: Tensor | tuple[Tensor, Tensor]) -> Tensor | tuple[Tensor, Tensor]:
    """``out`` (``blocks[index]``'s ``f(x)``, or its ``(t, c)`` parts) if it has ``x``'s shape; else raise.

    Every rule adds ``f_i(x_{i-1})`` to ``x_{i-1}`` or to the running sum (Eq. 1-2), so
    a block that changes the shape would fail later with a size mismatch that names
    no block, or be broadcast silently (``(2, 4) + (2, 1)`` is ``(2, 4)``). Checked at
    every forward: one comparison of two ``torch.Size`` per block.
    """
    named = zip(("parts(x)'s t", "parts(x)'s c"), out) if isinstance(out, tuple) else [("its output", out)]
    for what, part in named:
        if part.shape != x.shape:
            raise ValueError(
                f"blocks[{index}] ({type(block).__name__}): {what} has shape {tuple(part.shape)} but its input "
                f"{tuple(x.shape)}; a ResidualStack needs blocks that keep the shape"
            )
    return out


class ResidualStack(nn.Module):
    """A stack of shape-preserving blocks ``f_1..f_L`` joined by a named forward rule (Sec. 2).

    ``blocks``: any modules mapping a tensor to a tensor of the same shape (the
    residual *branch*: for ``resnet`` the stack adds the identity itself); a block
    whose output has another shape is refused at the forward, by index
    (:func:`check_block_output`), broadcastable shapes included.
    ``rule``: one of :data:`RULES` (table in the module docstring).
    ``alpha_init``: init of ``a_i`` for :data:`ALPHA_RULES` (an :class:`AlphaInit`,
    a strategy name or a constant; default per rule, ``N(0.25, 0.005)`` for ``hacn``).
    ``trainable``: learn the rule's scalars (tagged ``mixing`` / ``gate``) or keep
    them fixed at their initial values (stored as buffers).
    ``gate_fn``: ``g`` of the ``gated`` rules (``relu`` in the Residual Gates paper).
    ``dense_base``: what a DenseFormer block ``B_i`` is: ``resnet`` (``Y + f(Y)``,
    DenseFormer's transformer blocks) or ``plain`` (``f(Y)``).

    ``forward(x)`` returns ``y``; ``forward(x, return_exits=True)`` returns
    ``(y, exits)`` with ``exits[i]`` the output after ``i`` layers (``exits[0] = x``,
    ``exits[-1] = y``); ``num_layers=n`` runs the network truncated after layer ``n``.
    """

    def __init__(
        self,
        blocks: Iterable[nn.Module],
        rule: str = "hacn",
        *,
        alpha_init: AlphaInit | str | float | None = None,
        trainable: bool = True,
        gate_fn: str = "relu",
        dense_base: str = "resnet",
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(blocks)
        self.rule = check_choice("rule", rule, RULES)
        n = len(self.blocks)
        if n < 1:
            raise ValueError("blocks: a ResidualStack needs at least one block")
        if alpha_init is not None and rule not in ALPHA_RULES:
            raise ValueError(f"alpha_init is only used by the rules {', '.join(ALPHA_RULES)}; rule={rule!r}")
        if rule in TWO_PART_RULES:
            missing = [i for i, b in enumerate(self.blocks) if not callable(getattr(b, "parts", None))]
            if missing:
                raise ValueError(
                    f"rule={rule!r} splits each layer into two sub-layers and needs blocks with "
                    f"parts(x) -> (t, c); blocks {missing} have none"
                )
        self.trainable = bool(trainable)
        self.gate_fn = check_choice("gate_fn", gate_fn, tuple(GATE_FUNCTIONS))
        self.dense_base = check_choice("dense_base", dense_base, DENSE_BASES)
        self.alpha_init = as_alpha_init(alpha_init, rule) if rule in ALPHA_RULES else None

        if rule in ALPHA_RULES:
            alphas = init_alphas(n, self.alpha_init, generator)
            self._add_scalars("alpha", alphas, "mixing")
            if rule == "hacn_split_gain":  # the token-mixing gain b_i starts at a_i: the code's rule
                self._add_scalars("beta", alphas, "mixing")
        elif rule == "rezero":
            self._add_scalars("alpha", torch.zeros(n), "mixing")
        elif rule == "laurel":
            self._add_scalars("alpha", torch.ones(n), "mixing")
            self._add_scalars("beta", torch.ones(n), "mixing")
        elif rule in ("gated", "gated_plain"):
            self._add_scalars("k", torch.ones(n), "gate")
        elif rule == "denseformer":
            # w_i over X_0..X_i, identity init (w_ii = 1): L(L+3)/2 weights in all
            weights = [torch.nn.functional.one_hot(torch.tensor(i + 1), i + 2).float() for i in range(n)]
            if self.trainable:
                self.dwa = nn.ParameterList([tag(nn.Parameter(w), "mixing") for w in weights])
            else:
                for i, w in enumerate(weights):
                    self.register_buffer(f"dwa_{i}", w)

    # -- scalars ------------------------------------------------------------

    def _add_scalars(self, name: str, values: Tensor, role: str) -> None:
        """One 0-d scalar per layer: a tagged parameter list, or a buffer vector when fixed."""
        if self.trainable:
            setattr(self, name, nn.ParameterList([tag(nn.Parameter(v.clone()), role) for v in values]))
        else:
            self.register_buffer(name, values.clone())

    def _dwa(self, i: int) -> Tensor:
        return self.dwa[i] if self.trainable else getattr(self, f"dwa_{i}")

    def residual_weights(self) -> Tensor:
        """The effective residual weights ``a_1..a_L`` of Eq. 2 (detached, float).

        ``hacn``/``hacn_code_mixer``/``hacn_code_vit``/``hacn_split_gain``: the ``a_i``; ``hacn_code_gpt``:
        ``1 - a_i`` (the weight its stream actually uses); ``resnet``: ones;
        ``acn``: zeros. Other rules have no Eq. 2 weights and raise.
        """
        n = len(self.blocks)
        if self.rule in ("hacn", "hacn_code_mixer", "hacn_code_vit", "hacn_split_gain"):
            return torch.stack([a.detach() for a in self.alpha]).float() if self.trainable else self.alpha.float()
        if self.rule == "hacn_code_gpt":
            raw = torch.stack([a.detach() for a in self.alpha]) if self.trainable else self.alpha
            return (1 - raw).float()
        if self.rule == "resnet":
            return torch.ones(n)
        if self.rule == "acn":
            return torch.zeros(n)
        raise ValueError(
            f"rule={self.rule!r} has no Eq. 2 residual weights; residual_weights() is defined for "
            "resnet, acn, hacn, hacn_code_mixer, hacn_code_vit, hacn_code_gpt, hacn_split_gain"
        )

    # -- forward ------------------------------------------------------------

    def forward(
        self, x: Tensor, *, return_exits: bool = False, num_layers: int | None = None
    ) -> Tensor | tuple[Tensor, list[Tensor]]:
        """Run the rule over the first ``num_layers`` blocks (all by default).

        With ``return_exits=True`` also return the ``num_layers + 1`` layer-wise
        exits (Sec. 3.1) of this single pass.
        """
        n = self._check_depth(num_layers)
        exits: list[Tensor] | None = [x] if return_exits else None
        parts = self.rule in TWO_PART_RULES
        blocks = self.blocks

        def layer(i: int, h: Tensor):
            block = blocks[i]
            return check_block_output(i, block, h, block.parts(h) if parts else block(h))

        y = self._run(x, n, layer, exits=exits)
        return (y, exits) if return_exits else y

    def trace(self, x: Tensor, num_layers: int | None = None) -> StackTrace:
        """Forward pass that records every layer's input and output (see :class:`StackTrace`)."""
        n = self._check_depth(num_layers)
        trace = StackTrace(outputs=[x], exits=[x])
        parts = self.rule in TWO_PART_RULES

        def layer(i: int, h: Tensor):
            block = self.blocks[i]
            out = check_block_output(i, block, h, block.parts(h) if parts else block(h))
            trace.outputs.append(out)
            return out

        trace.output = self._run(x, n, layer, exits=trace.exits, inputs=trace.inputs)
        return trace

    def _check_depth(self, num_layers: int | None) -> int:
        n = len(self.blocks)
        if num_layers is None:
            return n
        if not 0 <= num_layers <= n:
            raise ValueError(f"num_layers={num_layers!r} must be between 0 and {n}")
        return int(num_layers)

    @property
    def exits_are_sums(self) -> bool:
        """True when exits (and the output) are partial sums ``s_i`` rather than the stream ``x_i``."""
        return self.rule in SUM_RULES

    def _run(
        self,
        x0: Tensor,
        n: int,
        layer: LayerFn,
        exits: list[Tensor] | None = None,
        inputs: list[Tensor] | None = None,
    ) -> Tensor:
        """The shared loop of every rule: ``x`` is the stream, ``s`` the running sum (Algorithm 1)."""
        if self.rule == "denseformer":
            return self._run_denseformer(x0, n, layer, exits, inputs)
        step = getattr(self, f"_step_{self.rule}")
        use_sum = self.rule in SUM_RULES
        x, s = x0, x0
        for i in range(n):
            if inputs is not None:
                inputs.append(x)
            x, s = step(i, x, s, layer, i == n - 1)
            if exits is not None:
                exits.append(s if use_sum else x)
        return s if use_sum else x

    def _scalar(self, name: str, i: int) -> Tensor:
        return getattr(self, name)[i]

    # Each step maps (x_{i-1}, s_{i-1}) to (x_i, s_i). ``last``: x_L is unused by
    # the sum rules, so they skip computing it (Algorithm 1 computes and drops it).

    def _step_plain(self, i, x, s, layer, last):
        """Feed-forward: ``x_i = f_i(x_{i-1})`` (Eq. 1, FFN)."""
        return layer(i, x), s

    def _step_resnet(self, i, x, s, layer, last):
        """ResNet: ``x_i = x_{i-1} + f_i(x_{i-1})`` (Eq. 1)."""
        return x + layer(i, x), s

    def _step_acn(self, i, x, s, layer, last):
        """ACN: ``x_i = f_i(x_{i-1})``, ``y = sum_i f_i(x_{i-1})`` (Eq. 1)."""
        h = layer(i, x)
        return h, s + h

    def _step_hacn(self, i, x, s, layer, last):
        """H-ACN: ``x_i = f_i(x_{i-1}) + a_i x_{i-1}``, ``y = sum_i f_i(x_{i-1})`` (Eq. 2, Algorithm 1)."""
        h = layer(i, x)
        s = s + h
        # addcmul = h + a * x in one kernel (half the extra memory traffic of mul + add)
        return (x if last else torch.addcmul(h, self._scalar("alpha", i), x)), s

    def _step_hacn_code_gpt(self, i, x, s, layer, last):
        """Public GPT code: the residual weight is ``1 - a_i`` (``a_i`` init near 1, an ACN at start)."""
        h = layer(i, x)
        s = s + h
        return (x if last else torch.addcmul(h, 1 - self._scalar("alpha", i), x)), s

    def _step_hacn_code_mixer(self, i, x, s, layer, last):
        """Public Mixer code: ``s += c + a t``, ``x = c + a (t + x)``: ``a`` also scales token mixing."""
        t, c = layer(i, x)
        a = self._scalar("alpha", i)
        s = s + torch.addcmul(c, a, t)
        return (x if last else torch.addcmul(c, a, t + x)), s

    def _step_hacn_split_gain(self, i, x, s, layer, last):
        """Split gain: ``s += c + b t``, ``x = c + b t + a x``; ``b`` the token-mixing gain, ``a`` the residual's."""
        t, c = layer(i, x)
        bt = torch.addcmul(c, self._scalar("beta", i), t)  # c + b t: this layer's output, in the sum and the stream
        return (x if last else torch.addcmul(bt, self._scalar("alpha", i), x)), s + bt

    def _step_hacn_code_vit(self, i, x, s, layer, last):
        """Public ViT code: attention residual kept (``x' = x + t``); only the MLP output ``c`` is hybrid."""
        t, c = layer(i, x)
        s = s + c
        return (x if last else torch.addcmul(c, self._scalar("alpha", i), x + t)), s

    def _step_rezero(self, i, x, s, layer, last):
        """ReZero (Bachlechner et al., 2021): ``x_i = x_{i-1} + a_i f_i(x_{i-1})``, ``a_i`` init 0."""
        return x + self._scalar("alpha", i) * layer(i, x), s

    def _step_laurel(self, i, x, s, layer, last):
        """LAuReL-RW (Menghani et al., 2024): ``x_i = a_i f_i(x_{i-1}) + b_i x_{i-1}``, both init 1."""
        return self._scalar("alpha", i) * layer(i, x) + self._scalar("beta", i) * x, s

    def _step_gated(self, i, x, s, layer, last):
        """Gated ResNet (Residual Gates, Sec. 2.2): ``x_i = g(k_i) f_i(x_{i-1}) + x_{i-1}``."""
        return gated_residual(layer(i, x), x, self._scalar("k", i), self.gate_fn), s

    def _step_gated_plain(self, i, x, s, layer, last):
        """Gated PlainNet (Residual Gates, Sec. 2.2): ``x_i = g(k_i) f_i(x) + (1 - g(k_i)) x``."""
        return gated_plain(layer(i, x), x, self._scalar("k", i), self.gate_fn), s

    def _run_denseformer(self, x0, n, layer, exits, inputs):
        """DenseFormer-style depth-weighted average (Pagliardini et al., 2024).

        ``X_0 = x_0``, ``X_i = B_i(Y_{i-1})``, ``Y_i = sum_{j=0..i} w_{i,j} X_j`` with
        ``w`` initialised to the identity (``w_{i,i} = 1``), so at init the stack
        is its base rule. Needs all ``X_j`` in memory (the O(L) extra memory that
        H-ACN avoids, Appendix B).
        """
        history = [x0]
        y = x0
        for i in range(n):
            if inputs is not None:
                inputs.append(y)
            h = layer(i, y)
            history.append(y + h if self.dense_base == "resnet" else h)
            w = self._dwa(i)
            y = w[0] * history[0]
            for j in range(1, i + 2):
                y = y + w[j] * history[j]
            if exits is not None:
                exits.append(y)
        return y

    # -- connectivity ---------------------------------------------------------

    @torch.no_grad()
    def connectivity(self, output: str = "none") -> Tensor:
        """The Direct Layer Connectivity Matrix ``C`` of this stack as it is now (Eq. 3-5).

        Computed by running the rule with each block replaced by ``e_i`` (standing
        for ``h_i``); see the module docstring for the index convention and the
        ``output`` layouts. ``C`` is float64.
        """
        check_choice("output", output, CONNECTIVITY_LAYOUTS)
        if self.rule in TWO_PART_RULES:
            raise ValueError(
                f"rule={self.rule!r} has two outputs per layer (t, c); C is defined for single-output "
                f"rules: {', '.join(r for r in RULES if r not in TWO_PART_RULES)}"
            )
        n = len(self.blocks)
        eye = torch.eye(n + 1, dtype=torch.float64)
        inputs: list[Tensor] = []
        y = self._run(eye[0], n, lambda i, _x: eye[i + 1], inputs=inputs)
        c = torch.zeros(n + 1, n + 1, dtype=torch.float64)
        for k in range(1, n + 1):
            c[:, k] = inputs[k - 1]
        return _with_output(c, y, output)


def _with_output(c: Tensor, readout: Tensor, output: str) -> Tensor:
    """Add the readout to ``C`` in the requested layout (module docstring)."""
    if output == "none":
        return c
    if output == "column":
        return torch.cat([c, readout[:, None]], dim=1)
    fig = c.clone()
    n = c.shape[0] - 1
    fig[:n, n] = torch.maximum(c[:n, n], readout[:n])
    return fig


# ---------------------------------------------------------------------------
# Closed forms of C (Eq. 4, Appendix C) and the Sec. 4 statistics
# ---------------------------------------------------------------------------


def _as_double(values: Tensor | Sequence) -> Tensor:
    """A detached float64 copy of a tensor or nested sequence."""
    if isinstance(values, Tensor):
        return values.detach().double()
    return torch.as_tensor(values, dtype=torch.float64)


def _as_vector(alphas: Tensor | Sequence[float] | ResidualStack) -> Tensor:
    if isinstance(alphas, ResidualStack):
        return alphas.residual_weights().double()
    v = _as_double(alphas).flatten()
    if v.numel() == 0:
        raise ValueError("alphas: need at least one residual weight")
    return v


def hacn_connectivity(alphas: Tensor | Sequence[float], output: str = "none") -> Tensor:
    """``C[i][j] = prod_{l=i+1..j-1} a_l`` for ``0 <= i < j <= L`` (Eq. 4), float64.

    ``alphas`` are ``a_1..a_L`` (``alphas[l-1] = a_l``). The readout of Eq. 2 sums
    every layer output with weight 1 (the ``out`` column of ``output="column"``).
    """
    check_choice("output", output, CONNECTIVITY_LAYOUTS)
    a = _as_vector(alphas)
    n = a.numel()
    c = torch.zeros(n + 1, n + 1, dtype=torch.float64)
    for j in range(1, n + 1):
        prod = torch.tensor(1.0, dtype=torch.float64)
        c[j - 1, j] = 1.0
        for i in range(j - 2, -1, -1):  # walk back from the feed-forward link, multiplying a_{i+1}
            prod = prod * a[i]  # a[i] is a_{i+1}
            c[i, j] = prod
    return _with_output(c, torch.ones(n + 1, dtype=torch.float64), output)


def connectivity_matrix(
    rule: str,
    num_layers: int | None = None,
    alphas: Tensor | Sequence[float] | None = None,
    output: str = "none",
) -> Tensor:
    """Closed-form ``C`` of the paper's rules (Eq. 3-5, Appendix C / Fig. 8), float64.

    ``plain`` (Fig. 8b): ``C[j-1][j] = 1``; ``resnet`` (Fig. 8a): ``C[i][j] = 1``
    for ``i < j``; ``acn`` (Fig. 8c): layer inputs as ``plain``, readout all ones
    (``output="figure"`` gives the drawing's ``C[i][L] = 1``); ``hacn`` and
    ``hacn_code_gpt`` need ``alphas`` (raw ``a_i``; the GPT code's weight is
    ``1 - a_i``) and follow Eq. 4.
    """
    allowed = PAPER_RULES + ("hacn_code_gpt",)
    check_choice("rule", rule, allowed)
    check_choice("output", output, CONNECTIVITY_LAYOUTS)
    if rule in ("hacn", "hacn_code_gpt"):
        if alphas is None:
            raise ValueError(f"alphas: rule={rule!r} needs the residual weights a_1..a_L")
        a = _as_vector(alphas)
        if num_layers is not None and a.numel() != num_layers:
            raise ValueError(f"alphas: got {a.numel()} weights for num_layers={num_layers}")
        return hacn_connectivity(1 - a if rule == "hacn_code_gpt" else a, output)
    if num_layers is None or num_layers < 1:
        raise ValueError(f"num_layers={num_layers!r} must be >= 1 for rule={rule!r}")
    n = num_layers
    if rule == "resnet":
        return hacn_connectivity(torch.ones(n), output)
    c = hacn_connectivity(torch.zeros(n), "none")  # plain and ACN layers see only their predecessor
    readout = torch.zeros(n + 1, dtype=torch.float64)
    if rule == "plain":
        readout[n] = 1.0
    else:
        readout[:] = 1.0
    return _with_output(c, readout, output)


def total_connectivity_strength(alphas: Tensor | Sequence[float] | ResidualStack) -> float:
    """``Gamma = ||a||_2 / sqrt(L)`` (Sec. 4): 0 for an ACN, 1 for a ResNet."""
    a = _as_vector(alphas)
    return float(a.norm() / math.sqrt(a.numel()))


def convergence_distance(history: Tensor | Sequence[Sequence[float]]) -> Tensor:
    """``Delta_t = ||a_T - a_t||_2`` for every snapshot ``t`` of ``history`` (shape ``(T+1, L)``), Sec. 4.

    The last row is taken as the converged ``a_T``, so the result ends with 0.
    """
    h = _as_double(history)
    if h.dim() != 2 or h.shape[0] < 1:
        raise ValueError(f"history: expected shape (snapshots, L), got {tuple(h.shape)}")
    return (h[-1] - h).norm(dim=1)


def pearson_correlation(a: Tensor | Sequence[float], b: Tensor | Sequence[float]) -> float:
    """Pearson's ``r`` between two vectors of converged residual weights (Sec. 4)."""
    x, y = _as_vector(a), _as_vector(b)
    if x.shape != y.shape:
        raise ValueError(f"a and b must have the same length; got {x.numel()} and {y.numel()}")
    x, y = x - x.mean(), y - y.mean()
    denom = x.norm() * y.norm()
    if denom == 0:
        raise ValueError("pearson_correlation: a constant vector has no correlation")
    return float((x * y).sum() / denom)


def pairwise_pearson(runs: Tensor | Sequence[Sequence[float]]) -> Tensor:
    """Matrix of Pearson ``r`` between the alpha vectors of several seeds (rows of ``runs``)."""
    r = _as_double(runs)
    if r.dim() != 2 or r.shape[0] < 2:
        raise ValueError(f"runs: expected shape (seeds >= 2, L), got {tuple(r.shape)}")
    return torch.corrcoef(r)


def seed_correlation(runs: Tensor | Sequence[Sequence[float]]) -> float:
    """Average pairwise Pearson correlation of converged alphas across seeds (Sec. 4: 92% Mixer, 95% GPT-2)."""
    m = pairwise_pearson(runs)
    s = m.shape[0]
    off = m[~torch.eye(s, dtype=torch.bool)]
    return float(off.mean())


def forward_from_connectivity(c: Tensor, blocks: Sequence[nn.Module], x: Tensor) -> Tensor:
    """Run a network from its connectivity alone: Eq. 3 read as a forward pass.

    ``h_0 = x``, ``h_k = f_k(sum_{i<k} C[i][k] h_i)`` and ``y = sum_i C[i][out] h_i``,
    with ``c`` in the ``column`` layout (``(L+1) x (L+2)``, as returned by
    ``connectivity(output="column")``). For any single-output rule this gives the
    rule's own output (up to rounding): ``C`` and the blocks determine the network.
    Costs ``O(L)`` stored outputs, the memory the H-ACN recursion avoids (Sec. 2).
    """
    m = _as_double(c)
    n, has_out = _check_connectivity_shape(m)
    if not has_out:
        raise ValueError(
            f"C: forward_from_connectivity needs the readout column (output='column', shape (L+1, L+2)); "
            f"got {tuple(m.shape)}"
        )
    if len(blocks) != n:
        raise ValueError(f"blocks: C describes {n} layers but {len(blocks)} blocks were given")
    w = m.to(x.dtype)
    outputs = [x]
    for k in range(1, n + 1):
        inp = sum(w[i, k] * outputs[i] for i in range(k))
        outputs.append(blocks[k - 1](inp))
    return sum(w[i, -1] * outputs[i] for i in range(n + 1))


# ---------------------------------------------------------------------------
# Presentation of C: a labelled table and a heatmap (Fig. 8)
# ---------------------------------------------------------------------------


def _check_connectivity_shape(c: Tensor) -> tuple[int, bool]:
    """``(L, has_out)`` of a ``C`` in the ``none``/``figure`` ``(L+1, L+1)`` or ``column`` ``(L+1, L+2)`` layout."""
    if c.dim() != 2 or c.shape[0] < 2 or c.shape[1] not in (c.shape[0], c.shape[0] + 1):
        raise ValueError(
            f"C: expected shape (L+1, L+1) or (L+1, L+2) with L >= 1 (layouts none/figure or column), "
            f"got {tuple(c.shape)}"
        )
    return c.shape[0] - 1, c.shape[1] == c.shape[0] + 1


def connectivity_frame(c: Tensor | Sequence[Sequence[float]]):
    """``C`` as a ``pandas.DataFrame`` labelled by the index convention of Eq. 3-4.

    Rows are sources ``i = 0..L`` (``"source i"``, 0 the embedding ``h_0``), columns
    targets ``j = 0..L`` (``"target j"``), plus a last column ``"out"`` (the readout
    ``y``) when ``c`` is in the ``column`` layout. ``frame.loc[i, j]`` is ``c_{i->j}``.
    """
    import pandas as pd  # presentation only: keep the model code free of pandas

    m = _as_double(c)
    n, has_out = _check_connectivity_shape(m)
    columns = list(range(n + 1)) + (["out"] if has_out else [])
    return pd.DataFrame(
        m.numpy(),
        index=pd.Index(range(n + 1), name="source i"),
        columns=pd.Index(columns, name="target j", dtype=object),
    )


def _cell_label(value: float) -> str:
    """Two decimals without padding ("1", ".25", "-.4"); blank for a nonzero value that rounds to 0."""
    if value == 0:
        return "0"
    if abs(value) < 0.005:
        return ""
    text = f"{value:.2f}".rstrip("0").rstrip(".")
    return text.replace("0.", ".", 1) if text.lstrip("-").startswith("0.") else text


def connectivity_heatmap(ax, c: Tensor | Sequence[Sequence[float]], title: str = "", annot: bool | None = None,
                         vmax: float | None = None, cbar: bool = False, cmap: str = "mako_r",
                         tick_every: int | str = "auto"):
    """Draw ``C`` on ``ax`` as Fig. 8 does: sources down, targets across (seaborn heatmap).

    Entries that no rule can fill (``i >= j``: a layer never feeds itself or an
    earlier layer) are masked; an ``out`` column (``column`` layout) is drawn in
    full. ``annot`` (default: ``L <= 10``) writes the values in the cells (two
    decimals; a nonzero value below 0.005 is left blank). The colour scale runs
    from ``min(0, min C)`` to ``vmax`` (default ``max(1, max C)``). ``tick_every``: label every n-th
    layer on both axes (``"auto"``: seaborn's choice), for panels too small to label them all.
    """
    import numpy as np
    import seaborn as sns

    m = _as_double(c)
    n, has_out = _check_connectivity_shape(m)
    frame = connectivity_frame(m)
    rows, cols = np.indices(frame.shape)
    mask = rows >= cols
    if has_out:
        mask[:, -1] = False
    values = frame.to_numpy()
    show = (n <= 10) if annot is None else annot
    labels = np.vectorize(_cell_label, otypes=[object])(values) if show else False
    sns.heatmap(
        frame, ax=ax, mask=mask, square=True, cmap=cmap, cbar=cbar,
        vmin=min(0.0, float(values.min())), vmax=max(1.0, float(values.max())) if vmax is None else vmax,
        annot=labels, fmt="", annot_kws={"fontsize": 8}, linewidths=0.5, linecolor="white",
        xticklabels=tick_every, yticklabels=tick_every,
    )
    ax.set_title(title)
    ax.tick_params(length=0)
    return ax


# ---------------------------------------------------------------------------
# Layer-wise accuracy (Sec. 3.1)
# ---------------------------------------------------------------------------


def layerwise_correct(logits: Tensor, targets: Tensor) -> Tensor:
    """Correct predictions per exit: ``logits`` ``(exits, batch, classes)`` -> ``(exits,)`` counts."""
    if logits.dim() != 3 or logits.shape[1] != targets.shape[0]:
        raise ValueError(
            f"logits: expected (exits, batch, classes) with batch {targets.shape[0]}, got {tuple(logits.shape)}"
        )
    return (logits.argmax(dim=-1) == targets[None]).sum(dim=1)


def layerwise_accuracy(logits: Tensor, targets: Tensor) -> Tensor:
    """Layer-wise accuracy (Sec. 3.1) of one batch: the shared head's accuracy at every exit."""
    return layerwise_correct(logits, targets).double() / targets.shape[0]


@torch.no_grad()
def evaluate_layerwise(
    model: nn.Module, batches: Iterable[tuple[Tensor, Tensor]], device: str | torch.device = "cpu"
) -> Tensor:
    """Layer-wise accuracy over ``batches`` for a model with ``layerwise_logits(x)`` (one pass per batch)."""
    was_training = model.training
    model.eval()
    correct: Tensor | None = None
    total = 0
    try:
        for x, y in batches:
            x, y = x.to(device), y.to(device)
            c = layerwise_correct(model.layerwise_logits(x), y)
            correct = c if correct is None else correct + c
            total += y.shape[0]
    finally:
        model.train(was_training)
    if correct is None:
        raise ValueError("batches: no data")
    return correct.double().cpu() / total
