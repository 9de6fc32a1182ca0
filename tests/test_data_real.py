"""The real datasets from the offline mirror (DPFL_DATA_MIRROR, else ../shared/datasets; skipped when absent):
the catalog's checksums match the mirror, and mnist / insurance / obesity prepare to the counts verified in
the mirror's MANIFEST.md. Only the mirror is used (data_source real, mirror given): nothing is downloaded."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpfl import config
from dpfl.data.loaders import obesity as obesity_loader
from dpfl.data.prepare import prepare
from dpfl.data.sources import acquire

ROOT = Path(__file__).resolve().parent.parent
MIRROR = Path(os.environ.get("DPFL_DATA_MIRROR") or ROOT.parent / "shared" / "datasets")
pytestmark = pytest.mark.skipif(not (MIRROR / "mnist").is_dir(), reason=f"no dataset mirror at {MIRROR}")
CATALOG = config.load_datasets(ROOT)


def offline(entry: dict) -> dict:
    """The catalog entry without its URLs and Kaggle slug: if the mirror failed, nothing would be fetched."""
    return {**entry, "kaggle": None, "files": [{**f, "urls": []} for f in entry["files"]]}


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    raw = tmp_path_factory.mktemp("raw")
    out = {}
    for dataset in ("mnist", "insurance", "obesity"):
        record = acquire(dataset, offline(CATALOG[dataset]), raw / dataset, "real", str(MIRROR))
        assert record["source"] == "mirror" and record["standin"] is False and record["attempts"] == []
        out[dataset] = prepare(dataset, raw / dataset)
    return out


def test_checksum_file_agrees_with_the_catalog():
    sums = {}
    for line in (MIRROR / "SHA256SUMS").read_text().splitlines():
        digest, path = line.split()
        sums[path.removeprefix("./")] = digest
    listed = {f"{e['mirror']}/{f['name']}": f["sha256"] for e in CATALOG.values() for f in e["files"]}
    for path, digest in sums.items():
        assert listed[path] == digest, path


@pytest.mark.parametrize("dataset", ["heart_disease", "tcga_brca"])
def test_other_mirrored_datasets_download(tmp_path, dataset):
    record = acquire(dataset, offline(CATALOG[dataset]), tmp_path / dataset, "real", str(MIRROR))
    assert record["source"] == "mirror"
    assert [f["name"] for f in record["files"]] == [f["name"] for f in CATALOG[dataset]["files"]]


def test_real_mnist(prepared):
    arrays, meta = prepared["mnist"]
    assert arrays["x_train"].shape == (60000, 28, 28) and arrays["x_train"].dtype == np.uint8
    assert arrays["x_test"].shape == (10000, 28, 28) and arrays["y_test"].dtype == np.int64
    assert meta["label_counts"]["train"] == [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949]
    assert meta["label_counts"]["test"] == [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]
    assert meta["source"] == "mirror" and meta["standin"] is False and len(meta["files"]) == 4


def test_real_insurance(prepared):
    arrays, meta = prepared["insurance"]
    X, y = arrays["X"], arrays["y"]
    assert X.shape == (1338, 6) and X.dtype == np.float64 and meta["counts"] == {"rows": 1338}
    assert y.sum() == pytest.approx(17_755_824.9908, abs=1e-3)
    assert int(X[:, 4].sum()) == 274  # smokers
    assert np.bincount(X[:, 5].astype(int)).tolist() == [324, 325, 364, 325]  # NE, NW, SE, SW
    np.testing.assert_array_equal(X[0], [19, 0, 27.9, 0, 1, 3])  # 19,female,27.9,0,yes,southwest
    assert y[0] == 16884.924


def test_real_obesity(prepared):
    arrays, meta = prepared["obesity"]
    assert arrays["X"].shape == (2111, 16)
    assert meta["counts"]["classes"] == {"Insufficient_Weight": 272, "Normal_Weight": 287, "Obesity_Type_I": 351,
                                         "Obesity_Type_II": 297, "Obesity_Type_III": 324, "Overweight_Level_I": 290,
                                         "Overweight_Level_II": 290}
    assert np.bincount(arrays["X"][:, 0].astype(int)).tolist() == [1043, 1068]  # Female, Male


def test_real_obesity_permuted_variant_loads_identically(prepared, tmp_path):
    """The second published variant (MANIFEST §3): same rows, columns permuted; rebuilt here from the mirror copy."""
    order = ["Age", "Gender", "Height", "Weight", "CALC", "FAVC", "FCVC", "NCP", "SCC", "SMOKE", "CH2O",
             "family_history_with_overweight", "FAF", "TUE", "CAEC", "MTRANS", "NObeyesdad"]
    df = pd.read_csv(MIRROR / "obesity" / obesity_loader.FILE, dtype=str)
    (tmp_path / obesity_loader.FILE).write_bytes(df[order].to_csv(index=False, lineterminator="\r\n").encode())
    arrays, _ = obesity_loader.load(tmp_path)
    for key, value in prepared["obesity"][0].items():
        np.testing.assert_array_equal(arrays[key], value)
