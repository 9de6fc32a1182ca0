"""The verified-hash cache of the raw data folders: a raw file's sha256 is computed once and trusted while its size
and mtime are the ones recorded with it, so that checking a multi-GB download before each `prepare` does not hash it
again (data/raw/<dataset>/.sha256.json)."""

from __future__ import annotations

import json
from pathlib import Path

from dpfl.data.common import DataError, sha256_file
from dpfl.io import atomic_path

HASH_CACHE = ".sha256.json"  # in data/raw/<dataset>/: {name: {sha256, bytes, mtime_ns}} of its verified files


def _read_hash_cache(folder: Path) -> dict:
    try:
        cache = json.loads((folder / HASH_CACHE).read_text())
    except (OSError, ValueError):
        return {}
    return cache if isinstance(cache, dict) else {}


def remember_sha256(folder: str | Path, digests: dict[str, str], replace: bool = False) -> None:
    """Record the verified sha256 of files in `folder` ({name: sha256}) with their size and mtime now, in
    folder/HASH_CACHE (`replace`: drop the entries of other files). Best effort: a folder that cannot be written
    only means the files are hashed again next time."""
    folder = Path(folder)
    cache = {} if replace else _read_hash_cache(folder)
    for name, digest in digests.items():
        st = (folder / name).stat()
        cache[name] = {"sha256": digest, "bytes": st.st_size, "mtime_ns": st.st_mtime_ns}
    try:
        with atomic_path(folder / HASH_CACHE) as tmp:
            Path(tmp).write_text(json.dumps(cache, indent=1, sort_keys=True) + "\n")
    except OSError:
        pass


def sha256_cached(path: str | Path) -> str:
    """A file's sha256, taken from its folder's HASH_CACHE while the file's size and mtime are the ones recorded
    with it, else computed (and recorded): a multi-GB raw file is hashed once, not on every run."""
    path = Path(path)
    st = path.stat()
    known = _read_hash_cache(path.parent).get(path.name)
    if isinstance(known, dict) and known.get("bytes") == st.st_size and known.get("mtime_ns") == st.st_mtime_ns \
            and isinstance(known.get("sha256"), str):
        return known["sha256"]
    digest = sha256_file(path)
    remember_sha256(path.parent, {path.name: digest})
    return digest


def check_recorded_files(dataset: str, raw_dir: str | Path, record: dict) -> None:
    """Every file SOURCE.json lists is present in raw_dir and hashes to its recorded sha256 (HASH_CACHE answers
    for a file whose size and mtime have not changed since it was hashed); DataError naming the first file that
    does not (the caller adds how to fix it)."""
    raw_dir = Path(raw_dir)
    for f in record["files"]:
        path = raw_dir / f["name"]
        if not path.is_file():
            raise DataError(f"{dataset}: {f['name']}: listed in SOURCE.json but missing ({path})")
        digest = sha256_cached(path)
        if digest != f["sha256"]:
            raise DataError(f"{dataset}: {f['name']}: sha256 {digest} differs from SOURCE.json ({f['sha256']}): {path} "
                            f"changed after its download")
