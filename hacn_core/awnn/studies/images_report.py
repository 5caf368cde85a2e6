"""What AWNN chapter 5 shows of the image runs: Table 1's image rows, Table 4's fixed widths, Fig. 9.

The study (:mod:`hacn_core.awnn.studies.images`, ``awnn-images``) trains ResNet-20 with a
classifier on its pooled features that is fixed (Table 4's hidden widths 0, 32, 128, 256,
512; 0 is a linear classifier) or AWNN's adaptive MLP of one LeakyReLU hidden layer
(Eqs. 11-14, width ``D`` the ``k = 0.9`` quantile of ``f(j; nu)``). Each run stores the test
accuracy and the classifier's width at the epoch of best validation accuracy (Sec. 4).
This module reads those runs; it trains nothing:

* :func:`coverage_table`: which arms and seeds are stored (the book's runs arrive over
  several background sessions);
* :func:`selected_fixed_width`: the fixed width model selection picks (App. C.2's grid
  search over Table 4's widths: the best mean validation accuracy over seeds);
* :func:`table1` (Table 1's MNIST, CIFAR10 and CIFAR100 rows beside ours, Fashion-MNIST
  ours only) and :func:`fixed_width_table` (every Table 4 width beside the adaptive head);
* :func:`width_by_difficulty`, :func:`difficulty_reading` and :func:`claims`: App. E's
  "the learned number of neurons ... increases together with the task difficulty"
  (Fig. 9), judged on MNIST against Fashion-MNIST with 95% Welch intervals;
* :func:`plot_fig9` (Fig. 9: width and test accuracy over training);
* :func:`setting_table`, :func:`budget_reading` (the book's budget from the study's
  measured per-step cost) and :func:`cost_table` (CPU time of the stored runs).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from hacn_core.awnn import paper_items, quantile_width
from hacn_core.awnn.studies import images as im
from hacn_core.awnn.studies.common import paper_printed, paper_text
from hacn_core.engine.results import RunResult
from hacn_core.engine.stats import difference, estimate, sign_verdict, signed, within_verdict
from hacn_core.engine.tables import ClaimTable, device_label, mean_std
from hacn_core.engine.tables import coverage_table as _coverage

DATASET_LABELS: dict[str, str] = {"MNIST": "MNIST", "FashionMNIST": "Fashion-MNIST", "CIFAR10": "CIFAR10",
                                  "CIFAR100": "CIFAR100"}
#: Table 1's item slug of each dataset the paper runs (Fashion-MNIST is ours only)
PAPER_SLUGS: dict[str, str] = {"MNIST": "mnist", "CIFAR10": "cifar10", "CIFAR100": "cifar100"}
#: datasets this machine cannot read offline: the paper profile downloads them
DOWNLOAD: tuple[str, ...] = tuple(d for d in im.DATASETS if d not in im.BOOK_DATASETS)
#: "AWNN matches the fixed network": the 95% interval of the accuracy difference lies within this many points
#: (Table 1's image rows differ by at most 0.1 point with stds of 0.0-0.4 on MNIST and CIFAR10)
MATCH_POINTS = 0.5
NEEDS_DOWNLOAD = "needs a download (paper profile)"


def arm_label(head: str, width: int) -> str:
    """``AWNN``, ``fixed, linear`` (Table 1's "Linear": width 0) or ``fixed, 128 wide``."""
    if head == "adaptive":
        return "AWNN"
    return "fixed, linear" if width == 0 else f"fixed, {width} wide"


def arm_runs(results: Sequence[RunResult], dataset: str, head: str, width: int | None = None) -> list[RunResult]:
    """The runs of one dataset and head (and fixed width), by seed."""
    runs = [r for r in results if r.config["dataset"] == dataset and r.config["head"] == head
            and (width is None or r.config["head_width"] == width)]
    return sorted(runs, key=lambda r: r.seed)


def coverage_table(planned: Sequence[dict[str, Any]], results: Sequence[RunResult]):
    """Per dataset and classifier: the seeds planned and the seeds stored."""
    return _coverage(planned, results, lambda c: {"dataset": DATASET_LABELS[c["dataset"]],
                                                  "classifier": arm_label(c["head"], c["head_width"])})


def _metric(runs: Sequence[RunResult], key: str, scale: float = 1.0) -> np.ndarray:
    return scale * np.asarray([r.metrics[key] for r in runs], dtype=float)


def selected_fixed_width(results: Sequence[RunResult], dataset: str) -> int | None:
    """The fixed classifier width with the best mean validation accuracy over its stored seeds (App. C.2's
    model selection over Table 4's widths; ties: the narrower); ``None`` with no fixed run stored."""
    widths = sorted({r.config["head_width"] for r in arm_runs(results, dataset, "fixed")})
    if not widths:
        return None
    return max(widths, key=lambda w: _metric(arm_runs(results, dataset, "fixed", w), "val_acc").mean())


def _cell(runs: Sequence[RunResult], key: str, scale: float = 1.0) -> str | None:
    """``mean (std)`` over the runs, ``None`` (the table's "–") with none stored."""
    return mean_std(_metric(runs, key, scale)) if runs else None


def _seeds(runs: Sequence[RunResult]) -> str:
    return ", ".join(str(r.seed) for r in runs) or "none"


def table1(results: Sequence[RunResult]):
    """Table 1's image rows, ours (mean (std) over seeds) beside the paper's.

    Per dataset two rows, test accuracy (%) and the classifier's hidden width, at the
    best validation epoch. "fixed (ours)" is the Table 4 width :func:`selected_fixed_width`
    picks; the paper's fixed columns are its grid search's pick ("Linear" on MNIST and
    CIFAR10). Fashion-MNIST is not in the paper; CIFAR needs a download (the paper
    profile). ``None`` where a run is not stored.
    """
    import pandas as pd

    rows = []
    for d in ("MNIST", "FashionMNIST", "CIFAR10", "CIFAR100"):
        slug = PAPER_SLUGS.get(d)
        width = selected_fixed_width(results, d)
        fixed = arm_runs(results, d, "fixed", width) if width is not None else []
        awnn = arm_runs(results, d, "adaptive")
        absent = NEEDS_DOWNLOAD if d in DOWNLOAD else None

        def paper(name: str) -> str:
            return paper_printed(f"awnn/table1/{slug}-{name}") if slug else "not in the paper"

        seeds = f"{_seeds(fixed)}; {_seeds(awnn)}"
        rows.append({"dataset": DATASET_LABELS[d], "quantity": "test accuracy (%)",
                     "fixed (ours)": _cell(fixed, "test_acc", 100.0) or absent, "fixed (paper)": paper("fixed-accuracy"),
                     "AWNN (ours)": _cell(awnn, "test_acc", 100.0) or absent, "AWNN (paper)": paper("awnn-accuracy"),
                     "seeds (fixed; AWNN)": seeds})
        fixed_width = None if width is None else ("linear" if width == 0 else str(width))
        rows.append({"dataset": DATASET_LABELS[d], "quantity": "classifier width",
                     "fixed (ours)": fixed_width or absent, "fixed (paper)": paper("fixed-width"),
                     "AWNN (ours)": _cell(awnn, "width") or absent, "AWNN (paper)": paper("awnn-width"),
                     "seeds (fixed; AWNN)": seeds})
    return pd.DataFrame(rows)


def fixed_width_table(results: Sequence[RunResult]):
    """Every classifier of Table 4 beside the adaptive one, per dataset with runs stored: the hidden width
    (AWNN: learned, mean (std)), validation and test accuracy (%), mean (std) over seeds, and the seeds.
    The width model selection picks is marked "(selected)"."""
    import pandas as pd

    rows = []
    for d in im.DATASETS:
        if not any(r.config["dataset"] == d for r in results):
            continue
        chosen = selected_fixed_width(results, d)
        for head, width in im.ARMS:
            runs = arm_runs(results, d, head, width if head == "fixed" else None)
            label = arm_label(head, width) + (" (selected)" if head == "fixed" and width == chosen else "")
            rows.append({"dataset": DATASET_LABELS[d], "classifier": label,
                         "hidden width": _cell(runs, "width") if head == "adaptive" else width,
                         "validation acc (%)": _cell(runs, "val_acc", 100.0),
                         "test acc (%)": _cell(runs, "test_acc", 100.0), "seeds": _seeds(runs)})
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------- Fig. 9: width and difficulty


def width_by_difficulty(results: Sequence[RunResult]):
    """The learned width per dataset (mean (std), 95% interval, runs) beside the test accuracy of the AWNN
    and of the selected fixed classifier, our datasets first, then the paper's (Table 1, the widths Fig. 9
    ends at: mean (std) over 10 runs, no interval given)."""
    import pandas as pd

    rows = []
    for d in im.DATASETS:
        awnn = arm_runs(results, d, "adaptive")
        if not awnn:
            continue
        est = estimate(_metric(awnn, "width"))
        width = selected_fixed_width(results, d)
        fixed = arm_runs(results, d, "fixed", width) if width is not None else []
        rows.append({"dataset": DATASET_LABELS[d], "source": "ours", "learned width": mean_std(_metric(awnn, "width")),
                     "95% interval": None if est.n == 1 else f"{est.mean - est.half_width:.1f} to "
                                                               f"{est.mean + est.half_width:.1f}",
                     "AWNN test acc (%)": _cell(awnn, "test_acc", 100.0),
                     "fixed test acc (%)": _cell(fixed, "test_acc", 100.0), "runs": len(awnn)})
    for d, slug in PAPER_SLUGS.items():
        rows.append({"dataset": DATASET_LABELS[d], "source": "paper (Table 1)",
                     "learned width": paper_text(f"awnn/table1/{slug}-awnn-width"), "95% interval": None,
                     "AWNN test acc (%)": paper_text(f"awnn/table1/{slug}-awnn-accuracy"),
                     "fixed test acc (%)": paper_text(f"awnn/table1/{slug}-fixed-accuracy"), "runs": 10})
    return pd.DataFrame(rows)


def _verdict_words(holds: bool | None) -> str:
    return {True: "holds", False: "does not hold", None: "cannot be told"}[holds]


def _interval_note(d) -> str:
    return ", 95% Welch interval" if math.isfinite(d.half_width) else "; one seed each, so no interval"


def difficulty_reading(results: Sequence[RunResult]) -> str:
    """Fig. 9's claim judged on MNIST against Fashion-MNIST, as a Markdown paragraph computed from the runs.

    Fashion-MNIST counts as the harder task when the 95% Welch interval of AWNN's test
    accuracy, MNIST minus Fashion-MNIST, lies above 0; the claim then holds when the
    interval of the learned width, Fashion-MNIST minus MNIST, lies above 0, does not
    hold when it lies below, and cannot be told otherwise (or with one seed).
    """
    m, f = arm_runs(results, "MNIST", "adaptive"), arm_runs(results, "FashionMNIST", "adaptive")
    paper = " < ".join(f"{DATASET_LABELS[d]} {paper_items.item(f'awnn/table1/{s}-awnn-width').paper_value:g}"
                       for d, s in PAPER_SLUGS.items())
    if not (m and f):
        missing = " and ".join(DATASET_LABELS[d] for d, runs in (("MNIST", m), ("FashionMNIST", f)) if not runs)
        return (f"No AWNN run on {missing} is stored, so Fig. 9's \"width grows with task difficulty\" "
                f"waits for them (the paper's Table 1 widths: {paper}).")
    d_acc = difference(_metric(m, "test_acc", 100.0), _metric(f, "test_acc", 100.0))
    d_width = difference(_metric(f, "width"), _metric(m, "width"))
    harder = sign_verdict(d_acc)
    verdict = sign_verdict(d_width) if harder else None
    order = ("Fashion-MNIST is the harder task here" if harder else
             "Fashion-MNIST is not measurably harder than MNIST here" if harder is None else
             "MNIST is the harder task here")
    epochs = sorted({r.config["epochs"] for r in m + f})
    return (f"{order}: AWNN's test accuracy is {mean_std(_metric(f, 'test_acc', 100.0))}% on Fashion-MNIST and "
            f"{mean_std(_metric(m, 'test_acc', 100.0))}% on MNIST (MNIST − Fashion-MNIST: {signed(d_acc, digits=2)} "
            f"points{_interval_note(d_acc)}). The learned width is {mean_std(_metric(f, 'width'))} neurons on "
            f"Fashion-MNIST and {mean_std(_metric(m, 'width'))} on MNIST (Fashion-MNIST − MNIST: {signed(d_width)}). "
            f"So Fig. 9's \"width grows with task difficulty\" **{_verdict_words(verdict)}** on these runs "
            f"({len(m)} and {len(f)} seeds, {', '.join(map(str, epochs))} epochs; the paper's widths after 200 "
            f"epochs: {paper}).")


def claims(results: Sequence[RunResult]):
    """Table 1's and Fig. 9's claims judged on our runs: claim, where, our evidence, verdict.

    "Matches" holds when the 95% Welch interval of AWNN − fixed (the selected width)
    lies within ±``MATCH_POINTS`` points and fails when it lies wholly outside; the
    difficulty claim is :func:`difficulty_reading`'s. ``None``: the runs cannot tell.
    """
    table = ClaimTable()
    for d in ("MNIST", "FashionMNIST"):
        width = selected_fixed_width(results, d)
        awnn = arm_runs(results, d, "adaptive")
        if width is None or not awnn:
            continue
        fixed = arm_runs(results, d, "fixed", width)
        diff = difference(_metric(awnn, "test_acc", 100.0), _metric(fixed, "test_acc", 100.0))
        slug = PAPER_SLUGS.get(d)
        source = (f"Table 1: {paper_text(f'awnn/table1/{slug}-awnn-accuracy')} against "
                  f"{paper_text(f'awnn/table1/{slug}-fixed-accuracy')}" if slug else "Table 1 (not in the paper)")
        table.add(f"AWNN matches the fixed ResNet-20's accuracy on {DATASET_LABELS[d]}", source,
                  f"AWNN − {arm_label('fixed', width)}: {signed(diff, digits=2)} points", within_verdict(diff,
                                                                                                     MATCH_POINTS))
    m, f = arm_runs(results, "MNIST", "adaptive"), arm_runs(results, "FashionMNIST", "adaptive")
    if m and f:
        d_acc = difference(_metric(m, "test_acc", 100.0), _metric(f, "test_acc", 100.0))
        d_width = difference(_metric(f, "width"), _metric(m, "width"))
        table.add("The learned width grows with task difficulty (Fashion-MNIST above MNIST)", "App. E, Fig. 9",
                  f"width, Fashion-MNIST − MNIST: {signed(d_width)}; accuracy, MNIST − Fashion-MNIST: "
                  f"{signed(d_acc, digits=2)} points", sign_verdict(d_width) if sign_verdict(d_acc) else None)
    return table.frame()


def plot_fig9(results: Sequence[RunResult]):
    """Fig. 9: the classifier's width (left) and test accuracy (right) over epochs, mean over seeds with a
    band of one standard error, one colour per dataset.

    Left: the AWNN width every ``trace_every`` steps (steps converted to epochs).
    Right: AWNN solid, the selected fixed width dashed. Dotted verticals: the learning-rate
    steps (Fig. 9's jumps). Grey diamonds: Table 1's AWNN width and accuracy on MNIST (after
    the paper's 200 epochs), drawn at the end of our curves.
    """
    from hacn_core.engine import plots

    fig, axes = plots.figure(ncols=2, height=3.0)
    colours = plots.categorical(list(DATASET_LABELS.values()))
    x_end, milestones = 0.0, set()
    for d in im.DATASETS:
        awnn = arm_runs(results, d, "adaptive")
        colour = colours[DATASET_LABELS[d]]
        if awnn:
            c = awnn[0].config
            per_epoch = math.ceil(awnn[0].metrics["n_train"] / c["batch_size"])
            n = min(len(r.curves["trace_step"]) for r in awnn)
            x = np.asarray(awnn[0].curves["trace_step"][:n], dtype=float) / per_epoch
            plots.with_ci(axes[0, 0], x, np.stack([r.curves["trace_width"][:n] for r in awnn]), DATASET_LABELS[d],
                          color=colour)
            _accuracy_curve(axes[0, 1], awnn, colour, "-")
            x_end, milestones = max(x_end, c["epochs"]), milestones | set(c["milestones"])
        width = selected_fixed_width(results, d)
        if width is not None:
            _accuracy_curve(axes[0, 1], arm_runs(results, d, "fixed", width), colour, "--")
        if d in PAPER_SLUGS and awnn:
            for ax, quantity in zip(axes[0], ("width", "accuracy")):
                paper = paper_items.item(f"awnn/table1/{PAPER_SLUGS[d]}-awnn-{quantity}")
                plots.paper_point(ax, x_end, paper.paper_value, yerr=paper.paper_std, color=colour,
                                  markeredgecolor=plots.PAPER_COLOUR, markeredgewidth=1.2, label="_nolegend_")
    for ax in axes[0]:
        for e in sorted(milestones):
            ax.axvline(e, color="0.7", linestyle=":", linewidth=0.8, zorder=0)
    axes[0, 1].plot([], [], color="0.4", linestyle="-", label="AWNN")
    axes[0, 1].plot([], [], color="0.4", linestyle="--", label="fixed, width selected on validation")
    plots.paper_key(axes[0, 1], "paper, Table 1 (MNIST, 200 epochs)")
    axes[0, 0].axhline(quantile_width(im.IMAGE_START_RATE), color="0.6", linewidth=0.8)
    axes[0, 0].set(xlabel="epoch", ylabel="classifier width (AWNN)")
    axes[0, 1].set(xlabel="epoch", ylabel="test accuracy (%)")
    plots.figure_legend(fig, axes[0], ncols=3)
    return fig


def _accuracy_curve(ax, runs: Sequence[RunResult], colour, style: str) -> None:
    from hacn_core.engine import plots

    n = min(len(r.curves["record_epoch"]) for r in runs)
    plots.with_ci(ax, np.asarray(runs[0].curves["record_epoch"][:n]),
                  100 * np.stack([r.curves["test_acc"][:n] for r in runs]), None, color=colour, linestyle=style)


# ----------------------------------------------------------------------------- setting and cost


def budget(profile: str, dataset: str = "MNIST") -> dict[str, float]:
    """The CPU cost of a profile's runs on ``dataset`` from the study's measured costs
    (:data:`~hacn_core.awnn.studies.images.STEP_S`, :data:`~hacn_core.awnn.studies.images.EVAL_S_PER_1000`):
    steps per epoch over the outer training part at the profile's batch, the images
    evaluated per epoch (validation and test), seconds per epoch, epochs, runs, CPU-hours."""
    configs = [c for c in im.EXPERIMENT.runs(profile) if c["dataset"] == dataset]
    c = configs[0]
    n_train, n_val = im.OUTER_SPLIT[dataset]
    n_train = c["train_subset"] or n_train
    n_eval = 2 * c["eval_subset"] if c["eval_subset"] else n_val + 10_000  # validation + the standard test set
    steps = math.ceil(n_train / c["batch_size"])
    epoch_s = steps * im.STEP_S + n_eval / 1000 * im.EVAL_S_PER_1000
    return {"steps_per_epoch": steps, "eval_images": n_eval, "epoch_s": epoch_s, "epochs": c["epochs"],
            "runs": len(configs), "run_h": c["epochs"] * epoch_s / 3600,
            "cpu_h": len(configs) * c["epochs"] * epoch_s / 3600}


def budget_reading() -> str:
    """Why the book's budget is what it is, as a Markdown paragraph computed from the measured costs."""
    b, p = budget("book"), budget("paper")
    datasets = len(im.BOOK_DATASETS)
    return (f"The study measured {im.STEP_S} s of CPU time per training step at batch 128 (one thread, on a "
            f"2-core machine shared with two other trainings; the convolutions dominate, so the linear, the "
            f"512-wide and the adaptive head cost the same) and {im.EVAL_S_PER_1000} s per 1,000 images evaluated. "
            f"An epoch over MNIST's {im.OUTER_SPLIT['MNIST'][0]:,} training images is {b['steps_per_epoch']} steps, "
            f"plus {b['eval_images']:,} validation and test images: {b['epoch_s']:.0f} s. One run at the paper's "
            f"{p['epochs']} epochs would take {p['run_h']:.1f} CPU-hours, and the paper's {p['runs']} MNIST runs "
            f"{p['cpu_h']:,.0f}. The book trains {b['epochs']} epochs: {datasets} datasets x {b['runs']} runs "
            f"is {datasets * b['cpu_h']:.1f} CPU-hours.")


def setting_table():
    """The paper's setting (the study's ``paper`` profile, which follows Table 4 and App. C.2) beside the
    book's, row by row, read from the study's configurations."""
    import pandas as pd

    paper, book = im.image_config("MNIST", "adaptive", 0, 0), im.book_configs()[0]
    splits = {d: paper_items.item(f"awnn/table2/{s}-samples").note.rstrip(".") for d, s in PAPER_SLUGS.items()}

    def schedule(c: dict[str, Any]) -> str:
        return f"{c['epochs']} epochs, learning rate x0.1 at epochs {', '.join(map(str, c['milestones']))}"

    def runs(profile: str) -> str:
        configs = im.EXPERIMENT.runs(profile)
        seeds = sorted({c["seed"] for c in configs})
        return f"seeds {seeds[0]}-{seeds[-1]} per arm: {len(configs)} runs"

    optimiser = (f"SGD, learning rate {paper['lr']}, momentum {paper['momentum']}, weight decay "
                 f"{paper['weight_decay']:g}, batch {paper['batch_size']}")
    head = (f"ResNet-20; fixed classifier of hidden width {', '.join(map(str, im.TABLE4_WIDTHS))}, or AWNN "
            f"(LeakyReLU, rate {paper['rate_init']}: {quantile_width(paper['rate_init'], paper['k'])} neurons at "
            f"k = {paper['k']}, sigma_theta = {paper['sigma_theta']:g})")
    same = "the same"
    rows = [
        ("data", "; ".join(f"{DATASET_LABELS[d]}: {s}" for d, s in splits.items()),
         f"MNIST and Fashion-MNIST offline, both cut {im.OUTER_SPLIT['MNIST'][0]:,} / "
         f"{im.OUTER_SPLIT['MNIST'][1]:,} / 10,000 test; CIFAR: {NEEDS_DOWNLOAD}"),
        ("model", head, same),
        ("optimiser", optimiser, same if all(book[k] == paper[k] for k in ("lr", "momentum", "weight_decay",
                                                                           "batch_size")) else "differs"),
        ("schedule", schedule(paper), schedule(book)),
        ("runs", runs("paper") + " (10 retrainings of the selected configuration)", runs("book")),
        ("cost (CPU)", f"{budget('paper')['cpu_h']:,.0f} CPU-hours for MNIST alone at the measured step cost",
         f"{len(im.BOOK_DATASETS) * budget('book')['cpu_h']:.1f} CPU-hours"),
    ]
    return pd.DataFrame(rows, columns=["what", "paper (Table 4, App. C.2)", "this book"])


def cost_table(results: Sequence[RunResult]):
    """What the stored runs cost, per dataset, classifier and device: runs, seconds per run and milliseconds per
    training step (evaluation included). On a CPU the cost is the run's process time (its wall time also counts
    pauses and other jobs); on a GPU it is the wall time, which is what the GPU was held for."""
    import pandas as pd

    rows = []
    for d in im.DATASETS:
        for head, width in im.ARMS:
            runs = arm_runs(results, d, head, width if head == "fixed" else None)
            for device in sorted({device_label(r.provenance) for r in runs}):
                on = [r for r in runs if device_label(r.provenance) == device]
                gpu = not device.startswith("CPU")
                seconds = np.asarray([r.provenance.get("wall_time_s", np.nan) if gpu else r.metrics["cpu_s"]
                                      for r in on], dtype=float)
                steps = np.asarray([r.config["epochs"] * math.ceil(r.metrics["n_train"] / r.config["batch_size"])
                                    for r in on], dtype=float)
                rows.append({"dataset": DATASET_LABELS[d], "classifier": arm_label(head, width), "device": device,
                             "runs": len(on), "time measured": "wall" if gpu else "process",
                             "s per run": round(float(seconds.mean()), 1),
                             "ms per step": round(float((seconds / steps).mean()) * 1000, 1),
                             "device-hours": round(float(seconds.sum()) / 3600, 2)})
    return pd.DataFrame(rows)
