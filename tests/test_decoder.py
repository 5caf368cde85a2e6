"""Tests of hacn_core.models.decoder: the GPT-2 decoder with RoPE of H-ACN Sec. 3.4 / Table 4,
its residual rules, causality, RoPE, layer-wise exits and chunked layer-wise perplexity."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from hacn_core.awnn import fast_cpp
from hacn_core.models.decoder import DecoderConfig, GPTDecoder, evaluate_layerwise_perplexity
from hacn_core.models.mixer import num_parameters
from hacn_core.models.mlp import GatedMlp, Mlp
from hacn_core.models.transformer import apply_rotary, rotary_tables

SMALL = DecoderConfig(vocab_size=17, max_seq_len=12, dim=16, num_layers=3, num_heads=2, dropout=0.0)


def small(**overrides) -> GPTDecoder:
    torch.manual_seed(0)
    return GPTDecoder(SMALL, **overrides).double()


def tokens(batch=2, length=10, seed=0, vocab=17):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab, (batch, length), generator=g)


def table4_parameter_count(bias: bool = False, tied: bool = True, extra_per_layer: int = 0) -> int:
    """Parameters of Table 4's decoder counted by hand: 24 blocks of 12 d^2 (+ biases), embedding, norms."""
    d, layers, vocab = 768, 24, 50304
    block = 12 * d * d + 2 * d  # qkv 3d^2, proj d^2, MLP 8d^2; two LayerNorm gains
    if bias:
        block += 3 * d + d + 4 * d + d + 2 * d  # qkv, proj, MLP biases; LayerNorm biases
    final_norm = d * (2 if bias else 1)
    return vocab * d * (1 if tied else 2) + layers * (block + extra_per_layer) + final_norm


def test_table4_parameter_count_is_bias_free_with_tied_embeddings():
    cfg = DecoderConfig()
    sizes = (cfg.num_layers, cfg.dim, cfg.num_heads, cfg.vocab_size, cfg.max_seq_len, cfg.dropout)
    assert sizes == (24, 768, 12, 50304, 256, 0.2)
    with torch.device("meta"):  # no memory, no time: only the shapes are built
        res = GPTDecoder(rule="resnet")
        hacn = GPTDecoder()  # H-ACN with DepthLN: one a_i and one DepthLN strength per layer
        with_bias = GPTDecoder(rule="resnet", bias=True)
        untied = GPTDecoder(rule="resnet", tie_embeddings=False)
    # Table 4 reports 208.54M: the bias-free GPT-2 with the head tied to the input embedding
    assert num_parameters(res) == table4_parameter_count() == 208_540_416
    assert round(num_parameters(res) / 1e6, 2) == 208.54
    assert num_parameters(hacn) == table4_parameter_count(extra_per_layer=2) == 208_540_464
    assert round(num_parameters(hacn) / 1e6, 2) == 208.54
    # the other conventions do not give 208.54M
    assert num_parameters(with_bias) == table4_parameter_count(bias=True) == 208_743_936
    assert num_parameters(untied) == table4_parameter_count(tied=False) == 247_173_888
    assert res.head.proj.weight is res.embed.weight


def test_hacn_with_unit_weights_is_the_resnet_decoder_bit_for_bit():
    res = small(rule="resnet", depth_ln="none")
    hacn = small(rule="hacn", alpha_init=1.0, depth_ln="none")
    hacn.load_state_dict(res.state_dict(), strict=False)
    idx = tokens()
    assert torch.equal(hacn(idx), res(idx))
    for e_h, e_r in zip(hacn.exits(idx), res.exits(idx)):
        assert torch.equal(e_h, e_r)


def test_hacn_with_zero_weights_is_the_acn_decoder_bit_for_bit():
    acn = small(rule="acn")  # DepthLN (auto) in both: the ACN family
    hacn = small(rule="hacn", alpha_init=0.0)
    code_gpt = small(rule="hacn_code_gpt", alpha_init=1.0)  # the public code's weight 1 - a_i = 0
    hacn.load_state_dict(acn.state_dict(), strict=False)
    code_gpt.load_state_dict(acn.state_dict(), strict=False)
    idx = tokens()
    assert torch.equal(hacn(idx), acn(idx))
    assert torch.equal(code_gpt(idx), acn(idx))


@pytest.mark.parametrize("rule", ["hacn", "resnet", "acn", "hacn_code_vit"])
def test_no_future_leakage(rule):
    model = small(rule=rule).eval()
    idx = tokens(length=12)
    base = model(idx)
    for t in (0, 4, 10):
        changed = idx.clone()
        changed[:, t + 1:] = (changed[:, t + 1:] + 1 + torch.arange(11 - t)) % 17  # every later token differs
        out = model(changed)
        assert torch.equal(out[:, : t + 1], base[:, : t + 1])
        assert not torch.allclose(out[:, t + 1:], base[:, t + 1:])


def test_rope_scores_depend_only_on_the_offset():
    g = torch.Generator().manual_seed(1)
    head_dim, length = 8, 40
    q, k = torch.randn(head_dim, generator=g, dtype=torch.float64), torch.randn(head_dim, generator=g,
                                                                               dtype=torch.float64)
    cos, sin = (t.double() for t in rotary_tables(length, head_dim))
    rq = apply_rotary(q.expand(length, head_dim), cos, sin)  # q placed at every position m
    rk = apply_rotary(k.expand(length, head_dim), cos, sin)
    scores = rq @ rk.T  # scores[m, n] = q_m . k_n
    for offset in (-7, 0, 3, 11):
        diag = torch.diagonal(scores, offset=offset)
        assert torch.allclose(diag, diag[0].expand_as(diag), atol=1e-12), offset
    assert not torch.allclose(scores[0, 0], scores[0, 3])  # but it does depend on the offset
    # a rotation: norms are kept, position 0 is the identity
    assert torch.allclose(rq.norm(dim=-1), q.norm().expand(length))
    assert torch.equal(rq[0], q)


def test_rope_tables_follow_theta_j():
    cos, sin = rotary_tables(5, 4, base=100.0)
    theta = torch.tensor([1.0, 100.0 ** -0.5])
    expected = torch.arange(5.0)[:, None] * theta
    assert torch.allclose(cos, expected.cos()) and torch.allclose(sin, expected.sin())


@pytest.mark.parametrize("rule", ["hacn", "resnet", "acn", "hacn_code_gpt"])
def test_exits_equal_truncated_models(rule):
    model = small(rule=rule).eval()
    idx = tokens()
    exits = model.exits(idx)
    assert len(exits) == SMALL.num_layers + 1
    for i, z in enumerate(exits):
        assert torch.allclose(model.head(z), model(idx, num_layers=i), rtol=0, atol=1e-12)


def test_layerwise_perplexity_chunked_equals_unchunked():
    model = small().eval()
    idx, targets = tokens(length=11, seed=2), tokens(length=11, seed=3)
    with torch.no_grad():
        logits = model.head(torch.stack(model.exits(idx)))  # (L+1, B, T, V): the reference, all at once
        ref = torch.stack([F.cross_entropy(row.reshape(-1, 17), targets.reshape(-1)) for row in logits])
        last = F.cross_entropy(model(idx).reshape(-1, 17), targets.reshape(-1))
    for chunk in (1, 5, 7, 22, 4096):
        ce = model.layerwise_cross_entropy(idx, targets, chunk_tokens=chunk)
        assert ce.shape == (SMALL.num_layers + 1,)
        assert torch.allclose(ce, ref.double(), rtol=0, atol=1e-10)
    assert torch.allclose(model.layerwise_perplexity(idx, targets)[-1], last.exp().double())
    # ignored positions do not count
    masked = targets.clone()
    masked[:, 5:] = -100
    sums, n = model.layerwise_nll(idx, masked, chunk_tokens=3)
    short = model.layerwise_nll(idx[:, :5], targets[:, :5])[0]  # causal: the first 5 logits do not see the rest
    assert n == 10 and torch.allclose(sums, short, atol=1e-10)


def test_evaluate_layerwise_perplexity_weights_batches_by_tokens():
    model = small()
    a, b = tokens(batch=1, seed=4), tokens(batch=3, seed=5)
    ta, tb = tokens(batch=1, seed=6), tokens(batch=3, seed=7)
    split = evaluate_layerwise_perplexity(model, [(a, ta), (b, tb)], chunk_tokens=6)
    whole = evaluate_layerwise_perplexity(model, [(torch.cat([a, b]), torch.cat([ta, tb]))])
    assert torch.allclose(split, whole, atol=1e-10)
    assert model.training  # restored


def test_residual_weights_are_trained_except_the_last():
    model = small()
    idx = tokens()
    F.cross_entropy(model(idx).reshape(-1, 17), tokens(seed=9).reshape(-1)).backward()
    grads = [a.grad for a in model.stack.alpha]
    assert all(g is not None and g.abs() > 0 for g in grads[:-1])
    assert grads[-1] is None or grads[-1] == 0  # a_L never reaches the output (Algorithm 1)


def test_dropout_is_off_in_eval_and_on_in_training():
    model = small(dropout=0.5)
    idx = tokens()
    model.eval()
    assert torch.equal(model(idx), model(idx))
    model.train()
    assert not torch.equal(model(idx), model(idx))


def test_mlp_kinds_and_sublayer_unit():
    fixed = small()
    gated = small(mlp="gated")
    mlps = [m for m in fixed.modules() if type(m) is Mlp]
    assert len(mlps) == 3 and all(lin.bias is None for m in mlps for lin in m if isinstance(lin, torch.nn.Linear))
    assert sum(isinstance(m, GatedMlp) for m in gated.modules()) == 3
    adaptive = small(mlp="adaptive")
    with fast_cpp.use_backend("python"):  # the AWNN node without loading its C++ build (slow on first use)
        assert adaptive(tokens()).shape == (2, 10, 17)
    sub = small(layer_unit="sublayer")
    assert len(sub.exits(tokens())) == 2 * SMALL.num_layers + 1


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"dim": 18, "num_heads": 4}, r"DecoderConfig.dim=18 is not divisible by DecoderConfig.num_heads=4"),
        ({"dim": 12, "num_heads": 4}, r"dim / num_heads = 3 must be even"),
        ({"rule": "highway"}, r"DecoderConfig.rule='highway' is not valid; allowed: plain, resnet, acn, hacn"),
        ({"dropout": 1.0}, r"DecoderConfig.dropout=1.0 must be in \[0, 1\)"),
        ({"mlp": "wide"}, r"DecoderConfig.mlp='wide' is not valid; allowed: fixed, adaptive, gated"),
        ({"num_layers": 0}, r"DecoderConfig.num_layers=0 must be a positive integer"),
        ({"rule": "resnet", "alpha_init": 0.25}, r"DecoderConfig.alpha_init is only used by the rules"),
        ({"rule": "hacn_code_vit", "layer_unit": "sublayer"}, r"needs DecoderConfig.layer_unit='block'"),
        ({"depth_ln": "yes"}, r"DecoderConfig.depth_ln='yes' is not valid; allowed: auto, none, paper, code"),
        ({"mlp_dim": 0}, r"DecoderConfig.mlp_dim=0 must be a positive integer or None"),
    ],
)
def test_bad_configs_fail_clearly(overrides, message):
    with pytest.raises(ValueError, match=message):
        DecoderConfig(**{**SMALL.__dict__, **overrides})


def test_bad_inputs_fail_clearly():
    model = small()
    with pytest.raises(ValueError, match=r"sequence length 13 exceeds max_seq_len=12"):
        model(tokens(length=13))
    with pytest.raises(ValueError, match=r"expected token ids of shape \(batch, time\)"):
        model(tokens()[0])
    with pytest.raises(ValueError, match=r"chunk_tokens=0 must be a positive integer"):
        model.layerwise_nll(tokens(), tokens(), chunk_tokens=0)
