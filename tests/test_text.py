"""Tests of hacn_core.hacn.text: Table 1's character noise, the length-normalised multiple-choice
scorer, the character tokenizer, uint16 token files and the held-out Tiny Shakespeare cloze."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from hacn_core.engine.data import DatasetMissingError
from hacn_core.hacn import text as tx
from hacn_core.models.decoder import DecoderConfig, GPTDecoder


@pytest.fixture(scope="module")
def shakespeare():
    try:
        return tx.tiny_shakespeare()
    except DatasetMissingError as err:  # offline without the data mirror
        pytest.skip(str(err).splitlines()[0])


def within(count: float, mean: float, sd: float, k: float = 5.0) -> bool:
    return abs(count - mean) <= k * sd


# ----------------------------------------------------------------------------- character noise

LONG = "the quick brown fox jumps over the lazy dog " * 700  # 30,800 characters


def test_noise_zero_is_identity_and_seeded():
    assert tx.char_noise(LONG, 0.0, 1) == LONG
    assert tx.char_noise(LONG, 0.05, 7) == tx.char_noise(LONG, 0.05, 7)
    assert tx.char_noise(LONG, 0.05, 7) != tx.char_noise(LONG, 0.05, 8)
    assert tx.char_noise("abc", 1.0, 0, ops=("delete",)) == ""


def test_delete_and_insert_rates():
    n, p = len(LONG), 0.05
    sd = math.sqrt(n * p * (1 - p))
    out, log = tx.char_noise_with_log(LONG, p, 0, ops=("delete",))
    assert within(log["delete"], n * p, sd) and len(out) == n - log["delete"]
    out, log = tx.char_noise_with_log(LONG, p, 1, ops=("insert",), alphabet="XYZ")
    assert within(log["insert"], n * p, sd) and len(out) == n + log["insert"]
    assert sum(out.count(c) for c in "XYZ") == log["insert"]  # inserted characters come from the alphabet
    assert out.replace("X", "").replace("Y", "").replace("Z", "") == LONG  # and every original one is kept


def test_swap_rate_keeps_the_characters():
    n, p = len(LONG), 0.05
    out, log = tx.char_noise_with_log(LONG, p, 2, ops=("swap",))
    # each visited character swaps with probability p and a swap uses up two characters,
    # so swaps per character of text are p / (1 + p)
    mean = n * p / (1 + p)
    assert within(log["swap"], mean, math.sqrt(mean))
    assert sorted(out) == sorted(LONG) and out != LONG
    differing = sum(a != b for a, b in zip(out, LONG))
    assert differing <= 2 * log["swap"]


def test_mixed_noise_rates_per_edit():
    n, p = len(LONG), 0.06
    _, log = tx.char_noise_with_log(LONG, p, 3)
    assert set(log) == {"delete", "insert", "swap"}
    visited = n - log["swap"]  # a swap consumes the next character without a draw of its own
    edits = sum(log.values())
    assert within(edits, visited * p, math.sqrt(visited * p))
    for op, count in log.items():  # uniform over the three edits
        assert within(count, edits / 3, math.sqrt(edits * (1 / 3) * (2 / 3))), op


def test_substitute_changes_without_changing_length():
    out, log = tx.char_noise_with_log(LONG, 0.1, 4, ops=("substitute",), alphabet="ab")
    assert len(out) == len(LONG) and sum(a != b for a, b in zip(out, LONG)) == log["substitute"]


@pytest.mark.parametrize("kwargs, message", [
    ({"p": 1.5}, r"p=1.5 must be a probability in \[0, 1\]"),
    ({"p": 0.1, "ops": ("drop",)}, r"ops='drop' is not valid; allowed: delete, insert, swap, substitute"),
    ({"p": 0.1, "alphabet": ""}, r"alphabet: insert and substitute need"),
])
def test_noise_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        tx.char_noise("hello", **kwargs)


# ----------------------------------------------------------------------------- scorer

TABLE = torch.tensor([[0.0, 1.0, 2.0, 0.5],
                      [1.0, 0.0, -1.0, 2.0],
                      [0.3, 0.2, 0.1, 0.0],
                      [2.0, -2.0, 0.0, 1.0]], dtype=torch.float64)


def bigram(ids: torch.Tensor) -> torch.Tensor:
    """A hand-made 'language model': the logits at position t depend on token t only."""
    return TABLE[ids]


def test_scorer_on_a_hand_made_example():
    logp = torch.log_softmax(TABLE, dim=-1)  # logp[a, b] = log p(next = b | current = a)
    context, endings = [0, 1], [[2], [3, 0], [1, 1, 2]]
    by_hand = torch.stack([
        logp[1, 2],
        logp[1, 3] + logp[3, 0],
        logp[1, 1] + logp[1, 1] + logp[1, 2],
    ])
    lengths = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    assert torch.allclose(tx.score_endings(bigram, context, endings, normalize="none"), by_hand)
    scores = tx.score_endings(bigram, torch.tensor(context), endings)
    assert torch.allclose(scores, by_hand / lengths)
    assert int(scores.argmax()) == int((by_hand / lengths).argmax())
    # a bigram model only needs the last context token: left truncation changes nothing
    assert torch.allclose(tx.score_endings(bigram, [3, 3, 0, 1], endings, max_len=3), scores)


def test_scorer_batch_padding_matches_one_ending_at_a_time():
    torch.manual_seed(0)
    model = GPTDecoder(DecoderConfig(vocab_size=11, max_seq_len=16, dim=16, num_layers=2, num_heads=2,
                                     dropout=0.0)).double().eval()
    context, endings = [1, 2, 3, 4], [[5], [6, 7, 8, 9], [10, 1]]
    batched = tx.score_endings(model, context, endings, normalize="none")
    for k, e in enumerate(endings):
        alone = tx.score_endings(model, context, [e], normalize="none")[0]
        assert torch.allclose(batched[k], alone, atol=1e-12)


def test_scorer_bad_arguments():
    with pytest.raises(ValueError, match="context: needs at least one token"):
        tx.score_endings(bigram, [], [[1]])
    with pytest.raises(ValueError, match="normalize='chars' is not valid; allowed: tokens, none"):
        tx.score_endings(bigram, [1], [[1]], normalize="chars")
    with pytest.raises(ValueError, match="does not fit max_len=2"):
        tx.score_endings(bigram, [1], [[1, 2, 3]], max_len=2)


# ----------------------------------------------------------------------------- tokenizer and token files


def test_tiny_shakespeare_tokenizer_round_trip(shakespeare):
    text, tok = shakespeare
    assert tok.vocab_size == 65 and tok.chars[0] == "\n" and tok.chars == "".join(sorted(set(text)))
    ids = tok.encode(text[:2000])
    assert ids.dtype == np.uint16 and tok.decode(ids) == text[:2000]
    with pytest.raises(ValueError, match=r"character '@' at position 2 is not in the tokenizer's vocabulary"):
        tok.encode("ab@")
    with pytest.raises(ValueError, match=r"ids: 65 is not a token id; allowed: 0..64"):
        tok.decode([1, 65])


def test_memmap_round_trip_and_tokenised_once(tmp_path, shakespeare, monkeypatch):
    text, tok = shakespeare
    train, val = tx.split_text(text)
    assert train + val == text and len(val) == len(text) - int(len(text) * 0.9)
    path = tmp_path / "val.bin"
    tokens = tx.tokenize_to_file(val, tok, path)
    assert isinstance(tokens, np.memmap) and tokens.dtype == np.uint16 and len(tokens) == len(val)
    assert path.stat().st_size == 2 * len(val)
    assert tok.decode(tx.read_tokens(path)) == val
    # a second call finds the file and its sidecar and does not tokenise again

    def refuse(self, t):
        raise AssertionError("tokenised twice")

    monkeypatch.setattr(tx.CharTokenizer, "encode", refuse)
    again = tx.tokenize_to_file(val, tok, path)
    assert np.array_equal(again, tokens)
    monkeypatch.undo()
    x, y = tx.get_batch(tokens, 3, 8, rng=0)
    assert x.shape == y.shape == (3, 8) and x.dtype == torch.int64 and torch.equal(x[:, 1:], y[:, :-1])


def test_token_files_refuse_what_uint16_cannot_hold(tmp_path):
    with pytest.raises(ValueError, match=r"values must be in 0..65535"):
        tx.write_tokens(np.array([1, 70000]), tmp_path / "x.bin")
    tx.write_tokens([1, 2, 65535], tmp_path / "ok.bin")
    assert tx.read_tokens(tmp_path / "ok.bin").tolist() == [1, 2, 65535]


# ----------------------------------------------------------------------------- cloze


def test_shakespeare_cloze_items(shakespeare):
    text, tok = shakespeare
    held_out = tx.split_text(text)[1]
    items = tx.shakespeare_cloze(held_out, n_items=30, n_choices=4, context_lines=3, seed=5)
    assert items == tx.shakespeare_cloze(held_out, n_items=30, n_choices=4, context_lines=3, seed=5)
    assert items != tx.shakespeare_cloze(held_out, n_items=30, n_choices=4, context_lines=3, seed=6)
    labels = set()
    for item in items:
        assert len(item.endings) == 4 and len(set(item.endings)) == 4
        assert item.context.count("\n") == 3 and item.context.endswith("\n")
        true = item.endings[item.label]
        assert item.context + true + "\n" in held_out  # the true line follows its context
        assert all(len(e) >= 20 and e in held_out for e in item.endings)
        labels.add(item.label)
    assert len(labels) > 1  # the answer's position is shuffled


def test_multiple_choice_accuracy_matches_the_scorer(shakespeare):
    text, tok = shakespeare
    counts = np.ones((tok.vocab_size, tok.vocab_size))
    ids = tok.encode(text[:200_000]).astype(np.int64)
    np.add.at(counts, (ids[:-1], ids[1:]), 1)
    table = torch.from_numpy(np.log(counts / counts.sum(1, keepdims=True)))

    def char_bigram(batch):
        return table[batch]

    items = tx.shakespeare_cloze(tx.split_text(text)[1], n_items=40, seed=0)
    by_hand = np.mean([
        int(tx.score_endings(char_bigram, tok.encode(it.context), [tok.encode(e) for e in it.endings]).argmax())
        == it.label for it in items
    ])
    assert tx.multiple_choice_accuracy(char_bigram, items, tok) == by_hand
    noisy = tx.noisy_item(items[0], 0.2, 0, alphabet="xyz")
    assert noisy.label == items[0].label and noisy != items[0]
    assert set(noisy.context) <= set(items[0].context) | set("xyz")  # insertions drawn from the alphabet
