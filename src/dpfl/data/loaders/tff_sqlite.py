"""TensorFlow Federated's current format (`<name>.sqlite.lzma`) -> the legacy HDF5 files the EMNIST and Stackoverflow
loaders read, without TensorFlow.

The format: an LZMA-compressed SQLite database with
- a table `examples` (split_name TEXT, client_id TEXT, serialized_example_proto BLOB): one row per example, the
  example a serialized `tf.train.Example` protocol buffer;
- a table `client_metadata` (client_id, split_name, num_examples): one row per client and split.

A split becomes one HDF5 file in the legacy layout examples/<client_id>/<feature>: clients in sorted order, a
client's examples in the database's row order (rowid, the order TFF's own reader returns them in). Features per
dataset (LAYOUTS): EMNIST pixels (n, 28, 28) float32 and label (n,) int32 (as TFF casts it); Stackoverflow
creation_date, title, tags, tokens, type as UTF-8 strings and score as int64, each (n,). The loaders then give the
same arrays as from the legacy files.

`tf.train.Example` is read by a small protocol-buffer wire-format reader: Example {1: Features}; Features
{1: map<string, Feature>}; Feature {1: BytesList, 2: FloatList, 3: Int64List}, each a repeated field 1 (floats and
integers packed or not).
"""

from __future__ import annotations

import lzma
import shutil
import sqlite3
import struct
from pathlib import Path

import h5py
import numpy as np

from dpfl.data.common import DataError

CHUNK = 1 << 20
BYTES, FLOAT, INT = "bytes", "float", "int"
# per dataset: feature -> (kind, shape of one example, dtype in the HDF5 file)
LAYOUTS = {
    "emnist": {"pixels": (FLOAT, (28, 28), np.float32), "label": (INT, (), np.int32)},
    "stackoverflow": {**{f: (BYTES, (), None) for f in ("creation_date", "title", "tags", "tokens", "type")},
                      "score": (INT, (), np.int64)},
}
REQUIRED_TABLES = ("examples", "client_metadata")
REQUIRED_COLUMNS = ("split_name", "client_id", "serialized_example_proto")


# --------------------------------------------------------------------------------------------------
# protocol-buffer wire format
# --------------------------------------------------------------------------------------------------


class WireError(ValueError):
    """Bytes that are not a valid serialized message."""


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise WireError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise WireError("varint longer than 10 bytes")


def fields(buf: bytes):
    """(field number, wire type, value) of every field of a message: an int for varints, bytes for length-delimited
    fields, 4 or 8 raw bytes for fixed-width ones."""
    pos, end = 0, len(buf)
    while pos < end:
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 2:
            size, pos = _varint(buf, pos)
            if pos + size > end:
                raise WireError(f"field {number}: length {size} past the end")
            value, pos = buf[pos:pos + size], pos + size
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            if pos + size > end:
                raise WireError(f"field {number}: fixed-width value past the end")
            value, pos = buf[pos:pos + size], pos + size
        else:
            raise WireError(f"field {number}: unsupported wire type {wire}")
        yield number, wire, value


def _signed64(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _varints(buf: bytes) -> list[int]:
    out, pos = [], 0
    while pos < len(buf):
        value, pos = _varint(buf, pos)
        out.append(_signed64(value))
    return out


def parse_feature(buf: bytes) -> tuple[str, list]:
    """A serialized Feature -> (kind, values): bytes, float or int values."""
    kind, values = BYTES, []
    for number, _, value in fields(buf):
        if number not in (1, 2, 3) or not isinstance(value, bytes):
            continue
        kind = {1: BYTES, 2: FLOAT, 3: INT}[number]
        for inner, wire, item in fields(value):
            if inner != 1:
                continue
            if kind == BYTES and wire == 2:
                values.append(item)
            elif kind == FLOAT and wire == 2:  # packed
                if len(item) % 4:
                    raise WireError("packed float list not a multiple of 4 bytes")
                values.extend(struct.unpack(f"<{len(item) // 4}f", item))
            elif kind == FLOAT and wire == 5:
                values.append(struct.unpack("<f", item)[0])
            elif kind == INT and wire == 2:  # packed
                values.extend(_varints(item))
            elif kind == INT and wire == 0:
                values.append(_signed64(item))
            else:
                raise WireError(f"{kind} list with wire type {wire}")
    return kind, values


def parse_example(buf: bytes) -> dict[str, tuple[str, list]]:
    """A serialized tf.train.Example -> {feature name: (kind, values)}."""
    out = {}
    for number, _, features in fields(buf):
        if number != 1 or not isinstance(features, bytes):
            continue
        for entry_number, _, entry in fields(features):
            if entry_number != 1 or not isinstance(entry, bytes):
                continue
            key, feature = b"", b""
            for n, _, v in fields(entry):
                if n == 1 and isinstance(v, bytes):
                    key = v
                elif n == 2 and isinstance(v, bytes):
                    feature = v
            out[key.decode("utf-8")] = parse_feature(feature)
    return out


# --------------------------------------------------------------------------------------------------
# the database
# --------------------------------------------------------------------------------------------------


def decompressed_path(path: Path) -> Path:
    return path.with_name(path.name[:-5] if path.name.endswith(".lzma") else path.name + ".sqlite")


def decompressed(dataset: str, path: Path) -> Path:
    """The SQLite database of `path` (<name>.sqlite.lzma), decompressed beside it once (<name>.sqlite)."""
    out = decompressed_path(path)
    if out.is_file():
        return out
    part = out.with_name(out.name + ".part")
    try:
        with lzma.open(path, "rb") as src, open(part, "wb") as dst:
            shutil.copyfileobj(src, dst, CHUNK)
    except (OSError, EOFError, lzma.LZMAError) as exc:
        part.unlink(missing_ok=True)
        raise DataError(f"{dataset}: {path.name}: not a readable LZMA file (truncated or corrupt?): {exc}") from None
    part.replace(out)
    return out


def _connect(dataset: str, db: Path, name: str) -> sqlite3.Connection:
    try:
        con = sqlite3.connect(f"file:{db}?mode=rw", uri=True)
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        missing = [t for t in REQUIRED_TABLES if t not in tables]
        if missing:
            raise DataError(f"{dataset}: {name}: no {', '.join(missing)} table (has: {', '.join(sorted(tables))})")
        columns = {r[1] for r in con.execute("PRAGMA table_info(examples)")}
        missing = [c for c in REQUIRED_COLUMNS if c not in columns]
        if missing:
            raise DataError(f"{dataset}: {name}: the examples table has no {', '.join(missing)} column")
    except sqlite3.Error as exc:
        raise DataError(f"{dataset}: {name}: not a readable SQLite database: {exc}") from None
    return con


def split_counts(dataset: str, path: Path) -> dict[str, dict[str, int]]:
    """{split: {clients, examples}} from the database's client_metadata table."""
    db = decompressed(dataset, path)
    con = _connect(dataset, db, path.name)
    try:
        rows = con.execute("SELECT split_name, COUNT(DISTINCT client_id), SUM(num_examples) FROM client_metadata "
                           "GROUP BY split_name").fetchall()
    except sqlite3.Error as exc:
        raise DataError(f"{dataset}: {path.name}: cannot read client_metadata: {exc}") from None
    finally:
        con.close()
    return {split: {"clients": int(c), "examples": int(n or 0)} for split, c, n in rows}


def _ensure_index(con: sqlite3.Connection) -> None:
    """An index that finds a client's examples of a split (the real databases are large)."""
    for _, index, *_ in con.execute("PRAGMA index_list(examples)").fetchall():
        leading = [r[2] for r in con.execute(f"PRAGMA index_info('{index}')")][:2]
        if "client_id" in leading:
            return
    con.execute("CREATE INDEX IF NOT EXISTS dpfl_split_client ON examples (split_name, client_id)")


def to_h5(dataset: str, path: Path, members: dict[str, str], dest: Path, layout: str, log=None) -> None:
    """Write one legacy HDF5 file per split: `members` {file name: split name}; files go to folder `dest`."""
    features = LAYOUTS[layout]
    db = decompressed(dataset, path)
    con = _connect(dataset, db, path.name)
    try:
        _ensure_index(con)
        for member, split in members.items():
            if log:
                log(f"{dataset}: writing {member} from split {split!r} of {path.name}")
            ids = [r[0] for r in con.execute("SELECT DISTINCT client_id FROM client_metadata WHERE split_name = ?",
                                             (split,))]
            if not ids:
                raise DataError(f"{dataset}: {path.name}: split {split!r} has no client in client_metadata")
            with h5py.File(dest / member, "w") as h5:
                group = h5.create_group("examples")
                for cid in sorted(ids):
                    protos = [r[0] for r in con.execute(
                        "SELECT serialized_example_proto FROM examples WHERE split_name = ? AND client_id = ? "
                        "ORDER BY rowid", (split, cid))]
                    _write_client(dataset, path.name, group.create_group(cid), cid, protos, features)
    except sqlite3.Error as exc:
        raise DataError(f"{dataset}: {path.name}: cannot read the database: {exc}") from None
    finally:
        con.close()


def _write_client(dataset: str, name: str, group: h5py.Group, cid: str, protos: list, features: dict) -> None:
    where = f"{dataset}: {name}: client {cid}"
    columns: dict[str, list] = {f: [] for f in features}
    for i, proto in enumerate(protos):
        try:
            example = parse_example(bytes(proto))
        except (WireError, UnicodeDecodeError) as exc:
            raise DataError(f"{where}: example {i} is not a tf.train.Example: {exc}") from None
        for f, (kind, shape, _) in features.items():
            if f not in example:
                raise DataError(f"{where}: example {i} has no feature {f!r} (has: {', '.join(sorted(example))})")
            got, values = example[f]
            size = int(np.prod(shape))
            if (got != kind and values) or len(values) != size:
                raise DataError(f"{where}: example {i}: feature {f!r} holds {len(values)} {got} values, expected "
                                f"{size} {kind}")
            columns[f].append(values[0] if shape == () else values)
    for f, (kind, shape, dtype) in features.items():
        if kind == BYTES:
            group.create_dataset(f, data=np.array(columns[f], dtype=object).reshape(-1),
                                 dtype=h5py.string_dtype("utf-8"))
        else:
            group.create_dataset(f, data=np.array(columns[f], dtype=dtype).reshape((len(protos), *shape)))
