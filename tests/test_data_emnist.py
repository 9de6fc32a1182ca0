"""Federated EMNIST, digits only (bietti2022 §1.3): the stand-in (the real HDF5 layout, deterministic bytes, a style
per writer), the loader on it (the array contract of the training code, the first-N-users cut) and on a hand-made
tiny set in the real layout, and the loader's errors, each naming its file."""

from __future__ import annotations

import math
import time
from pathlib import Path

import h5py
import numpy as np
import pytest

from dpfl import config
from dpfl.data import load_prepared
from dpfl.data.common import DataError, save_prepared, sha256_file, standin_seed
from dpfl.data.loaders import emnist as loader
from dpfl.data.prepare import prepare
from dpfl.data.sources import acquire
from dpfl.data.standins import emnist as standin

TRAIN, TEST = "fed_emnist_digitsonly_train.h5", "fed_emnist_digitsonly_test.h5"
ARRAYS = {"x_train", "y_train", "train_offsets", "x_test", "y_test", "test_offsets", "client_ids"}
WRITERS = 12


def generated(folder: Path, seed=None, n_writers: int = WRITERS) -> Path:
    folder.mkdir()
    standin.generate(folder, seed if seed is not None else standin_seed("emnist"), n_writers=n_writers)
    return folder


def read_h5(path: Path) -> dict:
    """{client: (pixels, label)} in the file's (sorted) order, with the stored dtypes."""
    with h5py.File(path, "r") as f:
        return {cid: (g["pixels"][()], g["label"][()]) for cid, g in f["examples"].items()}


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> Path:
    return generated(tmp_path_factory.mktemp("emnist") / "raw")


# --------------------------------------------------------------------------------------------------
# the stand-in
# --------------------------------------------------------------------------------------------------


def test_standin_has_the_real_layout(small):
    assert sorted(p.name for p in small.iterdir()) == [TEST, TRAIN]
    for name in (TRAIN, TEST):
        with h5py.File(small / name, "r") as f:
            assert list(f) == ["examples"]
            for cid, g in f["examples"].items():
                assert isinstance(g, h5py.Group) and sorted(g) == ["label", "pixels"]
                assert g["pixels"].dtype == np.float32 and g["label"].dtype == np.int32
                assert g["pixels"].shape == (g["label"].shape[0], 28, 28) and g["label"].ndim == 1
    train, test = read_h5(small / TRAIN), read_h5(small / TEST)
    ids = list(train)
    assert list(test) == ids and len(ids) == WRITERS
    # ids like the real ones (f0000_14), sorted order = generation order
    assert ids == sorted(ids) and all(cid[:5] == f"f{k:04d}" and len(cid) == 8 and cid[5] == "_"
                                      for k, cid in enumerate(ids))
    for cid in ids:
        (x, y), (xt, yt) = train[cid], test[cid]
        assert 60 <= len(y) <= 140 and len(yt) == math.ceil(len(y) / 8)
        for pixels, labels in ((x, y), (xt, yt)):
            assert 0 <= pixels.min() and pixels.max() == 1.0
            assert labels.min() >= 0 and labels.max() <= 9
    every = np.concatenate([x.ravel() for x, _ in train.values()])
    assert np.mean(every == 1.0) > 0.5  # background (1.0) dominates
    assert 0.03 < 1 - every.mean() < 0.3  # but there is ink
    labels = np.concatenate([y for _, y in train.values()])
    assert set(np.unique(labels)) == set(range(10))


def test_standin_bytes_are_deterministic(tmp_path):
    a = generated(tmp_path / "a", n_writers=4)
    time.sleep(1.1)  # HDF5 time stamps have a 1 s resolution: any stored one would now differ
    b = generated(tmp_path / "b", n_writers=4)
    c = generated(tmp_path / "c", np.random.SeedSequence(12345), n_writers=4)
    for name in (TRAIN, TEST):
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
        assert sha256_file(a / name) != sha256_file(c / name), name


def test_label_mix_is_per_writer(tmp_path):
    """Dirichlet(5·1) label mixes: the writers' label histograms differ more than multinomial noise around one
    common mix would make them (chi-square of the writer x label table, 100 writers)."""
    train = read_h5(generated(tmp_path / "w", n_writers=100) / TRAIN)
    table = np.array([np.bincount(y, minlength=10) for _, y in train.values()], float)
    expected = table.sum(1, keepdims=True) * table.sum(0, keepdims=True) / table.sum()
    chi2 = ((table - expected) ** 2 / expected).sum()
    dof = 99 * 9
    # under a common mix chi2 ~ dof ± sqrt(2 dof) = 891 ± 42; Dirichlet(5) mixes add about n·9/51 per writer
    assert chi2 > dof + 6 * math.sqrt(2 * dof), chi2


def test_writers_differ_in_style(small):
    """A writer's style is fixed: the mean ink of its first half of train images predicts that of its second half
    (writers differ systematically, not only by sampling noise)."""
    train = read_h5(small / TRAIN)
    halves = np.array([[1 - x[: len(x) // 2].mean(), 1 - x[len(x) // 2:].mean()] for x, _ in train.values()])
    assert np.corrcoef(halves.T)[0, 1] > 0.8
    assert halves.max() > 1.5 * halves.min()


def test_style_operations():
    """apply_style: identity -> 1 - ink; dilation adds ink, erosion removes it, gamma < 1 darkens; a shift moves it."""
    ink = np.zeros((2, 28, 28), np.uint8)
    ink[0, 10:18, 12:15] = 255
    ink[1, 8:20, 13] = 128
    ident = {"matrix": np.eye(2), "offset": np.zeros(2), "stroke": None, "gamma": 1.0}
    out = standin.apply_style(ink, ident)
    assert out.dtype == np.float32 and out.shape == (2, 28, 28)
    np.testing.assert_allclose(out, 1 - ink / 255.0, atol=1e-6)
    amount = lambda style: (1 - standin.apply_style(ink, style)).sum()  # noqa: E731
    assert amount({**ident, "stroke": "dilate"}) > amount(ident) > amount({**ident, "stroke": "erode"})
    assert amount({**ident, "gamma": 0.7}) > amount(ident) > amount({**ident, "gamma": 1.4})
    shifted = standin.apply_style(ink, {**ident, "offset": np.array([-2.0, 0.0])})  # output row r reads row r - 2
    np.testing.assert_allclose(shifted[:, 2:], out[:, :-2], atol=1e-6)


def test_writer_count_is_bounded(tmp_path):
    with pytest.raises(ValueError, match="n_writers must be in 1..3383"):
        standin.generate(tmp_path, standin_seed("emnist"), n_writers=3384)


# --------------------------------------------------------------------------------------------------
# the loader on the stand-in
# --------------------------------------------------------------------------------------------------


def check_contract(arrays: dict, n_users: int) -> None:
    assert set(arrays) == ARRAYS
    assert arrays["client_ids"].dtype.kind == "U" and arrays["client_ids"].shape == (n_users,)
    assert list(arrays["client_ids"]) == sorted(arrays["client_ids"])
    for split in ("train", "test"):
        x, y, off = arrays[f"x_{split}"], arrays[f"y_{split}"], arrays[f"{split}_offsets"]
        assert x.dtype == np.float32 and y.dtype == np.int64 and off.dtype == np.int64
        assert off.shape == (n_users + 1,) and off[0] == 0 and off[-1] == len(x) == len(y)
        assert (np.diff(off) >= 0).all()
        assert x.shape[1:] == (784,) and x.min() >= 0 and x.max() <= 1


def test_loader_on_the_standin(small):
    arrays, info = loader.load(small)
    check_contract(arrays, WRITERS)
    train, test = read_h5(small / TRAIN), read_h5(small / TEST)
    assert list(arrays["client_ids"]) == list(train)
    for i, cid in enumerate(arrays["client_ids"]):
        for split, data in (("train", train), ("test", test)):
            off = arrays[f"{split}_offsets"]
            rows = slice(off[i], off[i + 1])
            np.testing.assert_array_equal(arrays[f"x_{split}"][rows], data[cid][0].reshape(-1, 784))
            np.testing.assert_array_equal(arrays[f"y_{split}"][rows], data[cid][1])
    sizes = np.diff(arrays["train_offsets"])
    assert info["counts"] == {"users": WRITERS, "train": int(sizes.sum()), "test": len(arrays["y_test"])}
    assert info["per_user"]["train"] == {"min": int(sizes.min()), "median": float(np.median(sizes)),
                                         "max": int(sizes.max())}
    assert info["clients_in_train_file"] == WRITERS and sum(info["label_counts"]["test"]) == info["counts"]["test"]


def test_loader_keeps_the_first_users_in_sorted_order(small, monkeypatch):
    full, _ = loader.load(small)
    monkeypatch.setattr(loader, "MAX_USERS", 5)
    arrays, info = loader.load(small)
    check_contract(arrays, 5)
    assert list(arrays["client_ids"]) == list(full["client_ids"][:5])
    for split in ("train", "test"):
        off = arrays[f"{split}_offsets"]
        np.testing.assert_array_equal(off, full[f"{split}_offsets"][:6])
        np.testing.assert_array_equal(arrays[f"x_{split}"], full[f"x_{split}"][: off[-1]])
        np.testing.assert_array_equal(arrays[f"y_{split}"], full[f"y_{split}"][: off[-1]])
    assert info["counts"]["users"] == 5 and info["clients_in_train_file"] == WRITERS


def test_real_sizes_are_the_defaults():
    assert loader.MAX_USERS == 1000
    assert standin.generate.__defaults__ == (1000,)


def test_standin_full_size_through_acquire_and_prepare(tmp_path):
    """1000 writers (~100k train images) generated, verified, loaded and saved; sizes per spec (speed: not timed
    here, ≈13 s on one core)."""
    cat = config.load_datasets(Path(__file__).resolve().parent.parent)
    assert cat["emnist"]["standin"] == "emnist"
    record = acquire("emnist", cat["emnist"], tmp_path / "raw" / "emnist", "standin")
    assert sorted(f["name"] for f in record["files"]) == [TEST, TRAIN]
    arrays, meta = prepare("emnist", tmp_path / "raw" / "emnist")
    save_prepared(tmp_path / "emnist.npz", arrays, meta)
    arrays, meta = load_prepared(tmp_path / "emnist.npz")
    assert meta["standin"] is True and meta["counts"]["users"] == 1000
    check_contract(arrays, 1000)
    train, test = np.diff(arrays["train_offsets"]), np.diff(arrays["test_offsets"])
    assert train.min() >= 60 and train.max() <= 140 and 90_000 < train.sum() < 110_000
    np.testing.assert_array_equal(test, -(-train // 8))


# --------------------------------------------------------------------------------------------------
# the loader on a tiny hand-made set in the real layout
# --------------------------------------------------------------------------------------------------


def image(value: float, spot: float = 1.0) -> np.ndarray:
    """A 28x28 TFF-style image: background 1.0, pixel (3, 4) = value, pixel (27, 27) = spot."""
    out = np.ones((28, 28), np.float32)
    out[3, 4], out[27, 27] = value, spot
    return out


# client -> (pixel values, labels); created in an unsorted order
HAND_TRAIN = {"f0002_01": ([0.5], [7]), "f0000_10": ([0.0, 0.25], [3, 0]), "f0001_99": ([0.75, 1.0, 0.125], [9, 9, 1])}
HAND_TEST = {"f0001_99": ([0.5], [2]), "f0003_00": ([0.0], [1]), "f0000_10": ([0.375, 0.625], [4, 5]),
             "f0002_01": ([], [])}


def write_hand(path: Path, clients: dict) -> None:
    with h5py.File(path, "w") as f:
        for cid, (values, labels) in clients.items():
            g = f.create_group(f"examples/{cid}")
            g.create_dataset("pixels", data=np.array([image(v) for v in values], np.float32).reshape(-1, 28, 28))
            g.create_dataset("label", data=np.array(labels, np.int32))


def hand(folder: Path) -> Path:
    write_hand(folder / TRAIN, HAND_TRAIN)
    write_hand(folder / TEST, HAND_TEST)
    return folder


def test_tiny_set_by_hand(tmp_path):
    arrays, info = loader.load(hand(tmp_path))
    check_contract(arrays, 3)
    assert list(arrays["client_ids"]) == ["f0000_10", "f0001_99", "f0002_01"]
    np.testing.assert_array_equal(arrays["train_offsets"], [0, 2, 5, 6])
    np.testing.assert_array_equal(arrays["test_offsets"], [0, 2, 3, 3])  # f0003_00 (test only) is not read
    np.testing.assert_array_equal(arrays["y_train"], [3, 0, 9, 9, 1, 7])
    np.testing.assert_array_equal(arrays["y_test"], [4, 5, 2])
    # raw values, flattened row-major: pixel (3, 4) is column 3 * 28 + 4, background stays 1.0
    np.testing.assert_array_equal(arrays["x_train"][:, 88], np.float32([0.0, 0.25, 0.75, 1.0, 0.125, 0.5]))
    np.testing.assert_array_equal(arrays["x_test"][:, 88], np.float32([0.375, 0.625, 0.5]))
    expected = np.stack([image(v).ravel() for v in (0.375, 0.625, 0.5)])
    np.testing.assert_array_equal(arrays["x_test"], expected)
    assert info["counts"] == {"users": 3, "train": 6, "test": 3}
    assert info["per_user"] == {"train": {"min": 1, "median": 2.0, "max": 3},
                                "test": {"min": 0, "median": 1.0, "max": 2}}
    assert info["label_counts"]["train"] == [1, 1, 0, 1, 0, 0, 0, 1, 0, 2]


# --------------------------------------------------------------------------------------------------
# errors: each names the dataset and the file
# --------------------------------------------------------------------------------------------------


def edit(path: Path, cid: str, **datasets) -> None:
    """Replace (or, with None, delete) datasets of one client."""
    with h5py.File(path, "a") as f:
        g = f[f"examples/{cid}"]
        for name, data in datasets.items():
            del g[name]
            if data is not None:
                g.create_dataset(name, data=data)


@pytest.mark.parametrize("name", [TRAIN, TEST])
def test_missing_file(tmp_path, name):
    (hand(tmp_path) / name).unlink()
    with pytest.raises(DataError, match=f"emnist: {name}: file not found"):
        loader.load(tmp_path)


@pytest.mark.parametrize("name", [TRAIN, TEST])
def test_corrupt_and_truncated_hdf5(tmp_path, name):
    path = hand(tmp_path) / name
    good = path.read_bytes()
    path.write_bytes(good[: len(good) // 2])
    with pytest.raises(DataError, match=f"emnist: {name}: .*(truncated or corrupt)"):
        loader.load(tmp_path)
    path.write_bytes(b"not an HDF5 file\n" * 50)
    with pytest.raises(DataError, match=f"emnist: {name}: not a readable HDF5 file"):
        loader.load(tmp_path)


@pytest.mark.parametrize("name", [TRAIN, TEST])
def test_no_examples_group(tmp_path, name):
    hand(tmp_path)
    with h5py.File(tmp_path / name, "w") as f:
        f.create_group("clients/f0000_10")
    with pytest.raises(DataError, match=f"emnist: {name}: no 'examples' group"):
        loader.load(tmp_path)


def test_no_client(tmp_path):
    hand(tmp_path)
    with h5py.File(tmp_path / TRAIN, "w") as f:
        f.create_group("examples")
    with pytest.raises(DataError, match=f"emnist: {TRAIN}: examples/ holds no client"):
        loader.load(tmp_path)


@pytest.mark.parametrize("name", [TRAIN, TEST])
@pytest.mark.parametrize("field", ["pixels", "label"])
def test_client_missing_a_dataset(tmp_path, name, field):
    edit(hand(tmp_path) / name, "f0001_99", **{field: None})
    with pytest.raises(DataError, match=f"emnist: {name}: client f0001_99: no {field} dataset"):
        loader.load(tmp_path)


@pytest.mark.parametrize("name", [TRAIN, TEST])
def test_mismatched_lengths(tmp_path, name):
    edit(hand(tmp_path) / name, "f0001_99", label=np.arange(4, dtype=np.int32))
    with pytest.raises(DataError, match=f"emnist: {name}: client f0001_99: .* pixel images but 4 labels"):
        loader.load(tmp_path)


@pytest.mark.parametrize("shape", [(3, 28, 27), (3, 784), (3, 28, 28, 1)])
def test_pixel_shape(tmp_path, shape):
    edit(hand(tmp_path) / TRAIN, "f0001_99", pixels=np.ones(shape, np.float32))
    with pytest.raises(DataError, match=rf"emnist: {TRAIN}: client f0001_99: pixels have shape .*"
                                        rf"expected \(n, 28, 28\)"):
        loader.load(tmp_path)


def test_train_client_absent_from_the_test_file(tmp_path):
    hand(tmp_path)
    with h5py.File(tmp_path / TEST, "a") as f:
        del f["examples/f0002_01"]
    with pytest.raises(DataError, match=f"emnist: {TEST}: client f0002_01: not in the file"):
        loader.load(tmp_path)


@pytest.mark.parametrize("name", [TRAIN, TEST])
@pytest.mark.parametrize("bad", [1.5, -0.25, float("nan")])
def test_pixels_outside_unit_interval(tmp_path, name, bad):
    pixels = np.array([image(0.5), image(bad, spot=1.0)], np.float32)
    edit(hand(tmp_path) / name, "f0000_10", pixels=pixels)
    with pytest.raises(DataError, match=rf"emnist: {name}: client f0000_10: pixel value {bad} outside \[0, 1\]"):
        loader.load(tmp_path)


@pytest.mark.parametrize("bad", [10, -1])
def test_labels_outside_digits(tmp_path, bad):
    edit(hand(tmp_path) / TEST, "f0000_10", label=np.array([4, bad], np.int32))
    with pytest.raises(DataError, match=f"emnist: {TEST}: client f0000_10: label {bad} outside 0..9"):
        loader.load(tmp_path)
