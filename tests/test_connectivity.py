"""Tests of hacn_core.hacn.connectivity: the forward rules of H-ACN Sec. 2 / Algorithm 1, C (Eq. 3-5,
Appendix C), the Sec. 4 statistics, alpha initialisation (Table 6), Depth-adaptive LayerNorm (Eq. 7)
and layer-wise exits (Sec. 3.1)."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from hacn_core.hacn.connectivity import (
    RULES,
    TWO_PART_RULES,
    AlphaInit,
    DepthGain,
    DepthLayerNorm,
    ResidualStack,
    connectivity_frame,
    connectivity_heatmap,
    connectivity_matrix,
    convergence_distance,
    forward_from_connectivity,
    hacn_connectivity,
    init_alphas,
    layerwise_accuracy,
    pairwise_pearson,
    pearson_correlation,
    seed_correlation,
    total_connectivity_strength,
)
from hacn_core.gates import gate_value
from hacn_core.engine.roles import named_parameter_roles

DIM = 5
SINGLE_RULES = [r for r in RULES if r not in TWO_PART_RULES]


class Branch(nn.Module):
    """A small nonlinear shape-preserving block."""

    def __init__(self, dim: int = DIM) -> None:
        super().__init__()
        self.lin = nn.Linear(dim, dim)

    def forward(self, x):
        return torch.tanh(self.lin(x))


class TwoPart(nn.Module):
    """A block with two sub-layers, like a Mixer layer: t = T(x), c = C(x + t)."""

    def __init__(self, dim: int = DIM) -> None:
        super().__init__()
        self.t = nn.Linear(dim, dim)
        self.c = nn.Linear(dim, dim)

    def parts(self, x):
        t = torch.tanh(self.t(x))
        return t, torch.tanh(self.c(x + t))

    def forward(self, x):
        t, c = self.parts(x)
        return t + c


def Stack(*args, **kwargs) -> ResidualStack:
    """A ResidualStack in float64 (the test blocks are float64; scalars follow)."""
    return ResidualStack(*args, **kwargs).double()


def make_blocks(n: int, seed: int = 0, cls=Branch, dtype=torch.float64) -> list[nn.Module]:
    torch.manual_seed(seed)
    return [cls().to(dtype) for _ in range(n)]


def set_scalars(stack: ResidualStack, name: str, values) -> None:
    with torch.no_grad():
        for p, v in zip(getattr(stack, name), values):
            p.fill_(float(v))


def x_input(batch: int = 3, seed: int = 1) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(batch, DIM, generator=g, dtype=torch.float64)


# ---------------------------------------------------------------------------
# The four paper rules (Eq. 1-2, Algorithm 1)
# ---------------------------------------------------------------------------


def test_resnet_rule_equals_hand_written_residual_stack():
    blocks = make_blocks(4)
    x = x_input()
    ref = x
    for f in blocks:
        ref = ref + f(ref)
    assert torch.equal(Stack(blocks, "resnet")(x), ref)


def test_plain_rule_is_the_composition():
    blocks = make_blocks(4)
    x = x_input()
    ref = x
    for f in blocks:
        ref = f(ref)
    assert torch.equal(Stack(blocks, "plain")(x), ref)


def test_acn_rule_is_sum_of_all_layer_outputs():
    # Eq. 1: x_i = f_i(x_{i-1}), y = sum_{i=0..L} f_i(x_{i-1}) with f_0 = x_0
    blocks = make_blocks(4)
    x = x_input()
    outputs, h = [x], x
    for f in blocks:
        h = f(h)
        outputs.append(h)
    ref = outputs[0]
    for o in outputs[1:]:
        ref = ref + o
    assert torch.equal(Stack(blocks, "acn")(x), ref)


def test_hacn_with_a0_is_acn_and_with_a1_is_resnet_bit_for_bit():
    # a = 1: s_i = s_{i-1} + h_i and x_i = h_i + x_{i-1} start at x_0, so s_i == x_i at
    # every depth: H-ACN(a=1) is exactly the ResNet, output and exits. a = 0 is the ACN.
    blocks = make_blocks(5)
    x = x_input()
    res_y, res_exits = Stack(blocks, "resnet")(x, return_exits=True)
    acn_y, acn_exits = Stack(blocks, "acn")(x, return_exits=True)
    for value, (ref_y, ref_exits) in ((1.0, (res_y, res_exits)), (0.0, (acn_y, acn_exits))):
        y, exits = Stack(blocks, "hacn", alpha_init=value)(x, return_exits=True)
        assert torch.equal(y, ref_y)
        assert all(torch.equal(a, b) for a, b in zip(exits, ref_exits))
    # and the two are genuinely different networks
    assert not torch.allclose(res_y, acn_y)


def test_algorithm1_against_hand_unrolled_three_layers():
    f1, f2, f3 = make_blocks(3, seed=3)
    a1, a2, a3 = 0.3, -0.7, 0.9
    stack = Stack([f1, f2, f3], "hacn")
    set_scalars(stack, "alpha", [a1, a2, a3])
    x0 = x_input()
    # Algorithm 1 unrolled by hand
    h1 = f1(x0)
    x1 = h1 + a1 * x0
    h2 = f2(x1)
    x2 = h2 + a2 * x1
    h3 = f3(x2)
    y = x0 + h1 + h2 + h3
    torch.testing.assert_close(stack(x0), y, rtol=0, atol=1e-14)
    # Eq. 5: the input of layer 3 expanded over earlier outputs, c_{0->3} = a2 a1, c_{1->3} = a2
    torch.testing.assert_close(x2, h2 + a2 * h1 + a2 * a1 * x0, rtol=0, atol=1e-14)


def test_code_gpt_gate_is_one_minus_a():
    blocks = make_blocks(4)
    x = x_input()
    # a = 0 -> weight 1 - a = 1: the ResNet; a = 1 -> weight 0: the ACN (training starts there)
    assert torch.equal(Stack(blocks, "hacn_code_gpt", alpha_init=0.0)(x), Stack(blocks, "resnet")(x))
    assert torch.equal(Stack(blocks, "hacn_code_gpt", alpha_init=1.0)(x), Stack(blocks, "acn")(x))
    stack = Stack(blocks, "hacn_code_gpt")
    a = torch.stack([p.detach() for p in stack.alpha]).float()
    torch.testing.assert_close(stack.residual_weights(), 1 - a)
    assert (a - 1).abs().max() < 0.05  # initialised near 1


def test_code_mixer_and_vit_rules_against_hand_unrolled():
    blocks = make_blocks(2, seed=4, cls=TwoPart)
    x0 = x_input()
    a = [0.4, 0.8]
    mixer = Stack(blocks, "hacn_code_mixer")
    vit = Stack(blocks, "hacn_code_vit")
    set_scalars(mixer, "alpha", a)
    set_scalars(vit, "alpha", a)
    # public Mixer code: s += c + a t, x = c + a (t + x)
    t1, c1 = blocks[0].parts(x0)
    x1 = c1 + a[0] * (t1 + x0)
    t2, c2 = blocks[1].parts(x1)
    torch.testing.assert_close(mixer(x0), x0 + (c1 + a[0] * t1) + (c2 + a[1] * t2), rtol=0, atol=1e-14)
    # public ViT code: x' = x + t (attention residual kept), x = c + a x', s += c
    t1, c1 = blocks[0].parts(x0)
    x1 = c1 + a[0] * (x0 + t1)
    t2, c2 = blocks[1].parts(x1)
    torch.testing.assert_close(vit(x0), x0 + c1 + c2, rtol=0, atol=1e-14)
    # at a = 1 the Mixer code rule is the standard residual stack of f = t + c
    ones = Stack(blocks, "hacn_code_mixer", alpha_init=1.0)
    torch.testing.assert_close(ones(x0), Stack(blocks, "resnet")(x0), rtol=0, atol=1e-13)


def test_two_part_rules_need_parts():
    with pytest.raises(ValueError, match="parts"):
        Stack(make_blocks(2), "hacn_code_mixer")


# ---------------------------------------------------------------------------
# Scaled-residual baselines
# ---------------------------------------------------------------------------


def test_rezero_is_identity_at_init_and_scales_the_branch():
    blocks = make_blocks(4)
    x = x_input()
    stack = Stack(blocks, "rezero")
    assert torch.equal(stack(x), x)
    set_scalars(stack, "alpha", [0.5] * 4)
    ref = x
    for f in blocks:
        ref = ref + 0.5 * f(ref)
    torch.testing.assert_close(stack(x), ref, rtol=0, atol=1e-14)


def test_laurel_two_scalars():
    blocks = make_blocks(3)
    x = x_input()
    stack = Stack(blocks, "laurel")
    assert torch.equal(stack(x), Stack(blocks, "resnet")(x))  # a = b = 1 at init
    a, b = [0.5, 2.0, -1.0], [0.9, 0.1, 1.5]
    set_scalars(stack, "alpha", a)
    set_scalars(stack, "beta", b)
    ref = x
    for f, ai, bi in zip(blocks, a, b):
        ref = ai * f(ref) + bi * ref
    torch.testing.assert_close(stack(x), ref, rtol=0, atol=1e-14)


@pytest.mark.parametrize("base", ["plain", "resnet"])
def test_denseformer_at_init_equals_its_base_stream(base):
    blocks = make_blocks(4)
    x = x_input()
    dense = Stack(blocks, "denseformer", dense_base=base)
    y, exits = dense(x, return_exits=True)
    ref_y, ref_exits = Stack(blocks, base)(x, return_exits=True)
    assert torch.equal(y, ref_y)
    assert all(torch.equal(a, b) for a, b in zip(exits, ref_exits))
    # O(L^2) weights: L(L+3)/2
    block_params = sum(p.numel() for b in blocks for p in b.parameters())
    assert sum(p.numel() for p in dense.parameters()) - block_params == 4 * 7 // 2


def test_denseformer_weighted_average_of_all_previous_outputs():
    f1, f2 = make_blocks(2)
    x = x_input()
    stack = Stack([f1, f2], "denseformer", dense_base="resnet")
    with torch.no_grad():
        stack.dwa[0].copy_(torch.tensor([0.2, 0.7], dtype=torch.float64))
        stack.dwa[1].copy_(torch.tensor([-0.1, 0.3, 0.6], dtype=torch.float64))
    X0 = x
    X1 = X0 + f1(X0)
    Y1 = 0.2 * X0 + 0.7 * X1
    X2 = Y1 + f2(Y1)
    Y2 = -0.1 * X0 + 0.3 * X1 + 0.6 * X2
    torch.testing.assert_close(stack(x), Y2, rtol=0, atol=1e-14)


def test_gated_rule_uses_gated_residual():
    blocks = make_blocks(3)
    x = x_input()
    stack = Stack(blocks, "gated")
    assert torch.equal(stack(x), Stack(blocks, "resnet")(x))  # k = 1, g = ReLU: a ResNet
    k = [2.0, -1.0, 0.5]
    set_scalars(stack, "k", k)
    ref = x
    for f, ki in zip(blocks, k):
        ref = gate_value(torch.tensor(ki), "relu") * f(ref) + ref
    torch.testing.assert_close(stack(x), ref, rtol=0, atol=1e-14)
    roles = {name: role for name, _, role in named_parameter_roles(stack)}
    assert roles["k.0"] == "gate"


# ---------------------------------------------------------------------------
# Direct Layer Connectivity Matrix (Eq. 3-5, Appendix C, Fig. 8)
# ---------------------------------------------------------------------------

L4 = 4
# Fig. 8 for L = 4, rows = sources 0..4, columns = targets 0..4
FIG8_FFN = [[0, 1, 0, 0, 0], [0, 0, 1, 0, 0], [0, 0, 0, 1, 0], [0, 0, 0, 0, 1], [0, 0, 0, 0, 0]]
FIG8_RES = [[0, 1, 1, 1, 1], [0, 0, 1, 1, 1], [0, 0, 0, 1, 1], [0, 0, 0, 0, 1], [0, 0, 0, 0, 0]]
FIG8_ACN = [[0, 1, 0, 0, 1], [0, 0, 1, 0, 1], [0, 0, 0, 1, 1], [0, 0, 0, 0, 1], [0, 0, 0, 0, 0]]


@pytest.mark.parametrize("rule,expected", [("plain", FIG8_FFN), ("resnet", FIG8_RES), ("acn", FIG8_ACN)])
def test_connectivity_matches_appendix_c_figure8(rule, expected):
    expected = torch.tensor(expected, dtype=torch.float64)
    assert torch.equal(connectivity_matrix(rule, L4, output="figure"), expected)
    assert torch.equal(Stack(make_blocks(L4), rule).connectivity("figure"), expected)


def test_connectivity_layer_inputs_and_readout_column():
    # layer inputs: the ACN's are those of a plain network; only the readout differs
    assert torch.equal(connectivity_matrix("acn", L4), connectivity_matrix("plain", L4))
    acn_out = connectivity_matrix("acn", L4, output="column")[:, -1]
    ffn_out = connectivity_matrix("plain", L4, output="column")[:, -1]
    assert torch.equal(acn_out, torch.ones(L4 + 1, dtype=torch.float64))
    assert torch.equal(ffn_out, torch.tensor([0, 0, 0, 0, 1], dtype=torch.float64))


def eq4_by_hand(a: list[float]) -> torch.Tensor:
    n = len(a)
    c = torch.zeros(n + 1, n + 1, dtype=torch.float64)
    for j in range(1, n + 1):
        for i in range(j):
            c[i, j] = math.prod(a[l - 1] for l in range(i + 1, j))  # a_l, l = i+1..j-1
    return c


def test_hacn_connectivity_is_product_of_eq4():
    a = [0.31, -0.5, 0.77, 1.2, 0.05]
    expected = eq4_by_hand(a)
    torch.testing.assert_close(hacn_connectivity(a), expected, rtol=0, atol=1e-15)
    torch.testing.assert_close(connectivity_matrix("hacn", alphas=a), expected, rtol=0, atol=1e-15)
    stack = Stack(make_blocks(5), "hacn")
    set_scalars(stack, "alpha", a)
    torch.testing.assert_close(stack.connectivity(), expected, rtol=0, atol=1e-15)
    # Eq. 5 example: column 4 of L = 4 is [a3 a2 a1, a3 a2, a3, 1]
    c = hacn_connectivity(a[:4])
    a1, a2, a3 = a[:3]
    torch.testing.assert_close(c[:4, 4], torch.tensor([a3 * a2 * a1, a3 * a2, a3, 1.0], dtype=torch.float64))
    # a = 1: the ResNet's matrix, a = 0: the FFN's
    assert torch.equal(hacn_connectivity([1.0] * 4), connectivity_matrix("resnet", 4))
    assert torch.equal(hacn_connectivity([0.0] * 4), connectivity_matrix("plain", 4))


def test_connectivity_frame_labels_sources_targets_and_readout():
    a = [0.3, 0.5, 0.7]
    frame = connectivity_frame(hacn_connectivity(a, output="column"))
    assert frame.index.name == "source i" and frame.columns.name == "target j"
    assert list(frame.index) == [0, 1, 2, 3] and list(frame.columns) == [0, 1, 2, 3, "out"]
    # .loc[i, j] is c_{i->j} (Eq. 4): c_{0->3} = a_1 a_2, the readout sums every h_i once
    assert frame.loc[0, 3] == a[0] * a[1] and frame.loc[2, 3] == 1.0 and frame.loc[3, 0] == 0.0
    assert list(frame["out"]) == [1.0] * 4
    square = connectivity_frame(connectivity_matrix("resnet", 3))
    assert list(square.columns) == [0, 1, 2, 3]
    with pytest.raises(ValueError, match=r"C: expected shape \(L\+1, L\+1\) or \(L\+1, L\+2\)"):
        connectivity_frame(torch.zeros(3, 5))


def test_connectivity_heatmap_masks_impossible_entries_and_draws_readout():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2)
    try:
        connectivity_heatmap(ax1, connectivity_matrix("resnet", 3), title="ResNet")
        connectivity_heatmap(ax2, connectivity_matrix("acn", 3, output="column"), annot=False)
        # annotated cells are the unmasked ones: i < j, 6 of the 4 x 4 ResNet matrix, all of value 1
        texts = [t.get_text() for t in ax1.texts]
        assert texts == ["1"] * 6 and ax1.get_title() == "ResNet"
        assert len(ax2.texts) == 0
        # ACN with the out column: 6 layer links (1 on the superdiagonal, 0 above) + 4 readout cells
        mesh = ax2.collections[0]
        assert mesh.get_array().count() == 6 + 4
        assert [t.get_text() for t in ax2.get_xticklabels()] == ["0", "1", "2", "3", "out"]
        # labels: two decimals without padding, blank for a nonzero value that rounds to 0
        ax2.clear()
        connectivity_heatmap(ax2, hacn_connectivity([0.25, 0.001, -0.5]))
        # row-major unmasked cells: (0,1) (0,2) (0,3) (1,2) (1,3) (2,3) = 1, a1, a1 a2, 1, a2, 1
        assert [t.get_text() for t in ax2.texts] == ["1", ".25", "", "1", "", "1"]
    finally:
        plt.close(fig)


def linear_blocks(n: int, seed: int = 5) -> list[nn.Module]:
    torch.manual_seed(seed)
    return [nn.Linear(DIM, DIM, dtype=torch.float64) for _ in range(n)]


def randomise_scalars(stack: ResidualStack) -> None:
    g = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for p in stack.parameters():
            if p.dim() <= 1 and p.numel() <= 8 and not any(p is q for b in stack.blocks for q in b.parameters()):
                p.copy_(torch.rand(p.shape, generator=g) * 1.5 - 0.25)


@pytest.mark.parametrize("rule", SINGLE_RULES)
def test_connectivity_reconstructs_layer_inputs_and_output(rule):
    # Eq. 3: input_k = sum_i C[i][k] h_i, and the readout y = sum_i C[i][out] h_i, checked on
    # linear blocks with every scalar of the rule moved off its initial value.
    n = 4
    stack = Stack(linear_blocks(n), rule)
    randomise_scalars(stack)
    tr = stack.trace(x_input())
    c = stack.connectivity("column")
    h = torch.stack(tr.outputs)  # (L+1, batch, dim): h_0 = x_0, h_i = f_i(x_{i-1})
    for k in range(1, n + 1):
        torch.testing.assert_close(tr.inputs[k - 1], torch.einsum("i,i...->...", c[:, k], h), rtol=0, atol=1e-12)
    torch.testing.assert_close(tr.output, torch.einsum("i,i...->...", c[:, -1], h), rtol=0, atol=1e-12)


@pytest.mark.parametrize("rule", SINGLE_RULES)
def test_forward_from_connectivity_rebuilds_the_network(rule):
    # Eq. 3 as a forward pass: h_k = f_k(sum_i C[i][k] h_i), y = sum_i C[i][out] h_i gives the
    # rule's own output for nonlinear blocks, with the rule's scalars moved off their init.
    blocks = make_blocks(4, seed=2)
    stack = Stack(blocks, rule)
    randomise_scalars(stack)
    x = x_input()
    torch.testing.assert_close(
        forward_from_connectivity(stack.connectivity("column"), blocks, x), stack(x), rtol=0, atol=1e-12
    )


def test_forward_from_connectivity_bad_input():
    blocks = make_blocks(3)
    with pytest.raises(ValueError, match=r"needs the readout column \(output='column'"):
        forward_from_connectivity(connectivity_matrix("acn", 3), blocks, x_input())
    with pytest.raises(ValueError, match="C describes 3 layers but 2 blocks"):
        forward_from_connectivity(connectivity_matrix("acn", 3, output="column"), blocks[:2], x_input())


def test_connectivity_of_two_part_rule_is_refused():
    with pytest.raises(ValueError, match="single-output"):
        Stack(make_blocks(2, cls=TwoPart), "hacn_code_mixer").connectivity()


# ---------------------------------------------------------------------------
# Sec. 4 statistics
# ---------------------------------------------------------------------------


def test_total_connectivity_strength_known_values():
    assert total_connectivity_strength(torch.zeros(16)) == 0.0  # ACN
    assert total_connectivity_strength(torch.ones(16)) == pytest.approx(1.0)  # ResNet
    assert total_connectivity_strength([3.0, 4.0]) == pytest.approx(5 / math.sqrt(2))
    stack = Stack(make_blocks(4), "hacn", alpha_init=0.5)
    assert total_connectivity_strength(stack) == pytest.approx(0.5)


def test_convergence_distance_known_values():
    history = [[0.0, 0.0], [3.0, 5.0], [1.0, 1.0]]
    d = convergence_distance(history)
    torch.testing.assert_close(d, torch.tensor([math.sqrt(2), math.sqrt(4 + 16), 0.0], dtype=torch.float64))


def test_pearson_and_seed_correlation():
    a = torch.tensor([0.1, 0.4, 0.2, 0.9, 0.3])
    assert pearson_correlation(a, 2 * a + 1) == pytest.approx(1.0)
    assert pearson_correlation(a, -a) == pytest.approx(-1.0)
    b = torch.tensor([1.0, 0.0, 1.0, 0.0, 1.0])
    # by hand: r = cov / (sd_a sd_b)
    am, bm = a - a.mean(), b - b.mean()
    ref = float((am * bm).sum() / (am.norm() * bm.norm()))
    assert pearson_correlation(a, b) == pytest.approx(ref)
    runs = torch.stack([a, 2 * a + 1, -a])
    assert seed_correlation(runs) == pytest.approx((1 - 1 - 1) / 3)
    assert pairwise_pearson(runs).shape == (3, 3)
    with pytest.raises(ValueError, match="constant"):
        pearson_correlation([1.0, 1.0, 1.0], a[:3])


def test_layerwise_accuracy_counts_per_exit():
    logits = torch.tensor([[[1.0, 0.0], [1.0, 0.0]], [[0.0, 1.0], [1.0, 0.0]]])  # 2 exits, batch 2
    targets = torch.tensor([1, 0])
    torch.testing.assert_close(layerwise_accuracy(logits, targets), torch.tensor([0.5, 1.0], dtype=torch.float64))


# ---------------------------------------------------------------------------
# Initialisation (Sec. 3.1, Appendix D Table 6)
# ---------------------------------------------------------------------------


def test_normal_init_has_stated_mean_and_std():
    g = torch.Generator().manual_seed(0)
    a = init_alphas(20000, AlphaInit(mu=0.25, sigma=0.005), generator=g)
    assert a.mean().item() == pytest.approx(0.25, abs=4 * 0.005 / math.sqrt(20000))
    assert a.std().item() == pytest.approx(0.005, rel=0.03)  # sigma is a standard deviation


def test_default_hacn_init_is_paper_value():
    stack = Stack(make_blocks(16), "hacn")
    a = stack.residual_weights()
    assert a.shape == (16,)
    assert (a - 0.25).abs().max() < 5 * 0.005


def test_half_layers_exp_decay_and_constant_inits():
    half = init_alphas(6, AlphaInit("half_layers", sigma=0.0))
    assert half.tolist() == pytest.approx([0.4, 0.4, 0.4, 0.15, 0.15, 0.15])
    decay = init_alphas(5, AlphaInit("exp_decay", sigma=0.0))
    assert decay[0].item() == pytest.approx(0.25) and decay[-1].item() == pytest.approx(0.1)
    ratios = decay[1:] / decay[:-1]
    torch.testing.assert_close(ratios, torch.full((4,), (0.1 / 0.25) ** 0.25))  # exponential in depth
    assert init_alphas(3, 0.7).tolist() == pytest.approx([0.7] * 3)
    g = torch.Generator().manual_seed(1)
    noisy_half = init_alphas(4000, "half_layers", generator=g)
    assert noisy_half[:2000].mean().item() == pytest.approx(0.4, abs=1e-3)
    assert noisy_half[2000:].std().item() == pytest.approx(0.005, rel=0.1)
    # reproducible with a generator
    assert torch.equal(
        init_alphas(8, generator=torch.Generator().manual_seed(3)),
        init_alphas(8, generator=torch.Generator().manual_seed(3)),
    )


def test_fixed_residual_weights_are_buffers():
    stack = Stack(make_blocks(3), "hacn", alpha_init=0.3, trainable=False)
    assert "alpha" in dict(stack.named_buffers())
    assert not any(n.startswith("alpha") for n, _ in stack.named_parameters())
    torch.testing.assert_close(stack.residual_weights(), torch.full((3,), 0.3))


# ---------------------------------------------------------------------------
# Gradients and roles
# ---------------------------------------------------------------------------


def test_gradients_flow_to_alphas_and_match_finite_differences():
    n = 4
    stack = Stack(make_blocks(n), "hacn")
    x = x_input()
    stack(x).square().sum().backward()
    # a_L never reaches y (x_L is unused, Algorithm 1): no gradient at all
    assert stack.alpha[-1].grad is None
    grads = torch.stack([p.grad for p in stack.alpha[:-1]])
    assert (grads.abs() > 1e-8).all()
    # finite-difference check of dy/da_2
    eps = 1e-6
    with torch.no_grad():
        stack.alpha[1] += eps
        up = stack(x).square().sum()
        stack.alpha[1] -= 2 * eps
        down = stack(x).square().sum()
        stack.alpha[1] += eps
    assert grads[1].item() == pytest.approx(((up - down) / (2 * eps)).item(), rel=1e-6)


@pytest.mark.parametrize("rule", ["rezero", "laurel", "denseformer", "gated", "hacn_code_gpt"])
def test_gradients_reach_baseline_scalars(rule):
    stack = Stack(make_blocks(3), rule)
    stack(x_input()).square().sum().backward()
    tagged = [(name, p) for name, p, role in named_parameter_roles(stack) if role in ("mixing", "gate")]
    assert tagged
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for _, p in tagged)


def test_alphas_are_tagged_mixing():
    stack = Stack(make_blocks(3), "hacn")
    roles = {name: role for name, _, role in named_parameter_roles(stack)}
    assert [roles[f"alpha.{i}"] for i in range(3)] == ["mixing"] * 3
    assert roles["blocks.0.lin.weight"] == "weight"


# ---------------------------------------------------------------------------
# Layer-wise exits (Sec. 3.1)
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("rule", RULES)
def test_exits_equal_truncated_networks(rule):
    cls = TwoPart if rule in TWO_PART_RULES else Branch
    blocks = make_blocks(4, cls=cls)
    stack = Stack(blocks, rule)
    randomise_scalars(stack)
    x = x_input()
    y, exits = stack(x, return_exits=True)
    assert len(exits) == 5 and torch.equal(exits[0], x) and torch.equal(exits[-1], y)
    for i, e in enumerate(exits):
        assert torch.equal(e, stack(x, num_layers=i))


def test_hacn_exits_equal_separately_built_truncated_stacks():
    blocks = make_blocks(4)
    stack = Stack(blocks, "hacn")
    a = stack.residual_weights().tolist()
    x = x_input()
    _, exits = stack(x, return_exits=True)
    for i in range(1, 5):
        short = Stack(blocks[:i], "hacn")
        set_scalars(short, "alpha", a[:i])
        # the truncated H-ACN is the sum of its own layer outputs: exit i = x_0 + h_1 + ... + h_i
        assert torch.equal(exits[i], short(x))
    res_exits = Stack(blocks, "resnet")(x, return_exits=True)[1]
    for i in range(1, 5):
        assert torch.equal(res_exits[i], Stack(blocks[:i], "resnet")(x))


# ---------------------------------------------------------------------------
# Depth-adaptive LayerNorm (Eq. 7)
# ---------------------------------------------------------------------------


def test_depth_layernorm_forms_at_init_and_their_gradients():
    x = x_input()
    depth = 3
    ln = nn.LayerNorm(DIM, dtype=torch.float64)
    paper = DepthLayerNorm(DIM, depth, "paper").double()
    code = DepthLayerNorm(DIM, depth, "code").double()
    torch.testing.assert_close(paper(x), (1 + 0.05 * depth) * ln(x))
    torch.testing.assert_close(code(x), (1 + 0.05 * depth) * ln(x))
    # d/ds (1 + l s) = l: the paper's strength receives l times the code's per-layer gain gradient
    g = torch.randn_like(x)
    (paper(x) * g).sum().backward()
    (code(x) * g).sum().backward()
    torch.testing.assert_close(paper.gain.strength.grad, depth * code.gain.gain.grad)
    roles = {name: role for name, _, role in named_parameter_roles(paper)}
    assert roles["gain.strength"] == "norm_gain"


def test_depth_gain_shared_by_two_norms_is_one_parameter():
    gain = DepthGain(2, "paper")
    n1, n2 = DepthLayerNorm(DIM, gain=gain), DepthLayerNorm(DIM, gain=gain)
    shared = [p for p in nn.ModuleList([n1, n2]).parameters() if p.dim() == 0]
    assert len(shared) == 1


# ---------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------


def test_bad_names_error_with_field_and_allowed_values():
    blocks = make_blocks(2)
    with pytest.raises(ValueError, match=r"rule='hacm' is not valid; allowed: plain, resnet, acn, hacn"):
        Stack(blocks, "hacm")
    allowed_inits = "allowed: normal, half_layers, exp_decay, constant"
    with pytest.raises(ValueError, match=rf"alpha_init.strategy='gauss'.*{allowed_inits}"):
        AlphaInit("gauss")
    with pytest.raises(ValueError, match=r"alpha_init='uniform'.*allowed: normal"):
        Stack(blocks, "hacn", alpha_init="uniform")
    with pytest.raises(ValueError, match=r"output='matrix'.*allowed: none, column, figure"):
        connectivity_matrix("resnet", 3, output="matrix")
    with pytest.raises(ValueError, match=r"gate_fn='tanh'.*allowed: relu"):
        Stack(blocks, "gated", gate_fn="tanh")
    with pytest.raises(ValueError, match=r"dense_base='acn'.*allowed: resnet, plain"):
        Stack(blocks, "denseformer", dense_base="acn")
    with pytest.raises(ValueError, match=r"depth_ln='both'.*allowed: paper, code"):
        DepthLayerNorm(DIM, 1, "both")
    with pytest.raises(ValueError, match=r"alpha_init is only used by the rules hacn"):
        Stack(blocks, "resnet", alpha_init=0.5)
    with pytest.raises(ValueError, match=r"alpha_init.sigma"):
        AlphaInit(sigma=-1.0)
    with pytest.raises(ValueError, match=r"num_layers=3 must be between 0 and 2"):
        Stack(blocks, "hacn")(x_input(), num_layers=3)
    with pytest.raises(ValueError, match=r"rule='hacn' needs the residual weights"):
        connectivity_matrix("hacn", 3)
    with pytest.raises(ValueError, match=r"rule='rezero' has no Eq. 2 residual weights"):
        Stack(blocks, "rezero").residual_weights()
