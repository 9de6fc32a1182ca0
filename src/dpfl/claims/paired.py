"""The check kinds of a claim (dpfl.claims) that pair the points of two selections, left and right, on x and the
`match_on` columns (dpfl.claims.selection's pairing): compare ("A better than B", with the tolerance of each point
and the tallies per group), eventually ("from some x on") and mean_relative_gap. A module of their own: they share
the pairing and the left/right numbers their reasons quote; dpfl.claims.checks lists them with the other kinds in
CHECKS."""

from __future__ import annotations

import numpy as np
import pandas as pd

from dpfl.claims.selection import (
    SEVERITY,
    ClaimSpecError,
    _group_key,
    _group_label,
    _pairs,
    _point,
    _py,
    _reduce_groups,
    _rel_tolerance,
    _status,
    _tolerance,
    rel_difference,
)


def _count_groups(c) -> list[str]:
    """The groups a compare check tallies separately: `group_by`; with `min_points` and no group_by, the `match_on`
    columns, so that "at ≥ N points" holds per panel (e.g. bietti2022's C-B2-1: at ≥ 1 ε in every panel) rather
    than over all panels together."""
    if c.get("group_by"):
        return list(c["group_by"])
    return list(c.get("match_on", [])) if "min_points" in c else []


def _figure_parts(df, c) -> list[tuple[pd.DataFrame, dict, str]]:
    """(rows, shared selection, op) of a compare check: the whole table with the check's `select` and `op`, or with
    `per_figure` ({figure: {select, op}}), the rows of each named figure with its selection merged into `select` and
    its op (e.g. a loss panel, lower is better), and the other figures' rows with the check's own."""
    base, op = c.get("select", {}), c["op"]
    over = c.get("per_figure") or {}
    if not over:
        return [(df, base, op)]
    if "figure" not in df:
        raise ClaimSpecError("per_figure needs the table's figure column")
    figure = df["figure"].astype(str)
    parts = [(df[~figure.isin(list(over))], base, op)]
    parts += [(df[figure == f], {**base, **o.get("select", {})}, o.get("op", op)) for f, o in over.items()]
    return [p for p in parts if not p[0].empty] or [(df, base, op)]


def _check_compare(df, c):
    """left OP factor·right + offset at every paired point, or (min_points) clearly at ≥ N points of each group
    (_count_groups): fewer clear points, but enough with those within the tolerance, is inconclusive.
    `left_column` / `right_column` compare different columns of the two sides (e.g. |gap| against the signed gap);
    `per_figure` changes the selection and op on some figures' rows (_figure_parts). The tolerance of a point is
    the largest of `tol`, the standard error (tol_se) and `rel_tol`·min(|left|, |right|) (_rel_tolerance)."""
    col = c.get("column", "y")
    groups = _count_groups(c)
    keys = ["x"] + sorted(set(c.get("match_on", [])) | set(groups))
    columns = (c.get("left_column", col), c.get("right_column", col))
    factor = c.get("factor", 1.0)
    pieces = []
    for rows, base, op in _figure_parts(df, c):
        pair, curves = _pairs(rows, c, keys, se=c.get("tol_se", False), columns=columns, base=base)
        lhs = pair[f"{col}_left"].to_numpy(float)
        rhs = factor * pair[f"{col}_right"].to_numpy(float) + c.get("offset", 0.0)
        tol = np.maximum(_tolerance(pair, c), _rel_tolerance(lhs, rhs, c))
        pieces.append((pair, curves, tol, lhs, rhs, *_status(lhs, rhs, op, tol, c.get("max_diff"))))
    pair = pd.concat([p[0] for p in pieces], ignore_index=True)
    left_curve, right_curve = pieces[0][1]
    tol, lhs, rhs, margin, ok, near = (np.concatenate([p[i] for p in pieces]) for i in range(2, 8))
    within = near.copy()
    verdict, numbers = _reduce_groups(pair, groups, ok, near, c)
    relative = "rel_tol" in c  # the reasons then quote relative differences (rel_difference)
    rel = rel_difference(lhs, rhs) if relative else None
    frame = pair.assign(_i=np.arange(len(pair)))
    for name, g in (frame.groupby(groups, sort=True) if groups else [("all", frame)]):
        idx = g["_i"].to_numpy()
        entry = numbers["groups"][_group_key(name)]
        entry["label"] = _group_label(g, groups, pair) if groups else "all"
        entry["worst"] = _point(pair, int(idx[np.argmin(margin[idx])]), keys, lhs, rhs, margin, tol)
        entry["best"] = _point(pair, int(idx[np.argmax(margin[idx])]), keys, lhs, rhs, margin, tol)
        inside = idx[within[idx]]
        if len(inside):
            entry["within_tol_points"] = int(len(inside))
            entry["within_tol_margins"] = [float(margin[inside].min()), float(margin[inside].max())]
            if relative:
                entry["within_tol_relative_differences"] = [float(rel[inside].min()), float(rel[inside].max())]
    worst = int(np.argmin(margin))
    numbers.update({
        "group_by": groups,
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
    if relative:
        numbers["relative_difference_at_worst"] = float(rel[worst])
    return verdict, numbers


def _check_eventually(df, c):
    """"From some grid x0 on, A is better than B" (e.g. "for ε ≥ ?, the private method outperforms the non-private
    one"), per group, by the rule of count_verdict: pass when some x0 has a win at every x ≥ x0 (reported: the
    smallest such x0), fail when the largest x is a loss (no x0 can exist, even counting ties as wins), inconclusive
    otherwise (the largest x is a tie). For op "abs<=" (an equivalence, "in line with") a point within max_diff is a
    win."""
    col = c.get("column", "y")
    groups = c.get("group_by", [])
    keys = ["x"] + sorted(set(c.get("match_on", [])) | set(groups))
    pair, (left_curve, right_curve) = _pairs(df, c, keys, se=c.get("tol_se", False))
    tol = _tolerance(pair, c)
    lhs, rhs = pair[f"{col}_left"].to_numpy(float), c.get("factor", 1.0) * pair[f"{col}_right"].to_numpy(float)
    margin, ok, near = _status(lhs, rhs, c["op"], tol, c.get("max_diff"))
    frame = pair.assign(_win=ok & ~near, _loss=~ok & ~near, _i=np.arange(len(pair)))
    out, verdicts = {}, []
    for name, g in (frame.groupby(groups, sort=True) if groups else [("all", frame)]):
        g = g.sort_values("x")
        wins = g["_win"].to_numpy()
        x0 = None
        for i in range(len(g)):
            if wins[i:].all():
                x0 = float(g["x"].iloc[i])
                break
        v = "pass" if x0 is not None else ("fail" if g["_loss"].iloc[-1] else "inconclusive")
        verdicts.append(v)
        out[_group_key(name)] = {
            "x0": x0, "verdict": v, "wins": int(wins.sum()), "ties": int((~g["_win"] & ~g["_loss"]).sum()),
            "losses": int(g["_loss"].sum()),
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
