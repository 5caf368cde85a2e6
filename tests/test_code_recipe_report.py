"""The report of the public code's whole recipe (``hacn-code-recipe``): the four corners of rule x recipe, each
judged on Table 3's Gamma, the task-difficulty claim and Sec. 4's correlation, by hand on runs with known values."""

from __future__ import annotations

import numpy as np
import pytest

from hacn_core.engine.results import RunResult
from hacn_core.hacn.studies import code_recipe as cr
from hacn_core.hacn.studies import code_recipe_report as crr
from hacn_core.hacn.studies import mixer_report as hmr


def run(rule: str, k: int, seed: int, gamma: float, alphas: list[float], recipe: bool) -> RunResult:
    config = cr.make_config(rule, seed, num_classes=k) if recipe else \
        cr.mixer.make_config(rule, seed, num_classes=k, train_subset=None, epochs=30, record_every_steps=50)
    return RunResult(cr.EXPERIMENT_ID if recipe else cr.mixer.LONG_ID, config, f"{rule}{k}{seed}{recipe}", seed,
                     {"gamma": gamma, "test_accuracy": 0.9}, {"alpha_final": alphas})


def test_the_corners_are_judged_by_the_mixer_chapters_rules():
    base = list(np.linspace(0.2, 0.6, 16))
    recipe = []
    for seed, wiggle in enumerate((0.0, 0.01, -0.01)):  # the code's rule: Γ at Table 3's values, seeds agree
        recipe.append(run("hacn_code_mixer", 10, seed, 0.428 + wiggle, [a + wiggle for a in base], True))
        recipe.append(run("hacn_code_mixer", 2, seed, 0.326 + wiggle, base, True))
        recipe.append(run("hacn", 10, seed, 0.25 + wiggle, list(np.random.default_rng(seed).normal(0.25, 0.1, 16)),
                          True))
    frame = crr.claims(recipe)
    rows = {(r["under"], next(c for c in crr.CLAIMS if r["claim"].startswith(c))): r for r in frame.attrs["ledger"]}
    code = "the code's rule, the public code's recipe"
    eq2 = "Eq. 2, the public code's recipe"
    assert rows[(code, crr.CLAIMS[0])]["holds"] is True and rows[(code, crr.CLAIMS[1])]["holds"] is True
    assert rows[(code, crr.CLAIMS[2])]["holds"] is True  # 0.428 vs 0.326, interval above 0
    assert rows[(code, crr.CLAIMS[3])]["holds"] is True and rows[(code, crr.CLAIMS[3])]["values"][0] > 99
    assert rows[(eq2, crr.CLAIMS[0])]["holds"] is False  # 0.25 is far outside 0.428 ± 0.05
    assert (eq2, crr.CLAIMS[1]) not in rows  # no 2-class run: not judged
    assert rows[(eq2, crr.CLAIMS[3])]["holds"] is False
    assert rows[(code, crr.CLAIMS[0])]["items"] == ("hacn/table3/cifar10-gamma",)
    # the paper's recipe's corners are the Mixer chapter's; their labels name the same rule and recipe
    assert crr.under(("hacn", "paper")) == hmr.EQ2_PAPER_RECIPE
    assert crr.under(("hacn_code_mixer", "paper")) == hmr.CODE_RULE_PAPER_RECIPE
    long = [run("hacn", 10, s, 0.247, list(np.random.default_rng(9 + s).normal(0.25, 0.1, 16)), False)
            for s in range(3)]
    summary = crr.summary_table(long, recipe).set_index("claim")
    assert summary.loc[crr.CLAIMS[0], code] == "holds"
    assert summary.loc[crr.CLAIMS[0], hmr.EQ2_PAPER_RECIPE] == "does not hold"
    assert summary.loc[crr.CLAIMS[1], hmr.CODE_RULE_PAPER_RECIPE] == "not run"
    numbers = crr.numbers_table(long, recipe)
    assert list(numbers["rule"]) == ["Eq. 2", "Eq. 2", "the code's rule"]
    assert numbers.iloc[2]["Pearson (%)"] == pytest.approx(100.0)
    assert "0.428 (0.010), n=3" in crr.show(numbers).data  # the "mean (std), n" cells shown as they are
    assert numbers.iloc[2]["Pearson, 2 classes (%)"] == pytest.approx(100.0)  # the 2-class seeds share base
    assert np.isnan(numbers.iloc[1]["Pearson, 2 classes (%)"])  # Eq. 2, code recipe: no 2-class run
    # the reading: directions from the 95% intervals, every number from the runs
    text = crr.reading(long, recipe)
    code_line = next(line for line in text.splitlines() if line.startswith("* **The code's rule, the public"))
    assert "on 10 classes Γ ends at 0.428 (n=3), above its start of 0.25" in code_line
    # Welch: std 0.01 on each side, 3 seeds each, df 4
    assert "larger on 10 classes than on 2, the paper's order (+0.102 ± 0.023)" in code_line
    assert "correlate at 100% on 10 classes and 100% on 2 classes" in code_line
    eq2_line = next(line for line in text.splitlines() if line.startswith("* **Eq. 2, the paper's"))
    assert "Γ ends at 0.247 (n=3), below its start of 0.25" in eq2_line  # three identical 0.247: no spread
    claims_said = {line.split("*: ")[0].strip("* "): line.split("*: ")[1] for line in text.splitlines()
                   if line.startswith("* *") and not line.startswith("* **")}
    assert claims_said[crr.CLAIMS[0]] == ("holds under the code's rule with the public code's recipe; "
                                          "does not hold under Eq. 2 with the paper's recipe and "
                                          "Eq. 2 with the public code's recipe.")
    assert claims_said[crr.CLAIMS[1]] == "holds under the code's rule with the public code's recipe."
    assert crr.reading([], []) == ""


def test_only_the_whole_recipe_counts_as_the_public_codes_recipe():
    whole = run("hacn", 10, 0, 0.3, [0.3] * 16, True)
    part = run("hacn", 10, 1, 0.3, [0.3] * 16, True)
    part.config.pop("autoaugment")
    found = crr.corners([], [whole, part])
    assert [r.seed for r in found[("hacn", "code")][10]] == [0]


def test_the_ablations_give_the_layers_share_of_the_change():
    """Eq. 2, 10 classes, seed 0: the paper's recipe 0.25 -> the whole code recipe 0.10 (-0.15); the code's layer
    added alone gives 0.13 (80% of the change), the recipe without it 0.22 (the layer: 80% within the recipe)."""
    def result(config: dict, gamma: float, experiment: str = cr.EXPERIMENT_ID) -> RunResult:
        return RunResult(experiment, config, f"{gamma}", 0, {"gamma": gamma, "test_accuracy": 0.85},
                         {"alpha_final": [0.25] * 16, "gamma": [0.249, gamma]})

    paper = result(cr.mixer.make_config("hacn", 0, train_subset=None, epochs=30, record_every_steps=50), 0.25,
                   cr.mixer.LONG_ID)
    whole = result(cr.make_config("hacn", 0), 0.10)
    added, removed = (result(c, g) for c, g in zip(cr.ablation_configs("book"), (0.13, 0.22)))
    assert added.config["block"] == "code" and "autoaugment" not in added.config
    assert "block" not in removed.config and removed.config["autoaugment"] is True
    assert len(cr.EXPERIMENT.runs("book")) == 16  # 12 corner runs, the 2 ablations, the code rule without the layer x2
    # the ablations are not the whole recipe: the corners do not see them
    assert [r.config for r in crr.corners([], [whole, added, removed])[("hacn", "code")][10]] == [whole.config]
    table = crr.ablation_table([paper], [whole, added, removed])
    assert list(table["recipe"]) == ["the paper's recipe", *cr.ABLATIONS, "the code's whole recipe"]
    assert list(table["the code's layer"]) == ["no", "yes", "no", "yes"]
    assert list(table["Γ"]) == [0.25, 0.13, 0.22, 0.10] and set(table["Γ at the start"]) == {0.249}
    text = crr.ablation_reading([paper], [whole, added, removed])
    assert "moves Γ from 0.250 to 0.100 (-0.150)" in text
    assert "added to the paper's recipe, gives 0.130: 80% of that change" in text
    assert "without its layer gives 0.220, so within the code's recipe the layer accounts for 80%" in text
    assert "standard deviation" not in text  # one seed of the whole recipe: no spread to give
    second = RunResult(cr.EXPERIMENT_ID, cr.make_config("hacn", 1), "s1", 1, {"gamma": 0.12, "test_accuracy": 0.85},
                       {"alpha_final": [0.25] * 16, "gamma": [0.249, 0.12]})
    text = crr.ablation_reading([paper], [whole, second, added, removed])
    assert "from 0.250 to 0.100" in text  # seed 0's end, as the ablations' seed
    assert "Over its 2 seeds the whole recipe's Γ has a standard deviation of 0.014" in text
    assert crr.ablation_reading([paper], [whole]) == "" and crr.ablation_table([paper], [whole]).empty


def test_the_code_rule_without_the_code_layer_is_read_beside_table3():
    """The code's rule, seed 0: the paper's recipe 0.40 / 0.28, without the code's layer 0.43 / 0.33, the whole
    recipe 0.25 / 0.33; Table 3 0.428 / 0.326: the layer-less recipe is nearest (0.002 + 0.004 = 0.006 away)."""
    def result(config: dict, gamma: float, seed: int = 0, experiment: str = cr.EXPERIMENT_ID) -> RunResult:
        return RunResult(experiment, config, f"{gamma}{seed}", seed, {"gamma": gamma, "test_accuracy": 0.85},
                         {"alpha_final": [0.25] * 16, "gamma": [0.249, gamma]})

    def paper_recipe(k: int, gamma: float) -> RunResult:
        config = cr.mixer.make_config("hacn_code_mixer", 0, num_classes=k, train_subset=None, epochs=30,
                                      record_every_steps=50)
        return result(config, gamma, experiment=cr.mixer.LONG_ID)

    long = [paper_recipe(10, 0.40), paper_recipe(2, 0.28)]
    whole = [result(cr.make_config("hacn_code_mixer", 0, num_classes=10), 0.25),
             result(cr.make_config("hacn_code_mixer", 1, num_classes=10), 0.27, seed=1),
             result(cr.make_config("hacn_code_mixer", 0, num_classes=2), 0.33)]
    assert crr.rule_ablation_table(long, whole).empty and crr.rule_ablation_reading(long, whole) == ""
    without = [result(c, g) for c, g in zip(cr.rule_ablation_configs("book"), (0.43, 0.33))]
    assert [c["num_classes"] for c in cr.rule_ablation_configs("book")] == [10, 2]
    assert all("block" not in c and c["rule"] == "hacn_code_mixer" for c in cr.rule_ablation_configs("book"))
    table = crr.rule_ablation_table(long, whole + without)
    assert list(table["classes"]) == [10, 2]
    assert list(table[f"Γ, {cr.RULE_ABLATION}"]) == [0.43, 0.33]
    assert list(table["Γ, the paper's recipe"]) == [0.40, 0.28]
    assert list(table["Γ, the code's whole recipe"]) == [0.25, 0.33]
    assert list(table["paper Γ (Table 3)"]) == [0.428, 0.326]
    assert "0.430" in crr.show(table).data  # one precision for Γ
    text = crr.rule_ablation_reading(long, whole + without)
    assert "on 10 classes Γ 0.430 (Table 3: 0.428; the paper's recipe 0.400, the code's whole recipe 0.250)" in text
    assert f"{cr.RULE_ABLATION} is nearest Table 3 (0.006 away in all; the paper's recipe 0.074" in text
    assert "Γ on 10 classes minus Γ on 2 is +0.100 here (Table 3: +0.102)" in text
    assert "a standard deviation of 0.014, so" in text  # the one cell with two seeds: 0.25, 0.27


def test_the_ablations_are_found_at_the_profile_the_chapter_renders():
    """At the smoke profile the smoke ablation runs are found; a recipe end not stored reads "not stored"."""
    smoke = [RunResult(cr.EXPERIMENT_ID, c, str(i), 0, {"gamma": 0.3, "test_accuracy": 0.5},
                       {"alpha_final": [0.25] * 3, "gamma": [0.25, 0.3]})
             for i, c in enumerate(cr.ablation_configs("smoke"))]
    assert crr.rule_ablation_table([], smoke).empty  # the book's configurations are not the smoke runs
    table = crr.rule_ablation_table([], smoke, "smoke")
    assert list(table["classes"]) == [10, 2] and table["Γ, the paper's recipe"].isna().all()
    text = crr.rule_ablation_reading([], smoke, "smoke")
    assert "the paper's recipe not stored, the code's whole recipe not stored" in text and "nan" not in text
    assert "is nearest Table 3" not in text  # no distance without every recipe
    assert len(crr.ablation_runs([], smoke, "smoke")) == 2  # both Eq. 2 ablations, no ends stored
