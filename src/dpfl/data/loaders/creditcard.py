"""creditcard.csv.gz (the real Kaggle / OpenML / TensorFlow file, gzip-compressed by the download) or
creditcard_standin.csv.gz (the stand-in, same format) -> X float64 (284807, 30) = Time, V1..V28, Amount (raw, in
the file's row order), y int64 = Class, `columns`.

Header names and Class values may be quoted ("Class", "0" as in the Kaggle file; '0' as in some exports): both load
the same. The kato2024 preprocessing (seeded stratified split, scaling, undersampling) depends on the
seed and is not done here."""

from __future__ import annotations

import zlib
from pathlib import Path

import numpy as np
import pandas as pd

from dpfl.data.checks import CREDITCARD_COLUMNS, CREDITCARD_FRAUDS, CREDITCARD_ROWS
from dpfl.data.common import DataError
from dpfl.data.loaders.tables import numeric, unquote
from dpfl.data.source_record import read_record

VERSION = 1
DATASET = "creditcard"
FILES = ["creditcard.csv.gz", "creditcard_standin.csv.gz"]  # the real file, the stand-in
FEATURES = CREDITCARD_COLUMNS[:-1]
EXPECTED = {"rows": CREDITCARD_ROWS, "frauds": CREDITCARD_FRAUDS}


def data_file(raw_dir: Path) -> Path:
    """The one data file in raw_dir: the real file or the stand-in (when both are there, the one SOURCE.json lists)."""
    present = [name for name in FILES if (raw_dir / name).is_file()]
    if len(present) > 1:
        listed = {f.get("name") for f in (read_record(raw_dir) or {}).get("files", [])}
        present = [name for name in present if name in listed] or present[:1]
    if not present:
        raise DataError(f"{DATASET}: file not found: neither {' nor '.join(FILES)} in {raw_dir}")
    return raw_dir / present[0]


def _column_difference(columns: list[str]) -> str:
    """What is wrong with a header, as "; missing: Amount; unexpected: Amt" (or "; same names, other order")."""
    missing = [c for c in CREDITCARD_COLUMNS if c not in columns]
    extra = [c for c in columns if c not in CREDITCARD_COLUMNS]
    parts = []
    if missing:
        parts.append(f"missing: {', '.join(missing[:5])}" + (", ..." if len(missing) > 5 else ""))
    if extra:
        parts.append(f"unexpected: {', '.join(extra[:5])}" + (", ..." if len(extra) > 5 else ""))
    if not parts:
        parts.append("a name repeated" if len(columns) != len(set(columns)) else "the same names in another order")
    return "".join(f"; {p}" for p in parts)


def load(raw_dir: Path, expected: dict | None = EXPECTED) -> tuple[dict, dict]:
    """`expected`: {"rows": n, "frauds": n} to enforce (None: any count, for small test fixtures)."""
    path = data_file(Path(raw_dir))
    try:
        df = pd.read_csv(path, compression="gzip" if path.name.endswith(".gz") else None)
    except (OSError, EOFError, zlib.error, UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise DataError(f"{DATASET}: {path.name}: cannot read CSV: {exc}") from None
    columns = [str(c).strip().strip("\"'") for c in df.columns]
    if columns != CREDITCARD_COLUMNS:
        raise DataError(f"{DATASET}: {path.name}: columns {', '.join(columns[:4])}, ... ({len(columns)}), expected "
                        f"Time, V1..V28, Amount, Class ({len(CREDITCARD_COLUMNS)}) in this order"
                        f"{_column_difference(columns)}")
    df.columns = columns
    empty = [c for c in columns if df[c].isna().any()]
    if empty:
        raise DataError(f"{DATASET}: {path.name}: missing values in column(s) {', '.join(empty[:5])}")
    X = np.column_stack([numeric(DATASET, path, df[c]) for c in FEATURES]) if len(df) else np.empty((0, len(FEATURES)))
    labels = unquote(df["Class"])
    y = numeric(DATASET, path, labels)
    if not np.isin(y, [0, 1]).all():
        bad = sorted(set(labels[~np.isin(y, [0, 1])].astype(str)))
        raise DataError(f"{DATASET}: {path.name}: column Class: values {', '.join(bad[:5])}, expected 0 or 1")
    y = y.astype(np.int64)
    frauds = int(y.sum())
    if expected and (len(df) != expected["rows"] or frauds != expected["frauds"]):
        raise DataError(f"{DATASET}: {path.name}: {len(df)} rows with {frauds} frauds (Class = 1), expected "
                        f"{expected['rows']} rows with {expected['frauds']} frauds")
    arrays = {"X": X, "y": y, "columns": np.array(FEATURES)}
    info = {"counts": {"rows": len(df), "frauds": frauds}, "file": path.name,
            "preprocessing": "none: the kato2024 split, scaling and undersampling are per seed "
                             "(docs/papers/kato2024.md)"}
    return arrays, info
