"""Read a downloaded dataset into arrays: data/raw/<dataset>/ (as recorded in SOURCE.json) -> (arrays, meta), through
the dataset's loader (dpfl.data.loaders.<dataset>). Files are re-hashed against SOURCE.json before they are read, so a
raw file changed or damaged since its download is never used."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

from dpfl.data.common import DataError, sha256_file


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
