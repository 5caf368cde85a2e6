"""Tests of the paper-item registry (``hacn_core.paper_items``) and ``book/references.bib``.

The registry tests check structure and internal consistency. The transcription
tests read the paper transcripts at test time (``<repo>/../shared/papers``; they
skip when it is absent) and compare every transcribed table cell with the
paper's row, so a typo in the registry fails here.
"""

from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path

import pytest

from hacn_core import paper_items as pi
from hacn_core.paper_items import PAPER_ITEMS, PAPERS, PaperItem, as_records, item, items_for

REPO = Path(__file__).resolve().parents[1]
PAPERS_DIR = REPO.parent / "shared" / "papers"
BIB = REPO / "book" / "references.bib"
FILES = {
    "H-ACN": ("hybrid-acn.md", "hybrid-acn-second-transcript.md"),
    "AWNN": ("adaptive-width-nn.md",),
    "Residual Gates": ("residual-gates.md",),
}
needs_papers = pytest.mark.skipif(not PAPERS_DIR.is_dir(), reason=f"paper transcripts not found at {PAPERS_DIR}")


def _text(name: str) -> str:
    return (PAPERS_DIR / name).read_text(encoding="utf-8")


# --------------------------------------------------------------------------- #
# Registry structure
# --------------------------------------------------------------------------- #
def test_ids_are_unique_and_well_formed():
    ids = [it.id for it in PAPER_ITEMS]
    assert len(ids) == len(set(ids))
    for it in PAPER_ITEMS:
        assert pi.ID_PATTERN.match(it.id), it.id
        assert it.id.split("/")[0] == pi.PAPER_PREFIX[it.paper], it.id
        assert it.id == it.id.strip().lower()


def test_every_paper_is_covered_with_numbers_and_figures():
    for paper in PAPERS:
        its = items_for(paper)
        assert sum(not it.qualitative for it in its) >= 40, paper
        assert any(it.item.startswith("Fig.") and it.qualitative for it in its), paper
        assert any(it.item.startswith("Table") for it in its), paper
        assert any(it.where == pi.W_EXACT for it in its), paper  # analytic items run exactly on CPU
    assert len(PAPER_ITEMS) == sum(len(items_for(p)) for p in PAPERS)


ITEM_PATTERN = re.compile(
    r"^(Table \d+|Fig\. \d+[a-c]?( \((left|right)\))?|Eq\. \d+|Alg\. \d+|Sec\. [\d.]+|App\. [A-I])$"
)


def test_fields_are_filled_and_typed():
    for it in PAPER_ITEMS:
        assert it.quantity and it.source and it.where and it.paper_setting, it.id
        assert ITEM_PATTERN.match(it.item), it.item
        if it.qualitative:
            assert it.paper_std is None and len(it.note) > 20, it.id
        else:
            assert isinstance(it.paper_value, float) and math.isfinite(it.paper_value), it.id
            assert it.unit, it.id
        if it.paper_std is not None:
            assert it.paper_std >= 0, it.id
        assert it.higher_is_better in (None, True, False)
        # the direction follows the unit where it is unambiguous
        if it.unit == "perplexity" or "error" in it.quantity:
            assert it.higher_is_better is False, it.id
        if "accuracy (%)" in it.quantity:
            assert it.higher_is_better is True, it.id


def test_items_for_accepts_names_and_prefixes_and_rejects_others():
    gates = items_for("Residual Gates")
    assert gates == items_for("gates")
    assert {it.paper for it in gates} == {"Residual Gates"}
    assert [it.id for it in items_for("AWNN")] == [it.id for it in PAPER_ITEMS if it.paper == "AWNN"]
    with pytest.raises(ValueError, match=r"paper='resnet'.*H-ACN, AWNN, Residual Gates"):
        items_for("resnet")


def test_item_lookup_and_close_ids_in_error():
    it = item("gates/table1/mnist-d50-gated-resnet")
    assert (it.paper_value, it.unit, it.higher_is_better) == (1.48, "%", False)
    assert item("hacn/table3/cifar10-gamma").paper_value == 0.428
    with pytest.raises(KeyError, match="gates/table1/mnist-d50-gated-resnet"):
        item("gates/table1/mnist-d50-gated-resnt")
    with pytest.raises(KeyError, match="no paper item"):
        item("zzz")


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(paper="ResNet"), r"PaperItem.paper='ResNet'.*allowed: H-ACN, AWNN, Residual Gates"),
        (dict(id="gates/Table1/x"), r"PaperItem.id='gates/Table1/x' is malformed"),
        (dict(id="gates/table1"), r"is malformed"),
        (dict(id="hacn/table1/x"), r"must start with 'gates/'"),
        (dict(paper_value=None, paper_std=0.1), r"paper_std is set but paper_value is None"),
        (dict(unit=""), r"PaperItem.unit is empty"),
        (dict(paper_value=None, note=""), r"PaperItem.note must state the claim"),
        (dict(where=""), r"PaperItem.where is empty"),
    ],
)
def test_paper_item_rejects_bad_fields(kwargs, match):
    good = dict(id="gates/table1/x", paper="Residual Gates", item="Table 1", quantity="q", paper_value=1.0,
                unit="%", where="CPU", source="Sec. 3", note="n")
    PaperItem(**good)  # the baseline is valid
    with pytest.raises(ValueError, match=match):
        PaperItem(**{**good, **kwargs})


def test_items_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        PAPER_ITEMS[0].paper_value = 3.0  # type: ignore[misc]


def test_as_records_round_trip():
    recs = as_records("H-ACN")
    assert len(recs) == len(items_for("H-ACN"))
    assert [PaperItem(**r) for r in recs] == list(items_for("H-ACN"))
    assert set(recs[0]) == {f.name for f in dataclasses.fields(PaperItem)}
    assert len(as_records()) == len(PAPER_ITEMS)


def test_cross_references_in_notes_resolve():
    ids = {it.id for it in PAPER_ITEMS}
    for it in PAPER_ITEMS:
        for ref in re.findall(r"\b(?:hacn|awnn|gates)/[a-z0-9.-]+/[a-z0-9.-]*[a-z0-9]", it.note):
            assert ref in ids, (it.id, ref)


def test_numbers_are_internally_consistent():
    # AWNN: "200x" fewer FFN parameters = fixed total width / learned total width (Table 1).
    ratio = item("awnn/table1/multi30k-fixed-width").paper_value / item("awnn/table1/multi30k-awnn-width").paper_value
    assert ratio == pytest.approx(item("awnn/sec5/multi30k-ffn-parameter-ratio").paper_value, rel=0.01)
    # AWNN: the Fixed/AWNN rows of App. D repeat Table 1.
    assert item("awnn/table1/reddit-b-awnn-accuracy").paper_value == 90.2
    # Gates: one k per residual block, 3 stages of n blocks.
    assert item("gates/sec3.2/extra-parameters-resnet5").paper_value == 3 * 5
    assert item("gates/sec3.2/extra-parameters-wrn-4-10").paper_value == 3 * 4
    # Gates: the headline numbers appear in Tables 3, 4, 5 and 6 identically.
    for a, b in [("gates/table3/cifar10-wrn-4-10-dropout-gated", "gates/table6/c10-wide-gated-resnet-4-10-dropout"),
                 ("gates/table4/cifar10-wrn-4-10-dropout-gated", "gates/table6/c10-wide-gated-resnet-4-10-dropout"),
                 ("gates/table5/cifar100-wrn-4-10-dropout-gated", "gates/table6/c100-wide-gated-resnet-4-10-dropout"),
                 ("gates/table5/cifar100-wrn-4-10-dropout-original", "gates/table6/c100-wrn-4-10")]:
        assert item(a).paper_value == item(b).paper_value, (a, b)
    # Gates: augmented models beat the originals in every MNIST setting (Table 1 caption).
    def err(d: int, arch: str) -> float:
        return item(f"gates/table1/mnist-d{d}-{arch}").paper_value

    for d in (2, 10, 20, 50, 100):
        assert err(d, "gated-plain") < err(d, "plain") and err(d, "gated-resnet") < err(d, "resnet")
    # H-ACN: Gamma rises with task difficulty, and mu = 0.25 is the best init (Tables 2-3).
    g = [item(f"hacn/table3/{d}-gamma").paper_value for d in ("cifar2", "cifar10", "imagenet")]
    assert g == sorted(g)
    assert item("hacn/sec4/gamma-acn").paper_value < g[0] and g[-1] < item("hacn/sec4/gamma-resnet").paper_value
    acc = [item(f"hacn/table2/mixer-mu{m}").paper_value for m in ("0.25", "0.75", "1")]
    assert acc == sorted(acc, reverse=True)
    # H-ACN: DepthLN helps in both Table 7 pairs.
    for slug in ("n0.15-0.01", "n0.25-0.01"):
        assert item(f"hacn/table6/init-{slug}").paper_value < item(f"hacn/table7/init-{slug}-no-depthln").paper_value
    assert item("hacn/fig7/extra-parameters").paper_value == 16  # one a_i per layer of the 16-layer Mixer


# --------------------------------------------------------------------------- #
# Transcription against the papers
# --------------------------------------------------------------------------- #
def _number_strings(v: float) -> set[str]:
    out = {f"{v:g}", f"{v:.1f}", f"{v:.2f}", f"{v:.3f}"}
    if v == int(v):
        out.add(str(int(v)))
    return out


def _appears(v: float, text: str) -> bool:
    return any(re.search(r"(?<![\d.])" + re.escape(s) + r"(?!\d|\.\d)", text) for s in _number_strings(v))


@needs_papers
def test_every_transcribed_number_appears_in_its_paper():
    texts = {p: "\n".join(_text(f) for f in files) for p, files in FILES.items()}
    missing = []
    for it in PAPER_ITEMS:
        for v in (it.paper_value, it.paper_std):
            if v is not None and not _appears(v, texts[it.paper]):
                missing.append((it.id, v))
    assert not missing


@needs_papers
@pytest.mark.parametrize("paper", PAPERS)
def test_every_table_and_figure_of_the_paper_has_an_item(paper):
    captions: set[tuple[str, int]] = set()
    for f in FILES[paper]:
        for kind, num in re.findall(r"^(?:\d+\s+)?(Table|Figure)\s+(\d+)\s*[:.]", _text(f), flags=re.M):
            captions.add(("Table" if kind == "Table" else "Fig.", int(num)))
    assert len(captions) >= 6
    covered = {(m.group(1), int(m.group(2))) for it in items_for(paper)
               if (m := re.match(r"(Table|Fig\.) (\d+)", it.item))}
    assert captions <= covered, sorted(captions - covered)


_NUM = re.compile(r"(?<![\w.])\d+(?:\.\d+)?")


def _rows(name: str, header: str, nth: int = 0) -> list[list[str]]:
    """Rows (lists of cells) of the ``nth`` tab-separated table whose header line is ``header``."""
    lines = _text(name).splitlines()
    starts = [i for i, line in enumerate(lines) if line.strip() == header]
    assert len(starts) > nth, f"table header {header!r} not found in {name}"
    rows = []
    for line in lines[starts[nth] + 1:]:
        if not line.strip():
            break
        rows.append([c.strip() for c in line.split("\t")])
    return rows


def _table(name: str, header: str, nth: int = 0) -> dict[str, list[str]]:
    """The table as ``first cell -> other cells`` (row labels must be unique)."""
    rows = _rows(name, header, nth)
    table = {r[0]: r[1:] for r in rows}
    assert len(table) == len(rows), f"duplicate row labels in {header!r}"
    return table


def _check_cells(cells: list[str], spec: list, where: str = "") -> None:
    """Compare each cell with the items named in ``spec`` (None = skip, (id, "std") = a std-only cell)."""
    assert len(cells) >= len(spec), (where, cells)
    for cell, s in zip(cells, spec):
        if s is None:
            continue
        nums = [float(x) for x in _NUM.findall(cell)]
        if isinstance(s, tuple):
            expected = [item(s[0]).paper_std]
        else:
            it = item(s)
            expected = [it.paper_value] if it.paper_std is None or len(nums) == 1 else [it.paper_value, it.paper_std]
        assert nums == expected, (where, cell, s)


def _check_row(table: dict[str, list[str]], label: str, spec: list) -> None:
    _check_cells(table[label], spec, label)


@needs_papers
def test_gates_tables_1_and_2_match_the_paper():
    t1 = _table("residual-gates.md", "Depth = d + 2\tPlain\tResNet\tGated PlainNet\tGated ResNet")
    t2 = _table("residual-gates.md", "Depth = d + 2\tGated PlainNet\tGated ResNet")
    for d in (2, 10, 20, 50, 100):
        archs = ("plain", "resnet", "gated-plain", "gated-resnet")
        _check_row(t1, f"d = {d}", [f"gates/table1/mnist-d{d}-{a}" for a in archs])
        _check_row(t2, f"d = {d}", [f"gates/table2/mnist-d{d}-{a}-mean-k" for a in ("gated-plain", "gated-resnet")])
    assert "60.37" in t1["d = 50"] and "90.20" in t1["d = 100"]  # the printed strings, not just the numbers


@needs_papers
def test_gates_tables_3_to_6_match_the_paper():
    t3 = _table("residual-gates.md", "Model\tOriginal\tGated\tGated (k decay)")
    for label, slug in [("Resnet 5", "resnet5"), ("Wide ResNet (4,10) + Dropout", "wrn-4-10-dropout")]:
        _check_row(t3, label, [f"gates/table3/cifar10-{slug}-{v}" for v in ("original", "gated", "gated-kdecay")])
    labels = {"wrn-2-4": "Wide ResNet (2,4)", "wrn-4-10": "Wide ResNet (4,10)",
              "wrn-4-10-dropout": "Wide ResNet $(4,10)$ + Dropout", "wrn-8-1": "Wide ResNet (8,1)",
              "wrn-6-10-dropout": "Wide ResNet (6,10) + Dropout"}
    for nth, (table, ds) in enumerate([("table4", "cifar10"), ("table5", "cifar100")]):
        rows = _table("residual-gates.md", "Model\tOriginal\tGated", nth)
        for slug, label in labels.items():
            if label in rows:
                _check_row(rows, label, [f"gates/{table}/{ds}-{slug}-{v}" for v in ("original", "gated")])
        assert len(rows) == (5 if table == "table4" else 4)
    t6 = _table("residual-gates.md", "Method\tParams\tC10+\tC100+")
    slugs = {"Network in Network": "nin", "FitNet": "fitnet", "Highway Neural Network": "highway",
             "All-CNN": "all-cnn", "ResNet-110": "resnet-110", "ResNet in ResNet": "resnet-in-resnet",
             "Stochastic Depth": "stochastic-depth", "ResNet-1001": "resnet-1001", "FractalNet": "fractalnet",
             "Wide ResNet": "wrn-4-10", "DenseNet": "densenet",
             "Wide GatedResNet": "wide-gated-resnet-4-10-dropout"}
    ids6 = {it.id for it in items_for("gates") if it.item == "Table 6" and "parameters" not in it.id}
    assert len(t6) == len(slugs) == 12
    seen = set()
    for label, cells in t6.items():
        slug = slugs[label.split(" (")[0]]
        spec = [None] + [None if cell == "-" else f"gates/table6/{ds}-{slug}"
                         for ds, cell in zip(("c10", "c100"), cells[1:])]
        _check_row(t6, label, spec)
        seen.update(s for s in spec if s)
    assert seen == ids6
    assert t6["Wide GatedResNet (4,10) + Dropout"][0] == f"{item('gates/table6/wrn-4-10-parameters').paper_value}M"


@needs_papers
def test_awnn_tables_match_the_paper():
    t1 = _table("adaptive-width-nn.md", "Fixed\t\tAWNN\t\tWidth (Fixed)\t\tWidth (AWNN)")
    for label, slug in [("DoubleMoon", "doublemoon"), ("Spiral", "spiral"), ("SpiralHard", "spiralhard"),
                        ("MNIST", "mnist"), ("CIFAR10", "cifar10"), ("CIFAR100", "cifar100"), ("NCI1", "nci1"),
                        ("REDDIT-B", "reddit-b"), ("Multi30k (\u2193)", "multi30k")]:
        m = "loss" if slug == "multi30k" else "accuracy"
        fw = item(f"awnn/table1/{slug}-fixed-width")
        spec = [f"awnn/table1/{slug}-fixed-{m}", (f"awnn/table1/{slug}-fixed-{m}", "std"),
                f"awnn/table1/{slug}-awnn-{m}", (f"awnn/table1/{slug}-awnn-{m}", "std"),
                fw.id if fw.paper_value is not None else None,
                f"awnn/table1/{slug}-awnn-width", (f"awnn/table1/{slug}-awnn-width", "std")]
        _check_row(t1, label, spec)
        if fw.paper_value is None:  # 'Linear' or '(96-320)': explained in the note
            assert t1[label][4].strip("()") in fw.note or "Linear" in fw.note
    t2 = _table("adaptive-width-nn.md", "# Samples\t# Features\t# Classes\tOuter Split (TR/VL/TE)\tInner Split (TR/VL)")
    labels = {"doublemoon": "DoubleMoon", "spiral": "Spiral", "spiralhard": "SpiralHard", "mnist": "MNIST",
              "cifar10": "CIFAR10", "cifar100": "CIFAR100", "nci1": "NCI1", "reddit-b": "REDDIT-B",
              "multi30k": "Multi30k"}
    assert set(labels.values()) == set(t2)
    for slug, label in labels.items():
        it = item(f"awnn/table2/{slug}-samples")
        assert float(t2[label][0]) == it.paper_value and t2[label][3] in it.note, slug
    assert float(t2["NCI1"][1]) == item("awnn/table2/nci1-features").paper_value
    d = _table("adaptive-width-nn.md", "Spiral\tSpiralHard\tREDDIT-B")
    _check_row(d, "Fixed+", [f"awnn/appd/{s}-fixed-plus-accuracy" for s in ("spiral", "spiralhard", "reddit-b")])
    _check_row(d, "AWNN", ["awnn/table1/spiral-awnn-accuracy", "awnn/table1/spiralhard-awnn-accuracy",
                           "awnn/table1/reddit-b-awnn-accuracy"])


@needs_papers
@pytest.mark.parametrize("transcript", FILES["H-ACN"])
def test_hacn_tables_match_the_paper(transcript):
    t1 = _table(transcript, "Noise (p)\tRes\tH-ACN" if transcript == "hybrid-acn.md" else "Noise ( $p$ )\tRes\tH-ACN")
    for label, p in [("0 (w/o noise)", "0"), ("0.01", "0.01"), ("0.03", "0.03")]:
        _check_row(t1, label, [f"hacn/table1/hellaswag-p{p}-res", f"hacn/table1/hellaswag-p{p}-hacn"])
    t3 = _table(transcript, "Dataset\tValue")
    for label, slug in [("CIFAR-2", "cifar2"), ("CIFAR-10", "cifar10"), ("ImageNet", "imagenet")]:
        _check_row(t3, label, [f"hacn/table3/{slug}-gamma"])
    assert "0.930" in t3["ImageNet"]
    t6 = _table(transcript, "Initialization\tPPL")
    slugs6 = ["n0.15-0.01", "n0.25-0.01", "n0.15-0.005", "n0.25-0.005", "half-layers", "exp-decay"]
    assert len(t6) == 6
    for label, slug in zip(t6, slugs6):
        _check_row(t6, label, [f"hacn/table6/init-{slug}"])
    fig3 = _table(transcript, "Noise\tRes\tH-ACN")
    _check_row(fig3, "0", ["hacn/fig3b/vit-imagenet-res", "hacn/fig3b/vit-imagenet-hacn"])
    for s in ("0.1", "0.3"):
        _check_row(fig3, s, [f"hacn/fig3c/vit-noise{s}-res", f"hacn/fig3c/vit-noise{s}-hacn"])
    models = _table(transcript, "Models\tAcc.")
    for arch, label in [("res", "Res"), ("acn", "ACN"), ("hacn", "H-ACN")]:
        cells = models.get(label) or models[f"<b>{label}</b>"]
        assert [float(x) for x in _NUM.findall(cells[0])] == [item(f"hacn/fig3b/vit-imagenet-{arch}").paper_value]
    text = _text(transcript)
    assert "Number of Parameters\t208.54M" in text
    assert "19.78 vs 19.82 on OWT-2 and 16.78 vs 16.65 on PG-19" in text  # footnote 8 -> Fig. 4 items
    assert "41.8% compared to 41.2%" in text


@needs_papers
def test_hacn_table2_uses_the_second_transcript_where_the_first_garbles_it():
    good = _table("hybrid-acn-second-transcript.md", "Init of $\\alpha$\tAcc.")
    for mu in ("0.25", "0.75", "1"):
        _check_row(good, f"$\\mu = {mu}$", [f"hacn/table2/mixer-mu{mu}"])
    garbled = _table("hybrid-acn.md", "Init of $\\alpha$\tAcc.")
    assert "$\\mu = 0.25$ $\\mu = 0.75$" in garbled  # two labels on one line, values "90.2 89.7"
    assert "later version" in item("hacn/table2/mixer-mu0.25").note


@needs_papers
def test_hacn_tables_7_and_8_match_the_paper():
    t7 = _rows("hybrid-acn.md", "Model\tPPL")
    assert len(t7) == 4 and "w/o DepthLN" in t7[1][0] and "w/o DepthLN" in t7[3][0]
    _check_cells(t7[0][1:], ["hacn/table6/init-n0.15-0.01"])
    _check_cells(t7[1][1:], ["hacn/table7/init-n0.15-0.01-no-depthln"])
    _check_cells(t7[2][1:], ["hacn/table6/init-n0.25-0.01"])
    _check_cells(t7[3][1:], ["hacn/table7/init-n0.25-0.01-no-depthln"])
    t8 = _table("hybrid-acn-second-transcript.md", "Init Method\tPPL")
    slugs = ["hacn-mu0.25", "res", "hacn-mu0.5", "hacn-mu0.75", "hacn-mu1.0", "hacn-no-long-mu1.0",
             "hacn-no-long-mu0", "denseformer", "layercomb-res-init", "layercomb-acn-init"]
    rows = [label for label in t8 if "Models" not in label]
    assert len(rows) == len(slugs)
    for label, slug in zip(rows, slugs):
        _check_row(t8, label, [f"hacn/table8/{slug}"])
    assert "Table 8" not in _text("hybrid-acn.md")  # the first transcript predates App. H


# --------------------------------------------------------------------------- #
# Bibliography
# --------------------------------------------------------------------------- #
EXPECTED_KEYS = {
    "anonymous2025hybrid", "errica2025adaptive", "savarese2016learning",
    "he2016deep", "he2016identity", "srivastava2015highway", "srivastava2015training", "zagoruyko2016wide",
    "huang2017densely", "tolstikhin2021mlp", "dosovitskiy2021image", "radford2019language", "su2024roformer",
    "dorovatas2025auto", "bachlechner2021rezero", "menghani2025laurel", "pagliardini2024denseformer",
    "he2015delving", "kingma2015adam", "dozat2016incorporating", "xu2019powerful", "errica2020fair",
    "vaswani2017attention", "elliott2016multi30k", "lecun1998gradient", "lecun1998mnist", "xiao2017fashion",
    "krizhevsky2009learning", "morris2020tudataset", "karpathy2015unreasonable",
}


def _bib():
    pybtex_database = pytest.importorskip("pybtex.database")
    return pybtex_database.parse_file(str(BIB), bib_format="bibtex")  # strict: duplicate keys raise


def test_bibliography_parses_and_has_the_expected_entries():
    bib = _bib()
    keys = set(bib.entries)
    assert EXPECTED_KEYS <= keys, sorted(EXPECTED_KEYS - keys)
    for key, entry in bib.entries.items():
        assert re.fullmatch(r"[a-z]+\d{4}[a-z0-9]+", key), key
        assert entry.fields.get("title") and re.fullmatch(r"\d{4}", entry.fields.get("year", "")), key
        assert entry.persons.get("author"), key
        first_author = re.sub(r"[^a-z]", "", entry.persons["author"][0].last_names[0].lower())
        assert key.startswith(first_author), key
        assert entry.fields["year"] in key, key


@needs_papers
def test_bib_titles_of_the_three_papers_match_the_transcripts():
    bib = _bib()

    def norm(s: str) -> str:
        return re.sub(r"[^a-z]", "", s.lower())

    for key, fname in [("anonymous2025hybrid", "hybrid-acn.md"), ("errica2025adaptive", "adaptive-width-nn.md"),
                       ("savarese2016learning", "residual-gates.md")]:
        first = next(line for line in _text(fname).splitlines() if line.strip())
        assert norm(bib.entries[key].fields["title"]) == norm(first), key
    authors = [str(p) for p in bib.entries["errica2025adaptive"].persons["author"]]
    assert authors == ["Errica, Federico", "Christiansen, Henrik", "Zaverkin, Viktor", "Niepert, Mathias",
                       "Alesiani, Francesco"]
    gates_text = _text("residual-gates.md")
    for p in bib.entries["savarese2016learning"].persons["author"]:
        assert p.last_names[0] in gates_text


# --------------------------------------------------------------------------- #
# Where the book shows each item (PaperItem.book)
# --------------------------------------------------------------------------- #
def _headings(chapter: str) -> list[str]:
    import json

    cells = json.loads((REPO / "notebooks" / f"{chapter}.ipynb").read_text(encoding="utf-8"))["cells"]
    return [line.lstrip("#").strip() for c in cells if c["cell_type"] == "markdown"
            for line in "".join(c["source"]).splitlines() if line.startswith("#")]


def test_every_place_names_a_chapter_heading_a_real_test_and_registered_experiments():
    from hacn_core import catalog

    placed = [it for it in PAPER_ITEMS if it.book is not None]
    assert len(placed) > 150
    experiments = set(catalog.registry())
    for it in placed:
        book = it.book
        assert (REPO / "notebooks" / f"{book.chapter}.ipynb").is_file(), it.id
        assert not book.section or book.section in _headings(book.chapter), (it.id, book.section)
        assert it.id.split("/")[0] == book.chapter.split("_")[0], it.id  # a paper's items in its own chapters
        for test in book.checked_by:
            path, name = test.split("::")
            assert re.search(rf"^def {name}\(", (REPO / path).read_text(encoding="utf-8"), re.M), test
        assert set(book.drawn_from or ()) <= experiments, it.id


def test_exact_items_are_the_analytic_ones_and_drawn_items_are_figures():
    exact = [it for it in PAPER_ITEMS if it.book and it.book.checked_by]
    drawn = [it for it in PAPER_ITEMS if it.book and it.book.drawn_from is not None]
    assert {it.id.split("/")[1] for it in exact} >= {"eq1", "eq2", "eq3", "eq4", "eq5", "alg1", "fig8a", "fig8b",
                                                     "fig8c", "eq11", "eq12", "eq14", "eq15", "fig1", "sec2.2"}
    for it in exact:  # an equation, or an exact fact of a table: a count or a configuration the tests check
        analytic = it.where == pi.W_EXACT and it.paper_setting == "analytic"
        fact = it.item.startswith("Table") and (it.paper_value is not None or it.id.endswith("config"))
        assert analytic or fact, it.id
        assert all(t.startswith("tests/test_") for t in it.book.checked_by), it.id
    for it in drawn:  # a figure, or a table cell the chapter computes by model selection (no single link)
        assert (it.item.startswith("Fig.") and it.qualitative) or it.item.startswith("Table"), it.id


def test_place_items_refuses_unknown_keys_and_double_roles():
    from hacn_core.engine.items import Place, place_items

    items = items_for("H-ACN")
    placed = place_items(items, {"hacn/table2": Place("hacn_02_mixer", "x"),
                                 "hacn/table2/mixer-mu1": Place("hacn_02_mixer", "y")})
    by_id = {it.id: it.book for it in placed}
    assert by_id["hacn/table2/mixer-mu0.25"].section == "x" and by_id["hacn/table2/mixer-mu1"].section == "y"
    assert by_id["hacn/fig10/vit-finetune-depth"] is None  # placed by no key, and by no chapter yet
    assert by_id["hacn/table2/mixer-mu1"] != by_id["hacn/table2/mixer-mu0.75"]  # the longest key wins
    with pytest.raises(ValueError, match="places name no item: hacn/table9"):
        place_items(items, {"hacn/table9": Place("hacn_02_mixer")})
    with pytest.raises(ValueError, match="place name no item|places name no item: hacn/table"):
        place_items(items, {"hacn/table": Place("hacn_02_mixer")})  # prefixes stop at a '/'
    with pytest.raises(ValueError, match="not both"):
        Place("hacn_01_forward_rule", checked_by=("tests/test_connectivity.py::test_x",), drawn_from=())
    with pytest.raises(ValueError, match="tests/test_<file>.py::test_<name>"):
        Place("hacn_01_forward_rule", checked_by=("test_connectivity.py",))
    with pytest.raises(ValueError, match="notebook name"):
        Place("notebooks/hacn_01_forward_rule.ipynb")
