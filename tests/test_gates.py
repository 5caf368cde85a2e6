"""Tests of hacn_core.gates: the gated layers of Residual Gates Sec. 2.2 and layer removal (Sec. 3.1)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from hacn_core.gates import (
    GatedPlainLayer,
    GatedResidualLayer,
    PlainLayer,
    ResidualLayer,
    SkippedLayer,
    gate_values,
    gated_plain,
    gated_residual,
    mean_gate,
    prune,
    removable_layers,
    removal_curve,
    removal_order,
    remove_layers,
    set_gates,
)
from hacn_core.engine.roles import named_parameter_roles

W = 6


def block(seed: int = 0) -> nn.Sequential:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(W, W), nn.Tanh())


def x_batch(seed: int = 1, n: int = 5) -> torch.Tensor:
    return torch.randn(n, W, generator=torch.Generator().manual_seed(seed))


def n_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def gated_resnet(depth: int = 6, gated: bool = True) -> nn.Sequential:
    """A toy Gated ResNet: ``depth`` residual layers with tanh-linear branches."""
    layers = [GatedResidualLayer(block(i)) if gated else ResidualLayer(block(i)) for i in range(depth)]
    return nn.Sequential(*layers)


# --- the layer rules (Sec. 2.2) ---------------------------------------------


def test_gated_plain_with_k_zero_is_identity() -> None:
    layer = GatedPlainLayer(block(), k_init=0.0)
    x = x_batch()
    assert torch.equal(layer(x), x)
    layer.k.data.fill_(-2.0)  # ReLU gate: every k <= 0 closes the layer
    assert torch.equal(layer(x), x)


def test_gated_residual_with_k_zero_is_identity() -> None:
    layer = GatedResidualLayer(block(), k_init=0.0)
    x = x_batch()
    assert torch.equal(layer(x), x)


def test_gated_residual_with_projection_and_k_zero_is_the_shortcut() -> None:
    pre, proj = nn.Tanh(), nn.Linear(W, 3, bias=False)
    layer = GatedResidualLayer(nn.Linear(W, 3), shortcut=proj, pre=pre, k_init=0.0)
    x = x_batch()
    assert torch.equal(layer(x), proj(torch.tanh(x)))


def test_k_one_recovers_the_ungated_layers_exactly() -> None:
    f, x = block(), x_batch()
    assert torch.equal(GatedPlainLayer(f)(x), PlainLayer(f)(x))
    assert torch.equal(GatedPlainLayer(f)(x), f(x))
    assert torch.equal(GatedResidualLayer(f)(x), ResidualLayer(f)(x))
    assert torch.equal(ResidualLayer(f)(x), f(x) + x)


def test_layers_match_the_functional_rules_for_a_generic_k() -> None:
    f, x = block(), x_batch()
    k = torch.tensor(0.3)
    expected_plain = 0.3 * f(x) + 0.7 * x
    expected_res = 0.3 * f(x) + x
    assert torch.allclose(GatedPlainLayer(f, k_init=0.3)(x), expected_plain)
    assert torch.allclose(GatedResidualLayer(f, k_init=0.3)(x), expected_res)
    assert torch.allclose(gated_plain(f(x), x, k), expected_plain)
    assert torch.allclose(gated_residual(f(x), x, k), expected_res)


def test_sigmoid_gate_option() -> None:
    f, x = block(), x_batch()
    layer = GatedPlainLayer(f, g="sigmoid", k_init=0.0)  # sigmoid(0) = 1/2
    assert torch.allclose(layer(x), 0.5 * f(x) + 0.5 * x)


@pytest.mark.parametrize("k0", [0.0, -0.5])
@pytest.mark.parametrize("kind", ["plain", "residual"])
def test_closed_gate_gets_zero_gradient(kind: str, k0: float) -> None:
    """g = ReLU has zero derivative at k <= 0: gradient descent alone never reopens the gate."""
    cls = GatedPlainLayer if kind == "plain" else GatedResidualLayer
    layer = cls(block(), k_init=k0)
    (layer(x_batch()) ** 2).sum().backward()
    assert layer.k.grad is not None
    assert layer.k.grad.item() == 0.0
    # and the branch's weights get no gradient through a closed gate either
    assert torch.count_nonzero(layer.block[0].weight.grad) == 0


def test_open_gate_gradient_matches_hand_derivative() -> None:
    f, x = block(), x_batch()
    with torch.no_grad():
        fx = f(x)
    plain = GatedPlainLayer(f, k_init=0.7)
    plain(x).sum().backward()
    assert torch.allclose(plain.k.grad, (fx - x).sum())  # d/dk [k f + (1-k) x] = f - x
    res = GatedResidualLayer(block(), k_init=0.7)
    res(x).sum().backward()
    assert torch.allclose(res.k.grad, fx.sum())  # d/dk [k f + x] = f


def test_gate_is_one_tagged_scalar_initialised_to_one() -> None:
    for layer in (GatedPlainLayer(block()), GatedResidualLayer(block())):
        assert layer.k.shape == () and layer.k.item() == 1.0
        roles = {name: role for name, _, role in named_parameter_roles(layer)}
        assert roles["k"] == "gate"
        assert [n for n, r in roles.items() if r == "gate"] == ["k"]
    assert GatedResidualLayer(block(), k_init=0.25).k.item() == 0.25


def test_bad_inputs_name_the_field() -> None:
    with pytest.raises(ValueError, match=r"g='tanh'.*allowed: relu, sigmoid, identity"):
        GatedPlainLayer(block(), g="tanh")
    with pytest.raises(ValueError, match="k_init"):
        GatedResidualLayer(block(), k_init="one")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="block output shape"):
        GatedPlainLayer(nn.Linear(W, 3))(x_batch())
    with pytest.raises(ValueError, match="block output shape"):
        GatedResidualLayer(nn.Linear(W, 3))(x_batch())


# --- inspection ----------------------------------------------------------------


def test_gate_values_mean_gate_and_set_gates() -> None:
    model = gated_resnet(4)
    assert gate_values(model) == {"0.k": 1.0, "1.k": 1.0, "2.k": 1.0, "3.k": 1.0}
    set_gates(model, [0.5, -1.0, 2.0, 0.5])
    assert gate_values(model) == {"0.k": 0.5, "1.k": -1.0, "2.k": 2.0, "3.k": 0.5}
    assert mean_gate(model) == pytest.approx(0.5)
    set_gates(model, {"2.k": 0.0})
    assert gate_values(model)["2.k"] == 0.0
    with pytest.raises(ValueError, match="model has no parameters tagged 'gate'"):
        mean_gate(gated_resnet(2, gated=False))
    with pytest.raises(ValueError, match="got 2 gate values, the model has 4"):
        set_gates(model, [1.0, 2.0])
    with pytest.raises(ValueError, match="unknown gate names"):
        set_gates(model, {"9.k": 1.0})


# --- layer removal (Sec. 3.1, Fig. 5) ------------------------------------------------


def test_removing_closed_layers_leaves_the_output_unchanged() -> None:
    model = gated_resnet(6)
    set_gates(model, [1.0, 0.0, 0.8, -0.3, 1.2, 0.0])
    x = x_batch()
    pruned = remove_layers(model, ["1", "3", "5"])
    assert torch.equal(pruned(x), model(x))
    assert isinstance(pruned[1], SkippedLayer) and isinstance(model[1], GatedResidualLayer)  # a copy
    per_layer = W * W + W + 1  # Linear weight, bias and the gate k
    assert n_params(pruned) == n_params(model) - 3 * per_layer
    # an open layer does change the function when removed
    assert not torch.allclose(remove_layers(model, ["0"])(x), model(x))


def test_removing_closed_gated_plain_layers_leaves_the_output_unchanged() -> None:
    model = nn.Sequential(*[GatedPlainLayer(block(i)) for i in range(4)])
    set_gates(model, [0.9, 0.0, 1.1, -2.0])
    x = x_batch()
    assert torch.equal(remove_layers(model, ["1", "3"])(x), model(x))


def test_removing_a_projection_block_keeps_its_shortcut() -> None:
    proj = nn.Linear(W, W, bias=False)
    model = nn.Sequential(GatedResidualLayer(block(), shortcut=proj, pre=nn.Tanh(), k_init=0.0), GatedResidualLayer(block(3)))
    x = x_batch()
    pruned = remove_layers(model, ["0"])
    assert torch.equal(pruned(x), model(x))
    assert n_params(pruned) == n_params(model) - (W * W + W + 1)  # the projection survives


def test_greedy_removal_is_by_increasing_k() -> None:
    model = gated_resnet(6)
    set_gates(model, [0.9, -0.2, 1.5, 0.1, 0.1, 0.4])
    assert removal_order(model, "greedy") == ["1", "3", "4", "5", "0", "2"]  # ties keep module order
    assert [name for name, _ in removable_layers(model)] == ["0", "1", "2", "3", "4", "5"]


def test_greedy_removal_needs_gates() -> None:
    with pytest.raises(ValueError, match="strategy='greedy' needs a gate k.*use strategy='random'"):
        removal_order(gated_resnet(3, gated=False), "greedy")


def test_random_removal_is_seeded() -> None:
    model = gated_resnet(10, gated=False)
    a, b = removal_order(model, "random", seed=3), removal_order(model, "random", seed=3)
    assert a == b
    assert sorted(a, key=int) == [str(i) for i in range(10)]
    orders = {tuple(removal_order(model, "random", seed=s)) for s in range(5)}
    assert len(orders) > 1
    # pruning with a seed removes exactly the first n of that order
    pruned = prune(model, 4, "random", seed=3)
    skipped = [name for name, m in pruned.named_children() if isinstance(m, SkippedLayer)]
    assert sorted(skipped) == sorted(a[:4])


def test_removal_curve_is_nested_and_uses_the_evaluation() -> None:
    model = gated_resnet(5)
    set_gates(model, [0.5, 0.0, 2.0, 0.0, 1.0])
    model.eval()
    x = x_batch(n=8)
    reference = model(x).detach()

    @torch.no_grad()
    def fidelity(m: nn.Module) -> float:  # a stand-in for test accuracy
        return float(-(m(x) - reference).abs().max())

    curve = removal_curve(model, fidelity, "greedy")
    assert [p.blocks_removed for p in curve] == [0, 1, 2, 3, 4, 5]
    assert [p.layers_removed for p in curve] == [0, 1, 2, 3, 4, 5]  # one Linear per block here
    assert curve[2].removed == ("1", "3") and curve[3].removed == ("1", "3", "0")
    # the two closed blocks go first and cost nothing; removing open ones does
    assert [p.accuracy for p in curve[:3]] == [0.0, 0.0, 0.0]
    assert curve[3].accuracy < 0.0
    assert curve[4].accuracy == fidelity(prune(model, 4, "greedy"))
    subset = removal_curve(model, fidelity, "random", counts=[4, 0], seed=1)
    assert [p.blocks_removed for p in subset] == [0, 4]
    assert subset[1].removed == tuple(removal_order(model, "random", seed=1)[:4])


def test_removal_bad_inputs() -> None:
    model = gated_resnet(3)
    with pytest.raises(ValueError, match=r"strategy='smallest'.*allowed: greedy, random"):
        removal_order(model, "smallest")
    with pytest.raises(ValueError, match=r"names: \['7'\] are not removable layers"):
        remove_layers(model, ["7"])
    with pytest.raises(ValueError, match="n=4 must be between 0 and the number of removable layers \\(3\\)"):
        prune(model, 4)
    with pytest.raises(ValueError, match="counts: 5 is outside 0..3"):
        removal_curve(model, lambda m: 0.0, counts=[5])
