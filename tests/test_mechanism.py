"""Tests that guard issue 42's finding (H-ACN Eq. 2, Sec. 4): under Eq. 2 the gradient of ``a_i`` is
``<dL/dx_i, x_{i-1}>`` and nothing else, ``a_L`` gets none, the residual weights are trained at the
configured rate without decay, and the split-gain rule ``x_i = c + b_i t + a_i x_{i-1}`` sits between
Eq. 2 (``b = 1``) and the public Mixer code's rule (``b = a``). Also the mechanism study's gradient probe
(``hacn_core.hacn.studies.mechanism``): its parts add up to autograd's gradient, and its window statistics."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch
from torch import nn

from hacn_core.engine.config import optimizer_for
from hacn_core.hacn.connectivity import ResidualStack
from hacn_core.hacn.studies import mechanism
from hacn_core.models.mixer import MixerConfig, MLPMixer
from test_connectivity import DIM, TwoPart  # a block with two sub-layers: t = T(x), c = C(x + t)

SMALL = MixerConfig(image_size=8, in_channels=2, num_classes=3, patch_size=2, hidden_dim=8, num_layers=4,
                    token_mlp_dim=6, channel_mlp_dim=12)


def blocks(n: int, seed: int = 0) -> list[nn.Module]:
    torch.manual_seed(seed)
    return [TwoPart().double() for _ in range(n)]


def stack(bs, rule, alphas, betas=None) -> ResidualStack:
    s = ResidualStack(bs, rule).double()
    with torch.no_grad():
        for p, v in zip(s.alpha, alphas):
            p.fill_(v)
        for p, v in zip(getattr(s, "beta", []), betas or []):
            p.fill_(v)
    return s


def x_input(seed: int = 1) -> torch.Tensor:
    return torch.randn(3, 4, DIM, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def loss_of(y: torch.Tensor) -> torch.Tensor:
    w = torch.randn(y.shape, generator=torch.Generator().manual_seed(9), dtype=y.dtype)
    return torch.tanh(y * w).sum()  # a nonlinear readout, so dL/dy depends on y


# ----------------------------------------------------------------------------- Eq. 2's gradient


def test_eq2_gradient_of_a_is_the_inner_product_of_the_stream_gradient_and_the_previous_stream():
    bs, a = blocks(4), [0.25, 0.3, 0.2, 0.27]
    s = stack(bs, "hacn", a)
    trace = s.trace(x_input())
    loss = loss_of(trace.output)
    streams = trace.inputs  # x_0 .. x_{L-1}
    g_streams = torch.autograd.grad(loss, streams[1:], retain_graph=True)  # dL/dx_1 .. dL/dx_{L-1}
    g_alpha = torch.autograd.grad(loss, list(s.alpha), allow_unused=True)
    for i in range(1, 4):  # a_i for i = 1..L-1 (1-based): <dL/dx_i, x_{i-1}>
        hand = (g_streams[i - 1] * streams[i - 1]).sum()
        torch.testing.assert_close(g_alpha[i - 1], hand, rtol=1e-12, atol=1e-12)
    assert g_alpha[3] is None  # a_L: x_L is never used (Algorithm 1 drops it)


def test_last_residual_weight_of_the_mixer_gets_no_gradient_and_keeps_its_value():
    torch.manual_seed(0)
    model = MLPMixer(SMALL)
    before = model.stack.alpha[-1].detach().clone()
    opt = optimizer_for(model, mechanism.train_config(mechanism.make_config("hacn", 0, profile="smoke"), 1))
    for _ in range(3):
        x = torch.randn(4, 2, 8, 8)
        nn.functional.cross_entropy(model(x), torch.tensor([0, 1, 2, 0])).backward()
        assert model.stack.alpha[-1].grad is None
        assert all(p.grad is not None and p.grad != 0 for p in model.stack.alpha[:-1])
        opt.step()
        opt.zero_grad(set_to_none=True)
    assert torch.equal(model.stack.alpha[-1].detach(), before)  # no decay either: it never moves


@pytest.mark.parametrize("profile", ["book", "paper"])
def test_residual_weights_sit_in_the_configured_group_rate_without_decay(profile):
    config = mechanism.make_config("hacn_split_gain", 0, profile=profile)
    train = mechanism.train_config(config, 30)
    assert (train.lr, train.weight_decay, train.optimizer) == (1e-3, 0.01, "adamw")
    torch.manual_seed(0)
    model = MLPMixer(SMALL, rule="hacn_split_gain")
    opt = optimizer_for(model, train)
    group_of = {id(p): g for g in opt.param_groups for p in g["params"]}
    scalars = list(model.stack.alpha) + list(model.stack.beta)
    for p in scalars:
        assert group_of[id(p)]["weight_decay"] == 0.0 and group_of[id(p)]["lr"] == config["lr"]
    decayed = [g for g in opt.param_groups if g["weight_decay"] == config["weight_decay"]]
    assert any(p is model.head.fc.weight for g in decayed for p in g["params"])  # the weights do decay


# ----------------------------------------------------------------------------- the split-gain rule


def test_split_gain_rule_at_b_equal_a_is_the_code_rule_and_at_b_one_is_eq2():
    bs, a = blocks(3, seed=2), [0.4, 0.2, 0.7]
    x = x_input()
    code = stack(bs, "hacn_code_mixer", a)(x)
    torch.testing.assert_close(stack(bs, "hacn_split_gain", a, a)(x), code, rtol=0, atol=1e-14)
    eq2 = stack(bs, "hacn", a)(x)
    torch.testing.assert_close(stack(bs, "hacn_split_gain", a, [1.0] * 3)(x), eq2, rtol=0, atol=1e-14)
    # and by hand, two layers: s += c + b t, x = c + b t + a x
    b = [0.9, 1.3]
    t1, c1 = bs[0].parts(x)
    x1 = c1 + b[0] * t1 + a[0] * x
    t2, c2 = bs[1].parts(x1)
    hand = x + (c1 + b[0] * t1) + (c2 + b[1] * t2)
    torch.testing.assert_close(stack(bs[:2], "hacn_split_gain", a[:2], b)(x), hand, rtol=0, atol=1e-14)


def test_split_gain_gradients_add_up_to_the_code_rule_gradient_at_b_equal_a():
    bs, a = blocks(3, seed=3), [0.3, 0.22, 0.26]
    x = x_input()
    code = stack(bs, "hacn_code_mixer", a)
    split = stack(bs, "hacn_split_gain", a, a)
    g_code = torch.autograd.grad(loss_of(code(x)), list(code.alpha))
    g_a = torch.autograd.grad(loss_of(split(x)), list(split.alpha), allow_unused=True)
    g_b = torch.autograd.grad(loss_of(split(x)), list(split.beta))
    for i in range(3):
        total = g_b[i] + (g_a[i] if g_a[i] is not None else 0.0)
        torch.testing.assert_close(g_code[i], total, rtol=1e-12, atol=1e-12)


def test_split_gain_starts_as_the_code_rule_and_reports_a_as_its_residual_weights():
    torch.manual_seed(0)
    model = MLPMixer(SMALL, rule="hacn_split_gain", generator=torch.Generator().manual_seed(4))
    a = torch.stack([p.detach() for p in model.stack.alpha])
    b = torch.stack([p.detach() for p in model.stack.beta])
    assert torch.equal(a, b) and (a - 0.25).abs().max() < 0.05
    torch.testing.assert_close(model.stack.residual_weights(), a)


# ----------------------------------------------------------------------------- the probe


@pytest.mark.parametrize("rule,block", [("hacn", "paper"), ("hacn_code_mixer", "paper"),
                                        ("hacn_split_gain", "paper"), ("hacn", "code")])
def test_probe_parts_add_up_to_autograds_gradient(rule, block):
    torch.manual_seed(0)
    model = MLPMixer(dataclasses.replace(SMALL, block=block), rule=rule).double()
    probe = mechanism.ResidualGradientProbe(model)
    probe.attach()
    x = torch.randn(4, 2, 8, 8, dtype=torch.float64)
    nn.functional.cross_entropy(model(x), torch.tensor([0, 1, 2, 0])).backward()
    parts, grads = probe.step_parts(), probe.step_grads()
    probe.close()
    a_grad = [float(p.grad) if p.grad is not None else 0.0 for p in model.stack.alpha]
    assert grads["alpha"] == pytest.approx(a_grad, rel=1e-12, abs=1e-15)
    t_parts = [r + s for r, s in zip(parts["readout_t"], parts["stream_t"])]
    if rule == "hacn":
        assert a_grad == pytest.approx(parts["residual"], rel=1e-9, abs=1e-12)
    elif rule == "hacn_code_mixer":
        assert a_grad == pytest.approx([t + r for t, r in zip(t_parts, parts["residual"])], rel=1e-9, abs=1e-12)
    else:
        assert a_grad == pytest.approx(parts["residual"], rel=1e-9, abs=1e-12)
        assert grads["beta"] == pytest.approx(t_parts, rel=1e-9, abs=1e-12)
    assert parts["residual"][-1] == 0.0 and parts["stream_t"][-1] == 0.0  # x_L feeds nothing
    assert all(v != 0.0 for v in parts["readout_t"])


def test_window_statistics_by_hand():
    g = [1.0, -0.5, 2.0, 0.5]  # one scalar's gradients over a window of 4 steps
    da = [-0.1, 0.05, -0.2, 0.1]
    sums = {"n": 4, "sum_g": [sum(g)], "sum_g2": [sum(v * v for v in g)], "n_pos": [3], "n_neg": [1],
            "sum_da": [sum(da)], "sum_abs_da": [sum(abs(v) for v in da)]}
    stats = mechanism.gradient_statistics(sums)
    mean = 0.75
    std = math.sqrt(sum((v - mean) ** 2 for v in g) / 3)
    assert stats["snr"][0] == pytest.approx(mean / std)
    assert stats["sign_agreement"][0] == 0.75  # 3 of 4 steps have the sign of the mean
    assert stats["drift_efficiency"][0] == pytest.approx(0.15 / 0.45)
    assert mechanism.snr_noise_floor(860) == pytest.approx(0.0272, abs=1e-4)


def test_pooled_adds_the_windows_that_end_in_the_range():
    curves = {"record_step": [0, 5, 10, 12], "probe/n": [0, 5, 5, 2]}
    for s in mechanism.STATS:
        curves[f"probe/alpha/{s}"] = [[0.0], [1.0], [2.0], [4.0]]
    assert mechanism.pooled(curves, "alpha")["n"] == 12
    assert mechanism.pooled(curves, "alpha")["sum_g"] == [7.0]
    assert mechanism.pooled(curves, "alpha", first_step=5)["sum_g"] == [6.0]
    assert mechanism.pooled(curves, "alpha", last_step=10)["n"] == 10


def test_bad_configurations_are_refused_by_name():
    config = mechanism.make_config("hacn", 0, profile="smoke")
    with pytest.raises(ValueError, match="stop_after_epochs"):
        mechanism.check_config(config | {"stop_after_epochs": 0})
    with pytest.raises(ValueError, match="rule='resnet'"):
        mechanism.check_config(config | {"rule": "resnet"})
    with pytest.raises(ValueError, match="profile"):
        mechanism.make_config("hacn", 0, profile="huge")
    with pytest.raises(ValueError, match="clip_before_unscale"):
        mechanism.check_config(config | {"clip_before_unscale": 0})


# ----------------------------------------------------------------------------- the report


def _fake_run(seed: int, g: list[list[float]], rule: str = "hacn_code_mixer"):
    """A stored run of 3 layers whose a_i got the gradients ``g[step][layer]`` (one window per step) and whose
    parts are (readout_t, stream_t, residual) = (g, 0, 0) at every step."""
    from hacn_core.engine.results import RunResult

    steps = len(g)
    curves = {"record_step": list(range(steps + 1)), "probe/n": [0] + [1] * steps}
    zero = [0.0, 0.0, 0.0]
    rows = {"sum_g": g, "sum_g2": [[v * v for v in r] for r in g], "n_pos": [[float(v > 0) for v in r] for r in g],
            "n_neg": [[float(v < 0) for v in r] for r in g], "sum_da": [[-v for v in r] for r in g],
            "sum_abs_da": [[abs(v) for v in r] for r in g]}
    for s, values in rows.items():
        curves[f"probe/alpha/{s}"] = [zero] + values
    curves |= {"probe/parts/readout_t": [zero] + g, "probe/parts/stream_t": [zero] * (steps + 1),
               "probe/parts/residual": [zero] * (steps + 1)}
    for i in range(3):
        path = [0.25]
        for r in g:
            path.append(path[-1] - r[i])
        curves[f"param/stack.alpha.{i}"] = path
    config = {"rule": rule, "alpha_mu": 0.25, "num_layers": 3, "seed": seed}
    return RunResult("hacn-mechanism", config, str(seed), seed, {}, curves)


def test_report_finds_a_direction_only_where_the_gradient_has_one():
    from hacn_core.hacn.studies import mechanism_report as report

    steps = 400
    gen = torch.Generator().manual_seed(0)
    noise = torch.randn(steps, 3, generator=gen)
    g = (noise + torch.tensor([-1.0, 0.0, 0.0])).tolist()  # layer 1 pushed up (negative gradient), layer 2 noise
    stats = report.run_statistics(_fake_run(0, g))
    assert list(report.detectable(stats["snr"], steps)) == [True, False]  # a_3 (a_L) is left out
    assert stats["snr"][0] == pytest.approx(1.0, abs=0.15) and stats["sign_agreement"][0] > 0.8
    table = report.statistics_table([_fake_run(0, g), _fake_run(1, g)])
    row = table.iloc[0]
    assert (row["rule"], row["seeds"], row["steps"], row["direction found (%)"]) == ("code rule", 2, steps, 50.0)
    parts = report.parts_table([_fake_run(0, g)]).iloc[0]
    mean = -sum(r[0] + r[1] for r in g) / steps * 1e3  # the push: minus the mean gradient, layers 1..L-1
    assert parts["gain on t, readout"] == pytest.approx(mean) and parts["t's share (%)"] == pytest.approx(100.0)


def test_sign_test_over_layers_by_hand():
    import numpy as np

    from hacn_core.hacn.studies.mechanism_report import sign_test

    assert sign_test(np.ones(15)) == 2 / 2**15  # all 15 up: twice P(15 of 15)
    five_up = np.array([1.0] * 5 + [-1.0] * 10)  # the majority (10 down) or more: 2 * (C(15,10)+...+C(15,15)) / 2^15
    assert sign_test(five_up) == pytest.approx(2 * sum(math.comb(15, k) for k in range(10, 16)) / 2**15)
    assert sign_test(np.array([1.0, -1.0])) == 1.0 and math.isnan(sign_test(np.zeros(3)))


def test_the_reading_reports_the_tables_numbers_and_picks_its_conclusions_by_them():
    from hacn_core.hacn.studies import mechanism_report as report

    steps = 200
    runs = []
    for seed in range(4):  # 4 seeds x 2 inner layers: all 8 moving up is a sign test p of 2 / 2^8
        noise = torch.randn(steps, 3, generator=torch.Generator().manual_seed(seed))
        up = (noise + torch.tensor([-1.0, -1.0, 0.0])).tolist()  # both inner layers pushed up
        flat = (noise - noise.mean(0) + torch.tensor([0.05, -0.05, 0.0])).tolist()  # one up, one down
        runs += [_fake_run(seed, up, "hacn_code_mixer"), _fake_run(seed, flat, "hacn"),
                 _fake_run(seed, up, "hacn_split_gain")]
        one = _fake_run(seed, (noise + torch.tensor([1.0, 1.0, 0.0])).tolist(), "hacn")  # μ 1, pushed down
        one.config["alpha_mu"] = 1.0
        runs.append(one)
    for r in runs:  # the split-gain rule's b_i: the same sums as its a_i
        if r.config["rule"] == "hacn_split_gain":
            r.curves |= {k.replace("/alpha/", "/beta/").replace(".alpha.", ".beta."): v for k, v in list(r.curves.items())
                         if "/alpha/" in k or ".alpha." in k}
    text = report.reading(runs)
    stats = report.statistics_table(runs)
    code = stats[stats["rule"] == "code rule"].iloc[0]
    assert f"{code['moved up (%)']:.0f}% of the layers end above their start" in text
    assert f"{code['SNR']:.3f} under the public rule" in text
    assert "In short" in text  # the code rule's layers all moved up, Eq. 2's did not share a sign
    assert "A larger start gives Eq. 2's weights a direction" in text and "move down" in text
    assert report.reading([r for r in runs if r.config["rule"] != "hacn_split_gain"]) == ""  # a variant missing
    # the code's layer is optional: without it no paragraph and no closing sentence on it; with it pushed down
    # in every layer of 4 seeds, both, and its claim holds (all 8 inner layers down: p = 2 / 2^8)
    assert "public code's layer" not in text
    assert report.verdicts(runs).attrs["ledger"][-1]["holds"] is None
    for seed in range(4):
        noise = torch.randn(steps, 3, generator=torch.Generator().manual_seed(seed))
        down = _fake_run(seed, (noise + torch.tensor([1.0, 1.0, 0.0])).tolist(), "hacn")
        down.config["block"] = "code"
        runs.append(down)
    text = report.reading(runs)
    assert "**In the public code's layer, Eq. 2's weights are pushed down together.**" in text
    assert "0% of the layers end above their start (p = 0.0078)" in text
    assert text.endswith("Eq. 2's residual path pushes the weights down together instead.")
    row = report.verdicts(runs).attrs["ledger"][-1]
    assert row["holds"] is True and row["under"] == "Eq. 2 in the public code's layer"
    assert "Eq. 2, code's layer" in set(report.statistics_table(runs)["rule"])


def test_the_code_layer_variant_is_an_entry_only_where_it_is_the_codes():
    """The sixth variant adds ``block='code'``; the five paper-layer variants keep the hashes of their stored runs."""
    from pathlib import Path

    from hacn_core.engine.results import config_hash

    stored = Path(__file__).resolve().parents[1] / "results" / mechanism.EXPERIMENT_ID
    configs = mechanism.configs("book")
    assert len(configs) == 18 and sum(c.get("block") == "code" for c in configs) == 3
    for c in configs:
        if "block" not in c:
            assert (stored / f"{config_hash(c)}.json").exists()
    assert mechanism.make_config("hacn", 0, block="code") == mechanism.make_config("hacn", 0) | {"block": "code"}
