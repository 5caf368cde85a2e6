"""What each chapter shows of a paper item on its offline analogue: our value and the chapter's verdict.

The ledger gives every item two verdicts (:mod:`hacn_core.ledger`): one at the paper's own setting, and
one on the scaled analogue a chapter runs offline (Fashion-MNIST for CIFAR and ImageNet, Tiny
Shakespeare for OpenWebText2 and PG-19, ...). This module collects the second from the same functions
the chapters call, so the ledger and the chapters cannot disagree:

- **claims**: every row of a chapter's claims table that names ledger items
  (:meth:`hacn_core.engine.tables.ClaimTable.add` with ``items=``) gives those items its verdict
  (holds / does not hold / cannot be told), its evidence and, where the claim rests on one number, our
  values (e.g. the cross-seed Pearson correlations of Sec. 4);
- **values**: the paper-beside-ours tables give an item our number on the analogue (one value per seed),
  computed with the selectors the chapter's table uses.

:data:`SOURCES` lists them, one per chapter; :func:`findings` runs them on a results store.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from hacn_core.engine.results import ResultsStore, RunResult

#: the analogue verdicts, in the order the ledger lists them
VERDICTS: tuple[str, ...] = ("holds", "does not hold", "cannot be told", "shown")


@dataclass(frozen=True)
class Finding:
    """One thing a chapter shows about one paper item on its offline analogue.

    ``verdict``: a claims-table verdict ("holds", "does not hold", "cannot be told") or "shown" (a value
    beside the paper's, no claim judged). ``values``: our value, one per seed (or seed pair), in ``unit``
    (empty for a verdict that rests on a difference). ``claim`` and ``evidence``: the claims table's text;
    ``under``: the rule or recipe the verdict holds under, when the chapter judges the item more than once.
    """

    item: str
    experiment: str
    verdict: str
    values: tuple[float, ...] = ()
    unit: str = ""
    claim: str = ""
    evidence: str = ""
    under: str = ""

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"Finding.verdict={self.verdict!r}; allowed: {', '.join(VERDICTS)}")


Stored = Callable[[str], list[RunResult]]


def verdict_word(holds: bool | None) -> str:
    """A claims table's ``holds`` cell as the ledger's analogue verdict."""
    return "cannot be told" if holds is None else "holds" if holds else "does not hold"


def from_claims(frame: Any, experiment: str) -> list[Finding]:
    """The findings of a claims table (:meth:`ClaimTable.frame`): one per (claim, named item)."""
    out = []
    for row in frame.attrs.get("ledger", []):
        for i, item_id in enumerate(row["items"]):
            out.append(Finding(item_id, experiment, verdict_word(row["holds"]),
                               row["values"] if i == 0 else (), row["unit"], row["claim"], row["evidence"],
                               row["under"]))
    return out


def _values(runs: Sequence[RunResult], metric: str, scale: float = 1.0) -> tuple[float, ...]:
    return tuple(scale * float(r.metrics[metric]) for r in runs if metric in r.metrics
                 and math.isfinite(float(r.metrics[metric])))


def _shown(item_id: str, experiment: str, values: Sequence[float], unit: str) -> list[Finding]:
    return [Finding(item_id, experiment, "shown", tuple(values), unit)] if len(values) else []


# ----------------------------------------------------------------------------- H-ACN


def _hacn_mixer(stored: Stored) -> list[Finding]:
    from hacn_core.hacn.studies import mixer as hm
    from hacn_core.hacn.studies import mixer_report as hmr

    results = stored(hm.LONG_ID)
    return from_claims(hmr.claims(results), hm.LONG_ID) if results else []


def _hacn_mechanism(stored: Stored) -> list[Finding]:
    from hacn_core.hacn.studies import code_recipe as cr
    from hacn_core.hacn.studies import code_recipe_report as crr

    results = stored(cr.EXPERIMENT_ID)
    return from_claims(crr.claims(results), cr.EXPERIMENT_ID) if results else []


def _hacn_vit(stored: Stored) -> list[Finding]:
    from hacn_core.hacn.studies import transformer_report as tr
    from hacn_core.hacn.studies import vit as hv

    results = stored(hv.EXPERIMENT_ID)
    if not results:
        return []
    runs, out = tr.main_runs(results), []
    for rule, item_id in tr.VIT_ITEMS.items():  # Fig. 3b: our test accuracy beside ImageNet's top-1
        out += _shown(item_id, hv.EXPERIMENT_ID, _values(runs[rule], "test_accuracy", 100.0), "%")
    for std in (0.1, 0.3):  # Fig. 3c
        for rule, slug in (("hacn", "hacn"), ("resnet", "res")):
            out += _shown(f"hacn/fig3c/vit-noise{std:g}-{slug}", hv.EXPERIMENT_ID,
                          _values(runs[rule], f"noise_accuracy/{std:g}", 100.0), "%")
    out += _shown("hacn/table3/imagenet-gamma", hv.EXPERIMENT_ID, _values(runs["hacn"], "gamma"), "Γ")
    return out + from_claims(tr.vit_claims(results), hv.EXPERIMENT_ID)


def _hacn_decoder(stored: Stored) -> list[Finding]:
    from hacn_core.hacn.studies import decoder as hd
    from hacn_core.hacn.studies import decoder_ablations as hda
    from hacn_core.hacn.studies import transformer_report as tr
    from hacn_core.hacn.studies import vit as hv

    results = stored(hd.EXPERIMENT_ID)
    if not results:
        return []
    ablations = stored(hda.EXPERIMENT.id)
    runs, out, e = tr.main_runs(results), [], hd.EXPERIMENT_ID
    for data in ("owt2", "pg19"):  # Fig. 4: both corpora stand on the one character-level analogue
        for rule, slug in (("hacn", "hacn"), ("resnet", "res")):
            out += _shown(f"hacn/fig4/{data}-final-ppl-{slug}", e, _values(runs[rule], "val_perplexity"),
                          "perplexity per character")
    for rule, slug in (("hacn", "hacn"), ("resnet", "res")):
        out += _shown(f"hacn/fig4c/zero-shot-average-{slug}", e, _values(runs[rule], "cloze_accuracy/0", 100.0), "%")
        for p in hd.CLOZE_NOISE:
            out += _shown(f"hacn/table1/hellaswag-p{p:g}-{slug}", e,
                          _values(runs[rule], f"cloze_accuracy/{p:g}", 100.0), "%")
    for _init, depth_ln, item_id, where in tr.ABLATIONS:  # Tables 6-7, as the chapter's ablation table
        cell = tr._ablation_runs([*results, *ablations], where, depth_ln)
        out += _shown(item_id, hda.EXPERIMENT.id if item_id != "hacn/table6/init-n0.25-0.005" else e,
                      _values(cell, "val_perplexity"), "perplexity per character")
    return out + from_claims(tr.decoder_claims(results, stored(hv.EXPERIMENT_ID), ablations), e)


# ----------------------------------------------------------------------------- Residual Gates


def _gates_cifar(stored: Stored) -> list[Finding]:
    """Each analogue network's test error (%) under the CIFAR-10 cells of Tables 3-6 it stands for, as
    gates_02's comparison table maps them (``analogue_of``)."""
    from hacn_core.gates.studies import cifar as gc
    from hacn_core.gates.studies import cifar_report as gcr

    results = stored(gc.EXPERIMENT_ID)
    groups: dict[tuple[str, str, str], list[RunResult]] = {}
    for r in results:
        key = gcr._paper_cell(r.config["dataset"], r.config["model"], r.config.get("analogue_of"))
        groups.setdefault((*key, r.config["variant"]), []).append(r)
    out = []
    for (dataset, model, variant), runs in groups.items():
        for item_id in gcr.paper_item_ids(dataset, model, variant):
            out += _shown(item_id, gc.EXPERIMENT_ID, _values(runs, "test_error", 100.0), "%")
    return out


# ----------------------------------------------------------------------------- AWNN


def _awnn_tabular(stored: Stored) -> list[Finding]:
    """Table 1's Spiral width under the public code's data geometry with renormalised importances (awnn_02's
    diagnosis at full length): the chapter's explanation of the width gap at the paper's setting."""
    from hacn_core.awnn.studies import adaptive as aa

    runs = [r for r in stored(aa.EXPERIMENT_ID) if r.config.get("study") == "diagnosis"
            and r.config.get("epochs") == aa.TASKS["Spiral"]["epochs"]
            and aa.diagnosis_label(r.config) == "public geometry, renormalised"]
    values = _values(runs, "total_width") or _values(runs, "width")
    return [Finding("awnn/table1/spiral-awnn-width", aa.EXPERIMENT_ID, "shown", values, "neurons",
                    under="the public code's data geometry, renormalised importances")] if values else []


def _awnn_images(stored: Stored) -> list[Finding]:
    from hacn_core.awnn.studies import images as im
    from hacn_core.awnn.studies import images_report as imr

    results, out = stored(im.EXPERIMENT_ID), []
    width = imr.selected_fixed_width(results, "MNIST") if results else None
    if width is not None:
        fixed = imr.arm_runs(results, "MNIST", "fixed", width)
        out += _shown("awnn/table1/mnist-fixed-accuracy", im.EXPERIMENT_ID, _values(fixed, "test_acc", 100.0), "%")
        out += _shown("awnn/table1/mnist-fixed-width", im.EXPERIMENT_ID, [float(width)] * len(fixed), "neurons")
    return out


def _awnn_graphs(stored: Stored) -> list[Finding]:
    from hacn_core import catalog
    from hacn_core.awnn.studies import graphs as ag
    from hacn_core.awnn.studies import graphs_report as grr

    results = stored(ag.EXPERIMENT_ID)
    if not results:
        return []
    sel = grr.selection(catalog.get(ag.EXPERIMENT_ID).runs("book"), results)
    out = []
    for arm, name in (("fixed", "fixed"), ("adaptive", "awnn")):
        folds = grr._scores(sel, "NCI1", arm)
        out += _shown(f"awnn/table1/nci1-{name}-accuracy", ag.EXPERIMENT_ID,
                      [100.0 * s["test_acc"] for s in folds.values()], "%")
        out += _shown(f"awnn/table1/nci1-{name}-width", ag.EXPERIMENT_ID,
                      [float(s["total_width"]) for s in folds.values()], "neurons")
    return out


def _awnn_text(stored: Stored) -> list[Finding]:
    from hacn_core.awnn.studies import text as at
    from hacn_core.awnn.studies import text_report as txr

    results = stored(at.EXPERIMENT_ID)
    if not results:
        return []
    arms, selected = txr.arm_runs(results), txr.selected_fixed(results)
    fixed, adaptive = arms.get(("fixed", selected), []), arms.get(("adaptive", 0), [])
    out = _shown("awnn/table1/multi30k-fixed-loss", at.EXPERIMENT_ID, _values(fixed, "test_token_loss"),
                 "nats per token")
    out += _shown("awnn/table1/multi30k-fixed-width", at.EXPERIMENT_ID, _values(fixed, "total_width"), "neurons")
    if fixed and adaptive:
        ratio = float(np.mean(_values(fixed, "ffn_params"))) / float(np.mean(_values(adaptive, "ffn_params")))
        out += _shown(txr.PAPER_RATIO, at.EXPERIMENT_ID, [ratio], "×")
    return out


@dataclass(frozen=True)
class Source:
    """One chapter's findings: ``chapter`` (its notebook) and the function that computes them."""

    chapter: str
    compute: Callable[[Stored], list[Finding]]


SOURCES: tuple[Source, ...] = (
    Source("hacn_02_mixer", _hacn_mixer),
    Source("hacn_06_mechanism", _hacn_mechanism),
    Source("hacn_04_vit", _hacn_vit),
    Source("hacn_05_decoder", _hacn_decoder),
    Source("gates_02_cifar", _gates_cifar),
    Source("awnn_02_tabular", _awnn_tabular),
    Source("awnn_05_images", _awnn_images),
    Source("awnn_06_graphs", _awnn_graphs),
    Source("awnn_07_text", _awnn_text),
)


def findings(store: ResultsStore | None = None, profile: str = "book",
             sources: Sequence[Source] = SOURCES) -> dict[str, list[Finding]]:
    """Every finding of every source on the runs of ``profile`` in ``store``, by item id (in source order)."""
    from hacn_core import catalog

    store = store or ResultsStore()
    cache: dict[str, list[RunResult]] = {}

    def stored(experiment_id: str) -> list[RunResult]:
        if experiment_id not in cache:
            cache[experiment_id] = catalog.stored(experiment_id, profile, store=store)
        return cache[experiment_id]

    out: dict[str, list[Finding]] = {}
    for source in sources:
        for f in source.compute(stored):
            out.setdefault(f.item, []).append(f)
    return out


def settings(found: Mapping[str, Sequence[Finding]], profile: str = "book") -> dict[str, str]:
    """The one-line setting (``Experiment.setting[profile]``) of every experiment the findings come from."""
    from hacn_core import catalog

    names = {f.experiment for fs in found.values() for f in fs}
    return {e: catalog.get(e).setting.get(profile, profile) for e in sorted(names)}


__all__ = ["Finding", "SOURCES", "Source", "VERDICTS", "findings", "from_claims", "settings", "verdict_word"]
