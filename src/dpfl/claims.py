"""Machine checks of the papers' claims on a figure's tidy table (spec D7).

A claim (config/papers/<id>.yaml, `claims:`) is a list of checks; each check is one comparison of
rows of the table, chosen by column values ("selectors"). Verdicts:
  pass          every compared point satisfies the claim;
  fail          some point violates it by more than the tolerance;
  inconclusive  no violation beyond the tolerance, but some point is within it (or nothing to compare);
  stand-in      the table was computed on synthetic stand-in data: not evidence (the underlying verdict
                is kept in `verdict_on_data`).
A claim's verdict is the worst of its checks (fail > inconclusive > pass). Each check returns the
numbers behind its verdict so that a reader can judge the margin.

Check kinds (keys in brackets are optional; `CHECK_KEYS` below is the exact list of each kind's keys, and
the configuration schema of a check is generated from it by `check_schema()`):
  compare           left OP factor·right, pointwise on x [match_on: other columns that pair rows;
                    op "abs<=" with max_diff: |left − right| ≤ max_diff; at: first|last (only the
                    smallest/largest x); min_points: how many points must satisfy it (default all);
                    group_by + min_group_share | min_groups: how many groups must pass; tol_se: the
                    tolerance is at least the standard error of the difference (column se)]
  eventually        some grid x0 exists with the comparison holding at every x ≥ x0 (reports x0)
                    [match_on, at, factor, op "abs<=" with max_diff, tol_se, group_by: as compare]
  mean_relative_gap mean of (right − left)/right ≥ min [match_on, at]
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
tolerance: a violation within it makes the check inconclusive instead of failed). Any check may carry
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


def _pointwise(lhs: np.ndarray, rhs: np.ndarray, op: str, tol: float) -> dict:
    """Evaluate lhs OP rhs pointwise; margin > 0 means satisfied (in the units of the values)."""
    lhs, rhs = np.asarray(lhs, float), np.asarray(rhs, float)
    margin = (rhs - lhs) if op in ("<", "<=") else (lhs - rhs)
    ok = OPS[op](lhs, rhs)
    near = np.abs(margin) <= tol if tol > 0 else np.zeros(len(lhs), bool)
    violations = int(np.sum(~ok & ~near))
    within = int(np.sum(near))
    return {"ok": ok, "margin": margin, "violations": violations, "within_tol": within}


# --------------------------------------------------------------------------------------------------
# check kinds
# --------------------------------------------------------------------------------------------------


def _pairs(df, c, keys, se: bool = False):
    """Rows of the left and right selections paired on x and `match_on` (columns *_left, *_right; with
    `se`, also se_left and se_right)."""
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
    return pair.reset_index(drop=True)


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
        key = "/".join(map(str, name)) if isinstance(name, tuple) else str(name)
        per_group[key] = {"verdict": v, "satisfied": clear, "within_tol": close, "points": n, "needed": need}
    verdicts = [g["verdict"] for g in per_group.values()]
    if groups and ("min_group_share" in c or "min_groups" in c):
        need = c.get("min_groups", 0) or math.ceil(c.get("min_group_share", 1.0) * len(verdicts) - 1e-9)
        n_pass = verdicts.count("pass")
        n_maybe = verdicts.count("inconclusive")
        verdict = "pass" if n_pass >= need else ("inconclusive" if n_pass + n_maybe >= need else "fail")
        return verdict, {"groups": per_group, "groups_needed": need, "groups_passing": n_pass}
    return max(verdicts, key=SEVERITY.get), {"groups": per_group}


def _check_compare(df, c):
    col = c.get("column", "y")
    groups = c.get("group_by", [])
    keys = ["x"] + sorted(set(c.get("match_on", [])) | set(groups))
    pair = _pairs(df, c, keys, se=c.get("tol_se", False))
    factor = c.get("factor", 1.0)
    tol = _tolerance(pair, c)
    margin, ok, near = _status(pair[f"{col}_left"], factor * pair[f"{col}_right"], c["op"], tol, c.get("max_diff"))
    verdict, numbers = _reduce_groups(pair, groups, ok, near, c)
    worst = int(np.argmin(margin))
    numbers.update({
        "points": len(pair),
        "violations": int(np.sum(~ok & ~near)),
        "worst_margin": float(margin[worst]),
        "worst_at": {k: _py(pair[k].iloc[worst]) for k in keys},
        "left_at_worst": float(pair[f"{col}_left"].iloc[worst]),
        "right_at_worst": float(factor * pair[f"{col}_right"].iloc[worst]),
        "tolerance_at_worst": float(tol[worst]),
    })
    return verdict, numbers


def _check_eventually(df, c):
    """There is a grid value x0 such that the comparison holds at every x ≥ x0 (e.g. "for ε ≥ ?, the
    private method is as good as the non-private one"); reports x0 per group."""
    col = c.get("column", "y")
    groups = c.get("group_by", [])
    keys = ["x"] + sorted(set(c.get("match_on", [])) | set(groups))
    pair = _pairs(df, c, keys, se=c.get("tol_se", False))
    margin, ok, near = _status(pair[f"{col}_left"], c.get("factor", 1.0) * pair[f"{col}_right"], c["op"],
                               _tolerance(pair, c), c.get("max_diff"))
    frame = pair.assign(_ok=ok | near, _strict=ok & ~near)
    out, verdicts = {}, []
    for name, g in (frame.groupby(groups, sort=True) if groups else [("all", frame)]):
        g = g.sort_values("x")
        x0 = None
        for i in range(len(g)):
            if g["_ok"].iloc[i:].all():
                x0 = float(g["x"].iloc[i])
                strict = bool(g["_strict"].iloc[i:].all())
                break
        verdicts.append("fail" if x0 is None else ("pass" if strict else "inconclusive"))
        out["/".join(map(str, name)) if isinstance(name, tuple) else str(name)] = {"x0": x0}
    return max(verdicts, key=SEVERITY.get), {"from_x": out}


def _check_mean_relative_gap(df, c):
    """mean over paired points of (right − left)/right ≥ min (e.g. "significantly outperforms")."""
    col = c.get("column", "y")
    keys = ["x"] + c.get("match_on", [])
    pair = _pairs(df, c, keys)
    gap = ((pair[f"{col}_right"] - pair[f"{col}_left"]) / pair[f"{col}_right"]).to_numpy(float)
    value = float(np.mean(gap))
    return ("pass" if value >= c["min"] else "fail"), {"mean_relative_gap": value, "min": c["min"],
                                                       "per_point": [float(v) for v in gap]}


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
        _need_rows(lo, f"{c['by']} = {a}", c)
        _need_rows(hi, f"{c['by']} = {b}", c)
        pair = lo[keys + [col]].merge(hi[keys + [col]], on=keys, suffixes=("_a", "_b"))
        res = _pointwise(pair[f"{col}_a"], pair[f"{col}_b"], c["op"], tol)
        total["points"] += len(pair)
        total["violations"] += res["violations"]
        total["within_tol"] += res["within_tol"]
        if len(pair):
            i = int(np.argmin(res["margin"]))
            if res["margin"][i] < total["worst_margin"]:
                total["worst_margin"] = float(res["margin"][i])
                total["worst_at"] = {"pair": [_py(a), _py(b)], **{k: _py(pair[k].iloc[i]) for k in keys}}
    if total["points"] == 0:
        return "inconclusive", {**total, "reason": "nothing to compare"}
    return _verdict(total["violations"], total["within_tol"]), total


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
    out = {"groups": 0, "violations": 0, "within_tol": 0, "min_step": None, "worst_group": None}
    worst = np.inf
    for name, g in _groups(d, c.get("group_by", [])):
        y = g.sort_values("x")[col].to_numpy(float)
        steps = np.diff(y) if c["direction"] == "increasing" else -np.diff(y)
        # D7: a step within the tolerance is inconclusive (for a weak claim only if it goes the wrong way)
        near = np.abs(steps) <= tol if tol > 0 else np.zeros(len(steps), bool)
        broken = (steps <= 0) if strict else (steps < 0)
        bad = broken & ~near
        out["groups"] += 1
        out["violations"] += int(bad.sum())
        out["within_tol"] += int((near if strict else near & broken).sum())
        if len(steps) and steps.min() < worst:
            worst, out["worst_group"] = float(steps.min()), name
    out["min_step"] = None if worst == np.inf else worst
    return _verdict(out["violations"], out["within_tol"]), out


def _side(d: pd.DataFrame, bound):
    if bound is None:
        return None
    return d[bound].to_numpy(float) if isinstance(bound, str) else np.full(len(d), float(bound))


def _check_bounds(df, c):
    """lower ≤ value ≤ upper at every point, or at `min_points` points (per group with group_by;
    with min_group_share / min_groups, that many groups must pass)."""
    col = c.get("column", "y")
    tol = c.get("tol", 0.0)
    d = select(df, c.get("select"), c.get("where_x")).reset_index(drop=True)
    _need_rows(d, "select", c)
    v = d[col].to_numpy(float)
    ok = ~np.isnan(v)
    near = np.zeros(len(d), bool)
    out = {"points": len(d), "min": float(np.nanmin(v)), "max": float(np.nanmax(v))}
    for side, key, strict_key in ((_side(d, c.get("lower")), "lower", "lower_strict"),
                                  (_side(d, c.get("upper")), "upper", "upper_strict")):
        if side is None:
            continue
        margin = (v - side) if key == "lower" else (side - v)  # > 0: inside
        ok &= (margin > 0) if c.get(strict_key) else (margin >= 0)
        if tol > 0:
            near |= np.abs(margin) <= tol
        out[f"min_margin_{key}"] = float(np.nanmin(margin))
    verdict, numbers = _reduce_groups(d, c.get("group_by", []), ok, near, c)
    out["violations"], out["within_tol"] = int(np.sum(~ok & ~near)), int(near.sum())
    return verdict, {**out, **numbers}


def _check_near(df, c):
    col = c.get("column", "y")
    d = select(df, c.get("select"))
    d = d[np.isclose(d["x"], c["x"])]
    _need_rows(d, f"x = {c['x']}", c)
    value = float(d[col].iloc[0])
    rel = abs(value - c["target"]) / abs(c["target"])
    return ("pass" if rel <= c["rel_tol"] else "fail"), {
        "x": c["x"], "value": value, "target": c["target"], "rel_error": rel, "rel_tol": c["rel_tol"]}


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
    how = c.get("interpolate", "none")
    xs = np.union1d(num["x"], den["x"]) if how != "none" else np.intersect1d(num["x"], den["x"])
    all_num, all_den = select(df, {**c.get("select", {}), **c["numerator"]}), select(df, {**c.get("select", {}), **c["denominator"]})
    ratio = _curve_at(all_num, xs, col, how) / _curve_at(all_den, xs, col, how)
    keep = np.isfinite(ratio)
    xs, ratio = xs[keep], ratio[keep]
    if len(xs) == 0:
        return "inconclusive", {"reason": "no x where both sides are defined"}
    bad = np.zeros(len(xs), bool)
    if "min" in c:
        bad |= ratio < c["min"]
    if "max" in c:
        bad |= ratio > c["max"]
    i_max, i_min = int(np.argmax(ratio)), int(np.argmin(ratio))
    return ("fail" if bad.any() else "pass"), {
        "points": len(xs), "violations": int(bad.sum()), "min_ratio": float(ratio[i_min]), "at_x_min": float(xs[i_min]),
        "max_ratio": float(ratio[i_max]), "at_x_max": float(xs[i_max]), "bounds": [c.get("min"), c.get("max")],
        "interpolate": how, "violating_x": [float(v) for v in xs[bad]]}


def _check_successive_ratio(df, c):
    col = c.get("column", "y")
    d = select(df, c.get("select"), c.get("where_x")).sort_values("x")
    _need_rows(d, "select", c)
    y = d[col].to_numpy(float)
    ratios = y[1:] / y[:-1]
    bad = ratios < c["min"]
    return ("fail" if bad.any() else "pass"), {
        "ratios": {f"{_py(a)}->{_py(b)}": float(r) for a, b, r in zip(d["x"].iloc[:-1], d["x"].iloc[1:], ratios)},
        "min": c["min"], "violations": int(bad.sum())}


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
        return "inconclusive", {"crossings": out, "reason": "no curve crosses the line on the grid"}
    return max(verdicts, key=SEVERITY.get), {"crossings": out}


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
                         (*_ROWS, "match_on", "at", "factor", "max_diff", "tol", "tol_se", *_GROUP_SHARE)),
    "order": CheckKeys(("by", "values", "op"), (*_ROWS, "tol", "group_by")),
    "monotone": CheckKeys(("direction",), (*_ROWS, "strict", "tol", "group_by")),
    "bounds": CheckKeys((), (*_ROWS, "lower", "upper", "lower_strict", "upper_strict", "tol", *_GROUP_SHARE),
                        at_least_one=("lower", "upper")),
    "near": CheckKeys(("x", "target", "rel_tol"), ("select", "column")),
    "ratio": CheckKeys(("numerator", "denominator"), (*_ROWS, "min", "max", "interpolate"),
                       at_least_one=("min", "max")),
    "successive_ratio": CheckKeys(("min",), _ROWS),
    "crossing": CheckKeys(("first", "second"), (*_ROWS, "match_on", "line")),
    "eventually": CheckKeys(("left", "right", "op"),
                            (*_ROWS, "match_on", "at", "factor", "max_diff", "tol", "tol_se", "group_by")),
    "mean_relative_gap": CheckKeys(("left", "right", "min"), (*_ROWS, "match_on", "at")),
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
    "direction": {"enum": ["increasing", "decreasing"]},
    "strict": {"type": "boolean"},
    "lower": {"type": ["number", "string"], "description": "a number or a column name"},
    "upper": {"type": ["number", "string"], "description": "a number or a column name"},
    "lower_strict": {"type": "boolean"},
    "upper_strict": {"type": "boolean"},
    "x": {"type": "number"},
    "target": {"type": "number"},
    "rel_tol": {"type": "number", "minimum": 0},
    "tol": {"type": "number", "minimum": 0, "description": "differences below this are inconclusive"},
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


def evaluate_claim(df: pd.DataFrame, claim: dict, data_source: str) -> dict:
    results = []
    for check in claim["checks"]:
        verdict, numbers = CHECKS[check["kind"]](df, check)
        results.append({"check": check, "verdict": verdict, "numbers": numbers})
    verdict = max((r["verdict"] for r in results), key=SEVERITY.get)
    out = {
        "id": claim["id"],
        "claim": claim["claim"],
        "note": claim.get("note", ""),
        "verdict": "stand-in" if data_source == "standin" else verdict,
        "verdict_on_data": verdict,
        "checks": results,
    }
    return out


def evaluate(df: pd.DataFrame, claims: list[dict], data_source: str) -> list[dict]:
    """Evaluate every claim of a figure; a check that cannot be evaluated raises ClaimSpecError."""
    return [evaluate_claim(df, claim, data_source) for claim in claims]


def summarize_check(check: dict) -> str:
    """A one-line human description of a check (for the report)."""
    c = {k: v for k, v in check.items() if k != "kind"}
    return f"{check['kind']}(" + ", ".join(f"{k}={v}" for k, v in c.items()) + ")"
