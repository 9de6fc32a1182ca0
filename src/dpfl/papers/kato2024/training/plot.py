"""Plot of kato2024's training figures (Figs 4-10): per panel, a quantity and ε over rounds. Reads only the figure
table."""

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.lines import Line2D

from dpfl.plotting import MARKERS, PALETTE, bottom_legend, marker_every, value_scale

METRIC_LABELS = {"balanced_accuracy": "balanced accuracy", "accuracy": "accuracy", "c_index": "C-index"}

#: method id -> (colour index into PALETTE, marker): one style per method in every training figure (Figs 4-10),
#: so that a method looks the same in each; ULDP-AVG and ULDP-AVG-w, the pair of Figs 8-10, get the most distinct
#: colours (blue, orange)
METHOD_STYLES = {
    "default": (7, "*"),
    "uldp_naive": (3, "X"),
    "uldp_group_max": (2, "^"),
    "uldp_group_median": (8, "v"),
    "uldp_group_2": (4, "D"),
    "uldp_group_8": (5, "P"),
    "uldp_sgd": (6, "<"),
    "uldp_avg": (0, "o"),
    "uldp_avg_w": (1, "s"),
}
#: ULDP-AVG-ws (Fig 10) at its sampling rates, smallest q first: colour index, marker, line style. Each q has its own
#: line style, and a smaller q is drawn above a larger one (the z-order `_styles` gives): a broken line on top lets a
#: curve it lies on show through its gaps (at paper scale, Fig 10(a)'s q = 0.1 and q = 0.3 lie on one another at 0.5)
Q_STYLES = ((2, "v", ":"), (4, "^", "-."), (3, "D", (0, (3, 1, 1, 1, 1, 1))), (9, "P", (0, (5, 1))))
EPS_LABEL = "ε (δ = 1e-5)"


def _styles(rounds, curves_order) -> dict:
    """curve -> plot keywords (colour, marker, line style, z-order): by the curve's method where the table names a
    known one, ULDP-AVG-ws by its q, any other curve the next unused colour and marker."""
    first = rounds.drop_duplicates("curve").set_index("curve")  # a curve's method and q
    sampled = sorted({float(first.at[c, "q"]) for c in curves_order
                      if "method" in first and first.at[c, "method"] == "uldp_avg_ws"})
    styles, spare = {}, 0
    for label in curves_order:
        method = first.at[label, "method"] if "method" in first else None
        if method == "uldp_avg_ws" and len(sampled) <= len(Q_STYLES):
            rank = sampled.index(float(first.at[label, "q"]))
            colour, marker, ls = Q_STYLES[rank]
            styles[label] = {"color": PALETTE[colour], "marker": marker, "ls": ls,
                             "zorder": 2.5 + 0.1 * (len(sampled) - rank)}
            continue
        if method in METHOD_STYLES:
            colour, marker = METHOD_STYLES[method]
        else:
            colour, marker = spare % len(PALETTE), MARKERS[spare % len(MARKERS)]
            spare += 1
        styles[label] = {"color": PALETTE[colour], "marker": marker, "ls": "-", "zorder": 2.0}
    return styles


def _series(d, label, quantity):
    s = d[(d["curve"] == label) & (d["quantity"] == quantity)].sort_values("x").dropna(subset=["y"])
    return s["x"].to_numpy(float), s["y"].to_numpy(float)


def _same(a, b) -> bool:
    return len(a[0]) == len(b[0]) and np.array_equal(a[0], b[0]) and np.allclose(a[1], b[1], rtol=1e-9)


def _shared_eps(rounds, panels, curves_order) -> bool:
    """Whether every curve's ε (nominal and certified) is the same in every panel that draws it (Figs 8 and 9: the
    user-level ε of ULDP-AVG depends on neither the users nor the silos): then the figure draws ε once."""
    if len(panels) < 2:
        return False
    for label in curves_order:
        for quantity in ("eps", "eps_certified"):
            drawn = [s for p in panels if len((s := _series(rounds[rounds["panel"] == p], label, quantity))[0])]
            if any(not _same(drawn[0], s) for s in drawn[1:]):
                return False
    return True


def _draw_eps(ax, d, curves_order, styles, *, merge: bool) -> tuple[list, bool]:
    """ε per round of every curve on `ax`, and the certified ε dashed where it differs; returns (the values drawn,
    whether a certified curve was drawn). `merge`: curves whose ε is identical are drawn once, in black, and named
    in a legend inside the axes (one shared ε panel)."""
    groups = []  # [(labels, nominal series, certified series)]: curves with the same ε, in the table's order
    for label in curves_order:
        e, ec = _series(d, label, "eps"), _series(d, label, "eps_certified")
        if not len(e[0]):
            continue
        # one line for several curves only where their certified ε is the same too
        same = next((g for g in groups if _same(g[1], e) and (not merge or _same(g[2], ec))), None)
        if same is None:
            groups.append(([label], e, ec))
        else:
            same[0].append(label)
    values, certified_drawn, named = [], False, False
    for labels, e, ec in groups:
        # one line per group where merging, else one per curve, markers shifted along it within the group
        for k, members in enumerate([labels] if merge else [[c] for c in labels]):
            style = dict(styles[members[0]])
            label = None
            if len(members) > 1:
                style.update(color="0.1", marker=None, ls="-")
                label = (" and ".join(members) if len(members) == 2 else ", ".join(members)) + ": the same ε"
                named = True
            ax.plot(*e, lw=1.2, ms=4, markevery=marker_every(len(e[0]), k, len(labels)), label=label, **style)
            values.append(e[1])
            cert = ec if merge else _series(d, members[0], "eps_certified")
            if len(cert[0]) and not _same(cert, e):
                ax.plot(*cert, color=style["color"], lw=0.9, ls="--", zorder=style["zorder"])
                values.append(cert[1])
                certified_drawn = True
    if named:
        ax.legend(loc="upper left", fontsize=7)  # ε grows with the rounds: the upper left is empty
    return values, certified_drawn


def curves(df, spec, meta):
    """Training figures (Figs 4-10): per panel, the left plot (utility, or test loss) vs round with a ±1 std band
    over seeds, and the right plot ε vs round; one colour and marker per method (`METHOD_STYLES`, the same in
    every figure), one line style per sampling rate (`Q_STYLES`), every curve in the legend. Where every curve's ε
    is the same in every panel (Figs 8, 9), ε is drawn once, in one panel beside the others, and curves with the
    same ε there are one black line named in that panel. A curve whose certified ε differs from the nominal one also
    shows the certified ε dashed (and the legend says so only then). ε, and the left plot where the plot asks for
    `log_left`, is on a log axis where its values span enough for one (dpfl.plotting.value_scale), else on a linear
    one."""
    plot = spec["plot"]
    left = plot.get("left", "utility")
    rounds = df[df["window"] == "round"]
    panels = list(dict.fromkeys(rounds["panel"]))  # summary rows (gaps) have panels of their own: not drawn
    curves_order = list(dict.fromkeys(rounds["curve"]))
    styles = _styles(rounds, curves_order)
    shared = _shared_eps(rounds, panels, curves_order)
    ncol = int(plot.get("panels_per_row", 2))
    nrow = int(np.ceil(len(panels) / ncol))
    if shared:  # the panels' left plots, and one ε plot beside them over every row
        size = plot.get("figsize") or [3.6 * (ncol + 1) + 0.4, 2.6 * nrow + 0.6]
        fig = plt.figure(figsize=size, layout="constrained")
        grid = fig.add_gridspec(nrow, ncol + 1)
        left_axes = [fig.add_subplot(grid[j // ncol, j % ncol]) for j in range(nrow * ncol)]
        shared_ax = fig.add_subplot(grid[:, ncol])
        eps_axes = [None] * len(left_axes)
    else:
        size = plot.get("figsize") or [5.2 * ncol, 2.6 * nrow + 0.6]
        fig, axes = plt.subplots(nrow, 2 * ncol, figsize=size, layout="constrained", squeeze=False)
        left_axes = list(axes[:, 0::2].ravel())
        eps_axes = list(axes[:, 1::2].ravel())
    metric = df["metric"].iloc[0]
    column = df["loss"].iloc[0] if left == "loss" else "utility"
    ylabel = plot.get("ylabel") or ("test loss" + (" (sum of per-batch means)" if column == "test_loss_batch_sum"
                                                   else " (mean)") if left == "loss" else METRIC_LABELS[metric])
    certified_drawn = False
    for i, panel in enumerate(panels):
        ax_u, ax_e = left_axes[i], eps_axes[i]
        d = rounds[rounds["panel"] == panel]
        first = d.iloc[0]
        title = f"U = {first['users']}, S = {first['silos']}, {first['distribution']}"
        title = f"({panel}) {title}" if len(panels) > 1 else title
        left_values = []
        drawn = [c for c in curves_order if len(_series(d, c, column)[0])]
        for index, label in enumerate(drawn):
            c = d[(d["curve"] == label) & (d["quantity"] == column)].sort_values("x")
            ax_u.plot(c["x"], c["y"], lw=1.2, ms=4, markevery=marker_every(len(c), index, len(drawn)), label=label,
                      **styles[label])
            ax_u.fill_between(c["x"], c["y_lo"], c["y_hi"], color=styles[label]["color"], alpha=0.15, lw=0)
            left_values.append(c["y"].to_numpy(float))
        ax_u.set_title(title, fontsize=8)
        ax_u.set_xlabel("round")
        ax_u.set_ylabel(ylabel)
        if left_values:
            value_scale(ax_u, np.concatenate(left_values), log=plot.get("log_left", False))
        if ax_e is not None:
            eps_values, certified = _draw_eps(ax_e, d, curves_order, styles, merge=False)
            certified_drawn |= certified
            if eps_values:
                value_scale(ax_e, np.concatenate(eps_values))
            ax_e.set_xlabel("round")
            ax_e.set_ylabel(EPS_LABEL)
    if shared:
        # every panel's ε is the same: drawn once, from the panel that draws the most curves
        d = max((rounds[rounds["panel"] == p] for p in panels), key=lambda x: x["curve"].nunique())
        eps_values, certified_drawn = _draw_eps(shared_ax, d, curves_order, styles, merge=True)
        if eps_values:
            value_scale(shared_ax, np.concatenate(eps_values))
        which = ", ".join(f"({p})" for p in panels) if len(panels) <= 3 else f"({panels[0]})–({panels[-1]})"
        shared_ax.set_title(f"ε, the same in panels {which}", fontsize=8)
        shared_ax.set_xlabel("round")
        shared_ax.set_ylabel(EPS_LABEL)
    for j in range(len(panels), nrow * ncol):
        for ax in (left_axes[j], eps_axes[j]):
            if ax is not None:
                ax.set_visible(False)
    entries = {}  # every curve once, from whichever panel draws it, in the table's order
    for ax in left_axes:
        handles, labels = ax.get_legend_handles_labels()
        for handle, label in zip(handles, labels):
            entries.setdefault(label, handle)
    labels = [c for c in curves_order if c in entries]
    handles = [entries[c] for c in labels]
    if certified_drawn:
        handles.append(Line2D([], [], color="0.3", ls="--", lw=0.9))
        labels.append("certified ε, where it differs from the nominal ε")
    bottom_legend(fig, handles, labels, max_cols=5, fontsize=7)
    return fig
