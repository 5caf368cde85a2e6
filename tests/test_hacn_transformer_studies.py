"""The H-ACN transformer studies (hacn-vit, hacn-decoder): smoke runs into a temp store, exits, resume, errors."""

from __future__ import annotations

import math
import signal

import numpy as np
import pytest
import torch

from hacn_core import catalog
from hacn_core.engine import training
from hacn_core.engine.data import DatasetMissingError
from hacn_core.engine.results import ResultsStore, RunContext
from hacn_core.engine.training import Callback, TrainingInterrupted
from hacn_core.hacn.connectivity import total_connectivity_strength
from hacn_core.hacn.studies import decoder as hd
from hacn_core.hacn.studies.common import NOISE_STDS
from hacn_core.hacn.studies import mixer as hm
from hacn_core.hacn.studies import vit as hv
from hacn_core.hacn.text import tiny_shakespeare
from test_hacn_mixer import _fake_images  # 28x28 images whose class lights up one 7x7 patch


@pytest.fixture
def fake_images(monkeypatch):
    monkeypatch.setattr(hm, "image_tensors", _fake_images)  # the ViT study reads the Mixer study's splits


class SignalAt(Callback):
    """Sends SIGINT to this process after optimizer step ``at``: ``fit`` saves ``last.pt`` and stops."""

    def __init__(self, at: int) -> None:
        self.at = at

    def on_step_end(self, state):
        if state.step == self.at:
            signal.raise_signal(signal.SIGINT)


def _interrupting_fit(at: int):
    def fit(*args, callbacks=(), **kwargs):
        return training.fit(*args, callbacks=[*callbacks, SignalAt(at)], **kwargs)
    return fit


TIMINGS = ("seconds", "seconds_per_epoch")


def _check_resume(study, train, config: dict, at: int, tmp_path, monkeypatch) -> None:
    """``train`` interrupted (SIGINT) after step ``at`` and run again ends with the uninterrupted result."""
    straight = train(config, RunContext(study.EXPERIMENT_ID, tmp_path / "a", progress=False))
    monkeypatch.setattr(study, "fit", _interrupting_fit(at))
    with pytest.raises(TrainingInterrupted) as info:
        train(config, RunContext(study.EXPERIMENT_ID, tmp_path / "b", progress=False))
    assert info.value.step == at and info.value.saved
    monkeypatch.setattr(study, "fit", training.fit)
    resumed = train(config, RunContext(study.EXPERIMENT_ID, tmp_path / "b", progress=False))
    for part, timed in (("metrics", TIMINGS), ("curves", ("time_s",))):
        assert {k: v for k, v in straight[part].items() if k not in timed} == \
            {k: v for k, v in resumed[part].items() if k not in timed}


# ----------------------------------------------------------------------------- ViT


def test_vit_smoke_profile_runs_into_a_temp_store(fake_images, tmp_path):
    results = catalog.run(hv.EXPERIMENT_ID, "smoke", store=ResultsStore(tmp_path), progress=False)
    assert [r.config["rule"] for r in results] == ["resnet", "acn", "hacn"]
    assert len(list((tmp_path / hv.EXPERIMENT_ID).glob("*.json"))) == 3
    for r in results:
        m, c = r.metrics, r.curves
        L = r.config["num_layers"]
        assert len(c["layerwise_test_accuracy"]) == L + 1
        # the last exit of the one-pass layer-wise evaluation is the model's ordinary output
        assert m["final_exit_accuracy"] == c["layerwise_test_accuracy"][-1] == pytest.approx(m["test_accuracy"])
        assert all(0.0 <= a <= 1.0 for a in c["layerwise_test_accuracy"])
        assert [f"noise_accuracy/{s:g}" for s in NOISE_STDS] == [k for k in m if k.startswith("noise_accuracy/")]
        assert all(0.0 <= m[f"noise_accuracy/{s:g}"] <= 1.0 for s in NOISE_STDS)
        assert len(c["train_loss"]) == len(c["val_accuracy"]) == r.config["epochs"]
        assert m["parameters"] > 0 and m["saved_activation_bytes"] > 0
        assert ("gamma" in m) == (r.config["rule"] == "hacn")
    hacn = results[2]
    a = hacn.curves["alpha_final"]
    assert len(a) == hacn.config["num_layers"] and hacn.metrics["gamma"] == pytest.approx(
        total_connectivity_strength(torch.tensor(a)))
    assert hacn.curves["gamma"][0] == pytest.approx(0.25, abs=0.02)  # a_i ~ N(0.25, 0.005) at step 0
    assert hacn.curves["delta"][-1] == 0.0 and len(hacn.curves["delta"]) == len(hacn.curves["record_step"])


def test_vit_learns_and_its_exits_are_the_truncated_outputs(fake_images, tmp_path):
    config = hv.make_config("hacn", 0, profile="smoke", epochs=5, train_subset=None, dim=32, num_heads=2, mlp_dim=64)
    out = hv.train_hacn_vit(config, RunContext(hv.EXPERIMENT_ID, tmp_path, progress=False))
    assert out["metrics"]["test_accuracy"] > 0.3 and out["curves"]["train_loss"][-1] < out["curves"]["train_loss"][0]
    model = hv.build_model(config | {"seed": 1})
    torch.nn.init.normal_(model.head.fc.weight)  # the zero head would make every exit predict alike
    x = torch.randn(5, 1, 28, 28)
    with torch.no_grad():
        logits = model.layerwise_logits(x)
        assert torch.allclose(logits[-1], model(x), atol=1e-6)
        assert torch.allclose(logits[1], model(x, num_layers=1), atol=1e-6)


def test_vit_resumed_run_equals_an_uninterrupted_one(fake_images, tmp_path, monkeypatch):
    _check_resume(hv, hv.train_hacn_vit, hv.make_config("hacn", 0, profile="smoke", epochs=2), 5, tmp_path,
                  monkeypatch)


def test_vit_configurations_and_errors():
    book = hv.EXPERIMENT.configs["book"]()
    assert len(book) == 9 and {c["num_layers"] for c in book} == {12}
    assert {(c["rule"], c["alpha_mu"]) for c in book} == {("resnet", None), ("acn", None), ("hacn", 0.25)}
    paper = hv.make_config("hacn", 0, profile="paper")
    assert (paper["dataset"], paper["dim"], paper["patch_size"], paper["epochs"]) == ("ImageNet", 384, 16, 300)
    assert hv.make_config("hacn_code_vit", 0)["alpha_mu"] == 0.5
BAD_CONFIGS = [  # (study, rule, overrides, the error's words)
    (hv, "skip", {}, "rule='skip'.*allowed: resnet, acn, hacn, hacn_code_vit"),
    (hv, "hacn", {"dataset": "CIFAR10"}, "dataset='CIFAR10'.*allowed: FashionMNIST, ImageNet"),
    (hv, "hacn", {"num_layers": 0}, "num_layers=0 must be a positive integer"),
    (hv, "hacn", {"test_subset": -1}, "test_subset=-1 must be None or a positive integer"),
    (hv, "hacn", {"image_size": 32}, "FashionMNIST has 10 classes"),
    (hv, "hacn", {"alpha_mu": None}, "alpha_mu=None: the rules hacn, hacn_code_vit need a number"),
    (hv, "acn", {"warmup_fraction": 1.5}, r"warmup_fraction=1.5 must be in \[0, 1\)"),
    (hd, "skip", {}, "rule='skip'.*allowed: resnet, acn, hacn, hacn_code_gpt"),
    (hd, "hacn", {"eval_every_steps": 30}, "eval_every_steps=30 must be a multiple of record_every_steps=25"),
    (hd, "hacn", {"vocab_size": 100}, "vocab_size=100: Tiny Shakespeare has 65 characters"),
    (hd, "hacn", {"dropout": 1.5}, "dropout=1.5 must be in"),
    (hd, "hacn", {"steps": 0}, "steps=0 must be a positive integer"),
    (hd, "hacn", {"cloze_items": -2}, "cloze_items=-2 must be an integer >= 0"),
    (hd, "resnet", {"alpha_mu": 0.5}, "alpha_mu=0.5: the rules hacn, hacn_code_gpt need a number, the others None"),
]


@pytest.mark.parametrize("study,rule,overrides,words", BAD_CONFIGS)
def test_bad_configuration_values_are_named(study, rule, overrides, words):
    config = study.make_config(rule, 0) | overrides
    with pytest.raises(ValueError, match=words):
        study.check_config(config)


@pytest.mark.parametrize("study,key", [(hv, "depth"), (hd, "layers")])
def test_unknown_keys_and_profiles_are_refused(study, key):
    with pytest.raises(ValueError, match=rf"unknown configuration keys \['{key}'\]"):
        study.make_config("hacn", 0, **{key: 3})
    with pytest.raises(ValueError, match="profile='huge'.*allowed: smoke, book, paper"):
        study.make_config("hacn", 0, profile="huge")


def test_missing_imagenet_says_how_to_get_it(tmp_path):
    with pytest.raises(DatasetMissingError, match=r"ImageNet-1k not found.*train.*image-net\.org.*ImageFolder"):
        hv.imagenet_splits(hv.make_config("hacn", 0, profile="paper"), root=tmp_path)


# ----------------------------------------------------------------------------- decoder


def test_decoder_smoke_profile_runs_into_a_temp_store(tmp_path):
    results = catalog.run(hd.EXPERIMENT_ID, "smoke", store=ResultsStore(tmp_path), progress=False)
    assert [r.config["rule"] for r in results] == ["resnet", "acn", "hacn"]
    for r in results:
        m, c, cfg = r.metrics, r.curves, r.config
        assert len(c["layerwise_val_perplexity"]) == cfg["num_layers"] + 1
        # the last exit of the one-pass layer-wise perplexity is the model's ordinary output
        assert m["final_exit_perplexity"] == pytest.approx(m["val_perplexity"], rel=1e-5)
        assert m["val_perplexity"] == pytest.approx(math.exp(m["val_loss"]))
        assert all(1.0 < p < 200.0 for p in c["layerwise_val_perplexity"])  # 65 characters: uniform is 65
        assert [f"cloze_accuracy/{p:g}" for p in hd.CLOZE_NOISE] == [k for k in m if k.startswith("cloze_")]
        for p in hd.CLOZE_NOISE:
            acc = m[f"cloze_accuracy/{p:g}"] * cfg["cloze_items"]
            assert 0 <= acc <= cfg["cloze_items"] and acc == round(acc)  # a count of items out of 16
        assert c["loss_step"] == [0, 10, 20] and len(c["val_eval_loss"]) == len(c["train_eval_loss"]) == 3
        assert m["steps"] == 20 and m["tokens_seen"] == 20 * 8 * 96
        assert ("gamma" in m) == (cfg["rule"] == "hacn")
    hacn = results[2]
    hist = np.array(hacn.curves["alpha_history"])
    assert hist.shape == (len(hacn.curves["record_step"]), 2)
    assert hacn.curves["delta"] == pytest.approx(np.linalg.norm(hist[-1] - hist, axis=1).tolist())
    assert hacn.curves["gamma"][0] == pytest.approx(0.25, abs=0.02)


def test_decoder_learns_and_its_last_exit_is_the_forward_loss(tmp_path):
    config = hd.make_config("hacn", 0, profile="smoke", steps=40, lr=3e-3)
    out = hd.train_hacn_decoder(config, RunContext(hd.EXPERIMENT_ID, tmp_path, progress=False))
    c = out["curves"]
    assert c["val_eval_loss"][-1] < c["val_eval_loss"][0] - 0.3  # from ~ln 65 = 4.17 down
    model = hd.build_model(config)
    text, tok = tiny_shakespeare()
    windows = hd.TokenWindows(tok.encode(text[-5000:]), config["block_size"], 6, starts="tiled")
    ppl = hd.evaluate_layerwise_perplexity(model, windows.batches(4))
    assert float(ppl[-1]) == pytest.approx(math.exp(hd.mean_loss(model, windows, 4)), rel=1e-5)


def test_decoder_resumed_run_equals_an_uninterrupted_one(tmp_path, monkeypatch):
    config = hd.make_config("hacn", 0, profile="smoke", dropout=0.1)  # dropout: the random state is resumed too
    _check_resume(hd, hd.train_hacn_decoder, config, 7, tmp_path, monkeypatch)


def test_token_windows_are_shifted_slices_drawn_by_index():
    tokens = np.arange(1000, dtype=np.uint16)
    w = hd.TokenWindows(tokens, 16, 50, seed=3)
    x, y = w.__getitems__([0, 7, 49])
    assert x.dtype == torch.long and x.shape == y.shape == (3, 16)
    assert torch.equal(y, x + 1) and torch.equal(x[:, 1:] - x[:, :-1], torch.ones(3, 15, dtype=torch.long))
    assert torch.equal(w.__getitems__([7])[0][0], x[1])  # a window depends on its index only
    starts = w.starts(np.arange(50))
    assert starts.min() >= 0 and starts.max() <= 1000 - 16 and len(set(starts.tolist())) > 40
    assert not np.array_equal(starts, hd.TokenWindows(tokens, 16, 50, seed=4).starts(np.arange(50)))
    tiled = hd.TokenWindows(tokens, 16, 62, starts="tiled")
    xs = torch.cat([b[0] for b in tiled.batches(10)])
    assert torch.equal(xs.reshape(-1), torch.arange(62 * 16))  # every token once, in order
    with pytest.raises(ValueError, match="only 62 tiled windows fit"):
        hd.TokenWindows(tokens, 16, 63, starts="tiled")


def test_decoder_configurations_and_errors(tmp_path):
    book = hd.EXPERIMENT.configs["book"]()
    assert len(book) == 9 and {c["num_layers"] for c in book} == {12}
    assert {(c["rule"], c["alpha_mu"]) for c in book} == {("resnet", None), ("acn", None), ("hacn", 0.25)}
    paper = hd.make_config("hacn", 0, profile="paper")
    assert (paper["num_layers"], paper["dim"], paper["num_heads"], paper["block_size"]) == (24, 768, 12, 256)
    assert (paper["steps"], paper["batch_size"], paper["accumulate"], paper["betas"]) == (240_000, 128, 4, [0.9, 0.95])
    with torch.device("meta"):
        assert sum(p.numel() for p in hd.build_model(paper).parameters()) == 208_540_416 + 48  # Table 4 + a_i, DepthLN
    assert hd.make_config("hacn_code_gpt", 0)["alpha_mu"] == 1.0
    with pytest.raises(DatasetMissingError, match=r"OpenWebText2 tokens not found.*GPT-2 BPE.*uint16"):
        hd.load_corpus(paper, root=tmp_path)
