"""The benchmark's child process (dpfl.bench.child): what it reads from a cell's table, per family, and one real run
of a cell in its own process (a bietti2022 synthetic cell at smoke scale, which reads no data)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd

from dpfl import jobs
from dpfl.bench.child import timing_of
from dpfl.figure import CellResult, RunTiming
from dpfl.config import load

ROOT = Path(__file__).resolve().parents[1]


def test_a_panel_of_runs_sums_its_runs_loops():
    """kato2024's training panels: one loop per run (method), timed apart."""
    df = pd.DataFrame({"run": ["a-default", "a-default", "a-uldp_avg"]})
    t = timing_of(CellResult(df, {"a-default": RunTiming(seconds_per_round=0.5),
                                  "a-uldp_avg": RunTiming(seconds_per_round=1.5)}))
    assert t["runs"] == {"a-default": 0.5, "a-uldp_avg": 1.5} and t["loop_per_unit"] == 2.0


def test_lowy_panels_give_each_runs_work_per_trial_and_no_loop():
    df = pd.DataFrame({"run": ["a-x", "a-y"]})
    t = timing_of(CellResult(df, {"a-x": RunTiming(seconds_per_trial=0.25), "a-y": RunTiming(seconds_per_trial=0.75)}))
    assert t["runs"] == {"a-x": 0.25, "a-y": 0.75} and t["loop_per_unit"] is None


def test_bietti_grids_count_their_configs_and_evaluations():
    df = pd.DataFrame({"a": [0.0, 0.0, 1.0, 1.0], "eta": [0.1, 0.2, 0.1, 0.1], "evaluations": 7})
    t = timing_of(CellResult(df, RunTiming(seconds_per_round=0.01, seconds_per_evaluation=0.3, full_rounds=120)))
    assert (t["configs"], t["per_eval"], t["evals"], t["units"], t["loop_per_unit"]) == (3, 0.3, 7, 120, 0.01)


def test_protocol_phases_are_averaged_with_the_later_rounds_apart():
    df = pd.DataFrame({"phase": ["key exchange", "key exchange", "aggregation", "aggregation"],
                       "seconds": [3.0, 1.0, 2.0, 4.0], "round": [1, 2, 1, 2]})
    t = timing_of(CellResult(df))
    assert t["phases"] == {"aggregation": 3.0, "key exchange": 2.0, "aggregation (rounds ≥ 2)": 4.0,
                           "key exchange (rounds ≥ 2)": 1.0}


def test_the_child_runs_a_real_cell_in_its_own_process():
    cfg = load(ROOT, {"scale": "smoke"})
    cell = jobs.cell_ids(cfg, "bietti2022", "fig1a", "none")[0]
    job = jobs.build_cell_job(cfg, "bietti2022", "fig1a", cell, "none")
    env = {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.run([sys.executable, "-m", "dpfl.bench.child", json.dumps(job.as_dict()),
                           json.dumps({"prepared": {}, "allocations": {}}), "1"],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    params = job.params
    assert r["configs"] == len(params["etas"]) * len(params["levels"])  # the (η, a) grid of the cell, batched
    assert r["seconds"] > 0 and r["loop_per_unit"] > 0 and r["evals"] >= 1 and r["peak_mb"] > 0
    assert r["device"] == "cpu" and r["gpu_peak_mb"] is None
