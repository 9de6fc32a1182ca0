"""ObesityDataSet_raw_and_data_sinthetic.csv -> X (n, 16) float64 in the Gender-first column order, y (n,) int64,
`columns`, `classes`.

Columns are selected by name, so both published column orders (docs/data.md) load identically. The categorical
columns and the target NObeyesdad are integer-encoded alphabetically (code-point order, as sklearn's LabelEncoder:
upper case before lower case, so CAEC/CALC are Always 0, Frequently 1, Sometimes 2, no 3)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from dpfl.data.loaders.tables import encode, numeric, read_columns

VERSION = 1
DATASET = "obesity"
FILE = "ObesityDataSet_raw_and_data_sinthetic.csv"
COLUMNS = ["Gender", "Age", "Height", "Weight", "family_history_with_overweight", "FAVC", "FCVC", "NCP", "CAEC",
           "SMOKE", "CH2O", "SCC", "FAF", "TUE", "CALC", "MTRANS"]
TARGET = "NObeyesdad"
CLASSES = ["Insufficient_Weight", "Normal_Weight", "Obesity_Type_I", "Obesity_Type_II", "Obesity_Type_III",
           "Overweight_Level_I", "Overweight_Level_II"]
_FREQUENCY = ["Always", "Frequently", "Sometimes", "no"]
VOCABULARY = {"Gender": ["Female", "Male"], "family_history_with_overweight": ["no", "yes"], "FAVC": ["no", "yes"],
              "CAEC": _FREQUENCY, "SMOKE": ["no", "yes"], "SCC": ["no", "yes"], "CALC": _FREQUENCY,
              "MTRANS": ["Automobile", "Bike", "Motorbike", "Public_Transportation", "Walking"]}


def load(raw_dir: Path) -> tuple[dict, dict]:
    path = Path(raw_dir) / FILE
    df = read_columns(DATASET, path, COLUMNS + [TARGET])
    X = np.column_stack([encode(DATASET, path, df[c], VOCABULARY[c]) if c in VOCABULARY
                         else numeric(DATASET, path, df[c]) for c in COLUMNS]).astype(np.float64)
    y = encode(DATASET, path, df[TARGET], CLASSES)
    arrays = {"X": X, "y": y, "columns": np.array(COLUMNS), "classes": np.array(CLASSES)}
    info = {"counts": {"rows": len(df), "classes": dict(zip(CLASSES, np.bincount(y, minlength=len(CLASSES)).tolist()))},
            "encodings": VOCABULARY}
    return arrays, info
