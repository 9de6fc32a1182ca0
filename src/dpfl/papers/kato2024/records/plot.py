"""Plot of kato2024 Fig 13: per panel, stacked bars of the training records of every user (x = user id, in id
order), one colour per silo. Reads only the figure table (rows `quantity: records`, and the S-K13 summary rows, shown
in a box in each panel's top right corner)."""

import matplotlib.pyplot as plt
import numpy as np

from dpfl.plotting import PALETTE

SUMMARY_TEXT = {"mean_largest_silo_share": "mean largest-silo share {:.3f}",
                "cv_of_totals": "CV of per-user totals {:.3f}"}


def bars(df, spec, meta):
    plot = spec.get("plot", {})
    panels = list(dict.fromkeys(df["panel"]))
    size = plot.get("figsize") or [10.0, 3.0 * len(panels) + 0.4]
    fig, axes = plt.subplots(len(panels), 1, figsize=size, layout="constrained", squeeze=False)
    handles = {}
    for ax, panel in zip(axes[:, 0], panels):
        d = df[df["panel"] == panel]
        rec = d[d["quantity"] == "records"]
        first = rec.iloc[0]
        users = np.sort(rec["x"].unique())
        silos = sorted(int(s) for s in rec["silo"].unique())
        bottom = np.zeros(len(users))
        for s in silos:
            seg = rec[rec["silo"] == s].set_index("x")["y"].reindex(users, fill_value=0.0).to_numpy(float)
            bar = ax.bar(users, seg, bottom=bottom, width=0.85, color=PALETTE[s % len(PALETTE)], lw=0,
                         label=f"silo {s}")
            handles.setdefault(f"silo {s}", bar)
            bottom += seg
        stats = [SUMMARY_TEXT[q].format(float(r["y"])) for q in SUMMARY_TEXT
                 for _, r in d[d["quantity"] == q].iterrows()]
        title = (f"({panel}) {first['distribution']}: U = {int(first['users'])}, S = {int(first['silos'])}, "
                 f"seed {int(first['seed'])}, {int(rec['y'].sum()):,} training records")
        ax.set_title(title, fontsize=8)
        if stats:  # in the panel's top right corner, above the bars (headroom below): not on the panel above's x-label
            ax.text(0.995, 0.97, "\n".join(stats), transform=ax.transAxes, ha="right", va="top", fontsize=7.5,
                    bbox={"boxstyle": "round,pad=0.3", "facecolor": "white", "edgecolor": "0.75", "alpha": 0.9})
        ax.set_xlim(users.min() - 0.7, users.max() + 0.7)
        # headroom for the box where the bars under it (the last third of the users) would reach it
        under = bottom[users >= users.min() + 2 / 3 * (users.max() - users.min())]
        top = max(bottom.max() * 1.05, under.max() * 1.3 if stats and under.size else 0.0)
        ax.set_ylim(0, top if top > 0 else 1)
        ax.set_xlabel("user id")
        ax.set_ylabel("#training records")
        ax.grid(axis="x", visible=False)
    fig.legend(list(handles.values()), list(handles), loc="outside right upper", fontsize=7.5)
    fig.get_layout_engine().set(h_pad=8 / 72)  # room between a panel's x-label and the next panel's title
    return fig
