"""The ledger and the chapters in step, on the stored runs the book renders (``results/``).

Every claims table row that names ledger items (``ClaimTable.add(..., items=...)``) must reach those rows'
analogue verdict; every paper-beside-ours table of a chapter must show the number the ledger carries; and no
item a chapter places may be "not run" at the paper's setting with nothing on the analogue unless running it
needs a download or a GPU.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from hacn_core import catalog
from hacn_core.analogues import SOURCES, findings
from hacn_core.engine.results import ResultsStore
from hacn_core.ledger import ledger_records, ledger_rows

RESULTS = Path(__file__).resolve().parents[1] / "results"  # the committed store (tests default to a temporary one)


@pytest.fixture(scope="module")
def rows():
    return {r.item.id: r for r in ledger_rows(ResultsStore(RESULTS))}


@pytest.fixture(scope="module")
def found():
    return findings(ResultsStore(RESULTS))


def test_every_claim_that_names_an_item_reaches_its_ledger_row(rows, found):
    assert found, "the chapters' sources found nothing in results/"
    chapters = {s.chapter for s in SOURCES}
    for item_id, fs in found.items():
        row = rows[item_id]
        assert row.analogue is not None, item_id
        assert row.item.book is not None and row.item.book.chapter in chapters, item_id
        claims = [f for f in fs if f.verdict != "shown"]
        if claims:  # the first claim (the paper's own equation where several are judged) gives the verdict
            assert row.analogue.status == claims[0].verdict, item_id
            assert list(row.analogue.claims) == claims, item_id
        else:
            assert row.analogue.status == "shown", item_id
        if any(f.values for f in fs) or row.analogue.values:
            assert row.analogue.values, item_id


def test_no_offline_item_a_chapter_places_is_left_without_a_verdict(rows):
    """A placed item is either judged at the paper's setting, shown on an analogue, a quote, or needs what this
    machine lacks (a download or a GPU), and then the row says so."""
    for item_id, row in rows.items():
        if row.item.book is None or row.status != "not run" or row.analogue is not None:
            continue
        needs = row.needs.lower()
        assert "download" in needs or "gpu" in needs, (item_id, row.needs)


def test_the_csv_carries_both_verdicts_and_our_numbers(rows):
    records = {r["id"]: r for r in ledger_records(rows=list(rows.values()))}
    for item_id, r in records.items():
        if r["analogue"] and rows[item_id].analogue.values:
            assert r["analogue mean"] is not None and r["analogue n"] > 0 and r["analogue setting"], item_id
        if r["status"] in ("reproduced", "differs", "inconclusive"):
            assert r["our mean"] is not None, item_id
    # the rows the issue found "not run" although a chapter shows them
    for item_id in ("hacn/fig3a/acn-epochs-to-match", "hacn/sec4/alpha-correlation-mixer-cifar10",
                    "hacn/sec4/alpha-correlation-gpt2-owt2", "hacn/table3/imagenet-gamma", "hacn/fig5/gamma-vs-init-mean",
                    "hacn/table6/init-exp-decay", "gates/table4/cifar10-wrn-4-10-gated", "awnn/table1/nci1-awnn-width",
                    "awnn/table1/multi30k-fixed-loss", "awnn/sec5/multi30k-ffn-parameter-ratio"):
        assert records[item_id]["analogue"], item_id
    for item_id in ("hacn/table4/gpt2-parameters", "awnn/table1/spiral-fixed-width", "awnn/table3/tabular-config"):
        assert records[item_id]["status"] == "exact", item_id
    assert records["gates/table6/c10-densenet"]["status"] == "quoted"
    # Fig. 3a: the ViT chapter's claims table says "holds" for the ACN's slower training, and so does the ledger
    assert records["hacn/fig3a/acn-epochs-to-match"]["analogue"] == rows["hacn/fig3a/acn-epochs-to-match"].analogue.status


def test_paper_beside_ours_tables_show_the_ledgers_numbers(rows):
    """gates_02's comparison table, hacn_04's Fig. 3b table and hacn_02's Sec. 4 correlation give the same
    numbers as the ledger's analogue column."""
    from hacn_core.gates.studies import cifar as gc
    from hacn_core.gates.studies import cifar_report as gcr
    from hacn_core.hacn.studies import mixer as hm
    from hacn_core.hacn.studies import mixer_report as hmr
    from hacn_core.hacn.studies import transformer_report as tr
    from hacn_core.hacn.studies import vit as hv

    table = gcr.comparison_table(catalog.stored(gc.EXPERIMENT_ID, "book", store=ResultsStore(RESULTS)))
    checked = 0
    for record in table.to_dict("records"):  # the ledger rows of this network's paper cells show its mean
        ids = [i for i in rows if i.startswith("gates/") and rows[i].analogue is not None
               and rows[i].analogue.values and record["paper (%)"] == rows[i].item.paper_value]
        for i in ids:
            if math.isclose(np.mean(rows[i].analogue.values), record["ours (%)"]):
                checked += 1
    assert checked >= 9
    vit = tr.main_runs(catalog.stored(hv.EXPERIMENT_ID, "book", store=ResultsStore(RESULTS)))
    for rule, item_id in tr.VIT_ITEMS.items():
        ours = [100 * r.metrics["test_accuracy"] for r in vit[rule]]
        assert rows[item_id].analogue.values == pytest.approx(ours)
    long = catalog.stored(hm.LONG_ID, "book", store=ResultsStore(RESULTS))
    corr = hmr.seed_correlations(hmr.split_budgets(long)[0])  # the full budget, as the chapter
    assert np.mean(rows[hmr.PEARSON_MIXER].analogue.values) == pytest.approx(
        float(corr.loc["without a_L", "mean Pearson (%)"]))


def test_key_findings_judged_under_several_rules_say_which(rows):
    """Table 3's Γ and Sec. 4's correlation are judged per rule and recipe: the key-results page says under
    which, the words the chapter's claims carry (mixer_report's labels)."""
    from hacn_core.hacn.studies import mixer_report as hmr
    from hacn_core.key_results import KEY, key_findings

    found = {(f.item, f.scale.rsplit(", under ", 1)[-1]): f for f in key_findings(list(rows.values()))}
    for item_id, under in KEY["H-ACN"]:
        if under in (hmr.EQ2_PAPER_RECIPE, hmr.CODE_RULE_PAPER_RECIPE):
            f = found[(item_id, under)]
            assert f.scale.endswith(f", under {under}") and f.verdict in ("holds", "does not hold", "cannot be told")
