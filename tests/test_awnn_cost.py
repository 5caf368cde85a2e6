"""The step-cost measurement of the AWNN (``hacn_core.awnn.studies.cost``) and its report."""

from __future__ import annotations

import statistics

import pytest
import torch

from hacn_core import catalog
from hacn_core.awnn import fast_cpp
from hacn_core.awnn import AdaptiveMLP, quantile_width
from hacn_core.awnn.studies import cost as ac
from hacn_core.awnn.studies import cost_report as cr


def _awnn(seed: int = 0) -> AdaptiveMLP:
    torch.manual_seed(seed)
    return AdaptiveMLP(in_dim=2, out_dim=2, n_hidden_layers=2, activation="relu", rate_init=0.05)


def test_naive_model_starts_as_the_awnn():
    """Same weights, same rates, Eq. 14's importances: the two compute one function."""
    awnn = _awnn()
    naive = ac.NaiveAWNN(awnn)
    x = torch.randn(16, 2)
    assert naive.widths() == awnn.widths()
    # float32: exp(-nu j) - exp(-nu (j + 1)) cancels where q^j (1 - q) does not
    torch.testing.assert_close(naive(x), awnn(x), rtol=1e-4, atol=1e-5)


def test_naive_rebuild_keeps_survivors_and_state():
    """A rebuild at the same widths keeps the function and every optimizer state; a
    rebuild that shrinks a layer keeps its surviving weights and resets its state."""
    awnn = _awnn()
    naive = ac.NaiveAWNN(awnn)
    opt = torch.optim.Adam(naive.parameters(), lr=0.01)
    x, y = torch.randn(32, 2), torch.randint(0, 2, (32,))
    ac.scaled_ce(naive(x), y, 1000).backward()
    opt.step()
    before = naive(x).detach()
    first = naive.lins[0].weight.detach().clone()
    opt2 = naive.rebuild(opt, 0.01, keep_widths=True)
    torch.testing.assert_close(naive(x), before)
    assert len(opt2.state) == len(list(naive.parameters()))  # every tensor kept its Adam state
    with torch.no_grad():
        naive.raw[0].fill_(-1.0)  # a larger rate: a narrower first layer
    opt3 = naive.rebuild(opt2, 0.01)
    w = naive.widths()[0]
    assert w < first.shape[0]
    torch.testing.assert_close(naive.lins[0].weight, first[:w])
    assert naive.lins[0].weight not in opt3.state


def test_fixed_mlp_shape():
    net = ac.fixed_mlp(2, [5, 3], 4)
    assert sum(p.numel() for p in net.parameters()) == (2 * 5 + 5) + (5 * 3 + 3) + (3 * 4 + 4)
    assert net(torch.randn(7, 2)).shape == (7, 4)


@pytest.mark.parametrize("phase", ac.PHASES)
def test_measurement_is_consistent(phase):
    """Medians are those of the stored per-repetition ratios; steady keeps the widths,
    adapting changes them; the thread count is restored."""
    threads = torch.get_num_threads()
    config = ac.step_cost_config("smoke", phase) | {"reps": 3, "steps": 3}
    out = ac.measure_step_costs(config)
    m, c = out["metrics"], out["curves"]
    assert torch.get_num_threads() == threads
    assert m["flushed_denormals"] and (torch.tensor([1e-39]) * 1.0).item() != 0.0  # flushing is off again
    assert len(c["awnn_s"]) == len(c["fixed_s"]) == len(c["naive_s"]) == 3
    assert m["awnn/fixed"] == pytest.approx(statistics.median(a / f for a, f in zip(c["awnn_s"], c["fixed_s"])))
    assert m["awnn_us"] == pytest.approx(1e6 * statistics.median(c["awnn_s"]))
    assert m["width_start"] == 2 * quantile_width(config["rate_init"]) == 462
    assert f"ratio {m['awnn/fixed']:.3f}" in cr.measurement_text(m, phase)  # the benchmark prints the stored median
    assert m["node"] == fast_cpp.active_backend()
    if m["node"] == "cpp":  # the same AWNN timed with the Python node, interleaved
        assert len(c["python_s"]) == 3
        assert m["python/awnn"] == pytest.approx(statistics.median(p / a for p, a in zip(c["python_s"], c["awnn_s"])))
        assert "what the C++ node saves" in cr.measurement_text(m, phase)
    if phase == "steady":
        assert m["width_changes"] == 0 and m["width_end"] == m["width_start"]
    else:
        assert m["width_changes"] > 0


def test_bad_input():
    with pytest.raises(ValueError, match="phase"):
        ac.step_cost_config("book", "warm")
    with pytest.raises(ValueError, match="steps"):
        ac.measure_step_costs(ac.step_cost_config("smoke", "steady") | {"steps": 1})
    with pytest.raises(ValueError, match="reps"):
        ac.measure_step_costs(ac.step_cost_config("smoke", "steady") | {"reps": 0})


def test_registered_with_both_phases():
    exp = catalog.get(ac.EXPERIMENT_ID)
    for profile in ("smoke", "book", "paper"):
        runs = exp.runs(profile)
        seeds = ac.ADAPTING_SEEDS[profile]
        assert sorted(c["phase"] for c in runs) == sorted(["adapting"] * len(seeds) + ["steady"] * 2)
        assert [c["seed"] for c in runs if c["phase"] == "adapting"] == list(seeds)
        assert [c["flush_denormal"] for c in runs].count(False) == 1  # the steady phase, subnormals kept
        assert len({ac.run_label(c) for c in runs}) == len(runs)
    assert len(ac.ADAPTING_SEEDS["book"]) >= 3  # the book reads several adapting runs pooled
    # the paper's "up to 10x" (Sec. 3.3) is shown beside our naive variant, never called reproduced
    assert [(link.item, link.metric, link.tolerance) for link in exp.links] == [
        ("awnn/sec3.3/training-overhead", "naive/fixed", None)]


def test_ratio_by_width_groups_repetitions():
    from hacn_core.engine.results import RunResult

    curves = {"awnn_s": [2.0, 3.0, 4.0, 1.2], "fixed_s": [1.0, 1.0, 2.0, 1.0], "static_s": [1.5, 1.5, 3.0, 1.1],
              "update_width_s": [0.1] * 4, "total_width": [150, 190, 250, 500]}
    result = RunResult("x", {"phase": "adapting"}, "h", 0, {}, curves)
    table = cr.ratio_by_width(result)
    assert list(table.index) == ["< 200", "200-299", ">= 400"]  # empty bands are left out
    assert table.loc["< 200", "repetitions"] == 2
    assert table.loc["< 200", "awnn/fixed"] == pytest.approx(2.5)  # median of 2 and 3
    assert table.loc["200-299", "static/fixed"] == pytest.approx(1.5)
    assert table.loc[">= 400", "awnn/static"] == pytest.approx(1.2 / 1.1)


def _fake_adapting(seed, awnn, fixed, widths):
    from hacn_core.engine.results import RunResult

    n = len(awnn)
    curves = {"awnn_s": awnn, "fixed_s": fixed, "static_s": [f * 1.05 for f in fixed], "update_width_s": [0.01] * n,
              "total_width": widths}
    metrics = {"width_start": max(widths), "width_end": min(widths), "width_changes": 3, "steps_compared": 10 * n}
    return RunResult("x", {"phase": "adapting", "seed": seed}, f"h{seed}", seed, metrics, curves)


def test_adapting_summary_pools_the_repetitions_of_all_seeds():
    a = _fake_adapting(0, [1.1, 1.2, 1.3], [1.0, 1.0, 1.0], [420, 300, 150])
    b = _fake_adapting(1, [1.0, 2.2], [1.0, 2.0], [250, 120])
    table = cr.adapting_summary([b, a])
    assert list(table.index) == ["seed 0", "seed 1", "pooled"]
    assert table.loc["seed 0", "AWNN / fixed"] == pytest.approx(1.2)
    assert table.loc["seed 1", "AWNN / fixed"] == pytest.approx(1.05)  # median of 1.0 and 1.1
    pooled = table.loc["pooled"]
    assert pooled["repetitions"] == 5 and pooled["width changes"] == 6 and pooled["steps"] == 50
    assert pooled["AWNN / fixed"] == pytest.approx(1.1)  # median of 1.0, 1.1, 1.1, 1.2, 1.3
    assert pooled[f"share <= {ac.TARGET_RATIO}"] == pytest.approx(3 / 5)
    assert pooled["static / fixed"] == pytest.approx(1.05)
    assert pooled["total width"] == "120 to 420"
    bands = cr.ratio_by_width([a, b])
    assert bands.loc["< 200", "repetitions"] == 2  # 150 (seed 0) and 120 (seed 1)
    assert bands.loc["< 200", "awnn/fixed"] == pytest.approx((1.3 + 1.1) / 2)
    with pytest.raises(ValueError, match="awnn-step-cost"):
        cr.ratio_by_width([])
