"""What the paper profiles cost on a GPU, as measured there: the stored records of ``benchmarks/gpu-records/``.

Two kinds of record, each written on a lent GPU machine (``tools/gpu_checks.sh``) and stored with its
device, versions, code commit, thread count and wall time:

* ``dry-run-<experiment>[...].json``: ``python -m hacn_core run <experiment> --profile paper --dry-run
  --time-steps N --json FILE`` (:func:`hacn_core.engine.dry_run.report_record`): per group of
  configurations, FLOPs per step counted on the CPU, N training steps timed on the GPU at the paper's
  batch, and the device-hours of the whole profile at that pace beside the assumed ones;
* ``decoder-mfu.json``: ``benchmarks/bench_decoder_mfu.py``: tokens/s and model FLOPs utilisation of the
  paper's 208.54M decoder (H-ACN Table 4), eager and compiled, ResNet against H-ACN.

The functions here turn them into the tables of the performance appendix (through
:func:`hacn_core.engine.tables.house_table` in the notebook).
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from hacn_core.engine.results import REPO_ROOT

#: Where the records are stored
COSTS_DIR = REPO_ROOT / "benchmarks" / "gpu-records"


def load_records(folder: Path | str = COSTS_DIR) -> dict[str, dict[str, Any]]:
    """Every record of ``folder`` by file stem (``dry-run-hacn-vit``, ``decoder-mfu``, ...); empty when none."""
    folder = Path(folder)
    if not folder.is_dir():
        return {}
    return {f.stem: json.loads(f.read_text()) for f in sorted(folder.glob("*.json"))}


def _mode(measured: dict[str, Any]) -> str:
    return f"{measured['precision']}, {'compiled' if measured['compiled'] else 'eager'}"


def profile_costs(records: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per dry-run record: the experiment, how its steps ran, the range of milliseconds per step
    over its groups, the device-hours of the whole paper profile at the timed pace and on the assumption
    the CPU dry run makes (35% of an H100's bf16 peak or 5 us per kernel launch), and their ratio."""
    rows = []
    for stem, rec in records.items():
        if not stem.startswith("dry-run-") or not rec.get("groups"):
            continue
        timed = [g["measured"] for g in rec["groups"] if g.get("measured")]
        if len(timed) != len(rec["groups"]):
            continue  # partly timed: no whole-profile figure
        ms = [1e3 * m["seconds_per_step"] for m in timed]
        scope = rec["configs"] if rec["measured_device_hours"] is not None else 0
        label = rec["experiment"]
        if stem != f"dry-run-{rec['experiment']}" and len(rec["groups"]) == 1:  # a selection: name its model
            key = rec["groups"][0]["key"]
            label += " (" + ", ".join(str(key[k]) for k in ("rule", "num_classes") if k in key) + ")"
        rows.append({
            "experiment": label, "record": stem, "device": timed[0]["device"].removeprefix("cuda: "),
            "mode": _mode(timed[0]), "configurations": scope, "groups": len(rec["groups"]),
            "ms_per_step_min": min(ms), "ms_per_step_median": statistics.median(ms), "ms_per_step_max": max(ms),
            "measured_hours": rec["measured_device_hours"], "assumed_hours": rec["assumed_gpu_hours"],
            "measured_over_assumed": rec["measured_device_hours"] / rec["assumed_gpu_hours"],
            "best_fraction_of_peak": max(g["measured"]["fraction_of_h100_bf16_peak"] for g in rec["groups"]),
        })
    return rows


def group_costs(record: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per group of one dry-run record: its distinguishing key entries, parameters, batch,
    milliseconds per step, examples/s, sustained TFLOP/s and peak GPU memory."""
    groups = record["groups"]
    shared = {k for k in groups[0]["key"] if all(g["key"].get(k) == groups[0]["key"][k] for g in groups)}
    rows = []
    for g in groups:
        m = g["measured"]
        own = ", ".join(f"{k}={v}" for k, v in g["key"].items() if k not in shared)
        rows.append({"group": own or "(one model)", "configurations": sum(s["configs"] for s in g["schedules"]),
                     "parameters": g["parameters"], "batch": m["batch_size"],
                     "ms_per_step": 1e3 * m["seconds_per_step"], "examples_per_s": m["batch_size"] / m["seconds_per_step"],
                     "tflops": g["measured"]["flops_per_s"] / 1e12, "peak_gib": m["peak_bytes"] / 2**30,
                     "hours": g["measured"]["device_hours"], "mode": _mode(m)})
    return rows


def decoder_mfu(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows of ``bench_decoder_mfu.py``'s record: rule, eager or compiled, ms per step, tokens/s, MFU,
    peak memory; each with its ratio to the ResNet in the same mode."""
    rows = record["rows"]
    out = []
    for r in rows:
        base = next(b for b in rows if b["rule"] == "resnet" and b["compiled"] == r["compiled"])
        out.append({"rule": r["rule"], "mode": "compiled" if r["compiled"] else "eager",
                    "ms_per_step": 1e3 * r["seconds_per_step"], "tokens_per_s": r["tokens_per_s"],
                    "mfu_percent": 100 * r["mfu"], "peak_gib": r["peak_bytes"] / 2**30,
                    "time_vs_resnet": r["seconds_per_step"] / base["seconds_per_step"],
                    "memory_vs_resnet": r["peak_bytes"] / base["peak_bytes"]})
    return out


def decoder_reading(record: dict[str, Any], target: float = 1.05) -> list[str]:
    """Sentences on the decoder record: H-ACN against the ResNet per mode (the target of at most
    ``target`` in time and peak memory), what compiling gains, and the hours of one Table 4 run."""
    get = {(r["rule"], r["mode"]): r for r in decoder_mfu(record)}
    lines = []
    for mode in ("eager", "compiled"):
        r = get[("hacn", mode)]
        verdict = "within" if r["time_vs_resnet"] <= target and r["memory_vs_resnet"] <= target else "outside"
        lines.append(f"{mode}: H-ACN's step costs {r['time_vs_resnet']:.3f}x the ResNet's time and "
                     f"{r['memory_vs_resnet']:.3f}x its peak memory: {verdict} the target of {target:.2f}x")
    speed = get[("resnet", "compiled")]["tokens_per_s"] / get[("resnet", "eager")]["tokens_per_s"]
    one_run = 240_000 * 4 * get[("hacn", "compiled")]["ms_per_step"] / 1e3 / 3600  # Table 4: 240k steps x 4
    lines.append(f"compiling speeds the ResNet up {speed:.2f}x; at the compiled pace one H-ACN run of Table 4's "
                 f"240,000 steps of 4 micro-batches takes {one_run:.0f} H100-hours of training steps")
    return lines


def compile_pairs(records: dict[str, dict[str, Any]], experiment: str = "hacn-mixer-long"
                  ) -> list[tuple[dict[str, Any], float, float]]:
    """Per group of each compiled record of ``experiment`` that the eager record also timed: its key and
    seconds per step eager and compiled."""
    eager = records.get(f"dry-run-{experiment}")
    pairs = []
    for name, rec in sorted(records.items()):
        if not (name.startswith(f"dry-run-{experiment}-compiled") and eager):
            continue
        for g in rec["groups"]:
            match = next((e for e in eager["groups"] if e["key"] == g["key"]), None)
            if match is not None:
                pairs.append((g["key"], match["measured"]["seconds_per_step"], g["measured"]["seconds_per_step"]))
    return pairs


def compile_speedups(records: dict[str, dict[str, Any]], experiment: str = "hacn-mixer-long") -> list[str]:
    """Per compiled record of ``experiment``: its step eager (the eager record's group with the same key)
    against compiled."""
    return [f"{experiment} {key.get('rule')}: {1e3 * a:.1f} ms per step eager, {1e3 * b:.1f} compiled ({a / b:.1f}x)"
            for key, a, b in compile_pairs(records, experiment)]


def time_per_operator(records: dict[str, dict[str, Any]]) -> dict[str, float]:
    """Per eager dry-run record: the median over its models of seconds per step / ATen operators of forward
    and backward (counted in the CPU step), in microseconds: the launch cost when a model is small."""
    out = {}
    for name, rec in records.items():
        if name.startswith("dry-run-") and "compiled" not in name and rec.get("groups"):
            us = [1e6 * g["measured"]["seconds_per_step"] / g["cpu_step"]["ops"] for g in rec["groups"]]
            out[rec["experiment"]] = statistics.median(us)
    return dict(sorted(out.items(), key=lambda kv: kv[1]))


def gpu_reading(records: dict[str, dict[str, Any]]) -> list[str]:
    """The appendix's reading of the GPU records, as Markdown bullets with every number taken from them:
    what the decoder reaches (MFU, H-ACN against the ResNet), how far the small models are from the peak and
    why (the time per kernel launch against the dry run's assumed 5 µs, what compiling gains), and what the
    paper profiles mean for a reader with one GPU. Empty without records."""
    costs = {row["record"]: row for row in profile_costs(records)}
    mfu = records.get("decoder-mfu")
    lines = []
    if mfu:
        get = {(r["rule"], r["mode"]): r for r in decoder_mfu(mfu)}
        eager, compiled = get[("resnet", "eager")], get[("resnet", "compiled")]
        h_eager, h_compiled = get[("hacn", "eager")], get[("hacn", "compiled")]
        memory = max(h_eager["memory_vs_resnet"], h_compiled["memory_vs_resnet"])
        lines.append(
            f"*Only the decoder keeps the GPU busy.* The 208.54M decoder (the ResNet) reaches an MFU of "
            f"{eager['mfu_percent']:.0f}% eager and {compiled['mfu_percent']:.0f}% compiled (nanoGPT's formula, over "
            f"the {mfu['peak_note']}). "
            f"The H-ACN rule's step costs {100 * (h_compiled['time_vs_resnet'] - 1):.0f}% (compiled) and "
            f"{100 * (h_eager['time_vs_resnet'] - 1):.0f}% (eager) more than the ResNet's: DepthLN and the residual "
            f"weights add small element-wise operations at every layer, and compiling fuses part of them. Its peak memory is "
            f"{memory:.3f}x the ResNet's: the rule adds a few scalars and per-layer tensors.")
    big_models = ("hacn-decoder", "hacn-vit")  # the two that fill a good part of the GPU
    small = {k: r for k, r in costs.items() if not any(b in k for b in big_models)}
    launch = {k: us for k, us in time_per_operator(records).items() if k not in big_models}
    speedups = [eager / compiled for _, eager, compiled in compile_pairs(records)]
    if small and launch:
        share = {r["experiment"]: r["best_fraction_of_peak"] for r in small.values()}
        over = [r["measured_over_assumed"] for r in small.values() if "compiled" not in r["mode"]]
        mixer_ops = statistics.median(g["cpu_step"]["ops"] for g in records["dry-run-hacn-mixer-long"]["groups"]) \
            if "dry-run-hacn-mixer-long" in records else None
        line = (f"*The small models are bound by kernel launches.* Their best model reaches "
                f"{100 * min(share.values()):.2f}% to {100 * max(share.values()):.0f}% of the peak "
                f"({min(share, key=share.get)} to {max(share, key=share.get)}).")
        if mixer_ops is not None:
            line += f" A step of the paper's Mixer is {mixer_ops:,.0f} ATen operators of forward and backward,"
        line += (f" and one took {min(launch.values()):.0f} to {max(launch.values()):.0f} µs (the median of each "
                 f"profile's models), not the 5 µs the dry run assumes, so the measured hours are "
                 f"{min(over):.1f} to {max(over):.1f} times the assumed ones.")
        if speedups:
            line += (f" Compiling fuses many of those kernels: the Mixer's step gets {min(speedups):.1f} to "
                     f"{max(speedups):.1f} times shorter.")
        line += (" Stacking seeds into one batched model loses on the 2-core CPU "
                 "(`benchmarks/bench_seed_stacking.py`); on a GPU it is the other lever to measure.")
        lines.append(line)
    big = [costs.get(f"dry-run-{e}") for e in big_models]
    mixer = costs.get("dry-run-hacn-mixer-long")
    if all(big) and mixer:
        dec, vit = (r["measured_hours"] for r in big)
        gpu = next((k for k in ("H100", "H200", "A100") if k in big[0]["device"]), "GPU")  # the records' device
        line = (f"*What that means for a reader with one GPU.* At the measured pace the decoder's paper profile "
                f"({big[0]['configurations']} runs) takes {dec:,.0f} {gpu}-hours of training steps and the ViT's "
                f"({big[1]['configurations']} runs) {vit:,.0f}, {dec / 24:.0f} and {vit / 24:.0f} days on one {gpu}. "
                f"The Mixer's {mixer['configurations']} runs take {mixer['measured_hours'] / 24:.1f} days eager")
        line += (f", {mixer['measured_hours'] / max(speedups) / 24:.1f} to {mixer['measured_hours'] / min(speedups) / 24:.1f} "
                 "at the compiled pace." if speedups else ".")
        line += (" The book's chapters train offline analogues on the CPU instead; each chapter says why its budget "
                 "is what it is.")
        lines.append(line)
    return lines
