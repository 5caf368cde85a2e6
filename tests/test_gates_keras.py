"""gates-keras: Keras 2017 defaults for the d = 50 Gated PlainNet (Residual Gates Sec. 3.1)."""

from __future__ import annotations

import copy
import math

import pytest
import torch
from torch import nn

from hacn_core import catalog, gates
from hacn_core.engine.results import RunContext, RunResult
from hacn_core.gates.studies import keras_defaults as kd
from hacn_core.gates.studies import keras_report as kr
from hacn_core.gates.studies.mnist import mnist_tensors
from hacn_core.models.fc import mnist_fc
from hacn_core.models.stacked_fc import StackedFCNet


# ----------------------------------------------------------------------------- 3. the optimizer


def _mu(t: int) -> float:
    return 0.9 * (1 - 0.5 * 0.96 ** (t * 0.004))


def test_keras_nadam_reference_first_two_steps_by_hand():
    lr, eps, p0, g1, g2 = 0.002, 1e-8, 1.0, 0.5, -0.2
    mu1, mu2, mu3 = _mu(1), _mu(2), _mu(3)
    # step 1: m = 0.1 g1, v = 0.001 g1^2, v' = g1^2
    m1 = 0.1 * g1
    bar1 = (1 - mu1) * g1 / (1 - mu1) + mu2 * m1 / (1 - mu1 * mu2)
    p1 = p0 - lr * bar1 / (abs(g1) + eps)
    # step 2
    m2 = 0.9 * m1 + 0.1 * g2
    v2 = 0.999 * 0.001 * g1 ** 2 + 0.001 * g2 ** 2
    bar2 = (1 - mu2) * g2 / (1 - mu1 * mu2) + mu3 * m2 / (1 - mu1 * mu2 * mu3)
    p2 = p1 - lr * bar2 / (math.sqrt(v2 / (1 - 0.999 ** 2)) + eps)
    assert kd.keras_nadam_reference([g1, g2], p0) == pytest.approx([p1, p2], rel=1e-14)


@pytest.mark.parametrize("eps", [1e-8, 1e-7])
def test_torch_nadam_takes_keras_nadam_steps(eps):
    grads = [0.5, -0.2, 0.3]
    p = nn.Parameter(torch.tensor(1.0, dtype=torch.float64))
    opt = torch.optim.NAdam([p], lr=0.002, betas=(0.9, 0.999), eps=eps, momentum_decay=0.004)
    ours = []
    for g in grads:
        p.grad = torch.tensor(g, dtype=torch.float64)
        opt.step()
        ours.append(float(p.detach()))
    keras = kd.keras_nadam_reference(grads, 1.0, epsilon=eps)
    # torch keeps the running product of mu_t in float32 (its scalar dtype): the steps agree to 1e-6 of
    # their size, far closer than any change of the rule (a constant momentum 0.9 makes the first step 40% larger)
    steps = [b - a for a, b in zip([1.0] + ours, ours)]
    keras_steps = [b - a for a, b in zip([1.0] + keras, keras)]
    assert steps == pytest.approx(keras_steps, rel=1e-6)
    # and the steps are not trivially equal to plain Adam's (the schedule matters)
    q = nn.Parameter(torch.tensor(1.0, dtype=torch.float64))
    adam = torch.optim.Adam([q], lr=0.002, eps=eps)
    q.grad = torch.tensor(grads[0], dtype=torch.float64)
    adam.step()
    assert abs(float(q.detach()) - ours[0]) > 1e-5


# ----------------------------------------------------------------------------- configurations


def test_each_hypothesis_changes_only_its_keys():
    base = kd.make_config("baseline")
    assert base["kind"] == "gated_plain" and base["depth"] == 50 and base["bn_eps"] == 1e-5 and not base["k_clip"]
    for name, (changes, _) in kd.HYPOTHESES.items():
        config = kd.make_config(name)
        differ = {k for k in config if config[k] != base[k]} - {"hypothesis"}
        assert differ == set(changes), name
        assert all(config[k] == v for k, v in changes.items())
    assert kd.make_config("keras-all")["bn_momentum"] == 0.01 and kd.make_config("keras-all")["init"] == "glorot"


def test_bad_configuration_is_refused_by_name():
    with pytest.raises(ValueError, match="hypothesis='adam'.*allowed: baseline"):
        kd.make_config("adam")
    with pytest.raises(ValueError, match="k_clip"):
        kd.check_config(kd.make_config("baseline", k_clip=1))
    with pytest.raises(ValueError, match="input_scale"):
        kd.check_config(kd.make_config("baseline", input_scale="standardized"))
    with pytest.raises(ValueError, match="bn_eps"):
        mnist_fc("gated_plain", 2, bn_eps=0.0)


def test_profiles_and_catalog():
    exp = catalog.get("gates-keras")
    book = exp.runs("book")
    screen = [c for c in book if c["epochs"] == kd.SCREEN_EPOCHS]
    assert [c["hypothesis"] for c in screen] == list(kd.HYPOTHESES)
    assert {(c["depth"], c["seed"], c["train_subset"]) for c in book} == {(50, 0, None)}
    longer = [c for c in book if c["epochs"] != kd.SCREEN_EPOCHS]
    assert [(c["hypothesis"], c["epochs"]) for c in longer] == [(h, 10) for h in kd.LONGER_HYPOTHESES]
    paper = exp.runs("paper")
    assert {(c["depth"], c["seed"], c["epochs"]) for c in paper} == {(d, s, 100) for d in (50, 100) for s in (0, 1, 2)}


# ----------------------------------------------------------------------------- 1-2. init and BatchNorm


def test_keras_batchnorm_and_glorot_in_the_built_model():
    model = kd.build_model(kd.make_config("keras-all", depth=3))
    bns = [m for m in model.modules() if isinstance(m, nn.BatchNorm1d)]
    assert len(bns) == 3 and all(b.eps == 1e-3 and b.momentum == 0.01 for b in bns)
    for m in model.modules():
        if isinstance(m, nn.Linear):
            bound = math.sqrt(6 / (m.in_features + m.out_features))
            assert m.weight.abs().max() <= bound and torch.all(m.bias == 0)
    # Keras' moving average: moving = 0.99 * moving + 0.01 * batch statistic
    bn = bns[0]
    x = torch.randn(64, 50) * 3 + 2
    bn.train()(x)
    assert torch.allclose(bn.running_mean, 0.01 * x.mean(0), atol=1e-6)
    # ...and the denominator uses epsilon 1e-3: a constant unit comes out as 0, not 0/0
    assert torch.allclose(nn.functional.batch_norm(torch.ones(8, 2), None, None, training=True, eps=1e-3),
                          torch.zeros(8, 2))


def test_stacked_members_keep_their_own_batchnorm_and_gate_function():
    """Members with Keras' and PyTorch's BatchNorm (momentum, eps) and different g in one StackedFCNet:
    each computes its own network, and each BatchNorm keeps its own running statistics."""
    options = [{}, {"bn_eps": 1e-3, "bn_momentum": 0.01}, {"g": "clip01"}, {"bn_eps": 1e-3, "bn_momentum": 0.01}]
    members = []
    for i, opts in enumerate(options):
        torch.manual_seed(i)
        members.append(mnist_fc("gated_plain", 3, **opts).double())
    with torch.no_grad():  # gates off 1 and above 1, so that g = clip01 differs from ReLU
        for i, m in enumerate(members):
            gates.set_gates(m, [0.4 + 0.3 * i, 1.3, 0.7])
    singles = [copy.deepcopy(m) for m in members]
    stacked = StackedFCNet(members).double()
    assert [run[:2] for run in stacked.bn_runs] == [(0, 1), (1, 2), (2, 3), (3, 4)]  # unsorted: one call each
    x = torch.randn(4, 16, 784, dtype=torch.float64) * 1e-2  # small inputs: eps is visible in the output
    expected = torch.stack([m(x[s]) for s, m in enumerate(singles)])  # training mode: batch statistics
    assert torch.allclose(stacked(x), expected, atol=1e-10)
    stacked.eval()
    for s, (member, single) in enumerate(zip(stacked.write_back(), singles)):
        for key, value in single.state_dict().items():  # running statistics with each member's momentum
            torch.testing.assert_close(member.state_dict()[key], value, rtol=1e-10, atol=1e-12, msg=key)
    assert not torch.allclose(expected[0], expected[2])  # g matters here: the check is not vacuous
    with pytest.raises(ValueError, match="stem"):
        StackedFCNet([mnist_fc("gated_plain", 3), mnist_fc("gated_plain", 3, stem="dot_bn_relu")])


# ----------------------------------------------------------------------------- 4. the gate


def test_clip01_gate_value_and_gradient():
    k = torch.tensor([-1.0, 0.5, 1.5], requires_grad=True)
    g = gates.gate_value(k, "clip01")
    assert g.tolist() == [0.0, 0.5, 1.0]
    g.sum().backward()
    assert k.grad.tolist() == [0.0, 1.0, 0.0]  # ReLU would give 1 at k = 1.5


def test_clip_gates_projects_every_k_after_a_step():
    model = mnist_fc("gated_plain", 3)
    gates.set_gates(model, [-0.5, 0.3, 1.7])
    kd.ClipGates(0.0, 1.0).on_step_end(type("State", (), {"model": model})())
    assert list(gates.gate_values(model).values()) == pytest.approx([0.0, 0.3, 1.0])
    with pytest.raises(ValueError, match="lo=1"):
        kd.ClipGates(1.0, 0.0)


def test_a_k_clip_run_keeps_k_in_unit_interval(tmp_path):
    config = kd.make_config("k-clip", depth=3, epochs=1, train_subset=512)
    out = kd.train_gates_keras(config, RunContext(kd.EXPERIMENT_ID, tmp_path / "ckpt", progress=False))
    k = out["curves"]["k_per_block"]
    assert len(k) == 3 and all(0.0 <= v <= 1.0 for v in k)
    assert any(v < 1.0 for v in k)  # the gates did move (down), and none above 1
    assert out["metrics"]["gates_below_half"] == sum(v < 0.5 for v in k)
    assert out["metrics"]["k_min"] == pytest.approx(min(k))


# ----------------------------------------------------------------------------- 5. the input


def test_inputs_are_pixels_over_255():
    X, _ = mnist_tensors(False)
    assert X.shape[1] == 784 and X.min() >= 0 and X.max() <= 1
    assert torch.allclose(X[:200] * 255, (X[:200] * 255).round(), atol=1e-4)  # k / 255 for integer k


# ----------------------------------------------------------------------------- the report


def _result(hypothesis: str, seed: int, error: float, mean_k: float, closed: int = 0, below: int = 0,
            epochs: int = 5) -> RunResult:
    config = kd.make_config(hypothesis, seed=seed, epochs=epochs)
    return RunResult(kd.EXPERIMENT_ID, config, f"h{seed}{hypothesis}", seed,
                     {"test_error": error, "mean_k": mean_k, "gates_closed": closed, "gates_below_half": below})


def test_hypothesis_table_averages_seeds_and_gives_verdicts():
    results = [_result("keras-all", 0, 0.02, 0.6, closed=3, below=10), _result("baseline", 1, 0.9, 1.0),
               _result("baseline", 0, 0.8, 1.02), _result("glorot", 0, 0.3, 0.9)]
    table = kr.hypothesis_table(results)
    assert list(table.columns) == list(kr.COLUMNS)
    assert table["hypothesis"].tolist() == ["baseline", "glorot", "keras-all"]  # study order
    base = table.iloc[0]
    assert base["seeds"] == "0, 1" and base["test error %"] == pytest.approx(85.0) and base["mean k"] == 1.01
    assert base["per seed %"] == "80.00, 90.00"
    assert base["verdict"] == "fails" and not base["gates moved"]
    assert table.iloc[1]["verdict"] == "partial" and table.iloc[1]["gates moved"]
    last = table.iloc[2]
    assert last["verdict"] == "trains" and last["gates closed"] == 3 and last["gates k < 0.5"] == 10
    assert last["d"] == 50 and last["epochs"] == 5 and last["train images"] == 60000
    with pytest.raises(ValueError, match="test_error"):
        kr.verdict(1.5)


def test_confirmation_markdown_reads_every_number_from_the_table_and_the_paper():
    results = [_result("k-init-0.5", s, e, k, closed=c, epochs=100) for s, e, k, c in
               [(0, 0.02, 0.2, 20), (1, 0.03, 0.1, 25), (2, 0.025, 0.15, 24)]]
    results += [_result("keras-all", 0, 0.9, 1.2, epochs=100)]
    text = kr.confirmation_markdown(kr.hypothesis_table(results))
    assert text.startswith("- *d* = 50 (paper: 1.36%, mean *k* 0.46)")  # Tables 1-2
    assert "**2.50%** test error (by seed: 2.00, 3.00, 2.50) (trains; seeds 0, 1, 2, 100 epochs), mean final *k* 0.15, 23 of 50" in text
    assert "**90.00%** test error (fails; seeds 0, 100 epochs), mean final *k* 1.20, 0 of 50" in text
    assert kr.confirmation_markdown(kr.hypothesis_table([])) == ""


def test_the_ledger_finding_quotes_the_stored_confirmation():
    """DEEP_GATED_PLAIN_FINDING is typed prose: every confirmation number it quotes is the stored runs'."""
    from pathlib import Path

    from hacn_core.engine.results import ResultsStore
    from hacn_core.gates.paper_items import DEEP_GATED_PLAIN_FINDING

    table = kr.stored_table("paper", store=ResultsStore(Path(__file__).resolve().parents[1] / "results"))
    assert len(table), "the paper-profile confirmation of gates-keras is stored (results/gates-keras)"
    for _, row in table.iterrows():
        quoted = {f"{row['test error %']:.2f}%", f"{row['test error %']:.1f}%"}  # 2.21% or 85.3%
        assert any(q in DEEP_GATED_PLAIN_FINDING for q in quoted), (row["hypothesis"], row["d"], quoted)


def test_gate_gradients_by_hypothesis_matches_the_gates_mnist_diagnosis():
    from hacn_core.gates.studies import gradients

    X, y = mnist_tensors(True)
    data = (X[:512], y[:512])
    table = kr.gate_gradients_by_hypothesis(["baseline", "k-init-0.5"], depth=4, batches=5, data=data)
    ref = gradients.gate_gradients_at_init("gated_plain", 4, batches=5, data=data)
    # the baseline network is gates-mnist's: the same gradients, batch for batch
    assert table.loc["baseline", "mean |dL/dk|"] == pytest.approx(float(ref["mean_abs"].mean()), rel=1e-6)
    assert table.loc["baseline", "sign agreement"] == pytest.approx(float(ref["sign_agreement"].mean()))
    one = kr.gate_gradients_by_hypothesis(["baseline"], depth=4, batches=1, data=data)
    assert one.loc["baseline", "sign agreement"] == 1.0  # one batch: each gate has one sign


# ----------------------------------------------------------------------------- the stacked engine


def _fake_mnist64(train: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """MNIST-shaped float64 data (so both engines train in float64, where they agree to rounding)
    whose class is readable from the first 10 pixels; 300 training images: a short last batch."""
    gen = torch.Generator().manual_seed(1 if train else 2)
    n = 300 if train else 200
    y = torch.randint(0, 10, (n,), generator=gen)
    X = torch.rand(n, 784, generator=gen, dtype=torch.float64) * 0.3
    X[torch.arange(n), y] += 0.7
    return X, y


@pytest.fixture
def float64_data(monkeypatch):
    """Both engines in float64: the models (default dtype) and the data (``mnist.mnist_tensors``)."""
    from hacn_core.gates.studies import mnist

    monkeypatch.setattr(mnist, "mnist_tensors", _fake_mnist64)
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(before)


#: every hypothesis the stacked engine trains (all but the dot_bn_relu stem), BatchNorm pairs interleaved
STACKABLE = ("baseline", "keras-bn", "glorot", "g-clip01", "k-clip", "k-init-0.5", "keras-all")


#: both engines train in float64 here, but the engine's records are float32 (fit's ``param/<name>`` and the
#: loss sums of ``evaluate``): the runs agree to float32 rounding, far below what training in float32 would
#: part them by (see ``hacn_core.models.stacked_fc``)
RECORDS = {"rel": 1e-6, "abs": 1e-6}


def test_stacked_runs_are_the_single_runs_of_every_stackable_hypothesis(tmp_path, float64_data):
    configs = [kd.make_config(h, depth=3, seed=i % 2, epochs=2) for i, h in enumerate(STACKABLE)]
    assert len({kd.stack_key(c) for c in configs}) == 1
    stacked = kd.train_gates_keras_stacked(configs, tmp_path / "stacked", progress=False)
    for i, config in enumerate(configs):
        alone = kd.train_gates_keras(config, RunContext(kd.EXPERIMENT_ID, tmp_path / str(i), progress=False))
        name, got, ref = config["hypothesis"], stacked[i]["metrics"], alone["metrics"]
        assert set(got) == set(ref), name
        for key, value in ref.items():
            assert got[key] == pytest.approx(value, **RECORDS), f"{name}: {key}"
        for key in ("train_loss", "test_error", "mean_k", "k_per_block"):
            assert stacked[i]["curves"][key] == pytest.approx(alone["curves"][key], **RECORDS), key
    by_name = {c["hypothesis"]: out for c, out in zip(configs, stacked)}
    # the options did act: k moved, clip kept it in [0, 1], k started at 0.5, keras-bn trains another network
    assert max(by_name["k-clip"]["curves"]["k_per_block"]) <= 1.0
    assert max(by_name["baseline"]["curves"]["k_per_block"]) > 1.0
    assert by_name["k-init-0.5"]["curves"]["mean_k"][0] == 0.5
    assert by_name["keras-bn"]["metrics"]["train_loss"] != pytest.approx(by_name["baseline"]["metrics"]["train_loss"])


def test_stack_key_groups_the_paper_profile_by_depth():
    groups: dict = {}
    for c in kd.paper_configs():
        groups.setdefault(kd.stack_key(c), []).append(c)
    assert sorted((g[0]["depth"], len(g)) for g in groups.values()) == [(50, 6), (100, 6)]
    for g in groups.values():
        assert {(c["hypothesis"], c["seed"]) for c in g} == {(h, s) for h in kd.CONFIRM_HYPOTHESES for s in (0, 1, 2)}
    screen = [c for c in kd.book_configs() if c["epochs"] == kd.SCREEN_EPOCHS]
    keys = {c["hypothesis"]: kd.stack_key(c) for c in screen}
    assert keys["stem-dot-bn-relu"] is None  # no dot_bn_relu stem in StackedFCNet: trained alone
    assert keys["nadam-eps-1e-7"] != keys["baseline"]  # one optimizer: eps must be shared
    assert len({v for h, v in keys.items() if h not in ("stem-dot-bn-relu", "nadam-eps-1e-7")}) == 1
    with pytest.raises(ValueError, match="cannot be stacked"):
        kd.train_gates_keras_stacked([kd.make_config("stem-dot-bn-relu", 2)], "unused", progress=False)
    with pytest.raises(ValueError, match="cannot train together"):
        kd.train_gates_keras_stacked([kd.make_config("baseline", 2), kd.make_config("nadam-eps-1e-7", 2)],
                                     "unused", progress=False)


def test_run_stacked_trains_stackable_runs_together_and_the_stem_run_alone(tmp_path, float64_data):
    import dataclasses

    from hacn_core.engine.registry import run_experiment
    from hacn_core.engine.results import ResultsStore

    configs = [kd.make_config(h, depth=2, epochs=1) for h in ("keras-all", "k-init-0.5", "stem-dot-bn-relu")]
    exp = dataclasses.replace(kd.EXPERIMENT, configs={"smoke": lambda: configs})
    results = run_experiment(exp, "smoke", store=ResultsStore(tmp_path), stacked=True, progress=False)
    engines = {r.config["hypothesis"]: r.provenance.get("engine") for r in results}
    assert engines["keras-all"]["name"] == "stacked" and engines["keras-all"]["members"] == 2
    assert engines["k-init-0.5"] == engines["keras-all"]
    assert engines["stem-dot-bn-relu"] is None  # trained alone by train_gates_keras
