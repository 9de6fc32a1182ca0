"""Unit tests of dpfl.claims: every check kind on tiny tidy tables that satisfy / violate the claim,
tolerance -> inconclusive, stand-in data, and specification errors."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from dpfl import claims
from dpfl.claims import ClaimSpecError, evaluate, evaluate_claim, select, summarize_check
from dpfl.config.overlays import scale_reductions


def tidy(rows: list[dict]) -> pd.DataFrame:
    """A tidy table (paper, figure, panel, curve, x, y + parameter columns) from row dicts."""
    base = {"paper": "demo2024", "figure": "fig1", "panel": "a"}
    df = pd.DataFrame([{**base, **r} for r in rows])
    return df[["paper", "figure", "panel", "curve", "x", "y"] + [c for c in df.columns if c not in
                                                                    ("paper", "figure", "panel", "curve", "x", "y")]]


def curves(spec: dict[str, tuple], **params) -> list[dict]:
    """spec: curve name -> (xs, ys[, extra column dict]); params are added to every row."""
    rows = []
    for name, (xs, ys, *extra) in spec.items():
        cols = extra[0] if extra else {}
        for x, y in zip(xs, ys):
            rows.append({"curve": name, "x": float(x), "y": float(y), **cols, **params})
    return rows


class Recording(dict):
    """A check that records which keys the check function reads (indexes, gets or tests)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.read = set()

    def __getitem__(self, key):
        self.read.add(key)
        return super().__getitem__(key)

    def get(self, key, default=None):
        self.read.add(key)
        return super().get(key, default)

    def __contains__(self, key):
        self.read.add(key)
        return super().__contains__(key)


def run(df, check):
    """Evaluate one check; every key the check function reads must be one its kind declares (CHECK_KEYS,
    from which the config schema is generated), so that the schema neither rejects nor misses a key."""
    recorded = Recording(check)
    verdict, numbers = claims.CHECKS[check["kind"]](df, recorded)
    assert verdict in ("pass", "fail", "inconclusive")
    undeclared = recorded.read - set(claims.check_keys(check["kind"]))
    assert not undeclared, f"{check['kind']} reads keys that CHECK_KEYS does not declare: {sorted(undeclared)}"
    return verdict, numbers


X = np.arange(1.0, 6.0)


# --------------------------------------------------------------------------------------------------
# compare
# --------------------------------------------------------------------------------------------------


@pytest.fixture
def ab():
    return tidy(curves({"A": (X, X), "B": (X, 2 * X)}))


def test_compare_pass_and_fail(ab):
    v, num = run(ab, {"kind": "compare", "left": {"curve": "A"}, "right": {"curve": "B"}, "op": "<"})
    assert v == "pass" and num["points"] == 5 and num["violations"] == 0
    assert num["worst_margin"] == pytest.approx(1.0) and num["worst_at"] == {"x": 1.0}
    v, num = run(ab, {"kind": "compare", "left": {"curve": "A"}, "right": {"curve": "B"}, "op": ">="})
    assert v == "fail" and num["violations"] == 5
    v, _ = run(ab, {"kind": "compare", "left": {"curve": "B"}, "right": {"curve": "A"}, "op": ">"})
    assert v == "pass"


@pytest.mark.parametrize("op,ok", [("<", False), ("<=", True), (">", False), (">=", True)])
def test_compare_strict_and_weak_operators_on_equal_values(op, ok):
    df = tidy(curves({"A": (X, X), "B": (X, X)}))
    v, _ = run(df, {"kind": "compare", "left": {"curve": "A"}, "right": {"curve": "B"}, "op": op})
    assert v == ("pass" if ok else "fail")


def test_compare_factor(ab):
    check = {"kind": "compare", "left": {"curve": "A"}, "right": {"curve": "B"}, "op": "<"}
    assert run(ab, {**check, "factor": 0.6})[0] == "pass"  # x < 1.2x
    v, num = run(ab, {**check, "factor": 0.4})  # x < 0.8x is false
    assert v == "fail" and num["right_at_worst"] == pytest.approx(0.8 * num["left_at_worst"] / 1.0)


def test_compare_one_violation_fails(ab):
    df = ab.copy()
    df.loc[(df.curve == "A") & (df.x == 3.0), "y"] = 100.0
    v, num = run(df, {"kind": "compare", "left": {"curve": "A"}, "right": {"curve": "B"}, "op": "<"})
    assert v == "fail" and num["violations"] == 1 and num["worst_at"] == {"x": 3.0}


def test_compare_match_on_pairs_rows():
    rows = curves({"A": (X, X), "B": (X, 2 * X)}, n=1) + curves({"A": (X, 10 * X), "B": (X, 20 * X)}, n=2)
    df = tidy(rows)
    check = {"kind": "compare", "left": {"curve": "A"}, "right": {"curve": "B"}, "op": "<"}
    # without match_on, A(n=2) = 10x is also compared with B(n=1) = 2x
    assert run(df, check)[0] == "fail"
    v, num = run(df, {**check, "match_on": ["n"]})
    assert v == "pass" and num["points"] == 10


def test_compare_select_and_where_x(ab):
    df = pd.concat([ab, tidy(curves({"A": (X, 3 * X), "B": (X, X)}, panel="b"))], ignore_index=True)
    check = {"kind": "compare", "left": {"curve": "A"}, "right": {"curve": "B"}, "op": "<", "match_on": ["panel"]}
    assert run(df, check)[0] == "fail"
    assert run(df, {**check, "select": {"panel": "a"}})[0] == "pass"
    # A = x vs B = 2x except where x > 3 (made to violate): where_x restricts the comparison
    df2 = ab.copy()
    df2.loc[(df2.curve == "A") & (df2.x > 3), "y"] = 50.0
    check = {"kind": "compare", "left": {"curve": "A"}, "right": {"curve": "B"}, "op": "<"}
    assert run(df2, check)[0] == "fail"
    assert run(df2, {**check, "where_x": {"le": 3}})[0] == "pass"
    assert run(df2, {**check, "where_x": {"lt": 4}})[0] == "pass"
    assert run(df2, {**check, "where_x": {"gt": 3}})[0] == "fail"
    assert run(df2, {**check, "where_x": {"ge": 3}})[1]["points"] == 3


def test_compare_other_column():
    df = tidy(curves({"A": (X, X, {"acc": 0.9}), "B": (X, X, {"acc": 0.8})}))
    check = {"kind": "compare", "left": {"curve": "A"}, "right": {"curve": "B"}, "op": ">"}
    assert run(df, check)[0] == "fail"  # y equal
    assert run(df, {**check, "column": "acc"})[0] == "pass"


def test_compare_tol_gives_inconclusive():
    check = {"kind": "compare", "left": {"curve": "A"}, "right": {"curve": "B"}, "op": "<", "tol": 0.1}
    # satisfied but within tol of the boundary
    assert run(tidy(curves({"A": (X, X), "B": (X, X + 0.05)})), check)[0] == "inconclusive"
    # violated, but by less than tol
    v, num = run(tidy(curves({"A": (X, X), "B": (X, X - 0.05)})), check)
    assert v == "inconclusive" and num["violations"] == 0
    # violated by more than tol
    v, num = run(tidy(curves({"A": (X, X), "B": (X, X - 0.5)})), check)
    assert v == "fail" and num["violations"] == 5
    # clearly satisfied: tol does not matter
    assert run(tidy(curves({"A": (X, X), "B": (X, X + 1)})), check)[0] == "pass"
    # without tol the small violation is a fail
    assert run(tidy(curves({"A": (X, X), "B": (X, X - 0.05)})), {**check, "tol": 0.0})[0] == "fail"


# rel_tol: a relative tolerance (bietti2022's 5% on excess risk), |left − right| ≤ rel_tol·min(|left|, |right|)
REL = {"kind": "compare", "left": {"curve": "A"}, "right": {"curve": "B"}, "op": "<", "rel_tol": 0.05}


def two(a, b, xs=(30.0, 300.0)) -> pd.DataFrame:
    """Curves A and B with these values at xs (a number: the same at every x), and ln_y = ln y."""
    a, b = (v if isinstance(v, list) else [v] * len(xs) for v in (a, b))
    df = tidy(curves({"A": (xs, a), "B": (xs, b)}))
    return df.assign(ln_y=np.log(df["y"].where(df["y"] > 0)))


def test_compare_rel_tol_pass_within_and_fail():
    verdict, n = run(two(0.0219, 0.0683), REL)  # clearly below
    assert verdict == "pass" and n["relative_difference_at_worst"] == pytest.approx(0.0683 / 0.0219 - 1)
    assert n["tolerance_at_worst"] == pytest.approx(0.05 * 0.0219)
    # 4% below, or 4% above (the claim violated inside the tolerance): inconclusive, at any scale of the values
    for b in ([0.0219 * 1.04, 47 * 1.04], [0.0219 / 1.04, 47 / 1.04]):
        verdict, n = run(two([0.0219, 47.0], b), REL)
        assert verdict == "inconclusive" and n["violations"] == 0 and n["within_tol"] == 2
    verdict, n = run(two([0.0219, 47.0], [0.0219 / 1.06, 47 / 1.06]), REL)  # 6% above: beyond it
    assert verdict == "fail" and n["violations"] == 2 and n["relative_difference_at_worst"] == pytest.approx(0.06)
    assert run(two(0.001, -0.001), REL)[0] == "fail"  # opposite signs are never within a relative tolerance


def test_compare_rel_tol_is_symmetric_and_equals_ln_tolerance():
    """Relative to the smaller value, so the claim written the other way round is judged the same (relative to
    `right`, 100 vs 95.2 would be 4.8 > 4.76 one way and 4.8 ≤ 5 the other); for positive values it is the
    absolute tolerance ln(1 + rel_tol) on ln y, the encoding it replaces."""
    flipped = {**REL, "left": {"curve": "B"}, "right": {"curve": "A"}, "op": ">"}
    assert run(two(100.0, 95.2), REL)[0] == run(two(100.0, 95.2), flipped)[0] == "fail"
    assert run(two(100.0, 95.3), REL)[0] == run(two(100.0, 95.3), flipped)[0] == "inconclusive"
    ln = {**REL, "column": "ln_y", "tol": float(np.log(1.05))}
    del ln["rel_tol"]
    for ratio in (0.9, 0.951, 0.953, 0.97, 1.0, 1.03, 1.049, 1.0505, 1.2):
        df = two([0.02, 3.0, 400.0], [0.02 * ratio, 3.0 * ratio, 400.0 * ratio], xs=(1.0, 2.0, 3.0))
        assert run(df, REL)[0] == run(df, ln)[0], ratio


def test_compare_rel_tol_with_tol_factor_offset_and_min_points():
    # the larger tolerance applies: 6% apart is beyond 5% but within the absolute tol 0.1
    verdict, n = run(two(1.0, 1 / 1.06), {**REL, "tol": 0.1})
    assert verdict == "inconclusive" and n["tolerance_at_worst"] == pytest.approx(0.1)
    # relative to the compared right side, factor·right + offset: 2.08 vs 2·1 is 4% apart (of 1: 108%)
    assert run(two(2.08, 1.0), {**REL, "factor": 2.0})[0] == "inconclusive"
    assert run(two(2.2, 1.0), {**REL, "factor": 2.0})[0] == "fail"
    assert run(two(1.04, 0.5), {**REL, "offset": 0.5})[0] == "inconclusive"
    # min_points: a point within the tolerance is not a clear one
    assert run(two(1.0, [1.04, 1.2]), REL)[0] == "inconclusive"
    assert run(two(1.0, [1.04, 1.2]), {**REL, "min_points": 1})[0] == "pass"
    assert run(two(1.0, [1.04, 1 / 1.04]), {**REL, "min_points": 1})[0] == "inconclusive"
    assert run(two(1.0, [1 / 1.06, 1 / 1.1]), {**REL, "min_points": 1})[0] == "fail"


def test_compare_rel_tol_reasons_quote_the_values_and_their_relative_difference():
    def reason(df, check=REL):
        return evaluate_claim(df, claim(check), "real")["reason"]

    assert reason(two(0.0219, 0.0683)) == (
        "passes: A < B at all 2 x values; closest at x = 30: 0.0219 vs 0.0683, relative difference 212%")
    assert reason(two(0.0219, 0.0219 * 1.04)) == (
        "inconclusive: A < B clearly at 0 of 2 x values (2 needed), 2 within the tolerance (e.g. at x = 30, A 0.0219 "
        "vs B 0.0228, relative difference 4.00% within the tolerance 5%)")
    assert reason(two([0.0219, 47.0], [0.0219 * 1.2, 47 * 1.04]), {**REL, "min_points": 1}) == (
        "passes: A < B at 1 of 2 x values (1 needed); 1 of them only within the tolerance (relative differences "
        "4.00%)")
    assert reason(two(0.0219, 0.0219 / 1.06)) == (
        "fails: at x = 30, A 0.0219 vs B 0.0207, relative difference 6.00% > tolerance 5%")
    # where the absolute tol is the larger, the reason gives it, and the relative difference beside it
    assert reason(two(1.0, 1 / 1.06), {**REL, "tol": 0.1}) == (
        "inconclusive: A < B clearly at 0 of 2 x values (2 needed), 2 within the tolerance (e.g. at x = 30, A 1.00 "
        "vs B 0.943, difference 0.0566 within the tolerance 0.100 (relative difference 6.00%))")


def test_compare_errors(ab):
    base = {"kind": "compare", "left": {"curve": "A"}, "right": {"curve": "B"}, "op": "<"}
    with pytest.raises(ClaimSpecError):
        run(ab, {**base, "left": {"curve": "Z"}})  # empty selection
    with pytest.raises(ClaimSpecError):
        run(ab, {**base, "right": {"method": "B"}})  # missing column
    with pytest.raises(ClaimSpecError):
        run(ab, {**base, "select": {"seed": 0}})
    disjoint = tidy(curves({"A": (X, X), "B": (X + 0.5, X)}))
    with pytest.raises(ClaimSpecError):
        run(disjoint, base)  # no common x


# --------------------------------------------------------------------------------------------------
# order
# --------------------------------------------------------------------------------------------------


@pytest.fixture
def by_q():
    rows = []
    for q in (0.1, 0.2, 0.3):
        rows += curves({f"q = {q}": (X, 1 / q + X)}, q=q)
    return tidy(rows)


def test_order_pass_and_fail(by_q):
    check = {"kind": "order", "by": "q", "values": [0.3, 0.2, 0.1], "op": "<"}
    v, num = run(by_q, check)
    assert v == "pass" and num["points"] == 10 and num["violations"] == 0
    v, num = run(by_q, {**check, "values": [0.1, 0.2, 0.3]})
    assert v == "fail" and num["violations"] == 10
    assert run(by_q, {**check, "values": [0.1, 0.2, 0.3], "op": ">"})[0] == "pass"
    # one pair out of order is enough
    v, num = run(by_q, {**check, "values": [0.3, 0.1, 0.2]})
    assert v == "fail" and num["violations"] == 5 and num["worst_at"]["pair"] == [0.1, 0.2]


def test_order_single_point_violation(by_q):
    df = by_q.copy()
    df.loc[np.isclose(df.q, 0.2) & (df.x == 4.0), "y"] = 0.0
    v, num = run(df, {"kind": "order", "by": "q", "values": [0.3, 0.2, 0.1], "op": "<"})
    assert v == "fail" and num["violations"] == 1 and num["worst_at"]["x"] == 4.0


def test_order_group_by():
    rows = []
    for m in (1000, 10000):
        for p0 in (0.1, 1.0):
            rows += curves({"thm": (X, p0 * X / m)}, m=m, p0=p0)
    df = tidy(rows)
    check = {"kind": "order", "by": "p0", "values": [0.1, 1.0], "op": "<", "group_by": ["m"]}
    assert run(df, check) [0] == "pass"
    # without group_by the m = 10000 row is paired with m = 1000: p0=0.1, m=1000 (1e-4 x) > p0=1, m=1e4 (1e-4 x)
    assert run(df, {**check, "group_by": []})[0] == "fail"
    check = {"kind": "order", "by": "m", "values": [10000, 1000], "op": "<", "group_by": ["p0"]}
    assert run(df, check)[0] == "pass"


def test_order_where_x_and_select(by_q):
    df = by_q.copy()
    df.loc[np.isclose(df.q, 0.3) & (df.x == 1.0), "y"] = 100.0
    check = {"kind": "order", "by": "q", "values": [0.3, 0.2, 0.1], "op": "<"}
    assert run(df, check)[0] == "fail"
    assert run(df, {**check, "where_x": {"gt": 1}})[0] == "pass"
    assert run(df, {**check, "select": {"panel": "a"}, "where_x": {"ge": 2}})[0] == "pass"


def test_order_tol_gives_inconclusive():
    rows = curves({"a": (X, X)}, c=1.0) + curves({"b": (X, X + 0.01)}, c=2.0)
    df = tidy(rows)
    check = {"kind": "order", "by": "c", "values": [1.0, 2.0], "op": "<", "tol": 0.05}
    v, num = run(df, check)
    assert v == "inconclusive" and num["within_tol"] == 5
    assert run(df, {**check, "tol": 0.0})[0] == "pass"
    rows = curves({"a": (X, X)}, c=1.0) + curves({"b": (X, X - 0.01)}, c=2.0)
    assert run(tidy(rows), check)[0] == "inconclusive"
    assert run(tidy(rows), {**check, "tol": 0.0})[0] == "fail"
    rows = curves({"a": (X, X)}, c=1.0) + curves({"b": (X, X - 1)}, c=2.0)
    assert run(tidy(rows), check)[0] == "fail"


def test_order_nothing_to_compare_is_inconclusive():
    rows = curves({"a": (X, X)}, c=1.0) + curves({"b": (X + 0.5, X)}, c=2.0)
    v, num = run(tidy(rows), {"kind": "order", "by": "c", "values": [1.0, 2.0], "op": "<"})
    assert v == "inconclusive" and num["points"] == 0


def test_order_errors(by_q):
    with pytest.raises(ClaimSpecError):
        run(by_q, {"kind": "order", "by": "q", "values": [0.3, 0.5], "op": "<"})  # no rows with q = 0.5
    with pytest.raises(ClaimSpecError):
        run(by_q, {"kind": "order", "by": "sigma", "values": [1, 2], "op": "<"})  # missing column
    with pytest.raises(ClaimSpecError):
        run(by_q, {"kind": "order", "by": "q", "values": [0.3, 0.2], "op": "<", "select": {"method": "x"}})


# --------------------------------------------------------------------------------------------------
# monotone
# --------------------------------------------------------------------------------------------------


def test_monotone_increasing_decreasing():
    inc = tidy(curves({"c": (X, X**2)}))
    assert run(inc, {"kind": "monotone", "direction": "increasing"})[0] == "pass"
    v, num = run(inc, {"kind": "monotone", "direction": "decreasing"})
    assert v == "fail" and num["violations"] == 4
    dec = tidy(curves({"c": (X, 1 / X)}))
    assert run(dec, {"kind": "monotone", "direction": "decreasing", "strict": True})[0] == "pass"
    assert run(dec, {"kind": "monotone", "direction": "increasing"})[0] == "fail"


def test_monotone_strict_vs_weak():
    flat = tidy(curves({"c": (X, [1.0, 2.0, 2.0, 3.0, 4.0])}))
    v, num = run(flat, {"kind": "monotone", "direction": "increasing", "strict": True})
    assert v == "fail" and num["violations"] == 1 and num["min_step"] == 0.0
    assert run(flat, {"kind": "monotone", "direction": "increasing"})[0] == "fail"  # strict by default
    assert run(flat, {"kind": "monotone", "direction": "increasing", "strict": False})[0] == "pass"
    dip = tidy(curves({"c": (X, [1.0, 2.0, 1.5, 3.0, 4.0])}))
    assert run(dip, {"kind": "monotone", "direction": "increasing", "strict": False})[0] == "fail"


def test_monotone_sorts_by_x():
    df = tidy(curves({"c": (X[::-1], X[::-1] ** 2)})).sample(frac=1.0, random_state=3)
    assert run(df, {"kind": "monotone", "direction": "increasing"})[0] == "pass"


def test_monotone_group_by():
    rows = (curves({"rdp": (X, 2.0**X)}, conversion="rdp")
            + curves({"normal": (X, [1, 3, 2, 4, 5])}, conversion="normal"))
    df = tidy(rows)
    v, num = run(df, {"kind": "monotone", "direction": "increasing", "group_by": ["conversion"]})
    assert v == "fail" and num["groups"] == 2 and num["violations"] == 1 and num["worst_group"] == "normal"
    # without grouping, the two curves are interleaved on x (equal x, different y): not monotone
    assert run(df, {"kind": "monotone", "direction": "increasing"})[0] == "fail"
    v, _ = run(df, {"kind": "monotone", "direction": "increasing", "select": {"conversion": "rdp"}})
    assert v == "pass"
    two = tidy(curves({"a": (X, X)}, m=1, p0=0.1) + curves({"b": (X, X + 1)}, m=2, p0=0.1))
    v, num = run(two, {"kind": "monotone", "direction": "increasing", "group_by": ["m", "p0"]})
    assert v == "pass" and num["groups"] == 2


def test_monotone_where_x():
    df = tidy(curves({"c": (X, [5.0, 1.0, 2.0, 3.0, 4.0])}))
    assert run(df, {"kind": "monotone", "direction": "increasing"})[0] == "fail"
    assert run(df, {"kind": "monotone", "direction": "increasing", "where_x": {"ge": 2}})[0] == "pass"


def test_monotone_tol_violation_beyond_tol_fails():
    dip = tidy(curves({"c": (X, [1.0, 2.0, 1.5, 3.0, 4.0])}))
    assert run(dip, {"kind": "monotone", "direction": "increasing", "tol": 0.1})[0] == "fail"
    assert run(dip, {"kind": "monotone", "direction": "increasing", "strict": False, "tol": 0.1})[0] == "fail"
    # weak monotonicity with a dip inside the tolerance is not a fail
    small = tidy(curves({"c": (X, [1.0, 2.0, 1.95, 3.0, 4.0])}))
    assert run(small, {"kind": "monotone", "direction": "increasing", "strict": False, "tol": 0.1})[0] != "fail"


def test_monotone_strict_tol_gives_inconclusive():
    small_step = tidy(curves({"c": (X, [1.0, 2.0, 2.05, 3.0, 4.0])}))  # strictly increasing
    assert run(small_step, {"kind": "monotone", "direction": "increasing", "tol": 0.1})[0] == "inconclusive"
    small_dip = tidy(curves({"c": (X, [1.0, 2.0, 1.95, 3.0, 4.0])}))
    assert run(small_dip, {"kind": "monotone", "direction": "increasing", "tol": 0.1})[0] == "inconclusive"


def test_monotone_errors():
    df = tidy(curves({"c": (X, X)}))
    with pytest.raises(ClaimSpecError):
        run(df, {"kind": "monotone", "direction": "increasing", "select": {"curve": "nope"}})
    with pytest.raises(ClaimSpecError):
        run(df, {"kind": "monotone", "direction": "increasing", "select": {"method": "AVG"}})
    with pytest.raises(ClaimSpecError):
        run(df, {"kind": "monotone", "direction": "increasing", "where_x": {"gt": 100}})


# --------------------------------------------------------------------------------------------------
# bounds
# --------------------------------------------------------------------------------------------------


def test_bounds_numbers():
    df = tidy(curves({"d": (X, [1e-9, 0.1, 0.5, 0.9, 1.0])}))
    check = {"kind": "bounds", "lower": 0, "upper": 1, "lower_strict": True}
    v, num = run(df, check)
    assert v == "pass" and num["min"] == 1e-9 and num["max"] == 1.0 and num["min_margin_upper"] == 0.0
    assert run(df, {**check, "upper_strict": True})[0] == "fail"  # y = 1 not < 1
    zero = tidy(curves({"d": (X, [0.0, 0.1, 0.5, 0.9, 1.0])}))
    assert run(zero, check)[0] == "fail"
    assert run(zero, {**check, "lower_strict": False})[0] == "pass"
    above = tidy(curves({"d": (X, [0.5, 0.1, 1.2, 0.9, 1.0])}))
    v, num = run(above, check)
    assert v == "fail" and num["violations"] == 1 and num["min_margin_upper"] == pytest.approx(-0.2)
    # one-sided
    assert run(above, {"kind": "bounds", "lower": 0})[0] == "pass"
    assert run(above, {"kind": "bounds", "upper": 1.5})[0] == "pass"
    assert run(above, {"kind": "bounds", "upper": 1.1})[0] == "fail"


def test_bounds_with_column_bounds_and_other_column():
    rows = [
        {"curve": "q", "x": x, "y": y, "delta_lower": lo, "theta_r1": hi, "one_minus_theta_r2": g}
        for x, y, lo, hi, g in [(0.0, 0.5, 0.05, 0.6, 1e-9), (1.0, 0.2, 0.02, 0.3, 1e-12), (2.0, 0.1, 0.01, 0.1, 0.5)]
    ]
    df = tidy(rows)
    assert run(df, {"kind": "bounds", "lower": "delta_lower", "upper": "theta_r1"})[0] == "pass"
    assert run(df, {"kind": "bounds", "lower": "delta_lower", "upper": "theta_r1", "upper_strict": True})[0] == "fail"
    check = {"kind": "bounds", "column": "one_minus_theta_r2", "lower": 0, "upper": 1,
             "lower_strict": True, "upper_strict": True}
    assert run(df, check)[0] == "pass"
    df.loc[1, "one_minus_theta_r2"] = 0.0
    assert run(df, check)[0] == "fail"
    df.loc[0, "y"] = 0.7  # above theta_r1 = 0.6
    v, num = run(df, {"kind": "bounds", "lower": "delta_lower", "upper": "theta_r1"})
    assert v == "fail" and num["violations"] == 1


def test_bounds_nan_fails():
    df = tidy(curves({"d": (X, [0.1, np.nan, 0.3, 0.4, 0.5])}))
    v, num = run(df, {"kind": "bounds", "lower": 0, "upper": 1})
    assert v == "fail" and num["violations"] == 1


def test_bounds_tol_gives_inconclusive():
    df = tidy(curves({"d": (X, [0.1, 0.2, 1.0005, 0.4, 0.5])}))
    assert run(df, {"kind": "bounds", "lower": 0, "upper": 1, "tol": 1e-3})[0] == "inconclusive"


def test_bounds_errors():
    df = tidy(curves({"d": (X, X)}))
    with pytest.raises(ClaimSpecError):
        run(df, {"kind": "bounds", "lower": 0, "select": {"curve": "e"}})
    with pytest.raises(ClaimSpecError):
        run(df, {"kind": "bounds", "lower": 0, "select": {"q": 0.1}})


# --------------------------------------------------------------------------------------------------
# near
# --------------------------------------------------------------------------------------------------


@pytest.fixture
def fig2():
    ks = [1, 2, 4, 8, 16, 32, 64]
    rdp = [2.85, 7.99, 24.5, 98.8, 451.0, 2152.0, 11417.0]
    normal = [2.85, 7.0, 20.0, 80.0, 400.0, 1900.0, 10000.0]
    return tidy(curves({"RDP conversion": (ks, rdp)}, conversion="rdp")
                + curves({"normal DP conversion": (ks, normal)}, conversion="normal"))


def test_near_pass_and_fail(fig2):
    check = {"kind": "near", "select": {"conversion": "rdp"}, "x": 32, "target": 2100, "rel_tol": 0.05}
    v, num = run(fig2, check)
    assert v == "pass" and num["value"] == 2152.0 and num["rel_error"] == pytest.approx(52 / 2100)
    assert run(fig2, {**check, "rel_tol": 0.02})[0] == "fail"
    assert run(fig2, {**check, "x": 64, "target": 11400})[0] == "pass"
    assert run(fig2, {**check, "select": {"conversion": "normal"}, "rel_tol": 0.1})[0] == "pass"  # 1900: 9.5% off
    assert run(fig2, {**check, "select": {"conversion": "normal"}, "rel_tol": 0.05})[0] == "fail"


def test_near_errors(fig2):
    with pytest.raises(ClaimSpecError):
        run(fig2, {"kind": "near", "select": {"conversion": "rdp"}, "x": 33, "target": 2100, "rel_tol": 0.05})
    with pytest.raises(ClaimSpecError):
        run(fig2, {"kind": "near", "select": {"conversion": "gdp"}, "x": 32, "target": 2100, "rel_tol": 0.05})
    with pytest.raises(ClaimSpecError):
        run(fig2, {"kind": "near", "select": {"method": "rdp"}, "x": 32, "target": 2100, "rel_tol": 0.05})


# --------------------------------------------------------------------------------------------------
# ratio
# --------------------------------------------------------------------------------------------------


def test_ratio_pointwise_without_interpolation():
    df = tidy(curves({"num": (X, 1.5 * X)}, side="n") + curves({"den": (X, X)}, side="d"))
    check = {"kind": "ratio", "numerator": {"side": "n"}, "denominator": {"side": "d"}, "min": 1.0, "max": 2.0}
    v, num = run(df, check)
    assert v == "pass" and num["points"] == 5 and num["min_ratio"] == pytest.approx(1.5)
    assert run(df, {**check, "max": 1.4})[0] == "fail"
    assert run(df, {**check, "min": 1.6})[0] == "fail"
    assert run(df, {**check, "min": 1.5, "max": 1.5})[0] == "pass"  # bounds are inclusive
    assert run(df, {"kind": "ratio", "numerator": {"side": "n"}, "denominator": {"side": "d"}, "max": 1.6})[0] == "pass"


def test_ratio_single_violating_point_is_reported():
    ys = 1.5 * X
    ys[2] = 5 * X[2]
    df = tidy(curves({"num": (X, ys)}, side="n") + curves({"den": (X, X)}, side="d"))
    v, num = run(df, {"kind": "ratio", "numerator": {"side": "n"}, "denominator": {"side": "d"}, "max": 2.0})
    assert v == "fail" and num["violations"] == 1 and num["violating_x"] == [3.0]
    assert num["max_ratio"] == pytest.approx(5.0) and num["at_x_max"] == 3.0


def test_ratio_loglog_interpolation():
    """num y = x² known at x = 1, 4 only; den y = x² at x = 2, 3: log-log interpolation of a power law is exact."""
    df = tidy(curves({"num": ([1.0, 4.0], [1.0, 16.0])}, side="n")
              + curves({"den": ([2.0, 3.0], [4.0, 9.0])}, side="d"))
    check = {"kind": "ratio", "numerator": {"side": "n"}, "denominator": {"side": "d"}, "min": 0.99, "max": 1.01}
    v, num = run(df, {**check, "interpolate": "loglog"})
    assert v == "pass" and num["points"] == 2  # x = 2, 3 (x = 1, 4 lie outside the denominator's range)
    assert num["min_ratio"] == pytest.approx(1.0, rel=1e-12) and num["max_ratio"] == pytest.approx(1.0, rel=1e-12)
    # linear interpolation of the same data gives ratio 6/4 at x = 2: different answer
    v, num = run(df, {**check, "interpolate": "linear"})
    assert v == "fail" and num["max_ratio"] == pytest.approx(1.5)
    # without interpolation there is no common x
    v, num = run(df, check)
    assert v == "inconclusive"
    v, num = run(df, {**check, "interpolate": "none"})
    assert v == "inconclusive"


def test_ratio_loglog_on_kato_grids(fig2):
    """Different x grids (k = 1, 5, 9, … vs powers of 2), as in kato2024 C-K2b."""
    ks_normal = np.arange(1, 62, 4)
    normal = 3.0 * ks_normal**2.0
    rows = curves({"rdp": ([1, 2, 4, 8, 16, 32, 64], [3.0 * k**2 * 2 for k in (1, 2, 4, 8, 16, 32, 64)])},
                  conversion="rdp")
    rows += curves({"normal": (ks_normal, normal)}, conversion="normal")
    df = tidy(rows)
    check = {"kind": "ratio", "numerator": {"conversion": "rdp"}, "denominator": {"conversion": "normal"},
             "max": 2.0 + 1e-9, "min": 2.0 - 1e-9, "where_x": {"ge": 2, "le": 48}, "interpolate": "loglog"}
    v, num = run(df, check)
    assert v == "pass"
    xs_expected = np.union1d([2, 4, 8, 16, 32], ks_normal[(ks_normal >= 2) & (ks_normal <= 48)])
    assert num["points"] == len(xs_expected)
    assert run(df, {**check, "max": 1.9})[0] == "fail"


def test_ratio_errors(fig2):
    with pytest.raises(ClaimSpecError):
        run(fig2, {"kind": "ratio", "numerator": {"conversion": "gdp"}, "denominator": {"conversion": "rdp"}, "max": 2})
    with pytest.raises(ClaimSpecError):
        run(fig2, {"kind": "ratio", "numerator": {"conversion": "rdp"}, "denominator": {"method": "rdp"}, "max": 2})


# --------------------------------------------------------------------------------------------------
# successive_ratio
# --------------------------------------------------------------------------------------------------


def test_successive_ratio_pass_and_fail():
    df = tidy(curves({"c": ([1, 2, 4, 8], [1.0, 3.0, 9.0, 30.0])}))
    v, num = run(df, {"kind": "successive_ratio", "min": 2.0})
    assert v == "pass" and num["ratios"] == {"1.0->2.0": 3.0, "2.0->4.0": 3.0, "4.0->8.0": pytest.approx(30 / 9)}
    v, num = run(tidy(curves({"c": ([1, 2, 4, 8], [1.0, 3.0, 4.0, 30.0])})), {"kind": "successive_ratio", "min": 2.0})
    assert v == "fail" and num["violations"] == 1


def test_successive_ratio_select_and_where_x(fig2):
    check = {"kind": "successive_ratio", "select": {"conversion": "rdp"}, "min": 2.0, "where_x": {"ge": 2}}
    assert run(fig2, check)[0] == "pass"
    df = fig2.copy()
    df.loc[(df.conversion == "rdp") & (df.x == 2), "y"] = 2.9  # 1 -> 2 ratio ~1.02, outside where_x
    assert run(df, check)[0] == "pass"
    assert run(df, {**check, "where_x": {"ge": 1}})[0] == "fail"


def test_successive_ratio_min_is_inclusive():
    df = tidy(curves({"c": ([1, 2, 4], [1.0, 2.0, 4.0])}))
    assert run(df, {"kind": "successive_ratio", "min": 2.0})[0] == "pass"


def test_compare_offset_shifts_the_right_side():
    """left < right − 0.05: passes with a margin of 0.1, fails with one of 0.03; the reason names the shift."""
    df = tidy(curves({"A": ([1, 2], [0.5, 0.6]), "B": ([1, 2], [0.6, 0.63])}))
    check = {"kind": "compare", "left": {"curve": "A"}, "right": {"curve": "B"}, "op": "<", "offset": -0.05}
    v, num = run(df, check)
    assert v == "fail" and num["violations"] == 1 and num["worst_margin"] == pytest.approx(-0.02)
    assert "B − 0.05" in claims.check_reason(check, v, num)
    assert run(df, {**check, "offset": -0.01})[0] == "pass"


def test_slope_of_log_y_on_log_x_per_group():
    """y = 3·x^0.5 has slope 0.5 exactly; y = x² has 2; bounds are inclusive; points with y ≤ 0 are left out."""
    xs = [1, 2, 4, 8, 16]
    df = tidy(curves({"sqrt": (xs, [3 * x ** 0.5 for x in xs], {"g": "a"}),
                      "square": (xs, [x ** 2 for x in xs], {"g": "b"})}))
    v, num = run(df, {"kind": "slope", "select": {"curve": "sqrt"}, "min": 0.4, "max": 0.65})
    assert v == "pass" and num["groups"]["all"]["slope"] == pytest.approx(0.5)
    assert run(df, {"kind": "slope", "select": {"curve": "sqrt"}, "min": 0.5})[0] == "pass"
    v, num = run(df, {"kind": "slope", "group_by": ["g"], "max": 0.65})
    assert v == "fail" and num["violations"] == 1 and num["groups"]["b"]["slope"] == pytest.approx(2.0)
    assert "slope 2" in claims.check_reason({"kind": "slope", "group_by": ["g"], "max": 0.65}, v, num)
    with_zero = tidy(curves({"c": ([1, 2, 4, 8], [0.0, 2.0, 4.0, 8.0])}))
    assert run(with_zero, {"kind": "slope", "min": 1.0, "max": 1.0})[1]["groups"]["all"]["points"] == 3
    with pytest.raises(claims.ClaimSpecError, match="two points"):
        run(tidy(curves({"c": ([1, 2], [0.0, 1.0])})), {"kind": "slope", "min": 0.0})


def test_successive_ratio_errors():
    df = tidy(curves({"c": (X, X)}))
    with pytest.raises(ClaimSpecError):
        run(df, {"kind": "successive_ratio", "min": 2.0, "select": {"curve": "d"}})
    with pytest.raises(ClaimSpecError):
        run(df, {"kind": "successive_ratio", "min": 2.0, "select": {"conversion": "rdp"}})


# --------------------------------------------------------------------------------------------------
# crossing
# --------------------------------------------------------------------------------------------------

EPS0 = np.round(np.linspace(0.1, 1.0, 10), 10)


def crossing_table(first_scale, second_scale, n=1000):
    return curves({"thm5.1": (EPS0, first_scale * EPS0**2)}, bound="thm5.1", n=n) + curves(
        {"efmrtt19": (EPS0, second_scale * EPS0**2)}, bound="efmrtt19", n=n
    )


def test_crossing_pass_fail():
    check = {"kind": "crossing", "first": {"bound": "thm5.1"}, "second": {"bound": "efmrtt19"}, "line": "identity"}
    # y = 1.5 ε0² reaches y = ε0 at 2/3; y = 3 ε0² at 1/3
    v, num = run(tidy(crossing_table(1.5, 3.0)), check)
    assert v == "pass"
    c = num["crossings"]["all"]
    assert c["first_crossing"] == pytest.approx(2 / 3, abs=0.01)
    assert c["second_crossing"] == pytest.approx(1 / 3, abs=0.01)
    assert run(tidy(crossing_table(3.0, 1.5)), check)[0] == "fail"
    # same crossing: not "at a larger ε0"
    assert run(tidy(crossing_table(2.0, 2.0)), check)[0] == "fail"


def test_crossing_interpolates_linearly():
    # 1.5x²: gap y − x = −0.06 at 0.6, +0.035 at 0.7 -> crossing 0.6 + 0.1·0.06/0.095
    # 3x²:   gap y − x = −0.03 at 0.3, +0.08 at 0.4   -> crossing 0.3 + 0.1·0.03/0.11
    df = tidy(crossing_table(1.5, 3.0))
    assert claims._crossing(df[df.bound == "thm5.1"], "y") == pytest.approx(0.6 + 0.1 * 0.06 / 0.095, rel=1e-9)
    assert claims._crossing(df[df.bound == "efmrtt19"], "y") == pytest.approx(0.3 + 0.1 * 0.03 / 0.11, rel=1e-9)
    # already above the line at the first grid point
    assert claims._crossing(tidy(curves({"c": (EPS0, 20 * EPS0)})), "y") == pytest.approx(0.1)
    assert claims._crossing(tidy(curves({"c": (EPS0, 0.5 * EPS0)})), "y") is None


def test_crossing_only_one_or_neither_crosses():
    check = {"kind": "crossing", "first": {"bound": "thm5.1"}, "second": {"bound": "efmrtt19"}}
    v, num = run(tidy(crossing_table(0.5, 3.0)), check)  # first never vacuous on the grid, second is
    assert v == "pass" and num["crossings"]["all"]["first_crossing"] is None
    assert run(tidy(crossing_table(3.0, 0.5)), check)[0] == "fail"
    v, num = run(tidy(crossing_table(0.5, 0.8)), check)
    assert v == "inconclusive"


def test_crossing_match_on_groups():
    check = {"kind": "crossing", "first": {"bound": "thm5.1"}, "second": {"bound": "efmrtt19"}, "match_on": ["n"]}
    good = crossing_table(1.5, 3.0, n=1000) + crossing_table(1.2, 2.0, n=10000)
    v, num = run(tidy(good), check)
    assert v == "pass" and set(num["crossings"]) == {"1000", "10000"}
    bad = crossing_table(1.5, 3.0, n=1000) + crossing_table(2.0, 1.2, n=10000)
    assert run(tidy(bad), check)[0] == "fail"
    # a group where neither crosses does not count; the others decide
    mixed = crossing_table(1.5, 3.0, n=1000) + crossing_table(0.1, 0.2, n=10000)
    assert run(tidy(mixed), check)[0] == "pass"


def test_crossing_errors():
    df = tidy(crossing_table(1.5, 3.0))
    with pytest.raises(ClaimSpecError):
        run(df, {"kind": "crossing", "first": {"bound": "thm5.1"}, "second": {"bound": "efmrtt19"}, "line": "y=2x"})
    with pytest.raises(ClaimSpecError):
        run(df, {"kind": "crossing", "first": {"bound": "thm9"}, "second": {"bound": "efmrtt19"}})
    with pytest.raises(ClaimSpecError):
        run(df, {"kind": "crossing", "first": {"theorem": "thm5.1"}, "second": {"bound": "efmrtt19"}})


# --------------------------------------------------------------------------------------------------
# selection
# --------------------------------------------------------------------------------------------------


def test_select_numeric_values_tolerate_float_noise_and_lists():
    df = tidy(curves({"a": (X, X)}, q=0.1 + 0.2) + curves({"b": (X, X)}, q=0.1) + curves({"c": (X, X)}, q=1.0))
    assert set(select(df, {"q": 0.3})["curve"]) == {"a"}
    assert set(select(df, {"q": [0.3, 0.1]})["curve"]) == {"a", "b"}
    assert set(select(df, {"q": 1})["curve"]) == {"c"}
    assert select(df, {"q": 0.31}).empty
    assert set(select(df, {"curve": ["a", "c"]})["q"].round(6)) == {0.3, 1.0}
    ints = tidy(curves({"a": (X, X)}, n=1000) + curves({"b": (X, X)}, n=10000))
    assert set(select(ints, {"n": "1000"})["curve"]) == {"a"}  # string selector on a numeric column
    assert set(select(ints, {"n": 1000.0})["curve"]) == {"a"}
    assert len(select(ints, None)) == len(ints)
    assert len(select(ints, {}, {"gt": 2, "le": 4})) == 4


def test_select_missing_column_raises():
    df = tidy(curves({"a": (X, X)}))
    with pytest.raises(ClaimSpecError, match="method"):
        select(df, {"method": "AVG"})
    assert issubclass(ClaimSpecError, ValueError)


# --------------------------------------------------------------------------------------------------
# claims, verdicts, stand-in data
# --------------------------------------------------------------------------------------------------

PASSING = {"kind": "compare", "left": {"curve": "A"}, "right": {"curve": "B"}, "op": "<"}
FAILING = {"kind": "compare", "left": {"curve": "A"}, "right": {"curve": "B"}, "op": ">"}
UNSURE = {"kind": "compare", "left": {"curve": "A"}, "right": {"curve": "B"}, "op": "<", "tol": 100.0}


def claim(*checks, **extra):
    return {"id": "C-X1", "claim": "A is below B", "checks": list(checks), **extra}


def test_evaluate_claim_verdicts(ab):
    out = evaluate_claim(ab, claim(PASSING, note="n"), "real")
    assert out["verdict"] == out["verdict_on_data"] == "pass"
    assert out["id"] == "C-X1" and out["claim"] == "A is below B" and out["note"] == "n"
    assert len(out["checks"]) == 1 and out["checks"][0]["check"] is PASSING
    assert out["checks"][0]["numbers"]["points"] == 5
    assert evaluate_claim(ab, claim(FAILING), "real")["verdict"] == "fail"
    assert evaluate_claim(ab, claim(UNSURE), "real")["verdict"] == "inconclusive"
    assert evaluate_claim(ab, claim(PASSING), "real")["note"] == ""


def test_claim_verdict_is_worst_of_checks(ab):
    assert evaluate_claim(ab, claim(PASSING, UNSURE), "real")["verdict"] == "inconclusive"
    assert evaluate_claim(ab, claim(UNSURE, PASSING), "real")["verdict"] == "inconclusive"
    assert evaluate_claim(ab, claim(PASSING, FAILING, UNSURE), "real")["verdict"] == "fail"
    assert evaluate_claim(ab, claim(UNSURE, FAILING), "real")["verdict"] == "fail"
    out = evaluate_claim(ab, claim(PASSING, FAILING), "real")
    assert [c["verdict"] for c in out["checks"]] == ["pass", "fail"]


@pytest.mark.parametrize("check,underlying", [(PASSING, "pass"), (FAILING, "fail"), (UNSURE, "inconclusive")])
def test_standin_data_gives_standin_verdict(ab, check, underlying):
    out = evaluate_claim(ab, claim(check), "standin")
    assert out["verdict"] == "stand-in"
    assert out["verdict_on_data"] == underlying
    assert out["checks"][0]["verdict"] == underlying


@pytest.mark.parametrize("source", ["real", "synthetic", "analytic"])
def test_other_data_sources_keep_the_verdict(ab, source):
    assert evaluate_claim(ab, claim(FAILING), source)["verdict"] == "fail"


def test_evaluate_lists_all_claims(ab):
    out = evaluate(ab, [claim(PASSING), {**claim(FAILING), "id": "C-X2"}], "real")
    assert [(o["id"], o["verdict"]) for o in out] == [("C-X1", "pass"), ("C-X2", "fail")]
    assert evaluate(ab, [], "real") == []


def test_evaluate_raises_on_a_missing_column_naming_the_claim(ab):
    """A selector column the table does not have is not "no rows" (the table lacks the column, whatever the
    settings): the claims job stops, naming the claim and the check."""
    with pytest.raises(ClaimSpecError, match=r"claim C-X1, check 1 \(compare\): selector column 'method'"):
        evaluate(ab, [claim(PASSING), claim({**PASSING, "left": {"method": "A"}})], "real")


@pytest.mark.parametrize("check, sentence", [
    ({**PASSING, "left": {"curve": "does not exist"}},
     "left (curve = does not exist) selects no rows of this table: no row has curve = does not exist"),
    ({"kind": "monotone", "direction": "increasing", "select": {"curve": "Z"}},
     "select (curve = Z) selects no rows of this table: no row has curve = Z"),
    ({"kind": "bounds", "lower": 0, "where_x": {"gt": 99}},
     "select (every row) selects no rows of this table where x > 99 (its x without that: 1, 2, 3, 4, 5)"),
    ({"kind": "order", "by": "curve", "values": ["A", "C"], "op": "<"},
     "select (curve = C) selects no rows of this table: no row has curve = C"),
    ({"kind": "near", "select": {"curve": "A"}, "x": 33, "target": 1, "rel_tol": 0.1},
     "select (curve = A) has no row at x = 33 (its x: 1, 2, 3, 4, 5)"),
    ({"kind": "ratio", "numerator": {"curve": "A"}, "denominator": {"curve": ["Z", "Y"]}, "max": 2},
     "denominator (curve = Z/Y) selects no rows of this table: no row has curve = Y/Z"),
    ({"kind": "crossing", "first": {"curve": "A", "panel": "b"}, "second": {"curve": "B"}},
     "first (curve = A, panel = b) selects no rows of this table: no row has panel = b"),
])
def test_a_selection_without_rows_makes_the_claim_inconclusive(ab, check, sentence):
    """Issue 24 item 2: no rows selected (e.g. a σ edited out of the grid) is not a crash but an inconclusive
    claim whose reason names the claim, the check, the selection and the values the table holds."""
    for source in ("real", "standin"):
        out = evaluate_claim(ab, claim(check), source)
        assert out["verdict_on_data"] == "inconclusive" and out["no_rows"] is True
        assert out["verdict"] == ("stand-in" if source == "standin" else "inconclusive")
        (c,) = out["checks"]
        assert c["verdict"] == "inconclusive" and "no_rows" in c["numbers"]
        assert c["reason"].startswith(f"claim C-X1, check 1 ({check['kind']}): "), c["reason"]
        assert sentence in c["reason"], c["reason"]
        if "curve" in str(check):
            assert "the table has curve A, B" in c["reason"], c["reason"]
        assert sentence in out["reason"] and "C-X1" in out["reason"]
    assert claims.cause_of(out, data_source="real", scale="quick", reductions={})[0] == "no-rows"


def test_no_rows_reason_lists_the_values_of_every_selected_column():
    """bietti2022 Fig 1a with σ 10 edited to 30: C-B1a-3 selects σ = 10."""
    rows = []
    for sigma in (0.0, 3.0, 30.0):
        for level in ("0", "0.3", "inf"):
            rows += curves({f"a = {level}": (X, X)}, sigma=sigma, level=level, quantity="excess_risk",
                           window="final")
    df = tidy(rows)
    c = {"id": "C-B1a-3", "claim": "with larger noise, local-only dominates", "checks": [
        {"kind": "compare", "select": {"quantity": "excess_risk", "window": "final", "sigma": 10},
         "left": {"level": 0}, "right": {"level": [0.3, 1, 3, "inf"]}, "op": "<"}]}
    out = evaluate_claim(df, c, "synthetic")
    assert out["verdict"] == "inconclusive"
    assert out["reason"] == (
        "inconclusive: claim C-B1a-3, check 1 (compare): left (quantity = excess_risk, window = final, sigma = 10, "
        "level = 0) selects no rows of this table: no row has sigma = 10; the table has quantity excess_risk; window "
        "final; sigma 0, 3, 30; level 0, 0.3, inf")
    numbers = out["checks"][0]["numbers"]["no_rows"]
    assert numbers["absent"] == {"sigma": [10]} and numbers["table_values"]["sigma"] == [0.0, 3.0, 30.0]


def test_no_rows_in_one_check_keeps_the_others_verdicts(ab):
    """A claim whose other check fails stays failed (the worst verdict); the unchecked one is named in the reason."""
    missing = {**PASSING, "left": {"curve": "Z"}}
    out = evaluate_claim(ab, claim(FAILING, missing), "real")
    assert out["verdict"] == "fail" and [c["verdict"] for c in out["checks"]] == ["fail", "inconclusive"]
    assert "check 2 (compare): left (curve = Z) selects no rows" in out["reason"]
    assert claims.cause_of(out, data_source="real", scale="quick", reductions={})[0] == "not-reproduced"
    out = evaluate_claim(ab, claim(PASSING, missing), "real")
    assert out["verdict"] == "inconclusive" and out["checks"][0]["verdict"] == "pass"


def test_unpaired_selections_are_inconclusive_naming_both_sides():
    disjoint = tidy(curves({"A": (X, X), "B": (X + 0.5, X)}))
    out = evaluate_claim(disjoint, claim(PASSING), "real")
    assert out["verdict"] == "inconclusive"
    assert ("left (curve = A) and right (curve = B) share no x to compare (left has x 1, 2, 3, 4, 5; right has x "
            "1.5, 2.5, 3.5, 4.5, 5.5)") in out["reason"]


def test_the_check_functions_still_raise_on_no_rows(ab):
    """The check kinds raise NoRowsError (a ClaimSpecError); evaluate_claim turns it into the verdict."""
    with pytest.raises(claims.NoRowsError) as info:
        run(ab, {**PASSING, "left": {"curve": "Z"}})
    assert info.value.selections == {"left": {"curve": "Z"}}


def test_unknown_check_kind_raises(ab):
    with pytest.raises(KeyError):
        evaluate_claim(ab, claim({"kind": "telepathy"}), "real")


def test_summarize_check():
    s = summarize_check({"kind": "near", "x": 32, "target": 2100, "rel_tol": 0.05})
    assert s == "near(x=32, target=2100, rel_tol=0.05)"


def test_numbers_are_plain_python(ab):
    """worst_at values are Python scalars (the report serialises them)."""
    _, num = run(ab, {**PASSING, "match_on": ["panel"]})
    assert all(type(v) in (float, int, str) for v in num["worst_at"].values())


# --------------------------------------------------------------------------------------------------
# counts, groups, eventually, mean_relative_gap (the forms the lowy2023 claims use)
# --------------------------------------------------------------------------------------------------


def test_bounds_min_points_per_group():
    rows = curves({"m": (X, [0.8, 0.9, 1.2, 0.7, 1.1], {"panel": "a"})}) + \
        curves({"n": (X, [0.8, 1.3, 1.2, 1.4, 1.1], {"panel": "b"})})
    df = tidy(rows)
    check = {"kind": "bounds", "upper": 1, "upper_strict": True, "min_points": 3, "group_by": ["panel"]}
    verdict, numbers = run(df, check)
    assert verdict == "fail" and numbers["groups"]["a"]["verdict"] == "pass"
    assert numbers["groups"]["b"]["verdict"] == "fail"
    assert run(df, {**check, "min_group_share": 0.5})[0] == "pass"
    assert run(df, {**check, "select": {"panel": "a"}})[0] == "pass"


def test_compare_at_first_and_last_and_min_groups():
    rows = []
    for panel, (a, b) in {"p": ([1, 2, 3], [2, 3, 2]), "q": ([1, 2, 3], [0, 1, 4])}.items():
        rows += curves({"A": ([1, 2, 3], a, {"panel": panel, "alg": "A"}),
                        "B": ([1, 2, 3], b, {"panel": panel, "alg": "B"})})
    df = tidy(rows)
    first = {"kind": "compare", "left": {"alg": "A"}, "right": {"alg": "B"}, "op": "<", "at": "first",
             "group_by": ["panel"]}
    v, n = run(df, first)
    assert v == "fail" and n["groups"]["p"]["verdict"] == "pass" and n["groups"]["q"]["verdict"] == "fail"
    assert run(df, {**first, "min_groups": 1})[0] == "pass"
    last = {**first, "at": "last", "left": {"alg": "B"}, "right": {"alg": "A"}}
    assert run(df, last)[1]["groups"]["p"]["verdict"] == "pass"  # 2 < 3 at x = 3


def test_eventually_reports_the_threshold():
    df = tidy(curves({"A": (X, [5, 4, 2, 1, 0.5], {"alg": "A"}), "B": (X, [3, 3, 3, 3, 3], {"alg": "B"})}))
    v, n = run(df, {"kind": "eventually", "left": {"alg": "A"}, "right": {"alg": "B"}, "op": "<="})
    assert v == "pass" and n["from_x"]["all"]["x0"] == 3.0
    v, _ = run(df, {"kind": "eventually", "left": {"alg": "B"}, "right": {"alg": "A"}, "op": "<="})
    assert v == "fail"
    v, n = run(df, {"kind": "eventually", "left": {"alg": "A"}, "right": {"alg": "B"}, "op": "abs<=", "max_diff": 1.0})
    assert v == "fail"  # |A − B| = 2.5 at the largest x
    v, n = run(df, {"kind": "eventually", "left": {"alg": "A"}, "right": {"alg": "B"}, "op": "abs<=", "max_diff": 2.6})
    assert v == "pass" and n["from_x"]["all"]["x0"] == 1.0  # |A − B| ≤ 2.5 everywhere


def test_compare_tol_se_makes_small_gaps_inconclusive():
    df = tidy(curves({"A": (X, [1.0] * 5, {"alg": "A", "se": 0.1}), "B": (X, [1.05] * 5, {"alg": "B", "se": 0.1})}))
    check = {"kind": "compare", "left": {"alg": "B"}, "right": {"alg": "A"}, "op": "<="}
    assert run(df, check)[0] == "fail"
    assert run(df, {**check, "tol_se": True})[0] == "inconclusive"  # 0.05 < sqrt(0.1² + 0.1²)
    assert run(df, {**check, "tol_se": True, "min_points": 6})[0] == "fail"


def test_mean_relative_gap():
    df = tidy(curves({"A": (X, [0.8] * 5, {"alg": "A"}), "B": (X, [1.0] * 5, {"alg": "B"})}))
    check = {"kind": "mean_relative_gap", "left": {"alg": "A"}, "right": {"alg": "B"}, "min": 0.1}
    v, n = run(df, check)
    assert v == "pass" and n["mean_relative_gap"] == pytest.approx(0.2)
    assert run(df, {**check, "min": 0.25})[0] == "fail"


# --------------------------------------------------------------------------------------------------
# tol_counts: "≤ X + tol" (the tolerance counts in the claim's favour) vs the default (inconclusive)
# --------------------------------------------------------------------------------------------------


def test_a_tie_never_wins():
    """lowy2023 Fig 4 C-L4b: nMB below nLoc by 0.003–0.008 at every ε, all within the tolerance 0.01: six ties.
    "Outperforms at ≥ 4 of 6 ε" then hinges on ties: inconclusive, never a pass (it passed when a point within the
    tolerance counted for the claim)."""
    nmb = [0.20, 0.17, 0.152, 0.143, 0.137, 0.136]
    nloc = [0.203, 0.172, 0.155, 0.146, 0.141, 0.139]
    eps = [0.75, 1.5, 3, 6, 12, 18]
    df = tidy(curves({"nMB": (eps, nmb, {"alg": "nmb"}), "nLoc": (eps, nloc, {"alg": "nloc"})}))
    check = {"kind": "compare", "left": {"alg": "nmb"}, "right": {"alg": "nloc"}, "op": "<", "tol": 0.01,
             "min_points": 4}
    verdict, numbers = run(df, check)
    assert verdict == "inconclusive" and numbers["groups"]["all"]["satisfied"] == 0
    assert numbers["groups"]["all"]["within_tol"] == 6
    # a "better than" comparison no longer accepts a tolerance that counts for the claim
    from jsonschema import Draft202012Validator
    from dpfl.claims import check_schema

    assert list(Draft202012Validator(check_schema()).iter_errors({**check, "tol_counts": "for"}))


@pytest.mark.parametrize("values, verdict", [
    ([0.1, 0.1, 0.1, 0.1, 0.5, 0.5], "pass"),          # wins exactly k = 4 (two losses)
    ([0.1, 0.1, 0.1, 0.299, 0.5, 0.5], "inconclusive"),  # 3 wins + 1 tie: k only with the tie
    ([0.1, 0.1, 0.299, 0.5, 0.5, 0.5], "fail"),        # wins + ties = k − 1: unreachable
])
def test_the_counting_rule_at_its_edges(values, verdict):
    """"A < B at ≥ 4 of 6 points" with B = 0.3 and tol 0.01: a point is a win (A below by > tol), a tie or a loss."""
    x = [1, 2, 3, 4, 5, 6]
    df = tidy(curves({"A": (x, values, {"alg": "a"}), "B": (x, [0.3] * 6, {"alg": "b"})}))
    check = {"kind": "compare", "left": {"alg": "a"}, "right": {"alg": "b"}, "op": "<", "tol": 0.01, "min_points": 4}
    assert run(df, check)[0] == verdict


def test_count_verdict_is_the_one_rule():
    from dpfl.claims.selection import count_verdict

    assert count_verdict(4, 0, 4) == "pass" and count_verdict(3, 1, 4) == "inconclusive"
    assert count_verdict(2, 1, 4) == "fail" and count_verdict(0, 0, 0) == "pass"


def test_every_point_claims_fail_on_a_loss_and_hinge_on_a_tie():
    x = [1, 2, 3]
    base = {"kind": "compare", "left": {"alg": "a"}, "right": {"alg": "b"}, "op": "<", "tol": 0.01}
    b = {"B": (x, [0.3] * 3, {"alg": "b"})}
    assert run(tidy(curves({"A": (x, [0.1, 0.1, 0.1], {"alg": "a"}), **b})), base)[0] == "pass"
    assert run(tidy(curves({"A": (x, [0.1, 0.1, 0.295], {"alg": "a"}), **b})), base)[0] == "inconclusive"
    assert run(tidy(curves({"A": (x, [0.1, 0.295, 0.5], {"alg": "a"}), **b})), base)[0] == "fail"


def test_max_losses_fails_a_claim_with_a_loss_anywhere():
    """kato2024's C-K4f: a win in ≥ 75% of panels and a loss in none."""
    rows = []
    for panel, a in zip("abcd", [0.9, 0.9, 0.9, 0.7]):
        rows += curves({"A": ([1], [a], {"alg": "a", "panel": panel}), "B": ([1], [0.8], {"alg": "b", "panel": panel})})
    df = tidy(rows)
    check = {"kind": "compare", "left": {"alg": "a"}, "right": {"alg": "b"}, "op": ">", "tol": 0.01,
             "group_by": ["panel"], "min_group_share": 0.75}
    assert run(df, check)[0] == "pass"
    verdict, numbers = run(df, {**check, "max_losses": 0})
    assert verdict == "fail" and numbers["losses"] == 1
    reason = evaluate_claim(df, claim({**check, "max_losses": 0}), "real")["reason"]
    assert "1 loss (at most 0 allowed)" in reason and "panel d" in reason, reason


def test_eventually_passes_on_a_suffix_of_wins_fails_on_a_loss_at_the_end_else_inconclusive():
    """C-L4a: "outperforms for ε ≥ ε0": a tie at ε = 6 does not start the suffix (it did when ties counted)."""
    b = {"B": (X, [1, 1, 1, 1, 1], {"alg": "B"})}
    ev = {"kind": "eventually", "left": {"alg": "A"}, "right": {"alg": "B"}, "op": "<", "tol": 0.005}
    verdict, numbers = run(tidy(curves({"A": (X, [5, 4, 1.001, 0.5, 0.4], {"alg": "A"}), **b})), ev)
    assert verdict == "pass" and numbers["from_x"]["all"]["x0"] == X[3]
    verdict, numbers = run(tidy(curves({"A": (X, [5, 4, 0.5, 0.4, 1.002], {"alg": "A"}), **b})), ev)
    assert verdict == "inconclusive" and numbers["from_x"]["all"]["x0"] is None
    assert run(tidy(curves({"A": (X, [0.5, 0.4, 0.3, 0.2, 1.2], {"alg": "A"}), **b})), ev)[0] == "fail"


def test_monotone_alone_keeps_within_the_tolerance_for_the_claim():
    mono = {"kind": "monotone", "direction": "decreasing", "strict": False, "tol": 0.005, "select": {"alg": "A"}}
    bumpy = tidy(curves({"A": (X, [5, 4, 4.003, 3, 2], {"alg": "A"})}))
    assert run(bumpy, mono)[0] == "inconclusive"
    assert run(bumpy, {**mono, "tol_counts": "for"})[0] == "pass"
    assert run(tidy(curves({"A": (X, [5, 4, 4.3, 3, 2], {"alg": "A"})})), {**mono, "tol_counts": "for"})[0] == "fail"
    df = tidy(curves({"A": (X, [5, 4, 2, 1.002, 1.001], {"alg": "A"}), "B": (X, [1, 1, 1, 1, 1], {"alg": "B"})}))
    assert run(df, {"kind": "order", "by": "alg", "values": ["B", "A"], "op": "<", "tol": 0.005})[0] == "inconclusive"
    assert run(df, {"kind": "bounds", "select": {"alg": "A"}, "lower": 1.0015, "tol": 0.005})[0] == "inconclusive"


def _rmse_panels(panels: dict) -> pd.DataFrame:
    eps = [0.125, 0.25, 0.5, 1, 2, 3]
    rows = []
    for panel, ys in panels.items():
        rows += curves({"nMB": (eps, ys, {"algorithm": "noisy_mb_sgd", "panel": panel, "se": 0.0})})
    return tidy(rows)


C_L5C = {"kind": "bounds", "select": {"algorithm": "noisy_mb_sgd"}, "upper": 1, "tol": 0.005,
         "min_point_share": 0.6666, "misses_at_smallest_x": True, "group_by": ["panel"]}


def test_c_l5c_most_points_below_one_with_misses_only_at_the_smallest_eps():
    good = _rmse_panels({"a": [1.3, 1.1, 0.9, 0.8, 0.7, 0.6], "b": [0.9, 0.8, 0.7, 0.6, 0.5, 0.4]})
    verdict, numbers = run(good, C_L5C)
    assert verdict == "pass" and numbers["wins"] == 10 and numbers["points_needed"] == 8
    scattered = _rmse_panels({"a": [0.9, 0.8, 1.2, 0.8, 0.7, 0.6], "b": [0.9, 0.8, 0.7, 0.6, 0.5, 0.4]})
    verdict, numbers = run(scattered, C_L5C)
    assert verdict == "fail" and numbers["misses_not_at_smallest_x"]["a"]["x"] == [0.5]
    tie_inside = _rmse_panels({"a": [0.9, 0.8, 0.998, 0.8, 0.7, 0.6], "b": [0.9, 0.8, 0.7, 0.6, 0.5, 0.4]})
    assert run(tie_inside, C_L5C)[0] == "inconclusive"
    too_few = _rmse_panels({"a": [1.3, 1.2, 1.1, 1.05, 0.7, 0.6], "b": [1.3, 1.2, 1.1, 0.6, 0.5, 0.4]})
    assert run(too_few, C_L5C)[0] == "fail"


def test_a_sanity_check_is_marked_and_carries_the_papers_words(ab):
    out = evaluate_claim(ab, {**claim(PASSING), "sanity": True, "quote": "δ is a privacy curve", "place": "Thm 2"},
                         "real")
    assert out["sanity"] is True and out["quote"] == "δ is a privacy curve" and out["place"] == "Thm 2"
    assert evaluate_claim(ab, claim(PASSING), "real")["sanity"] is False


# --------------------------------------------------------------------------------------------------
# reasons: one sentence from the numbers, per check and per claim
# --------------------------------------------------------------------------------------------------

LONG_FLOAT = re.compile(r"\d\.\d{5,}")  # a number printed with more than 4 decimals (0.0026881720430107503)


def _lowy_like():
    eps = [0.75, 1.5, 3, 6, 12, 18]
    rows = curves({"ISRL-DP MB-SGD": (eps, [0.9, 0.8, 0.680, 0.5, 0.4, 0.35],
                                      {"algorithm": "noisy_mb_sgd", "se": 0.001}),
                   "Local SGD": (eps, [0.621] * 6, {"algorithm": "local_sgd", "se": 0.001})})
    return tidy(rows)


def test_reason_of_a_failing_compare_names_the_point_the_values_and_the_tolerance():
    df = _lowy_like()
    check = {"kind": "compare", "left": {"algorithm": "noisy_mb_sgd"}, "right": {"algorithm": "local_sgd"}, "op": "<=",
             "tol": 0.02, "where_x": {"le": 3}}
    out = evaluate_claim(df, claim(check), "real", x_name="ε")
    assert out["verdict"] == "fail"
    assert out["reason"] == ("fails: at ε = 0.75, ISRL-DP MB-SGD 0.900 vs Local SGD 0.621, difference 0.279 > "
                             "tolerance 0.0200")
    assert out["checks"][0]["reason"] == out["reason"].removeprefix("fails: ")


def test_reason_of_an_inconclusive_eventually_says_the_largest_x_is_a_tie():
    df = tidy(curves({"A": (X, [5, 4, 0.5, 0.4, 1.002], {"alg": "A"}), "B": (X, [1, 1, 1, 1, 1], {"alg": "B"})}))
    out = evaluate_claim(df, claim({"kind": "eventually", "left": {"alg": "A"}, "right": {"alg": "B"}, "op": "<",
                                    "tol": 0.005}), "real", x_name="ε")
    assert out["verdict"] == "inconclusive"
    assert out["reason"].startswith("inconclusive: A < B is a tie at the largest ε"), out["reason"]


@pytest.mark.parametrize("kind", list(claims.CHECKS))
def test_every_kind_has_a_reason_for_every_verdict_it_gives(kind):
    """Each check kind builds a one-sentence reason from its numbers: no dict dump, numbers rounded."""
    from test_claim_schema import FULL, TABLE, minimal

    for check in (FULL[kind], minimal(kind)):
        verdict, numbers = claims.CHECKS[kind](TABLE, check)
        text = claims.check_reason(check, verdict, numbers, "ε")
        assert text and "{" not in text and "'" not in text.replace("paper's", ""), text
        assert not LONG_FLOAT.search(text), text
    assert set(claims.REASONS) == set(claims.CHECKS)


def test_claim_reason_joins_the_deciding_checks_and_marks_stand_in_data(ab):
    out = evaluate_claim(ab, claim(PASSING, FAILING), "real")
    assert out["reason"].startswith("fails: ") and out["reason"].count(";") == 0  # only the failing check decides
    standin = evaluate_claim(ab, claim(FAILING), "standin")
    assert standin["verdict"] == "stand-in" and standin["reason"].startswith("stand-in data, not evidence")


def test_reasons_name_x_by_a_column_equal_to_x():
    df = tidy(curves({"RDP": ([1, 32, 64], [2.85, 3267.3, 20107.0], {"conversion": "rdp"})}))
    df["k"] = df["x"]
    assert claims.x_name_of(df) == "k" and claims.x_name_of(tidy(curves({"A": (X, X)}))) == "x"
    near = {"kind": "near", "select": {"conversion": "rdp"}, "x": 32, "target": 2100, "rel_tol": 0.05}
    out = evaluate(df, [claim(near)], "analytic", x_name=claims.x_name_of(df))[0]
    assert out["reason"] == ("fails: at k = 32, RDP is 3,267 vs the paper's 2,100 (relative error 55.6% > 5%)")


def test_number_formats():
    assert claims.fmt(0.0026881720430107503) == "0.00269"
    assert claims.fmt(0.68) == "0.680" and claims.fmt(12.0) == "12.0" and claims.fmt(3267.3) == "3,267"
    assert claims.fmt(5e9) == "5e+09" and claims.fmt(0) == "0" and claims.fmt(None) == "none"
    assert claims.fmt_x(0.125) == "0.125" and claims.fmt_x(18.0) == "18"
    assert claims.rounded({"a": [0.0026881720430107503, 1], "b": "x"}) == {"a": [0.002688, 1], "b": "x"}


# --------------------------------------------------------------------------------------------------
# causes: why a verdict is not a pass, where known
# --------------------------------------------------------------------------------------------------


def test_cause_of_each_verdict():
    fail, ok = {"verdict": "fail"}, {"verdict": "pass"}
    reduced = scale_reductions({"trials": 20, "reps": 3, "grid": {"num": 10}, "eps": [1, 2]},
                                      {"trials": 3, "reps": 3, "grid": {"num": 2}, "eps": [1, 2], "extra": 1})
    assert reduced == {"trials": [20, 3], "grid.num": [10, 2]}
    kw = {"data_source": "real", "scale": "quick", "reductions": reduced}
    assert claims.cause_of(ok, **kw) == (None, "")
    assert claims.cause_of({"verdict": "stand-in"}, **{**kw, "data_source": "standin"})[0] == "stand-in"
    cause, text = claims.cause_of(fail, **kw)
    assert cause == "reduced-scale" and "trials 3 (paper 20)" in text and "not the paper-scale result" in text
    cause, text = claims.cause_of(fail, **kw, other_verdict="pass", difference="K4: the authors' orders",
                                  authors_items=["K4"])
    assert cause == "documented-difference" and "authors-code variant (K4 together) passes" in text and "K4" in text
    assert claims.cause_of(fail, **kw, other_verdict="fail")[0] == "reduced-scale"
    assert claims.cause_of(fail, **kw, mode="authors-code", other_verdict="pass")[0] == "reduced-scale"
    assert claims.cause_of(fail, **{**kw, "reductions": {}, "scale": "paper"})[0] == "not-reproduced"
    assert claims.cause_of({"verdict": "inconclusive"}, **{**kw, "reductions": {}})[0] == "not-reproduced"


def test_paper_inconsistent_cause_and_its_precedence():
    """A claim whose paper contradicts itself (`paper_inconsistent`) and does not pass gets that cause, before
    reduced-scale and not-reproduced (no scale reproduces it as written), after no-rows, stand-in and
    documented-difference (the verdict is not evidence, or the authors' code explains it)."""
    df = tidy(curves({"A": (X, X), "B": (X, X - 1)}))
    why = "the stated setup gives the first sentence only at d = 20, which breaks the second"
    failing = {"kind": "compare", "left": {"curve": "A"}, "right": {"curve": "B"}, "op": "<"}
    out = evaluate_claim(df, claim(failing, paper_inconsistent=why), "real")
    assert out["verdict"] == "fail" and out["paper_inconsistent"] == why
    shows = {"ablation-d20": {"items": ["d = 20"], "verdict": "pass"}}
    kw = {"data_source": "real", "scale": "paper", "reductions": {}, "evidence": shows}
    cause, text = claims.cause_of(out, **kw)
    assert cause == "paper-inconsistent" and why in text and "contradicts itself" in text
    cause, text = claims.cause_of(out, **{**kw, "scale": "quick", "reductions": {"trials": [20, 3]}})
    assert cause == "paper-inconsistent" and "trials 3 (paper 20)" in text
    inconclusive = {**out, "verdict": "inconclusive", "verdict_on_data": "inconclusive"}
    assert claims.cause_of(inconclusive, **kw)[0] == "paper-inconsistent"
    assert claims.cause_of({**out, "verdict": "stand-in"}, **{**kw, "data_source": "standin"})[0] == "stand-in"
    assert claims.cause_of(out, **kw, other_verdict="pass")[0] == "documented-difference"
    assert claims.cause_of({**inconclusive, "no_rows": True}, **kw)[0] == "no-rows"
    passing = evaluate_claim(df, claim({**failing, "op": ">"}, paper_inconsistent=why), "real")
    assert passing["verdict"] == "pass" and claims.cause_of(passing, **kw) == (None, "")
    assert "paper_inconsistent" not in evaluate_claim(df, claim(failing), "real")
    assert claims.cause_of(evaluate_claim(df, claim(failing), "real"), **kw)[0] == "not-reproduced"
    assert claims.cause_of(out, **{**kw, "evidence": None})[0] == "not-reproduced"  # not shown by a run
    assert "paper-inconsistent" in claims.CAUSES


def _envelope(gaps: dict[str, list[float]]) -> pd.DataFrame:
    """bietti2022 Fig 2's C-B2-1 shape: per panel, the best personalized accuracy ("black") and the best of local
    and global ("max(red, blue)") on an ε grid; `gaps`: panel -> black − max at each ε."""
    rows = []
    for panel, gap in gaps.items():
        for x, g in zip([0.3, 1.0, 3.0, 10.0], gap):
            rows += [{"panel": panel, "curve": "best personalized", "x": x, "y": 0.7 + g},
                     {"panel": panel, "curve": "best of local and global", "x": x, "y": 0.7}]
    return tidy(rows)


C_B2_1 = {"kind": "compare", "left": {"curve": "best personalized"}, "right": {"curve": "best of local and global"},
          "op": ">", "match_on": ["panel"], "tol": 0.005, "min_points": 1}


def test_compare_min_points_counts_per_match_on_panel():
    """min_points with match_on and no group_by: the comparison must hold clearly (beyond tol) at ≥ N points in
    every panel; a panel with only points inside the tolerance is inconclusive; one with none (or only violations)
    fails; one panel passing clearly does not carry another."""
    v, num = run(_envelope({"so": [0, 0.02, 0.001, 0], "emnist": [0.03, 0, 0, 0]}), C_B2_1)
    assert v == "pass" and num["group_by"] == ["panel"]
    assert {k: g["satisfied"] for k, g in num["groups"].items()} == {"emnist": 1, "so": 1}
    reason = claims.check_reason(C_B2_1, v, num, "ε")
    assert reason == ("best personalized > best of local and global clearly at ≥ 1 ε value per panel in 2 of 2 "
                      "panels")
    v, num = run(_envelope({"so": [0, 0.02, 0, 0], "emnist": [0.003, 0, 0.004, 0]}), C_B2_1)
    assert v == "inconclusive" and num["groups"]["emnist"]["verdict"] == "inconclusive"
    reason = claims.check_reason(C_B2_1, v, num, "ε")
    assert "in 1 of 2 panels" in reason and reason.endswith(
        "panel emnist: clearly at 0 of 4 ε values (1 needed), 4 within the tolerance, best at ε = 3: 0.704 vs 0.700")
    v, num = run(_envelope({"so": [0, 0.02, 0, 0], "emnist": [-0.01, -0.02, -0.01, -0.03]}), C_B2_1)
    assert v == "fail" and num["groups"]["emnist"]["verdict"] == "fail"
    assert "panel emnist: clearly at 0 of 4 ε values (1 needed), 0 within the tolerance" in claims.check_reason(
        C_B2_1, v, num, "ε")
    # two points needed per panel: so has two clear points, emnist one
    v, num = run(_envelope({"so": [0.01, 0.02, 0, 0], "emnist": [0.03, 0, 0, 0]}), {**C_B2_1, "min_points": 2})
    assert v == "inconclusive" and num["groups"]["so"]["verdict"] == "pass"
    # without min_points every point must hold clearly: ties are inside the tolerance
    assert run(_envelope({"so": [0, 0.02, 0, 0], "emnist": [0.03, 0, 0, 0]}),
               {k: v for k, v in C_B2_1.items() if k != "min_points"})[0] == "inconclusive"


def test_compare_left_and_right_columns():
    """left_column / right_column: kato2024's C-K8b compares the uniform |gap| with the signed zipf gap, so a
    negative zipf gap fails where |zipf gap| would pass."""
    rows = [{"curve": d, "distribution": d, "x": s, "y": g, "abs_gap": abs(g)}
            for s, (u, z) in {5: (-0.01, 0.04), 20: (0.08, -0.17), 50: (0.05, 0.09)}.items()
            for d, g in (("uniform", u), ("zipf", z))]
    check = {"kind": "compare", "left": {"distribution": "uniform"}, "left_column": "abs_gap",
             "right": {"distribution": "zipf"}, "op": "<"}
    v, num = run(tidy(rows), check)
    assert v == "fail" and num["violations"] == 1 and num["worst_at"]["x"] == 20
    assert num["left_at_worst"] == pytest.approx(0.08) and num["right_at_worst"] == pytest.approx(-0.17)
    assert run(tidy(rows), {**check, "right_column": "abs_gap"})[0] == "pass"  # the old, unsigned encoding
    with pytest.raises(ClaimSpecError, match="right column 'gap'"):
        run(tidy(rows), {**check, "right_column": "gap"})


def _two_figures() -> pd.DataFrame:
    """fig4 (a utility panel) and fig5 (a loss panel) as concatenated by the claims stage: B above A in utility on
    fig4; on fig5 B's loss is below A's (B better), its accuracy worse."""
    rows = []
    for fig, quantity, a, b in (("fig4", "utility", 0.6, 0.7), ("fig5", "test_loss", 2.3, 2.1),
                                ("fig5", "utility", 0.5, 0.4)):
        for panel in ("a", "b"):
            rows += [{"figure": fig, "panel": f"{fig}/{panel}", "curve": m, "method": m, "quantity": quantity,
                      "x": 1.0, "y": y} for m, y in (("A", a), ("B", b))]
    return pd.DataFrame(rows)


def test_compare_per_figure_selection_and_op():
    """per_figure: on fig5's rows the test loss is compared, lower is better; its panels count with fig4's."""
    check = {"kind": "compare", "select": {"quantity": "utility"}, "left": {"method": "B"}, "right": {"method": "A"},
             "op": ">", "group_by": ["panel"], "min_group_share": 0.75}
    v, num = run(_two_figures(), check)  # fig5's accuracy: B worse in both of its panels
    assert v == "fail" and num["groups_passing"] == 2
    check = {**check, "per_figure": {"fig5": {"select": {"quantity": "test_loss"}, "op": "<"}}}
    v, num = run(_two_figures(), check)
    assert v == "pass" and num["groups_passing"] == 4 and set(num["groups"]) == {"fig4/a", "fig4/b", "fig5/a", "fig5/b"}
    assert claims.check_reason(check, v, num) == ("B > A (fig5: quantity = test_loss, B < A) in 4 of 4 panels "
                                                  "(3 needed)")
    # on the figures without fig5 (a claim's part without stand-ins, say) the override is idle
    v, num = run(_two_figures().query("figure == 'fig4'"), check)
    assert v == "pass" and set(num["groups"]) == {"fig4/a", "fig4/b"}
    # the wrong op on fig5 fails it there: the op is applied
    v, num = run(_two_figures(), {**check, "per_figure": {"fig5": {"select": {"quantity": "test_loss"}, "op": ">"}}})
    assert v == "fail" and num["groups"]["fig5/a"]["verdict"] == "fail"


def _eps_panels(values: dict[str, dict[str, float]]) -> pd.DataFrame:
    """Final ε per method in panels d, e, f (kato2024 Fig 5, U = 10000)."""
    return tidy([{"panel": p, "curve": m, "method": m, "x": 4.0, "y": y} for p, ys in values.items()
                 for m, y in ys.items()])


C_K5C = {"kind": "jointly", "group_by": ["panel"], "min_groups": 1, "checks": [
    {"kind": "compare", "left": {"method": "g2"}, "right": {"method": "avg"}, "op": "<", "factor": 10.0},
    {"kind": "compare", "left": {"method": "g2"}, "right": {"method": ["gmax", "gmed"]}, "op": "<="}]}


def test_jointly_needs_every_check_in_the_same_group():
    """kato2024's C-K5c: in ≥ 1 panel, GROUP-2's ε < 10·AVG's AND the smallest GROUP ε, both in the same panel: one
    condition in panel d and the other in panel e is a fail (two separate checks with min_groups: 1 passed it)."""
    split = _eps_panels({"d": {"avg": 1.0, "g2": 5.0, "gmax": 3.0, "gmed": 4.0},     # < 10·AVG, not the smallest
                         "e": {"avg": 0.1, "g2": 2.0, "gmax": 3.0, "gmed": 4.0},     # the smallest, not < 10·AVG
                         "f": {"avg": 0.1, "g2": 9.0, "gmax": 3.0, "gmed": 4.0}})
    v, num = run(split, C_K5C)
    assert v == "fail" and num["groups_passing"] == 0
    assert [g["verdict"] for g in num["groups"].values()] == ["fail", "fail", "fail"]
    separately = [{**sub, "match_on": ["panel"], "group_by": ["panel"], "min_groups": 1} for sub in C_K5C["checks"]]
    assert [run(split, s)[0] for s in separately] == ["pass", "pass"]  # the old encoding
    reason = claims.check_reason(C_K5C, v, num)
    assert reason.startswith("both checks hold together in 0 of 3 panels (1 needed); panel d: at x = 4, g2 5.00 vs ")
    together = _eps_panels({"d": {"avg": 1.0, "g2": 5.0, "gmax": 3.0, "gmed": 4.0},
                            "e": {"avg": 1.0, "g2": 2.0, "gmax": 3.0, "gmed": 4.0}})
    v, num = run(together, C_K5C)
    assert v == "pass" and num["groups"]["e"]["verdict"] == "pass"
    assert claims.check_reason(C_K5C, v, num).startswith("both checks hold together in 1 of 2 panels (1 needed); "
                                                         "panel e: ")
    assert run(together, {k: v for k, v in C_K5C.items() if k != "min_groups"})[0] == "fail"  # default: every group
    # a condition within its tolerance in the only candidate panel: inconclusive
    tied = {**C_K5C, "checks": [C_K5C["checks"][0], {**C_K5C["checks"][1], "op": "<", "tol": 0.5}]}
    near = _eps_panels({"e": {"avg": 1.0, "g2": 3.2, "gmax": 3.0, "gmed": 4.0}})
    assert run(near, tied)[0] == "inconclusive"


def test_reduced_scale_says_why_a_check_does_not_compare_like_for_like():
    """A check's reduced_scale.why joins the cause of a reduced-scale verdict it decided, when one of its settings is
    among the reductions; not when another check decided it, nor when those settings are the paper's."""
    why = "this scale cuts GROUP's local epochs, and so its ε"
    df = tidy(curves({"A": (X, X), "B": (X, X - 1)}))
    eps = {"kind": "compare", "left": {"curve": "A"}, "right": {"curve": "B"}, "op": "<",
           "reduced_scale": {"why": why, "settings": ["hyper.group.epochs"]}}
    out = evaluate_claim(df, claim(eps), "real")
    quick = {"data_source": "real", "scale": "quick", "reductions": {"hyper.group.epochs": [50, 1], "rounds": [50, 5]}}
    cause, text = claims.cause_of(out, **quick)
    assert cause == "reduced-scale" and text.endswith(f"a reduced-scale verdict is not the paper-scale result; {why}")
    assert why not in claims.cause_of(out, **{**quick, "reductions": {"rounds": [50, 5]}})[1]
    no_settings = evaluate_claim(df, claim({**eps, "reduced_scale": {"why": why}}), "real")
    assert why in claims.cause_of(no_settings, **{**quick, "reductions": {"rounds": [50, 5]}})[1]
    passing = {**eps, "op": ">"}
    other = evaluate_claim(df, claim(passing, {k: v for k, v in eps.items() if k != "reduced_scale"}), "real")
    assert other["verdict"] == "fail" and why not in claims.cause_of(other, **quick)[1]


def test_a_documented_difference_names_the_items_whose_one_switch_ablation_moves_it():
    """docs/claims.md: the cause names the items a one-switch ablation shows; where only the whole authors-code
    variant moves the verdict, it names the combination and what the single switches gave."""
    fail = {"verdict": "fail"}
    kw = {"data_source": "real", "scale": "paper", "reductions": {}, "authors_items": ["Q2", "Q3", "Q7", "Q8"]}
    abl = {"ablation-q7": {"items": ["Q7"], "verdict": "pass"}, "ablation-q8": {"items": ["Q8"], "verdict": "fail"}}
    cause, text = claims.cause_of(fail, **kw, other_verdict="pass", ablations=abl)
    assert cause == "documented-difference" and text.startswith("one switch moves it: Q7 alone passes (ablation q7)")
    assert "Q8" not in text
    abl["ablation-q7"]["verdict"] = "fail"
    cause, text = claims.cause_of(fail, **kw, other_verdict="pass", ablations=abl)
    assert cause == "documented-difference" and "only the combination" in text and "Q2 + Q3 + Q7 + Q8" in text
    assert "Q7 alone fail" in text and "Q8 alone fail" in text
    cause, text = claims.cause_of(fail, **kw, other_verdict="pass")
    assert cause == "documented-difference" and "no single-switch ablation was built" in text
    # an ablation that passes is evidence even when the whole authors-code variant fails
    q7 = {"ablation-q7": {"items": ["Q7"], "verdict": "pass"}}
    assert claims.cause_of(fail, **kw, other_verdict="fail", ablations=q7)[0] == "documented-difference"
    cause, text = claims.cause_of(fail, **kw, other_verdict="fail", ablations=abl)
    assert cause == "not-reproduced" and "tried: Q7 alone fail; Q8 alone fail; the authors-code variant: fail" in text
    assert "not yet investigated" in claims.cause_of(fail, **kw)[1]


def test_a_paper_inconsistency_names_its_runs_and_needs_them_to_show_it():
    fail = {"verdict": "fail", "paper_inconsistent": "the sentence needs d = 20"}
    kw = {"data_source": "synthetic", "scale": "paper", "reductions": {}}
    shows = {"ablation-d20": {"items": ["d = 20"], "verdict": "pass"}}
    cause, text = claims.cause_of(fail, **kw, evidence=shows)
    assert cause == "paper-inconsistent" and "the d20 run (d = 20): pass" in text
    cause, text = claims.cause_of(fail, **kw, evidence={"ablation-d20": {"items": ["d = 20"], "verdict": "fail"}})
    assert cause == "not-reproduced" and "do not show" in text and "d20: fail" in text
    # no evidence run built: the stated reason alone is not evidence (docs/claims.md)
    cause, text = claims.cause_of(fail, **kw)
    assert cause == "not-reproduced" and "is not shown" in text and "were not built" in text
    cause, text = claims.cause_of(fail, **{**kw, "scale": "quick", "reductions": {"trials": [20, 3]}})
    assert cause == "reduced-scale" and "is not shown" in text


def test_a_not_reproduced_verdict_names_the_evidence_runs_tried():
    """An evidence variant (a setting changed alone, e.g. kato2024 Fig 12's three timed runs per point) is named as a
    run with its why, beside the one-switch ablations' items."""
    fail = {"verdict": "fail"}
    kw = {"data_source": "real", "scale": "paper", "reductions": {}}
    runs = {"ablation-seeds3": {"items": ["three runs"], "verdict": "pass"}}
    q7 = {"ablation-q7": {"items": ["Q7"], "verdict": "fail"}}
    cause, text = claims.cause_of(fail, **kw, evidence=runs, ablations=q7)
    assert cause == "not-reproduced" and text.endswith("tried: Q7 alone fail; the seeds3 run (three runs): pass")
