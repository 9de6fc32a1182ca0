"""The check kinds of a claim (dpfl.claims): one function per kind, (table, check) -> (verdict, numbers), listed
in CHECKS: here the kinds on one selection's curve or on selections compared as wholes (order, monotone, bounds,
near, ratio, successive_ratio, slope, crossing, jointly); those that pair the points of a left and a right selection
(compare, eventually, mean_relative_gap) are in dpfl.claims.paired. The keys each kind reads are declared in
dpfl.claims.schema (CHECK_KEYS); the sentence built from its numbers is in dpfl.claims.reasons."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from dpfl.claims.paired import _check_compare, _check_eventually, _check_mean_relative_gap  # in CHECKS
from dpfl.claims.selection import (
    SEVERITY,
    ClaimSpecError,
    _group_key,
    _group_label,
    _groups,
    _label,
    _need_rows,
    _pointwise,
    _py,
    _reduce_groups,
    _tol_for,
    _verdict,
    count_verdict,
    groups_needed,
    select,
)


def _check_order(df, c):
    col, tol = c.get("column", "y"), c.get("tol", 0.0)
    base = select(df, c.get("select"), c.get("where_x"))
    groups = c.get("group_by", [])
    keys = ["x"] + groups
    total = {"points": 0, "violations": 0, "within_tol": 0, "worst_margin": np.inf, "worst_at": None}
    values = c["values"]
    for a, b in zip(values[:-1], values[1:]):
        lo = select(base, {c["by"]: a})
        hi = select(base, {c["by"]: b})
        _need_rows(lo, "select", c, {**c.get("select", {}), c["by"]: a})
        _need_rows(hi, "select", c, {**c.get("select", {}), c["by"]: b})
        pair = lo[keys + [col]].merge(hi[keys + [col]], on=keys, suffixes=("_a", "_b"))
        res = _pointwise(pair[f"{col}_a"], pair[f"{col}_b"], c["op"], tol)
        ok, near = res["ok"], res["near"]
        total["points"] += len(pair)
        total["violations"] += int(np.sum(~ok & ~near))
        total["within_tol"] += int(np.sum(res["near"]))
        if len(pair):
            i = int(np.argmin(res["margin"]))
            if res["margin"][i] < total["worst_margin"]:
                total["worst_margin"] = float(res["margin"][i])
                total["worst_at"] = {"pair": [_py(a), _py(b)], **{k: _py(pair[k].iloc[i]) for k in keys}}
                total["worst_values"] = [float(pair[f"{col}_a"].iloc[i]), float(pair[f"{col}_b"].iloc[i])]
    if total["points"] == 0:
        return "inconclusive", {**total, "worst_margin": None, "reason": "nothing to compare"}
    return _verdict(total["violations"], total["within_tol"]), total


def _check_monotone(df, c):
    col, tol = c.get("column", "y"), c.get("tol", 0.0)
    d = select(df, c.get("select"), c.get("where_x"))
    _need_rows(d, "select", c, c.get("select"))
    strict = c.get("strict", True)
    counts_for = _tol_for(c)
    group_by = c.get("group_by", [])
    out = {"groups": 0, "violations": 0, "within_tol": 0, "min_step": None, "worst_group": None, "worst_step": None,
           "curves": _label(d, c.get("select"))}
    worst = np.inf
    for name, g in _groups(d, group_by):
        g = g.sort_values("x")
        y, xs = g[col].to_numpy(float), g["x"].to_numpy(float)
        steps = np.diff(y) if c["direction"] == "increasing" else -np.diff(y)
        # D7: a step within the tolerance is inconclusive (for a weak claim only if it goes the wrong way),
        # or fine with tol_counts: for
        near = np.abs(steps) <= tol if tol > 0 else np.zeros(len(steps), bool)
        broken = (steps <= 0) if strict else (steps < 0)
        bad = broken & ~near
        unsure = near if strict else near & broken
        out["groups"] += 1
        out["violations"] += int(bad.sum())
        out["within_tol"] += int(unsure.sum())
        if len(steps) and steps.min() < worst:
            i = int(np.argmin(steps))
            worst, out["worst_group"] = float(steps[i]), name
            out["worst_step"] = {"group": _group_label(g, group_by, d), "from_x": float(xs[i]),
                                 "to_x": float(xs[i + 1]), "from_y": float(y[i]), "to_y": float(y[i + 1]),
                                 "step": float(steps[i])}
    out["min_step"] = None if worst == np.inf else worst
    return _verdict(out["violations"], 0 if counts_for else out["within_tol"]), out


def _side(d: pd.DataFrame, bound):
    if bound is None:
        return None
    return d[bound].to_numpy(float) if isinstance(bound, str) else np.full(len(d), float(bound))


def _check_bounds(df, c):
    """lower ≤ value ≤ upper at every point, or at `min_points` points (per group with group_by;
    with min_group_share / min_groups, that many groups must pass)."""
    col = c.get("column", "y")
    groups = c.get("group_by", [])
    d = select(df, c.get("select"), c.get("where_x")).reset_index(drop=True)
    _need_rows(d, "select", c, c.get("select"))
    tol = np.full(len(d), float(c.get("tol", 0.0)))
    if c.get("tol_se"):  # the tolerance is at least the point's standard error over trials
        if "se" not in d:
            raise ClaimSpecError("tol_se needs the table's se column")
        tol = np.maximum(tol, d["se"].fillna(0.0).to_numpy(float))
    v = d[col].to_numpy(float)
    ok = ~np.isnan(v)
    near = np.zeros(len(d), bool)
    inside = np.full(len(d), np.inf)  # the smaller margin of the two sides (> 0: inside)
    out = {"points": len(d), "min": float(np.nanmin(v)), "max": float(np.nanmax(v)),
           "curve": _label(d, c.get("select"))}
    for side, key, strict_key in ((_side(d, c.get("lower")), "lower", "lower_strict"),
                                  (_side(d, c.get("upper")), "upper", "upper_strict")):
        if side is None:
            continue
        margin = (v - side) if key == "lower" else (side - v)  # > 0: inside
        ok &= (margin > 0) if c.get(strict_key) else (margin >= 0)
        near |= (np.abs(margin) <= tol) & (tol > 0)
        inside = np.fmin(inside, margin)
        out[f"min_margin_{key}"] = float(np.nanmin(margin))
    within = near.copy()
    verdict, numbers = _reduce_groups(d, groups, ok, near, c)
    inside = np.where(np.isnan(v), -np.inf, inside)
    frame = d.assign(_i=np.arange(len(d)))
    for name, g in (frame.groupby(groups, sort=True) if groups else [("all", frame)]):
        idx = g["_i"].to_numpy()
        i = int(idx[np.argmin(inside[idx])])
        entry = numbers["groups"][_group_key(name)]
        entry["label"] = _group_label(g, groups, d) if groups else "all"
        entry["worst"] = {"x": float(d["x"].iloc[i]), "value": float(v[i]), "margin": float(inside[i])}
    out["violations"], out["within_tol"] = int(np.sum(~ok & ~near)), int(within.sum())
    if "min_point_share" in c or c.get("misses_at_smallest_x"):
        verdict, extra = _share_and_prefix(d, groups, ok & ~near, ~ok & ~near, c)
        numbers.update(extra)
    return verdict, {**out, **numbers}


def _share_and_prefix(d, groups, win, loss, c) -> tuple[str, dict]:
    """bounds over all points together (lowy2023's C-L5c: "< 1 for most ε, except for some experiments at small
    ε"): wins at ≥ `min_point_share` of all points (count_verdict), and with `misses_at_smallest_x`, in every group
    the points that are not wins lie at the group's smallest x (a prefix of its grid): a loss outside the prefix
    fails, a tie outside it makes the claim inconclusive."""
    n = len(d)
    need = math.ceil(c.get("min_point_share", 1.0) * n - 1e-9)
    verdict = count_verdict(int(win.sum()), int((~win & ~loss).sum()), need)
    out = {"points_needed": need, "wins": int(win.sum()), "losses": int(loss.sum())}
    if c.get("misses_at_smallest_x"):
        frame = d.assign(_win=win, _loss=loss)
        scattered = {}
        for name, g in (frame.groupby(groups, sort=True) if groups else [("all", frame)]):
            g = g.sort_values("x")
            w = g["_win"].to_numpy()
            first_win = int(np.argmax(w)) if w.any() else len(w)
            later = g.iloc[first_win:]
            if (~later["_win"]).any():  # a miss after a win: not at the smallest x only
                bad = later[~later["_win"]]
                scattered[_group_key(name)] = {"label": _group_label(g, groups, d), "x": [float(x) for x in bad["x"]],
                                               "loss": bool(bad["_loss"].any())}
        out["misses_not_at_smallest_x"] = scattered
        if any(s["loss"] for s in scattered.values()):
            verdict = "fail"
        elif scattered and verdict == "pass":
            verdict = "inconclusive"
    return verdict, out


def _check_near(df, c):
    col = c.get("column", "y")
    d = select(df, c.get("select"))
    d = d[np.isclose(d["x"], c["x"])]
    _need_rows(d, "select", c, c.get("select"), x=c["x"])
    value = float(d[col].iloc[0])
    rel = abs(value - c["target"]) / abs(c["target"])
    return ("pass" if rel <= c["rel_tol"] else "fail"), {
        "x": c["x"], "value": value, "target": c["target"], "rel_error": rel, "rel_tol": c["rel_tol"],
        "curve": _label(d, c.get("select"))}


def _curve_at(d: pd.DataFrame, xs: np.ndarray, col: str, how: str) -> np.ndarray:
    d = d.sort_values("x")
    x, y = d["x"].to_numpy(float), d[col].to_numpy(float)
    if how == "loglog":
        return np.exp(np.interp(np.log(xs), np.log(x), np.log(y), left=np.nan, right=np.nan))
    if how == "linear":
        return np.interp(xs, x, y, left=np.nan, right=np.nan)
    return np.array([y[np.isclose(x, xi)][0] if np.isclose(x, xi).any() else np.nan for xi in xs])


def _check_ratio(df, c):
    col = c.get("column", "y")
    num = select(df, {**c.get("select", {}), **c["numerator"]}, c.get("where_x"))
    den = select(df, {**c.get("select", {}), **c["denominator"]}, c.get("where_x"))
    _need_rows(num, "numerator", c, {**c.get("select", {}), **c["numerator"]})
    _need_rows(den, "denominator", c, {**c.get("select", {}), **c["denominator"]})
    labels = {"numerator_curve": _label(num, c["numerator"]), "denominator_curve": _label(den, c["denominator"])}
    how = c.get("interpolate", "none")
    xs = np.union1d(num["x"], den["x"]) if how != "none" else np.intersect1d(num["x"], den["x"])
    all_num = select(df, {**c.get("select", {}), **c["numerator"]})
    all_den = select(df, {**c.get("select", {}), **c["denominator"]})
    ratio = _curve_at(all_num, xs, col, how) / _curve_at(all_den, xs, col, how)
    keep = np.isfinite(ratio)
    xs, ratio = xs[keep], ratio[keep]
    if len(xs) == 0:
        return "inconclusive", {"reason": "no x where both sides are defined", **labels}
    bad = np.zeros(len(xs), bool)
    if "min" in c:
        bad |= ratio < c["min"]
    if "max" in c:
        bad |= ratio > c["max"]
    i_max, i_min = int(np.argmax(ratio)), int(np.argmin(ratio))
    return ("fail" if bad.any() else "pass"), {
        "points": len(xs), "violations": int(bad.sum()), "min_ratio": float(ratio[i_min]), "at_x_min": float(xs[i_min]),
        "max_ratio": float(ratio[i_max]), "at_x_max": float(xs[i_max]), "bounds": [c.get("min"), c.get("max")],
        "interpolate": how, "violating_x": [float(v) for v in xs[bad]], **labels}


def _check_successive_ratio(df, c):
    col = c.get("column", "y")
    d = select(df, c.get("select"), c.get("where_x")).sort_values("x")
    _need_rows(d, "select", c, c.get("select"))
    y = d[col].to_numpy(float)
    ratios = y[1:] / y[:-1]
    bad = ratios < c["min"]
    out = {"ratios": {f"{_py(a)}->{_py(b)}": float(r) for a, b, r in zip(d["x"].iloc[:-1], d["x"].iloc[1:], ratios)},
           "min": c["min"], "violations": int(bad.sum()), "curve": _label(d, c.get("select"))}
    if len(ratios):
        i = int(np.argmin(ratios))
        out["smallest"] = {"from_x": float(d["x"].iloc[i]), "to_x": float(d["x"].iloc[i + 1]),
                           "ratio": float(ratios[i])}
    return ("fail" if bad.any() else "pass"), out


def _check_slope(df, c):
    """The least-squares slope of log y on log x (points with x, y > 0 and finite), per group, within [min, max]."""
    col = c.get("column", "y")
    d = select(df, c.get("select"), c.get("where_x"))
    _need_rows(d, "select", c, c.get("select"))
    groups = c.get("group_by", [])
    per_group, bad = {}, 0
    for name, g in (d.groupby(groups, sort=True) if groups else [("all", d)]):
        x, y = g["x"].to_numpy(float), g[col].to_numpy(float)
        ok = (x > 0) & (y > 0) & np.isfinite(x) & np.isfinite(y)
        if ok.sum() < 2:
            raise ClaimSpecError(f"slope needs two points with x, y > 0 (group {name}, check {c})")
        slope = float(np.polyfit(np.log(x[ok]), np.log(y[ok]), 1)[0])
        inside = ("min" not in c or slope >= c["min"]) and ("max" not in c or slope <= c["max"])
        bad += not inside
        per_group[_group_key(name)] = {"slope": slope, "points": int(ok.sum()), "x_from": float(x[ok].min()),
                                       "x_to": float(x[ok].max()), "inside": bool(inside)}
    return ("fail" if bad else "pass"), {"groups": per_group, "violations": bad, "curve": _label(d, c.get("select")),
                                         "min": c.get("min"), "max": c.get("max")}


def _crossing(d: pd.DataFrame, col: str) -> float | None:
    """Smallest x at which y ≥ x (linear interpolation between grid points); None if it never does."""
    d = d.sort_values("x")
    x, gap = d["x"].to_numpy(float), d[col].to_numpy(float) - d["x"].to_numpy(float)
    idx = np.flatnonzero(gap >= 0)
    if len(idx) == 0:
        return None
    i = idx[0]
    if i == 0:
        return float(x[0])
    return float(x[i - 1] + (x[i] - x[i - 1]) * (-gap[i - 1]) / (gap[i] - gap[i - 1]))


def _check_crossing(df, c):
    col = c.get("column", "y")
    if c.get("line", "identity") != "identity":
        raise ClaimSpecError("crossing: only line 'identity' (y = x) is supported")
    first = select(df, {**c.get("select", {}), **c["first"]}, c.get("where_x"))
    second = select(df, {**c.get("select", {}), **c["second"]}, c.get("where_x"))
    _need_rows(first, "first", c, {**c.get("select", {}), **c["first"]})
    _need_rows(second, "second", c, {**c.get("select", {}), **c["second"]})
    labels = {"first_curve": _label(first, c["first"]), "second_curve": _label(second, c["second"])}
    out, verdicts = {}, []
    for name, g1 in _groups(first, c.get("match_on", [])):
        g2 = second if not c.get("match_on") else second.merge(g1[c["match_on"]].drop_duplicates(), on=c["match_on"])
        x1, x2 = _crossing(g1, col), _crossing(g2, col)
        if x1 is not None and x2 is not None:
            verdicts.append("pass" if x1 > x2 else "fail")
        elif x1 is None and x2 is not None:
            verdicts.append("pass")  # first never becomes vacuous on the grid, second does
        elif x1 is not None and x2 is None:
            verdicts.append("fail")
        # neither curve becomes vacuous on the grid: nothing to compare for this group
        out[name] = {"first_crossing": x1, "second_crossing": x2}
    if not verdicts:
        return "inconclusive", {"crossings": out, "reason": "no curve crosses the line on the grid", **labels}
    return max(verdicts, key=SEVERITY.get), {"crossings": out, **labels}


def _check_jointly(df, c):
    """Checks that must hold together in the same group (e.g. "in ≥ 1 panel, both A and B"): a group (group_by)
    passes when every one of `checks` passes on its rows, is inconclusive when none fails but some is inconclusive,
    else fails; `min_groups` / `min_group_share` groups must pass (default all). Separate checks would let each
    condition hold in a different panel."""
    d = select(df, c.get("select"))
    _need_rows(d, "select", c, c.get("select"))
    groups = c["group_by"]
    per = {}
    for name, g in d.groupby(groups, sort=True):
        results = [dict(zip(("verdict", "numbers"), CHECKS[sub["kind"]](g, sub))) for sub in c["checks"]]
        per[_group_key(name)] = {"verdict": max((r["verdict"] for r in results), key=SEVERITY.get),
                                 "label": _group_label(g, groups, d), "checks": results}
    verdicts = [g["verdict"] for g in per.values()]
    need = groups_needed(c, len(verdicts))
    n_pass, n_maybe = verdicts.count("pass"), verdicts.count("inconclusive")
    return count_verdict(n_pass, n_maybe, need), {"groups": per, "groups_needed": need, "groups_passing": n_pass}


CHECKS = {
    "compare": _check_compare,
    "order": _check_order,
    "monotone": _check_monotone,
    "bounds": _check_bounds,
    "near": _check_near,
    "ratio": _check_ratio,
    "successive_ratio": _check_successive_ratio,
    "crossing": _check_crossing,
    "eventually": _check_eventually,
    "mean_relative_gap": _check_mean_relative_gap,
    "slope": _check_slope,
    "jointly": _check_jointly,
}
