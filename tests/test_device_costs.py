"""Steps timed on a device (``run --dry-run --time-steps``), the decoder MFU benchmark's formula, and the
stored GPU records of ``benchmarks/gpu-records/`` (``hacn_core.engine.device_costs``).

The timing path runs on the CPU here (a GPU is where it is meant to run; the code is the same): the
checks are equivalences and closed forms, not speeds.
"""

import json
import math
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from torch import nn

from hacn_core.__main__ import main
from hacn_core.engine import device_costs as dc
from hacn_core.engine.dry_run import (
    DeviceMeasure,
    DryRunPlan,
    GroupResult,
    Schedule,
    classification_batch,
    time_on_device,
)
from hacn_core.engine.training import TrainConfig
from hacn_core.hacn.studies import decoder as hd

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from bench_decoder_mfu import nanogpt_flops_per_token  # noqa: E402


def _plan(batch: int = 16, timing_batch: int | None = None) -> DryRunPlan:
    return DryRunPlan(key={"w": 8}, model=lambda: nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 3)),
                      batch=classification_batch((5,), 3), train=TrainConfig(epochs=2, batch_size=batch, lr=0.05),
                      n_train=64, timing_batch=timing_batch)


def test_time_on_device_trains_the_plans_model_at_the_paper_batch():
    rng = torch.get_rng_state()
    m = time_on_device(_plan(), "cpu", steps=4, warmup=2)
    assert torch.equal(torch.get_rng_state(), rng)  # the caller's random state is restored
    assert isinstance(m, DeviceMeasure) and m.batch_size == 16 and m.steps == 4 and m.warmup == 2
    assert m.seconds_per_step > 0 and m.peak_bytes == 0 and m.device.startswith("cpu")
    assert m.precision == "fp32" and not m.compiled  # precision "auto" is fp32 on the CPU
    assert m.losses[1] < m.losses[0]  # six Adam steps on one batch lower its loss
    # the first loss is the untrained model's: the same weights (seed 0) on the same batch
    torch.manual_seed(0)
    model = _plan().model()
    x, y = _plan().batch(16)
    assert m.losses[0] == pytest.approx(float(nn.functional.cross_entropy(model(x), y).detach()), rel=1e-6)
    # an accumulated step is timed one micro-batch at a time
    assert time_on_device(_plan(16, timing_batch=4), "cpu", steps=1, warmup=1).batch_size == 4


def test_device_hours_scale_with_steps_and_batch():
    """Hours of a schedule = optimizer steps x measured seconds per step x (schedule batch / timed batch)."""
    measured = DeviceMeasure("cpu", 64, 5, 1, 0.5, 0, "fp32", False, torch.__version__, (1.0, 0.5))
    sched = [Schedule(128, 12_800, 10, 100, configs=3), Schedule(64, 6_400, 10, 100, configs=1)]
    g = GroupResult({}, (5,), None, 64, tuple(sched), "auto", measured=measured)  # type: ignore[arg-type]
    assert g.measured_run_hours(sched[0]) == pytest.approx(1000 * 0.5 * 2 / 3600)
    assert g.measured_run_hours(sched[1]) == pytest.approx(1000 * 0.5 / 3600)
    assert g.measured_hours == pytest.approx(3 * 1000 / 3600 + 1000 * 0.5 / 3600)
    assert math.isnan(replace(g, measured=None).measured_run_hours(sched[0]))


def test_command_line_times_steps_and_writes_a_record(capsys, tmp_path):
    path = tmp_path / "dry.json"
    assert main(["run", "gates-mnist", "--profile", "paper", "--dry-run", "--where", "depth=50",
                 "kind=gated_resnet", "--time-steps", "2", "--json", str(path)]) == 0
    out = capsys.readouterr().out
    assert "timed on cpu" in out and "ms per step at batch 128" in out and "device-hours per run" in out
    rec = json.loads(path.read_text())
    (group,) = rec["groups"]
    assert group["measured"]["batch_size"] == 128 and group["measured"]["steps"] == 2
    assert rec["threads"] == torch.get_num_threads() and rec["wall_seconds"] > 0 and rec["code"]["git_commit"]
    # the record reads back into the appendix's table, its hours the closed form of the schedule
    (row,) = dc.profile_costs({"dry-run-gates-mnist": rec})
    steps = sum(s["configs"] * s["optimizer_steps"] for s in group["schedules"])
    assert row["measured_hours"] == pytest.approx(steps * group["measured"]["seconds_per_step"] / 3600)
    assert row["configurations"] == 3


@pytest.mark.parametrize("args, expected", [
    (["--time-steps", "2"], "--time-steps, --compiled, --json and --data go with --dry-run"),
    (["--dry-run", "--time-steps", "-1"], "--time-steps: -1 is negative"),
])
def test_command_line_time_steps_errors(capsys, args, expected):
    assert main(["run", "gates-mnist", "--profile", "paper", "--where", "depth=50", "kind=gated_resnet", *args]) == 2
    err = capsys.readouterr().err
    assert expected in err and err.count("\n") == 1


def test_nanogpt_flops_per_token_of_the_paper_decoder():
    """6N + 12 L H Q T with N = 208,540,416 (the paper's 208.54M, tied embeddings), 24 layers, 12 heads of 64,
    T = 256: 1,251,242,496 + 56,623,104 FLOPs per token."""
    config = next(c for c in hd.EXPERIMENT.runs("paper") if c["rule"] == "resnet")
    n = 208_540_416
    assert nanogpt_flops_per_token(n, 24, 12, 64, config["block_size"]) == 6 * n + 12 * 24 * 12 * 64 * 256
    assert nanogpt_flops_per_token(n, 24, 12, 64, 256) == 1_307_865_600


# ----------------------------------------------------------------------------- the stored GPU records

RECORDS = dc.load_records()
needs_records = pytest.mark.skipif(not RECORDS, reason="no stored GPU records in benchmarks/gpu-records")


@needs_records
def test_stored_dry_runs_are_whole_and_consistent():
    """Every stored dry run timed every group on a GPU; its profile's hours are the sum over its groups of
    configurations x steps x seconds per step (scaled by batch), as the table reports them."""
    rows = {r["record"]: r for r in dc.profile_costs(RECORDS)}
    dry = [k for k in RECORDS if k.startswith("dry-run-")]
    assert dry and set(rows) == set(dry)
    for name in dry:
        rec = RECORDS[name]
        assert rec["profile"] == "paper" and rec["code"]["git_commit"] and rec["provenance"]["machine"]
        hours = 0.0
        for g in rec["groups"]:
            m = g["measured"]
            assert m["device"].startswith("cuda: ") and m["steps"] >= 20 and all(map(math.isfinite, m["losses"]))
            for s in g["schedules"]:
                hours += s["configs"] * s["optimizer_steps"] * m["seconds_per_step"] * s["batch_size"] / m["batch_size"]
        assert rows[name]["measured_hours"] == pytest.approx(hours / 3600, rel=1e-9)
        assert rows[name]["ms_per_step_min"] <= rows[name]["ms_per_step_median"] <= rows[name]["ms_per_step_max"]
    groups = dc.group_costs(RECORDS["dry-run-hacn-decoder"])
    assert [g["group"] for g in groups] == ["residual_weights=False, rule=resnet", "residual_weights=False, rule=acn",
                                            "residual_weights=True, rule=hacn"]
    assert all(g["batch"] == 128 for g in groups)  # one micro-batch of Table 4's 128 x 4


@needs_records
def test_stored_decoder_mfu_follows_nanogpts_formula():
    rec = RECORDS["decoder-mfu"]
    cfg = rec["config"]
    assert (cfg["num_layers"], cfg["dim"], cfg["num_heads"], cfg["vocab_size"]) == (24, 768, 12, 50304)
    for r in rec["rows"]:
        assert r["parameters"] == 208_540_416 + (48 if r["rule"] == "hacn" else 0)  # a_i and DepthLN per layer
        per_token = nanogpt_flops_per_token(r["parameters"], 24, 12, 64, cfg["block_size"])
        tokens = rec["batch"] * cfg["block_size"] / r["seconds_per_step"]
        assert r["tokens_per_s"] == pytest.approx(tokens) and r["mfu"] == pytest.approx(per_token * tokens / rec["peak_flops"])
    table = dc.decoder_mfu(rec)
    assert {(t["rule"], t["mode"]) for t in table} == {(r, m) for r in ("resnet", "hacn") for m in ("eager", "compiled")}
    assert all(t["time_vs_resnet"] == 1.0 for t in table if t["rule"] == "resnet")


@needs_records
def test_readings_of_the_stored_records():
    lines = dc.decoder_reading(RECORDS["decoder-mfu"])
    table = {(t["rule"], t["mode"]): t for t in dc.decoder_mfu(RECORDS["decoder-mfu"])}
    for line, mode in zip(lines, ("eager", "compiled")):
        ok = table[("hacn", mode)]["time_vs_resnet"] <= 1.05 and table[("hacn", mode)]["memory_vs_resnet"] <= 1.05
        assert line.startswith(f"{mode}: ") and ("within" if ok else "outside") in line
    # Table 4's run: 240,000 steps of 4 micro-batches at the compiled H-ACN pace
    hours = 240_000 * 4 * table[("hacn", "compiled")]["ms_per_step"] / 1e3 / 3600
    assert f"takes {hours:.0f} H100-hours" in lines[-1]
    speedups = dc.compile_speedups(RECORDS)
    assert len(speedups) == 2 and all("compiled (" in s for s in speedups)
    per_op = dc.time_per_operator(RECORDS)
    assert list(per_op.values()) == sorted(per_op.values()) and all(v > 0 for v in per_op.values())
    assert "hacn-mixer-long" in per_op and not any("compiled" in k for k in per_op)


def test_timed_steps_clip_gradients_as_the_trainer_does():
    """With SGD (no momentum) and ``grad_clip`` c, one step moves the parameters by exactly lr x c when the
    gradient norm exceeds c: the timed step clips like the trainer's."""
    plan = replace(_plan(), train=TrainConfig(epochs=1, batch_size=16, lr=0.1, optimizer="sgd", momentum=0.0,
                                              weight_decay=0.0, grad_clip=1e-3))
    torch.manual_seed(0)
    before = torch.cat([p.detach().flatten() for p in plan.model().parameters()])
    moved = {}

    class Spy:
        def on_train_begin(self, state):
            pass

        def on_step_end(self, state):
            moved["after"] = torch.cat([p.detach().flatten() for p in state.model.parameters()])

    spied = replace(plan, callbacks=lambda loss: [Spy()])
    time_on_device(spied, "cpu", steps=1, warmup=0)
    assert float((moved["after"] - before).norm()) == pytest.approx(0.1 * 1e-3, rel=1e-4)


def test_the_appendix_reading_takes_every_number_from_the_records():
    """The bullets under the appendix's GPU tables: MFU, H-ACN over the ResNet, the launch-bound models' share
    of the peak and time per operator, the compile speed-up, and the hours of the decoder's and Mixer's
    profiles, each as the record functions compute it; a record left out drops what it carried; none: nothing."""
    records = dc.load_records()
    if "decoder-mfu" not in records or "dry-run-hacn-mixer-long" not in records:
        pytest.skip("no GPU records stored")
    big = ("hacn-decoder", "hacn-vit")
    first, second, third = dc.gpu_reading(records)
    mfu = {(r["rule"], r["mode"]): r for r in dc.decoder_mfu(records["decoder-mfu"])}
    assert f"{mfu[('resnet', 'eager')]['mfu_percent']:.0f}% eager" in first
    assert f"{100 * (mfu[('hacn', 'compiled')]['time_vs_resnet'] - 1):.0f}% (compiled)" in first
    launch = [us for name, us in dc.time_per_operator(records).items() if name not in big]
    assert f"took {min(launch):.0f} to {max(launch):.0f} µs" in second
    rows = dc.profile_costs(records)
    share = [r["best_fraction_of_peak"] for r in rows if not any(b in r["record"] for b in big)]
    assert f"{100 * max(share):.0f}% of the peak" in second
    speedups = [eager / compiled for _, eager, compiled in dc.compile_pairs(records)]
    assert len(speedups) == len(dc.compile_speedups(records)) == 2
    assert f"{min(speedups):.1f} to {max(speedups):.1f} times shorter" in second
    hours = {r["record"]: r["measured_hours"] for r in rows}
    assert f"takes {hours['dry-run-hacn-decoder']:,.0f} H100-hours" in third  # the records' device
    assert f"{hours['dry-run-hacn-mixer-long'] / 24:.1f} days eager" in third
    assert "compiled pace" not in " ".join(dc.gpu_reading({k: v for k, v in records.items() if "compiled" not in k}))
    assert len(dc.gpu_reading({k: v for k, v in records.items() if k != "decoder-mfu"})) == 2
    assert dc.gpu_reading({}) == []


def test_the_mfu_sweep_writes_one_row_per_micro_batch_with_nanogpts_formula(tmp_path):
    """bench_decoder_mfu.py --batches: one row per micro-batch (the CPU, 2 layers of d 64: the same code as the
    paper's decoder on a GPU), tokens/s = batch x sequence / seconds per step and MFU = nanoGPT's FLOPs per
    token x tokens/s / peak; bad values end with one line naming the option."""
    from bench_decoder_mfu import main as mfu_main

    out = tmp_path / "sweep.json"
    assert mfu_main(["--device", "cpu", "--layers", "2", "--dim", "64", "--batches", "1,2", "--rules", "resnet",
                     "--no-compile", "--steps", "1", "--warmup", "1", "--json", str(out)]) == 0
    record = json.loads(out.read_text())
    assert record["batch"] == [1, 2] and [r["batch"] for r in record["rows"]] == [1, 2]
    seq = record["config"]["block_size"]
    for r in record["rows"]:
        assert r["rule"] == "resnet" and r["compiled"] is False
        assert r["tokens_per_s"] == pytest.approx(r["batch"] * seq / r["seconds_per_step"])
        assert r["flops_per_token"] == nanogpt_flops_per_token(r["parameters"], 2, 1, 64, seq)
        assert r["mfu"] == pytest.approx(r["flops_per_token"] * r["tokens_per_s"] / record["peak_flops"])
    for bad in (["--batches", "0,2"], ["--rules", "gpt"], ["--no-compile", "--compile-only"]):
        with pytest.raises(SystemExit) as stop:
            mfu_main(["--device", "cpu", *bad])
        assert stop.value.code == 2
