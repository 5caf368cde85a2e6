"""The converged Mixer study (hacn-mixer-long): its run list, its settling test and its claims table."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hacn_core.engine.results import RunResult, config_hash
from hacn_core.engine.stats import difference, difference_pooled, pooled_std
from hacn_core.hacn.studies import mixer as hm
from hacn_core.hacn.studies import mixer_report as hmr


def test_welch_difference_matches_a_hand_computation():
    a, b = [1.0, 2.0, 3.0], [2.0, 4.0]
    d = difference(a, b)
    va, vb = 1.0 / 3, 2.0 / 2  # sample variances over n
    df = (va + vb) ** 2 / (va**2 / 2 + vb**2 / 1)
    from scipy import stats

    assert d.mean == pytest.approx(-1.0) and d.n == 2
    assert d.half_width == pytest.approx(stats.t.ppf(0.975, df) * math.sqrt(va + vb))
    assert math.isnan(difference([1.0], [2.0, 3.0]).half_width)
    assert difference([1.0, 1.0], [0.0, 0.0]).half_width == 0.0


def test_pooled_difference_is_students_equal_variance_interval():
    from scipy import stats

    a, b = [1.0, 2.0, 4.0], [2.0, 3.0]
    std, df = pooled_std([a, b, [7.0]])  # a single value adds no degree of freedom
    assert df == 3 and std == pytest.approx(math.sqrt((14 / 3 + 0.5) / 3))
    d = difference_pooled(a, b, std, df)
    # scipy's equal-variance t-test: its statistic is mean difference / standard error
    t = stats.ttest_ind(a, b, equal_var=True).statistic
    se = (np.mean(a) - np.mean(b)) / t
    assert d.mean == pytest.approx(np.mean(a) - 2.5) and d.half_width == pytest.approx(stats.t.ppf(0.975, 3) * se)
    one = difference_pooled([5.0], b, std, df)  # a cell of one seed borrows the pooled spread
    assert one.half_width == pytest.approx(stats.t.ppf(0.975, 3) * std * math.sqrt(1 + 1 / 2)) and one.n == 1
    none, zero = pooled_std([[1.0], [2.0]])  # no cell with two values: no spread to pool
    assert math.isnan(none) and zero == 0
    assert math.isnan(difference_pooled([1.0], [2.0], *pooled_std([[1.0]])).half_width)
    with pytest.raises(ValueError, match="must not be empty"):
        difference_pooled([], [1.0], 1.0, 3)


def test_long_configs_cover_the_issue_and_train_full_data_longer():
    configs = hm.long_configs()
    assert len({config_hash(c) for c in configs}) == len(configs) == 48
    full = [c for c in configs if c["epochs"] == hm.LONG_EPOCHS]
    assert all(c["train_subset"] is None and c["num_layers"] == 16 for c in configs)
    key = {(c["arch"], c["rule"], c["num_classes"], c["alpha_mu"]) for c in full}
    for rule in ("resnet", "acn"):
        assert ("mixer", rule, 10, None) in key and ("mixer", rule, 2, None) in key
    for mu in (0.25, 0.75, 1.0):
        assert ("mixer", "hacn", 10, mu) in key
    assert ("mixer", "hacn", 2, 0.25) in key and ("mixer", "hacn_code_mixer", 10, 0.25) in key
    assert ("mixer", "hacn_code_mixer", 2, 0.25) in key  # Table 3 under the public code's rule too
    assert ("dense_mixer", None, 10, None) in key
    # every cell has 3 seeds; the first 18 runs are the core set ResNet / ACN / H-ACN x 10 and 2 classes
    assert all(sum(1 for c in full if (c["arch"], c["rule"], c["num_classes"], c["alpha_mu"]) == k) == 3 for k in key)
    assert {(c["rule"], c["num_classes"]) for c in configs[:18]} == {
        (r, k) for r in ("resnet", "acn", "hacn") for k in (10, 2)}
    # 55,000 images at batch 128: 430 steps an epoch; the 2-class task gets as many steps
    n2 = 12000 - 1200
    assert hm.epochs_for(full[0], 55000) * 430 == 12900
    two = next(c for c in full if c["num_classes"] == 2)
    assert abs(hm.epochs_for(two, n2) * math.ceil(n2 / 128) - 12900) <= math.ceil(n2 / 128) / 2


def _run(rule, seed, *, classes=10, mu=0.25, acc=0.9, half=0.5, gamma=0.3, loss=0.1, noise=0.8, epochs=30,
         alphas=None):
    config = hm.make_config(rule, seed, num_classes=classes, alpha_mu=mu if rule.startswith("hacn") else None,
                            train_subset=None, epochs=epochs)
    metrics = {"test_accuracy": acc, "first_half_exit_accuracy": half, "train_loss": loss, "steps": 100,
               "parameters": 1000,
               "noise_accuracy/0.1": noise + 0.05, "noise_accuracy/0.3": noise, "noise_accuracy/0.5": noise - 0.1,
               "noise_accuracy/1": noise - 0.2}
    curves = {"layerwise_test_accuracy": [0.1, half, acc]}
    if rule.startswith("hacn"):
        a = np.asarray(alphas if alphas is not None else [gamma] * 4, dtype=float)
        metrics["gamma"] = float(np.linalg.norm(a) / 2)
        # a trajectory recorded every 10 steps, moving linearly then stopping at 70% of training
        steps = np.arange(0, 101, 10)
        t = np.minimum(steps / 70, 1.0)
        hist = 0.25 + t[:, None] * (a - 0.25)
        curves |= {"record_step": steps.tolist(), "alpha_final": a.tolist(),
                   "delta": np.linalg.norm(hist[-1] - hist, axis=1).tolist(),
                   "gamma": (np.linalg.norm(hist, axis=1) / 2).tolist()}
    return RunResult(experiment=hm.LONG_ID, config=config, config_hash=config_hash(config), seed=seed,
                     metrics=metrics, curves=curves, provenance={})


def test_settling_table_names_the_start_of_rules_without_a_drawn_init():
    """ReZero and LAuReL-style runs have residual scalars too: their row gives the fixed start (0 and 1), no
    missing cell."""
    runs = []
    for rule in ("rezero", "laurel"):
        r = _run(rule, 0)
        r.curves |= {"record_step": [0, 50, 100], "delta": [0.3, 0.1, 0.0], "gamma": [hmr.FIXED_STARTS[rule]] * 3}
        r.metrics["gamma"] = hmr.FIXED_STARTS[rule]
        runs.append(r)
    table = hmr.settling_table(runs)
    assert not table.isna().any().any()
    assert dict(zip(table["rule"], table["init mean μ"])) == {"ReZero": 0.0, "LAuReL-style": 1.0}


def test_settling_fraction_and_table():
    r = _run("hacn", 0, alphas=[0.5, 0.4, 0.3, 0.2])
    assert hmr.last_fifth_fraction(r) == 0.0  # stopped moving at 70% of training
    table = hmr.settling_table([r, _run("resnet", 0)])
    assert len(table) == 1 and table.loc[0, "settled"] == "yes" and table.loc[0, "classes"] == 10
    assert table.loc[0, "total displacement ‖a_T − a_0‖"] == pytest.approx(np.linalg.norm([0.25, 0.15, 0.05, -0.05]))


def test_budget_check_and_claims_read_the_runs():
    runs = []
    for s in range(3):
        runs += [_run("resnet", s, acc=0.90 + 0.001 * s, half=0.30 + 0.01 * s, loss=0.20, noise=0.60 + 0.01 * s),
                 _run("acn", s, acc=0.90, half=0.80 + 0.01 * s, loss=0.30 + 0.01 * s),
                 _run("hacn", s, acc=0.91, half=0.85 + 0.01 * s, loss=0.10 + 0.01 * s, noise=0.70 + 0.01 * s,
                      alphas=[0.6 + 0.01 * s, 0.5, 0.4, 0.3 - 0.01 * s]),
                 _run("hacn", s, classes=2, acc=0.99, half=0.98 + 0.001 * s, alphas=[0.3, 0.2 + 0.01 * s, 0.2, 0.2]),
                 _run("hacn", s, epochs=15, alphas=[0.6, 0.5, 0.4, 0.3 + 0.01 * s])]
    # the public code's rule: Γ 0.8 on 10 classes, about 0.4 on 2 classes (2 seeds each)
    code = [_run("hacn_code_mixer", s, alphas=[0.8 + 0.01 * s] * 4) for s in range(2)]
    code += [_run("hacn_code_mixer", s, classes=2, alphas=[0.4 + 0.01 * s] * 4) for s in range(2)]
    assert hmr.table3(code[:1]).loc["10 classes", "ours Gamma, public code rule"] == "0.800, n=1"
    assert hmr.table3(code).loc["2 classes", "ours Gamma, public code rule"] == "0.405 (0.007), n=2"
    assert hmr.table3(runs).loc["2 classes", "ours Gamma, public code rule"] == "-"
    code_claim = "Under the public code's rule, Γ is larger on the harder task"
    assert code_claim not in set(hmr.claims(runs)["claim"])  # no public-code runs: no such row
    runs += code
    full, half = hmr.split_budgets(runs)
    assert len(full) == 16 and len(half) == 3 and all(r.config["epochs"] == 15 for r in half)
    check = hmr.budget_check_table(runs)
    assert list(check["classes"]) == [10] and check.loc[0, "change"].startswith("+")
    table = hmr.claims(runs).set_index("claim")
    verdict = {c: (None if table.loc[c, "holds"] is None else bool(table.loc[c, "holds"])) for c in table.index}
    assert verdict["H-ACN's final accuracy matches the ResNet's"] is True
    assert verdict["H-ACN compresses: its half-depth exit beats the ResNet's"] is True
    assert verdict["ACN compresses: its half-depth exit beats the ResNet's"] is True
    assert verdict["H-ACN trains faster than an ACN (the ACN needs ~100 more epochs of 300)"] is True
    gamma = next(c for c in table.index if c.startswith("Γ is larger on the harder task"))
    assert verdict[gamma] is True and "0.428" in gamma and "0.326" in gamma  # read from the paper items
    assert verdict[code_claim] is True and table.loc[code_claim, "ours"].startswith(
        "Γ, 10 − 2 classes, public code rule: +0.400 ± ")
    reading = hmr.code_rule_reading(runs)
    assert "its residual weights travel 1.10-1.12 in total" in reading  # |(0.8 + 0.01 s) - 0.25| x 2, 4 weights
    assert "Its Γ ends at 0.805 (0.007), n=2 on 10 classes and 0.405 (0.007), n=2 on 2 classes (Table 3: 0.428" in reading
    assert "Table 3's effect of task difficulty shows under this rule" in reading
    assert reading.endswith("4 of its 4 runs settled by the criterion above.")
    assert hmr.code_rule_reading(runs[:15]) == ""  # no public-code runs
    noise = next(c for c in table.index if c.startswith("H-ACN is more robust"))
    assert verdict[noise] is True
    seeds = next(c for c in table.index if c.startswith("The converged a hardly depend"))
    assert "92%" in seeds
    # a claim whose interval straddles 0 cannot be told
    flat = [_run("resnet", s, half=0.5 + 0.05 * (s - 1)) for s in range(3)]
    flat += [_run("hacn", s, half=0.5 - 0.05 * (s - 1)) for s in range(3)]
    flat_table = hmr.claims(flat).set_index("claim")
    assert flat_table.loc["H-ACN compresses: its half-depth exit beats the ResNet's", "holds"] is None
    # "matches" moves the line to MATCH_POINTS short: a mean 1 point lower whose interval reaches above
    # -0.5 points cannot be told (judging the mean alone would say "does not hold")
    # App. B.1's "above all other architectures": H-ACN (0.91) against a DenseNet-style Mixer that ends higher
    dense = [_run("resnet", s, acc=0.93 + 0.001 * s) for s in range(3)]
    for r in dense:
        r.config["arch"] = "dense_mixer"
    fig7 = hmr.claims(runs + dense).set_index("claim")
    assert fig7.loc["H-ACN ends more accurate than the DenseNet-style Mixer", "holds"] == False  # noqa: E712
    assert "H-ACN ends more accurate than the DenseFormer-style Mixer" not in fig7.index  # none stored
    spread = [_run("resnet", s, acc=0.90 + 0.01 * s) for s in range(3)]
    spread += [_run("hacn", s, acc=0.89 + 0.01 * s) for s in range(3)]
    assert hmr.claims(spread).set_index("claim").loc["H-ACN's final accuracy matches the ResNet's", "holds"] is None


def test_noise_table_has_every_level_and_no_missing_cells():
    runs = [_run("resnet", s) for s in range(2)] + [_run("hacn", s) for s in range(2)]
    table = hmr.noise_table(runs)
    assert list(table.columns) == ["rule", "no noise"] + [f"σ = {s:g}" for s in hm.NOISE_STDS]
    assert list(table["rule"]) == ["ResNet", "H-ACN"] and not table.isna().any().any()
    assert table.loc[0, "σ = 0.3"].startswith("80.0")


def test_coverage_table_counts_planned_and_stored_seeds():
    # a stored run counts for the planned configuration with its hash (the same arguments as _run's)
    planned = [hm.make_config(rule, seed, num_classes=k, alpha_mu=0.25 if rule == "hacn" else None,
                              train_subset=None, epochs=30)
               for seed in (0, 1, 2) for k in (10, 2) for rule in ("resnet", "hacn")]
    stored = [_run("resnet", 0), _run("resnet", 2), _run("hacn", 1)]
    table = hmr.coverage_table(planned, stored).set_index(["architecture", "classes"])
    assert table.loc[("ResNet", 10), "seeds planned"] == 3 and table.loc[("ResNet", 10), "stored"] == "0, 2"
    assert table.loc[("H-ACN", 10), "seeds stored"] == 1 and table.loc[("H-ACN", 2), "stored"] == "none"
    assert len(table) == 4


def test_a_match_on_one_seed_cannot_be_told():
    runs = [_run("resnet", 0, acc=0.90), _run("hacn", 0, acc=0.91)]
    table = hmr.claims(runs).set_index("claim")
    assert table.loc["H-ACN's final accuracy matches the ResNet's", "holds"] is None


def test_the_ledger_finding_on_table3_quotes_the_stored_runs():
    """TABLE3_FINDING is typed prose: each Γ and difference it quotes is the committed runs'."""
    from pathlib import Path

    from hacn_core.engine.results import ResultsStore
    from hacn_core.engine.stats import difference
    from hacn_core.hacn.paper_items import TABLE3_FINDING, item

    store = ResultsStore(Path(__file__).resolve().parents[1] / "results")
    full, _ = hmr.split_budgets(list(store.iter_results(hm.LONG_ID)))
    gammas = {(rule, k): [r.metrics["gamma"] for r in hmr.cell_runs(full, rule=rule, alpha_mu=0.25, num_classes=k)]
              for rule in ("hacn", "hacn_code_mixer") for k in (10, 2)}
    assert all(len(v) == 3 for v in gammas.values()), {k: len(v) for k, v in gammas.items()}
    for (rule, k), values in gammas.items():
        assert f"{np.mean(values):.3f}" in TABLE3_FINDING, (rule, k)
    for rule in ("hacn", "hacn_code_mixer"):
        d = difference(gammas[rule, 10], gammas[rule, 2])
        assert f"{d.mean:+.3f} ± {d.half_width:.3f}" in TABLE3_FINDING, rule
    assert item("hacn/table3/cifar10-gamma").finding == item("hacn/table3/cifar2-gamma").finding == TABLE3_FINDING


def _cost(**ratios):
    metrics = {"resnet/ratio_to_resnet": 1.0, "resnet/ms_per_step": 10.0, "resnet/saved_activation_bytes": 100.0}
    for key, r in ratios.items():
        metrics |= {f"{key}/ratio_to_resnet": r, f"{key}/ms_per_step": 10.0 * r,
                    f"{key}/saved_activation_bytes": 100.0 * r}
    config = {"batch_size": 128}
    return RunResult(experiment=hm.COST_ID, config=config, config_hash=config_hash(config), seed=0,
                     metrics=metrics, provenance={"device": "cpu: test"})


def test_equal_budget_reading_judges_every_design_against_the_resnet():
    """Chapter 3's table and summary: each design's difference from the ResNet rule with Welch's interval,
    sorted into higher / lower / not told apart by that interval, and the side-by-side cost ratios."""
    from hacn_core.engine.stats import difference, signed

    runs = [_run("resnet", s, acc=0.88 + 0.001 * s, half=0.6 + 0.01 * s) for s in range(3)]
    runs += [_run("rezero", s, acc=0.90 + 0.001 * s, half=0.3 + 0.01 * s) for s in range(3)]  # higher / lower
    runs += [_run("laurel", s, acc=0.88 + 0.02 * (s - 1), half=0.6 + 0.2 * (s - 1)) for s in range(3)]  # open
    runs.append(_run("resnet", 0, acc=0.5, epochs=15))  # another budget: never part of the comparison
    full, _ = hmr.split_budgets(runs)
    table = hmr.comparison_table(full, _cost(rezero=1.2, laurel=1.1))
    assert list(table.index) == ["ResNet", "ReZero", "LAuReL-style"]
    expected = difference([0.90, 0.901, 0.902], [0.88, 0.881, 0.882])
    assert table.loc["ReZero", "test acc − ResNet (points)"] == signed(expected, 100.0) == "+2.0 ± 0.2"
    assert table.loc["ResNet", "test acc − ResNet (points)"] == "reference"
    text = hmr.budget_reading(full, _cost(rezero=1.2, laurel=1.1))
    assert "Test accuracy against the ResNet rule's (points, 95% interval): higher for ReZero (+2.0 ± 0.2); " \
           "not told apart for LAuReL-style" in text
    exits = signed(difference([0.3, 0.31, 0.32], [0.6, 0.61, 0.62]), 100.0)
    assert f"Exit accuracy against the ResNet rule's (points, 95% interval): lower for ReZero ({exits})" in text
    assert "LAuReL-style 1.10×, ReZero 1.20× the ResNet rule's; ReZero costs the most" in text
    assert "The 3 additive designs end 2.1 points apart at most (mean test accuracy 88.0-90.1%)" in text
    assert hmr.budget_reading(runs[:3]).startswith("The ResNet rule and at least one other design")
