"""The key-results figure: per paper, how many of its items reproduced, differ, or are still to run.

Drawn from the ledger alone (:func:`hacn_core.ledger.key_results`, its ``counts`` frame), so the
figure and the ledger page cannot disagree. One panel per paper, one bar per status, in the
ledger's order (:data:`hacn_core.ledger.STATUSES`). Colours group the statuses into five kinds,
six, the house limit per axis: the three verdicts of a comparison with the paper's own
number (reproduced, differs, inconclusive), everything run or shown without such a verdict, and
what is still to run.
"""

from __future__ import annotations

from hacn_core.ledger import STATUS_COLOURS, STATUSES

#: the colour group of each status (six groups: at most six colours per axis)
STATUS_GROUP: dict[str, str] = {
    "reproduced": "reproduced", "differs": "differs", "inconclusive": "inconclusive",
    "run": "run or shown, no verdict", "exact": "run or shown, no verdict", "shown": "run or shown, no verdict",
    "quoted": "quoted from other papers", "not run": "not run",
}
#: each group's colour: the ledger page's colour for the verdicts and "not run", one blue for the rest
GROUP_COLOURS: dict[str, str] = {
    "reproduced": STATUS_COLOURS["reproduced"], "differs": STATUS_COLOURS["differs"],
    "inconclusive": STATUS_COLOURS["inconclusive"], "run or shown, no verdict": STATUS_COLOURS["run"],
    "quoted from other papers": "#d4a72c", "not run": "#8c959f",
}


def plot_status_counts(counts):
    """One horizontal bar per status and paper (panels side by side, statuses top to bottom), its
    count written at the bar's end. ``counts``: ``key_results(...)["counts"]`` (a row per paper, a
    column per status)."""
    from matplotlib.patches import Patch

    from hacn_core.engine import plots

    missing = [s for s in STATUSES if s not in counts.columns]
    if missing or "paper" not in counts.columns:
        raise ValueError(f"plot_status_counts: counts must have a 'paper' column and one per status; missing: "
                         f"{', '.join(missing or ['paper'])}")
    papers = list(counts["paper"])
    fig, axes = plots.figure(ncols=len(papers), height=2.9, sharey=True)
    rows = list(range(len(STATUSES)))[::-1]  # the ledger's first status on top
    top = max(1, int(counts[list(STATUSES)].to_numpy().max()))
    for ax, (_, row) in zip(axes[0], counts.iterrows()):
        values = [int(row[s]) for s in STATUSES]
        colours = [GROUP_COLOURS[STATUS_GROUP[s]] for s in STATUSES]
        ax.barh(rows, values, color=colours, height=0.7)
        for y, v in zip(rows, values):
            ax.text(v + 0.02 * top, y, str(v), va="center", ha="left", fontsize=8)
        ax.set_xlim(0, top * 1.25)
        ax.set_title(f"{row['paper']} ({int(row['items'])} items)")
        ax.set_xlabel("items")
        ax.spines["left"].set_visible(False)
        ax.tick_params(axis="y", length=0)
    axes[0, 0].set_yticks(rows, STATUSES)
    handles = [Patch(color=c, label=g) for g, c in GROUP_COLOURS.items()]
    fig.legend(handles=handles, loc="outside lower center", ncols=3)
    return fig
