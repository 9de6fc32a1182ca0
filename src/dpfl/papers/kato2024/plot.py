"""Plot of kato2024 Fig 2."""

import matplotlib.pyplot as plt

from dpfl.plotting import PALETTE


def fig2(df, spec, meta):
    plot = spec["plot"]
    fig, ax = plt.subplots(figsize=plot["figsize"], layout="constrained")
    for i, (curve, d) in enumerate(df.groupby("curve", sort=False)):
        ax.plot(d["x"], d["y"], "o-", ms=3, color=PALETTE[i], label=curve)
        if d["conversion"].iloc[0] == "rdp":
            for k in plot["annotate_k"]:
                hit = d[d["x"] == k]
                if len(hit):
                    ax.annotate(_fmt(hit["y"].iloc[0]), (k, hit["y"].iloc[0]), textcoords="offset points",
                                xytext=(-4, 6), ha="right", fontsize=7, color=PALETTE[i])
    ax.set_yscale("log")
    ax.set_xlabel("group size k")
    ax.set_ylabel("ε")
    ax.legend()
    return fig


def _fmt(eps: float) -> str:
    return f"{eps:,.0f}" if eps >= 100 else f"{eps:.2f}"
