"""The ground floor: job logs, atomic writes, JSON output, config hashes, "module:function" references.
Imports nothing from dpfl, so every layer can use it.

Every output is written to a temporary name and renamed when complete, so an interrupted job never
leaves a half-written file that looks finished.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import json
import logging
import os
import sys
import tempfile
import time
from pathlib import Path


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


class Progress:
    """Progress lines for a job's log: "label k/n, elapsed, ETA" after each step (Snakemake jobs write to log
    files, where a redrawn progress bar would be noise)."""

    def __init__(self, total: int, log, label: str = ""):
        self.total, self.log, self.label, self.done = total, log, label, 0
        self.start = time.perf_counter()

    def step(self, message: str = "") -> None:
        self.done += 1
        elapsed = time.perf_counter() - self.start
        eta = elapsed / self.done * (self.total - self.done)
        self.log(f"{self.label} {self.done}/{self.total} ({elapsed:.0f} s, ETA {eta:.0f} s)"
                 f"{': ' + message if message else ''}")


def write_json(obj, path) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(obj, indent=2, sort_keys=False, default=_json_default) + "\n")


def _json_default(o):
    if hasattr(o, "item"):
        return o.item()
    if hasattr(o, "tolist"):
        return o.tolist()
    return str(o)


def resolve(ref: str):
    """Import "module:function" and return the function (the figure registry names functions this way, so that
    reading it imports nothing heavy)."""
    module, _, name = ref.partition(":")
    return getattr(importlib.import_module(module), name)


def config_hash(obj) -> str:
    """Short, stable hash of a JSON-serializable object (the resolved settings of a job)."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:12]
