"""A dataset's routes: the file sets that give its loader the same files, tried in order (catalog `files` first, as
route `archive`, then each of `routes`), and the conversion of a route's file into the files the loader reads.

Import-light (the rules read the catalog when they build the DAG): the converters are imported when they run.
"""

from __future__ import annotations

from pathlib import Path

PRIMARY = "archive"


def variants(entry: dict) -> list[tuple[str, dict]]:
    """(route name, the entry with that route's files) in the order they are tried; only the first keeps the Kaggle
    source (a Kaggle dataset serves the catalog's own files)."""
    out = [(PRIMARY, entry)]
    for route in entry.get("routes") or []:
        out.append((route["name"], {**entry, "files": route["files"], "kaggle": None, "routes": []}))
    return out


def members(f: dict) -> list[str]:
    """The files a verified catalog file turns into (its archive members, or the files it is converted to); empty
    when the file itself is kept."""
    return list(f["unpack"]) or list((f.get("convert") or {}).get("members") or {})


def convert(dataset: str, f: dict, path: Path, dest: Path, log) -> None:
    """Write the members of a verified `convert` file into folder dest."""
    spec = f["convert"]
    if spec["format"] == "tff_sqlite":
        from dpfl.data.loaders import tff_sqlite

        tff_sqlite.to_h5(dataset, path, spec["members"], dest, spec["layout"], log)
        sqlite = tff_sqlite.decompressed_path(path)
        sqlite.unlink(missing_ok=True)
        return
    raise ValueError(f"unknown conversion format {spec['format']!r}")
