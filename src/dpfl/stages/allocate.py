"""Stage `allocate`: a configured arrangement of a prepared dataset (a paper's `allocations:` entry, e.g. the
lowy2023 MNIST silo pool), computed once and shared by every figure that uses it
-> data/allocations/<dataset>/<name>.npz."""

from __future__ import annotations

import json
import time

import numpy as np

from dpfl.data import load_prepared
from dpfl.io import atomic_path, get_logger, resolve
from dpfl.papers import ALLOCATION_KINDS


def run_allocate(name: str, entry: dict, prepared_path: str, out_path: str, log_path: str | None) -> None:
    """`entry` = the allocation's YAML entry {dataset, kind, params}. An allocation that cannot be built (a ValueError
    of its function, e.g. more users than the records allow) is logged as one readable message and ends the job (exit
    status 1) without a traceback, leaving no file behind."""
    log = get_logger(log_path, f"allocate/{name}")
    start = time.perf_counter()
    arrays, meta = load_prepared(prepared_path)
    function = ALLOCATION_KINDS[entry["kind"]].function
    try:
        out = resolve(function)(arrays, entry["params"], log.info)
    except ValueError as exc:  # nothing is written: the npz only appears below, atomically
        paper = name.partition("-")[0]
        log.error("allocation %s: nothing written: %s\n(change the allocation's settings in "
                  "config/papers/%s.yaml: for a seeded scheme, the `users`, `silos` and `distribution` of the panels "
                  "that name it)", name, exc, paper)
        raise SystemExit(1) from None
    out["meta"] = np.array(json.dumps({"allocation": name, **entry, "function": function, "dataset_meta": meta}))
    with atomic_path(out_path) as tmp:
        with open(tmp, "wb") as fh:
            np.savez_compressed(fh, **out)
    log.info("allocation %s in %.1f s -> %s", name, time.perf_counter() - start, out_path)
