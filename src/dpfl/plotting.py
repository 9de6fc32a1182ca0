"""Shared figure conventions: style, the mode/data/scale corner note, the stand-in watermark, when an axis is worth a
log scale, a figure legend below the axes that fits the figure's width, colours and markers to tell many curves apart
(`PALETTE`, `MARKERS`, `marker_every`), and deterministic PNG/PDF output (no timestamps, so the same data gives
the same bytes)."""

from __future__ import annotations

import math

import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.layout_engine import ConstrainedLayoutEngine  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402

STANDIN_WATERMARK = "SYNTHETIC STAND-IN DATA"
PALETTE = plt.get_cmap("tab10").colors
#: filled markers that stay distinct at 4 pt: with `PALETTE`'s colours, a curve is told apart by its marker too (in
#: grey scale, and where two colours are hard to tell apart)
MARKERS = ("o", "s", "^", "v", "D", "P", "X", "<", ">", "*")
#: the smallest max/min ratio of the values for which a log axis is worth it (`log_scale_fits`): one decade
LOG_MIN_RATIO = 10.0


def setup():
    plt.rcParams.update({
        "figure.dpi": 100,
        "savefig.dpi": 150,
        "font.size": 9,
        "axes.grid": True,
        "grid.alpha": 0.3,
        "legend.fontsize": 7.5,
        "legend.frameon": False,
        "svg.hashsalt": "dpfl",
    })


def annotate(fig, meta: dict) -> None:
    """Mode, data source and scale in the bottom-left corner (a run whose settings differ from the paper's says so:
    `reduced_scale`, decided by the table stage's meta), in a band kept free
    below the axes; a diagonal watermark when any input is a synthetic stand-in."""
    note = f"mode: {meta['mode']}  ·  data: {meta['data_source']}"
    if meta.get("scale"):
        reduced = meta["reduced_scale"]  # decided once, by the table stage (its meta)
        note += f"  ·  scale: {meta['scale']}" + (" (reduced: not the paper-scale run)" if reduced else "")
    engine = fig.get_layout_engine()
    if isinstance(engine, ConstrainedLayoutEngine):  # keep the note clear of the axis labels
        band = 10 / (fig.get_figheight() * 72)  # one line of 6-pt text, in figure height
        bottom = band + _lift_lower_legends(fig, band)
        engine.set(rect=(0, bottom, 1, 1 - bottom))
    fig.text(0.005, 0.005, note, ha="left", va="bottom", fontsize=6, color="0.4")
    if meta.get("data_source") == "standin":
        fig.text(0.5, 0.5, STANDIN_WATERMARK, ha="center", va="center", rotation=25, fontsize=26,
                 color="red", alpha=0.25, weight="bold")


def _lift_lower_legends(fig, band: float) -> float:
    """A figure legend placed "outside lower ..." sits on the figure's bottom edge, where the note goes, and the
    layout's `rect` does not move it: anchor it just above the note's band instead, and return the height it then
    takes (figure fraction), which the layout keeps free below the axes."""
    renderer = fig.canvas.get_renderer()
    taken = 0.0
    for legend in fig.legends:
        # matplotlib marks a legend placed with loc="outside lower ..." by `_outside_loc` (it has no public getter)
        if getattr(legend, "_outside_loc", None) != "lower" or legend.get_bbox_to_anchor() is not fig.bbox:
            continue
        legend.set_bbox_to_anchor((0, band, 1, 1 - band), transform=fig.transFigure)
        points = legend.borderaxespad * legend.prop.get_size_in_points() + 6  # + the layout's 2 × 3-pt pad
        pad = points / 72 / fig.get_figheight()
        taken = max(taken, legend.get_window_extent(renderer).height / fig.bbox.height + pad)
    return taken


def log_scale_fits(values, min_ratio: float = LOG_MIN_RATIO) -> bool:
    """Whether a log axis suits `values` (NaNs ignored): all positive and max/min ≥ `min_ratio`. Over a smaller span a
    log axis draws what a linear one would, but labels its ticks like 2.305 × 10⁰ (kato2024 Fig 5's test losses
    span 2%), so a figure asking for log gets linear there."""
    v = np.asarray(values, dtype=float).ravel()
    v = v[np.isfinite(v)]
    return bool(v.size) and bool((v > 0).all()) and float(v.max() / v.min()) >= min_ratio


def value_scale(ax, values, log: bool = True, axis: str = "y") -> bool:
    """Put `ax`'s `axis` on a log scale where `log` is asked and `log_scale_fits(values)`, else leave it linear;
    returns whether it is log. A log axis over fewer than two decades labels plain numbers at 1, 2 and 5 × 10^k:
    matplotlib's default writes every minor tick there like 6 × 10⁻¹, crowding the axis into its label."""
    if not (log and log_scale_fits(values)):
        return False
    side = ax.yaxis if axis == "y" else ax.xaxis
    (ax.set_yscale if axis == "y" else ax.set_xscale)("log")
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    if v.max() / v.min() < 100:
        side.set_major_formatter(FuncFormatter(lambda x, _: f"{x:g}"))
        side.set_minor_formatter(FuncFormatter(_two_and_five))
    return True


def _two_and_five(x: float, _pos=None) -> str:
    mantissa = x / 10 ** math.floor(math.log10(x))
    return f"{x:g}" if any(math.isclose(mantissa, m, rel_tol=1e-6) for m in (2, 5)) else ""


def bottom_legend(fig, handles, labels, max_cols: int = 5, **kwargs):
    """A figure legend below the axes with as many columns (at most `max_cols`) as fit the figure's width, so that no
    entry is cut off in a narrow figure (a one-panel figure with five curves)."""
    renderer = fig.canvas.get_renderer()
    for ncol in range(min(max_cols, len(labels)), 0, -1):
        legend = fig.legend(handles, labels, loc="outside lower center", ncol=ncol, **kwargs)
        if ncol == 1 or legend.get_window_extent(renderer).width <= 0.98 * fig.bbox.width:
            return legend
        legend.remove()


def marker_every(n_points: int, index: int, count: int, markers: int = 8):
    """`markevery` for curve `index` of `count` drawn over the same `n_points` x values: about `markers` markers
    per curve, each curve's first one shifted by a golden-ratio fraction of the spacing (curves 0, 1, 2, 3 at 0,
    0.62, 0.24, 0.85 of it: any two curves, and neighbours most, apart), so that curves lying on top of one another
    (methods with the same ε) still show each one's markers. A short curve (a reduced run's ten rounds) gets a marker
    every second point or more, for that shift; under six points, one on every point."""
    step = max(1, min(n_points // 3, max(2, n_points // markers)))
    return (int((index * 0.6180339887) % 1.0 * step) if count > 1 else 0, step)


def save(fig, png_path, pdf_path) -> None:
    fig.savefig(png_path, metadata={"Software": None})
    fig.savefig(pdf_path, metadata={"CreationDate": None, "ModDate": None, "Producer": None, "Creator": None})
    plt.close(fig)


def identity_line(ax, x) -> None:
    """Grey ε = ε0 line: above it an amplification bound is vacuous."""
    ax.plot(x, x, color="0.6", lw=1.0, zorder=0, label="ε = ε0 (vacuous above)")
