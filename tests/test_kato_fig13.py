"""kato2024 Fig 13 (dpfl.papers.kato2024.records): the cell and the table on tiny hand-made allocations written to
tmp_path: stacked heights are the per-user training-record counts, local-test records are not counted, and the S-K13
diagnostics (mean largest-silo share, CV of per-user totals) match the hand computation; the YAML's S-K13 checks
read them; the plot draws the table."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from dpfl import claims, config, tidy
from dpfl.papers.kato2024.records import cell as records_cell
from dpfl.papers.kato2024.records import table as records_table
from dpfl.papers.kato2024.records.layout import RecordsLayout

RECORDS = RecordsLayout()

ROOT = Path(__file__).resolve().parent.parent

PARAMS = {"dataset": "creditcard", "allocation": "creditcard", "seed": 0,
          "panels": [{"id": "a", "users": 4, "distribution": "zipf", "silos": 2},
                     {"id": "b", "users": 2, "distribution": "uniform", "silos": 2}]}

# panel a (U = 4, S = 2). Training records (mask True): user 0: silo 0 ×2, silo 1 ×1; user 1: silo 1 ×2;
# user 2: silo 0 ×1, silo 1 ×1; user 3: none. Local-test records (mask False): user 0: silo 0, silo 1;
# user 1: silo 0; user 3: silo 1 (its only record, so it has no training records).
ZIPF = {"user": [0, 0, 0, 0, 1, 1, 2, 0, 1, 2, 3],
        "silo": [0, 0, 1, 0, 1, 1, 0, 1, 0, 1, 1],
        "train_mask": [1, 1, 1, 0, 1, 1, 1, 0, 0, 1, 0]}
ZIPF_TRAINED = np.array([[2, 1], [0, 2], [1, 1], [0, 0]])
ZIPF_HELD = np.array([[1, 1], [1, 0], [0, 0], [0, 1]])
# panel b (U = 2, S = 2): balanced, one local-test record that is not counted
UNIFORM = {"user": [0, 0, 1, 1, 1], "silo": [0, 1, 0, 1, 1], "train_mask": [1, 1, 1, 1, 0]}


def write_alloc(path: Path, spec: dict) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, user=np.array(spec["user"], np.int64), silo=np.array(spec["silo"], np.int64),
             train_mask=np.array(spec["train_mask"], bool), record=np.arange(len(spec["user"])))
    return str(path)


@pytest.fixture
def inputs(tmp_path):
    names = RECORDS.needs(PARAMS)[1]
    assert names == ("kato2024-creditcard/zipf-U4-S2-seed0", "kato2024-creditcard/uniform-U2-S2-seed0")
    files = {names[0]: write_alloc(tmp_path / "zipf.npz", ZIPF),
             names[1]: write_alloc(tmp_path / "uniform.npz", UNIFORM)}
    return {"prepared": {"creditcard": str(tmp_path / "unused.npz")}, "allocations": files}


def run_cells(inputs, params=PARAMS):
    out = []
    for cell in RECORDS.cells(params):
        own, settings = RECORDS.cell_params(params, {}, cell)
        assert settings == {} and [p["id"] for p in own["panels"]] == [cell]
        out.append(records_cell.run_cell(SimpleNamespace(params=own, cell=cell), inputs, log=lambda *_: None).table)
    return out


@pytest.fixture
def table(inputs):
    return tidy.finalize(records_table.table(PARAMS, run_cells(inputs), log=lambda *_: None), "kato2024", "fig13")


def test_layout_one_cell_per_panel_reading_its_own_allocation():
    assert RECORDS.cells(PARAMS) == ["a", "b"]
    assert RECORDS.needs(PARAMS)[0] == ("creditcard",)
    own, _ = RECORDS.cell_params(PARAMS, {}, "b")
    assert own["panels"] == [PARAMS["panels"][1]] and own["seed"] == 0
    with pytest.raises(ValueError, match="no panel"):
        RECORDS.cell_params(PARAMS, {}, "c")


def test_cell_counts_training_records_only(inputs):
    a = run_cells(inputs)[0]
    assert len(a) == 4 * 2  # every (user, silo) pair, zeros included
    got = np.zeros((4, 2), int)
    got[a["user"], a["silo"]] = a["records"]
    np.testing.assert_array_equal(got, ZIPF_TRAINED)
    held = np.zeros((4, 2), int)
    held[a["user"], a["silo"]] = a["held_out"]
    np.testing.assert_array_equal(held, ZIPF_HELD)
    assert got.sum() + held.sum() == len(ZIPF["user"])


def test_stacked_heights_are_per_user_training_totals(table):
    a = table[table["panel"] == "a"]
    rec = a[a["quantity"] == "records"]
    assert sorted(rec["curve"].unique()) == ["silo 0", "silo 1"]
    heights = rec.groupby("x")["y"].sum()
    np.testing.assert_array_equal(heights.index.to_numpy(), [0, 1, 2, 3])  # users in id order
    np.testing.assert_array_equal(heights.to_numpy(), [3, 2, 2, 0])  # local-test records excluded
    for s in (0, 1):
        seg = rec[rec["silo"] == s].sort_values("x")
        np.testing.assert_array_equal(seg["y"].to_numpy(), ZIPF_TRAINED[:, s])
        assert (seg["curve"] == f"silo {s}").all()
    totals = a[a["quantity"] == "user_total"].sort_values("x")
    np.testing.assert_array_equal(totals["y"].to_numpy(), [3, 2, 2, 0])
    np.testing.assert_array_equal(totals["held_out"].to_numpy(), [2, 1, 0, 1])
    b = table[(table["panel"] == "b") & (table["quantity"] == "records")]
    np.testing.assert_array_equal(b.groupby("x")["y"].sum().to_numpy(), [2, 2])


def summary(table, panel, quantity) -> pd.Series:
    rows = table[(table["panel"] == panel) & (table["quantity"] == quantity)]
    assert len(rows) == 1
    return rows.iloc[0]


def test_s_k13_diagnostics_by_hand(table):
    share = (table[(table["panel"] == "a") & (table["quantity"] == "largest_silo_share")]
             .sort_values("x")["y"].to_numpy())
    np.testing.assert_allclose(share[:3], [2 / 3, 1.0, 0.5])
    assert math.isnan(share[3])  # user 3 has no training records: no share
    mean = summary(table, "a", "mean_largest_silo_share")
    assert mean["y"] == pytest.approx((2 / 3 + 1.0 + 0.5) / 3)  # over the 3 users with records
    assert mean["users_counted"] == 3 and mean["users_without_records"] == 1 and mean["x"] == 0  # x = the seed
    totals = np.array([3, 2, 2, 0])
    cv = np.sqrt(np.mean((totals - totals.mean()) ** 2)) / totals.mean()  # population std / mean, all 4 users
    assert summary(table, "a", "cv_of_totals")["y"] == pytest.approx(cv)
    assert summary(table, "a", "cv_of_totals")["train_records"] == 7
    assert summary(table, "b", "cv_of_totals")["y"] == pytest.approx(0.0)
    assert summary(table, "b", "mean_largest_silo_share")["y"] == pytest.approx(0.5)
    assert summary(table, "b", "cv_of_totals")["held_out"] == 1


def test_yaml_s_k13_checks_read_the_summary_rows(table):
    fig = config.load(ROOT).figure("kato2024", "fig13")
    (claim,) = [c for c in fig["claims"] if c["id"] == "S-K13"]
    # panel a: mean share 13/18 > 0.5; panel b: CV 0 < 0.15
    result = claims.evaluate_claim(table, claim, "real", "seed")
    assert result["verdict"] == "pass", result["reason"]
    assert [r["numbers"]["points"] for r in result["checks"]] == [1, 1]
    # a zipf allocation whose users sit evenly in both silos fails the share bound
    flat = table.copy()
    flat.loc[(flat["panel"] == "a") & (flat["quantity"] == "mean_largest_silo_share"), "y"] = 0.5
    assert claims.evaluate_claim(flat, claim, "real", "seed")["verdict"] == "fail"


def test_ids_outside_the_panel_are_refused(tmp_path, inputs):
    bad = dict(ZIPF, user=[u if u < 3 else 7 for u in ZIPF["user"]])
    inputs["allocations"]["kato2024-creditcard/zipf-U4-S2-seed0"] = write_alloc(tmp_path / "bad.npz", bad)
    with pytest.raises(ValueError, match="user ids"):
        run_cells(inputs)


def test_plot_draws_one_stacked_panel_per_panel(table, tmp_path):
    import matplotlib.pyplot as plt

    from dpfl.papers.kato2024.records.plot import bars as plot

    tidy.write(table, tmp_path / "fig13.csv")  # the plot reads the table as the plot stage does
    fig = plot(tidy.read(tmp_path / "fig13.csv"), {"plot": {}}, {})
    try:
        assert len(fig.axes) == 2
        tops = {}
        for bar in fig.axes[0].patches:
            x = round(bar.get_x() + bar.get_width() / 2)
            tops[x] = max(tops.get(x, 0.0), bar.get_y() + bar.get_height())
        assert tops == {0: 3.0, 1: 2.0, 2: 2.0, 3: 0.0}  # every user's stack ends at its training total
        # the S-K13 diagnostics in a box in each panel, not in the title (the next panel's title sat on the x-label
        # of the panel above), and above the bars under it
        (box_a,), (box_b,) = fig.axes[0].texts, fig.axes[1].texts
        assert "mean largest-silo share 0.722" in box_a.get_text() and "share" not in fig.axes[0].get_title()
        assert "CV of per-user totals 0.000" in box_b.get_text()
        fig.canvas.draw()
        for ax, box in zip(fig.axes, (box_a, box_b)):
            extent = box.get_bbox_patch().get_window_extent()
            assert ax.bbox.x0 <= extent.x0 and extent.x1 <= ax.bbox.x1 and extent.y1 <= ax.bbox.y1
            under = [b for b in ax.patches if b.get_window_extent().x1 > extent.x0]
            assert all(b.get_window_extent().y1 <= extent.y0 for b in under)
        assert fig.axes[0].xaxis.label.get_window_extent().y0 > fig.axes[1].title.get_window_extent().y1
        assert [t.get_text() for t in fig.legends[0].get_texts()] == ["silo 0", "silo 1"]
    finally:
        plt.close(fig)
