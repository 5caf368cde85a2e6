"""Exact facts of the papers that the ledger marks "exact": counts and configurations, each checked here
against the paper's number (``hacn_core.paper_items``) and against what the code actually builds or reads.

The ledger names these tests in the items' ``Place.checked_by``; tests/test_ledger.py checks that every
test it names exists.
"""

from __future__ import annotations

import pytest

from hacn_core.engine.data import missing_files
from hacn_core.paper_items import item


def test_hacn_table5_is_the_decoder_paper_profile():
    """H-ACN Table 5 (App. A): batch 128, 4 accumulation steps, 240,000 iterations, lr 0.001, warmup 5%,
    weight decay 0.01, betas (0.9, 0.95), cosine, AdamW, clip 1.0."""
    from hacn_core.hacn.studies import decoder as hd

    for rule in ("resnet", "acn", "hacn"):
        c = hd.make_config(rule, 0, profile="paper")
        assert (c["batch_size"], c["accumulate"], c["steps"]) == (128, 4, 240_000)
        assert (c["optimizer"], c["lr"], c["schedule"], c["warmup_fraction"]) == ("adamw", 0.001, "cosine", 0.05)
        assert (c["weight_decay"], list(c["betas"]), c["grad_clip"]) == (0.01, [0.9, 0.95], 1.0)
        assert (c["num_layers"], c["dim"], c["block_size"]) == (24, 768, 256)  # Table 4's model
    assert "240,000 iterations" in item("hacn/table5/gpt2-training-config").note


def test_awnn_table1_fixed_widths_are_the_fixed_runs_widths():
    """AWNN Table 1's fixed widths (8 / 16 / 32 neurons) are the total widths of the fixed MLPs the study
    trains for Table 1 (its TABLE1_SHAPES), and every stored run of those shapes records that width."""
    from pathlib import Path

    from hacn_core import catalog
    from hacn_core.awnn.studies import tabular
    from hacn_core.engine.results import ResultsStore

    store = ResultsStore(Path(__file__).resolve().parents[1] / "results")  # the committed runs

    for dataset, (layers, width) in tabular.TABLE1_SHAPES.items():
        paper = item(f"awnn/table1/{dataset.lower()}-fixed-width").paper_value
        assert layers * width == paper, dataset
        runs = [r for r in catalog.stored(tabular.EXPERIMENT_ID, "book", store=store) if r.config["dataset"] == dataset
                and tabular.is_table1_baseline(r.config)]
        assert runs and {r.metrics["total_width"] for r in runs} == {paper}
    assert [item(f"awnn/table1/{d}-fixed-width").paper_value for d in ("doublemoon", "spiral", "spiralhard")] == [
        8, 16, 32]


@pytest.mark.skipif(bool(missing_files("MNIST")), reason="MNIST is not under $HACN_DATA")
def test_awnn_table2_mnist_has_70000_samples():
    """AWNN Table 2: MNIST has 70,000 samples (60,000 training, 10,000 test), counted from the files the image
    study reads."""
    import torchvision.datasets as tvd

    from hacn_core.engine.data import ensure_dataset

    root = ensure_dataset("MNIST", download=False)
    sizes = [len(tvd.MNIST(str(root), train=train, download=False)) for train in (True, False)]
    assert sizes == [60_000, 10_000]
    assert sum(sizes) == item("awnn/table2/mnist-samples").paper_value
