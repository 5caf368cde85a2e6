"""The residual-gates MNIST experiment (Residual Gates, Sec. 3.1): configs, training run, report tables.

MNIST itself is replaced by a tiny synthetic set of the same shape (784 features
in [0, 1], 10 classes), so the tests need no data and stay fast.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hacn_core import gates
from hacn_core.gates.studies import mnist as gm
from hacn_core.gates.studies import mnist_report as gr
from hacn_core.catalog import get
from hacn_core.models.fc import KINDS, mnist_fc
from hacn_core.paper_items import item
from hacn_core.engine.results import RunContext, RunResult, config_hash
from hacn_core.engine.training import evaluate

# Residual Gates Table 1 (test error %) and Table 2 (mean final k), as the study typed them before
# hacn_core.paper_items became their one source: the report must show exactly these values.
TABLE1 = {
    2: {"plain": 2.29, "resnet": 2.20, "gated_plain": 2.04, "gated_resnet": 2.17},
    10: {"plain": 2.22, "resnet": 1.64, "gated_plain": 1.78, "gated_resnet": 1.60},
    20: {"plain": 2.21, "resnet": 1.61, "gated_plain": 1.59, "gated_resnet": 1.57},
    50: {"plain": 60.37, "resnet": 1.62, "gated_plain": 1.36, "gated_resnet": 1.48},
    100: {"plain": 90.20, "resnet": 1.50, "gated_plain": 1.29, "gated_resnet": 1.26},
}
TABLE2 = {
    2: {"gated_plain": 10.57, "gated_resnet": 5.58},
    10: {"gated_plain": 1.19, "gated_resnet": 2.54},
    20: {"gated_plain": 0.64, "gated_resnet": 1.73},
    50: {"gated_plain": 0.46, "gated_resnet": 1.04},
    100: {"gated_plain": 0.41, "gated_resnet": 0.67},
}

PAPER_KEYS = {
    "dataset": "MNIST", "width": 50, "optimizer": "nadam", "lr": 0.002, "betas": [0.9, 0.999],
    "batch_size": 128, "epochs": 100, "weight_decay": 0.0, "k_init": 1.0, "g": "relu", "train_subset": None,
    "nadam_momentum_decay": 0.004,
}


def _fake_mnist(train: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """MNIST-shaped data whose class is readable from the first 10 pixels (so training learns)."""
    gen = torch.Generator().manual_seed(1 if train else 2)
    n = 384 if train else 200
    y = torch.randint(0, 10, (n,), generator=gen)
    X = torch.rand(n, 784, generator=gen) * 0.3
    X[torch.arange(n), y] += 0.7
    return X, y


@pytest.fixture
def fake_data(monkeypatch):
    monkeypatch.setattr(gm, "mnist_tensors", _fake_mnist)


@pytest.fixture
def captured(monkeypatch):
    """Keep the model that ``train_gates_mnist`` trains, to compare its metrics with it."""
    box = {}
    real_fit = gm.fit

    def fit(model, *args, **kwargs):
        box["model"] = model
        return real_fit(model, *args, **kwargs)

    monkeypatch.setattr(gm, "fit", fit)
    return box


def _tiny(kind: str = "gated_resnet", depth: int = 6, **overrides):
    return gm.make_config(kind, depth, 0, epochs=2, batch_size=64, removal=kind in gm.RESIDUAL_KINDS,
                          removal_orders=2, **overrides)


def _context(tmp_path) -> RunContext:
    return RunContext(gm.EXPERIMENT_ID, tmp_path / "ckpt", progress=False)


# ----------------------------------------------------------------------------- configurations


def test_paper_profile_is_exactly_the_papers_setting():
    runs = get(gm.EXPERIMENT_ID).runs("paper")
    assert len(runs) == 4 * 5 * 3
    assert {(r["kind"], r["depth"], r["seed"]) for r in runs} == {
        (k, d, s) for k in ("plain", "resnet", "gated_plain", "gated_resnet") for d in (2, 10, 20, 50, 100)
        for s in (0, 1, 2)
    }
    for r in runs:
        assert {k: r[k] for k in PAPER_KEYS} == PAPER_KEYS
        # Fig. 5 is measured on the d = 100 residual networks, and only there
        assert r["removal"] == (r["depth"] == 100 and r["kind"] in ("resnet", "gated_resnet"))
    assert len({config_hash(r) for r in runs}) == len(runs)


def test_book_and_smoke_profiles():
    exp = get(gm.EXPERIMENT_ID)
    book = exp.runs("book")
    assert len(book) == 20 and {r["seed"] for r in book} == {0}
    paper_by_cell = {(r["kind"], r["depth"]): r for r in exp.runs("paper") if r["seed"] == 0}
    for r in book:  # the paper's run of that cell with only the epoch budget changed
        assert r | {"epochs": 100} == paper_by_cell[(r["kind"], r["depth"])]
        assert r["epochs"] == gm.BOOK_EPOCHS
    # a scaled budget must not be labelled as the paper's setting by the ledger
    assert gm.BOOK_EPOCHS == 100 or not ({config_hash(r) for r in book} & exp.paper_config_hashes())
    smoke = exp.runs("smoke")
    assert {r["depth"] for r in smoke} == set(gm.SMOKE_DEPTHS) and all(r["epochs"] == 2 for r in smoke)
    assert all(r["train_subset"] == gm.SMOKE_TRAIN_SUBSET for r in smoke)
    assert sum(r["removal"] for r in smoke) == 2  # resnet and gated resnet at the deepest smoke depth
    for profile in ("smoke", "book", "paper"):
        assert all(isinstance(r["seed"], int) for r in exp.runs(profile))


def test_bad_configuration_is_named():
    with pytest.raises(ValueError, match="kind='dense'.*allowed: plain, resnet, gated_plain, gated_resnet"):
        gm.make_config("dense", 10, 0)
    with pytest.raises(ValueError, match=r"unknown configuration keys \['lr_decay'\]"):
        gm.make_config("plain", 10, 0, lr_decay=0.1)
    with pytest.raises(ValueError, match="removal=True needs kind"):
        gm.train_gates_mnist(gm.make_config("plain", 2, 0, removal=True), None)
    with pytest.raises(ValueError, match="optimizer='adam'.*allowed: nadam"):
        gm.train_gates_mnist(gm.make_config("plain", 2, 0, optimizer="adam"), None)


def test_links_point_at_existing_paper_items_with_the_papers_values():
    exp = get(gm.EXPERIMENT_ID)
    for link in exp.links:
        it = item(link.item)  # raises for an unknown id
        if link.item.startswith("gates/table1/"):
            kind, depth = link.where["kind"], link.where["depth"]
            assert it.paper_value == TABLE1[depth][kind]
            assert (link.metric, link.scale, link.tolerance) == ("test_error", 100.0, 0.3)
        if link.item.startswith("gates/table2/"):
            kind, depth = link.where["kind"], link.where["depth"]
            assert it.paper_value == TABLE2[depth][kind]
            assert (link.metric, link.tolerance) == ("mean_k", round(0.2 * TABLE2[depth][kind], 4))
    assert sum(link.item.startswith("gates/table1/") for link in exp.links) == 20
    assert sum(link.item.startswith("gates/table2/") for link in exp.links) == 10


def test_training_subset_is_fixed_and_checked():
    X, y = torch.arange(100.0).unsqueeze(1), torch.arange(100)
    a, b = gm.training_subset(X, y, 10), gm.training_subset(X, y, 10)
    assert torch.equal(a[0], b[0]) and torch.equal(a[0].squeeze(1).long(), a[1])
    assert len(set(a[1].tolist())) == 10
    assert gm.training_subset(X, y, None)[0] is X
    with pytest.raises(ValueError, match="train_subset=0"):
        gm.training_subset(X, y, 0)


# ----------------------------------------------------------------------------- helpers


def test_count_reopened_and_k_profile():
    closed = np.array([
        [False, False, False],  # never closed
        [False, True, True],  # closed and stays closed
        [True, False, True],  # reopened once
        [False, True, False],  # reopened
    ])
    assert gm.count_reopened(closed) == 2
    s = gm.k_profile_summary([1.0, 1.0, 0.2, 0.4, 0.8, 0.6])
    assert s["k_first_third"] == 1.0 and s["k_middle_third"] == pytest.approx(0.3)
    assert s["k_last_third"] == pytest.approx(0.7) and s["k_middle_dip"] == pytest.approx(0.4)
    with pytest.raises(ValueError, match="at least 3"):
        gm.k_profile_summary([1.0, 0.5])


def test_closed_gate_never_reopens_under_nadam():
    """g = ReLU: dL/dk = 0 for k <= 0, and NAdam's decaying momentum only carries k further down."""
    torch.manual_seed(0)
    model = mnist_fc("gated_plain", 2, width=8, in_features=12)
    X, y = torch.rand(32, 12), torch.randint(0, 10, (32,))
    gates.set_gates(model, [-0.01, 1.0])
    opt = torch.optim.NAdam(model.parameters(), lr=0.002)
    for _ in range(50):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(X), y).backward()
        assert model.layers[0].k.grad.item() == 0.0
        opt.step()
    assert model.layers[0].k.item() == torch.tensor(-0.01).item()  # no momentum built up: it stays put
    # a gate driven closed by the loss: momentum carries it a little further down, never back up
    k = torch.nn.Parameter(torch.tensor(0.05))
    opt = torch.optim.NAdam([k], lr=0.01)
    history = []
    for _ in range(300):
        opt.zero_grad()
        (3.0 * gates.gate_value(k)).backward()  # dL/dk = 3 while open, 0 once closed
        opt.step()
        history.append(k.item())
    closed_at = next(i for i, v in enumerate(history) if v <= 0)
    after = np.array(history[closed_at:])
    assert (after <= 0).all() and (np.diff(after) <= 0).all() and after[-1] < after[0]


# ----------------------------------------------------------------------------- the training run


def test_train_returns_what_the_notebook_needs(tmp_path, fake_data, captured):
    config = _tiny("gated_resnet", 6)
    out = gm.train_gates_mnist(config, _context(tmp_path))
    model, m, c = captured["model"], out["metrics"], out["curves"]
    test = _fake_mnist(False)
    # Table 1: final test error is the trained model's error on the test split
    assert m["test_error"] == pytest.approx(1 - evaluate(model, test)["accuracy"], abs=1e-9)
    assert c["test_error"][-1] == pytest.approx(m["test_error"], abs=1e-9)
    assert min(c["test_error"][1:]) == pytest.approx(m["best_test_error"])
    # Fig. 4: one training loss per epoch
    assert c["epoch"] == [1, 2] and len(c["train_loss"]) == 2 and c["train_loss"][-1] == m["train_loss"]
    # Table 2 and Fig. 5 (left): the model's own gates, 3 blocks for d = 6
    k = list(gates.gate_values(model).values())
    assert len(k) == 3 == m["n_gates"]
    assert c["k_per_block"] == pytest.approx(k, abs=0)
    assert m["mean_k"] == pytest.approx(gates.mean_gate(model))
    assert c["mean_k"][0] == 1.0 and c["mean_k"][-1] == pytest.approx(m["mean_k"])
    assert m["gates_closed"] == sum(v <= 0 for v in k) and m["gates_reopened"] == 0
    # Fig. 5 (right): nothing removed = the trained model; everything removed = all gates closed
    assert c["removal_blocks"] == [0, 1, 2, 3] and c["removal_layers"] == [0, 2, 4, 6]
    assert len(c["removal_random_acc"]) == 2
    full = 1 - m["test_error"]
    assert c["removal_greedy_acc"][0] == pytest.approx(full, abs=1e-9)
    assert all(curve[0] == pytest.approx(full, abs=1e-9) for curve in c["removal_random_acc"])
    closed = gm.mnist_fc("gated_resnet", 6)
    closed.load_state_dict(model.state_dict())
    gates.set_gates(closed, 0.0)
    assert c["removal_greedy_acc"][-1] == pytest.approx(evaluate(closed, test)["accuracy"], abs=1e-9)
    assert c["removal_greedy_order"] == gates.removal_order(model, "greedy")
    assert m["acc_half_removed_random"] == c["removal_random_acc_mean"][1]  # half of 3 blocks: 1
    assert m["retained_half_removed_random"] == pytest.approx(m["acc_half_removed_random"] / full)
    # everything is JSON-serialisable as the store needs
    import json

    json.dumps(out)


def test_train_plain_and_momentum_check(tmp_path, fake_data):
    out = gm.train_gates_mnist(_tiny("plain", 2), _context(tmp_path))
    assert "mean_k" not in out["metrics"] and "removal_blocks" not in out["curves"]
    assert 0.0 <= out["metrics"]["test_error"] <= 1.0
    with pytest.raises(ValueError, match="nadam_momentum_decay=0.01 but the trainer built NAdam"):
        gm.train_gates_mnist(_tiny("plain", 2, nadam_momentum_decay=0.01), _context(tmp_path / "b"))


# ----------------------------------------------------------------------------- tables


def _result(kind: str, depth: int, seed: int, error: float, mean_k: float | None = None) -> RunResult:
    metrics = {"test_error": error, "best_test_error": error - 0.001}
    if mean_k is not None:
        metrics |= {"mean_k": mean_k, "gates_closed": 0}
    config = gm.make_config(kind, depth, seed)
    return RunResult(gm.EXPERIMENT_ID, config, config_hash(config), seed, metrics)


def test_tables_put_the_papers_values_beside_ours():
    results = [_result("resnet", 10, s, e) for s, e in ((0, 0.016), (1, 0.018))]
    results += [_result("gated_plain", 10, 0, 0.017, mean_k=1.5)]
    t1 = gr.table1(results)
    row = t1[t1.kind == "ResNet"].iloc[0]
    assert (row.paper, row.seeds) == (1.64, 2) and row.ours == pytest.approx(1.7)
    assert row["ours - paper"] == pytest.approx(0.06)
    t2 = gr.table2(results)
    assert list(t2.kind) == ["Gated PlainNet"] and t2.iloc[0].paper == 1.19 and t2.iloc[0].ours == 1.5


def test_report_tables_show_every_cell_of_tables_1_and_2():
    results = [_result(k, d, 0, 0.02, mean_k=1.0 if k in gm.GATED_KINDS else None) for d in gm.DEPTHS
               for k in KINDS]
    labels = {v: k for k, v in gr.KIND_LABELS.items()}
    t1 = gr.table1(results)
    assert len(t1) == 20
    assert {(row.d, labels[row.kind]): row.paper for row in t1.itertuples()} == {
        (d, k): v for d, row in TABLE1.items() for k, v in row.items()}
    t2 = gr.table2(results)
    assert len(t2) == 10
    assert {(row.d, labels[row.kind]): row.paper for row in t2.itertuples()} == {
        (d, k): v for d, row in TABLE2.items() for k, v in row.items()}


def test_claims_read_the_papers_statements_off_the_runs():
    results = [_result("plain", d, 0, e) for d, e in ((2, 0.03), (50, 0.6))]
    results += [_result("gated_plain", d, 0, e, mean_k=k) for d, e, k in ((2, 0.02, 5.0), (50, 0.015, 0.5))]
    for r in results:
        r.metrics["train_loss"] = {"plain": 0.1, "gated_plain": 0.01}[r.config["kind"]] * (r.config["depth"] / 2)
    table = gr.claims(results).set_index("claim")
    assert table.loc["Gated PlainNet has lower test error than Plain at every depth", "holds"]
    assert table.loc["Plain networks fail to converge at d = 50 and 100 (test error 60% and 90%)", "holds"]
    assert table.loc["Mean k of Gated PlainNet decreases with depth", "holds"]
    assert table.loc["Gated ResNet has lower test error than ResNet at every depth", "holds"] is None
    assert not table.loc["The training-loss gap between plain and gated plain grows with depth", "holds"]  # 10 = 10


def test_cost_table_reads_seconds_per_epoch_off_the_runs():
    runs = []
    for kind, times in (("plain", [2.0, 3.0, 4.0, 5.0]), ("resnet", [10.0, 12.0, 14.0, 16.0])):
        r = _result(kind, 10, 0, 0.02)
        r.curves["time_s"] = times  # cumulative: first epoch 2 s then 1 s each (plain); 10 then 2 (resnet)
        runs.append(r)
    assert gr.epoch_seconds(runs[0]) == 1.0 and gr.epoch_seconds(runs[1]) == 2.0
    frame, summary = gr.cost_table(runs)
    assert frame.loc[10, "Plain"] == 1.0 and frame.loc["sum over d", "ResNet"] == 2.0
    assert summary[f"all cells x {gm.PAPER_EPOCHS} epochs (paper, one seed), minutes"] == pytest.approx(300 / 60)


def test_gate_gradients_at_init_measure_every_gate(monkeypatch, tmp_path):
    from hacn_core.engine.results import ResultsStore, run_or_load
    from hacn_core.gates.studies import gradients as gg

    data = _fake_mnist(True)
    one = gg.gate_gradients_at_init("gated_plain", 6, batches=1, data=data)
    assert one["mean_abs"].shape == (6,) and np.all(one["sign_agreement"] == 1.0)  # one batch: one sign
    many = gg.gate_gradients_at_init("gated_plain", 6, batches=8, data=data)
    assert np.all((many["sign_agreement"] >= 0) & (many["sign_agreement"] <= 1)) and np.all(many["mean_abs"] > 0)
    # the first batch is the same draw, so its gradient is the one-batch result
    assert gg.gate_gradients_at_init("gated_plain", 6, batches=1, data=data)["mean_abs"] == pytest.approx(
        one["mean_abs"])
    with pytest.raises(ValueError, match="kind='plain' has no gates; allowed: gated_plain, gated_resnet"):
        gg.gate_gradients_at_init("plain", 6, data=data)
    # the experiment stores per-third means of exactly these per-gate values; the chapter's table reads them
    monkeypatch.setattr(gg, "mnist_tensors", lambda train: data)
    store = ResultsStore(tmp_path)
    results = [run_or_load(gg.EXPERIMENT_ID, gg.make_config(d, batches=2), gg.measure, store=store, progress=False)
               for d in (6, 3)]
    per_gate = gg.gate_gradients_at_init("gated_plain", 6, batches=2, data=data)
    assert results[0].metrics["mean_abs/first"] == pytest.approx(per_gate["mean_abs"][:2].mean())
    assert results[0].curves["sign_agreement"] == pytest.approx(per_gate["sign_agreement"].tolist())
    table = gr.gate_gradient_table(results)
    assert list(table.index) == [3, 6] and "sign agreement last third" in table.columns
    assert table.loc[6, "|dL/dk| first third"] == results[0].metrics["mean_abs/first"]


def test_table2_counts_closed_gates_per_seed_in_whole_gates():
    """Closed gates are a count per seed ('1, 0, 2 of 50'), never a mean of counts such as 1.0."""
    results = []
    for seed, closed in ((1, 0), (0, 1), (2, 2)):
        r = _result("gated_plain", 50, seed, 0.02, mean_k=0.5)
        r.metrics |= {"gates_closed": closed, "n_gates": 50}
        results.append(r)
    row = gr.table2(results).iloc[0]
    assert row["closed gates (k <= 0), per seed"] == "1, 0, 2 of 50"  # seeds 0, 1, 2 in order
    assert row.seeds == 3 and row["std"] == pytest.approx(0.0)
