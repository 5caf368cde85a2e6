"""What the chapter shows of ``gates-keras``: one row per hypothesis and setting, with a verdict.

The study (:mod:`hacn_core.gates.studies.keras_defaults`) trains the d = 50
Gated PlainNet of Residual Gates Sec. 3.1 under one Keras 2017 default at a
time; :func:`hypothesis_table` reads its stored runs. A row gathers the runs
of one hypothesis at one depth, number of epochs and training-set size (the
seeds averaged) and says whether the network trains:

* ``trains``: mean final test error below ``TRAINS_BELOW`` (10%; the paper's
  d = 50 Gated PlainNet reaches 1.36% after 100 epochs, and our d = 10 and 20
  nets are below 3% after one epoch of the same training);
* ``fails``: at or above ``FAILS_ABOVE`` (50%: most digits wrong);
* ``partial``: in between.

``gates moved`` is true when the mean ``k`` left 1 by at least
``K_MOVED`` or some gate closed (``k <= 0``); the paper's d = 50 mean ``k``
is 0.46 (Table 2).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from hacn_core.engine.results import ResultsStore, RunResult
from hacn_core.gates.studies.keras_defaults import EXPERIMENT_ID, HYPOTHESES

TRAINS_BELOW = 0.10
FAILS_ABOVE = 0.50
K_MOVED = 0.05
COLUMNS = ("hypothesis", "d", "epochs", "train images", "seeds", "test error %", "per seed %", "mean k", "gates closed",
           "gates k < 0.5", "gates moved", "verdict", "what it tests")


def verdict(test_error: float) -> str:
    """``trains`` / ``partial`` / ``fails`` for a final test error (a fraction), see the module doc."""
    if not 0.0 <= test_error <= 1.0:
        raise ValueError(f"test_error={test_error!r} must be a fraction in [0, 1]")
    if test_error < TRAINS_BELOW:
        return "trains"
    return "fails" if test_error >= FAILS_ABOVE else "partial"


def hypothesis_table(results: Sequence[RunResult]):
    """The table of the runs (a pandas DataFrame, columns :data:`COLUMNS`), hypotheses in study order.

    One row per (hypothesis, d, epochs, training-set size); ``test error %``,
    ``mean k``, ``gates closed`` (``k <= 0``) and ``gates k < 0.5`` are means
    over the row's seeds, listed in ``seeds``; ``per seed %`` gives each seed's test error in that order.
    """
    import pandas as pd

    groups: dict[tuple, list[RunResult]] = {}
    for r in results:
        if r.experiment != EXPERIMENT_ID:
            raise ValueError(f"results: a run of {r.experiment!r}; hypothesis_table reads {EXPERIMENT_ID!r} runs")
        c = r.config
        groups.setdefault((c["hypothesis"], c["depth"], c["epochs"], c["train_subset"] or 60000), []).append(r)
    order = list(HYPOTHESES)
    rows = []
    for (hyp, d, epochs, n), runs in sorted(groups.items(), key=lambda kv: (order.index(kv[0][0]), *kv[0][1:])):
        error = float(np.mean([r.metrics["test_error"] for r in runs]))
        mean_k = float(np.mean([r.metrics["mean_k"] for r in runs]))
        closed = float(np.mean([r.metrics["gates_closed"] for r in runs]))
        rows.append({
            "hypothesis": hyp, "d": d, "epochs": epochs, "train images": n,
            "seeds": ", ".join(str(s) for s in sorted(r.config["seed"] for r in runs)),
            "test error %": round(100 * error, 2),
            "per seed %": ", ".join(f"{100 * r.metrics['test_error']:.2f}"
                                    for r in sorted(runs, key=lambda r: r.config["seed"])),
            "mean k": round(mean_k, 3), "gates closed": round(closed, 1),
            "gates k < 0.5": round(float(np.mean([r.metrics["gates_below_half"] for r in runs])), 1),
            "gates moved": bool(abs(mean_k - 1.0) >= K_MOVED or closed > 0),
            "verdict": verdict(error), "what it tests": HYPOTHESES[hyp][1],
        })
    return pd.DataFrame(rows, columns=list(COLUMNS))


def stored_table(profile: str = "book", store: ResultsStore | None = None):
    """:func:`hypothesis_table` of the stored runs of ``profile`` (never trains; empty if none is stored)."""
    from hacn_core import catalog

    return hypothesis_table(catalog.stored(EXPERIMENT_ID, profile, store=store))


def gate_gradients_by_hypothesis(hypotheses: Sequence[str] | None = None, depth: int = 50, *, batches: int = 20,
                                 batch_size: int = 128, seed: int = 0, data=None):
    """Each hypothesis' untrained network: how consistently the loss pushes its gates (a pandas DataFrame).

    For every hypothesis (all by default) the network of its configuration is
    built as the study builds it (:func:`~hacn_core.gates.studies.keras_defaults.build_model`),
    and over ``batches`` seeded training mini-batches we record ``dL/dk`` of
    every gate. Per hypothesis: ``mean |dL/dk|``; ``sign agreement``, the mean
    over gates of ``|mean sign(dL/dk)|`` (1: every batch pushes a gate the same
    way; near 0: a coin flip, so Adam only jitters ``k``); and ``mean dL/dk``,
    whose sign says whether descent opens (negative) or closes (positive) the
    gates on average. ``data`` is ``(X, y)``, MNIST's training split by default.
    """
    import pandas as pd

    from hacn_core.gates.studies import keras_defaults as kd
    from hacn_core.gates.studies.gradients import gate_gradient_samples
    from hacn_core.gates.studies.mnist import mnist_tensors

    data = data if data is not None else mnist_tensors(True)
    rows = []
    for hyp in (list(HYPOTHESES) if hypotheses is None else list(hypotheses)):
        model = kd.build_model(kd.make_config(hyp, depth=depth, seed=seed))
        g = gate_gradient_samples(model, data, batches=batches, batch_size=batch_size, seed=seed)  # (batches, gates)
        rows.append({"hypothesis": hyp, "mean |dL/dk|": float(np.abs(g).mean()),
                     "sign agreement": float(np.abs(np.sign(g).mean(0)).mean()), "mean dL/dk": float(g.mean())})
    return pd.DataFrame(rows).set_index("hypothesis")


def paper_gated_plain(depth: int) -> tuple[float, float]:
    """(test error %, mean final ``k``) of the paper's Gated PlainNet at ``depth`` (Tables 1 and 2)."""
    from hacn_core.gates.paper_items import item

    return (item(f"gates/table1/mnist-d{depth}-gated-plain").paper_value,
            item(f"gates/table2/mnist-d{depth}-gated-plain-mean-k").paper_value)


def _count(mean: float) -> str:
    """A mean count over seeds: whole numbers as such, others to one decimal."""
    return f"{mean:.0f}" if float(mean).is_integer() else f"{mean:.1f}"


def confirmation_markdown(table) -> str:
    """The confirmation's reading, one bullet per depth, every number from ``table`` (:func:`hypothesis_table`
    of the ``paper`` profile) or the paper (Tables 1-2). Empty when no run is stored.

    Markdown without TeX (a notebook's Markdown *output* is not typeset: symbols are italic letters)."""
    if not len(table):
        return ""
    names = {"k-init-0.5": "with *k* starting at 0.5", "keras-all": "with all the Keras defaults together"}
    lines = []
    for d, rows in table.groupby("d", sort=True):
        paper_error, paper_k = paper_gated_plain(int(d))
        parts = []
        for _, r in rows.iterrows():
            name = names.get(r["hypothesis"], f"`{r['hypothesis']}`")
            spread = f" (by seed: {r['per seed %']})" if "," in r["seeds"] else ""
            parts.append(f"{name}, **{r['test error %']:.2f}%** test error{spread} ({r['verdict']}; seeds {r['seeds']}, "
                         f"{r['epochs']} epochs), mean final *k* {r['mean k']:.2f}, {_count(r['gates closed'])} of {d} "
                         f"gates closed")
        lines.append(f"- *d* = {d} (paper: {paper_error:.2f}%, mean *k* {paper_k:.2f}): " + "; ".join(parts) + ".")
    return "\n".join(lines)
