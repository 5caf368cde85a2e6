"""Tests of the public code's Mixer pieces offered as options of ``hacn_core.models.mixer`` (issue 42, item 3):
the class token read by the head, and residual weights kept in float64; each against a hand computation."""

from __future__ import annotations

from pathlib import Path

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


# ----------------------------------------------------------------------------- the rest of the public code's recipe


def test_the_code_block_adds_a_linear_relu_a_skip_from_the_input_and_a_norm():
    torch.manual_seed(0)
    model = MLPMixer(SMALL, block="code", depth_ln="code").double()
    block = model.stack.blocks[1]
    x = torch.randn(4, 16, 8, dtype=torch.float64)
    t = block.token(x)
    gain = block.post_norm.gain()
    inner = block.channel.mlp(block.channel.norm(x + t))
    ln = F.layer_norm(torch.relu(inner @ block.post.weight.T + block.post.bias) + x, (8,),
                      block.post_norm.norm.weight, block.post_norm.norm.bias)
    t_got, c_got = block.parts(x)
    torch.testing.assert_close(t_got, t, rtol=0, atol=0)
    torch.testing.assert_close(c_got, gain * ln, rtol=1e-12, atol=1e-12)
    assert block.post_norm.gain is block.channel.norm.gain  # one depth gain per layer, shared by its norms
    # the paper's block is unchanged, and has no extra map
    paper = MLPMixer(SMALL).stack.blocks[1]
    assert not hasattr(paper, "post")
    with pytest.raises(ValueError, match="MixerConfig.block"):
        MixerConfig(block="timm")
    with pytest.raises(ValueError, match="layer_unit"):
        MixerConfig(block="code", layer_unit="sublayer", rule="hacn")


def test_an_epoch_schedule_holds_each_epochs_rate_at_the_epoch_formula():
    from hacn_core.engine.config import schedule_for

    train = TrainConfig(epochs=4, batch_size=4, lr=1.0, schedule="cosine", warmup_epochs=1, min_lr=0.1,
                        schedule_unit="epoch")
    sched = schedule_for(train, steps_per_epoch=3)
    lrs = [sched.lr(t) for t in range(12)]
    # in epochs: warmup 1 epoch (epoch 0 at (0 + 1) / 1 = 1), then the cosine over epochs 1..4 (span 3)
    import math
    epoch = [1.0] + [0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * (e - 1) / 3)) for e in (1, 2, 3)]
    assert lrs == pytest.approx([epoch[t // 3] for t in range(12)], abs=1e-15)
    per_step = schedule_for(TrainConfig(epochs=4, batch_size=4, lr=1.0, schedule="cosine", warmup_epochs=1,
                                        min_lr=0.1), steps_per_epoch=3)
    assert len({per_step.lr(t) for t in range(3, 12)}) == 9  # every step its own rate
    with pytest.raises(ValueError, match="schedule_unit"):
        TrainConfig(epochs=1, batch_size=4, lr=1.0, schedule_unit="batch")


def test_cutmix_pastes_a_box_of_the_partner_and_weights_the_labels_by_area():
    from hacn_core.engine.augment import CutMix, cutmix_box

    assert cutmix_box(8, 8, 0.75, 4, 4) == (2, 6, 2, 6)  # sides sqrt(0.25) * 8 = 4, centred
    assert cutmix_box(8, 8, 0.75, 0, 7) == (0, 2, 5, 8)  # clipped at the border
    x = torch.arange(2 * 1 * 8 * 8, dtype=torch.float32).reshape(2, 1, 8, 8)
    y = torch.tensor([0, 2])
    cut = CutMix(alpha=1.0, prob=1.0)
    torch.manual_seed(3)
    mixed, target = cut.mix(x, y, num_classes=3)
    torch.manual_seed(3)
    torch.rand(())  # the draws in order: apply?, lam, centre, permutation
    lam = float(cut.beta.sample())
    cy, cx = int(torch.randint(8, ())), int(torch.randint(8, ()))
    perm = torch.randperm(2)
    top, bottom, left, right = cutmix_box(8, 8, lam, cy, cx)
    hand = x.clone()
    hand[..., top:bottom, left:right] = x[perm][..., top:bottom, left:right]
    torch.testing.assert_close(mixed, hand, rtol=0, atol=0)
    own = 1 - (bottom - top) * (right - left) / 64
    onehot = F.one_hot(y, 3).float()
    torch.testing.assert_close(target, own * onehot + (1 - own) * onehot[perm])
    assert CutMix(prob=0.0).mix(x, y, 3) is None
    model = MLPMixer(SMALL)
    model.eval()
    out, tgt = cut(model, (images(), torch.tensor([0, 1, 2, 0])))
    assert tgt.dtype == torch.int64  # evaluation: the plain batch and its labels
    with pytest.raises(ValueError, match="cutmix prob"):
        CutMix(prob=1.5)


def test_batched_autoaugment_is_the_per_image_transform_with_the_same_draws():
    from hacn_core.engine.augment import BatchAutoAugment

    aa = BatchAutoAugment("cifar10")
    torch.manual_seed(0)
    x = (torch.rand(24, 1, 12, 12) * 255).to(torch.uint8)
    torch.manual_seed(1)
    plans = aa.draw(24, 12, 12)
    assert any(p[0] is not None for p in plans) and any(p[0] is None for p in plans)
    got = aa.apply(x, plans)
    t = aa.transform
    for i, steps in enumerate(plans):  # one image at a time, torchvision's own operation per step
        img = x[i:i + 1]
        for step in steps:
            if step is not None:
                img = t._apply_image_or_video_transform(img, step[0], step[1], interpolation=t.interpolation,
                                                        fill=t._fill)
        torch.testing.assert_close(got[i:i + 1], img, rtol=0, atol=0)
    with pytest.raises(ValueError, match="policy"):
        BatchAutoAugment("mnist")


def test_the_recipe_hook_crops_and_augments_pixels_and_keeps_evaluation_plain():
    from hacn_core.engine.augment import random_crop_flip
    from hacn_core.hacn.studies.code_recipe import CodeRecipeAugment

    mean, std = torch.full((1, 2, 1, 1), 0.3), torch.full((1, 2, 1, 1), 0.2)
    pixels = torch.rand(4, 2, 8, 8)
    x = (pixels - mean) / std
    hook = CodeRecipeAugment(mean, std, pad=2)
    torch.manual_seed(5)
    got = hook.pixels(x)
    torch.manual_seed(5)
    hand = (random_crop_flip(pixels, 2, flip=False) - mean) / std  # zero padding is black in pixel space
    torch.testing.assert_close(got, hand, rtol=1e-5, atol=1e-5)
    assert torch.equal(CodeRecipeAugment(mean, std).pixels(x), x)  # no piece: the batch as it came
    model = MLPMixer(SMALL)
    model.eval()
    out, y = CodeRecipeAugment(mean, std, pad=2, autoaugment=True, cutmix_prob=1.0)(model, (images(), torch.tensor([0, 1, 2, 0])))
    torch.testing.assert_close(out, model(images()))


def test_the_recipe_configs_switch_each_piece_and_keep_the_stored_studies_hashes():
    from hacn_core.engine.results import config_hash
    from hacn_core.hacn.studies import code_recipe as cr
    from hacn_core.hacn.studies import mixer

    whole = cr.make_config("hacn", 0)
    assert {k: whole[k] for k in cr.CODE_RECIPE} == cr.CODE_RECIPE
    ours = mixer.make_config("hacn", 0, train_subset=None, epochs=mixer.LONG_EPOCHS, record_every_steps=50)
    assert {k: v for k, v in whole.items() if k not in cr.CODE_RECIPE} == ours  # the converged study's run
    assert ours in mixer.long_configs()
    model = mixer.build_model(whole, image_size=28, in_channels=1)
    assert model.config.block == "code" and model.config.class_token and model.config.alpha_dtype == "float64"
    plain = mixer.build_model(ours, image_size=28, in_channels=1)
    assert (plain.config.block, plain.config.class_token, plain.config.alpha_dtype) == ("paper", False, "float32")
    assert len(cr.configs("book")) == 16  # 2 rules x 2 tasks x 3 seeds, then the 4 ablations
    for config in cr.configs("book")[:12]:  # the corner runs stored before the ablations: their hashes stand
        assert (Path(__file__).resolve().parents[1] / "results" / cr.EXPERIMENT_ID / f"{config_hash(config)}.json"
                ).exists()
    stored = Path(__file__).resolve().parents[1] / "results" / mixer.LONG_ID
    assert (stored / f"{config_hash(ours)}.json").exists()  # entries left out: the stored runs' hashes stand
    for bad, match in (({"random_crop_pad": -1}, "random_crop_pad"), ({"autoaugment": 1}, "autoaugment"),
                       ({"cutmix_prob": 2}, "cutmix_prob"), ({"schedule_unit": "batch"}, "schedule_unit"),
                       ({"label_smoothing": 1.0}, "label_smoothing")):
        with pytest.raises(ValueError, match=match):
            cr.check_config(whole | bad)
