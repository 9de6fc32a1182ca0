"""Obtain a dataset's raw files into data/raw/<dataset>/ and record where they came from in SOURCE.json.

`data_source` decides where from:
- auto: the local mirror (<mirror>/<entry.mirror>/<file>), then the official URLs (each file's `urls`, in order),
  then the Kaggle API (only when credentials exist), then the synthetic stand-in;
- real: the same real sources, but an error listing every attempt instead of the stand-in;
- standin: the stand-in generator (dpfl.data.standins.<entry.standin>) only.

With auto or real, verified real files already in data/raw/<dataset>/ (SOURCE.json records a real source whose
checksums match the catalog, and the files re-hash to them) are kept: nothing is fetched again.

A source serves a whole dataset (all files from the mirror, or all from URLs, ...), so SOURCE.json names one.
Every file is verified before use: its sha256 against the catalog (`sha256` or a published variant in
`alt_sha256`), or, where no trustworthy checksum exists, a content check (its sha256 is then recorded).
An attempt works in a private staging folder inside data/raw/<dataset>/ (same file system, so os.replace is
atomic); files move into place only once the whole dataset is complete and verified, and the staging folder is
removed whatever happens, so a failed attempt leaves no file behind. Archives (`unpack`) are verified, then
their listed members are extracted in one pass and the archive is dropped.

Downloads go through dpfl.data.transfer: retries with backoff, resume by HTTP Range from a partial file kept in
data/raw/<dataset>/.partial/ until the real data is complete (also between runs, and beside a stand-in), a free-disk
check before any byte is written, progress lines. Under `auto`, a dataset whose download is larger than
max_auto_download_mb (config) is not downloaded (its mirror copy is still used): the stand-in comes with a reason that
says how to opt in. The verified files' sha256 are kept in data/raw/<dataset>/.sha256.json with their size and mtime
(dpfl.data.hashes.sha256_cached), so that later checks do not hash multi-GB files again.

This module decides which source serves the dataset and writes the record: the order of the sources, what is tried
under each data_source, and the message when none works. Fetching one source into a staging folder is
dpfl.data.fetchers (the mirror or the user's folder, URLs, Kaggle, the stand-in generator); the staging folder and
the verification of each file before it moves into place are dpfl.data.staging.
"""

from __future__ import annotations

import logging
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from dpfl.data import fetchers, routes, source_record as records, transfer
from dpfl.data.common import DataError
from dpfl.data.hashes import check_recorded_files
from dpfl.data.staging import _SourceFailed, _staged
from dpfl.io import write_json

SOURCE_FILE = records.SOURCE_FILE

Log = Callable[[str], None]
_default_log = logging.getLogger("dpfl.data").info


def acquire(dataset: str, entry: dict, raw_dir: str | Path, data_source: str = "auto", mirror: str | None = None,
            log: Log = _default_log, source_key: str | None = None, standin_inputs: dict | None = None,
            max_auto_download_mb: float | None = None, folder: str | None = None) -> dict:
    """Fill raw_dir with the dataset's verified files, write raw_dir/SOURCE.json and return its content.

    `entry` is the dataset's validated entry of config/datasets.yaml; `mirror` the resolved mirror folder or None;
    `source_key` the download job's key (dpfl.data.source_record.source_key), kept in SOURCE.json (default: what this
    call tries); `standin_inputs` {dataset: prepared .npz} the stand-in generator may read (dpfl.data.standins.INPUTS).
    SOURCE.json's `fallback_reasons` lists why the sources before the one used failed (empty when the first
    choice worked). Raises DataError (naming the dataset, each source tried and why it failed) when nothing allowed
    worked. `max_auto_download_mb`: under `auto`, a dataset whose download (the catalog's `bytes` or `approx_bytes` of
    its files) is larger is not downloaded (the mirror is still tried); SOURCE.json's reasons say how to opt in.
    `folder`: the user's own folder of this dataset's files (config `dataset_files`), tried before the mirror."""
    if data_source not in ("auto", "real", "standin"):
        raise ValueError(f"data_source must be auto, real or standin, not {data_source!r}")
    raw_dir = Path(raw_dir)
    if source_key is None:
        source_key = records.request_key(entry, data_source, mirror, folder)
    created = not raw_dir.exists()
    raw_dir.mkdir(parents=True, exist_ok=True)
    attempts: list[dict] = []
    try:
        if data_source != "standin":
            kept = _verified_copy_present(dataset, entry, raw_dir, log)
            if kept is not None:
                kept.update(data_source=data_source, source_key=source_key, checked_at=_now(),
                            fallback_reasons=records.fallback_reasons(kept))
                write_json(kept, raw_dir / SOURCE_FILE)
                return kept
        record = None
        if data_source != "standin":
            limit = max_auto_download_mb if data_source == "auto" else None
            record = _from_real_sources(dataset, entry, raw_dir, mirror, attempts, log, limit, folder)
            if record is None and data_source == "real":
                raise DataError(_failure(dataset, "no real source worked (data_source: real)", attempts, mirror, entry))
        if record is None:
            if not entry["standin"]:
                raise DataError(_failure(dataset,
                                         "no real source worked and this dataset has no stand-in generator yet",
                                         attempts, mirror, entry))
            record = _staged(raw_dir, lambda staging: fetchers._generate_standin(dataset, entry, staging, log,
                                                                                 standin_inputs or {}))
        record = {"dataset": dataset, "source": record["source"], "standin": record["standin"],
                  "location": record["location"], "data_source": data_source, "source_key": source_key,
                  "retrieved_at": _now(), "files": record["files"], "archives": record["archives"],
                  "generator": record["generator"], "attempts": attempts, "route": record.get("route")}
        record["fallback_reasons"] = records.fallback_reasons(record)
        write_json(record, raw_dir / SOURCE_FILE)
        return record
    finally:
        if created and raw_dir.exists() and not any(raw_dir.iterdir()):
            raw_dir.rmdir()


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


def _verified_copy_present(dataset, entry, raw_dir: Path, log) -> dict | None:
    """The SOURCE.json record of real files already in raw_dir, if its checksums are ones the catalog accepts and
    every file still re-hashes to them; else None (the sources are tried)."""
    record = records.read_record(raw_dir)
    if record is None or not records.catalogued_real(entry, record):
        return None
    try:
        check_recorded_files(dataset, raw_dir, record)
    except DataError as exc:
        log(f"{dataset}: the files already in {raw_dir} are not kept ({exc}); fetching again")
        return None
    log(f"{dataset}: the real files already in {raw_dir} match the catalog checksums: kept "
        f"(source {record['source']}, {record['location']}); nothing fetched")
    return record


# --------------------------------------------------------------------------------------------------
# the real sources, in order
# --------------------------------------------------------------------------------------------------


def _from_real_sources(dataset, entry, raw_dir, mirror, attempts, log, limit_mb=None, folder=None) -> dict | None:
    """The dataset's routes (dpfl.data.routes: the catalog's `files`, then its `routes`), each from the user's own
    folder (`folder`, if given), then each from the mirror, then each from its URLs (and Kaggle); the record of the
    first that serves every file, with the route's name, else None. `limit_mb`: a route's download larger than this
    is not tried (the folder and the mirror still are)."""
    for stage in ("folder", "mirror", "remote"):
        if stage == "folder" and not folder:
            continue
        for name, route_entry in routes.variants(entry):
            if stage == "mirror" and not mirror and name != routes.PRIMARY:
                continue
            record = _from_route_sources(dataset, route_entry, raw_dir, mirror, attempts, log, stage, limit_mb,
                                         folder)
            if record is not None:
                return {**record, "route": name}
    return None


def _from_route_sources(dataset, entry, raw_dir, mirror, attempts, log, stage, limit_mb=None,
                        folder=None) -> dict | None:
    """Try the user's folder (stage folder), the mirror (stage mirror), or URLs then Kaggle (stage remote, unless
    the download is over `limit_mb`); the record of the first that serves every file, else None."""
    if stage == "folder":
        result = _try(raw_dir, attempts, "folder", str(folder),
                      lambda st: fetchers._copy_verified(dataset, entry, Path(folder), st, log, "dataset_files folder"))
        return {"source": "folder", "location": str(folder), **result} if result else None
    if stage == "mirror":
        if not mirror:
            attempts.append({"source": "mirror", "location": None,
                             "error": "no mirror configured (config/config.yaml data_mirror or $DPFL_DATA_MIRROR)"})
            return None
        folder = Path(mirror) / entry["mirror"]
        result = _try(raw_dir, attempts, "mirror", str(folder),
                      lambda st: fetchers._fetch_mirror(dataset, entry, Path(mirror), folder, st, log))
        return {"source": "mirror", "location": str(folder), **result} if result else None
    if limit_mb is not None and (entry["kaggle"] or all(f["urls"] for f in entry["files"])):
        if records.over_auto_limit(entry, "auto", limit_mb):
            reason = too_large(dataset, entry, limit_mb)
            log(f"{dataset}: {reason}")
            attempts.append({"source": "url", "location": None, "error": reason})
            return None
    if all(f["urls"] for f in entry["files"]):
        result = _try(raw_dir, attempts, "url", None,
                      lambda st: fetchers._fetch_urls(dataset, entry, st, attempts, log))
        if result:
            urls = list(dict.fromkeys(f["location"] for f in result["files"]))  # unique, in order
            location = urls[0] if len(urls) == 1 else os.path.commonprefix(urls).rpartition("/")[0] + "/"
            return {"source": "url", "location": location, **result}
    if entry["kaggle"]:
        slug = entry["kaggle"]
        if not fetchers.kaggle_credentials():
            attempts.append({"source": "kaggle", "location": slug, "error": "skipped: no Kaggle credentials "
                             "(~/.kaggle/kaggle.json, KAGGLE_USERNAME/KAGGLE_KEY or KAGGLE_API_TOKEN)"})
        else:
            result = _try(raw_dir, attempts, "kaggle", slug, lambda st: fetchers._fetch_kaggle(dataset, entry, st, log))
            if result:
                return {"source": "kaggle", "location": slug, **result}
    return None


def too_large(dataset: str, entry: dict, limit_mb: float) -> str:
    """Why a dataset is not downloaded under `auto`, and how to get it."""
    size, exact = records.download_size(entry)
    about = "" if exact else "about "
    unpacked = sum((f["bytes"] or f["approx_bytes"] or 0) for f in entry["files"] if f["unpack"])
    return (f"skipped: its download is {about}{transfer.human(size)}, over max_auto_download_mb ({limit_mb:g} MB) "
            f"(about {transfer.duration(size / 10e6)} at 10 MB/s, {transfer.duration(size / 1e6)} at 1 MB/s"
            + (f"; the unpacked files take up to about {transfer.human(unpacked * transfer.UNPACK_FACTOR)} more"
               if unpacked else "")
            + f"). To download it, set `dataset_source: {{{dataset}: real}}` in config/config.yaml (or raise "
            f"max_auto_download_mb, or put a copy in the mirror)")



def _try(raw_dir, attempts, source, location, fetch) -> dict | None:
    """Run one source through a staging folder; its result, or None after recording why it failed."""
    try:
        return _staged(raw_dir, fetch)
    except _SourceFailed:  # the reasons are already in `attempts`
        return None
    except DataError as exc:
        attempts.append({"source": source, "location": location, "error": str(exc)})
        return None



def _failure(dataset: str, headline: str, attempts: list, mirror, entry) -> str:
    lines = [f"dataset '{dataset}': {headline}; sources tried:"]
    lines += [f"  - {a['source']}{' ' + a['location'] if a['location'] else ''}: {a['error']}" for a in attempts]
    where = f"{mirror}/{entry['mirror']}/" if mirror else f"<mirror>/{entry['mirror']}/"
    fallback = (f"or allow the synthetic stand-in (config/config.yaml or --config: data_source: auto, or "
                f"dataset_source: {{{dataset}: standin}}; allowed: auto, real, standin)"
                if entry["standin"] else "(there is no stand-in to fall back to)")
    lines.append(f"Put verified copies in {where} (config/config.yaml data_mirror or $DPFL_DATA_MIRROR) or in a "
                 f"folder named by dataset_files: {{{dataset}: <folder>}}, fix the network, {fallback}.")
    return "\n".join(lines)
