"""The staging folder an attempt to fetch a dataset works in, and the verification of every file before anything
uses it (dpfl.data.sources): an attempt fills a private folder inside data/raw/<dataset>/ (same file system, so
os.replace is atomic), its files move into place only once the whole dataset is complete and verified, and the
folder is removed whatever happens. A file is verified by its sha256 against the catalog (`sha256` or a published
variant in `alt_sha256`) or, where no trustworthy checksum exists, by a content check (dpfl.data.checks); an
archive is verified, then its listed members are extracted (or a database converted) and the archive dropped.

Apart from the fetchers (dpfl.data.fetchers) because every source goes through the same staging and the same
checks, whatever it talks to.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from dpfl.data import checks, routes, transfer
from dpfl.data.common import DataError, sha256_file, sha256_gzip_content
from dpfl.data.hashes import HASH_CACHE, remember_sha256
from dpfl.data.source_record import SOURCE_FILE

STAGING_PREFIX = ".incoming-"


class _SourceFailed(Exception):
    """This source cannot serve the dataset; the reasons are already in the attempts list."""


def _staged(raw_dir: Path, fetch) -> dict:
    """Run fetch(staging) in a fresh staging folder inside raw_dir; move its files into raw_dir only if it
    succeeds; always remove the staging folder. Files of an earlier download that the new one lacks are removed
    (partial downloads too, unless the files are a stand-in's). The files' verified sha256 go to HASH_CACHE, so that
    `prepare` does not hash them again."""
    staging = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=raw_dir))
    try:
        result = fetch(staging)
        names = {f["name"] for f in result["files"]}
        for name in sorted(names):
            os.replace(staging / name, raw_dir / name)
        # partial downloads stay while the real data is not there, for the next run to resume
        keep = {SOURCE_FILE, HASH_CACHE} | ({transfer.PARTIAL_DIR} if result.get("standin") else set())
        for old in raw_dir.iterdir():
            if old.name not in names and old.name not in keep and old != staging:
                shutil.rmtree(old) if old.is_dir() else old.unlink()
        remember_sha256(raw_dir, {f["name"]: f["sha256"] for f in result["files"]}, replace=True)
        result.setdefault("standin", False)
        result.setdefault("generator", None)
        return result
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _verify(dataset: str, f: dict, path: Path, origin: str, log=None) -> dict:
    """Check a stored file against its catalog entry before anything uses it; return its record."""
    digest = transfer.sha256_logged(path, log, f"{dataset}: {f['name']}")
    rec = {"name": f["name"], "sha256": digest, "bytes": path.stat().st_size}
    accepted = [f["sha256"], *f["alt_sha256"]] if f["sha256"] else []
    if digest in accepted:
        rec["verified"] = "sha256" if digest == f["sha256"] else "sha256 of a published variant (alt_sha256)"
    elif accepted and not f["check"]:
        raise DataError(f"{dataset}: {f['name']} from {origin}: sha256 mismatch: expected {' or '.join(accepted)}, "
                        f"actual {digest}")
    else:  # no published sha256, or another copy of a file that has a content check: its content decides
        try:
            summary = checks.CHECKS[f["check"]](dataset, path, **f.get("expect", {}))
        except DataError as exc:
            mismatch = f"; its sha256 {digest} is not a published one either" if accepted else ""
            raise DataError(f"{exc} (from {origin}){mismatch}") from None
        why = "sha256 not a published one" if accepted else "no published sha256"
        rec["verified"] = f"content check '{f['check']}': {summary}; {why}, recorded here"
    if f["gzip"]:
        try:
            rec["content_sha256"] = sha256_gzip_content(path)
        except (OSError, EOFError) as exc:
            raise DataError(f"{dataset}: {f['name']} from {origin}: not a valid gzip file: {exc}") from None
    return rec


def _add(dataset, f, rec, staging: Path, files: list, archives: list, log) -> None:
    """Append a verified file's record; an archive is unpacked (its members become the files) and dropped."""
    if not routes.members(f):
        files.append(rec)
        return
    archive = staging / f["name"]
    if f.get("convert"):  # a database whose splits become the loader's files (dpfl.data.routes)
        routes.convert(dataset, f, archive, staging, log)
        how = f"converted from {f['name']} ({f['convert']['format']}; the database: {rec['verified']})"
        digests = {member: sha256_file(staging / member) for member in routes.members(f)}
    else:
        log(f"{dataset}: unpacking {', '.join(f['unpack'])} from {f['name']}")
        digests = transfer.extract_members(dataset, archive, {member: staging / member for member in f["unpack"]}, log)
        how = f"member of {f['name']} (sha256 verified)"
    for member in routes.members(f):
        files.append({"name": member, "sha256": digests[member],
                      "bytes": (staging / member).stat().st_size,
                      "verified": how, "from_archive": f["name"],
                      **({"location": rec["location"]} if "location" in rec else {})})
    archive.unlink()
    archives.append(rec)
