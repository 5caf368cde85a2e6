"""A plain fixed-width MLP: the baseline the AWNN paper tunes by grid search (Table 1).

AWNN, Section 4 and Appendix C.1 (Table 3): one to four hidden layers of equal
width with ReLU, LeakyReLU or ReLU6, trained with Adam. Like the adaptive MLP
(:class:`hacn_core.awnn.mlp.AdaptiveMLP`) it takes inputs of any leading shape.
"""

from __future__ import annotations

from torch import Tensor, nn

ACTIVATIONS: dict[str, type[nn.Module]] = {
    "relu": nn.ReLU,
    "leaky_relu": nn.LeakyReLU,
    "relu6": nn.ReLU6,
    "tanh": nn.Tanh,
}


class MLP(nn.Module):
    """``in_features -> [width, activation] x hidden_layers -> out_features``."""

    def __init__(self, in_features: int, out_features: int, width: int, hidden_layers: int = 1, activation: str = "relu"):
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation={activation!r} is not supported; allowed: {', '.join(ACTIVATIONS)}")
        for field, value in (("in_features", in_features), ("out_features", out_features), ("width", width), ("hidden_layers", hidden_layers)):
            if value < 1:
                raise ValueError(f"{field}={value} must be a positive integer")
        layers: list[nn.Module] = []
        fan_in = in_features
        for _ in range(hidden_layers):
            layers += [nn.Linear(fan_in, width), ACTIVATIONS[activation]()]
            fan_in = width
        layers.append(nn.Linear(fan_in, out_features))
        self.net = nn.Sequential(*layers)

    def forward(self, x: Tensor) -> Tensor:
        """``(..., in_features) -> (..., out_features)``."""
        return self.net(x)
