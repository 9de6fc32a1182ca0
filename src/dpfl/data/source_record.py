"""Reading a dataset's provenance record (data/raw/<dataset>/SOURCE.json) and the two things derived from it:

- `source_key`: the part of the download job's identity (the rule's params) that is not the catalog entry or the
  data_source. Once SOURCE.json records real data whose checksums match the catalog, the key is the one that data was
  fetched under (kept in SOURCE.json), so the mirror setting of the moment no longer counts: the data is identified
  by its verified content, not by the path it was copied from. Until then (no data yet, or a stand-in) the key is what
  a download would try: the dataset's folder in the mirror if that folder exists, so that pointing at a mirror after a
  stand-in fallback fetches the real data again.
- `fallback_reasons`: one line per source that failed before the one used (empty when the first choice worked).

Import-light on purpose (the rules call source_key when they build the DAG): SOURCE.json is trusted there, nothing is
hashed; `prepare` checks the files' sha256 before reading them (dpfl.data.hashes.check_recorded_files).
- `download_size` and `over_auto_limit`: how large a dataset's download is, and whether `data_source: auto` skips it
  (config `max_auto_download_mb`).
"""

from __future__ import annotations

import json
from pathlib import Path

from dpfl.data import routes

SOURCE_FILE = "SOURCE.json"
STANDIN_KEY = "standin"
NO_MIRROR_KEY = "no mirror copy"
# attempts that were not real tries: they explain a stand-in, but are no reason to warn when a real source worked
NOT_TRIED = ("no mirror configured", "skipped:")


def read_record(raw_dir: str | Path) -> dict | None:
    """The content of raw_dir/SOURCE.json, or None when there is none (or it cannot be read)."""
    try:
        record = json.loads((Path(raw_dir) / SOURCE_FILE).read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def accepted(f: dict, digest: str | None) -> bool:
    """Whether a file's recorded sha256 is one the catalog entry `f` accepts (its sha256 or a published variant); a
    file with a content check (no published sha256, or another copy) was accepted by it, which recorded its
    sha256."""
    if f["sha256"] and not f.get("check"):
        return digest in (f["sha256"], *f["alt_sha256"])
    return bool(digest)


def catalogued_real(entry: dict, record: dict) -> bool:
    """Whether a SOURCE.json record holds real (not stand-in) data whose every file matches the catalog entry: the
    files of the route it names (dpfl.data.routes; records without one came from the catalog's `files`)."""
    if record.get("standin") is not False or record.get("source") not in ("folder", "mirror", "url", "kaggle"):
        return False
    files = {f.get("name"): f for f in record.get("files") or []}
    archives = {a.get("name"): a for a in record.get("archives") or []}
    chosen = [e for name, e in routes.variants(entry) if name == (record.get("route") or routes.PRIMARY)]
    if not chosen:
        return False
    for f in chosen[0]["files"]:
        members = routes.members(f)
        if members:  # the archive (or database) was verified, then dropped; its members are the files
            if f["name"] not in archives or not accepted(f, archives[f["name"]].get("sha256")):
                return False
            if any(member not in files for member in members):
                return False
        elif f["name"] not in files or not accepted(f, files[f["name"]].get("sha256")):
            return False
    return True


def download_size(entry: dict) -> tuple[int, bool]:
    """(bytes, exact) of a dataset's download: the sum of its files' catalog `bytes`, or `approx_bytes` where the
    exact size is not known (exact is then False); a file with neither counts 0."""
    total, exact = 0, True
    for f in entry["files"]:
        if f.get("bytes") is not None:
            total += f["bytes"]
        else:
            total += f.get("approx_bytes") or 0
            exact = False
    return total, exact


def over_auto_limit(entry: dict, data_source: str, limit_mb: float | None) -> bool:
    """Whether `data_source: auto` skips this dataset's download (larger than `max_auto_download_mb`); the mirror
    copy is still used."""
    return data_source == "auto" and limit_mb is not None and download_size(entry)[0] > limit_mb * 1e6


def real_data_hint(dataset: str, entry: dict | None) -> str:
    """How to get a stand-in dataset's real data, in one phrase with its download size: the one config line, or the
    mirror; "" without the dataset's catalog entry."""
    if entry is None:
        return ""
    size, exact = download_size(entry)
    about = "" if exact else "about "
    from dpfl.data.transfer import human  # import-light module: the rules import this one

    return (f"real data: {about}{human(size)} to download with `dataset_source: {{{dataset}: real}}` in "
            f"config/config.yaml, or a copy in the mirror")


def request_key(entry: dict, data_source: str, mirror: str | None, folder: str | None = None) -> str:
    """What a download would try, as far as it can change without the catalog: the user's own folder of the dataset's
    files (config `dataset_files`) if one is named, else the dataset's mirror folder if it exists (a mirror that does
    not have the dataset offers nothing new)."""
    if data_source == "standin":
        return STANDIN_KEY
    if folder:
        return f"folder {folder}"
    folder = Path(mirror, entry["mirror"]) if mirror else None
    return f"mirror {folder}" if folder is not None and folder.is_dir() else NO_MIRROR_KEY


def source_key(entry: dict, data_source: str, mirror: str | None, raw_dir: str | Path,
               folder: str | None = None) -> str:
    """The download's key (see the module docstring): the key recorded with verified real data already in raw_dir,
    else what a download would try now."""
    if data_source != "standin":
        record = read_record(raw_dir)
        if record is not None and catalogued_real(entry, record):
            # records written before keys were kept: their source stands for the key
            return record.get("source_key") or f"{record['source']} {record.get('location')}"
    return request_key(entry, data_source, mirror, folder)


def one_line(attempt: dict) -> str:
    where = f" {attempt['location']}" if attempt.get("location") else ""
    return f"{attempt['source']}{where}: {' '.join(str(attempt['error']).split())}"


def fallback_reasons(record: dict) -> list[str]:
    """Why the source in `record` is not the first choice: one line per failed attempt before it. A missing mirror
    configuration or Kaggle credentials count only when they led to the stand-in."""
    if record.get("data_source") == "standin":
        return []
    attempts = record.get("attempts") or []
    if not record.get("standin"):
        attempts = [a for a in attempts if not str(a.get("error", "")).startswith(NOT_TRIED)]
    return [one_line(a) for a in attempts]
