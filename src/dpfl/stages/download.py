"""Stage `download`: a dataset's raw files in data/raw/<dataset>/ and their provenance SOURCE.json
(see dpfl.data.sources for the order of sources, verification and atomicity)."""

from __future__ import annotations

from pathlib import Path

from dpfl.data.common import DataError
from dpfl.data.sources import acquire
from dpfl.io import get_logger


def run_download(dataset: str, job: dict, source_json: str, log_path: str | None) -> dict:
    """`job` (the rule's params) = {entry (catalog entry), data_source (effective), mirror (resolved path or None)}.
    A failure is logged as one readable message and ends the job (exit status 1) without a traceback."""
    log = get_logger(log_path, f"data/{dataset}:download")
    log.info("data_source %s, mirror %s", job["data_source"], job["mirror"] or "(none)")
    try:
        record = acquire(dataset, job["entry"], Path(source_json).parent, job["data_source"], job["mirror"], log.info)
    except DataError as exc:
        log.error("%s", exc)
        raise SystemExit(1) from None
    total = sum(f["bytes"] for f in record["files"])
    log.info("source %s%s: %s; %d files, %.1f MB -> %s", record["source"], " (SYNTHETIC STAND-IN)" * record["standin"],
             record["location"], len(record["files"]), total / 1e6, source_json)
    return record
