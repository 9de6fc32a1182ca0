"""Reasons (dpfl.claims): one sentence per check, built from the numbers its check kind returned (REASONS: one
builder per kind; check_reason). The sentence of a claim and of a check whose selection found no rows are in
dpfl.claims.claim_reasons; the number formats both use in dpfl.claims.formats."""

from __future__ import annotations

import math

from dpfl.claims.formats import fmt, fmt_cfg, fmt_pct, fmt_pct_cfg, fmt_x
from dpfl.claims.selection import _selector_text, _tol_for, rel_difference

OP_TEXT = {"<": "<", "<=": "≤", ">": ">", ">=": "≥"}
NOT_OP = {"<": "≥", "<=": ">", ">": "≤", ">=": "<"}


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
    if _tol_for(c) and (c.get("tol") or c.get("tol_se") or c.get("rel_tol")):
        plus = " + tol" if c["op"] in ("<", "<=") else " − tol"
    return left, right, f"{left} {OP_TEXT[c['op']]} {right}{plus}"


def _relative(p: dict, c: dict) -> tuple[str, bool]:
    """With rel_tol: ("relative difference 4.96%", whether rel_tol set the point's tolerance), else ("", False)."""
    if "rel_tol" not in c:
        return "", False
    rel_tol = float(c["rel_tol"] or 0.0)
    tol = p["tolerance"]
    governs = tol > 0 and rel_tol * min(abs(p["left"]), abs(p["right"])) >= tol * (1 - 1e-12)
    return f"relative difference {fmt_pct(rel_difference(p['left'], p['right']))}", governs


def _point_text(p: dict, c: dict, left: str, right: str, x_name: str, how: str) -> str:
    """One compared point: `how` = violation | within | closest. With rel_tol, the relative difference, against
    rel_tol where that set the point's tolerance (else the absolute tolerance that did)."""
    text = f"{_at(p['at'], x_name)}, {left} {fmt(p['left'])} vs {right} {fmt(p['right'])}"
    diff, tol = abs(p["left"] - p["right"]), p["tolerance"]
    rel, governs = _relative(p, c)
    if how == "closest":
        return f"{_at(p['at'], x_name)}: {fmt(p['left'])} vs {fmt(p['right'])}" + (f", {rel}" if rel else "")
    if how == "within":
        if governs:
            return text + f", {rel} within the tolerance {fmt_pct_cfg(c['rel_tol'])}"
        return text + f", difference {fmt(diff)} within the tolerance {fmt(tol)}" + (f" ({rel})" if rel else "")
    if c["op"] == "abs<=":
        return (text + f", |difference| {fmt(diff)} > {fmt_cfg(c['max_diff'])}"
                + (f" + tolerance {fmt(tol)}" if tol else ""))
    if governs:
        return text + f", {rel} > tolerance {fmt_pct_cfg(c['rel_tol'])}"
    if tol:
        return text + f", difference {fmt(diff)} > tolerance {fmt(tol)}" + (f" ({rel})" if rel else "")
    return text + f", so {left} {NOT_OP[c['op']]} {right}"


def _points_word(c: dict, x_name: str) -> str:
    return "points" if (set(c.get("match_on", [])) | set(c.get("group_by", []))) else f"{x_name} values"


def _groups_word(c: dict, groups: list[str] | None = None) -> str:
    """What the groups of a check are called: panels (grouped by panel alone) or groups."""
    return "panels" if (c.get("group_by") if groups is None else groups) == ["panel"] else "groups"


def _count_text(g: dict, c: dict, x_name: str) -> str:
    pts, need, sat = g["points"], g["needed"], g["satisfied"]
    word = _points_word(c, x_name)
    if need >= pts:
        return f"at all {pts} {word}" if pts > 1 else ""
    return f"at {sat} of {pts} {word} ({need} needed)"


def _within_note(g: dict) -> str:
    """The points of a passing group only within the tolerance: their margins, or with rel_tol their relative
    differences."""
    k = g.get("within_tol_points", 0)
    if not k:
        return ""
    rel = "within_tol_relative_differences" in g
    lo, hi = g["within_tol_relative_differences" if rel else "within_tol_margins"]
    f = fmt_pct if rel else fmt
    span = f(lo) if math.isclose(lo, hi) else f"{f(lo)} to {f(hi)}"
    return f"{k} of them only within the tolerance ({'relative differences' if rel else 'margins'} {span})"


def _reason_compare(c, verdict, n, x_name):
    left, right, rel = _relation(c, n)
    where = {"first": f" at the smallest {x_name}", "last": f" at the largest {x_name}"}.get(c.get("at"), "")
    for fig, o in (c.get("per_figure") or {}).items():  # another selection / op on some figures' rows
        what = ", ".join(filter(None, [_selector_text(o.get("select")), f"{left} {OP_TEXT[o['op']]} {right}"
                                       if "op" in o else ""]))
        where += f" ({fig}: {what})"
    groups = n["groups"]
    gb = n.get("group_by", c.get("group_by", []))  # min_points without group_by: per match_on group
    if c.get("min_points") == 0 and "max_losses" in n and verdict == "pass":  # only "no loss" is claimed
        return f"{rel}{where}: no point where the other side is better beyond the tolerance ({n['losses']} losses)"
    if verdict == "fail" and n.get("losses", 0) > n.get("max_losses", n.get("losses", 0)):  # "and a loss in none"
        worst = min(groups.values(), key=lambda g: g["worst"]["margin"])["worst"]
        return (f"{rel}{where}: {n['losses']} loss{'es' if n['losses'] != 1 else ''} (at most {n['max_losses']} "
                f"allowed); worst {_point_text(worst, c, left, right, x_name, 'violation')}")
    if gb:
        unit = _groups_word(c, gb)
        shared = "min_group_share" in c or "min_groups" in c
        need = n["groups_needed"] if shared else len(groups)
        n_pass = sum(g["verdict"] == "pass" for g in groups.values())
        per = ""
        if "min_points" in c:
            word = f"{x_name} value" if set(c.get("match_on", [])) <= set(gb) else "point"
            k = c["min_points"]
            per = f" clearly at ≥ {k} {word}{'s' if k != 1 else ''} per {unit[:-1]}"
        head = f"{rel}{where}{per} in {n_pass} of {len(groups)} {unit}" + (f" ({need} needed)" if shared else "")
        if verdict == "pass":
            return head
        if "min_points" in c:  # the groups short of N clear points, with their closest approach to the claim
            short = [g for g in groups.values() if g["verdict"] == verdict]
            g = short[0]
            more = f" (and {len(short) - 1} more)" if len(short) > 1 else ""
            best = {**g["best"], "at": {k: v for k, v in g["best"]["at"].items() if k not in gb}}
            return head + (f"; {g['label']}: clearly at {g['satisfied']} of {g['points']} {word}s ({g['needed']} "
                           f"needed), {g['within_tol']} within the tolerance, best "
                           f"{_point_text(best, c, left, right, x_name, 'closest')}{more}")
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
            p = g["at_largest"]
            parts.append(f"{who}{rel} is a tie at the largest {x_name}, so no {x_name} has a win from there on "
                         f"(wins {g['wins']}, ties {g['ties']}, losses {g['losses']}): "
                         + _point_text(p, c, left, right, x_name, "within"))
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
    head = (f"{n.get('curves', 'the curves')} {way} in {x_name}"
            + (" within the tolerance" if tol and _tol_for(c) else ""))
    w = n.get("worst_step")
    if w is None:
        return head + ": nothing to compare"
    move = (w["to_y"] - w["from_y"])
    step = (f"{w['group']} {'rises' if move > 0 else 'falls'} by {fmt(abs(move))} from {x_name} = "
            f"{fmt_x(w['from_x'])} to {fmt_x(w['to_x'])} ({fmt(w['from_y'])} → {fmt(w['to_y'])})")
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
    if "points_needed" in n:  # a share of all points, and where the misses lie (_share_and_prefix)
        return _reason_bounds_share(c, verdict, n, x_name)
    return _reason_bounds_groups(c, verdict, n, x_name)


def _reason_bounds_share(c, verdict, n, x_name):
    rel = _bound_text(c).replace("y", n.get("curve", "y"), 1)
    text = (f"{rel} clearly at {n['wins']} of {n['points']} points ({n['points_needed']} needed), "
            f"{n['losses']} beyond the bound")
    scattered = n.get("misses_not_at_smallest_x") or {}
    if scattered:
        text += "; not only at the smallest " + x_name + ": " + ", ".join(
            f"{g['label']} misses at {x_name} = {', '.join(fmt_x(x) for x in g['x'])}" for g in scattered.values())
    elif "misses_not_at_smallest_x" in n:
        text += f"; every miss lies at the smallest {x_name} values of its panel"
    return text


def _reason_bounds_groups(c, verdict, n, x_name):
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
        return (f"{rel} {count(g, only=True)}"
                + (f", {g['within_tol']} more within the tolerance" if g["within_tol"] else "") + f"; {worst(g)}")
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


def _reason_jointly(c, verdict, n, x_name):
    groups = n["groups"]
    unit = _groups_word(c)
    k = len(c["checks"])
    every = "both checks" if k == 2 else f"all {k} checks"
    shared = "min_group_share" in c or "min_groups" in c
    head = f"{every} hold together in {n['groups_passing']} of {len(groups)} {unit}" + (
        f" ({n['groups_needed']} needed)" if shared else "")

    def detail(g, only=None):
        return " and ".join(check_reason(sub, r["verdict"], r["numbers"], x_name)
                            for sub, r in zip(c["checks"], g["checks"]) if only is None or r["verdict"] == only)

    if verdict == "pass":
        g = next(g for g in groups.values() if g["verdict"] == "pass")
        return f"{head}; {g['label']}: {detail(g)}"
    shown = [g for g in groups.values() if g["verdict"] != "pass"]
    return head + "; " + "; ".join(f"{g['label']}: {detail(g, g['verdict'])}" for g in shown)


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
    "jointly": _reason_jointly,
}


def check_reason(check: dict, verdict: str, numbers: dict, x_name: str = "x") -> str:
    """Why a check got its verdict, in words built from its numbers (without the leading verdict)."""
    return REASONS[check["kind"]](check, verdict, numbers, x_name)
