"""Loaders (dpfl.data.loaders) on tiny fixtures written here: the exact array formats the papers consume, columns
selected by name (both obesity column orders), clear errors for a wrong IDX magic, a truncated gzip or a missing
column, and the prepared .npz container (no pickle; files re-verified against SOURCE.json before use)."""

from __future__ import annotations

import gzip
import json
import struct

import numpy as np
import pandas as pd
import pytest

from dpfl.data import load_prepared
from dpfl.data.common import DataError, save_prepared, sha256_file
from dpfl.data.loaders import insurance, mnist, obesity
from dpfl.data.prepare import prepare


def write_idx_gz(path, array, magic=None):
    """An IDX file written independently of the project's code: big-endian magic, dims, then the bytes."""
    array = np.asarray(array, np.uint8)
    magic = magic if magic is not None else 0x0800 | array.ndim
    with gzip.open(path, "wb") as fh:
        fh.write(struct.pack(f">I{array.ndim}I", magic, *array.shape) + array.tobytes())


def tiny_mnist(folder, n_train=12, n_test=5, seed=0):
    rng = np.random.default_rng(seed)
    data = {}
    for split, n in (("train", n_train), ("test", n_test)):
        x = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
        y = np.arange(n, dtype=np.uint8) % 10
        write_idx_gz(folder / mnist.FILES[split][0], x)
        write_idx_gz(folder / mnist.FILES[split][1], y)
        data[split] = (x, y)
    return data


def write_csv(path, df: pd.DataFrame):
    """CRLF line endings and a trailing CRLF, as the published files."""
    path.write_bytes(df.to_csv(index=False, lineterminator="\r\n").encode())


# --------------------------------------------------------------------------------------------------
# mnist
# --------------------------------------------------------------------------------------------------


def test_mnist_idx_round_trip(tmp_path):
    data = tiny_mnist(tmp_path)
    arrays, info = mnist.load(tmp_path, expected=None)
    assert set(arrays) == {"x_train", "y_train", "x_test", "y_test"}
    for split in ("train", "test"):
        x, y = data[split]
        assert arrays[f"x_{split}"].dtype == np.uint8 and arrays[f"y_{split}"].dtype == np.int64
        np.testing.assert_array_equal(arrays[f"x_{split}"], x)
        np.testing.assert_array_equal(arrays[f"y_{split}"], y)
    assert info["counts"] == {"train": 12, "test": 5}
    assert info["label_counts"]["test"] == [1, 1, 1, 1, 1, 0, 0, 0, 0, 0]


def test_mnist_expected_counts_are_enforced(tmp_path):
    tiny_mnist(tmp_path)
    with pytest.raises(DataError, match="mnist: train-images-idx3-ubyte.gz: 12 images, expected 60000"):
        mnist.load(tmp_path)


def test_mnist_wrong_magic(tmp_path):
    tiny_mnist(tmp_path)
    write_idx_gz(tmp_path / "train-labels-idx1-ubyte.gz", np.zeros(12), magic=2051)
    with pytest.raises(DataError) as e:
        mnist.load(tmp_path, expected=None)
    assert str(e.value) == "mnist: train-labels-idx1-ubyte.gz: IDX magic number 2051, expected 2049 (labels)"


def test_mnist_truncated_gzip(tmp_path):
    tiny_mnist(tmp_path)
    path = tmp_path / "t10k-images-idx3-ubyte.gz"
    path.write_bytes(path.read_bytes()[:-40])
    with pytest.raises(DataError, match=r"mnist: t10k-images-idx3-ubyte.gz: truncated or corrupt gzip file"):
        mnist.load(tmp_path, expected=None)


def test_mnist_data_shorter_than_header(tmp_path):
    tiny_mnist(tmp_path)
    with gzip.open(tmp_path / "t10k-labels-idx1-ubyte.gz", "wb") as fh:
        fh.write(struct.pack(">II", 2049, 5) + bytes(3))
    with pytest.raises(DataError, match="t10k-labels-idx1-ubyte.gz: IDX header says 5 = 5 bytes, the file holds 3"):
        mnist.load(tmp_path, expected=None)


def test_mnist_images_and_labels_must_match(tmp_path):
    tiny_mnist(tmp_path)
    write_idx_gz(tmp_path / "t10k-labels-idx1-ubyte.gz", np.zeros(4))
    with pytest.raises(DataError, match="t10k-images-idx3-ubyte.gz has 5 images but t10k-labels-idx1-ubyte.gz 4"):
        mnist.load(tmp_path, expected=None)


# --------------------------------------------------------------------------------------------------
# insurance
# --------------------------------------------------------------------------------------------------

INSURANCE = pd.DataFrame({
    "age": [19, 18, 28, 33], "sex": ["female", "male", "male", "male"], "bmi": [27.9, 33.77, 33.0, 22.705],
    "children": [0, 1, 3, 0], "smoker": ["yes", "no", "no", "no"],
    "region": ["southwest", "southeast", "northeast", "northwest"],
    "charges": [16884.924, 1725.5523, 4449.462, 21984.47061]})


def test_insurance_format(tmp_path):
    write_csv(tmp_path / "insurance.csv", INSURANCE)
    arrays, info = insurance.load(tmp_path)
    assert set(arrays) == {"X", "y", "columns"}
    assert arrays["X"].dtype == np.float64 and arrays["X"].shape == (4, 6)
    assert list(arrays["columns"]) == ["age", "sex", "bmi", "children", "smoker", "region"]
    assert arrays["columns"].dtype.kind == "U"
    np.testing.assert_array_equal(arrays["X"][0], [19, 0, 27.9, 0, 1, 3])
    np.testing.assert_array_equal(arrays["X"][:, 5], [3, 2, 0, 1])  # northeast 0 northwest 1 southeast 2 southwest 3
    np.testing.assert_array_equal(arrays["y"], INSURANCE["charges"].to_numpy())
    assert arrays["y"].dtype == np.float64 and info["counts"] == {"rows": 4}


def test_insurance_columns_by_name_and_line_endings(tmp_path):
    write_csv(tmp_path / "insurance.csv", INSURANCE)
    a, _ = insurance.load(tmp_path)
    shuffled = INSURANCE[["charges", "region", "age", "smoker", "bmi", "sex", "children"]]
    (tmp_path / "insurance.csv").write_text(shuffled.to_csv(index=False))  # LF, other order
    b, _ = insurance.load(tmp_path)
    for key in a:
        np.testing.assert_array_equal(a[key], b[key])


def test_insurance_missing_column(tmp_path):
    write_csv(tmp_path / "insurance.csv", INSURANCE.drop(columns=["smoker"]))
    with pytest.raises(DataError,
                       match="insurance: insurance.csv: missing required column\\(s\\) smoker; columns found"):
        insurance.load(tmp_path)


def test_insurance_unknown_category_and_bad_number(tmp_path):
    write_csv(tmp_path / "insurance.csv", INSURANCE.assign(region=["north", "southeast", "northeast", "northwest"]))
    with pytest.raises(DataError, match="column region: unexpected value\\(s\\) north; allowed: northeast"):
        insurance.load(tmp_path)
    write_csv(tmp_path / "insurance.csv", INSURANCE.assign(bmi=["27.9", "x", "1", "2"]))
    with pytest.raises(DataError, match="column bmi: not a number: 'x'"):
        insurance.load(tmp_path)


# --------------------------------------------------------------------------------------------------
# obesity
# --------------------------------------------------------------------------------------------------

PERMUTED = ["Age", "Gender", "Height", "Weight", "CALC", "FAVC", "FCVC", "NCP", "SCC", "SMOKE", "CH2O",
            "family_history_with_overweight", "FAF", "TUE", "CAEC", "MTRANS", "NObeyesdad"]


def obesity_table(n=14, seed=1) -> pd.DataFrame:
    """Every category of every column appears (so each code is exercised); Gender-first order."""
    rng = np.random.default_rng(seed)
    cols = {}
    for c in obesity.COLUMNS:
        if c in obesity.VOCABULARY:
            vocab = obesity.VOCABULARY[c]
            cols[c] = [vocab[i % len(vocab)] for i in range(n)]
        else:
            cols[c] = np.round(rng.uniform(1, 3, n), 6)
    cols["NObeyesdad"] = [obesity.CLASSES[i % 7] for i in range(n)]
    return pd.DataFrame(cols)


def test_obesity_format(tmp_path):
    df = obesity_table()
    write_csv(tmp_path / obesity.FILE, df)
    arrays, info = obesity.load(tmp_path)
    assert set(arrays) == {"X", "y", "columns", "classes"}
    assert arrays["X"].dtype == np.float64 and arrays["X"].shape == (14, 16)
    assert arrays["y"].dtype == np.int64
    assert list(arrays["columns"]) == obesity.COLUMNS and obesity.COLUMNS[0] == "Gender"
    assert list(arrays["classes"]) == ["Insufficient_Weight", "Normal_Weight", "Obesity_Type_I", "Obesity_Type_II",
                                       "Obesity_Type_III", "Overweight_Level_I", "Overweight_Level_II"]
    np.testing.assert_array_equal(arrays["y"], np.arange(14) % 7)
    caec = list(arrays["columns"]).index("CAEC")
    np.testing.assert_array_equal(arrays["X"][:4, caec], [0, 1, 2, 3])  # Always, Frequently, Sometimes, no
    np.testing.assert_array_equal(arrays["X"][:, 1], df["Age"].to_numpy())
    assert info["counts"]["rows"] == 14 and sum(info["counts"]["classes"].values()) == 14


def test_vocabularies_are_in_code_point_order():
    for module in (insurance, obesity):
        for column, vocab in module.VOCABULARY.items():
            assert vocab == sorted(vocab), (module.__name__, column)
    assert obesity.CLASSES == sorted(obesity.CLASSES)


def test_both_obesity_column_orders_load_identically(tmp_path):
    df = obesity_table()
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    write_csv(tmp_path / "a" / obesity.FILE, df)
    write_csv(tmp_path / "b" / obesity.FILE, df[PERMUTED])
    a, _ = obesity.load(tmp_path / "a")
    b, _ = obesity.load(tmp_path / "b")
    for key in a:
        np.testing.assert_array_equal(a[key], b[key])


def test_obesity_missing_column(tmp_path):
    write_csv(tmp_path / obesity.FILE, obesity_table().drop(columns=["MTRANS"]))
    with pytest.raises(DataError) as e:
        obesity.load(tmp_path)
    assert str(e.value).startswith(f"obesity: {obesity.FILE}: missing required column(s) MTRANS; columns found: Gender")


def test_obesity_missing_file(tmp_path):
    with pytest.raises(DataError, match=f"obesity: {obesity.FILE}: file not found"):
        obesity.load(tmp_path)


# --------------------------------------------------------------------------------------------------
# the prepared container and the prepare stage
# --------------------------------------------------------------------------------------------------


def test_prepared_npz_round_trip_without_pickle(tmp_path):
    arrays = {"X": np.ones((2, 3)), "columns": np.array(["a", "b", "c"])}
    save_prepared(tmp_path / "d.npz", arrays, {"dataset": "d", "standin": False})
    with np.load(tmp_path / "d.npz", allow_pickle=False) as z:
        assert sorted(z.files) == ["X", "columns", "meta"]
    got, meta = load_prepared(tmp_path / "d.npz")
    assert meta == {"dataset": "d", "standin": False}
    np.testing.assert_array_equal(got["columns"], arrays["columns"])
    with pytest.raises(TypeError, match="object arrays"):
        save_prepared(tmp_path / "e.npz", {"bad": np.array([{}, 1], dtype=object)}, {})
    assert not (tmp_path / "e.npz").exists() and [p.name for p in tmp_path.iterdir()] == ["d.npz"]


def source_json(raw, names, standin=False):
    record = {"dataset": "insurance", "source": "mirror", "standin": standin, "location": "/m", "retrieved_at": "t",
              "generator": None, "files": [{"name": n, "sha256": sha256_file(raw / n), "bytes": 1} for n in names]}
    (raw / "SOURCE.json").write_text(json.dumps(record))


def test_prepare_builds_meta_and_verifies_files_first(tmp_path):
    write_csv(tmp_path / "insurance.csv", INSURANCE)
    source_json(tmp_path, ["insurance.csv"])
    arrays, meta = prepare("insurance", tmp_path)
    assert meta["dataset"] == "insurance" and meta["source"] == "mirror" and meta["standin"] is False
    assert meta["loader"] == {"module": "dpfl.data.loaders.insurance", "version": insurance.VERSION}
    assert meta["files"][0]["sha256"] == sha256_file(tmp_path / "insurance.csv") and meta["counts"] == {"rows": 4}
    (tmp_path / "insurance.csv").write_bytes((tmp_path / "insurance.csv").read_bytes() + b"\r\n")
    with pytest.raises(DataError, match="insurance: insurance.csv: sha256 .* differs from SOURCE.json"):
        prepare("insurance", tmp_path)
