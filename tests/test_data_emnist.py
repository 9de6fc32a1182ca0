"""Federated EMNIST, digits only (bietti2022 §1.3): the stand-in (the real HDF5 layout, deterministic bytes, a style
per writer; its source images from the pipeline's prepared MNIST when real, else the stroke templates, and the
provenance that says which), the loader on it (the array contract of the training code, the first-N-users cut) and
on a hand-made tiny set in the real layout, and the loader's errors, each naming its file."""

from __future__ import annotations

import math
import os
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
# the stand-in's source images: the prepared MNIST when it is real
# --------------------------------------------------------------------------------------------------

PER_DIGIT = {"train": 60, "test": 20}  # a tiny MNIST: enough distinct images of every digit for any writer


def fake_mnist(path: Path, standin: bool = False, per_digit: dict = PER_DIGIT) -> Path:
    """A prepared MNIST (data/prepared/mnist.npz format) whose every image names itself: pixel (0, 0) = its split
    (1 train, 2 test), (0, 1) and (0, 2) = its index (base 200), row 27 = its digit's ink."""
    arrays, files = {}, []
    for code, split in ((1, "train"), (2, "test")):
        n = 10 * per_digit[split]
        y = np.arange(n) % 10
        x = np.zeros((n, 28, 28), np.uint8)
        x[:, 0, 0], x[:, 0, 1], x[:, 0, 2] = code, np.arange(n) // 200, np.arange(n) % 200
        x[:, 27, :] = (y * 20)[:, None]
        arrays[f"x_{split}"], arrays[f"y_{split}"] = x, y.astype(np.int64)
        files.append({"name": f"{split}.gz", "sha256": f"{code}" * 64, "bytes": 1})
    meta = {"dataset": "mnist", "source": "standin" if standin else "mirror", "standin": standin,
            "location": "dpfl.data.standins.mnist" if standin else "/mirror/mnist", "files": files}
    save_prepared(path, arrays, meta)
    return path


def identities(pixels: np.ndarray) -> list[tuple[int, int, int]]:
    """(split code, index, digit) of each image of an identity-styled writer (ink = round(255·(1 − pixel)))."""
    ink = np.rint(255 * (1 - pixels.astype(np.float64))).astype(int)
    return [(int(a[0, 0]), int(a[0, 1]) * 200 + int(a[0, 2]), int(a[27, 0]) // 20) for a in ink]


def test_standin_draws_its_images_from_the_prepared_mnist(tmp_path, monkeypatch):
    """With a real prepared MNIST: every train image is an MNIST train image of its label, every test image an MNIST
    test image of its label, distinct within a writer (images may repeat across writers); the writers, sizes and
    labels are those of the template path (the same draws before the images)."""
    mnist = fake_mnist(tmp_path / "mnist.npz")
    monkeypatch.setattr(standin, "apply_style", lambda ink, style: 1 - ink.astype(np.float32) / 255)  # identity
    out = tmp_path / "m"
    out.mkdir()
    made = standin.generate(out, standin_seed("emnist"), n_writers=30, mnist=mnist)
    assert made["images"] == "mnist" and made["mnist"]["source"] == "mirror" and made["mnist"]["standin"] is False
    assert made["mnist"]["files"][0]["sha256"] == "1" * 64 and "real MNIST" in made["images_why"]
    assert "could not be obtained" in made["stands_in_for"]
    train, test = read_h5(out / TRAIN), read_h5(out / TEST)
    seen = []
    for cid in train:
        for code, (pixels, labels) in ((1, train[cid]), (2, test[cid])):
            ids = identities(pixels)
            assert all(c == code for c, _, _ in ids)  # the writer's split from MNIST's same split
            assert [d for _, _, d in ids] == labels.tolist()  # an image of its label
            assert len({i for _, i, _ in ids}) == len(ids)  # without replacement within the writer
            seen += [(c, i) for c, i, _ in ids]
    assert len(set(seen)) < len(seen)  # 30 writers need more than the 600 + 200 images: reuse across writers
    templated = tmp_path / "t"
    templated.mkdir()
    standin.generate(templated, standin_seed("emnist"), n_writers=30)
    for name in (TRAIN, TEST):
        a, b = read_h5(out / name), read_h5(templated / name)
        assert list(a) == list(b) and all(np.array_equal(a[c][1], b[c][1]) for c in a)  # same writers and labels
        assert not all(np.array_equal(a[c][0], b[c][0]) for c in a)


def test_standin_falls_back_to_the_templates_and_says_why(tmp_path):
    """No MNIST input, or a prepared MNIST that is itself the MNIST stand-in: the templates, with VERSION 1's bytes
    (the same as without an input) and the reason in the provenance; a real MNIST gives other, deterministic bytes."""
    runs = {}
    for name, mnist in (("none", None), ("standin", fake_mnist(tmp_path / "s.npz", standin=True)),
                        ("real", fake_mnist(tmp_path / "r.npz")), ("real2", tmp_path / "r.npz")):
        out = tmp_path / name
        out.mkdir()
        runs[name] = (standin.generate(out, standin_seed("emnist"), n_writers=4, mnist=mnist),
                      [sha256_file(out / f) for f in (TRAIN, TEST)])
    assert runs["none"][0]["images"] == "templates" and "no MNIST input" in runs["none"][0]["images_why"]
    assert "mnist" not in runs["none"][0]
    made = runs["standin"][0]
    assert made["images"] == "templates" and "itself a stand-in" in made["images_why"] and made["mnist"]["standin"]
    assert runs["standin"][1] == runs["none"][1]
    assert runs["real"][0]["images"] == "mnist" and runs["real"][1] != runs["none"][1]
    assert runs["real2"][1] == runs["real"][1]


def test_standin_needs_enough_mnist_images_of_a_digit(tmp_path):
    mnist = fake_mnist(tmp_path / "few.npz", per_digit={"train": 5, "test": 20})
    with pytest.raises(DataError, match=r"train split has 5 images of digit \d; writer 0 needs \d+ distinct"):
        standin.generate(tmp_path, standin_seed("emnist"), n_writers=2, mnist=mnist)


def test_acquire_passes_the_prepared_mnist_and_records_the_source(tmp_path):
    """The download stage hands the stand-in its declared input (dpfl.data.standins.INPUTS); SOURCE.json and the
    prepared meta say the images came from MNIST, from where, and why EMNIST is a stand-in."""
    from dpfl.data.standins import INPUTS, standin_inputs

    assert INPUTS["emnist"] == ("mnist",) and standin_inputs("emnist") == ("mnist",) and standin_inputs(None) == ()
    cat = config.load_datasets(Path(__file__).resolve().parent.parent)
    entry = cat["emnist"]
    mnist = fake_mnist(tmp_path / "mnist.npz")
    raw = tmp_path / "raw" / "emnist"
    record = acquire("emnist", entry, raw, "standin", standin_inputs={"mnist": str(mnist)})
    gen = record["generator"]
    assert record["standin"] is True and gen["version"] == standin.VERSION == 2
    assert gen["images"] == "mnist" and gen["mnist"]["path"] == str(mnist) and gen["stands_in_for"]
    _, meta = prepare("emnist", raw)
    assert meta["generator"]["images"] == "mnist" and meta["generator"]["mnist"]["location"] == "/mirror/mnist"
    assert acquire("emnist", entry, raw, "standin")["generator"]["images"] == "templates"  # no input: templates


MIRROR = Path(os.environ.get("DPFL_DATA_MIRROR") or Path(__file__).resolve().parent.parent.parent / "shared"
              / "datasets")


@pytest.mark.skipif(not (MIRROR / "mnist").is_dir(), reason=f"no dataset mirror at {MIRROR}")
def test_real_mnist_makes_the_standin_closer_to_real_emnist(tmp_path):
    """The point of the MNIST source (spec §1.3): real digits under the same writers, labels and styles are far easier
    than the stroke templates. A pooled 10-class ridge least-squares fit on 100 writers: ≈ 0.56 test accuracy with
    MNIST against ≈ 0.46 with the templates (paired: the same labels and styles)."""
    cat = config.load_datasets(Path(__file__).resolve().parent.parent)
    offline = {**cat["mnist"], "kaggle": None, "files": [{**f, "urls": []} for f in cat["mnist"]["files"]]}
    acquire("mnist", offline, tmp_path / "raw" / "mnist", "real", str(MIRROR))
    arrays, meta = prepare("mnist", tmp_path / "raw" / "mnist")
    save_prepared(tmp_path / "mnist.npz", arrays, meta)
    accuracy = {}
    for name, mnist in (("mnist", tmp_path / "mnist.npz"), ("templates", None)):
        out = tmp_path / name
        out.mkdir()
        assert standin.generate(out, standin_seed("emnist"), n_writers=100, mnist=mnist)["images"] == name
        (x, y), (xt, yt) = [[np.concatenate(v) for v in zip(*read_h5(out / f).values())] for f in (TRAIN, TEST)]
        design = lambda p: np.c_[p.reshape(len(p), -1).astype(np.float64), np.ones(len(p))]  # noqa: E731
        a = design(x)
        w = np.linalg.solve(a.T @ a + np.eye(a.shape[1]), a.T @ np.eye(10)[y])
        accuracy[name] = float(((design(xt) @ w).argmax(1) == yt).mean())
    assert accuracy["mnist"] > accuracy["templates"] + 0.05, accuracy


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
    assert standin.generate.__defaults__ == (1000, None)  # 1000 writers; no MNIST input: the templates


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
