"""What the chapter "Why the residual weights learn" shows of ``hacn-mechanism``: tables, claims, figures.

Every number comes from the stored runs (:mod:`hacn_core.hacn.studies.mechanism`): the per-window sums
of each residual scalar's gradient and of its three parts, pooled over a whole run. A layer's gradient
has a *detectable direction* when its mean over the run differs from 0 at the 5% level,
``|mean| / (std / sqrt(n)) > 1.96``, i.e. when its signal-to-noise ratio exceeds ``1.96 / sqrt(n)``
(:func:`detectable`); for a gradient with no direction, 5% of layers pass by chance. Statistics are
taken over layers ``1..L-1``: Eq. 2's ``a_L`` gets no gradient at all (Algorithm 1 drops ``x_L``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from matplotlib import ticker

from hacn_core import catalog
from hacn_core.engine import plots
from hacn_core.engine.registry import stored_runs
from hacn_core.engine.results import RunResult
from hacn_core.engine.tables import ClaimTable, house_table
from hacn_core.hacn.connectivity import seed_correlation, total_connectivity_strength
from hacn_core.hacn.studies import mechanism as mech
from hacn_core.hacn.studies import mixer
from hacn_core.hacn.studies import mixer_report as hmr

#: (rule, mu, Mixer layer) -> the label a reader sees
VARIANT_LABELS: dict[tuple[str, float, str], str] = {
    ("hacn", 0.25, "paper"): "Eq. 2, μ 0.25", ("hacn_code_mixer", 0.25, "paper"): "code rule",
    ("hacn_split_gain", 0.25, "paper"): "split gain", ("hacn", 0.75, "paper"): "Eq. 2, μ 0.75",
    ("hacn", 1.0, "paper"): "Eq. 2, μ 1", ("hacn", 0.25, "code"): "Eq. 2, code's layer",
}
LAYER_LABEL = VARIANT_LABELS[("hacn", 0.25, "code")]
#: the scalars a variant's table rows show: ``alpha`` (a_i) for all, ``beta`` (b_i) for the split-gain rule
SCALAR_LABELS: dict[str, str] = {"alpha": "a (residual)", "beta": "b (gain on t)"}
Z_95 = 1.96  # two-sided 5% level of the mean-is-zero test
MISSING_NOTE = ("one seed stored, so no cross-seed correlation; or a cell the paper gives no value for "
                "(Table 3 and Sec. 4 give Γ and the 92% for μ 0.25 only)")


def load(profile: str) -> list[RunResult]:
    """The study's runs: trained at the smoke scale (seconds), the stored ones otherwise (never trains)."""
    if profile == "smoke":
        return catalog.run(mech.EXPERIMENT_ID, profile, progress=False)
    return stored_runs(mech.EXPERIMENT, profile)


def variant(run: RunResult) -> tuple[str, float, str]:
    return run.config["rule"], float(run.config["alpha_mu"]), run.config.get("block", "paper")


def by_variant(runs: Sequence[RunResult]) -> dict[tuple[str, float, str], list[RunResult]]:
    """The runs of each variant present, in :data:`~hacn_core.hacn.studies.mechanism.VARIANTS` order, by seed."""
    groups = {v: sorted((r for r in runs if variant(r) == v), key=lambda r: r.config["seed"]) for v in mech.VARIANTS}
    return {v: rs for v, rs in groups.items() if rs}


def _layers(run: RunResult) -> int:
    return int(run.config["num_layers"])


def run_statistics(run: RunResult, name: str = "alpha") -> dict[str, np.ndarray]:
    """Per layer ``1..L-1``, over the whole run: ``snr``, ``sign_agreement``, ``drift_efficiency``,
    ``mean_g``, ``total_da`` (:func:`~hacn_core.hacn.studies.mechanism.gradient_statistics`), and ``n``."""
    sums = mech.pooled(run.curves, name)
    stats = mech.gradient_statistics(sums)
    inner = slice(0, _layers(run) - 1)
    return {k: np.asarray(v[inner], dtype=float) for k, v in stats.items()} | {"n": np.asarray(sums["n"])}


def detectable(snr: np.ndarray, steps: int) -> np.ndarray:
    """Layers whose mean gradient differs from 0 at the 5% level: ``snr > 1.96 / sqrt(n)``."""
    return snr > Z_95 / math.sqrt(steps)


def sign_test(moves: np.ndarray) -> float:
    """Two-sided sign test over layers: the probability, were up and down equally likely for every layer,
    of as many or more layers moving the same way as the majority did (binomial with p = 1/2)."""
    moves = moves[np.isfinite(moves) & (moves != 0)]
    n, up = len(moves), int((moves > 0).sum())
    if n == 0:
        return math.nan
    k = max(up, n - up)
    return min(1.0, 2 * sum(math.comb(n, j) for j in range(k, n + 1)) / 2**n)


def weights(run: RunResult, name: str = "alpha", at: int = -1) -> np.ndarray:
    """The scalars ``name`` of every layer at record ``at`` (``-1``: the end)."""
    return np.array([run.curves[f"param/stack.{name}.{i}"][at] for i in range(_layers(run))])


def statistics_table(runs: Sequence[RunResult]):
    """One row per variant and probed scalar: steps, seeds, the medians over layers and seeds of SNR, sign
    agreement and drift efficiency, the share of layers with a detectable direction, layers that moved up,
    Gamma at the start and the end (mean over seeds) and the cross-seed Pearson correlation of the final weights."""
    import pandas as pd

    rows = []
    for v, rs in by_variant(runs).items():
        for name in ("alpha", "beta") if v[0] == "hacn_split_gain" else ("alpha",):
            stats = [run_statistics(r, name) for r in rs]
            n = int(stats[0]["n"])
            # a_L left out, as the converged study's Pearson does (under Eq. 2 it is its initial draw)
            pearson = seed_correlation(np.array([weights(r, name)[:-1] for r in rs])) if len(rs) >= 2 else math.nan
            rows.append({
                "rule": VARIANT_LABELS[v], "scalar": SCALAR_LABELS[name], "seeds": len(rs), "steps": n,
                "SNR": float(np.nanmedian(np.concatenate([s["snr"] for s in stats]))),
                "noise floor": mech.snr_noise_floor(n),
                "sign agreement (%)": 100 * float(np.nanmedian(np.concatenate([s["sign_agreement"] for s in stats]))),
                "drift efficiency": float(np.nanmedian(np.concatenate([s["drift_efficiency"] for s in stats]))),
                "direction found (%)": 100 * float(np.mean(np.concatenate(
                    [detectable(s["snr"], n) for s in stats]))),
                "moved up (%)": 100 * float(np.mean(np.concatenate([s["total_da"] > 0 for s in stats]))),
                "moved up, p": sign_test(np.concatenate([s["total_da"] for s in stats])),
                "Γ start": float(np.mean([total_connectivity_strength(weights(r, name, 0)) for r in rs])),
                "Γ end": float(np.mean([total_connectivity_strength(weights(r, name)) for r in rs])),
                "Pearson (%)": 100 * pearson,
            })
    return pd.DataFrame(rows)


def parts_table(runs: Sequence[RunResult]):
    """One row per variant: the push each part of the gradient gives the residual scalars (minus the mean
    gradient over the run, summed over layers ``1..L-1`` and averaged over seeds, in units of 1e-3), and the
    share of the two token-mixing parts in the whole push. Under Eq. 2 only ``residual`` reaches ``a_i``;
    the other two are what a gain on ``t`` would receive."""
    import pandas as pd

    rows = []
    for v, rs in by_variant(runs).items():
        push = {p: [] for p in mech.PARTS}
        for r in rs:
            sums = mech.pooled(r.curves, "parts")
            for p in mech.PARTS:
                push[p].append(-sum(sums[p][: _layers(r) - 1]) / sums["n"] * 1e3)
        means = {p: float(np.mean(push[p])) for p in mech.PARTS}
        total = sum(means.values())
        rows.append({"rule": VARIANT_LABELS[v], "seeds": len(rs),
                     "gain on t, readout": means["readout_t"], "gain on t, stream": means["stream_t"],
                     "residual path": means["residual"], "sum": total,
                     "t's share (%)": 100 * (means["readout_t"] + means["stream_t"]) / total if total else math.nan})
    return pd.DataFrame(rows)


def show(frame, *, caption: str = "", note: str = ""):
    """A table of this chapter as the house shows it."""
    formats = {c: ".3f" for c in ("SNR", "noise floor", "drift efficiency", "Γ start", "Γ end", "Γ", "paper Γ")}
    formats |= {c: ".0f" for c in ("sign agreement (%)", "direction found (%)", "moved up (%)", "Pearson (%)",
                                   "t's share (%)", "paper Pearson (%)")}
    formats |= {c: "+.2f" for c in ("gain on t, readout", "gain on t, stream", "residual path", "sum")}
    formats["moved up, p"] = ".2g"
    return house_table(frame, formats={c: f for c, f in formats.items() if c in frame.columns},
                       missing_note=MISSING_NOTE, caption=caption, note=note)


def converged_table(profile: str):
    """What the converged study (``hacn-mixer-long``, 30 epochs) ended with, per rule and task: Gamma (mean
    over seeds) and the mean pairwise Pearson correlation of the converged ``a`` without ``a_L``, beside
    Table 3's Gamma and Sec. 4's 92%; empty when none of its runs is stored at ``profile``."""
    import pandas as pd

    full, _ = hmr.split_budgets(catalog.stored(mixer.LONG_ID, profile))
    paper_gamma = {10: 0.428, 2: 0.326}  # H-ACN Table 3 (CIFAR-10, CIFAR-2)
    rows = []
    for v in VARIANT_LABELS:
        if v[0] == "hacn_split_gain" or v[2] != "paper":  # not trained to convergence by that study
            continue
        for k in (10, 2):
            rs = [r for r in full if r.config.get("rule") == v[0] and r.config.get("alpha_mu") == v[1]
                  and r.config["num_classes"] == k]
            if not rs:
                continue
            pairs = hmr.pair_pearsons(rs)
            rows.append({"rule": VARIANT_LABELS[v], "classes": k, "seeds": len(rs),
                         "Γ": float(np.mean([r.metrics["gamma"] for r in rs])),
                         "paper Γ": paper_gamma[k] if v[1] == 0.25 else math.nan,
                         "Pearson (%)": float(np.mean(pairs)) if pairs else math.nan,
                         "paper Pearson (%)": 92.0 if (v[1], k) == (0.25, 10) else math.nan})
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------- claims


def _row(frame, label: str, scalar: str = "a (residual)"):
    hit = frame[(frame["rule"] == label) & (frame["scalar"] == scalar)]
    return None if hit.empty else hit.iloc[0]


def verdicts(runs: Sequence[RunResult]):
    """The chapter's claims, each judged on the runs (a :class:`~hacn_core.engine.tables.ClaimTable` frame).

    1. Eq. 2's ``a_i`` get no consistent push at ``mu = 0.25``: at most 10% of layers show a direction
       (5% by chance). 2. The code rule's ``a_i`` do: at least half of the layers show one and at least
       75% move up. 3. A larger start gives Eq. 2's weights a direction: more layers show one at
       ``mu = 1`` than at 0.25. 4. The split-gain rule's ``b_i`` (gain on ``t``) get a consistent push
       (at least half of the layers). 5-6. Under Eq. 2 and under the code's rule, the layers move the
       same way (the two-sided sign test over layers, :func:`sign_test`, at p < 0.05): per-step directions
       near the noise floor can still add up when they share a sign across layers. 7. In the public code's
       layer, whose channel part carries its own skip from ``x_{i-1}``, Eq. 2's weights are pushed down
       together: at most 25% of layers move up, at p < 0.05 by the same sign test. Undecided (None) when a
       variant's runs are not stored."""
    stats = statistics_table(runs)
    table = ClaimTable()
    eq2, code, one, b = (_row(stats, "Eq. 2, μ 0.25"), _row(stats, "code rule"), _row(stats, "Eq. 2, μ 1"),
                         _row(stats, "split gain", "b (gain on t)"))

    def share(row) -> str:
        return (f"{row['direction found (%)']:.0f}% of layers show a direction (SNR {row['SNR']:.3f}, "
                f"noise floor {row['noise floor']:.3f}, {row['seeds']} seed(s))")

    table.add("Under Eq. 2 from μ 0.25 the residual weights' gradient has no consistent direction",
              "Sec. 4 (Γ settles, Table 3)", share(eq2) if eq2 is not None else "not stored",
              None if eq2 is None else bool(eq2["direction found (%)"] <= 10), under="Eq. 2")
    table.add("Under the code's rule the residual weights are pushed one way, upwards",
              "public Mixer code", (share(code) + f"; {code['moved up (%)']:.0f}% moved up") if code is not None
              else "not stored",
              None if code is None else bool(code["direction found (%)"] >= 50 and code["moved up (%)"] >= 75),
              under="the public code's rule")
    table.add("A larger start (μ 1) gives Eq. 2's weights a direction they lack at μ 0.25", "Table 2, Fig. 5",
              f"{one['direction found (%)']:.0f}% of layers at μ 1 vs {eq2['direction found (%)']:.0f}% at μ 0.25"
              if one is not None and eq2 is not None else "not stored",
              None if one is None or eq2 is None else bool(one["direction found (%)"] > eq2["direction found (%)"]),
              under="Eq. 2")
    table.add("A gain of its own on the token-mixing output is pushed consistently", "split-gain rule (ours)",
              share(b) if b is not None else "not stored",
              None if b is None else bool(b["direction found (%)"] >= 50), under="the split-gain rule")
    for label, under in (("Eq. 2, μ 0.25", "Eq. 2"), ("code rule", "the public code's rule")):
        row = _row(stats, label)
        table.add(f"Across layers, the weights move the same way ({label})", "sign test over layers",
                  f"{row['moved up (%)']:.0f}% of layers moved up, p = {row['moved up, p']:.2g}"
                  if row is not None else "not stored",
                  None if row is None else bool(row["moved up, p"] < 0.05), under=under)
    layer = _row(stats, LAYER_LABEL)
    table.add("In the public code's layer, Eq. 2's residual weights are pushed down together",
              "hacn-code-recipe's ablations", f"{layer['moved up (%)']:.0f}% of layers moved up, "
              f"p = {layer['moved up, p']:.2g}" if layer is not None else "not stored",
              None if layer is None else bool(layer["moved up (%)"] <= 25 and layer["moved up, p"] < 0.05),
              under="Eq. 2 in the public code's layer")
    return table.frame()


def _p(p: float) -> str:
    return f"p = {p:.2g}"


def reading(runs: Sequence[RunResult]) -> str:
    """The chapter's explanation, as Markdown, written from the stored runs' numbers (the statistics and parts
    tables); each sentence is chosen by what the numbers show. Empty when a variant it reads is not stored."""
    stats, parts = statistics_table(runs), parts_table(runs)
    eq2, code, one = _row(stats, "Eq. 2, μ 0.25"), _row(stats, "code rule"), _row(stats, "Eq. 2, μ 1")
    split_a, split_b = _row(stats, "split gain"), _row(stats, "split gain", "b (gain on t)")
    if any(r is None for r in (eq2, code, one, split_a, split_b)):
        return ""
    push = {r["rule"]: r for _, r in parts.iterrows()}
    pe, pc, p1 = push["Eq. 2, μ 0.25"], push["code rule"], push["Eq. 2, μ 1"]
    common = {"Eq. 2": eq2["moved up, p"] < 0.05, "code": code["moved up, p"] < 0.05}
    t_share = pc["t's share (%)"]
    out = [
        f"**Step by step, neither rule gives the weights much to follow.** The median signal-to-noise ratio "
        f"is {eq2['SNR']:.3f} under Eq. 2 and {code['SNR']:.3f} under the public rule, against a noise floor "
        f"of {eq2['noise floor']:.3f}; {eq2['direction found (%)']:.0f}% and {code['direction found (%)']:.0f}% "
        f"of layers show a direction at the 5% level (5% would by chance), and the sign agreement is "
        f"{eq2['sign agreement (%)']:.0f}% and {code['sign agreement (%)']:.0f}%, close to a coin.",
        f"**What differs is whether the small mean is the same for every layer.** Under the public rule "
        f"{code['moved up (%)']:.0f}% of the layers end above their start ({_p(code['moved up, p'])}, sign test "
        f"over the layers of {code['seeds']} seeds); under Eq. 2 {eq2['moved up (%)']:.0f}% do "
        f"({_p(eq2['moved up, p'])})"
        + (", as a coin would." if not common["Eq. 2"] else ".")
        + f" AdamW moves a weight by about the learning rate per step whatever the size of its gradient, so a "
          f"mean that keeps one sign over hundreds of steps adds up (drift efficiency {code['drift efficiency']:.2f} "
          f"under the public rule against {eq2['drift efficiency']:.2f} under Eq. 2) and {'Γ rises' if code['Γ end'] > code['Γ start'] else 'Γ moves'} "
          f"from {code['Γ start']:.3f} to {code['Γ end']:.3f} in these {code['steps']:,} steps, where Eq. 2's goes "
          f"from {eq2['Γ start']:.3f} to {eq2['Γ end']:.3f}.",
        f"**Where the public rule's push comes from.** Summed over layers 1..L−1 it is {pc['sum']:+.1f} "
        f"(units of 10⁻³, minus the mean gradient). {t_share:.0f}% of it is a_i's job as a gain on the "
        f"token-mixing output (readout {pc['gain on t, readout']:+.1f}, stream {pc['gain on t, stream']:+.1f}), and "
        f"{pc['residual path']:+.1f} comes through the residual path, which under this rule carries t + x. "
        f"Under Eq. 2 the residual path, the only part that reaches a_i, pushes by {pe['residual path']:+.1f}; the "
        f"gain-on-t parts, which Eq. 2 does not give a_i, would have pushed by "
        f"{pe['gain on t, readout'] + pe['gain on t, stream']:+.1f}.",
        ("**Given their own gain, both jobs are pushed.**" if max(split_a["moved up, p"], split_b["moved up, p"]) < 0.05
         else "**Given their own gain, the two jobs are pushed differently.**")
        + f" Under the split-gain rule the gain on t (b_i) "
        f"ends above its start in {split_b['moved up (%)']:.0f}% of the layers ({_p(split_b['moved up, p'])}) "
        f"and the residual weight a_i in {split_a['moved up (%)']:.0f}% ({_p(split_a['moved up, p'])}).",
        ("**A larger start gives Eq. 2's weights a direction.**" if one["direction found (%)"] > eq2["direction found (%)"]
         else "**A larger start does not give Eq. 2's weights a clearer direction.**")
        + f" From μ 1, {one['direction found (%)']:.0f}% "
        f"of layers show one (against {eq2['direction found (%)']:.0f}% from μ 0.25), and "
        f"{100 - one['moved up (%)']:.0f}% of the layers move {'down' if one['moved up (%)'] < 50 else 'up'}: "
        f"the residual path pushes by {p1['residual path']:+.1f}. The weights' end values then agree across "
        f"seeds at {one['Pearson (%)']:.0f}% (Pearson, a_1..a_15), against {eq2['Pearson (%)']:.0f}% from μ 0.25.",
    ]
    layer = _row(stats, LAYER_LABEL)
    together = layer is not None and layer["moved up, p"] < 0.05
    way = "down" if layer is not None and layer["moved up (%)"] < 50 else "up"
    if layer is not None:
        pl = push[LAYER_LABEL]
        out.append(
            (f"**In the public code's layer, Eq. 2's weights are pushed {way} together.**" if together
             else "**In the public code's layer, Eq. 2's weights share no direction either.**")
            + f" That layer ends its channel part with a skip from its input, c = DLN(… + xᵢ₋₁), so the stream "
            f"carries xᵢ₋₁ whatever a_i is, and a_i xᵢ₋₁ adds a second copy. From the same draw, the median "
            f"signal-to-noise ratio is {layer['SNR']:.3f} ({layer['direction found (%)']:.0f}% of layers show a "
            f"direction, sign agreement {layer['sign agreement (%)']:.0f}%), "
            f"{layer['moved up (%)']:.0f}% of the layers end above their start ({_p(layer['moved up, p'])}), the "
            f"residual path pushes by {pl['residual path']:+.1f} (against {pe['residual path']:+.1f} in the "
            f"paper's layer), the drift efficiency is {layer['drift efficiency']:.2f}, and Γ goes from "
            f"{layer['Γ start']:.3f} to {layer['Γ end']:.3f} in these {layer['steps']:,} steps.")
    if common["code"] and not common["Eq. 2"]:
        out.append("**In short.** Under Eq. 2 from μ 0.25 a residual weight receives one gradient, "
                   "⟨∂L/∂xᵢ, xᵢ₋₁⟩, whose mean is small beside its step-to-step spread and does not share "
                   "a sign across layers and seeds: AdamW turns it into a walk, and Γ stays where the "
                   "initialisation put it. The public rule adds a_i's second job, a gain on the token-mixing "
                   "output, and makes the residual path carry t + x: both push the same way in almost every "
                   "layer, so the weights rise together."
                   + (" In the public code's layer, where the layer's own skip already carries xᵢ₋₁, Eq. 2's "
                      "residual path pushes the weights down together instead."
                      if together and way == "down" else ""))
    return "\n\n".join(out)


def retrace_gap(runs: Sequence[RunResult]) -> float | None:
    """The largest difference between a run's Gamma and the Gamma its converged twin (the same configuration
    uncut: ``hacn-mixer-long``'s, or for the code's layer ``hacn-code-recipe``'s ablation) recorded at the
    same step (those studies store Gamma every 50 steps, the weights only at the end); None when no twin
    is stored."""
    from hacn_core.hacn.studies import code_recipe

    stored = stored_runs(mixer.LONG, "book") + stored_runs(code_recipe.EXPERIMENT, "book")
    gaps = []
    for run in runs:
        uncut = {k: v for k, v in run.config.items() if k != "stop_after_epochs"}
        twin = [s for s in stored if s.config == uncut]
        if not twin:
            continue
        at = dict(zip(twin[0].curves["record_step"], twin[0].curves["gamma"]))
        for k, step in enumerate(run.curves["record_step"]):
            if step in at:
                gaps.append(abs(total_connectivity_strength(weights(run, at=k)) - at[step]))
    return max(gaps) if gaps else None


# ----------------------------------------------------------------------------- figures


def plot_consistency(runs: Sequence[RunResult]):
    """(a) Each layer's gradient SNR over the run (median over seeds) per variant, with the 5% detection
    line; (b) each layer's sign agreement, with 50% (a coin) marked."""
    groups = by_variant(runs)
    colours = plots.categorical(VARIANT_LABELS.values())  # one colour per rule in both figures
    fig, axes = plots.figure(ncols=2, height=3.4)
    (ax_snr, ax_sign) = axes[0]
    steps = None
    for v, rs in groups.items():
        stats = [run_statistics(r) for r in rs]
        steps = int(stats[0]["n"])
        layers = np.arange(1, len(stats[0]["snr"]) + 1)
        label = VARIANT_LABELS[v]
        ax_snr.plot(layers, np.nanmedian([s["snr"] for s in stats], axis=0), marker="o", ms=3,
                    color=colours[label], label=label)
        ax_sign.plot(layers, 100 * np.nanmedian([s["sign_agreement"] for s in stats], axis=0), marker="o", ms=3,
                     color=colours[label], label=label)
    if steps:
        ax_snr.axhline(Z_95 / math.sqrt(steps), color="0.4", ls=":", lw=1)
        ax_snr.annotate("5% detection line", (1, Z_95 / math.sqrt(steps)), textcoords="offset points",
                        xytext=(0, 4), fontsize=8, color="0.3")
    ax_sign.axhline(50, color="0.4", ls=":", lw=1)
    ax_snr.set(xlabel="layer i", ylabel="|mean g| / std g", title="(a) signal-to-noise of a_i's gradient",
               yscale="log")
    ax_snr.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax_snr.yaxis.set_minor_formatter(ticker.NullFormatter())
    ax_sign.set(xlabel="layer i", ylabel="steps with the mean's sign (%)", title="(b) sign agreement")
    for ax in (ax_snr, ax_sign):
        plots.integer_ticks(ax)
    plots.figure_legend(fig, where="below")
    return fig


def plot_paths_and_parts(runs: Sequence[RunResult]):
    """(a) The residual weights of seed 0 over the steps, Eq. 2 at μ 0.25 against the code's rule (one thin
    line per layer); (b) the code rule's push on each ``a_i`` split into its three parts (mean over seeds)."""
    groups = by_variant(runs)
    fig, axes = plots.figure(ncols=2, height=3.4)
    ax_path, ax_parts = axes[0]
    shown = [v for v in (("hacn", 0.25), ("hacn_code_mixer", 0.25)) if v in groups]
    colours = plots.categorical(VARIANT_LABELS.values())
    for v in shown:
        run = groups[v][0]
        steps = run.curves["record_step"]
        for i in range(_layers(run) - 1):
            ax_path.plot(steps, run.curves[f"param/stack.alpha.{i}"], color=colours[VARIANT_LABELS[v]], lw=0.8,
                         alpha=0.7, label=VARIANT_LABELS[v] if i == 0 else None)
    ax_path.set(xlabel="optimizer step", ylabel="a_i", title=f"(a) a_1..a_(L-1), seed {groups[shown[0]][0].config['seed']}"
                if shown else "(a) a_i over training")
    ax_path.legend(fontsize=8, loc="upper left")
    code = groups.get(("hacn_code_mixer", 0.25), [])
    if code:
        layers = np.arange(1, _layers(code[0]))
        names = {"readout_t": "gain on t, readout", "stream_t": "gain on t, stream", "residual": "residual path"}
        part_colours = dict(zip(names.values(), plots.grey_ramp([0, 1, 2]).values()))  # greys: not rules
        bottom_pos, bottom_neg = np.zeros(len(layers)), np.zeros(len(layers))
        for p, label in names.items():
            push = np.mean([-np.asarray(mech.pooled(r.curves, "parts")[p][: len(layers)])
                            / mech.pooled(r.curves, "parts")["n"] for r in code], axis=0) * 1e3
            bottom = np.where(push >= 0, bottom_pos, bottom_neg)
            ax_parts.bar(layers, push, bottom=bottom, color=part_colours[label], label=label, width=0.8)
            bottom_pos, bottom_neg = bottom_pos + np.maximum(push, 0), bottom_neg + np.minimum(push, 0)
        ax_parts.axhline(0, color="0.3", lw=0.8)
        ax_parts.set(xlabel="layer i", ylabel="push on a_i (−mean gradient, 1e-3)",
                     title="(b) code rule: the push's parts")
        ax_parts.legend(fontsize=8, loc="lower right")
        plots.integer_ticks(ax_parts)
    return fig


__all__ = [
    "MISSING_NOTE", "SCALAR_LABELS", "VARIANT_LABELS", "by_variant", "converged_table", "detectable", "load",
    "parts_table", "sign_test",
    "plot_consistency", "plot_paths_and_parts", "retrace_gap", "run_statistics", "show", "statistics_table",
    "variant", "verdicts", "weights",
]
