"""Content checks for files that have no trustworthy published sha256 (catalog key `check`).

Such a file is accepted when its content has the properties the manifest verified (rows, columns, label counts);
its sha256 is then recorded in SOURCE.json on this first download.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from dpfl.data.common import DataError

CREDITCARD_COLUMNS = ["Time", *[f"V{k}" for k in range(1, 29)], "Amount", "Class"]
CREDITCARD_ROWS = 284_807
CREDITCARD_FRAUDS = 492


def _unquote(values) -> list[str]:
    return [str(v).strip().strip("\"'") for v in values]


def creditcard(dataset: str, path: Path) -> str:
    """284,807 rows x 31 columns Time, V1..V28, Amount, Class and 492 rows with Class = 1 (names and Class values
    may be quoted, as in the Kaggle and OpenML exports). Returns a one-line summary."""
    try:
        df = pd.read_csv(path)
    except (OSError, EOFError, ValueError, pd.errors.ParserError) as exc:
        raise DataError(f"{dataset}: {path.name}: cannot read CSV: {exc}") from None
    columns = _unquote(df.columns)
    if columns != CREDITCARD_COLUMNS:
        raise DataError(f"{dataset}: {path.name}: columns {columns[:5]}... ({len(columns)}), expected Time, V1..V28, "
                        f"Amount, Class (31)")
    labels = pd.Series(_unquote(df.iloc[:, -1]))
    frauds = int((labels == "1").sum())
    if len(df) != CREDITCARD_ROWS or frauds != CREDITCARD_FRAUDS or not labels.isin(["0", "1"]).all():
        raise DataError(f"{dataset}: {path.name}: {len(df)} rows with {frauds} frauds (Class = 1), expected "
                        f"{CREDITCARD_ROWS} rows with {CREDITCARD_FRAUDS} frauds and Class in {{0, 1}}")
    return f"{len(df)} rows, {len(columns)} columns, {frauds} frauds"


CHECKS = {"creditcard": creditcard}
