"""Plots of lowy2023 Figs 4-9: test metric vs nominal ε, one curve per method, one axis per panel. Reads only the
figure table: methods, labels and colours come from its rows (in the method registry's order), and a method is
drawn as private (solid line) when the table has a certified ε for it."""

import matplotlib.pyplot as plt
import numpy as np

from dpfl.plotting import PALETTE, bottom_legend


def _methods(df) -> dict:
    """method id -> (label, colour, private), in the order of the table."""
    out = {}
    for i, (alg, d) in enumerate(df.groupby("algorithm", sort=False)):
        out[alg] = (d["curve"].iloc[0], PALETTE[i % len(PALETTE)], bool(d["eps_certified"].notna().any()))
    return out


def fmt(v: float) -> str:
    """3 significant digits; powers of ten as 9.20e7 (no "+0"), from 1000 on (3 digits of 2060 were 2.06e+03);
    n/a for a missing value."""
    if v is None or not np.isfinite(v):
        return "n/a"
    if v != 0 and not 1e-2 <= abs(v) < 1e3:
        mantissa, exp = f"{v:.2e}".split("e")
        return f"{mantissa}e{int(exp)}"
    return f"{v:.3g}"


XLABEL = {"paper": "nominal ε (noise from the paper's formula)",
          "accountant": "nominal ε (noise calibrated by the exact accountant)"}


def _certified_note(label: str, worst: list[tuple[float, float]]) -> str:
    """`label` with the certified ε of the noise used where it is far from private at the nominal ε (more than twice
    it, exact accounting), from each panel's (certified ε, nominal ε) at the curve's worst point: one value where
    the panels agree, else their range (the diagnostics table has each panel's); "not private" where a panel
    certifies no finite ε."""
    if any(not np.isfinite(c) for c, _ in worst):
        return f"{label} (not private: certified ε = ∞)"
    far = [(c, x) for c, x in worst if c > 2 * x]
    if not far:
        return label
    values = sorted({fmt(c) for c, _ in far}, key=lambda v: float(v))
    at = {x for _, x in far}
    if len(at) > 1:  # not at one nominal ε in every panel: the largest, where it was
        c, x = max(far)
        return f"{label} (certified ε up to {fmt(c)} at ε = {x:g})"
    value = values[0] if len(values) == 1 else f"{values[0]}–{values[-1]}"
    return f"{label} (certified ε {value} at ε = {at.pop():g})"


def figure(df, spec, meta):
    """One axis per panel, titled by its panel letter where there are several ("(c) N = 5, M = 2, ..."; the claims'
    reasons name panels by these ids), and one legend for the figure below the axes, where it covers no curve."""
    panels = list(dict.fromkeys(df["panel"]))
    ncol = min(len(panels), 3)
    nrow = int(np.ceil(len(panels) / ncol))
    size = spec["plot"].get("figsize") or [4.6 * ncol, 3.6 * nrow]
    fig, axes = plt.subplots(nrow, ncol, figsize=size, layout="constrained", squeeze=False)
    trials = int(df["trials"].max())
    methods = _methods(df)
    calibration = meta.get("settings", {}).get("noise_calibration", "paper")
    unit = spec["plot"].get("upsilon_unit", "")
    handles, worst = {}, {alg: [] for alg in methods}  # one legend entry per method, from the panel that draws it
    for ax, panel in zip(axes.ravel(), panels):
        d = df[df["panel"] == panel]
        for alg, (label, color, private) in methods.items():
            c = d[d["algorithm"] == alg].sort_values("x")
            if c.empty:
                continue
            if not private:  # tuned once per trial: one line and one band across ε
                r = c.iloc[0]
                handles.setdefault(alg, ax.axhline(r["y"], color=color, ls="--", lw=1.2, label=label))
                if r["y_hi"] > r["y_lo"]:
                    ax.axhspan(r["y_lo"], r["y_hi"], color=color, alpha=0.12, lw=0)
                continue
            if c["eps_certified"].notna().any():
                w = c.loc[c["eps_certified"].idxmax()]
                worst[alg].append((float(w["eps_certified"]), float(w["x"])))
            yerr = [c["y"] - c["y_lo"], c["y_hi"] - c["y"]]
            handles.setdefault(alg, ax.errorbar(c["x"], c["y"], yerr=yerr if (c["y_hi"] > c["y_lo"]).any() else None,
                                                marker="o", ms=3, color=color, capsize=4, label=label, ls="-"))
        row = d.iloc[0]
        title = (f"N = {int(row['n_silos'])}, M = {int(row['silos_per_round'])}, K = {int(row['K'])}, "
                 f"υ*² = {fmt(row['upsilon2'])}{(' ' + unit) if unit and np.isfinite(row['upsilon2']) else ''}")
        ax.set_title(f"({panel}) {title}" if len(panels) > 1 else title, fontsize=8)
        ax.set_xlabel(XLABEL[calibration])
        ax.set_ylabel(f"{spec['plot'].get('ylabel', 'test metric')} ({trials} trials)")
    for ax in axes.ravel()[len(panels):]:
        ax.axis("off")
    # say on the figure when the noise used is far from private at the nominal ε (exact accounting)
    drawn = [alg for alg in methods if alg in handles]
    labels = [_certified_note(methods[alg][0], worst[alg]) for alg in drawn]
    bottom_legend(fig, [handles[alg] for alg in drawn], labels, max_cols=4 if len(panels) > 1 else 2, fontsize=7)
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
