"""Tests of hacn_core.models.mixer: the MLP-Mixer of H-ACN Appendix A with a pluggable residual
rule, its layer-wise logits (Sec. 3.1) and Fig. 7's DenseNet-style mixer."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from hacn_core.hacn.connectivity import DepthGain, evaluate_layerwise
from hacn_core.models.mixer import (
    DenseMixer,
    DenseMixerConfig,
    MixerConfig,
    MLPMixer,
    num_parameters,
)
from hacn_core.engine.roles import named_parameter_roles

# A small Mixer for behaviour tests (Appendix A's is used where its size matters)
SMALL = MixerConfig(image_size=8, in_channels=2, num_classes=3, patch_size=2, hidden_dim=8,
                    num_layers=3, token_mlp_dim=6, channel_mlp_dim=12)


def images(batch=2, channels=2, size=8, seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(batch, channels, size, size, generator=g, dtype=dtype)


def small(**overrides) -> MLPMixer:
    torch.manual_seed(0)
    return MLPMixer(SMALL, **overrides).double()


def appendix_a_parameter_count(extra_per_layer: int = 0) -> int:
    """Parameters of Appendix A's residual Mixer, counted by hand from the stated sizes."""
    d, tokens, ds, dc, layers, patch, classes = 128, 64, 64, 512, 16, 4, 10
    embed = 3 * patch * patch * d + d
    token_mlp = tokens * ds + ds + ds * tokens + tokens
    channel_mlp = d * dc + dc + dc * d + d
    norms = 2 * 2 * d
    head = 2 * d + d * classes + classes
    return embed + layers * (token_mlp + channel_mlp + norms + extra_per_layer) + head


def test_appendix_a_defaults_shape_and_parameter_count():
    cfg = MixerConfig()
    sizes = (cfg.num_layers, cfg.hidden_dim, cfg.patch_size, cfg.channel_mlp_dim, cfg.token_mlp_dim)
    assert sizes == (16, 128, 4, 512, 64)
    assert cfg.num_patches == 64
    res = MLPMixer(rule="resnet")
    hacn = MLPMixer()  # H-ACN with DepthLN (auto): one a_i and one DepthLN strength per layer
    assert num_parameters(res) == appendix_a_parameter_count() == 2_256_522
    assert num_parameters(hacn) == appendix_a_parameter_count(extra_per_layer=2)
    x = torch.randn(2, 3, 32, 32)
    assert hacn(x).shape == (2, 10)
    assert hacn.layerwise_logits(x).shape == (17, 2, 10)


def test_fashion_mnist_geometry():
    m = MLPMixer(image_size=28, in_channels=1, num_layers=2)
    assert m.config.num_patches == 49
    assert m(torch.randn(3, 1, 28, 28)).shape == (3, 10)


def test_resnet_rule_is_the_standard_mixer_layer():
    m = small(rule="resnet")
    x = images()
    z = m.embed(x)
    for blk in m.stack.blocks:  # standard Mixer layer (Tolstikhin et al.): two pre-norm residual sub-layers
        z = z + blk.token.mlp(blk.token.norm(z).transpose(1, 2)).transpose(1, 2)
        z = z + blk.channel.mlp(blk.channel.norm(z))
    logits = m.head.fc(m.head.norm(z).mean(dim=1))
    torch.testing.assert_close(m(x), logits, rtol=0, atol=1e-12)


def test_hacn_block_layer_is_token_plus_channel_output():
    # f_i = t + c, x_i = f_i + a_i x_{i-1}, y = sum of f_i plus the embedding
    m = small(rule="hacn", depth_ln="none")
    a = m.stack.residual_weights().double()
    x = images()
    z = m.embed(x)
    total, stream = z, z
    for i, blk in enumerate(m.stack.blocks):
        t = blk.token(stream)
        c = blk.channel(stream + t)
        total = total + (t + c)
        stream = (t + c) + a[i] * stream
    torch.testing.assert_close(m(x), m.head(total), rtol=0, atol=1e-12)


def copy_block_weights_to_sublayers(block_model: MLPMixer, sub_model: MLPMixer) -> None:
    with torch.no_grad():
        sub_model.embed.load_state_dict(block_model.embed.state_dict())
        sub_model.head.load_state_dict(block_model.head.state_dict())
        for i, blk in enumerate(block_model.stack.blocks):
            sub_model.stack.blocks[2 * i].load_state_dict(blk.token.state_dict())
            sub_model.stack.blocks[2 * i + 1].load_state_dict(blk.channel.state_dict())


def test_layer_units_agree_for_resnet_and_code_rule_agrees_at_a1():
    x = images()
    block = small(rule="resnet")
    sub = small(rule="resnet", layer_unit="sublayer")
    assert len(sub.stack.blocks) == 2 * len(block.stack.blocks)
    copy_block_weights_to_sublayers(block, sub)
    torch.testing.assert_close(sub(x), block(x), rtol=0, atol=1e-12)
    code = small(rule="hacn_code_mixer", alpha_init=1.0, depth_ln="none")
    code.load_state_dict(block.state_dict(), strict=False)
    torch.testing.assert_close(code(x), block(x), rtol=0, atol=1e-12)


@pytest.mark.parametrize("rule", ["hacn", "acn", "resnet", "plain", "hacn_code_mixer", "denseformer"])
def test_layerwise_logits_equal_truncated_networks(rule):
    m = small(rule=rule)
    x = images()
    logits = m.layerwise_logits(x)
    assert logits.shape == (4, 2, 3)
    for i in range(4):
        torch.testing.assert_close(logits[i], m(x, num_layers=i), rtol=0, atol=1e-12)
    torch.testing.assert_close(logits[-1], m(x), rtol=0, atol=1e-12)


def test_evaluate_layerwise_matches_per_exit_argmax():
    m = small()
    x = images(batch=6)
    y = torch.tensor([0, 1, 2, 0, 1, 2])
    acc = evaluate_layerwise(m, [(x[:3], y[:3]), (x[3:], y[3:])])
    expected = torch.stack([(m(x, num_layers=i).argmax(1) == y).double().mean() for i in range(4)])
    torch.testing.assert_close(acc, expected)


def test_gradients_reach_every_alpha_but_the_last():
    m = small()
    F.cross_entropy(m(images()), torch.tensor([0, 2])).backward()
    alphas = list(m.stack.alpha)
    assert all(p.grad is not None and p.grad.abs() > 0 for p in alphas[:-1])
    assert alphas[-1].grad is None  # x_L is unused by the H-ACN output


def test_depth_ln_auto_and_forms():
    hacn, res = small(rule="hacn"), small(rule="resnet")
    gains = [mod for mod in hacn.modules() if isinstance(mod, DepthGain)]
    assert [g.depth for g in gains] == [1, 2, 3] and all(g.form == "paper" for g in gains)
    assert not any(isinstance(mod, DepthGain) for mod in res.modules())
    roles = [role for _, _, role in named_parameter_roles(hacn)]
    assert roles.count("norm_gain") == 3 and roles.count("mixing") == 3
    code = small(rule="hacn", depth_ln="code")
    values = [float(mod().detach()) for mod in code.modules() if isinstance(mod, DepthGain)]
    assert values == pytest.approx([1.05, 1.10, 1.15])
    # DepthLN scales the layer's two norms by 1 + l s
    blk = hacn.stack.blocks[1]
    z = torch.randn(2, 16, 8, dtype=torch.float64)
    torch.testing.assert_close(blk.token.norm(z), 1.10 * F.layer_norm(z, (8,)), rtol=1e-6, atol=1e-6)


def test_dense_mixer_parameters_and_exits():
    dense = DenseMixer()
    assert DenseMixerConfig().num_layers == 10
    ratio = num_parameters(dense) / num_parameters(MLPMixer(rule="resnet"))
    assert 0.95 < ratio < 1.05  # "comparable parameter count" (footnote 12)
    torch.manual_seed(0)
    d = DenseMixer(image_size=8, in_channels=2, num_classes=3, patch_size=2, hidden_dim=8, num_layers=3,
                   growth=4, token_mlp_dim=6, channel_mlp_dim=12).double()
    x = images()
    logits = d.layerwise_logits(x)
    assert logits.shape == (4, 2, 3)
    torch.testing.assert_close(logits[-1], d(x), rtol=0, atol=1e-12)
    # exit 0: the embedding with every later layer's channels zeroed
    z0 = torch.cat([d.embed(x), torch.zeros(2, 16, 12, dtype=torch.float64)], dim=-1)
    torch.testing.assert_close(logits[0], d.head(z0), rtol=0, atol=1e-12)


def test_config_errors_name_field_and_allowed_values():
    with pytest.raises(ValueError, match=r"MixerConfig.rule='res' is not valid; allowed: plain, resnet"):
        MixerConfig(rule="res")
    with pytest.raises(ValueError, match=r"MixerConfig.layer_unit='token'.*allowed: block, sublayer"):
        MixerConfig(layer_unit="token")
    with pytest.raises(ValueError, match=r"MixerConfig.depth_ln='yes'.*allowed: auto, none, paper, code"):
        MixerConfig(depth_ln="yes")
    with pytest.raises(ValueError, match=r"MixerConfig.image_size=30 is not divisible by MixerConfig.patch_size=4"):
        MixerConfig(image_size=30)
    with pytest.raises(ValueError, match=r"MixerConfig.num_layers=0 must be a positive integer"):
        MixerConfig(num_layers=0)
    with pytest.raises(ValueError, match=r"needs MixerConfig.layer_unit='block'"):
        MixerConfig(rule="hacn_code_mixer", layer_unit="sublayer")
    with pytest.raises(ValueError, match=r"MixerConfig.alpha_init is only used by the rules"):
        MixerConfig(rule="resnet", alpha_init=0.5)
    with pytest.raises(ValueError, match=r"MixerConfig.alpha_init='gauss' is not valid; allowed: normal"):
        MixerConfig(alpha_init="gauss")
    with pytest.raises(ValueError, match=r"DenseMixerConfig.growth=0 must be a positive integer"):
        DenseMixerConfig(growth=0)
