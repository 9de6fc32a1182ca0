"""Fetching one source of a dataset into a staging folder (dpfl.data.staging._staged): a copy from the mirror or the
user's own folder, each file from its URLs (through dpfl.data.transfer), the Kaggle API (with where its credentials
are and what a failed download means), or the synthetic stand-in's generator. Each returns the files' records,
every file verified (dpfl.data.staging._verify) and unpacked or converted as the catalog says; a source that cannot
serve the dataset raises DataError (or _SourceFailed, its reasons already among the attempts).

Apart from dpfl.data.sources, which decides which source is tried when and records the outcome: this module knows
how to talk to each source, nothing about their order.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import io
import os
import shutil
import sys
import time
from pathlib import Path

from dpfl.data import transfer
from dpfl.data.common import DataError, gzip_writer, sha256_file, standin_seed
from dpfl.data.staging import _add, _SourceFailed, _verify

CHUNK = transfer.CHUNK


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
