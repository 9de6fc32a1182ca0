"""Stage `data`: compute one figure's tidy table (results/<paper>/<figure>/<figure>.csv) and its
provenance record (<figure>.meta.json: mode, data source, params, config hash, timing, versions)."""

from __future__ import annotations

import time

from dpfl import tidy
from dpfl.stages.common import atomic_path, config_hash, device, get_logger, resolve, versions, write_json


def run_data(paper: str, figure: str, job: dict, csv_path: str, meta_path: str, log_path: str | None) -> None:
    """`job` (the rule's params) = {function, kind, mode, scale, params}."""
    log = get_logger(log_path, f"{paper}/{figure}:data")
    log.info("mode %s, scale %s; computing with %s", job["mode"], job["scale"], job["function"])
    start = time.perf_counter()
    df = resolve(job["function"])(job["params"], job["mode"], log.info)
    df = tidy.finalize(df, paper, figure)
    seconds = time.perf_counter() - start
    with atomic_path(csv_path) as tmp:
        tidy.write(df, tmp)
    meta = {
        "paper": paper,
        "figure": figure,
        "mode": job["mode"],
        "scale": job["scale"],
        "kind": job["kind"],
        "data_source": "analytic" if job["kind"] == "analytic" else job.get("data_source", "unknown"),
        "datasets": [],
        "params": job["params"],
        "config_hash": config_hash({"paper": paper, "figure": figure, **job}),
        "compute_seconds": round(seconds, 3),
        "rows": len(df),
        "versions": versions(),
        "device": device(),
    }
    write_json(meta, meta_path)
    log.info("wrote %d rows in %.2f s -> %s", len(df), seconds, csv_path)
