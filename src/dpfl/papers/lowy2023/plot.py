"""Plots of lowy2023 Figs 4-9: test metric vs nominal ε, one curve per method, one axis per panel. Reads only the
figure table: methods, labels and colours come from its rows (in the method registry's order), and a method is
drawn as private (solid line) when the table has a certified ε for it."""

import matplotlib.pyplot as plt
import numpy as np

from dpfl.plotting import PALETTE


def _methods(df) -> dict:
    """method id -> (label, colour, private), in the order of the table."""
    out = {}
    for i, (alg, d) in enumerate(df.groupby("algorithm", sort=False)):
        out[alg] = (d["curve"].iloc[0], PALETTE[i % len(PALETTE)], bool(d["eps_certified"].notna().any()))
    return out


def fmt(v: float) -> str:
    """3 significant digits; powers of ten as 9.20e7 (no "+0"); n/a for a missing value."""
    if v is None or not np.isfinite(v):
        return "n/a"
    if v != 0 and not 1e-2 <= abs(v) < 1e4:
        mantissa, exp = f"{v:.2e}".split("e")
        return f"{mantissa}e{int(exp)}"
    return f"{v:.3g}"


XLABEL = {"paper": "nominal ε (noise from the paper's formula)",
          "accountant": "nominal ε (noise calibrated by the exact accountant)"}


def figure(df, spec, meta):
    panels = list(dict.fromkeys(df["panel"]))
    ncol = min(len(panels), 3)
    nrow = int(np.ceil(len(panels) / ncol))
    size = spec["plot"].get("figsize") or [4.6 * ncol, 3.6 * nrow]
    fig, axes = plt.subplots(nrow, ncol, figsize=size, layout="constrained", squeeze=False)
    trials = int(df["trials"].max())
    methods = _methods(df)
    calibration = meta.get("settings", {}).get("noise_calibration", "paper")
    unit = spec["plot"].get("upsilon_unit", "")
    for ax, panel in zip(axes.ravel(), panels):
        d = df[df["panel"] == panel]
        for alg, (label, color, private) in methods.items():
            c = d[d["algorithm"] == alg].sort_values("x")
            if c.empty:
                continue
            if not private:  # tuned once per trial: one line and one band across ε
                r = c.iloc[0]
                ax.axhline(r["y"], color=color, ls="--", lw=1.2, label=label)
                if r["y_hi"] > r["y_lo"]:
                    ax.axhspan(r["y_lo"], r["y_hi"], color=color, alpha=0.12, lw=0)
                continue
            worst = c.loc[c["eps_certified"].idxmax()] if c["eps_certified"].notna().any() else None
            if worst is not None and not np.isfinite(worst["eps_certified"]):
                label = f"{label} (not private: certified ε = ∞)"  # e.g. silo messages without noise (Q9)
            elif worst is not None and worst["eps_certified"] > 2 * worst["x"]:
                # say on the figure when the noise used is far from private at the nominal ε (exact accounting)
                label = f"{label} (certified ε {fmt(worst['eps_certified'])} at ε = {worst['x']:g})"
            yerr = [c["y"] - c["y_lo"], c["y_hi"] - c["y"]]
            ax.errorbar(c["x"], c["y"], yerr=yerr if (c["y_hi"] > c["y_lo"]).any() else None, marker="o", ms=3,
                        color=color, capsize=4, label=label, ls="-")
        row = d.iloc[0]
        ax.set_title(f"N = {int(row['n_silos'])}, M = {int(row['silos_per_round'])}, K = {int(row['K'])}, "
                     f"υ*² = {fmt(row['upsilon2'])}{(' ' + unit) if unit and np.isfinite(row['upsilon2']) else ''}",
                     fontsize=8)
        ax.set_xlabel(XLABEL[calibration])
        ax.set_ylabel(f"{spec['plot'].get('ylabel', 'test metric')} ({trials} trials)")
    for ax in axes.ravel()[len(panels):]:
        ax.axis("off")
    axes.ravel()[0].legend(fontsize=6.5)
    return fig


def diagnostics_markdown(df, spec) -> str:
    """The privacy diagnostics of spec §4: for each ε, the paper-formula noise multiplier, the one an
    exact accountant calibrates to ε, and the ε the accountant certifies for the noise actually used."""
    lines = ["Privacy diagnostics (per ε; multipliers z = noise std / replace-one sensitivity 2L; smallest silo):", "",
             "| panel | algorithm | nominal ε | z (paper formula) | z (accountant, calibrated to ε) | "
             "certified ε of the paper-formula noise | certified ε of the noise used |",
             "|---|---|---|---|---|---|---|"]
    methods = _methods(df)
    noisy = df[df["algorithm"].map(lambda a: methods[a][2])].sort_values(["panel", "algorithm", "x"])
    for _, r in noisy.iterrows():
        lines.append(f"| {r['panel']} | {r['curve']} | {r['x']:g} | {r['z_paper']:.4g} | "
                     f"{r['z_accountant']:.4g} | {_eps(r['eps_certified_paper_noise'])} | {_eps(r['eps_certified'])} |")
    notes = sorted({str(t) for t in noisy.get("certification", []) if isinstance(t, str) and t})
    if notes:  # a variant for which the paper's accounting does not hold: say what was certified instead
        lines += ["", "Certified ε of this variant (the noise as added, the sensitivity as it is): " + "; ".join(notes)]
    return "\n".join(lines) + "\n"


def _eps(v: float) -> str:
    return "∞ (not private)" if v == np.inf else f"{v:.4g}"
