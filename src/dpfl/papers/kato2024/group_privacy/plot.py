"""Plot of kato2024 Fig 2: ε vs group size k (log), one curve per conversion, the RDP curve's values labelled at
the plot's `annotate_k`. Reads only the figure table."""

import matplotlib.pyplot as plt

from dpfl.plotting import PALETTE


def fig2(df, spec, meta):
    plot = spec["plot"]
    fig, ax = plt.subplots(figsize=plot["figsize"], layout="constrained")
    for i, (curve, d) in enumerate(df.groupby("curve", sort=False)):
        ax.plot(d["x"], d["y"], "o-", ms=3, color=PALETTE[i], label=curve)
        if d["conversion"].iloc[0] == "rdp":
            ks = [k for k in plot["annotate_k"] if (d["x"] == k).any()]
            for k in ks:
                y = d.loc[d["x"] == k, "y"].iloc[0]
                ax.annotate(_fmt(y), (k, y), textcoords="offset points", fontsize=7, color=PALETTE[i],
                            **_label_place(k, ks))
    ax.set_yscale("log")
    lo, hi = df["y"].min(), df["y"].max()
    ax.set_ylim(lo / 3, hi * 5)  # room inside the frame for the labels above the highest and below the lowest point
    ax.set_xlabel("group size k")
    ax.set_ylabel("ε")
    ax.legend(loc="upper left")
    return fig


def _label_place(k, ks) -> dict:
    """Where a value label goes: below-right of the first point (nothing to its left inside the frame), centred
    above the last (clear of the frame and of the other curve), above-left of the others."""
    if k == min(ks):
        return {"xytext": (6, -4), "ha": "left", "va": "top"}
    if k == max(ks):
        return {"xytext": (0, 7), "ha": "center", "va": "bottom"}
    return {"xytext": (-4, 6), "ha": "right", "va": "bottom"}


def _fmt(eps: float) -> str:
    return f"{eps:,.0f}" if eps >= 100 else f"{eps:.2f}"
