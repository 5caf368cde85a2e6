"""Per-step training cost of an AWNN MLP against a fixed MLP of the same widths (AWNN Sec. 3.3).

One interleaved run over the cells of :mod:`hacn_core.awnn.studies.cost_cells`: the
objectives the book trains (``likelihood``: Eq. 13 without priors; ``elbo``: with the
Gaussian weight prior of the Table 1 runs and the rate prior of Sec. 5.3), 1 and 2 hidden
layers, the ``adapting`` phase (Algorithm 1 as is) and the ``steady`` one (widths frozen),
starting widths 30, 100 and 400 - each against a plain ``nn.Linear`` MLP built at the
AWNN's current widths (``fixed``) and the same MLP trained by Adam with the weight decay
equivalent to the weight prior (``fixed+wd``). Printed: medians over repetitions of the
per-repetition ratios of CPU times (one thread, SpiralHard, batch 128, Adam lr 0.01).
Target: ratio <= 1.10 in every cell (``TARGET_RATIO``); ``elbo`` cells are read against
``fixed+wd``, ``likelihood`` cells against ``fixed``.

``--save FILE`` writes the rows as JSON; ``--before FILE`` prints an earlier run's ratio
beside each cell. ``--stored-measurement`` runs instead the measurement of the stored
experiment ``awnn-step-cost`` (:mod:`hacn_core.awnn.studies.cost`: the loss without
priors, 2 layers from 231 neurons, with the Python node and the naive rebuild).

    python benchmarks/bench_awnn.py [--quick] [--reps 9] [--steps 12] [--widths 30,100,400] [--layers 1,2]
                                    [--objectives likelihood,elbo] [--phases adapting,steady]
                                    [--options default,fused_priors]
                                    [--save rows.json] [--before rows.json] [--stored-measurement]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

import pandas as pd  # noqa: E402

from hacn_core.awnn.studies.cost_cells import OBJECTIVES, PHASES, cells_table, measure_cells  # noqa: E402


def _ints(text: str) -> list[int]:
    return [int(v) for v in text.split(",")]


def stored_measurement() -> None:
    from hacn_core.awnn.studies.cost import PHASES as COST_PHASES, measure_step_costs, step_cost_config
    from hacn_core.awnn.studies.cost_report import measurement_text

    for phase in COST_PHASES:
        out = measure_step_costs(step_cost_config("book", phase))
        print(measurement_text(out["metrics"], phase))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="5 repetitions x 8 steps")
    ap.add_argument("--reps", type=int, default=None)
    ap.add_argument("--steps", type=int, default=None)
    ap.add_argument("--widths", type=_ints, default=[30, 100, 400])
    ap.add_argument("--layers", type=_ints, default=[1, 2])
    ap.add_argument("--objectives", default=",".join(OBJECTIVES))
    ap.add_argument("--phases", default=",".join(PHASES))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--options", default="default",
                    help="AWNN step options timed side by side (cost_cells.OPTIONS): default,fused_priors")
    ap.add_argument("--save", type=Path, default=None, help="write the rows as JSON")
    ap.add_argument("--before", type=Path, default=None, help="rows of an earlier run, printed beside")
    ap.add_argument("--stored-measurement", action="store_true", help="the awnn-step-cost measurement instead")
    args = ap.parse_args()
    if args.stored_measurement:
        stored_measurement()
        return
    reps = args.reps or (5 if args.quick else 9)
    steps = args.steps or (8 if args.quick else 12)
    t0 = time.perf_counter()
    rows = measure_cells(args.widths, args.layers, args.objectives.split(","), args.phases.split(","),
                         reps=reps, steps=steps, seed=args.seed, options=tuple(args.options.split(",")))
    before = json.loads(args.before.read_text()) if args.before else None
    if args.save:
        args.save.write_text(json.dumps(rows, indent=1))
    print(f"SpiralHard, batch 128, ReLU6, Adam lr 0.01, one CPU thread, {rows[0]['node']} node; "
          f"{reps} interleaved repetitions x {steps} steps per cell; {time.perf_counter() - t0:.0f} s")
    with pd.option_context("display.width", 200, "display.max_columns", 20, "display.float_format", "{:.3f}".format):
        print(cells_table(rows, before))


if __name__ == "__main__":
    main()
