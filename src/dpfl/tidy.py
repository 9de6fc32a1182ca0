"""The one table schema every figure writes (spec D6): paper, figure, panel, curve, x, y (+ y_lo, y_hi
where a band is drawn) and one column per parameter that distinguishes the curves. Checks and the
report read any figure the same way."""

from __future__ import annotations

import numpy as np
import pandas as pd

TIDY_COLUMNS = ["paper", "figure", "panel", "curve", "x", "y"]
BAND_COLUMNS = ["y_lo", "y_hi"]


def finalize(df: pd.DataFrame, paper: str, figure: str) -> pd.DataFrame:
    """Fill paper/figure, put the schema columns first, check types; raise on a malformed table."""
    df = df.copy()
    df["paper"] = paper
    df["figure"] = figure
    if "panel" not in df:
        df["panel"] = "a"
    missing = [c for c in TIDY_COLUMNS if c not in df]
    if missing:
        raise ValueError(f"{paper}/{figure}: tidy table lacks columns {missing}")
    for col in ("x", "y"):
        df[col] = pd.to_numeric(df[col], errors="raise").astype(float)
    if np.isnan(df["x"]).any():
        raise ValueError(f"{paper}/{figure}: NaN in x")
    first = TIDY_COLUMNS + [c for c in BAND_COLUMNS if c in df]
    return df[first + [c for c in df.columns if c not in first]].reset_index(drop=True)


def read(path) -> pd.DataFrame:
    return pd.read_csv(path, keep_default_na=True)


def write(df: pd.DataFrame, path) -> None:
    df.to_csv(path, index=False)  # floats as shortest round-trip repr: exact
