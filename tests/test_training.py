"""Tests for hacn_core.engine.training: the loop against hand-written references, exact resume,
the NaN guard, accumulation, clipping, label smoothing, hooks and configuration errors."""

from __future__ import annotations

import json
import math
import os
import random
import shutil

import numpy as np

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import Dataset

import hacn_core.engine.training as training
from hacn_core.engine.roles import tag
from hacn_core.engine.training import (
    Callback,
    NonFiniteLossError,
    TrainConfig,
    TrainConfigError,
    epoch_permutation,
    evaluate,
    fit,
    load_checkpoint,
    steps_per_epoch,
)


@pytest.fixture(autouse=True)
def _default_checkpoint_cadence(monkeypatch):
    """These tests count checkpoints of the default cadence: a user's own $HACN_CHECKPOINT_EVERY must not apply."""
    monkeypatch.delenv(training.CHECKPOINT_EVERY_ENV, raising=False)


def make_data(n: int = 100, d: int = 6, classes: int = 3, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, d, generator=g)
    y = (X[:, :classes].argmax(1) + (torch.rand(n, generator=g) < 0.1).long()) % classes
    return X, y


class GatedNet(nn.Module):
    """Small MLP with a residual gate k (role ``gate``) and optional dropout."""

    def __init__(self, d: int = 6, classes: int = 3, dropout: float = 0.0, seed: int = 0) -> None:
        super().__init__()
        torch.manual_seed(seed)
        self.inp = nn.Linear(d, 16)
        self.hidden = nn.Linear(16, 16)
        self.k = tag(nn.Parameter(torch.ones(())), "gate")
        self.drop = nn.Dropout(dropout)
        self.out = nn.Linear(16, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.inp(x))
        h = F.relu(self.k) * torch.relu(self.hidden(self.drop(h))) + h
        return self.out(h)


def params_of(model: nn.Module) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in model.state_dict().items()}


def assert_params_equal(a: nn.Module, b: nn.Module) -> None:
    pa, pb = params_of(a), params_of(b)
    assert pa.keys() == pb.keys()
    for n in pa:
        assert torch.equal(pa[n], pb[n]), n


def strip_time(curves: dict) -> dict:
    return {k: v for k, v in curves.items() if k != "time_s"}


class Kill(Exception):
    pass


class KillAt(Callback):
    """Simulates a crash: raises after optimizer step ``at`` (before that step's checkpoint)."""

    def __init__(self, at: int) -> None:
        self.at = at

    def on_step_end(self, state):
        if state.step == self.at:
            raise Kill(state.step)


# ----------------------------------------------------------------------------- against a reference


def test_fit_matches_hand_written_loop():
    """Same order, same AdamW groups: identical parameters and the same loss curve (on the CPU, in fp32,
    where the reference runs: on a GPU ``precision="auto"`` is bf16 autocast)."""
    X, y = make_data(90)
    cfg = TrainConfig(epochs=3, batch_size=16, lr=3e-3, weight_decay=0.1, seed=7, device="cpu")
    model = GatedNet()
    res = fit(model, (X, y), cfg, progress=False)

    ref = GatedNet()
    decay = [ref.inp.weight, ref.hidden.weight, ref.out.weight]
    rest = [p for p in ref.parameters() if all(p is not q for q in decay)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}],
                            lr=3e-3)
    losses = []
    for epoch in range(3):
        perm = epoch_permutation(90, 7, epoch)
        total = 0.0
        for a in range(0, 90, 16):
            idx = perm[a:a + 16]
            loss = F.cross_entropy(ref(X[idx]), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item() * len(idx)
        losses.append(total / 90)
    assert_params_equal(model, ref)
    assert res.curves["train_loss"] == pytest.approx(losses, rel=1e-12)
    assert res.steps == 3 * 6 == len(res.curves["epoch"]) * steps_per_epoch(90, 16)
    assert res.metrics["train_loss"] == res.curves["train_loss"][-1]


def test_gradient_accumulation_equals_larger_batch():
    """accumulate=2 with batch 8 == batch 16, including an uneven last step (60 = 3*16 + 12)."""
    X, y = make_data(60)
    base = dict(epochs=2, lr=0.05, optimizer="sgd", momentum=0.9, seed=1, device="cpu")  # fp32, as compared
    a, b = GatedNet(), GatedNet()
    ra = fit(a, (X, y), TrainConfig(batch_size=8, accumulate=2, **base), progress=False)
    rb = fit(b, (X, y), TrainConfig(batch_size=16, **base), progress=False)
    for (n, pa), pb in zip(a.named_parameters(), b.parameters()):
        torch.testing.assert_close(pa, pb, rtol=1e-5, atol=1e-6, msg=n)
    assert ra.steps == rb.steps == 8
    assert ra.curves["train_loss"] == pytest.approx(rb.curves["train_loss"], rel=1e-5)


def test_gradient_clipping_rescales_to_max_norm():
    X, y = make_data(32)
    model, ref = GatedNet(), GatedNet()
    fit(model, (X, y), TrainConfig(epochs=1, batch_size=32, lr=1.0, optimizer="sgd", momentum=0.0,
                                   grad_clip=0.05, device="cpu"), progress=False)
    loss = F.cross_entropy(ref(X[epoch_permutation(32, 0, 0)]), y[epoch_permutation(32, 0, 0)])
    grads = torch.autograd.grad(loss, list(ref.parameters()))
    norm = torch.sqrt(sum((g ** 2).sum() for g in grads))
    assert norm > 0.05  # clipping is active
    for p, q, g in zip(model.parameters(), ref.parameters(), grads):
        torch.testing.assert_close(p.detach(), q.detach() - g * 0.05 / norm, rtol=1e-5, atol=1e-6)


def test_label_smoothing_matches_formula():
    """One SGD step on the smoothed loss -(1-e) log p_y - (e/K) sum_k log p_k."""
    X, y = make_data(40)
    eps, K = 0.2, 3
    model, ref = GatedNet(), GatedNet()
    fit(model, (X, y), TrainConfig(epochs=1, batch_size=40, lr=0.5, optimizer="sgd", momentum=0.0,
                                   label_smoothing=eps, device="cpu"), progress=False)
    logp = torch.log_softmax(ref(X), dim=1)
    loss = (-(1 - eps) * logp.gather(1, y[:, None]).squeeze(1) - eps / K * logp.sum(1)).mean()
    grads = torch.autograd.grad(loss, list(ref.parameters()))
    for p, q, g in zip(model.parameters(), ref.parameters(), grads):
        torch.testing.assert_close(p.detach(), q.detach() - 0.5 * g, rtol=1e-5, atol=1e-6)


def test_schedule_reaches_the_optimizer_every_step():
    lrs = []

    class Spy(Callback):
        def on_step_end(self, state):
            lrs.append(state.optimizer.param_groups[0]["lr"])

    X, y = make_data(40)
    cfg = TrainConfig(epochs=4, batch_size=10, lr=1.0, optimizer="sgd", schedule="cosine", warmup_epochs=1)
    res = fit(GatedNet(), (X, y), cfg, callbacks=[Spy()], progress=False)
    expected = [(t + 1) / 4 if t < 4 else 0.5 * (1 + math.cos(math.pi * (t - 4) / 12)) for t in range(16)]
    assert lrs == pytest.approx(expected)
    assert res.curves["lr"] == pytest.approx([expected[3], expected[7], expected[11], expected[15]])


def test_plateau_schedule_in_fit():
    """A frozen validation loss (lr 1e-12) drops the rate once patience is exhausted."""
    X, y = make_data(40)
    cfg = TrainConfig(epochs=5, batch_size=20, lr=1e-12, optimizer="sgd", schedule="plateau",
                      plateau_patience=1, gamma=0.5)
    res = fit(GatedNet(), (X, y), cfg, val=(X, y), progress=False)
    assert res.curves["lr"] == pytest.approx([1e-12, 1e-12, 1e-12, 5e-13, 5e-13])


# ----------------------------------------------------------------------------- resume


@pytest.mark.parametrize(
    "ckpt_every,kills,extra",
    [
        (3, (5, 16), dict(schedule="cosine", warmup_epochs=0.5, grad_clip=1.0, accumulate=2, batch_size=8)),
        (7, (8,), dict(schedule="plateau", plateau_patience=0, weight_decay=0.01)),  # kill at an epoch boundary
        (7, (8,), dict(schedule="cosine", warmup_epochs=0.5)),  # the same under a rate that changes every step
        (3, (5,), dict(precision="fp16", optimizer="nadam")),  # grad scaler state
    ],
)
def test_killed_and_resumed_run_is_bit_identical(tmp_path, ckpt_every, kills, extra):
    X, y = make_data(100)
    cfg = TrainConfig(**{**dict(epochs=3, batch_size=16, lr=1e-2, seed=3, checkpoint_every_steps=ckpt_every),
                         **extra})
    val = make_data(30, seed=9)
    width = lambda state: {"k_times_step": float(state.model.k.detach()) * state.step}  # noqa: E731

    straight = GatedNet(dropout=0.3)
    ref = fit(straight, (X, y), cfg, val=val, callbacks=[width], progress=False)

    ckdir = tmp_path / "ck"
    for i, at in enumerate(kills):  # the first run starts like the straight one; later ones resume
        with pytest.raises(Kill):
            fit(GatedNet(dropout=0.3, seed=0 if i == 0 else at), (X, y), cfg, val=val, callbacks=[width, KillAt(at)],
                checkpoint_dir=ckdir, progress=False)
        assert load_checkpoint(ckdir / "last.pt")["position"]["global_step"] == at // ckpt_every * ckpt_every
    resumed = GatedNet(dropout=0.3, seed=99)  # different init: everything must come from the checkpoint
    res = fit(resumed, (X, y), cfg, val=val, callbacks=[width], checkpoint_dir=ckdir, progress=False)

    assert_params_equal(straight, resumed)
    assert strip_time(res.curves) == strip_time(ref.curves)
    assert res.metrics == ref.metrics
    assert res.steps == ref.steps


class AugmentedSet(Dataset):
    """A Dataset that adds noise from the global torch RNG (resume must restore it)."""

    def __init__(self, X: torch.Tensor, y: torch.Tensor, noise: float = 0.1) -> None:
        self.X, self.y, self.noise = X, y, noise

    def __len__(self) -> int:
        return len(self.X)

    def __getitem__(self, i: int):
        return self.X[i] + self.noise * torch.randn_like(self.X[i]), self.y[i]


def test_dataloader_path_resume_and_equivalence_with_in_memory(tmp_path):
    X, y = make_data(50)
    cfg = TrainConfig(epochs=2, batch_size=8, lr=1e-2, checkpoint_every_steps=2)
    # no augmentation: Dataset path == in-memory path, bit for bit
    mem, loader = GatedNet(), GatedNet()
    fit(mem, (X, y), cfg, progress=False)
    fit(loader, AugmentedSet(X, y, noise=0.0), cfg, progress=False)
    fit(kept_off := GatedNet(), (X, y), cfg.replace(keep_on_device=False), progress=False)
    assert_params_equal(mem, loader)
    assert_params_equal(mem, kept_off)
    # with augmentation drawn from the global RNG: killed + resumed == straight
    straight = GatedNet()
    fit(straight, AugmentedSet(X, y), cfg, progress=False)
    with pytest.raises(Kill):
        fit(GatedNet(), AugmentedSet(X, y), cfg, callbacks=[KillAt(9)], checkpoint_dir=tmp_path, progress=False)
    resumed = GatedNet(seed=5)
    fit(resumed, AugmentedSet(X, y), cfg, checkpoint_dir=tmp_path, progress=False)
    assert_params_equal(straight, resumed)


def test_time_based_checkpoints_and_finished_run_is_not_retrained(tmp_path):
    X, y = make_data(40)
    cfg = TrainConfig(epochs=2, batch_size=8, lr=1e-2, checkpoint_every_minutes=1e-9)  # every step
    straight = GatedNet()
    ref = fit(straight, (X, y), cfg, progress=False)
    with pytest.raises(Kill):
        fit(GatedNet(), (X, y), cfg, callbacks=[KillAt(7)], checkpoint_dir=tmp_path, progress=False)
    position = load_checkpoint(tmp_path / "last.pt")["position"]
    assert (position["global_step"], position["total_steps"]) == (6, 10)  # 2 epochs of 40 / 8 steps (for `status`)
    resumed = GatedNet(seed=1)
    res = fit(resumed, (X, y), cfg, checkpoint_dir=tmp_path, progress=False)
    assert_params_equal(straight, resumed)
    # the same command again: loads the finished state, trains nothing
    again = GatedNet(seed=2)
    steps_seen = []
    res2 = fit(again, (X, y), cfg, checkpoint_dir=tmp_path, progress=False,
               callbacks=[type("S", (Callback,), {"on_step_end": lambda self, s: steps_seen.append(s.step)})()])
    assert steps_seen == []
    assert_params_equal(straight, again)
    assert res2.metrics == res.metrics == ref.metrics


def test_on_train_begin_sees_the_optimizer_also_when_resuming(tmp_path):
    seen = []

    class Attach(Callback):
        def on_train_begin(self, state):
            seen.append((state.step, state.optimizer))

        def on_step_end(self, state):
            assert state.optimizer is seen[-1][1]

    X, y = make_data(40)
    cfg = TrainConfig(epochs=2, batch_size=10, lr=1e-2, checkpoint_every_steps=2)
    with pytest.raises(Kill):
        fit(GatedNet(), (X, y), cfg, callbacks=[Attach(), KillAt(3)], checkpoint_dir=tmp_path, progress=False)
    fit(GatedNet(), (X, y), cfg, callbacks=[Attach()], checkpoint_dir=tmp_path, progress=False)
    assert [step for step, _ in seen] == [0, 2]
    assert all(isinstance(opt, torch.optim.AdamW) for _, opt in seen)


def test_resume_with_other_config_names_the_field(tmp_path):
    X, y = make_data(20)
    cfg = TrainConfig(epochs=1, batch_size=10, lr=1e-2)
    fit(GatedNet(), (X, y), cfg, checkpoint_dir=tmp_path, progress=False)
    with pytest.raises(TrainConfigError, match=r"lr: 0\.01 in the checkpoint, 0\.02 now"):
        fit(GatedNet(), (X, y), cfg.replace(lr=2e-2), checkpoint_dir=tmp_path, progress=False)


def test_checkpoint_write_is_atomic(tmp_path, monkeypatch):
    path = tmp_path / "last.pt"
    training.save_checkpoint({"v": torch.ones(3)}, path)

    def broken_save(obj, f):
        f.write(b"half a checkpoint")
        raise OSError("disk full")

    monkeypatch.setattr(training.torch, "save", broken_save)
    with pytest.raises(OSError, match="disk full"):
        training.save_checkpoint({"v": torch.zeros(3)}, path)
    monkeypatch.undo()
    assert torch.equal(load_checkpoint(path)["v"], torch.ones(3))
    assert os.listdir(tmp_path) == ["last.pt"]


def test_a_full_disk_while_checkpointing_names_the_file_and_the_free_space(tmp_path, monkeypatch):
    """torch.save on a full disk raises a bare RuntimeError from its zip writer; the engine says what failed."""
    from hacn_core.engine.checkpoint import CheckpointWriteError

    def full_disk(obj, f):
        raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 64 vs 0")

    monkeypatch.setattr(training.torch, "save", full_disk)
    with pytest.raises(CheckpointWriteError, match=r"could not write the checkpoint .*last\.pt \(RuntimeError: "
                                                   r"\[enforce fail.*MiB free there.*run the same command again"):
        training.save_checkpoint({"v": torch.zeros(3)}, tmp_path / "last.pt")
    assert os.listdir(tmp_path) == []  # no half-written file is left


def test_training_checkpoint_helpers_restore_optimizer_and_random_states(tmp_path):
    """The pieces of fit's checkpoint that other loops (the stacked MNIST engine) reuse."""
    X, y = make_data(20)
    model = GatedNet()
    opt = torch.optim.NAdam(model.parameters(), lr=1e-2)
    F.cross_entropy(model(X), y).backward()
    opt.step()
    torch.manual_seed(3)
    random.seed(3)
    np.random.seed(3)
    other = training.rng_state() | {"torch": torch.Generator().manual_seed(11).get_state()}
    position = {"epoch": 1, "step_in_epoch": 0, "global_step": 2, "finished": False}
    path = training.save_training_checkpoint(tmp_path / "c.pt", model, opt, position=position, curves={"a": [1.0]},
                                             wall_time_s=2.5, rngs=[training.rng_state(), other], members=2)
    draws = (torch.rand(3), random.random(), np.random.rand())
    ck = load_checkpoint(path)
    assert (ck["position"], ck["curves"], ck["wall_time_s"], ck["members"]) == (position, {"a": [1.0]}, 2.5, 2)
    fresh = GatedNet(seed=5)
    fresh.load_state_dict(ck["model"])  # the caller loads the model, then builds the optimizer over it
    fresh_opt = torch.optim.NAdam(fresh.parameters(), lr=1e-2)
    training.restore_training_checkpoint(ck, fresh_opt)
    again = (torch.rand(3), random.random(), np.random.rand())
    assert torch.equal(draws[0], again[0]) and draws[1:] == again[1:]  # rank 0's streams continue as saved
    for a, b in zip(opt.state.values(), fresh_opt.state.values()):
        assert all(torch.equal(a[k], b[k]) for k in a)
    training.restore_training_checkpoint(ck, fresh_opt, rank=1, world_size=2)  # each rank its own stream
    assert torch.equal(torch.rand(2), torch.rand(2, generator=torch.Generator().manual_seed(11)))
    training.restore_training_checkpoint(ck, fresh_opt, rank=1, world_size=3)  # another world size: rank 0's
    assert torch.equal(torch.rand(3), draws[0])


def test_progress_bar_and_nonfinite_helpers(tmp_path, monkeypatch):
    monkeypatch.delenv("HACN_QUIET", raising=False)
    bar = training.progress_bar(5, desc="x", unit="epoch")
    assert (bar.total, bar.unit) == (5, "epoch")
    bar.close()
    assert training.progress_bar(5, desc="x", progress=False) is None
    monkeypatch.setenv("HACN_QUIET", "1")
    assert training.progress_bar(5, desc="x", progress=True) is None
    assert training.first_nonfinite([1.0, 2.0]) is None
    assert training.first_nonfinite([1.0, float("nan"), float("inf")]) == 1
    assert training.first_nonfinite(iter([float("-inf")])) == 0
    assert training.nonfinite_checkpoint_path(tmp_path) == tmp_path / "nonfinite.pt"
    temporary = training.nonfinite_checkpoint_path(None)
    assert temporary.name == "nonfinite.pt" and temporary.parent.is_dir() and not any(temporary.parent.iterdir())
    temporary.parent.rmdir()


# ----------------------------------------------------------------------------- NaN guard


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("sync_every", [0, 1])
def test_nan_guard_on_a_gpu_names_the_step_and_the_saved_update(tmp_path, sync_every):
    """On a GPU the losses stay on the device and are read every ``sync_every`` steps (0: the default, a
    few steps): the error still names the step whose loss was NaN, and the checkpoint is the state when
    it was read, which the message names; with ``sync_every=1`` it is the state before that update."""
    X, y = make_data(40)
    calls = []

    def loss_fn(out, target):
        calls.append(1)
        loss = F.cross_entropy(out, target)
        return loss * float("nan") if len(calls) == 4 else loss

    cfg = TrainConfig(epochs=2, batch_size=8, lr=1e-2, device="cuda", sync_every=sync_every)
    with pytest.raises(NonFiniteLossError, match=r"at step 3 \(epoch 0\)") as err:
        fit(GatedNet(), (X, y), cfg, loss_fn=loss_fn, checkpoint_dir=tmp_path, progress=False)
    saved = load_checkpoint(err.value.checkpoint)["position"]["global_step"]
    assert err.value.step == 3 and saved >= 3
    assert (saved == 3) if sync_every == 1 else (saved == 3 or f"before update {saved}" in str(err.value))


def test_injected_nan_stops_at_that_step_with_a_loadable_checkpoint(tmp_path):
    X, y = make_data(40)
    calls = []

    def loss_fn(out, target):
        calls.append(1)
        loss = F.cross_entropy(out, target)
        return loss * float("nan") if len(calls) == 4 else loss  # the 4th step (step 3)

    cfg = TrainConfig(epochs=2, batch_size=8, lr=1e-2, device="cpu")  # the CPU reads every loss at once
    with pytest.raises(NonFiniteLossError, match=r"at step 3 \(epoch 0\)") as err:
        fit(GatedNet(), (X, y), cfg, loss_fn=loss_fn, checkpoint_dir=tmp_path, progress=False)
    assert err.value.step == 3 and math.isnan(err.value.loss)
    ck = load_checkpoint(err.value.checkpoint)
    assert err.value.checkpoint.name == "nonfinite.pt"
    assert ck["position"]["global_step"] == 3
    # the saved parameters are those after 3 good steps: equal to a clean 3-step run
    clean = GatedNet()
    fit(clean, (X[epoch_permutation(40, 0, 0)][:24], y[epoch_permutation(40, 0, 0)][:24]),
        cfg.replace(epochs=1, shuffle=False), progress=False)
    loaded = GatedNet(seed=4)
    loaded.load_state_dict(ck["model"])
    assert_params_equal(clean, loaded)


def test_huge_learning_rate_raises_non_finite_error():
    X, y = make_data(40)
    X = X * 1e3
    with pytest.raises(NonFiniteLossError, match="non-finite training loss .* at step") as err:
        fit(GatedNet(), (X, y), TrainConfig(epochs=20, batch_size=8, lr=1e30, optimizer="sgd", device="cpu"),
            progress=False)  # on a GPU the read is deferred: test_nan_guard_on_a_gpu_names_the_step_and_the_saved_update
    # no checkpoint_dir: the state is saved into a temporary folder named in the message
    assert str(err.value.checkpoint) in str(err.value)
    ck = load_checkpoint(err.value.checkpoint)
    assert ck["position"]["global_step"] == err.value.step
    GatedNet().load_state_dict(ck["model"])
    shutil.rmtree(err.value.checkpoint.parent)


# ----------------------------------------------------------------------------- hooks and metrics


def test_validation_metrics_records_and_callbacks_are_json_curves():
    X, y = make_data(60)
    val = make_data(25, seed=4)
    widths = []

    def width(state):
        widths.append(state.step)
        return {"width": 16, "k_now": state.model.k.detach()}

    cfg = TrainConfig(epochs=5, batch_size=20, lr=1e-2, eval_every=2, record_every=2, device="cpu")
    model = GatedNet()
    res = fit(model, (X, y), cfg, val=val, test=val, callbacks=[width], progress=False,
              metrics={"accuracy": training.accuracy, "error": lambda o, t: (o.argmax(1) != t).float().mean()})
    c = res.curves
    assert c["eval_epoch"] == [2, 4, 5]  # the last epoch is always evaluated
    assert c["record_step"] == [0, 6, 12, 15] and widths == [0, 6, 12, 15]  # the final state is always recorded
    assert c["param/k"][-1] == c["k_now"][-1] == pytest.approx(float(model.k.detach()), rel=1e-6)
    assert c["param/k"][0] == 1.0
    manual = (model(val[0]).argmax(1) == val[1]).float().mean().item()
    assert res.metrics["val_accuracy"] == pytest.approx(manual) == pytest.approx(res.metrics["test_accuracy"])
    assert res.metrics["val_error"] == pytest.approx(1 - manual)
    assert res.metrics["val_loss"] == pytest.approx(F.cross_entropy(model(val[0]), val[1]).item(), rel=1e-6)
    assert evaluate(model, val)["accuracy"] == pytest.approx(manual)
    json.dumps(res.to_dict())
    assert len(c["train_loss"]) == len(c["epoch"]) == len(c["lr"]) == 5


def test_record_every_steps_and_early_stop(tmp_path):
    X, y = make_data(40)

    def stopper(state):  # records at steps 0, 3, 6, 9; asks to stop at step 9 (in epoch index 2)
        if state.step >= 8:
            state.stop = True

    cfg = TrainConfig(epochs=10, batch_size=10, lr=1e-2, record_every_steps=3)  # 4 steps per epoch
    res = fit(GatedNet(), (X, y), cfg, callbacks=[stopper], checkpoint_dir=tmp_path, progress=False)
    assert res.steps == 12 and res.curves["epoch"] == [1, 2, 3]  # stops when that epoch ends
    assert res.curves["record_step"] == [0, 3, 6, 9, 12]
    assert fit(GatedNet(), (X, y), cfg, checkpoint_dir=tmp_path, progress=False).steps == 12


class GraphBatch:
    """Stand-in for a torch-geometric batch: attributes, ``.y`` and ``.to``."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor) -> None:
        self.x, self.y = x, y

    def to(self, device, non_blocking=False):
        return GraphBatch(self.x.to(device), self.y.to(device))


class GraphSet(Dataset):
    def __init__(self, X, y):
        self.X, self.y = X, y

    def __len__(self):
        return len(self.X)

    def __getitem__(self, i):
        return self.X[i], self.y[i]


def collate_graphs(items):
    return GraphBatch(torch.stack([x for x, _ in items]), torch.stack([t for _, t in items]))


def test_custom_collate_forward_and_model_aware_loss():
    """Graph-style batches (objects with .y) through collate_fn and forward=, and an
    ELBO-like loss that needs the model and the dataset size, equal the tensor path."""
    X, y = make_data(48)
    n = len(X)
    cfg = TrainConfig(epochs=2, batch_size=12, lr=1e-2)
    a, b = GatedNet(), GatedNet()

    def elbo_like(model):
        return lambda out, t: F.cross_entropy(out, t) + 1e-3 * model.k ** 2 / n

    Xv, yv = make_data(30, seed=2)
    ra = fit(a, (X, y), cfg, val=(Xv, yv), loss_fn=elbo_like(a), progress=False)
    rb = fit(b, GraphSet(X, y), cfg, val=GraphSet(Xv, yv), collate_fn=collate_graphs, loss_fn=elbo_like(b),
             forward=lambda m, batch: (m(batch.x), batch.y), progress=False)
    assert_params_equal(a, b)
    assert rb.curves["val_accuracy"] == pytest.approx(ra.curves["val_accuracy"])
    assert rb.curves["val_loss"] == pytest.approx(ra.curves["val_loss"], rel=1e-6)


def test_bf16_autocast_runs_the_model_in_bf16():
    X, y = make_data(20)
    dtypes = []
    model = GatedNet()
    model.out.register_forward_hook(lambda mod, inp, out: dtypes.append(out.dtype))
    res = fit(model, (X, y), TrainConfig(epochs=1, batch_size=10, lr=1e-2, precision="bf16"), progress=False)
    assert dtypes[0] == torch.bfloat16 and math.isfinite(res.metrics["train_loss"])
    assert all(p.dtype == torch.float32 for p in model.parameters())


def test_progress_bar_and_quiet_env(capsys, monkeypatch):
    X, y = make_data(20)
    cfg = TrainConfig(epochs=1, batch_size=10, lr=1e-2)
    monkeypatch.delenv("HACN_QUIET", raising=False)
    fit(GatedNet(), (X, y), cfg, progress=True)
    err = capsys.readouterr().err
    assert "loss=" in err and "samples_per_s=" in err
    monkeypatch.setenv("HACN_QUIET", "1")
    fit(GatedNet(), (X, y), cfg, progress=True)
    fit(GatedNet(), (X, y), cfg)
    out = capsys.readouterr()
    assert out.err == "" and out.out == ""


# ----------------------------------------------------------------------------- configuration


@pytest.mark.parametrize(
    "changes,field,allowed",
    [
        (dict(optimizer="adagrad"), "optimizer", "adamw, adam, nadam, sgd"),
        (dict(schedule="linear"), "schedule", "constant, cosine, multistep, plateau"),
        (dict(lr=-0.1), "lr", "> 0"),
        (dict(warmup_epochs=11), "warmup_epochs", "shorter than training"),
        (dict(schedule="cosine", warmup_epochs=10), "warmup_epochs", "shorter than training"),
        (dict(batch_size=0), "batch_size", ">= 1"),
        (dict(accumulate=1.5), "accumulate", ">= 1"),
        (dict(precision="fp8"), "precision", "auto, fp32, bf16, fp16"),
        (dict(device="tpu"), "device", "auto, cpu, cuda"),
        (dict(no_decay_roles=("gates",)), "no_decay_roles", "gate, mixing, norm_gain, rate, norm, bias, weight"),
        (dict(nesterov=True), "nesterov", "optimizer='nadam'"),
        (dict(optimizer="sgd", nesterov=True, momentum=0.0), "nesterov", "momentum > 0"),
        (dict(schedule="multistep"), "milestones", "non-empty increasing"),
        (dict(schedule="multistep", milestones=(5, 3)), "milestones", "non-empty increasing"),
        (dict(milestones=(3,)), "milestones", "schedule='multistep'"),
        (dict(milestone_unit="step"), "milestone_unit", "epoch, fraction"),
        (dict(label_smoothing=1.0), "label_smoothing", "[0, 1)"),
        (dict(grad_clip=0), "grad_clip", "> 0"),
        (dict(gamma=0), "gamma", "(0, 1]"),
        (dict(plateau_metric="accuracy"), "plateau_metric", "val_<metric>"),
        (dict(min_lr=1.0), "min_lr", "[0, lr"),
        (dict(checkpoint_every_minutes=-1), "checkpoint_every_minutes", "> 0"),
        (dict(betas=(0.9,)), "betas", "two numbers"),
        (dict(weight_decay=-1e-4), "weight_decay", ">= 0"),
        (dict(optimizer="nadam", fused=True), "fused", "adamw, adam, sgd"),
    ],
)
def test_bad_config_names_field_and_allowed_values(changes, field, allowed):
    base = dict(epochs=10, batch_size=8, lr=0.1)
    with pytest.raises(TrainConfigError) as err:
        TrainConfig(**{**base, **changes})
    msg = str(err.value)
    assert msg.startswith(f"{field}=") and allowed in msg


def test_config_dict_round_trip_and_unknown_key():
    cfg = TrainConfig(epochs=3, batch_size=4, lr=0.1, schedule="multistep", milestones=(1, 2),
                      no_decay_roles=("bias",), grad_clip=1.0)
    assert TrainConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg
    with pytest.raises(TrainConfigError, match="unknown TrainConfig field.*'learning_rate'.*allowed: epochs"):
        TrainConfig.from_dict({"epochs": 1, "batch_size": 1, "lr": 0.1, "learning_rate": 0.1})


def test_fit_time_configuration_errors():
    X, y = make_data(20)
    with pytest.raises(TrainConfigError, match="schedule='plateau' is invalid.*needs val="):
        fit(GatedNet(), (X, y), TrainConfig(epochs=1, batch_size=4, lr=0.1, schedule="plateau"), progress=False)
    with pytest.raises(TrainConfigError, match="plateau_metric='val_f1'.*allowed: train_loss, val_loss"):
        fit(GatedNet(), (X, y), TrainConfig(epochs=1, batch_size=4, lr=0.1, schedule="plateau",
                                            plateau_metric="val_f1"), val=(X, y), progress=False)
    with pytest.raises(TrainConfigError, match="label_smoothing=0.1.*custom loss_fn"):
        fit(GatedNet(), (X, y), TrainConfig(epochs=1, batch_size=4, lr=0.1, label_smoothing=0.1),
            loss_fn=F.cross_entropy, progress=False)
    if not torch.cuda.is_available():
        with pytest.raises(TrainConfigError, match="device='cuda'.*CUDA is not available"):
            fit(GatedNet(), (X, y), TrainConfig(epochs=1, batch_size=4, lr=0.1, device="cuda"), progress=False)
    with pytest.raises(TypeError, match="not a DataLoader"):
        fit(GatedNet(), torch.utils.data.DataLoader(GraphSet(X, y)), TrainConfig(epochs=1, batch_size=4, lr=0.1))


# ----------------------------------------------------------------------------- precision override


def test_precision_override_is_validated_and_recorded(tmp_path, monkeypatch):
    """``$HACN_PRECISION`` replaces the study's precision (how a run executes, like its device): a run
    under ``fp16`` computes as one with ``TrainConfig(precision="fp16")``; the stored result records the
    precision used; a bad value names the variable and the allowed values."""
    from hacn_core.engine.results import ResultsStore, run_or_load

    assert training.run_precision("auto") == "auto"  # unset: the study's own
    monkeypatch.setenv("HACN_PRECISION", "fp16")
    assert training.run_precision("auto") == "fp16"
    X, y = make_data(48)
    base = dict(epochs=1, batch_size=16, lr=1e-2, seed=3, device="cpu")
    with_env = GatedNet()
    fit(with_env, (X, y), TrainConfig(**base), progress=False)
    monkeypatch.delenv("HACN_PRECISION")
    named = GatedNet()
    fit(named, (X, y), TrainConfig(precision="fp16", **base), progress=False)
    assert_params_equal(with_env, named)
    plain = GatedNet()
    fit(plain, (X, y), TrainConfig(**base), progress=False)  # fp32: the override did change the arithmetic
    assert any(not torch.equal(p, q) for p, q in zip(plain.parameters(), named.parameters()))

    def run(config, context):
        fit(GatedNet(), (X, y), TrainConfig(**base), progress=False)
        return {"metrics": {"x": 1.0}}

    store = ResultsStore(tmp_path)
    assert run_or_load("toy-fp32", {"seed": 0}, run, store=store, progress=False).provenance["precision"] == "fp32"
    monkeypatch.setenv("HACN_PRECISION", "bf16")
    stored = run_or_load("toy-bf16", {"seed": 0}, run, store=store, progress=False)
    assert stored.provenance["precision"] == "bf16 autocast"
    untrained = run_or_load("toy-none", {"seed": 0}, lambda c, ctx: {"metrics": {"x": 2.0}}, store=store,
                            progress=False)
    assert "precision" not in untrained.provenance  # no fit ran in that run
    monkeypatch.setenv("HACN_PRECISION", "fp64")
    with pytest.raises(TrainConfigError, match=r"\$HACN_PRECISION.*fp64.*auto, fp32, bf16, fp16"):
        training.run_precision("auto")
