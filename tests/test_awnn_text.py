"""AWNN's text study (``awnn-text``): a Transformer with adaptive or fixed FFNs (AWNN Table 1's Multi30k row, App. C.3).

The corruption of the denoising task (its empirical rates and its seed), the pairs the
trainer reads (the clean target is the original line; padding is masked and cut),
the adaptive Transformer with frozen widths computing what the fixed one computes
with the same weights, a smoke run end to end into a temporary store, a killed and
resumed run equal to the uninterrupted one, Multi30k's reader on made-up files, and
clear errors for bad configurations and missing data.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from hacn_core import catalog
from hacn_core.awnn import quantile_width, update_widths
from hacn_core.awnn.studies import text as tx
from hacn_core.engine.data import DatasetCorruptError, DatasetMissingError, missing_files
from hacn_core.engine.results import ResultsStore, RunContext, pinned_threads
from hacn_core.engine.text import char_noise, split_text, tiny_shakespeare
from hacn_core.models.seq2seq import Seq2SeqTransformer, TransformerConfig

from _gpt2 import write_gpt2_tokenizer  # tests/_gpt2.py
from _resume import resumed_equals_uninterrupted  # tests/_resume.py

needs_text = pytest.mark.skipif(bool(missing_files("tinyshakespeare")),
                                reason="Tiny Shakespeare is not under $HACN_DATA")
LINES = ["The quick brown fox jumps over the lazy dog again"] * 400  # 20,000 characters


@pytest.fixture(autouse=True)
def _one_thread():
    with pinned_threads(1):  # many small ops on a loaded 2-core machine are slower with two
        yield


# --------------------------------------------------------------------------------- the corruption


def test_corruption_rates_match_p_and_the_seed_fixes_the_corrupted_lines():
    n = sum(map(len, LINES))
    p = 0.1
    sd = 3 * (p * (1 - p) / n) ** 0.5  # three standard deviations of an edited fraction over n characters
    deleted = tx.corrupt_lines(LINES, p, ("delete",), "xyz", 0)
    assert 1 - sum(map(len, deleted)) / n == pytest.approx(p, abs=sd)
    inserted = tx.corrupt_lines(LINES, p, ("insert",), "XYZ", 1)
    assert sum(map(len, inserted)) / n - 1 == pytest.approx(p, abs=sd)
    extra = sum(sum(c in "XYZ" for c in line) for line in inserted)  # LINES hold no X, Y or Z
    assert extra == sum(map(len, inserted)) - n  # every added character is drawn from the alphabet
    # Table 1's three edits: deletes and inserts each p / 3 of the characters, so the length holds on average
    mixed = tx.corrupt_lines(LINES, p, tx.PAPER_NOISE_OPS, "XYZ", 2)
    assert sum(map(len, mixed)) / n == pytest.approx(1.0, abs=2 * sd)
    assert sum(line != clean for line, clean in zip(mixed, LINES)) > 0.95 * len(LINES)  # 0.9^49: few untouched
    # the seed fixes the corrupted lines; one generator runs through them (the engine's char_noise, line by line)
    assert tx.corrupt_lines(LINES, p, tx.PAPER_NOISE_OPS, "XYZ", 2) == mixed
    assert tx.corrupt_lines(LINES, p, tx.PAPER_NOISE_OPS, "XYZ", 3) != mixed
    g = np.random.default_rng(2)
    assert mixed == [char_noise(line, p, g, tx.PAPER_NOISE_OPS, "XYZ") for line in LINES]
    assert tx.corrupt_lines(LINES[:3], 0.0, tx.PAPER_NOISE_OPS, "XYZ", 0) == LINES[:3]


# --------------------------------------------------------------------------------- the pairs


def test_pairs_end_start_pad_and_cut_as_documented():
    sp = tx.Specials(pad=0, bos=1, eos=2)
    src, tgt_in, tgt_out = tx.pair_tensors([[5, 6, 7], [8]], [[9], [10, 11]], sp, max_len=3)
    assert src.tolist() == [[5, 6, 2], [8, 2, 0]]  # the source cut to 2 tokens + end
    assert tgt_in.tolist() == [[1, 9, 0], [1, 10, 11]]
    assert tgt_out.tolist() == [[9, 2, 0], [10, 11, 2]]  # the decoder's input shifted left, then the end
    assert src.dtype == tgt_in.dtype == tgt_out.dtype == torch.long
    with pytest.raises(ValueError, match="pair up"):
        tx.pair_tensors([[5]], [], sp, max_len=3)


@needs_text
def test_denoising_pairs_hold_the_corrupted_line_and_the_original_line():
    config = tx.text_config("tinyshakespeare", "adaptive", 0, 0, **tx.SMOKE_MODEL)
    data = tx.denoising_splits(config)
    text, tokenizer = tiny_shakespeare()
    train_text, held_out = split_text(text)
    rest = tx.shakespeare_lines(held_out, 16, 64)
    clean = {"train": tx.shakespeare_lines(train_text, 16, 64)[:64], "val": rest[:32],
             "test": rest[len(rest) // 2:][:32]}
    letters = "".join(c for c in tokenizer.chars if c.isalpha())

    def chars(row):  # ids up to the end token, as text
        ids = row.tolist()
        return tokenizer.decode([i - tx.CHAR_OFFSET for i in ids[: ids.index(tx.CHAR_SPECIALS.eos)]])

    for i, name in enumerate(("train", "val", "test")):
        src, tgt_in, tgt_out = getattr(data, name)
        noisy = tx.corrupt_lines(clean[name], 0.1, tx.PAPER_NOISE_OPS, letters, np.random.default_rng((0, i)))
        assert len(src) == len(clean[name]) == (64 if name == "train" else 32)
        for k, line in enumerate(clean[name]):
            assert chars(tgt_out[k]) == line  # the clean target is the original line
            assert tgt_in[k, 0] == tx.CHAR_SPECIALS.bos and torch.equal(tgt_in[k, 1:len(line) + 1],
                                                                          tgt_out[k, :len(line)])
            assert chars(src[k]) == noisy[k]  # the source is the line corrupted by the split's generator
            for row, used in ((src[k], len(noisy[k]) + 1), (tgt_out[k], len(line) + 1)):
                assert (row[used:] == tx.CHAR_SPECIALS.pad).all() and (row[:used] != tx.CHAR_SPECIALS.pad).all()
    assert data.vocab == 68 and data.target_tokens("train") == sum(len(line) + 1 for line in clean["train"])
    # a split's noise does not depend on the size of another split
    bigger = tx.denoising_splits(config | {"train_subset": 96})
    assert torch.equal(bigger.val[0], data.val[0]) and torch.equal(bigger.train[0][:64, :data.train[0].shape[1]],
                                                                   data.train[0])


def test_the_stated_line_counts_and_characters_are_the_corpus_own():
    lines, tokenizer = tx.denoising_lines(tx.book_configs()[0])
    assert {split: len(v) for split, v in lines.items()} == tx.BOOK_LINES
    assert tokenizer.vocab_size == tx.SHAKESPEARE_CHARS


def test_padding_is_masked_and_cut_per_batch():
    """Rows of different lengths in one padded batch give each row's own logits (masks work), and
    ``seq2seq_forward`` keeps exactly the real target tokens."""
    torch.manual_seed(0)
    model = Seq2SeqTransformer(src_vocab=20, tgt_vocab=20, d_model=16, heads=2, encoder_layers=2, decoder_layers=2,
                               ffn="adaptive", ffn_rate=0.15, dropout=0.0, max_len=32, pad_index=0).double().eval()
    sp = tx.Specials(pad=0, bos=1, eos=2)
    sources, targets = [[5, 6, 7, 8, 9], [4]], [[11, 12], [13, 14, 15, 16]]
    src, tgt_in, tgt_out = tx.pair_tensors(sources, targets, sp, max_len=16)
    wide = [torch.cat([t, torch.zeros(2, 4, dtype=torch.long)], 1) for t in (src, tgt_in, tgt_out)]  # 4 more pads
    logits, target = tx.seq2seq_forward(model, wide, pad=0)
    assert target.tolist() == [11, 12, 2, 13, 14, 15, 16, 2]  # real targets only, row by row
    alone = [model(*(tx.pair_tensors([s], [t], sp, max_len=16)[:2]))[0] for s, t in zip(sources, targets)]
    torch.testing.assert_close(logits, torch.cat(alone), rtol=1e-10, atol=1e-10)


# --------------------------------------------------------------------------------- the model


def test_adaptive_ffns_with_frozen_widths_compute_the_fixed_ffns_with_the_same_weights():
    """Eq. 14 scales hidden neuron ``j`` by ``f(j)``: a fixed FFN with the same first layer and the second
    layer's columns times ``f(j)`` is the same map, so the whole Transformer is the same function."""
    torch.manual_seed(3)
    common = dict(src_vocab=15, tgt_vocab=15, d_model=16, heads=2, encoder_layers=2, decoder_layers=1, max_len=16,
                  dropout=0.0)
    adaptive = Seq2SeqTransformer(TransformerConfig(**common, ffn="adaptive", ffn_rate=0.2)).double()
    for ffn in [layer.ffn for layer in [*adaptive.encoder, *adaptive.decoder]]:
        ffn.freeze_widths()
    width = quantile_width(0.2)
    fixed = Seq2SeqTransformer(TransformerConfig(**common, ffn="fixed", ffn_hidden=width)).double()
    state = {k: v for k, v in adaptive.state_dict().items() if ".ffn." not in k}
    missing, unexpected = fixed.load_state_dict(state, strict=False)
    assert not unexpected and all(".ffn." in k for k in missing)
    with torch.no_grad():
        for a, f in zip([layer.ffn for layer in [*adaptive.encoder, *adaptive.decoder]],
                        [layer.ffn for layer in [*fixed.encoder, *fixed.decoder]]):
            first, second = a.layers
            f[0].weight.copy_(first.weight)
            f[0].bias.copy_(first.bias)
            f[2].weight.copy_(second.weight * a.importances(0))  # (d, h) columns times f(j)
            f[2].bias.copy_(second.bias)
    src, tgt = torch.randint(1, 15, (3, 7)), torch.randint(1, 15, (3, 5))
    src[0, 5:] = 0
    torch.testing.assert_close(adaptive(src, tgt), fixed(src, tgt), rtol=1e-10, atol=1e-10)
    # a step that moves the rates leaves frozen widths alone
    with torch.no_grad():
        for ffn in [layer.ffn for layer in adaptive.encoder]:
            ffn.raw_rate.add_(-1.0)
    update_widths(adaptive)
    assert tx.ffn_widths(adaptive) == [width] * 3
    # the FFN parameter count of the study is the fixed model's, and the adaptive model's active weights
    assert tx.ffn_parameters([width] * 3, 16) == sum(
        p.numel() for layer in [*fixed.encoder, *fixed.decoder] for p in layer.ffn.parameters())
    assert tx.ffn_parameters([width] * 3, 16) == sum(
        lin.weight.numel() + lin.bias.numel() for layer in [*adaptive.encoder, *adaptive.decoder]
        for lin in layer.ffn.layers)


# --------------------------------------------------------------------------------- configurations


def test_profiles_are_app_c3_and_the_stated_book_subset():
    paper = tx.paper_configs()
    assert len(paper) == 6 * 10 and {c["dataset"] for c in paper} == {"Multi30k"}
    assert sorted({c["ffn_hidden"] for c in paper if c["ffn"] == "fixed"}) == [128, 256, 512, 1024, 2048]
    c = paper[0]
    assert (c["d_model"], c["heads"], c["encoder_layers"], c["decoder_layers"], c["dropout"]) == (512, 8, 6, 6, 0.1)
    assert (c["lr"], c["weight_decay"], c["eps"], c["plateau_factor"], c["batch_size"]) == (0.01, 5e-4, 5e-9, 0.9, 128)
    assert (c["epochs"], c["patience"], c["max_len"], c["direction"]) == (500, 250, 128, "de-en")
    assert quantile_width(c["rate_init"], c["k"]) == 576  # App. C.3: "approximately 512"
    book = tx.book_configs()
    assert len(book) == 6 and {c["dataset"] for c in book} == {"tinyshakespeare"}
    assert sorted(c["seed"] for c in book if c["ffn"] == "adaptive") == [0, 1, 2]
    assert sorted(c["ffn_hidden"] for c in book if c["ffn"] == "fixed") == [16, 64, 256]
    assert {quantile_width(c["rate_init"], c["k"]) for c in book if c["ffn"] == "adaptive"} == {64}
    assert {(c["lr"], c["epochs"], c["patience"], c["d_model"]) for c in book} == {(0.01, 10, 5, 64)}
    t = tx.train_config(book[0])
    assert (t.optimizer, t.schedule, t.gamma, t.plateau_metric, t.eps) == ("adam", "plateau", 0.9, "val_token_loss",
                                                                          5e-9)
    assert catalog.get(tx.EXPERIMENT_ID) is tx.EXPERIMENT and set(tx.EXPERIMENT.setting) == {"smoke", "book", "paper"}


@pytest.mark.parametrize(
    ("config", "field", "allowed"),
    [
        ({"dataset": "WMT14"}, "dataset", "tinyshakespeare, Multi30k"),
        ({"ffn": "gated"}, "ffn", "adaptive, fixed"),
        ({"direction": "fr-en"}, "direction", "de-en, en-de"),
        ({"ffn_hidden": 64}, "ffn_hidden", "0"),
        ({"ffn": "fixed"}, "ffn_hidden", ">= 1"),
        ({"noise_ops": ("delete", "shuffle")}, "noise_ops", "delete, insert, swap, substitute"),
        ({"noise_p": 1.5}, "noise_p", "[0, 1]"),
        ({"plateau_factor": 0.0}, "plateau_factor", "(0, 1]"),
        ({"heads": 3}, "d_model", "multiple of heads"),
        ({"max_chars": 8}, "max_chars", ">= 16"),
        ({"train_subset": 0}, "train_subset", ">= 1"),
    ],
)
def test_bad_configuration_names_the_field_and_the_allowed_values(config, field, allowed):
    base = tx.text_config("tinyshakespeare", "adaptive", 0, 0)
    with pytest.raises(ValueError) as err:
        tx.check_config(base | config)
    assert field in str(err.value) and allowed in str(err.value)
    with pytest.raises(ValueError, match="unknown configuration keys"):
        tx.text_config("tinyshakespeare", "fixed", 64, 0, width=3)


# --------------------------------------------------------------------------------- Multi30k


def _multi30k(root, rows=("Ein Hund.", "A dog."), n=3):
    folder = root / "multi30k"
    folder.mkdir(parents=True)
    for file in tx.MULTI30K_FILES.values():
        with open(folder / file, "w", encoding="utf-8") as handle:
            for i in range(n):
                handle.write(json.dumps({"de": f"{rows[0]} {i}", "en": f"{rows[1]} {i}" * (60 if i == 2 else 1)})
                             + "\n")


def test_multi30k_is_read_in_the_configured_direction_and_cut_to_128_tokens(tmp_path, monkeypatch):
    monkeypatch.setenv("HACN_DOWNLOAD", "0")
    _multi30k(tmp_path)
    encode = lambda s: [ord(c) for c in s]  # a stand-in for GPT-2's tokenizer: one id per character
    config = tx.text_config("Multi30k", "fixed", 128, 0, eval_subset=2)
    data = tx.multi30k_splits(config, tmp_path, encode=encode)
    sp = tx.GPT2_SPECIALS
    assert data.vocab == 50258 and sp.pad == 50257 and sp.bos == sp.eos == 50256
    assert len(data.train[0]) == 3 and len(data.val[0]) == len(data.test[0]) == 2
    assert data.train[0][0, :12].tolist() == encode("Ein Hund. 0") + [sp.eos]  # German in ...
    assert data.train[2][0, :9].tolist() == encode("A dog. 0") + [sp.eos]  # ... English out
    assert data.train[2].shape[1] == 128 and data.train[2][2, -1] == sp.eos  # a long target cut to 128 tokens
    assert (data.train[2][0, 9:] == sp.pad).all()
    back = tx.multi30k_splits(config | {"direction": "en-de"}, tmp_path, encode=encode)
    assert back.train[0][0, :9].tolist() == encode("A dog. 0") + [sp.eos]


def test_missing_multi30k_or_tokenizer_says_where_it_looked_and_how_to_fetch_it(tmp_path, monkeypatch):
    monkeypatch.setenv("HACN_DATA", str(tmp_path))
    monkeypatch.setenv("HACN_DOWNLOAD", "0")
    config = tx.paper_configs()[0]
    with pytest.raises(DatasetMissingError) as err:
        tx.train_text_run(config, RunContext(tx.EXPERIMENT_ID, tmp_path / "ckpt", progress=False))
    message = str(err.value)
    assert "Multi30k" in message and str(tmp_path / "multi30k") in message
    assert "python -m hacn_core fetch Multi30k" in message and "bentrevett/multi30k" in message
    _multi30k(tmp_path)
    with pytest.raises(DatasetMissingError) as err:
        tx.multi30k_splits(config, tmp_path)
    assert "gpt2-tokenizer" in str(err.value) and "tokenizer.json" in str(err.value)
    vocab = write_gpt2_tokenizer(tmp_path)  # a real byte-level BPE, but not GPT-2's 50,257 ids
    eot = vocab["<|endoftext|>"]
    with pytest.raises(DatasetCorruptError, match=f"<\\|endoftext\\|> is id {eot}; GPT-2's is 50256"):
        tx.multi30k_splits(config, tmp_path)  # the specials (eot 50256, pad 50257) would not fit it


# --------------------------------------------------------------------------------- smoke and resume


@needs_text
def test_smoke_runs_end_to_end_into_a_temporary_store(tmp_path):
    results = catalog.run(tx.EXPERIMENT_ID, "smoke", store=ResultsStore(tmp_path), progress=False)
    assert len(results) == 2 and len(list((tmp_path / tx.EXPERIMENT_ID).glob("*.json"))) == 2
    for r in results:
        m, c = r.metrics, r.curves
        best = int(np.argmin(c["val_token_loss"]))
        assert c["eval_epoch"] == [1, 2] and c["record_epoch"] == [0, 1, 2] and m["best_epoch"] == best + 1
        assert m["val_token_loss"] == pytest.approx(c["val_token_loss"][best], rel=1e-5)
        assert m["test_token_loss"] == pytest.approx(c["test_token_loss"][best + 1], rel=1e-5)
        assert 0.0 < m["test_token_loss"] < 2 * np.log(68) and 0.0 <= m["test_char_acc"] <= 1.0
        assert len(m["widths"]) == 2 and m["total_width"] == sum(m["widths"])
        assert m["ffn_params"] == sum(2 * 16 * h + h + 16 for h in m["widths"]) and m["n_train"] == 64
        assert {"git_commit", "device", "threads", "wall_time_s"} <= set(r.provenance) and r.seed == 0
        if r.config["ffn"] == "adaptive":
            assert c["widths"][0] == [quantile_width(0.15)] * 2 and m["widths"] == c["widths"][best + 1]
            for ws, rs in zip(c["widths"], c["rates"]):
                assert all(abs(w - quantile_width(nu)) <= 1 for w, nu in zip(ws, rs))  # Eq. 11, rate to 5 digits
            parts = sum(m[f"elbo_{t}"] for t in ("predictive", "weight_prior", "width_prior"))
            assert m["elbo_total"] == pytest.approx(parts, rel=1e-5) and m["elbo_width_prior"] == 0.0
        else:
            assert m["widths"] == m["final_widths"] == [16, 16] and "elbo_total" not in m


@needs_text
def test_a_text_run_resumed_equals_the_uninterrupted_one(tmp_path, monkeypatch):
    config = tx.text_config("tinyshakespeare", "adaptive", 0, 1, **(tx.SMOKE_MODEL | {"epochs": 3}))
    ref = resumed_equals_uninterrupted(tx, tx.train_text_run, config, tmp_path, monkeypatch, kill_at=7)
    assert ref["curves"]["record_epoch"] == [0, 1, 2, 3]  # 3 epochs of 4 steps, killed in the second
