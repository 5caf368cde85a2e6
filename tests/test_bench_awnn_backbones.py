"""benchmarks/bench_awnn_backbones.py: AWNN's adaptive MLPs inside the backbones against fixed MLPs of the same
widths, per step, on the CPU here and on a GPU in tools/gpu_checks.sh (with the host reads counted there)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_awnn_backbones", ROOT / "benchmarks" / "bench_awnn_backbones.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_record_holds_each_arms_median_its_ratio_and_the_widths_it_ran_at(bench, tmp_path, capsys):
    """On the CPU: one record per case with the adaptive and fixed arms' medians, ratios to the fixed arm
    (1 for itself), no host-read count (nothing waits on a CPU), the fixed MLPs at the adaptive ones' widths;
    the file written is the record returned."""
    threads = torch.get_num_threads()
    try:
        record = bench.main(["--only", "gin", "--reps", "2", "--steps", "1", "--no-naive", "--json",
                             str(tmp_path / "awnn.json")])
    finally:
        torch.set_num_threads(threads)
    assert json.loads((tmp_path / "awnn.json").read_text()) == json.loads(json.dumps(record))
    assert record["device"] == "cpu" and record["threads"] == 1 and record["reps"] == 2
    gin = record["cases"]["gin"]
    assert set(gin["arms"]) == {"adaptive", "fixed"}
    assert gin["arms"]["fixed"]["ratio_to_fixed"] == 1.0
    adaptive = gin["arms"]["adaptive"]
    assert adaptive["ratio_to_fixed"] == pytest.approx(adaptive["ms_per_step"] / gin["arms"]["fixed"]["ms_per_step"])
    assert adaptive["host_reads_per_step"] is None
    # the fixed arm follows the widths before every block; one step later they differ by a few neurons at most
    assert len(gin["widths"]["fixed"]) == len(gin["widths"]["adaptive"]) == 3
    assert all(abs(f - a) <= 3 for f, a in zip(gin["widths"]["fixed"], gin["widths"]["adaptive"]))
    out = capsys.readouterr().out
    assert "adaptive" in out and "target <= 1.15" in out


def test_bad_options_end_with_one_line_naming_the_option(bench, capsys):
    for argv, expected in ((["--only", "vgg"], "--only: 'vgg' is not a case; allowed: resnet20, gin, transformer"),
                           (["--reps", "0"], "both must be at least 1")):
        with pytest.raises(SystemExit) as stop:
            bench.main(argv)
        assert stop.value.code == 2 and expected in capsys.readouterr().err
    if not torch.cuda.is_available():
        with pytest.raises(SystemExit):
            bench.main(["--device", "cuda"])
        assert "--device cuda: no CUDA device is available here" in capsys.readouterr().err


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_host_reads_count_the_synchronising_operations_of_a_step(bench):
    """On a GPU: two .item() calls are two host reads, queued arithmetic none; the adaptive GIN reads the
    host at most once a step (its widths' update reads all rates at once)."""
    x = torch.ones(4, device="cuda")
    assert bench.host_reads(lambda: (x * 2).sum().item() + x.max().item()) == 2
    assert bench.host_reads(lambda: x.mul_(1.0)) == 0
    record = bench.main(["--only", "gin", "--reps", "1", "--steps", "1", "--no-naive", "--device", "cuda"])
    assert record["cases"]["gin"]["arms"]["adaptive"]["host_reads_per_step"] <= 1
