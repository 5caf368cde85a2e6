"""The key-results page: per paper, the findings a researcher would quote, each computed from the ledger.

Which findings a paper's page leads with is a choice (:data:`KEY`: a ledger item, and the rule or recipe a
claim was judged under where a chapter judges it more than once); what each finding *says* is not typed
anywhere: its sentence is the chapter's claim or the item's quantity, its verdict and evidence come from the
ledger row (:mod:`hacn_core.ledger`), which reads them from the stored runs and the chapters' claims tables
(:mod:`hacn_core.analogues`). Each finding says at which scale it holds: the paper's own setting, or the
chapter's offline analogue, named.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hacn_core.engine.results import ResultsStore
from hacn_core.ledger import (
    ANALOGUE_STATUSES,
    COMPARED_STATUSES,
    STATUSES,
    TO_REPRODUCE,
    LedgerRow,
    analogue_text,
    chapter_href,
    chapter_title,
    interval_text,
    ledger_rows,
    ours_text,
    paper_text,
    status_counts,
    tolerance_text,
)

#: per paper, the findings its section leads with: (ledger item, the rule or recipe the claim was judged under,
#: "" for the item's first claim or its comparison at the paper's setting)
KEY: dict[str, tuple[tuple[str, str], ...]] = {
    "H-ACN": (
        ("hacn/fig2a/layerwise-accuracy", "final accuracy"),
        ("hacn/fig2a/layerwise-accuracy", "H-ACN auto-compression"),
        ("hacn/table3/cifar10-gamma", "Eq. 2, the paper's recipe"),
        ("hacn/table3/cifar10-gamma", "the code's rule, the paper's recipe"),
        ("hacn/sec4/alpha-correlation-mixer-cifar10", "Eq. 2, the paper's recipe"),
        ("hacn/fig3c/vit-noise0.3-hacn", ""),
        ("hacn/fig4a/owt2-layerwise-ppl", ""),
        ("hacn/fig4/owt2-final-ppl-hacn", ""),
    ),
    "AWNN": (
        ("awnn/table1/spiralhard-awnn-accuracy", ""),
        ("awnn/table1/spiral-awnn-width", ""),
        ("awnn/table1/spiral-awnn-width", "the public code's data geometry, renormalised importances"),
        ("awnn/fig6-left/lossless-truncation", ""),
        ("awnn/sec3.3/training-overhead", ""),
        ("awnn/table1/nci1-awnn-width", ""),
        ("awnn/table1/multi30k-awnn-width", ""),
    ),
    "Residual Gates": (
        ("gates/table1/mnist-d50-resnet", ""),
        ("gates/table1/mnist-d50-gated-resnet", ""),
        ("gates/table1/mnist-d50-gated-plain", ""),
        ("gates/table2/mnist-d50-gated-resnet-mean-k", ""),
        ("gates/fig5-right/retained-performance-half-removed", ""),
        ("gates/table4/cifar10-wrn-4-10-gated", ""),
    ),
}


@dataclass(frozen=True)
class KeyFinding:
    """One finding: ``claim`` (a sentence), ``verdict``, ``evidence`` (numbers with units, interval, n),
    ``scale`` (the paper's own setting, or the analogue that shows it) and ``chapter`` (its link)."""

    paper: str
    item: str
    claim: str
    verdict: str
    evidence: str
    scale: str
    chapter: str


def _finding(row: LedgerRow, under: str) -> KeyFinding | None:
    item, href = row.item, chapter_href(row.item.book)
    a = row.analogue
    if not under and row.status in (*COMPARED_STATUSES, "run"):  # a number at the paper's own setting
        evidence = f"paper {paper_text(item)}, ours {ours_text(row)}"
        if row.interval is not None:
            evidence += f"; 95% interval {interval_text(row)}"
        if row.tolerance is not None:
            evidence += f"; tolerance {tolerance_text(row)}"
        verdict = row.status if row.status != "run" else "run (no tolerance)"
        return KeyFinding(item.paper, item.id, f"{item.item}: {item.quantity}", verdict, evidence,
                          "the paper's own setting", href)
    if a is None or (under and not a.claims and not a.values):
        return None  # nothing stored for it in this store
    claims = [c for c in a.claims if c.under == under] if under else list(a.claims)
    if claims:
        c = claims[0]
        return KeyFinding(item.paper, item.id, c.claim, c.verdict, c.evidence, _analogue_scale(row, under), href)
    what = f"{item.item}: {item.quantity}" + (f", under {under}" if under else "")
    return KeyFinding(item.paper, item.id, what, "shown",
                      f"paper {paper_text(item)}, ours {analogue_text(row)}",
                      _analogue_scale(row), href)


def _analogue_scale(row: LedgerRow, under: str = "") -> str:
    """Where an analogue finding holds: the chapter's offline analogue, named by the chapter (its setting is
    the chapter's first section), and the rule and recipe it holds under when the chapter judges the item
    under several."""
    chapter = chapter_title(row.item.book.chapter) if row.item.book else row.analogue.experiment
    return f"the offline analogue of the chapter “{chapter}”" + (f", under {under}" if under else "")


def key_findings(rows: Sequence[LedgerRow], key: dict[str, tuple[tuple[str, str], ...]] = KEY) -> list[KeyFinding]:
    """The :data:`KEY` findings of every paper, in order, from the ledger ``rows``."""
    by_id = {r.item.id: r for r in rows}
    found = [_finding(by_id[item_id], under) for paper in key for item_id, under in key[paper] if item_id in by_id]
    return [f for f in found if f is not None]


def key_results(store: ResultsStore | None = None, rows: Sequence[LedgerRow] | None = None) -> dict[str, Any]:
    """What the key-results page shows (pandas DataFrames).

    ``findings[paper]``: its key findings (claim, verdict, evidence, scale, chapter). ``counts``: one row per
    paper, the items to reproduce (quotes of other papers apart) in each verdict at the paper's setting and on
    the analogue.
    """
    import pandas as pd

    rows = list(rows) if rows is not None else ledger_rows(store)
    papers = list(dict.fromkeys(r.item.paper for r in rows))
    found = key_findings(rows)
    findings = {p: pd.DataFrame([{"finding": f.claim, "verdict": f.verdict, "evidence": f.evidence,
                                  "scale": f.scale, "chapter": f.chapter} for f in found if f.paper == p],
                                columns=["finding", "verdict", "evidence", "scale", "chapter"]) for p in papers}
    records = []
    for p in papers:
        mine = [r for r in rows if r.item.paper == p]
        counts, acounts = status_counts(rows=mine), status_counts(rows=mine, analogue=True)
        records.append({"paper": p, "items": len(mine), "items to reproduce": sum(counts[s] for s in TO_REPRODUCE),
                        **{s: counts[s] for s in STATUSES},
                        **{f"analogue: {s}": acounts[s] for s in ANALOGUE_STATUSES}})
    return {"findings": findings, "counts": pd.DataFrame(records), "found": found}


def findings_markdown(found: Sequence[KeyFinding], paper: str) -> str:
    """One paper's key findings as a Markdown list: the claim in bold, its verdict, the evidence (numbers with
    units, interval, n), the scale it holds at, and a link to the chapter section that shows it."""
    lines = []
    for f in (f for f in found if f.paper == paper):
        link = f" ([chapter]({f.chapter.removeprefix('notebooks/')}))" if f.chapter else ""
        lines.append(f"- **{_md(f.claim)}**: *{f.verdict}*. {_md(f.evidence)}. At {_md(f.scale)}.{link}")
    return "\n".join(lines) if lines else "No run of this paper's key findings is stored in this results folder."


def _md(text: str) -> str:
    """Text safe inside Markdown: emphasis and link characters escaped, no trailing full stop."""
    for ch in ("\\", "*", "_", "[", "]", "`", "$"):
        text = text.replace(ch, "\\" + ch)
    return text.rstrip(".")


def counts_sentence(counts: Any, paper: str) -> str:
    """One sentence with a paper's verdict counts at its own setting and on the analogues."""
    row = counts.set_index("paper").loc[paper]
    at = ", ".join(f"{int(row[s])} {s}" for s in STATUSES if s not in ("quoted",) and int(row[s]))
    on = ", ".join(f"{int(row[f'analogue: {s}'])} {s}" for s in ANALOGUE_STATUSES if int(row[f"analogue: {s}"]))
    quoted = f" It also quotes {int(row['quoted'])} results of other papers, which are not counted." if int(
        row["quoted"]) else ""
    return (f"Of its {int(row['items to reproduce'])} items, at the paper's own setting: {at}; on the chapters' "
            f"offline analogues: {on or 'none'}.{quoted}")


__all__ = ["KEY", "KeyFinding", "counts_sentence", "findings_markdown", "key_findings", "key_results"]
