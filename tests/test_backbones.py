"""The backbones package (``hacn_core.models``): MLP kinds, backbones that take a residual rule and an
MLP kind, and the shared configuration checks.

- MLP kinds (``hacn_core.models.mlp``): ``fixed`` is the Mixer's GELU MLP (H-ACN Appendix A),
  ``adaptive`` AWNN's ``AdaptiveMLP`` (Eq. 14) on token tensors, ``gated`` a Residual Gates
  scalar gate on the MLP (Sec. 2.2).
- ``MLPMixer(rule="hacn", mlp="adaptive")``: an H-ACN Mixer (Eq. 2) whose channel MLPs learn their
  width, trained with the engine's ``fit``, AWNN's ELBO (Eq. 13) and width updates (Algorithm 1).
- The residual rule of the ResNets and FC nets as an argument; the checks written once.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from hacn_core.awnn import (
    AdaptiveMLP,
    ELBOLoss,
    WidthCallback,
    adaptive_mlps,
    discretized_exponential,
    model_widths,
)
from hacn_core.engine.roles import named_parameter_roles
from hacn_core.engine.training import Callback, TrainConfig, fit
from hacn_core.gates import gate_value
from hacn_core.models import MODEL_NAMES, build_model
from hacn_core.models.fc import FC_RULES, FCNetConfig, mnist_fc
from hacn_core.models.mixer import DenseMixer, DenseMixerConfig, MixerConfig, MLPMixer
from hacn_core.models.mlp import MLP_KINDS, GatedMlp, Mlp, make_mlp, mlp_layer
from hacn_core.models.resnet import RESNET_RULES, ResNetCifarConfig, preact_resnet, wide_resnet

TINY = dict(image_size=8, in_channels=2, num_classes=3, patch_size=2, hidden_dim=8, num_layers=2,
            token_mlp_dim=6, channel_mlp_dim=12)


def images(batch: int = 4, seed: int = 0) -> torch.Tensor:
    return torch.randn(batch, 2, 8, 8, generator=torch.Generator().manual_seed(seed))


def same_state(a: nn.Module, b: nn.Module) -> bool:
    """Same parameter and buffer names, in order, with equal values."""
    sa, sb = a.state_dict(), b.state_dict()
    return list(sa) == list(sb) and all(torch.equal(sa[k], sb[k]) for k in sa)


# --- MLP kinds ---------------------------------------------------------------------------------


@pytest.mark.parametrize("dropout", [0.0, 0.1])
def test_fixed_mlp_is_the_mixer_mlp(dropout: float) -> None:
    torch.manual_seed(0)
    mlp = make_mlp("fixed", 8, 12, dropout=dropout)
    torch.manual_seed(0)
    ref = Mlp(8, 12, dropout=dropout)
    assert type(mlp) is Mlp and same_state(mlp, ref)
    # Linear -> GELU -> [Dropout] -> Linear -> [Dropout]: the parameter names of the Mixer's MLP
    second = "3" if dropout else "2"
    assert [n for n, _ in mlp.named_parameters()] == ["0.weight", "0.bias", f"{second}.weight", f"{second}.bias"]
    torch.manual_seed(0)
    fc1, fc2 = nn.Linear(8, 12), nn.Linear(12, 8)  # the same draws in the same order
    assert torch.equal(mlp[0].weight, fc1.weight) and torch.equal(mlp[int(second)].weight, fc2.weight)
    x = torch.randn(3, 5, 8)
    mlp.eval()
    torch.testing.assert_close(mlp(x), fc2(F.gelu(fc1(x))), rtol=0, atol=0)


def test_default_mixer_draws_the_same_parameters_as_before() -> None:
    # The modules of today's residual Mixer, drawn by hand in construction order from one seed
    torch.manual_seed(0)
    model = MLPMixer(rule="resnet", **TINY)
    torch.manual_seed(0)
    tokens, d = 16, 8
    expected: dict[str, torch.Tensor] = {}
    conv = nn.Conv2d(2, d, kernel_size=2, stride=2)
    expected.update({"embed.proj.weight": conv.weight, "embed.proj.bias": conv.bias})
    for i in range(2):
        p = f"stack.blocks.{i}"
        ln1, t1, t2 = nn.LayerNorm(d), nn.Linear(tokens, 6), nn.Linear(6, tokens)
        ln2, c1, c2 = nn.LayerNorm(d), nn.Linear(d, 12), nn.Linear(12, d)
        for name, mod in [("token.norm", ln1), ("token.mlp.0", t1), ("token.mlp.2", t2),
                          ("channel.norm", ln2), ("channel.mlp.0", c1), ("channel.mlp.2", c2)]:
            expected.update({f"{p}.{name}.weight": mod.weight, f"{p}.{name}.bias": mod.bias})
    ln, fc = nn.LayerNorm(d), nn.Linear(d, 3)
    expected.update({"head.norm.weight": ln.weight, "head.norm.bias": ln.bias,
                     "head.fc.weight": fc.weight, "head.fc.bias": fc.bias})
    state = model.state_dict()
    assert sorted(state) == sorted(expected)
    assert all(torch.equal(state[k], expected[k]) for k in expected)
    assert all(type(b.token.mlp) is Mlp and type(b.channel.mlp) is Mlp for b in model.stack.blocks)


def test_adaptive_mlp_on_tokens_is_eq14_per_token() -> None:
    torch.manual_seed(0)
    mlp = make_mlp("adaptive", 8, 12, 5, k=0.9)
    assert isinstance(mlp, AdaptiveMLP) and mlp.widths() == [12]  # hidden is the starting width
    x = torch.randn(3, 7, 8, dtype=torch.float64)  # (B, T, d) tokens
    mlp = mlp.double()
    out = mlp(x)
    assert out.shape == (3, 7, 5)
    # Eq. 14 by hand: h_j = ReLU(W1 x + b1)_j f(j; nu), then the linear output layer
    first, last = mlp.layers
    nu = F.softplus(mlp.raw_rate.detach())[0]
    f = discretized_exponential(torch.arange(12, dtype=torch.float64), nu)
    h = F.relu(x @ first.weight.detach().T + first.bias.detach()) * f
    torch.testing.assert_close(out, h @ last.weight.detach().T + last.bias.detach())
    torch.testing.assert_close(out, mlp(x.reshape(21, 8)).reshape(3, 7, 5))  # token by token


def test_gated_mlp_scales_the_fixed_mlp_by_g_of_k() -> None:
    torch.manual_seed(0)
    fixed = make_mlp("fixed", 8, 12)
    torch.manual_seed(0)
    gated = make_mlp("gated", 8, 12, k_init=0.5, g="relu")
    assert isinstance(gated, GatedMlp)
    missing = gated.load_state_dict(fixed.state_dict(), strict=False).missing_keys
    assert missing == ["k"]  # same names as the fixed MLP, plus the gate
    assert [role for name, _, role in named_parameter_roles(gated) if name == "k"] == ["gate"]
    x = torch.randn(4, 8)
    torch.testing.assert_close(gated(x), 0.5 * fixed(x))
    with torch.no_grad():
        gated.k.fill_(-1.0)
    assert torch.equal(gated(x), torch.zeros(4, 8))  # g = ReLU closes the branch (Sec. 2.2)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: make_mlp("wide", 8, 12), "mlp='wide' is not valid; allowed: fixed, adaptive, gated"),
        (lambda: MixerConfig(mlp="wide"), "MixerConfig.mlp='wide' is not valid; allowed: fixed, adaptive, gated"),
        (lambda: MLPMixer(token_mlp="awnn"),
         "MixerConfig.token_mlp='awnn' is not valid; allowed: fixed, adaptive, gated"),
        (lambda: DenseMixerConfig(mlp="gated"), "DenseMixerConfig.mlp='gated' is not valid; allowed: fixed, adaptive"),
        (lambda: DenseMixerConfig(mlp=mlp_layer("gated")),
         "DenseMixerConfig.mlp.kind='gated' is not valid; allowed: fixed, adaptive"),
        (lambda: MixerConfig(mlp=3), "MixerConfig.mlp=3 is not an MLP layer; allowed: a kind (fixed, adaptive, gated)"),
        (lambda: mlp_layer("fixed", k_init=1.0),
         "mlp='fixed' has no option k_init; allowed: bias, activation, negative_slope"),
        (lambda: make_mlp("adaptive", 8, 12, initial_width=3),
         "mlp='adaptive' has no option initial_width; allowed: n_hidden_layers, activation"),
        (lambda: MixerConfig(mlp="adaptive", dropout=0.1),
         "MixerConfig.dropout=0.1 is not available with MixerConfig.mlp='adaptive'"),
        (lambda: make_mlp("adaptive", 8, 12, dropout=0.1), "dropout=0.1 is not available for mlp='adaptive'"),
    ],
)
def test_bad_mlp_kinds_and_options_name_the_field(build, message: str) -> None:
    assert MLP_KINDS == ("fixed", "adaptive", "gated")
    with pytest.raises(ValueError) as info:
        build()
    assert str(info.value).startswith(message)


# --- Mixers with an MLP kind ---------------------------------------------------------------------


def test_gated_mlps_under_the_resnet_rule_are_a_gated_resnet_per_sublayer() -> None:
    torch.manual_seed(0)
    fixed = MLPMixer(rule="resnet", **TINY).double()
    gated = MLPMixer(rule="resnet", mlp="gated", token_mlp="gated", **TINY).double()
    missing = gated.load_state_dict(fixed.state_dict(), strict=False).missing_keys
    assert sorted(missing) == sorted(f"stack.blocks.{i}.{s}.mlp.k" for i in range(2) for s in ("token", "channel"))
    x = images().double()
    torch.testing.assert_close(gated(x), fixed(x), rtol=0, atol=0)  # k = 1: the standard Mixer
    with torch.no_grad():
        for i, blk in enumerate(gated.stack.blocks):
            blk.token.mlp.k.fill_(0.3 + 0.2 * i)
            blk.channel.mlp.k.fill_(1.4 - 0.5 * i)
    # u = x + g(k) f(x) on every residual sub-layer (Residual Gates Sec. 2.2)
    z = gated.embed(x)
    for blk, ref in zip(gated.stack.blocks, fixed.stack.blocks):
        z = z + gate_value(blk.token.mlp.k) * ref.token.mlp(ref.token.norm(z).transpose(1, 2)).transpose(1, 2)
        z = z + gate_value(blk.channel.mlp.k) * ref.channel.mlp(ref.channel.norm(z))
    torch.testing.assert_close(gated(x), gated.head(z), rtol=0, atol=1e-12)


def test_dense_mixer_takes_adaptive_mlps() -> None:
    torch.manual_seed(0)
    dense = DenseMixer(growth=4, mlp="adaptive", token_mlp="adaptive", **TINY)
    mlps = adaptive_mlps(dense)
    assert len(mlps) == 4 and model_widths(dense) == [6, 12, 6, 12]
    assert [m.config.out_dim for m in mlps] == [16, 4, 16, 4]  # tokens, growth, tokens, growth
    assert dense(images()).shape == (4, 3)


class Probe(Callback):
    """Keeps the optimizer and the widths after every step."""

    def __init__(self) -> None:
        self.optimizer: torch.optim.Optimizer | None = None
        self.widths: list[list[int]] = []

    def on_train_begin(self, state) -> None:
        self.optimizer = state.optimizer

    def on_step_end(self, state) -> None:
        self.widths.append(model_widths(state.model))


def hand_forward(model: MLPMixer, x: torch.Tensor) -> torch.Tensor:
    """H-ACN (Eq. 2) over Mixer layers f = t + c, every MLP evaluated by Eq. 14's plain ops."""

    def mlp(m: nn.Module, h: torch.Tensor) -> torch.Tensor:
        return m.intermediates(h)[0] if isinstance(m, AdaptiveMLP) else m(h)

    a = model.stack.residual_weights()
    z = model.embed(x)
    total, stream = z, z
    for i, blk in enumerate(model.stack.blocks):
        t = mlp(blk.token.mlp, blk.token.norm(stream).transpose(1, 2)).transpose(1, 2)
        c = mlp(blk.channel.mlp, blk.channel.norm(stream + t))
        total = total + t + c
        stream = t + c + a[i] * stream
    return model.head(total)


@pytest.mark.parametrize("token_mlp", ["fixed", "adaptive"])
def test_adaptive_hacn_mixer_trains_with_elbo_and_width_updates(token_mlp: str) -> None:
    torch.manual_seed(0)
    model = MLPMixer(rule="hacn", mlp="adaptive", token_mlp=token_mlp, **TINY)  # the one constructor call
    mlps = adaptive_mlps(model)
    assert len(mlps) == (4 if token_mlp == "adaptive" else 2)
    assert all(type(b.channel.mlp) is AdaptiveMLP for b in model.stack.blocks)
    start = model_widths(model)
    rates0 = [m.raw_rate.detach().clone() for m in mlps]
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(64, 2, 8, 8, generator=g), torch.randint(0, 3, (64,), generator=g)
    elbo = ELBOLoss(model, len(y), sigma_theta=1.0)
    probe = Probe()
    cfg = TrainConfig(epochs=3, batch_size=16, lr=0.1, optimizer="adam", fused=False, device="cpu")
    out = fit(model, (x, y), cfg, loss_fn=elbo, callbacks=[WidthCallback(elbo), probe], progress=False)
    # the rates are trained by the optimizer, and the widths followed them (Algorithm 1, line 5)
    in_optimizer = {id(p) for group in probe.optimizer.param_groups for p in group["params"]}
    assert all(id(m.raw_rate) in in_optimizer for m in mlps)
    assert all(not torch.equal(m.raw_rate.detach(), r0) for m, r0 in zip(mlps, rates0))
    assert len(probe.widths) == 12 and model_widths(model) != start
    assert all(m.widths() == m.target_widths() for m in mlps)
    assert out.curves["awnn/widths"][0] == start and out.curves["awnn/widths"][-1] == model_widths(model)
    assert torch.isfinite(torch.tensor(out.curves["elbo/total"][1:])).all()
    # the trained model is still the composition of its modules under the H-ACN rule
    model.eval()
    xt = images(seed=3)
    with torch.no_grad():
        torch.testing.assert_close(model(xt), hand_forward(model, xt), rtol=1e-5, atol=1e-5)


# --- residual rules of the ResNets and FC nets; the shared checks ------------------------------


def test_resnet_rule_argument_is_the_gated_flag() -> None:
    assert RESNET_RULES == ("resnet", "gated")
    for build in (lambda **kw: preact_resnet(1, **kw), lambda **kw: wide_resnet(10, 1, dropout=0.3, **kw)):
        for rule, gated in (("gated", True), ("resnet", False)):
            torch.manual_seed(0)
            by_rule = build(rule=rule, k_init=0.5, shortcut="zero_pad")
            torch.manual_seed(0)
            by_flag = build(gated=gated, k_init=0.5, shortcut="zero_pad")
            assert same_state(by_rule, by_flag) and by_rule.config == by_flag.config
            assert by_flag.config.rule == rule and by_rule.config.gated is gated
    assert ResNetCifarConfig().rule == "resnet"
    with pytest.raises(ValueError, match=r"rule='hacn' is not valid; allowed: resnet, gated"):
        preact_resnet(1, rule="hacn")
    with pytest.raises(ValueError, match=r"gated=True contradicts rule='resnet'"):
        wide_resnet(10, 1, gated=True, rule="resnet")


def test_fc_rule_argument_names_the_kind() -> None:
    assert FC_RULES == ("plain", "resnet", "gated_plain", "gated")
    for kind, rule in zip(("plain", "resnet", "gated_plain", "gated_resnet"), FC_RULES):
        torch.manual_seed(0)
        by_kind = mnist_fc(kind, 4, 8, in_features=12)
        torch.manual_seed(0)
        by_rule = mnist_fc(rule=rule, depth=4, width=8, in_features=12)
        assert same_state(by_kind, by_rule) and by_kind.config == by_rule.config
        assert by_rule.config.kind == kind and by_kind.config.rule == rule
    assert FCNetConfig().kind == "gated_resnet" and FCNetConfig().rule == "gated"
    with pytest.raises(ValueError, match=r"rule='acn' is not valid; allowed: plain, resnet, gated_plain, gated"):
        mnist_fc(rule="acn", depth=4)
    with pytest.raises(ValueError, match=r"kind='plain' contradicts rule='gated' \(kind 'gated_resnet'\)"):
        mnist_fc("plain", 4, rule="gated")


@pytest.mark.parametrize(
    ("config", "kwargs", "message"),
    [
        (MixerConfig, {"num_layers": 0}, "MixerConfig.num_layers=0 must be a positive integer"),
        (MixerConfig, {"hidden_dim": True}, "MixerConfig.hidden_dim=True must be a positive integer"),
        (MixerConfig, {"channel_mlp_dim": 2.0}, "MixerConfig.channel_mlp_dim=2.0 must be a positive integer"),
        (MixerConfig, {"image_size": 30},
         "MixerConfig.image_size=30 is not divisible by MixerConfig.patch_size=4; the Mixer needs whole patches"),
        (MixerConfig, {"dropout": 1.0}, "MixerConfig.dropout=1.0 must be in [0, 1)"),
        (MixerConfig, {"rule": "res", "dropout": 1.0}, "MixerConfig.rule='res' is not valid"),  # rule first
        (DenseMixerConfig, {"growth": 0}, "DenseMixerConfig.growth=0 must be a positive integer"),
        (DenseMixerConfig, {"in_channels": -1}, "DenseMixerConfig.in_channels=-1 must be a positive integer"),
        (DenseMixerConfig, {"image_size": 30, "patch_size": 7},
         "DenseMixerConfig.image_size=30 is not divisible by DenseMixerConfig.patch_size=7"),
        (DenseMixerConfig, {"dropout": -0.1}, "DenseMixerConfig.dropout=-0.1 must be in [0, 1)"),
    ],
)
def test_mixer_config_errors_are_unchanged(config, kwargs, message) -> None:
    with pytest.raises(ValueError) as info:
        config(**kwargs)
    assert str(info.value).startswith(message)


def test_geometry_is_shared_by_both_mixer_configs() -> None:
    assert MixerConfig().num_patches == 64 and DenseMixerConfig(image_size=28, patch_size=7).num_patches == 16
    # positive-size checks run in field order (growth between num_layers and token_mlp_dim)
    with pytest.raises(ValueError, match=r"DenseMixerConfig.growth=0"):
        DenseMixerConfig(growth=0, token_mlp_dim=0)
    with pytest.raises(ValueError, match=r"DenseMixerConfig.num_layers=0"):
        DenseMixerConfig(growth=0, num_layers=0)


def test_build_model_builds_every_backbone() -> None:
    assert MODEL_NAMES == (
        "mnist_fc", "preact_resnet", "wide_resnet", "mlp_mixer", "dense_mixer", "vit", "gpt_decoder", "resnet20",
        "gin", "seq2seq",
    )
    vit = build_model("vit", image_size=8, patch_size=4, num_classes=3, dim=8, num_layers=2, num_heads=2, mlp_dim=8)
    assert vit.config.rule == "hacn" and vit.layerwise_logits(torch.zeros(1, 3, 8, 8)).shape == (3, 1, 3)
    gpt = build_model("gpt_decoder", vocab_size=5, max_seq_len=4, dim=8, num_layers=2, num_heads=2)
    assert gpt(torch.zeros(1, 4, dtype=torch.long)).shape == (1, 4, 5)
    mixer = build_model("mlp_mixer", rule="hacn", mlp="adaptive", **TINY)
    assert isinstance(mixer, MLPMixer) and len(adaptive_mlps(mixer)) == 2
    assert isinstance(build_model("dense_mixer", growth=4, **TINY), DenseMixer)
    assert build_model("mnist_fc", rule="gated", depth=4).config.kind == "gated_resnet"
    assert build_model("preact_resnet", n=1, rule="gated").config.gated
    assert build_model("resnet20", head="adaptive", in_channels=1).head.widths() == [116]
    assert len(adaptive_mlps(build_model("gin", in_features=37, num_classes=2, layers=4, mlp="adaptive"))) == 5
    text = build_model("seq2seq", src_vocab=9, tgt_vocab=9, d_model=8, heads=2, encoder_layers=1, decoder_layers=1,
                       ffn="adaptive")
    assert len(adaptive_mlps(text)) == 2
