"""What the AWNN text chapter shows of the text study: Table 1's Multi30k row, the FFN grid, the "200x" claim.

The paper (Sec. 5, Table 1, App. C.3) trains a 6 + 6 Transformer on Multi30k with every
FFN fixed (widths 128-2048, grid search) or adaptive (Eqs. 11-14), and reports, over 10
runs, the test cross-entropy and the total FFN width::

    Multi30k (lower is better)   fixed 1.43 (0.4), width 24576   AWNN 1.51 (0.2), width 123.2 (187.9)

and reads it as "200x parameters less [...] for the feed-forward networks, achieving a
statistically comparable test loss" (Sec. 5; Sec. 6). One FFN ``d -> h -> d`` holds
``2 d h + h + d`` weights and biases (:func:`~hacn_core.awnn.studies.text.ffn_parameters`).

This module reads the stored runs of :mod:`hacn_core.awnn.studies.text` (``awnn-text``):

* :func:`coverage_table`: which arms and seeds are stored (the book's runs fill in over
  several background sessions);
* :func:`table1`: Table 1's Multi30k row beside ours (held-out loss, token accuracy, total
  FFN width and FFN parameters, mean (std) over seeds); :func:`grid_table`: every arm;
* :func:`comparison_table`, :func:`claims` and :func:`verdict_markdown`: the claim "far
  fewer FFN parameters at a comparable loss", judged by the rule below, on our runs and on
  the paper's own Table 1 numbers;
* :func:`width_table`: the learned width of every FFN (encoder, then decoder layers);
* :func:`setting_table`, :func:`budget_table`, :func:`cost_table`: the paper's setting
  beside ours, and the book's budget from the study's measured per-step cost;
* :func:`plot_grid` (loss against FFN width, the paper's two points beside) and
  :func:`plot_widths` (the learned widths over training and per layer).

"Comparable", as this module judges it. Let ``d = loss(adaptive) - loss(fixed)`` be the
difference of the mean test losses over seeds, with its 95% interval (Welch's, from the
seeds of both arms). The adaptive FFNs' loss is **comparable** when the interval's upper
end is at most :data:`COMPARABLE_MARGIN` (10%) of the fixed loss: the adaptive model is
not worse by more than the margin (a lower loss counts as comparable too; "far fewer
parameters at comparable loss" is a claim that shrinking costs nothing). It is **not
comparable** when the interval's lower end lies above the margin, and **cannot be told**
otherwise (the interval reaches past the margin, or there are too few seeds). When one arm
has a single seed (the book trains each fixed width once), Welch's interval does not
exist; that arm is then given the other arm's seed-to-seed spread (a pooled two-sample t
interval with the other arm's degrees of freedom), and the tables say so. The parameters
are **far fewer** when the fixed model holds at least :data:`FEWER_RATIO` (2) times the
adaptive mean's FFN parameters. The reference fixed model is the fixed width with the
lowest mean validation loss, as the paper's grid search selects it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from hacn_core.awnn import paper_items, quantile_width
from hacn_core.awnn.studies.common import paper_text
from hacn_core.awnn.studies.text import PAPER_SEEDS, ffn_parameters, paper_configs
from hacn_core.engine.results import RunResult
from hacn_core.engine.stats import Estimate, difference, difference_from_summary, difference_pooled, pooled_std
from hacn_core.engine.tables import ClaimTable, mean_std
from hacn_core.engine.tables import coverage_table as coverage
from hacn_core.engine.training import steps_per_epoch

#: the adaptive loss is comparable when the upper end of the 95% interval of (adaptive - fixed) is at most
#: this fraction of the fixed loss (module docstring)
COMPARABLE_MARGIN = 0.10
#: "far fewer" FFN parameters: the fixed model holds at least this many times the adaptive mean's
FEWER_RATIO = 2.0
#: Table 1's Multi30k items
PAPER_FIXED_LOSS = "awnn/table1/multi30k-fixed-loss"
PAPER_AWNN_LOSS = "awnn/table1/multi30k-awnn-loss"
PAPER_FIXED_WIDTH = "awnn/table1/multi30k-fixed-width"
PAPER_AWNN_WIDTH = "awnn/table1/multi30k-awnn-width"
PAPER_RATIO = "awnn/sec5/multi30k-ffn-parameter-ratio"
PAPER_SAMPLES = "awnn/table2/multi30k-samples"

Arm = tuple[str, int]  # (ffn, ffn_hidden): ("adaptive", 0) or ("fixed", width)


# ----------------------------------------------------------------------------- arms and runs


def arm_of(config: Mapping[str, Any]) -> Arm:
    """The arm of a run: ``("adaptive", 0)`` or ``("fixed", ffn_hidden)``."""
    return (config["ffn"], int(config["ffn_hidden"]))


def arm_label(arm: Arm) -> str:
    """How tables and legends name an arm: "adaptive" or "fixed 256"."""
    return "adaptive" if arm[0] == "adaptive" else f"fixed {arm[1]}"


def n_ffns(config: Mapping[str, Any]) -> int:
    """The number of FFNs of a configuration's Transformer: one per encoder and decoder layer."""
    return int(config["encoder_layers"] + config["decoder_layers"])


def arm_runs(results: Sequence[RunResult]) -> dict[Arm, list[RunResult]]:
    """The runs of every arm, in seed order: the adaptive arm first, then the fixed widths, narrowest first."""
    out: dict[Arm, list[RunResult]] = {}
    for r in results:
        out.setdefault(arm_of(r.config), []).append(r)
    order = sorted(out, key=lambda a: (a[0] != "adaptive", a[1]))
    return {a: sorted(out[a], key=lambda r: r.seed) for a in order}


def _values(runs: Sequence[RunResult], metric: str, scale: float = 1.0) -> list[float]:
    return [scale * float(r.metrics[metric]) for r in runs]


def selected_fixed(results: Sequence[RunResult]) -> int | None:
    """The fixed width with the lowest mean validation loss (the paper's grid search), None without fixed runs."""
    fixed = {a[1]: runs for a, runs in arm_runs(results).items() if a[0] == "fixed"}
    if not fixed:
        return None
    return min(fixed, key=lambda w: (float(np.mean(_values(fixed[w], "val_token_loss"))), w))


def coverage_table(planned: Sequence[Mapping[str, Any]], results: Sequence[RunResult]):
    """Per arm of ``planned`` (a profile's configurations): width per FFN, seeds planned and seeds stored."""
    def cell(c: Mapping[str, Any]) -> dict[str, Any]:
        arm = arm_of(c)
        width = f"learned, from {quantile_width(c['rate_init'], c['k'])}" if arm[0] == "adaptive" else str(arm[1])
        return {"FFNs": arm[0], "width per FFN": width}

    adaptive_first = sorted(planned, key=lambda c: (arm_of(c)[0] != "adaptive", arm_of(c)[1]))
    return coverage(adaptive_first, results, cell=cell)


# ----------------------------------------------------------------------------- Table 1 and the grid


def task_label(config: Mapping[str, Any]) -> str:
    """The task of a run in words."""
    if config["dataset"] == "Multi30k":
        return f"Multi30k {config['direction']}, GPT-2 tokens"
    return f"Tiny Shakespeare denoising (noise {config['noise_p']:g}), characters"


def _count_spread(values: Sequence[float]) -> str:
    """``"12,345 (678)"``: mean (sample std) with thousands separators; one value alone."""
    v = np.asarray(values, dtype=float)
    return f"{v.mean():,.0f}" if v.size == 1 else f"{v.mean():,.0f} ({v.std(ddof=1):,.0f})"


def paper_ffn_parameters(total_width: float, config: Mapping[str, Any] | None = None) -> float:
    """FFN parameters of FFNs of ``total_width`` neurons in all, at App. C.3's ``d = 512`` and 12 FFNs.

    ``sum_l (2 d h_l + h_l + d)`` is linear in the widths, so a mean total width (Table 1's
    123.2) counts as ``(2 d + 1) W + n_ffns d``.
    """
    c = config or paper_configs()[0]
    return (2 * c["d_model"] + 1) * total_width + n_ffns(c) * c["d_model"]


def _ours_row(arm: Arm, runs: Sequence[RunResult], selected: int | None) -> dict[str, Any]:
    label = arm_label(arm) + (" (lowest validation loss)" if arm[0] == "fixed" and arm[1] == selected else "")
    return {"model": label, "source": "ours", "task": task_label(runs[0].config),
            "test loss (nats/token)": mean_std(_values(runs, "test_token_loss"), 3),
            "token accuracy (%)": mean_std(_values(runs, "test_char_acc", 100.0), 1),
            "total FFN width": mean_std(_values(runs, "total_width"), 1),
            "FFN parameters": _count_spread(_values(runs, "ffn_params")), "runs": len(runs)}


def table1(results: Sequence[RunResult]):
    """Table 1's Multi30k row (the paper's fixed and AWNN Transformers) above ours: the fixed width with the
    lowest validation loss and the adaptive arm, mean (std) over seeds. The paper gives no token accuracy
    (None) and no std of the fixed width (one grid choice)."""
    import pandas as pd

    item = paper_items.item
    c = paper_configs()[0]
    task = "Multi30k (English-German), GPT-2 tokens"
    fixed_width, awnn = item(PAPER_FIXED_WIDTH).paper_value, item(PAPER_AWNN_WIDTH)
    n = len(PAPER_SEEDS)
    rows = [
        {"model": f"fixed {fixed_width / n_ffns(c):g} (grid search)", "source": "paper (Table 1)", "task": task,
         "test loss (nats/token)": paper_text(PAPER_FIXED_LOSS), "token accuracy (%)": None,
         "total FFN width": paper_text(PAPER_FIXED_WIDTH),
         "FFN parameters": f"{paper_ffn_parameters(fixed_width, c):,.0f}", "runs": n},
        {"model": "adaptive", "source": "paper (Table 1)", "task": task,
         "test loss (nats/token)": paper_text(PAPER_AWNN_LOSS), "token accuracy (%)": None,
         "total FFN width": paper_text(PAPER_AWNN_WIDTH),
         "FFN parameters": f"{paper_ffn_parameters(awnn.paper_value, c):,.0f} "
                           f"({(2 * c['d_model'] + 1) * awnn.paper_std:,.0f})", "runs": n},
    ]
    arms = arm_runs(results)
    selected = selected_fixed(results)
    for arm in (("fixed", selected), ("adaptive", 0)):
        if arm in arms:
            rows.append(_ours_row(arm, arms[arm], selected))
    return pd.DataFrame(rows)


def grid_table(results: Sequence[RunResult]):
    """Every stored arm: its validation and test loss, token accuracy, total FFN width, FFN parameters and
    selected epoch, mean (std) over seeds; the fixed width with the lowest validation loss is marked."""
    import pandas as pd

    selected = selected_fixed(results)
    rows = []
    for arm, runs in arm_runs(results).items():
        row = _ours_row(arm, runs, selected)
        rows.append({"model": row["model"], "validation loss": mean_std(_values(runs, "val_token_loss"), 3),
                     "test loss (nats/token)": row["test loss (nats/token)"],
                     "token accuracy (%)": row["token accuracy (%)"], "total FFN width": row["total FFN width"],
                     "FFN parameters": row["FFN parameters"],
                     "selected epoch": mean_std(_values(runs, "best_epoch"), 1),
                     "epochs run": mean_std(_values(runs, "epochs_run"), 1), "runs": len(runs)})
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------- the claim


def loss_difference(adaptive: Sequence[float], fixed: Sequence[float],
                    confidence: float = 0.95) -> tuple[Estimate, str]:
    """``mean(adaptive) - mean(fixed)`` with its interval, and how the interval was made (module docstring).

    Both arms with two seeds or more: Welch's interval. One arm with a single seed: it is
    given the other arm's sample std, and the half-width is ``t * s * sqrt(1/n_a + 1/n_f)``
    with the other arm's ``n - 1`` degrees of freedom. Both single: no interval (``nan``).
    """
    a, f = np.asarray(adaptive, dtype=float), np.asarray(fixed, dtype=float)
    if a.size == 0 or f.size == 0:
        raise ValueError("adaptive and fixed must both hold at least one loss")
    if a.size >= 2 and f.size >= 2:
        return difference(a, f, confidence), "Welch"
    diff = float(a.mean() - f.mean())
    if a.size == 1 and f.size == 1:
        return Estimate(diff, float("nan"), 1), "one seed each: no interval"
    donor, single = (a, "fixed") if f.size == 1 else (f, "adaptive")
    other = "adaptive" if single == "fixed" else "fixed"
    return difference_pooled(a, f, *pooled_std([donor]), confidence), \
        f"the {single} arm's one seed given the {other} seeds' spread"


def comparable(diff: Estimate, fixed_loss: float, margin: float | None = None) -> bool | None:
    """True when the interval's upper end is at most ``margin * fixed_loss``, False when its lower end is above
    it, None when it straddles the margin or has no width (module docstring; ``margin``: default
    :data:`COMPARABLE_MARGIN`)."""
    if not math.isfinite(diff.half_width):
        return None
    bound = (COMPARABLE_MARGIN if margin is None else margin) * fixed_loss
    if diff.mean + diff.half_width <= bound:
        return True
    if diff.mean - diff.half_width > bound:
        return False
    return None


def claim_holds(is_comparable: bool | None, ratio: float) -> bool | None:
    """The whole claim: far fewer parameters (``ratio >= FEWER_RATIO``) and a comparable loss."""
    if ratio < FEWER_RATIO or is_comparable is False:
        return False
    return is_comparable


def _signed(d: Estimate, digits: int = 3) -> str:
    if not math.isfinite(d.half_width):
        return f"{d.mean:+.{digits}f} (no interval)"
    return f"{d.mean:+.{digits}f} ± {d.half_width:.{digits}f}"


def comparison_table(results: Sequence[RunResult]):
    """The adaptive arm against every stored fixed width: FFN parameter ratio, test-loss difference with its
    interval, the margin, and the verdicts of the module's rule."""
    import pandas as pd

    arms = arm_runs(results)
    adaptive = arms.get(("adaptive", 0), [])
    if not adaptive:
        return pd.DataFrame()
    a_loss, a_params = _values(adaptive, "test_token_loss"), float(np.mean(_values(adaptive, "ffn_params")))
    selected = selected_fixed(results)
    rows = []
    for arm, runs in arms.items():
        if arm[0] != "fixed":
            continue
        f_loss = _values(runs, "test_token_loss")
        d, kind = loss_difference(a_loss, f_loss)
        ratio = float(np.mean(_values(runs, "ffn_params"))) / a_params
        ok = comparable(d, float(np.mean(f_loss)))
        rows.append({"fixed width": arm[1], "grid's choice": arm[1] == selected,
                     "FFN parameters, fixed ÷ adaptive": round(ratio, 2),
                     "test loss, adaptive − fixed": _signed(d), "interval": kind,
                     f"margin ({100 * COMPARABLE_MARGIN:g}% of the fixed loss)":
                         round(COMPARABLE_MARGIN * float(np.mean(f_loss)), 4),
                     "comparable loss": ok, "far fewer parameters": ratio >= FEWER_RATIO,
                     "claim holds": claim_holds(ok, ratio)})
    return pd.DataFrame(rows)


def paper_judgement() -> dict[str, Any]:
    """The module's rule applied to Table 1's own Multi30k numbers (mean (std) over 10 runs each)."""
    item = paper_items.item
    fixed, awnn = item(PAPER_FIXED_LOSS), item(PAPER_AWNN_LOSS)
    n = len(PAPER_SEEDS)
    d = difference_from_summary(awnn.paper_value, awnn.paper_std, n, fixed.paper_value, fixed.paper_std, n)
    ratio = paper_ffn_parameters(item(PAPER_FIXED_WIDTH).paper_value) / paper_ffn_parameters(
        item(PAPER_AWNN_WIDTH).paper_value)
    ok = comparable(d, fixed.paper_value)
    return {"difference": d, "margin": COMPARABLE_MARGIN * fixed.paper_value, "ratio": ratio, "comparable": ok,
            "holds": claim_holds(ok, ratio), "contains_zero": abs(d.mean) <= d.half_width}


def _reference(results: Sequence[RunResult]) -> dict[str, Any] | None:
    """The adaptive arm against the fixed width with the lowest validation loss (None if either is missing)."""
    arms = arm_runs(results)
    selected = selected_fixed(results)
    adaptive = arms.get(("adaptive", 0), [])
    if selected is None or not adaptive:
        return None
    fixed = arms[("fixed", selected)]
    f_loss = _values(fixed, "test_token_loss")
    d, kind = loss_difference(_values(adaptive, "test_token_loss"), f_loss)
    ratio = float(np.mean(_values(fixed, "ffn_params"))) / float(np.mean(_values(adaptive, "ffn_params")))
    ok = comparable(d, float(np.mean(f_loss)))
    return {"width": selected, "difference": d, "interval": kind, "margin": COMPARABLE_MARGIN * float(np.mean(f_loss)),
            "ratio": ratio, "comparable": ok, "holds": claim_holds(ok, ratio), "n_adaptive": len(adaptive),
            "n_fixed": len(fixed)}


def claims(results: Sequence[RunResult]):
    """The claim of Sec. 5 in parts, judged by the module's rule on our runs, and the rule on the paper's
    own Table 1 numbers; ``holds`` None where the runs cannot tell (or are not stored)."""
    item = paper_items.item
    table = ClaimTable()
    ref = _reference(results)
    paper = paper_judgement()
    ratio_paper = item(PAPER_RATIO).paper_value
    if ref is None:
        evidence = ["no adaptive and fixed runs stored"] * 2
        fewer, ok, whole = None, None, None
    else:
        evidence = [f"fixed ÷ adaptive FFN parameters = {ref['ratio']:.2f} (fixed {ref['width']} per FFN, "
                    f"{ref['n_fixed']} seed(s); adaptive mean, {ref['n_adaptive']} seed(s))",
                    f"adaptive − fixed {_signed(ref['difference'])} nats/token ({ref['interval']}); "
                    f"margin +{ref['margin']:.3f}"]
        fewer, ok, whole = ref["ratio"] >= FEWER_RATIO, ref["comparable"], ref["holds"]
    table.add(f"far fewer FFN parameters (fixed ÷ adaptive at least {FEWER_RATIO:g})",
              f"Sec. 5: '{ratio_paper:g}x parameters less' (Table 1 widths)", evidence[0], fewer)
    table.add(f"a comparable test loss (not worse by more than {100 * COMPARABLE_MARGIN:g}%)",
              "Sec. 5: 'statistically comparable'", evidence[1], ok)
    table.add("both: far fewer FFN parameters at a comparable loss", "Sec. 5, Sec. 6",
              "the two rows above", whole)
    table.add("the same rule on Table 1's own Multi30k numbers",
              f"Table 1: {paper_text(PAPER_FIXED_LOSS)} fixed, {paper_text(PAPER_AWNN_LOSS)} AWNN, "
              f"{len(PAPER_SEEDS)} runs each",
              f"fixed ÷ AWNN FFN parameters = {paper['ratio']:.0f}; AWNN − fixed "
              f"{_signed(paper['difference'], 2)} (Welch); "
              f"margin +{paper['margin']:.2f}", paper["holds"])
    return table.frame()


def verdict_markdown(results: Sequence[RunResult]) -> str:
    """The chapter's reading of the claim, in sentences whose every number is computed here."""
    paper = paper_judgement()
    d = paper["difference"]
    upper = d.mean + d.half_width
    paper_part = (f"Table 1's own numbers give AWNN − fixed = {d.mean:+.2f} ± {d.half_width:.2f} "
                  f"(Welch, {len(PAPER_SEEDS)} runs each): the interval "
                  f"{'contains' if paper['contains_zero'] else 'does not contain'} 0, and its upper end, "
                  f"{upper:+.2f}, is {'above' if upper > paper['margin'] else 'at or below'} the margin of "
                  f"+{paper['margin']:.2f}, so by this chapter's rule the paper's runs "
                  f"{_verdict_words(paper['comparable'])} a comparable loss.")
    ref = _reference(results)
    if ref is None:
        return ("No adaptive and fixed runs of this profile are stored, so the claim cannot be judged on our "
                "runs. " + paper_part)
    r = ref["difference"]
    interval = (f"no interval: {ref['interval']}" if not math.isfinite(r.half_width)
                else f"95% interval {r.mean - r.half_width:+.3f} to {r.mean + r.half_width:+.3f}; {ref['interval']}")
    return (f"**Verdict on our runs: {_claim_words(ref['holds'])}.** The fixed FFNs of width {ref['width']} (the "
            f"lowest validation loss of the grid) hold {ref['ratio']:.2f} times the FFN parameters of the adaptive "
            f"ones (paper: {paper_items.item(PAPER_RATIO).paper_value:g}). The adaptive test loss differs from theirs "
            f"by {r.mean:+.3f} nats per token ({interval}), against a margin of +{ref['margin']:.3f}. " + paper_part)


def _verdict_words(ok: bool | None) -> str:
    return {True: "show", False: "do not show", None: "cannot show"}[ok]


def _claim_words(holds: bool | None) -> str:
    return {True: "the claim holds", False: "the claim does not hold", None: "cannot be told"}[holds]


# ----------------------------------------------------------------------------- widths per layer


def layer_names(config: Mapping[str, Any]) -> list[str]:
    """The FFNs in the stored order: encoder layers first, then decoder layers."""
    return ([f"encoder {i + 1}" for i in range(config["encoder_layers"])]
            + [f"decoder {i + 1}" for i in range(config["decoder_layers"])])


def width_table(results: Sequence[RunResult]):
    """The adaptive arm's learned width of every FFN at the selected epoch and at the end, mean (std) over
    seeds, its ratio to the starting width, and the paper's mean width per FFN (Table 1 total / 12, against
    App. C.3's start)."""
    import pandas as pd

    runs = arm_runs(results).get(("adaptive", 0), [])
    if not runs:
        return pd.DataFrame()
    c = runs[0].config
    start = quantile_width(c["rate_init"], c["k"])
    selected = np.asarray([r.metrics["widths"] for r in runs], dtype=float)  # (seeds, FFNs)
    final = np.asarray([r.metrics["final_widths"] for r in runs], dtype=float)
    rows = [{"FFN": name, "start width": start, "learned width (selected epoch)": mean_std(selected[:, j], 1),
             "learned width (end)": mean_std(final[:, j], 1),
             "learned ÷ start": round(float(selected[:, j].mean()) / start, 3), "runs": len(runs)}
            for j, name in enumerate(layer_names(c))]
    pc = paper_configs()[0]
    p_start = quantile_width(pc["rate_init"], pc["k"])
    p_mean = paper_items.item(PAPER_AWNN_WIDTH).paper_value / n_ffns(pc)
    rows.append({"FFN": f"paper: mean of its {n_ffns(pc)} (Table 1 total ÷ {n_ffns(pc)})", "start width": p_start,
                 "learned width (selected epoch)": f"{p_mean:.1f}", "learned width (end)": None,
                 "learned ÷ start": round(p_mean / p_start, 3), "runs": len(PAPER_SEEDS)})
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------- setting and budget


def setting_table(paper: Mapping[str, Any], book: Mapping[str, Any], sizes: Mapping[str, int], vocab: int,
                  paper_vocab: int, planned: Mapping[str, Sequence[Mapping[str, Any]]]):
    """App. C.3's setting beside the book's, read off one configuration of each profile.

    ``sizes``: the book's train / val / test line counts; ``vocab`` and ``paper_vocab``: the
    vocabularies; ``planned``: each profile's configurations (for the arms and seeds).
    """
    import pandas as pd

    samples = paper_items.item(PAPER_SAMPLES)

    def model(c: Mapping[str, Any]) -> str:
        return (f"{c['encoder_layers']} + {c['decoder_layers']} layers, d {c['d_model']}, {c['heads']} heads, "
                f"dropout {c['dropout']:g}")

    def arms(configs: Sequence[Mapping[str, Any]]) -> tuple[str, str]:
        fixed = sorted({c["ffn_hidden"] for c in configs if c["ffn"] == "fixed"})
        seeds = {a: sorted({c["seed"] for c in configs if c["ffn"] == a}) for a in ("adaptive", "fixed")}
        return (", ".join(map(str, fixed)) + f" (seeds {_seed_range(seeds['fixed'])})",
                f"seeds {_seed_range(seeds['adaptive'])}")

    def start(c: Mapping[str, Any]) -> str:
        return f"rate {c['rate_init']:g}: {quantile_width(c['rate_init'], c['k'])} neurons per FFN at k = {c['k']:g}"

    def optim(c: Mapping[str, Any]) -> str:
        plateau = ("every epoch that does not lower the validation loss" if c["plateau_patience"] == 0 else
                   f"a plateau of the validation loss (patience {c['plateau_patience']} epochs)")
        return (f"Adam, lr {c['lr']:g}, weight decay {c['weight_decay']:g}, eps {c['eps']:g}; lr "
                f"×{c['plateau_factor']:g} after {plateau}")

    p_arms, b_arms = arms(planned["paper"]), arms(planned["book"])
    rows = [
        ("task", task_label(paper), task_label(book)),
        ("data", f"{samples.paper_value:,.0f} sentence pairs ({samples.note.rstrip('.')}; Table 2)",
         f"lines of {book['min_chars']}-{book['max_chars']} characters: {sizes['train']:,} / {sizes['val']:,} / "
         f"{sizes['test']:,} train / validation / test"),
        ("vocabulary", f"{paper_vocab:,} tokens (GPT-2's and a padding token)",
         f"{vocab} tokens: the characters, pad, start and end"),
        ("model", model(paper), model(book)),
        ("fixed FFN widths", p_arms[0], b_arms[0]),
        ("adaptive FFNs", f"{start(paper)}; {p_arms[1]}", f"{start(book)}; {b_arms[1]}"),
        ("optimizer", optim(paper), optim(book)),
        ("batch, epochs, patience", f"{paper['batch_size']}, {paper['epochs']}, {paper['patience']}",
         f"{book['batch_size']}, {book['epochs']}, {book['patience']}"),
        ("runs", str(len(planned["paper"])), str(len(planned["book"]))),
    ]
    return pd.DataFrame(rows, columns=["", "paper (App. C.3)", "this book"])


def _seed_range(seeds: Sequence[int]) -> str:
    if not seeds:
        return "none"
    if len(seeds) > 1 and list(seeds) == list(range(seeds[0], seeds[-1] + 1)):
        return f"{seeds[0]}-{seeds[-1]}"
    return ", ".join(map(str, seeds))


def budget_table(configs: Sequence[Mapping[str, Any]], n_train: int, step_s: Mapping[Arm, float],
                 eval_s: float):
    """The planned CPU time of ``configs`` from the measured cost of a step per arm (``step_s``) and of one
    evaluation (``eval_s``): every epoch run to the end (early stopping only shortens it), and an evaluation
    after every epoch and before the first (the trainer's records). One row per arm and a total."""
    import pandas as pd

    rows, total = [], 0.0
    for arm in sorted({arm_of(c) for c in configs}, key=lambda a: (a[0] != "adaptive", a[1])):
        cs = [c for c in configs if arm_of(c) == arm]
        c = cs[0]
        steps = steps_per_epoch(n_train, c["batch_size"])
        seconds = len(cs) * (c["epochs"] * steps * step_s[arm] + (c["epochs"] + 1) * eval_s)
        total += seconds
        rows.append({"arm": arm_label(arm), "runs": len(cs), "epochs": c["epochs"], "steps per epoch": steps,
                     "measured s per step": step_s[arm], "CPU-hours": round(seconds / 3600, 2)})
    rows.append({"arm": "all", "runs": len(configs), "epochs": None, "steps per epoch": None,
                 "measured s per step": None, "CPU-hours": round(total / 3600, 2)})
    return pd.DataFrame(rows)


def cost_table(results: Sequence[RunResult]):
    """Every stored run's measured CPU time: epochs run, steps, CPU seconds and seconds per step (the
    evaluations after every epoch included, so an upper bound on the step)."""
    import pandas as pd

    rows = []
    for arm, runs in arm_runs(results).items():
        for r in runs:
            steps = r.metrics["epochs_run"] * steps_per_epoch(r.metrics["n_train"], r.config["batch_size"])
            rows.append({"arm": arm_label(arm), "seed": r.seed, "epochs run": r.metrics["epochs_run"],
                         "steps": steps, "CPU s": r.metrics["cpu_s"],
                         "CPU s per step (evaluations included)": round(r.metrics["cpu_s"] / steps, 3),
                         "date": str(r.provenance.get("date", "?"))[:10]})
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------- figures


def width_ratio(runs: Sequence[RunResult]) -> np.ndarray:
    """Each run's mean FFN width divided by its model width ``d`` (the grid's scale-free position)."""
    return np.asarray([r.metrics["total_width"] / (n_ffns(r.config) * r.config["d_model"]) for r in runs])


def plot_grid(results: Sequence[RunResult]):
    """Test loss against the mean FFN width per layer in units of ``d``. Left: ours, the fixed grid (mean and
    std over seeds, joined) and the adaptive seeds (dots) with their mean (square, std in both directions).
    Right: Table 1's Multi30k points (fixed 2048 and AWNN, with their std). The book's grid is App. C.3's
    divided by 8 in width and in ``d``, so both panels share the x axis."""
    from matplotlib.ticker import FuncFormatter

    from hacn_core.engine import plots

    fig, axes = plots.figure(ncols=2, height=2.9, sharex=True)
    ours, theirs = axes[0, 0], axes[0, 1]
    colours = plots.categorical(["fixed", "adaptive"])
    arms = arm_runs(results)
    fixed = [(a, runs) for a, runs in arms.items() if a[0] == "fixed"]
    if fixed:
        x = np.asarray([width_ratio(runs).mean() for _, runs in fixed])
        loss = [np.asarray(_values(runs, "test_token_loss")) for _, runs in fixed]
        err = [v.std(ddof=1) if v.size > 1 else 0.0 for v in loss]
        ours.errorbar(x, [v.mean() for v in loss], yerr=err, color=colours["fixed"], marker="o", markersize=4,
                      capsize=3, label="fixed FFNs")
    adaptive = arms.get(("adaptive", 0), [])
    if adaptive:
        x, y = width_ratio(adaptive), np.asarray(_values(adaptive, "test_token_loss"))
        ours.plot(x, y, ".", color=colours["adaptive"], alpha=0.6, label="adaptive FFNs, one seed each")
        ours.errorbar([x.mean()], [y.mean()], xerr=[x.std(ddof=1) if x.size > 1 else 0.0],
                      yerr=[y.std(ddof=1) if y.size > 1 else 0.0], color=colours["adaptive"], marker="s",
                      markersize=5, capsize=3, linestyle="none", label="adaptive FFNs, mean")
    item = paper_items.item
    c = paper_configs()[0]
    scale = n_ffns(c) * c["d_model"]
    for key_w, key_l, name in ((PAPER_FIXED_WIDTH, PAPER_FIXED_LOSS, "fixed"), (PAPER_AWNN_WIDTH, PAPER_AWNN_LOSS,
                                                                               "AWNN")):
        w, loss = item(key_w).paper_value / scale, item(key_l)
        plots.paper_point(theirs, w, loss.paper_value, yerr=loss.paper_std,
                          label="paper (Table 1, Multi30k)" if name == "fixed" else "_nolegend_")
        theirs.annotate(name, xy=(w, loss.paper_value), xytext=(5, 4), textcoords="offset points",
                        color=plots.PAPER_COLOUR, fontsize=plots.FONT_SIZES["legend.fontsize"])
    for ax in (ours, theirs):
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"1/{1 / v:g}" if 0 < v < 1 else f"{v:g}"))
        ax.set_xlabel("mean FFN width ÷ model width d")
    ours.set_ylabel("test loss (nats per character)" if results and results[0].config["dataset"] != "Multi30k"
                    else "test loss (nats per token)")
    ours.set_title("ours")
    theirs.set(ylabel="test loss (nats per GPT-2 token)", title="paper (Table 1)")
    plots.figure_legend(fig, axes[0], ncols=2)
    return fig


def plot_widths(results: Sequence[RunResult]):
    """Left: the adaptive arm's total FFN width over epochs (mean and standard error over seeds), the fixed
    arms' totals as dashed lines. Right: the learned width of every FFN at the selected epoch, one dot per
    seed and a bar for the mean, the starting width as a dotted line."""
    from matplotlib.ticker import MaxNLocator

    from hacn_core.engine import plots

    fig, axes = plots.figure(ncols=2, height=2.9)
    arms = arm_runs(results)
    colours = plots.categorical([arm_label(a) for a in arms])
    runs = arms.get(("adaptive", 0), [])
    left, right = axes[0, 0], axes[0, 1]
    if runs:
        length = min(len(r.curves["record_epoch"]) for r in runs)  # early stopping may end seeds apart
        x = np.asarray(runs[0].curves["record_epoch"][:length])
        totals = np.asarray([[sum(w) for w in r.curves["widths"][:length]] for r in runs], dtype=float)
        plots.with_ci(left, x, totals, "adaptive", color=colours["adaptive"])
    for arm, fixed in arms.items():
        if arm[0] == "fixed":
            left.axhline(fixed[0].metrics["total_width"], color=colours[arm_label(arm)], linestyle="--",
                         linewidth=1.0, label=arm_label(arm))
    left.set(xlabel="epoch", ylabel="total FFN width (neurons)")
    left.xaxis.set_major_locator(MaxNLocator(integer=True))
    left.set_yscale("log")
    if runs:
        c = runs[0].config
        names = layer_names(c)
        w = np.asarray([r.metrics["widths"] for r in runs], dtype=float)  # (seeds, FFNs)
        pos = np.arange(len(names))
        right.bar(pos, w.mean(0), color=colours["adaptive"], alpha=0.35, width=0.6)
        for row in w:
            right.plot(pos, row, ".", color=colours["adaptive"], label="_nolegend_")
        right.axhline(quantile_width(c["rate_init"], c["k"]), color="0.5", linestyle=":", linewidth=1.0,
                      label="starting width per FFN")
        right.set_xticks(pos, [n.replace("encoder ", "enc ").replace("decoder ", "dec ") for n in names])
    right.set(xlabel="FFN", ylabel="learned width (neurons)")
    plots.figure_legend(fig, axes[0], ncols=3)
    return fig
