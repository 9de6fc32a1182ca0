"""bietti2022 figure tables. Fig 1 (spec §5): per panel (one σ) and personalization level a, the metric at every
evaluation round, best over the η grid at that round (η may switch between rounds, as in the paper), mean over
seeds first; ε per round on the same panel. Window rows give what the claims compare: `early_round` (the evaluated round
nearest T/10) and `final` (the last evaluation)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from dpfl.papers.bietti2022.layout import level, level_name

#: the rounds C-B1a-3 selects (column `late`): x ≥ LATE_SHARE·T, the spec's round 250 of the paper's T = 300
LATE_SHARE = 250 / 300

#: per metric: whether higher is better, and its label
METRICS = {"excess_risk": (False, "excess risk"), "accuracy": (True, "test accuracy"),
           "excess_risk_per_coordinate": (False, "excess risk ÷ d (authors' code)")}


def quantity(metric: str) -> str:
    """The quantity the claims select: the synthetic excess risk under either scale (compat B3) is `excess_risk`."""
    return "excess_risk" if metric.startswith("excess_risk") else metric


def end_rows(runs: pd.DataFrame) -> pd.DataFrame:
    """Each run's evaluation at its end of training (the cell's `end` flag: the last round, or compat B4's last
    multiple of eval_every), labelled with the latest such round so that runs ending at different rounds (B1, B5)
    compare as one point."""
    if "end" not in runs:
        return runs[runs["round"] == runs["round"].max()]
    end = runs[runs["end"].astype(bool)].copy()
    end["round"] = int(end["round"].max()) if len(end) else 0
    return end


def best_over_eta(runs: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Per (level, round): the mean over seeds of each η, then the best η (min or max by the metric; NaN runs,
    diverged ones, never win). Columns: level, a, round, y, eta_best, n_seeds, diverged (η values whose mean is
    not finite at that round), and eps (the best η's mean ε) where the runs have it."""
    higher, _ = METRICS[metric]
    agg = {"y": (metric, "mean"), "n_seeds": ("seed", "nunique")}
    if "eps" in runs:
        agg["eps"] = ("eps", "mean")
    mean = runs.groupby(["level", "a", "eta", "round"], sort=False).agg(**agg)
    mean = mean.reset_index()
    out = []
    for (lv, a, t), g in mean.groupby(["level", "a", "round"], sort=False):
        finite = g[np.isfinite(g["y"])]
        if finite.empty:
            best = {"y": math.nan, "eta_best": math.nan, "eps": float(g["eps"].max()) if "eps" in g else math.nan}
        else:
            row = finite.loc[finite["y"].idxmax() if higher else finite["y"].idxmin()]
            best = {"y": float(row["y"]), "eta_best": float(row["eta"]), "eps": float(row.get("eps", math.nan))}
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
    ran = [level(a) for a in grid["levels"]]  # `show` picks among the grid's runs (a reduced scale may have fewer)
    levels = [a for a in (level(a) for a in show.get("levels", grid["levels"])) if a in ran]
    sigmas = [float(s) for s in show.get("sigmas", grid["sigmas"]) if float(s) in [float(g) for g in grid["sigmas"]]]
    if not levels or not sigmas:
        raise ValueError(f"Fig 1: params.show picks no run of the grid (levels {grid['levels']}, σ {grid['sigmas']})")
    T = int(runs["round"].max())
    label = _level_label(params, grid)
    rows = []
    for sigma in sigmas:
        sigma = float(sigma)
        panel = f"σ = {sigma:g}"
        d = pd.concat([local, runs[(runs["a"] > 0) & np.isclose(runs["sigma"].astype(float), sigma)]])
        best = best_over_eta(d, metric)
        best_end = best_over_eta(end_rows(d), metric)
        for a in levels:
            name = level_name(a)
            b = best[best["level"] == name].sort_values("round")
            if b.empty:
                raise ValueError(f"fig1: no runs for a = {name} at σ = {sigma:g}")
            base = {"panel": panel, "sigma": sigma, "curve": label(a), "level": name, "a": a,
                    "quantity": quantity(metric)}
            for _, r in b.iterrows():
                rows.append({**base, "window": "round", "x": r["round"], "y": r["y"], "eta_best": r["eta_best"],
                             "n_seeds": r["n_seeds"], "diverged_etas": r["diverged"]})
            # the evaluated round nearest T/10 (one round, not a window mean: the shared start would dominate a mean)
            near = b[b["round"] >= 1]
            early = near.iloc[int(np.argmin(np.abs(near["round"].to_numpy(float) - 0.1 * T)))]
            rows.append({**base, "window": "early_round", "x": float(early["round"]), "y": float(early["y"])})
            last = best_end[best_end["level"] == name].iloc[0]
            rows.append({**base, "window": "final", "x": float(last["round"]), "y": float(last["y"]),
                         "eta_best": last["eta_best"]})
            log(f"{panel}, a = {name}: final {metric} {last['y']:.4g} (η = {last['eta_best']:g})")
        # the best of a group of levels at the end (claims such as "max(a = 0, a = 1) > max(a = 100, a = ∞)")
        for group, members in (params.get("best_of") or {}).items():
            finals = [r for r in rows if r["panel"] == panel and r.get("window") == "final"
                      and r["level"] in {level_name(level(a)) for a in members}]
            if not finals:
                continue
            pick = (max if METRICS[metric][0] else min)(finals, key=lambda r: r["y"])
            names = ", ".join(level_name(level(a)).replace("inf", "∞") for a in members)
            rows.append({"panel": panel, "sigma": sigma, "curve": f"best of αQ ∈ {{{names}}}", "level": group,
                         "a": math.nan, "quantity": quantity(metric), "window": "final", "x": pick["x"], "y": pick["y"],
                         "best_level": pick["level"]})
        if sigma > 0:  # ε is the same for every a > 0 (and 0 at a = 0): one curve per panel
            private = d[d["a"] > 0]
            e = private.groupby("round")["eps"].first().sort_index()
            for t, v in e.items():
                rows.append({"panel": panel, "sigma": sigma, "curve": "ε", "level": "", "a": math.nan,
                             "quantity": "eps", "window": "round", "x": float(t), "y": float(v)})
    df = pd.DataFrame(rows)
    # which half of the run a round lies in (claims about the late phase select half: second)
    df["half"] = np.where(df["window"] != "round", "", np.where(df["x"] > T / 2, "second", "first"))
    # C-B1a-3 (spec §6): below a = ∞ "at every evaluated round from some round ≤ 250" of T = 300, i.e. at every
    # round ≥ 250: the same share of the run at any T
    df["late"] = (df["window"] == "round") & (df["x"] >= LATE_SHARE * T)
    df["metric"] = metric
    df["metric_label"] = METRICS[metric][1]
    df["rounds"] = T
    return df


def _level_label(params: dict, grid: dict):
    """Legend label of a level: "αQ = a"; with the authors' CNN local step (compat B2, L·η_θ) the grid value a acts
    as αQ = a/Q, which the label states."""
    impl = params.get("implementation") or {}
    b2 = grid.get("model") == "cnn" and impl.get("cnn_local_step") == "times_users"

    def label(a: float) -> str:
        name = "∞" if math.isinf(a) else level_name(a)
        if b2 and 0 < a < math.inf:
            return f"αQ = {name} (effective {a / int(grid['users_per_round']):g})"
        return f"αQ = {name}"
    return label


# ---------------------------------------------------------------------------------------------- Fig 2

PERSONALIZED = "best personalized"


def envelope(points: list[tuple[float, float]], start: tuple[float, float], merge: float = 0.01) -> list[tuple]:
    """The black "best personalized" curve of Fig 2, as the authors' `pareto` (spec §5): the start point (ε_min,
    local-only accuracy) first, then the points sorted by ε. A point whose ε is below the last kept point's is
    skipped (so every point with ε < ε_min is: the curve starts at the start point, inside the x-range); one whose
    accuracy is at least the last kept one's is kept, replacing the last kept point if its ε is less than `merge`
    above it. Sorting the start point among the others (an earlier reading) kept a point with ε < ε_min first and
    dropped the start point whenever that point was more accurate than local only."""
    kept = [tuple(start)]
    for eps, acc in sorted(points):
        last_eps, last_acc = kept[-1]
        if eps < last_eps or acc < last_acc:
            continue
        if eps < last_eps + merge:
            kept.pop()
        kept.append((eps, acc))
    return kept


def fig2(params: dict, tables: list[pd.DataFrame], log) -> pd.DataFrame:
    """Fig 2: per panel (grid), every (a, σ > 0): the best final accuracy over η with the ε of that round; the
    local-only level (a = 0); the envelope; and the trade-off curves on a log-ε grid for the claims (each curve's
    best accuracy among its points with ε ≤ the grid value: what a privacy budget buys)."""
    runs = pd.concat(tables, ignore_index=True)
    eps_min, eps_max = float(params.get("eps_min", 0.1)), float(params.get("eps_max", 1000.0))
    rows = []
    for gid in params["grids"]:
        d = runs[runs["grid"] == gid]
        final = end_rows(d)
        T = int(final["round"].max())
        metric = final["metric"].iloc[0]
        local = best_over_eta(final[final["a"] == 0], metric)
        if local.empty:
            raise ValueError(f"fig2: grid {gid} has no a = 0 runs (the local-only line)")
        local_acc = float(local["y"].iloc[0])
        base = {"panel": gid, "quantity": metric}
        rows.append({**base, "curve": "local only", "level": "0", "a": 0.0, "window": "point", "x": eps_min,
                     "y": local_acc, "eta_best": float(local["eta_best"].iloc[0])})
        points = []
        private = final[(final["a"] > 0) & (final["sigma"] > 0)]
        for (lv, a, sigma), g in private.groupby(["level", "a", "sigma"], sort=True):
            best = best_over_eta(g, metric)
            eps = float(best["eps"].iloc[0])  # the ε of the winning η's runs (the same for all unless B1/B5)
            if not (np.isfinite(eps) and np.isfinite(best["y"].iloc[0])):
                continue
            name = "global only" if math.isinf(a) else _level_label(params, params["grids"][gid])(a)
            rows.append({**base, "curve": name, "level": lv, "a": a, "sigma": sigma, "window": "point", "x": eps,
                         "y": float(best["y"].iloc[0]), "eta_best": float(best["eta_best"].iloc[0])})
            points.append((eps, float(best["y"].iloc[0])))
        for eps, acc in envelope(points, (eps_min, local_acc)):
            rows.append({**base, "curve": PERSONALIZED, "level": "", "a": math.nan, "window": "point", "x": eps,
                         "y": acc})
        log(f"{gid}: local only {local_acc:.4f}; {len(points)} private points at round {T}")
    df = pd.DataFrame(rows)
    grid = np.geomspace(eps_min, eps_max, int(params.get("eps_grid_points", 41)))
    out = [df]
    for gid, d in df.groupby("panel", sort=False):
        quantity = d["quantity"].iloc[0]
        local_acc = float(d.loc[d["curve"] == "local only", "y"].iloc[0])
        blue, black = (d[d["curve"] == name] for name in ("global only", PERSONALIZED))
        curves = {"local only": np.full(len(grid), local_acc), "global only": _within(blue, grid),
                  PERSONALIZED: _within(black, grid)}
        curves["best of local and global"] = np.fmax(curves["local only"], curves["global only"])
        for name, vals in curves.items():
            out.append(pd.DataFrame({"panel": gid, "curve": name, "quantity": quantity, "window": "budget", "x": grid,
                                     "y": vals}))
        # the gain of personalization: area between the envelope and the better baseline over log ε
        gap = np.nan_to_num(curves[PERSONALIZED] - curves["best of local and global"])
        out.append(pd.DataFrame([{"panel": gid, "curve": "gain", "quantity": "gain_area", "window": "summary",
                                  "x": 0.0, "y": float(np.trapezoid(gap, np.log(grid)))}]))
        visible = blue[blue["x"] >= eps_min]  # the figure's x-range starts at eps_min (spec §5)
        if not visible.empty:  # at the smallest ε where a global-only point is drawn: the envelope and local only
            first = float(visible["x"].min())
            out.append(pd.DataFrame([{"panel": gid, "curve": name, "quantity": quantity,
                                      "window": "smallest_global_eps", "x": first, "y": float(value)}
                                     for name, value in (("local only", local_acc),
                                                         (PERSONALIZED, _within(black, np.array([first]))[0]))]))
    df = pd.concat(out, ignore_index=True)
    df["metric"] = df["quantity"].where(df["quantity"] != "gain_area", "accuracy")
    df["metric_label"] = METRICS["accuracy"][1]
    return df


def _within(points: pd.DataFrame, budgets: np.ndarray) -> np.ndarray:
    """For each budget ε: the best accuracy among the points with ε_point ≤ ε (NaN where there is none)."""
    x, y = points["x"].to_numpy(float), points["y"].to_numpy(float)
    return np.array([y[x <= e].max() if (x <= e).any() else np.nan for e in budgets])
