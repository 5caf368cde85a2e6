"""REDDIT-B in ``awnn-graphs`` (AWNN Table 1's REDDIT-B row, Table 2, Table 5, App. D's Fixed+).

REDDIT-B's graphs have no node attributes; the study gives every node the constant
feature 1 (Errica et al. 2020's uniform feature, one feature as AWNN Table 2 lists), or
the degree on request. Checked here: :class:`NodeFeature` on a hand-made graph and on
MUTAG with its features stripped (exact shapes and values; the degree against a dense
adjacency), the whole loader on a hand-written REDDIT-BINARY folder in the TU format (so
torch-geometric's reader of a dataset without node attributes is what is exercised),
the GIN's input width, the paper profile's REDDIT-B grid (Table 5) and Fixed+ width,
the unchanged hashes of the other configurations, and the error for a missing copy.
"""

from __future__ import annotations

import copy
import hashlib

import pytest
import torch
from torch_geometric.data import Data
from torch_geometric.transforms import Compose
from torch_geometric.utils import to_dense_adj

from hacn_core.__main__ import main
from hacn_core.awnn import fast_cpp
from hacn_core.awnn.paper_items import item
from hacn_core.awnn.studies import graphs as gr
from hacn_core.awnn.studies.ablations import round_half_up
from hacn_core.engine.data import DatasetMissingError, load_tudataset, missing_files
from hacn_core.engine.folds import assessment_folds
from hacn_core.engine.results import RunContext, config_hash, pinned_threads
from hacn_core.models.gin import POOLINGS, TABLE5_LAYERS

REDDIT = "REDDIT-BINARY"
needs_mutag = pytest.mark.skipif(bool(missing_files("MUTAG")), reason="MUTAG is not under $HACN_DATA")


@pytest.fixture(autouse=True)
def _one_thread():
    # the Python node of AdaptiveMLP (the same values as the C++ one, tests/test_awnn_ext.py): the C++
    # build takes a minute on a loaded machine, and nothing here is about it
    with pinned_threads(1), fast_cpp.use_backend("python"):
        yield


def reddit_config(mlp: str = "adaptive", **overrides) -> dict:
    extra = {"hidden": gr.FIXED_PLUS_WIDTH} if mlp == gr.FIXED_PLUS else {}
    return gr.graph_config(REDDIT, 0, mlp, 0, **(extra | overrides))


def input_width(pre: torch.nn.Module) -> int:
    """The input width of a GIN's first MLP: a fixed ``Mlp``'s first ``Linear``, or an adaptive
    MLP's first ``rho`` (one column per input plus the bias column)."""
    if hasattr(pre, "layers"):
        return pre.layers[0].rho.shape[1] - 1
    return pre[0].in_features


# ----------------------------------------------------------------------------- the transform


def test_node_feature_on_a_hand_made_graph():
    # 0-1, 1-2, 1-3 stored both ways; node 4 isolated: degrees 1, 3, 1, 1, 0
    edges = torch.tensor([[0, 1, 1, 2, 1, 3], [1, 0, 2, 1, 3, 1]])
    graph = Data(edge_index=edges, num_nodes=5, y=torch.tensor([1]))
    one = gr.NodeFeature("one")(graph)
    assert one.x.dtype == torch.float32 and torch.equal(one.x, torch.ones(5, 1))
    deg = gr.NodeFeature("degree")(graph)
    assert torch.equal(deg.x, torch.tensor([[1.0], [3.0], [1.0], [1.0], [0.0]]))
    assert graph.x is None and one.num_nodes == 5 and torch.equal(one.edge_index, edges)  # a copy; input untouched
    assert gr.NodeFeature().kind == gr.PAPER_NODE_FEATURE == "one"
    with pytest.raises(ValueError, match="without node attributes.*shape \\(5, 1\\)"):
        gr.NodeFeature("one")(one)  # would overwrite real attributes
    with pytest.raises(ValueError, match="node_feature='onehot'.*allowed: one, degree"):
        gr.NodeFeature("onehot")


def _strip(data: Data) -> Data:
    """A graph's copy without node features (its node count kept, as the TU reader keeps it)."""
    out = copy.copy(data)
    out.num_nodes = data.num_nodes
    out.x = None
    return out


@needs_mutag
def test_node_feature_on_mutag_with_its_features_stripped():
    mutag = load_tudataset("MUTAG", download=False)
    assert mutag.num_features == 7
    for i in range(len(mutag)):
        graph = mutag[i]
        n = graph.x.shape[0]
        one = gr.NodeFeature("one")(_strip(graph))
        assert one.x.shape == (n, 1) and torch.equal(one.x, torch.ones(n, 1))
        deg = gr.NodeFeature("degree")(_strip(graph))
        dense = to_dense_adj(graph.edge_index, max_num_nodes=n)[0]  # (n, n), 1 per stored edge
        assert deg.x.shape == (n, 1) and torch.equal(deg.x[:, 0], dense.sum(1))
        assert 1 <= deg.x.min() and deg.x.max() <= 4  # molecules: connected, valence at most 4
    # through the loader: every graph read, and every subset and batch of them, carries the feature
    stripped = load_tudataset("MUTAG", download=False, transform=Compose([_strip, gr.NodeFeature("one")]))
    assert stripped.num_features == 1 and stripped.num_classes == 2
    subset = stripped[torch.arange(10, 42)]
    batch = gr.collate_graphs([subset[k] for k in range(len(subset))])
    assert torch.equal(batch.x, torch.ones(int(sum(mutag[i].num_nodes for i in range(10, 42))), 1))
    assert mutag[0].x.shape == (mutag[0].num_nodes, 7)  # the stored graphs keep their features


# ----------------------------------------------------------------------------- a hand-written REDDIT-BINARY


def _write_reddit(root, n_per_class: int = 20) -> list[tuple[int, list[tuple[int, int]], int]]:
    """A small REDDIT-BINARY in the TU format (no node attributes, labels -1 / 1) under ``root``;
    returns each graph's (nodes, undirected edges, label). Class -1: stars; class 1: paths;
    graph 7 has an isolated last node (it appears in graph_indicator only)."""
    graphs = []
    for g in range(2 * n_per_class):
        n = 4 + g % 5
        label = -1 if g % 2 == 0 else 1
        edges = [(0, k) for k in range(1, n)] if label == -1 else [(k, k + 1) for k in range(n - 1)]
        if g == 7:
            n += 1
        graphs.append((n, edges, label))
    raw = root / "TUDataset" / REDDIT / "raw"
    raw.mkdir(parents=True)
    a_lines, indicator, offset = [], [], 0
    for g, (n, edges, _) in enumerate(graphs):
        for u, v in edges:
            a_lines += [f"{offset + u + 1}, {offset + v + 1}", f"{offset + v + 1}, {offset + u + 1}"]
        indicator += [str(g + 1)] * n
        offset += n
    (raw / f"{REDDIT}_A.txt").write_text("\n".join(a_lines) + "\n")
    (raw / f"{REDDIT}_graph_indicator.txt").write_text("\n".join(indicator) + "\n")
    (raw / f"{REDDIT}_graph_labels.txt").write_text("\n".join(str(lab) for *_, lab in graphs) + "\n")
    return graphs


@pytest.fixture
def small_reddit(tmp_path, monkeypatch):
    monkeypatch.setenv("HACN_DATA", str(tmp_path))
    monkeypatch.setenv("HACN_DOWNLOAD", "0")
    return _write_reddit(tmp_path)


def test_the_loader_gives_reddit_graphs_the_configured_feature(small_reddit):
    graphs = small_reddit
    plain = load_tudataset(REDDIT, download=False)
    assert plain.num_features == 0 and plain[0].x is None  # what torch-geometric reads: no node attributes
    for kind in gr.NODE_FEATURES:
        dataset = gr.load_graphs(reddit_config(node_feature=kind))
        assert len(dataset) == 40 and dataset.num_features == 1 and dataset.num_classes == 2
        for g, (n, edges, label) in enumerate(graphs):
            data = dataset[g]
            degrees = [sum(k in e for e in edges) for k in range(n)]  # the isolated node of graph 7: 0
            expected = torch.ones(n, 1) if kind == "one" else torch.tensor(degrees, dtype=torch.float32)[:, None]
            assert torch.equal(data.x, expected), (kind, g)
            assert int(data.y) == (label + 1) // 2  # -1 / 1 -> 0 / 1
    assert graphs[7][0] == 7 and gr.load_graphs(reddit_config(node_feature="degree"))[7].x[-1, 0] == 0


def test_gin_input_width_is_the_feature_count(small_reddit):
    dataset = gr.load_graphs(reddit_config())
    batch = gr.collate_graphs([dataset[g] for g in range(6)])
    for mlp in gr.ARMS:
        model = gr.build_model(reddit_config(mlp), dataset.num_features, dataset.num_classes)
        assert input_width(model.pre) == dataset.num_features == 1, mlp
        assert gr.gin_forward(model, batch)[0].shape == (6, 2)
        assert gr.mlp_widths(model) == {"adaptive": [116, 116, 116], "fixed": [64, 64, 64],
                                        gr.FIXED_PLUS: [794, 794, 794]}[mlp]
        plan = gr.dry_run_plan(reddit_config(mlp, layers=1))  # the dry run's synthetic graphs: 1 feature too
        x, _ = plan.batch(2)
        assert x.shape == (2, 430, 1) and input_width(plan.model().gin.pre) == 1


def test_a_reddit_run_trains_on_its_fold_with_each_arm(small_reddit, tmp_path):
    folds = assessment_folds([lab for *_, lab in small_reddit], 10, 0.1, 0, None)
    for mlp in gr.ARMS:
        config = reddit_config(mlp, layers=1, epochs=1, batch_size=8)
        out = gr.train_graph_run(config, RunContext(gr.EXPERIMENT_ID, None, progress=False))
        m = out["metrics"]
        assert m["n_train"] == len(folds[0].train) == 32 and out["curves"]["record_epoch"] == [0, 1]
        if mlp == "adaptive":  # the learned widths at the best validation epoch, from 116 each
            assert m["widths"] == out["curves"]["widths"][m["best_epoch"]] and out["curves"]["widths"][0] == [116, 116]
        else:
            assert m["widths"] == m["final_widths"] == {"fixed": [64, 64], gr.FIXED_PLUS: [794, 794]}[mlp]


# ----------------------------------------------------------------------------- the paper profile


def test_paper_profile_has_reddit_with_table5_grid_and_fixed_plus():
    paper = gr.paper_configs()
    reddit = [c for c in paper if c["dataset"] == REDDIT]
    assert len(paper) == 1800 and len(reddit) == 1080
    grid = {(b, L, p) for b in (32, 128) for L in TABLE5_LAYERS for p in POOLINGS}
    assert TABLE5_LAYERS == (1, 2, 4) and POOLINGS == ("sum", "mean") and len(grid) == 12
    for arm, hidden in (("adaptive", 64), ("fixed", 64), (gr.FIXED_PLUS, 794)):
        runs = [c for c in reddit if c["mlp"] == arm]
        assert len(runs) == 10 * 12 * 3 and {c["hidden"] for c in runs} == {hidden}
        for fold in range(10):
            for seed in (0, 1, 2):
                cell = [c for c in runs if c["fold"] == fold and c["seed"] == seed]
                assert {(c["batch_size"], c["layers"], c["pooling"]) for c in cell} == grid and len(cell) == 12
    # Table 5: 1000 epochs, patience 500, Adam 0.01, rate 0.02, k 0.9, sigma_theta 10; the uniform feature
    assert {(c["epochs"], c["patience"], c["lr"], c["rate_init"], c["k"], c["sigma_theta"], c["node_feature"],
             c["n_folds"], c["holdout"]) for c in reddit} == {(1000, 500, 0.01, 0.02, 0.9, 10.0, "one", 10, 0.1)}
    assert gr.FIXED_PLUS_WIDTH == round_half_up(item("awnn/table1/reddit-b-awnn-width").paper_value) == 794
    assert len({config_hash(c) for c in reddit}) == 1080
    for c in reddit:
        gr.check_config(c)
    assert not any(c["dataset"] == REDDIT for p in ("book", "smoke") for c in gr.EXPERIMENT.configs[p]())


def _digest(configs) -> str:
    return hashlib.sha1("".join(sorted(config_hash(c) for c in configs)).encode()).hexdigest()[:12]


def test_the_other_configurations_keep_their_hashes():
    """Digests of the sorted config hashes, computed with the study before REDDIT-B was added."""
    assert _digest(gr.smoke_configs()) == "e70dd7359eba"
    assert _digest(gr.book_configs()) == "c1b1dab9da80"
    assert _digest([c for c in gr.paper_configs() if c["dataset"] == "NCI1"]) == "128d87a5250a"
    assert "node_feature" not in gr.graph_config("NCI1", 0, "fixed", 0)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (reddit_config(node_feature="onehot"), "node_feature='onehot' is not allowed; allowed: one, degree"),
        ({k: v for k, v in reddit_config().items() if k != "node_feature"}, "node_feature=None is not allowed"),
        (gr.graph_config("NCI1", 0, "fixed", 0) | {"node_feature": "one"},
         "node_feature='one' is only for the datasets without node attributes (REDDIT-BINARY)"),
        (reddit_config("fixed-wide"), "mlp='fixed-wide' is not allowed; allowed: adaptive, fixed, fixed-plus"),
        (reddit_config(gr.FIXED_PLUS, hidden=0), "hidden=0 must be an integer >= 1"),
    ],
)
def test_bad_reddit_configuration_names_the_field(config, message):
    with pytest.raises(ValueError) as err:
        gr.check_config(config)
    assert message in str(err.value)


# ----------------------------------------------------------------------------- missing data


def test_missing_reddit_names_the_folder_and_the_source(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HACN_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("HACN_DOWNLOAD", "0")
    folder = str(tmp_path / "data" / "TUDataset" / REDDIT / "raw")
    with pytest.raises(DatasetMissingError) as err:
        gr.train_graph_run(reddit_config(), RunContext(gr.EXPERIMENT_ID, None, progress=False))
    text = str(err.value)
    assert f"looked in: {folder}" in text and "torch_geometric.datasets.TUDataset" in text
    assert f"python -m hacn_core fetch {REDDIT}" in text and f"{REDDIT}_graph_labels.txt" in text
    # the command line prints it as an error, without a traceback, and exits with 2
    code = main(["run", gr.EXPERIMENT_ID, "--profile", "paper", "--results", str(tmp_path / "results"), "--where",
                 f"dataset={REDDIT}", "fold=0", "mlp=fixed-plus", "batch_size=32", "layers=1", "pooling=sum", "seed=0"])
    out, err_text = capsys.readouterr()
    assert code == 2 and err_text.startswith(f"error: dataset '{REDDIT}' is not available offline.")
    assert folder in err_text and "Traceback" not in err_text and out == ""
