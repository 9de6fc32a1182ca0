"""The four UCI processed.<center>.data files -> FLamby Fed-Heart-Disease (kato2024; docs/data.md).

Cleaning as FLamby (fed_heart_disease/dataset.py): `?` is missing; the last three feature columns (slope, ca, thal)
are dropped, then every row that still has a missing value (rows left 303 / 261 / 46 / 130). Features: age, sex,
trestbps, chol, fbs, thalach, exang, oldpeak, then cp and restecg one-hot with the first level dropped (cp_2, cp_3,
cp_4, restecg_1, restecg_2: pandas.get_dummies' column order, against fixed levels cp 1..4 and restecg 0..2) = 13.
Label: num > 0. Center ids: 0 Cleveland, 1 Hungarian, 2 Switzerland, 3 VA.

Split: inside each center, sklearn train_test_split(arange(n), train_size=0.66, test_size=1 - 0.66,
random_state=43, shuffle=True), stratified on the label when both classes have more than 2 rows (train 199 / 172 /
30 / 85, test 104 / 89 / 16 / 45).

Arrays (rows: center 0..3, file order within a center):
- `X` float64 (740, 13) unnormalized features, `y` int64, `center` int64, `train` bool, `columns`, `centers`;
- `X_train_std` float64 (486, 13): the training rows (X[train], same order), each z-scored with its own center's
  training mean and std (unbiased) + 1e-9, with `y_train`, `center_train`;
- `X_test_std` float64 (254, 13): the pooled test rows (X[~train]) z-scored with the pooled training mean and std
  + 1e-9, with `y_test`, `center_test`;
- the statistics: `mean_center`, `std_center` (4, 13), `mean_pooled`, `std_pooled` (13,) (std without the 1e-9).
FLamby computes the statistics in float32; here float64 (differences ~1e-7)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from dpfl.data.common import DataError
from dpfl.data.loaders.tables import read_fields

VERSION = 1
DATASET = "heart_disease"
CENTERS = ["cleveland", "hungarian", "switzerland", "va"]
FILES = [f"processed.{c}.data" for c in CENTERS]
RAW_COLUMNS = ["age", "sex", "cp", "trestbps", "chol", "fbs", "restecg", "thalach", "exang", "oldpeak", "slope", "ca",
               "thal", "num"]
DROPPED = ["slope", "ca", "thal"]
NUMERIC = ["age", "sex", "trestbps", "chol", "fbs", "thalach", "exang", "oldpeak"]
ONE_HOT = {"cp": [1, 2, 3, 4], "restecg": [0, 1, 2]}  # the first level is dropped
COLUMNS = NUMERIC + [f"{c}_{level}" for c, levels in ONE_HOT.items() for level in levels[1:]]
TRAIN_FRACTION = 0.66
SPLIT_SEED = 43
EPS = 1e-9
EXPECTED = {"rows": dict(zip(CENTERS, [303, 294, 123, 200])), "complete": dict(zip(CENTERS, [303, 261, 46, 130]))}


def _center_table(path: Path, center: str, expected: dict | None) -> tuple[np.ndarray, np.ndarray, int]:
    """(features (n, 13), labels (n,), rows in the file) of one center after FLamby's cleaning."""
    rows = read_fields(DATASET, path, len(RAW_COLUMNS))
    if expected and len(rows) != expected["rows"][center]:
        raise DataError(f"{DATASET}: {path.name}: {len(rows)} rows, expected {expected['rows'][center]}")
    keep = [RAW_COLUMNS.index(c) for c in RAW_COLUMNS if c not in DROPPED]
    complete = [[r[i] for i in keep] for r in rows if all(r[i] is not None for i in keep)]
    names = [c for c in RAW_COLUMNS if c not in DROPPED]
    values = np.empty((len(complete), len(names)))
    for j, name in enumerate(names):
        for i, row in enumerate(complete):
            try:
                values[i, j] = float(row[j])
            except ValueError:
                raise DataError(f"{DATASET}: {path.name}: column {name}: not a number: {row[j]!r}") from None
    if expected and len(values) != expected["complete"][center]:
        raise DataError(f"{DATASET}: {path.name}: {len(values)} rows without missing values (slope, ca, thal "
                        f"ignored), expected {expected['complete'][center]}")
    col = {name: values[:, j] for j, name in enumerate(names)}
    parts = [col[c] for c in NUMERIC]
    for name, levels in ONE_HOT.items():
        bad = sorted(set(col[name].tolist()) - set(levels))
        if bad:
            raise DataError(f"{DATASET}: {path.name}: column {name}: unexpected value(s) {bad[:5]}; allowed: {levels}")
        parts += [(col[name] == level).astype(np.float64) for level in levels[1:]]
    num = col["num"]
    if not np.isin(num, [0, 1, 2, 3, 4]).all():
        raise DataError(f"{DATASET}: {path.name}: column num: values {sorted(set(num.tolist()) - set(range(5)))}, "
                        f"expected 0..4")
    return np.column_stack(parts) if parts else np.empty((0, len(COLUMNS))), (num > 0).astype(np.int64), len(rows)


def flamby_split(y: np.ndarray) -> np.ndarray:
    """FLamby's per-center train flags: sklearn's train_test_split with train 0.66 / test 1 - 0.66, seed 43,
    stratified on the label when both classes have more than 2 rows."""
    from sklearn.model_selection import train_test_split

    levels, counts = np.unique(y, return_counts=True)
    stratify = y if len(levels) > 1 and (counts > 2).all() else None
    _, test = train_test_split(np.arange(len(y)), test_size=1.0 - TRAIN_FRACTION, train_size=TRAIN_FRACTION,
                               random_state=SPLIT_SEED, shuffle=True, stratify=stratify)
    train = np.ones(len(y), bool)
    train[test] = False
    return train


def _stats(dataset_part: np.ndarray, what: str) -> tuple[np.ndarray, np.ndarray]:
    if len(dataset_part) < 2:
        raise DataError(f"{DATASET}: {what} has {len(dataset_part)} training row(s); standardizing needs at least 2")
    return dataset_part.mean(axis=0), dataset_part.std(axis=0, ddof=1)


def load(raw_dir: Path, expected: dict | None = EXPECTED) -> tuple[dict, dict]:
    """`expected`: {"rows": {center: rows in the file}, "complete": {center: rows kept}} to enforce (None: any
    count, for small test fixtures)."""
    X, y, center, train, file_rows = [], [], [], [], {}
    for k, (name, file) in enumerate(zip(CENTERS, FILES)):
        features, labels, file_rows[name] = _center_table(Path(raw_dir) / file, name, expected)
        if len(labels) < 2:
            raise DataError(f"{DATASET}: {file}: {len(labels)} row(s) without missing values; the split needs 2 or "
                            f"more")
        X.append(features)
        y.append(labels)
        center.append(np.full(len(labels), k, np.int64))
        train.append(flamby_split(labels))
    X, y, center, train = (np.concatenate(a) for a in (X, y, center, train))

    mean_center, std_center = np.empty((len(CENTERS), len(COLUMNS))), np.empty((len(CENTERS), len(COLUMNS)))
    for k, name in enumerate(CENTERS):
        mean_center[k], std_center[k] = _stats(X[train & (center == k)], f"center {name}")
    mean_pooled, std_pooled = _stats(X[train], "the pooled training set")
    c_train = center[train]
    X_train_std = (X[train] - mean_center[c_train]) / (std_center[c_train] + EPS)
    X_test_std = (X[~train] - mean_pooled) / (std_pooled + EPS)

    arrays = {"X": X, "y": y, "center": center, "train": train, "columns": np.array(COLUMNS),
              "centers": np.array(CENTERS),
              "X_train_std": X_train_std, "y_train": y[train], "center_train": c_train,
              "X_test_std": X_test_std, "y_test": y[~train], "center_test": center[~train],
              "mean_center": mean_center, "std_center": std_center, "mean_pooled": mean_pooled,
              "std_pooled": std_pooled}
    per = lambda mask: {name: int((mask & (center == k)).sum()) for k, name in enumerate(CENTERS)}  # noqa: E731
    everything = np.ones(len(y), bool)
    info = {"counts": {"file_rows": file_rows, "rows": per(everything), "train": per(train), "test": per(~train),
                       "positive": per(y == 1), "train_total": int(train.sum()), "test_total": int((~train).sum())},
            "centers": CENTERS,
            "preprocessing": "FLamby Fed-Heart-Disease: slope, ca, thal dropped, then rows with a missing value; cp "
                             "and restecg one-hot (first level dropped); label num > 0; per-center 66/34 split, "
                             "sklearn train_test_split seed 43, stratified when both classes have > 2 rows; "
                             "X_train_std: per-center train mean/std (ddof 1) + 1e-9; X_test_std: pooled train "
                             "mean/std + 1e-9"}
    return arrays, info
