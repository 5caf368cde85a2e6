"""Tests of the Residual Gates models: MNIST FC nets (Sec. 3.1) and CIFAR (wide) ResNets (Sec. 3.2)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from hacn_core.gates import (
    GatedResidualLayer,
    ResidualLayer,
    gate_values,
    removable_layers,
    remove_layers,
    set_gates,
)
from hacn_core.models import build_model
from hacn_core.models.fc import KINDS, fc_param_count, mnist_fc
from hacn_core.models.resnet import preact_resnet, wide_resnet, wrn_depth
from hacn_core.engine.roles import named_parameter_roles


def n_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def n_gates(model: nn.Module) -> int:
    return sum(role == "gate" for _, _, role in named_parameter_roles(model))


def copy_into_gated(ungated: nn.Module, gated: nn.Module) -> None:
    """Load the ungated weights into the gated model; only the gates may be missing."""
    result = gated.load_state_dict(ungated.state_dict(), strict=False)
    assert result.unexpected_keys == []
    assert result.missing_keys and all(k.endswith(".k") for k in result.missing_keys)


def images(channels: int = 3, size: int = 32, n: int = 4) -> torch.Tensor:
    return torch.randn(n, channels, size, size, generator=torch.Generator().manual_seed(0))


def with_random_bn_stats(model: nn.Module) -> nn.Module:
    """Non-trivial BN statistics and gains, so eval-mode equivalences are not vacuous."""
    gen = torch.Generator().manual_seed(5)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.modules.batchnorm._BatchNorm):
                m.running_mean.copy_(torch.randn(m.num_features, generator=gen) * 0.1)
                m.running_var.copy_(torch.rand(m.num_features, generator=gen) + 0.5)
                m.weight.copy_(torch.rand(m.num_features, generator=gen) + 0.5)
                m.bias.copy_(torch.randn(m.num_features, generator=gen) * 0.1)
    return model


# --- MNIST fully connected networks (Sec. 3.1) ---------------------------------------


@pytest.mark.parametrize("depth", [2, 10, 100])
def test_mnist_parameter_counts_by_hand(depth: int) -> None:
    stem = 784 * 50 + 50  # "a linear layer with 50 neurons"
    layer = 50 * 50 + 50 + 2 * 50  # one Dot-BN-ReLU layer: W, b, BN gain and shift
    head = 50 * 10 + 10  # softmax layer over 10 classes
    body = stem + depth * layer + head
    # d counts layers: a residual block is two layers, so a ResNet of depth d has d/2 gates
    expected = {"plain": body, "resnet": body, "gated_plain": body + depth, "gated_resnet": body + depth // 2}
    for kind in KINDS:
        model = mnist_fc(kind, depth)
        assert n_params(model) == expected[kind] == fc_param_count(kind, depth), kind
    assert n_gates(mnist_fc("gated_plain", depth)) == depth
    assert n_gates(mnist_fc("gated_resnet", depth)) == depth // 2
    assert n_gates(mnist_fc("resnet", depth)) == 0


def test_fig5_network_has_50_gated_blocks_of_two_layers() -> None:
    model = mnist_fc("gated_resnet", 100)
    layers = removable_layers(model)
    assert len(layers) == 50 and all(layer.num_layers == 2 for _, layer in layers)
    assert list(gate_values(model)) == [f"layers.{i}.k" for i in range(50)]


def test_mnist_resnet_matches_a_hand_written_dot_bn_relu_reference() -> None:
    torch.manual_seed(0)
    model = with_random_bn_stats(mnist_fc("resnet", 4)).eval()
    x = torch.rand(3, 1, 28, 28)

    def dot_bn_relu(h: torch.Tensor, seq: nn.Module) -> torch.Tensor:
        bn = seq.bn
        z = h @ seq.linear.weight.T + seq.linear.bias
        z = (z - bn.running_mean) / torch.sqrt(bn.running_var + bn.eps) * bn.weight + bn.bias
        return torch.clamp(z, min=0)

    h = x.reshape(3, 784) @ model.stem.weight.T + model.stem.bias  # bare linear stem
    for unit in model.layers:
        h = dot_bn_relu(dot_bn_relu(h, unit.block.layer1), unit.block.layer2) + h
    logits = h @ model.head.weight.T + model.head.bias
    assert torch.allclose(model(x), logits, atol=1e-5)


@pytest.mark.parametrize("kind", ["gated_plain", "gated_resnet"])
def test_mnist_gated_with_k_zero_reduces_to_stem_and_head(kind: str) -> None:
    model = mnist_fc(kind, 6)
    set_gates(model, 0.0)
    x = torch.rand(5, 784)
    assert torch.equal(model(x), model.head(model.stem(x)))  # every middle layer is the identity


@pytest.mark.parametrize("kind", ["plain", "resnet"])
@pytest.mark.parametrize("train", [True, False])
def test_mnist_gated_with_k_one_equals_ungated(kind: str, train: bool) -> None:
    torch.manual_seed(1)
    ungated = with_random_bn_stats(mnist_fc(kind, 6))
    gated = mnist_fc(f"gated_{kind}", 6)
    copy_into_gated(ungated, gated)
    ungated.train(train), gated.train(train)
    x = torch.rand(8, 784)
    assert torch.equal(gated(x), ungated(x))


def test_mnist_options() -> None:
    model = mnist_fc("gated_plain", 2, width=8, in_features=12, num_classes=3, k_init=0.5, stem="dot_bn_relu", init="glorot")
    assert model(torch.rand(4, 12)).shape == (4, 3)
    assert set(gate_values(model).values()) == {0.5}
    assert torch.count_nonzero(model.head.bias) == 0  # Keras-style zero biases
    assert isinstance(model.stem, nn.Sequential) and isinstance(model.stem.bn, nn.BatchNorm1d)


def test_mnist_bad_inputs() -> None:
    with pytest.raises(ValueError, match=r"kind='highway'.*allowed: plain, resnet, gated_plain, gated_resnet"):
        mnist_fc("highway", 10)
    with pytest.raises(ValueError, match=r"depth=0 must be an integer >= 1"):
        mnist_fc("plain", 0)
    with pytest.raises(ValueError, match=r"depth=5 must be even for kind='gated_resnet'"):
        mnist_fc("gated_resnet", 5)
    assert n_gates(mnist_fc("gated_plain", 5)) == 5  # odd d is fine for plain kinds
    with pytest.raises(ValueError, match=r"width=0 must be an integer >= 1"):
        mnist_fc("plain", 2, width=0)
    with pytest.raises(ValueError, match=r"stem='conv'.*allowed: linear, dot_bn_relu"):
        mnist_fc("plain", 2, stem="conv")
    with pytest.raises(ValueError, match=r"g='tanh'.*allowed"):
        mnist_fc("gated_plain", 2, g="tanh")


# --- CIFAR (wide) ResNets (Sec. 3.2) --------------------------------------------------


def wrn_param_count(n: int, widths: tuple[int, int, int], classes: int, in_ch: int = 3, projection: bool = True) -> int:
    """Parameters of a pre-activation (wide) ResNet counted by hand (no conv biases)."""
    total = in_ch * 16 * 9  # 3x3 stem to 16 channels
    c_in = 16
    for stage, c in enumerate(widths):
        for b in range(n):
            changes = b == 0 and (c_in != c or stage > 0)
            total += 2 * c_in + 9 * c_in * c + 2 * c + 9 * c * c  # BN, conv, BN, conv
            total += c_in * c if (changes and projection) else 0  # 1x1 projection shortcut
            c_in = c
    return total + 2 * c_in + c_in * classes + classes  # final BN and the classifier


def meta_model(fn, *args, **kwargs) -> nn.Module:
    """Build a big model without allocating memory: only for counting parameters."""
    with torch.device("meta"):
        return fn(*args, **kwargs)


def test_wrn_28_10_has_the_published_parameter_count() -> None:
    model = meta_model(wide_resnet, 28, 10)
    count = n_params(model)
    assert count == wrn_param_count(4, (160, 320, 640), 10) == 36_479_194
    assert round(count / 1e6, 1) == 36.5  # Table 6: "Wide ResNet (4,10) ... 36.5M"
    gated = meta_model(wide_resnet, wrn_depth(4), 10, dropout=0.3, gated=True)
    assert n_params(gated) - count == 12 == n_gates(gated)  # Table 3: "adds ... 12 parameters"


def test_other_wrn_counts_match_the_wrn_paper() -> None:
    # Zagoruyko & Komodakis (2016): WRN-16-4 2.7M, WRN-40-10 55.8M (CIFAR-10)
    assert round(n_params(meta_model(wide_resnet, 16, 4)) / 1e6, 1) == 2.7
    assert round(n_params(meta_model(wide_resnet, 40, 10)) / 1e6, 1) == 55.8
    assert n_params(meta_model(wide_resnet, 52, 1, 100)) == wrn_param_count(8, (16, 32, 64), 100)


def test_resnet32_counts() -> None:
    # "Resnet 5" is n = 5: ResNet-32, 15 blocks, gating "adds 15 parameters" (Table 3).
    plain = meta_model(preact_resnet, 5)
    gated = meta_model(preact_resnet, 5, gated=True)
    assert n_params(plain) == wrn_param_count(5, (16, 32, 64), 10)
    assert n_params(gated) - n_params(plain) == 15 == n_gates(gated)
    # option A shortcuts: He et al. (2015b) report 0.46M for ResNet-32
    zero_pad = meta_model(preact_resnet, 5, shortcut="zero_pad")
    assert n_params(zero_pad) == wrn_param_count(5, (16, 32, 64), 10, projection=False) == 464_154


def test_projection_blocks_are_where_the_dimensions_change() -> None:
    # Fig. 6: in WRN (4,10) blocks 1, 5 and 9 change the feature-map dimension.
    wrn = meta_model(wide_resnet, 28, 10, gated=True)
    assert [i + 1 for i, (_, b) in enumerate(removable_layers(wrn)) if b.shortcut is not None] == [1, 5, 9]
    resnet = meta_model(preact_resnet, 5, gated=True)
    assert [i + 1 for i, (_, b) in enumerate(removable_layers(resnet)) if b.shortcut is not None] == [6, 11]


def test_dropout_sits_between_the_convolutions() -> None:
    block = wide_resnet(10, 1, dropout=0.3).stages[0][0].block
    names = [name for name, _ in block.named_children()]
    assert names == ["bn1", "relu1", "conv1", "bn2", "relu2", "dropout", "conv2"]
    assert block.dropout.p == 0.3
    assert not any(isinstance(m, nn.Dropout) for m in wide_resnet(10, 1).modules())


@pytest.mark.parametrize(
    "build, channels, size, classes",
    [
        (lambda: preact_resnet(1, 10), 3, 32, 10),
        (lambda: preact_resnet(1, 100, gated=True, shortcut="zero_pad"), 3, 32, 100),
        (lambda: wide_resnet(10, 2, 10, dropout=0.3, gated=True), 3, 32, 10),
        (lambda: wide_resnet(10, 1, 10, gated=True, in_channels=1), 1, 28, 10),
        (lambda: preact_resnet(1, 10, in_channels=1, shortcut="zero_pad"), 1, 28, 10),
    ],
)
def test_cifar_output_shapes(build, channels: int, size: int, classes: int) -> None:
    torch.manual_seed(0)
    assert build()(images(channels, size, n=2)).shape == (2, classes)


@pytest.mark.parametrize("train", [True, False])
@pytest.mark.parametrize("shortcut", ["projection", "zero_pad"])
def test_cifar_gated_with_k_one_equals_ungated(train: bool, shortcut: str) -> None:
    torch.manual_seed(0)
    ungated = with_random_bn_stats(wide_resnet(10, 2, shortcut=shortcut))
    gated = wide_resnet(10, 2, gated=True, shortcut=shortcut)
    copy_into_gated(ungated, gated)
    ungated.train(train), gated.train(train)
    x = images()
    assert torch.equal(gated(x), ungated(x))


def test_cifar_gated_k_zero_leaves_only_the_shortcuts() -> None:
    torch.manual_seed(0)
    model = with_random_bn_stats(preact_resnet(2, gated=True)).eval()
    set_gates(model, 0.0)
    x = images()
    h = model.stem(x)
    for stage in model.stages:
        for unit in stage:  # closed gate: u = s(pre(x)), the identity where dims are kept
            h = unit.shortcut(unit.pre(h)) if unit.shortcut is not None else h
    expected = model.head(h)
    assert torch.allclose(model(x), expected, atol=1e-6)
    # and removing every block leaves the same function with far fewer parameters
    pruned = remove_layers(model, [name for name, _ in removable_layers(model)])
    assert torch.equal(pruned(x), model(x))
    kept = 3 * 16 * 9 + (2 * 16 + 16 * 32) + (2 * 32 + 32 * 64) + 2 * 64 + 64 * 10 + 10
    assert n_params(pruned) == kept


def test_removing_closed_cifar_blocks_keeps_the_output() -> None:
    torch.manual_seed(0)
    model = with_random_bn_stats(wide_resnet(16, 1, gated=True)).eval()
    names = [name for name, _ in removable_layers(model)]
    closed = [names[0], names[2], names[3], names[5]]
    assert names[2] == "stages.1.0"  # a projection block is among the closed ones
    set_gates(model, {f"{n}.k": -1.0 for n in closed})
    x = images()
    assert torch.equal(remove_layers(model, closed)(x), model(x))


def test_cifar_gate_gradient_flows_at_init() -> None:
    model = preact_resnet(1, gated=True)
    F.cross_entropy(model(images(n=4)), torch.arange(4)).backward()
    grads = [layer.k.grad for _, layer in removable_layers(model)]
    assert all(g is not None and g.item() != 0.0 for g in grads)
    assert all(isinstance(layer, GatedResidualLayer) for _, layer in removable_layers(model))
    assert not any(isinstance(m, GatedResidualLayer) for m in preact_resnet(1).modules())
    assert all(type(layer) is ResidualLayer for _, layer in removable_layers(preact_resnet(1)))


def test_cifar_bad_inputs() -> None:
    with pytest.raises(ValueError, match=r"depth=27 must be of the form 6n \+ 4"):
        wide_resnet(27, 10)
    with pytest.raises(ValueError, match=r"depth=4 must be of the form 6n \+ 4"):
        wide_resnet(4, 10)
    with pytest.raises(ValueError, match=r"width=0 must be an integer >= 1"):
        wide_resnet(16, 0)
    with pytest.raises(ValueError, match=r"dropout=1.0 must lie in \[0, 1\)"):
        wide_resnet(16, 1, dropout=1.0)
    with pytest.raises(ValueError, match=r"n=0 must be an integer >= 1"):
        preact_resnet(0)
    with pytest.raises(ValueError, match=r"shortcut='B'.*allowed: projection, zero_pad"):
        preact_resnet(1, shortcut="B")
    with pytest.raises(ValueError, match=r"in_channels=0 must be an integer >= 1"):
        wide_resnet(10, 1, in_channels=0)


def test_build_model_factory() -> None:
    assert n_gates(build_model("mnist_fc", kind="gated_resnet", depth=4)) == 2
    assert n_gates(build_model("preact_resnet", n=1, gated=True)) == 3
    assert isinstance(build_model("wide_resnet", depth=10, width=1), nn.Module)
    with pytest.raises(ValueError, match=r"name='vgg'.*allowed: mnist_fc, preact_resnet, wide_resnet"):
        build_model("vgg")
