"""Tests of hacn_core.hacn.zeroshot and the zero-shot evaluation of hacn-decoder's paper profile
(H-ACN Sec. 3.4, Fig. 4c, Table 1): the readers of HellaSwag / PIQA / ARC-Easy on small files in
their published formats, the three rankings of the scorer, Table 1's noise, the missing-file
messages, and the paper-profile hook on tiny files, a tiny model and a small real GPT-2-style
tokenizer (tests/_gpt2.py; the tokenizer itself is tested in test_gpt2_tokenizer.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from hacn_core.engine.checkpoint import load_checkpoint
from hacn_core.engine.data import DatasetCorruptError, DatasetMissingError
from hacn_core.engine.results import RunContext
from hacn_core.engine.text import gpt2_tokenizer
from hacn_core.hacn import text as tx
from hacn_core.hacn import zeroshot as zs
from hacn_core.hacn.studies import decoder as hd
from hacn_core.models.decoder import DecoderConfig, GPTDecoder

from _gpt2 import write_gpt2_tokenizer  # tests/_gpt2.py

# ----------------------------------------------------------------------------- small published-format files

HELLASWAG_LINES = [
    {"ind": 4, "activity_label": "Removing ice from car",
     "ctx_a": "Then, the man writes over the snow covering the window of a car, and a woman wearing winter clothes "
              "smiles.", "ctx_b": "then", "ctx": "Then, the man writes ... smiles. then",
     "endings": [", the man adds wax to the windshield and cuts it.", ", a person board a ski lift.",
                 ", the man puts on a christmas coat.", ", the man continues removing the snow on his car."],
     "source_id": "activitynet~v_-1IBHYS3L-Y", "split": "val", "split_type": "indomain", "label": 3},
    {"ind": 7, "activity_label": "Home and Garden", "ctx_a": "[header] How to grow a plant [title] Water it.",
     "ctx_b": "THE soil", "endings": ["stays [substeps] moist.", "is  dry.", "burns."], "label": "1"},
    {"ind": 9, "ctx": "A cat sits on a mat.", "endings": ["It sleeps.", "It flies."], "label": 0},
]
PIQA_LINES = [
    {"id": "a1", "goal": "How do I ready a guinea pig cage for it's new occupants?",
     "sol1": "Provide the guinea pig with a cage full of a few inches of bedding made of ripped paper strips.",
     "sol2": "Provide the guinea pig with a cage full of a few inches of bedding made of ripped jeans material."},
    {"id": "a2", "goal": "dresser", "sol1": "can hold clothes", "sol2": "can hold an ocean"},
]
ARC_LINES = [
    {"id": "Mercury_1", "question": {"stem": "Which is a mammal?", "choices": [
        {"text": "shark", "label": "A"}, {"text": "whale", "label": "B"}, {"text": "trout", "label": "C"},
        {"text": "eel", "label": "D"}]}, "answerKey": "B"},
    {"id": "NYSEDREGENTS_2", "question": {"stem": "What melts ice?", "choices": [
        {"text": "cold", "label": "1"}, {"text": "heat", "label": "2"}, {"text": "dark", "label": "3"},
        {"text": "wind", "label": "4"}]}, "answerKey": "2"},
    {"id": "Mixed_3", "question": {"stem": "Pick the third.", "choices": [
        {"text": "one", "label": "A"}, {"text": "two", "label": "B"}, {"text": "three", "label": "C"}]},
     "answerKey": "3"},  # a digit key for letter labels: matched by position
    {"id": "Five_4", "question": {"stem": "Which one is last?", "choices": [
        {"text": "v", "label": "A"}, {"text": "w", "label": "B"}, {"text": "x", "label": "C"},
        {"text": "y", "label": "D"}, {"text": "z", "label": "E"}]}, "answerKey": "E"},
]
def write_jsonl(path: Path, records) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def write_benchmarks(root: Path, which=("hellaswag", "piqa", "arc_easy")) -> None:
    base = root / zs.ZEROSHOT_FOLDER
    if "hellaswag" in which:
        write_jsonl(base / "hellaswag" / "hellaswag_val.jsonl", HELLASWAG_LINES)
    if "piqa" in which:
        write_jsonl(base / "piqa" / "valid.jsonl", PIQA_LINES)
        (base / "piqa" / "valid-labels.lst").write_text("0\n0\n", encoding="utf-8")
    if "arc_easy" in which:
        write_jsonl(base / "arc_easy" / "ARC-Easy-Test.jsonl", ARC_LINES)


# ----------------------------------------------------------------------------- readers


def test_read_hellaswag(tmp_path):
    items = zs.read_hellaswag(write_jsonl(tmp_path / "h.jsonl", HELLASWAG_LINES))
    assert [it.label for it in items] == [3, 1, 0]
    assert items[0].context == ("Removing ice from car: Then, the man writes over the snow covering the window of a "
                                "car, and a woman wearing winter clothes smiles. Then")
    assert items[0].endings[3] == " , the man continues removing the snow on his car."
    # [title] becomes ". ", other [tags] go, ctx_b is capitalised (the rest lowercased), double spaces collapse
    assert items[1].context == "Home and Garden: How to grow a plant. Water it. The soil"
    assert items[1].endings == (" stays moist.", " is dry.", " burns.")
    assert items[2] == tx.ClozeItem("A cat sits on a mat.", (" It sleeps.", " It flies."), 0)  # ctx only


@pytest.mark.parametrize("record, message", [
    ({"ctx": "x", "endings": ["a", "b"]}, "no label.*hellaswag_val.jsonl"),
    ({"ctx": "x", "endings": ["a", "b"], "label": 2}, "label 2 is not an index of the 2 endings"),
    ({"endings": ["a", "b"], "label": 0}, "field 'ctx' missing"),
])
def test_read_hellaswag_refuses_bad_lines(tmp_path, record, message):
    path = write_jsonl(tmp_path / "h.jsonl", [HELLASWAG_LINES[2], record])
    with pytest.raises(DatasetCorruptError, match=re.escape(f"{path}:2") + ".*" + message):
        zs.read_hellaswag(path)


def test_read_piqa(tmp_path):
    path = write_jsonl(tmp_path / "valid.jsonl", PIQA_LINES)
    labels = tmp_path / "valid-labels.lst"
    labels.write_text("0\n1\n")
    items = zs.read_piqa(path, labels)
    assert [it.label for it in items] == [0, 1]
    assert items[1] == tx.ClozeItem("Question: dresser\nAnswer:", (" can hold clothes", " can hold an ocean"), 1)
    labels.write_text("0\n")
    with pytest.raises(DatasetCorruptError, match="1 labels for the 2 questions"):
        zs.read_piqa(path, labels)
    labels.write_text("0\n2\n")
    with pytest.raises(DatasetCorruptError, match=r"valid-labels.lst:2: label '2'; allowed: 0 \(sol1\), 1 \(sol2\)"):
        zs.read_piqa(path, labels)


def test_read_arc_maps_letter_and_digit_labels(tmp_path):
    items = zs.read_arc(write_jsonl(tmp_path / "ARC-Easy-Test.jsonl", ARC_LINES))
    assert [it.label for it in items] == [1, 1, 2, 4]  # "B" of A-D, "2" of 1-4, "3" of A-C, "E" of A-E
    assert items[0] == tx.ClozeItem("Question: Which is a mammal?\nAnswer:", (" shark", " whale", " trout", " eel"), 1)
    assert [it.endings[it.label] for it in items] == [" whale", " heat", " three", " z"]
    bad = dict(ARC_LINES[0], answerKey="F")
    path = write_jsonl(tmp_path / "bad.jsonl", [bad])
    with pytest.raises(DatasetCorruptError, match=re.escape(f"{path}:1: answerKey 'F' names none of the choices")):
        zs.read_arc(path)


@pytest.mark.parametrize("name, files, source", [
    ("hellaswag", ["hellaswag_val.jsonl"], "rowanz/hellaswag"),
    ("piqa", ["valid.jsonl", "valid-labels.lst"], "yonatanbisk.com/piqa"),
    ("arc_easy", ["ARC-Easy-Test.jsonl"], "ARC-V1-Feb2018"),
])
def test_missing_benchmark_names_the_path_and_the_source(tmp_path, name, files, source):
    with pytest.raises(DatasetMissingError) as err:
        zs.load_benchmark(name, tmp_path)
    message = str(err.value)
    for f in files:
        assert str(tmp_path / "zeroshot" / name / f) in message
    assert source in message and "$HACN_DATA" in message
    with pytest.raises(ValueError, match="benchmark='arc' is not valid; allowed: hellaswag, piqa, arc_easy"):
        zs.load_benchmark("arc", tmp_path)


def test_load_benchmark_reads_the_folder_layout(tmp_path):
    write_benchmarks(tmp_path)
    assert [len(zs.load_benchmark(b, tmp_path)) for b in zs.BENCHMARKS] == [3, 2, 4]


# ----------------------------------------------------------------------------- scoring and noise

# a bigram 'model' over 4 tokens a, b, c, d: the logits at position t depend on token t only
LOGITS = torch.tensor([[-9.0, 0.0, 0.5, -0.3],   # after a
                       [0.0, 0.0, 0.0, 0.0],
                       [0.0, 0.0, 0.3, 0.0],    # after c
                       [0.0, 0.0, 0.0, 0.0]], dtype=torch.float64)
WORDS = {"a": [0], "b": [1], "ccc": [2, 2, 2], "dddddd": [3]}  # "dddddd" is one token of six characters


def bigram(ids: torch.Tensor) -> torch.Tensor:
    return LOGITS[ids]


def test_length_normalisation_changes_the_winner():
    logp = torch.log_softmax(LOGITS, -1)
    b, ccc, d = float(logp[0, 1]), float(logp[0, 2] + 2 * logp[2, 2]), float(logp[0, 3])
    assert b > ccc and ccc / 3 > b  # summed, "b" wins; per token, "ccc" wins
    assert b > d and d / 6 > b / 1  # per token "b" wins over the one-token "dddddd"; per character it loses
    assert int(tx.score_endings(bigram, [0], [[1], [2, 2, 2]], normalize="none").argmax()) == 0
    assert int(tx.score_endings(bigram, [0], [[1], [2, 2, 2]]).argmax()) == 1
    items = [tx.ClozeItem("a", ("b", "ccc"), 1), tx.ClozeItem("a", ("b", "dddddd"), 1)]
    acc = tx.choice_accuracies(bigram, items, WORDS.__getitem__)
    assert acc == {"tokens": 0.5, "none": 0.0, "chars": 1.0}


def test_per_character_ranking_leaves_out_the_leading_space_as_lm_evaluation_harness_does():
    logp = torch.log_softmax(LOGITS, -1)
    b, ccc = float(logp[0, 1]), float(logp[0, 2] + 2 * logp[2, 2])
    assert ccc / 3 > b / 1 and b / 2 > ccc / 4  # without the space "ccc" wins; counting it, " b" would
    item = tx.ClozeItem("a", (" b", " ccc"), 1)
    acc = tx.choice_accuracies(bigram, [item], {"a": [0], " b": [1], " ccc": [2, 2, 2]}.__getitem__)
    assert acc["chars"] == 1.0
    assert [tx.continuation_chars(e) for e in (" b", " ccc", "ccc", " ")] == [1, 3, 3, 1]


def test_noise_at_zero_is_the_identity(tmp_path):
    write_benchmarks(tmp_path)
    for name in zs.BENCHMARKS:
        items = zs.load_benchmark(name, tmp_path)
        assert [tx.noisy_item(it, 0.0, 3) for it in items] == items
        assert any(tx.noisy_item(it, 0.2, 3) != it for it in items)


# ----------------------------------------------------------------------------- the paper-profile hook


def tiny_model(vocab: int, seed: int = 0) -> GPTDecoder:
    torch.manual_seed(seed)
    return GPTDecoder(DecoderConfig(vocab_size=vocab, max_seq_len=128, dim=16, num_layers=2, num_heads=2,
                                    mlp_dim=32, dropout=0.0)).double().eval()


def direct_accuracy(model, items, tok, p: float, seed: int, max_len: int) -> float:
    """Token-normalised accuracy computed item by item: noise (one generator per draw), encode, score, argmax."""
    g = np.random.default_rng(seed)
    hits = []
    for it in items:
        if p:
            it = tx.noisy_item(it, p, g)
        scores = tx.score_endings(model, tok.encode(it.context), [tok.encode(e) for e in it.endings], max_len=max_len)
        hits.append(int(scores.argmax()) == it.label)
    return float(np.mean(hits))


def check_against_direct(model, metrics, curves, root: Path, names, noise, draws, max_len, longest=None) -> None:
    """The metrics of ``evaluate_zeroshot`` against :func:`direct_accuracy` on the items with every ending
    within ``longest`` tokens (all items for None)."""
    tok = gpt2_tokenizer(root)
    for name in names:
        items = [it for it in zs.load_benchmark(name, root)
                 if longest is None or all(len(tok.encode(e)) <= longest for e in it.endings)]
        assert metrics[f"zeroshot/{name}/items"] == len(items)
        for p in noise:
            key = f"zeroshot/{name}/{p:g}"
            direct = [direct_accuracy(model, items, tok, p, d, max_len) for d in range(draws if p else 1)]
            assert curves[f"{key}/draws"] == pytest.approx(direct, abs=1e-12)
            assert 0.0 <= metrics[key] <= 1.0 and metrics[key] == pytest.approx(np.mean(direct))
            assert 0.0 <= metrics[f"{key}/unnormalized"] <= 1 and 0.0 <= metrics[f"{key}/per_char"] <= 1
            assert (f"{key}/sd" in metrics) == (p > 0)
            if p:
                assert metrics[f"{key}/sd"] == pytest.approx(np.std(direct, ddof=1))


def test_evaluate_zeroshot_equals_a_direct_computation(tmp_path):
    write_gpt2_tokenizer(tmp_path)
    write_benchmarks(tmp_path)
    suite = zs.prepare_zeroshot(list(zs.BENCHMARKS), tmp_path, vocab_size=300)
    assert suite.not_evaluated == {}
    model = tiny_model(300)
    metrics, curves = zs.evaluate_zeroshot(model, suite, noise=(0.0, 0.1), draws=3, max_len=128)
    check_against_direct(model, metrics, curves, tmp_path, zs.BENCHMARKS, (0.0, 0.1), 3, 128)
    assert metrics["zeroshot/average/0"] == pytest.approx(np.mean([metrics[f"zeroshot/{b}/0"] for b in zs.BENCHMARKS]))
    assert not any(k.endswith("not_evaluated") for k in metrics)
    with pytest.raises(ValueError, match="vocab_size=200: the GPT-2 BPE found has 272 token ids"):
        zs.prepare_zeroshot(["piqa"], tmp_path, vocab_size=200)


def test_missing_files_are_recorded_not_evaluated(tmp_path, monkeypatch):
    monkeypatch.setenv("HACN_DOWNLOAD", "0")  # offline: GPT-2's tokenizer.json cannot be fetched either
    write_benchmarks(tmp_path, which=("hellaswag",))
    suite = zs.prepare_zeroshot(list(zs.BENCHMARKS), tmp_path)  # no GPT-2 tokenizer: nothing can be scored
    metrics, curves = zs.evaluate_zeroshot(tiny_model(300), suite)
    assert set(metrics) == {f"zeroshot/{b}/not_evaluated" for b in zs.BENCHMARKS} and curves == {}
    why = metrics["zeroshot/hellaswag/not_evaluated"]
    assert str(tmp_path / "gpt2-tokenizer") in why and "python -m hacn_core fetch gpt2-tokenizer" in why
    assert str(tmp_path / "zeroshot" / "piqa" / "valid.jsonl") in metrics["zeroshot/piqa/not_evaluated"]
    bad = tmp_path / "zeroshot" / "arc_easy" / "ARC-Easy-Test.jsonl"
    bad.parent.mkdir(parents=True)
    bad.write_text("{not json\n")
    with pytest.raises(DatasetCorruptError, match="ARC-Easy-Test.jsonl:1: not a JSON line"):
        zs.prepare_zeroshot(["arc_easy"], tmp_path)  # a malformed file is an error, not a skip


def test_paper_profile_configuration():
    paper = hd.make_config("hacn", 0, profile="paper")
    assert paper["zeroshot_benchmarks"] == ["hellaswag", "piqa", "arc_easy"]
    assert (paper["zeroshot_noise"], paper["zeroshot_noise_draws"]) == ([0.0, 0.01, 0.03], 3)
    assert not any(k.startswith("zeroshot") for k in hd.make_config("hacn", 0, profile="book"))  # hashes kept
    for overrides, message in [
        (dict(dataset="tinyshakespeare", vocab_size=65), "zeroshot_benchmarks needs dataset='openwebtext2'"),
        (dict(zeroshot_benchmarks=["hellaswag", "boolq"]), "zeroshot_benchmarks: 'boolq' is not valid; allowed"),
        (dict(zeroshot_noise=[0.0, 1.5]), "zeroshot_noise=.* probabilities in \\[0, 1\\]"),
        (dict(zeroshot_noise_draws=0), "zeroshot_noise_draws=0 must be a positive integer"),
    ]:
        with pytest.raises(ValueError, match=message):
            hd.check_config(hd.make_config("hacn", 0, profile="paper", **overrides))
    hd.check_config(hd.make_config("hacn", 0, profile="paper", zeroshot_benchmarks=[]))  # off


def test_paper_profile_run_evaluates_the_files_found(tmp_path, monkeypatch):
    root = tmp_path / "data"
    write_gpt2_tokenizer(root)
    write_benchmarks(root, which=("hellaswag", "arc_easy"))  # PIQA absent: recorded, not a crash
    tok = gpt2_tokenizer(root)
    text = " ".join(json.dumps(r) for r in HELLASWAG_LINES + PIQA_LINES + ARC_LINES) * 3
    ids = np.asarray(tok.encode(text))
    for split, part in (("train", ids[: len(ids) * 3 // 4]), ("val", ids[len(ids) * 3 // 4:])):
        tx.write_tokens(part, root / hd.OWT2_FOLDER / f"{split}.bin")
    monkeypatch.setenv("HACN_DATA", str(root))
    monkeypatch.setenv("HACN_KEEP_MODELS", str(tmp_path / "keep"))
    config = hd.make_config("hacn", 0, profile="paper", vocab_size=300, block_size=64, dim=16, num_layers=2,
                            num_heads=2, mlp_dim=32, dropout=0.0, steps=3, batch_size=2, accumulate=1,
                            record_every_steps=1, eval_every_steps=3, eval_windows=2, val_windows=4,
                            zeroshot_noise=[0.0, 0.1], zeroshot_noise_draws=2)
    context = RunContext(hd.EXPERIMENT_ID, tmp_path / "ckpt", progress=False)
    out = hd.train_hacn_decoder(config, context)
    m, c = out["metrics"], out["curves"]
    assert "PIQA not found" in m["zeroshot/piqa/not_evaluated"] and "zeroshot/average/0" not in m
    # HellaSwag's first item has an ending of 35 tokens of this small vocabulary, over 64 // 2
    assert (m["zeroshot/hellaswag/dropped_long"], m["zeroshot/arc_easy/dropped_long"]) == (1, 0)
    assert not any(k.startswith("zeroshot/piqa/") and k != "zeroshot/piqa/not_evaluated" for k in m)
    model = hd.build_model(config)
    model.load_state_dict(load_checkpoint(tmp_path / "keep" / hd.EXPERIMENT_ID / "ckpt.pt")["model"])
    model.eval()
    check_against_direct(model, m, c, root, ("hellaswag", "arc_easy"), (0.0, 0.1), 2, 64, longest=32)
