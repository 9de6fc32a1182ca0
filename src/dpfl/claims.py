"""Machine checks of the papers' claims on a figure's tidy table (spec D7).

A claim (config/papers/<id>.yaml, `claims:`) is a list of checks; each check is one comparison of
rows of the table, chosen by column values ("selectors"). Verdicts:
  pass          every compared point satisfies the claim;
  fail          some point violates it by more than the tolerance;
  inconclusive  no violation beyond the tolerance, but some point is within it (or nothing to compare); with
                `tol_counts: for` (the spec's "≤ X + tol") a point within the tolerance satisfies the claim instead;
  stand-in      the table was computed on synthetic stand-in data: not evidence (the underlying verdict
                is kept in `verdict_on_data`).
A claim's verdict is the worst of its checks (fail > inconclusive > pass). Each check returns the
numbers behind its verdict so that a reader can judge the margin, and a `reason`: one sentence built from those
numbers (REASONS: one builder per kind; `claim_reason` joins the checks that decided the verdict). `cause_of`
names why a verdict is not a pass, where known: stand-in, documented-difference, reduced-scale, not-reproduced.

Check kinds (keys in brackets are optional; `CHECK_KEYS` below is the exact list of each kind's keys, and
the configuration schema of a check is generated from it by `check_schema()`):
  compare           left OP factor·right + offset, pointwise on x [match_on: other columns that pair rows;
                    op "abs<=" with max_diff: |left − right| ≤ max_diff; at: first|last (only the
                    smallest/largest x); min_points: how many points must satisfy it (default all);
                    group_by + min_group_share | min_groups: how many groups must pass; tol_se: the
                    tolerance is at least the standard error of the difference (column se)]
  eventually        some grid x0 exists with the comparison holding at every x ≥ x0 (reports x0)
                    [match_on, at, factor, op "abs<=" with max_diff, tol_se, group_by: as compare]
  mean_relative_gap mean of (right − left)/right ≥ min [match_on, at]
  slope             min ≤ least-squares slope of log y against log x ≤ max (growth like x^slope), at least one
                    of min, max [group_by: each group separately]
  order             for `by` = values[0], values[1], …: y[v0] OP y[v1] OP …, pointwise [group_by]
  monotone          y strictly/weakly increasing or decreasing in x within each group [strict, group_by]
  bounds            lower ≤ value ≤ upper; lower/upper are numbers or column names, at least one of them
                    [lower_strict, upper_strict, min_points, group_by + min_group_share | min_groups]
  near              |y(x) − target| ≤ rel_tol·|target|
  ratio             min ≤ numerator/denominator ≤ max, pointwise; at least one of min, max
                    [interpolate: none|linear|loglog]
  successive_ratio  y[i+1]/y[i] ≥ min along x
  crossing          x where each curve first reaches the line (identity: y = x); first's crossing must
                    lie at a larger x than second's, when both exist [match_on]
All kinds accept `select` (rows to use) and `column` (default y), all but near (which takes one x) accept
`where_x` (gt/ge/lt/le); compare, eventually, order, monotone and bounds also accept `tol` (an absolute
tolerance: a point within it makes the check inconclusive instead of failed or passed) and `tol_counts`
(`inconclusive`, the default, for comparisons written without "+ tol"; `for`: a point within the tolerance
satisfies the claim, for the spec's "≤ X + tol"). Any check may carry
`inferred` (why a threshold the paper does not give was chosen); it does not change the check.
"""

from __future__ import annotations

import copy
import math
import operator
from typing import NamedTuple

import numpy as np
import pandas as pd

OPS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}  # and "abs<=" (compare)
SEVERITY = {"pass": 0, "inconclusive": 1, "fail": 2}


class ClaimSpecError(ValueError):
    """A claim's check refers to rows or columns the table does not have."""


# --------------------------------------------------------------------------------------------------
# selection helpers
# --------------------------------------------------------------------------------------------------


def _matches(series: pd.Series, value) -> pd.Series:
    values = value if isinstance(value, list) else [value]
    mask = pd.Series(False, index=series.index)
    for v in values:
        if isinstance(v, (int, float)) and not isinstance(v, bool) and pd.api.types.is_numeric_dtype(series):
            mask |= np.isclose(series.astype(float), float(v), rtol=1e-12, atol=0)
        else:
            mask |= series.astype(str) == str(v)
    return mask


def select(df: pd.DataFrame, selector: dict | None, where_x: dict | None = None) -> pd.DataFrame:
    out = df
    for col, value in (selector or {}).items():
        if col not in out:
            raise ClaimSpecError(f"selector column {col!r} is not in the table (columns: {', '.join(df.columns)})")
        out = out[_matches(out[col], value)]
    for key, bound in (where_x or {}).items():
        out = out[OPS[{"gt": ">", "ge": ">=", "lt": "<", "le": "<="}[key]](out["x"], bound)]
    return out


def _need_rows(d: pd.DataFrame, what: str, check: dict) -> None:
    if d.empty:
        raise ClaimSpecError(f"{what} selects no rows (check {check})")


def _verdict(violations: int, within_tol: int) -> str:
    if violations:
        return "fail"
    return "inconclusive" if within_tol else "pass"


def _tol_for(c) -> bool:
    """`tol_counts: for`: a point within the tolerance satisfies the claim (the spec's "≤ X + tol"); the default
    `inconclusive` makes such a point inconclusive (comparisons written without "+ tol")."""
    return c.get("tol_counts", "inconclusive") == "for"


def _settle(ok, near, c):
    """(ok, near) after `tol_counts`: with `for`, points within the tolerance count as satisfied."""
    ok, near = np.asarray(ok, bool), np.asarray(near, bool)
    if _tol_for(c):
        return ok | near, np.zeros_like(near)
    return ok, near


def _label(d: pd.DataFrame, selector: dict | None = None) -> str:
    """A reader's name of some rows (for the reasons): their curve label ("ISRL-DP MB-SGD"), two or three labels
    ("A and B"), or for more the selector that chose them ("conversion = rdp")."""
    if "curve" not in d or d.empty:
        return _selector_text(selector) or "the selection"
    names = list(dict.fromkeys(d["curve"].astype(str)))
    if len(names) == 1:
        return names[0]
    if len(names) == 2:
        return " and ".join(names)
    return _selector_text(selector) or f"{len(names)} curves"


def _selector_text(selector: dict | None) -> str:
    return ", ".join(f"{k} = {'/'.join(map(str, v)) if isinstance(v, list) else v}" for k, v in (selector or {}).items())


def _group_key(name) -> str:
    return "/".join(map(str, name)) if isinstance(name, tuple) else str(name)


def _group_label(g: pd.DataFrame, group_by: list[str], whole: pd.DataFrame) -> str:
    """A reader's name of a group: its curve label (where the selection has several) and its panel (where the
    table has several)."""
    parts = []
    if "curve" in g and g["curve"].nunique() == 1 and whole["curve"].nunique() > 1:
        parts.append(str(g["curve"].iloc[0]))
    if "panel" in g and "panel" in whole and whole["panel"].nunique() > 1 and g["panel"].nunique() == 1:
        parts.append(f"panel {g['panel'].iloc[0]}")
    if not parts:
        parts = [f"{k} {g[k].iloc[0]}" for k in group_by if k in g] or ["all"]
    return ", ".join(parts)


def _pointwise(lhs: np.ndarray, rhs: np.ndarray, op: str, tol: float) -> dict:
    """Evaluate lhs OP rhs pointwise; margin > 0 means satisfied (in the units of the values)."""
    lhs, rhs = np.asarray(lhs, float), np.asarray(rhs, float)
    margin = (rhs - lhs) if op in ("<", "<=") else (lhs - rhs)
    ok = OPS[op](lhs, rhs)
    near = np.abs(margin) <= tol if tol > 0 else np.zeros(len(lhs), bool)
    return {"ok": ok, "margin": margin, "near": near}


# --------------------------------------------------------------------------------------------------
# check kinds
# --------------------------------------------------------------------------------------------------


def _pairs(df, c, keys, se: bool = False):
    """Rows of the left and right selections paired on x and `match_on` (columns *_left, *_right; with
    `se`, also se_left and se_right), and the curve labels of the two selections."""
    col = c.get("column", "y")
    cols = keys + [col] + (["se"] if se else [])
    left = select(df, {**c.get("select", {}), **c["left"]}, c.get("where_x"))
    right = select(df, {**c.get("select", {}), **c["right"]}, c.get("where_x"))
    _need_rows(left, "left", c)
    _need_rows(right, "right", c)
    pair = left[cols].merge(right[cols], on=keys, suffixes=("_left", "_right"))
    if pair.empty:
        raise ClaimSpecError(f"left and right share no {keys} values (check {c})")
    if c.get("at") in ("first", "last"):  # only the smallest / largest x (per matched group)
        pick = (pair.groupby(keys[1:])["x"] if len(keys) > 1 else pair["x"])
        edge = pick.transform("min" if c["at"] == "first" else "max") if len(keys) > 1 else (
            pair["x"].min() if c["at"] == "first" else pair["x"].max())
        pair = pair[np.isclose(pair["x"], edge)]
    return pair.reset_index(drop=True), (_label(left, c["left"]), _label(right, c["right"]))


def _tolerance(pair, c) -> np.ndarray:
    """Per-point tolerance: `tol`, or with tol_se the larger of tol and the standard error of the
    difference sqrt(se_left² + se_right²) (spec D7)."""
    tol = np.full(len(pair), float(c.get("tol", 0.0)))
    if c.get("tol_se"):
        tol = np.maximum(tol, np.sqrt(pair["se_left"] ** 2 + pair["se_right"] ** 2).to_numpy(float))
    return tol


def _status(lhs, rhs, op: str, tol: np.ndarray, max_diff: float | None = None):
    """Per point: margin (> 0 satisfied), ok, near (|margin| within tol). op "abs<=": |l − r| ≤ max_diff."""
    lhs, rhs = np.asarray(lhs, float), np.asarray(rhs, float)
    if op == "abs<=":
        margin = max_diff - np.abs(lhs - rhs)
        ok = margin >= 0
    else:
        margin = (rhs - lhs) if op in ("<", "<=") else (lhs - rhs)
        ok = OPS[op](lhs, rhs)
    near = (np.abs(margin) <= tol) & (tol > 0)
    return margin, ok, near


def _reduce_groups(pair, groups: list[str], ok, near, c) -> tuple[str, dict]:
    """Verdict over points, optionally per group: `min_points` = points that must satisfy the claim
    (default all); with group_by, `min_group_share` / `min_groups` = groups that must pass."""
    per_group = {}
    frame = pair.assign(_ok=ok, _near=near)
    for name, g in (frame.groupby(groups, sort=True) if groups else [("all", frame)]):
        n = len(g)
        need = c.get("min_points", n)
        clear = int((g["_ok"] & ~g["_near"]).sum())  # satisfied by more than the tolerance
        close = int(g["_near"].sum())  # within the tolerance, either way
        v = "pass" if clear >= need else ("inconclusive" if clear + close >= need else "fail")
        per_group[_group_key(name)] = {"verdict": v, "satisfied": clear, "within_tol": close, "points": n,
                                       "needed": need}
    verdicts = [g["verdict"] for g in per_group.values()]
    if groups and ("min_group_share" in c or "min_groups" in c):
        need = c.get("min_groups", 0) or math.ceil(c.get("min_group_share", 1.0) * len(verdicts) - 1e-9)
        n_pass = verdicts.count("pass")
        n_maybe = verdicts.count("inconclusive")
        verdict = "pass" if n_pass >= need else ("inconclusive" if n_pass + n_maybe >= need else "fail")
        return verdict, {"groups": per_group, "groups_needed": need, "groups_passing": n_pass}
    return max(verdicts, key=SEVERITY.get), {"groups": per_group}


def _point(pair, i: int, keys: list[str], lhs, rhs, margin, tol) -> dict:
    """One compared point: where (x and the pairing columns that vary), both sides, margin and tolerance."""
    return {"at": {k: _py(pair[k].iloc[i]) for k in keys if k == "x" or pair[k].nunique() > 1},
            "left": float(lhs[i]), "right": float(rhs[i]), "margin": float(margin[i]), "tolerance": float(tol[i])}


def _check_compare(df, c):
    col = c.get("column", "y")
    groups = c.get("group_by", [])
    keys = ["x"] + sorted(set(c.get("match_on", [])) | set(groups))
    pair, (left_curve, right_curve) = _pairs(df, c, keys, se=c.get("tol_se", False))
    factor = c.get("factor", 1.0)
    tol = _tolerance(pair, c)
    lhs = pair[f"{col}_left"].to_numpy(float)
    rhs = factor * pair[f"{col}_right"].to_numpy(float) + c.get("offset", 0.0)
    margin, ok, near = _status(lhs, rhs, c["op"], tol, c.get("max_diff"))
    within = near.copy()
    ok, near = _settle(ok, near, c)
    verdict, numbers = _reduce_groups(pair, groups, ok, near, c)
    frame = pair.assign(_i=np.arange(len(pair)))
    for name, g in (frame.groupby(groups, sort=True) if groups else [("all", frame)]):
        idx = g["_i"].to_numpy()
        entry = numbers["groups"][_group_key(name)]
        entry["label"] = _group_label(g, groups, pair) if groups else "all"
        entry["worst"] = _point(pair, int(idx[np.argmin(margin[idx])]), keys, lhs, rhs, margin, tol)
        inside = idx[within[idx]]
        if len(inside):
            entry["within_tol_points"] = int(len(inside))
            entry["within_tol_margins"] = [float(margin[inside].min()), float(margin[inside].max())]
    worst = int(np.argmin(margin))
    numbers.update({
        "left_curve": left_curve,
        "right_curve": right_curve,
        "points": len(pair),
        "violations": int(np.sum(~ok & ~near)),
        "within_tol": int(within.sum()),
        "worst_margin": float(margin[worst]),
        "worst_at": {k: _py(pair[k].iloc[worst]) for k in keys},
        "left_at_worst": float(lhs[worst]),
        "right_at_worst": float(rhs[worst]),
        "tolerance_at_worst": float(tol[worst]),
    })
    return verdict, numbers


def _check_eventually(df, c):
    """There is a grid value x0 such that the comparison holds at every x ≥ x0 (e.g. "for ε ≥ ?, the
    private method is as good as the non-private one"); reports x0 per group."""
    col = c.get("column", "y")
    groups = c.get("group_by", [])
    keys = ["x"] + sorted(set(c.get("match_on", [])) | set(groups))
    pair, (left_curve, right_curve) = _pairs(df, c, keys, se=c.get("tol_se", False))
    tol = _tolerance(pair, c)
    lhs, rhs = pair[f"{col}_left"].to_numpy(float), c.get("factor", 1.0) * pair[f"{col}_right"].to_numpy(float)
    margin, ok, near = _status(lhs, rhs, c["op"], tol, c.get("max_diff"))
    ok, near = _settle(ok, near, c)
    frame = pair.assign(_ok=ok | near, _strict=ok & ~near, _i=np.arange(len(pair)))
    out, verdicts = {}, []
    for name, g in (frame.groupby(groups, sort=True) if groups else [("all", frame)]):
        g = g.sort_values("x")
        x0 = x0_clear = None
        for i in range(len(g)):
            if x0 is None and g["_ok"].iloc[i:].all():
                x0 = float(g["x"].iloc[i])
            if g["_strict"].iloc[i:].all():
                x0_clear = float(g["x"].iloc[i])
                break
        v = "fail" if x0 is None else ("pass" if x0_clear == x0 else "inconclusive")
        verdicts.append(v)
        out[_group_key(name)] = {
            "x0": x0, "x0_clear": x0_clear, "verdict": v,
            "label": _group_label(g, groups, pair) if groups else "all",
            "at_largest": _point(pair, int(g["_i"].iloc[-1]), keys, lhs, rhs, margin, tol)}
    return max(verdicts, key=SEVERITY.get), {"from_x": out, "left_curve": left_curve, "right_curve": right_curve,
                                             "points": len(pair)}


def _check_mean_relative_gap(df, c):
    """mean over paired points of (right − left)/right ≥ min (e.g. "significantly outperforms")."""
    col = c.get("column", "y")
    keys = ["x"] + c.get("match_on", [])
    pair, (left_curve, right_curve) = _pairs(df, c, keys)
    gap = ((pair[f"{col}_right"] - pair[f"{col}_left"]) / pair[f"{col}_right"]).to_numpy(float)
    value = float(np.mean(gap))
    return ("pass" if value >= c["min"] else "fail"), {
        "mean_relative_gap": value, "min": c["min"], "per_point": [float(v) for v in gap],
        "left_curve": left_curve, "right_curve": right_curve, "points": len(pair)}


def _check_order(df, c):
    col, tol = c.get("column", "y"), c.get("tol", 0.0)
    base = select(df, c.get("select"), c.get("where_x"))
    groups = c.get("group_by", [])
    keys = ["x"] + groups
    counts_for = _tol_for(c)
    total = {"points": 0, "violations": 0, "within_tol": 0, "worst_margin": np.inf, "worst_at": None}
    values = c["values"]
    for a, b in zip(values[:-1], values[1:]):
        lo = select(base, {c["by"]: a})
        hi = select(base, {c["by"]: b})
        _need_rows(lo, f"{c['by']} = {a}", c)
        _need_rows(hi, f"{c['by']} = {b}", c)
        pair = lo[keys + [col]].merge(hi[keys + [col]], on=keys, suffixes=("_a", "_b"))
        res = _pointwise(pair[f"{col}_a"], pair[f"{col}_b"], c["op"], tol)
        ok, near = _settle(res["ok"], res["near"], c)
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
    return _verdict(total["violations"], 0 if counts_for else total["within_tol"]), total


def _groups(d: pd.DataFrame, group_by: list[str]):
    if not group_by:
        yield "all", d
        return
    for key, g in d.groupby(group_by, sort=True):
        yield "/".join(map(str, key if isinstance(key, tuple) else (key,))), g


def _check_monotone(df, c):
    col, tol = c.get("column", "y"), c.get("tol", 0.0)
    d = select(df, c.get("select"), c.get("where_x"))
    _need_rows(d, "select", c)
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
            out["worst_step"] = {"group": _group_label(g, group_by, d), "from_x": float(xs[i]), "to_x": float(xs[i + 1]),
                                 "from_y": float(y[i]), "to_y": float(y[i + 1]), "step": float(steps[i])}
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
    tol = c.get("tol", 0.0)
    groups = c.get("group_by", [])
    d = select(df, c.get("select"), c.get("where_x")).reset_index(drop=True)
    _need_rows(d, "select", c)
    v = d[col].to_numpy(float)
    ok = ~np.isnan(v)
    near = np.zeros(len(d), bool)
    inside = np.full(len(d), np.inf)  # the smaller margin of the two sides (> 0: inside)
    out = {"points": len(d), "min": float(np.nanmin(v)), "max": float(np.nanmax(v)), "curve": _label(d, c.get("select"))}
    for side, key, strict_key in ((_side(d, c.get("lower")), "lower", "lower_strict"),
                                  (_side(d, c.get("upper")), "upper", "upper_strict")):
        if side is None:
            continue
        margin = (v - side) if key == "lower" else (side - v)  # > 0: inside
        ok &= (margin > 0) if c.get(strict_key) else (margin >= 0)
        if tol > 0:
            near |= np.abs(margin) <= tol
        inside = np.fmin(inside, margin)
        out[f"min_margin_{key}"] = float(np.nanmin(margin))
    within = near.copy()
    ok, near = _settle(ok, near, c)
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
    return verdict, {**out, **numbers}


def _check_near(df, c):
    col = c.get("column", "y")
    d = select(df, c.get("select"))
    d = d[np.isclose(d["x"], c["x"])]
    _need_rows(d, f"x = {c['x']}", c)
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
    _need_rows(num, "numerator", c)
    _need_rows(den, "denominator", c)
    labels = {"numerator_curve": _label(num, c["numerator"]), "denominator_curve": _label(den, c["denominator"])}
    how = c.get("interpolate", "none")
    xs = np.union1d(num["x"], den["x"]) if how != "none" else np.intersect1d(num["x"], den["x"])
    all_num, all_den = select(df, {**c.get("select", {}), **c["numerator"]}), select(df, {**c.get("select", {}), **c["denominator"]})
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
    _need_rows(d, "select", c)
    y = d[col].to_numpy(float)
    ratios = y[1:] / y[:-1]
    bad = ratios < c["min"]
    out = {"ratios": {f"{_py(a)}->{_py(b)}": float(r) for a, b, r in zip(d["x"].iloc[:-1], d["x"].iloc[1:], ratios)},
           "min": c["min"], "violations": int(bad.sum()), "curve": _label(d, c.get("select"))}
    if len(ratios):
        i = int(np.argmin(ratios))
        out["smallest"] = {"from_x": float(d["x"].iloc[i]), "to_x": float(d["x"].iloc[i + 1]), "ratio": float(ratios[i])}
    return ("fail" if bad.any() else "pass"), out


def _check_slope(df, c):
    """The least-squares slope of log y on log x (points with x, y > 0 and finite), per group, within [min, max]."""
    col = c.get("column", "y")
    d = select(df, c.get("select"), c.get("where_x"))
    _need_rows(d, "select", c)
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
    _need_rows(first, "first", c)
    _need_rows(second, "second", c)
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
}


# --------------------------------------------------------------------------------------------------
# the keys of each check kind, and the configuration schema generated from them
# --------------------------------------------------------------------------------------------------


class CheckKeys(NamedTuple):
    """The keys one check kind reads (besides `kind` and CHECK_META_KEYS): `required` ones it indexes,
    `optional` ones it looks up with a default; `at_least_one`: optional keys of which one must be given
    (without any of them the check could not fail)."""

    required: tuple[str, ...]
    optional: tuple[str, ...] = ()
    at_least_one: tuple[str, ...] = ()


_ROWS = ("select", "where_x", "column")  # which rows and which value (see select())
_GROUP_SHARE = ("group_by", "min_points", "min_group_share", "min_groups")  # _reduce_groups

# The single source of truth for the keys of a check: the configuration schema (check_schema(), served to
# the config validator), the module docstring and README's "Claims" section follow it (tests compare).
# Rules derived from the keys a kind accepts (see _kind_schema): a kind with max_diff also accepts op
# "abs<=", which needs max_diff (and max_diff needs it); min_group_share / min_groups need group_by.
CHECK_KEYS: dict[str, CheckKeys] = {
    "compare": CheckKeys(("left", "right", "op"),
                         (*_ROWS, "match_on", "at", "factor", "offset", "max_diff", "tol", "tol_se", "tol_counts",
                          *_GROUP_SHARE)),
    "order": CheckKeys(("by", "values", "op"), (*_ROWS, "tol", "tol_counts", "group_by")),
    "monotone": CheckKeys(("direction",), (*_ROWS, "strict", "tol", "tol_counts", "group_by")),
    "bounds": CheckKeys((), (*_ROWS, "lower", "upper", "lower_strict", "upper_strict", "tol", "tol_counts",
                            *_GROUP_SHARE),
                        at_least_one=("lower", "upper")),
    "near": CheckKeys(("x", "target", "rel_tol"), ("select", "column")),
    "ratio": CheckKeys(("numerator", "denominator"), (*_ROWS, "min", "max", "interpolate"),
                       at_least_one=("min", "max")),
    "successive_ratio": CheckKeys(("min",), _ROWS),
    "crossing": CheckKeys(("first", "second"), (*_ROWS, "match_on", "line")),
    "eventually": CheckKeys(("left", "right", "op"),
                            (*_ROWS, "match_on", "at", "factor", "max_diff", "tol", "tol_se", "tol_counts", "group_by")),
    "mean_relative_gap": CheckKeys(("left", "right", "min"), (*_ROWS, "match_on", "at")),
    "slope": CheckKeys((), (*_ROWS, "min", "max", "group_by"), at_least_one=("min", "max")),
}
CHECK_META_KEYS = ("inferred",)  # any kind: information for the reader, not read by the check

_SELECTOR = {"$ref": "#/$defs/selector"}
# The JSON schema of each key (the same for every kind that accepts it; op: see _kind_schema).
KEY_SCHEMAS: dict[str, dict] = {
    "select": _SELECTOR,
    "left": _SELECTOR,
    "right": _SELECTOR,
    "first": _SELECTOR,
    "second": _SELECTOR,
    "numerator": _SELECTOR,
    "denominator": _SELECTOR,
    "where_x": {"$ref": "#/$defs/where_x"},
    "column": {"type": "string", "description": "the value compared (default y)"},
    "by": {"type": "string", "description": "order: the column whose values are ordered"},
    "values": {"type": "array", "description": "order: the values of `by`, in the claimed order"},
    "group_by": {"type": "array", "items": {"type": "string"}},
    "match_on": {"type": "array", "items": {"type": "string"},
                 "description": "columns (besides x) that pair left and right rows"},
    "op": {"enum": list(OPS)},
    "max_diff": {"type": "number", "minimum": 0, "description": "op abs<=: |left − right| ≤ max_diff"},
    "at": {"enum": ["first", "last"], "description": "compare only at the smallest / largest x"},
    "min_points": {"type": "integer", "minimum": 1, "description": "points that must satisfy the claim (default all)"},
    "min_group_share": {"type": "number", "minimum": 0, "maximum": 1,
                        "description": "with group_by: share of groups that must pass"},
    "min_groups": {"type": "integer", "minimum": 1, "description": "with group_by: number of groups that must pass"},
    "tol_se": {"type": "boolean", "description": "tolerance at least the standard error of the difference (column se)"},
    "factor": {"type": "number", "description": "compare: the right side is multiplied by this"},
    "offset": {"type": "number", "description": "compare: then this is added to the right side (e.g. −0.05: 'below right − 0.05')"},
    "direction": {"enum": ["increasing", "decreasing"]},
    "strict": {"type": "boolean"},
    "lower": {"type": ["number", "string"], "description": "a number or a column name"},
    "upper": {"type": ["number", "string"], "description": "a number or a column name"},
    "lower_strict": {"type": "boolean"},
    "upper_strict": {"type": "boolean"},
    "x": {"type": "number"},
    "target": {"type": "number"},
    "rel_tol": {"type": "number", "minimum": 0},
    "tol": {"type": "number", "minimum": 0,
            "description": "absolute tolerance: a point within it is inconclusive (or satisfies the claim, tol_counts: for)"},
    "tol_counts": {"enum": ["inconclusive", "for"],
                   "description": "how a point within the tolerance counts: inconclusive (default: a comparison written "
                                  "without '+ tol') | for (it satisfies the claim: the spec's 'X ≤ Y + tol')"},
    "min": {"type": "number"},
    "max": {"type": "number"},
    "interpolate": {"enum": ["none", "linear", "loglog"]},
    "line": {"enum": ["identity"], "description": "crossing: the curve crossed, 'identity' for y = x"},
    "inferred": {"type": "string", "description": "why a threshold not given by the paper was chosen"},
}

SELECTOR_SCHEMA = {
    "description": "rows of the tidy table whose columns equal these values (a list means any of them)",
    "type": "object",
    "additionalProperties": {"anyOf": [{"type": ["string", "number", "boolean"]}, {"type": "array"}]},
}
WHERE_X_SCHEMA = {
    "description": "restrict x: gt / ge / lt / le",
    "type": "object",
    "additionalProperties": False,
    "properties": {k: {"type": "number"} for k in ("gt", "ge", "lt", "le")},
}

# The URI by which the schema files refer to the generated schema (common.schema.yaml, $defs.check);
# dpfl.config serves check_schema() for it.
CHECK_SCHEMA_ID = "urn:dpfl:claims:check"


def check_keys(kind: str) -> tuple[str, ...]:
    """Every key a check of this kind may have: kind, its required and optional keys, CHECK_META_KEYS."""
    spec = CHECK_KEYS[kind]
    return ("kind", *spec.required, *spec.optional, *CHECK_META_KEYS)


def _kind_schema(kind: str) -> dict:
    """The schema of one kind: exactly its keys, its required keys, and the rules between keys."""
    spec = CHECK_KEYS[kind]
    keys = check_keys(kind)
    title = f"kind '{kind}'"  # dpfl.config._describe appends it to the message of an error raised here
    properties = {"kind": {"const": kind}, **{k: KEY_SCHEMAS[k] for k in keys if k != "kind"}}
    out: dict = {"title": title, "type": "object", "additionalProperties": False}
    if spec.required:
        out["required"] = list(spec.required)
    rules: list[dict] = []
    if spec.at_least_one:
        one_of = ", ".join(map(repr, spec.at_least_one))
        rules.append({"title": title, "description": f"at least one of {one_of} is required",
                      "anyOf": [{"required": [k]} for k in spec.at_least_one]})
    if "max_diff" in keys:
        properties["op"] = {"enum": [*OPS, "abs<="], "description": "abs<=: |left − right| ≤ max_diff"}
        rules.append({"if": {"properties": {"op": {"const": "abs<="}}, "required": ["op"]},
                      "then": {"title": f"{title} with op 'abs<='", "required": ["max_diff"]}})
        out["dependentSchemas"] = {"max_diff": {"properties": {"op": {
            "const": "abs<=", "description": "max_diff applies only to op 'abs<='"}}}}
    if "tol_counts" in keys:
        needs = [k for k in ("tol", "tol_se") if k in keys]
        rules.append({"if": {"required": ["tol_counts"]},
                      "then": {"title": f"{title} with tol_counts", "anyOf": [{"required": [k]} for k in needs],
                               "description": f"tol_counts needs a tolerance: {' or '.join(needs)}"}})
    dependent = {k: ["group_by"] for k in ("min_group_share", "min_groups") if k in keys}
    if dependent:
        out["dependentRequired"] = dependent
    out["properties"] = properties
    if rules:
        out["allOf"] = rules
    return out


def check_schema() -> dict:
    """The JSON schema (draft 2020-12) of one check of a claim, generated from CHECKS, CHECK_KEYS and
    KEY_SCHEMAS: `kind` must be one of CHECKS; then, per kind (an if/then in allOf, so that an error names
    the kind instead of listing every alternative as oneOf would), the kind's required keys, no other keys
    than its own, each of the type KEY_SCHEMAS gives. It has no defaults (a check's defaults live in the
    check functions). Served to the config validator under CHECK_SCHEMA_ID (see dpfl.config)."""
    assert set(CHECK_KEYS) == set(CHECKS), "CHECK_KEYS and CHECKS list different kinds"
    assert not {"selector", "where_x"} & set(CHECKS)
    return copy.deepcopy({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": CHECK_SCHEMA_ID,
        "description": "one comparison on the figure's tidy table (generated by dpfl.claims.check_schema() "
                       "from CHECK_KEYS; see dpfl/claims.py for each kind)",
        "type": "object",
        "required": ["kind"],
        "properties": {"kind": {"enum": list(CHECKS)}},
        "allOf": [{"if": {"properties": {"kind": {"const": kind}}, "required": ["kind"]},
                   "then": {"$ref": f"#/$defs/{kind}"}} for kind in CHECKS],
        "$defs": {"selector": SELECTOR_SCHEMA, "where_x": WHERE_X_SCHEMA,
                  **{kind: _kind_schema(kind) for kind in CHECKS}},
    })


def _py(v):
    return v.item() if hasattr(v, "item") else v


# --------------------------------------------------------------------------------------------------
# reasons: one sentence per check and per claim, built from the numbers the check returned
# --------------------------------------------------------------------------------------------------

OP_TEXT = {"<": "<", "<=": "≤", ">": ">", ">=": "≥"}
NOT_OP = {"<": "≥", "<=": ">", ">": "≤", ">=": "<"}
VERB = {"pass": "passes", "fail": "fails", "inconclusive": "inconclusive"}


def fmt(v) -> str:
    """A measured value, 3 significant digits (0.680, 0.00269, 3,267, 5e+09)."""
    if v is None:
        return "none"
    v = float(v)
    if not math.isfinite(v):
        return "∞" if v > 0 else ("−∞" if v < 0 else "nan")
    a = abs(v)
    if a == 0:
        return "0"
    if a >= 1e6 or a < 1e-4:
        return f"{v:.3g}"
    if a >= 1000:
        return f"{v:,.0f}"
    return f"{v:#.3g}".rstrip(".")


def fmt_x(v) -> str:
    """A grid value as given (0.125, 3, 18)."""
    v = float(v)
    return f"{v:,.0f}" if v.is_integer() and 1000 <= abs(v) < 1e6 else f"{v:g}"


def fmt_cfg(v) -> str:
    """A configured threshold as written (0.005, 0.02, 2,100)."""
    return fmt_x(v) if isinstance(v, (int, float)) else str(v)


def _at(at: dict, x_name: str) -> str:
    parts = [f"{x_name} = {fmt_x(at['x'])}"]
    parts += [f"panel {v}" if k == "panel" else f"{k} {v}" for k, v in at.items() if k != "x"]
    return "at " + ", ".join(parts)


def _relation(c: dict, n: dict) -> tuple[str, str, str]:
    """(left label, right label with factor, the claimed relation in words)."""
    left, right = n.get("left_curve", "left"), n.get("right_curve", "right")
    if c.get("factor", 1.0) != 1.0:
        right = f"{fmt_cfg(c['factor'])}×{right}"
    if c.get("offset", 0.0) != 0.0:
        right = f"{right} {'+' if c['offset'] > 0 else '−'} {fmt_cfg(abs(c['offset']))}"
    if c["op"] == "abs<=":
        return left, right, f"|{left} − {right}| ≤ {fmt_cfg(c['max_diff'])}"
    plus = ""
    if _tol_for(c) and (c.get("tol") or c.get("tol_se")):
        plus = " + tol" if c["op"] in ("<", "<=") else " − tol"
    return left, right, f"{left} {OP_TEXT[c['op']]} {right}{plus}"


def _point_text(p: dict, c: dict, left: str, right: str, x_name: str, how: str) -> str:
    """One compared point: `how` = violation | within | closest."""
    text = f"{_at(p['at'], x_name)}, {left} {fmt(p['left'])} vs {right} {fmt(p['right'])}"
    diff, tol = abs(p["left"] - p["right"]), p["tolerance"]
    if how == "within":
        return text + f", difference {fmt(diff)} within the tolerance {fmt(tol)}"
    if how == "closest":
        return f"{_at(p['at'], x_name)}: {fmt(p['left'])} vs {fmt(p['right'])}"
    if c["op"] == "abs<=":
        return text + f", |difference| {fmt(diff)} > {fmt_cfg(c['max_diff'])}" + (f" + tolerance {fmt(tol)}" if tol else "")
    if tol:
        return text + f", difference {fmt(diff)} > tolerance {fmt(tol)}"
    return text + f", so {left} {NOT_OP[c['op']]} {right}"


def _points_word(c: dict, x_name: str) -> str:
    return "points" if (set(c.get("match_on", [])) | set(c.get("group_by", []))) else f"{x_name} values"


def _groups_word(c: dict) -> str:
    return "panels" if c.get("group_by") == ["panel"] else "groups"


def _count_text(g: dict, c: dict, x_name: str) -> str:
    pts, need, sat = g["points"], g["needed"], g["satisfied"]
    word = _points_word(c, x_name)
    if need >= pts:
        return f"at all {pts} {word}" if pts > 1 else ""
    return f"at {sat} of {pts} {word} ({need} needed)"


def _within_note(g: dict) -> str:
    k = g.get("within_tol_points", 0)
    if not k:
        return ""
    lo, hi = g["within_tol_margins"]
    span = fmt(lo) if math.isclose(lo, hi) else f"{fmt(lo)} to {fmt(hi)}"
    return f"{k} of them only within the tolerance (margins {span})"


def _reason_compare(c, verdict, n, x_name):
    left, right, rel = _relation(c, n)
    where = {"first": f" at the smallest {x_name}", "last": f" at the largest {x_name}"}.get(c.get("at"), "")
    groups = n["groups"]
    gb = c.get("group_by", [])
    if gb:
        unit = _groups_word(c)
        shared = "min_group_share" in c or "min_groups" in c
        need = n["groups_needed"] if shared else len(groups)
        n_pass = sum(g["verdict"] == "pass" for g in groups.values())
        head = f"{rel}{where} in {n_pass} of {len(groups)} {unit}" + (f" ({need} needed)" if shared else "")
        if verdict == "pass":
            return head
        if verdict == "fail":
            bad = [g for g in groups.values() if g["verdict"] == "fail"]
            worst = min(bad, key=lambda g: g["worst"]["margin"])
            return head + f"; worst: {_point_text(worst['worst'], c, left, right, x_name, 'violation')}"
        unsure = [g for g in groups.values() if g["verdict"] == "inconclusive"]
        example = unsure[0]["worst"]
        return head + f"; {len(unsure)} more only within the tolerance (e.g. " \
                      f"{_point_text(example, c, left, right, x_name, 'within')})"
    g = next(iter(groups.values()))
    count = _count_text(g, c, x_name)
    if verdict == "pass":
        parts = [f"{rel}{where}" + (f" {count}" if count else "")]
        note = _within_note(g)
        if note:
            parts.append(note)
        else:
            parts.append("closest " + _point_text(g["worst"], c, left, right, x_name, "closest"))
        return "; ".join(parts)
    if verdict == "fail":
        if g["needed"] < g["points"]:
            return f"{rel}{where} at only {g['satisfied'] + g['within_tol']} of {g['points']} " \
                   f"{_points_word(c, x_name)} ({g['needed']} needed); worst " \
                   f"{_point_text(g['worst'], c, left, right, x_name, 'violation')}"
        return _point_text(g["worst"], c, left, right, x_name, "violation")
    # inconclusive
    return f"{rel}{where} clearly at {g['satisfied']} of {g['points']} {_points_word(c, x_name)} " \
           f"({g['needed']} needed), {g['within_tol']} within the tolerance (e.g. " \
           f"{_point_text(g['worst'], c, left, right, x_name, 'within')})"


def _reason_eventually(c, verdict, n, x_name):
    left, right, rel = _relation(c, {**n})
    parts = []
    for key, g in n["from_x"].items():
        who = "" if key == "all" else f"{g.get('label', key)}: "
        if g["verdict"] == "pass":
            parts.append(f"{who}{rel} for every {x_name} ≥ {fmt_x(g['x0'])}")
        elif g["verdict"] == "inconclusive":
            clear = (f"clearly only from {x_name} = {fmt_x(g['x0_clear'])} on" if g.get("x0_clear") is not None
                     else f"never clearly, even at the largest {x_name}")
            parts.append(f"{who}{rel} holds from {x_name} = {fmt_x(g['x0'])} on only inside the tolerance band ({clear})")
        else:
            p = g["at_largest"]
            parts.append(f"{who}{rel} fails even at the largest {x_name}: "
                         + _point_text(p, c, left, right, x_name, "violation"))
    wanted = [p for p, g in zip(parts, n["from_x"].values()) if g["verdict"] == verdict] or parts
    return "; ".join(wanted)


def _reason_mean_relative_gap(c, verdict, n, x_name):
    left, right = n.get("left_curve", "left"), n.get("right_curve", "right")
    return f"mean relative gap ({right} − {left})/{right} over {n['points']} {x_name} values is " \
           f"{n['mean_relative_gap']:.1%} ({'≥' if verdict == 'pass' else '<'} {c['min']:.0%})"


def _reason_order(c, verdict, n, x_name):
    by, op = c["by"], OP_TEXT[c["op"]]
    chain = f" {op} ".join(f"{by} = {v}" for v in c["values"])
    if n["points"] == 0:
        return f"{chain}: nothing to compare"
    if verdict == "pass":
        return f"{chain} at all {n['points']} points (smallest margin {fmt(n['worst_margin'])})"
    at = n["worst_at"]
    a, b = at["pair"]
    where = _at({k: v for k, v in at.items() if k != "pair"}, x_name)
    ya, yb = n.get("worst_values", [math.nan, math.nan])
    what = "violates" if verdict == "fail" else "is within the tolerance of"
    return f"{where}, {by} = {a} gives {fmt(ya)} vs {by} = {b} {fmt(yb)}, which {what} {op}" + (
        f" ({n['violations']} of {n['points']} points violate it)" if verdict == "fail" else "")


def _reason_monotone(c, verdict, n, x_name):
    strict = c.get("strict", True)
    way = {("decreasing", True): "decreasing", ("decreasing", False): "non-increasing",
           ("increasing", True): "increasing", ("increasing", False): "non-decreasing"}[(c["direction"], strict)]
    tol = c.get("tol", 0.0)
    head = f"{n.get('curves', 'the curves')} {way} in {x_name}" + (" within the tolerance" if tol and _tol_for(c) else "")
    w = n.get("worst_step")
    if w is None:
        return head + ": nothing to compare"
    move = (w["to_y"] - w["from_y"])
    step = f"{w['group']} {'rises' if move > 0 else 'falls'} by {fmt(abs(move))} from {x_name} = {fmt_x(w['from_x'])} " \
           f"to {fmt_x(w['to_x'])} ({fmt(w['from_y'])} → {fmt(w['to_y'])})"
    every = {1: "", 2: " (both curves)"}.get(n["groups"], f" (all {n['groups']} curves)")
    if verdict == "pass":
        if w["step"] < 0:
            return f"{head}{every}; largest step the wrong way: {step}" + (
                f", within the tolerance {fmt_cfg(tol)}" if tol else "")
        return f"{head}{every}"
    if verdict == "fail":
        return f"{step}" + (f", beyond the tolerance {fmt_cfg(tol)}" if tol else "") + \
               f" ({n['violations']} such step{'s' if n['violations'] != 1 else ''})"
    return f"{step}, within the tolerance {fmt_cfg(tol)}"


def _bound_text(c) -> str:
    lo, hi = c.get("lower"), c.get("upper")
    lo_op = "<" if c.get("lower_strict") else "≤"
    hi_op = "<" if c.get("upper_strict") else "≤"
    if lo is not None and hi is not None:
        return f"{fmt_cfg(lo)} {lo_op} y {hi_op} {fmt_cfg(hi)}"
    return f"y {hi_op} {fmt_cfg(hi)}" if hi is not None else f"y {'>' if c.get('lower_strict') else '≥'} {fmt_cfg(lo)}"


def _reason_bounds(c, verdict, n, x_name):
    rel = _bound_text(c).replace("y", n.get("curve", "y"), 1)
    per = n["groups"]
    unit = _groups_word(c)

    def count(g, only=False):
        if g["needed"] >= g["points"] and not only:
            return f"at all {g['points']} {x_name} values"
        return f"at {'only ' if only else ''}{g['satisfied']} of {g['points']} {x_name} values ({g['needed']} needed)"

    def worst(g):
        w = g["worst"]
        return f"worst {fmt(w['value'])} at {x_name} = {fmt_x(w['x'])}"

    if len(per) == 1:
        g = next(iter(per.values()))
        if verdict == "pass":
            return f"{rel} {count(g)}"
        return f"{rel} {count(g, only=True)}" + (f", {g['within_tol']} more within the tolerance" if g["within_tol"] else "") \
            + f"; {worst(g)}"
    shared = "min_group_share" in c or "min_groups" in c
    if verdict == "pass":
        fewest = min(per.values(), key=lambda g: g["satisfied"])
        head = f"{rel} in {n['groups_passing']} of {len(per)} {unit} ({n['groups_needed']} needed)" if shared else \
            f"{rel} in all {len(per)} {unit}"
        return head + (f" (fewest: {fewest['satisfied']} of {fewest['points']} {x_name} values, {fewest['label']})"
                       if fewest["needed"] < fewest["points"] else "")
    bad = [g for g in per.values() if g["verdict"] == verdict]
    g = min(bad, key=lambda g: g["worst"]["margin"])
    head = f"{rel} {count(g, only=True)} in {g['label']}"
    if shared:
        return head + f": {n['groups_passing']} of {len(per)} {unit} pass ({n['groups_needed']} needed); {worst(g)}"
    return head + (f" (and {len(bad) - 1} more of the {len(per)} {unit})" if len(bad) > 1 else "") + f"; {worst(g)}"


def _reason_near(c, verdict, n, x_name):
    return f"at {x_name} = {fmt_x(n['x'])}, {n.get('curve', 'y')} is {fmt(n['value'])} vs the paper's " \
           f"{fmt_cfg(n['target'])} (relative error {n['rel_error']:.1%} {'≤' if verdict == 'pass' else '>'} " \
           f"{n['rel_tol']:.0%})"


def _reason_ratio(c, verdict, n, x_name):
    ratio = f"{n.get('numerator_curve', 'numerator')} / {n.get('denominator_curve', 'denominator')}"
    if "min_ratio" not in n:
        return f"{ratio}: {n.get('reason', 'nothing to compare')}"
    lo, hi = c.get("min"), c.get("max")
    bounds = " and ".join(s for s in (f"≥ {fmt_cfg(lo)}" if lo is not None else "",
                                       f"≤ {fmt_cfg(hi)}" if hi is not None else "") if s)
    span = f"{ratio} ranges from {fmt(n['min_ratio'])} ({x_name} = {fmt_x(n['at_x_min'])}) to {fmt(n['max_ratio'])} " \
           f"({x_name} = {fmt_x(n['at_x_max'])})"
    if verdict == "pass":
        return f"{span}, {bounds} at all {n['points']} points"
    return f"{span}: not {bounds} at {n['violations']} of {n['points']} points"


def _reason_successive_ratio(c, verdict, n, x_name):
    s = n.get("smallest")
    if s is None:
        return "fewer than two points"
    step = f"from {x_name} = {fmt_x(s['from_x'])} to {fmt_x(s['to_x'])} {n.get('curve', 'y')} grows ×{fmt(s['ratio'])}"
    if verdict == "pass":
        return f"{n.get('curve', 'y')} grows at least ×{fmt(s['ratio'])} per step (required ×{fmt_cfg(c['min'])})"
    return f"{step} < ×{fmt_cfg(c['min'])} ({n['violations']} step{'s' if n['violations'] != 1 else ''} too small)"


def _reason_crossing(c, verdict, n, x_name):
    first, second = n.get("first_curve", "first"), n.get("second_curve", "second")
    if verdict == "inconclusive":
        return f"neither {first} nor {second} reaches y = {x_name} on the grid"
    parts = []
    for key, g in n["crossings"].items():
        x1, x2 = g["first_crossing"], g["second_crossing"]
        who = "" if key == "all" else f"{', '.join(c.get('match_on', []))} = {key}: "
        t1 = f"at {x_name} = {fmt(x1)}" if x1 is not None else "not on the grid"
        t2 = f"at {x_name} = {fmt(x2)}" if x2 is not None else "not on the grid"
        parts.append(f"{who}{first} reaches y = {x_name} {t1}, {second} {t2}")
    return "; ".join(parts)


def _reason_slope(c, verdict, n, x_name):
    bounds = " and ".join(t for t in (f"≥ {fmt_cfg(c['min'])}" if "min" in c else "",
                                       f"≤ {fmt_cfg(c['max'])}" if "max" in c else "") if t)
    parts = []
    for key, g in n["groups"].items():
        who = "" if key == "all" else f"{key}: "
        parts.append(f"{who}log {n.get('curve', 'y')} grows with slope {fmt(g['slope'])} in log {x_name} over "
                     f"{x_name} = {fmt_x(g['x_from'])}…{fmt_x(g['x_to'])}{'' if g['inside'] else ', not ' + bounds}")
    return "; ".join(parts) + (f" (required {bounds})" if verdict == "pass" else "")


REASONS = {
    "compare": _reason_compare,
    "order": _reason_order,
    "monotone": _reason_monotone,
    "bounds": _reason_bounds,
    "near": _reason_near,
    "ratio": _reason_ratio,
    "successive_ratio": _reason_successive_ratio,
    "crossing": _reason_crossing,
    "eventually": _reason_eventually,
    "mean_relative_gap": _reason_mean_relative_gap,
    "slope": _reason_slope,
}


def check_reason(check: dict, verdict: str, numbers: dict, x_name: str = "x") -> str:
    """Why a check got its verdict, in words built from its numbers (without the leading verdict)."""
    return REASONS[check["kind"]](check, verdict, numbers, x_name)


def claim_reason(results: list[dict], verdict: str, data_source: str) -> str:
    """One sentence: the verdict and the reasons of the checks that decided it."""
    decisive = [r["reason"] for r in results if r["verdict"] == verdict] or [r["reason"] for r in results]
    body = "; ".join(decisive)
    if data_source == "standin":
        return f"stand-in data, not evidence (on the synthetic data it {VERB[verdict]}: {body})"
    return f"{VERB[verdict]}: {body}"


def evaluate_claim(df: pd.DataFrame, claim: dict, data_source: str, x_name: str = "x") -> dict:
    results = []
    for check in claim["checks"]:
        verdict, numbers = CHECKS[check["kind"]](df, check)
        results.append({"check": check, "verdict": verdict, "reason": check_reason(check, verdict, numbers, x_name),
                        "numbers": numbers})
    verdict = max((r["verdict"] for r in results), key=SEVERITY.get)
    return {
        "id": claim["id"],
        "claim": claim["claim"],
        "note": claim.get("note", ""),
        "verdict": "stand-in" if data_source == "standin" else verdict,
        "verdict_on_data": verdict,
        "reason": claim_reason(results, verdict, data_source),
        "checks": results,
    }


def evaluate(df: pd.DataFrame, claims: list[dict], data_source: str, x_name: str = "x") -> list[dict]:
    """Evaluate every claim of a figure; a check that cannot be evaluated raises ClaimSpecError. `x_name` names
    x in the reasons (e.g. "ε")."""
    return [evaluate_claim(df, claim, data_source, x_name) for claim in claims]


def x_name_of(df: pd.DataFrame, default: str = "x") -> str:
    """How the reasons name x: a parameter column equal to x on every row (e.g. kato2024's k), else `default`."""
    for col in df.columns:
        if col in ("x", "y", "paper", "figure", "panel", "curve") or not pd.api.types.is_numeric_dtype(df[col]):
            continue
        if np.allclose(df[col].to_numpy(float), df["x"].to_numpy(float), rtol=1e-12, atol=0, equal_nan=False):
            return col
    return default


# --------------------------------------------------------------------------------------------------
# causes: why a verdict is not a pass, where known
# --------------------------------------------------------------------------------------------------

CAUSES = {
    "stand-in": "synthetic stand-in data: not evidence either way",
    "documented-difference": "a documented difference between the paper and the authors' code",
    "reduced-scale": "a reduced-scale run: not the paper-scale result",
    "not-reproduced": "not reproduced: a finding at paper scale on real data",
}


def scale_reductions(paper_params: dict, params: dict, prefix: str = "") -> dict:
    """Settings whose value in this run differs from the paper's: {"trials": [paper, used], "step_grids.local.num":
    [...]} (only keys the paper file sets)."""
    out = {}
    for key, value in (paper_params or {}).items():
        used = params.get(key) if isinstance(params, dict) else None
        if isinstance(value, dict) and isinstance(used, dict):
            out.update(scale_reductions(value, used, f"{prefix}{key}."))
        elif used is not None and used != value:
            out[f"{prefix}{key}"] = [value, used]
    return out


def _reductions_text(scale: str, reductions: dict) -> str:
    shown = ", ".join(f"{k} {_short(v[1])} (paper {_short(v[0])})" for k, v in list(reductions.items())[:4])
    more = f" and {len(reductions) - 4} more" if len(reductions) > 4 else ""
    return f"scale '{scale}': {shown}{more}"


def _short(v) -> str:
    if isinstance(v, float):
        return fmt_cfg(v)
    text = str(v)
    return text if len(text) <= 24 else text[:21] + "…"


def cause_of(result: dict, *, data_source: str, scale: str, reductions: dict, mode: str = "none",
             other_verdict: str | None = None, difference: str = "") -> tuple[str | None, str]:
    """(cause, short text) of a claim's verdict: None for a pass; for the others, in this order: `stand-in`
    (synthetic data), `documented-difference` (in the default mode the authors-code variant of the same figure
    passes the claim: `other_verdict`; `difference` names it, e.g. the claim's note), `reduced-scale` (this run's
    settings differ from the paper's: `reductions`), else `not-reproduced` (a genuine finding at paper scale on real
    data)."""
    verdict = result["verdict"]
    if verdict == "pass":
        return None, ""
    if verdict == "stand-in" or data_source == "standin":
        return "stand-in", CAUSES["stand-in"]
    if mode == "none" and other_verdict == "pass":
        text = "the authors-code variant passes this claim"
        if difference:
            text += f": {difference}"
        if reductions:
            text += f" ({_reductions_text(scale, reductions)})"
        return "documented-difference", text
    if reductions:
        return "reduced-scale", f"{_reductions_text(scale, reductions)}; a reduced-scale verdict is not the paper-scale result"
    return "not-reproduced", CAUSES["not-reproduced"] + (f" (scale '{scale}')" if scale else "")


def summarize_check(check: dict) -> str:
    """A one-line human description of a check (for the report)."""
    c = {k: v for k, v in check.items() if k != "kind"}
    return f"{check['kind']}(" + ", ".join(f"{k}={v}" for k, v in c.items()) + ")"


def rounded(obj, digits: int = 4):
    """A copy of JSON-like numbers with floats rounded to `digits` significant digits (for display)."""
    if isinstance(obj, float):
        return float(f"{obj:.{digits}g}") if math.isfinite(obj) else obj
    if isinstance(obj, dict):
        return {k: rounded(v, digits) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [rounded(v, digits) for v in obj]
    return obj
