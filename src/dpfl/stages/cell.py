"""Stage `cell`: one cell of an experiment figure (e.g. one method on one panel over all trials)
-> results/<paper>/<figure>/cells/<cell>.parquet, a table of per-trial results."""

from __future__ import annotations

import time

from dpfl.io import atomic_path, get_logger, resolve
from dpfl.jobs import CellJob
from dpfl.papers import FIGURES


def run_cell(job: CellJob, inputs: dict, out_path: str, log_path: str | None, threads: int = 1) -> None:
    """`inputs` = {"prepared": {dataset: path}, "allocations": {name: path}}; `threads` for torch and BLAS."""
    import torch

    torch.set_num_threads(int(threads))
    log = get_logger(log_path, f"{job.paper}/{job.figure}/{job.cell}")
    function = FIGURES[(job.paper, job.figure)].cell
    log.info("mode %s, scale %s, seed %s, device %s; %s", job.mode, job.scale, job.seed, job.device, function)
    start = time.perf_counter()
    df = resolve(function)(job, inputs, log.info)
    df.insert(0, "cell", job.cell)
    with atomic_path(out_path) as tmp:
        df.to_parquet(tmp, index=False)
    log.info("cell done in %.1f s: %d rows -> %s", time.perf_counter() - start, len(df), out_path)
