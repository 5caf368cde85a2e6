"""House style for every figure of the book.

One look for every chapter, legible at the book's text width:

* ``set_style()`` once per notebook: seaborn's ticks theme, fonts in points that stay
  readable at :data:`FIG_WIDTH` (ticks and legends at 8 pt, labels and titles at 9 pt),
  vector (SVG) inline output so the rendered book stays sharp.
* ``figure`` makes a grid of axes :data:`FIG_WIDTH` wide whatever the number of columns
  (a wider figure is shrunk by the page, and its fonts with it), laid out by matplotlib's
  constrained layout so that legends placed outside the axes fit inside the figure.
* Legends never cover data: ``legend`` puts one in an empty corner of the axes when there
  is one and outside on the right otherwise; ``legend_outside`` puts it to the right of
  or below the axes; ``figure_legend`` gives a grid of panels one legend below them all.
* Categories (rules, batch sizes, datasets) get distinct colours from one colour-blind
  palette, never a continuous colormap: ``categorical`` maps at most :data:`MAX_COLOURS`
  of them to colours and refuses more; ``small_multiples`` splits a longer list into panels.
* The paper's value beside ours: ``paper_vs_ours`` (grouped bars), ``paper_line`` (a
  dashed reference line on a curve) and ``paper_point`` (a marker on a scatter or curve),
  all labelled "paper" and drawn in :data:`PAPER_COLOUR`.
* ``with_ci`` a mean curve with its band; ``clip_log_axis`` fits a log axis to the
  positive data it shows (a band that dips to zero must not stretch it to 1e-49).
"""

from __future__ import annotations

import warnings
from collections.abc import Hashable, Sequence

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns
from matplotlib.axes import Axes
from matplotlib.collections import Collection
from matplotlib.font_manager import FontProperties
from matplotlib.legend import Legend
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle
from matplotlib.ticker import FuncFormatter
from matplotlib.transforms import ScaledTranslation

PALETTE = "colorblind"
#: The house colours: seaborn's colour-blind palette reordered so that the first four are far apart
#: (blue, orange, green, pink; vermilion, next to orange, comes fifth). Also matplotlib's C0..C5.
HOUSE_COLOURS: list[tuple[float, float, float]] = [sns.color_palette(PALETTE)[i] for i in (0, 1, 2, 4, 3, 9)]
FIG_WIDTH = 6.4  # inches: the book's text width; every figure is this wide
PAPER_COLOUR = "0.35"  # the paper's values: dark grey, distinct from every palette colour
PAPER_LABEL = "paper"
MAX_COLOURS = 6  # distinct colours one axis may use; more categories go to small multiples
#: Font sizes in points at FIG_WIDTH (the figure is shown at its own size, so these are what a reader sees).
FONT_SIZES: dict[str, float] = {
    "font.size": 9,
    "axes.labelsize": 9,
    "axes.titlesize": 9,
    "figure.titlesize": 10,
    "xtick.labelsize": 8,
    "ytick.labelsize": 8,
    "legend.fontsize": 8,
    "legend.title_fontsize": 8,
}
MIN_FONT_PT = 8.0  # no text of a figure is smaller


def set_style() -> None:
    """Seaborn's ticks theme, the house font sizes and vector (SVG) inline output for notebooks."""
    sns.set_theme(context="paper", style="ticks", palette=HOUSE_COLOURS)
    plt.rcParams.update(
        {
            **FONT_SIZES,
            "figure.dpi": 100,
            "savefig.bbox": "tight",
            "axes.spines.top": False,
            "axes.spines.right": False,
            "legend.frameon": False,
            "lines.linewidth": 1.4,
            "svg.fonttype": "none",
        }
    )
    # A report that still calls fig.tight_layout() on a constrained-layout figure gets the tight
    # layout it asked for; the note matplotlib prints about the switch is noise on a book page.
    warnings.filterwarnings("ignore", message="The figure layout has changed to tight")
    try:
        from matplotlib_inline.backend_inline import set_matplotlib_formats

        set_matplotlib_formats("svg")
    except ImportError:  # outside IPython
        pass


def figure(ncols: int = 1, nrows: int = 1, height: float = 3.2, width: float = FIG_WIDTH, **kwargs):
    """A figure of ``nrows x ncols`` axes, ``width`` inches wide (the text width) and ``height`` per row.

    Returns ``(fig, axes)`` with ``axes`` always a 2-D array. Constrained layout keeps titles,
    labels and outside legends inside the figure, so the page never has to shrink it.
    """
    if ncols < 1 or nrows < 1:
        raise ValueError(f"figure: ncols={ncols} and nrows={nrows} must both be at least 1")
    kwargs.setdefault("layout", "constrained")
    return plt.subplots(nrows, ncols, figsize=(width, height * nrows), squeeze=False, **kwargs)


# ---- colours ---------------------------------------------------------------


def categorical(categories: Sequence[Hashable]) -> dict:
    """One distinct colour per category (in order), from a colour-blind qualitative palette.

    Categories are things without an order of magnitude a colour ramp could show (rules,
    datasets, and batch sizes too: 32 and 1024 are two settings, not the ends of a scale).
    More than :data:`MAX_COLOURS` on one axis cannot be told apart: that is a ValueError
    pointing to :func:`small_multiples`.
    """
    categories = list(dict.fromkeys(categories))  # unique, order kept
    if len(categories) > MAX_COLOURS:
        raise ValueError(
            f"categorical: {len(categories)} categories on one axis, at most MAX_COLOURS={MAX_COLOURS} colours "
            "can be told apart; split them into panels with plots.small_multiples(categories)"
        )
    return dict(zip(categories, HOUSE_COLOURS))


def small_multiples(categories: Sequence[Hashable], per_panel: int = MAX_COLOURS) -> list[list]:
    """``categories`` split into consecutive groups of at most ``per_panel``, balanced (7 -> 4 + 3).

    One group per panel, so no panel needs more than :data:`MAX_COLOURS` colours.
    """
    if not 1 <= per_panel <= MAX_COLOURS:
        raise ValueError(f"small_multiples: per_panel={per_panel} must be between 1 and MAX_COLOURS={MAX_COLOURS}")
    categories = list(dict.fromkeys(categories))
    if not categories:
        return []
    panels = -(-len(categories) // per_panel)  # ceil
    size = -(-len(categories) // panels)
    return [categories[i:i + size] for i in range(0, len(categories), size)]


# ---- legends ---------------------------------------------------------------


def _occupied(ax: Axes, samples: int = 400) -> np.ndarray:
    """Points (axes fraction, shape (n, 2)) covering what ``ax`` draws: lines densified along their
    path, scatter offsets, band and polygon outlines, and bars filled with a grid of points."""
    to_axes = ax.transAxes.inverted()
    pts: list[np.ndarray] = []

    def add(xy_display: np.ndarray) -> None:
        xy = to_axes.transform(xy_display)
        pts.append(xy[np.isfinite(xy).all(axis=1)])

    def densify(xy: np.ndarray) -> np.ndarray:  # (n, 2) display coords -> points along the polyline
        xy = xy[np.isfinite(xy).all(axis=1)]
        if len(xy) < 2:
            return xy
        t = np.linspace(0, 1, samples)[:, None]
        seg = [a + t * (b - a) for a, b in zip(xy[:-1], xy[1:])]
        return np.concatenate(seg)

    for line in ax.get_lines():
        if not line.get_visible():
            continue
        xy = line.get_transform().transform(np.column_stack(line.get_data()).astype(float))
        add(densify(xy) if line.get_linestyle() not in ("None", "", " ") else xy)
    for coll in ax.collections:
        if not isinstance(coll, Collection) or not coll.get_visible():
            continue
        offsets = coll.get_offsets()
        if len(offsets) and len(coll.get_paths()) <= 1:  # a scatter: one marker path, many offsets
            add(coll.get_offset_transform().transform(np.asarray(offsets, dtype=float)))
        for path in coll.get_paths():  # bands (fill_between), polygons, error bars
            add(densify(coll.get_transform().transform(path.vertices)))
    for patch in ax.patches:
        if isinstance(patch, Rectangle) and patch.get_visible():
            corners = patch.get_transform().transform(patch.get_bbox().get_points())  # [[x0, y0], [x1, y1]]
            gx, gy = np.meshgrid(np.linspace(corners[0, 0], corners[1, 0], 12),
                                 np.linspace(corners[0, 1], corners[1, 1], 12))
            add(np.column_stack([gx.ravel(), gy.ravel()]))
    for text in ax.texts:
        if text.get_visible() and text.get_text():
            box = text.get_window_extent(ax.figure.canvas.get_renderer())
            add(np.array([[box.x0, box.y0], [box.x1, box.y1], [box.x0, box.y1], [box.x1, box.y0]]))
    return np.concatenate(pts) if pts else np.zeros((0, 2))


def legend_outside(ax: Axes, where: str = "right", **kwargs) -> Legend:
    """The legend of ``ax`` outside its axes: ``"right"`` (a column beside it) or ``"below"`` (rows under it)."""
    if where == "right":
        kwargs.setdefault("loc", "upper left")
        kwargs.setdefault("bbox_to_anchor", (1.02, 1.0))
    elif where == "below":
        handles = kwargs.get("handles") or ax.get_legend_handles_labels()[0]
        kwargs.setdefault("loc", "upper center")
        kwargs.setdefault("bbox_to_anchor", (0.5, 0.0))
        # under the tick labels and the x label: an offset in points, so it holds whatever the axes' height
        kwargs.setdefault("bbox_transform", ax.transAxes + ScaledTranslation(0, -_below_axis_pt(ax) / 72,
                                                                            ax.figure.dpi_scale_trans))
        kwargs.setdefault("ncols", min(len(handles), 3) or 1)
    else:
        raise ValueError(f"legend_outside: where={where!r}; allowed: 'right', 'below'")
    kwargs.setdefault("borderaxespad", 0.0)
    return ax.legend(**kwargs)


def _below_axis_pt(ax: Axes) -> float:
    """Points from the bottom of ``ax`` to below its x tick labels and x label (from the rcParams sizes)."""
    rc = plt.rcParams
    size = FontProperties(size=rc["xtick.labelsize"]).get_size_in_points()
    height = rc["xtick.major.size"] + rc["xtick.major.pad"] + 1.3 * size
    if ax.get_xlabel():
        height += rc["axes.labelpad"] + 1.3 * FontProperties(size=rc["axes.labelsize"]).get_size_in_points()
    return height + 3.0


CORNERS = ("upper right", "upper left", "lower right", "lower left")


def legend(ax: Axes, outside: str = "right", **kwargs) -> Legend:
    """The legend of ``ax`` in a corner that covers no data, else outside (``outside``: "right" or "below").

    Each corner is tried in :data:`CORNERS` order: the legend is drawn there and kept when none of
    the axes' lines, bands, markers, bars or texts falls inside its box (with a small margin).
    """
    if outside not in ("right", "below"):
        raise ValueError(f"legend: outside={outside!r}; allowed: 'right', 'below'")
    fig = ax.figure
    fig.canvas.draw()  # lay the figure out, so that the boxes below are the final ones
    occupied = _occupied(ax)
    for corner in CORNERS:
        leg = ax.legend(loc=corner, **kwargs)
        box = leg.get_window_extent(fig.canvas.get_renderer()).transformed(ax.transAxes.inverted())
        pad = 0.02
        inside = ((occupied[:, 0] >= box.x0 - pad) & (occupied[:, 0] <= box.x1 + pad)
                  & (occupied[:, 1] >= box.y0 - pad) & (occupied[:, 1] <= box.y1 + pad))
        if not inside.any() and box.x0 >= -1e-6 and box.x1 <= 1 + 1e-6 and box.y0 >= -1e-6 and box.y1 <= 1 + 1e-6:
            return leg
        leg.remove()
    return legend_outside(ax, outside, **kwargs)


def figure_legend(fig, axes=None, where: str = "below", ncols: int | None = None, **kwargs) -> Legend | None:
    """One legend for a grid of panels, outside them all (``"below"`` or ``"right"``).

    Entries come from every axis in ``axes`` (default: all of the figure's), one per label.
    """
    axes = fig.axes if axes is None else list(np.ravel(axes))
    entries: dict[str, object] = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            entries.setdefault(label, handle)
    if not entries:
        return None
    if where == "below":
        loc = "outside lower center"
        ncols = ncols or min(len(entries), 4)
    elif where == "right":
        loc = "outside right upper"
        ncols = ncols or 1
    else:
        raise ValueError(f"figure_legend: where={where!r}; allowed: 'right', 'below'")
    if fig.get_layout_engine() is None:  # the 'outside' locations need constrained layout
        fig.set_layout_engine("constrained")
    return fig.legend(list(entries.values()), list(entries), loc=loc, ncols=ncols, **kwargs)


# ---- the paper beside ours ---------------------------------------------------


def paper_vs_ours(ax, labels: Sequence[str], paper: Sequence[float | None], ours: Sequence[float], ours_err=None,
                  ylabel: str = "", paper_err: Sequence[float | None] | None = None, ours_colour=None):
    """Grouped bars: the paper's reported value (grey, with its std when given) beside ours (with error bars)."""
    x = np.arange(len(labels))
    paper_values = np.array([np.nan if p is None else p for p in paper], dtype=float)
    perr = None if paper_err is None else np.array([np.nan if p is None else p for p in paper_err], dtype=float)
    ax.bar(x - 0.2, paper_values, width=0.4, yerr=perr, capsize=3, color=PAPER_COLOUR, label=PAPER_LABEL)
    ax.bar(x + 0.2, ours, width=0.4, yerr=ours_err, capsize=3,
           color=ours_colour or sns.color_palette(PALETTE)[0], label="ours")
    ax.set_xticks(x, labels)
    ax.set_ylabel(ylabel)
    legend(ax)
    return ax


def paper_line(ax: Axes, value: float, std: float | None = None, orientation: str = "horizontal",
               label: str = PAPER_LABEL, text: bool = True, in_legend: bool = True, **kwargs) -> Line2D:
    """The paper's reported ``value`` as a dashed reference line across ``ax`` (its ± ``std`` as a band).

    ``orientation``: "horizontal" (a y value, e.g. a final width beside our curve over epochs) or
    "vertical" (an x value). With ``text`` the line is also labelled at its end, so a reader sees
    which line is the paper's without a legend (``in_legend=False`` then keeps it out of the legend).
    Returns the line (its data hold ``value``).
    """
    if value is None or not np.isfinite(value):
        raise ValueError(f"paper_line: value={value!r} must be a finite number (the paper's reported value)")
    style = {"color": PAPER_COLOUR, "linestyle": "--", "linewidth": 1.0, "zorder": 1.5, **kwargs}
    entry = label if in_legend else "_nolegend_"
    if orientation == "horizontal":
        line = ax.axhline(value, label=entry, **style)
        if std:
            ax.axhspan(value - std, value + std, color=PAPER_COLOUR, alpha=0.12, linewidth=0, zorder=1)
        if text:
            ax.annotate(label, xy=(1.0, value), xycoords=("axes fraction", "data"), xytext=(-2, 2),
                        textcoords="offset points", ha="right", va="bottom", color=PAPER_COLOUR,
                        fontsize=FONT_SIZES["legend.fontsize"])
    elif orientation == "vertical":
        line = ax.axvline(value, label=entry, **style)
        if std:
            ax.axvspan(value - std, value + std, color=PAPER_COLOUR, alpha=0.12, linewidth=0, zorder=1)
        if text:
            ax.annotate(label, xy=(value, 1.0), xycoords=("data", "axes fraction"), xytext=(2, -2),
                        textcoords="offset points", ha="left", va="top", color=PAPER_COLOUR,
                        fontsize=FONT_SIZES["legend.fontsize"])
    else:
        raise ValueError(f"paper_line: orientation={orientation!r}; allowed: 'horizontal', 'vertical'")
    return line


def paper_point(ax: Axes, x: float, y: float, yerr: float | None = None, label: str = PAPER_LABEL,
                **kwargs) -> Line2D:
    """The paper's reported value as one marker at ``(x, y)`` (a grey diamond, its std as an error bar)."""
    if y is None or not np.isfinite(y):
        raise ValueError(f"paper_point: y={y!r} must be a finite number (the paper's reported value)")
    style = {"color": PAPER_COLOUR, "marker": "D", "markersize": 5, "linestyle": "none", "zorder": 3, **kwargs}
    if yerr:
        ax.errorbar([x], [y], yerr=[yerr], color=style["color"], capsize=3, linestyle="none", zorder=2.9)
    (line,) = ax.plot([x], [y], label=label, **style)
    return line


def paper_key(ax: Axes, label: str = PAPER_LABEL, marker: str = "D") -> Line2D:
    """A legend entry (no data) for paper markers drawn in their series' colours: a grey ``marker``."""
    (line,) = ax.plot([], [], color=PAPER_COLOUR, marker=marker, markersize=5, linestyle="none", label=label)
    return line


# ---- curves and axes ---------------------------------------------------------


def with_ci(ax, x, runs: np.ndarray, label: str | None, **kwargs):
    """Mean curve over runs (rows) with a band of one standard error."""
    runs = np.atleast_2d(np.asarray(runs, dtype=float))
    mean = np.nanmean(runs, axis=0)
    (line,) = ax.plot(x, mean, label=label, **kwargs)
    if runs.shape[0] > 1:
        sem = np.nanstd(runs, axis=0, ddof=1) / np.sqrt(runs.shape[0])
        ax.fill_between(x, mean - sem, mean + sem, color=line.get_color(), alpha=0.2, linewidth=0)
    return line


def clip_log_axis(axes: Axes | Sequence[Axes], axis: str = "y", pad: float = 1.25) -> tuple[float, float]:
    """Set ``axis`` to log scale with limits fitted to the positive data of the lines and scatter markers of ``axes``.

    Bands of one standard error can dip to zero or below, and matplotlib's autoscale then stretches
    a log axis over tens of decades; the limits here span the lines' smallest and largest positive
    finite values (over all of ``axes``, one Axes or several sharing the axis), widened by the factor
    ``pad``. Under two decades the ticks read as plain numbers (0.5, 2) rather than powers of ten.
    Returns the limits.
    """
    if axis not in ("x", "y"):
        raise ValueError(f"clip_log_axis: axis={axis!r}; allowed: 'x', 'y'")
    axes = [axes] if isinstance(axes, Axes) else list(np.ravel(axes))
    column = 0 if axis == "x" else 1
    values = [np.asarray(line.get_xdata() if axis == "x" else line.get_ydata(), dtype=float)
              for ax in axes for line in ax.get_lines() if line.get_visible()]
    values += [np.asarray(coll.get_offsets(), dtype=float).reshape(-1, 2)[:, column]  # scatter markers
               for ax in axes for coll in ax.collections
               if coll.get_visible() and len(coll.get_paths()) <= 1 and coll.get_offset_transform() == ax.transData]
    data = np.concatenate(values) if values else np.zeros(0)
    data = data[np.isfinite(data) & (data > 0)]
    if not data.size:
        raise ValueError(f"clip_log_axis: the axes' lines have no positive finite {axis} value to fit a log axis to")
    low, high = float(data.min()) / pad, float(data.max()) * pad
    plain = FuncFormatter(lambda v, _: f"{v:g}")
    for ax in axes:
        target = ax.yaxis if axis == "y" else ax.xaxis
        (ax.set_yscale if axis == "y" else ax.set_xscale)("log")
        (ax.set_ylim if axis == "y" else ax.set_xlim)(low, high)
        if high / low < 100:
            target.set_major_formatter(plain)
            target.set_minor_formatter(FuncFormatter(lambda v, _: f"{v:g}" if f"{v:.0e}"[0] in "25" else ""))
    return low, high
