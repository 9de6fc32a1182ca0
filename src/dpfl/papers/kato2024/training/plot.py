"""Plot of kato2024's training figures (Figs 4-10): per panel, a quantity and ε over rounds. Reads only the figure
table."""

import matplotlib.pyplot as plt
import numpy as np

from dpfl.plotting import PALETTE, bottom_legend, value_scale

METRIC_LABELS = {"balanced_accuracy": "balanced accuracy", "accuracy": "accuracy", "c_index": "C-index"}


def curves(df, spec, meta):
    """Training figures (Figs 4-10): per panel, the left plot (utility, or test loss) vs round with a ±1 std band
    over seeds, and the right plot ε vs round; one colour per curve, in the table's order, every curve in the legend.
    A curve whose certified ε differs from the nominal one also shows the certified ε dashed (and the legend says
    so only then). ε, and the left plot where the plot asks for `log_left`, is on a log axis where its values span
    enough for one (dpfl.plotting.value_scale), else on a linear one."""
    plot = spec["plot"]
    left = plot.get("left", "utility")
    rounds = df[df["window"] == "round"]
    panels = list(dict.fromkeys(rounds["panel"]))  # summary rows (gaps) have panels of their own: not drawn
    ncol = int(plot.get("panels_per_row", 2))
    nrow = int(np.ceil(len(panels) / ncol))
    size = plot.get("figsize") or [5.2 * ncol, 2.6 * nrow + 0.6]
    fig, axes = plt.subplots(nrow, 2 * ncol, figsize=size, layout="constrained", squeeze=False)
    curves_order = list(dict.fromkeys(rounds["curve"]))
    colours = {c: PALETTE[i % len(PALETTE)] for i, c in enumerate(curves_order)}
    metric = df["metric"].iloc[0]
    column = df["loss"].iloc[0] if left == "loss" else "utility"
    ylabel = plot.get("ylabel") or ("test loss" + (" (sum of per-batch means)" if column == "test_loss_batch_sum"
                                                   else " (mean)") if left == "loss" else METRIC_LABELS[metric])
    certified_drawn = False
    for i, panel in enumerate(panels):
        ax_u, ax_e = axes[i // ncol, 2 * (i % ncol)], axes[i // ncol, 2 * (i % ncol) + 1]
        d = rounds[rounds["panel"] == panel]
        first = d.iloc[0]
        title = f"U = {first['users']}, S = {first['silos']}, {first['distribution']}"
        title = f"({panel}) {title}" if len(panels) > 1 else title
        left_values, eps_values = [], []
        for label in curves_order:
            c = d[(d["curve"] == label) & (d["quantity"] == column)].sort_values("x")
            if not c.empty:
                ax_u.plot(c["x"], c["y"], color=colours[label], lw=1.2, label=label)
                ax_u.fill_between(c["x"], c["y_lo"], c["y_hi"], color=colours[label], alpha=0.15, lw=0)
                left_values.append(c["y"].to_numpy(float))
            e = d[(d["curve"] == label) & (d["quantity"] == "eps")].sort_values("x").dropna(subset=["y"])
            if not e.empty:
                ax_e.plot(e["x"], e["y"], color=colours[label], lw=1.2)
                eps_values.append(e["y"].to_numpy(float))
                ec = d[(d["curve"] == label) & (d["quantity"] == "eps_certified")].sort_values("x")
                if not ec.empty and not np.allclose(ec["y"].to_numpy(), e["y"].to_numpy(), rtol=1e-9):
                    ax_e.plot(ec["x"], ec["y"], color=colours[label], lw=0.9, ls="--")
                    eps_values.append(ec["y"].to_numpy(float))
                    certified_drawn = True
        ax_u.set_title(title, fontsize=8)
        ax_u.set_xlabel("round")
        ax_u.set_ylabel(ylabel)
        if left_values:
            value_scale(ax_u, np.concatenate(left_values), log=plot.get("log_left", False))
        if eps_values:
            value_scale(ax_e, np.concatenate(eps_values))
        ax_e.set_xlabel("round")
        ax_e.set_ylabel("ε (δ = 1e-5)")
    for j in range(len(panels), nrow * ncol):
        axes[j // ncol, 2 * (j % ncol)].set_visible(False)
        axes[j // ncol, 2 * (j % ncol) + 1].set_visible(False)
    entries = {}  # every curve once, from whichever panel draws it, in the table's order
    for ax in axes[:, 0::2].ravel():
        handles, labels = ax.get_legend_handles_labels()
        for handle, label in zip(handles, labels):
            entries.setdefault(label, handle)
    labels = [c for c in curves_order if c in entries]
    handles = [entries[c] for c in labels]
    if certified_drawn:
        from matplotlib.lines import Line2D
        handles.append(Line2D([], [], color="0.3", ls="--", lw=0.9))
        labels.append("certified ε, where it differs from the nominal ε")
    bottom_legend(fig, handles, labels, max_cols=5, fontsize=7)
    return fig
