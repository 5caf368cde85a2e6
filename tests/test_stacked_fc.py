"""The stacked engine of the MNIST gate study (``hacn_core.models.stacked_fc``).

Equivalence with the networks trained one by one (Residual Gates Sec. 3.1 / 2.2
layer rules), the round trip of the weights, resumption, and bad input.
"""

from __future__ import annotations

import contextlib
import copy

import pytest
import torch
import torch.nn.functional as F

from hacn_core import catalog
from hacn_core.engine.results import run_or_load
from hacn_core.engine.training import NonFiniteLossError, load_checkpoint
from hacn_core.gates.studies import mnist as gm
from hacn_core.gates.studies import mnist_report as gr
from hacn_core.models.fc import KINDS, mnist_fc
from hacn_core.models.stacked_fc import StackedFCNet
from hacn_core.engine.results import ResultsStore

WIDTH, FEATURES, CLASSES, DEPTH = 8, 12, 5, 4


def _members(dtype: torch.dtype = torch.float32) -> list:
    """One network of each kind at depth 4, with gates moved off 1 so g(k) matters."""
    out = []
    for i, kind in enumerate(KINDS):
        torch.manual_seed(i)
        m = mnist_fc(kind, DEPTH, WIDTH, in_features=FEATURES, num_classes=CLASSES).to(dtype)
        with torch.no_grad():
            for name, p in m.named_parameters():
                if name.endswith(".k"):
                    p.fill_(0.6 + 0.1 * i)
        out.append(m)
    return out


def _batches(steps: int, dtype: torch.dtype) -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(0)
    return [(torch.randn(len(KINDS), 16, FEATURES, generator=g, dtype=dtype),
             torch.randint(0, CLASSES, (len(KINDS), 16), generator=g)) for _ in range(steps)]


def test_nadam_steps_match_members_trained_one_by_one_float64():
    singles, stacked = _members(torch.float64), StackedFCNet(_members(torch.float64))
    opts = [torch.optim.NAdam(m.parameters(), lr=0.01) for m in singles]
    opt = torch.optim.NAdam(stacked.parameters(), lr=0.01)
    for x, y in _batches(6, torch.float64):
        for m, o, xs, ys in zip(singles, opts, x, y):
            o.zero_grad()
            F.cross_entropy(m(xs), ys).backward()
            o.step()
        opt.zero_grad()
        stacked.member_losses(stacked(x), y).sum().backward()
        opt.step()
    stacked.eval()
    x_test = torch.randn(len(KINDS), 10, FEATURES, dtype=torch.float64)
    logits = stacked(x_test)
    for s, (member, single) in enumerate(zip(copy.deepcopy(stacked).write_back(), singles)):
        single.eval()
        torch.testing.assert_close(logits[s], single(x_test[s]), rtol=1e-6, atol=1e-6)
        ref = single.state_dict()
        for key, value in member.state_dict().items():  # weights, gates, BatchNorm statistics
            torch.testing.assert_close(value, ref[key], rtol=1e-6, atol=1e-6, msg=f"{KINDS[s]}: {key}")


def test_forward_and_gradients_at_init_match_float32():
    singles, stacked = _members(), StackedFCNet(_members())
    (x, y), = _batches(1, torch.float32)
    stacked.member_losses(stacked(x), y).sum().backward()
    for s, single in enumerate(singles):
        F.cross_entropy(single(x[s]), y[s]).backward()
        torch.testing.assert_close(stacked.head_weight.grad[s], single.head.weight.grad, rtol=1e-4, atol=1e-6)
        torch.testing.assert_close(stacked.stem_weight.grad[s], single.stem.weight.grad, rtol=1e-4, atol=1e-6)
        gates = [p.grad for name, p in single.named_parameters() if name.endswith(".k")]
        rows = {"gated_plain": slice(None), "gated_resnet": slice(1, None, 2)}.get(KINDS[s])
        if rows is None:
            assert torch.all(stacked.k.grad[:, s] == 0)  # ungated members leave their k entries alone
        else:
            torch.testing.assert_close(stacked.k.grad[rows, s], torch.stack(gates), rtol=1e-4, atol=1e-6)


def test_write_back_without_training_is_the_identity():
    members = _members()
    before = [copy.deepcopy(m.state_dict()) for m in members]
    for member, ref in zip(StackedFCNet(members).write_back(), before):
        for key, value in member.state_dict().items():
            assert torch.equal(value, ref[key]), key


def test_layer_rule_coefficients_per_kind():
    stacked = StackedFCNet(_members())
    a, b, c = stacked.coefficients()
    g = {s: 0.6 + 0.1 * s for s in range(4)}
    plain, resnet, gated_plain, gated_resnet = range(4)
    assert torch.equal(a[:, plain], torch.ones(DEPTH)) and torch.equal(b[:, plain], torch.zeros(DEPTH))
    assert c[:, resnet].tolist() == [0, 1, 0, 1]  # the second layer of each block adds the block's input
    torch.testing.assert_close(a[:, gated_plain], torch.full((DEPTH,), g[gated_plain]))
    torch.testing.assert_close(b[:, gated_plain], torch.full((DEPTH,), 1 - g[gated_plain]))
    torch.testing.assert_close(a[:, gated_resnet], torch.tensor([1, g[gated_resnet], 1, g[gated_resnet]]))
    assert stacked.member_gates(gated_resnet) == pytest.approx([g[gated_resnet]] * 2)
    assert stacked.member_gates(plain) == []


def test_bad_input_errors():
    with pytest.raises(ValueError, match="depth"):
        StackedFCNet([mnist_fc("plain", 2, WIDTH), mnist_fc("plain", 4, WIDTH)])
    with pytest.raises(ValueError, match="stem='dot_bn_relu'.*allowed: linear"):
        StackedFCNet([mnist_fc("plain", 2, WIDTH, stem="dot_bn_relu")])
    with pytest.raises(ValueError, match="members"):
        StackedFCNet([])
    with pytest.raises(ValueError, match=r"x: expected shape \(S=4"):
        StackedFCNet(_members())(torch.zeros(3, 2, FEATURES))


def _tiny(kind: str, seed: int = 0, **overrides):
    return gm.make_config(kind, 2, seed, epochs=2, train_subset=256, **overrides)


@pytest.fixture(scope="module")
def stored_pair(tmp_path_factory):
    """The tiny study trained by both engines into two stores."""
    roots = {name: tmp_path_factory.mktemp(name) for name in ("single", "stacked")}
    configs = [_tiny(k) for k in KINDS]
    for name, root in roots.items():
        store = ResultsStore(root)
        for config in configs if name == "single" else []:
            run_or_load(gm.EXPERIMENT_ID, config, gm.train_gates_mnist, store=store, progress=False)
        if name == "stacked":
            from hacn_core.engine.results import code_version, pinned_threads, store_trained

            with pinned_threads(1):  # as the registry's stacked path runs (one thread: the single runs' hash)
                outs = gm.train_gates_mnist_stacked(configs, root / "ckpt", progress=False)
            for c, out in zip(configs, outs):
                with pinned_threads(1):
                    store_trained(gm.EXPERIMENT_ID, c, out, store=store, profile="smoke", version=code_version(),
                                  wall_s=60.0, engine={"name": "stacked", "members": len(configs),
                                                       "member_hashes": ["h1", "h2", "h3", "h4"]})
    return {name: [ResultsStore(root).load(gm.EXPERIMENT_ID, c) for c in configs] for name, root in roots.items()}


def test_stacked_results_have_the_single_engine_layout(stored_pair):
    for single, stacked in zip(stored_pair["single"], stored_pair["stacked"]):
        assert set(stacked.metrics) == set(single.metrics)
        used = {"epoch", "train_loss", "record_epoch", "test_error", "time_s", "mean_k", "k_per_block",
                "gates_closed"}
        assert set(stacked.curves) & used == set(single.curves) & used
        for key in ("epoch", "record_epoch"):
            assert stacked.curves[key] == single.curves[key]
        assert stacked.curves["test_error"][0] == pytest.approx(single.curves["test_error"][0], abs=1e-6)  # init
        assert stacked.provenance["engine"]["name"] == "stacked"
        assert "engine" not in single.provenance


def test_stack_key_groups_kinds_and_seeds_only():
    assert gm.stack_key(_tiny("plain", 0)) == gm.stack_key(_tiny("gated_resnet", 2))
    assert gm.stack_key(_tiny("plain")) != gm.stack_key(_tiny("plain", lr=0.001))
    with pytest.raises(ValueError, match="cannot train together"):
        gm.train_gates_mnist_stacked([_tiny("plain"), _tiny("plain", lr=0.001)], "unused", progress=False)


def test_interrupted_stacked_run_resumes_to_the_same_result(tmp_path, monkeypatch):
    configs = [_tiny("gated_resnet", 0), _tiny("plain", 1)]
    straight = gm.train_gates_mnist_stacked(configs, tmp_path / "a", progress=False)
    real = gm._stacked_test_errors
    calls = {"n": 0}

    def interrupt_after_epoch_one(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 3:  # records: before training, epoch 1 (checkpointed), epoch 2
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(gm, "_stacked_test_errors", interrupt_after_epoch_one)
    with pytest.raises(KeyboardInterrupt):
        gm.train_gates_mnist_stacked(configs, tmp_path / "b", progress=False, checkpoint_every_s=0.0)
    assert (tmp_path / "b" / "stacked.pt").exists()
    ck = load_checkpoint(tmp_path / "b" / "stacked.pt")  # the engine's layout (save_training_checkpoint)
    assert ck["position"] == {"epoch": 1, "step_in_epoch": 0, "global_step": 2, "finished": False}
    assert ck["rng"][0]["torch"].dtype == torch.uint8 and len(ck["curves"]) == len(configs)
    monkeypatch.setattr(gm, "_stacked_test_errors", real)
    resumed = gm.train_gates_mnist_stacked(configs, tmp_path / "b", progress=False)
    for a, b in zip(straight, resumed):
        assert a["metrics"] == b["metrics"]
        assert a["curves"]["train_loss"] == b["curves"]["train_loss"]


@pytest.mark.parametrize("signame", ["SIGINT", "SIGTERM"])
def test_a_signal_mid_epoch_saves_and_the_stacked_run_resumes_bit_for_bit(tmp_path, monkeypatch, signame):
    """SIGINT / SIGTERM inside an epoch: the step finishes, the state (with the epoch's running losses) is saved,
    ``TrainingInterrupted`` carries the shell's exit code; the rerun ends with the uninterrupted run's numbers."""
    import os
    import signal

    from hacn_core.engine.training import TrainingInterrupted

    configs = [_tiny("gated_resnet", 0), _tiny("plain", 1)]
    before = signal.getsignal(signal.SIGINT)  # default_int_handler, or SIG_IGN where the process was started so
    monkeypatch.setenv("HACN_CHECKPOINT_EVERY", "1000steps")  # no periodic checkpoint: only the signal's
    straight = gm.train_gates_mnist_stacked(configs, tmp_path / "a", progress=False)
    real = StackedFCNet.member_losses
    calls = {"n": 0}

    def signal_in_the_second_epoch(self, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 3:  # 256 examples in batches of 128, 2 epochs: the first step of the second epoch
            os.kill(os.getpid(), getattr(signal, signame))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(StackedFCNet, "member_losses", signal_in_the_second_epoch)
    with pytest.raises(TrainingInterrupted) as caught:
        gm.train_gates_mnist_stacked(configs, tmp_path / "b", progress=False)
    assert caught.value.exit_code == 128 + int(getattr(signal, signame)) and caught.value.step == 3
    ck = load_checkpoint(tmp_path / "b" / "stacked.pt")
    assert ck["position"] == {"epoch": 1, "step_in_epoch": 1, "global_step": 3, "finished": False}
    assert len(ck["epoch_loss"]) == len(configs) and ck["segments"] == 1
    assert signal.getsignal(signal.SIGINT) is before  # the handlers are given back
    monkeypatch.setattr(StackedFCNet, "member_losses", real)
    resumed = gm.train_gates_mnist_stacked(configs, tmp_path / "b", progress=False)
    for a, b in zip(straight, resumed):
        assert a["metrics"] == b["metrics"]
        for key in ("train_loss", "test_error", "mean_k"):
            assert a["curves"].get(key) == b["curves"].get(key)


def test_the_stacked_engine_checkpoints_at_the_users_cadence(tmp_path, monkeypatch):
    configs = [_tiny("plain", 0)]
    written = []
    real = gm.save_training_checkpoint

    def spy(path, *args, **kwargs):
        written.append(kwargs["position"]["global_step"])
        return real(path, *args, **kwargs)

    monkeypatch.setattr(gm, "save_training_checkpoint", spy)
    monkeypatch.setenv("HACN_CHECKPOINT_EVERY", "3steps")
    gm.train_gates_mnist_stacked(configs, tmp_path / "a", progress=False)  # 2 epochs x 2 steps
    assert written == [3]  # step 3 (mid-epoch); step 4 is the end of training, which stores the result instead


def test_non_finite_loss_of_one_member_stops_the_stacked_run_like_fit(tmp_path, monkeypatch):
    configs = [_tiny("plain", 0), _tiny("gated_resnet", 0)]
    real = StackedFCNet.member_losses

    def run(poison: bool) -> dict:
        """Train; the 4th loss evaluation (step 3) sees member 1's loss poisoned or the weights recorded."""
        seen = {"calls": 0}

        def member_losses(self, logits, y):
            losses = real(self, logits, y)
            seen["calls"] += 1
            if seen["calls"] == 4:
                seen["before"] = {k: v.clone() for k, v in self.state_dict().items()}
                if poison:
                    losses = losses * torch.tensor([1.0, float("nan")])
            return losses

        monkeypatch.setattr(StackedFCNet, "member_losses", member_losses)
        with pytest.raises(NonFiniteLossError) if poison else contextlib.nullcontext() as err:
            gm.train_gates_mnist_stacked(configs, tmp_path / str(poison), progress=False)
        return {"err": err, **seen}

    clean, bad = run(poison=False), run(poison=True)
    err = bad["err"].value
    assert str(err).startswith("non-finite training loss nan of member 1 (gated_resnet, seed 0) at step 3 (epoch 1)")
    assert (err.step, err.epoch) == (3, 1) and err.checkpoint == tmp_path / "True" / "nonfinite.pt"
    ck = load_checkpoint(err.checkpoint)
    assert ck["position"]["global_step"] == 3
    for key, value in clean["before"].items():  # the state before the bad update: three good steps
        assert torch.equal(ck["model"][key], value), key


def test_run_with_stacked_needs_an_engine(tmp_path):
    with pytest.raises(ValueError, match="no stacked engine"):
        catalog.run("exact-checks", "smoke", store=ResultsStore(tmp_path), stacked=True)


def test_stacked_clocks_stay_out_of_the_per_run_cost_table(stored_pair):
    single, stacked = stored_pair["single"], stored_pair["stacked"]
    alone, _ = gr.cost_table(single)
    mixed, _ = gr.cost_table(single + stacked)
    assert alone.equals(mixed)
    groups = gr.stacked_groups(single + stacked)
    assert len(groups) == 1
    row = groups.iloc[0]
    assert (row["runs in the group"], row["wall minutes (group)"], row["minutes per run"]) == (4, 1.0, 0.2)
    assert row["stored members (kind: seeds)"].count(":") == len({m.config["kind"] for m in stacked})
