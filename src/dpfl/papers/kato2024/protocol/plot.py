"""Plots of kato2024 Figs 11 and 12: the private weighting protocol's phase times. They read only the figure table
(dpfl.papers.kato2024.protocol.table). Each implementation of the silos' weighting that ran is drawn in its own
colour: "fast" (this project's) and "reference" (the published code's phe arithmetic); the secure mode beside the
paper's protocol in the same colour, hatched (Fig 11's bars) or dashed (Fig 12's lines), so that the paper's series
look as they do without it."""

import matplotlib.pyplot as plt
import numpy as np

from dpfl.plotting import PALETTE, value_scale

COLOURS = {"fast": PALETTE[0], "reference": PALETTE[1]}
#: dataset id -> the name readers know it by (the paper's and the figure titles')
DATASET_NAMES = {"heart_disease": "HeartDisease", "tcga_brca": "TcgaBrca", "creditcard": "Creditcard",
                 "mnist": "MNIST"}
OTHER_PHASES = ("key exchange", "blinded histogram", "aggregation")
FIG12_PHASES = ("key exchange", "local training", "aggregation", "blinded histogram")


def _machine(fig, df):
    """Timings are hardware-specific: say on what they were measured."""
    first = df.iloc[0]
    fig.text(0.995, 0.002, f"wall-clock, {int(first['threads'])} thread, {first['cpu']}; Paillier "
             f"{int(first['key_bits'])}-bit; local optimizer {first['optimizer']}", ha="right", va="bottom",
             fontsize=6.5, color="0.35")


def _impls(df):
    return [i for i in ("fast", "reference") if (df["implementation"] == i).any()]


def _series(df) -> list[tuple[str, str]]:
    """The (implementation, security) pairs that ran, the paper's protocol first for each implementation."""
    return [(i, s) for i in _impls(df) for s in ("paper", "secure")
            if ((df["implementation"] == i) & (df["security"] == s)).any()]


def _rows(d, quantity: str, impl: str, security: str):
    return d[(d["quantity"] == quantity) & (d["implementation"] == impl) & (d["security"] == security)]


def _label(impl: str, security: str) -> str:
    return f"{impl} weighting" + ("" if security == "paper" else f", {security} mode")


def fig11(df, spec, meta):
    """One row per panel: left, each silo's local training in a run (all its rounds; bars, mean ± std over runs);
    right, the other phases in a run (log seconds)."""
    plot = spec.get("plot", {})
    panels = list(dict.fromkeys(df.loc[df["quantity"] == "phase_seconds", "panel"]))
    series = _series(df)
    size = plot.get("figsize") or [10.0, 2.3 * len(panels) + 0.6]
    fig, axes = plt.subplots(len(panels), 2, figsize=size, layout="constrained", squeeze=False,
                             gridspec_kw={"width_ratios": [3, 2]})
    width = 0.8 / len(series)
    for row, panel in zip(axes, panels):
        d = df[df["panel"] == panel]
        first = d.iloc[0]
        heights = []
        for k, (impl, security) in enumerate(series):
            look = ({"color": COLOURS[impl]} if security == "paper" else
                    {"color": "white", "edgecolor": COLOURS[impl], "hatch": "////", "linewidth": 0.8})
            offset = (k - (len(series) - 1) / 2) * width
            s = _rows(d, "silo_seconds", impl, security).sort_values("x")
            row[0].bar(s["x"] + offset, s["y"], width, yerr=s["y_std"], capsize=2, label=_label(impl, security),
                       **look)
            p = _rows(d, "phase_seconds", impl, security).set_index("phase")
            ys = [p.loc[ph, "y"] if ph in p.index else np.nan for ph in OTHER_PHASES]
            es = [p.loc[ph, "y_std"] if ph in p.index else np.nan for ph in OTHER_PHASES]
            row[1].bar(np.arange(3) + offset, ys, width, yerr=es, capsize=2, **look)
            heights += ys
        rounds = int(first["rounds"])
        title = (f"{DATASET_NAMES.get(first['dataset'], first['dataset'])}, U = {int(first['users'])}, "
                 f"S = {int(first['silos'])}, {int(first['params'])} params, {rounds} round{'s' * (rounds != 1)} "
                 f"per run")  # no internal ids (panel "heart10", dataset "heart_disease") in the titles
        row[0].set_title(f"{title}\nlocal training per silo", fontsize=8)
        row[0].set_xlabel("silo")
        row[0].set_xticks(sorted(d.loc[d["quantity"] == "silo_seconds", "x"].unique()))
        row[1].set_title("other phases (aggregation: all rounds)", fontsize=8)
        row[1].set_xticks(np.arange(3), [ph.replace(" ", "\n") for ph in OTHER_PHASES], fontsize=7)
        row[0].set_ylim(bottom=0)
        value_scale(row[1], heights)  # key exchange (ms) and the blinded histogram (s): orders of magnitude apart
        for ax in row:
            ax.set_ylabel("seconds per run")
            ax.grid(axis="x", visible=False)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    # centred at the right: at the upper right a four-entry legend reaches into the figure's title, at the lower
    # right into the machine note
    fig.legend(handles, labels, loc="outside right center", fontsize=7.5)
    _machine(fig, df)
    return fig


def fig12(df, spec, meta):
    """Two rows (vs #params at the default #users; vs #users at the default width), one column per phase; mean
    seconds with ±1 std, one line per implementation and security level (the secure mode dashed)."""
    plot = spec.get("plot", {})
    series = _series(df)
    d = df[df["quantity"] == "phase_seconds"]
    fig, axes = plt.subplots(2, len(FIG12_PHASES), figsize=plot.get("figsize") or [11.0, 5.0], layout="constrained")
    for r, (sweep, xlabel) in enumerate((("params", "#params"), ("users", "#users"))):
        for c, phase in enumerate(FIG12_PHASES):
            ax, top = axes[r, c], 0.0
            for impl, security in series:
                s = _rows(d[(d["sweep"] == sweep) & (d["phase"] == phase)], "phase_seconds", impl,
                          security).sort_values("x")
                ax.errorbar(s["x"], s["y"], yerr=s["y_std"], fmt="o-" if security == "paper" else "s--", ms=3,
                            capsize=2, color=COLOURS[impl], label=_label(impl, security))
                top = max(top, float((s["y"] + s["y_std"].fillna(0)).max()) if len(s) else 0.0)
            ax.set_xlabel(xlabel)
            ax.set_title(phase + (" (mean over silos)" if phase == "local training" else ""), fontsize=8)
            ax.set_ylim(0, top * 1.08 if top > 0 else 1.0)  # from 0, the highest point (and its error bar) inside
            if c == 0:
                ax.set_ylabel("seconds per run")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside right upper", fontsize=7.5)
    _machine(fig, df)
    return fig


def phase_markdown(df, spec) -> str:
    """The phase times behind the plot, both implementations side by side, per security level (the secure mode's
    rows with its cost against the paper's protocol), with the checks every run made: the largest relative
    difference between the decrypted and the plaintext aggregate, and the run's ε."""
    ph = df[df["quantity"] == "phase_seconds"]
    over = df[df["quantity"] == "secure_overhead"]
    first = df.iloc[0]
    lines = [f"Seconds per run (mean ± std over runs, and over silos for local training; 'per round' where the phase "
             f"runs every round), {int(first['threads'])} thread of {first['cpu']}, Paillier "
             f"{int(first['key_bits'])}-bit. Each run's ULDP-AVG-w has ε = {float(first['eps']):.4g} nominal, "
             f"{float(first['eps_certified']):.4g} certified (δ from the figure's params). Security: paper, the "
             f"paper's protocol; secure, the secure mode (its cost: secure / paper seconds, and the extra seconds per "
             f"round).", "",
             "| setting | phase | security | fast | reference | speed-up | per round (fast / reference) | "
             "full-size exponentiations per silo and run (fast / reference) | secure / paper (fast / reference) | "
             "decrypted vs plaintext |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    seen = ph.drop_duplicates(subset=["panel", "phase", "implementation", "security"])  # Fig 12: once per setting
    for setting, g in seen.groupby("panel", sort=False):
        users, params = int(g["users"].iloc[0]), int(g["params"].iloc[0])
        for phase in ("key exchange", "blinded histogram", "local training", "aggregation"):
            for security in ("paper", "secure"):
                r = {i: g[(g["phase"] == phase) & (g["implementation"] == i) & (g["security"] == security)]
                     for i in ("fast", "reference")}
                if not any(len(x) for x in r.values()):
                    continue
                cells = [("" if not len(x) else f"{x['y'].iloc[0]:.3f}" if int(x["measurements"].iloc[0]) < 2
                          else f"{x['y'].iloc[0]:.3f} ± {x['y_std'].iloc[0]:.3f}") for x in r.values()]
                sp = (f"{r['reference']['y'].iloc[0] / r['fast']['y'].iloc[0]:.1f}×"
                      if len(r["fast"]) and len(r["reference"]) else "")
                pr = " / ".join(f"{x['per_round'].iloc[0]:.3f}" for x in r.values()
                                if len(x) and x["per_round"].notna().iloc[0])
                err = max(float(x["decrypted_rel_err"].iloc[0]) for x in r.values() if len(x))
                work = (" / ".join(f"{x['full_exponentiations'].iloc[0]:.1f}" for x in r.values() if len(x))
                        if phase == "local training" and "full_exponentiations" in g else "")
                cost = ""
                if security == "secure" and len(over):
                    o = over[(over["panel"] == setting) & (over["phase"] == phase)].drop_duplicates("implementation")
                    cost = " / ".join(f"{row.y:.2f}×" + (f" ({row.per_round:+.3f} s per round)"
                                                          if np.isfinite(row.per_round) else "")
                                      for i in ("fast", "reference")
                                      for row in o[o["implementation"] == i].itertuples())
                lines.append(f"| {setting} (U = {users}, {params} params) | {phase} | {security} | {cells[0]} | "
                             f"{cells[1]} | {sp} | {pr} | {work} | {cost} | {err:.1e} |")
    return "\n".join(lines) + "\n"
