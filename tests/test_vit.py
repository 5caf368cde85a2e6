"""Tests of hacn_core.models.vit: the simple ViT (Beyer et al. 2022) of H-ACN Sec. 3.3 with a
pluggable residual rule, its 2-d sincos position embedding and its layer-wise exits (Sec. 3.1)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from hacn_core.models.mixer import num_parameters
from hacn_core.models.transformer import TransformerBlock
from hacn_core.models.vit import ViT, ViTConfig, sincos_position_embedding_2d

SMALL = ViTConfig(image_size=8, in_channels=2, num_classes=3, patch_size=2, dim=16, num_layers=3, num_heads=2,
                  mlp_dim=24, zero_head=False)


def small(**overrides) -> ViT:
    torch.manual_seed(0)
    return ViT(SMALL, **overrides).double()


def images(batch=2, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(batch, 2, 8, 8, generator=g, dtype=torch.float64)


def vit_s16_parameter_count(extra_per_layer: int = 0) -> int:
    """ViT-S/16 without class token or learned positions (simple ViT), counted by hand."""
    d, mlp, layers, patch, classes = 384, 1536, 12, 16, 1000
    embed = 3 * patch * patch * d + d
    block = (d * 3 * d + 3 * d) + (d * d + d) + (d * mlp + mlp + mlp * d + d) + 2 * 2 * d
    head = 2 * d + d * classes + classes
    return embed + layers * (block + extra_per_layer) + head


def test_beyer_defaults_and_parameter_count():
    cfg = ViTConfig()
    assert (cfg.num_layers, cfg.dim, cfg.num_heads, cfg.mlp_dim, cfg.patch_size, cfg.num_patches) == (
        12, 384, 6, 1536, 16, 196)
    with torch.device("meta"):
        res = ViT(rule="resnet")
        hacn = ViT()
    # ViT-S/16 has 22.05M parameters with a class token and learned positions (76,032 of them)
    assert num_parameters(res) == vit_s16_parameter_count() == 22_050_664 - 197 * 384 - 384
    assert num_parameters(hacn) == vit_s16_parameter_count(extra_per_layer=2)


def test_zero_head_predicts_uniform_logits_at_init():
    torch.manual_seed(0)
    model = ViT(SMALL, zero_head=True).double()
    assert torch.equal(model(images()), torch.zeros(2, 3, dtype=torch.float64))


def test_sincos_embedding():
    emb = sincos_position_embedding_2d(grid=3, dim=8)
    assert emb.shape == (9, 8)
    q = 2
    first = torch.cat([torch.zeros(q), torch.ones(q), torch.zeros(q), torch.ones(q)])
    assert torch.equal(emb[0], first)  # patch (0, 0): sin 0 and cos 0
    # patch index p = 3 y + x: the first half depends on the column x only, the second on the row y only
    grid = emb.view(3, 3, 8)
    assert torch.equal(grid[0, :, :4], grid[2, :, :4]) and torch.equal(grid[:, 0, 4:], grid[:, 1, 4:])
    omega = torch.tensor([1.0, 1e-4])  # temperature^(-j / (q - 1))
    assert torch.allclose(emb[1, :2], torch.sin(omega)) and torch.allclose(emb[3, 4:6], torch.sin(omega))


def test_hacn_with_unit_weights_is_the_resnet_vit_bit_for_bit():
    res = small(rule="resnet", depth_ln="none")
    hacn = small(rule="hacn", alpha_init=1.0, depth_ln="none")
    hacn.load_state_dict(res.state_dict(), strict=False)
    x = images()
    assert torch.equal(hacn(x), res(x))
    assert torch.equal(hacn.layerwise_logits(x), res.layerwise_logits(x))


def test_hacn_with_zero_weights_is_the_acn_vit_bit_for_bit():
    acn = small(rule="acn")
    hacn = small(rule="hacn", alpha_init=0.0)
    hacn.load_state_dict(acn.state_dict(), strict=False)
    x = images()
    assert torch.equal(hacn(x), acn(x))


def test_block_with_residual_is_the_standard_pre_ln_block():
    model = small(rule="resnet", depth_ln="none")
    block = model.stack.blocks[0]
    assert isinstance(block, TransformerBlock)
    x = images()
    z = model.tokens(x)
    att, ff = block.attention, block.feedforward
    u = z + att.attn(att.norm(z))  # x' = x + Attn(LN(x))
    standard = u + ff.mlp(ff.norm(u))  # x' + MLP(LN(x'))
    assert torch.allclose(z + block(z), standard, atol=1e-12)


@pytest.mark.parametrize("rule", ["hacn", "resnet", "acn", "hacn_code_vit"])
def test_exits_shapes_and_truncated_models(rule):
    model = small(rule=rule).eval()
    x = images(batch=3)
    logits = model.layerwise_logits(x)
    assert logits.shape == (SMALL.num_layers + 1, 3, 3)
    for i in range(SMALL.num_layers + 1):
        assert torch.allclose(logits[i], model(x, num_layers=i), rtol=0, atol=1e-12)
    # exit 0 is the embedded patches alone, through the shared head
    assert torch.allclose(logits[0], model.head(model.tokens(x)), rtol=0, atol=1e-12)


def test_code_vit_rule_keeps_the_attention_residual():
    model = small(rule="hacn_code_vit")
    a = model.stack.residual_weights()
    assert torch.allclose(a, torch.full((3,), 0.5), atol=0.05)  # the public code's N(0.5, 0.005)
    # one layer by hand: s_1 = x_0 + c, with c read at x_0 + t
    x0 = model.tokens(images())
    t, c = model.stack.blocks[0].parts(x0)
    assert torch.allclose(model.stack(x0, num_layers=1), x0 + c, atol=1e-12)


def test_sublayer_unit_and_mlp_kinds():
    sub = small(layer_unit="sublayer")
    assert sub.layerwise_logits(images()).shape == (2 * SMALL.num_layers + 1, 2, 3)
    gated = small(mlp="gated", rule="resnet")
    assert gated(images()).shape == (2, 3)
    y = torch.tensor([0, 2])
    F.cross_entropy(gated(images()), y).backward()
    assert all(b.feedforward.mlp.k.grad is not None for b in gated.stack.blocks)


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"dim": 18, "num_heads": 3}, r"ViTConfig.dim=18 must be divisible by 4"),
        ({"dim": 20, "num_heads": 3}, r"ViTConfig.dim=20 is not divisible by ViTConfig.num_heads=3"),
        ({"image_size": 9}, r"ViTConfig.image_size=9 is not divisible by ViTConfig.patch_size=2"),
        ({"rule": "dense"}, r"ViTConfig.rule='dense' is not valid; allowed:"),
        ({"layer_unit": "head"}, r"ViTConfig.layer_unit='head' is not valid; allowed: block, sublayer"),
        ({"dropout": -0.1}, r"ViTConfig.dropout=-0.1 must be in \[0, 1\)"),
        ({"mlp_dim": 0}, r"ViTConfig.mlp_dim=0 must be a positive integer"),
    ],
)
def test_bad_configs_fail_clearly(overrides, message):
    with pytest.raises(ValueError, match=message):
        ViTConfig(**{**SMALL.__dict__, **overrides})


def test_bad_images_fail_clearly():
    with pytest.raises(ValueError, match=r"images: expected \(batch, 2, 8, 8\), got \(2, 3, 8, 8\)"):
        small()(torch.zeros(2, 3, 8, 8, dtype=torch.float64))
