"""Stage `prepare`: data/raw/<dataset>/ -> data/prepared/<dataset>.npz (dpfl.data.prepare does the reading)."""

from __future__ import annotations

import time
from pathlib import Path

from dpfl.data.common import DataError, save_prepared
from dpfl.data.prepare import prepare
from dpfl.io import get_logger


def run_prepare(dataset: str, source_json: str, npz_path: str, log_path: str | None) -> None:
    log = get_logger(log_path, f"data/{dataset}:prepare")
    start = time.perf_counter()
    try:
        arrays, meta = prepare(dataset, Path(source_json).parent, log.info)
    except DataError as exc:
        log.error("%s", exc)
        raise SystemExit(1) from None
    if meta["fallback_reasons"]:
        used = "the SYNTHETIC STAND-IN" if meta["standin"] else f"{meta['source']} {meta['location']}"
        log.warning("WARNING: %s: prepared from %s, not its first choice; reasons:\n%s", dataset, used,
                    "\n".join(f"  - {r}" for r in meta["fallback_reasons"]))
    for name, arr in arrays.items():
        log.info("  %s: %s %s", name, arr.dtype, arr.shape)
    save_prepared(npz_path, arrays, meta)
    log.info("%s%s: counts %s; wrote %s in %.1f s", dataset, " (SYNTHETIC STAND-IN)" * meta["standin"], meta["counts"],
             npz_path, time.perf_counter() - start)
