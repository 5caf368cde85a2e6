"""Nothing a user runs is lost: checkpoint cadence, SIGINT / SIGTERM / SIGKILL and resume, wall time
over segments, damaged checkpoints (hacn_core.engine.training, the ``run`` command).

The CLI tests run ``python -m hacn_core run`` (through tests/_interrupt_cli.py, which registers a toy
experiment) in a subprocess, signal it at a random step after its first checkpoint, run the same
command again and compare the stored result with an uninterrupted run's, bit for bit. The run that is
signalled is a process of its own; the uninterrupted run and the rerun are the same command's
``main`` in this process (a process costs some 7 CPU-seconds of imports before its first step; the
runs pin one torch thread, as the subprocess's do), so the comparison is across processes. Nothing
depends on the machine's pace: the run says when it is past the chosen step (``$TOY_HOLD_AT``) and
then slows down, and the time limits are those of a hung process, not of a slow one (a loaded 2-core
machine takes over 90 s for what takes 5 s idle).
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch

import hacn_core.engine.training as training
from hacn_core import catalog
from hacn_core.__main__ import main as cli
from hacn_core.engine.config import CHECKPOINT_EVERY_ENV, CheckpointCadence, checkpoint_cadence
from hacn_core.engine.results import ResultsStore, run_or_load
from hacn_core.engine.training import (
    DISCARD_BAD_CHECKPOINT_ENV,
    Callback,
    CorruptCheckpointError,
    TrainConfig,
    TrainConfigError,
    TrainingInterrupted,
    fit,
    load_checkpoint,
    parse_checkpoint_every,
    reset_segments,
    segments_summary,
)

HERE = Path(__file__).parent
spec = importlib.util.spec_from_file_location("_interrupt_cli", HERE / "_interrupt_cli.py")
toy = importlib.util.module_from_spec(spec)
spec.loader.exec_module(toy)

CADENCE = "40steps"  # the CLI tests' --checkpoint-every
STEPS = toy.CONFIG["epochs"] * toy.CONFIG["n"] // toy.CONFIG["batch_size"]  # 256
HUNG_S = 600  # a process that takes longer is hung, not slow


@pytest.fixture(autouse=True)
def _no_user_settings(monkeypatch):
    """The user's own cadence or discard setting must not leak into these tests (nor theirs out)."""
    for name in (CHECKPOINT_EVERY_ENV, DISCARD_BAD_CHECKPOINT_ENV):
        monkeypatch.setenv(name, "")  # recorded, so that whatever a test sets is undone
        monkeypatch.delenv(name)


# ----------------------------------------------------------------------------- the command line, in a subprocess


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in (CHECKPOINT_EVERY_ENV, DISCARD_BAD_CHECKPOINT_ENV)}
    env.update(OMP_NUM_THREADS="1", HACN_QUIET="1", PYTHONWARNINGS="ignore", **extra)
    env["PYTHONPATH"] = os.pathsep.join([str(HERE.parent), env.get("PYTHONPATH", "")])
    return env


def _argv(results: Path) -> list[str]:
    return ["run", toy.TOY_ID, "--profile", "smoke", "--results", str(results), "--checkpoint-every", CADENCE]


def _command(results: Path) -> list[str]:
    return [sys.executable, str(HERE / "_interrupt_cli.py"), *_argv(results)]


def _run_here(results: Path, mp: pytest.MonkeyPatch) -> None:
    """The command of :func:`_command`, run by the same ``main`` in this process, with the toy registered
    through ``mp`` (which also undoes the variable that --checkpoint-every sets)."""
    mp.setitem(catalog.EXPERIMENTS, toy.TOY_ID, toy.EXPERIMENT)
    for name in (CHECKPOINT_EVERY_ENV, DISCARD_BAD_CHECKPOINT_ENV):
        mp.setenv(name, "")  # recorded, so that what the command sets is undone
        mp.delenv(name)
    assert cli(_argv(results)) == 0


def _stored(results: Path) -> dict:
    (path,) = (results / toy.TOY_ID).glob("*.json")
    return json.loads(path.read_text())


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> dict:
    """The toy command run once to its end, in this process: the stored result (``"stored"``), the global
    step of every checkpoint it wrote (``"saved_steps"``) and the variable its --checkpoint-every set
    (``"variable"``)."""
    results = tmp_path_factory.mktemp("straight")
    with pytest.MonkeyPatch.context() as mp:
        steps = _saved_steps(mp)
        _run_here(results, mp)
        variable = os.environ[CHECKPOINT_EVERY_ENV]
    return {"stored": _stored(results), "saved_steps": steps, "variable": variable}


# SIGINT and SIGHUP take the trainer's one handler that SIGTERM takes (each variant starts a CLI
# process, about 20 s on a loaded 2-core machine): CI runs SIGKILL and SIGTERM, -m extended the other two.
# In-process, every signal of the three is checked (test_signal_saves_raises_and_restores_the_handlers).
@pytest.mark.parametrize("sig", ["SIGKILL", "SIGTERM", pytest.param("SIGINT", marks=pytest.mark.extended),
                                 pytest.param("SIGHUP", marks=pytest.mark.extended)])
def test_cli_run_signalled_then_rerun_ends_bit_identical(tmp_path, uninterrupted, sig, monkeypatch):
    """SIGHUP is a closing terminal or ssh connection: handled like SIGTERM (exit 129). The run signalled is
    a process of its own; the same command run again (here, in this process) resumes from its checkpoint."""
    rng = random.Random()
    hold_at = rng.randrange(41, STEPS - 100)  # after the first checkpoint (step 40): a random step of the run,
    # 100 steps of 0.1 s at least before its end
    delay = rng.uniform(0.0, 0.6)  # and a random moment after it: the run is slowed to 0.1 s a step by then
    results = tmp_path / "results"
    ready = tmp_path / "ready"
    env = _env(**{toy.HOLD_ENV: f"{hold_at}:{ready}"})
    ckpt = ResultsStore(results).checkpoint_dir(toy.TOY_ID, toy.CONFIG) / "last.pt"
    first = subprocess.Popen(_command(results), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + HUNG_S
        while not ready.exists():
            assert first.poll() is None, f"the run ended before step {hold_at}: {first.communicate()}"
            assert time.monotonic() < deadline, f"not at step {hold_at} after {HUNG_S} s"
            time.sleep(0.005)
        time.sleep(delay)
        assert first.poll() is None, f"the run finished within {delay:.2f} s of step {hold_at}"
        first.send_signal(signal.Signals[sig])
        _, err = first.communicate(timeout=HUNG_S)
    finally:
        if first.poll() is None:
            first.kill()
    saved = load_checkpoint(ckpt)
    step, wall_1 = saved["position"]["global_step"], saved["wall_time_s"]
    assert 40 <= step < STEPS and not saved["position"]["finished"], (sig, delay, step)
    assert saved["segments"] == 1 and wall_1 > 0
    assert not (results / toy.TOY_ID).exists(), "an interrupted run stored a result"
    if sig == "SIGKILL":
        assert first.returncode == -signal.SIGKILL
        assert step % 40 == 0  # the last periodic checkpoint
    else:
        assert first.returncode == {"SIGINT": 130, "SIGTERM": 143, "SIGHUP": 129}[sig]
        lines = err.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in err, err
        assert lines[0] == (f"training interrupted by {sig} after step {step} of {STEPS}: saved {ckpt}; "
                            "to resume, run the same command again")

    started = time.monotonic()
    _run_here(results, monkeypatch)  # the same command again (no $TOY_HOLD_AT here: at full speed)
    own_time = time.monotonic() - started  # the second segment's command, start-up included
    stored, reference = _stored(results), uninterrupted["stored"]
    assert stored["metrics"] == reference["metrics"]  # JSON floats round-trip exactly: bit for bit
    assert stored["curves"] == reference["curves"]
    assert stored["config_hash"] == reference["config_hash"]
    prov = stored["provenance"]
    assert prov["segments"] == 2 and reference["provenance"]["segments"] == 1
    second = prov["wall_time_s"] - wall_1  # what the second segment added
    assert 0 < second < own_time  # so the stored time is both segments' sum, more than the second's own
    assert not ckpt.parent.exists()  # the stored result supersedes the checkpoints


# ----------------------------------------------------------------------------- cadence


@pytest.mark.parametrize("text,cadence", [
    ("60s", CheckpointCadence(seconds=60.0)),
    ("1.5s", CheckpointCadence(seconds=1.5)),
    ("5m", CheckpointCadence(seconds=300.0)),
    ("500steps", CheckpointCadence(steps=500)),
    ("1step", CheckpointCadence(steps=1)),
    ("500", CheckpointCadence(steps=500)),
])
def test_cadence_forms(text, cadence, monkeypatch):
    assert parse_checkpoint_every(text) == cadence
    monkeypatch.setenv(CHECKPOINT_EVERY_ENV, text)  # the variable replaces the config's fields and the default
    assert checkpoint_cadence(TrainConfig(epochs=1, batch_size=1, lr=1.0, checkpoint_every_steps=7)) == cadence


@pytest.mark.parametrize("text", ["", "abc", "0", "0s", "-3s", "1.5", "5h", "5 min", "1e3"])
def test_bad_cadence_names_the_variable_and_the_forms(text, monkeypatch):
    with pytest.raises(TrainConfigError, match=rf"^{CHECKPOINT_EVERY_ENV}=.* is invalid; allowed: .*60s.*5m.*500steps"):
        parse_checkpoint_every(text)
    monkeypatch.setenv(CHECKPOINT_EVERY_ENV, text or "x")
    with pytest.raises(TrainConfigError, match=CHECKPOINT_EVERY_ENV):
        fit(torch.nn.Linear(2, 2), (torch.randn(4, 2), torch.zeros(4, dtype=torch.long)),
            TrainConfig(epochs=1, batch_size=2, lr=0.1), progress=False)


def test_default_cadence_keeps_the_config_triggers():
    cfg = TrainConfig(epochs=1, batch_size=1, lr=1.0)
    assert checkpoint_cadence(cfg) == CheckpointCadence(default=True)
    assert checkpoint_cadence(cfg.replace(checkpoint_every_steps=7, checkpoint_every_minutes=0.5)) == \
        CheckpointCadence(steps=7, seconds=30.0, default=True)


def test_cli_flag_sets_the_variable_and_a_bad_one_is_refused(monkeypatch, capsys, tmp_path, uninterrupted):
    """A good flag: the uninterrupted toy command's ``--checkpoint-every 40steps`` (the module's one run of it
    to its end) set the variable and every checkpoint came at its cadence."""
    assert cli(["run", "exact-checks", "--results", str(tmp_path), "--checkpoint-every", "5x"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --checkpoint-every='5x' is invalid; allowed:") and "500steps" in err
    monkeypatch.setenv(CHECKPOINT_EVERY_ENV, "often")  # also restored after the test, whatever the CLI sets
    assert cli(["run", "exact-checks", "--results", str(tmp_path)]) == 2
    assert f"{CHECKPOINT_EVERY_ENV}='often' is invalid" in capsys.readouterr().err
    assert uninterrupted["variable"] == CADENCE == "40steps"
    assert uninterrupted["saved_steps"] == [*range(40, STEPS, 40), STEPS]  # the last: the finished run


def _saved_steps(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The global steps of every ``last.pt`` that ``fit`` writes from now on."""
    steps: list[int] = []
    real = training.save_training_checkpoint

    def spy(path, *args, position, **kwargs):
        steps.append(position["global_step"])
        return real(path, *args, position=position, **kwargs)

    monkeypatch.setattr(training, "save_training_checkpoint", spy)
    return steps


def _small_problem():
    g = torch.Generator().manual_seed(0)
    X = torch.randn(64, 4, generator=g)
    return (X, X[:, :3].argmax(1)), TrainConfig(epochs=4, batch_size=8, lr=1e-2, checkpoint_every_steps=3)


def _net() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Dropout(0.2), torch.nn.Linear(8, 3))


def test_default_cadence_every_epoch_within_the_budget(tmp_path, monkeypatch):
    """8 steps per epoch. A free checkpoint (budget without limit) is written at every epoch's end besides
    the config's every-3-steps; with a tiny budget none is, once one checkpoint's cost is known (step 3).
    The default's every-60-s trigger is off: on a loaded machine a slow run would add checkpoints."""
    data, cfg = _small_problem()
    steps = _saved_steps(monkeypatch)
    monkeypatch.setattr(training, "DEFAULT_CHECKPOINT_SECONDS", math.inf)
    monkeypatch.setattr(training, "CHECKPOINT_BUDGET", 1e12)
    fit(_net(), data, cfg, checkpoint_dir=tmp_path / "a", progress=False)
    multiples = [s for s in range(3, 33, 3)]
    assert steps == sorted(multiples + [8, 16, 24]) + [32]  # the last: the finished run
    steps.clear()
    monkeypatch.setattr(training, "CHECKPOINT_BUDGET", 1e-12)
    fit(_net(), data, cfg, checkpoint_dir=tmp_path / "b", progress=False)
    assert steps == multiples + [32]


def test_chosen_cadence_replaces_the_config_and_the_default(tmp_path, monkeypatch):
    data, cfg = _small_problem()
    steps = _saved_steps(monkeypatch)
    monkeypatch.setattr(training, "CHECKPOINT_BUDGET", 1e12)  # the default would write at every epoch's end
    monkeypatch.setenv(CHECKPOINT_EVERY_ENV, "5steps")
    fit(_net(), data, cfg, checkpoint_dir=tmp_path / "a", progress=False)
    assert steps == [5, 10, 15, 20, 25, 30, 32]
    steps.clear()
    monkeypatch.setenv(CHECKPOINT_EVERY_ENV, "1e-9")  # not a form
    with pytest.raises(TrainConfigError):
        fit(_net(), data, cfg, checkpoint_dir=tmp_path / "b", progress=False)
    monkeypatch.setenv(CHECKPOINT_EVERY_ENV, "0.000001s")  # every step (and again after each epoch's end)
    fit(_net(), data, cfg, checkpoint_dir=tmp_path / "c", progress=False)
    assert sorted(set(steps)) == list(range(1, 33))


# ----------------------------------------------------------------------------- signals, in process


class SignalAt(Callback):
    """Sends ``signum`` to this process after optimizer step ``at`` (``times`` times in a row)."""

    def __init__(self, at: int, signum: int, times: int = 1) -> None:
        self.at, self.signum, self.times = at, signum, times

    def on_step_end(self, state):
        if state.step == self.at:
            for _ in range(self.times):
                os.kill(os.getpid(), self.signum)


@pytest.mark.parametrize("sig,code", [("SIGINT", 130), ("SIGTERM", 143), ("SIGHUP", 129)])
def test_signal_saves_raises_and_restores_the_handlers(tmp_path, sig, code):
    data, cfg = _small_problem()
    straight = _net()
    ref = fit(straight, data, cfg, progress=False)
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    with pytest.raises(TrainingInterrupted) as info:
        fit(_net(), data, cfg, callbacks=[SignalAt(13, signal.Signals[sig])], checkpoint_dir=tmp_path, progress=False)
    err = info.value
    assert (err.signal, err.exit_code, err.step, err.saved) == (sig, code, 13, True)
    assert err.checkpoint == tmp_path / "last.pt" and load_checkpoint(err.checkpoint)["position"]["global_step"] == 13
    assert isinstance(err, KeyboardInterrupt) and not isinstance(err, Exception)
    assert str(err) == (f"training interrupted by {sig} after step 13 of 32: saved {tmp_path / 'last.pt'}; "
                        "to resume, run the same command again")
    assert {s: signal.getsignal(s) for s in before} == before
    resumed = _net()
    res = fit(resumed, data, cfg, checkpoint_dir=tmp_path, progress=False)
    for (name, a), b in zip(straight.state_dict().items(), resumed.state_dict().values()):
        assert torch.equal(a, b), name
    assert res.metrics == ref.metrics and res.segments == 2


def test_second_signal_stops_at_once_keeping_the_last_checkpoint(tmp_path):
    data, cfg = _small_problem()
    with pytest.raises(TrainingInterrupted) as info:
        fit(_net(), data, cfg, callbacks=[SignalAt(11, signal.SIGINT, times=2)], checkpoint_dir=tmp_path,
            progress=False)
    err = info.value
    assert (err.saved, err.step, err.checkpoint) == (False, 9, tmp_path / "last.pt")  # every 3 steps: 9
    assert "at once by a second SIGINT" in str(err) and "(step 9) is kept" in str(err)
    assert load_checkpoint(tmp_path / "last.pt")["position"]["global_step"] == 9


def test_without_a_checkpoint_dir_the_message_says_nothing_was_saved():
    data, cfg = _small_problem()
    with pytest.raises(TrainingInterrupted, match="nothing was saved .* starts again at step 0") as info:
        fit(_net(), data, cfg, callbacks=[SignalAt(2, signal.SIGTERM)], progress=False)
    assert info.value.checkpoint is None and info.value.exit_code == 143


def test_fit_in_a_thread_installs_no_handlers():
    """signal.signal is only allowed in the main thread: fit elsewhere trains with the handlers as they are."""
    data, cfg = _small_problem()
    out: list = []
    thread = threading.Thread(target=lambda: out.append(fit(_net(), data, cfg, progress=False)))
    thread.start()
    thread.join(60)
    assert len(out) == 1 and out[0].steps == 32


def _interrupted_once(store: ResultsStore, experiment: str):
    """A stored toy run stopped by SIGINT at step 20: its checkpoint path, and a function that runs it again
    (without the signal) to the end."""
    data, cfg = _small_problem()
    signal_at = [SignalAt(20, signal.SIGINT)]

    def train(config, context):
        res = fit(_net(), data, cfg, callbacks=list(signal_at), checkpoint_dir=context.checkpoint_dir,
                  progress=False)
        return {"metrics": res.metrics}

    with pytest.raises(TrainingInterrupted) as info:
        run_or_load(experiment, {"seed": 0}, train, store=store)
    signal_at.clear()
    return info.value.checkpoint, lambda seed=0: run_or_load(experiment, {"seed": seed}, train, store=store)


def test_wall_time_and_segments_reach_the_provenance(tmp_path):
    """A run interrupted once and run again: two segments; the stored time adds the first one's."""
    checkpoint, rerun = _interrupted_once(ResultsStore(tmp_path), "exp-segments")
    first = load_checkpoint(checkpoint)["wall_time_s"]
    started = time.perf_counter()
    result = rerun()
    own = time.perf_counter() - started
    assert result.provenance["segments"] == 2
    assert first < result.provenance["wall_time_s"] <= first + own + 1e-3
    summary = segments_summary()
    assert summary is not None and summary["segments"] == 2 and summary["earlier_wall_s"] == pytest.approx(first)
    assert summary["wall_s"] > summary["earlier_wall_s"]
    reset_segments()
    assert segments_summary() is None


def test_a_run_resumed_on_another_device_names_both(tmp_path):
    """A run begun on one machine (a lent GPU) and finished on another: the checkpoint carries the device
    of each segment, and the stored provenance names every device, the first used first."""
    from hacn_core.engine.checkpoint import save_checkpoint
    from hacn_core.engine.results import device_description

    checkpoint, rerun = _interrupted_once(ResultsStore(tmp_path), "exp-devices")
    ckpt = load_checkpoint(checkpoint)
    here = device_description("cpu")
    assert ckpt["devices"] == [here]
    ckpt["devices"] = ["cuda: Some GPU"]  # as if the first segment had trained there
    save_checkpoint(ckpt, checkpoint)
    result = rerun()
    assert result.provenance["segments"] == 2
    assert result.provenance["device"] == f"cuda: Some GPU; {here}"
    plain = rerun(seed=1)
    assert plain.provenance["device"] == here  # one device: named once, as before


# ----------------------------------------------------------------------------- damaged checkpoints


def _damaged(kind: str, path: Path, good: bytes) -> None:
    if kind == "truncated":
        path.write_bytes(good[: len(good) // 2])
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "not a checkpoint":
        path.write_bytes(b"these are not the weights you are looking for\n")
    else:  # a loadable torch file of something else
        torch.save({"weights": torch.ones(2)}, path)


@pytest.mark.parametrize("kind", ["truncated", "empty", "not a checkpoint", "another torch file"])
def test_damaged_checkpoint_names_the_file_and_the_way_out(tmp_path, kind, monkeypatch):
    data, cfg = _small_problem()
    ckdir = tmp_path / "ck dir"  # a space: the mv command must quote it
    ref = fit(_net(), data, cfg, checkpoint_dir=ckdir, progress=False)
    path = ckdir / "last.pt"
    _damaged(kind, path, path.read_bytes())
    for _ in range(2):  # every rerun fails the same way, never with a bare EOFError
        with pytest.raises(CorruptCheckpointError) as info:
            fit(_net(), data, cfg, checkpoint_dir=ckdir, progress=False)
        message = str(info.value)
        assert info.value.path == path and message.startswith(f"cannot resume from {path}: ")
        assert f"mv '{path}' '{path}.corrupt'" in message and f"{DISCARD_BAD_CHECKPOINT_ENV}=1" in message
        assert len(message.splitlines()) == 1
    monkeypatch.setenv(DISCARD_BAD_CHECKPOINT_ENV, "1")
    with pytest.warns(UserWarning, match=f"moved it to {path}.corrupt"):
        res = fit(_net(), data, cfg, checkpoint_dir=ckdir, progress=False)
    assert res.metrics == ref.metrics and res.segments == 1  # trained again from step 0
    assert (ckdir / "last.pt.corrupt").exists()
    monkeypatch.setenv(DISCARD_BAD_CHECKPOINT_ENV, "maybe")
    path.write_bytes(b"")
    with pytest.raises(TrainConfigError, match=f"{DISCARD_BAD_CHECKPOINT_ENV}='maybe' is invalid"):
        fit(_net(), data, cfg, checkpoint_dir=ckdir, progress=False)


def test_cli_reports_a_damaged_checkpoint_in_one_line(tmp_path, monkeypatch, capsys):
    from hacn_core import catalog

    monkeypatch.setitem(catalog.EXPERIMENTS, toy.TOY_ID, toy.EXPERIMENT)
    path = ResultsStore(tmp_path).checkpoint_dir(toy.TOY_ID, toy.CONFIG) / "last.pt"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"garbage")
    assert cli(["run", toy.TOY_ID, "--profile", "smoke", "--results", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: cannot resume from {path}: ") and len(err.strip().splitlines()) == 1
