"""Stage `download`: a dataset's raw files in data/raw/<dataset>/ and their provenance SOURCE.json
(see dpfl.data.sources for the order of sources, dpfl.data.staging for verification and atomicity)."""

from __future__ import annotations

from pathlib import Path

from dpfl.data.common import DataError
from dpfl.data.source_record import real_data_hint, request_key
from dpfl.data.sources import acquire
from dpfl.io import get_logger


def run_download(dataset: str, job: dict, source_json: str, log_path: str | None,
                 standin_inputs: dict | None = None) -> dict:
    """`job` = the rule's identity params {entry (catalog entry), data_source (effective), source_key, and
    max_auto_download_mb where data_source auto skips this dataset's download for its size} plus the mirror
    and the user's own folder of the dataset's files (config dataset_files) in effect now (resolved paths or None;
    not part of the identity); `standin_inputs` {dataset: prepared .npz} the
    stand-in generator reads (the rule's standin_<dataset> inputs). A fallback from the first choice is a WARNING
    (console and job log) with one line per reason, also kept in SOURCE.json (`fallback_reasons`). A failure is
    logged as one readable message and ends the job (exit status 1) without a traceback."""
    log = get_logger(log_path, f"data/{dataset}:download")
    mirror, folder = job.get("mirror"), job.get("folder")
    key = job.get("source_key") or request_key(job["entry"], job["data_source"], mirror, folder)
    log.info("data_source %s, mirror %s, source key %s", job["data_source"], mirror or "(none)", key)
    try:
        record = acquire(dataset, job["entry"], Path(source_json).parent, job["data_source"], mirror, log.info, key,
                         standin_inputs, job.get("max_auto_download_mb"), folder)
    except DataError as exc:
        log.error("%s", exc)
        raise SystemExit(1) from None
    reasons = record["fallback_reasons"]
    if reasons and record["standin"] and any("max_auto_download_mb" in r for r in reasons):
        log.warning("WARNING: %s: not downloaded (larger than max_auto_download_mb), using the SYNTHETIC STAND-IN; "
                    "reasons:\n%s", dataset, "\n".join(f"  - {r}" for r in reasons))
    elif reasons and record["standin"]:
        log.warning("WARNING: %s: no real source worked, using the SYNTHETIC STAND-IN (%s); reasons:\n%s", dataset,
                    real_data_hint(dataset, job["entry"]), "\n".join(f"  - {r}" for r in reasons))
    elif reasons:
        log.warning("WARNING: %s: from %s %s, not the first choice; reasons:\n%s", dataset, record["source"],
                    record["location"], "\n".join(f"  - {r}" for r in reasons))
    total = sum(f["bytes"] for f in record["files"])
    log.info("source %s%s: %s; %d files, %.1f MB -> %s", record["source"], " (SYNTHETIC STAND-IN)" * record["standin"],
             record["location"], len(record["files"]), total / 1e6, source_json)
    return record
