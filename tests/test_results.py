import json
import os

import pytest

from hacn_core.engine import results as R
from hacn_core.engine.results import (
    CorruptResultError,
    MissingResultError,
    PendingResultError,
    ResultError,
    ResultMismatchError,
    ResultsStore,
    config_hash,
    run_or_load,
)

CONFIG = {"dataset": "Spiral", "width": 16, "lr": 0.01, "seed": 2, "milestones": (3, 5)}


def _train(calls):
    def train(config, context):
        calls.append(dict(config))
        return {"metrics": {"test_acc": 0.75, "loss": float("nan")}, "curves": {"train_loss": [1.0, 0.5]}}

    return train


def test_hash_is_canonical_and_sensitive():
    same = {"seed": 2, "milestones": [3, 5], "lr": 0.01, "width": 16, "dataset": "Spiral"}
    assert config_hash(CONFIG) == config_hash(same)  # key order and tuple/list do not matter
    assert len(config_hash(CONFIG)) == 16
    assert config_hash(CONFIG) != config_hash({**CONFIG, "seed": 3})
    with pytest.raises(TypeError, match="not JSON-serialisable"):
        config_hash({"f": object()})
    with pytest.raises(ValueError, match="not finite"):
        config_hash({"lr": float("inf")})


def test_round_trip_with_provenance(tmp_path):
    store, calls = ResultsStore(tmp_path), []
    first = run_or_load("exp-a", CONFIG, _train(calls), store=store, profile="smoke")
    path = store.path_for("exp-a", CONFIG)
    assert path.is_file() and path.name == f"{config_hash(CONFIG)}.json"
    stored = json.loads(path.read_text())
    assert stored["experiment"] == "exp-a" and stored["seed"] == 2 and stored["profile"] == "smoke"
    assert stored["curves"] == {"train_loss": [1.0, 0.5]}
    prov = stored["provenance"]
    assert {"git_commit", "git_dirty", "device", "versions", "wall_time_s", "date"} <= set(prov)
    assert prov["versions"]["torch"].startswith("2.13.0") and prov["device"].startswith("cpu")
    second = run_or_load("exp-a", CONFIG, _train(calls), store=store)
    assert len(calls) == 1  # the second call loaded the stored file
    assert second.metrics["test_acc"] == first.metrics["test_acc"] == 0.75
    assert second.metrics["loss"] != second.metrics["loss"]  # NaN survives the round trip
    assert [r.config_hash for r in store.iter_results()] == [config_hash(CONFIG)]


def test_different_config_trains_again(tmp_path):
    store, calls = ResultsStore(tmp_path), []
    run_or_load("exp-a", CONFIG, _train(calls), store=store)
    run_or_load("exp-a", {**CONFIG, "seed": 3}, _train(calls), store=store)
    assert [c["seed"] for c in calls] == [2, 3]
    assert len(list(store.iter_results("exp-a"))) == 2


def test_atomic_write_leaves_nothing_on_failure(tmp_path, monkeypatch):
    store = ResultsStore(tmp_path)

    def broken_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(R.os, "replace", broken_replace)
    # the failure is reported with its cause (keeping the trained result is tests/test_store_safety.py's)
    with pytest.raises(PendingResultError, match="disk full"):
        run_or_load("exp-a", CONFIG, _train([]), store=store)
    assert list((tmp_path / "exp-a").iterdir()) == []  # no partial or temporary file left


def test_corrupted_file_is_reported_and_never_overwritten(tmp_path):
    store = ResultsStore(tmp_path)
    path = store.path_for("exp-a", CONFIG)
    path.parent.mkdir(parents=True)
    path.write_text('{"experiment": "exp-a", "config": ')  # truncated JSON
    with pytest.raises(CorruptResultError, match="cannot be read"):
        run_or_load("exp-a", CONFIG, _train([]), store=store)
    assert path.read_text() == '{"experiment": "exp-a", "config": '


def test_edited_config_is_a_mismatch(tmp_path):
    store = ResultsStore(tmp_path)
    run_or_load("exp-a", CONFIG, _train([]), store=store)
    path = store.path_for("exp-a", CONFIG)
    data = json.loads(path.read_text())
    data["config"]["width"] = 32  # someone edits the file by hand
    path.write_text(json.dumps(data))
    with pytest.raises(ResultMismatchError, match="hashes to"):
        run_or_load("exp-a", CONFIG, _train([]), store=store)
    with pytest.raises(ResultMismatchError):
        list(store.iter_results())


def test_file_without_required_fields_is_corrupt(tmp_path):
    store = ResultsStore(tmp_path)
    path = store.path_for("exp-a", CONFIG)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"experiment": "exp-a"}))
    with pytest.raises(CorruptResultError, match="missing fields"):
        store.load("exp-a", CONFIG)


def test_saving_over_an_existing_result_is_refused(tmp_path):
    store = ResultsStore(tmp_path)
    result = run_or_load("exp-a", CONFIG, _train([]), store=store)
    with pytest.raises(ResultError, match="exists already"):
        store.save(result)


def test_training_disabled_raises_with_the_command(tmp_path):
    with pytest.raises(MissingResultError, match="python -m hacn_core run exp-a --profile book"):
        run_or_load("exp-a", CONFIG, _train([]), store=ResultsStore(tmp_path), allow_train=False)


def test_store_defaults_to_env_folder(monkeypatch, tmp_path):
    monkeypatch.setenv("HACN_RESULTS", str(tmp_path))
    assert ResultsStore().root == tmp_path
    monkeypatch.delenv("HACN_RESULTS")
    assert ResultsStore().root == R.REPO_ROOT / "results"


def test_tests_do_not_use_the_committed_results():
    # conftest.py points the store at a temporary folder for the whole session.
    assert os.environ["HACN_RESULTS"] != str(R.REPO_ROOT / "results")


def test_checkpoints_live_in_the_store_and_go_once_the_result_is_saved(tmp_path):
    store = ResultsStore(tmp_path)
    seen = []

    def train(config, context):
        assert (context.checkpoint_dir / "run.lock").exists()  # the folder exists already: it holds the lock
        (context.checkpoint_dir / "last.pt").write_bytes(b"state")
        seen.append(context.checkpoint_dir)
        return {"metrics": {"acc": 1.0}}

    run_or_load("exp-a", CONFIG, train, store=store)
    assert seen[0] == tmp_path / ".checkpoints" / "exp-a" / config_hash(CONFIG)
    assert not seen[0].exists()
    assert [r.experiment for r in store.iter_results()] == ["exp-a"]  # the hidden folder is not an experiment


def test_a_result_stored_by_another_process_meanwhile_is_kept(tmp_path):
    store = ResultsStore(tmp_path)

    def train(config, context):
        # another process finishes the same configuration while this one trains (one that did not see the lock,
        # e.g. on another machine sharing the store): it files its result directly
        R.store_trained("exp-a", config, {"metrics": {"acc": 0.5}}, store=store, profile=None,
                        version=R.begin_training(), wall_s=1.0, segments=None)
        return {"metrics": {"acc": 0.9}}

    with pytest.warns(UserWarning, match="written by another run"):
        result = run_or_load("exp-a", CONFIG, train, store=store)
    assert result.metrics == {"acc": 0.5}
    assert store.load("exp-a", CONFIG).metrics == {"acc": 0.5}


def test_a_damaged_result_or_checkpoint_is_flagged_not_counted(tmp_path):
    """``status``: a truncated or edited result is not "stored", a checkpoint that cannot be read not "paused"."""
    from types import SimpleNamespace

    from hacn_core.engine.progress import progress_lines, study_progress

    configs = [{**CONFIG, "seed": s} for s in (1, 2, 3, 4)]
    experiment = SimpleNamespace(id="exp-a", runs=lambda profile: [dict(c) for c in configs])
    store = ResultsStore(tmp_path)
    for config in configs[:3]:
        run_or_load("exp-a", config, _train([]), store=store)
    cut = store.path_for("exp-a", configs[0])
    cut.write_text(cut.read_text()[:100])  # truncated
    edited = store.path_for("exp-a", configs[1])
    edited.write_text(edited.read_text().replace('"test_acc": 0.75', '"test_acc": 0.95'))  # an edited number
    (store.checkpoint_dir("exp-a", configs[3])).mkdir(parents=True)
    (store.checkpoint_dir("exp-a", configs[3]) / "last.pt").write_bytes(b"not a checkpoint")
    progress = study_progress(experiment, "book", store)
    assert [p.state for p in progress] == ["damaged", "damaged", "stored", "damaged"]
    lines = progress_lines(progress)
    assert lines[0] == "1 of 4 runs stored; 0 training, 0 paused, 3 damaged, 0 not started"
    assert "result " in lines[1] and "cannot be read as a result" in lines[1]
    assert "do not match the checksum" in lines[2]
    assert "cannot be resumed from" in lines[3] and "move it aside" in lines[3]


def test_one_bad_file_costs_its_own_run_not_the_ledger(tmp_path):
    from hacn_core.ledger import ledger_rows

    store = ResultsStore(tmp_path)
    good = run_or_load("exp-a", CONFIG, _train([]), store=store)
    stray = tmp_path / "exp-a" / "0123456789abcdef.json"
    stray.write_text(json.dumps({"unrelated": "but named like a result"}))
    damaged = []
    with pytest.warns(UserWarning, match="skipped a damaged result: .*0123456789abcdef.json: missing fields"):
        assert [r.config_hash for r in store.iter_results("exp-a", damaged=damaged)] == [good.config_hash]
    assert [path for path, _ in damaged] == [stray]
    (tmp_path / "awnn-tabular-fixed").mkdir()
    (tmp_path / "awnn-tabular-fixed" / "0123456789abcdef.json").write_text("{")
    with pytest.warns(UserWarning, match="skipped a damaged result"):
        rows = ledger_rows(store)
    assert len(rows) > 200  # every item still has its row
