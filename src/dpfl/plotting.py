"""Shared figure conventions: style, the mode/data/scale corner note, the stand-in watermark, and
deterministic PNG/PDF output (no timestamps, so the same data gives the same bytes)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.layout_engine import ConstrainedLayoutEngine  # noqa: E402

STANDIN_WATERMARK = "SYNTHETIC STAND-IN DATA"
PALETTE = plt.get_cmap("tab10").colors


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
        engine.set(rect=(0, band, 1, 1 - band))
    fig.text(0.005, 0.005, note, ha="left", va="bottom", fontsize=6, color="0.4")
    if meta.get("data_source") == "standin":
        fig.text(0.5, 0.5, STANDIN_WATERMARK, ha="center", va="center", rotation=25, fontsize=26,
                 color="red", alpha=0.25, weight="bold")


def save(fig, png_path, pdf_path) -> None:
    fig.savefig(png_path, metadata={"Software": None})
    fig.savefig(pdf_path, metadata={"CreationDate": None, "ModDate": None, "Producer": None, "Creator": None})
    plt.close(fig)


def identity_line(ax, x) -> None:
    """Grey ε = ε0 line: above it an amplification bound is vacuous."""
    ax.plot(x, x, color="0.6", lw=1.0, zorder=0, label="ε = ε0 (vacuous above)")
