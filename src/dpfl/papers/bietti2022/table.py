"""bietti2022 figure tables. Fig 1 (spec §5): per panel (one σ) and personalization level a, the metric at every
evaluation round, best over the η grid at that round (η may switch between rounds, as in the paper), mean over
seeds first; ε per round on the same panel. Window rows give what the claims compare: `early` (mean over the first
10% of the rounds) and `final` (the last evaluation)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from dpfl.papers.bietti2022.layout import level, level_name

#: per metric: whether higher is better, and its label
METRICS = {"excess_risk": (False, "excess risk"), "accuracy": (True, "test accuracy")}


def best_over_eta(runs: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Per (level, round): the mean over seeds of each η, then the best η (min or max by the metric; NaN runs,
    diverged ones, never win). Columns: level, a, round, y, eta_best, n_seeds, diverged (η values whose mean is
    not finite at that round)."""
    higher, _ = METRICS[metric]
    mean = runs.groupby(["level", "a", "eta", "round"], sort=False).agg(y=(metric, "mean"), n_seeds=("seed", "nunique"))
    mean = mean.reset_index()
    out = []
    for (lv, a, t), g in mean.groupby(["level", "a", "round"], sort=False):
        finite = g[np.isfinite(g["y"])]
        if finite.empty:
            best = {"y": math.nan, "eta_best": math.nan}
        else:
            row = finite.loc[finite["y"].idxmax() if higher else finite["y"].idxmin()]
            best = {"y": float(row["y"]), "eta_best": float(row["eta"])}
        out.append({"level": lv, "a": a, "round": int(t), **best, "n_seeds": int(g["n_seeds"].max()),
                    "diverged": int((~np.isfinite(g["y"])).sum())})
    return pd.DataFrame(out)


def fig1(params: dict, tables: list[pd.DataFrame], log) -> pd.DataFrame:
    """Fig 1a–d: the figure's one grid, one panel per σ of `show.sigmas` (default: the grid's), one curve per level
    of `show.levels` (default: the grid's)."""
    if len(params["grids"]) != 1:
        raise ValueError(f"Fig 1 draws one grid; params.grids has {', '.join(params['grids'])}")
    grid = next(iter(params["grids"].values()))
    show = params.get("show") or {}
    runs = pd.concat(tables, ignore_index=True)
    metric = runs["metric"].iloc[0]
    local = runs[runs["a"] == 0]
    levels = [level(a) for a in show.get("levels", grid["levels"])]
    T = int(runs["round"].max())
    early_end = max(1, math.ceil(0.1 * T))
    rows = []
    for sigma in show.get("sigmas", grid["sigmas"]):
        sigma = float(sigma)
        panel = f"σ = {sigma:g}"
        d = pd.concat([local, runs[(runs["a"] > 0) & np.isclose(runs["sigma"].astype(float), sigma)]])
        best = best_over_eta(d, metric)
        for a in levels:
            name = level_name(a)
            b = best[best["level"] == name].sort_values("round")
            if b.empty:
                raise ValueError(f"fig1: no runs for a = {name} at σ = {sigma:g}")
            base = {"panel": panel, "sigma": sigma, "curve": f"αQ = {'∞' if math.isinf(a) else name}", "level": name, "a": a,
                    "quantity": metric}
            for _, r in b.iterrows():
                rows.append({**base, "window": "round", "x": r["round"], "y": r["y"], "eta_best": r["eta_best"],
                             "n_seeds": r["n_seeds"], "diverged_etas": r["diverged"]})
            early = b[(b["round"] >= 1) & (b["round"] <= early_end)]
            rows.append({**base, "window": "early", "x": float(early_end), "y": float(early["y"].mean())})
            last = b.iloc[-1]
            rows.append({**base, "window": "final", "x": float(last["round"]), "y": float(last["y"]),
                         "eta_best": last["eta_best"]})
            log(f"{panel}, a = {name}: final {metric} {last['y']:.4g} (η = {last['eta_best']:g})")
        if sigma > 0:  # ε is the same for every a > 0 (and 0 at a = 0): one curve per panel
            private = d[d["a"] > 0]
            e = private.groupby("round")["eps"].first().sort_index()
            for t, v in e.items():
                rows.append({"panel": panel, "sigma": sigma, "curve": "ε", "level": "", "a": math.nan,
                             "quantity": "eps", "window": "round", "x": float(t), "y": float(v)})
    df = pd.DataFrame(rows)
    # which half of the run a round lies in (claims about the late phase select half: second)
    df["half"] = np.where(df["window"] != "round", "", np.where(df["x"] > T / 2, "second", "first"))
    df["late"] = (df["window"] == "round") & (df["x"] >= 2 * T / 3)  # the paper's "after ≈200 of 300 iterations"
    df["metric"] = metric
    df["metric_label"] = METRICS[metric][1]
    df["rounds"] = T
    return df
