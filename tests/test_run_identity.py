"""A run's identity: everything that changes its numbers is part of its hash, or changes nothing.

Walks every run-time knob (the ``HACN_*`` settings, ``--threads``, torchrun's ranks and
backend): a knob either files the run under another hash or leaves its numbers the same,
bit for bit. Also: a run paused under other threads is found, not silently started over
(``run`` skips it with the flags that resume it, exit 75; ``status`` lists it as paused).
"""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path

import pytest
import torch
from torch import nn

from hacn_core import catalog
from hacn_core.__main__ import ENVIRONMENT, _warn_unknown_environment, main
from hacn_core.engine.progress import progress_lines, study_progress
from hacn_core.engine.registry import Experiment
from hacn_core.engine.results import (
    EXECUTION_KEYS,
    SKIPPED_EXIT_CODE,
    Execution,
    ExecutionError,
    PausedElsewhereError,
    ResultsStore,
    config_hash,
    filed_config,
    planned_execution,
    run_or_load,
)
from hacn_core.engine.training import Callback, TrainConfig, TrainingInterrupted, fit

TOY = "toy-identity"
CONFIG = {"seed": 5, "width": 16}

# Every run-time knob: (variable, a non-default value, effect). "hash": the run is filed under another
# hash; "same": the same hash, so the numbers must be the same bit for bit.
KNOBS = [
    ("HACN_THREADS", "2", "hash"),
    ("HACN_PRECISION", "bf16", "hash"),
    ("HACN_PRECISION", "fp16", "hash"),
    ("HACN_PRECISION", "auto", "hash"),  # bf16 on a CUDA GPU: never under the plain hash
    ("HACN_PRECISION", "fp32", "same"),  # what every study computes in on the CPU
    ("HACN_CHECKPOINT_EVERY", "3steps", "same"),
    ("HACN_AWNN_BACKEND", "python", "same"),  # C++ and Python nodes agree bit for bit (tests/test_awnn_ext.py)
    ("HACN_QUIET", "1", "same"),
    ("HACN_DISCARD_BAD_CHECKPOINT", "1", "same"),
    ("HACN_KEEP_MODELS", "{tmp}/kept", "same"),
]
# Settings that choose where things are, whether to train or download, or serve the tools and tests:
# none of them reaches a run's arithmetic.
NOT_RUN_KNOBS = {"HACN_PROFILE", "HACN_RESULTS", "HACN_DATA", "HACN_DOWNLOAD", "HACN_ALLOW_TRAIN", "HACN_GIT_COMMIT",
                 "HACN_INSTALLER", "HACN_PYTHON", "HACN_VENV", "HACN_RUNS", "HACN_RUN_ARGS", "HACN_TASK",
                 "HACN_GPU_EXPERIMENTS", "HACN_GPU_TESTS", "HACN_GPU_TEST_SECONDS", "HACN_TEST_DATA", "HACN_MPS",
                 "HACN_CHROMIUM", "HACN_TRACE_READS", "HACN_MFU_BATCHES"}
# What a stored provenance records: identity (hashed when not default) or a description of the run.
IDENTITY = {"threads", "world_size", "backend", "precision"}
DESCRIPTION = {"git_commit", "git_dirty", "device", "versions", "wall_time_s", "date", "segments", "engine",
               "awnn_node", "rank_dependent"}

STOP_AT: list[int] = []  # a step at which the toy sends itself SIGINT (set by a test, cleared when sent)


class _StopAt(Callback):
    def on_step_end(self, state):
        if state.step in STOP_AT:
            STOP_AT.clear()
            os.kill(os.getpid(), signal.SIGINT)


def train_toy(config, context):
    """A small MLP with dropout through ``fit`` (checkpoints in the run's folder), on the CPU."""
    g = torch.Generator().manual_seed(0)
    X = torch.randn(96, 6, generator=g)
    y = X[:, :3].argmax(1)
    torch.manual_seed(config["seed"])
    model = nn.Sequential(nn.Linear(6, config["width"]), nn.ReLU(), nn.Dropout(0.1), nn.Linear(config["width"], 3))
    cfg = TrainConfig(epochs=3, batch_size=8, lr=0.05, seed=config["seed"], device="cpu")
    out = fit(model, (X[:64], y[:64]), cfg, val=(X[64:], y[64:]), callbacks=[_StopAt()],
              checkpoint_dir=context.checkpoint_dir, progress=False)
    return {"metrics": out.metrics, "curves": {k: v for k, v in out.curves.items() if k != "time_s"},
            "device": out.device}


EXPERIMENT = Experiment(id=TOY, title="toy", train=train_toy, configs={"book": lambda: [dict(CONFIG)]},
                        setting={"book": "toy"})


@pytest.fixture(autouse=True)
def _clean_knobs(monkeypatch):
    for name in {k for k, _, _ in KNOBS} | {"WORLD_SIZE", "RANK"}:
        monkeypatch.delenv(name, raising=False)
    STOP_AT.clear()


def test_every_knob_is_classified(capsys):
    """A new setting must say here whether it changes a run's numbers (and the walk below checks it)."""
    assert set(ENVIRONMENT) == {k for k, _, _ in KNOBS} | NOT_RUN_KNOBS
    assert set(EXECUTION_KEYS) == {"threads", "world_size", "backend", "run_precision"}
    _warn_unknown_environment({"HACN_DEVICE": "cuda", "HACN_THREADS": "2"})  # a setting that does not exist
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("warning: $HACN_DEVICE is not a setting of hacn_core and is ignored; the settings are")
    assert "HACN_THREADS, HACN_PRECISION" in line


def test_every_variable_the_code_reads_is_listed():
    """The list the warning about an unknown ``HACN_*`` variable gives is the one the code reads."""
    repo = Path(__file__).resolve().parents[1]
    files = [*repo.glob("hacn_core/**/*.py"), *repo.glob("tools/*"), *repo.glob("tests/*.py"), repo / "conftest.py",
             repo / "Makefile"]
    named = {m for f in files if f.is_file() for m in re.findall(r"\bHACN_[A-Z_]*[A-Z]\b", f.read_text())}
    assert named - {"HACN_DEVICE"} == set(ENVIRONMENT)  # the warning's own example aside


def test_each_knob_files_the_run_elsewhere_or_changes_no_number(tmp_path, monkeypatch):
    plain = run_or_load(TOY, CONFIG, train_toy, store=ResultsStore(tmp_path / "plain"), progress=False)
    assert plain.config_hash == config_hash(CONFIG)  # the defaults add nothing to the hash
    assert set(plain.provenance) <= IDENTITY | DESCRIPTION, set(plain.provenance) - IDENTITY - DESCRIPTION
    for i, (name, value, effect) in enumerate(KNOBS):
        with monkeypatch.context() as m:
            m.setenv(name, value.format(tmp=tmp_path))
            run = run_or_load(TOY, CONFIG, train_toy, store=ResultsStore(tmp_path / str(i)), progress=False)
        assert set(run.provenance) <= IDENTITY | DESCRIPTION
        if effect == "hash":
            assert run.config_hash != plain.config_hash, (name, value)
        else:
            assert run.config_hash == plain.config_hash, (name, value)
            assert (run.metrics, run.curves) == (plain.metrics, plain.curves), (name, value)  # bit for bit


def test_a_bf16_run_is_never_loaded_as_the_fp32_one(tmp_path, monkeypatch):
    store = ResultsStore(tmp_path)
    monkeypatch.setenv("HACN_PRECISION", "bf16")
    low = run_or_load(TOY, CONFIG, train_toy, store=store, progress=False)
    assert low.config["run_precision"] == "bf16" and low.provenance["precision"] == "bf16 autocast"
    monkeypatch.delenv("HACN_PRECISION")
    calls = []

    def counting(config, context):
        calls.append(config)
        return train_toy(config, context)

    plain = run_or_load(TOY, CONFIG, counting, store=store, progress=False)
    assert len(calls) == 1 and plain.config_hash != low.config_hash  # trained, not loaded from the bf16 file
    assert plain.provenance["precision"] == "fp32" and plain.metrics != low.metrics  # the precision mattered
    monkeypatch.setenv("HACN_PRECISION", "fp64")
    with pytest.raises(ExecutionError, match=r"\$HACN_PRECISION='fp64' is invalid; allowed: auto, fp32, bf16, fp16"):
        run_or_load(TOY, CONFIG, train_toy, store=store, progress=False)


def test_ranks_and_their_backend_are_part_of_the_hash(monkeypatch):
    base = filed_config(CONFIG, Execution())
    gloo = filed_config(CONFIG, Execution(world_size=2, backend="gloo"))
    nccl = filed_config(CONFIG, Execution(world_size=2, backend="nccl"))
    assert len({config_hash(base), config_hash(gloo), config_hash(nccl)}) == 3
    assert gloo == base | {"world_size": 2} and nccl == gloo | {"backend": "nccl"}
    monkeypatch.setenv("WORLD_SIZE", "2")
    planned = planned_execution()
    assert planned.world_size == 2 and planned.backend == ("nccl" if torch.cuda.is_available() else "gloo")


def _pause_under_two_threads(store: ResultsStore) -> None:
    STOP_AT.append(10)
    with pytest.raises(TrainingInterrupted):
        run_or_load(TOY, CONFIG, train_toy, store=store, progress=False, threads=2)


def test_a_run_paused_under_other_threads_is_resumed_not_restarted(tmp_path, monkeypatch, capsys):
    store = ResultsStore(tmp_path)
    _pause_under_two_threads(store)
    with pytest.raises(PausedElsewhereError, match=r"paused run under --threads 2 in .*: to resume it, run the same "
                                                   r"command with --threads 2.*mv "):
        run_or_load(TOY, CONFIG, train_toy, store=store, progress=False)
    assert not store.checkpoint_dir(TOY, CONFIG).exists()  # nothing started over under one thread

    monkeypatch.setitem(catalog.EXPERIMENTS, TOY, EXPERIMENT)
    progress = study_progress(EXPERIMENT, "book", store)
    assert [(p.state, p.global_step, p.owner) for p in progress] == [
        ("paused", 10, "under --threads 2: resume it with --threads 2")]
    assert "0 of 1 runs stored; 0 training, 1 paused, 0 not started" in progress_lines(progress)[0]
    assert main(["status", TOY, "--profile", "book", "--results", str(tmp_path)]) == 0
    assert "resume it with --threads 2" in capsys.readouterr().out
    assert main(["status", TOY, "--profile", "book", "--results", str(tmp_path), "--threads", "2"]) == 0
    assert "1 paused" in capsys.readouterr().out  # under its own threads: paused as it always was

    assert main(["run", TOY, "--profile", "book", "--results", str(tmp_path)]) == SKIPPED_EXIT_CODE == 75
    err = capsys.readouterr().err
    assert err.startswith("skipped: ") and "--threads 2" in err and "Traceback" not in err
    assert main(["run", TOY, "--profile", "book", "--results", str(tmp_path), "--threads", "2"]) == 0
    stored = store.load(TOY, filed_config(CONFIG, Execution(threads=2)))
    assert stored is not None and stored.provenance["segments"] == 2  # resumed, not begun again
