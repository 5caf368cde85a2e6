"""The machine-readable ledger: ``python -m hacn_core ledger --format csv|json`` on the committed store."""

import contextlib
import csv
import io
import json
import math
from pathlib import Path

import pandas as pd
import pytest
from scipy import stats

from hacn_core import ledger
from hacn_core.__main__ import main
from hacn_core.ledger import COLUMNS, status_counts
from hacn_core.paper_items import PAPER_ITEMS

RESULTS = Path(__file__).resolve().parents[1] / "results"  # the committed store (tests default to a temporary one)


def _ledger_cli(fmt: str) -> str:
    """What ``python -m hacn_core ledger --format FMT --results results/`` prints."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["ledger", "--format", fmt, "--results", str(RESULTS)]) == 0
    return out.getvalue()


def _is_the_committed_ledger(args: tuple, kwargs: dict) -> bool:
    """Whether a ``ledger_rows`` call is the CLI's on the committed store, every paper item, with analogues."""
    store = kwargs.get("store", args[0] if args else None)
    items = kwargs.get("items", args[1] if len(args) > 1 else PAPER_ITEMS)
    return (store is not None and Path(store.root) == RESULTS and items is PAPER_ITEMS
            and kwargs.get("analogues", args[2] if len(args) > 2 else True) is True)


@pytest.fixture(scope="module")
def committed():
    """``ledger --format csv`` on the committed store, run once for the module (each ledger reads every result),
    and the ledger rows that very run built (``hacn_core.ledger.ledger_rows`` is watched, not replaced)."""
    built = []

    def watched(*args, **kwargs):
        rows = real(*args, **kwargs)
        if _is_the_committed_ledger(args, kwargs):
            built.append(rows)
        return rows

    real = ledger.ledger_rows
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ledger, "ledger_rows", watched)
        text = _ledger_cli("csv")
    assert len(built) == 1, "the CSV ledger was not built from the committed store"
    return built[0], text


@pytest.fixture(scope="module")
def rows(committed):
    """The committed store's ledger rows by item id (those the CSV was written from)."""
    return {r.item.id: r for r in committed[0]}


@pytest.fixture(scope="module")
def csv_text(committed) -> str:
    return committed[1]


@pytest.fixture(scope="module")
def json_text(committed) -> str:
    """``ledger --format json`` on the committed store, written from the same ledger rows as the CSV: the CLI runs
    unchanged but its ``ledger_rows`` call on the committed store returns the rows already built (reading
    every result again would give the same rows)."""
    real = ledger.ledger_rows
    served = []

    def reuse(*args, **kwargs):
        if _is_the_committed_ledger(args, kwargs):
            served.append(True)
            return committed[0]
        return real(*args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ledger, "ledger_rows", reuse)
        text = _ledger_cli("json")
    assert served == [True]
    return text


def test_csv_loads_with_pandas_one_row_per_item_and_the_ledgers_status_counts(csv_text, rows):
    table = pd.read_csv(io.StringIO(csv_text))
    assert tuple(table.columns) == COLUMNS == (
        "id", "paper", "item", "quantity", "unit", "paper value", "paper std", "our mean", "our std", "seeds",
        "tolerance", "ci low", "ci high", "status", "verdict", "setting", "needs", "experiment", "analogue",
        "analogue mean", "analogue std", "analogue n", "analogue unit", "analogue setting", "analogue evidence",
        "chapter", "checked by", "finding")
    assert list(table["id"]) == [i.id for i in PAPER_ITEMS]
    assert table["status"].value_counts().to_dict() == {k: v for k, v in status_counts(rows=list(rows.values())).items()
                                                        if v}
    analogue = status_counts(rows=list(rows.values()), analogue=True)
    assert table["analogue"].fillna("").value_counts().to_dict() == {k: v for k, v in analogue.items() if v}
    assert table["seeds"].dtype.kind == "i" and table["our mean"].dtype.kind == "f"
    # empty cells, never the text "nan"; unrounded numbers; seeds = the number of runs
    cells = list(csv.reader(io.StringIO(csv_text)))
    assert not any(cell.lower() == "nan" for line in cells for cell in line)
    for record in table.to_dict("records"):
        row = rows[record["id"]]
        if row.ours is None:
            assert math.isnan(record["our mean"]) and record["seeds"] == 0
        else:
            assert record["our mean"] == row.ours.mean and record["seeds"] == row.ours.n == len(row.values)
        paper = row.item.paper_value
        assert (math.isnan(record["paper value"]) if paper is None else record["paper value"] == paper)


def test_our_std_is_the_sample_std_of_the_runs_not_the_interval(csv_text, rows):
    """``our std`` times t / sqrt(n) is the text ledger's 95% half-width (Student's t, n - 1 dof)."""
    table = pd.read_csv(io.StringIO(csv_text))
    several = table[table["seeds"] >= 2]
    assert len(several) > 20
    for record in several.to_dict("records"):
        n, half = record["seeds"], rows[record["id"]].ours.half_width
        t = stats.t.ppf(0.975, df=n - 1)
        assert record["our std"] * t / math.sqrt(n) == pytest.approx(half, rel=1e-9, abs=1e-12)
    single = table[table["seeds"] == 1]
    assert len(single) and single["our std"].isna().all()  # one run has no spread


def test_json_round_trips_the_csv_rows_and_keeps_the_seed_list(json_text, csv_text, rows):
    csv_rows = list(csv.DictReader(io.StringIO(csv_text)))
    records = json.loads(json_text)
    assert len(records) == len(csv_rows) == len(PAPER_ITEMS)
    for record, line in zip(records, csv_rows, strict=True):
        assert list(record) == [*COLUMNS, "seed list"]
        for column in COLUMNS:
            value = record[column]
            assert line[column] == ("" if value is None else str(value)), (record["id"], column)
        assert record["seed list"] == list(rows[record["id"]].seeds)
        assert len(record["seed list"]) <= record["seeds"]


def test_bad_format_gets_argparses_message(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["ledger", "--format", "xml"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "argument --format: invalid choice: 'xml'" in err and "choose from" in err
    assert all(name in err.split("choose from")[1] for name in ("text", "csv", "json"))


def test_text_stays_the_default(capsys, tmp_path):
    assert main(["ledger", "--results", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split()[:2] == ["paper", "item"] and "not run" in out


def test_tolerance_interval_and_chapter_columns(csv_text, rows):
    """Every compared row carries its tolerance and (two runs or more) its 95% interval, and its status follows
    from them by the ledger's rule; every row placed in the book names its page."""
    table = pd.read_csv(io.StringIO(csv_text), keep_default_na=False, na_values=[""])
    compared = table[table["status"].isin(["reproduced", "differs", "inconclusive"])]
    assert len(compared) > 40 and compared["tolerance"].notna().all()
    for record in compared.to_dict("records"):
        d, tol = abs(record["our mean"] - record["paper value"]), record["tolerance"]
        if record["seeds"] == 1:
            assert math.isnan(record["ci low"]) and record["status"] == ("reproduced" if d <= tol else "differs")
            continue
        h = (record["ci high"] - record["ci low"]) / 2
        assert record["ci low"] <= record["our mean"] <= record["ci high"]
        expected = ("reproduced" if d <= tol and h <= tol else "differs" if d > tol and d > h else "inconclusive")
        assert record["status"] == expected, record["id"]
        assert record["verdict"].startswith("|ours - paper| = ")
    exact = table[table["status"] == "exact"]
    assert len(exact) >= 20 and exact["checked by"].str.startswith("tests/test_").all()
    assert exact["chapter"].str.startswith("notebooks/").all()
    placed = {i.id for i in PAPER_ITEMS if i.book is not None}
    assert set(table.loc[table["chapter"].notna(), "id"]) == placed
    shown = table[table["status"] == "shown"]  # figures drawn at the paper's own setting
    assert {"awnn/fig3-left/width-vs-difficulty", "awnn/fig8/synthetic-datasets"} <= set(shown["id"])
    drawn = table[table["analogue"] == "shown"]  # figures drawn from the chapters' scaled runs
    assert "hacn/fig6a/convergence-distance" in set(drawn["id"])
    judged = table[table["analogue"].isin(["holds", "does not hold", "cannot be told"])]
    assert "hacn/fig1a/vision-connectivity" in set(judged["id"])  # the ViT chapter's claims table judges it


def test_a_finding_of_ours_reaches_every_format(tmp_path):
    from hacn_core.engine.results import ResultsStore
    from hacn_core.gates.paper_items import DEEP_GATED_PLAIN_FINDING
    from hacn_core.ledger import ledger_html, ledger_records

    store = ResultsStore(tmp_path)
    records = {r["id"]: r for r in ledger_records(store)}
    for d in (50, 100):
        assert records[f"gates/table1/mnist-d{d}-gated-plain"]["finding"] == DEEP_GATED_PLAIN_FINDING
        assert records[f"gates/table2/mnist-d{d}-gated-plain-mean-k"]["finding"] == DEEP_GATED_PLAIN_FINDING
    assert records["gates/table1/mnist-d20-gated-plain"]["finding"] == ""
    assert "Our finding:" in ledger_html(store)


def test_key_results_agree_with_the_ledger(tmp_path):
    from hacn_core.engine.results import ResultsStore
    from hacn_core.key_results import key_results
    from hacn_core.ledger import ANALOGUE_STATUSES, STATUSES, ledger_rows

    rows = ledger_rows(ResultsStore(tmp_path))
    out = key_results(rows=rows)  # an empty store: no finding has its runs, only the counts
    counts = out["counts"].set_index("paper")
    assert (counts[list(STATUSES)].sum(axis=1) == counts["items to reproduce"] + counts["quoted"]).all()
    assert counts[list(STATUSES)].to_numpy().sum() == len(rows)
    assert counts[[f"analogue: {s}" for s in ANALOGUE_STATUSES]].to_numpy().sum() == 0
