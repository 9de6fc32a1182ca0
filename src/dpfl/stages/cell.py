"""Stage `cell`: one cell of an experiment figure (e.g. one method on one panel over all trials)
-> results/<paper>/<figure>/cells/<cell>.parquet, a table of per-trial results, and beside it <cell>.timing.json, the
wall-clock measurements the cell reported (kept out of the table: same configuration, same table bytes), per run for a
cell of several runs (its `run` column, dpfl.figure.FigureLayout.cell_runs)."""

from __future__ import annotations

import time

from dpfl import paths
from dpfl.io import atomic_path, get_logger, resolve, write_json
from dpfl.jobs import CellJob
from dpfl.papers import FIGURES

#: columns a cell function may report that are wall-clock measurements, not results (one value per cell, or per run of
#: a cell of several runs; `seconds_per_trial`: lowy2023's, a run's own work per trial)
TIMING_COLUMNS = ("seconds_per_round", "seconds_per_evaluation", "seconds_per_trial")


def run_cell(job: CellJob, inputs: dict, out_path: str, log_path: str | None, threads: int = 1) -> None:
    """`inputs` = {"prepared": {dataset: path}, "allocations": {name: path}}; `threads` for torch and BLAS."""
    import torch

    torch.set_num_threads(int(threads))
    log = get_logger(log_path, f"{job.paper}/{job.figure}/{job.cell}")
    function = FIGURES[(job.paper, job.figure)].cell
    log.info("mode %s, scale %s, seed %s, device %s; %s", job.mode, job.scale, job.seed, job.device, function)
    start = time.perf_counter()
    df = resolve(function)(job, inputs, log.info)
    seconds = time.perf_counter() - start
    timing = cell_timing(df)
    timing.update(cell_seconds=round(seconds, 3))
    df = df.drop(columns=[c for c in TIMING_COLUMNS if c in df])
    df.insert(0, "cell", job.cell)
    with atomic_path(out_path) as tmp:
        df.to_parquet(tmp, index=False)
    write_json(timing, paths.cell_timing(str(out_path)))
    log.info("cell done in %.1f s: %d rows -> %s", seconds, len(df), out_path)


def cell_timing(df) -> dict:
    """The wall-clock columns of a cell table as its timing sidecar: one value each (`rounds`: the last round), or, for
    a cell of several runs (a `run` column; kato2024's and lowy2023's panel cells), per run under `runs` ({run:
    {column: value, rounds}}, in order) and at the top their sum over the runs (computed one after another), so that
    seconds per round × rounds stays the cell's round loops."""
    def values(d) -> dict:
        out = {c: float(d[c].iloc[0]) for c in TIMING_COLUMNS if c in d and len(d)}
        out["rounds"] = int(d["round"].max()) if "round" in d and len(d) else None
        return out

    if "run" not in df or not len(df):
        return values(df)
    runs = {str(run): values(d) for run, d in df.groupby("run", sort=False)}
    total = {c: sum(r[c] for r in runs.values()) for c in TIMING_COLUMNS if all(c in r for r in runs.values())}
    return {**total, "rounds": values(df)["rounds"], "runs": runs}
