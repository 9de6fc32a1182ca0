"""Pieces every part of the data layer uses: the error type, checksums, stand-in seeds, byte-identical gzip
output, and the prepared-array container (.npz of plain arrays plus a JSON `meta` entry)."""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path

import numpy as np

from dpfl.io import atomic_path


class DataError(RuntimeError):
    """A dataset could not be obtained, verified or read; the message names the dataset, the file and the problem."""


def sha256_file(path: str | Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


def sha256_gzip_content(path: str | Path, chunk: int = 1 << 20) -> str:
    """sha256 of a gzip file's decompressed content: stable across gzip implementations, unlike the file's own."""
    h = hashlib.sha256()
    with gzip.open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


def check_recorded_files(dataset: str, raw_dir: str | Path, record: dict) -> None:
    """Every file SOURCE.json lists is present in raw_dir and re-hashes to its recorded sha256; DataError naming the
    first file that does not (the caller adds how to fix it)."""
    raw_dir = Path(raw_dir)
    for f in record["files"]:
        path = raw_dir / f["name"]
        if not path.is_file():
            raise DataError(f"{dataset}: {f['name']}: listed in SOURCE.json but missing ({path})")
        digest = sha256_file(path)
        if digest != f["sha256"]:
            raise DataError(f"{dataset}: {f['name']}: sha256 {digest} differs from SOURCE.json ({f['sha256']}): {path} "
                            f"changed after its download")


def standin_seed(dataset: str) -> np.random.SeedSequence:
    """The seed of a dataset's stand-in, derived from its name only: every machine and run generates the same bytes."""
    return np.random.SeedSequence(
        int.from_bytes(hashlib.sha256(f"dpfl-standin/{dataset}".encode()).digest()[:16], "big"))


def gzip_writer(fh, level: int = 6) -> gzip.GzipFile:
    """A gzip stream on an open binary file with no file name and mtime 0 in its header, so the same content always
    gives the same bytes."""
    return gzip.GzipFile(filename="", mode="wb", fileobj=fh, compresslevel=level, mtime=0)


def save_prepared(path: str | Path, arrays: dict[str, np.ndarray], meta: dict) -> None:
    """Write arrays + meta to an .npz atomically. Object arrays are refused: the file must load without pickle
    (strings are numpy unicode arrays; meta is a JSON string)."""
    for name, arr in arrays.items():
        if np.asarray(arr).dtype == object:
            raise TypeError(f"{name}: object arrays are not allowed in prepared files (use a numpy unicode array)")
    with atomic_path(path) as tmp, open(tmp, "wb") as fh:
        np.savez_compressed(fh, **arrays, meta=np.array(json.dumps(meta, sort_keys=True)))


def load_prepared(path: str | Path) -> tuple[dict[str, np.ndarray], dict]:
    """Read data/prepared/<dataset>.npz: (arrays by name, meta). meta = {dataset, source, standin, files (name,
    sha256, bytes), loader (module, version), counts, ...}."""
    with np.load(path, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files if k != "meta"}
        meta = json.loads(str(z["meta"]))
    return arrays, meta


def load_prepared_meta(path: str | Path) -> dict:
    """Only the meta of a prepared file (npz entries load lazily: the arrays are not decompressed)."""
    with np.load(path, allow_pickle=False) as z:
        return json.loads(str(z["meta"]))
