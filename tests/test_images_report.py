"""Chapter 5's report on the image runs (``awnn-images``): AWNN Table 1's image rows, Table 4, Fig. 9.

Built on small synthetic RunResults with hand-chosen accuracies and widths: the coverage
table counts the stored seeds per cell (execution entries aside), model selection picks
the fixed width with the best mean validation accuracy, Table 1's cells are the mean (std)
of the chosen runs beside the paper's printed values, the Fig. 9 verdict follows the 95%
intervals, the figure draws the mean width per epoch and Table 1's MNIST values, and the
budget is the measured per-step cost times the steps. The shared verdict helpers of
:mod:`hacn_core.engine.stats` are checked on known intervals.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from hacn_core.awnn.studies import images as im
from hacn_core.awnn.studies import images_report as imr
from hacn_core.awnn.studies.common import paper_printed
from hacn_core.engine.results import RunResult, config_hash
from hacn_core.engine.stats import Estimate, sign_verdict, signed, within_verdict

STEPS = math.ceil(53_000 / 128)  # optimizer steps per epoch of the book's runs (415)


def _run(dataset: str, head: str, width: int, seed: int, *, val: float, test: float, learned: int | None = None,
         cpu_s: float = 100.0, threads: int | None = None) -> RunResult:
    """A stored book run: its configuration from the study's book profile, metrics and curves made up."""
    config = next(c for c in im.book_configs() if (c["dataset"], c["head"], c["head_width"], c["seed"])
                  == (dataset, head, width, seed))
    if threads is not None:
        config = config | {"threads": threads}  # as run_or_load files a run at a non-default thread count
    final = learned if learned is not None else width
    trace = [116 + (final - 116) * i // 4 for i in range(5)] if head == "adaptive" else [0] * 5
    curves = {"record_epoch": [0, 1, 2, 3, 4], "test_acc": [0.1, test - 0.03, test - 0.02, test - 0.01, test],
              "val_acc": [0.1, val - 0.03, val - 0.02, val - 0.01, val],
              "trace_step": [0, STEPS, 2 * STEPS, 3 * STEPS, 4 * STEPS], "trace_width": trace}
    metrics = {"test_acc": test, "val_acc": val, "best_epoch": 4, "width": final, "final_width": final,
               "start_width": trace[0], "n_train": 53_000, "cpu_s": cpu_s}
    return RunResult(experiment=im.EXPERIMENT_ID, config=config, config_hash=config_hash(config), seed=seed,
                     metrics=metrics, curves=curves, profile="book")


def _mnist() -> list[RunResult]:
    return [_run("MNIST", "fixed", 0, 0, val=0.95, test=0.90), _run("MNIST", "fixed", 0, 1, val=0.96, test=0.91),
            _run("MNIST", "fixed", 32, 0, val=0.97, test=0.92), _run("MNIST", "fixed", 32, 1, val=0.98, test=0.94),
            _run("MNIST", "adaptive", 0, 0, val=0.97, test=0.93, learned=20),
            _run("MNIST", "adaptive", 0, 1, val=0.98, test=0.95, learned=30)]


# --------------------------------------------------------------------------------- the shared helpers


def test_verdicts_read_the_interval_of_a_difference():
    assert sign_verdict(Estimate(1.0, 0.5, 3)) is True
    assert sign_verdict(Estimate(-1.0, 0.5, 3)) is False
    assert sign_verdict(Estimate(0.2, 0.5, 3)) is None
    assert sign_verdict(Estimate(5.0, float("nan"), 1)) is None  # one value: no interval
    # "not worse by more than 0.005": the line moves to -0.005 ([-1.6, 0.0] points straddles -0.5 points)
    assert sign_verdict(Estimate(-0.008, 0.008, 3), -0.005) is None
    assert sign_verdict(Estimate(-0.002, 0.002, 3), -0.005) is True
    assert sign_verdict(Estimate(-0.012, 0.004, 3), -0.005) is False
    assert within_verdict(Estimate(0.1, 0.3, 3), 0.5) is True  # [-0.2, 0.4] inside [-0.5, 0.5]
    assert within_verdict(Estimate(1.0, 0.3, 3), 0.5) is False  # [0.7, 1.3] wholly outside
    assert within_verdict(Estimate(0.4, 0.3, 3), 0.5) is None  # [0.1, 0.7] straddles 0.5
    assert within_verdict(Estimate(0.0, float("nan"), 1), 0.5) is None
    with pytest.raises(ValueError, match="margin"):
        within_verdict(Estimate(0.0, 0.1, 3), 0.0)
    assert signed(Estimate(0.0123, 0.0046, 3), 100) == "+1.2 ± 0.5"
    assert signed(Estimate(-0.5, float("nan"), 1), digits=2) == "-0.50 (n=1)"


def test_paper_printed_is_the_number_or_the_text_the_note_quotes():
    assert paper_printed("awnn/table1/mnist-fixed-width") == "Linear"  # Table 1 prints "Linear" (width 0)
    assert paper_printed("awnn/table1/nci1-fixed-width") == "(96-320)"
    assert paper_printed("awnn/table1/cifar100-fixed-width") == "256"
    assert paper_printed("awnn/table1/mnist-awnn-width") == "19.4 (4.8)"
    with pytest.raises(ValueError, match="quotes no printed text"):
        paper_printed("awnn/fig9/image-width-vs-difficulty")


# --------------------------------------------------------------------------------- coverage and Table 1


def test_coverage_counts_the_stored_seeds_of_every_cell():
    stored = [_run("MNIST", "adaptive", 0, 0, val=0.9, test=0.9, learned=20),
              _run("MNIST", "adaptive", 0, 1, val=0.9, test=0.9, learned=20, threads=2),  # filed with threads
              _run("MNIST", "fixed", 0, 1, val=0.9, test=0.9)]
    other = _run("MNIST", "fixed", 32, 0, val=0.9, test=0.9)
    other.config = other.config | {"epochs": 5}  # not a configuration of the profile: never counted
    table = imr.coverage_table(im.book_configs(), stored + [other])
    assert len(table) == 12 and "runs stored" not in table  # 2 datasets x 6 arms; one run per seed
    row = {(r["dataset"], r["classifier"]): r for r in table.to_dict("records")}
    assert row["MNIST", "AWNN"] | {} == {"dataset": "MNIST", "classifier": "AWNN", "seeds planned": 5,
                                         "seeds stored": 2, "stored": "0, 1"}
    assert (row["MNIST", "fixed, linear"]["seeds stored"], row["MNIST", "fixed, linear"]["stored"]) == (1, "1")
    assert row["MNIST", "fixed, 32 wide"]["stored"] == "none"
    assert row["Fashion-MNIST", "fixed, 512 wide"]["seeds planned"] == 2


def test_table1_selects_the_fixed_width_on_validation_and_reads_the_paper():
    runs = _mnist()
    assert imr.selected_fixed_width(runs, "MNIST") == 32  # mean validation 0.975 against 0.955
    assert imr.selected_fixed_width(runs, "FashionMNIST") is None
    tie = [_run("MNIST", "fixed", w, 0, val=0.9, test=0.9) for w in (128, 32)]
    assert imr.selected_fixed_width(tie, "MNIST") == 32  # a tie goes to the narrower head
    t = imr.table1(runs)
    row = {(r["dataset"], r["quantity"]): r for r in t.to_dict("records")}
    acc, width = row["MNIST", "test accuracy (%)"], row["MNIST", "classifier width"]
    assert acc["fixed (ours)"] == f"93.0 ({math.sqrt(2):.1f})" and acc["AWNN (ours)"] == "94.0 (1.4)"
    assert (acc["fixed (paper)"], acc["AWNN (paper)"]) == ("99.6 (0.1)", "99.7 (0)")
    assert (width["fixed (ours)"], width["fixed (paper)"]) == ("32", "Linear")
    assert width["AWNN (ours)"] == f"25.0 ({math.sqrt(50):.1f})" and width["AWNN (paper)"] == "19.4 (4.8)"
    assert acc["seeds (fixed; AWNN)"] == "0, 1; 0, 1"
    fashion = row["Fashion-MNIST", "test accuracy (%)"]
    assert pd.isna(fashion["fixed (ours)"]) and fashion["AWNN (paper)"] == "not in the paper"
    cifar = row["CIFAR100", "classifier width"]
    assert cifar["AWNN (ours)"] == imr.NEEDS_DOWNLOAD and cifar["fixed (paper)"] == "256"
    # every Table 4 width and the adaptive head, the selected one marked; a width with no run has no accuracy
    f4 = imr.fixed_width_table(runs)
    assert list(f4["classifier"]) == ["AWNN", "fixed, linear", "fixed, 32 wide (selected)", "fixed, 128 wide",
                                      "fixed, 256 wide", "fixed, 512 wide"]
    assert f4["validation acc (%)"].iloc[2] == "97.5 (0.7)" and pd.isna(f4["test acc (%)"].iloc[3])


# --------------------------------------------------------------------------------- Fig. 9


def _difficulty(m_widths, f_widths, m_acc=(0.99, 0.98, 0.99), f_acc=(0.90, 0.91, 0.89)) -> list[RunResult]:
    out = []
    for dataset, widths, accs in (("MNIST", m_widths, m_acc), ("FashionMNIST", f_widths, f_acc)):
        for seed, (w, a) in enumerate(zip(widths, accs)):
            run = _run(dataset, "adaptive", 0, min(seed, 1), val=a, test=a, learned=w)
            run.seed = seed  # a third seed beyond the book's two
            out.append(run)
    return out


def test_fig9_verdict_follows_the_intervals():
    grows = _difficulty([20, 22, 21], [40, 44, 42])
    text = imr.difficulty_reading(grows)
    assert text.startswith("Fashion-MNIST is the harder task here") and "**holds**" in text
    assert "95% Welch interval" in text and "+21.0 ±" in text  # 42 - 21
    assert list(imr.claims(grows)["holds"]) == [True]  # one claim: no fixed runs to compare with
    shrinks = _difficulty([40, 44, 42], [20, 22, 21])
    assert "**does not hold**" in imr.difficulty_reading(shrinks) and list(imr.claims(shrinks)["holds"]) == [False]
    same_task = _difficulty([20, 22, 21], [40, 44, 42], f_acc=(0.99, 0.98, 0.99))  # not harder: no verdict
    assert "not measurably harder" in imr.difficulty_reading(same_task)
    assert "**cannot be told**" in imr.difficulty_reading(same_task)
    one_seed = _difficulty([20], [40], m_acc=(0.99,), f_acc=(0.90,))
    assert "one seed each, so no interval" in imr.difficulty_reading(one_seed)
    assert "waits for them" in imr.difficulty_reading(grows[:3])  # MNIST only
    table = imr.width_by_difficulty(grows)
    ours = table[table["source"] == "ours"].set_index("dataset")
    assert ours.loc["Fashion-MNIST", "learned width"] == "42.0 (2.0)" and ours.loc["MNIST", "runs"] == 3
    assert list(table[table["source"] != "ours"]["learned width"]) == ["19.4 (4.8)", "80.1 (12.4)", "161.9 (57.8)"]


def test_accuracy_claim_matches_within_the_stated_points():
    close = _mnist()
    c = imr.claims(close).set_index("claim")
    claim = "AWNN matches the fixed ResNet-20's accuracy on MNIST"
    # AWNN 93, 95 against the selected 32-wide 92, 94: +1.0 points, interval far wider than ±0.5 with 2 seeds
    assert c.loc[claim, "ours"].startswith("AWNN − fixed, 32 wide: +1.00 ±") and c.loc[claim, "holds"] is None


def test_fig9_draws_the_mean_width_per_epoch_and_tables_mnist_values():
    import matplotlib.pyplot as plt

    runs = _mnist()
    fig = imr.plot_fig9(runs)
    left, right = fig.axes[:2]
    mnist = next(line for line in left.get_lines() if line.get_label() == "MNIST")
    np.testing.assert_allclose(mnist.get_xdata(), [0, 1, 2, 3, 4])  # trace steps / 415 steps per epoch
    traces = np.array([[116 + (w - 116) * i // 4 for i in range(5)] for w in (20, 30)])
    np.testing.assert_allclose(mnist.get_ydata(), traces.mean(axis=0))
    paper = [float(line.get_ydata()[0]) for ax in (left, right) for line in ax.get_lines()
             if line.get_marker() == "D" and len(line.get_xdata()) == 1]
    assert paper == [19.4, 99.7]  # Table 1's MNIST AWNN width and accuracy
    steps = sorted(float(line.get_xdata()[0]) for line in left.get_lines() if line.get_linestyle() == ":")
    assert steps == [1.0, 2.0, 3.0]  # the book's learning-rate steps
    dashed = [line for line in right.get_lines() if line.get_linestyle() == "--" and len(line.get_xdata()) == 5]
    np.testing.assert_allclose(dashed[0].get_ydata()[-1], 93.0)  # the selected fixed head's final mean
    plt.close(fig)


# --------------------------------------------------------------------------------- setting and cost


def test_budget_is_the_measured_step_cost_times_the_steps():
    b = imr.budget("book")
    epoch_s = STEPS * im.STEP_S + 17 * im.EVAL_S_PER_1000  # 415 steps, 7,000 + 10,000 images evaluated
    assert (b["steps_per_epoch"], b["eval_images"], b["runs"], b["epochs"]) == (415, 17_000, 15, 4)
    assert b["epoch_s"] == pytest.approx(epoch_s) and b["cpu_h"] == pytest.approx(15 * 4 * epoch_s / 3600)
    smoke = imr.budget("smoke")
    assert (smoke["steps_per_epoch"], smoke["eval_images"]) == (2, 128)  # 128 images in batches of 64; 64 + 64 evaluated
    assert imr.budget("paper")["runs"] == 60  # MNIST: 6 arms x 10 seeds
    assert f"{2 * b['cpu_h']:.1f} CPU-hours" in imr.budget_reading()
    setting = imr.setting_table().set_index("what")
    assert setting.loc["schedule", "this book"] == "4 epochs, learning rate x0.1 at epochs 1, 2, 3"
    assert setting.loc["optimiser", "this book"] == "the same"


def test_cost_table_divides_cpu_time_by_the_steps_and_keeps_devices_apart():
    runs = [_run("MNIST", "fixed", 0, s, val=0.9, test=0.9, cpu_s=4 * STEPS * c) for s, c in ((0, 0.5), (1, 0.7))]
    for r in runs:
        r.provenance = {"device": "cpu: Some Xeon (2 cores, 1 torch threads)", "threads": 1, "wall_time_s": 1e6}
    gpu = _run("MNIST", "fixed", 0, 0, val=0.9, test=0.9, cpu_s=1.0)
    gpu.provenance = {"device": "cuda: NVIDIA H100 80GB HBM3", "threads": 1, "wall_time_s": 4 * STEPS * 0.02}
    table = imr.cost_table(runs + [gpu]).set_index("device")
    cpu = table.loc["CPU, 2 cores, 1 thread"]  # process time: the wall time (paused, shared) is not the cost
    assert (cpu["runs"], cpu["time measured"], cpu["ms per step"]) == (2, "process", 600.0)
    assert cpu["device-hours"] == round(4 * STEPS * 1.2 / 3600, 2)
    h100 = table.loc["H100"]  # wall time: what the GPU was held for
    assert (h100["runs"], h100["time measured"], h100["ms per step"]) == (1, "wall", 20.0)
