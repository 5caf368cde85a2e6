"""Many fully connected MNIST networks of Sec. 3.1 trained as one batched model.

The networks of Residual Gates, Section 3.1 (``hacn_core.models.fc``) are
50 units wide: one training step of one network is a chain of tiny matrix
products whose cost on a CPU is mostly Python and kernel-launch overhead. The
MNIST study trains 4 kinds x 3 seeds at every depth; doing it one network at a
time takes about 6 CPU-hours per seed here. ``StackedFCNet`` holds ``S``
networks of the same depth and width (any mix of the four kinds) with every
weight stacked along a leading member axis, so each layer is one batched matrix
product (``torch.baddbmm``) and one BatchNorm call for all members.

What stays exactly the same per member
    The function: member ``s`` computes the same layer rules as its ``FCNet``
    (Sec. 2.2), written for every kind as one rule per Dot-BN-ReLU layer ``l``,

        u_l = a_l f_l(x_l) + b_l x_l + c_l x_{l-1},

    with (``a, b, c``) = (1, 0, 0) for ``plain``; (``g(k_l)``, ``1 - g(k_l)``, 0)
    for ``gated_plain``; for the residual kinds (1, 0, 0) on the first layer of
    a block and (1 or ``g(k_b)``, 0, 1) on its second, ``x_{l-1}`` being the
    block's input. These are the four residual rules an ``FCNet`` takes
    (``plain``, ``resnet``, ``gated_plain``, ``gated``; ``fc.RULE_OF_KIND``);
    each member keeps its own, so one stacked model mixes rules. BatchNorm statistics are per member (channels of the
    flattened ``(batch, S * width)`` tensor). Members may differ in what is their own
    by nature: initial weights and gates (``init``, ``k_init``: copied in), the gate
    function ``g`` (each member's column of ``k`` goes through its own ``g``) and
    BatchNorm's ``bn_momentum`` / ``bn_eps`` (one ``batch_norm`` call per run of
    consecutive members with the same pair; order the members by that pair to make
    one call per pair). Gradients: the loss is the sum of
    the members' mean cross-entropies, so member ``s`` receives exactly the
    gradient of its own loss. NAdam (like Adam) updates every element on its
    own, so one optimizer over the stacked tensors makes each member's update
    the one its own optimizer would make.

What differs: floating-point rounding (a batched product sums in another
order). In exact arithmetic the two engines are the same; in float64 they agree
to 1e-10 after several NAdam steps. In float32 they part within a few steps,
for a reason that is the model's, not the engine's: the bias of the first
linear layer and of every Dot before a BatchNorm has a gradient that is exactly
zero in exact arithmetic (BatchNorm removes any constant shift), so what the
optimizer sees there is rounding noise, and Adam's per-element normalisation
turns that noise into steps of size ``lr``. The same happens between two
single-network runs that differ only in the number of CPU threads (measured:
losses part by 6e-2 within 12 steps). A stacked run is therefore another
equally valid draw of the same training, exactly as a run on other hardware.
``tests/test_stacked_fc.py`` checks forward, gradients, BatchNorm statistics
and several NAdam steps against the members trained one by one (float64, to 1e-6).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from hacn_core.gates import gate_value
from hacn_core.models.fc import FCNet

_SHARED_FIELDS = ("depth", "width", "in_features", "num_classes", "stem")


class StackedFCNet(nn.Module):
    """``S`` ``FCNet`` members of one depth and width as one model (see module doc).

    Built from the members (their current weights are copied in, so a member
    created with ``torch.manual_seed(seed)`` starts exactly as its single run);
    :meth:`write_back` copies the trained weights, gates and BatchNorm
    statistics back into them. Input ``(S, B, in_features)``, output
    ``(S, B, num_classes)``.
    """

    def __init__(self, members: Sequence[FCNet]) -> None:
        super().__init__()
        if not members:
            raise ValueError("members: need at least one FCNet")
        first = members[0].config
        for i, m in enumerate(members):
            if not isinstance(m, FCNet):
                raise TypeError(f"members[{i}] is a {type(m).__name__}, not an FCNet")
            for field in _SHARED_FIELDS:
                if getattr(m.config, field) != getattr(first, field):
                    raise ValueError(
                        f"members[{i}].config.{field}={getattr(m.config, field)!r} differs from members[0]'s "
                        f"{getattr(first, field)!r}; stacked members share {', '.join(_SHARED_FIELDS)}"
                    )
        if first.stem != "linear":
            raise ValueError(f"stem={first.stem!r} is not supported by StackedFCNet; allowed: linear")
        self.members = list(members)
        self.kinds = [m.config.kind for m in members]
        self.rules = [m.config.rule for m in members]  # ResidualStack names of the kinds
        self.depth, self.width = first.depth, first.width
        self.gs = [m.config.g for m in members]  # gate function of each member
        # BatchNorm (momentum, eps) per run of consecutive members: (start, stop, momentum, eps)
        self.bn_runs: list[tuple[int, int, float, float]] = []
        for s, m in enumerate(members):
            pair = (m.config.bn_momentum, m.config.bn_eps)
            if self.bn_runs and self.bn_runs[-1][2:] == pair:
                self.bn_runs[-1] = (self.bn_runs[-1][0], s + 1, *pair)
            else:
                self.bn_runs.append((s, s + 1, *pair))
        S, d = len(members), first.depth

        def stack(tensors: Sequence[Tensor]) -> Tensor:
            return torch.stack([t.detach().clone() for t in tensors])

        self.stem_weight = nn.Parameter(stack([m.stem.weight for m in members]))  # (S, W, in)
        self.stem_bias = nn.Parameter(stack([m.stem.bias for m in members]))  # (S, W)
        layers = [self._dot_bn_relu_layers(m) for m in members]  # per member: d Sequential(linear, bn, relu)
        self.weight = nn.Parameter(torch.stack([stack([ls[l].linear.weight for ls in layers]) for l in range(d)]))
        self.bias = nn.Parameter(torch.stack([stack([ls[l].linear.bias for ls in layers]) for l in range(d)]))
        self.bn_weight = nn.Parameter(torch.stack([stack([ls[l].bn.weight for ls in layers]) for l in range(d)]))
        self.bn_bias = nn.Parameter(torch.stack([stack([ls[l].bn.bias for ls in layers]) for l in range(d)]))
        self.register_buffer("running_mean", torch.stack([stack([ls[l].bn.running_mean for ls in layers])
                                                          for l in range(d)]))
        self.register_buffer("running_var", torch.stack([stack([ls[l].bn.running_var for ls in layers])
                                                         for l in range(d)]))
        self.register_buffer("num_batches_tracked", layers[0][0].bn.num_batches_tracked.detach().clone())
        self.head_weight = nn.Parameter(stack([m.head.weight for m in members]))  # (S, C, W)
        self.head_bias = nn.Parameter(stack([m.head.bias for m in members]))  # (S, C)

        # Gates: k[l, s] is member s's gate used at layer l (unused entries get no gradient and stay put).
        dtype = members[0].stem.weight.dtype  # the members' (float64 members keep their gates exactly)
        k = torch.ones(d, S, dtype=dtype)
        gated = torch.zeros(d, S, dtype=torch.bool)  # a_l = g(k) here, else 1
        plain_gate = torch.zeros(d, S, dtype=dtype)  # b_l = 1 - g(k) here, else 0
        skip = torch.zeros(d, S, dtype=dtype)  # c_l
        for s, m in enumerate(members):
            kind = m.config.kind
            for u, unit in enumerate(m.layers):
                if kind == "gated_plain":
                    k[u, s] = unit.k.detach()
                    gated[u, s] = True
                    plain_gate[u, s] = 1.0
                elif kind in ("resnet", "gated_resnet"):
                    second = 2 * u + 1
                    skip[second, s] = 1.0
                    if kind == "gated_resnet":
                        k[second, s] = unit.k.detach()
                        gated[second, s] = True
        self.k = nn.Parameter(k)
        self.register_buffer("gated", gated, persistent=False)
        self.register_buffer("plain_gate", plain_gate, persistent=False)
        self.register_buffer("skip", skip, persistent=False)
        # Per layer: which terms any member uses (skips work that would add zeros).
        self._uses_b = [bool(plain_gate[l].any()) for l in range(d)]
        self._uses_c = [bool(skip[l].any()) for l in range(d)]

    @staticmethod
    def _dot_bn_relu_layers(member: FCNet) -> list[nn.Module]:
        """The member's d Dot-BN-ReLU layers in order (a residual block holds two)."""
        out: list[nn.Module] = []
        for unit in member.layers:
            block = unit.block
            out.extend([block.layer1, block.layer2] if hasattr(block, "layer1") else [block])
        return out

    @property
    def num_members(self) -> int:
        return len(self.members)

    def coefficients(self) -> tuple[Tensor, Tensor, Tensor]:
        """``(a, b, c)`` of the layer rule, each ``(depth, S)`` (see module doc)."""
        gk = gate_value(self.k, self.gs[0])
        for g in dict.fromkeys(self.gs[1:]):  # other gate functions: their members' columns
            if g != self.gs[0]:
                mine = torch.tensor([g == other for other in self.gs], device=gk.device)  # (S,)
                gk = torch.where(mine, gate_value(self.k, g), gk)
        a = torch.where(self.gated, gk, torch.ones_like(gk))
        b = self.plain_gate * (1 - gk)
        return a, b, self.skip

    def forward(self, x: Tensor) -> Tensor:
        """Logits ``(S, B, C)`` for inputs ``(S, B, in_features)`` (member ``s`` reads ``x[s]``)."""
        S = self.num_members
        if x.dim() != 3 or x.shape[0] != S:
            raise ValueError(f"x: expected shape (S={S}, B, features), got {tuple(x.shape)}")
        h = torch.baddbmm(self.stem_bias.unsqueeze(1), x, self.stem_weight.transpose(1, 2))
        a, b, c = (t.unsqueeze(-1).unsqueeze(-1).unbind(0) for t in self.coefficients())  # each (S, 1, 1)
        weights, biases = self.weight.unbind(0), self.bias.unbind(0)  # unbind: one stack in backward
        gains, shifts = self.bn_weight.unbind(0), self.bn_bias.unbind(0)
        training = self.training
        if training:
            self.num_batches_tracked.add_(1)
        prev = h
        for l in range(self.depth):
            z = torch.baddbmm(biases[l].unsqueeze(1), h, weights[l].transpose(1, 2))  # (S, B, W)
            f = self._bn_relu(l, z, gains[l], shifts[l])  # (S, B, W)
            u = a[l] * f
            if self._uses_b[l]:
                u = u + b[l] * h
            if self._uses_c[l]:
                u = u + c[l] * prev
            if l % 2 == 0:  # x_{l-1} of the next layer is this layer's input: a block starts here
                prev = h
            h = u
        return torch.baddbmm(self.head_bias.unsqueeze(1), h, self.head_weight.transpose(1, 2))

    def _bn_relu(self, l: int, z: Tensor, gain: Tensor, shift: Tensor) -> Tensor:
        """``ReLU(BN(z))`` of layer ``l`` for ``z`` ``(S, B, W)``; ``gain``, ``shift`` ``(S, W)``.

        BatchNorm per member and channel: the channels of the ``(B, S * W)``
        layout, one ``batch_norm`` call per run of members with the same momentum
        and eps (``bn_runs``; a run's members are the contiguous ``z[start:stop]``,
        its running statistics the rows ``[start, stop)`` of ``running_mean[l]``,
        updated in place).
        """
        S, B, W = z.shape
        parts = []
        for start, stop, momentum, eps in self.bn_runs:
            n = stop - start
            zs = z[start:stop].transpose(0, 1).reshape(B, n * W)
            zs = F.batch_norm(zs, self.running_mean[l, start:stop].view(-1), self.running_var[l, start:stop].view(-1),
                              gain[start:stop].reshape(-1), shift[start:stop].reshape(-1), self.training, momentum,
                              eps)
            parts.append(F.relu(zs).view(B, n, W).transpose(0, 1))
        return parts[0] if len(parts) == 1 else torch.cat(parts, dim=0)

    def member_losses(self, logits: Tensor, target: Tensor) -> Tensor:
        """Mean cross-entropy of each member ``(S,)`` for targets ``(S, B)``."""
        S, B, C = logits.shape
        return F.cross_entropy(logits.reshape(S * B, C), target.reshape(S * B), reduction="none").view(S, B).mean(1)

    @torch.no_grad()
    def write_back(self) -> list[FCNet]:
        """Copy the stacked weights, gates and BatchNorm statistics into the members; return them."""
        for s, m in enumerate(self.members):
            m.stem.weight.copy_(self.stem_weight[s])
            m.stem.bias.copy_(self.stem_bias[s])
            for l, layer in enumerate(self._dot_bn_relu_layers(m)):
                layer.linear.weight.copy_(self.weight[l, s])
                layer.linear.bias.copy_(self.bias[l, s])
                layer.bn.weight.copy_(self.bn_weight[l, s])
                layer.bn.bias.copy_(self.bn_bias[l, s])
                layer.bn.running_mean.copy_(self.running_mean[l, s])
                layer.bn.running_var.copy_(self.running_var[l, s])
                layer.bn.num_batches_tracked.copy_(self.num_batches_tracked)
            for u, unit in enumerate(m.layers):
                if m.config.kind == "gated_plain":
                    unit.k.copy_(self.k[u, s])
                elif m.config.kind == "gated_resnet":
                    unit.k.copy_(self.k[2 * u + 1, s])
            m.head.weight.copy_(self.head_weight[s])
            m.head.bias.copy_(self.head_bias[s])
            m.train(self.training)
        return self.members

    def member_gates(self, s: int) -> list[float]:
        """Member ``s``'s gate values ``k`` in unit order (empty for ungated kinds)."""
        kind = self.kinds[s]
        if kind == "gated_plain":
            return self.k[:, s].tolist()
        if kind == "gated_resnet":
            return self.k[1::2, s].tolist()
        return []


__all__ = ["StackedFCNet"]
