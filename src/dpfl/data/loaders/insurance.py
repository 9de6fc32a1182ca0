"""insurance.csv -> X (n, 6) float64 with columns [age, sex, bmi, children, smoker, region] (categories integer-
encoded alphabetically: sex female 0 male 1; smoker no 0 yes 1; region northeast 0, northwest 1, southeast 2,
southwest 3), y (n,) float64 = charges in raw dollars, `columns`. Columns are selected by name."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from dpfl.data.loaders.tables import encode, numeric, read_columns

VERSION = 1
DATASET = "insurance"
FILE = "insurance.csv"
FEATURES = ["age", "sex", "bmi", "children", "smoker", "region"]
TARGET = "charges"
VOCABULARY = {"sex": ["female", "male"], "smoker": ["no", "yes"],
              "region": ["northeast", "northwest", "southeast", "southwest"]}


def load(raw_dir: Path) -> tuple[dict, dict]:
    path = Path(raw_dir) / FILE
    df = read_columns(DATASET, path, FEATURES + [TARGET])
    X = np.column_stack([encode(DATASET, path, df[c], VOCABULARY[c]) if c in VOCABULARY
                         else numeric(DATASET, path, df[c]) for c in FEATURES]).astype(np.float64)
    y = numeric(DATASET, path, df[TARGET])
    arrays = {"X": X, "y": y, "columns": np.array(FEATURES)}
    info = {"counts": {"rows": len(df)}, "encodings": VOCABULARY, "target": "charges (raw dollars)"}
    return arrays, info
