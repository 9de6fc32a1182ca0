"""Plots of balle2020 Fig 2, Table 1 (numeric companion) and Theorem 3.2."""

import matplotlib.pyplot as plt
import numpy as np

from dpfl.papers.balle2020 import TABLE1_ROWS
from dpfl.plotting import PALETTE, bottom_legend, identity_line


def fig2(df, spec, meta):
    """The same curves on a linear and a log y axis, side by side, and one legend for both below them."""
    fig, axes = plt.subplots(1, 2, figsize=spec["plot"].get("figsize", [9.0, 3.6]), layout="constrained")
    styles = {"thm5.1": "-", "efmrtt19": ":"}
    for ax, yscale in zip(axes, ["linear", "log"]):
        for i, n in enumerate(sorted(df["n"].unique())):
            for bound, d in df[df["n"] == n].groupby("bound", sort=False):
                ax.plot(d["x"], d["y"], styles[bound], color=PALETTE[i], label=d["curve"].iloc[0])
        x = np.sort(df["x"].unique())
        identity_line(ax, x)
        ax.set_yscale(yscale)
        ax.set_xlabel("ε0 (local)")
        ax.set_xticks([0.2, 0.4, 0.6, 0.8, 1.0])
        ax.set_ylabel(f"central ε, δ = {df['delta'].iloc[0]:g}")
        ax.set_title(f"{yscale} y", fontsize=8)
        if yscale == "linear":
            ax.set_ylim(0, max(1.5, 1.2 * float(x.max())))
    handles, labels = axes[0].get_legend_handles_labels()  # both panels draw the same curves
    bottom_legend(fig, handles, labels, max_cols=4)
    return fig


def table1(df, spec, meta):
    fig, ax = plt.subplots(figsize=spec["plot"].get("figsize", [6.5, 3.8]), layout="constrained")
    rates = df[df["series"] == "rate"]
    for i, (curve, d) in enumerate(rates.groupby("curve", sort=False)):
        ax.plot(d["x"], d["y"], color=PALETTE[i], label=curve)
    for i, (curve, d) in enumerate(df[df["series"] == "bound"].groupby("curve", sort=False)):
        ax.plot(d["x"], d["y"], "--", color=PALETTE[4 + i], label=curve)
    ax.set_yscale("log")
    ax.set_xlabel("ε0")
    ax.set_ylabel("central ε")
    ax.set_title(f"rates only, constants and polylog factors dropped (n = {int(df['n'].iloc[0])})", fontsize=8)
    ax.legend(fontsize=6.5)
    return fig


def table1_markdown(df, spec) -> str:
    """Table 1 as Markdown and LaTeX (the figure proper)."""
    lines = ["| source of amplification | central ε |", "|---|---|"]
    lines += [f"| {src} | {rate} |" for src, rate, _ in TABLE1_ROWS]
    latex = ["\\begin{tabular}{ll}", "\\toprule", "Source of amplification & Central $\\varepsilon$ \\\\", "\\midrule"]
    for src, rate, c in TABLE1_ROWS:
        tex = "$\\varepsilon_0$" if c is None else f"$O(e^{{{c:g}\\varepsilon_0}}/\\sqrt{{n}})$"
        latex.append(f"{src} & {tex} \\\\")
    latex += ["\\bottomrule", "\\end{tabular}"]
    return "\n".join(lines) + "\n\nLaTeX:\n\n```latex\n" + "\n".join(latex) + "\n```\n"


def thm3_2(df, spec, meta):
    p0 = spec["plot"]["p0"]
    fig, ax = plt.subplots(figsize=spec["plot"].get("figsize", [5.5, 3.8]), layout="constrained")
    d0 = df[np.isclose(df["p0"], p0)]
    for i, m in enumerate(sorted(d0["m"].unique())):
        for bound, style in [("thm3.2", "-"), ("thm3.2-simplified", ":")]:
            d = d0[(d0["m"] == m) & (d0["bound"] == bound)]
            ax.plot(d["x"], d["y"], style, color=PALETTE[i], label=d["curve"].iloc[0])
    identity_line(ax, np.sort(df["x"].unique()))
    ax.set_yscale("log")
    ax.set_xlabel("ε0 (local)")
    ax.set_ylabel(f"central ε, δ = {df['delta'].iloc[0]:g}")
    ax.legend(fontsize=6.5)
    return fig
