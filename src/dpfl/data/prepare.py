"""Read a downloaded dataset into arrays: data/raw/<dataset>/ (as recorded in SOURCE.json) -> (arrays, meta), through
the dataset's loader (dpfl.data.loaders.<dataset>). Files are re-hashed against SOURCE.json before they are read, so a
raw file changed or damaged since its download is never used: the error names the file and the command that fetches
the dataset again."""

from __future__ import annotations

import importlib
from pathlib import Path

from dpfl import paths
from dpfl.data.common import DataError
from dpfl.data.hashes import check_recorded_files
from dpfl.data.source_record import fallback_reasons, read_record


def refetch_command(dataset: str) -> str:
    """The command that downloads a dataset again and re-prepares it (targets before --forcerun, which takes a list:
    `--forcerun download <target>` would force every download of the default target)."""
    return f".venv/bin/snakemake {paths.prepared_npz(dataset)} --forcerun download"


def _refetch_hint(dataset: str, record: dict) -> str:
    hint = f"fetch it again: {refetch_command(dataset)}"
    if record.get("source") == "mirror":
        hint += f" (it came from the mirror {record['location']}: keep the mirror set, config data_mirror or " \
                f"$DPFL_DATA_MIRROR, or the download falls back to the next source)"
    return hint


def prepare(dataset: str, raw_dir: str | Path, log=lambda msg: None) -> tuple[dict, dict]:
    """(arrays, meta) of a downloaded dataset; meta = {dataset, source, standin, location, generator, files,
    fallback_reasons, loader, counts, ...}."""
    raw_dir = Path(raw_dir)
    record = read_record(raw_dir)
    if record is None:
        raise DataError(f"{dataset}: no readable SOURCE.json in {raw_dir}; {_refetch_hint(dataset, {})}")
    try:
        check_recorded_files(dataset, raw_dir, record)
    except DataError as exc:
        raise DataError(f"{exc}; {_refetch_hint(dataset, record)}") from None
    log(f"{len(record['files'])} files verified against SOURCE.json (source {record['source']})")
    loader = importlib.import_module(f"dpfl.data.loaders.{dataset}")
    arrays, info = loader.load(raw_dir)
    reasons = record["fallback_reasons"] if "fallback_reasons" in record else fallback_reasons(record)
    meta = {"dataset": dataset, "source": record["source"], "standin": record["standin"],
            "location": record["location"], "retrieved_at": record["retrieved_at"], "generator": record["generator"],
            "files": [{k: f[k] for k in ("name", "sha256", "bytes")} for f in record["files"]],
            "fallback_reasons": reasons, "loader": {"module": loader.__name__, "version": loader.VERSION}, **info}
    return arrays, meta
