"""Stack Overflow (bietti2022 §1.2): the loader on a hand-made tiny set in the real layout (vocabularies, averaging
with the OOV mass dropped, tag filtering, the first-N-users and first-M-train-examples cuts, the documented train
order), its errors, and the stand-in (real layout, deterministic bytes, the loader's contract on it)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import h5py
import numpy as np
import pytest

from dpfl import config
from dpfl.data import load_prepared
from dpfl.data.common import DataError, save_prepared, sha256_file, standin_seed
from dpfl.data.loaders import stackoverflow as loader
from dpfl.data.prepare import prepare
from dpfl.data.sources import acquire
from dpfl.data.standins import stackoverflow as standin

FIELDS = ("creation_date", "score", "tags", "title", "tokens", "type")
RAW_FILES = ["stackoverflow.tag_count", "stackoverflow.word_count", "stackoverflow_held_out.h5",
             "stackoverflow_test.h5", "stackoverflow_train.h5"]


# --------------------------------------------------------------------------------------------------
# a tiny real-layout set, written here with h5py (independently of the stand-in)
# --------------------------------------------------------------------------------------------------

WORDS = "the 100\ncode 80\njava 50\nerror 40\nrare 3\n"  # with WORD_VOCAB = 4, "rare" is past the cut
TAGS = {"python": 10, "java": 30, "c": 10, "go": 5, "rust": 10}  # TAG_VOCAB = 3: java, then c, python (ties by name)
# client -> [(title, tokens, tags)]
TEST = {
    "b2": [("error", "rare error", "c|python|c")],
    "d4": [("the", "the", "java")],  # fourth in sorted order: cut by USERS = 3
    "a1": [("the code", "java zz the", "java|rust"), ("", "", "")],
    "c3": [("x", "y", "go")],
}
TRAIN = {
    "e5": [("code", "code", "java")],  # train only
    "c3": [("the", "the the", "")],
    "a1": [("code", "code code java", "java"), ("the", "error", "python"), ("java", "", "c")],  # 3rd cut (MAX_TRAIN 2)
}


def write_h5(path: Path, clients: dict, kind: str = "str", skip: tuple = ()) -> None:
    """examples/<client>/{six datasets}; strings as vlen str, vlen bytes or fixed-length bytes."""
    dtype = {"str": h5py.string_dtype("utf-8"), "bytes": h5py.string_dtype("ascii"), "fixed": None}[kind]
    with h5py.File(path, "w") as f:
        for cid, docs in clients.items():
            g = f.create_group(f"examples/{cid}")
            columns = {"title": [d[0] for d in docs], "tokens": [d[1] for d in docs], "tags": [d[2] for d in docs],
                       "creation_date": ["2018-02-01 10:00:00.000 UTC"] * len(docs), "type": ["question"] * len(docs)}
            for name, values in columns.items():
                if name in skip:
                    continue
                if dtype is None:
                    g.create_dataset(name, data=np.array([v.encode() for v in values], dtype="S"))
                else:
                    g.create_dataset(name, data=np.array(values, dtype=object), dtype=dtype)
            g.create_dataset("score", data=np.arange(len(docs), dtype=np.int64))


def tiny(folder: Path, test=TEST, train=TRAIN) -> Path:
    write_h5(folder / "stackoverflow_test.h5", test, "str")
    write_h5(folder / "stackoverflow_train.h5", train, "bytes")
    (folder / "stackoverflow.word_count").write_text(WORDS)
    (folder / "stackoverflow.tag_count").write_text(json.dumps(TAGS))
    return folder


@pytest.fixture
def small_limits(monkeypatch):
    monkeypatch.setattr(loader, "WORD_VOCAB", 4)
    monkeypatch.setattr(loader, "TAG_VOCAB", 3)
    monkeypatch.setattr(loader, "USERS", 3)
    monkeypatch.setattr(loader, "MAX_TRAIN", 2)


def dense(arrays: dict, split: str, width: int) -> np.ndarray:
    indptr, indices, data = (arrays[f"x_{split}_{k}"] for k in ("indptr", "indices", "data"))
    out = np.zeros((len(indptr) - 1, width))
    for r in range(len(indptr) - 1):
        out[r, indices[indptr[r]:indptr[r + 1]]] = data[indptr[r]:indptr[r + 1]]
    return out


def expected_order(client_id: str, n: int) -> np.ndarray:
    """The documented train order, computed here from its description."""
    digest = hashlib.sha256(f"dpfl/stackoverflow/train-order/{client_id}".encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "big")).permutation(n)


def test_tiny_set_by_hand(tmp_path, small_limits):
    arrays, info = loader.load(tiny(tmp_path))
    assert list(arrays["words"]) == ["the", "code", "java", "error"]
    assert list(arrays["tags"]) == ["java", "c", "python"]
    assert list(arrays["client_ids"]) == ["a1", "b2", "c3"]  # sorted, d4 cut
    for key in ("client_ids", "words", "tags"):
        assert arrays[key].dtype.kind == "U"

    # test: all examples in file order. a1: the the code java + 1 OOV of 5; an empty document; b2: error error + rare
    # (OOV past the cut) of 3; c3: x y, both OOV
    x = dense(arrays, "test", 4)
    np.testing.assert_allclose(x, [[2 / 5, 1 / 5, 1 / 5, 0], [0, 0, 0, 0], [0, 0, 0, 2 / 3], [0, 0, 0, 0]], rtol=1e-6)
    np.testing.assert_array_equal(arrays["y_test"], [[1, 0, 0], [0, 0, 0], [0, 1, 1], [0, 0, 0]])  # rust, go dropped
    np.testing.assert_array_equal(arrays["test_offsets"], [0, 2, 3, 4])

    # train: a1's first 2 examples in the documented order; b2 has none; c3: the x3
    a1 = np.array([[0, 3 / 4, 1 / 4, 0], [1 / 2, 0, 0, 1 / 2]])[expected_order("a1", 2)]
    a1_y = np.array([[1, 0, 0], [0, 0, 1]])[expected_order("a1", 2)]
    np.testing.assert_allclose(dense(arrays, "train", 4), np.r_[a1, [[1, 0, 0, 0]]], rtol=1e-6)
    np.testing.assert_array_equal(arrays["y_train"], np.r_[a1_y, [[0, 0, 0]]])
    np.testing.assert_array_equal(arrays["train_offsets"], [0, 2, 2, 3])

    assert info["counts"] == {"users": 3, "train": 3, "test": 4}
    assert info["users_without_train"] == 1 and info["users_without_train_ids"] == ["b2"]
    assert info["users_with_train_cut"] == 1
    assert info["nnz"] == {"train": 5, "test": 4}
    assert info["documents_without_tag"] == {"train": 1, "test": 2}
    assert info["documents_without_tokens"] == {"train": 0, "test": 1}
    assert info["mean_tokens_per_document"] == {"train": 3.0, "test": 2.5}
    assert info["oov_token_share"]["test"] == pytest.approx(4 / 10, abs=1e-5)
    assert info["oov_mass_share"]["test"] == pytest.approx((1 / 5 + 1 / 3 + 1) / 3, abs=1e-5)
    assert info["oov_mass_share"]["train"] == 0


def test_tiny_set_dtypes_and_fixed_length_strings(tmp_path, small_limits):
    tiny(tmp_path)
    write_h5(tmp_path / "stackoverflow_test.h5", TEST, "fixed")
    arrays, _ = loader.load(tmp_path)
    assert arrays["x_test_data"].dtype == np.float32 and arrays["x_test_indices"].dtype == np.int32
    assert arrays["x_test_indptr"].dtype == np.int64 and arrays["test_offsets"].dtype == np.int64
    assert arrays["y_test"].dtype == np.uint8 and arrays["y_test"].shape == (4, 3)
    np.testing.assert_allclose(dense(arrays, "test", 4)[0], [2 / 5, 1 / 5, 1 / 5, 0], rtol=1e-6)


def test_fewer_test_clients_than_users(tmp_path, monkeypatch, small_limits):
    monkeypatch.setattr(loader, "USERS", 10)
    monkeypatch.setattr(loader, "MAX_TRAIN", 500)
    arrays, info = loader.load(tiny(tmp_path))
    assert list(arrays["client_ids"]) == ["a1", "b2", "c3", "d4"]
    np.testing.assert_array_equal(arrays["train_offsets"], [0, 3, 3, 4, 4])
    assert info["users_without_train_ids"] == ["b2", "d4"] and info["users_with_train_cut"] == 0


def test_real_sizes_are_the_defaults():
    assert (loader.WORD_VOCAB, loader.TAG_VOCAB, loader.USERS, loader.MAX_TRAIN) == (5000, 80, 500, 500)


# --------------------------------------------------------------------------------------------------
# errors
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["stackoverflow_train.h5", "stackoverflow_test.h5", "stackoverflow.word_count",
                                  "stackoverflow.tag_count"])
def test_missing_file(tmp_path, small_limits, name):
    (tiny(tmp_path) / name).unlink()
    with pytest.raises(DataError, match=f"stackoverflow: {name}: file not found"):
        loader.load(tmp_path)


@pytest.mark.parametrize("name", ["stackoverflow_train.h5", "stackoverflow_test.h5"])
def test_corrupt_and_truncated_hdf5(tmp_path, small_limits, name):
    path = tiny(tmp_path) / name
    good = path.read_bytes()
    path.write_bytes(good[: len(good) // 2])
    with pytest.raises(DataError, match=f"stackoverflow: {name}: .*(truncated or corrupt)"):
        loader.load(tmp_path)
    path.write_bytes(b"not an HDF5 file\n" * 50)
    with pytest.raises(DataError, match=f"stackoverflow: {name}: not a readable HDF5 file"):
        loader.load(tmp_path)


@pytest.mark.parametrize("text, problem", [
    ("the 100\ncode\njava 50\nerror 40\n", "line 2 is not a 'word count' pair"),
    ("the 100\ncode many\njava 50\nerror 40\n", "line 2 is not a 'word count' pair"),
    ('{"the": 100}\n', "line 1 is not a 'word count' pair"),
    ("the 100\ncode 80\n", "2 words, expected at least 4"),
    ("the 100\ncode 80\nthe 50\nerror 40\n", "word 'the' listed twice"),
])
def test_bad_word_count(tmp_path, small_limits, text, problem):
    (tiny(tmp_path) / "stackoverflow.word_count").write_text(text)
    with pytest.raises(DataError, match=f"stackoverflow: stackoverflow.word_count: {problem}"):
        loader.load(tmp_path)


@pytest.mark.parametrize("text, problem", [
    ('["java", "c"]', "a JSON list, expected an object"),
    ('{"java": 3, "c": ', "not a JSON file"),
    ('java 3\nc 2\n', "not a JSON file"),
    ('{"java": 3, "c": "many", "go": 1}', "tag 'c' has count 'many'"),
    ('{"java": 3, "c": 2}', "2 tags, expected at least 3"),
])
def test_bad_tag_count(tmp_path, small_limits, text, problem):
    (tiny(tmp_path) / "stackoverflow.tag_count").write_text(text)
    with pytest.raises(DataError, match=f"stackoverflow: stackoverflow.tag_count: {problem}"):
        loader.load(tmp_path)


def test_no_examples_group(tmp_path, small_limits):
    tiny(tmp_path)
    with h5py.File(tmp_path / "stackoverflow_train.h5", "w") as f:
        f.create_group("clients/a1")
    with pytest.raises(DataError, match="stackoverflow: stackoverflow_train.h5: no 'examples' group"):
        loader.load(tmp_path)


@pytest.mark.parametrize("field", ["tokens", "tags", "title"])
def test_client_missing_a_dataset(tmp_path, small_limits, field):
    tiny(tmp_path)
    write_h5(tmp_path / "stackoverflow_test.h5", TEST, skip=(field,))
    with pytest.raises(DataError, match=f"stackoverflow: stackoverflow_test.h5: client a1: no {field} dataset"):
        loader.load(tmp_path)


def test_client_with_mismatched_lengths(tmp_path, small_limits):
    tiny(tmp_path)
    with h5py.File(tmp_path / "stackoverflow_train.h5", "a") as f:
        del f["examples/c3/title"]
        f["examples/c3"].create_dataset("title", data=np.array(["a", "b"], dtype=object),
                                        dtype=h5py.string_dtype())
    with pytest.raises(DataError, match="stackoverflow: stackoverflow_train.h5: client c3: title, tokens and tags "
                                        "differ in length"):
        loader.load(tmp_path)


# --------------------------------------------------------------------------------------------------
# the stand-in
# --------------------------------------------------------------------------------------------------

SMALL = {"n_users": 6, "n_train_only": 2, "n_held_out": 2}


def generated(folder: Path, seed=None, **sizes) -> Path:
    folder.mkdir()
    standin.generate(folder, seed if seed is not None else standin_seed("stackoverflow"), **(sizes or SMALL))
    return folder


def read_h5(path: Path) -> dict:
    with h5py.File(path, "r") as f:
        return {cid: {k: g[k][()] for k in g} for cid, g in f["examples"].items()}


def test_standin_bytes_are_deterministic(tmp_path):
    a, b = generated(tmp_path / "a"), generated(tmp_path / "b")
    c = generated(tmp_path / "c", np.random.SeedSequence(12345))
    assert sorted(p.name for p in a.iterdir()) == RAW_FILES
    assert [sha256_file(a / n) for n in RAW_FILES] == [sha256_file(b / n) for n in RAW_FILES]
    # another seed: other documents, tags and popularity (the word-count file is the same fixed word list)
    for name in ("stackoverflow_train.h5", "stackoverflow_test.h5", "stackoverflow_held_out.h5",
                 "stackoverflow.tag_count"):
        assert sha256_file(a / name) != sha256_file(c / name), name


def test_standin_has_the_real_layout(tmp_path):
    out = generated(tmp_path / "s")
    lines = (out / "stackoverflow.word_count").read_text().splitlines()
    assert len(lines) == standin.VOCAB + standin.OOV_LISTED
    pairs = [line.split(" ") for line in lines]
    assert all(len(p) == 2 and p[1].isdigit() for p in pairs)
    counts = [int(p[1]) for p in pairs]
    assert counts == sorted(counts, reverse=True) and counts[-1] >= 1
    listed, vocab = {p[0] for p in pairs}, {p[0] for p in pairs[:5000]}
    tag_counts = json.loads((out / "stackoverflow.tag_count").read_text())
    assert len(tag_counts) == standin.N_TAGS > 80 and all(isinstance(v, int) and v > 0 for v in tag_counts.values())

    splits = {s: read_h5(out / f"stackoverflow_{s}.h5") for s in ("train", "test", "held_out")}
    assert len(splits["test"]) == 6 and len(splits["train"]) == 8 and len(splits["held_out"]) == 2
    assert set(splits["test"]) <= set(splits["train"])
    assert all(len(c) == 8 and c.isdigit() and int(c) % 10 == 0 for c in splits["held_out"])
    assert not set(splits["held_out"]) & set(splits["train"])
    oov_listed = oov_unlisted = tokens = 0
    for split, clients in splits.items():
        for cid, data in clients.items():
            assert set(data) == set(FIELDS), cid
            n = len(data["tokens"])
            assert all(data[k].shape == (n,) for k in FIELDS)
            assert data["score"].dtype == np.int64 and data["tokens"].dtype == object
            lo, hi = {"train": (300, 500), "test": (10, 100), "held_out": (5, 20)}[split]
            assert lo <= n <= hi
            dates = [d.decode() for d in data["creation_date"]]
            assert dates == sorted(dates) and all(d.endswith(" UTC") for d in dates)
            if split == "train":
                assert dates[-1] < "2018-01-01"
            elif split == "test":
                assert dates[0] >= "2018-01-01"
            assert set(data["type"]) <= {b"question", b"answer"}
            for title, body, tags in zip(data["title"], data["tokens"], data["tags"]):
                words = title.decode().split(" ") + (body.decode().split(" ") if body else [])
                assert 3 <= len(title.decode().split(" ")) <= 8 or not body
                tokens += len(words)
                oov_listed += sum(w in listed and w not in vocab for w in words)
                oov_unlisted += sum(w not in listed for w in words)
                names = tags.decode().split("|") if tags else []
                assert len(names) == len(set(names)) <= 3 and all(t in tag_counts for t in names)
    assert oov_listed > 0 and oov_unlisted > 0  # OOV words both past the 5000-line cut and absent from the file
    assert 0.12 < (oov_listed + oov_unlisted) / tokens < 0.18


def test_loader_contract_on_the_standin(tmp_path):
    out = generated(tmp_path / "s")
    arrays, info = loader.load(out)
    test_h5, train_h5 = read_h5(out / "stackoverflow_test.h5"), read_h5(out / "stackoverflow_train.h5")
    ids = sorted(test_h5)
    assert list(arrays["client_ids"]) == ids
    words = [line.split(" ")[0] for line in (out / "stackoverflow.word_count").read_text().splitlines()[:5000]]
    assert list(arrays["words"]) == words
    tag_counts = json.loads((out / "stackoverflow.tag_count").read_text())
    top = sorted(tag_counts, key=lambda t: (-tag_counts[t], t))[:80]
    assert list(arrays["tags"]) == top and min(tag_counts[t] for t in top) >= max(
        tag_counts[t] for t in tag_counts if t not in top)

    vocab = set(words)
    for split, source in (("train", train_h5), ("test", test_h5)):
        data, indices, indptr = (arrays[f"x_{split}_{k}"] for k in ("data", "indices", "indptr"))
        y, offsets = arrays[f"y_{split}"], arrays[f"{split}_offsets"]
        rows = len(indptr) - 1
        assert (data.dtype, indices.dtype, indptr.dtype, y.dtype, offsets.dtype) == (
            np.float32, np.int32, np.int64, np.uint8, np.int64)
        assert y.shape == (rows, 80) and data.shape == indices.shape == (indptr[-1],) and indptr[0] == 0
        assert (np.diff(indptr) >= 0).all() and (data > 0).all() and (indices >= 0).all() and (indices < 5000).all()
        for r in range(rows):  # strictly increasing columns within a row
            assert (np.diff(indices[indptr[r]:indptr[r + 1]]) > 0).all()
        assert offsets.shape == (len(ids) + 1,) and offsets[0] == 0 and offsets[-1] == rows
        counts = np.diff(offsets)
        assert counts.tolist() == [len(source[c]["tokens"]) for c in ids]  # all <= 500: no cut at this size
        # row sums: 1 - the OOV share of the document, so exactly 1 iff no OOV token
        sums = np.add.reduceat(data.astype(np.float64), indptr[:-1]) * (np.diff(indptr) > 0)
        oov_share = []
        for i, cid in enumerate(ids):
            docs = list(zip(source[cid]["title"], source[cid]["tokens"]))
            if split == "train":
                docs = [docs[j] for j in expected_order(cid, len(docs))]
            for title, body in docs:
                ws = (title + b" " + body).decode().split()
                oov_share.append(sum(w not in vocab for w in ws) / len(ws))
        oov_share = np.array(oov_share)
        assert (sums <= 1 + 1e-6).all()
        np.testing.assert_allclose(sums, 1 - oov_share, atol=1e-5)
        assert ((np.abs(sums - 1) < 1e-6) == (oov_share == 0)).all()
        assert info["counts"][split] == rows and info["nnz"][split] == len(data)
    assert info["users_without_train"] == 0 and 38 < info["mean_tokens_per_document"]["train"] < 44
    assert 0.12 < info["oov_mass_share"]["test"] < 0.18
    assert info["documents_without_tag"]["train"] >= 0.05 * info["counts"]["train"]


def test_standin_full_size_through_acquire_and_prepare(tmp_path):
    """500 users (~230k documents) generated, verified, loaded and saved; per-user sizes per spec (speed: not timed
    here, ≈3 s on one core)."""
    cat = config.load_datasets(Path(__file__).resolve().parent.parent)
    assert cat["stackoverflow"]["standin"] == "stackoverflow"
    record = acquire("stackoverflow", cat["stackoverflow"], tmp_path / "raw" / "stackoverflow", "standin")
    assert sorted(f["name"] for f in record["files"]) == RAW_FILES
    arrays, meta = prepare("stackoverflow", tmp_path / "raw" / "stackoverflow")
    save_prepared(tmp_path / "stackoverflow.npz", arrays, meta)
    arrays, meta = load_prepared(tmp_path / "stackoverflow.npz")
    assert meta["standin"] is True and meta["counts"]["users"] == 500
    assert arrays["client_ids"].shape == (500,) and arrays["words"].shape == (5000,) and arrays["tags"].shape == (80,)
    train, test = np.diff(arrays["train_offsets"]), np.diff(arrays["test_offsets"])
    assert train.min() >= 300 and train.max() <= 500 and test.min() >= 10 and test.max() <= 100
    assert arrays["y_train"].shape == (int(train.sum()), 80) and len(arrays["x_test_indptr"]) == test.sum() + 1
