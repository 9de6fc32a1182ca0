"""Moving bytes for the data layer: a download that survives a flaky network, the free-disk check before it, progress
lines, and one-pass extraction of an archive's members (the sha256 cache of raw files is dpfl.data.common's).

- `fetch(url, dest, ...)`: retries with exponential backoff (RETRIES more tries, waiting BACKOFF_SECONDS, then twice
  as long each time) when a transfer breaks off, or the server answers 5xx, 408 or 429; no connection at all (no
  network, unknown host, connection refused) fails at once, so that a machine offline moves on to the next source.
  The bytes go to a partial file (`partial`, kept in the dataset's PARTIAL_DIR between tries and between runs); a
  later try asks for the rest with an HTTP Range request and appends when the server answers 206 Partial Content,
  and starts again from zero when it answers with the whole file. Only a complete transfer is moved to `dest`; the
  caller then checks its sha256.
- `check_free_space`: refuses, before anything is written, a transfer whose bytes (plus the members unpacked from an
  archive, estimated as UNPACK_FACTOR times its size) do not fit the free space of the folder.
- `Progress`: a line (bytes, rate, time left) at most every PROGRESS_SECONDS while downloading, hashing or unpacking.
- `extract_members`: every wanted member of a tar (read as one stream, a single pass) or zip archive.
- `sha256_logged`: a file's sha256 with progress lines.

The transfer is written here on the standard library (urllib) rather than with a download library: resuming by HTTP
Range between runs, the free-disk check and the project's error messages (dataset: file: what went wrong) are what
matters here, and the verification, staging and provenance around it are the project's own.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import re
import shutil
import tarfile
import time
import urllib.error
import urllib.request
import zipfile
from pathlib import Path
from typing import Callable

from dpfl.data.common import DataError

TIMEOUT_SECONDS = 60  # per blocking network operation (connect, each read)
RETRIES = 5  # further tries after the first one fails
BACKOFF_SECONDS = 2.0  # wait before the first retry; doubled before each next one (2, 4, 8, 16, 32 s)
PROGRESS_SECONDS = 5.0  # a progress line at most this often
CHUNK = 1 << 20
UNPACK_FACTOR = 6  # members unpacked from an archive, estimated as this many times the archive's size
PARTIAL_DIR = ".partial"  # inside data/raw/<dataset>/: partial downloads, resumed by the next try or run
USER_AGENT = "dpfl-repro (+urllib)"

Log = Callable[[str], None]


def human(n: float) -> str:
    """Bytes for people: 1.2 GB, 34.5 MB, 678 kB."""
    for unit, size in (("EB", 1e18), ("PB", 1e15), ("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.1f} {unit}"
    return f"{int(n)} B"


def duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds >= 3600:
        return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"
    if seconds >= 60:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds} s"


class Progress:
    """Progress lines of a long operation: `update(n)` after each block; a line at most every PROGRESS_SECONDS."""

    def __init__(self, log: Log, label: str, total: int | None, done: int = 0):
        self.log, self.label, self.total, self.done = log, label, total or None, done
        self.start_done, self.start = done, time.monotonic()
        self.last = self.start

    def update(self, n: int) -> None:
        self.done += n
        now = time.monotonic()
        if now - self.last >= PROGRESS_SECONDS:
            self.last = now
            self.log(self.line(now))

    def line(self, now: float | None = None) -> str:
        elapsed = max((now or time.monotonic()) - self.start, 1e-9)
        rate = (self.done - self.start_done) / elapsed
        text = f"{self.label}: {human(self.done)}"
        if self.total:
            text += f" of {human(self.total)} ({100 * self.done / self.total:.0f}%)"
        text += f", {human(rate)}/s"
        if self.total and rate > 0:
            text += f", about {duration(max(self.total - self.done, 0) / rate)} left"
        return text


def check_free_space(folder: Path, needed: int, label: str, what: str) -> None:
    """DataError, before anything is written, when `folder`'s file system has less than `needed` bytes free."""
    free = shutil.disk_usage(folder).free
    if free < needed:
        verb = "need" if " and " in what else "needs"
        raise DataError(f"{label}: not enough free disk space in {folder}: {what} {verb} {needed:,} bytes "
                        f"({human(needed)}), {free:,} bytes ({human(free)}) are free; free some space there (or "
                        f"put the files in the mirror, or use the stand-in) and run again")


class _Retry(Exception):
    """A failure worth another try (network error, short transfer, server error)."""


def fetch(url: str, dest: Path, label: str, log: Log, *, partial: Path, size: int | None = None,
          unpack: bool = False, retries: int | None = None, backoff: float | None = None) -> None:
    """Download `url` (http, https or file) to `dest` through the partial file `partial` (resumed when present).
    `size`: the expected size from the catalog, if known (else the server's Content-Length), for the free-disk check
    and the progress lines; `unpack`: the file is an archive whose members are unpacked beside it (counted in the
    free-disk check). DataError after the last try; the partial file stays for the next run to resume."""
    retries = RETRIES if retries is None else retries
    backoff = BACKOFF_SECONDS if backoff is None else backoff
    error = None
    for attempt in range(retries + 1):
        try:
            _attempt(url, partial, label, log, size, unpack)
            os.replace(partial, dest)
            _remove_if_empty(partial.parent)
            return
        except _Retry as exc:
            error = exc
            if attempt == retries:
                break
            wait = backoff * 2 ** attempt
            have = partial.stat().st_size if partial.exists() else 0
            log(f"{label}: {exc}; try {attempt + 2} of {retries + 1} in {wait:g} s"
                + (f", resuming after {have:,} bytes" if have else ""))
            time.sleep(wait)
        except DataError as exc:
            _remove_if_empty(partial.parent)
            if not partial.exists():
                raise
            raise DataError(f"{exc}{_kept(partial, attempt + 1)}") from None
    _remove_if_empty(partial.parent)
    raise DataError(f"{label}: {error}{_kept(partial, retries + 1)}")


def _kept(partial: Path, tries: int) -> str:
    """What a failed transfer leaves for the next run: the bytes received so far, if any."""
    have = partial.stat().st_size if partial.exists() else 0
    return (f" (gave up after {tries} {'try' if tries == 1 else 'tries'}"
            + (f"; the {have:,} bytes received are kept and the next run resumes after them)" if have else ")"))


def _attempt(url: str, partial: Path, label: str, log: Log, size: int | None, unpack: bool) -> None:
    have = partial.stat().st_size if partial.exists() else 0
    if have and size and have == size:
        return  # a complete copy from an earlier run (its sha256 is checked by the caller)
    if have and size and have > size:
        partial.unlink()
        have = 0
    headers = {"User-Agent": USER_AGENT}
    if have:
        headers["Range"] = f"bytes={have}-"
    try:
        resp = urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=TIMEOUT_SECONDS)
    except urllib.error.HTTPError as exc:
        if exc.code == 416 and have:  # the range is not satisfiable: the partial file is stale
            partial.unlink()
            raise _Retry("the server refused to resume (HTTP 416); starting again from zero") from None
        if exc.code in (408, 429) or exc.code >= 500:
            raise _Retry(f"HTTP {exc.code} {exc.reason}") from None
        raise DataError(f"{label}: HTTPError: {exc}") from None
    except (OSError, ValueError) as exc:
        # no connection at all (no network, unknown host, refused, connect timeout): not retried, so that a machine
        # without internet moves on to the next source at once
        raise DataError(f"{label}: {type(exc).__name__}: {exc}") from None
    with resp:
        status = getattr(resp, "status", None) or resp.getcode() or 200
        length = int(resp.headers.get("Content-Length") or 0)
        start = 0
        if have and status == 206:
            match = re.match(r"bytes\s+(\d+)-", resp.headers.get("Content-Range") or "")
            if match and int(match.group(1)) == have:
                start = have
        if have and not start:
            log(f"{label}: the server does not resume (HTTP {status}): starting again from zero")
        total = start + length if length else size
        what = ("the rest of the download" if start else "the download") + (" and its unpacked members" * unpack)
        needed = max((total or 0) - start, 0) + (total or 0) * UNPACK_FACTOR * unpack
        check_free_space(partial.parent if partial.parent.exists() else partial.parent.parent, needed, label, what)
        log(f"downloading {url}" + (f" ({human(total)})" if total else "")
            + (f", resuming after {start:,} bytes" if start else ""))
        partial.parent.mkdir(parents=True, exist_ok=True)
        progress = Progress(log, f"  {label}", total, start)
        received = 0
        try:
            with open(partial, "ab" if start else "wb") as out:
                while block := resp.read(CHUNK):
                    out.write(block)
                    received += len(block)
                    progress.update(len(block))
        except (OSError, http.client.HTTPException) as exc:  # a reset, a read timeout, a connection cut short
            raise _Retry(f"{type(exc).__name__}: {exc}") from None
        if length and received != length:
            raise _Retry(f"transfer ended after {start + received:,} of {start + length:,} bytes")


def _remove_if_empty(folder: Path) -> None:
    try:
        folder.rmdir()
    except OSError:
        pass


def sha256_logged(path: Path, log: Log | None, label: str) -> str:
    """A file's sha256, with progress lines (for files large enough to take a while)."""
    h = hashlib.sha256()
    progress = Progress(log or (lambda msg: None), f"  {label}: sha256", path.stat().st_size)
    with open(path, "rb") as fh:
        while block := fh.read(CHUNK):
            h.update(block)
            progress.update(len(block))
    return h.hexdigest()


def extract_members(dataset: str, archive: Path, wanted: dict[str, Path], log: Log | None = None) -> dict[str, str]:
    """Copy each member whose base name is a key of `wanted` to its path (no path from the archive is used), reading
    the archive once: a tar as one stream (compressed or not), stopping once every wanted member is out. Returns
    {member: sha256}, hashed while copying (a multi-GB member is not read twice)."""
    remaining = dict(wanted)
    names: list[str] = []
    digests: dict[str, str] = {}
    progress = Progress(log or (lambda msg: None), f"  {dataset}: unpacking {archive.name}", None)

    def copy(src, base: str) -> None:
        h = hashlib.sha256()
        with open(remaining.pop(base), "wb") as out:
            while block := src.read(CHUNK):
                out.write(block)
                h.update(block)
                progress.update(len(block))
        digests[base] = h.hexdigest()

    try:
        if zipfile.is_zipfile(archive):
            with zipfile.ZipFile(archive) as z:
                for info in z.infolist():
                    names.append(info.filename)
                    base = Path(info.filename).name
                    if not info.is_dir() and base in remaining:
                        with z.open(info) as src:
                            copy(src, base)
                        if not remaining:
                            return digests
        else:
            with tarfile.open(archive, "r|*") as tar:
                for info in tar:
                    names.append(info.name)
                    base = Path(info.name).name
                    if info.isfile() and base in remaining:
                        with tar.extractfile(info) as src:
                            copy(src, base)
                        if not remaining:
                            return digests
    except (OSError, EOFError, zipfile.BadZipFile, tarfile.TarError) as exc:
        raise DataError(f"{dataset}: cannot read archive for {', '.join(remaining)}: {type(exc).__name__}: "
                        f"{exc}") from None
    shown = ", ".join(names[:10]) + (", ..." if len(names) > 10 else "")
    raise DataError(f"{dataset}: {', '.join(remaining)} not found in the archive (it holds: {shown or 'nothing'})")
