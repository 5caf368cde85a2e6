"""Mixup (Zhang et al. 2018) in the trainer and in hacn-vit's paper profile (Beyer et al. 2022's recipe).

The mix at ``lam = 1`` is the plain batch and loss; the trained loss is ``lam CE(y) + (1 - lam)
CE(y[perm])`` by hand; ``lam`` has Beta(0.2, 0.2)'s moments; a resumed run draws the same mixes;
evaluation is not mixed; bad concentrations are refused by name; only the paper profile's
configurations carry ``mixup`` and the book / smoke configuration hashes are the ones from before.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from scipy import stats
from torch import Tensor, nn

from hacn_core import catalog
from hacn_core.engine import training
from hacn_core.engine.augment import AugmentNormalize, Mixup, mix_inputs, mix_targets
from hacn_core.engine.results import config_hash
from hacn_core.engine.training import TrainingInterrupted
from hacn_core.hacn.studies import vit as hv
from test_hacn_transformer_studies import SignalAt, fake_images  # noqa: F401 (a fixture)

RESULTS = Path(__file__).resolve().parents[1] / "results"

# hacn-vit's configuration hashes computed by the code before Mixup existed (commit e531e41): runs of
# these profiles stored or under way are filed under them, so adding Mixup must leave them as they are
BOOK_HASHES = {"190dacd9d97f8cd1", "3cefd08a7cb17032", "3f21a646e3307df7", "6810c5ba672cf468", "8187a345e6c8385c",
               "89d59653d24b1ee4", "9e035ce754e03b79", "b60ab2b52e73fb58", "f12987a19a914af6"}
SMOKE_HASHES = {"810144c7e0424d6e", "b06550d4d7d0678a", "b580ae7997896761"}


class FixedMixup(Mixup):
    """A Mixup hook whose ``lam`` and ``perm`` are given, to compare against a hand computation."""

    def __init__(self, lam: float, perm: Tensor) -> None:
        super().__init__(0.2)
        self.fixed = (lam, perm)

    def draw(self, batch_size: int, device: torch.device | str = "cpu") -> tuple[float, Tensor]:
        return self.fixed


class RecordingMixup(Mixup):
    """A Mixup hook that keeps every ``(lam, perm)`` it draws."""

    def __init__(self, alpha: float) -> None:
        super().__init__(alpha)
        self.draws: list[tuple[float, list[int]]] = []

    def draw(self, batch_size: int, device: torch.device | str = "cpu") -> tuple[float, Tensor]:
        lam, perm = super().draw(batch_size, device)
        self.draws.append((lam, perm.tolist()))
        return lam, perm


def _batch(b: int = 12, d: int = 5, classes: int = 4, seed: int = 0) -> tuple[nn.Module, Tensor, Tensor, Tensor]:
    g = torch.Generator().manual_seed(seed)
    model = nn.Linear(d, classes)
    with torch.no_grad():
        model.weight.copy_(torch.randn(classes, d, generator=g))
    x, y = torch.randn(b, d, generator=g), torch.randint(0, classes, (b,), generator=g)
    return model, x, y, torch.randperm(b, generator=g)


def _hand_ce(logits: Tensor, y: Tensor) -> Tensor:
    """Mean of ``-log softmax(logits)[y]``, written out."""
    log_p = logits - logits.exp().sum(-1, keepdim=True).log()
    return -log_p[torch.arange(len(y)), y].mean()


def test_mix_at_lam_one_is_the_plain_batch_and_loss():
    model, x, y, perm = _batch()
    assert torch.equal(mix_inputs(x, 1.0, perm), x)
    assert torch.equal(mix_targets(y, 1.0, perm, 4), F.one_hot(y, 4).float())
    model.train()
    out, target = FixedMixup(1.0, perm)(model, (x, y))
    assert torch.equal(out, model(x))
    loss = training._cross_entropy(0.0)(out, target)  # the trainer's default loss, given the soft target
    torch.testing.assert_close(loss, F.cross_entropy(model(x), y), rtol=0, atol=1e-6)


@pytest.mark.parametrize("lam", [0.3, 0.97])
def test_mixed_loss_is_the_lam_weighted_cross_entropy_by_hand(lam):
    model, x, y, perm = _batch()
    model.train()
    out, target = FixedMixup(lam, perm)(model, (x, y))
    mixed = torch.stack([lam * x[i] + (1 - lam) * x[perm[i]] for i in range(len(x))])  # one example at a time
    torch.testing.assert_close(out, model(mixed))
    loss = training._cross_entropy(0.0)(out, target)
    by_hand = lam * _hand_ce(out, y) + (1 - lam) * _hand_ce(out, y[perm])
    torch.testing.assert_close(loss, by_hand, rtol=1e-6, atol=1e-6)
    # the same gradient as the two-label loss (what the optimizer sees)
    g_soft = torch.autograd.grad(loss, model.weight, retain_graph=True)[0]
    g_hand = torch.autograd.grad(by_hand, model.weight)[0]
    torch.testing.assert_close(g_soft, g_hand, rtol=1e-5, atol=1e-6)
    # training accuracy against the soft target: lam [pred = y] + (1 - lam) [pred = y[perm]]
    pred = out.argmax(-1)
    expected = (lam * (pred == y).float() + (1 - lam) * (pred == y[perm]).float()).mean()
    torch.testing.assert_close(training.accuracy(out, target), expected)
    assert training.accuracy(out, F.one_hot(y, 4).float()) == training.accuracy(out, y)


def test_lam_has_the_moments_and_distribution_of_beta_0_2():
    torch.manual_seed(0)
    hook = Mixup(0.2)
    n = 20_000
    lams = torch.tensor([hook.draw(8)[0] for _ in range(n)], dtype=torch.float64)
    assert 0.0 <= lams.min() and lams.max() <= 1.0
    # Beta(a, a): mean 1/2, variance 1 / (4 (2a + 1)) = 0.17857 at a = 0.2
    assert abs(lams.mean().item() - 0.5) < 5 * math.sqrt(0.17857 / n)  # 5 standard errors: 0.015
    assert abs(lams.var().item() - 1 / (4 * 1.4)) < 0.004  # about 6 standard errors of the sample variance
    assert stats.kstest(lams.numpy(), stats.beta(0.2, 0.2).cdf).pvalue > 1e-3
    perm = hook.draw(50)[1]
    assert torch.equal(perm.sort().values, torch.arange(50))


def test_evaluation_is_not_mixed_and_draws_nothing():
    model, x, y, _ = _batch()
    model.eval()
    before = torch.get_rng_state()
    out, target = Mixup(0.2)(model, (x, y))
    assert torch.equal(out, model(x)) and target is y
    assert torch.equal(torch.get_rng_state(), before)


def test_mixing_commutes_with_normalising_in_augment_normalize():
    model, x, y, perm = _batch()
    x4 = x[:, :, None, None].expand(-1, -1, 2, 2).contiguous()  # (B, C, H, W) images of 5 channels
    mean, std = torch.linspace(-1, 1, 5), torch.linspace(0.5, 2, 5)
    seen: list[Tensor] = []
    net = nn.Module()
    net.forward = lambda im: seen.append(im) or model(im.mean(dim=(2, 3)))  # type: ignore[method-assign]
    net.train()
    hook = AugmentNormalize(mean, std, pad=0, flip=False, mixup=FixedMixup(0.3, perm))
    _, target = hook(net, (x4, y))
    normalise = lambda im: (im - mean[:, None, None]) / std[:, None, None]  # noqa: E731
    torch.testing.assert_close(seen[-1], normalise(mix_inputs(x4, 0.3, perm)))  # mixed before normalising
    assert torch.equal(target, mix_targets(y, 0.3, perm, 4))
    net.eval()
    _, target = hook(net, (x4, y))
    assert target is y and torch.equal(seen[-1], normalise(x4))


def _fit(mixup: Mixup, checkpoint_dir: Path, callbacks=()) -> nn.Module:
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(64, 6, generator=g), torch.randint(0, 3, (64,), generator=g)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
    cfg = dict(epochs=2, batch_size=16, lr=0.05, optimizer="sgd", seed=3)
    training.fit(model, (x, y), cfg, val=(x[:16], y[:16]), forward=mixup, callbacks=callbacks,
                 checkpoint_dir=checkpoint_dir, progress=False)
    return model


def test_a_resumed_run_draws_the_same_mixes_as_an_uninterrupted_one(tmp_path):
    straight = RecordingMixup(0.2)
    model_a = _fit(straight, tmp_path / "a")
    assert len(straight.draws) == 8  # 2 epochs x 4 steps, one draw each; validation draws none
    first = RecordingMixup(0.2)
    with pytest.raises(TrainingInterrupted) as info:
        _fit(first, tmp_path / "b", callbacks=[SignalAt(3)])  # SIGINT after step 3: last.pt, then stop
    assert info.value.step == 3 and info.value.saved
    second = RecordingMixup(0.2)
    model_b = _fit(second, tmp_path / "b")  # resumes from last.pt with its random states
    assert len(first.draws) == 3 and len(second.draws) == 5
    assert first.draws + second.draws == straight.draws
    assert second.draws[0] != straight.draws[0]  # continued the stream, not restarted it
    for p, q in zip(model_a.parameters(), model_b.parameters()):
        assert torch.equal(p, q)


@pytest.mark.parametrize("bad", [0, -0.2, "0.2", None, True, math.nan, math.inf, [0.2]])
def test_a_bad_concentration_is_refused_by_name(bad):
    with pytest.raises(ValueError, match=r"alpha=.*must be a finite number > 0"):
        Mixup(bad)
    if bad is None:  # in a configuration, None means no Mixup
        hv.check_config(hv.make_config("hacn", 0, profile="paper", mixup=None))
        return
    with pytest.raises(ValueError, match=r"mixup=.*must be a finite number > 0"):
        hv.check_config(hv.make_config("hacn", 0, profile="paper", mixup=bad))


def test_only_the_paper_profile_mixes_and_the_book_hashes_are_unchanged():
    experiment = catalog.get(hv.EXPERIMENT_ID)
    paper = experiment.runs("paper")
    assert len(paper) == 9 and all(c["mixup"] == hv.PAPER_MIXUP == 0.2 for c in paper)
    for profile, before in (("book", BOOK_HASHES), ("smoke", SMOKE_HASHES)):
        configs = experiment.runs(profile)
        assert all("mixup" not in c for c in configs)
        assert {config_hash(c) for c in configs} == before
    with pytest.raises(ValueError, match=r"unknown configuration keys \['mixup'\]"):
        hv.make_config("hacn", 0, profile="book", mixup=0.2)
    generated = {config_hash(c) for p in ("smoke", "book", "paper") for c in experiment.runs(p)}
    for path in sorted((RESULTS / hv.EXPERIMENT_ID).glob("*.json")):  # stored hacn-vit runs, if any yet
        data = json.loads(path.read_text())
        assert data["config_hash"] == config_hash(data["config"]) == path.stem
        assert data["config_hash"] in generated, path


def test_the_study_trains_with_a_mixup_hook_when_its_config_says_so(fake_images, tmp_path, monkeypatch):
    seen: list = []

    class Stop(Exception):
        pass

    def capture(*args, forward=None, **kwargs):
        seen.append(forward)
        raise Stop

    monkeypatch.setattr(hv, "fit", capture)
    smoke = hv.make_config("hacn", 0, profile="smoke")
    for config in (smoke, {**smoke, "mixup": 0.2}):
        with pytest.raises(Stop):
            hv.train_hacn_vit(config, hv.RunContext(hv.EXPERIMENT_ID, tmp_path, progress=False))
    assert seen[0] is None
    assert isinstance(seen[1], Mixup) and seen[1].alpha == 0.2
