"""The backbones of AWNN's image, graph and text experiments (AWNN Sec. 4, App. B-C, Tables 2, 4, 5).

ResNet-20 with a fixed or adaptive classifier (:mod:`hacn_core.models.resnet20`), GIN
with fixed or adaptive MLPs (:mod:`hacn_core.models.gin`), an encoder-decoder
Transformer with fixed or adaptive FFNs (:mod:`hacn_core.models.seq2seq`) and the
evaluation protocol of Errica et al. (2020) (:mod:`hacn_core.engine.folds`). Each test
checks a property: a hand computation, an equivalence, a count, the optimizer state
of surviving neurons, a decrease of the loss.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from hacn_core.awnn import ELBOLoss, adaptive_mlps, model_widths, quantile_width, raw_from_rate, update_widths
from hacn_core.engine.folds import assessment_folds, load_split_file, stratified_folds
from hacn_core.models.gin import GIN, GINConfig
from hacn_core.models.mlp import make_mlp
from hacn_core.models.resnet20 import ResNet20Config, resnet20
from hacn_core.models.seq2seq import Seq2SeqTransformer, TransformerConfig



@pytest.fixture(autouse=True)
def _one_thread():
    """One torch thread: many small ops on a loaded 2-core machine are slow with two."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


TINY_TEXT = dict(src_vocab=13, tgt_vocab=11, d_model=16, heads=2, encoder_layers=2, decoder_layers=2, max_len=16)


def _graph() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Two graphs: a path 0-1-2 with a pendant 3 on node 1, and a triangle 4-5-6 (edges both ways)."""
    und = [(0, 1), (1, 2), (1, 3), (4, 5), (5, 6), (6, 4)]
    edge_index = torch.tensor([[a for a, b in und] + [b for a, b in und], [b for a, b in und] + [a for a, b in und]])
    batch = torch.tensor([0, 0, 0, 0, 1, 1, 1])
    x = torch.randn(7, 3, dtype=torch.float64)
    return x, edge_index, batch


# --------------------------------------------------------------------------------- the MLP kinds


def test_fixed_kind_takes_the_activation_and_adaptive_kind_the_starting_rate():
    torch.manual_seed(0)
    mlp = make_mlp("fixed", 4, 6, 2, activation="leaky_relu", negative_slope=0.2).double()
    x = torch.randn(5, 4, dtype=torch.float64)
    w1, b1, w2, b2 = mlp[0].weight, mlp[0].bias, mlp[2].weight, mlp[2].bias
    z = x @ w1.T + b1
    torch.testing.assert_close(mlp(x), torch.where(z > 0, z, 0.2 * z) @ w2.T + b2)
    adaptive = make_mlp("adaptive", 4, 999, 2, rate_init=0.02)  # the rate sets the width (Eq. 11), not 999
    assert adaptive.widths() == [quantile_width(0.02)] == [116]
    assert float(adaptive.rates().detach()) == pytest.approx(0.02)


def test_adaptive_ffn_on_tokens_equals_the_ffn_token_by_token():
    """Inside the Transformer, an adaptive FFN on ``(B, T, d)`` is the same MLP on each token."""
    torch.manual_seed(1)
    model = Seq2SeqTransformer(TransformerConfig(**TINY_TEXT, ffn="adaptive", ffn_rate=0.15)).double()
    for layer in [*model.encoder, *model.decoder]:
        x = torch.randn(3, 5, 16, dtype=torch.float64)
        together = layer.ffn(x)
        one_by_one = torch.stack([torch.stack([layer.ffn(x[b, t]) for t in range(5)]) for b in range(3)])
        assert together.shape == (3, 5, 16)
        torch.testing.assert_close(together, one_by_one, rtol=1e-12, atol=1e-12)
    assert model_widths(model) == [quantile_width(0.15)] * 4


# --------------------------------------------------------------------------------- ResNet-20


def test_resnet20_has_the_parameters_of_he_et_al():
    """0.27M with a linear classifier (He et al. 2016, Table 6): 269,722 for 10 classes."""
    def count(model):
        return sum(p.numel() for p in model.parameters())

    linear = resnet20()
    assert count(linear) == 269_722
    assert len([m for m in linear.modules() if isinstance(m, torch.nn.Conv2d)]) == 19  # + the classifier = 20
    for width in (32, 128, 256, 512):  # Table 4: an MLP head 64 -> D -> 10 replaces the 650 of the linear one
        assert count(resnet20(head_width=width)) == 269_722 - 650 + (64 * width + width) + (width * 10 + 10)
    adaptive = resnet20(head="adaptive")
    assert adaptive.head.widths() == [116]  # rate 0.02 at k = 0.9 (Table 4: "approximately 128")
    assert adaptive.head.config.activation == "leaky_relu"


def test_resnet20_takes_mnist_images_and_option_a_shortcuts_are_parameter_free():
    torch.manual_seed(2)
    model = resnet20(in_channels=1, head="adaptive").eval()
    x = torch.randn(3, 1, 28, 28)
    assert model.features(x).shape == (3, 64)
    assert model(x).shape == (3, 10)
    block = model.stages[1][0]  # 16 -> 32 channels, stride 2: option A
    h = torch.randn(2, 16, 8, 8)
    s = block.shortcut(h)
    assert s.shape == (2, 32, 4, 4) and not list(block.shortcut.parameters())
    torch.testing.assert_close(s[:, :16], h[:, :, ::2, ::2])
    assert torch.all(s[:, 16:] == 0)


# --------------------------------------------------------------------------------- GIN


@pytest.mark.parametrize("pooling", ["sum", "mean"])
def test_gin_with_fixed_mlps_equals_a_hand_written_gin(pooling):
    torch.manual_seed(3)
    model = GIN(GINConfig(in_features=3, num_classes=2, layers=2, pooling=pooling, dim=4, hidden=5,
                          train_eps=True)).double()
    with torch.no_grad():
        model.convs[0].eps.fill_(0.3)
        model.convs[1].eps.fill_(-0.2)
    x, edge_index, batch = _graph()

    def mlp(m, h):  # Linear -> ReLU -> Linear
        return F.relu(h @ m[0].weight.T + m[0].bias) @ m[2].weight.T + m[2].bias

    h = F.relu(mlp(model.pre, x))
    layers = [h]
    for conv in model.convs:
        agg = (1 + conv.eps) * h  # (1 + eps) h_v ...
        agg = agg.clone()
        for u, v in edge_index.T.tolist():  # ... + sum over the neighbours u of v, one edge at a time
            agg[v] = agg[v] + h[u]
        h = F.relu(mlp(conv.nn, agg))
        layers.append(h)
    graphs = []
    for g in (0, 1):
        nodes = (batch == g).nonzero().flatten()
        pooled = [hl[nodes].sum(0) if pooling == "sum" else hl[nodes].mean(0) for hl in layers]
        graphs.append(torch.cat(pooled))
    expected = torch.stack(graphs) @ model.classifier.weight.T + model.classifier.bias
    torch.testing.assert_close(model(x, edge_index, batch), expected)


def test_gin_options_of_table5():
    for layers in (1, 2, 4):
        model = GIN(in_features=37, num_classes=2, layers=layers, mlp="adaptive")
        assert len(model.convs) == layers and model.classifier.in_features == (layers + 1) * 64
        assert model_widths(model) == [116] * (layers + 1)  # the MLP before the convolutions and one per layer


# --------------------------------------------------------------------------------- optimizer state


def _adam_state(opt, p):
    return {k: opt.state[p][k].clone() for k in ("exp_avg", "exp_avg_sq")}


def _check_resize_keeps_state(model, mlp, loss_of, new_rate):
    """Train 2 steps, move ``mlp``'s rate to ``new_rate`` and let ``update_widths`` resize it:
    the surviving neurons keep their weights and Adam moments; new ones start at zero state."""
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for _ in range(2):
        update_widths(model, opt)
        opt.zero_grad()
        loss_of(model).backward()
        opt.step()
    d = mlp.widths()[0]
    lin0, lin1 = mlp.layers
    rho0, rho1 = lin0.rho.detach().clone(), lin1.rho.detach().clone()
    st0, st1 = _adam_state(opt, lin0.rho), _adam_state(opt, lin1.rho)
    ids = [id(p) for g in opt.param_groups for p in g["params"]]
    with torch.no_grad():
        mlp.raw_rate.fill_(raw_from_rate(new_rate))
    assert update_widths(model, opt)  # Algorithm 1, line 5, as the WidthCallback calls it
    e = mlp.widths()[0]
    assert e == quantile_width(new_rate) != d
    keep = min(d, e)
    assert [id(p) for g in opt.param_groups for p in g["params"]] == ids  # the optimizer still holds the model
    assert lin0.rho.shape == (e, 1 + lin0.in_features) and lin1.rho.shape == (lin1.out_features, 1 + e)
    torch.testing.assert_close(lin0.rho[:keep], rho0[:keep])
    torch.testing.assert_close(lin1.rho[:, : 1 + keep], rho1[:, : 1 + keep])
    for key in ("exp_avg", "exp_avg_sq"):
        s0, s1 = opt.state[lin0.rho][key], opt.state[lin1.rho][key]
        assert s0.shape == lin0.rho.shape and s1.shape == lin1.rho.shape
        torch.testing.assert_close(s0[:keep], st0[key][:keep])  # incoming weights of surviving neurons
        torch.testing.assert_close(s1[:, : 1 + keep], st1[key][:, : 1 + keep])  # their outgoing weights
        assert torch.all(s0[keep:] == 0) and torch.all(s1[:, 1 + keep:] == 0)  # new neurons: fresh state
        assert st0[key][:keep].abs().sum() > 0  # there was state to keep
    # the model still trains after the resize
    opt.zero_grad()
    loss = loss_of(model)
    loss.backward()
    opt.step()
    assert torch.isfinite(loss)


@pytest.mark.parametrize("new_rate", [0.012, 0.04])  # grow from 116 to 192 neurons, shrink to 58
def test_resnet20_adaptive_head_resizes_keeping_adam_state(new_rate):
    torch.manual_seed(4)
    model = resnet20(in_channels=1, head="adaptive", widths=(4, 8, 8))
    x, y = torch.randn(8, 1, 12, 12), torch.randint(0, 10, (8,))
    elbo = ELBOLoss(model, n_train=8)
    _check_resize_keeps_state(model, model.head, lambda m: elbo(m(x), y), new_rate)


@pytest.mark.parametrize("new_rate", [0.012, 0.04])
def test_gin_adaptive_layer_resizes_keeping_adam_state(new_rate):
    torch.manual_seed(5)
    model = GIN(in_features=3, num_classes=2, layers=2, dim=8, mlp="adaptive").double()
    x, edge_index, batch = _graph()
    y = torch.tensor([0, 1])
    elbo = ELBOLoss(model, n_train=2)
    _check_resize_keeps_state(model, model.convs[1].nn, lambda m: elbo(m(x, edge_index, batch), y), new_rate)
    assert model_widths(model)[2] == quantile_width(new_rate)


# --------------------------------------------------------------------------------- one training step


def _one_step_lowers_the_loss(model, loss_of, lr):
    """One SGD step on a fixed batch: finite, non-zero gradients for every rate, and a lower loss."""
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    update_widths(model, opt)
    opt.zero_grad()
    before = loss_of(model)
    before.backward()
    rates = [m.raw_rate for m in adaptive_mlps(model)]
    assert rates
    for r in rates:
        assert r.grad is not None and torch.isfinite(r.grad).all() and torch.all(r.grad != 0)
    opt.step()
    with torch.no_grad():
        after = loss_of(model)
    assert after < before, (float(before), float(after))


def test_one_step_of_resnet20_with_an_adaptive_head_lowers_the_loss():
    torch.manual_seed(6)
    model = resnet20(in_channels=1, head="adaptive", widths=(4, 8, 8)).double()
    x, y = torch.randn(16, 1, 12, 12, dtype=torch.float64), torch.randint(0, 10, (16,))
    elbo = ELBOLoss(model, n_train=16)  # N = M: the mean cross-entropy times 16
    _one_step_lowers_the_loss(model, lambda m: elbo(m(x), y), lr=1e-3)


def test_one_step_of_gin_with_adaptive_mlps_lowers_the_loss():
    torch.manual_seed(7)
    model = GIN(in_features=3, num_classes=2, layers=2, dim=8, mlp="adaptive", pooling="mean").double()
    x, edge_index, batch = _graph()
    y = torch.tensor([0, 1])
    elbo = ELBOLoss(model, n_train=2, sigma_theta=10.0)  # Table 5's weight prior
    _one_step_lowers_the_loss(model, lambda m: elbo(m(x, edge_index, batch), y), lr=1e-3)


def test_one_step_of_the_transformer_with_adaptive_ffns_lowers_the_loss():
    torch.manual_seed(8)
    model = Seq2SeqTransformer(**TINY_TEXT, ffn="adaptive", ffn_rate=0.1, dropout=0.0).double()
    src = torch.randint(1, 13, (4, 6))
    tgt = torch.randint(1, 11, (4, 6))
    tgt[1, 4:] = 0  # a padded target: ignored by the loss, masked in attention
    dec_in, dec_out = tgt[:, :-1], tgt[:, 1:]
    n_tokens = int((dec_out != 0).sum())
    elbo = ELBOLoss(model, n_train=n_tokens, ignore_index=0)
    _one_step_lowers_the_loss(model, lambda m: elbo(m(src, dec_in), dec_out), lr=1e-3)
    assert len(adaptive_mlps(model)) == 4  # one FFN per encoder and decoder layer


def test_the_decoder_is_causal():
    """Changing target token ``t`` changes no logits before ``t`` (Vaswani Sec. 3.2.3)."""
    torch.manual_seed(9)
    model = Seq2SeqTransformer(**TINY_TEXT, ffn="adaptive", ffn_rate=0.2).eval()
    src, tgt = torch.randint(1, 13, (2, 5)), torch.randint(1, 11, (2, 6))
    changed = tgt.clone()
    changed[:, 3] = (tgt[:, 3] % 10) + 1
    a, b = model(src, tgt), model(src, changed)
    torch.testing.assert_close(a[:, :3], b[:, :3])
    assert not torch.allclose(a[:, 3:], b[:, 3:])


# --------------------------------------------------------------------------------- the folds


@pytest.fixture(scope="module")
def nci1_labels():
    pytest.importorskip("torch_geometric")
    from hacn_core.engine.data import load_tudataset, missing_files

    if missing_files("NCI1"):
        pytest.skip("NCI1 is not under $HACN_DATA")
    return load_tudataset("NCI1", download=False).y.numpy()


@pytest.mark.data
def test_outer_folds_of_nci1_are_stratified_disjoint_and_cover_it(nci1_labels):
    y = nci1_labels
    folds = assessment_folds(y, n_folds=10, holdout=0.1, seed=0)
    assert len(folds) == 10
    tests = [f.test for f in folds]
    assert np.array_equal(np.sort(np.concatenate(tests)), np.arange(len(y)))  # cover, each graph once
    counts = np.bincount(y)
    for f in folds:
        assert (len(f.train), len(f.validation), len(f.test)) == (3329, 370, 411)  # AWNN Table 2
        assert not np.intersect1d(f.train, f.validation).size and not np.intersect1d(f.outer_train, f.test).size
        assert np.array_equal(np.sort(np.concatenate([f.outer_train, f.test])), np.arange(len(y)))
        per_class = np.bincount(y[f.test], minlength=len(counts))
        assert np.all(np.abs(per_class - counts / 10) <= 1)  # stratified outer fold
        val_class = np.bincount(y[f.validation], minlength=len(counts))
        assert np.all(np.abs(val_class - 0.1 * np.bincount(y[f.outer_train])) <= 0.5)  # stratified hold-out
    again = assessment_folds(y, seed=0)
    other = assessment_folds(y, seed=1)
    assert all(np.array_equal(a.test, b.test) and np.array_equal(a.validation, b.validation)
               for a, b in zip(folds, again))
    assert not np.array_equal(folds[0].test, other[0].test)


def test_a_split_file_gives_its_folds(tmp_path):
    y = np.array([0] * 12 + [1] * 8)
    tests = stratified_folds(y, 4, seed=3)
    entries = [{"train": np.setdiff1d(np.arange(20), t).tolist(), "test": t.tolist()} for t in tests]
    entries[0]["validation"] = entries[0]["train"][:2]
    path = tmp_path / "splits.json"
    path.write_text(json.dumps(entries))
    folds = assessment_folds(y, split_file=path, holdout=0.25, seed=0)
    assert [f.test.tolist() for f in folds] == [t.tolist() for t in tests]
    assert folds[0].validation.tolist() == entries[0]["train"][:2]  # the file's hold-out
    assert np.bincount(y[folds[1].validation]).tolist() == [2, 2]  # drawn: 25% of 9 and 6, rounded
    assert np.array_equal(folds[1].outer_train, np.array(entries[1]["train"]))
    entries[2]["test"] = entries[2]["test"] + entries[2]["train"][:1]
    path.write_text(json.dumps(entries))
    with pytest.raises(ValueError, match="fold 2 'train' and 'test' overlap"):
        load_split_file(path, 20)


# --------------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: GINConfig(in_features=3, num_classes=2, pooling="max"),
         "pooling='max' is not valid; allowed: sum, mean"),
        (lambda: GINConfig(in_features=3, num_classes=2, layers=0), "layers=0 must be an integer >= 1"),
        (lambda: GINConfig(in_features=3, num_classes=2, mlp="gated"),
         "mlp='gated' is not valid; allowed: fixed, adaptive"),
        (lambda: ResNet20Config(head="gated"), "head='gated' is not valid; allowed: fixed, adaptive"),
        (lambda: ResNet20Config(head_width=-1), "head_width=-1 must be an integer >= 0"),
        (lambda: ResNet20Config(head="adaptive", head_width=128), "head_width=128 is for head='fixed'"),
        (lambda: ResNet20Config(head_rate=0), "head_rate=0 must be a rate > 0"),
        (lambda: TransformerConfig(src_vocab=10, tgt_vocab=10, d_model=10, heads=3),
         "d_model=10 must be a multiple of heads=3"),
        (lambda: TransformerConfig(src_vocab=10, tgt_vocab=10, ffn="wide"),
         "ffn='wide' is not valid; allowed: fixed, adaptive"),
        (lambda: TransformerConfig(src_vocab=10, tgt_vocab=10, dropout=1.0), "dropout=1.0 must lie in [0, 1)"),
        (lambda: make_mlp("fixed", 4, 4, activation="swish"), "activation='swish' is not valid; allowed: gelu"),
        (lambda: assessment_folds([0, 1] * 10, holdout=1.0), "holdout=1.0 must be a fraction in the open interval (0, 1)"),
        (lambda: assessment_folds([0, 1] * 10, holdout=0), "holdout=0 must be a fraction in the open interval (0, 1)"),
        (lambda: assessment_folds([0, 1] * 10, n_folds=1), "n_folds=1 must be an integer in [2, 20]"),
    ],
)
def test_bad_input_fails_naming_the_field(build, message):
    with pytest.raises(ValueError) as info:
        build()
    assert str(info.value).startswith(message)


def test_too_long_sequences_are_refused():
    model = Seq2SeqTransformer(**TINY_TEXT)
    with pytest.raises(ValueError, match="src length 17 exceeds max_len=16"):
        model(torch.ones(1, 17, dtype=torch.long), torch.ones(1, 3, dtype=torch.long))
