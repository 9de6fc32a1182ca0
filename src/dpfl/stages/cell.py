"""Stage `cell`: one cell of an experiment figure (e.g. one algorithm on one panel over all trials)
-> results/<paper>/<figure>/cells/<cell>.parquet, a tidy table of per-trial results."""

from __future__ import annotations

import time

from dpfl.stages.common import atomic_path, get_logger, resolve


def run_cell(paper: str, figure: str, job: dict, inputs: dict, out_path: str, log_path: str | None) -> None:
    """`job` (the rule's params) = {function, cell, params, paper_settings, mode, scale, seed, threads}."""
    log = get_logger(log_path, f"{paper}/{figure}/{job['cell']}")
    log.info("mode %s, scale %s, seed %s; %s", job["mode"], job["scale"], job["seed"], job["function"])
    start = time.perf_counter()
    df = resolve(job["function"])({**job, "figure": figure}, inputs, log.info)
    df.insert(0, "cell", job["cell"])
    with atomic_path(out_path) as tmp:
        df.to_parquet(tmp, index=False)
    log.info("cell done in %.1f s: %d rows -> %s", time.perf_counter() - start, len(df), out_path)
