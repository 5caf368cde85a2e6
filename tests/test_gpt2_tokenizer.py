"""The project's one GPT-2 tokenizer (hacn_core.engine.text.gpt2_tokenizer; H-ACN Table 4, AWNN Sec. 4) on a
real ``tokenizers`` byte-level BPE with hand-written merges (tests/_gpt2.py): known encodings (GPT-2's byte
ids, its split pattern, merges by rank), the round trip, the end-of-text convention, the corpus token files of
hacn_core.hacn.text.tokenize_documents, and the messages for a missing file, a damaged one and a missing package."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from hacn_core.engine.data import DatasetCorruptError, DatasetMissingError
from hacn_core.engine.text import GPT2_EOT, GPT2_EOT_TOKEN, gpt2_tokenizer
from hacn_core.hacn.text import read_tokens, tokenize_documents

from _gpt2 import MERGES, byte_order, write_gpt2_tokenizer  # tests/_gpt2.py

def byte_ids(text: str) -> list[int]:
    """The ids of ``text``'s UTF-8 bytes alone (no merge applies): GPT-2's byte tokens are ids 0-255."""
    table = {b: i for i, b in enumerate(byte_order())}
    return [table[b] for b in text.encode("utf-8")]


@pytest.fixture()
def tok(tmp_path):
    vocab = write_gpt2_tokenizer(tmp_path)
    return gpt2_tokenizer(tmp_path, download=False), vocab


def test_known_encodings(tok):
    t, v = tok
    assert t.encode(" the") == [v["Ġthe"]]  # Ġ t -> Ġt (rank 0), h e -> he (1), Ġt he -> Ġthe (2)
    assert t.encode("the") == [v["t"], v["he"]]  # no leading space: Ġt never forms
    assert t.encode("!\n ") == [0, 198, 220]  # GPT-2's own ids of "!", "\n" and " "
    # GPT-2's pattern: a contraction is a piece, and of two spaces before a word the last one joins the word
    assert t.encode("I'm in  the") == [v["I"], v["'"], v["m"], 220, v["in"], 220, v["Ġthe"]]
    assert t.encode("é日") == byte_ids("é日") and len(t.encode("é日")) == 2 + 3  # UTF-8 bytes, no merge


def test_merges_apply_lowest_rank_first(tmp_path):
    for merges, want in [([("a", "b"), ("b", "c")], ["ab", "c"]), ([("b", "c"), ("a", "b")], ["a", "bc"])]:
        v = write_gpt2_tokenizer(tmp_path / want[0], merges)
        assert gpt2_tokenizer(tmp_path / want[0], download=False).encode("abc") == [v[s] for s in want]
    v = write_gpt2_tokenizer(tmp_path / "one", [("a", "b")])
    assert gpt2_tokenizer(tmp_path / "one", download=False).encode("abab") == [v["ab"]] * 2  # every occurrence


def test_round_trip_batch_and_bad_ids(tok):
    t, _ = tok
    texts = ["The cat sat on the mat.\n", "naïve café — 日本語 ½", "  spaces   and\ttabs ", "a <|endoftext|> b",
             ""]
    for text in texts:
        assert t.decode(t.encode(text)) == text
        assert t.decode(np.asarray(t.encode(text))) == text
    assert t.encode_batch(texts) == [t.encode(s) for s in texts]
    with pytest.raises(ValueError, match=f"ids: {t.vocab_size} is not a token id; allowed: 0..{t.vocab_size - 1}"):
        t.decode([1, t.vocab_size])


def test_end_of_text_is_the_last_id_and_only_where_put(tok):
    t, v = tok
    assert GPT2_EOT == 50256  # GPT-2: 256 bytes + 50,000 merges, then <|endoftext|>
    assert t.vocab_size == 256 + len(MERGES) + 1 == len(v) and t.eot == v[GPT2_EOT_TOKEN] == t.vocab_size - 1
    assert t.decode([t.eot]) == GPT2_EOT_TOKEN
    assert t.eot not in t.encode("x<|endoftext|>y")  # text is text (tiktoken's encode_ordinary)
    assert t.encode("x<|endoftext|>y") == t.encode("x") + t.encode("<|") + t.encode("endoftext") + t.encode("|>y")


def test_tokenize_documents_appends_eot_and_streams(tmp_path, tok):
    t, _ = tok
    docs = ["The cat sat.", "", "é", " the the"]
    want = [i for d in docs for i in (*t.encode(d), t.eot)]
    one = tokenize_documents(iter(docs), t, tmp_path / "a.bin", chunk=1)
    many = tokenize_documents(docs, t, tmp_path / "b.bin")
    assert one.dtype == np.dtype("<u2") and one.tolist() == many.tolist() == want
    assert read_tokens(tmp_path / "a.bin").tolist() == want and sorted(p.name for p in tmp_path.glob("*.bin*")) == [
        "a.bin", "b.bin"]  # no temporary file left behind
    with pytest.raises(ValueError, match="chunk=0 must be a positive integer"):
        tokenize_documents(docs, t, tmp_path / "c.bin", chunk=0)


def test_missing_file_says_where_it_looked_and_how_to_get_it(tmp_path, monkeypatch):
    monkeypatch.setenv("HACN_DOWNLOAD", "0")
    with pytest.raises(DatasetMissingError) as err:
        gpt2_tokenizer(tmp_path)
    message = str(err.value)
    assert f"looked in: {tmp_path / 'gpt2-tokenizer'}" in message and "missing: tokenizer.json" in message
    assert "python -m hacn_core fetch gpt2-tokenizer" in message
    assert "https://huggingface.co/openai-community/gpt2" in message  # the manual download


def test_damaged_or_foreign_file_is_refused(tmp_path):
    write_gpt2_tokenizer(tmp_path, eot_last=False)
    path = tmp_path / "gpt2-tokenizer" / "tokenizer.json"
    with pytest.raises(DatasetCorruptError, match=f"{path}: GPT-2's <\\|endoftext\\|> is its last id, here id 256 of"):
        gpt2_tokenizer(tmp_path, download=False)
    path.write_text('{"version": "1.0", "truncated')
    with pytest.raises(DatasetCorruptError, match="is not a tokenizers file.*python -m hacn_core fetch gpt2-tokenizer"):
        gpt2_tokenizer(tmp_path, download=False)


def test_missing_package_says_what_to_install(tmp_path, monkeypatch):
    write_gpt2_tokenizer(tmp_path)
    monkeypatch.setitem(sys.modules, "tokenizers", None)  # import tokenizers now raises ImportError
    with pytest.raises(ModuleNotFoundError, match="'tokenizers' package, which is not installed: pip install "
                                                  "tokenizers"):
        gpt2_tokenizer(tmp_path, download=False)
