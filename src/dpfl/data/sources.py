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
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import io
import logging
import os
import shutil
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from dpfl.data import checks, routes, source_record as records, transfer
from dpfl.data.common import DataError, gzip_writer, sha256_file, sha256_gzip_content, standin_seed
from dpfl.data.hashes import HASH_CACHE, check_recorded_files, remember_sha256
from dpfl.io import write_json

CHUNK = transfer.CHUNK
SOURCE_FILE = records.SOURCE_FILE
STAGING_PREFIX = ".incoming-"

Log = Callable[[str], None]
_default_log = logging.getLogger("dpfl.data").info


class _SourceFailed(Exception):
    """This source cannot serve the dataset; the reasons are already in the attempts list."""


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
            record = _staged(raw_dir, lambda staging: _generate_standin(dataset, entry, staging, log,
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
                      lambda st: _copy_verified(dataset, entry, Path(folder), st, log, "dataset_files folder"))
        return {"source": "folder", "location": str(folder), **result} if result else None
    if stage == "mirror":
        if not mirror:
            attempts.append({"source": "mirror", "location": None,
                             "error": "no mirror configured (config/config.yaml data_mirror or $DPFL_DATA_MIRROR)"})
            return None
        folder = Path(mirror) / entry["mirror"]
        result = _try(raw_dir, attempts, "mirror", str(folder),
                      lambda st: _fetch_mirror(dataset, entry, Path(mirror), folder, st, log))
        return {"source": "mirror", "location": str(folder), **result} if result else None
    if limit_mb is not None and (entry["kaggle"] or all(f["urls"] for f in entry["files"])):
        if records.over_auto_limit(entry, "auto", limit_mb):
            reason = too_large(dataset, entry, limit_mb)
            log(f"{dataset}: {reason}")
            attempts.append({"source": "url", "location": None, "error": reason})
            return None
    if all(f["urls"] for f in entry["files"]):
        result = _try(raw_dir, attempts, "url", None, lambda st: _fetch_urls(dataset, entry, st, attempts, log))
        if result:
            urls = list(dict.fromkeys(f["location"] for f in result["files"]))  # unique, in order
            location = urls[0] if len(urls) == 1 else os.path.commonprefix(urls).rpartition("/")[0] + "/"
            return {"source": "url", "location": location, **result}
    if entry["kaggle"]:
        slug = entry["kaggle"]
        if not kaggle_credentials():
            attempts.append({"source": "kaggle", "location": slug, "error": "skipped: no Kaggle credentials "
                             "(~/.kaggle/kaggle.json, KAGGLE_USERNAME/KAGGLE_KEY or KAGGLE_API_TOKEN)"})
        else:
            result = _try(raw_dir, attempts, "kaggle", slug, lambda st: _fetch_kaggle(dataset, entry, st, log))
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


def _fetch_mirror(dataset, entry, mirror: Path, folder: Path, staging: Path, log) -> dict:
    if not mirror.is_dir():
        raise DataError(f"mirror folder {mirror} does not exist")
    if not folder.is_dir():
        raise DataError(f"{dataset}: the mirror {mirror} has no {entry['mirror']}/ folder")
    return _copy_verified(dataset, entry, folder, staging, log, "mirror")


def _copy_verified(dataset, entry, folder: Path, staging: Path, log, what: str) -> dict:
    """Copy every file of the route `entry` from `folder` (the mirror's dataset folder, or the user's own folder)
    into staging, each verified (sha256 or content check) and unpacked or converted as the catalog says."""
    files, archives = [], []
    for f in entry["files"]:
        src = folder / f["name"]
        if not src.is_file():
            raise DataError(f"{dataset}: {f['name']}: not in the {what} ({src})")
        log(f"{dataset}: copying {src}")
        shutil.copyfile(src, staging / f["name"])
        rec = _verify(dataset, f, staging / f["name"], f"{what} {src}", log)
        _add(dataset, f, rec, staging, files, archives, log)
    return {"files": files, "archives": archives}


def _fetch_urls(dataset, entry, staging: Path, attempts: list, log) -> dict:
    """Each file from the first of its URLs that yields a verified copy; every failed URL is an attempt."""
    files, archives, containers = [], [], {}
    for f in entry["files"]:
        dest = staging / f["name"]
        for source in f["urls"]:
            url, member = (source, None) if isinstance(source, str) else (source["url"], source["member"])
            try:
                payload = dest.with_name(dest.name[:-3]) if f["gzip"] else dest
                label = f"{dataset}: {f['name']}"
                size = f["bytes"] or f["approx_bytes"]
                if member is None:
                    _download(url, payload, label, log, size=None if f["gzip"] else size, unpack=bool(f["unpack"]))
                else:
                    if url not in containers:
                        container = staging / f".archive-{len(containers)}"
                        _download(url, container, label, log, unpack=True)
                        containers[url] = container
                    transfer.extract_members(dataset, containers[url], {member: payload}, log)
                if f["gzip"]:
                    _gzip(payload, dest)
                rec = _verify(dataset, f, dest, url, log)
                rec["location"] = url + (f"#{member}" if member else "")
                break
            except DataError as exc:
                attempts.append({"source": "url", "location": url, "error": str(exc)})
                log(f"{url}: failed: {exc}")
                for p in (dest, dest.with_name(dest.name[:-3])):
                    p.unlink(missing_ok=True)
        else:
            raise _SourceFailed()
        _add(dataset, f, rec, staging, files, archives, log)
    for path in containers.values():
        path.unlink(missing_ok=True)
    return {"files": files, "archives": archives}


def _fetch_kaggle(dataset, entry, staging: Path, log) -> dict:
    """All files of the Kaggle dataset (unzipped), then each catalog file picked from them by name. What the kaggle
    package prints (the dataset's URL; its help when it accepts no credentials) goes to `log`, not to stdout."""
    slug = entry["kaggle"]
    box = staging / ".kaggle"
    box.mkdir()
    log(f"{dataset}: downloading Kaggle dataset {slug}")
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            # Imported only here: importing `kaggle` authenticates (an access token over the network) and prints
            # its help, then gives up, without credentials.
            from kaggle.api.kaggle_api_extended import KaggleApi

            api = KaggleApi()
            api.authenticate()
            api.dataset_download_files(slug, path=str(box), unzip=True, quiet=True, force=True)
    except (Exception, SystemExit) as exc:  # the kaggle package calls exit() when it accepts no credentials
        raise DataError(f"{dataset}: Kaggle API download of {slug} failed: {_kaggle_failure(slug, exc)}") from None
    finally:
        for line in printed.getvalue().splitlines():
            if line.strip():
                log(f"{dataset}: kaggle: {line.rstrip()}")
    found = {p.name: p for p in box.rglob("*") if p.is_file()}
    files, archives = [], []
    for f in entry["files"]:
        want = f["name"][:-3] if f["gzip"] else f["name"]
        if want not in found:
            raise DataError(f"{dataset}: {want} not in the Kaggle dataset {slug} (it has: "
                            f"{', '.join(sorted(found)) or 'no files'})")
        dest = staging / f["name"]
        if f["gzip"]:
            _gzip(found[want], dest)
        else:
            os.replace(found[want], dest)
        rec = _verify(dataset, f, dest, f"Kaggle {slug}", log)
        _add(dataset, f, rec, staging, files, archives, log)
    shutil.rmtree(box)
    return {"files": files, "archives": archives}


#: where a user puts Kaggle credentials (docs/data.md, section Kaggle, says how)
KAGGLE_CREDENTIALS = ("~/.kaggle/kaggle.json (mode 600), KAGGLE_USERNAME/KAGGLE_KEY or KAGGLE_API_TOKEN; "
                      "see docs/data.md")


def _kaggle_failure(slug: str, exc: BaseException) -> str:
    """Why a Kaggle download failed, and what to do about it."""
    if isinstance(exc, SystemExit):
        return (f"the kaggle package accepted none of the credentials it found (it exited with status {exc.code}); "
                f"set valid ones ({KAGGLE_CREDENTIALS})")
    if isinstance(exc, ImportError):
        return (f"the kaggle package cannot be imported ({type(exc).__name__}: {exc}); it comes with the project's "
                f"`kaggle` extra: pip install -e '.[kaggle]' (make reproduce installs it)")
    what = f"{type(exc).__name__}: {exc}"
    status = getattr(getattr(exc, "response", None), "status_code", None)
    if status == 401:
        return (f"Kaggle rejected the credentials (HTTP 401, {what}); create a new API token in your Kaggle account "
                f"settings and set it ({KAGGLE_CREDENTIALS})")
    if status == 403:
        return (f"Kaggle refused these credentials access to this dataset (HTTP 403, {what}); check that they are "
                f"the right account's and that https://www.kaggle.com/datasets/{slug} opens for that account")
    if status == 404:
        return f"Kaggle has no dataset {slug} (HTTP 404, {what}); check its `kaggle:` slug in config/datasets.yaml"
    return what


def kaggle_credentials() -> str | None:
    """Where credentials that the kaggle package (2.2.4, with kagglesdk) reads are, or None. Checked without importing
    `kaggle`, whose import authenticates. It reads a username and API key from KAGGLE_USERNAME/KAGGLE_KEY or
    kaggle.json in its config folder (KAGGLE_CONFIG_DIR, else ~/.kaggle, else, on Linux when ~/.kaggle does not
    exist, $XDG_CONFIG_HOME/kaggle); an access token from KAGGLE_API_TOKEN (the token or a file holding it) or
    ~/.kaggle/access_token(.txt); the OAuth credentials of `kaggle auth login` from ~/.kaggle/credentials.json."""
    if os.environ.get("KAGGLE_USERNAME") and os.environ.get("KAGGLE_KEY"):
        return "KAGGLE_USERNAME/KAGGLE_KEY"
    if os.environ.get("KAGGLE_API_TOKEN"):
        return "KAGGLE_API_TOKEN"
    home = Path("~/.kaggle").expanduser()
    config = Path(os.environ.get("KAGGLE_CONFIG_DIR") or home).expanduser()
    if not os.environ.get("KAGGLE_CONFIG_DIR") and sys.platform.startswith("linux") and not home.exists():
        config = Path(os.environ.get("XDG_CONFIG_HOME") or "~/.config", "kaggle").expanduser()
    for path in (config / "kaggle.json", home / "access_token", home / "access_token.txt", home / "credentials.json"):
        if path.is_file() and path.stat().st_size:
            return str(path)
    return None


# --------------------------------------------------------------------------------------------------
# the stand-in
# --------------------------------------------------------------------------------------------------


def _generate_standin(dataset, entry, staging: Path, log, inputs: dict) -> dict:
    """Run the generator; its returned dict (what it made its data from, and why) joins the record's `generator`."""
    from dpfl.data.standins import standin_inputs

    module = importlib.import_module(f"dpfl.data.standins.{entry['standin']}")
    seed = standin_seed(dataset)
    reads = {name: inputs.get(name) for name in standin_inputs(entry["standin"])}
    log(f"{dataset}: generating the synthetic stand-in ({module.__name__}, seed entropy {seed.entropy}"
        + "".join(f", {name} from {path or '(not given)'}" for name, path in reads.items()) + ")")
    start = time.perf_counter()
    made = module.generate(staging, seed, **reads)
    log(f"{dataset}: stand-in generated in {time.perf_counter() - start:.1f} s"
        + "".join(f"; {v}" for k, v in (made if isinstance(made, dict) else {}).items() if k.endswith("_why")))
    files = [{"name": p.name, "sha256": sha256_file(p), "bytes": p.stat().st_size, "verified": "generated"}
             for p in sorted(staging.iterdir()) if p.is_file()]
    generator = {"module": module.__name__, "version": module.VERSION, "seed_entropy": seed.entropy,
                 "seed_from": f"SeedSequence(first 16 bytes of sha256('dpfl-standin/{dataset}'))",
                 **(made if isinstance(made, dict) else {})}
    return {"source": "standin", "location": module.__name__, "standin": True, "generator": generator,
            "files": files, "archives": []}


# --------------------------------------------------------------------------------------------------
# staging, verification, transfers
# --------------------------------------------------------------------------------------------------


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


def _download(url: str, dest: Path, label: str, log, size: int | None = None, unpack: bool = False) -> None:
    """Download a URL to dest (dpfl.data.transfer.fetch: retries, resume, free-disk check, progress lines) through a
    partial file in the dataset's PARTIAL_DIR (dest's staging folder is inside the dataset's folder), kept between
    runs until the real data is complete. `label` (dataset: file) starts every error message."""
    raw_dir = dest.parent.parent
    partial = raw_dir / transfer.PARTIAL_DIR / f"{hashlib.sha256(url.encode()).hexdigest()[:16]}-{dest.name}"
    transfer.fetch(url, dest, label, log, partial=partial, size=size, unpack=unpack)


def _gzip(src: Path, dest: Path) -> None:
    """Compress src to dest (byte-identical for identical content) and remove src."""
    with open(src, "rb") as fin, open(dest, "wb") as raw, gzip_writer(raw) as out:
        shutil.copyfileobj(fin, out, CHUNK)
    src.unlink()


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
