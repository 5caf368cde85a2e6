"""The C++ node of the adaptive MLP (hacn_core/awnn/csrc/awnn_fused.cpp) against the Python one.

Both run the same ATen ops in the same order, so everything is compared with
``torch.equal`` (bit for bit): forward values, every gradient, a second backward, and
a short training run with width updates (what the stored results depend on). Also the
choice of backend and the fallback when the build fails.
"""

from __future__ import annotations

import math
import shutil

import pytest
import torch
import torch.nn.functional as F

from hacn_core.awnn import fast_cpp
from hacn_core.awnn import AdaptiveMLP, importance_log_shift, importance_scale, negative_elbo
from hacn_core.awnn.distribution import float_softplus
from hacn_core.engine.data import synthetic_splits

needs_compiler = pytest.mark.skipif(shutil.which("c++") is None and shutil.which("g++") is None,
                                    reason="no C++ compiler: the C++ node cannot be built")


@pytest.fixture(scope="module")
def ext():
    with fast_cpp.use_backend("cpp"):
        return fast_cpp.module()  # builds once (about 35 s) or loads the cached build


def _both(model: AdaptiveMLP, x: torch.Tensor, wrt: list[torch.Tensor], retain: bool = False):
    """Output and gradients of ``sum(out^2)`` under each backend."""
    out = {}
    for name in ("python", "cpp"):
        with fast_cpp.use_backend(name):
            y = model(x)
        loss = (y ** 2).sum()
        grads = torch.autograd.grad(loss, wrt, retain_graph=retain, allow_unused=True)
        if retain:  # a second backward through the same graph recomputes the freed intermediates
            grads = grads + torch.autograd.grad(loss, wrt, allow_unused=True)
        out[name] = (y, grads)
    return out["python"], out["cpp"]


def _equal(a, b) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return a.dtype == b.dtype and torch.equal(a, b)


@needs_compiler
@pytest.mark.parametrize("activation", ["relu", "leaky_relu", "relu6", "tanh"])
@pytest.mark.parametrize("layers", [1, 3])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("norm", ["none", "active"])
def test_cpp_node_equals_python_node_bit_for_bit(ext, activation, layers, bias, norm):
    torch.manual_seed(layers)
    model = AdaptiveMLP(in_dim=3, out_dim=4, n_hidden_layers=layers, activation=activation, bias=bias,
                        rate_init=0.05, importance_norm=norm)
    x = torch.randn(37, 3, requires_grad=True)
    wrt = [x, model.raw_rate, *(lin.rho for lin in model.layers)]
    (y_py, g_py), (y_cpp, g_cpp) = _both(model, x, wrt)
    assert _equal(y_py, y_cpp)
    assert all(_equal(a, b) for a, b in zip(g_py, g_cpp, strict=True))
    assert all(g is not None for g in g_cpp)


_aten = torch.ops.aten
_ACT_ = {"relu": lambda z, s: z.relu_(), "leaky_relu": lambda z, s: F.leaky_relu_(z, s),
         "relu6": lambda z, s: F.hardtanh_(z, 0.0, 6.0), "tanh": lambda z, s: z.tanh_()}
_ACT_GRAD = {"relu": lambda t, a, s: _aten.threshold_backward(t, a, 0),
             "leaky_relu": lambda t, a, s: _aten.leaky_relu_backward(t, a, s, True),
             "relu6": lambda t, a, s: _aten.hardtanh_backward(t, a, 0.0, 6.0),
             "tanh": lambda t, a, s: _aten.tanh_backward(t, a)}


def _cat_and_slice_node(model: AdaptiveMLP, x: torch.Tensor, g: torch.Tensor):
    """The node as first written, op for op: ``[1 | h]`` by ``torch.cat``, ``dL/dx`` a strided slice
    of ``g rho_0``, the activations' backward out of place. Returns ``(out, dL/dx, dL/draw, dL/drhos)``
    for the output gradient ``g`` (no priors)."""
    positions, activation, slope, bias, norms = model._specs()[0]
    nus = [float_softplus(r) for r in model.raw_rate.tolist()]
    rhos = [lin.rho.detach() for lin in model.layers]
    zero, ones = torch.zeros((), dtype=x.dtype), torch.ones(x.shape[0], 1, dtype=x.dtype)
    buf = torch.cat((ones, x), 1) if bias else x
    bufs, acts, fs = [buf], [], []
    for nu, j, rho, m in zip(nus, positions, rhos, norms):
        a = _ACT_[activation](torch.mm(buf, rho.t()), slope)
        f = torch.pow(math.exp(-nu), j)
        h = torch.addcmul(zero, a, f, value=importance_scale(nu, m))
        buf = torch.cat((ones, h), 1) if bias else h
        bufs, acts, fs = bufs + [buf], acts + [a], fs + [f]
    out = torch.mm(buf, rhos[-1].t())
    n = len(nus)
    g_rho, g_nu = [None] * (n + 1), []
    for layer in range(n, -1, -1):
        g_rho[layer] = g.t().mm(bufs[layer])
        if layer == 0:
            g_x = g.mm(rhos[0])
            g_x = g_x[:, 1:] if bias else g_x
            break
        gh = g.mm(rhos[layer])
        gh = gh[:, 1:] if bias else gh
        k = layer - 1
        t = torch.addcmul(zero, gh, fs[k], value=importance_scale(nus[k], norms[k]))
        if rhos[layer].shape[0] < t.shape[0]:
            w, gw = (rhos[layer][:, 1:], g_rho[layer][:, 1:]) if bias else (rhos[layer], g_rho[layer])
            s_k = torch.linalg.vecdot(w, gw, dim=0)
        else:
            s_k = torch.linalg.vecdot(t, acts[k], dim=0)
        g_nu.append(torch.dot(s_k, positions[k] - importance_log_shift(nus[k], norms[k])))
        g = _ACT_GRAD[activation](t, acts[k], slope)
    dsig = torch.tensor([math.expm1(-nu) for nu in nus], dtype=x.dtype)
    return out, g_x, torch.stack(g_nu[::-1]).mul_(dsig), g_rho


@needs_compiler
@pytest.mark.parametrize("activation", ["relu", "leaky_relu", "relu6", "tanh"])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("norm", ["none", "active"])
def test_both_nodes_keep_the_values_of_the_cat_and_slice_node_and_return_a_contiguous_input_gradient(
        ext, activation, bias, norm):
    """The nodes write ``[1 | h]`` in place, the activations' backward over its input, and hand back
    ``dL/dx`` contiguous (a strided one slowed GIN's scatter-sum backward, a gather, 8x): the values
    of the node as first written, bit for bit, on tokens ``(B, T, d)``, with a wide batch (rate
    gradient from the weights) and a narrow one (from the activations)."""
    for batch, dtype in (((4, 9), torch.float32), ((2,), torch.float64)):
        torch.manual_seed(len(batch))
        model = AdaptiveMLP(in_dim=5, out_dim=3, n_hidden_layers=2, activation=activation, bias=bias,
                            rate_init=0.15, importance_norm=norm).to(dtype)
        model.set_widths([17, 12])
        x = torch.randn(*batch, 5, dtype=dtype, requires_grad=True)
        g = torch.randn(*batch, 3, dtype=dtype)
        ref_out, ref_x, ref_raw, ref_rhos = _cat_and_slice_node(model, x.detach().reshape(-1, 5), g.reshape(-1, 3))
        for name in ("python", "cpp"):
            with fast_cpp.use_backend(name):
                out = model(x)
            grads = torch.autograd.grad(out, [x, model.raw_rate, *(lin.rho for lin in model.layers)], g)
            assert torch.equal(out, ref_out.reshape(*batch, 3))
            assert grads[0].is_contiguous() and torch.equal(grads[0], ref_x.reshape(*batch, 5))
            assert torch.equal(grads[1], ref_raw)
            assert all(torch.equal(a, b) for a, b in zip(grads[2:], ref_rhos, strict=True))


@needs_compiler
def test_use_build_swaps_the_compiled_node_for_a_block(ext):
    """fast_cpp.use_build runs a block with another build (the benchmark's older revision); the graph
    keeps that build's node for its backward, and the own build is back afterwards."""
    calls = []

    class Recorder:  # the own build's functions, counted
        def adaptive_mlp(self, *args):
            calls.append("adaptive_mlp")
            return ext.adaptive_mlp(*args)

        def __getattr__(self, name):
            return getattr(ext, name)

    model = AdaptiveMLP(in_dim=3, out_dim=2, rate_init=0.2)
    x = torch.randn(8, 3)
    with fast_cpp.use_backend("cpp"):
        expected = model(x)
        with fast_cpp.use_build(Recorder()):
            y = model(x)
            assert fast_cpp.module() is not ext
        assert fast_cpp.module() is ext and calls == ["adaptive_mlp"]
    assert torch.equal(y, expected)
    y.sum().backward()
    assert model.raw_rate.grad is not None
    with fast_cpp.use_backend("python"), pytest.raises(RuntimeError, match="use_build needs the C.. backend"):
        with fast_cpp.use_build(ext):
            pass


@needs_compiler
def test_cpp_node_in_float64_with_partial_gradients_and_a_second_backward(ext):
    torch.manual_seed(0)
    model = AdaptiveMLP(in_dim=2, out_dim=3, n_hidden_layers=2, activation="relu6", rate_init=0.08).double()
    model.raw_rate.requires_grad_(False)  # frozen rates: no rate gradient is asked for
    x = torch.randn(16, 2, dtype=torch.float64)  # and none for the input
    wrt = [lin.rho for lin in model.layers]
    (y_py, g_py), (y_cpp, g_cpp) = _both(model, x, wrt, retain=True)
    assert y_cpp.dtype == torch.float64 and _equal(y_py, y_cpp)
    assert len(g_cpp) == 2 * len(wrt) and all(_equal(a, b) for a, b in zip(g_py, g_cpp, strict=True))
    assert all(_equal(a, b) for a, b in zip(g_cpp[:len(wrt)], g_cpp[len(wrt):]))  # second backward = first


@needs_compiler
def test_cpp_node_gradcheck(ext):
    torch.manual_seed(1)
    model = AdaptiveMLP(in_dim=2, out_dim=2, n_hidden_layers=2, activation="tanh", rate_init=0.3,
                        importance_norm="active").double()
    x = torch.randn(5, 2, dtype=torch.float64, requires_grad=True)
    rhos = [lin.rho for lin in model.layers]

    def f(x_, raw_, *rhos_):
        with torch.no_grad():
            model.raw_rate.copy_(raw_)
            for lin, r in zip(model.layers, rhos_):
                lin.rho.copy_(r)
        return ext.adaptive_mlp(x_, raw_, list(rhos_), *model._ext_spec())

    inputs = (x, model.raw_rate.detach().clone().requires_grad_(), *(r.detach().clone().requires_grad_() for r in rhos))
    # the rates enter as Python floats (the quantile widths use the same floats), so the
    # numerical derivative in raw is not the analytic one: check x and the weights here;
    # the rate gradient is checked against plain autograd in test_awnn.py and above
    assert torch.autograd.gradcheck(lambda x_, *r: f(x_, inputs[1], *r), (x, *inputs[2:]))


@needs_compiler
def test_training_run_is_identical_under_both_backends(ext):
    """40 Adam steps with Algorithm 1's width updates on SpiralHard: same widths, same weights."""
    x_tr, y_tr = synthetic_splits("SpiralHard")["train"]
    runs = {}
    for name in ("python", "cpp"):
        torch.manual_seed(0)
        model = AdaptiveMLP(in_dim=2, out_dim=2, n_hidden_layers=2, activation="relu6", rate_init=0.05)
        opt = torch.optim.Adam(model.parameters(), lr=0.05)
        gen = torch.Generator().manual_seed(0)
        widths = []
        with fast_cpp.use_backend(name):
            for _ in range(40):
                idx = torch.randint(0, len(y_tr), (64,), generator=gen)
                model.update_width(opt)
                opt.zero_grad(set_to_none=True)
                negative_elbo(model, model(x_tr[idx]), y_tr[idx], n_train=len(y_tr)).total.backward()
                opt.step()
                widths.append(model.widths())
        runs[name] = (widths, [p.detach().clone() for p in model.parameters()])
    assert len({tuple(map(tuple, w)) for w, _ in runs.values()}) == 1
    assert len(set(map(tuple, runs["cpp"][0]))) > 1  # the widths did change along the way
    assert all(torch.equal(a, b) for a, b in zip(runs["python"][1], runs["cpp"][1], strict=True))


@needs_compiler
@pytest.mark.parametrize("grow_init", ["normal", "kaiming_plus"])
def test_cpp_resize_equals_python_resize(ext, grow_init):
    """AdaptiveLinear.resize_unchecked_ in C++ (resize_layer) and in Python: the same draws, so the same
    parameters, Adam state and gradients, and a kept graph does not break the next backward
    (the grad accumulator of a resized parameter is reset). Store entries outside the active
    blocks are never read and may hold anything."""
    results = {}
    for name in ("python", "cpp"):
        torch.manual_seed(3)
        model = AdaptiveMLP(in_dim=2, out_dim=3, n_hidden_layers=2, rate_init=0.08, grow_init=grow_init)
        opt = torch.optim.Adam(model.parameters(), lr=0.01)
        x = torch.randn(8, 2)
        with fast_cpp.use_backend(name):
            kept = None
            for widths in ([20, 9], [31, 9], [31, 40], [12, 40], [12, 3], [60, 70], [29, 29]):
                opt.zero_grad(set_to_none=True)
                loss = model(x).square().sum()
                loss.backward(retain_graph=True)
                opt.step()
                kept = loss  # a graph kept alive across the resize
                model.set_widths(widths, opt)
            model(x).sum().backward()
        assert kept is not None
        state = [opt.state[p_] for p_ in model.parameters()]
        results[name] = ([p_.detach().clone() for p_ in model.parameters()],
                         [{k: v.clone() for k, v in st.items()} for st in state],
                         [p_.grad.clone() for p_ in model.parameters()])
    (p_py, o_py, g_py), (p_cpp, o_cpp, g_cpp) = results["python"], results["cpp"]
    assert [t.shape for t in p_py] == [t.shape for t in p_cpp] and p_cpp[1].shape == (29, 3)
    assert all(torch.equal(a, b) for a, b in zip(p_py, p_cpp, strict=True))
    assert all(torch.equal(a, b) for a, b in zip(g_py, g_cpp, strict=True))
    for a, b in zip(o_py, o_cpp, strict=True):
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


# ---------------------------------------------------------------------------- choosing the backend


def test_bad_backend_is_refused(monkeypatch):
    monkeypatch.setenv(fast_cpp.ENV_VAR, "fast")
    with pytest.raises(ValueError, match=r"HACN_AWNN_BACKEND='fast'.*auto, cpp, python"):
        fast_cpp.backend()
    with pytest.raises(ValueError, match=r"backend='gpu'.*auto, cpp, python"):
        fast_cpp.set_backend("gpu")


def test_python_backend_builds_nothing(monkeypatch):
    monkeypatch.setenv(fast_cpp.ENV_VAR, "python")
    monkeypatch.setattr(fast_cpp, "_attempt_build", lambda: pytest.fail("python must not build"))
    monkeypatch.setattr(fast_cpp, "_attempted", False)
    assert fast_cpp.module() is None and fast_cpp.active_backend() == "python"
    with fast_cpp.use_backend("auto"):
        assert fast_cpp.backend() == "auto"
    assert fast_cpp.backend() == "python"


def test_failed_build_falls_back_or_fails_clearly(monkeypatch):
    def broken(name):
        raise OSError("no compiler here")

    monkeypatch.setattr(fast_cpp, "_build", broken)
    monkeypatch.setattr(fast_cpp, "_attempted", False)
    monkeypatch.setattr(fast_cpp, "_built", {})
    with fast_cpp.use_backend("auto"):
        with pytest.warns(RuntimeWarning, match="Python node runs.*no compiler here"):
            assert fast_cpp.module() is None
        model = AdaptiveMLP(in_dim=2, out_dim=2)
        model(torch.randn(3, 2)).sum().backward()  # the Python node trains on
        assert model.raw_rate.grad is not None
    with fast_cpp.use_backend("cpp"):
        with pytest.raises(RuntimeError, match=r"(?s)backend is cpp.*did not build.*no compiler here.*ninja"):
            fast_cpp.module()
    assert fast_cpp.build_error() == "OSError: no compiler here"


def test_last_node_names_the_node_that_ran(monkeypatch):
    model = AdaptiveMLP(in_dim=2, out_dim=2)
    with fast_cpp.use_backend("python"):
        model(torch.randn(3, 2))
        assert fast_cpp.last_node() == "python"
    with fast_cpp.use_backend("auto"):
        model(torch.randn(3, 2))
        assert fast_cpp.last_node() == fast_cpp.active_backend()
    fast_cpp.forget_last_node()
    assert fast_cpp.last_node() is None


def test_stored_runs_record_the_node_of_their_own_forwards(tmp_path):
    from hacn_core.engine.results import ResultsStore, run_or_load

    def awnn_run(config, context):
        AdaptiveMLP(in_dim=2, out_dim=2)(torch.randn(3, 2))
        return {"metrics": {"x": 1.0}}

    store = ResultsStore(tmp_path)
    with fast_cpp.use_backend("python"):
        first = run_or_load("toy-awnn", {"seed": 0}, awnn_run, store=store, progress=False)
        other = run_or_load("toy-other", {"seed": 0}, lambda c, ctx: {"metrics": {"x": 2.0}}, store=store,
                            progress=False)
    assert first.provenance["awnn_node"] == "python"
    assert "awnn_node" not in other.provenance  # no adaptive MLP ran in that run


def test_each_checkout_builds_under_its_own_name(tmp_path, monkeypatch):
    # two checkouts of the same source must not share one build folder (ninja would rebuild it each
    # time the other checkout built it last); the same checkout keeps its name (its cache is reused)
    from hacn_core.awnn import fast_cpp

    here = fast_cpp._extension_name()
    assert fast_cpp._extension_name() == here
    copy = tmp_path / fast_cpp.SOURCE.name
    copy.write_bytes(fast_cpp.SOURCE.read_bytes())
    monkeypatch.setattr(fast_cpp, "SOURCE", copy)
    assert fast_cpp._extension_name() != here
