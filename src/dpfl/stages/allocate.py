"""Stage `allocate`: a fixed arrangement of a prepared dataset (e.g. the lowy2023 MNIST silo pool),
computed once and shared by every figure that uses it -> data/allocations/<dataset>/<name>.npz."""

from __future__ import annotations

import json
import time

import numpy as np

from dpfl.data import load_prepared
from dpfl.stages.common import atomic_path, get_logger, resolve


def run_allocate(name: str, function: str, prepared_path: str, out_path: str, log_path: str | None) -> None:
    log = get_logger(log_path, f"allocate/{name}")
    start = time.perf_counter()
    arrays, meta = load_prepared(prepared_path)
    out = resolve(function)(arrays, log.info)
    out["meta"] = np.array(json.dumps({"allocation": name, "function": function, "dataset_meta": meta}))
    with atomic_path(out_path) as tmp:
        with open(tmp, "wb") as fh:
            np.savez_compressed(fh, **out)
    log.info("allocation %s in %.1f s -> %s", name, time.perf_counter() - start, out_path)
