"""width-connectivity (new work beyond the papers): H-ACN connectivity with AWNN adaptive layer MLPs.

The combined model at frozen widths is a fixed-width H-ACN network; at a_i = 1 it is the adaptive
ResNet; a resize keeps the survivors' optimizer state and the residual weights; the frozen-width twin
(learn_width=False) keeps its widths and rates while its other weights train, and starts from the same
forward and loss as the learning run, parting only through the rates; the truncation grid is the
truncated networks built by hand; bad configurations are refused by name; the report pairs learning
runs with their frozen twins by seed and task; a smoke run stores what the report reads.
"""

from __future__ import annotations

import copy
import math
import random

import pytest
import torch
import torch.nn.functional as F

from hacn_core import catalog
from hacn_core.awnn import AdaptiveMLP, ELBOLoss, WidthCallback, adaptive_mlps, fast_cpp, truncate, update_widths
from hacn_core.beyond import combined
from hacn_core.beyond import width_connectivity as wc
from hacn_core.beyond import width_connectivity_report as report
from hacn_core.beyond.stack import ResidualMLPStack, StackConfig
from hacn_core.engine.optim import param_groups
from hacn_core.engine.results import ResultsStore, RunContext, RunResult, config_hash
from hacn_core.engine.training import fit
from hacn_core.hacn.connectivity import total_connectivity_strength
from hacn_core.hacn.studies import mixer as hm
from hacn_core.models.mixer import num_parameters
from hacn_core.models.mlp import mlp_layer
from test_hacn_mixer import _fake_images  # 28x28 images whose class lights up one 7x7 patch


@pytest.fixture(autouse=True)
def python_node():
    """AWNN's Python node (same values as the C++ one, nothing to compile), one thread."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    with fast_cpp.use_backend("python"):
        yield
    torch.set_num_threads(threads)


def _mixer_config(rule: str = "hacn", **overrides):
    """A tiny Mixer run of the study: hacn-mixer's smoke Mixer (2 layers, d 16) with adaptive channel MLPs."""
    base = next(c for c in wc.configs("smoke") if c["setting"] == "mixer" and c["rule"] == rule
                and c["num_classes"] == 10)
    return base | overrides


def _stack_config(rule: str = "hacn", **overrides):
    return wc.stack_config(rule, 0, profile="smoke", **overrides)


def _importances(raw_rate: torch.Tensor, width: int) -> torch.Tensor:
    """Eq. 12 by hand: ``f(j) = e^{-nu j} - e^{-nu (j + 1)}``, ``nu = softplus(raw)``, ``j = 0..D-1``."""
    nu = F.softplus(raw_rate.detach())[0]
    j = torch.arange(width, dtype=nu.dtype)
    return torch.exp(-nu * j) - torch.exp(-nu * (j + 1))


# ----------------------------------------------------------------------------- equivalences


def test_frozen_widths_equal_the_fixed_width_hacn_mixer_of_the_same_weights():
    """With its widths frozen, the combined H-ACN Mixer computes what the fixed-width H-ACN Mixer of those
    widths computes, given the same weights with the importances folded into the output layer (Eq. 14:
    ``W_2 (relu(W_1 x + b_1) * f) = (W_2 diag f) relu(W_1 x + b_1)``)."""
    config = _mixer_config("hacn")
    torch.manual_seed(0)
    model = wc.build_model(config, (1, 28, 28))
    with torch.no_grad():
        for a in model.stack.alpha:
            a.uniform_(0.1, 0.9)  # trained-looking residual weights, not the initial 0.25
    width = 5
    for m in adaptive_mlps(model):
        m.set_widths([width])
        m.freeze_widths()
        with torch.no_grad():
            m.raw_rate.add_(-1.0)  # the rate now asks for a much wider layer: frozen, nothing moves
    assert not update_widths(model) and combined.layer_widths(model) == [width] * config["num_layers"]

    fixed = hm.build_model(config | {"channel_mlp_dim": width}, image_size=28, in_channels=1,
                           mlp=mlp_layer("fixed", activation="relu"))
    state = model.state_dict()
    shared = {k: v for k, v in state.items() if ".channel.mlp." not in k}
    missing, unexpected = fixed.load_state_dict(shared, strict=False)
    assert not unexpected and all(".channel.mlp." in k for k in missing)
    with torch.no_grad():
        for block, twin in zip(model.stack.blocks, fixed.stack.blocks):
            first, second = block.channel.mlp.layers
            f = _importances(block.channel.mlp.raw_rate, width)
            twin.channel.mlp[0].weight.copy_(first.rho[:, 1:])
            twin.channel.mlp[0].bias.copy_(first.rho[:, 0])
            twin.channel.mlp[-1].weight.copy_(second.rho[:, 1:] * f)
            twin.channel.mlp[-1].bias.copy_(second.rho[:, 0])
    model.eval()
    fixed.eval()
    x = torch.randn(6, 1, 28, 28)
    with torch.no_grad():
        torch.testing.assert_close(model(x), fixed(x), rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(model.layerwise_logits(x), fixed.layerwise_logits(x), rtol=1e-5, atol=1e-5)
        # the library's twin does the same fold, with a different width per layer
        for m, w in zip(adaptive_mlps(model), (3, 7)):
            m.set_widths([w])
        twin = combined.fixed_width_twin(model)
        assert not adaptive_mlps(twin) and [b.channel.mlp[0].out_features for b in twin.stack.blocks] == [3, 7]
        torch.testing.assert_close(twin.layerwise_logits(x), model.layerwise_logits(x), rtol=1e-5, atol=1e-5)


def test_all_residual_weights_one_is_the_adaptive_resnet_mixer():
    """H-ACN with every a_i = 1 (and Depth-adaptive LayerNorm's strength s = 0, so alpha_l = 1) is the
    adaptive ResNet Mixer with the same weights: output and every exit (Eq. 2: s_i = x_i when a_i = 1)."""
    torch.manual_seed(0)
    resnet = wc.build_model(_mixer_config("resnet"), (1, 28, 28))
    hacn = wc.build_model(_mixer_config("hacn"), (1, 28, 28))
    # the ACN family's norms are Depth-adaptive LayerNorms, alpha_l LN(x): their LayerNorm one level down
    names = hacn.state_dict()
    state = {k if k in names else k.replace(".norm.", ".norm.norm."): v for k, v in resnet.state_dict().items()}
    missing, unexpected = hacn.load_state_dict(state, strict=False)
    assert not unexpected and missing and all(k.startswith("stack.alpha.") or k.endswith("gain.strength")
                                              for k in missing)
    with torch.no_grad():
        for name, p in hacn.named_parameters():
            if name.startswith("stack.alpha."):
                p.fill_(1.0)
            elif name.endswith("gain.strength"):
                p.zero_()
    x = torch.randn(5, 1, 28, 28)
    with torch.no_grad():
        assert torch.allclose(hacn.layerwise_logits(x), resnet.layerwise_logits(x), atol=1e-5)
        before = hacn(x)
        for p in hacn.stack.alpha:
            p.fill_(0.5)
        assert not torch.allclose(hacn(x), before, atol=1e-3)  # the a_i do act


def test_a_resize_keeps_survivors_optimizer_state_and_the_residual_weights():
    """Grow (Algorithm 1: the rate asks for more neurons) and shrink a layer of a trained H-ACN stack: the
    surviving neurons keep their values and AdamW state, new ones start at zero state, and the residual
    weights a_i keep their identity, value and state (they go on training from where they were)."""
    config = _stack_config("hacn")
    torch.manual_seed(0)
    model = wc.build_model(config, (2,))
    x, y = torch.randn(64, 2), torch.randint(0, 2, (64,))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01, foreach=False)
    elbo = ELBOLoss(model, 64, sigma_theta=1.0, per_sample=True)
    for m in adaptive_mlps(model):
        m.attach_optimizer(opt)

    def step():
        loss = elbo(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()

    for _ in range(3):
        step()
    mlp: AdaptiveMLP = adaptive_mlps(model)[0]
    first, second = mlp.layers
    alphas = list(model.stack.alpha)
    trained = alphas[:-1]  # a_L feeds only x_L, which the sum never reads: no gradient, no AdamW state
    assert not opt.state[alphas[-1]] and all(opt.state[a] for a in trained)

    def snapshot():
        return {"rows": first.rho.detach().clone(), "rows_m": opt.state[first.rho]["exp_avg"].clone(),
                "rows_v": opt.state[first.rho]["exp_avg_sq"].clone(), "cols": second.rho.detach().clone(),
                "cols_v": opt.state[second.rho]["exp_avg_sq"].clone(),
                "alpha": [a.detach().clone() for a in alphas],
                "alpha_m": [opt.state[a]["exp_avg"].clone() for a in trained],
                "alpha_step": [float(opt.state[a]["step"]) for a in trained]}

    (d,) = mlp.widths()
    before = snapshot()
    with torch.no_grad():
        mlp.raw_rate.sub_(0.5)  # a smaller rate: Eq. 11 asks for a wider layer
    assert update_widths(model, opt)
    (grown,) = mlp.widths()
    assert grown > d
    for resized, keep in ((grown, d), (d - 3, d - 3)):
        if resized != grown:
            before = snapshot()
            mlp.set_widths([resized], opt)  # shrink: the last neurons leave
        assert first.rho.shape[0] == resized and second.rho.shape[1] == 1 + resized
        assert torch.equal(first.rho[:keep], before["rows"][:keep])
        assert torch.equal(opt.state[first.rho]["exp_avg"][:keep], before["rows_m"][:keep])
        assert torch.equal(opt.state[first.rho]["exp_avg_sq"][:keep], before["rows_v"][:keep])
        assert torch.equal(second.rho[:, :1 + keep], before["cols"][:, :1 + keep])
        assert torch.equal(opt.state[second.rho]["exp_avg_sq"][:, :1 + keep], before["cols_v"][:, :1 + keep])
        if resized > keep:  # new neurons: zero optimizer state
            assert not opt.state[first.rho]["exp_avg"][keep:].any()
        assert [p is q for p, q in zip(model.stack.alpha, alphas)] == [True] * len(alphas)
        assert all(torch.equal(a, b) for a, b in zip(model.stack.alpha, before["alpha"]))
        assert all(torch.equal(opt.state[a]["exp_avg"], m) for a, m in zip(trained, before["alpha_m"]))
    step()  # training goes on: the a_i move from their kept state
    assert [float(opt.state[a]["step"]) for a in trained] == [s + 1 for s in before["alpha_step"]]
    assert any(not torch.equal(a, b) for a, b in zip(model.stack.alpha, before["alpha"]))


# ----------------------------------------------------------------------------- the frozen-width twin


def _fit(config, x, y, epochs):
    """``config``'s model trained by the study's trainer (fit, Eq. 13 / N, Algorithm 1's callback) on (x, y)."""
    torch.manual_seed(config["seed"])
    model = wc.build_model(config, tuple(x.shape[1:]))
    elbo = ELBOLoss(model, len(x), sigma_theta=config["sigma_theta"], per_sample=True)
    out = fit(model, (x, y), wc.train_config(config, epochs), loss_fn=elbo, callbacks=[WidthCallback(elbo)],
              progress=False)
    return model, out


def _raw_rates(model):
    return [m.raw_rate.detach().clone() for m in adaptive_mlps(model)]


def test_a_frozen_width_run_keeps_its_widths_and_rates_while_its_other_weights_train():
    """learn_width=False: over 24 steps of the study's trainer the widths and the rates never move (every
    record), the rates are in no parameter group of the optimizer, and every other parameter that gets a
    gradient moves. The learning twin of the same seed moves its rates and its widths over the same steps."""
    config = _stack_config("hacn", num_layers=3, lr=0.05, batch_size=32, record_every_steps=1)
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(128, 2, generator=gen)
    y = (x[:, 0] * x[:, 1] > 0).long()  # XOR-like quadrants: something to learn
    torch.manual_seed(0)
    start = wc.build_model(wc.frozen_width_config(config), (2,))
    start_state = {k: v.clone() for k, v in start.state_dict().items()}
    frozen, out = _fit(wc.frozen_width_config(config), x, y, epochs=6)
    learning, out_l = _fit(config, x, y, epochs=6)
    c, c_l = out.curves, out_l.curves
    L, width = config["num_layers"], config["channel_mlp_dim"]
    assert len(c["awnn/widths"]) == 25  # before training and after each of the 24 steps
    assert all(ws == [width] * L for ws in c["awnn/widths"]) and combined.layer_widths(frozen) == [width] * L
    assert all(rates == c["awnn/rates"][0] for rates in c["awnn/rates"])
    assert all(torch.equal(r, start_state[f"stack.blocks.{i}.mlp.raw_rate"]) for i, r in enumerate(_raw_rates(frozen)))
    assert not any(m.raw_rate.requires_grad for m in adaptive_mlps(frozen))
    in_optimizer = {id(p) for g in param_groups(frozen, config["weight_decay"]) for p in g["params"]}
    assert not any(id(m.raw_rate) in in_optimizer for m in adaptive_mlps(frozen))
    # every other parameter trained; a_L alone feeds x_L, which the sum never reads (no gradient, no decay)
    unchanged = {n for n, p in frozen.state_dict().items() if torch.equal(p, start_state[n])}
    assert unchanged == {f"stack.blocks.{i}.mlp.raw_rate" for i in range(L)} | {f"stack.alpha.{L - 1}"}
    assert c["train_loss"][-1] < c["train_loss"][0]
    # the same steps with learn_width=True: rates and widths move
    assert any(not torch.equal(a, b) for a, b in zip(_raw_rates(learning), _raw_rates(frozen)))
    assert len({tuple(ws) for ws in c_l["awnn/widths"]}) > 1


@pytest.mark.parametrize("setting", ["stack", "mixer"])
def test_learning_and_frozen_twins_start_identical_and_part_only_through_the_rates(setting):
    """Same seed, learn_width True and False: the same weights, the same first forward pass and the same first
    loss (Eq. 13 / N, weight prior included) to the last bit. After one step of the study's trainer every
    parameter but the rates is still equal bit for bit (same gradients, same AdamW update); the rates moved in
    the learning run only. The outputs now differ, and putting the frozen run's rates back into the learning
    run makes them equal again: the two differ by the rates (and the widths they set) and nothing else."""
    if setting == "stack":
        config = _stack_config("hacn", num_layers=3, batch_size=64)
        x, y = torch.randn(64, 2, generator=torch.Generator().manual_seed(1)), torch.randint(0, 2, (64,))
    else:
        config = _mixer_config("hacn", batch_size=16)
        x = torch.randn(16, 1, 28, 28, generator=torch.Generator().manual_seed(1))
        y = torch.randint(0, 10, (16,))
    frozen_config = wc.frozen_width_config(config)
    assert config["learn_width"] is True and frozen_config["learn_width"] is False
    models = {}
    for name, c in (("learning", config), ("frozen", frozen_config)):
        torch.manual_seed(config["seed"])
        models[name] = wc.build_model(c, tuple(x.shape[1:]))
    learning, frozen = models["learning"], models["frozen"]
    a, b = learning.state_dict(), frozen.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    losses = {}
    for name, m in models.items():
        m.train()
        losses[name] = ELBOLoss(m, len(x), sigma_theta=config["sigma_theta"], per_sample=True)(m(x), y)
    assert torch.equal(learning(x), frozen(x)) and torch.equal(losses["learning"], losses["frozen"])
    assert losses["learning"] > F.cross_entropy(learning(x), y)  # the weight prior is in both losses

    learning, out_l = _fit(config, x, y, epochs=1)  # one optimizer step each (one batch an epoch)
    frozen, out_f = _fit(frozen_config, x, y, epochs=1)
    assert out_l.curves["step"][-1] == out_f.curves["step"][-1] == 1
    assert out_l.curves["train_loss"] == out_f.curves["train_loss"]  # the same first loss, through fit
    a, b = learning.state_dict(), frozen.state_dict()
    rates = {k for k in a if k.endswith("raw_rate")}
    assert len(rates) == config["num_layers"]
    assert all(torch.equal(a[k], b[k]) for k in a if k not in rates)  # weights, a_i, norms: bit for bit
    assert all(not torch.equal(a[k], b[k]) for k in rates)  # only the learning run's rates moved
    assert combined.layer_widths(learning) == combined.layer_widths(frozen)  # one small step: no resize yet
    learning.eval()
    frozen.eval()
    with torch.no_grad():
        assert not torch.allclose(learning(x), frozen(x))
        for m, raw in zip(adaptive_mlps(learning), _raw_rates(frozen)):
            m.raw_rate.copy_(raw)
        assert torch.equal(learning(x), frozen(x))


# ----------------------------------------------------------------------------- the truncation grid


@pytest.mark.parametrize("setting", ["stack", "mixer"])
def test_truncation_grid_equals_truncated_networks_built_by_hand(setting):
    """Every cell (kept fraction r, exit d) of the grid is the accuracy of the network whose adaptive MLPs
    are cut by hand to round(r D_i) neurons (AWNN Sec. 5.4) and which stops after layer d (H-ACN Sec. 3.1),
    and its parameter count is the cut network's, layers 1..d only."""
    torch.manual_seed(0)
    if setting == "stack":
        model = wc.build_model(_stack_config("hacn", num_layers=3), (2,))
        x, y = torch.randn(150, 2), torch.randint(0, 2, (150,))
        blocks = [(b, "mlp") for b in model.stack.blocks]
    else:
        model = wc.build_model(_mixer_config("hacn"), (1, 28, 28))
        x, y = torch.randn(40, 1, 28, 28), torch.randint(0, 10, (40,))
        blocks = [(b.channel, "mlp") for b in model.stack.blocks]
    for (owner, attr), w in zip(blocks, (9, 4, 13)):
        getattr(owner, attr).set_widths([w])
    fractions = (1.0, 0.5, 0.25)
    batches = [(x[:25], y[:25]), (x[25:], y[25:])]
    grid = combined.truncation_grid(model, batches, fractions)
    L = len(model.stack.blocks)
    assert grid["fractions"] == list(fractions) and len(grid["accuracy"]) == len(fractions)
    for i, r in enumerate(fractions):
        by_hand = copy.deepcopy(model)
        hand_blocks = [(b, "mlp") for b in by_hand.stack.blocks] if setting == "stack" else \
            [(b.channel, "mlp") for b in by_hand.stack.blocks]
        for owner, attr in hand_blocks:
            (width,) = getattr(owner, attr).widths()
            setattr(owner, attr, truncate(getattr(owner, attr), widths=[max(1, round(r * width))]))
        assert grid["widths"][i] == [getattr(o, a).widths()[0] for o, a in hand_blocks]
        by_hand.eval()
        with torch.no_grad():
            for depth in range(L + 1):
                correct = (by_hand(x, num_layers=depth).argmax(-1) == y).double().mean().item()
                assert grid["accuracy"][i][depth] == pytest.approx(correct, abs=1e-12), (r, depth)
        always = sum(p.numel() for n, p in by_hand.named_parameters() if not n.startswith("stack."))
        for depth in range(L + 1):
            layers = sum(p.numel() for n, p in by_hand.named_parameters()
                         if any(n.startswith(f"stack.blocks.{k}.") or n == f"stack.alpha.{k}" for k in range(depth)))
            assert grid["parameters"][i][depth] == always + layers
        assert grid["parameters"][i][L] == num_parameters(by_hand)
    assert len({tuple(row) for row in grid["accuracy"]}) > 1  # cutting the widths changes the predictions


# ----------------------------------------------------------------------------- configurations


def test_profiles_reuse_the_fixed_width_studies_configurations():
    book = wc.configs("book")
    mixers = [c for c in book if c["setting"] == "mixer" and c["learn_width"]]
    stacks = [c for c in book if c["setting"] == "stack" and c["learn_width"]]
    frozen = [c for c in book if not c["learn_width"]]
    long_hashes = {config_hash(c) for c in hm.long_configs()}
    assert len(mixers) == 18 and len(stacks) == 9 and len(book) == 18 + 6 + 9 + 9
    assert len({config_hash(c) for c in book}) == len(book)
    # every Mixer run is a hacn-mixer-long run plus the width fields: its fixed-width control
    assert all(config_hash(wc.fixed_control_config(c)) in long_hashes for c in mixers)
    # the frozen twins: the H-ACN Mixers (both tasks, seeds 0-2) and every stack run, each differing in
    # learn_width alone; the stack's twin comes right after its run
    assert wc.FROZEN_MIXER_RULES == ("hacn",)
    assert sorted(map(config_hash, frozen)) == sorted(config_hash(wc.frozen_width_config(c)) for c in mixers + stacks
                                                      if c["setting"] == "stack" or c["rule"] == "hacn")
    assert {(c["num_classes"], c["seed"]) for c in frozen if c["setting"] == "mixer"} == {
        (k, s) for k in (10, 2) for s in wc.SEEDS}
    assert all(book[i + 1] == wc.frozen_width_config(c) for i, c in enumerate(book)
               if c["setting"] == "stack" and c["learn_width"])
    assert [c["rule"] for c in wc.configs("smoke") if not c["learn_width"]] == ["hacn"]
    assert all(c["learn_width"] for c in wc.configs("paper"))
    assert {(c["rule"], c["num_classes"], c["seed"]) for c in mixers} == {
        (r, k, s) for r in wc.STUDY_RULES for k in (10, 2) for s in wc.SEEDS}
    assert all(c["epochs"] == hm.LONG_EPOCHS and c["train_subset"] is None for c in mixers)
    assert {c["alpha_mu"] for c in mixers if c["rule"] == "hacn"} == {0.25}
    for profile in ("smoke", "book", "paper"):
        for c in wc.configs(profile):
            wc.check_config(c)


def test_bad_configuration_names_the_field_and_the_allowed_values():
    mixer, stack = _mixer_config(), _stack_config()
    cases = [
        (mixer | {"setting": "tabular"}, r"setting='tabular'.*allowed: mixer, stack"),
        (mixer | {"rule": "rezero"}, r"rule='rezero'.*allowed: resnet, acn, hacn"),
        (stack | {"awnn_activation": "gelu"}, r"awnn_activation='gelu'.*allowed: relu"),
        (stack | {"dataset": "CIFAR10"}, r"dataset='CIFAR10'.*allowed: DoubleMoon, Spiral, SpiralHard"),
        (stack | {"num_classes": 10}, r"num_classes=10.*allowed: 2"),
        (stack | {"num_layers": 0}, r"num_layers=0 must be a positive integer"),
        (mixer | {"dataset": "CIFAR100"}, r"dataset='CIFAR100'.*allowed: FashionMNIST, CIFAR10"),
        (mixer | {"arch": "dense_mixer", "rule": "resnet", "alpha_mu": None}, r"arch='dense_mixer'.*allowed: mixer"),
        (mixer | {"awnn_k": 1.0}, r"awnn_k=1.0 must be in \(0, 1\)"),
        (mixer | {"sigma_theta": 0}, r"sigma_theta=0 must be None"),
        (mixer | {"truncation_fractions": [1.0, 0.0]}, r"truncation_fractions=0.0 must be a number in \(0, 1\]"),
        (mixer | {"alpha_mu": None}, r"alpha_mu=None: the rules hacn need a number"),
        (stack | {"timing_steps": 0}, r"timing_steps=0 must be a positive integer"),
        (stack | {"learn_width": 1}, r"learn_width=1 must be True .* or False"),  # 1 == True, yet not a bool
        (mixer | {"learn_width": "no"}, r"learn_width='no' must be True .* or False"),
        (mixer | {"learn_width": None}, r"learn_width=None must be True .* or False"),
    ]
    for config, message in cases:
        with pytest.raises(ValueError, match=message):
            wc.check_config(config)
    with pytest.raises(ValueError, match=r"setting='tabular'"):  # the trainer refuses before loading data
        wc.train_width_connectivity(mixer | {"setting": "tabular"}, RunContext(wc.EXPERIMENT_ID, None, False))
    with pytest.raises(ValueError, match=r"unknown configuration keys \['widht'\]"):
        wc.stack_config("hacn", 0, widht=3)
    with pytest.raises(ValueError, match=r"profile='huge'.*allowed: smoke, book, paper"):
        wc.configs("huge")
    with pytest.raises(ValueError, match=r"StackConfig.rule='hacn_code_mixer'.*allowed: plain, resnet, acn, hacn"):
        StackConfig(rule="hacn_code_mixer")
    with pytest.raises(ValueError, match=r"StackConfig.mlp='wide'.*allowed: fixed, adaptive, gated"):
        StackConfig(mlp="wide")
    with pytest.raises(ValueError, match=r"fraction=1.5 must be a number in \(0, 1\]"):
        combined.truncated_copy(ResidualMLPStack(num_layers=1), 1.5)
    with pytest.raises(ValueError, match=r"setting='stack'.*allowed: mixer"):
        wc.fixed_control_config(stack)


# ----------------------------------------------------------------------------- runs and the report

METRICS = ("test_accuracy", "final_exit_accuracy", "first_half_exit_accuracy", "best_val_accuracy", "gamma",
           "total_width", "start_total_width", "parameters", "start_parameters", "fixed_parameters",
           "seconds_per_step", "adaptive/ms_per_step", "twin/ms_per_step", "fixed/ms_per_step",
           "adaptive/ratio_to_fixed")
CURVES = ("layerwise_test_accuracy", "widths", "total_width", "rates", "final_widths", "record_step",
          "parameters_by_exit", "truncation_fractions", "truncation_accuracy", "truncation_widths",
          "truncation_parameters", "train_loss", "val_accuracy")


def _check_run(metrics, curves, config):
    L = config["num_layers"]
    assert set(METRICS) <= set(metrics) and set(CURVES) <= set(curves)
    assert len(curves["layerwise_test_accuracy"]) == L + 1
    assert metrics["final_exit_accuracy"] == pytest.approx(metrics["test_accuracy"])
    # widths: one entry per layer per record, the last record is the end of training
    assert len(curves["widths"]) == len(curves["total_width"]) == len(curves["record_step"])
    assert curves["widths"][-1] == curves["final_widths"] and len(curves["final_widths"]) == L
    assert metrics["total_width"] == sum(curves["final_widths"]) == curves["total_width"][-1]
    assert metrics["start_total_width"] == curves["total_width"][0] == L * config["channel_mlp_dim"]
    assert metrics["parameters"] == curves["parameters_by_exit"][-1] == curves["truncation_parameters"][0][-1]
    # the grid's untruncated row is the layer-wise accuracy; every row has every exit
    assert curves["truncation_fractions"] == config["truncation_fractions"]
    assert curves["truncation_accuracy"][0] == pytest.approx(curves["layerwise_test_accuracy"])
    assert all(len(row) == L + 1 for row in curves["truncation_accuracy"])
    assert curves["truncation_widths"][0] == curves["final_widths"]
    assert min(metrics[k] for k in ("adaptive/ms_per_step", "twin/ms_per_step", "fixed/ms_per_step")) > 0
    if config["rule"] == "hacn":
        assert metrics["gamma"] == pytest.approx(total_connectivity_strength(torch.tensor(curves["alpha_final"])))
        assert len(curves["alphas"]) == len(curves["record_step"]) and len(curves["alphas"][0]) == L
    else:
        assert metrics["gamma"] == {"resnet": 1.0, "acn": 0.0}[config["rule"]]


def test_smoke_runs_store_the_metrics_and_the_report_reads_them(tmp_path, monkeypatch):
    """A stack run through the catalog into a temporary store, a Mixer run (fake images) through the train
    function; both yield the metrics named, and the report's five tables read them back."""
    store = ResultsStore(tmp_path)
    stored, frozen = catalog.run(wc.EXPERIMENT_ID, "smoke", store=store, where={"setting": "stack", "rule": "hacn"},
                                 progress=False)
    assert frozen.config == wc.frozen_width_config(stored.config)
    for run in (stored, frozen):
        _check_run(run.metrics, run.curves, run.config)
    assert all(ws == frozen.curves["widths"][0] for ws in frozen.curves["widths"])  # the twin's widths stay put
    assert frozen.metrics["parameters"] == frozen.metrics["start_parameters"] == \
        stored.metrics["start_parameters"] - stored.config["num_layers"]  # less the L rates, which do not train
    assert [r.config_hash for r in catalog.stored(wc.EXPERIMENT_ID, "smoke", store=store,
                                                  where={"setting": "stack"})] == [stored.config_hash,
                                                                                    frozen.config_hash]

    monkeypatch.setattr(hm, "image_tensors", _fake_images)
    config = _mixer_config("acn", train_subset=512, batch_size=64, epochs=4, record_every_steps=4, lr=1e-2)
    out = wc.train_width_connectivity(config, RunContext(wc.EXPERIMENT_ID, tmp_path / "ckpt", progress=False))
    _check_run(out["metrics"], out["curves"], config)
    torch.manual_seed(0)
    assert out["metrics"]["fixed_parameters"] == num_parameters(hm.build_model(config, 28, 1))
    assert out["metrics"]["test_accuracy"] > 0.2  # it learns (chance: 0.1)

    mixer = RunResult(wc.EXPERIMENT_ID, config, config_hash(config), 0, out["metrics"], out["curves"])
    control_config = wc.fixed_control_config(config)
    control = RunResult(hm.LONG_ID, control_config, config_hash(control_config), 0,
                        {"test_accuracy": out["metrics"]["test_accuracy"] - 0.05, "parameters": 1000,
                         "first_half_exit_accuracy": 0.1, "seconds_per_epoch": 2.0, "steps": 20, "epochs": 2}, {})
    runs = [stored, mixer, frozen]  # the frozen twin enters question 3 only
    depth = report.width_by_depth(runs)
    assert len(depth) == 2 + 2 and set(depth["rule"]) == {"hacn", "acn"}
    row = depth[(depth["rule"] == "hacn") & (depth["layer"] == 2)].iloc[0]
    assert row["width"] == stored.curves["final_widths"][1] and row["n"] == 1
    gw = report.gamma_and_width(runs).set_index("rule")
    assert gw.loc["acn", "Gamma"] == 0.0 and gw.loc["hacn", "total width"] == stored.metrics["total_width"]
    to_fixed, to_frozen = report.against_fixed(runs, [control]).to_dict("records")  # a row per stored pairing
    assert (to_fixed["task"], to_fixed["rule"], to_fixed["control"]) == ("Fashion-MNIST, 10 classes", "acn", "fixed")
    assert to_fixed["pairs"] == 1 and to_fixed["difference (points)"] == pytest.approx(5.0)
    assert to_fixed["control parameters"] == 1000
    assert to_fixed["parameters saved (%)"] == pytest.approx(100 * (1 - out["metrics"]["parameters"] / 1000))
    assert (to_frozen["task"], to_frozen["rule"], to_frozen["control"], to_frozen["pairs"]) == \
        ("SpiralHard", "hacn", "frozen", 1)
    assert to_frozen["difference (points)"] == pytest.approx(
        100 * (stored.metrics["test_accuracy"] - frozen.metrics["test_accuracy"]))
    times = report.time_per_step(runs, [control]).set_index("rule")
    assert times.loc["hacn", "training clock, learned / frozen"] == pytest.approx(  # both trained here
        stored.metrics["seconds_per_step"] / frozen.metrics["seconds_per_step"])
    assert times.loc["hacn", "adaptive (ms)"] == stored.metrics["adaptive/ms_per_step"]
    grid = report.truncation_table(runs, "SpiralHard", "hacn")
    assert list(grid["kept width"]) == [1.0, 0.5] and grid.shape[1] == 1 + 3 + 1
    assert list(grid["exit 2"]) == pytest.approx([100 * row[2] for row in stored.curves["truncation_accuracy"]])
    html = report.show(gw.reset_index()).data  # rule ids shown as labels; one seed: no interval, explained
    assert "<td>H-ACN</td>" in html and "<td>ACN</td>" in html and "<td>hacn</td>" not in html
    assert report.MISSING_NOTE in html


def test_the_report_pairs_learning_runs_with_their_frozen_twins_by_seed_and_task():
    """Question 3 from made-up stored runs, handed over shuffled: every learning run meets the frozen twin of
    its own seed and task (not one of another seed, nor of the other Mixer task, which differs by num_classes
    alone), the differences are the means of the per-seed differences with Student-t intervals, a missing twin
    drops its seed from that comparison only, and the twins stay out of the other questions' tables."""
    book = wc.configs("book")

    def learning(setting, classes, seed):
        return next(c for c in book if c["setting"] == setting and c["rule"] == "hacn" and c["learn_width"]
                    and c["seed"] == seed and c["num_classes"] == classes)

    base = {("stack", 2): 0.90, ("mixer", 10): 0.80, ("mixer", 2): 0.95}  # far apart: a cross-task pair shows
    seeds = {("stack", 2): (0, 1, 2), ("mixer", 10): (0, 1, 2), ("mixer", 2): (0, 1)}
    no_twin = {("stack", 2, 2)}  # the stack's seed 2 has no stored twin yet

    def result(config, acc, params):
        metrics = {"test_accuracy": acc, "first_half_exit_accuracy": acc - 0.3, "parameters": params,
                   "gamma": 0.5, "total_width": 100, "start_total_width": 96}
        return RunResult(wc.EXPERIMENT_ID, config, config_hash(config), config["seed"], metrics, {})

    runs, controls = [], []
    for (setting, classes), b in base.items():
        for s in seeds[setting, classes]:
            config = learning(setting, classes, s)
            runs.append(result(config, b + 0.01 * s, 1000 + 10 * s))  # adaptive: + 1 point a seed
            if (setting, classes, s) not in no_twin:
                runs.append(result(wc.frozen_width_config(config), b - 0.02 + 0.02 * s, 1200))  # frozen: + 2
            if setting == "mixer" and classes == 10 and s < 2:
                fixed = wc.fixed_control_config(config)
                controls.append(RunResult(hm.LONG_ID, fixed, config_hash(fixed), s,
                                          {"test_accuracy": b - 0.03, "first_half_exit_accuracy": b - 0.4,
                                           "parameters": 900}, {}))
    random.Random(0).shuffle(runs)

    pairs = report.paired_frozen(runs)
    assert len(pairs) == 3 + 3 + 2 - 1
    for run, twin in pairs:
        assert run.config["learn_width"] and not twin.config["learn_width"]
        assert (run.seed, report.task_of(run.config), run.config["rule"]) == \
            (twin.seed, report.task_of(twin.config), twin.config["rule"])
    t95 = {2: 12.706204736174698, 3: 4.302652729749464}  # Student-t 97.5% quantiles, 1 and 2 degrees of freedom
    table = report.against_fixed(runs, controls)
    assert list(zip(table["task"], table["control"])) == [  # one row per stored pairing, the twin first
        ("Fashion-MNIST, 10 classes", "frozen"), ("Fashion-MNIST, 10 classes", "fixed"),
        ("Fashion-MNIST, 2 classes", "frozen"), ("SpiralHard", "frozen")]  # no fixed-width control: no row
    assert not table.isna().any().any()  # no empty cell: every interval has at least 2 pairs here
    frozen_rows = table[table["control"] == "frozen"].set_index("task")
    for (setting, classes), b in base.items():
        row = frozen_rows.loc[report.task_of(learning(setting, classes, 0))]
        paired = [s for s in seeds[setting, classes] if (setting, classes, s) not in no_twin]
        diffs = [100 * ((b + 0.01 * s) - (b - 0.02 + 0.02 * s)) for s in paired]  # 2 - s points
        assert row["pairs"] == len(paired)
        assert row["difference (points)"] == pytest.approx(sum(diffs) / len(diffs))
        sd = math.sqrt(sum((d - sum(diffs) / len(diffs)) ** 2 for d in diffs) / (len(diffs) - 1))
        assert row["difference (points) ±95%"] == pytest.approx(t95[len(diffs)] * sd / math.sqrt(len(diffs)))
        assert row["middle exit difference (points)"] == pytest.approx(sum(diffs) / len(diffs))
        assert row["control acc (%)"] == pytest.approx(100 * (b - 0.02) + 2 * sum(paired) / len(paired))
        assert row["learned acc (%)"] == pytest.approx(100 * b + sum(paired) / len(paired))  # the paired runs only
        assert row["control parameters"] == 1200
        learned = 1000 + 10 * sum(paired) / len(paired)
        assert row["learned parameters"] == pytest.approx(learned)
        assert row["parameters saved (%)"] == pytest.approx(100 * (1 - learned / 1200))
    ten = table[(table["task"] == "Fashion-MNIST, 10 classes") & (table["control"] == "fixed")].iloc[0]
    assert ten["pairs"] == 2 and ten["difference (points)"] == pytest.approx(3.5)  # 3 + s points, s = 0, 1
    assert ten["control acc (%)"] == pytest.approx(77.0) and ten["control parameters"] == 900
    assert ten["learned acc (%)"] == pytest.approx(80.5)  # seeds 0 and 1 only: the seeds with a control
    html = report.show(report.against_fixed_part(table, "accuracy"), note=report.CONTROLS_NOTE).data
    assert "<td>frozen-width twin</td>" in html and "<td>fixed-width run</td>" in html
    halves = [report.against_fixed_part(table, part) for part in ("accuracy", "parameters")]
    assert set(halves[0].columns) | set(halves[1].columns) == set(table.columns)  # together: the whole table
    assert "learned parameters" not in halves[0] and "difference (points)" not in halves[1]
    with pytest.raises(ValueError, match="part='time'.*accuracy"):
        report.against_fixed_part(table, "time")
    # the twins stay out of questions 1, 2 and 4: one cell per task, counting the learning runs only
    gw = report.gamma_and_width(runs).set_index("task")
    assert gw.loc["SpiralHard", "n"] == 3 and gw.loc["Fashion-MNIST, 2 classes", "n"] == 2
    assert "frozen" in report.CONTROLS_NOTE and "activation" in report.CONTROLS_NOTE
