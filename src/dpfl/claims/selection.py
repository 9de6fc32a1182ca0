"""Rows of a figure's tidy table for the checks (dpfl.claims): choosing them by column values (`select`),
naming them for the reasons, pairing the left and right selections of a comparison, and the pointwise and
per-group tallies (tolerance, verdict) the check kinds share."""

from __future__ import annotations

import math
import operator

import numpy as np
import pandas as pd

OPS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}  # and "abs<=" (compare)
SEVERITY = {"pass": 0, "inconclusive": 1, "fail": 2}


class ClaimSpecError(ValueError):
    """A claim's check refers to rows or columns the table does not have."""


class NoRowsError(ClaimSpecError):
    """A check's selection finds no rows in the table, or its two selections share no point to compare. Not a
    malformed claim (the configuration schema rejects those before any job runs) but a table whose settings do not
    produce the rows the claim selects (e.g. a σ edited out of the grid): dpfl.claims.verdicts makes the claim
    `inconclusive`, with a reason naming the selection and the values the table holds (describe_no_rows).

    `selections`: {name ("left", "select", "q = 0.5", ...): selector} of the selections involved; `unpaired`: the
    columns the two selections were to be paired on (x and `match_on`), when each found rows but they share none;
    `x`: the x a `near` check looks for."""

    def __init__(self, message: str, selections: dict[str, dict], where_x: dict | None = None, *,
                 unpaired: list[str] | None = None, x: float | None = None):
        super().__init__(message)
        self.selections, self.where_x, self.unpaired, self.x = selections, where_x or {}, unpaired, x


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


def _need_rows(d: pd.DataFrame, what: str, check: dict, selector: dict | None = None, x: float | None = None) -> None:
    """Raise NoRowsError when the selection `what` (its selector, and the check's where_x) found no rows."""
    if d.empty:
        at = "" if x is None else f" at x = {x}"
        raise NoRowsError(f"{what} selects no rows{at} (check {check})", {what: dict(selector or {})},
                          check.get("where_x"), x=x)


def describe_no_rows(df: pd.DataFrame, exc: NoRowsError, limit: int = 12) -> dict:
    """The numbers behind a check that selected no rows: its selections, which selected values the table does not
    hold at all (`absent`), the values the table holds in every selected column (`table_values`, at most `limit`
    each, with `values_in_table` their counts), and where_x / the x of a `near` check / the unpaired columns with the
    values each side has there."""
    columns = {col: None for sel in exc.selections.values() for col in sel}
    absent, values, counts = {}, {}, {}
    for col in columns:
        if col not in df:
            continue
        present = _distinct(df[col])
        counts[col] = len(present)
        values[col] = present[:limit]
        for sel in exc.selections.values():
            if col in sel:
                wanted = sel[col] if isinstance(sel[col], list) else [sel[col]]
                missing = [v for v in wanted if not _matches(df[col], v).any()]
                if missing:
                    absent[col] = sorted({_py(v) for v in missing}, key=str)
    out = {"selections": exc.selections, "absent": absent, "table_values": values, "values_in_table": counts}
    if exc.where_x:
        out["where_x"] = exc.where_x
        rows = [select(df, sel) for sel in exc.selections.values()]
        xs = pd.concat(rows)["x"] if any(len(r) for r in rows) else pd.Series(dtype=float)
        out["x_without_where_x"] = [float(v) for v in sorted(xs.unique())][:limit]
    if exc.x is not None:
        out["x"] = exc.x
        sel = next(iter(exc.selections.values()))
        out["x_in_selection"] = [float(v) for v in sorted(select(df, sel)["x"].unique())][:limit]
    if exc.unpaired:
        out["unpaired"] = exc.unpaired
        out["paired_values"] = {name: {k: _distinct(select(df, sel, exc.where_x)[k])[:limit] for k in exc.unpaired
                                       if k in df}
                                for name, sel in exc.selections.items()}
    return out


def _distinct(series: pd.Series) -> list:
    """The distinct values of a column, sorted (numbers as numbers), NaN left out."""
    vals = [_py(v) for v in series.dropna().unique()]
    try:
        return sorted(vals)
    except TypeError:
        return sorted(vals, key=str)


def count_verdict(wins: int, ties: int, needed: int) -> str:
    """The one comparison rule of every "better than" claim (spec README §D7). At each point A vs B is a win (A
    better by more than the tolerance), a loss (B better by more than the tolerance) or a tie; a tie is never a win.
    A claim that needs `needed` points (or panels) passes when the wins alone reach it, fails when even counting
    every tie as a win cannot reach it, and is inconclusive otherwise (it hinges on ties). "At every point" is
    needed = all points: any loss fails, a tie without a loss is inconclusive."""
    if wins >= needed:
        return "pass"
    return "inconclusive" if wins + ties >= needed else "fail"


def _verdict(violations: int, within_tol: int) -> str:
    """"At every point" (count_verdict with every point needed): any loss fails, a tie without a loss is
    inconclusive."""
    return "fail" if violations else ("inconclusive" if within_tol else "pass")


def _tol_for(c) -> bool:
    """`tol_counts: for` (only `monotone` accepts it: "non-increasing in ε within tol", a weak property that the
    spec states with its tolerance): a step within the tolerance satisfies it. Every "better than" comparison
    counts a point within the tolerance as a tie (count_verdict), never for the claim."""
    return c.get("tol_counts", "inconclusive") == "for"


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
    return ", ".join(f"{k} = {'/'.join(map(str, v)) if isinstance(v, list) else v}"
                     for k, v in (selector or {}).items())


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
# pairing and tallies shared by the check kinds
# --------------------------------------------------------------------------------------------------


def _pairs(df, c, keys, se: bool = False, columns: tuple[str, str] | None = None, base: dict | None = None):
    """Rows of the left and right selections paired on x and `match_on` (columns *_left, *_right; with
    `se`, also se_left and se_right), and the curve labels of the two selections. `columns`: the table columns
    compared on each side (default both `column`), named `column` in the pair; `base`: the selection both sides
    share (default the check's `select`)."""
    col = c.get("column", "y")
    extra = ["se"] if se else []
    lcol, rcol = columns or (col, col)
    base = c.get("select", {}) if base is None else base
    lsel, rsel = {**base, **c["left"]}, {**base, **c["right"]}
    left = select(df, lsel, c.get("where_x"))
    right = select(df, rsel, c.get("where_x"))
    _need_rows(left, "left", c, lsel)
    _need_rows(right, "right", c, rsel)
    for side, column in (("left", lcol), ("right", rcol)):
        if column not in df:
            raise ClaimSpecError(f"{side} column {column!r} is not in the table (columns: {', '.join(df.columns)})")
    pair = left[keys + [lcol] + extra].rename(columns={lcol: col}).merge(
        right[keys + [rcol] + extra].rename(columns={rcol: col}), on=keys, suffixes=("_left", "_right"))
    if pair.empty:
        raise NoRowsError(f"left and right share no {keys} values (check {c})", {"left": lsel, "right": rsel},
                          c.get("where_x"), unpaired=keys)
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


def _rel_tolerance(lhs, rhs, c) -> np.ndarray:
    """Per-point tolerance of `rel_tol` (compare): rel_tol·min(|left|, |right|) of the compared values (right after
    factor and offset). Symmetric, so that writing the claim the other way round changes nothing; for values of one
    sign it is |ln(left/right)| ≤ ln(1 + rel_tol), the larger within (1 + rel_tol)× the smaller (the spec's "5%
    relative" on excess risk, judged on the plotted values); values of opposite signs are never within it
    (for rel_tol < 2)."""
    lhs, rhs = np.asarray(lhs, float), np.asarray(rhs, float)
    return float(c.get("rel_tol") or 0.0) * np.minimum(np.abs(lhs), np.abs(rhs))


def rel_difference(lhs, rhs):
    """|left − right| / min(|left|, |right|): the relative difference that `rel_tol` bounds (0 for two zeros, ∞ for
    a zero against a non-zero)."""
    lhs, rhs = np.asarray(lhs, float), np.asarray(rhs, float)
    diff, small = np.abs(lhs - rhs), np.minimum(np.abs(lhs), np.abs(rhs))
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(diff == 0, 0.0, diff / small)
    return out if out.ndim else float(out)


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
        clear = int((g["_ok"] & ~g["_near"]).sum())  # wins: satisfied by more than the tolerance
        close = int(g["_near"].sum())  # ties: within the tolerance, either way
        v = count_verdict(clear, close, need)
        per_group[_group_key(name)] = {"verdict": v, "satisfied": clear, "within_tol": close,
                                       "losses": n - clear - close, "points": n, "needed": need}
    verdicts = [g["verdict"] for g in per_group.values()]
    losses = sum(g["losses"] for g in per_group.values())
    if groups and ("min_group_share" in c or "min_groups" in c):
        need = groups_needed(c, len(verdicts))
        n_pass = verdicts.count("pass")
        verdict = count_verdict(n_pass, verdicts.count("inconclusive"), need)
        out = {"groups": per_group, "groups_needed": need, "groups_passing": n_pass}
    else:
        verdict, out = max(verdicts, key=SEVERITY.get), {"groups": per_group}
    if "max_losses" in c:  # e.g. "a win in ≥ 75% of panels and a loss in none" (kato2024's C-K4f)
        out.update(losses=losses, max_losses=c["max_losses"])
        if losses > c["max_losses"]:
            verdict = "fail"
    return verdict, out


def groups_needed(c, n_groups: int) -> int:
    """How many groups must pass: `min_groups`, or `min_group_share` of them (default all)."""
    share = c.get("min_group_share", 1.0)
    return int(c.get("min_groups", 0)) or math.ceil(share * n_groups - 1e-9)


def _point(pair, i: int, keys: list[str], lhs, rhs, margin, tol) -> dict:
    """One compared point: where (x and the pairing columns that vary), both sides, margin and tolerance."""
    return {"at": {k: _py(pair[k].iloc[i]) for k in keys if k == "x" or pair[k].nunique() > 1},
            "left": float(lhs[i]), "right": float(rhs[i]), "margin": float(margin[i]), "tolerance": float(tol[i])}


def _groups(d: pd.DataFrame, group_by: list[str]):
    if not group_by:
        yield "all", d
        return
    for key, g in d.groupby(group_by, sort=True):
        yield "/".join(map(str, key if isinstance(key, tuple) else (key,))), g


def _py(v):
    return v.item() if hasattr(v, "item") else v
