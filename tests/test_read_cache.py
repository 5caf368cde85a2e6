"""Reading stored results fast, with nothing read stale and nothing shared.

``ResultsStore.read`` keeps the parsed JSON of every file it read, by the digest of the file's bytes
(``results._PARSED``): a file read again with the same bytes is not parsed again, an edited one always is (and
is checked again), and every read gets objects of its own. The ledger computes each run's study hash once, and
the Student-t quantile comes from ``scipy.special`` rather than ``scipy.stats``; neither changes a number.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
from collections import OrderedDict
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest

from hacn_core.engine import results as R
from hacn_core.engine.results import CorruptResultError, ResultsStore, config_hash, run_or_load
from hacn_core.engine.stats import difference_from_summary, estimate, t_quantile
from hacn_core.ledger import ledger_rows

RESULTS = Path(__file__).resolve().parents[1] / "results"
CONFIG = {"dataset": "Spiral", "width": 16, "seed": 2}


def _train(config, context):
    return {"metrics": {"test_acc": 0.77, "width": 16.0}, "curves": {"test_acc": [0.5, 0.75], "loss": [1.0, 0.25]}}


@pytest.fixture
def fresh(monkeypatch):
    """An empty read cache and no file checked yet, as in a new process."""
    monkeypatch.setattr(R, "_PARSED", {})
    monkeypatch.setattr(R, "_parsed_bytes", 0)
    monkeypatch.setattr(R, "_VERIFIED_READS", set())


@pytest.fixture
def parses(monkeypatch):
    """The texts ``json.loads`` parsed (every caller's), in order."""
    seen, real = [], json.loads

    def counted(text, *args, **kwargs):
        seen.append(text)
        return real(text, *args, **kwargs)

    monkeypatch.setattr(json, "loads", counted)
    return seen


def _stored(tmp_path):
    store = ResultsStore(tmp_path)
    run_or_load("exp-a", CONFIG, _train, store=store, progress=False)
    return store, store.path_for("exp-a", CONFIG)


def test_a_file_read_again_is_not_parsed_again_and_each_read_gets_its_own_objects(tmp_path, fresh, parses):
    store, path = _stored(tmp_path)
    text = path.read_text()
    first = store.read(path)
    second = store.read(path)
    assert [t for t in parses if t == text] == [text]  # parsed once
    assert asdict(first) == asdict(second)
    assert first.metrics is not second.metrics and first.curves["loss"] is not second.curves["loss"]
    first.metrics["test_acc"] = -1.0  # a caller that changes its result changes only its own copy
    first.curves["loss"].append(9.0)
    first.config["width"] = 99
    third = store.read(path)
    assert asdict(third) == asdict(second)
    assert third.metrics["test_acc"] == 0.77 and third.curves["loss"] == [1.0, 0.25] and third.config["width"] == 16
    assert [t for t in parses if t == text] == [text]


def test_an_edited_file_is_parsed_and_checked_again_even_with_its_size_mtime_and_inode(tmp_path, fresh, parses):
    """The cache is keyed on the file's bytes, not on what stat says: an edit in place that keeps the size,
    the inode and (set back) the modification time is still read afresh and caught by the checksum."""
    store, path = _stored(tmp_path)
    original = path.read_bytes()
    assert store.read(path).metrics["test_acc"] == 0.77
    before = path.stat()
    edited = original.replace(b'"test_acc": 0.77', b'"test_acc": 0.99')
    assert edited != original and len(edited) == len(original)
    with open(path, "r+b") as handle:  # in place: same inode
        handle.write(edited)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = path.stat()
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (before.st_ino, before.st_size, before.st_mtime_ns)
    for _ in range(2):  # and at every read after
        with pytest.raises(CorruptResultError, match="do not match the checksum"):
            store.read(path)
    assert parses.count(edited.decode()) == 1  # parsed once, checked at every read
    path.write_bytes(original)  # restored: its old values again
    assert store.read(path).metrics["test_acc"] == 0.77


def test_a_damaged_file_raises_at_every_read_and_reads_again_once_repaired(tmp_path, fresh):
    store, path = _stored(tmp_path)
    original = path.read_bytes()
    path.write_bytes(original[: len(original) // 2])
    for _ in range(2):
        with pytest.raises(CorruptResultError, match="cannot be read as a result"):
            store.read(path)
    path.write_bytes(original)
    assert store.read(path).metrics["test_acc"] == 0.77


def test_a_full_cache_keeps_what_it_has_and_parses_the_rest_at_every_read(tmp_path, fresh, parses, monkeypatch):
    store, path = _stored(tmp_path)
    other = store.path_for("exp-a", {**CONFIG, "seed": 3})
    run_or_load("exp-a", {**CONFIG, "seed": 3}, _train, store=store, progress=False)
    monkeypatch.setattr(R, "_PARSED_MAX_BYTES", 1)  # room for one file
    for _ in range(3):
        assert store.read(path).config["seed"] == 2 and store.read(other).config["seed"] == 3
    assert len(R._PARSED) == 1
    assert parses.count(path.read_text()) == 1 and parses.count(other.read_text()) == 3


def test_ledger_rows_are_the_same_with_and_without_the_cache(tmp_path, monkeypatch, fresh):
    """The ledger of a copy of part of the committed store, read cold, read again from the cache, and read with
    the cache off, row for row (the repr writes every float exactly)."""
    for experiment in ("hacn-vit", "hacn-decoder", "hacn-code-recipe", "gates-cifar", "awnn-text", "exact-checks"):
        shutil.copytree(RESULTS / experiment, tmp_path / experiment)
    store = ResultsStore(tmp_path)
    cold = repr(ledger_rows(store))
    assert "reproduced" in cold or "differs" in cold or "shown" in cold  # some rows come from the runs
    files = sorted(tmp_path.glob("*/*.json"))
    assert len(R._PARSED) == len(files)  # every file parsed once, kept
    warm = repr(ledger_rows(store))
    monkeypatch.setattr(R, "_PARSED", {})
    monkeypatch.setattr(R, "_PARSED_MAX_BYTES", 0)  # the cache off: every read parses
    monkeypatch.setattr(R, "_VERIFIED_READS", set())
    off = repr(ledger_rows(store))
    assert not R._PARSED
    assert cold == warm == off


def test_t_quantile_is_scipy_stats_t_ppf_bit_for_bit():
    from scipy import stats

    rng = np.random.default_rng(0)
    qs = [0.975, 0.95, 0.995, 0.5, 0.025, 1e-9, *rng.uniform(0, 1, 20)]
    dfs = [*range(1, 40), 1.5, 3.7, 12.25, 1e6, math.inf, *rng.uniform(0.05, 300, 20)]
    for q in qs:
        for df in dfs:
            expected = float(stats.t.ppf(q, df=df))
            got = t_quantile(q, df)
            assert got == expected and math.copysign(1, got) == math.copysign(1, expected), (q, df)
    for q, df in ((0.0, 3), (1.0, 3), (1.5, 3), (0.9, 0), (0.9, -1), (math.nan, 3), (0.9, math.nan)):
        expected, got = float(stats.t.ppf(q, df=df)), t_quantile(q, df)
        assert got == expected or (math.isnan(got) and math.isnan(expected)), (q, df)
    x = [1.0, 2.0, 3.5]
    assert estimate(x).half_width == float(stats.t.ppf(0.975, df=2) * np.std(x, ddof=1) / math.sqrt(3))
    d = difference_from_summary(1.0, 0.2, 3, 0.5, 0.4, 5)
    vx, vy = 0.2**2 / 3, 0.4**2 / 5
    df = (vx + vy) ** 2 / (vx**2 / 2 + vy**2 / 4)
    assert d.half_width == float(stats.t.ppf(0.975, df=df) * math.sqrt(vx + vy))


def _canonical_reference(value):
    """``results._canonical`` before its fast path for the plain types (the rules it must keep)."""
    from collections.abc import Mapping

    if isinstance(value, Mapping):
        return {str(k): _canonical_reference(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_canonical_reference(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"configuration value {value!r} is not finite; it cannot be hashed reproducibly")
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"configuration value {value!r} of type {type(value).__name__} is not JSON-serialisable")


def _outcome(fn, config):
    try:
        return fn(config)
    except (TypeError, ValueError) as err:
        return type(err), str(err)


def test_config_hash_keeps_its_rules_for_every_kind_of_value():
    def reference_hash(config):
        text = json.dumps(_canonical_reference(config), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]

    configs = [
        CONFIG,
        {"b": (1, 2, (3.5, None)), "a": [True, False], 3: "int key", 2.5: "float key", None: 1, 10: "sorts as text"},
        {"nested": OrderedDict([("z", 1), ("y", {"x": (0.1,)})]), "np": np.float64(0.25)},
        {"flag": True, "zero": -0.0, "big": 10**30, "tiny": 5e-324, "text": "Γ, ü"},
        {"i": np.int64(3)},  # not an int: refused alike
        {"lr": {1, 2}},
        *({"lr": bad} for bad in (math.nan, math.inf, -math.inf, np.float64("nan"))),
    ]
    for config in configs:
        assert _outcome(R._canonical, config) == _outcome(_canonical_reference, config)
        assert _outcome(config_hash, config) == _outcome(reference_hash, config)
    assert isinstance(_outcome(config_hash, {"lr": math.nan}), tuple)  # refused: not finite
