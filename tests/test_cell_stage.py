"""The cell stage (dpfl.stages.cell): the table a cell writes holds results only; the wall-clock measurements the cell
function reports (seconds per round, per evaluation) go to a sidecar beside it, so the same configuration gives the
same table bytes, and the table stage still sums the cells' round loops from the sidecars."""

from __future__ import annotations

import json

from dpfl import paths
from dpfl.jobs import CellJob
from dpfl.stages.cell import TIMING_COLUMNS, run_cell
from dpfl.stages.table import _round_loop_seconds

FIGURE_PARAMS = {
    "task": "synthetic", "synthetic": {"n_users": 9, "dim": 5, "personal": 2}, "rounds": 6, "clip": 1.0,
    "sigmas": [2.0], "levels": [0.5, "inf"], "etas": [0.1, 0.5], "model": "linear", "max_memory_mib": 4096,
    "grid": "syn", "delta": 1e-4, "seeds": [0, 1], "dtype": "float32",
    "implementation": {"sampling": "poisson", "cnn_local_step": "eta_theta", "excess_risk": "coordinate_sum",
                       "end_point": "last_round", "rng": "per_seed"},
}


def test_same_job_same_table_bytes_and_the_timings_in_a_sidecar(tmp_path):
    import pandas as pd

    job = CellJob("bietti2022", "fig1a", "syn-sigma2", "none", "smoke", 0, "cpu", FIGURE_PARAMS, {})
    a, b = tmp_path / "a" / "syn-sigma2.parquet", tmp_path / "b" / "syn-sigma2.parquet"
    for out in (a, b):
        out.parent.mkdir()
        run_cell(job, {}, str(out), None)
    assert a.read_bytes() == b.read_bytes()
    table = pd.read_parquet(a)
    assert not set(TIMING_COLUMNS) & set(table.columns) and len(table) == 2 * 2 * 2 * 7
    timing = json.loads(open(paths.cell_timing(str(a))).read())
    assert timing["seconds_per_round"] > 0 and timing["seconds_per_evaluation"] >= 0 and timing["rounds"] == 6
    assert timing["cell_seconds"] > 0
    assert _round_loop_seconds(str(a)) == timing["seconds_per_round"] * 6


def test_a_cell_without_a_timing_sidecar_counts_no_loop_time(tmp_path):
    assert _round_loop_seconds(str(tmp_path / "x.parquet")) == 0.0
    assert paths.cell_timing("results/p/f/cells/a-b.parquet") == "results/p/f/cells/a-b.timing.json"


def test_a_cell_must_return_a_cell_result_with_no_timing_in_its_table():
    import pandas as pd
    import pytest

    from dpfl.figure import CellResult, RunTiming
    from dpfl.stages.cell import checked_table

    with pytest.raises(TypeError, match=r"m:f returned DataFrame; a cell returns dpfl.figure.CellResult"):
        checked_table(pd.DataFrame({"x": [1]}), "m:f")
    with pytest.raises(TypeError, match=r"wall-clock columns \['seconds_per_round'\]"):
        checked_table(CellResult(pd.DataFrame({"x": [1], "seconds_per_round": [0.1]}), RunTiming()), "m:f")
    table = pd.DataFrame({"x": [1]})
    assert checked_table(CellResult(table), "m:f") is table


def test_a_cell_of_several_runs_times_each_run_and_sums_them():
    import pandas as pd

    from dpfl.figure import CellResult, RunTiming
    from dpfl.stages.cell import cell_timing

    df = pd.DataFrame({"run": ["a", "a", "b"], "round": [1, 2, 3]})
    runs = {"a": RunTiming(seconds_per_round=0.5), "b": RunTiming(seconds_per_round=1.5)}
    timing = cell_timing(CellResult(df, runs))
    assert timing == {"seconds_per_round": 2.0, "rounds": 3,
                      "runs": {"a": {"seconds_per_round": 0.5, "rounds": 2},
                               "b": {"seconds_per_round": 1.5, "rounds": 3}}}
    one = cell_timing(CellResult(df.drop(columns="run"), RunTiming(seconds_per_trial=0.25, full_rounds=9)))
    assert one == {"seconds_per_trial": 0.25, "rounds": 3, "full_rounds": 9}
    assert cell_timing(CellResult(df.drop(columns="run"))) == {"rounds": 3}
