"""Plots of bietti2022 (spec §5): matplotlib's "ggplot" style, x "iterations", one panel per σ titled "privacy
noise σ = …", one curve per personalization level (legend "αQ = …"), each the best over η at every evaluation
point; ε on a green dashed right axis (the same for every a > 0; not drawn at σ = 0). They read only the table."""

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd


def fig1(df, spec, meta):
    plot = spec.get("plot", {})
    panels = list(dict.fromkeys(df["panel"]))
    rounds = df[df["window"] == "round"]
    metric = df["metric"].iloc[0]
    w, h = plot.get("figsize", [5.0, 3.0])
    with plt.style.context("ggplot"):
        fig, axes = plt.subplots(1, len(panels), figsize=(w * len(panels), h + 0.6), layout="constrained",
                                 squeeze=False)
        colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
        for ax, panel in zip(axes[0], panels):
            d = rounds[rounds["panel"] == panel]
            curves = [c for c in dict.fromkeys(d["curve"]) if c != "ε"]
            for i, curve in enumerate(curves):
                c = d[(d["curve"] == curve) & (d["quantity"] != "eps")].sort_values("x")
                ax.plot(c["x"], c["y"], color=colours[i % len(colours)], lw=1.3, label=curve)
            if plot.get("log_y", metric.startswith("excess_risk")):
                ax.set_yscale("log")
            ax.set_xlabel("iterations")
            ax.set_ylabel(df["metric_label"].iloc[0])
            ax.set_title(f"privacy noise σ = {d['sigma'].iloc[0]:g}", fontsize=9)
            e = d[d["quantity"] == "eps"].sort_values("x")
            e = e[np.isfinite(e["y"]) & (e["y"] > 0)]
            if not e.empty:
                right = ax.twinx()
                right.plot(e["x"], e["y"], color="green", ls="--", lw=1.2)
                right.set_ylabel("ε", color="green")
                right.tick_params(axis="y", colors="green")
                right.grid(False)
        handles, labels = axes[0, 0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="outside lower center", ncol=len(labels), fontsize=7.5)
    return fig


TITLES = {"stackoverflow": "Stackoverflow", "emnist_linear": "EMNIST linear", "emnist_cnn": "EMNIST CNN"}
#: the personalized levels drawn as light-green lines in Fig 2 (spec §5, as the authors' plot): not every level run
GREEN_LEVELS = (0.1, 1.0, 10.0, 100.0)


def drawn_envelope(black: pd.DataFrame, lo: float, hi: float) -> tuple[np.ndarray, np.ndarray]:
    """The part of the envelope drawn inside the x-range [lo, hi]: its kept points there, and, where the envelope
    goes on beyond hi, a level segment from the last point inside to hi (what a budget ε ≤ hi buys: the best
    accuracy within it). A line to a point beyond hi would cross the axes' edge at an accuracy interpolated between
    two runs, which no run reached: at quick scale the Stackoverflow envelope's only point above local only is
    σ = 0.1 at ε ≈ 12,000, so its black line entered the panel from outside and fell across the whole ε range."""
    pts = black.sort_values("x")
    x, y = pts["x"].to_numpy(float), pts["y"].to_numpy(float)
    inside = (x >= lo) & (x <= hi)
    xs, ys = x[inside], y[inside]
    if len(xs) and (x > hi).any() and xs[-1] < hi:
        xs, ys = np.append(xs, hi), np.append(ys, ys[-1])
    return xs, ys


def fig2(df, spec, meta):
    """Accuracy vs privacy at the end of training, one panel per grid: red local-only line, blue global-only points,
    light-green personalized levels a ∈ GREEN_LEVELS, black upper envelope (drawn_envelope: within the x-range);
    x = ε, log, inverted (large ε on the left)."""
    plot = spec.get("plot", {})
    points = df[df["window"] == "point"]
    panels = list(dict.fromkeys(points["panel"]))
    w, h = plot.get("figsize", [5.0, 3.0])
    lo, hi = plot.get("xlim", [0.1, 1000.0])
    with plt.style.context("ggplot"):
        fig, axes = plt.subplots(1, len(panels), figsize=(w * len(panels), h + 0.6), layout="constrained",
                                 squeeze=False)
        for ax, panel in zip(axes[0], panels):
            d = points[points["panel"] == panel]
            local = float(d.loc[d["curve"] == "local only", "y"].iloc[0])
            # above the envelope, which equals it wherever no personalized point beats local only
            ax.axhline(local, color="red", lw=1.5, label="local only", zorder=3)
            green = d[d["curve"].str.startswith("αQ") & d["a"].astype(float).isin(GREEN_LEVELS)]
            for curve, c in green.groupby("curve", sort=False):
                c = c.sort_values("x")
                ax.plot(c["x"], c["y"], color="green", alpha=0.2, lw=0.8, marker=".", ms=3)
            blue = d[d["curve"] == "global only"].sort_values("x")
            ax.plot(blue["x"], blue["y"], "o-", color="blue", ms=3.5, lw=1.0, label="global only")
            ax.plot(*drawn_envelope(d[d["curve"] == "best personalized"], lo, hi), color="black", lw=2.2,
                    label="best personalized")
            ax.set_xscale("log")
            ax.set_xlim(hi, lo)  # inverted: strong privacy on the right
            ax.set_xlabel("privacy ε")
            ax.set_ylabel("accuracy")
            ax.set_title(f"accuracy vs privacy ({TITLES.get(panel, panel)})", fontsize=9)
        from matplotlib.lines import Line2D

        handles, labels = axes[0, 0].get_legend_handles_labels()
        handles.append(Line2D([], [], color="green", alpha=0.4, lw=0.8, marker="."))
        labels.append("personalized, αQ ∈ {" + ", ".join(f"{a:g}" for a in GREEN_LEVELS) + "}")
        fig.legend(handles, labels, loc="outside lower center", ncol=len(labels), fontsize=7.5)
    return fig
