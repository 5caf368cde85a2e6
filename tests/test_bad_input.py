"""Bad input gets a clear answer: the command line, the ``where`` selection, and the
library's own checks (AlphaInit, ResidualStack shapes, AWNN starting width, IDX files)."""

import importlib.util
import math
import re
import struct
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from hacn_core import catalog
from hacn_core.__main__ import UsageError, _parse_where, main
from hacn_core.awnn import mlp
from hacn_core.awnn.mlp import MAX_START_PARAMETERS, AdaptiveMLP
from hacn_core.awnn.studies.ablations import START_RATES
from hacn_core.engine import data
from hacn_core.engine.data import DatasetCorruptError, idx_shape
from hacn_core.engine.registry import Experiment, WhereError, check_where
from hacn_core.engine.results import ResultsStore
from hacn_core.hacn.connectivity import AlphaInit, ResidualStack

REPO = Path(__file__).resolve().parents[1]


def _cli(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def _one_error_line(err: str) -> str:
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    return err


# ----------------------------------------------------------------------------- --where


def test_where_with_an_unknown_key_lists_the_configuration_keys(capsys, tmp_path):
    code, out, err = _cli(capsys, "run", "gates-mnist", "--profile", "smoke", "--where", "dept=7",
                          "--results", str(tmp_path))
    assert code == 2 and out == ""
    line = _one_error_line(err)
    assert "unknown key 'dept'" in line and "'gates-mnist' at profile 'smoke'" in line
    assert "keys: dataset, kind, depth, width" in line
    assert not any(tmp_path.iterdir())  # nothing ran


def test_where_with_a_value_outside_the_grid_lists_the_grid(capsys, tmp_path):
    code, out, err = _cli(capsys, "run", "gates-mnist", "--profile", "smoke", "--where", "depth=7",
                          "--results", str(tmp_path))
    assert code == 2 and out == ""
    assert "depth=7 matches none" in _one_error_line(err) and "the grid has depth = 2, 10 (numbers)" in err


def test_where_with_a_wrongly_typed_value_says_so(capsys, tmp_path):
    # '"50"' is JSON for the string "50"; the grid has the number 50
    code, _, err = _cli(capsys, "run", "gates-mnist", "--profile", "paper", "--where", 'depth="50"',
                        "--results", str(tmp_path))
    assert code == 2
    assert "depth='50' (a string)" in _one_error_line(err)
    assert "the grid has depth = 2, 10, 20, 50, 100 (numbers)" in err
    code, _, err = _cli(capsys, "run", "awnn-tabular-fixed", "--profile", "smoke", "--where", "dataset=7",
                        "--results", str(tmp_path))
    assert code == 2 and "dataset=7 (a number)" in err and "'DoubleMoon', 'Spiral', 'SpiralHard' (strings)" in err


def test_where_entries_that_never_meet_are_refused_with_their_counts(capsys, tmp_path):
    code, _, err = _cli(capsys, "run", "awnn-tabular-adaptive", "--profile", "smoke", "--where", "study=diagnosis",
                        "dataset=DoubleMoon", "--results", str(tmp_path))
    assert code == 2
    assert "together; one by one: study='diagnosis' matches 3, dataset='DoubleMoon' matches 4" in _one_error_line(err)


def test_where_syntax_and_json_reading():
    assert _parse_where(["depth=7", "dataset=Spiral", "removal=true", "rule=null", "rate_init=0.001", "s=\"50\""]) == {
        "depth": 7, "dataset": "Spiral", "removal": True, "rule": None, "rate_init": 0.001, "s": "50"}
    assert _parse_where(["expr=a=b"]) == {"expr": "a=b"}  # only the first '=' separates
    for bad in ("depth", "=7"):
        with pytest.raises(UsageError, match="--where expects KEY=VALUE"):
            _parse_where([bad])


def test_bad_where_syntax_is_one_line(capsys):
    code, _, err = _cli(capsys, "run", "gates-mnist", "--profile", "smoke", "--where", "depth")
    assert code == 2 and "--where expects KEY=VALUE" in _one_error_line(err)


def test_check_where_selects_and_explains():
    configs = [{"a": 1, "b": "x", "c": None}, {"a": 2, "b": "y", "c": [1, 2]}, {"a": 2.5, "b": "x", "c": None}]
    assert check_where(configs, None) == configs and check_where(configs, {}) == configs
    assert check_where(configs, {"a": 2.0}) == [configs[1]]  # compared with ==, as matches() does
    assert check_where(configs, {"b": "x"}) == [configs[0], configs[2]]
    with pytest.raises(WhereError, match=r"unknown key 'd' for the toys; their keys: a, b, c"):
        check_where(configs, {"d": 1}, context="the toys")
    with pytest.raises(WhereError, match=r"a=3 matches none of .* the grid has a = 1, 2, 2.5 \(numbers\)$"):
        check_where(configs, {"a": 3})
    with pytest.raises(WhereError, match=r"c=\[3\] matches none .* c = None \(null\); \[1, 2\] \(lists\)$"):
        check_where(configs, {"c": [3]})
    with pytest.raises(WhereError, match=r"a='1' \(a string\) .* a = 1, 2, 2.5 \(numbers\)"):
        check_where(configs, {"a": "1"})
    with pytest.raises(WhereError, match=r"together; one by one: a=1 matches 1, b='y' matches 1"):
        check_where(configs, {"a": 1, "b": "y"})
    assert issubclass(WhereError, ValueError)


def test_the_python_api_refuses_an_empty_selection_but_not_an_empty_store(tmp_path):
    store = ResultsStore(tmp_path)
    with pytest.raises(ValueError, match=r"the grid has depth = 2, 10"):
        catalog.run("gates-mnist", "smoke", store=store, where={"depth": 7}, progress=False)
    with pytest.raises(ValueError, match=r"unknown key 'dept'"):
        catalog.stored("gates-mnist", "paper", store=store, where={"dept": 50})
    # "what is stored so far" of a selection that exists: nothing yet, and no error
    assert catalog.stored("gates-mnist", "paper", store=store, where={"kind": "gated_plain", "depth": 50}) == []
    assert not any(tmp_path.iterdir())


# ----------------------------------------------------------------------------- names, --debug


def test_unknown_experiment_and_profile_are_one_line_with_exit_2(capsys, monkeypatch):
    code, out, err = _cli(capsys, "run", "gates-mnistx", "--profile", "smoke")
    assert code == 2 and out == "" and "unknown experiment 'gates-mnistx'; known: " in _one_error_line(err)
    code, _, err = _cli(capsys, "run", "gates-mnist", "--profile", "smokey")
    assert code == 2 and "unknown profile 'smokey'" in _one_error_line(err) and "smoke, book, paper" in err
    monkeypatch.setenv("HACN_PROFILE", "huge")  # the profile from the environment
    code, _, err = _cli(capsys, "run", "gates-mnist")
    assert code == 2 and "unknown profile 'huge'" in _one_error_line(err)
    code, _, err = _cli(capsys, "fetch", "ImageNet")
    assert code == 2 and "dataset='ImageNet' is unknown; known datasets: MNIST" in _one_error_line(err)


def test_debug_shows_the_exception_in_process():
    for args in (["--debug", "run", "gates-mnistx"], ["run", "gates-mnist", "--profile", "smokey", "--debug"]):
        with pytest.raises(UsageError):
            main(args)


def test_a_missing_stored_result_and_a_missing_dataset_are_one_line(capsys, monkeypatch, tmp_path):
    results = tmp_path / "results"
    monkeypatch.setenv("HACN_ALLOW_TRAIN", "0")
    code, _, err = _cli(capsys, "run", "gates-mnist", "--profile", "smoke", "--where", "depth=2", "kind=plain",
                        "--results", str(results))
    assert code == 2 and "no stored result for gates-mnist" in _one_error_line(err) and "HACN_ALLOW_TRAIN=0" in err
    monkeypatch.setenv("HACN_ALLOW_TRAIN", "1")
    monkeypatch.setenv("HACN_DATA", str(tmp_path / "no-data"))
    monkeypatch.setenv("HACN_DOWNLOAD", "0")
    code, out, err = _cli(capsys, "run", "gates-mnist", "--profile", "smoke", "--where", "depth=2", "kind=plain",
                          "--results", str(results))
    assert code == 2 and out == "" and "Traceback" not in err
    assert err.startswith("error: dataset 'MNIST' is not available offline.") and "fetch MNIST" in err


def test_an_unexpected_exception_keeps_its_traceback(monkeypatch, tmp_path):
    def broken(config, context):
        raise RuntimeError("a bug, not bad input")

    toy = Experiment("toy-broken", "toy", broken, {"smoke": lambda: [{"seed": 0}]}, {"smoke": "tiny"})
    monkeypatch.setitem(catalog.EXPERIMENTS, toy.id, toy)
    with pytest.raises(RuntimeError, match="a bug"):
        main(["run", "toy-broken", "--profile", "smoke", "--results", str(tmp_path)])


def _real_process(*args: str) -> subprocess.CompletedProcess:
    """``python -m hacn_core ARGS`` in a fresh process (a Python start with torch: a few CPU-seconds)."""
    return subprocess.run([sys.executable, "-m", "hacn_core", *args], capture_output=True, text=True, cwd=REPO)


@pytest.mark.extended
def test_command_line_in_a_real_process_prints_no_traceback():
    """A bad ``--where`` in a real process: one line, exit status 2, no traceback.

    A variant of what CI checks in two forms: the same error in process
    (``test_where_with_a_value_outside_the_grid_lists_the_grid``) and bad input to ``python -m hacn_core``
    in a real process giving one line, status 2 and no traceback
    (``tests/test_dry_run.py::test_command_line_errors_are_one_line``)."""
    done = _real_process("run", "gates-mnist", "--profile", "smoke", "--where", "depth=7")
    assert done.returncode == 2 and done.stdout == ""
    assert "the grid has depth = 2, 10 (numbers)" in _one_error_line(done.stderr)


def test_command_line_in_a_real_process_prints_a_traceback_with_debug():
    """``--debug`` in a real process: the interpreter's traceback and exit status 1 (without it: one line,
    status 2, no traceback: ``test_command_line_in_a_real_process_prints_no_traceback``, and in CI
    ``tests/test_dry_run.py::test_command_line_errors_are_one_line``)."""
    done = _real_process("run", "gates-mnist", "--profile", "smokey", "--debug")
    assert done.returncode == 1 and "Traceback (most recent call last)" in done.stderr
    assert "unknown profile 'smokey'" in done.stderr


# ----------------------------------------------------------------------------- AlphaInit, ResidualStack


@pytest.mark.parametrize("field,value", [("mu", math.nan), ("mu", math.inf), ("first_mu", math.nan),
                                         ("end_mu", -math.inf), ("value", math.nan), ("mu", "0.25")])
def test_alpha_init_refuses_non_finite_means(field, value):
    with pytest.raises(ValueError, match=rf"alpha_init\.{field}=.* must be a finite number"):
        AlphaInit(**{field: value})


@pytest.mark.parametrize("sigma", [math.nan, math.inf, -0.1])
def test_alpha_init_refuses_a_bad_std(sigma):
    with pytest.raises(ValueError, match=r"alpha_init\.sigma=.* must be a finite number >= 0"):
        AlphaInit(sigma=sigma)


def test_alpha_init_keeps_the_values_the_rules_use():
    # the paper's N(0.25, 0.005), the code variants' means, Table 2's sweep, ACN/ResNet constants, Table 6
    for spec in (AlphaInit(), AlphaInit(mu=0.5), AlphaInit(mu=1.0), AlphaInit(mu=0.75), AlphaInit(mu=-0.5),
                 AlphaInit("constant", value=0.0), AlphaInit("constant", value=1), AlphaInit(sigma=0.0),
                 AlphaInit("half_layers"), AlphaInit("exp_decay"), AlphaInit(mu=np.float32(0.25))):
        assert torch.isfinite(spec.means(4)).all()


def _x() -> torch.Tensor:
    return torch.randn(2, 4, generator=torch.Generator().manual_seed(0))


def test_a_shape_changing_block_is_named_with_both_shapes():
    stack = ResidualStack([nn.Identity(), nn.Linear(4, 3)], "hacn")
    with pytest.raises(ValueError, match=r"blocks\[1\] \(Linear\): its output has shape \(2, 3\) but its input \(2, 4\)"):
        stack(_x())
    with pytest.raises(ValueError, match=r"blocks\[1\] \(Linear\)"):
        stack.trace(_x())
    assert stack(_x(), num_layers=1).shape == (2, 4)  # the first block alone is fine


def test_a_broadcastable_shape_change_is_refused_not_broadcast():
    # resnet would compute x + f(x) = (2, 4) + (2, 1) -> (2, 4) without a word
    for rule in ("resnet", "acn", "hacn", "rezero", "gated", "denseformer"):
        stack = ResidualStack([nn.Linear(4, 4), nn.Linear(4, 1)], rule)
        with pytest.raises(ValueError, match=r"blocks\[1\] \(Linear\): its output has shape \(2, 1\) but its input \(2, 4\)"):
            stack(_x())


class _Parts(nn.Module):
    """A two-part block whose channel part ``c`` drops a feature."""

    def parts(self, x):
        return x, x[:, :3]


def test_a_two_part_block_names_the_part():
    with pytest.raises(ValueError, match=r"blocks\[0\] \(_Parts\): parts\(x\)'s c has shape \(2, 3\)"):
        ResidualStack([_Parts()], "hacn_code_mixer")(_x())


# ----------------------------------------------------------------------------- AWNN starting width


def test_a_tiny_starting_rate_is_refused_before_anything_is_allocated(monkeypatch):
    def no_allocation(*args, **kwargs):
        raise AssertionError("AdaptiveLinear was built")

    monkeypatch.setattr(mlp, "AdaptiveLinear", no_allocation)
    started = time.perf_counter()
    with pytest.raises(ValueError) as err:
        AdaptiveMLP(in_dim=2, out_dim=2, rate_init=1e-9)
    assert time.perf_counter() - started < 0.5
    message = str(err.value)
    assert message.startswith("rate_init=1e-09 (Eq. 11 at k=0.9) gives a starting width of 2,302,585,093 neurons")
    assert "11,512,925,467 parameters (42.9 GiB)" in message and "max_width" in message
    with pytest.raises(ValueError, match=r"^initial_width=300000000 gives a starting width of 300,000,000"):
        AdaptiveMLP(in_dim=2, out_dim=2, initial_width=300_000_000)


def test_the_starting_width_limit_breaks_no_study_setting():
    # Figs. 4 and 10 start as low as rate 0.001 (2,303 neurons); two hidden layers are the most the studies use
    for rate in START_RATES:
        AdaptiveMLP(in_dim=2, out_dim=2, n_hidden_layers=2, rate_init=rate)
    assert AdaptiveMLP(in_dim=2, out_dim=2, rate_init=0.001).widths() == [2303]
    assert AdaptiveMLP(in_dim=2, out_dim=2, rate_init=1e-9, max_width=50).widths() == [50]  # a cap is the way out
    assert 2303**2 * 10 < MAX_START_PARAMETERS


# ----------------------------------------------------------------------------- IDX files


def _write_idx(path: Path, array: np.ndarray) -> None:
    # magic (0, 0, 0x08 = ubyte, ndim), big-endian sizes, then the bytes
    header = struct.pack(">BBBB", 0, 0, 0x08, array.ndim) + struct.pack(f">{array.ndim}I", *array.shape)
    path.write_bytes(header + array.astype(np.uint8).tobytes())


@pytest.fixture
def idx_root(tmp_path):
    raw = tmp_path / "MNIST" / "raw"
    raw.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for split in ("train", "t10k"):
        _write_idx(raw / f"{split}-images-idx3-ubyte", rng.integers(0, 256, (5, 28, 28), dtype=np.uint8))
        _write_idx(raw / f"{split}-labels-idx1-ubyte", np.array([3, 1, 4, 1, 5], dtype=np.uint8))
    return tmp_path


def test_intact_idx_files_load_as_written(idx_root):
    images = idx_root / "MNIST" / "raw" / "train-images-idx3-ubyte"
    assert idx_shape(images) == (5, 28, 28)
    x, y = data.image_tensors("MNIST", train=True, root=idx_root, download=False)
    expected = np.frombuffer(images.read_bytes()[16:], dtype=np.uint8).reshape(5, 1, 28, 28) / 255.0
    assert torch.equal(x, torch.as_tensor(expected, dtype=torch.float32)) and y.tolist() == [3, 1, 4, 1, 5]


def test_a_truncated_idx_file_is_named(idx_root):
    images = idx_root / "MNIST" / "raw" / "train-images-idx3-ubyte"
    images.write_bytes(images.read_bytes()[:-100])
    with pytest.raises(DatasetCorruptError) as err:
        data.image_tensors("MNIST", train=True, root=idx_root, download=False)
    assert str(err.value) == (f"{images} is truncated: 3,836 bytes, but its header declares shape (5, 28, 28), "
                              "3,936 bytes; delete it and fetch it again (python -m hacn_core fetch MNIST)")
    labels = idx_root / "MNIST" / "raw" / "t10k-labels-idx1-ubyte"
    labels.write_bytes(labels.read_bytes()[:6])  # cut inside the header
    with pytest.raises(DatasetCorruptError, match="t10k-labels-idx1-ubyte is truncated inside its header"):
        data.image_tensors("MNIST", train=False, root=idx_root, download=False)


def test_idx_images_and_labels_must_agree(idx_root):
    _write_idx(idx_root / "MNIST" / "raw" / "train-labels-idx1-ubyte", np.array([3, 1, 4], dtype=np.uint8))
    with pytest.raises(DatasetCorruptError, match="holds 5 images but train-labels-idx1-ubyte 3 labels"):
        data.image_tensors("MNIST", train=True, root=idx_root, download=False)


def test_a_truncated_copy_of_the_real_file_fails_on_the_command_line(capsys, monkeypatch, tmp_path):
    real = data.data_root() / "MNIST" / "raw" / "train-images-idx3-ubyte"
    if data.missing_files("MNIST"):
        pytest.skip("MNIST is not in the data root")
    root = data.link_mirror(data.data_root(), tmp_path / "data")
    copy = root / "MNIST" / "raw" / "train-images-idx3-ubyte"
    copy.unlink()  # a symlink into the mirror: replace it with a truncated copy
    with open(real, "rb") as handle:
        copy.write_bytes(handle.read(1_000_016))
    monkeypatch.setenv("HACN_DATA", str(root))
    code, out, err = _cli(capsys, "run", "gates-mnist", "--profile", "smoke", "--where", "depth=2", "kind=plain",
                          "--results", str(tmp_path / "results"))
    assert code == 2 and out == ""
    assert f"{copy} is truncated: 1,000,016 bytes" in _one_error_line(err) and "(60000, 28, 28)" in err
    assert real.stat().st_size == 47_040_016  # the mirror is untouched


# ----------------------------------------------------------------------------- run settings, stores, files (issue 43)


@pytest.mark.parametrize("args,env,expected", [
    (["--threads", "0"], {}, "--threads=0 is not allowed; allowed: a positive integer (default 1)"),
    (["--threads", "-3"], {}, "--threads=-3 is not allowed; allowed: a positive integer (default 1)"),
    ([], {"HACN_THREADS": "abc"}, "$HACN_THREADS='abc' is not an integer; allowed: a positive integer"),
    ([], {"HACN_PRECISION": "fp8"}, "$HACN_PRECISION='fp8' is invalid; allowed: auto, fp32, bf16, fp16"),
    (["--stacked"], {}, "--stacked: experiment 'awnn-tabular-fixed' has no stacked engine"),
    (["--where", "dataset=Spiral", "--where", "dataset=DoubleMoon"], {}, "--where gives dataset twice"),
])
def test_bad_run_settings_are_one_line(capsys, monkeypatch, tmp_path, args, env, expected):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    code, out, err = _cli(capsys, "run", "awnn-tabular-fixed", "--profile", "smoke", "--results", str(tmp_path),
                          *args)
    assert code == 2 and expected in _one_error_line(err), err
    assert not any(tmp_path.iterdir())  # nothing ran
    if "--threads" in args:
        code, out, err = _cli(capsys, "status", "awnn-tabular-fixed", "--profile", "smoke", "--results",
                              str(tmp_path), *args)
        assert code == 2 and expected in _one_error_line(err)


def test_a_huge_where_value_is_cut_in_the_message(capsys, tmp_path):
    value = "x" * 1_000_000
    code, out, err = _cli(capsys, "run", "awnn-tabular-fixed", "--profile", "smoke", "--results", str(tmp_path),
                          "--where", f"dataset={value}")
    assert code == 2 and "(999,922 more characters)" in _one_error_line(err) and len(err) < 1000


@pytest.mark.parametrize("command", ["status", "ledger"])
def test_status_and_ledger_of_a_missing_folder_or_a_file_are_one_line(capsys, tmp_path, command):
    study = ["awnn-tabular-fixed", "--profile", "smoke"] if command == "status" else []
    code, out, err = _cli(capsys, command, *study, "--results", str(tmp_path / "no such folder"))
    assert code == 2 and out == "" and "no such folder does not exist" in _one_error_line(err)
    (tmp_path / "a file").write_text("")
    code, out, err = _cli(capsys, command, *study, "--results", str(tmp_path / "a file"))
    assert code == 2 and out == "" and "is a file, not a results folder" in _one_error_line(err)


@pytest.mark.parametrize("content,expected", [(b"", "the file is empty"),
                                              (b"To be\xff or not", "not UTF-8 text (byte 5")])
def test_a_damaged_tiny_shakespeare_names_the_file(monkeypatch, tmp_path, content, expected):
    from hacn_core.engine.text import tiny_shakespeare

    path = tmp_path / "tinyshakespeare" / "input.txt"
    path.parent.mkdir()
    path.write_bytes(content)
    monkeypatch.setenv("HACN_DOWNLOAD", "0")
    with pytest.raises(DatasetCorruptError, match=f"{path}: {re.escape(expected)}.*fetch tinyshakespeare"):
        tiny_shakespeare(tmp_path)


def test_fetch_never_goes_to_the_network_with_downloads_off(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("HACN_DATA", str(tmp_path))
    monkeypatch.setenv("HACN_DOWNLOAD", "0")
    monkeypatch.setattr(data, "_download", lambda name, base: pytest.fail("fetch downloaded with HACN_DOWNLOAD=0"))
    code, out, err = _cli(capsys, "fetch", "tinyshakespeare")
    assert code == 2 and "download: disabled (HACN_DOWNLOAD=0" in err and "Traceback" not in err


def _toy_checkpoint(monkeypatch, tmp_path):
    """The interrupt tests' toy experiment, registered, and where its checkpoint goes in ``tmp_path``."""
    spec = importlib.util.spec_from_file_location("_interrupt_cli", REPO / "tests" / "_interrupt_cli.py")
    toy = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(toy)
    monkeypatch.setitem(catalog.EXPERIMENTS, toy.TOY_ID, toy.EXPERIMENT)
    return toy, ResultsStore(tmp_path).checkpoint_dir(toy.TOY_ID, toy.CONFIG) / "last.pt"


def test_a_last_pt_that_is_a_folder_is_named_with_the_way_out(capsys, monkeypatch, tmp_path):
    toy, path = _toy_checkpoint(monkeypatch, tmp_path)
    path.mkdir(parents=True)
    code, out, err = _cli(capsys, "run", toy.TOY_ID, "--profile", "smoke", "--results", str(tmp_path))
    assert code == 1 and "is a folder, not a checkpoint file" in _one_error_line(err) and f"mv {path} " in err
    code, out, err = _cli(capsys, "status", toy.TOY_ID, "--profile", "smoke", "--results", str(tmp_path))
    assert code == 0 and "damaged" in out and "0 paused, 1 damaged" in out


def test_a_pickled_module_checkpoint_gives_a_message_without_escape_codes(capsys, monkeypatch, tmp_path):
    toy, path = _toy_checkpoint(monkeypatch, tmp_path)
    path.parent.mkdir(parents=True)
    torch.save(nn.Linear(2, 2), path)  # a whole module: weights_only refuses it, with a coloured message
    code, out, err = _cli(capsys, "run", toy.TOY_ID, "--profile", "smoke", "--results", str(tmp_path))
    assert code == 1 and "\x1b" not in err and f"cannot resume from {path}" in _one_error_line(err)
