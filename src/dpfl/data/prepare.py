"""Stage `prepare`: data/raw/<dataset>/ (as recorded in SOURCE.json) -> data/prepared/<dataset>.npz, through the
dataset's loader (dpfl.data.loaders.<dataset>). Files are re-hashed against SOURCE.json before they are read, so a
raw file changed or damaged since its download is never used."""

from __future__ import annotations

import importlib
import json
import time
from pathlib import Path

from dpfl.data.common import DataError, save_prepared, sha256_file
from dpfl.stages.common import get_logger


def prepare(dataset: str, raw_dir: str | Path, log=lambda msg: None) -> tuple[dict, dict]:
    """(arrays, meta) of a downloaded dataset; meta = {dataset, source, standin, location, generator, files,
    loader, counts, ...}."""
    raw_dir = Path(raw_dir)
    record = json.loads((raw_dir / "SOURCE.json").read_text())
    for f in record["files"]:
        path = raw_dir / f["name"]
        if not path.is_file():
            raise DataError(f"{dataset}: {f['name']}: listed in SOURCE.json but missing from {raw_dir}; rerun its download")
        digest = sha256_file(path)
        if digest != f["sha256"]:
            raise DataError(f"{dataset}: {f['name']}: sha256 {digest} differs from SOURCE.json ({f['sha256']}): the file "
                            f"changed after its download; rerun the download")
    log(f"{len(record['files'])} files verified against SOURCE.json (source {record['source']})")
    loader = importlib.import_module(f"dpfl.data.loaders.{dataset}")
    arrays, info = loader.load(raw_dir)
    meta = {"dataset": dataset, "source": record["source"], "standin": record["standin"],
            "location": record["location"], "retrieved_at": record["retrieved_at"], "generator": record["generator"],
            "files": [{k: f[k] for k in ("name", "sha256", "bytes")} for f in record["files"]],
            "loader": {"module": loader.__name__, "version": loader.VERSION}, **info}
    return arrays, meta


def run_prepare(dataset: str, source_json: str, npz_path: str, log_path: str | None) -> None:
    log = get_logger(log_path, f"data/{dataset}:prepare")
    start = time.perf_counter()
    try:
        arrays, meta = prepare(dataset, Path(source_json).parent, log.info)
    except DataError as exc:
        log.error("%s", exc)
        raise SystemExit(1) from None
    for name, arr in arrays.items():
        log.info("  %s: %s %s", name, arr.dtype, arr.shape)
    save_prepared(npz_path, arrays, meta)
    log.info("%s%s: counts %s; wrote %s in %.1f s", dataset, " (SYNTHETIC STAND-IN)" * meta["standin"], meta["counts"],
             npz_path, time.perf_counter() - start)
