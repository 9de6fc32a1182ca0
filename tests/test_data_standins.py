"""Stand-in generators (dpfl.data.standins): deterministic bytes, the real files' format (so the real loaders read
them), the real counts, and the properties their docstrings promise (smokers pay more, BMI defines the obesity
class, even/odd MNIST learnable but not trivial, creditcard per kato2024 §1.1)."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpfl import config
from dpfl.data import checks, load_prepared
from dpfl.data.common import DataError, save_prepared, sha256_file, standin_seed
from dpfl.data.loaders import insurance as insurance_loader
from dpfl.data.loaders import mnist as mnist_loader
from dpfl.data.loaders import obesity as obesity_loader
from dpfl.data.prepare import prepare
from dpfl.data.sources import acquire
from dpfl.data.standins import creditcard, insurance, mnist, obesity

MNIST_TRAIN_COUNTS = [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949]
MNIST_TEST_COUNTS = [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]
OBESITY_CLASS_COUNTS = {"Insufficient_Weight": 272, "Normal_Weight": 287, "Obesity_Type_I": 351, "Obesity_Type_II": 297,
                        "Obesity_Type_III": 324, "Overweight_Level_I": 290, "Overweight_Level_II": 290}


def generated(tmp_path, module, dataset, name, **sizes):
    out = tmp_path / name
    out.mkdir()
    module.generate(out, standin_seed(dataset), **sizes)
    return out


@pytest.mark.parametrize("module, dataset, sizes", [
    (mnist, "mnist", {"n_train": 300, "n_test": 50}),
    (insurance, "insurance", {}),
    (obesity, "obesity", {}),
    (creditcard, "creditcard", {"n_rows": 3000, "n_frauds": 7}),
])
def test_generators_are_deterministic(tmp_path, module, dataset, sizes):
    a = generated(tmp_path, module, dataset, "a", **sizes)
    b = generated(tmp_path, module, dataset, "b", **sizes)
    names = sorted(p.name for p in a.iterdir())
    assert names and names == sorted(p.name for p in b.iterdir())
    assert [sha256_file(a / n) for n in names] == [sha256_file(b / n) for n in names]


def test_seeds_differ_between_datasets():
    assert standin_seed("mnist").entropy != standin_seed("insurance").entropy
    assert standin_seed("mnist").entropy == standin_seed("mnist").entropy


def test_mnist_standin_small_reads_with_the_real_loader(tmp_path):
    out = generated(tmp_path, mnist, "mnist", "m", n_train=600, n_test=100)
    arrays, info = mnist_loader.load(out, expected=None)
    assert arrays["x_train"].shape == (600, 28, 28) and arrays["x_test"].shape == (100, 28, 28)
    # per-digit counts proportional to MNIST's
    expected = np.array(MNIST_TRAIN_COUNTS) * 600 / 60000
    assert np.abs(np.array(info["label_counts"]["train"]) - expected).max() < 1
    assert gzip.open(out / "train-images-idx3-ubyte.gz").read(4) == (2051).to_bytes(4, "big")


def test_mnist_standin_full_size_and_learnable(tmp_path):
    """The real counts through acquire (stand-in) + prepare; even/odd is learnable by a linear model but not
    trivially separable. (No time limit here: timings belong to dpfl bench, not to unit tests on shared machines.)"""
    cat = config.load_datasets(Path(__file__).resolve().parent.parent)
    record = acquire("mnist", cat["mnist"], tmp_path / "raw" / "mnist", "standin")
    assert record["source"] == "standin" and sorted(f["name"] for f in record["files"]) == sorted(
        n for pair in mnist.FILES.values() for n in pair)
    arrays, meta = prepare("mnist", tmp_path / "raw" / "mnist")
    save_prepared(tmp_path / "mnist.npz", arrays, meta)
    arrays, meta = load_prepared(tmp_path / "mnist.npz")
    assert meta["standin"] is True and meta["source"] == "standin"
    assert meta["label_counts"] == {"train": MNIST_TRAIN_COUNTS, "test": MNIST_TEST_COUNTS}
    assert arrays["x_train"].dtype == np.uint8 and arrays["x_train"].shape == (60000, 28, 28)
    assert arrays["y_test"].dtype == np.int64 and arrays["y_test"].shape == (10000,)
    x = arrays["x_train"][:6000].reshape(6000, -1) / 255.0
    y = (arrays["y_train"][:6000] % 2 == 0).astype(float) * 2 - 1
    design = np.c_[x, np.ones(len(x))]
    w = np.linalg.lstsq(design[:5000], y[:5000], rcond=None)[0]
    accuracy = np.mean(np.sign(design[5000:] @ w) == y[5000:])
    assert 0.65 < accuracy < 0.97, accuracy


def test_insurance_standin(tmp_path):
    out = generated(tmp_path, insurance, "insurance", "i")
    raw = (out / "insurance.csv").read_bytes()
    assert raw.startswith(b"age,sex,bmi,children,smoker,region,charges\r\n") and raw.endswith(b"\r\n")
    assert raw.count(b"\r\n") == 1339 and raw.count(b"\n") == 1339
    arrays, info = insurance_loader.load(out)
    X, y = arrays["X"], arrays["y"]
    assert X.shape == (1338, 6) and info["counts"] == {"rows": 1338}
    assert set(X[:, 1]) == {0, 1} and set(X[:, 4]) == {0, 1} and set(X[:, 5]) == {0, 1, 2, 3}
    assert 18 <= X[:, 0].min() and X[:, 0].max() <= 64 and 16 <= X[:, 2].min() and X[:, 2].max() <= 53
    smokers = X[:, 4] == 1
    assert y[smokers].mean() > 2.5 * y[~smokers].mean()
    assert np.corrcoef(X[~smokers, 0], y[~smokers])[0, 1] > 0.5  # charges grow with age
    assert (y > 0).all()


def test_obesity_standin(tmp_path):
    out = generated(tmp_path, obesity, "obesity", "o")
    raw = (out / obesity_loader.FILE).read_bytes()
    assert raw.startswith(obesity.HEADER.encode() + b"\r\n") and raw.endswith(b"\r\n")
    arrays, info = obesity_loader.load(out)
    assert arrays["X"].shape == (2111, 16)
    assert info["counts"]["classes"] == OBESITY_CLASS_COUNTS
    df = pd.read_csv(out / obesity_loader.FILE)
    bmi = df["Weight"] / df["Height"] ** 2
    for name, (_, (lo, hi)) in obesity.CLASSES.items():
        inside = bmi[df["NObeyesdad"] == name]
        assert lo <= inside.min() and inside.max() < hi, name


def test_creditcard_standin_small(tmp_path):
    out = generated(tmp_path, creditcard, "creditcard", "c", n_rows=5000, n_frauds=9)
    path = out / "creditcard_standin.csv.gz"
    first = gzip.open(path, "rt").readline()
    assert first.strip() == ",".join(f'"{c}"' for c in checks.CREDITCARD_COLUMNS)
    df = pd.read_csv(path)
    assert df.shape == (5000, 31) and int(df["Class"].sum()) == 9
    assert df["Time"].is_monotonic_increasing and 0 <= df["Time"].min() and df["Time"].max() <= 172792
    assert (df["Amount"] > 0).all() and (df["Amount"].round(2) == df["Amount"]).all()


def test_creditcard_standin_full_size_passes_the_real_content_check(tmp_path):
    """Exactly 284,807 rows and 492 frauds; frauds shifted along V14 (mu -6) and V4 (mu +3) per the spec."""
    out = generated(tmp_path, creditcard, "creditcard", "c")
    path = out / "creditcard_standin.csv.gz"
    assert checks.creditcard("creditcard", path) == "284807 rows, 31 columns, 492 frauds"
    df = pd.read_csv(path, usecols=["V14", "V4", "V1", "Class"])
    s = lambda k: 2.0 * k ** -0.55  # noqa: E731
    fraud = df[df["Class"] == 1]
    assert abs(fraud["V14"].mean() / s(14) + 6) < 0.5 and abs(fraud["V4"].mean() / s(4) - 3) < 0.5
    assert abs(df.loc[df["Class"] == 0, "V1"].std() - s(1)) < 0.02


def test_creditcard_content_check_rejects_wrong_counts(tmp_path):
    out = generated(tmp_path, creditcard, "creditcard", "c", n_rows=2000, n_frauds=5)
    with pytest.raises(DataError, match="creditcard: creditcard_standin.csv.gz: 2000 rows with 5 frauds"):
        checks.creditcard("creditcard", out / "creditcard_standin.csv.gz")
