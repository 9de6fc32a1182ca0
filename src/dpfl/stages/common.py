"""Helpers shared by the stage runners: job logs, atomic writes, provenance (versions, device).

Every output is written to a temporary name and renamed when complete, so an interrupted job never
leaves a half-written file that looks finished.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import platform
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path

import hashlib
import importlib

VERSIONED_PACKAGES = ["dpfl", "numpy", "scipy", "pandas", "matplotlib", "dp-accounting", "snakemake", "jsonschema"]


def get_logger(log_path: str | None, name: str) -> logging.Logger:
    """Progress lines with timestamps, to the job's log file (Snakemake `log:`) and to stderr."""
    logger = logging.getLogger(name)
    logger.handlers.clear()
    logger.setLevel(logging.INFO)
    fmt = logging.Formatter("%(asctime)s %(name)s: %(message)s", "%H:%M:%S")
    handlers = [logging.StreamHandler(sys.stderr)]
    if log_path:
        Path(log_path).parent.mkdir(parents=True, exist_ok=True)
        handlers.append(logging.FileHandler(log_path, mode="w"))
    for h in handlers:
        h.setFormatter(fmt)
        logger.addHandler(h)
    logger.propagate = False
    return logger


@contextlib.contextmanager
def atomic_path(path: str | Path):
    """Yield a temporary path next to `path`; rename it to `path` only if the block succeeds."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=path.suffix)
    os.close(fd)
    try:
        yield Path(tmp)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp creates 0600; give the file the usual permissions
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_json(obj, path) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(obj, indent=2, sort_keys=False, default=_json_default) + "\n")


def _json_default(o):
    if hasattr(o, "item"):
        return o.item()
    if hasattr(o, "tolist"):
        return o.tolist()
    return str(o)


def versions() -> dict:
    out = {"python": platform.python_version()}
    for pkg in VERSIONED_PACKAGES:
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = None
    return out


def device() -> dict:
    return {"platform": platform.platform(), "machine": platform.machine(), "cpu_count": os.cpu_count(),
            "accelerator": "none (CPU)"}


def resolve(ref: str):
    """Import "module:function" and return the function."""
    module, _, name = ref.partition(":")
    return getattr(importlib.import_module(module), name)


def config_hash(obj) -> str:
    """Short, stable hash of a JSON-serializable object (the resolved settings of a job)."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:12]
