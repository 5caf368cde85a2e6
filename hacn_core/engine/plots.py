"""House style for every figure of the book.

``set_style()`` once per notebook (seaborn's ticks theme, colour-blind palette,
vector SVG output inline so the rendered book stays sharp); ``figure`` makes a
grid of axes of the book's standard size; ``paper_vs_ours`` draws the recurring
"paper's value beside ours" bar chart; ``with_ci`` a curve with its band.
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns

PALETTE = "colorblind"
FIG_WIDTH = 6.4  # inches: one book column
PAPER_COLOUR = "0.6"


def set_style(context: str = "notebook") -> None:
    """Seaborn theme, palette and vector (SVG) inline output for notebooks."""
    sns.set_theme(context=context, style="ticks", palette=PALETTE)
    plt.rcParams.update(
        {
            "figure.dpi": 100,
            "savefig.bbox": "tight",
            "axes.spines.top": False,
            "axes.spines.right": False,
            "svg.fonttype": "none",
        }
    )
    try:
        from matplotlib_inline.backend_inline import set_matplotlib_formats

        set_matplotlib_formats("svg")
    except ImportError:  # outside IPython
        pass


def figure(ncols: int = 1, nrows: int = 1, height: float = 3.2, **kwargs):
    """A figure with ``nrows x ncols`` axes, one book column wide per column (at most two)."""
    width = FIG_WIDTH * min(ncols, 2) / (1 if ncols == 1 else 1.15)
    return plt.subplots(nrows, ncols, figsize=(width, height * nrows), squeeze=False, **kwargs)


def paper_vs_ours(ax, labels: Sequence[str], paper: Sequence[float | None], ours: Sequence[float], ours_err=None, ylabel=""):
    """Grouped bars: the paper's reported value (grey) beside ours (with error bars)."""
    x = np.arange(len(labels))
    paper_values = np.array([np.nan if p is None else p for p in paper], dtype=float)
    ax.bar(x - 0.2, paper_values, width=0.4, color=PAPER_COLOUR, label="paper")
    ax.bar(x + 0.2, ours, width=0.4, yerr=ours_err, capsize=3, color=sns.color_palette(PALETTE)[0], label="ours")
    ax.set_xticks(x, labels)
    ax.set_ylabel(ylabel)
    ax.legend(frameon=False)
    return ax


def with_ci(ax, x, runs: np.ndarray, label: str, **kwargs):
    """Mean curve over runs (rows) with a band of one standard error."""
    runs = np.atleast_2d(np.asarray(runs, dtype=float))
    mean = np.nanmean(runs, axis=0)
    (line,) = ax.plot(x, mean, label=label, **kwargs)
    if runs.shape[0] > 1:
        sem = np.nanstd(runs, axis=0, ddof=1) / np.sqrt(runs.shape[0])
        ax.fill_between(x, mean - sem, mean + sem, color=line.get_color(), alpha=0.2, linewidth=0)
    return line
