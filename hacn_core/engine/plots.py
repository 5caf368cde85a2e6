"""House style for every figure of the book.

One look for every chapter, legible at the book's text width:

* ``set_style()`` once per notebook: seaborn's paper ticks theme (:data:`SEABORN_PAPER_TICKS`), fonts in points that stay
  readable at :data:`FIG_WIDTH` (ticks and legends at 8 pt, labels and titles at 9 pt),
  vector (SVG) inline output so the rendered book stays sharp.
* ``figure`` makes a grid of axes :data:`FIG_WIDTH` wide whatever the number of columns
  (a wider figure is shrunk by the page, and its fonts with it), laid out by matplotlib's
  constrained layout so that legends placed outside the axes fit inside the figure.
* Legends never cover data: ``legend`` puts one in an empty corner of the axes when there
  is one and outside on the right otherwise; ``legend_outside`` puts it to the right of
  or below the axes; ``figure_legend`` gives a grid of panels one legend below them all.
* Categories (rules, batch sizes, datasets) get distinct colours from one colour-blind
  palette (Okabe & Ito's), never a continuous colormap: ``categorical`` maps at most
  :data:`MAX_COLOURS` of them to colours and refuses more; ``small_multiples`` splits a
  longer list into panels. Any two house colours differ by at least
  :data:`MIN_COLOUR_DISTANCE` (CIELAB ΔE), also as a reader with red-green colour
  blindness sees them (``colour_distance``).
* Axes say what they hold: ``integer_ticks`` for counts (layers, exits, blocks);
  ``twin_axes`` only with the two zeros at one height; ``value_scale`` picks a log axis
  only for values spread over decades (points of accuracy stay linear).
* A legend shows every encoding used: ``encoding_legend`` gives one entry per colour and one
  per line style or marker; ``unexplained_styles`` lists the styles a legend leaves out.
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
from matplotlib import cycler  # matplotlib's own (cycler is not a dependency of this project)
from matplotlib.axes import Axes
from matplotlib.collections import Collection
from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties
from matplotlib.legend import Legend
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle
from matplotlib.colors import to_rgb
from matplotlib.ticker import FuncFormatter, MaxNLocator
from matplotlib.transforms import ScaledTranslation

PALETTE = "colorblind"
#: The house colours: Okabe & Ito's colour-blind-safe palette (blue, orange, bluish green, reddish purple,
#: sky blue, vermilion), without its yellow (too light on white) and black (too close to the paper's grey).
#: Ordered so that every prefix is as far apart as it can be: vermilion, the nearest to orange, comes only
#: sixth. Also matplotlib's C0..C5.
HOUSE_COLOURS: list[tuple[float, float, float]] = [
    to_rgb(c) for c in ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00")]
#: the least CIELAB distance (CIE76 ΔE) between two house colours, in normal vision and as simulated for
#: deuteranopia and protanopia (``colour_distance``); about 2.3 is the smallest difference one can see,
#: and thin lines need far more
MIN_COLOUR_DISTANCE = {"normal": 25.0, "deuteranopia": 15.0, "protanopia": 15.0}
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
#: What ``seaborn.set_theme(context="paper", style="ticks", palette=HOUSE_COLOURS)`` changes in matplotlib's
#: defaults, written out (font sizes: :data:`FONT_SIZES` replace the paper context's), but for ``image.cmap``:
#: seaborn's "rocket" exists only once seaborn is imported, and no house figure draws with the default
#: colormap (the connectivity heatmap names its own). Importing seaborn for its theme cost about a second
#: of every notebook kernel (it imports scipy.stats); tests/test_plots.py checks this against seaborn's.
SEABORN_PAPER_TICKS: dict[str, object] = {
    "axes.axisbelow": True, "axes.edgecolor": ".15", "axes.labelcolor": ".15", "axes.linewidth": 1.0,
    "axes.prop_cycle": cycler(color=HOUSE_COLOURS),
    "font.sans-serif": ["Arial", "DejaVu Sans", "Liberation Sans", "Bitstream Vera Sans", "sans-serif"],
    "grid.color": ".8", "lines.linewidth": 1.2, "lines.markersize": 4.8, "lines.solid_capstyle": "round",
    "patch.edgecolor": "w", "patch.force_edgecolor": True, "patch.linewidth": 0.8, "text.color": ".15",
    **{f"{axis}.{key}": value for axis in ("xtick", "ytick") for key, value in (
        ("color", ".15"), ("major.size", 4.8), ("major.width", 1.0), ("minor.size", 3.2), ("minor.width", 0.8))},
}


def set_style() -> None:
    """Seaborn's paper ticks theme, the house font sizes and vector (SVG) inline output for notebooks."""
    plt.rcParams.update(
        {
            **SEABORN_PAPER_TICKS,
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


def grey_ramp(values: Sequence[float]) -> dict:
    """Greys from black (the smallest value) to light grey (the largest), for an ordered setting drawn
    beside a categorical one: a figure whose one panel colours batch sizes and whose other panel shows
    starting rates must not give one colour two meanings. At most :data:`MAX_COLOURS` values."""
    values = sorted(dict.fromkeys(values))
    if not 1 <= len(values) <= MAX_COLOURS:
        raise ValueError(f"grey_ramp: {len(values)} values; allowed: 1 to MAX_COLOURS={MAX_COLOURS}")
    levels = np.linspace(0.0, 0.7, len(values)) if len(values) > 1 else [0.0]
    return {v: str(round(float(level), 3)) for v, level in zip(values, levels)}


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


#: Machado, Oliveira & Fernandes (2009) matrices for full deuteranopia and protanopia, on linear sRGB
_CVD = {
    "deuteranopia": np.array([[0.367322, 0.860646, -0.227968], [0.280085, 0.672501, 0.047413],
                              [-0.011820, 0.042940, 1.068881]]),
    "protanopia": np.array([[0.152286, 1.052583, -0.204868], [0.114503, 0.786281, 0.099216],
                            [-0.003882, -0.048116, 1.051998]]),
}


def _linear(rgb: np.ndarray) -> np.ndarray:
    """sRGB in [0, 1] to linear light (IEC 61966-2-1)."""
    return np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)


def _lab(colour, vision: str = "normal") -> np.ndarray:
    """CIELAB (D65) of a matplotlib colour, as seen in ``vision`` ("normal" or a key of ``_CVD``)."""
    linear = _linear(np.asarray(to_rgb(colour), dtype=float))
    if vision != "normal":
        linear = np.clip(_CVD[vision] @ linear, 0.0, 1.0)
    xyz = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]]) @ linear
    xyz = xyz / np.array([0.95047, 1.0, 1.08883])  # relative to the D65 white
    f = np.where(xyz > (6 / 29) ** 3, np.cbrt(xyz), xyz / (3 * (6 / 29) ** 2) + 4 / 29)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


def colour_distance(a, b, vision: str = "normal") -> float:
    """CIE76 ΔE between two matplotlib colours, in normal ``vision`` or simulated colour blindness
    ("deuteranopia", "protanopia")."""
    if vision not in ("normal", *_CVD):
        raise ValueError(f"colour_distance: vision={vision!r}; allowed: normal, {', '.join(_CVD)}")
    return float(np.linalg.norm(_lab(a, vision) - _lab(b, vision)))


def integer_ticks(ax: Axes, axis: str = "x") -> None:
    """Ticks at whole numbers only on ``axis`` of ``ax`` (layers, exits, blocks, epochs: no 2.5)."""
    if axis not in ("x", "y"):
        raise ValueError(f"integer_ticks: axis={axis!r}; allowed: 'x', 'y'")
    (ax.xaxis if axis == "x" else ax.yaxis).set_major_locator(MaxNLocator(integer=True))


def twin_axes(ax: Axes) -> Axes:
    """A second y axis on the right of ``ax``; call :func:`align_zeros` once both are drawn."""
    twin = ax.twinx()
    twin.spines["right"].set_visible(True)
    return twin


def align_zeros(ax: Axes, twin: Axes) -> None:
    """Limits of two y axes (``ax`` and its ``twin``) set so that y = 0 sits at one height on both.

    Each range is widened to include 0; then both get the larger of the two shares of the axis
    that lies below 0, so neither axis loses data.
    """
    limits = []
    for a in (ax, twin):
        low, high = a.get_ylim()
        limits.append((min(low, 0.0), max(high, 0.0)))
    below = max(-low / (high - low) if high > low else 0.0 for low, high in limits)  # share under the zero
    for a, (low, high) in zip((ax, twin), limits):
        if below >= 1.0:  # both wholly negative
            a.set_ylim(low, 0.0)
            continue
        span = max(high / (1 - below), -low / below if below > 0 else 0.0)
        a.set_ylim(-below * span, (1 - below) * span)


def value_scale(values: Sequence[float], decades: float = 2.0) -> str:
    """"log" when the positive ``values`` spread over more than ``decades`` powers of ten, else "linear".

    Values that differ by points (accuracies of 97.1 and 97.6%) must stay on a linear axis, where
    their difference shows; a log axis is for values of different orders of magnitude.
    """
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    if v.size == 0 or (v <= 0).any():
        return "linear"
    return "log" if np.log10(v.max() / v.min()) > decades else "linear"


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


def encoding_handles(colours: dict | None = None, styles: dict | None = None,
                     style_colour: str = "0.3") -> list[Line2D]:
    """Legend entries for a figure that encodes two things: one per colour and one per line style.

    ``colours`` maps a label to a colour (a solid line in it), ``styles`` a label to line keyword
    arguments such as ``{"linestyle": "--"}`` or ``{"marker": "D", "linestyle": "none"}``, drawn in
    ``style_colour`` (a neutral grey) unless they name their own ``color``.
    """
    handles = [Line2D([], [], color=c, label=str(label)) for label, c in (colours or {}).items()]
    handles += [Line2D([], [], **{"color": style_colour, **style}, label=str(label))
                for label, style in (styles or {}).items()]
    if not handles:
        raise ValueError("encoding_handles: give colours, styles or both")
    return handles


def encoding_legend(target: Axes | Figure, colours: dict | None = None, styles: dict | None = None, *,
                    where: str = "below", style_colour: str = "0.3", **kwargs) -> Legend:
    """One legend that shows every encoding of a figure: an entry per colour and one per line style
    (:func:`encoding_handles`). ``target``: an Axes (``where`` "below" or "right" of it, or "corner",
    :func:`legend`) or a Figure (below all its panels)."""
    handles = encoding_handles(colours, styles, style_colour)
    if isinstance(target, Figure):
        if target.get_layout_engine() is None:  # the 'outside' locations need constrained layout
            target.set_layout_engine("constrained")
        kwargs.setdefault("ncols", min(len(handles), 3))
        return target.legend(handles=handles, loc="outside lower center", **kwargs)
    if where == "corner":
        return legend(target, handles=handles, **kwargs)
    kwargs.setdefault("ncols", min(len(handles), 3) if where == "below" else 1)
    return legend_outside(target, where, handles=handles, **kwargs)


def _style(line: Line2D) -> tuple[str, str]:
    marker = line.get_marker()
    return (str(line.get_linestyle()), "" if marker in (None, "None", "none", "", " ") else str(marker))


def unexplained_styles(ax: Axes, legend: Legend | None = None) -> set[tuple[str, str]]:
    """The (line style, marker) pairs that ``ax``'s data lines use and ``legend`` (default: the axes',
    else the figure's) does not show. Empty when the legend explains every style the figure draws."""
    legend = legend or ax.get_legend() or (ax.figure.legends[0] if ax.figure.legends else None)
    used = {_style(line) for line in ax.get_lines() if line.get_visible() and len(line.get_xdata()) > 1}
    shown = {_style(h) for h in (legend.legend_handles if legend is not None else []) if isinstance(h, Line2D)}
    return used - shown


# ---- the paper beside ours ---------------------------------------------------


def paper_vs_ours(ax, labels: Sequence[str], paper: Sequence[float | None], ours: Sequence[float], ours_err=None,
                  ylabel: str = "", paper_err: Sequence[float | None] | None = None, ours_colour=None):
    """Grouped bars: the paper's reported value (grey, with its std when given) beside ours (with error bars)."""
    x = np.arange(len(labels))
    paper_values = np.array([np.nan if p is None else p for p in paper], dtype=float)
    perr = None if paper_err is None else np.array([np.nan if p is None else p for p in paper_err], dtype=float)
    ax.bar(x - 0.2, paper_values, width=0.4, yerr=perr, capsize=3, color=PAPER_COLOUR, label=PAPER_LABEL)
    ax.bar(x + 0.2, ours, width=0.4, yerr=ours_err, capsize=3,
           color=ours_colour or HOUSE_COLOURS[0], label="ours")
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
    with warnings.catch_warnings():  # a point with no value (or one run's alone) has no mean (or spread): a gap
        warnings.simplefilter("ignore", RuntimeWarning)
        mean = np.nanmean(runs, axis=0)
        sem = np.nanstd(runs, axis=0, ddof=1) / np.sqrt(runs.shape[0]) if runs.shape[0] > 1 else None
    (line,) = ax.plot(x, mean, label=label, **kwargs)
    if sem is not None:
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
