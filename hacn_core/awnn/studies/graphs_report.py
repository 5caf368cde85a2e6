"""What AWNN chapter 6 shows of the graph runs: Table 1's NCI1 and REDDIT-B rows, Fig. 11, App. D's Fixed+.

The study (:mod:`hacn_core.awnn.studies.graphs`, ``awnn-graphs``) trains GIN (Xu et al.
2019) whose MLPs (one before the convolutions, one per convolution) are fixed (64 hidden
neurons) or AWNN's adaptive MLPs (Eqs. 11-14), on one outer fold of Errica et al.'s
protocol at one grid point of Table 5. The score of a fold is the mean test accuracy of
the grid point with the best mean validation accuracy there
(:func:`~hacn_core.awnn.studies.graphs.select_per_fold`); Table 1 reports the mean (std)
of the fold scores. This module reads the stored runs; it trains nothing:

* :func:`coverage_table` and :func:`complete_folds`: a fold counts once every grid point
  of it is stored (model selection must see the whole grid);
* :func:`selection` (per fold and arm: the selected grid point, its score and its
  per-layer widths), :func:`table1`, :func:`selection_table`, :func:`claims` and
  :func:`reading` (Table 1's rows beside ours, judged with 95% intervals over folds);
* :func:`plot_fig11` and :func:`layer_width_table` (Fig. 11: learned neurons per layer);
* :func:`fixed_plus_width`, :func:`fixed_plus_configs`, :func:`fixed_plus_experiment`,
  :data:`FIXED_PLUS_COMMAND` and :func:`fixed_plus_table` (App. D's Fixed+: the fixed GIN
  retrained with every MLP at the learned total width, on NCI1 once its AWNN runs are in);
* :func:`protocol_table`, :func:`setting_table`, :func:`budget_reading` and
  :func:`cost_table` (the protocol, the setting, and the budget from the study's measured
  per-epoch cost).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from hacn_core.awnn import paper_items, quantile_width
from hacn_core.awnn.studies import graphs as gr
from hacn_core.awnn.studies.ablations import round_half_up
from hacn_core.awnn.studies.common import paper_printed, paper_text
from hacn_core.engine.registry import Experiment
from hacn_core.engine.results import RunResult, config_hash, study_config
from hacn_core.engine.stats import VarianceRatio, estimate, paired_variance_ratio, sign_verdict, signed, within_verdict
from hacn_core.engine.tables import ClaimTable, device_label, mean_std
from hacn_core.engine.tables import coverage_table as _coverage

DATASET_LABELS: dict[str, str] = {"NCI1": "NCI1", "MUTAG": "MUTAG", "REDDIT-BINARY": "REDDIT-B"}
#: Table 1's item slug of each dataset the paper runs (MUTAG is our second offline task)
PAPER_SLUGS: dict[str, str] = {"NCI1": "nci1", "REDDIT-BINARY": "reddit-b"}
#: datasets this machine cannot read offline: the paper profile downloads them
DOWNLOAD: tuple[str, ...] = gr.FEATURELESS
ARM_LABELS: dict[str, str] = {"adaptive": "AWNN", "fixed": "fixed", gr.FIXED_PLUS: "Fixed+"}
#: "AWNN matches the fixed GIN": the 95% interval of the paired difference over folds lies within this many
#: points (Table 1's NCI1 fold-to-fold stds are 1.1 and 1.4 points)
MATCH_POINTS = 2.0
NEEDS_DOWNLOAD = "needs a download (paper profile)"
#: how a chapter trains App. D's Fixed+ on NCI1 once the AWNN runs it reads its width from are stored
FIXED_PLUS_COMMAND = """from hacn_core import catalog
from hacn_core.awnn.studies import graphs_report as grr
from hacn_core.engine.registry import run_experiment

profile = "{profile}"
planned, stored = catalog.get("awnn-graphs").runs(profile), catalog.stored("awnn-graphs", profile)
width = grr.fixed_plus_width(planned, stored)  # None until every NCI1 AWNN fold is stored
run_experiment(grr.fixed_plus_experiment(width, profile), profile)"""

Cell = tuple[str, str, int]  # (dataset, mlp, fold)


def _cell(config: dict[str, Any]) -> Cell:
    return config["dataset"], config["mlp"], config["fold"]


def coverage_table(planned: Sequence[dict[str, Any]], results: Sequence[RunResult]):
    """Per dataset and MLP kind: the folds planned, the folds whose every grid point is stored, and the runs."""
    return _coverage(planned, results, lambda c: {"dataset": DATASET_LABELS[c["dataset"]],
                                                  "MLPs": ARM_LABELS[c["mlp"]]},
                     unit=lambda c: c["fold"], unit_name="folds")


def complete_folds(planned: Sequence[dict[str, Any]], results: Sequence[RunResult]) -> set[Cell]:
    """The ``(dataset, mlp, fold)`` cells of ``planned`` whose every configuration (grid point and seed) is
    stored in ``results``: the folds model selection can be read off."""
    have = {config_hash(study_config(r.config)) for r in results}
    cells: dict[Cell, bool] = {}
    for c in planned:
        cells[_cell(c)] = cells.get(_cell(c), True) and config_hash(c) in have
    return {cell for cell, done in cells.items() if done}


def selection(planned: Sequence[dict[str, Any]], results: Sequence[RunResult]) -> dict[Cell, dict[str, Any]]:
    """Errica et al.'s model selection on the complete folds: :func:`~hacn_core.awnn.studies.graphs.select_per_fold`'s
    entries (``grid``, ``val_acc``, ``test_acc``, ``total_width``, ``seeds``) plus ``widths``, the hidden width
    of every MLP of the selected grid point (``[pre, conv 1, ..., conv L]``, mean over its seeds)."""
    done = complete_folds(planned, results)
    keep = [r for r in results if _cell(r.config) in done]
    out = gr.select_per_fold(keep)
    for cell, s in out.items():
        runs = [r for r in keep if _cell(r.config) == cell and all(r.config[k] == v for k, v in s["grid"].items())]
        s["widths"] = np.mean([r.metrics["widths"] for r in runs], axis=0).tolist()
    return out


def _scores(sel: dict[Cell, dict[str, Any]], dataset: str, mlp: str) -> dict[int, dict[str, Any]]:
    """The selected entry of every complete fold of one dataset and arm, by fold."""
    return {f: s for (d, m, f), s in sorted(sel.items()) if d == dataset and m == mlp}


def _over_folds(folds: dict[int, dict[str, Any]], key: str, scale: float = 1.0) -> str | None:
    """``mean (std)`` over folds, ``None`` (the table's "–") with no complete fold."""
    return mean_std([scale * s[key] for s in folds.values()]) if folds else None


def _grid_label(grid: dict[str, Any]) -> str:
    return f"batch {grid['batch_size']}, {grid['layers']} conv., {grid['pooling']}"


def table1(planned: Sequence[dict[str, Any]], results: Sequence[RunResult]):
    """Table 1's graph rows, ours beside the paper's: test accuracy (%) and the total width of the MLPs,
    mean (std) over the complete folds' scores (as Errica et al. report). The paper's fixed
    columns are Errica et al.'s published GIN (its width: "(96-320)", the range they tried).
    MUTAG is not in the paper; REDDIT-B needs a download. ``None`` where no fold is complete."""
    import pandas as pd

    sel = selection(planned, results)
    rows = []
    for d in DATASET_LABELS:
        slug = PAPER_SLUGS.get(d)
        fixed, awnn = _scores(sel, d, "fixed"), _scores(sel, d, "adaptive")
        absent = NEEDS_DOWNLOAD if d in DOWNLOAD else None

        def paper(name: str) -> str:
            return paper_printed(f"awnn/table1/{slug}-{name}") if slug else "not in the paper"

        folds = f"{len(fixed)}; {len(awnn)}"
        for quantity, key, scale in (("test accuracy (%)", "test_acc", 100.0), ("total MLP width", "total_width", 1.0)):
            name = "accuracy" if key == "test_acc" else "width"
            rows.append({"dataset": DATASET_LABELS[d], "quantity": quantity,
                         "fixed (ours)": _over_folds(fixed, key, scale) or absent,
                         "fixed (paper)": paper(f"fixed-{name}"),
                         "AWNN (ours)": _over_folds(awnn, key, scale) or absent,
                         "AWNN (paper)": paper(f"awnn-{name}"), "folds (fixed; AWNN)": folds})
    return pd.DataFrame(rows)


def selection_table(planned: Sequence[dict[str, Any]], results: Sequence[RunResult]):
    """Per dataset and complete fold: the grid point each arm selects, its validation and test accuracy
    (%), and for AWNN the learned width of every MLP (before the convolutions first)."""
    import pandas as pd

    sel = selection(planned, results)
    rows = []
    for d in DATASET_LABELS:
        fixed, awnn = _scores(sel, d, "fixed"), _scores(sel, d, "adaptive")
        for fold in sorted(set(fixed) | set(awnn)):
            f, a = fixed.get(fold), awnn.get(fold)
            rows.append({"dataset": DATASET_LABELS[d], "fold": fold,
                         "fixed: selected": _grid_label(f["grid"]) if f else None,
                         "fixed: test acc (%)": round(100 * f["test_acc"], 1) if f else None,
                         "AWNN: selected": _grid_label(a["grid"]) if a else None,
                         "AWNN: val acc (%)": round(100 * a["val_acc"], 1) if a else None,
                         "AWNN: test acc (%)": round(100 * a["test_acc"], 1) if a else None,
                         "AWNN: width per MLP": ", ".join(f"{w:.0f}" for w in a["widths"]) if a else None})
    return pd.DataFrame(rows)


def _paired(a: dict[int, dict[str, Any]], b: dict[int, dict[str, Any]], key: str, scale: float = 1.0):
    """The 95% interval (Student t) of ``a - b`` paired by fold, over the folds both have; ``None`` with none."""
    folds = sorted(set(a) & set(b))
    if not folds:
        return None
    return estimate([scale * (a[f][key] - b[f][key]) for f in folds])


def _folds(n: int) -> str:
    return f"{n} fold" + ("" if n == 1 else "s")


def claims(planned: Sequence[dict[str, Any]], results: Sequence[RunResult]):
    """Table 1's and App. D's claims judged on the complete folds: claim, where, our evidence, verdict.

    Differences are paired by fold (the two arms see the same outer test set), with a 95%
    Student-t interval. "Matches" holds when the interval lies within ±``MATCH_POINTS``
    points, fails when it lies wholly outside; "more" / "better" hold when it lies above 0
    and fail below. ``None``: the folds cannot tell (an interval across the line, or one fold).
    """
    sel = selection(planned, results)
    table = ClaimTable()
    for d in ("NCI1", "MUTAG", "REDDIT-BINARY"):
        slug = PAPER_SLUGS.get(d)
        fixed, awnn, plus = (_scores(sel, d, m) for m in ("fixed", "adaptive", gr.FIXED_PLUS))
        label = DATASET_LABELS[d]
        acc = _paired(awnn, fixed, "test_acc", 100.0)
        if acc is not None:
            source = (f"Table 1: {paper_text(f'awnn/table1/{slug}-awnn-accuracy')} against "
                      f"{paper_text(f'awnn/table1/{slug}-fixed-accuracy')}" if slug else "Table 1 (not in the paper)")
            table.add(f"AWNN matches the fixed GIN's accuracy on {label}", source,
                      f"AWNN − fixed: {signed(acc)} points over {_folds(acc.n)}", within_verdict(acc, MATCH_POINTS))
            width = _paired(awnn, fixed, "total_width")
            source = (f"Sec. 5, Table 1: {paper_text(f'awnn/table1/{slug}-awnn-width')} against "
                      f"{paper_printed(f'awnn/table1/{slug}-fixed-width')}" if slug else "Sec. 5 (not in the paper)")
            table.add(f"AWNN learns a larger total width than the fixed GIN's MLPs on {label}", source,
                      f"AWNN − fixed: {signed(width)} neurons over {_folds(width.n)}", sign_verdict(width))
        better = _paired(plus, fixed, "test_acc", 100.0)
        if better is not None:
            table.add(f"Fixed+ (every MLP at AWNN's learned width) is more accurate than the fixed GIN on {label}",
                      f"App. D (REDDIT-B: {paper_text('awnn/appd/reddit-b-fixed-plus-accuracy')} against "
                      f"{paper_text('awnn/table1/reddit-b-fixed-accuracy')})",
                      f"Fixed+ − fixed: {signed(better)} points over {_folds(better.n)}", sign_verdict(better))
        alone = _paired(plus, awnn, "test_acc", 100.0)
        if alone is not None:
            table.add(f"Fixed+ matches AWNN's accuracy: the learned width alone gives AWNN's result on {label}",
                      "App. D asks \"whether the width learned by AWNN on these datasets is indeed the reason behind the "
                      f"better performances\" (REDDIT-B: {paper_text('awnn/appd/reddit-b-fixed-plus-accuracy')} against "
                      f"AWNN's {paper_text('awnn/table1/reddit-b-awnn-accuracy')})",
                      f"Fixed+ − AWNN: {signed(alone)} points over {_folds(alone.n)}", within_verdict(alone, MATCH_POINTS))
        steadier = _variance_ratio(plus, fixed)
        if steadier is not None:
            plus_paper, fixed_paper = (paper_items.item(i).paper_std for i in (
                "awnn/appd/reddit-b-fixed-plus-accuracy", "awnn/table1/reddit-b-fixed-accuracy"))
            verdict = True if steadier.high < 1 else False if steadier.low > 1 else None
            table.add(f"Fixed+ varies less from fold to fold than the fixed GIN on {label}",
                      f"App. D: \"improve both accuracy and stability\" (REDDIT-B: std {plus_paper:g} against "
                      f"{fixed_paper:g} points)",
                      f"std over folds {_std(plus)} against {_std(fixed)} points; variance ratio {steadier} "
                      f"(Pitman-Morgan, paired by fold)", verdict)
    return table.frame()


def _variance_ratio(a: dict[int, dict[str, Any]], b: dict[int, dict[str, Any]]) -> VarianceRatio | None:
    """var(a) / var(b) of the test accuracies over the folds both have, with its paired 95% interval;
    ``None`` with fewer than 3 such folds or no spread."""
    folds = sorted(set(a) & set(b))
    x, y = [a[f]["test_acc"] for f in folds], [b[f]["test_acc"] for f in folds]
    if len(folds) < 3 or np.std(x) == 0 or np.std(y) == 0:
        return None
    return paired_variance_ratio(x, y)


def _std(folds: dict[int, dict[str, Any]]) -> str:
    return f"{100 * np.std([s['test_acc'] for s in folds.values()], ddof=1):.1f}"


def reading(planned: Sequence[dict[str, Any]], results: Sequence[RunResult]) -> str:
    """What the complete folds show, as a Markdown paragraph computed from the runs (one sentence per
    dataset), or the sentence saying that no fold is complete."""
    sel = selection(planned, results)
    band = f"the ±{MATCH_POINTS:g}-point match band"
    words = {True: f"inside {band}", False: f"outside {band}", None: f"not decided by {band}"}
    out = []
    for d in DATASET_LABELS:
        fixed, awnn = _scores(sel, d, "fixed"), _scores(sel, d, "adaptive")
        acc = _paired(awnn, fixed, "test_acc", 100.0)
        if acc is None:
            continue
        width = _paired(awnn, fixed, "total_width")
        out.append(f"On {DATASET_LABELS[d]} ({_folds(acc.n)} with both arms), AWNN scores "
                   f"{_over_folds(awnn, 'test_acc', 100)}% against the fixed GIN's {_over_folds(fixed, 'test_acc', 100)}% "
                   f"(AWNN − fixed, paired by fold: {signed(acc)} points, {words[within_verdict(acc, MATCH_POINTS)]}), "
                   f"and its MLPs learn {_over_folds(awnn, 'total_width')} neurons in total against the fixed "
                   f"{_over_folds(fixed, 'total_width')} ({signed(width)}).")
    if not out:
        return ("No fold has every grid point of both arms stored, so Table 1's graph rows, Fig. 11 and the "
                "claims wait for them (the table of folds above says what is stored).")
    return " ".join(out)


# ----------------------------------------------------------------------------- Fig. 11


def layer_width_table(planned: Sequence[dict[str, Any]], results: Sequence[RunResult]):
    """Fig. 11 in numbers: per dataset and number of convolutions of the selected AWNN, the folds that
    selected it and the mean (std) over them of each MLP's learned width (layer 1: before the convolutions).
    ``None`` for the layers a shallower GIN lacks."""
    import pandas as pd

    sel = selection(planned, results)
    deepest = max(gr.TABLE5_LAYERS) + 1
    rows = []
    for d in DATASET_LABELS:
        awnn = _scores(sel, d, "adaptive")
        for layers in gr.TABLE5_LAYERS:
            picked = [s["widths"] for s in awnn.values() if s["grid"]["layers"] == layers]
            if not picked:
                continue
            row = {"dataset": DATASET_LABELS[d], "convolutions": layers, "folds": len(picked)}
            for i in range(deepest):
                row[f"layer {i + 1}"] = mean_std([w[i] for w in picked]) if i <= layers else None
            rows.append(row)
    return pd.DataFrame(rows)


def plot_fig11(planned: Sequence[dict[str, Any]], results: Sequence[RunResult]):
    """Fig. 11: the learned neurons of every MLP (layer 1: the MLP before the convolutions) of the AWNN
    selected in each complete fold, one line per fold, coloured by its number of convolutions, one panel
    per dataset with complete folds. Grey line: the starting width (Eq. 11). The paper's Fig. 11 gives
    no numbers: its caption's claim ("similar trends") is what to compare."""
    from hacn_core.engine import plots

    sel = selection(planned, results)
    datasets = [d for d in DATASET_LABELS if _scores(sel, d, "adaptive")] or ["NCI1"]
    fig, axes = plots.figure(ncols=len(datasets), height=2.8)
    colours = plots.categorical(gr.TABLE5_LAYERS)
    start = quantile_width(gr.GRAPH_START_RATE)
    for ax, d in zip(axes[0], datasets):
        for fold, s in _scores(sel, d, "adaptive").items():
            layers = s["grid"]["layers"]
            ax.plot(np.arange(1, layers + 2), s["widths"], marker="o", markersize=3, linewidth=1.0, alpha=0.8,
                    color=colours[layers], label=f"{layers} convolution{'s' if layers > 1 else ''}")
        ax.axhline(start, color="0.6", linewidth=0.8, label=f"start ({start})")
        ax.set(title=DATASET_LABELS[d], xlabel="layer (1: MLP before the convolutions)",
               xticks=range(1, max(gr.TABLE5_LAYERS) + 2))
    axes[0, 0].set_ylabel("learned neurons")
    plots.figure_legend(fig, axes[0], ncols=4)
    return fig


# ----------------------------------------------------------------------------- App. D: Fixed+


def fixed_plus_width(planned: Sequence[dict[str, Any]], results: Sequence[RunResult], dataset: str = "NCI1"
                     ) -> int | None:
    """The width of every MLP in ``dataset``'s Fixed+ (App. D): the mean over folds of the selected AWNN's
    total width, rounded half up (Sec. 5: "using the total width as the width of each layer", as
    :data:`~hacn_core.awnn.studies.graphs.FIXED_PLUS_WIDTH` is Table 1's REDDIT-B width). ``None`` until
    every planned AWNN fold of ``dataset`` is complete."""
    folds = {c["fold"] for c in planned if c["dataset"] == dataset and c["mlp"] == "adaptive"}
    awnn = _scores(selection(planned, results), dataset, "adaptive")
    if not folds or set(awnn) != folds:
        return None
    return round_half_up(float(np.mean([s["total_width"] for s in awnn.values()])))


def fixed_plus_configs(width: int, profile: str, dataset: str = "NCI1") -> list[dict[str, Any]]:
    """Fixed+ on ``dataset`` at a profile: the profile's fixed-arm configurations of ``dataset`` (grid, folds,
    seeds, epochs) with ``mlp = "fixed-plus"`` and every MLP ``width`` wide."""
    if isinstance(width, bool) or not isinstance(width, int) or width < 1:
        raise ValueError(f"width={width!r} must be an integer >= 1: the learned total width, fixed_plus_width(); "
                         "it is None until every AWNN fold of the dataset is stored")
    return [c | {"mlp": gr.FIXED_PLUS, "hidden": width} for c in gr.EXPERIMENT.runs(profile)
            if c["dataset"] == dataset and c["mlp"] == "fixed"]


def fixed_plus_experiment(width: int, profile: str, dataset: str = "NCI1") -> Experiment:
    """``awnn-graphs`` with :func:`fixed_plus_configs` as its only profile ``profile``: train it with
    :func:`~hacn_core.engine.registry.run_experiment`, read it with
    :func:`~hacn_core.engine.registry.stored_runs` (the runs are filed under ``awnn-graphs``)."""
    configs = fixed_plus_configs(width, profile, dataset)
    return dataclasses.replace(gr.EXPERIMENT, configs={profile: lambda: configs},
                               setting={profile: f"Fixed+ on {dataset}: every MLP {width} wide, the fixed arm's grid"})


def fixed_plus_table(planned: Sequence[dict[str, Any]], results: Sequence[RunResult]):
    """App. D on every dataset with a complete Fixed+ fold: the fixed GIN, AWNN and Fixed+, their MLP widths
    and test accuracy (%) (mean (std) over complete folds), beside App. D's REDDIT-B column."""
    import pandas as pd

    sel = selection(planned, results)
    paper = {"fixed": paper_text("awnn/table1/reddit-b-fixed-accuracy"),
             "adaptive": paper_text("awnn/table1/reddit-b-awnn-accuracy"),
             gr.FIXED_PLUS: paper_text("awnn/appd/reddit-b-fixed-plus-accuracy")}
    rows = []
    for d in DATASET_LABELS:
        plus = _scores(sel, d, gr.FIXED_PLUS)
        if not plus:
            continue
        hidden = {r.config["hidden"] for r in results if r.config["dataset"] == d and r.config["mlp"] == gr.FIXED_PLUS}
        for mlp in ("fixed", "adaptive", gr.FIXED_PLUS):
            folds = _scores(sel, d, mlp)
            width = (f"{_over_folds(folds, 'total_width')} in total" if mlp == "adaptive" else
                     f"{', '.join(map(str, sorted(hidden)))} per MLP" if mlp == gr.FIXED_PLUS else "64 per MLP")
            rows.append({"dataset": DATASET_LABELS[d], "MLPs": ARM_LABELS[mlp], "MLP width": width,
                         "test acc (%)": _over_folds(folds, "test_acc", 100.0), "folds": len(folds),
                         "paper, REDDIT-B (App. D)": paper[mlp]})
    return pd.DataFrame(rows)


def fixed_plus_reading(planned: Sequence[dict[str, Any]], results: Sequence[RunResult]) -> str:
    """What Fixed+ shows, as Markdown computed from the runs: per dataset with Fixed+ folds, its accuracy
    beside the fixed GIN's and AWNN's over the folds all three have, and what that says of App. D's
    question (is the learned width the reason for AWNN's result?); empty without Fixed+ folds."""
    sel = selection(planned, results)
    out = []
    for d in DATASET_LABELS:
        plus = _scores(sel, d, gr.FIXED_PLUS)
        fixed, awnn = _scores(sel, d, "fixed"), _scores(sel, d, "adaptive")
        common = sorted(set(plus) & set(fixed) & set(awnn))
        if not common:
            continue
        plus, fixed, awnn = ({f: arm[f] for f in common} for arm in (plus, fixed, awnn))
        alone, over = _paired(plus, awnn, "test_acc", 100.0), _paired(plus, fixed, "test_acc", 100.0)
        verdict = within_verdict(alone, MATCH_POINTS)
        answer = {True: "so the learned width alone gives AWNN's accuracy here",
                  False: "so the width alone does not give AWNN's accuracy here" if alone.mean < 0 else
                         "so the learned width, trained as a plain MLP, does better than AWNN here",
                  None: "which the folds cannot tell from a match"}[verdict]
        out.append(f"On {DATASET_LABELS[d]} ({_folds(len(common))} with all three arms), Fixed+ scores "
                   f"{_over_folds(plus, 'test_acc', 100)}% against the fixed GIN's {_over_folds(fixed, 'test_acc', 100)}% "
                   f"(Fixed+ − fixed: {signed(over)} points) and AWNN's {_over_folds(awnn, 'test_acc', 100)}% "
                   f"(Fixed+ − AWNN: {signed(alone)} points, {answer}).")
    return " ".join(out)


# ----------------------------------------------------------------------------- protocol, setting, cost


def protocol_table(profile: str):
    """Errica et al.'s protocol as run at ``profile``, on every offline dataset of it: the graphs and
    classes, the outer folds, and per fold the outer test set and the inner training and validation
    sets (min-max over folds), beside the paper's counts (Table 2)."""
    import pandas as pd

    from hacn_core.engine.data import missing_files
    from hacn_core.engine.folds import assessment_folds

    first: dict[str, dict[str, Any]] = {}
    for c in gr.EXPERIMENT.runs(profile):
        first.setdefault(c["dataset"], c)
    rows = []
    for d, c in first.items():
        if missing_files(d):
            continue
        y = gr.load_graphs(c).y.numpy()
        folds = assessment_folds(y, c["n_folds"], c["holdout"], c["fold_seed"], c["split_file"])

        def span(sizes: list[int]) -> str:
            return f"{min(sizes)}-{max(sizes)}" if min(sizes) != max(sizes) else str(sizes[0])

        slug = PAPER_SLUGS.get(d)
        paper = "not in the paper"
        if slug:
            it = paper_items.item(f"awnn/table2/{slug}-samples")
            paper = f"{it.paper_value:,.0f} graphs; {it.note.rstrip('.')}"
        rows.append({"dataset": DATASET_LABELS[d], "graphs": len(y), "classes": int(y.max()) + 1,
                     "outer folds": len(folds), "outer test": span([len(f.test) for f in folds]),
                     "inner training": span([len(f.train) for f in folds]),
                     "inner validation": span([len(f.validation) for f in folds]),
                     "folds from": "Errica et al.'s file" if c["split_file"] else f"seeded (fold_seed={c['fold_seed']})",
                     "paper (Table 2)": paper})
    return pd.DataFrame(rows)


def budget(profile: str) -> dict[str, dict[str, float]]:
    """Per dataset with a measured epoch cost (:data:`~hacn_core.awnn.studies.graphs.EPOCH_S`): the runs at
    ``profile``, their most epochs, and the CPU-hours if no run stopped early (an upper bound)."""
    out: dict[str, dict[str, float]] = {}
    for c in gr.EXPERIMENT.runs(profile):
        if c["dataset"] not in gr.EPOCH_S:
            continue
        b = out.setdefault(c["dataset"], {"runs": 0, "epochs": 0, "epoch_s": gr.EPOCH_S[c["dataset"]], "cpu_h": 0.0})
        b["runs"] += 1
        b["epochs"] = max(b["epochs"], c["epochs"])
        b["cpu_h"] += c["epochs"] * b["epoch_s"] / 3600
    return out


def budget_reading() -> str:
    """Why the book's budget is what it is, as a Markdown paragraph computed from the measured costs."""
    book, paper = budget("book"), budget("paper")
    nci1 = paper["NCI1"]
    parts = ", ".join(f"{DATASET_LABELS[d]} {b['runs']} runs of at most {b['epochs']} epochs at {b['epoch_s']:g} s "
                      f"an epoch ({b['cpu_h']:.2f} CPU-hours)" for d, b in book.items())
    return (f"The study measured an epoch through the trainer (batch 32, one thread, on a 2-core machine shared "
            f"with two other trainings; the validation and test graphs included) at {gr.EPOCH_S['NCI1']:g} s on "
            f"NCI1 and {gr.EPOCH_S['MUTAG']:g} s on MUTAG. The paper's protocol on NCI1 is {nci1['runs']} runs of "
            f"up to {nci1['epochs']} epochs: about {nci1['cpu_h']:,.0f} CPU-hours. The book runs a stated subset "
            f"with at most {max(b['epochs'] for b in book.values())} epochs per run: {parts}, "
            f"{sum(b['cpu_h'] for b in book.values()):.1f} CPU-hours in all as an upper bound (patience stops "
            f"runs early).")


def setting_table():
    """The paper's setting (the study's ``paper`` profile, which follows Table 5 and App. C.4) beside the
    book's, row by row, read from the study's configurations."""
    import pandas as pd

    def grid(profile: str) -> str:
        parts = []
        for d in DATASET_LABELS:
            configs = [c for c in gr.EXPERIMENT.runs(profile) if c["dataset"] == d and c["mlp"] == "adaptive"]
            if configs:
                values = {k: sorted({c[k] for c in configs}) for k in gr.GRID_KEYS}
                seeds = sorted({c["seed"] for c in configs})
                parts.append(f"{DATASET_LABELS[d]}: batch {'/'.join(map(str, values['batch_size']))}, "
                             f"{'/'.join(map(str, values['layers']))} convolutions, "
                             f"{'/'.join(values['pooling'])} pooling; seed{'s' if len(seeds) > 1 else ''} "
                             f"{', '.join(map(str, seeds))}; {configs[0]['epochs']} epochs, patience "
                             f"{configs[0]['patience']}")
        return "; ".join(parts)

    def runs(profile: str) -> str:
        configs = gr.EXPERIMENT.runs(profile)
        return ", ".join(f"{DATASET_LABELS[d]} {sum(c['dataset'] == d for c in configs)}" for d in DATASET_LABELS
                         if any(c["dataset"] == d for c in configs))

    c = gr.graph_config("NCI1", 0, "adaptive", 0)
    awnn = (f"every MLP adaptive: rate {c['rate_init']} ({quantile_width(c['rate_init'], c['k'])} neurons at "
            f"k = {c['k']}), sigma_theta = {c['sigma_theta']:g}, uninformative rate prior; Adam, learning rate "
            f"{c['lr']}; embedding width {c['dim']}")
    book_cost = sum(b["cpu_h"] for b in budget("book").values())
    rows = [
        ("data", "NCI1 and REDDIT-B; Errica et al.'s folds", f"NCI1 and MUTAG offline, seeded stratified folds of "
                                                             f"our own; REDDIT-B: {NEEDS_DOWNLOAD}"),
        ("grid, seeds and epochs", grid("paper"), grid("book")),
        ("AWNN", awnn, "the same"),
        ("fixed baseline", "Errica et al.'s published GIN (widths tried: "
                           f"{paper_printed('awnn/table1/nci1-fixed-width')})",
         f"ours, trained on the same grid, every MLP {c['hidden']} wide"),
        ("runs", runs("paper"), runs("book")),
        ("cost (CPU, no early stop)", f"{budget('paper')['NCI1']['cpu_h']:,.0f} CPU-hours for NCI1 alone",
         f"{book_cost:.1f} CPU-hours"),
    ]
    return pd.DataFrame(rows, columns=["what", "paper (Table 5, App. C.4)", "this book"])


def cost_table(results: Sequence[RunResult]):
    """Measured CPU time of the stored runs (one thread), per dataset, MLP kind and machine: runs, mean epochs
    run (patience stops early), mean seconds per run and per epoch, and the total in CPU-hours."""
    import pandas as pd

    rows = []
    for d in DATASET_LABELS:
        for mlp in ARM_LABELS:
            arm = [r for r in results if r.config["dataset"] == d and r.config["mlp"] == mlp]
            for device in sorted({device_label(r.provenance) for r in arm}):
                runs = [r for r in arm if device_label(r.provenance) == device]
                cpu = np.asarray([r.metrics["cpu_s"] for r in runs], dtype=float)
                epochs = np.asarray([r.metrics["epochs_run"] for r in runs], dtype=float)
                rows.append({"dataset": DATASET_LABELS[d], "MLPs": ARM_LABELS[mlp], "machine": device,
                             "runs": len(runs), "epochs run": round(float(epochs.mean()), 1),
                             "CPU s per run": round(float(cpu.mean()), 1),
                             "CPU s per epoch": round(float((cpu / np.maximum(epochs, 1)).mean()), 3),
                             "CPU-hours": round(float(cpu.sum()) / 3600, 2)})
    return pd.DataFrame(rows)

