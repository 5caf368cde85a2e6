"""The house figure style: legends off the data, categorical colours, readable fonts, the paper's value drawn."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.colors import to_rgb  # noqa: E402

from hacn_core.engine import plots  # noqa: E402


@pytest.fixture(autouse=True)
def _style():
    with plt.rc_context():
        plots.set_style()
        yield
    plt.close("all")


def _legend_box(fig, ax, leg):
    fig.canvas.draw()
    return leg.get_window_extent(fig.canvas.get_renderer()), ax.get_window_extent(fig.canvas.get_renderer())


def test_fonts_are_at_least_8pt_at_the_book_width():
    from matplotlib.font_manager import FontProperties

    fig, axes = plots.figure(ncols=3)
    assert fig.get_size_inches()[0] == pytest.approx(plots.FIG_WIDTH)  # three panels, still the text width
    for key in ("font.size", "axes.labelsize", "axes.titlesize", "xtick.labelsize", "ytick.labelsize",
                "legend.fontsize", "legend.title_fontsize"):
        size = FontProperties(size=plt.rcParams[key]).get_size_in_points()
        assert size >= plots.MIN_FONT_PT, key
    ax = axes[0, 0]
    ax.plot([0, 1], [0, 1], label="a")
    leg = plots.legend(ax)
    ticks = ax.get_xticklabels()
    assert all(t.get_fontsize() >= 8 for t in ticks) and all(t.get_fontsize() >= 8 for t in leg.get_texts())


def test_legend_outside_right_and_below_leave_the_data_area():
    for where in ("right", "below"):
        fig, axes = plots.figure()
        ax = axes[0, 0]
        ax.set_xlabel("epoch")
        for i in range(4):
            ax.plot(np.arange(10), i * np.arange(10), label=f"curve {i}")
        leg = plots.legend_outside(ax, where)
        box, data = _legend_box(fig, ax, leg)
        if where == "right":
            assert box.x0 >= data.x1  # wholly right of the axes
        else:
            assert box.y1 <= data.y0  # wholly below the axes
            ticks = max(t.get_window_extent().y0 for t in ax.get_xticklabels() if t.get_text())
            assert box.y1 <= ticks  # and below the tick labels
        assert box.x1 <= fig.bbox.x1 + 1 and box.y0 >= fig.bbox.y0 - 1  # and inside the figure
    with pytest.raises(ValueError, match="where='left'"):
        plots.legend_outside(ax, "left")


def test_legend_takes_the_empty_corner():
    fig, axes = plots.figure()
    ax = axes[0, 0]
    x = np.linspace(0, 1, 50)
    ax.plot(x, x, label="rising")  # the diagonal leaves the upper-left and lower-right corners free
    ax.plot(x, x * 0.9, label="rising too")
    ax.set(xlim=(0, 1), ylim=(0, 1))
    leg = plots.legend(ax)
    assert leg._loc in (2, 4)  # 'upper left' or 'lower right', not over the diagonal
    box, data = _legend_box(fig, ax, leg)
    assert data.x0 <= box.x0 and box.x1 <= data.x1 and data.y0 <= box.y0 and box.y1 <= data.y1
    corners = ax.transAxes.inverted().transform(box.get_points())
    inside = (x >= corners[0, 0]) & (x <= corners[1, 0]) & (x >= corners[0, 1]) & (x <= corners[1, 1])
    assert not inside.any()  # no point of the diagonal under the legend


def test_legend_goes_outside_when_every_corner_has_data():
    fig, axes = plots.figure()
    ax = axes[0, 0]
    rng = np.random.default_rng(0)
    ax.scatter(rng.random(3000), rng.random(3000), s=2, label="everywhere")
    ax.set(xlim=(0, 1), ylim=(0, 1))
    leg = plots.legend(ax)
    box, data = _legend_box(fig, ax, leg)
    assert box.x0 >= data.x1  # no empty corner: outside on the right


def test_categorical_palette_sizes_and_the_six_colour_limit():
    for n in range(1, plots.MAX_COLOURS + 1):
        colours = plots.categorical(range(n))
        assert len(colours) == n and len({to_rgb(c) for c in colours.values()}) == n  # distinct
    batch = plots.categorical([32, 128, 256, 512, 1024])
    assert list(batch) == [32, 128, 256, 512, 1024]
    assert to_rgb(plots.PAPER_COLOUR) not in {to_rgb(c) for c in batch.values()}
    with pytest.raises(ValueError, match="7 categories.*small_multiples"):
        plots.categorical(range(7))
    assert plots.small_multiples(range(7)) == [[0, 1, 2, 3], [4, 5, 6]]
    assert plots.small_multiples(range(12)) == [list(range(6)), list(range(6, 12))]
    assert all(len(g) <= plots.MAX_COLOURS for g in plots.small_multiples(range(27)))
    with pytest.raises(ValueError, match="per_panel=7"):
        plots.small_multiples(range(3), per_panel=7)


def test_paper_line_and_point_draw_the_given_value():
    fig, axes = plots.figure()
    ax = axes[0, 0]
    ax.plot(np.arange(100), np.linspace(900, 310, 100), label="ours")
    line = plots.paper_line(ax, 300.0, std=20.0)
    assert np.allclose(line.get_ydata(), [300.0, 300.0]) and line.get_label() == "paper"
    assert line.get_linestyle() == "--" and to_rgb(line.get_color()) == to_rgb(plots.PAPER_COLOUR)
    assert [t.get_text() for t in ax.texts] == ["paper"]
    vline = plots.paper_line(ax, 42.0, orientation="vertical", text=False)
    assert np.allclose(vline.get_xdata(), [42.0, 42.0])
    point = plots.paper_point(ax, 5.0, 227.4, yerr=32.4)
    assert point.get_xydata().tolist() == [[5.0, 227.4]] and point.get_label() == "paper"
    with pytest.raises(ValueError, match="finite"):
        plots.paper_line(ax, float("nan"))
    with pytest.raises(ValueError, match="orientation='diagonal'"):
        plots.paper_line(ax, 1.0, orientation="diagonal")


def test_paper_vs_ours_bars_hold_both_values_and_the_legend_is_off_them():
    fig, axes = plots.figure()
    ax = axes[0, 0]
    plots.paper_vs_ours(ax, ["a", "b"], [1.0, None], [1.2, 0.8], ours_err=[0.1, 0.1], paper_err=[0.2, None])
    heights = [p.get_height() for p in ax.patches]
    assert heights[0] == 1.0 and np.isnan(heights[1]) and heights[2:] == [1.2, 0.8]
    leg = ax.get_legend()
    assert [t.get_text() for t in leg.get_texts()] == ["paper", "ours"]
    box, _ = _legend_box(fig, ax, leg)
    for patch in ax.patches:
        if np.isfinite(patch.get_height()):
            assert not box.overlaps(patch.get_window_extent(fig.canvas.get_renderer()))


def test_clip_log_axis_ignores_a_band_that_reaches_zero():
    fig, axes = plots.figure()
    ax = axes[0, 0]
    runs = np.array([[1e-3, 1e-2, 1.0], [1e-30, 1e-2, 3.0]])  # a band dipping far below the means
    plots.with_ci(ax, np.arange(3), runs, "loss")
    low, high = plots.clip_log_axis(ax)
    mean = runs.mean(axis=0)
    assert ax.get_yscale() == "log" and ax.get_ylim() == pytest.approx((low, high))
    assert low == pytest.approx(mean.min() / 1.25) and high == pytest.approx(mean.max() * 1.25)
    ax2 = plots.figure()[1][0, 0]
    ax2.plot([0, 1], [0, -1])
    fig, axes = plots.figure(ncols=2, sharey=True)  # two panels sharing y: one range fitted to both
    axes[0, 0].plot([0, 1], [0.5, 2.0])
    axes[0, 1].plot([0, 1], [0.1, 1.0])
    assert plots.clip_log_axis(axes) == pytest.approx((0.1 / 1.25, 2.0 * 1.25))
    assert axes[0, 1].get_ylim() == pytest.approx((0.08, 2.5))
    axes[0, 1].scatter([0.5], [0.01])  # a scatter marker counts too
    assert plots.clip_log_axis(axes)[0] == pytest.approx(0.01 / 1.25)
    with pytest.raises(ValueError, match="no positive finite"):
        plots.clip_log_axis(ax2)


def test_key_results_figure_draws_the_ledger_counts():
    import pandas as pd

    from hacn_core.ledger import STATUSES
    from hacn_core.ledger_figures import GROUP_COLOURS, STATUS_GROUP, plot_status_counts

    counts = pd.DataFrame([{"paper": "H-ACN", **{s: i for i, s in enumerate(STATUSES)}},
                           {"paper": "AWNN", **{s: 2 * i + 1 for i, s in enumerate(STATUSES)}}])
    counts["items"] = counts[list(STATUSES)].sum(axis=1)
    fig = plot_status_counts(counts)
    for ax, (_, row) in zip(fig.axes, counts.iterrows()):
        # each status's bar is as long as its count; the statuses run top to bottom in the ledger's order
        bars = sorted(ax.patches, key=lambda p: -p.get_y())
        assert [p.get_width() for p in bars] == [row[s] for s in STATUSES]
        assert [to_rgb(p.get_facecolor()) for p in bars] == [to_rgb(GROUP_COLOURS[STATUS_GROUP[s]]) for s in STATUSES]
        assert ax.get_title().startswith(row["paper"])
    labels = [t.get_text() for t in sorted(fig.axes[0].get_yticklabels(), key=lambda t: -t.get_position()[1])]
    assert labels == list(STATUSES)
    assert len(set(GROUP_COLOURS.values())) <= plots.MAX_COLOURS
    with pytest.raises(ValueError, match="missing: differs"):
        plot_status_counts(counts.drop(columns="differs"))


@pytest.mark.parametrize("vision", ["normal", "deuteranopia", "protanopia"])
def test_house_colours_stay_apart_up_to_the_limit(vision):
    """Any two colours one axis may get are at least MIN_COLOUR_DISTANCE apart (CIELAB ΔE), for readers with
    normal vision and with simulated red-green colour blindness; and each stays clear of the paper's grey."""
    colours = list(plots.categorical([f"c{i}" for i in range(plots.MAX_COLOURS)]).values())
    assert len(colours) == plots.MAX_COLOURS
    pairs = [(a, b) for i, a in enumerate(colours) for b in colours[i + 1:]]
    closest = min(plots.colour_distance(a, b, vision) for a, b in pairs)
    assert closest >= plots.MIN_COLOUR_DISTANCE[vision], f"{vision}: two house colours only ΔE {closest:.1f} apart"
    assert min(plots.colour_distance(c, plots.PAPER_COLOUR, vision) for c in colours) >= 15.0


def test_colour_distance_is_cielab_delta_e():
    """Known values: black to white is ΔE 100 (L* 0 to 100); a colour to itself 0; red-green collapses under
    deuteranopia, the case the simulated check exists for."""
    assert plots.colour_distance("black", "white") == pytest.approx(100.0, abs=0.01)
    assert plots.colour_distance("#E69F00", "#E69F00") == 0.0
    assert plots.colour_distance("#00A000", "#C00000", "deuteranopia") < 0.5 * plots.colour_distance("#00A000", "#C00000")
    with pytest.raises(ValueError, match="allowed: normal"):
        plots.colour_distance("red", "blue", "tritan")


def test_integer_ticks_on_an_integer_axis():
    fig, axes = plots.figure()
    ax = axes[0, 0]
    ax.plot(np.arange(17), np.linspace(0, 1, 17))  # exits 0..16: matplotlib alone would tick 0, 2.5, 5, ...
    ax.set_xlim(-0.5, 16.5)
    plots.integer_ticks(ax, "x")
    fig.canvas.draw()
    ticks = [t for t in ax.get_xticks() if -0.5 <= t <= 16.5]
    assert ticks and all(float(t).is_integer() for t in ticks)


def test_twin_axes_share_the_height_of_zero():
    fig, axes = plots.figure()
    ax = axes[0, 0]
    ax.bar(np.arange(5), [3, 1, 0, 2, 4])
    twin = plots.twin_axes(ax)
    twin.plot(np.arange(5), [-0.01, 0.02, 0.0, 0.04, 0.03], ".")
    plots.align_zeros(ax, twin)

    def zero_height(a):
        low, high = a.get_ylim()
        return -low / (high - low)

    assert zero_height(ax) == pytest.approx(zero_height(twin))
    for a, data in ((ax, [0, 4]), (twin, [-0.01, 0.04])):  # no data cut off
        low, high = a.get_ylim()
        assert low <= min(data) and high >= max(data)


def test_value_scale_keeps_points_linear():
    assert plots.value_scale([1.6, 1.9, 2.2, 2.4]) == "linear"  # errors that differ by tenths of a point
    assert plots.value_scale([1.6, 2.2, 88.0]) == "linear"  # under two decades
    assert plots.value_scale([1e-4, 0.5, 3.0]) == "log"
    assert plots.value_scale([0.0, 1.0, 1000.0]) == "linear"  # a zero has no place on a log axis


def test_encoding_legend_shows_every_colour_and_style():
    """A figure that encodes the dataset by colour and the arm by line style: a legend of the colours
    alone leaves the styles unexplained; encoding_legend covers both."""
    fig, axes = plots.figure()
    ax = axes[0, 0]
    colours = plots.categorical(["DoubleMoon", "Spiral"])
    styles = {"Eq. 14": {"linestyle": "-"}, "renormalised": {"linestyle": "--"}}
    for name, colour in colours.items():
        for style in styles.values():
            ax.plot(np.arange(5), np.random.default_rng(0).random(5), color=colour, **style)
    plain = ax.legend([ax.get_lines()[0], ax.get_lines()[2]], list(colours))
    assert plots.unexplained_styles(ax, plain) == {("--", "")}
    plain.remove()
    leg = plots.encoding_legend(ax, colours, styles)
    assert plots.unexplained_styles(ax, leg) == set()
    assert [t.get_text() for t in leg.get_texts()] == [*colours, *styles]
    fig_leg = plots.encoding_legend(fig, colours, styles)
    assert fig_leg in fig.legends and len(fig_leg.legend_handles) == 4


def test_grey_ramp_orders_dark_to_light_and_keeps_off_the_palette():
    ramp = plots.grey_ramp([0.1, 0.005, 0.05, 0.01])
    levels = [float(ramp[v]) for v in (0.005, 0.01, 0.05, 0.1)]
    assert levels == sorted(levels) and levels[0] == 0.0
    assert all(plots.colour_distance(g, c) >= 20 for g in ramp.values() for c in plots.HOUSE_COLOURS)
    with pytest.raises(ValueError, match="MAX_COLOURS"):
        plots.grey_ramp(range(plots.MAX_COLOURS + 1))


def test_spread_is_drawn_whenever_there_is_more_than_one_run():
    fig, axes = plots.figure()
    ax = axes[0, 0]
    plots.with_ci(ax, np.arange(4), np.array([[1.0, 2, 3, 4]]), "one run")
    assert not ax.collections  # one run: no band to draw
    plots.with_ci(ax, np.arange(4), np.array([[1.0, 2, 3, 4], [1.5, 2.5, 2.5, 4.5]]), "two runs")
    assert len(ax.collections) == 1


def test_the_house_theme_is_seaborns_paper_ticks_theme_written_out():
    """set_style() sets what seaborn.set_theme(context="paper", style="ticks", palette=HOUSE_COLOURS) sets, then the
    house sizes, without importing seaborn (and scipy.stats with it): the same rcParams, but for the default
    colormap ("rocket" is seaborn's own; no house figure draws with the default) and float rounding."""
    import seaborn as sns

    def after(style):
        with plt.rc_context():
            plt.rcdefaults()
            style()
            return dict(plt.rcParams)

    def seaborns():
        sns.set_theme(context="paper", style="ticks", palette=plots.HOUSE_COLOURS)
        plots.set_style()  # the house part on top: seaborn's theme is already in place, so it sets nothing else

    ours, theirs = after(plots.set_style), after(seaborns)
    assert theirs["image.cmap"] == "rocket" and ours["image.cmap"] == plt.rcParamsDefault["image.cmap"]
    differ = {k for k in ours if k != "image.cmap" and ours[k] != theirs[k]
              and not (isinstance(ours[k], float) and ours[k] == pytest.approx(theirs[k]))}
    assert differ == set()
    assert set(plots.SEABORN_PAPER_TICKS) < {k for k in ours if ours[k] != plt.rcParamsDefault[k]}
