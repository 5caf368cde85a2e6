"""GIN with fixed or adaptive MLPs: the graph backbone of AWNN (Sec. 4, App. C.4, Table 5).

A Graph Isomorphism Network (Xu et al., 2019, Eq. 4.1) for graph classification,
with every MLP built from an MLP kind of :mod:`hacn_core.models.mlp`:

* an MLP with one hidden layer first maps the node features to the embedding
  width (AWNN App. C.4: "an extra MLP with 1 hidden layer is always placed before the
  sequence of graph convolutional layers"), ``h_v^0 = act(MLP_0(x_v))``;
* ``layers`` graph convolutions (torch-geometric's ``GINConv``, sum aggregation)::

      h_v^l = act( MLP_l( (1 + eps_l) h_v^{l-1} + sum_{u in N(v)} h_u^{l-1} ) ),  l = 1..L

  (the kinds end with a linear map, so the activation follows each MLP);
* the readout of Xu et al. Eq. 4.2: every layer's node embeddings are pooled
  (``sum`` or ``mean``) and concatenated, ``h_G = [pool(h^0) | ... | pool(h^L)]``,
  and a linear map gives the class logits (equivalently, one linear prediction per
  layer, summed).

With ``mlp="adaptive"`` all ``L + 1`` MLPs are :class:`~hacn_core.awnn.AdaptiveMLP`s
whose hidden widths are learned (AWNN: "the first 1 hidden layer MLP as well as the
one used in each graph convolutional layer are replaced by adaptive AWNN versions"),
starting at rate ``nu_0 = 0.02`` (Table 5; 116 neurons at ``k = 0.9``); with
``mlp="fixed"`` they are ``Linear -> act -> Linear`` of width ``hidden``. Table 5's
grid is ``layers`` in 1, 2, 4 and ``pooling`` in sum, mean. ``eps`` is 0 (Xu et al.'s
GIN-0) unless ``train_eps`` learns it (GIN-eps). No batch normalisation: the
adaptive MLP has none, and the fixed and adaptive models are kept alike.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from hacn_core.awnn.distribution import quantile_width
from hacn_core.awnn.init import ACTIVATIONS
from hacn_core.engine.checks import check_choice
from hacn_core.models.mlp import UNGATED_MLP_KINDS, make_mlp

#: global poolings of the readout (AWNN Table 5)
POOLINGS: tuple[str, ...] = ("sum", "mean")
#: graph convolution layers tried in AWNN Table 5
TABLE5_LAYERS: tuple[int, ...] = (1, 2, 4)
#: starting rate of the adaptive MLPs (AWNN Table 5)
GRAPH_START_RATE = 0.02


def _count(field: str, value: object, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{field}={value!r} must be an integer >= {minimum}")
    return value


@dataclass(frozen=True)
class GINConfig:
    """A GIN for graph classification (Xu et al. 2019; AWNN App. C.4, Table 5).

    ``in_features`` node features (NCI1: 37), ``num_classes`` classes; ``layers``
    graph convolutions (>= 1; Table 5: 1, 2, 4); ``pooling`` the readout (``sum`` or
    ``mean``); ``dim`` the node embedding width between convolutions; ``mlp`` the MLPs'
    kind (``fixed`` or ``adaptive``); ``hidden`` the fixed MLPs' hidden width;
    ``rate`` and ``k`` the adaptive MLPs' starting rate and quantile; ``activation``
    (ReLU) follows every MLP and is the hidden activation of both kinds; ``dropout``
    applies to ``h_G`` before the classifier.
    """

    in_features: int
    num_classes: int
    layers: int = 2
    pooling: str = "sum"
    dim: int = 64
    mlp: str = "fixed"
    hidden: int = 64
    rate: float = GRAPH_START_RATE
    k: float = 0.9
    activation: str = "relu"
    train_eps: bool = False
    dropout: float = 0.0

    def __post_init__(self) -> None:
        _count("in_features", self.in_features)
        _count("num_classes", self.num_classes)
        _count("layers", self.layers)
        check_choice("pooling", self.pooling, POOLINGS)
        _count("dim", self.dim)
        check_choice("mlp", self.mlp, UNGATED_MLP_KINDS)
        _count("hidden", self.hidden)
        if isinstance(self.rate, bool) or not isinstance(self.rate, (int, float)) or not self.rate > 0:
            raise ValueError(f"rate={self.rate!r} must be a rate > 0 (Table 5: 0.02)")
        check_choice("activation", self.activation, ACTIVATIONS)
        if not isinstance(self.train_eps, bool):
            raise ValueError(f"train_eps={self.train_eps!r} must be True or False")
        if not (isinstance(self.dropout, (int, float)) and 0.0 <= self.dropout < 1.0):
            raise ValueError(f"dropout={self.dropout!r} must lie in [0, 1)")


_ACTS = {"relu": nn.ReLU, "relu6": nn.ReLU6, "tanh": nn.Tanh, "leaky_relu": nn.LeakyReLU}


def gin_mlp(config: GINConfig, in_features: int) -> nn.Module:
    """One MLP ``(N, in_features) -> (N, dim)`` with one hidden layer, of ``config.mlp``'s kind."""
    c = config
    if c.mlp == "adaptive":
        return make_mlp("adaptive", in_features, quantile_width(float(c.rate), c.k), c.dim,
                        activation=c.activation, rate_init=float(c.rate), k=c.k)
    return make_mlp("fixed", in_features, c.hidden, c.dim, activation=c.activation)


class GIN(nn.Module):
    """GIN of ``config``: ``forward(x, edge_index, batch) -> (G, num_classes)`` logits.

    Submodules: ``pre`` (the MLP before the convolutions), ``convs`` (``GINConv``s,
    ``convs[l].nn`` the MLP of layer ``l + 1``), ``classifier`` (``(L + 1) dim ->
    classes``). ``x`` is ``(N, in_features)`` float, ``edge_index`` ``(2, E)`` (both
    directions of an undirected edge, as torch-geometric stores them), ``batch``
    ``(N,)`` the graph of each node (``None``: one graph).
    """

    def __init__(self, config: GINConfig | None = None, **kwargs) -> None:
        super().__init__()
        if config is None:
            config = GINConfig(**kwargs)
        elif kwargs:
            raise ValueError(f"pass either a config or keyword arguments, not both (got {sorted(kwargs)})")
        self.config = c = config
        self.pre = gin_mlp(c, c.in_features)
        from torch_geometric.nn import GINConv, global_add_pool, global_mean_pool  # here: importing it costs seconds

        self.convs = nn.ModuleList(GINConv(gin_mlp(c, c.dim), train_eps=c.train_eps) for _ in range(c.layers))
        self.act = _ACTS[c.activation]()
        self.dropout = nn.Dropout(c.dropout)
        self.classifier = nn.Linear((c.layers + 1) * c.dim, c.num_classes)
        self._pool = global_add_pool if c.pooling == "sum" else global_mean_pool

    def node_embeddings(self, x: Tensor, edge_index: Tensor) -> list[Tensor]:
        """``[h^0, ..., h^L]``, each ``(N, dim)`` (Eq. 4.1 of Xu et al.)."""
        h = self.act(self.pre(x))
        out = [h]
        for conv in self.convs:
            h = self.act(conv(h, edge_index))  # MLP((1 + eps) h_v + sum_{u in N(v)} h_u)
            out.append(h)
        return out

    def forward(self, x: Tensor, edge_index: Tensor, batch: Tensor | None = None) -> Tensor:
        if batch is None:
            batch = torch.zeros(x.shape[0], dtype=torch.long, device=x.device)
        pooled = [self._pool(h, batch) for h in self.node_embeddings(x, edge_index)]  # (L + 1) x (G, dim)
        return self.classifier(self.dropout(torch.cat(pooled, dim=-1)))  # (G, classes)


__all__ = ["GRAPH_START_RATE", "POOLINGS", "TABLE5_LAYERS", "GIN", "GINConfig", "gin_mlp"]
