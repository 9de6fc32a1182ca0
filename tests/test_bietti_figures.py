"""bietti2022 figure tables: the Fig 2 envelope on a hand-worked example, and the Fig 2 table built from cell
tables (best over η at the final round, ε paired, local-only line, trade-off curves and the gain area)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from dpfl.papers.bietti2022.table import PERSONALIZED, envelope, fig2


def test_envelope_hand_worked():
    """Start (0.1, 0.50). Sorted: (0.05, 0.40) first, kept (nothing kept yet); (0.1, 0.50) start, ε within 0.01 of
    0.05? no (0.05 apart): kept; (0.105, 0.55) within 0.01 of 0.1 and better: replaces it; (0.5, 0.52) lower: dropped;
    (1.0, 0.60) kept; (1.005, 0.60) equal accuracy, within 0.01: replaces; (3.0, 0.58) dropped; (10, 0.7) kept."""
    points = [(1.0, 0.60), (0.5, 0.52), (0.105, 0.55), (10.0, 0.70), (3.0, 0.58), (1.005, 0.60), (0.05, 0.40)]
    assert envelope(points, (0.1, 0.50)) == [(0.05, 0.40), (0.105, 0.55), (1.005, 0.60), (10.0, 0.70)]
    assert envelope([], (0.1, 0.3)) == [(0.1, 0.3)]


def cell_rows(level, a, sigma, eps, accs_by_eta, T=10):
    rows = []
    for eta, acc in accs_by_eta.items():
        for t in (0, T):
            rows.append({"seed": 0, "level": level, "a": a, "eta": eta, "round": t, "accuracy": acc if t else 0.1,
                         "eps": eps if t else 0.0, "sigma": sigma, "metric": "accuracy", "grid": "g"})
    return pd.DataFrame(rows)


def test_fig2_table_from_cells():
    tables = [cell_rows("0", 0.0, math.nan, 0.0, {0.1: 0.50, 1.0: 0.55}),  # local only: best η → 0.55
              cell_rows("inf", math.inf, 1.0, 5.0, {0.1: 0.70, 1.0: 0.65}),
              cell_rows("inf", math.inf, 10.0, 0.5, {0.1: 0.40, 1.0: 0.45}),
              cell_rows("inf", math.inf, 100.0, 0.05, {0.1: 0.20, 1.0: 0.21}),  # off the drawn range (ε < 0.1)
              cell_rows("1", 1.0, 1.0, 5.0, {0.1: 0.72, 1.0: 0.60}),
              cell_rows("1", 1.0, 10.0, 0.5, {0.1: 0.58, 1.0: 0.57}),
              cell_rows("1", 1.0, 0.0, math.inf, {0.1: 0.9, 1.0: 0.9})]  # σ = 0: ε = ∞, not a point
    df = fig2({"grids": {"g": {}}, "eps_grid_points": 5}, tables, lambda m: None)
    pts = df[df["window"] == "point"]
    local = pts[pts["curve"] == "local only"]
    assert local["y"].tolist() == [0.55] and local["eta_best"].tolist() == [1.0]
    blue = pts[pts["curve"] == "global only"].sort_values("x")
    assert blue[["x", "y"]].values.tolist() == [[0.05, 0.21], [0.5, 0.45], [5.0, 0.70]]
    black = pts[pts["curve"] == PERSONALIZED].sort_values("x")
    # the spec's rule keeps an off-range first point (ε 0.05 < ε_min); the start point then tops it
    assert black[["x", "y"]].values.tolist() == [[0.05, 0.21], [0.1, 0.55], [0.5, 0.58], [5.0, 0.72]]
    budget = df[(df["window"] == "budget")]
    at = lambda curve: budget[budget["curve"] == curve].sort_values("x")["y"].to_numpy()  # noqa: E731
    grid = np.geomspace(0.1, 1000, 5)  # 0.1, 1, 10, 100, 1000
    assert np.allclose(at(PERSONALIZED), [0.55, 0.58, 0.72, 0.72, 0.72])
    assert np.allclose(at("global only"), [0.21, 0.45, 0.70, 0.70, 0.70])
    assert np.allclose(at("best of local and global"), [0.55, 0.55, 0.70, 0.70, 0.70])
    gain = df.loc[df["quantity"] == "gain_area", "y"].iloc[0]
    assert gain == pytest.approx(np.trapezoid([0, 0.03, 0.02, 0.02, 0.02], np.log(grid)))
    small = df[df["window"] == "smallest_global_eps"].set_index("curve")
    assert small.loc["local only", "y"] == 0.55 and small.loc[PERSONALIZED, "y"] == 0.58
    assert (small["x"] == 0.5).all()  # the smallest drawn ε of a global-only point (0.05 lies left of ε_min = 0.1)


def test_fig1_best_of_groups_picks_the_best_final_level():
    from dpfl.papers.bietti2022.table import fig1

    rows = []
    for lv, a, accs in (("0", 0.0, {0.1: 0.30}), ("1", 1.0, {0.1: 0.50, 1.0: 0.55}), ("10", 10.0, {0.1: 0.60}),
                        ("inf", math.inf, {0.1: 0.40})):
        for eta, acc in accs.items():
            for t in (0, 10):
                rows.append({"seed": 0, "level": lv, "a": a, "eta": eta, "round": t, "accuracy": acc if t else 0.1,
                             "eps": 1.0 if t and a > 0 else 0.0, "sigma": math.nan if a == 0 else 2.0,
                             "metric": "accuracy"})
    params = {"grids": {"g": {"sigmas": [2.0], "levels": [0, 1, 10, "inf"]}},
              "best_of": {"small": [0, 1], "large": [10, "inf"]}}
    df = fig1(params, [pd.DataFrame(rows)], lambda m: None)
    groups = df[df["level"].isin(["small", "large"])].set_index("level")
    assert groups.loc["small", "y"] == 0.55 and groups.loc["small", "best_level"] == "1"
    assert groups.loc["large", "y"] == 0.60 and groups.loc["large", "best_level"] == "10"
    assert groups.loc["large", "curve"] == "best of αQ ∈ {10, ∞}" and (groups["window"] == "final").all()
