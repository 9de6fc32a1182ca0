"""kato2024's tabular loaders (dpfl.data.loaders.heart_disease / tcga_brca / creditcard) on tiny fixtures written
here (format, quoting, missing values, FLamby's cleaning, split and standardization, errors naming the dataset, the
file and what was expected), and, when the offline mirror exists (DPFL_DATA_MIRROR, else ../shared/datasets), the
FLamby sizes of MANIFEST §5-6 through the download + prepare path."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpfl import config
from dpfl.data.common import DataError, standin_seed
from dpfl.data.loaders import creditcard, heart_disease, tcga_brca
from dpfl.data.prepare import prepare
from dpfl.data.sources import acquire
from dpfl.data.standins import creditcard as creditcard_standin

ROOT = Path(__file__).resolve().parent.parent
MIRROR = Path(os.environ.get("DPFL_DATA_MIRROR") or ROOT.parent / "shared" / "datasets")

# --------------------------------------------------------------------------------------------------
# heart_disease
# --------------------------------------------------------------------------------------------------

# 14 raw columns: age sex cp trestbps chol fbs restecg thalach exang oldpeak slope ca thal num
HEART_ROW = "{age},1,{cp},130,{chol},0,{restecg},150,0,1.5,2,?,?,{num}"


def heart_rows(center: int, n: int = 9) -> list[str]:
    """n complete rows (slope/ca/thal partly '?', which FLamby ignores) + one row with a missing chol (dropped)."""
    rows = [HEART_ROW.format(age=40 + 3 * i + center, cp=1 + (i + center) % 4, chol=200 + 7 * i * (center + 1),
                             restecg=i % 3, num=(i * (center + 2)) % 5 if i % 2 else 0) for i in range(n)]
    if center == 0:  # Cleveland writes floats
        rows = [",".join(f"{float(v):.1f}" if v not in "?" else v for v in r.split(",")[:-1]) + "," + r.split(",")[-1]
                for r in rows]
    return rows + [HEART_ROW.format(age=50, cp=2, chol="?", restecg=0, num=1)]


def write_heart(folder: Path, n: int = 9, endings: str = "\n") -> None:
    for k, file in enumerate(heart_disease.FILES):
        (folder / file).write_bytes((endings.join(heart_rows(k, n)) + endings).encode())


def test_heart_format_cleaning_and_one_hot(tmp_path):
    write_heart(tmp_path)
    arrays, info = heart_disease.load(tmp_path, expected=None)
    X, y, center, train = arrays["X"], arrays["y"], arrays["center"], arrays["train"]
    assert list(arrays["columns"]) == ["age", "sex", "trestbps", "chol", "fbs", "thalach", "exang", "oldpeak",
                                       "cp_2", "cp_3", "cp_4", "restecg_1", "restecg_2"]
    assert list(arrays["centers"]) == ["cleveland", "hungarian", "switzerland", "va"]
    assert X.shape == (36, 13) and X.dtype == np.float64 and y.dtype == np.int64 and train.dtype == bool
    assert center.tolist() == [0] * 9 + [1] * 9 + [2] * 9 + [3] * 9  # the rows with a missing chol are dropped
    assert info["counts"]["file_rows"] == {"cleveland": 10, "hungarian": 10, "switzerland": 10, "va": 10}
    assert info["counts"]["rows"] == {"cleveland": 9, "hungarian": 9, "switzerland": 9, "va": 9}
    # Hungarian rows 3 and 2: cp 1 and 4 (1 is the dropped level), restecg 0 (dropped) and 2, num 4 (-> 1) and 0
    np.testing.assert_array_equal(X[9 + 3], [50, 1, 130, 242, 0, 150, 0, 1.5, 0, 0, 0, 0, 0])
    np.testing.assert_array_equal(X[9 + 2], [47, 1, 130, 228, 0, 150, 0, 1.5, 0, 0, 1, 0, 1])
    assert y[9 + 3] == 1 and y[9 + 2] == 0
    # one-hot: exactly one of cp_2..cp_4 set unless cp == 1
    cp = 1 + (np.arange(9)[None, :] + np.arange(4)[:, None]) % 4
    np.testing.assert_array_equal(X[:, 8:11].sum(1), (cp.ravel() != 1).astype(float))
    np.testing.assert_array_equal(X[:, 11:13].sum(1), np.tile(np.arange(9) % 3 != 0, 4).astype(float))


def test_heart_line_endings_and_float_spelling_do_not_matter(tmp_path):
    write_heart(tmp_path)
    (tmp_path / "crlf").mkdir()
    write_heart(tmp_path / "crlf", endings="\r\n")
    a, _ = heart_disease.load(tmp_path, expected=None)
    b, _ = heart_disease.load(tmp_path / "crlf", expected=None)
    for key in a:
        np.testing.assert_array_equal(a[key], b[key])


def test_heart_split_and_standardization(tmp_path):
    write_heart(tmp_path, n=12)
    arrays, info = heart_disease.load(tmp_path, expected=None)
    X, center, train = arrays["X"], arrays["center"], arrays["train"]
    # 66/34 per center: train floor(0.66 * 12) = 7, test ceil(0.34 * 12) = 5
    assert info["counts"]["train"] == dict.fromkeys(heart_disease.CENTERS, 7)
    assert info["counts"]["test"] == dict.fromkeys(heart_disease.CENTERS, 5)
    assert info["counts"]["train_total"] == 28 and info["counts"]["test_total"] == 20
    assert arrays["X_train_std"].shape == (28, 13) and arrays["X_test_std"].shape == (20, 13)
    np.testing.assert_array_equal(arrays["y_train"], arrays["y"][train])
    np.testing.assert_array_equal(arrays["center_test"], center[~train])
    for k in range(4):
        rows = X[train & (center == k)]
        mean, std = rows.mean(0), rows.std(0, ddof=1)
        np.testing.assert_allclose(arrays["X_train_std"][arrays["center_train"] == k], (rows - mean) / (std + 1e-9))
        np.testing.assert_allclose(arrays["mean_center"][k], mean)
    pooled = X[train]
    np.testing.assert_allclose(arrays["X_test_std"],
                               (X[~train] - pooled.mean(0)) / (pooled.std(0, ddof=1) + 1e-9))
    # constant columns (sex, fbs, ...) become 0, not NaN
    assert np.isfinite(arrays["X_train_std"]).all() and (arrays["X_train_std"][:, 1] == 0).all()
    # deterministic: the same files give the same split
    again, _ = heart_disease.load(tmp_path, expected=None)
    np.testing.assert_array_equal(again["train"], train)


def test_heart_errors(tmp_path):
    write_heart(tmp_path)
    with pytest.raises(DataError, match=r"^heart_disease: processed.cleveland.data: 10 rows, expected 303$"):
        heart_disease.load(tmp_path)
    rows = heart_rows(3)
    rows[2] = rows[2].rsplit(",", 1)[0]
    (tmp_path / "processed.va.data").write_text("\n".join(rows) + "\n")
    with pytest.raises(DataError, match=r"^heart_disease: processed.va.data: line 3 has 13 fields, expected 14$"):
        heart_disease.load(tmp_path, expected=None)
    write_heart(tmp_path)
    rows = heart_rows(1)
    rows[0] = rows[0].replace(",1,", ",x,", 1)
    (tmp_path / "processed.hungarian.data").write_text("\n".join(rows) + "\n")
    with pytest.raises(DataError, match=r"heart_disease: processed.hungarian.data: column sex: not a number: 'x'"):
        heart_disease.load(tmp_path, expected=None)
    rows = heart_rows(1)
    rows[0] = HEART_ROW.format(age=40, cp=5, chol=200, restecg=0, num=0)
    (tmp_path / "processed.hungarian.data").write_text("\n".join(rows) + "\n")
    with pytest.raises(DataError, match=r"processed.hungarian.data: column cp: unexpected value\(s\) \[5.0\]"):
        heart_disease.load(tmp_path, expected=None)
    write_heart(tmp_path)
    (tmp_path / "processed.switzerland.data").unlink()
    with pytest.raises(DataError, match=r"heart_disease: processed.switzerland.data: file not found"):
        heart_disease.load(tmp_path, expected=None)


# --------------------------------------------------------------------------------------------------
# tcga_brca
# --------------------------------------------------------------------------------------------------

TSS = {"BH": "Northeast", "4T": "South", "A2": "West", "DM": "Midwest", "XX": "Europe", "CA": "Canada", "ZZ": "Other"}


def write_tcga(folder: Path, per_region: int = 4) -> pd.DataFrame:
    """brca.csv (pid, 39 covariates c1..c39, E, T), centers.csv and the split: `per_region` patients per region,
    the last of them in test, and one patient of region Other, in no silo."""
    rng = np.random.default_rng(0)
    pids, split = [], []
    for j in range(per_region):
        for code, region in TSS.items():
            if region == "Other" and j:
                continue
            pid = f"TCGA-{code}-A{j:03d}"
            pids.append(pid)
            if region != "Other":
                fold = "test" if j == per_region - 1 else "train"
                split.append({"pid": pid, "fold": fold, "fold2": f"{fold}_{tcga_brca.REGIONS.index(region)}"})
    data = pd.DataFrame(rng.integers(0, 2, (len(pids), 39)), columns=[f"c{i}" for i in range(1, 40)])
    data.insert(0, "pid", pids)
    data["c1"] = rng.integers(30, 90, len(pids))  # age_at_index: years
    data["E"] = (np.arange(len(pids)) % 3 == 0).astype(float)
    data["T"] = np.arange(len(pids)) * 10.0
    data.to_csv(folder / "brca.csv", index=False)
    centers = pd.DataFrame({"TSS Code": list(TSS), "Source Site": "site", "Country": "c", "State": "s",
                            "Region": list(TSS.values())})
    centers.to_csv(folder / "centers.csv", index=False)
    pd.DataFrame(split).to_csv(folder / "train_test_split.csv", index=False)
    return data


def test_tcga_format_and_silos(tmp_path):
    data = write_tcga(tmp_path)
    arrays, info = tcga_brca.load(tmp_path, expected=None)
    kept = data[~data["pid"].str.contains("-ZZ-")]
    assert arrays["X"].shape == (24, 39) and arrays["X"].dtype == np.float64
    np.testing.assert_array_equal(arrays["X"], kept.iloc[:, 1:40].to_numpy(float))  # raw: no normalization
    np.testing.assert_array_equal(arrays["pid"], kept["pid"])  # brca.csv order
    assert arrays["E"].dtype == np.int64 and arrays["T"].dtype == np.float64
    np.testing.assert_array_equal(arrays["E"], kept["E"].astype(int))
    np.testing.assert_array_equal(arrays["T"], kept["T"])
    assert list(arrays["columns"]) == [f"c{i}" for i in range(1, 40)]
    assert list(arrays["centers"]) == ["Northeast", "South", "West", "Midwest", "Europe", "Canada"]
    region = kept["pid"].str[5:7].map(TSS).map(tcga_brca.REGIONS.index)
    np.testing.assert_array_equal(arrays["center"], region)
    assert info["counts"]["train"] == dict.fromkeys(tcga_brca.REGIONS, 3)
    assert info["counts"]["test"] == dict.fromkeys(tcga_brca.REGIONS, 1)
    assert info["counts"]["left_out_other_region"] == 1 and info["counts"]["kept"] == 24


def test_tcga_errors(tmp_path):
    data = write_tcga(tmp_path)
    with pytest.raises(DataError, match=r"^tcga_brca: brca.csv: 25 rows, expected 1096$"):
        tcga_brca.load(tmp_path)
    data.drop(columns="c7").to_csv(tmp_path / "brca.csv", index=False)
    with pytest.raises(DataError, match=r"^tcga_brca: brca.csv: 41 columns .*expected 42: pid, 39 covariates, E, T$"):
        tcga_brca.load(tmp_path, expected=None)
    bad = data.astype({"c3": str})
    bad.loc[2, "c3"] = ""
    bad.to_csv(tmp_path / "brca.csv", index=False)
    with pytest.raises(DataError, match=r"tcga_brca: brca.csv: missing values in column\(s\) c3"):
        tcga_brca.load(tmp_path, expected=None)
    data.to_csv(tmp_path / "brca.csv", index=False)
    split = pd.read_csv(tmp_path / "train_test_split.csv")
    split.loc[0, "fold2"] = "train_2"  # a Northeast patient put in silo West
    split.to_csv(tmp_path / "train_test_split.csv", index=False)
    with pytest.raises(DataError, match=r"tcga_brca: train_test_split.csv: pid TCGA-BH-A000: fold2 train_2 "
                                        r"\(West\) but its TSS code BH is in region Northeast"):
        tcga_brca.load(tmp_path, expected=None)
    split.drop(index=0).to_csv(tmp_path / "train_test_split.csv", index=False)
    with pytest.raises(DataError, match=r"train_test_split.csv: pid TCGA-BH-A000 \(region Northeast\) is missing"):
        tcga_brca.load(tmp_path, expected=None)
    pd.read_csv(tmp_path / "centers.csv").drop(columns="Region").to_csv(tmp_path / "centers.csv", index=False)
    with pytest.raises(DataError, match=r"tcga_brca: centers.csv: missing required column\(s\) Region"):
        tcga_brca.load(tmp_path, expected=None)


# --------------------------------------------------------------------------------------------------
# creditcard
# --------------------------------------------------------------------------------------------------

CC_COLUMNS = ["Time", *[f"V{k}" for k in range(1, 29)], "Amount", "Class"]


def creditcard_table(n: int = 12) -> pd.DataFrame:
    rng = np.random.default_rng(3)
    table = pd.DataFrame(np.round(rng.standard_normal((n, 28)), 6), columns=CC_COLUMNS[1:29])
    table.insert(0, "Time", np.arange(n) * 7)
    table["Amount"] = np.round(rng.lognormal(3, 1, n), 2)
    table["Class"] = (np.arange(n) % 5 == 1).astype(int)
    return table


def write_gz(path: Path, text: str) -> None:
    with gzip.open(path, "wb") as fh:
        fh.write(text.encode())


def test_creditcard_quoted_and_unquoted_load_identically(tmp_path):
    table = creditcard_table()
    plain = table.to_csv(index=False, lineterminator="\n")
    quoted = table.assign(Class=table["Class"].astype(str)).to_csv(index=False, quoting=1, lineterminator="\r\n")
    lines = plain.splitlines()
    single = "\n".join([lines[0]] + [f"{r[:-1]}'{r[-1]}'" for r in lines[1:]]) + "\n"  # Class as '0'
    assert quoted.startswith('"Time","V1",') and quoted.splitlines()[1].endswith(',"0"')
    loaded = []
    for name, text in (("plain", plain), ("quoted", quoted), ("single", single)):
        (tmp_path / name).mkdir()
        write_gz(tmp_path / name / "creditcard.csv.gz", text)
        arrays, info = creditcard.load(tmp_path / name, expected=None)
        loaded.append(arrays)
        assert info["counts"] == {"rows": 12, "frauds": 3} and info["file"] == "creditcard.csv.gz"
    X, y = loaded[0]["X"], loaded[0]["y"]
    assert X.shape == (12, 30) and X.dtype == np.float64 and y.dtype == np.int64
    np.testing.assert_array_equal(X, table[CC_COLUMNS[:-1]].to_numpy(float))
    np.testing.assert_array_equal(y, table["Class"])
    assert list(loaded[0]["columns"]) == CC_COLUMNS[:-1]
    for other in loaded[1:]:
        for key in ("X", "y", "columns"):
            np.testing.assert_array_equal(other[key], loaded[0][key])


def test_creditcard_reads_the_standin_file(tmp_path):
    creditcard_standin.generate(tmp_path, standin_seed("creditcard"), n_rows=300, n_frauds=7)
    arrays, info = creditcard.load(tmp_path, expected={"rows": 300, "frauds": 7})
    assert arrays["X"].shape == (300, 30) and info["file"] == "creditcard_standin.csv.gz"
    assert (np.diff(arrays["X"][:, 0]) >= 0).all()  # Time sorted


def test_creditcard_errors(tmp_path):
    with pytest.raises(DataError, match=r"creditcard: file not found: neither creditcard.csv.gz nor "
                                        r"creditcard_standin.csv.gz"):
        creditcard.load(tmp_path)
    table = creditcard_table()
    write_gz(tmp_path / "creditcard.csv.gz", table.to_csv(index=False))
    with pytest.raises(DataError, match=r"^creditcard: creditcard.csv.gz: 12 rows with 3 frauds \(Class = 1\), "
                                        r"expected 284807 rows with 492 frauds$"):
        creditcard.load(tmp_path)
    write_gz(tmp_path / "creditcard.csv.gz", table.drop(columns="Amount").to_csv(index=False))
    with pytest.raises(DataError, match=r"creditcard: creditcard.csv.gz: columns Time, V1, V2, V3, ... \(30\), "
                                        r"expected Time, V1..V28, Amount, Class \(31\)"):
        creditcard.load(tmp_path, expected=None)
    write_gz(tmp_path / "creditcard.csv.gz", table.assign(Class=table["Class"] * 2).to_csv(index=False))
    with pytest.raises(DataError, match=r"creditcard: creditcard.csv.gz: column Class: values 2, expected 0 or 1"):
        creditcard.load(tmp_path, expected=None)
    bad = table.astype({"V3": object})
    bad.loc[4, "V3"] = "abc"
    write_gz(tmp_path / "creditcard.csv.gz", bad.to_csv(index=False))
    with pytest.raises(DataError, match=r"creditcard: creditcard.csv.gz: column V3: not a number: 'abc'"):
        creditcard.load(tmp_path, expected=None)
    (tmp_path / "creditcard.csv.gz").write_bytes(b"\x1f\x8b\x08 not really gzip")
    with pytest.raises(DataError, match=r"creditcard: creditcard.csv.gz: cannot read CSV"):
        creditcard.load(tmp_path, expected=None)


# --------------------------------------------------------------------------------------------------
# the real files (offline mirror), through download + prepare
# --------------------------------------------------------------------------------------------------

needs_mirror = pytest.mark.skipif(not (MIRROR / "heart_disease").is_dir() or not (MIRROR / "tcga_brca").is_dir(),
                                  reason=f"no heart_disease / tcga_brca in a dataset mirror at {MIRROR}")


def prepared_from_mirror(dataset: str, raw: Path) -> tuple[dict, dict]:
    """Copy the mirror files into raw with SOURCE.json exactly as the download stage does (real data only, the
    URLs and Kaggle slug removed so nothing is fetched), then prepare."""
    entry = config.load_datasets(ROOT)[dataset]
    offline = {**entry, "kaggle": None, "files": [{**f, "urls": []} for f in entry["files"]]}
    record = acquire(dataset, offline, raw, "real", str(MIRROR), log=lambda msg: None)
    assert record["source"] == "mirror" and record["standin"] is False
    return prepare(dataset, raw)


@needs_mirror
def test_real_heart_disease_flamby_sizes(tmp_path):
    arrays, meta = prepared_from_mirror("heart_disease", tmp_path / "heart_disease")
    counts = meta["counts"]
    assert counts["rows"] == {"cleveland": 303, "hungarian": 261, "switzerland": 46, "va": 130}
    assert counts["train"] == {"cleveland": 199, "hungarian": 172, "switzerland": 30, "va": 85}
    assert counts["test"] == {"cleveland": 104, "hungarian": 89, "switzerland": 16, "va": 45}
    assert counts["train_total"] == 486 and counts["test_total"] == 254
    assert arrays["X"].shape == (740, 13) and arrays["X_train_std"].shape == (486, 13)
    assert arrays["X_test_std"].shape == (254, 13) and np.isfinite(arrays["X_test_std"]).all()
    assert np.bincount(arrays["center_train"]).tolist() == [199, 172, 30, 85]
    assert meta["loader"] == {"module": "dpfl.data.loaders.heart_disease", "version": heart_disease.VERSION}
    # each center's standardized training rows have mean 0 and (unbiased) std 1 where the feature varies
    for k in range(4):
        rows = arrays["X_train_std"][arrays["center_train"] == k]
        np.testing.assert_allclose(rows.mean(0), 0, atol=1e-9)
        varies = arrays["std_center"][k] > 0
        np.testing.assert_allclose(rows.std(0, ddof=1)[varies], 1, rtol=1e-6)
    # Cleveland's first row: 63,1,1,145,233,1,2,150,0,2.3,... num 0 (cp 1 and restecg 2)
    np.testing.assert_array_equal(arrays["X"][0], [63, 1, 145, 233, 1, 150, 0, 2.3, 0, 0, 0, 0, 1])
    assert arrays["y"][0] == 0 and int(arrays["y"].sum()) == 383


@needs_mirror
def test_real_tcga_brca_flamby_sizes(tmp_path):
    arrays, meta = prepared_from_mirror("tcga_brca", tmp_path / "tcga_brca")
    counts = meta["counts"]
    assert counts["train"] == dict(zip(tcga_brca.REGIONS, [248, 156, 164, 129, 129, 40]))
    assert counts["test"] == dict(zip(tcga_brca.REGIONS, [63, 40, 42, 33, 33, 11]))
    assert counts["train_total"] == 866 and counts["test_total"] == 222 and counts["left_out_other_region"] == 8
    assert arrays["X"].shape == (1088, 39) and arrays["columns"][0] == "age_at_index"
    assert arrays["X"][:, 0].max() > 80  # age in years: no normalization
    assert set(np.unique(arrays["X"][:, 1:])) == {0.0, 1.0}
    assert int(arrays["E"].sum()) == 151 and arrays["T"].max() == 8605
