"""AWNN chapter 1 (how a width is set): experiment ``awnn-kaiming-plus``, its helpers and its report."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from hacn_core import awnn, catalog
from hacn_core.awnn.studies import init as ai
from hacn_core.awnn.studies import init_report as ir
from hacn_core.engine.results import ResultsStore

NOTEBOOK_CURVES = ("epoch", "train_loss", "record_epoch", "train_acc", "train_nll", "val_acc", "test_acc",
                   "total_width", "widths", "rates")


# --------------------------------------------------------------------------- configurations


def test_configs_per_profile():
    exp = catalog.get(ai.EXPERIMENT_ID)
    smoke, book, paper = exp.runs("smoke"), exp.runs("book"), exp.runs("paper")
    # one seed per init in smoke, three in book, ten in paper; both inits everywhere
    for runs, seeds in ((smoke, {0}), (book, {0, 1, 2}), (paper, set(range(10)))):
        assert len(runs) == 2 * len(seeds)
        for init in ai.INITS:
            assert {r["seed"] for r in runs if r["init"] == init} == seeds
    assert {r["epochs"] for r in smoke} == {ai.SMOKE_EPOCHS} and ai.SMOKE_EPOCHS <= 5
    assert {r["epochs"] for r in book} == {ai.BOOK_EPOCHS} and ai.BOOK_EPOCHS < 5000
    assert {r["epochs"] for r in paper} == {5000}
    # the paper's SpiralHard setting (App. C.1, Table 3) and the 5-layer net of Fig. 2
    for r in smoke + book + paper:
        assert (r["dataset"], r["lr"], r["batch_size"], r["rate_init"], r["k"]) == ("SpiralHard", 0.01, 128, 0.01, 0.9)
        assert (r["hidden_layers"], r["activation"], r["grow_init"]) == (5, "relu", "normal")
        assert r["sigma_theta"] in (1.0, 10.0)
    # profiles differ only in budget, seed and record frequency
    keys = {"epochs", "seed", "record_every"}
    strip = lambda r: {k: v for k, v in r.items() if k not in keys}  # noqa: E731
    assert {tuple(sorted(strip(r).items())) for r in paper} == {tuple(sorted(strip(r).items())) for r in book}


def test_bad_config_is_refused():
    with pytest.raises(ValueError, match="init='xavier'.*allowed: kaiming_plus, kaiming"):
        ai.make_config("xavier", 0)
    with pytest.raises(ValueError, match="unknown configuration keys.*'width'"):
        ai.make_config("kaiming", 0, width=3)


# --------------------------------------------------------------------------- a tiny run


def test_tiny_run_returns_the_notebook_curves(tmp_path):
    results = catalog.run(ai.EXPERIMENT_ID, "smoke", store=ResultsStore(tmp_path), progress=False)
    assert sorted(r.config["init"] for r in results) == sorted(ai.INITS)
    for r in results:
        c = r.curves
        assert set(NOTEBOOK_CURVES) <= set(c)
        epochs = r.config["epochs"]
        assert c["epoch"] == list(range(1, epochs + 1)) and len(c["train_loss"]) == epochs
        n_rec = epochs + 1  # before training and after every epoch (record_every=1)
        for key in ("record_epoch", "train_acc", "train_nll", "val_acc", "test_acc", "total_width", "widths", "rates"):
            assert len(c[key]) == n_rec, key
        # before any step: the starting rate and its quantile width (231) in all 5 layers
        assert c["widths"][0] == [231] * 5 and c["total_width"][0] == 1155
        # Algorithm 1: after each step every width is the quantile of its rate
        for widths, rates in zip(c["widths"], c["rates"]):
            assert widths == [awnn.quantile_width(nu, 0.9) for nu in rates]
            assert sum(widths) == c["total_width"][c["widths"].index(widths)]
        assert all(0.0 <= a <= 1.0 for a in c["test_acc"])
        m = r.metrics
        assert m["final_test_acc"] == c["test_acc"][-1] and m["final_total_width"] == c["total_width"][-1]
        assert set(m) >= {"test_acc", "best_epoch", "epochs_to_converge", "final_train_acc"}
    frame = ir.results_frame(results)
    assert list(frame["init"]) == ["kaiming", "kaiming+"]
    fig = ir.plot_convergence(results)
    assert len(fig.axes) == 3


def test_elbo_loss_is_eq13_with_the_training_set_size():
    torch.manual_seed(0)
    model = awnn.AdaptiveMLP(awnn.AWNNConfig(2, 2, 2, "relu", initial_width=4, fused=False))
    x, y = torch.randn(8, 2), torch.randint(0, 2, (8,))
    loss = ai.elbo_loss(model, 3500, 10.0)(model(x), y)
    weights = sum(float(p.detach().pow(2).sum()) for p in awnn.awnn_parameters(model))
    hand = 3500 / 8 * float(F.cross_entropy(model(x).detach(), y, reduction="sum")) + weights / (2 * 10.0**2)
    assert math.isclose(float(loss.detach()), hand, rel_tol=1e-6)


# --------------------------------------------------------------------------- Fig. 2 / Fig. 7 (left)


def _hand_variances(model: awnn.AdaptiveMLP, x: torch.Tensor, rate: float) -> list[float]:
    """Eq. 14 written out with NumPy: alpha = ReLU(h W^T + b), h = alpha * (1 - q) q^j."""
    h = x.numpy()
    out = []
    for lin, nu in zip(list(model.layers)[:-1], model.rates().tolist()):
        assert math.isclose(nu, rate, rel_tol=1e-6)  # the raw rate was stored in float32
        q = math.exp(-nu)
        w, b = lin.weight.detach().numpy(), lin.bias.detach().numpy()
        alpha = np.maximum(h @ w.T + b, 0.0)
        out.append(float(np.mean((alpha - alpha.mean()) ** 2)))
        h = alpha * (1 - q) * q ** np.arange(alpha.shape[1])
    return out


@pytest.mark.parametrize("init", ai.INITS)
def test_activation_variances_match_a_hand_computation(init):
    rate, layers = 0.05, 3  # D = 47: small and quick
    measured = ai.activation_variances(init, hidden_layers=layers, rate=rate, n_inputs=512, seed=3)
    model = ai.variance_model(init, layers, rate, seed=3)
    hand = _hand_variances(model, ai.gaussian_inputs(512, 2, 3), rate)
    np.testing.assert_allclose(measured, hand, rtol=1e-10)


def test_theory_variances_by_hand():
    d = 231  # quantile width of rate 0.01 at k = 0.9
    q = math.exp(-0.01)
    s = sum(((1 - q) * q**j) ** 2 for j in range(d))
    relu_var = 0.5 - 0.5 / math.pi  # Var[ReLU(z)] / Var[z] for a centred Gaussian z
    plus = ai.theory_variances("kaiming_plus")
    kaiming = ai.theory_variances("kaiming")
    assert len(plus) == len(kaiming) == 5
    np.testing.assert_allclose(plus, [2 * relu_var] * 5, rtol=1e-12)  # constant: Theorem 3.1
    np.testing.assert_allclose(kaiming, [2 * relu_var * (s / d) ** l for l in range(5)], rtol=1e-12)
    assert s / d < 3e-5  # each layer shrinks the variance ~50,000-fold under kaiming


def test_measured_variances_follow_the_theory():
    table = ir.variance_table(n_inputs=2048)
    ratio = table["measured / theory"]
    assert ((ratio > 0.5) & (ratio < 2.0)).all()  # both schemes, every layer
    plus = table[table["init"] == "kaiming+"]["measured"].to_numpy()
    kaiming = table[table["init"] == "kaiming"]["measured"].to_numpy()
    assert plus.max() / plus.min() < 2.0
    assert kaiming[-1] / kaiming[0] < 1e-15


# --------------------------------------------------------------------------- Fig. 1


def test_start_widths_and_the_paper():
    table = ir.start_width_table().set_index("rate")
    assert table.loc[0.01, "ours D"] == 231 and table.loc[0.01, "paper (approx.)"] == 256
    assert table.loc[0.02, "ours D"] == 116 and table.loc[0.02, "paper (approx.)"] == 128
    assert table.loc[0.004, "ours D"] == 576 and table.loc[0.004, "paper (approx.)"] == 512
    for rate, row in table.iterrows():
        d = int(row["ours D"])
        assert 1 - math.exp(-rate * d) >= 0.9 > 1 - math.exp(-rate * (d - 1))  # Eq. 11's quantile
        assert d == math.ceil(math.log(10) / rate)
