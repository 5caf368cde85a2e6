"""What the chapter shows of ``hacn-code-recipe``: the paper's Mixer claims under each rule and recipe.

Four corners, each the converged Mixer (16 layers, d = 32, all 55,000 Fashion-MNIST images, 30
epochs, seeds 0-2) on 10 and 2 classes:

====================  =============================================  ==========================
rule                  recipe                                          runs
====================  =============================================  ==========================
Eq. 2                 the paper's (Appendix A as stated)             ``hacn-mixer-long``
the code's rule       the paper's                                    ``hacn-mixer-long``
Eq. 2                 the public code's whole recipe                 ``hacn-code-recipe``
the code's rule       the public code's whole recipe                 ``hacn-code-recipe``
====================  =============================================  ==========================

Each corner is judged on the same claims, by the same rules as the Mixer chapter
(:mod:`hacn_core.hacn.studies.mixer_report`): Table 3's ``Gamma`` matched (the 95% interval of
our mean minus the paper's within ``GAMMA_MARGIN``, the ledger's tolerance), ``Gamma`` larger on
the harder task (the 95% Welch interval of 10 - 2 classes above 0), and Sec. 4's cross-seed
correlation (mean pairwise Pearson of the converged ``a_1..a_{L-1}`` at least
:data:`~hacn_core.hacn.studies.mixer_report.PEARSON_HOLDS`). :func:`claims` gives the ledger the
public code's recipe's corners (the paper's recipe's are the Mixer chapter's own);
:func:`summary_table` puts all four side by side, :func:`reading` says it in words.

The ablations switch the code's layer alone: under Eq. 2 (:func:`ablation_table`, :func:`ablation_reading`:
its share of the whole recipe's fall in ``Gamma``) and under the code's rule on both tasks
(:func:`rule_ablation_table`, :func:`rule_ablation_reading`: beside Table 3).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from hacn_core.hacn.paper_items import item
from hacn_core.engine.results import RunResult
from hacn_core.engine.stats import difference, estimate, sign_verdict, signed, within_verdict
from hacn_core.engine.tables import ClaimTable, house_table
from hacn_core.hacn.studies import code_recipe as cr
from hacn_core.hacn.studies import mixer
from hacn_core.hacn.studies import mixer_report as hmr

RULE_LABELS: dict[str, str] = {"hacn": "Eq. 2", "hacn_code_mixer": "the code's rule"}
RECIPE_LABELS: dict[str, str] = {"paper": "the paper's recipe", "code": "the public code's recipe"}
#: Table 3's Gamma counts as matched when our 95% interval lies within this distance of it
GAMMA_MARGIN = 0.05
#: the claims of :func:`corner_claims`, in the order the summary lists them
CLAIMS: tuple[str, ...] = ("Γ on 10 classes matches Table 3's CIFAR-10",
                           "Γ on 2 classes matches Table 3's CIFAR-2",
                           "Γ is larger on the harder task (Table 3)",
                           "converged a hardly depend on the seed (Sec. 4)")
Corner = tuple[str, str]  # (rule, recipe)


def corners(long_results: Sequence[RunResult], recipe_results: Sequence[RunResult]
            ) -> dict[Corner, dict[int, list[RunResult]]]:
    """The runs of every corner present, by number of classes (seed order): the converged study's full-budget
    runs for the paper's recipe, the whole-recipe runs of ``hacn-code-recipe`` for the code's."""
    full, _ = hmr.split_budgets(list(long_results))
    whole = [r for r in recipe_results if all(r.config.get(k) == v for k, v in cr.CODE_RECIPE.items())]
    out: dict[Corner, dict[int, list[RunResult]]] = {}
    for recipe, runs in (("paper", full), ("code", whole)):
        for rule in cr.RULES:
            cell = {k: hmr.cell_runs(runs, rule=rule, alpha_mu=0.25, num_classes=k) for k in (10, 2)}
            if cell[10] or cell[2]:
                out[(rule, recipe)] = cell
    return out


def under(corner: Corner) -> str:
    """The words a ledger verdict says it holds under: the rule and the recipe."""
    return f"{RULE_LABELS[corner[0]]}, {RECIPE_LABELS[corner[1]]}"


def _gammas(runs: Sequence[RunResult]) -> list[float]:
    return [float(r.metrics["gamma"]) for r in runs]


def corner_claims(table: ClaimTable, corner: Corner, cell: dict[int, list[RunResult]]) -> None:
    """Add the corner's claims of :data:`CLAIMS` that its runs can judge to ``table`` (items and ``under`` set)."""
    where = under(corner)
    for k, claim in ((10, CLAIMS[0]), (2, CLAIMS[1])):
        if cell[k]:
            paper = item(mixer.table3_item(k)).paper_value
            d = estimate([g - paper for g in _gammas(cell[k])])
            table.add(f"{claim} ({paper:g} ± {GAMMA_MARGIN:g})", f"Table 3; {where}",
                      f"Γ − paper: {signed(d, digits=3)}, n={d.n}", within_verdict(d, GAMMA_MARGIN),
                      items=(mixer.table3_item(k),), values=_gammas(cell[k]), unit="Γ", under=where)
    if cell[10] and cell[2]:
        d = difference(_gammas(cell[10]), _gammas(cell[2]))
        table.add(CLAIMS[2], f"Sec. 3.2.1, Table 3; {where}", f"Γ, 10 − 2 classes: {signed(d, digits=3)}",
                  sign_verdict(d), items=(mixer.table3_item(10), mixer.table3_item(2)), under=where)
    if len(cell[10]) >= 2:
        pairs = hmr.pair_pearsons(cell[10])
        paper = item(hmr.PEARSON_MIXER).paper_value
        table.add(f"{CLAIMS[3]} (Pearson {paper:g}%; holds here at ≥ {hmr.PEARSON_HOLDS:g}%)", f"Sec. 4; {where}",
                  f"mean Pearson over seed pairs, a_1..a_15: {np.mean(pairs):.1f}%",
                  bool(np.mean(pairs) >= hmr.PEARSON_HOLDS), items=(hmr.PEARSON_MIXER,), values=pairs, unit="%",
                  under=where)


def claims(recipe_results: Sequence[RunResult]):
    """The paper's Mixer claims judged under the public code's whole recipe, both rules (the ledger's rows)."""
    table = ClaimTable()
    for corner, cell in corners([], recipe_results).items():
        corner_claims(table, corner, cell)
    return table.frame()


def summary_table(long_results: Sequence[RunResult], recipe_results: Sequence[RunResult]):
    """Which of the paper's Mixer claims hold under which rule and recipe: one row per claim, one column per
    corner (holds / does not hold / cannot be told / not run)."""
    import pandas as pd

    found = corners(long_results, recipe_results)
    columns = {c: under(c) for c in ((r, p) for p in RECIPE_LABELS for r in cr.RULES)}
    rows = {claim: {"claim": claim} | {label: "not run" for label in columns.values()} for claim in CLAIMS}
    for corner, cell in found.items():
        table = ClaimTable()
        corner_claims(table, corner, cell)
        for row in table.frame().attrs.get("ledger", []):
            claim = next(c for c in CLAIMS if row["claim"].startswith(c))
            rows[claim][columns[corner]] = {True: "holds", False: "does not hold", None: "cannot be told"}[row["holds"]]
    return pd.DataFrame(list(rows.values()))


def numbers_table(long_results: Sequence[RunResult], recipe_results: Sequence[RunResult]):
    """Per corner: Gamma on 10 and 2 classes and the cross-seed Pearson (mean (std), n), test accuracy on 10
    classes, beside Table 3's Gamma and Sec. 4's 92% (the paper gives the correlation for 10 classes only; the
    2-class Pearson is ours alone)."""
    import pandas as pd

    g10, g2 = (item(mixer.table3_item(k)).paper_value for k in (10, 2))
    pearson = item(hmr.PEARSON_MIXER).paper_value
    rows = []
    for corner, cell in corners(long_results, recipe_results).items():
        pairs = hmr.pair_pearsons(cell[10])
        rows.append({"rule": RULE_LABELS[corner[0]], "recipe": RECIPE_LABELS[corner[1]].removeprefix("the "),
                     "Γ, 10 classes": hmr.seed_cell(_gammas(cell[10]), digits=3) if cell[10] else None,
                     "paper Γ, CIFAR-10": g10,
                     "Γ, 2 classes": hmr.seed_cell(_gammas(cell[2]), digits=3) if cell[2] else None,
                     "paper Γ, CIFAR-2": g2,
                     "Pearson (%)": float(np.mean(pairs)) if pairs else math.nan, "paper Pearson (%)": pearson,
                     "Pearson, 2 classes (%)": float(np.mean(pairs2)) if (pairs2 := hmr.pair_pearsons(cell[2]))
                     else math.nan,
                     "test accuracy, 10 classes (%)": hmr.seed_cell([r.metrics["test_accuracy"] for r in cell[10]],
                                                                    scale=100) if cell[10] else None})
    return pd.DataFrame(rows)


def _where(d) -> str:
    """Where a difference from the start lies, in words, by its 95% interval."""
    return {True: "above", False: "below", None: "not told apart from"}[sign_verdict(d)]


def reading(long_results: Sequence[RunResult], recipe_results: Sequence[RunResult]) -> str:
    """The section's findings in words, every number and every direction computed from the stored runs: per
    corner, where Gamma ends against its start (the draw's mean ``alpha_mu``, by the 95% interval over seeds),
    which way the tasks are ordered; then which corners each claim of :data:`CLAIMS` holds in. Empty without
    runs."""
    found = corners(long_results, recipe_results)
    if not found:
        return ""
    bullets = []
    for corner, cell in found.items():
        runs = cell[10] or cell[2]
        mu = float(runs[0].config["alpha_mu"])
        parts = []
        for k in (10, 2):
            if cell[k]:
                d = estimate([g - mu for g in _gammas(cell[k])])
                parts.append(f"on {k} classes Γ ends at {np.mean(_gammas(cell[k])):.3f} (n={d.n}), "
                             f"{_where(d)} its start of {mu:g}")
        line = f"* **{under(corner)[0].upper() + under(corner)[1:]}**: " + "; ".join(parts)
        if cell[10] and cell[2]:
            d = difference(_gammas(cell[10]), _gammas(cell[2]))
            order = {True: "larger on 10 classes than on 2, the paper's order",
                     False: "larger on 2 classes than on 10, the reverse of the paper's order",
                     None: "not told apart between the tasks"}[sign_verdict(d)]
            line += f". Γ is {order} ({signed(d, digits=3)})"
        pearsons = [f"{np.mean(pairs):.0f}% on {k} classes" for k in (10, 2) if (pairs := hmr.pair_pearsons(cell[k]))]
        if pearsons:
            line += "; the seeds' converged weights correlate at " + " and ".join(pearsons)
        bullets.append(line + ".")
    summary = summary_table(long_results, recipe_results).set_index("claim")
    words = {under((r, p)): f"{RULE_LABELS[r]} with {RECIPE_LABELS[p]}" for p in RECIPE_LABELS for r in cr.RULES}
    held = []
    for claim in CLAIMS:
        verdicts = {c: summary.loc[claim, c] for c in summary.columns if summary.loc[claim, c] != "not run"}
        said = []
        for verdict in ("holds", "cannot be told", "does not hold"):
            where = [words[c] for c, v in verdicts.items() if v == verdict]
            if len(where) == len(verdicts) > 1:
                said.append({"holds": f"holds in all {len(where)} corners run",
                             "cannot be told": f"cannot be told in any of the {len(where)} corners run",
                             "does not hold": f"holds in none of the {len(where)} corners run"}[verdict])
            elif where:
                said.append(f"{verdict} under " + (", ".join(where[:-1]) + " and " if len(where) > 1 else "")
                            + where[-1])
        held.append(f"* *{claim}*: " + ("; ".join(said) if said else "no corner run can judge it") + ".")
    return "\n".join(["What the runs show, corner by corner:", "", *bullets, "",
                      "Where each of the paper's claims holds:", "", *held])


def ablation_runs(long_results: Sequence[RunResult], recipe_results: Sequence[RunResult], profile: str = "book"
                  ) -> dict[str, RunResult]:
    """The runs of :data:`~hacn_core.hacn.studies.code_recipe.ABLATIONS` and their two ends (Eq. 2, 10 classes,
    seed 0): the paper's recipe (``hacn-mixer-long``), each ablation, the whole code recipe; those stored."""
    found = corners(long_results, recipe_results)
    ends = {"the paper's recipe": found.get((cr.ABLATION_RULE, "paper"), {}).get(cr.ABLATION_CLASSES, []),
            "the code's whole recipe": found.get((cr.ABLATION_RULE, "code"), {}).get(cr.ABLATION_CLASSES, [])}
    out: dict[str, RunResult] = {}
    for name, runs in ends.items():
        if seed := [r for r in runs if r.seed == cr.ABLATION_SEED]:
            out[name] = seed[0]
    for name, recipe in cr.ABLATIONS.items():
        wanted = cr.make_config(cr.ABLATION_RULE, cr.ABLATION_SEED, profile=profile, num_classes=cr.ABLATION_CLASSES,
                                recipe=recipe)
        if match := [r for r in recipe_results if r.config == wanted]:
            out[name] = match[0]
    order = ["the paper's recipe", *cr.ABLATIONS, "the code's whole recipe"]
    return {name: out[name] for name in order if name in out}


def ablation_table(long_results: Sequence[RunResult], recipe_results: Sequence[RunResult], profile: str = "book"):
    """Gamma and test accuracy of Eq. 2 (10 classes, seed 0) under the paper's recipe, the two ablations and the
    whole code recipe, with whether the run has the code's layer; empty when fewer than the two ends are stored."""
    import pandas as pd

    runs = ablation_runs(long_results, recipe_results, profile)
    if len(runs) < 3:
        return pd.DataFrame()
    return pd.DataFrame([{"recipe": name, "the code's layer": "yes" if r.config.get("block") == "code" else "no",
                          "Γ at the start": float(r.curves["gamma"][0]), "Γ": float(r.metrics["gamma"]),
                          "test accuracy (%)": 100 * float(r.metrics["test_accuracy"])} for name, r in runs.items()])


def ablation_reading(long_results: Sequence[RunResult], recipe_results: Sequence[RunResult],
                     profile: str = "book") -> str:
    """What switching the code's layer alone does to Eq. 2's Gamma, as a share of the whole recipe's change
    (computed from the runs; empty unless both ends and at least one ablation are stored)."""
    runs = ablation_runs(long_results, recipe_results, profile)
    paper, whole = runs.get("the paper's recipe"), runs.get("the code's whole recipe")
    if paper is None or whole is None or len(runs) < 3:
        return ""
    g = {name: float(r.metrics["gamma"]) for name, r in runs.items()}
    start, end = g.pop("the paper's recipe"), g.pop("the code's whole recipe")
    change = end - start
    out = [f"Under Eq. 2 (10 classes, seed {cr.ABLATION_SEED}) the code's whole recipe moves Γ from {start:.3f} to "
           f"{end:.3f} ({change:+.3f})."]
    seeds = _gammas(corners([], recipe_results)[(cr.ABLATION_RULE, "code")][cr.ABLATION_CLASSES])
    if len(seeds) > 1:
        out.append(f"Over its {len(seeds)} seeds the whole recipe's Γ has a standard deviation of "
                   f"{np.std(seeds, ddof=1):.3f}, the scale of what one seed can tell.")
    added, removed = cr.ABLATIONS
    if added in g:
        out.append(f"The code's layer alone, added to the paper's recipe, gives {g[added]:.3f}: "
                   f"{100 * (g[added] - start) / change:.0f}% of that change.")
    if removed in g:
        out.append(f"The code's recipe without its layer gives {g[removed]:.3f}, so within the code's recipe the "
                   f"layer accounts for {100 * (end - g[removed]) / change:.0f}% of the change.")
    return " ".join(out)


def rule_ablation_table(long_results: Sequence[RunResult], recipe_results: Sequence[RunResult],
                        profile: str = "book"):
    """The code's rule at seed 0 on 10 and 2 classes under three recipes (the paper's, the code's without the
    code's layer, the code's whole) beside Table 3's Gamma; empty until a run of
    :func:`~hacn_core.hacn.studies.code_recipe.rule_ablation_configs` is stored."""
    import pandas as pd

    found = corners(long_results, recipe_results)
    rows = []
    for k, wanted in zip((10, 2), cr.rule_ablation_configs(profile)):
        without = [r for r in recipe_results if r.config == wanted]
        if not without:
            continue
        row: dict[str, object] = {"classes": k}
        for label, recipe in (("the paper's recipe", "paper"), ("the code's whole recipe", "code")):
            seed = [r for r in found.get(("hacn_code_mixer", recipe), {}).get(k, []) if r.seed == cr.ABLATION_SEED]
            row[f"Γ, {label}"] = float(seed[0].metrics["gamma"]) if seed else math.nan
        row[f"Γ, {cr.RULE_ABLATION}"] = float(without[0].metrics["gamma"])
        row["paper Γ (Table 3)"] = item(mixer.table3_item(k)).paper_value
        rows.append(row)
    if not rows:
        return pd.DataFrame()
    order = ["classes", "Γ, the paper's recipe", f"Γ, {cr.RULE_ABLATION}", "Γ, the code's whole recipe",
             "paper Γ (Table 3)"]
    return pd.DataFrame(rows)[order]


def _gamma_text(value: float) -> str:
    return f"{value:.3f}" if math.isfinite(value) else "not stored"


def rule_ablation_reading(long_results: Sequence[RunResult], recipe_results: Sequence[RunResult],
                          profile: str = "book") -> str:
    """The code's rule without the code's layer, in words: its Gamma on each task beside Table 3's and the other
    two recipes', the recipe nearest Table 3 over the tasks run, and the seed spread that one seed stands
    against (computed from the runs; empty without them)."""
    table = rule_ablation_table(long_results, recipe_results, profile)
    if table.empty:
        return ""
    recipes = ["the paper's recipe", cr.RULE_ABLATION, "the code's whole recipe"]
    parts = []
    for _, r in table.iterrows():
        paper_recipe, without, whole = (r[f"Γ, {name}"] for name in recipes)
        parts.append(f"on {int(r['classes'])} classes Γ {without:.3f} (Table 3: {r['paper Γ (Table 3)']:.3f}; "
                     f"the paper's recipe {_gamma_text(paper_recipe)}, the code's whole recipe {_gamma_text(whole)})")
    out = [f"Under the code's rule (seed {cr.ABLATION_SEED}), {cr.RULE_ABLATION} gives " + "; ".join(parts) + "."]
    # numpy's sum, not pandas' (which skips NaN): a recipe with a run missing has no distance
    paper = table["paper Γ (Table 3)"].to_numpy()
    gaps = {name: float(np.abs(table[f"Γ, {name}"].to_numpy() - paper).sum()) for name in recipes}
    if all(np.isfinite(v) for v in gaps.values()):
        best = min(gaps, key=gaps.get)
        out.append(f"Summed over the tasks, {best} is nearest Table 3 ({gaps[best]:.3f} away in all; "
                   + ", ".join(f"{name} {gaps[name]:.3f}" for name in recipes if name != best) + ").")
    if len(table) == 2:
        d = float(table[f"Γ, {cr.RULE_ABLATION}"].iloc[0] - table[f"Γ, {cr.RULE_ABLATION}"].iloc[1])
        out.append(f"Γ on 10 classes minus Γ on 2 is {d:+.3f} here (Table 3: "
                   f"{table['paper Γ (Table 3)'].iloc[0] - table['paper Γ (Table 3)'].iloc[1]:+.3f}).")
    spreads = [float(np.std(g, ddof=1)) for cell in corners(long_results, recipe_results).values()
               for g in (_gammas(cell[10]), _gammas(cell[2])) if len(g) > 1]
    if spreads:
        span = f"{min(spreads):.3f}" + (f" to {max(spreads):.3f}" if f"{max(spreads):.3f}" != f"{min(spreads):.3f}"
                                         else "")
        out.append(f"These are single seeds: across the corners' seeds Γ has a standard deviation of {span}, so "
                   f"differences of that size are not told apart here.")
    return " ".join(out)


def show(frame, *, caption: str = "", note: str = ""):
    """A table of this section as the house shows it."""
    formats = {c: ".3f" for c in frame.columns if c.startswith(("Γ", "paper Γ")) and frame[c].dtype.kind == "f"}
    formats["test accuracy (%)"] = ".1f"
    formats |= {c: ".0f" for c in ("Pearson (%)", "paper Pearson (%)", "Pearson, 2 classes (%)")}
    return house_table(frame, formats={c: f for c, f in formats.items() if c in frame.columns},
                       missing_note="no run of that cell stored, or fewer than two seeds (no cross-seed "
                                    "correlation)",
                       caption=caption, note=note)
