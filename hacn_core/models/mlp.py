"""MLP kinds for the backbones: fixed, AWNN-adaptive and gated two-layer MLPs.

Every backbone that holds MLPs (the Mixers' token- and channel-mixing MLPs,
:mod:`hacn_core.models.mixer`) builds them through one *MLP layer* callable, as
timm's blocks take ``mlp_layer``::

    mlp = mlp_layer(in_features, hidden, out_features, dropout=p)    # -> nn.Module on (..., in_features)

An MLP layer is a kind name (one of :data:`MLP_KINDS`), a :class:`MlpSpec`
made by :func:`mlp_layer` (a kind with options), or any callable of that
signature. The kinds:

``fixed``     ``Linear(in, hidden) -> GELU -> Linear(hidden, out)`` (:class:`Mlp`),
              the MLP of the MLP-Mixer (Tolstikhin et al., 2021; H-ACN Appendix A),
              with optional dropout after each linear map. Options ``bias`` (default
              True; ``False`` for the bias-free GPT-2 decoder of H-ACN Table 4),
              ``activation`` (one of :data:`FIXED_ACTIVATIONS`, GELU by default: the AWNN
              baselines use LeakyReLU for images, AWNN App. C.2, and ReLU in GIN and the
              Transformer's FFNs) and ``negative_slope`` (LeakyReLU, 0.01).
``adaptive``  :class:`hacn_core.awnn.AdaptiveMLP` with one hidden layer whose width
              is learned (AWNN Sec. 3.1, Eq. 11-14): ``hidden`` is the *starting*
              width (``AWNNConfig.initial_width``), unless the option ``rate_init``
              gives the starting rate ``nu_0`` as the paper does (0.02 for images and
              graphs, 0.004 for the Transformer, App. C): the starting width is then
              Eq. 11's quantile of that rate and ``hidden`` is not used. Other options
              are the other :class:`~hacn_core.awnn.AWNNConfig` fields (``k``,
              ``activation``, ``max_width``, ...). Its hidden activation is one of
              AWNN's (ReLU by default, no GELU) and it has no dropout. Train it with
              :class:`~hacn_core.awnn.ELBOLoss` and :class:`~hacn_core.awnn.WidthCallback`,
              which find every ``AdaptiveMLP`` inside a model.
``gated``     :class:`GatedMlp`: the ``fixed`` MLP scaled by one scalar gate,
              ``g(k) MLP(x)`` (Residual Gates Sec. 2.2; options ``g``, ``k_init``, ``bias``).

Where ``gated`` makes sense
---------------------------
Residual Gates gate a *residual branch*, ``u = g(k) f(x) + x`` (the Gated
ResNet layer, Sec. 2.2): the gate decides how much of the branch is
added to an identity path, and ``k = 0`` turns the layer into the identity,
so it can be removed (Sec. 3.1, Fig. 5). A gated MLP is therefore meaningful
only where its output is the branch of a residual sum. In the MLP-Mixer every
token- and channel-mixing MLP is such a branch: with the ``resnet`` rule,
``MLPMixer(rule="resnet", mlp="gated", token_mlp="gated")`` is exactly the
Gated ResNet of Sec. 2.2 with one ``k`` per residual sub-layer (two per Mixer
layer), where the ``gated`` rule of :class:`~hacn_core.hacn.connectivity.ResidualStack`
puts one ``k`` on the whole Mixer layer ``f = t + c``. In the DenseNet-style
Mixer (H-ACN Fig. 7) a layer's output is concatenated, not added to an
identity path, so there is nothing for the gate to regulate; it takes
``fixed`` and ``adaptive`` only (:data:`UNGATED_MLP_KINDS`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import torch
from torch import Tensor, nn

from hacn_core.engine.roles import tag
from hacn_core.engine.checks import check_choice

MLP_KINDS: tuple[str, ...] = ("fixed", "adaptive", "gated")
#: the kinds for MLPs whose output is not a residual branch (see the module docstring)
UNGATED_MLP_KINDS: tuple[str, ...] = ("fixed", "adaptive")
#: options of the gated kind (Residual Gates Sec. 2.2 and 3.2: g = ReLU, k initialised to 1),
#: besides the fixed kind's options
GATED_OPTIONS: tuple[str, ...] = ("g", "k_init")
#: options of the fixed kind (and of the gated kind, which scales it); ``bias``: the linear maps' additive terms
FIXED_OPTIONS: tuple[str, ...] = ("bias", "activation", "negative_slope")
#: hidden activations of the fixed kind: GELU (the Mixer's) and AWNN's four
FIXED_ACTIVATIONS: tuple[str, ...] = ("gelu", "relu", "leaky_relu", "relu6", "tanh")
#: AWNNConfig fields that the builder sets itself (sizes and the starting width)
_ADAPTIVE_SET_BY_BUILDER: tuple[str, ...] = ("in_dim", "out_dim", "initial_width")


class MlpLayer(Protocol):
    """What a backbone calls to build one MLP: ``(in_features, hidden, out_features, *, dropout) -> nn.Module``."""

    def __call__(self, in_features: int, hidden: int, out_features: int, *, dropout: float = 0.0) -> nn.Module: ...


def _activation(name: str, negative_slope: float) -> nn.Module:
    """The module of a fixed MLP's hidden activation (one of :data:`FIXED_ACTIVATIONS`)."""
    check_choice("activation", name, FIXED_ACTIVATIONS)
    if isinstance(negative_slope, bool) or not isinstance(negative_slope, (int, float)) or negative_slope < 0:
        raise ValueError(f"negative_slope={negative_slope!r} must be a number >= 0")
    return {"gelu": nn.GELU, "relu": nn.ReLU, "relu6": nn.ReLU6, "tanh": nn.Tanh,
            "leaky_relu": lambda: nn.LeakyReLU(float(negative_slope))}[name]()


class Mlp(nn.Sequential):
    """``Linear -> activation -> Linear`` (GELU: Mixer's MLP), optional dropout after each linear map.

    ``bias=False`` builds both linear maps without additive terms.
    """

    def __init__(self, dim: int, hidden: int, out_dim: int | None = None, dropout: float = 0.0,
                 activation: str = "gelu", negative_slope: float = 0.01, bias: bool = True) -> None:
        layers: list[nn.Module] = [nn.Linear(dim, hidden, bias=bias), _activation(activation, negative_slope)]
        if dropout:
            layers.append(nn.Dropout(dropout))
        layers.append(nn.Linear(hidden, out_dim or dim, bias=bias))
        if dropout:
            layers.append(nn.Dropout(dropout))
        super().__init__(*layers)


class GatedMlp(Mlp):
    """``g(k) Mlp(x)``: the fixed MLP times one scalar gate (Residual Gates Sec. 2.2).

    The weights keep :class:`Mlp`'s names (``0.weight``, ...), so a fixed model's
    state dict loads into the gated one with only the gates ``k`` missing. ``k``
    is tagged ``gate`` (kept out of weight decay by default, Sec. 3.2).
    """

    def __init__(
        self,
        dim: int,
        hidden: int,
        out_dim: int | None = None,
        dropout: float = 0.0,
        *,
        g: str = "relu",
        k_init: float = 1.0,
        activation: str = "gelu",
        negative_slope: float = 0.01,
        bias: bool = True,
    ) -> None:
        super().__init__(dim, hidden, out_dim, dropout, activation, negative_slope, bias)
        from hacn_core.gates import GATE_FUNCTIONS  # only the gated kind needs the gates package

        self.g = check_choice("g", g, tuple(GATE_FUNCTIONS))
        if isinstance(k_init, bool) or not isinstance(k_init, (int, float)):
            raise ValueError(f"k_init={k_init!r} must be a real number (Residual Gates initialise k = 1, Sec. 3.2)")
        self.k = tag(nn.Parameter(torch.full((), float(k_init))), "gate")

    def gate(self) -> Tensor:
        """``g(k)``."""
        from hacn_core.gates import gate_value

        return gate_value(self.k, self.g)

    def forward(self, x: Tensor) -> Tensor:
        return self.gate() * super().forward(x)

    def extra_repr(self) -> str:
        return f"g={self.g}"


def adaptive_options() -> tuple[str, ...]:
    """The :class:`~hacn_core.awnn.AWNNConfig` fields an ``adaptive`` MLP takes as options."""
    from hacn_core.awnn import AWNNConfig  # the AWNN package is imported only where it is used

    return tuple(f.name for f in dataclasses.fields(AWNNConfig) if f.name not in _ADAPTIVE_SET_BY_BUILDER)


def _check_options(kind: str, options: dict[str, Any]) -> None:
    """Raise if ``options`` holds a name that ``kind`` does not take, naming the allowed ones."""
    allowed = {"fixed": FIXED_OPTIONS, "gated": FIXED_OPTIONS + GATED_OPTIONS}.get(kind) or adaptive_options()
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise ValueError(
            f"mlp={kind!r} has no option {', '.join(unknown)}; allowed: {', '.join(allowed) or 'none'}"
        )


def make_mlp(
    kind: str,
    in_features: int,
    hidden: int,
    out_features: int | None = None,
    *,
    dropout: float = 0.0,
    **options: Any,
) -> nn.Module:
    """One MLP ``(..., in_features) -> (..., out_features)`` of ``kind`` (see the module docstring).

    ``hidden`` is the hidden width (the starting width for ``adaptive``, unless the
    option ``rate_init`` sets the starting rate); ``out_features`` defaults to ``in_features``. ``make_mlp("fixed", d, h)`` is
    ``Mlp(d, h)``, drawing the same initial values from the same random state.
    """
    check_choice("mlp", kind, MLP_KINDS)
    _check_options(kind, options)
    out = out_features or in_features
    if kind == "fixed":
        return Mlp(in_features, hidden, out, dropout, **options)
    if kind == "gated":
        return GatedMlp(in_features, hidden, out, dropout, **options)
    if dropout:
        raise ValueError(f"dropout={dropout!r} is not available for mlp='adaptive' (AWNN Eq. 14 has none); allowed: 0")
    from hacn_core.awnn import AdaptiveMLP, AWNNConfig

    if options.get("rate_init") is not None:  # the paper's way: a starting rate (Eq. 11 gives the width)
        return AdaptiveMLP(AWNNConfig(in_dim=in_features, out_dim=out, **options))
    options.pop("rate_init", None)
    return AdaptiveMLP(AWNNConfig(in_dim=in_features, out_dim=out, initial_width=hidden, **options))


@dataclass(frozen=True)
class MlpSpec:
    """An MLP kind with its options, callable as an :class:`MlpLayer` (made by :func:`mlp_layer`).

    ``options`` is a sorted tuple of ``(name, value)`` pairs so that a spec is
    hashable and can sit in a frozen configuration.
    """

    kind: str = "fixed"
    options: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self) -> None:
        check_choice("mlp", self.kind, MLP_KINDS)
        _check_options(self.kind, dict(self.options))

    def __call__(self, in_features: int, hidden: int, out_features: int, *, dropout: float = 0.0) -> nn.Module:
        return make_mlp(self.kind, in_features, hidden, out_features, dropout=dropout, **dict(self.options))


def mlp_layer(kind: str = "fixed", **options: Any) -> MlpSpec:
    """An :class:`MlpLayer` of ``kind`` with ``options``, e.g. ``mlp_layer("adaptive", k=0.95)``."""
    return MlpSpec(kind, tuple(sorted(options.items())))


def as_mlp_layer(
    spec: str | MlpLayer, field_name: str = "mlp", allowed: Sequence[str] = MLP_KINDS
) -> MlpLayer:
    """Resolve a backbone's MLP argument: a kind name, an :class:`MlpSpec` or any callable.

    Kinds (and the kind of an ``MlpSpec``) are checked against ``allowed``; a bad
    one raises naming ``field_name`` and the allowed kinds.
    """
    if isinstance(spec, str):
        return MlpSpec(check_choice(field_name, spec, allowed))
    if isinstance(spec, MlpSpec):
        check_choice(f"{field_name}.kind", spec.kind, allowed)
        return spec
    if callable(spec):
        return spec
    raise ValueError(
        f"{field_name}={spec!r} is not an MLP layer; allowed: a kind ({', '.join(allowed)}), "
        "mlp_layer(kind, **options) or a callable (in_features, hidden, out_features, *, dropout)"
    )


def mlp_kind(spec: str | MlpLayer) -> str | None:
    """The kind of a kind name or :class:`MlpSpec`; ``None`` for another callable."""
    if isinstance(spec, str):
        return spec
    return spec.kind if isinstance(spec, MlpSpec) else None


__all__ = [
    "FIXED_ACTIVATIONS",
    "FIXED_OPTIONS",
    "GATED_OPTIONS",
    "MLP_KINDS",
    "UNGATED_MLP_KINDS",
    "GatedMlp",
    "Mlp",
    "MlpLayer",
    "MlpSpec",
    "adaptive_options",
    "as_mlp_layer",
    "make_mlp",
    "mlp_kind",
    "mlp_layer",
]
