"""Residual gates on CIFAR (Sec. 3.2): augmentation, recipes, k decay, parameter counts, configs, report."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from hacn_core import gates
from hacn_core.engine import augment
from hacn_core.engine.data import missing_files
from hacn_core.gates.studies import cifar as gc
from hacn_core.gates.studies import cifar_report as gcr
from hacn_core.engine.optim import param_groups
from hacn_core.engine.training import optimizer_for, schedule_for
from hacn_core.paper_items import PAPER_ITEMS
from hacn_core.engine.results import RunContext


def _reference_crop_flip(x: torch.Tensor, pad: int, seed: int) -> torch.Tensor:
    """Hand-written per-image crop and flip, drawing the random numbers in the same order."""
    gen = torch.Generator().manual_seed(seed)
    b, _, h, w = x.shape
    oy = torch.randint(0, 2 * pad + 1, (b,), generator=gen)
    ox = torch.randint(0, 2 * pad + 1, (b,), generator=gen)
    mirrored = torch.rand(b, generator=gen) < 0.5
    padded = F.pad(x, (pad, pad, pad, pad))
    out = []
    for i in range(b):
        crop = padded[i, :, oy[i]:oy[i] + h, ox[i]:ox[i] + w]
        out.append(crop.flip(-1) if mirrored[i] else crop)
    return torch.stack(out)


def test_crop_flip_matches_per_image_reference():
    x = torch.rand(64, 3, 32, 32)
    out = augment.random_crop_flip(x, 4, True, generator=torch.Generator().manual_seed(7))
    assert out.shape == x.shape and out.is_contiguous()
    assert torch.equal(out, _reference_crop_flip(x, 4, seed=7))


def test_crop_pads_with_zeros_and_keeps_the_image():
    x = torch.ones(200, 1, 32, 32)
    gen = torch.Generator().manual_seed(0)
    out = augment.random_crop_flip(x, 4, False, generator=gen)
    # Each crop shows a (32 - |dy|) x (32 - |dx|) window of the image and zeros elsewhere.
    gen = torch.Generator().manual_seed(0)
    dy = torch.randint(0, 9, (200,), generator=gen) - 4
    dx = torch.randint(0, 9, (200,), generator=gen) - 4
    ones = out.sum(dim=(1, 2, 3))
    assert torch.equal(ones, ((32 - dy.abs()) * (32 - dx.abs())).float())
    assert set(out.unique().tolist()) == {0.0, 1.0}


def test_flip_is_a_mirror_and_happens_half_the_time():
    x = torch.rand(2000, 1, 8, 8)
    out = augment.random_crop_flip(x, 0, True, generator=torch.Generator().manual_seed(1))
    same = (out == x).flatten(1).all(1)
    mirrored = (out == x.flip(-1)).flatten(1).all(1)
    assert bool((same ^ mirrored).all())  # every image is itself or its exact left-right mirror
    assert 0.45 < mirrored.float().mean().item() < 0.55
    assert torch.equal(augment.random_crop_flip(x, 0, False), x)  # no pad, no flip: identity


def test_augmentation_is_seeded():
    x = torch.rand(16, 3, 32, 32)
    a = augment.random_crop_flip(x, generator=torch.Generator().manual_seed(3))
    b = augment.random_crop_flip(x, generator=torch.Generator().manual_seed(3))
    c = augment.random_crop_flip(x, generator=torch.Generator().manual_seed(4))
    assert torch.equal(a, b) and not torch.equal(a, c)
    torch.manual_seed(5)
    d = augment.random_crop_flip(x)
    torch.manual_seed(5)
    assert torch.equal(d, augment.random_crop_flip(x))  # the global RNG (checkpointed by the trainer)
    with pytest.raises(ValueError, match="pad"):
        augment.random_crop_flip(x, pad=-1)


def test_forward_hook_augments_only_in_training_and_normalises():
    mean, std = torch.tensor([0.5]), torch.tensor([0.25])
    hook = augment.AugmentNormalize(mean, std)
    seen = []
    model = torch.nn.Module()
    model.forward = lambda x: seen.append(x) or x.mean(dim=(1, 2, 3))  # type: ignore[method-assign]
    x, y = torch.rand(8, 1, 32, 32), torch.zeros(8)
    model.eval()
    hook(model, (x, y))
    assert torch.equal(seen[-1], (x - 0.5) / 0.25)
    model.train()
    hook(model, (x, y))
    assert not torch.equal(seen[-1], (x - 0.5) / 0.25)
    X = torch.rand(100, 3, 4, 4)
    m, s = gc.channel_stats(X, "mean")
    assert torch.allclose(m, X.mean(dim=(0, 2, 3))) and torch.equal(s, torch.ones(3))
    with pytest.raises(ValueError, match="normalize"):
        gc.channel_stats(X, "zca")


def test_wrn_schedule_values_at_the_milestones():
    cfg = gc.make_config("CIFAR10", "wrn-4-10-dropout", "gated", 0)
    spe = 391  # 50,000 / 128
    sched = schedule_for(gc.train_config(cfg), spe)
    total = 200 * spe
    values = [sched.lr(s) for s in (0, round(0.3 * total) - 1, round(0.3 * total), round(0.6 * total),
                                    round(0.8 * total), total - 1)]
    assert values == pytest.approx([0.1, 0.1, 0.02, 0.004, 0.0008, 0.0008])
    res = gc.make_config("CIFAR10", "resnet5", "original", 0)
    sched = schedule_for(gc.train_config(res), spe)
    total = 164 * spe
    assert [sched.lr(s) for s in (round(0.5 * total) - 1, round(0.5 * total), round(0.75 * total))] == \
        pytest.approx([0.1, 0.01, 0.001])
    tc = gc.train_config(cfg)
    assert (tc.optimizer, tc.nesterov, tc.momentum, tc.batch_size, tc.weight_decay) == ("sgd", True, 0.9, 128, 5e-4)
    assert gc.train_config(res).weight_decay == 1e-4


def test_k_decay_puts_the_gates_in_the_decayed_group():
    def groups(variant):
        cfg = gc.make_config("FashionMNIST32", "mini-wrn", variant, 0)
        model = gc.build_model(cfg)
        opt = optimizer_for(model, gc.train_config(cfg))
        gate_ids = {id(p) for _, p in gates.gate_parameters(model)}
        bn_ids = {id(m.weight) for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)}
        decayed = {id(p) for g in opt.param_groups if g["weight_decay"] > 0 for p in g["params"]}
        return gate_ids, bn_ids, decayed, opt

    gate_ids, bn_ids, decayed, opt = groups("gated_kdecay")
    assert len(gate_ids) == 6 and gate_ids <= decayed
    assert {g["weight_decay"] for g in opt.param_groups if g["weight_decay"] > 0} == {5e-4}
    gate_ids, bn_ids, decayed, _ = groups("gated")
    assert not gate_ids & decayed
    assert bn_ids <= decayed  # the reference Torch recipes decay BatchNorm gains too (decay_norm_bias=True)
    cfg = gc.make_config("FashionMNIST32", "mini-wrn", "gated", 0, decay_norm_bias=False)
    names = {g["name"]: g["roles"] for g in param_groups(gc.build_model(cfg), 5e-4, gc.no_decay_roles(cfg))}
    assert names == {"decay": ["weight"], "no_decay": ["bias", "gate", "norm"]}


def test_wrn_4_10_parameter_count_and_gates():
    torch.manual_seed(0)
    cfg = gc.make_config("CIFAR10", "wrn-4-10", "original", 0)
    with torch.device("meta"):  # shapes only: no 36.5M-weight initialisation
        plain = gc.build_model(cfg)
        gated = gc.build_model(cfg | {"variant": "gated"})
    n_plain = sum(p.numel() for p in plain.parameters())
    n_gated = sum(p.numel() for p in gated.parameters())
    assert n_plain == 36_479_194  # Table 6: 36.5M
    assert round(n_plain / 1e6, 1) == PAPER_ITEMS_BY_ID["gates/table6/wrn-4-10-parameters"].paper_value
    assert n_gated - n_plain == 12 and len(gates.gate_parameters(gated)) == 12  # "adds 12 parameters"
    assert gc.dimension_changing_blocks(gated) == [1, 5, 9]  # the blocks of Fig. 6
    with torch.device("meta"):
        resnet = gc.build_model(gc.make_config("CIFAR10", "resnet5", "gated", 0))
    assert len(gates.gate_parameters(resnet)) == 15  # Table 3: "adds 15 parameters"
    assert gc.dimension_changing_blocks(resnet) == [6, 11]  # ResNet: stem width = first stage width


PAPER_ITEMS_BY_ID = {it.id: it for it in PAPER_ITEMS}


def test_every_own_table_cell_is_linked_and_only_at_the_paper_setting():
    exp = gc.EXPERIMENT
    linked = {link.item for link in exp.links}
    assert linked <= set(PAPER_ITEMS_BY_ID)
    own = {i for i in PAPER_ITEMS_BY_ID if i.startswith(("gates/table3/", "gates/table4/", "gates/table5/"))}
    own |= {"gates/table6/c10-wrn-4-10", "gates/table6/c100-wrn-4-10", "gates/table6/c10-wide-gated-resnet-4-10-dropout",
            "gates/table6/c100-wide-gated-resnet-4-10-dropout", "gates/table6/wrn-4-10-parameters",
            "gates/fig6/k-per-block-wrn", "gates/fig7/wrn-train-test-curves"}
    assert linked == own
    for link in exp.links:  # values agree with the registry and no book run can match
        assert link.where["dataset"] in ("CIFAR10", "CIFAR100")
        if link.metric == "test_error":
            cell = (link.where["dataset"], link.where["model"], link.where["variant"])
            assert gcr.paper_value(*cell) == PAPER_ITEMS_BY_ID[link.item].paper_value
    paper = exp.runs("paper")
    assert len(paper) == 66 and {c["seed"] for c in paper} == {0, 1, 2}
    assert {(c["model"] == "resnet5", c["epochs"]) for c in paper} == {(True, 164), (False, 200)}
    book = exp.runs("book")
    assert len(book) == 12 and {c["dataset"] for c in book} == {"FashionMNIST32"}
    assert {c["seed"] for c in book} == {0, 1}


def test_config_errors_name_the_field():
    with pytest.raises(ValueError, match=r"variant='gated_k'.*original, gated, gated_kdecay"):
        gc.make_config("CIFAR10", "wrn-4-10", "gated_k", 0)
    with pytest.raises(ValueError, match=r"dataset='SVHN'.*CIFAR10"):
        gc.make_config("SVHN", "wrn-4-10", "gated", 0)
    with pytest.raises(ValueError, match=r"model='wrn-28-10'.*wrn-4-10"):
        gc.make_config("CIFAR10", "wrn-28-10", "gated", 0)
    with pytest.raises(ValueError, match=r"unknown configuration keys \['lr_decay'\]"):
        gc.make_config("CIFAR10", "wrn-4-10", "gated", 0, lr_decay=0.2)
    with pytest.raises(ValueError, match=r"widths=\[8, 16\]"):
        gc.make_config("CIFAR10", "wrn-4-10", "gated", 0, widths=[8, 16])
    with pytest.raises(ValueError, match=r"normalize='zca'.*mean, mean_std"):
        gc.make_config("CIFAR10", "wrn-4-10", "gated", 0, normalize="zca")
    with pytest.raises(ValueError, match=r"train_subset=0"):
        gc.make_config("FashionMNIST32", "mini-wrn", "gated", 0, train_subset=0)


def test_k_pattern_reads_fig6():
    k = [0.2, 1.0, 0.3, 1.2, 0.4, 2.0]
    out = gc.k_pattern(k, [1, 3, 5])
    assert out["k_dim_change_mean"] == pytest.approx(0.3) and out["k_other_mean"] == pytest.approx(1.4)
    assert out["k_dim_change_gap"] == pytest.approx(1.1) and out["k_last_is_max"] == 1.0
    with pytest.raises(ValueError):
        gc.k_pattern(k, [1, 2, 3, 4, 5, 6])


@pytest.mark.skipif(bool(missing_files("FashionMNIST")), reason="Fashion-MNIST is not in the data root")
def test_one_tiny_run_records_curves_and_gates(tmp_path):
    cfg = gc.make_config("FashionMNIST32", "mini-wrn", "gated", 0, epochs=1, train_subset=128, curve_subset=64,
                         test_subset=128)
    torch.set_num_threads(1)
    out = gc.train_gates_cifar(cfg, RunContext(gc.EXPERIMENT_ID, tmp_path, progress=False))
    m, c = out["metrics"], out["curves"]
    assert m["n_gates"] == 6 and len(c["k_per_block"]) == 6 and c["dim_change_blocks"] == [1, 3, 5]
    assert [len(h) for h in c["k_history"]] == [2] * 6 and all(h[0] == 1.0 for h in c["k_history"])
    assert len(c["test_error"]) == len(c["train_error"]) == 2 and len(c["train_loss"]) == 1
    assert m["mean_k"] == pytest.approx(sum(c["k_per_block"]) / 6)
    assert 0.0 <= m["test_error"] <= 1.0 and m["parameters"] == 43_836


def test_cost_table_reads_wall_time_off_the_runs():
    from hacn_core.engine.results import RunResult, config_hash

    runs = []
    for seed, seconds in ((0, 120.0), (1, 180.0)):
        config = gc.smoke_configs()[0] | {"seed": seed}
        runs.append(RunResult(gc.EXPERIMENT_ID, config, config_hash(config), seed, {"wall_time_s": seconds}))
    table = gcr.cost_table(runs)
    assert table.iloc[0]["runs"] == 2 and table.iloc[0]["minutes per run"] == 2.5
    assert table.iloc[-1]["network"] == "all" and table.iloc[-1]["minutes in all"] == 5.0


def test_table_names_read_as_the_paper_writes_them():
    from hacn_core.gates.studies.cifar_report import _table_names

    assert _table_names(["gates/table4/x", "gates/table3/y", "gates/table3/z"]) == "Table 3, Table 4"
