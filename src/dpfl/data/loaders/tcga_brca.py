"""brca.csv + centers.csv + train_test_split.csv -> FLamby Fed-TCGA-BRCA (kato2024; docs/data.md).

Rows: the 1088 patients of the split file, in brca.csv order (as FLamby selects them); the 8 patients of region
"Other" are in no silo and left out. Silo (`center`) = the region of the tissue source site: FLamby's per-center
`fold2` (train_k / test_k), checked against the region of the TSS code (barcode characters 6-7) in centers.csv,
0 Northeast, 1 South, 2 West, 3 Midwest, 4 Europe, 5 Canada. `train` = FLamby's static pooled `fold` (it agrees
with fold2). Features: the 39 covariates (brca.csv columns 2-40) as they are, no normalization (age in years).

Arrays: `X` float64 (1088, 39), `E` int64 (1 = death observed), `T` float64 (days), `center` int64, `train` bool,
`pid` (barcodes), `columns` (the 39 covariate names), `centers` (region names)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from dpfl.data.common import DataError
from dpfl.data.loaders.tables import encode, numeric, read_columns

VERSION = 1
DATASET = "tcga_brca"
DATA, CENTERS_FILE, SPLIT = "brca.csv", "centers.csv", "train_test_split.csv"
REGIONS = ["Northeast", "South", "West", "Midwest", "Europe", "Canada"]
OUTSIDE = "Other"  # sites in no silo
N_COVARIATES = 39
EXPECTED = {DATA: 1096, CENTERS_FILE: 111, SPLIT: 1088}


def _read(path: Path) -> pd.DataFrame:
    try:
        return pd.read_csv(path, dtype=str, keep_default_na=False)
    except FileNotFoundError:
        raise DataError(f"{DATASET}: {path.name}: file not found ({path})") from None
    except (OSError, UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise DataError(f"{DATASET}: {path.name}: cannot read CSV: {exc}") from None


def _rows(path: Path, n: int, expected: dict | None) -> None:
    if expected and n != expected[path.name]:
        raise DataError(f"{DATASET}: {path.name}: {n} rows, expected {expected[path.name]}")


def load(raw_dir: Path, expected: dict | None = EXPECTED) -> tuple[dict, dict]:
    """`expected`: {file: rows} to enforce (None: any count, for small test fixtures)."""
    raw_dir = Path(raw_dir)
    data_path, centers_path, split_path = raw_dir / DATA, raw_dir / CENTERS_FILE, raw_dir / SPLIT

    data = _read(data_path)
    names = [str(c) for c in data.columns]
    if len(names) != N_COVARIATES + 3 or names[0] != "pid" or names[-2:] != ["E", "T"]:
        raise DataError(f"{DATASET}: {DATA}: {len(names)} columns ({', '.join(names[:2])}, ..., "
                        f"{', '.join(names[-2:])}), expected {N_COVARIATES + 3}: pid, {N_COVARIATES} covariates, E, T")
    _rows(data_path, len(data), expected)
    empty = [c for c in names if (data[c].str.strip() == "").any()]
    if empty:
        raise DataError(f"{DATASET}: {DATA}: missing values in column(s) {', '.join(empty[:5])}")
    if data["pid"].duplicated().any():
        raise DataError(f"{DATASET}: {DATA}: duplicate pid {data['pid'][data['pid'].duplicated()].iloc[0]}")

    centers = read_columns(DATASET, centers_path, ["TSS Code", "Region"])
    _rows(centers_path, len(centers), expected)
    if centers["TSS Code"].duplicated().any():
        raise DataError(f"{DATASET}: {CENTERS_FILE}: duplicate TSS Code "
                        f"{centers['TSS Code'][centers['TSS Code'].duplicated()].iloc[0]}")
    encode(DATASET, centers_path, centers["Region"], REGIONS + [OUTSIDE])
    region_of_site = dict(zip(centers["TSS Code"], centers["Region"]))

    split = read_columns(DATASET, split_path, ["pid", "fold", "fold2"])
    _rows(split_path, len(split), expected)
    if split["pid"].duplicated().any():
        raise DataError(f"{DATASET}: {SPLIT}: duplicate pid {split['pid'][split['pid'].duplicated()].iloc[0]}")
    fold2 = {f"{fold}_{k}": (fold == "train", k) for fold in ("train", "test") for k in range(len(REGIONS))}
    encode(DATASET, split_path, split["fold"], ["test", "train"])
    encode(DATASET, split_path, split["fold2"], sorted(fold2))
    split_of = {pid: fold2[f2] for pid, f2 in zip(split["pid"], split["fold2"])}
    disagree = split[(split["fold"] == "train") != split["fold2"].str.startswith("train_")]
    if len(disagree):
        raise DataError(f"{DATASET}: {SPLIT}: pid {disagree['pid'].iloc[0]}: fold {disagree['fold'].iloc[0]} but "
                        f"fold2 {disagree['fold2'].iloc[0]}")
    unknown = sorted(set(split["pid"]) - set(data["pid"]))
    if unknown:
        raise DataError(f"{DATASET}: {SPLIT}: pid(s) not in {DATA}: {', '.join(unknown[:3])}")

    regions = data["pid"].str[5:7].map(region_of_site)
    if regions.isna().any():
        pid = data["pid"][regions.isna()].iloc[0]
        raise DataError(f"{DATASET}: {DATA}: pid {pid}: TSS code {pid[5:7]!r} not in {CENTERS_FILE}")
    keep = data["pid"].isin(split_of).to_numpy()
    for pid, region in zip(data["pid"], regions):
        if pid not in split_of:
            if region != OUTSIDE:
                raise DataError(f"{DATASET}: {SPLIT}: pid {pid} (region {region}) is missing; only patients of "
                                f"region {OUTSIDE} are left out of the split")
            continue
        k = split_of[pid][1]
        if region != REGIONS[k]:
            raise DataError(f"{DATASET}: {SPLIT}: pid {pid}: fold2 {'train' if split_of[pid][0] else 'test'}_{k} "
                            f"({REGIONS[k]}) but its TSS code {pid[5:7]} is in region {region} ({CENTERS_FILE})")

    kept = data[keep].reset_index(drop=True)
    X = np.column_stack([numeric(DATASET, data_path, kept[c]) for c in names[1:-2]]) if len(kept) else \
        np.empty((0, N_COVARIATES))
    E, T = numeric(DATASET, data_path, kept["E"]), numeric(DATASET, data_path, kept["T"])
    if not np.isin(E, [0, 1]).all():
        raise DataError(f"{DATASET}: {DATA}: column E: values other than 0 and 1")
    if (T < 0).any():
        raise DataError(f"{DATASET}: {DATA}: column T: negative times")
    train = np.array([split_of[p][0] for p in kept["pid"]], bool)
    center = np.array([split_of[p][1] for p in kept["pid"]], np.int64)

    per = lambda mask: {name: int((mask & (center == k)).sum()) for k, name in enumerate(REGIONS)}  # noqa: E731
    arrays = {"X": X, "E": E.astype(np.int64), "T": T, "center": center, "train": train,
              "pid": kept["pid"].to_numpy(str), "columns": np.array(names[1:-2]), "centers": np.array(REGIONS)}
    info = {"counts": {"rows": len(data), "kept": len(kept), "left_out_other_region": int((~keep).sum()),
                       "train": per(train), "test": per(~train), "train_total": int(train.sum()),
                       "test_total": int((~train).sum()), "events": int(E.sum())},
            "centers": REGIONS,
            "preprocessing": "FLamby Fed-TCGA-BRCA: silo = TSS region (fold2, checked against centers.csv), static "
                             "split (fold), 39 raw covariates (no normalization), target (E, T)"}
    return arrays, info
