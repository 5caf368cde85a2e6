"""Tests of the public code's Mixer pieces offered as options of ``hacn_core.models.mixer`` (issue 42, item 3):
the class token read by the head, and residual weights kept in float64; each against a hand computation."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from hacn_core.engine.config import TrainConfig, optimizer_for
from hacn_core.models.mixer import MixerConfig, MLPMixer

SMALL = MixerConfig(image_size=8, in_channels=2, num_classes=3, patch_size=2, hidden_dim=8, num_layers=3,
                    token_mlp_dim=6, channel_mlp_dim=12, rule="hacn_code_mixer")


def images(dtype=torch.float32):
    return torch.randn(4, 2, 8, 8, generator=torch.Generator().manual_seed(1), dtype=dtype)


def test_class_token_is_mixed_with_the_patches_and_read_alone_by_the_head():
    torch.manual_seed(0)
    model = MLPMixer(SMALL, class_token=True).double()
    with torch.no_grad():
        model.cls.normal_()
    x = images(torch.float64)
    patches = model.embed(x)  # (B, 16, d)
    tokens = torch.cat([model.cls.expand(4, 1, 8), patches], dim=1)
    assert torch.equal(model.tokens(x), tokens)
    assert model.stack.blocks[0].token.mlp(torch.zeros(1, 8, 17, dtype=torch.float64)).shape == (1, 8, 17)  # N + 1 tokens are mixed
    z = model.stack(tokens)
    head = model.head
    hand = head.fc(F.layer_norm(z, (8,), head.norm.weight, head.norm.bias, head.norm.eps)[:, 0])
    torch.testing.assert_close(model(x), hand, rtol=0, atol=1e-12)
    F.cross_entropy(model(x), torch.tensor([0, 1, 2, 0])).backward()
    assert model.cls.grad is not None and model.cls.grad.abs().sum() > 0
    # without it: the mean over the patches, as before (and no class-token parameter)
    plain = MLPMixer(SMALL).double()
    assert not hasattr(plain, "cls") and plain.config.num_tokens == 16
    zp = plain.stack(plain.embed(x))
    hp = plain.head
    torch.testing.assert_close(plain(x), hp.fc(F.layer_norm(zp, (8,), hp.norm.weight, hp.norm.bias).mean(1)),
                               rtol=0, atol=1e-12)


def test_float64_residual_weights_keep_the_stream_float32_and_take_float64_adam_steps():
    torch.manual_seed(0)
    model = MLPMixer(SMALL, alpha_dtype="float64")
    torch.manual_seed(0)
    twin = MLPMixer(SMALL)
    assert all(p.dtype == torch.float64 for p in model.stack.alpha)
    a0 = torch.stack([p.detach().clone() for p in model.stack.alpha])
    torch.testing.assert_close(a0.float(), torch.stack([p.detach() for p in twin.stack.alpha]))
    x, y = images(), torch.tensor([0, 1, 2, 0])
    out = model(x)
    assert out.dtype == torch.float32
    torch.testing.assert_close(out, twin(x), rtol=1e-5, atol=1e-6)
    train = TrainConfig(epochs=1, batch_size=4, lr=1e-3, optimizer="adamw", weight_decay=0.01)
    opt = optimizer_for(model, train)
    F.cross_entropy(out, y).backward()
    g = torch.stack([p.grad for p in model.stack.alpha])
    assert g.dtype == torch.float64
    opt.step()
    # AdamW's first step, no decay on a mixing weight: a - lr * g / (|g| + eps) (bias corrections cancel)
    hand = a0 - 1e-3 * g / (g.abs() + train.eps)
    torch.testing.assert_close(torch.stack([p.detach() for p in model.stack.alpha]), hand, rtol=0, atol=1e-15)


def test_bad_code_recipe_options_are_refused_by_name():
    with pytest.raises(ValueError, match="alpha_dtype"):
        MixerConfig(alpha_dtype="float16")
    with pytest.raises(ValueError, match="class_token"):
        MixerConfig(class_token="yes")


def test_clip_before_unscale_clips_to_max_norm_over_the_loss_scale():
    from hacn_core.hacn.studies.mechanism import ClipBeforeUnscale, grad_scaler_scale

    assert [grad_scaler_scale(s) for s in (0, 1999, 2000, 4500)] == [2.0**16, 2.0**16, 2.0**17, 2.0**18]
    w = torch.nn.Parameter(torch.zeros(3, dtype=torch.float64))
    opt = torch.optim.SGD([w], lr=1.0)
    clip = ClipBeforeUnscale(max_norm=1.0, growth_interval=2)
    clip.attach(opt)
    g = torch.tensor([3e-6, -4e-6, 0.0], dtype=torch.float64)  # ||g|| = 5e-6: S ||g|| = 0.33 at S = 2^16
    moves = []
    for _ in range(3):  # S = 2^16, 2^16, 2^17
        w.grad = g.clone()
        before = w.detach().clone()
        opt.step()
        moves.append(before - w.detach())
    for move in moves:  # S ||g|| = 0.33, 0.33, 0.66: below the threshold of 1, untouched
        torch.testing.assert_close(move, g, rtol=1e-12, atol=0)
    w.grad = 4 * g  # ||g|| = 2e-5: S ||g|| = 2.6 at S = 2^17 -> the step is g * 1 / (S ||g|| + 1e-6)
    before = w.detach().clone()
    opt.step()
    hand = 4 * g / (2.0**17 * 2e-5 + 1e-6)
    torch.testing.assert_close(before - w.detach(), hand, rtol=1e-12, atol=0)


def test_the_code_trainer_entries_switch_one_piece_each_and_leave_the_default_unchanged():
    from hacn_core.hacn.studies import mechanism as mech

    config = mech.make_config("hacn_code_mixer", 0, profile="book")
    base = mech.train_config(config, 30)
    assert (base.label_smoothing, base.min_lr, base.warmup_epochs) == (0.0, 0.0, 0.05 * 30)
    assert "mixing" in base.no_decay_roles
    for key, value in mech.CODE_TRAINER.items():
        if key == "clip_before_unscale":
            continue  # a callback of train_mechanism, not a trainer field (tested above)
        one = mech.train_config(config | {key: value}, 30)
        changed = {f for f in ("label_smoothing", "min_lr", "warmup_epochs", "no_decay_roles")
                   if getattr(one, f) != getattr(base, f)}
        assert len(changed) == 1, (key, changed)
    full = mech.train_config(config | mech.CODE_TRAINER, 30)
    assert (full.label_smoothing, full.min_lr, full.warmup_epochs, full.no_decay_roles) == (0.1, 1e-6, 10, ())
    torch.manual_seed(0)
    model = MLPMixer(SMALL)
    groups = optimizer_for(model, full).param_groups
    decayed = [p for g in groups if g["weight_decay"] == 0.01 for p in g["params"]]
    assert all(any(p is q for q in decayed) for p in model.stack.alpha)  # decay on the residual weights too
