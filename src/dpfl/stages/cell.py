"""Stage `cell`: one cell of an experiment figure (e.g. one method on one panel over all trials)
-> results/<paper>/<figure>/cells/<cell>.parquet, a table of per-trial results, and beside it <cell>.timing.json, the
wall-clock measurements the cell reported in its CellResult (kept out of the table: same configuration, same table
bytes), per run for a cell of several runs (its `run` column, dpfl.figure.FigureLayout.cell_runs)."""

from __future__ import annotations

import time

from dpfl import paths
from dpfl.io import atomic_path, get_logger, resolve, write_json
from dpfl.jobs import CellJob
from dpfl.figure import CellResult, RunTiming
from dpfl.papers import FIGURES

#: wall-clock measurements (dpfl.figure.RunTiming), never columns of a cell's table: a table holding one is refused
TIMING_COLUMNS = (*RunTiming.SECONDS, "rounds_from_epochs")


def run_cell(job: CellJob, inputs: dict, out_path: str, log_path: str | None, threads: int = 1) -> None:
    """`inputs` = {"prepared": {dataset: path}, "allocations": {name: path}}; `threads` for torch and BLAS."""
    import torch

    torch.set_num_threads(int(threads))
    log = get_logger(log_path, f"{job.paper}/{job.figure}/{job.cell}")
    function = FIGURES[(job.paper, job.figure)].cell
    log.info("mode %s, scale %s, seed %s, device %s; %s", job.mode, job.scale, job.seed, job.device, function)
    start = time.perf_counter()
    result = resolve(function)(job, inputs, log.info)
    seconds = time.perf_counter() - start
    df = checked_table(result, function)
    timing = cell_timing(result)
    timing.update(cell_seconds=round(seconds, 3))
    df.insert(0, "cell", job.cell)
    with atomic_path(out_path) as tmp:
        df.to_parquet(tmp, index=False)
    write_json(timing, paths.cell_timing(str(out_path)))
    log.info("cell done in %.1f s: %d rows -> %s", seconds, len(df), out_path)


def checked_table(result, function: str):
    """The table of a cell's CellResult, refused (TypeError) when the cell returned something else or put a wall-clock
    measurement in its table: the table must depend on the configuration alone."""
    if not isinstance(result, CellResult):
        raise TypeError(f"{function} returned {type(result).__name__}; a cell returns dpfl.figure.CellResult(table, "
                        "timing)")
    timed = [c for c in TIMING_COLUMNS if c in result.table]
    if timed:
        raise TypeError(f"{function}: the cell's table has wall-clock columns {timed}; they belong in its "
                        "CellResult.timing (dpfl.figure.RunTiming)")
    return result.table


def cell_timing(result: CellResult) -> dict:
    """A cell's timing as its sidecar: its RunTiming's seconds (`rounds`: the table's last round; `full_rounds`
    where the run's data sets T), or, for a cell of several runs, per run under `runs` ({run: {...}}, in order)
    and at the top their sum over the runs (computed one after another), so that seconds per round × rounds stays
    the cell's round loops."""
    df = result.table

    def values(t: RunTiming | None, d) -> dict:
        out = t.measured() if t is not None else {}
        out["rounds"] = int(d["round"].max()) if "round" in d and len(d) else None
        if t is not None and t.full_rounds is not None:
            out["full_rounds"] = int(t.full_rounds)
        return out

    if not isinstance(result.timing, dict):
        return values(result.timing, df)
    parts = {run: d for run, d in df.groupby("run", sort=False)} if "run" in df else {}
    runs = {str(run): values(t, parts.get(run, df.iloc[:0])) for run, t in result.timing.items()}
    keys = [k for k in RunTiming.SECONDS if runs and all(k in r for r in runs.values())]
    return {**{k: sum(r[k] for r in runs.values()) for k in keys}, "rounds": values(None, df)["rounds"], "runs": runs}
