"""CSV helpers shared by the table loaders: columns are selected by name (published column orders differ) and
categories are integer-encoded against a fixed vocabulary, so codes never depend on which values a file holds."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from dpfl.data.common import DataError


def read_columns(dataset: str, path: Path, required: list[str]) -> pd.DataFrame:
    """The required columns of a CSV (any line endings), in the order given; an error names a missing column."""
    try:
        df = pd.read_csv(path)
    except FileNotFoundError:
        raise DataError(f"{dataset}: {path.name}: file not found ({path})") from None
    except (OSError, EOFError, UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise DataError(f"{dataset}: {path.name}: cannot read CSV: {exc}") from None
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise DataError(f"{dataset}: {path.name}: missing required column(s) {', '.join(missing)}; "
                        f"columns found: {', '.join(map(str, df.columns))}")
    df = df[required]
    empty = [c for c in required if df[c].isna().any()]
    if empty:
        raise DataError(f"{dataset}: {path.name}: missing values in column(s) {', '.join(empty)}")
    return df


def encode(dataset: str, path: Path, column: pd.Series, vocabulary: list[str]) -> np.ndarray:
    """Integer codes: position in `vocabulary` (kept in code-point order, as sklearn's LabelEncoder sorts)."""
    codes = column.map({value: code for code, value in enumerate(vocabulary)})
    if codes.isna().any():
        bad = sorted(set(column[codes.isna()].astype(str)))
        raise DataError(f"{dataset}: {path.name}: column {column.name}: unexpected value(s) {', '.join(bad[:5])}; "
                        f"allowed: {', '.join(vocabulary)}")
    return codes.to_numpy(np.int64)


def numeric(dataset: str, path: Path, column: pd.Series) -> np.ndarray:
    values = pd.to_numeric(column, errors="coerce")
    if values.isna().any():
        bad = column[values.isna()].iloc[0]
        raise DataError(f"{dataset}: {path.name}: column {column.name}: not a number: {bad!r}")
    return values.to_numpy(np.float64)


def read_fields(dataset: str, path: Path, n_columns: int, missing: str = "?") -> list[list[str | None]]:
    """The rows of a headerless comma-separated file (any line endings; blank lines skipped) as lists of stripped
    strings, `missing` -> None; every row must have exactly `n_columns` fields (an error names the line)."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise DataError(f"{dataset}: {path.name}: file not found ({path})") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"{dataset}: {path.name}: cannot read: {exc}") from None
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        fields = [f.strip() for f in line.split(",")]
        if len(fields) != n_columns:
            raise DataError(f"{dataset}: {path.name}: line {number} has {len(fields)} fields, expected {n_columns}")
        rows.append([None if f == missing else f for f in fields])
    return rows


def unquote(column: pd.Series) -> pd.Series:
    """Text values without surrounding whitespace and double or single quotes ('"0"', "'0'" -> '0'); numbers as
    they are."""
    if column.dtype.kind in "biuf":
        return column
    return column.astype(str).str.strip().str.strip("\"'")
