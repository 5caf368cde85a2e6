"""Tests for hacn_core.engine.optim: parameter groups by role, optimizers, schedules."""

from __future__ import annotations

import copy
import math

import pytest
import torch
from torch import nn

from hacn_core.engine.optim import (
    DEFAULT_NO_DECAY_ROLES,
    LRSchedule,
    build_optimizer,
    decay_assignment,
    param_groups,
)
from hacn_core.engine.roles import tag
from hacn_core.engine.training import TrainConfig, optimizer_for, schedule_for


class RoleNet(nn.Module):
    """One parameter of every role."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 3)  # weight + bias
        self.ln = nn.LayerNorm(3)  # norm (weight and bias both owned by a norm layer)
        self.bn = nn.BatchNorm1d(3)
        self.k = tag(nn.Parameter(torch.ones(())), "gate")
        self.a = tag(nn.Parameter(torch.full((), 0.25)), "mixing")
        self.s = tag(nn.Parameter(torch.full((), 0.05)), "norm_gain")
        self.nu = tag(nn.Parameter(torch.full((), 0.1)), "rate")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(self.ln(self.lin(x))) * self.k * self.a * self.s * self.nu


EXPECTED_ROLES = {
    "lin.weight": "weight", "lin.bias": "bias", "ln.weight": "norm", "ln.bias": "norm",
    "bn.weight": "norm", "bn.bias": "norm", "k": "gate", "a": "mixing", "s": "norm_gain", "nu": "rate",
}


def _group_of(opt: torch.optim.Optimizer, model: nn.Module) -> dict[str, float]:
    by_id = {id(p): g["weight_decay"] for g in opt.param_groups for p in g["params"]}
    return {n: by_id[id(p)] for n, p in model.named_parameters()}


def test_default_groups_decay_only_plain_weights():
    model = RoleNet()
    table = decay_assignment(model)
    assert {n: r for n, (r, _) in table.items()} == EXPECTED_ROLES
    assert {n for n, (_, d) in table.items() if d} == {"lin.weight"}
    opt = optimizer_for(model, TrainConfig(epochs=1, batch_size=1, lr=0.1, weight_decay=0.5))
    wd = _group_of(opt, model)
    assert wd == {n: (0.5 if n == "lin.weight" else 0.0) for n in EXPECTED_ROLES}
    assert [g["name"] for g in opt.param_groups] == ["decay", "no_decay"]


def test_gate_decay_ablation_puts_k_into_decay():
    """Residual gates' "k decay" ablation: k (role gate) decays, the rest as default."""
    model = RoleNet()
    roles = tuple(r for r in DEFAULT_NO_DECAY_ROLES if r != "gate")
    cfg = TrainConfig(epochs=1, batch_size=1, lr=0.1, weight_decay=0.5, no_decay_roles=roles)
    wd = _group_of(optimizer_for(model, cfg), model)
    assert {n for n, v in wd.items() if v > 0} == {"lin.weight", "k"}


@pytest.mark.parametrize("role", ["gate", "mixing", "norm_gain", "rate", "norm", "bias", "weight"])
def test_each_role_can_be_excluded_alone(role):
    model = RoleNet()
    groups = param_groups(model, 0.1, (role,))
    no_decay = {id(p) for g in groups if g["weight_decay"] == 0 for p in g["params"]}
    names = {n for n, p in model.named_parameters() if id(p) in no_decay}
    assert names == {n for n, r in EXPECTED_ROLES.items() if r == role}


def test_adamw_decays_exactly_the_decay_group():
    """With zero gradients AdamW only applies decoupled decay: p <- p (1 - lr wd)."""
    model = RoleNet()
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    opt = optimizer_for(model, TrainConfig(epochs=1, batch_size=1, lr=0.1, weight_decay=0.5))
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    opt.step()
    for n, p in model.named_parameters():
        factor = 1 - 0.1 * 0.5 if n == "lin.weight" else 1.0
        torch.testing.assert_close(p.detach(), before[n] * factor)


def test_zero_decay_is_one_group_and_unknown_role_is_an_error():
    assert len(param_groups(RoleNet(), 0.0)) == 1
    with pytest.raises(ValueError, match="no_decay_roles.*allowed: gate, mixing"):
        param_groups(RoleNet(), 0.1, ("gates",))


def test_optimizer_kinds():
    model = nn.Linear(2, 2)
    cfg = TrainConfig(epochs=1, batch_size=1, lr=0.1)
    assert isinstance(optimizer_for(model, cfg.replace(optimizer="nadam")), torch.optim.NAdam)
    assert type(optimizer_for(model, cfg.replace(optimizer="adam"))) is torch.optim.Adam
    assert type(optimizer_for(model, cfg)) is torch.optim.AdamW


def test_fused_switch():
    model = nn.Linear(2, 2)
    cfg = TrainConfig(epochs=1, batch_size=1, lr=0.1)
    assert not optimizer_for(model, cfg, "cpu").defaults.get("fused")  # auto: not on CPU
    assert optimizer_for(model, cfg.replace(fused=True), "cpu").defaults["fused"] is True
    assert optimizer_for(model, cfg, "cuda").defaults["fused"] is True  # auto: fused on CUDA
    assert not optimizer_for(model, cfg.replace(fused=False), "cuda").defaults.get("fused")
    assert not optimizer_for(model, cfg.replace(optimizer="nadam"), "cuda").defaults.get("fused")


@pytest.mark.parametrize("name, extra", [("adamw", {}), ("adam", {}), ("nadam", {}),
                                         ("sgd", {"momentum": 0.9, "nesterov": True})])
def test_cpu_default_is_the_multi_tensor_kernel_and_equals_the_loop_bit_for_bit(name, extra):
    """On a CPU the trainer's optimizer is PyTorch's foreach implementation: the same numbers as the
    one-tensor-at-a-time loop, to the last bit, over several steps with decayed and undecayed groups. NAdam's
    foreach rounds differently (in the last bits), so NAdam is the loop itself."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 7), nn.LayerNorm(7), nn.Linear(7, 3))
    twin = copy.deepcopy(model)
    cfg = TrainConfig(epochs=1, batch_size=1, lr=0.05, optimizer=name, weight_decay=0.1, **extra)
    opt = optimizer_for(model, cfg, "cpu")
    assert opt.defaults["foreach"] is (name != "nadam") and not opt.defaults.get("fused")
    loop = type(opt)([{**g, "params": [dict(twin.named_parameters())[n] for n in names], "foreach": False}
                      for g, names in zip(opt.param_groups, _group_names(model, opt))], foreach=False)
    for _ in range(5):
        x = torch.randn(4, 5)
        for m, o in ((model, opt), (twin, loop)):
            o.zero_grad()
            m(x).square().sum().backward()
            o.step()
    for (n, a), b in zip(model.named_parameters(), twin.parameters()):
        assert torch.equal(a, b), n


def _group_names(model: nn.Module, opt: torch.optim.Optimizer) -> list[list[str]]:
    """The parameter names of each of ``opt``'s groups."""
    names = {id(p): n for n, p in model.named_parameters()}
    return [[names[id(p)] for p in g["params"]] for g in opt.param_groups]


def test_sgd_nesterov_step_matches_formula():
    """Two SGD-Nesterov steps against the hand-written rule v = m v + g, p -= lr (g + m v)."""
    torch.manual_seed(0)
    p = nn.Parameter(torch.randn(4))
    model = nn.Module()
    model.p = p
    opt = optimizer_for(model, TrainConfig(epochs=1, batch_size=1, lr=0.1, optimizer="sgd", momentum=0.9,
                                             nesterov=True))
    ref, v = p.detach().clone(), torch.zeros(4)
    for g in (torch.randn(4), torch.randn(4)):
        p.grad = g.clone()
        opt.step()
        v = 0.9 * v + g
        ref = ref - 0.1 * (g + 0.9 * v)
        torch.testing.assert_close(p.detach(), ref)


def test_nadam_first_step_matches_formula():
    """NAdam (Adam with Nesterov momentum), first step, psi = 0.004:
    mu_t = b1 (1 - 0.5 * 0.96^(t psi));
    p -= lr [mu_2 m / (1 - mu_1 mu_2) + (1 - mu_1) g / (1 - mu_1)] / (sqrt(v_hat) + eps)."""
    p = nn.Parameter(torch.tensor([1.0, -2.0]))
    model = nn.Module()
    model.p = p
    opt = optimizer_for(model, TrainConfig(epochs=1, batch_size=1, lr=0.01, optimizer="nadam"))
    g = torch.tensor([0.5, -0.25])
    p.grad = g.clone()
    opt.step()
    b1, b2, psi = 0.9, 0.999, 0.004
    mu1 = b1 * (1 - 0.5 * 0.96 ** (1 * psi))
    mu2 = b1 * (1 - 0.5 * 0.96 ** (2 * psi))
    m, v = (1 - b1) * g, (1 - b2) * g * g
    v_hat = v / (1 - b2)
    update = (mu2 * m / (1 - mu1 * mu2) + (1 - mu1) * g / (1 - mu1)) / (v_hat.sqrt() + 1e-8)
    torch.testing.assert_close(p.detach(), torch.tensor([1.0, -2.0]) - 0.01 * update)


# ----------------------------------------------------------------------------- schedules


def _sched(**kw) -> LRSchedule:
    base = dict(epochs=10, batch_size=1, lr=1.0)
    base.update(kw)
    return schedule_for(TrainConfig(**base), steps_per_epoch=10)  # 100 steps


def test_constant_with_warmup():
    s = _sched(warmup_epochs=2)  # 20 warmup steps
    assert s.lr(0) == pytest.approx(1 / 20)
    assert s.lr(9) == pytest.approx(10 / 20)
    assert s.lr(19) == 1.0  # warmup ends at step W - 1
    assert s.lr(99) == 1.0


def test_cosine_with_warmup_known_points():
    s = _sched(schedule="cosine", warmup_epochs=2, min_lr=0.1)
    assert s.lr(19) == pytest.approx(1.0)  # warmup end
    assert s.lr(20) == pytest.approx(1.0)  # cosine start
    assert s.lr(60) == pytest.approx((1.0 + 0.1) / 2)  # midpoint of the 80 cosine steps
    expected_last = 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * 79 / 80))
    assert s.lr(99) == pytest.approx(expected_last)
    assert all(s.lr(t) >= s.lr(t + 1) for t in range(19, 99))


def test_multistep_epochs_and_fractions():
    s = _sched(schedule="multistep", milestones=(5, 7.5), gamma=0.1)
    assert [s.lr(t) for t in (49, 50, 74, 75, 99)] == pytest.approx([1, 0.1, 0.1, 0.01, 0.01])
    f = _sched(schedule="multistep", milestones=(0.5, 0.75), milestone_unit="fraction", gamma=0.2)
    assert [f.lr(t) for t in (49, 50, 74, 75)] == pytest.approx([1, 0.2, 0.2, 0.04])


def test_plateau_reduces_after_patience_like_torch():
    s = _sched(schedule="plateau", plateau_patience=2, gamma=0.5)
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=1.0)
    ref = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, mode="min", factor=0.5, patience=2)
    for value in [1.0, 0.9, 0.9, 0.9, 0.9, 0.95, 0.8, 0.8, 0.8, 0.8, 0.8]:
        s.observe(value)
        ref.step(value)
        assert s.lr(50) == pytest.approx(opt.param_groups[0]["lr"])
    assert s.lr(50) == pytest.approx(0.25)
    state = s.state_dict()
    fresh = _sched(schedule="plateau", plateau_patience=2, gamma=0.5)
    fresh.load_state_dict(state)
    assert fresh.lr(50) == s.lr(50) and fresh.bad_evals == s.bad_evals


def test_build_optimizer_takes_plain_arguments():
    """The optimizer needs no TrainConfig (the engine's optim module imports nothing of the loop)."""
    model = nn.Linear(3, 2)
    opt = build_optimizer(model, "sgd", lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-4)
    assert type(opt) is torch.optim.SGD and opt.defaults["nesterov"] and opt.defaults["momentum"] == 0.9
    assert {g["weight_decay"] for g in opt.param_groups} == {1e-4, 0.0}  # the bias is kept out of decay
    with pytest.raises(ValueError, match="optimizer='lion' is unknown; allowed: adamw, adam, nadam, sgd"):
        build_optimizer(model, "lion", lr=0.1)
