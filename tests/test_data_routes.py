"""A dataset's other real routes (dpfl.data.routes): TFF's SQLite databases (.sqlite.lzma, tf.train.Example protos
read without TensorFlow) converted to the legacy HDF5 files, the extracted HDF5 files from the mirror, both checked by
their content, and another copy of a UCI table accepted by its content. Each route gives the loaders the same
arrays as the archive route on the same tiny data."""

from __future__ import annotations

import json
import lzma
import sqlite3
import struct
from pathlib import Path

import numpy as np
import pytest
from test_data_emnist import HAND_TEST, HAND_TRAIN, hand, image
from test_data_sources import entry, sha
from test_data_stackoverflow import TAGS, WORDS, small_limits, tiny  # noqa: F401  (small_limits: a fixture)
from test_data_stackoverflow import TEST as SO_TEST
from test_data_stackoverflow import TRAIN as SO_TRAIN

from dpfl import config
from dpfl.data import checks, source_record as records
from dpfl.data.common import DataError
from dpfl.data.hashes import HASH_CACHE
from dpfl.data.loaders import emnist, stackoverflow, tff_sqlite
from dpfl.data.sources import acquire

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _offline(no_credentials):
    """No Kaggle credentials and no mirror from the environment (tests/conftest.py)."""


# --------------------------------------------------------------------------------------------------
# a small protocol-buffer writer (independent of the reader under test)
# --------------------------------------------------------------------------------------------------


def varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


def field(number: int, payload: bytes) -> bytes:
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def feature(kind: str, values, packed: bool = True) -> bytes:
    if kind == "bytes":
        inner = b"".join(field(1, v) for v in values)
        return field(1, inner)
    if kind == "float":
        inner = (field(1, struct.pack(f"<{len(values)}f", *values)) if packed
                 else b"".join(varint(1 << 3 | 5) + struct.pack("<f", v) for v in values))
        return field(2, inner)
    inner = (field(1, b"".join(varint(v) for v in values)) if packed
             else b"".join(varint(1 << 3 | 0) + varint(v) for v in values))
    return field(3, inner)


def example(features: dict) -> bytes:
    entries = b"".join(field(1, field(1, k.encode()) + field(2, v)) for k, v in features.items())
    return field(1, entries)


def database(path: Path, splits: dict) -> Path:
    """path (.sqlite.lzma) in TFF's schema from {split: {client: [proto]}}, the clients' rows interleaved; a client
    without examples is listed in client_metadata only."""
    rows = interleaved(splits)
    db = path.with_name("build.sqlite")
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE examples (split_name TEXT NOT NULL, client_id TEXT NOT NULL, "
                "serialized_example_proto BLOB NOT NULL)")
    con.execute("CREATE TABLE client_metadata (client_id TEXT NOT NULL, split_name TEXT NOT NULL, "
                "num_examples INTEGER NOT NULL)")
    con.executemany("INSERT INTO examples VALUES (?, ?, ?)", rows)
    con.executemany("INSERT INTO client_metadata VALUES (?, ?, ?)",
                    [(c, s, len(p)) for s, clients in splits.items() for c, p in clients.items()])
    con.commit()
    con.close()
    path.write_bytes(lzma.compress(db.read_bytes()))
    db.unlink()
    return path


def interleaved(splits: dict) -> list:
    """Rows of several clients interleaved (a client's examples stay in order), so the conversion must group them."""
    queues = [[(split, cid, proto) for proto in protos] for split, clients in splits.items()
              for cid, protos in reversed(list(clients.items()))]
    rows = []
    while any(queues):
        for q in queues:
            if q:
                rows.append(q.pop(0))
    return rows


# --------------------------------------------------------------------------------------------------
# the wire-format reader
# --------------------------------------------------------------------------------------------------


def test_wire_reader_packed_and_unpacked():
    proto = example({"b": feature("bytes", [b"x y", b""]), "f": feature("float", [0.5, -1.25], packed=False),
                     "fp": feature("float", [0.1, 2.0]), "i": feature("int", [3, -7, 1 << 40], packed=False),
                     "ip": feature("int", [-1, 0, 300])})
    parsed = tff_sqlite.parse_example(proto)
    assert parsed["b"] == ("bytes", [b"x y", b""])
    assert parsed["f"] == ("float", [0.5, -1.25])
    assert parsed["fp"] == ("float", [np.float32(0.1).item(), 2.0])
    assert parsed["i"] == ("int", [3, -7, 1 << 40])
    assert parsed["ip"] == ("int", [-1, 0, 300])
    with pytest.raises(tff_sqlite.WireError):
        tff_sqlite.parse_example(proto[:-3])


# --------------------------------------------------------------------------------------------------
# EMNIST: the database route and the extracted-files route give the archive route's arrays
# --------------------------------------------------------------------------------------------------


def emnist_protos(clients: dict) -> dict:
    return {cid: [example({"label": feature("int", [y]), "pixels": feature("float", image(v).ravel().tolist())})
                  for v, y in zip(values, labels)] for cid, (values, labels) in clients.items()}


def counts(clients: dict) -> dict:
    return {"clients": len(clients), "examples": sum(len(labels) for _, labels in clients.values())}


def emnist_entry(tiny_counts: bool = True) -> dict:
    """The real catalog's emnist entry without its URLs (no test touches the network); with tiny_counts, its content
    checks expect the hand-made set's counts."""
    e = config.load_datasets(ROOT)["emnist"]
    for f in [*e["files"], *(f for route in e["routes"] for f in route["files"])]:
        f["urls"] = []
    if tiny_counts:
        train, test = counts(HAND_TRAIN), counts(HAND_TEST)
        h5, db = e["routes"][0]["files"], e["routes"][1]["files"][0]
        h5[0]["expect"].update(train)
        h5[1]["expect"].update(test)
        db["expect"]["splits"] = {"digits_only_train": train, "digits_only_test": test}
    return e


def assert_same(a: dict, b: dict) -> None:
    assert sorted(a) == sorted(b)
    for k in a:
        assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape, k
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)


def test_emnist_sqlite_route_gives_the_h5_arrays(tmp_path):
    (tmp_path / "h5").mkdir()
    want, _ = emnist.load(hand(tmp_path / "h5"))
    mirror = tmp_path / "mirror"
    (mirror / "emnist").mkdir(parents=True)
    database(mirror / "emnist" / "emnist_all.sqlite.lzma",
             {"digits_only_train": emnist_protos(HAND_TRAIN), "digits_only_test": emnist_protos(HAND_TEST),
              "all_train": emnist_protos({"x": ([0.5], [40])})})
    raw = tmp_path / "raw"
    record = acquire("emnist", emnist_entry(), raw, "real", str(mirror))
    assert record["route"] == "tff_sqlite" and record["source"] == "mirror"
    assert sorted(p.name for p in raw.iterdir()) == [HASH_CACHE, "SOURCE.json", emnist.TEST_FILE, emnist.TRAIN_FILE]
    assert "content check 'tff_sqlite'" in record["files"][0]["verified"]
    assert record["archives"][0]["name"] == "emnist_all.sqlite.lzma"
    got, _ = emnist.load(raw)
    assert_same(got, want)
    assert records.catalogued_real(emnist_entry(), records.read_record(raw))
    assert not records.catalogued_real(emnist_entry(), {**records.read_record(raw), "route": "archive"})


def test_emnist_sqlite_route_enforces_the_real_counts(tmp_path):
    mirror = tmp_path / "mirror"
    (mirror / "emnist").mkdir(parents=True)
    database(mirror / "emnist" / "emnist_all.sqlite.lzma",
             {"digits_only_train": emnist_protos(HAND_TRAIN), "digits_only_test": emnist_protos(HAND_TEST)})
    e = emnist_entry(tiny_counts=False)
    with pytest.raises(DataError, match=r"split 'digits_only_train' has \{'clients': 3, 'examples': 6\}, expected "
                                        r"\{'clients': 3383, 'examples': 341873\}"):
        acquire("emnist", e, tmp_path / "raw", "real", str(mirror))
    assert not (tmp_path / "raw").exists()


def test_emnist_extracted_h5_files_in_the_mirror(tmp_path):
    mirror = tmp_path / "mirror"
    (mirror / "emnist").mkdir(parents=True)
    hand(mirror / "emnist")
    want, _ = emnist.load(mirror / "emnist")
    raw = tmp_path / "raw"
    record = acquire("emnist", emnist_entry(), raw, "real", str(mirror))
    assert record["route"] == "h5_members"
    assert all(f["verified"].startswith("content check 'tff_h5': ") for f in record["files"])
    assert "3 clients, 6 examples" in record["files"][0]["verified"]
    assert_same(emnist.load(raw)[0], want)
    assert records.catalogued_real(emnist_entry(), records.read_record(raw))
    # the real catalog's counts are enforced
    with pytest.raises(DataError, match="3 clients with 6 examples, expected 3383 clients with 341873 examples"):
        acquire("emnist", emnist_entry(tiny_counts=False), tmp_path / "raw2", "real", str(mirror))


def test_extracted_h5_files_in_a_folder_of_your_own_come_first(tmp_path):
    """config dataset_files: a user's folder (e.g. a Keras cache) is tried before the mirror, with every route, and
    checked by content like a mirror copy; its path is the source key until the data is there."""
    own = tmp_path / "keras" / "datasets"
    own.mkdir(parents=True)
    hand(own)
    (own / "unrelated.txt").write_text("other datasets live here too")
    mirror = tmp_path / "mirror"
    (mirror / "emnist").mkdir(parents=True)
    raw = tmp_path / "raw"
    record = acquire("emnist", emnist_entry(), raw, "real", str(mirror), folder=str(own))
    assert (record["source"], record["location"], record["route"]) == ("folder", str(own), "h5_members")
    assert record["source_key"] == f"folder {own}" and record["fallback_reasons"] == [
        f"folder {own}: emnist: fed_emnist_digitsonly.tar.bz2: not in the dataset_files folder "
        f"({own / 'fed_emnist_digitsonly.tar.bz2'})"]
    assert all(f["verified"].startswith("content check 'tff_h5': ") for f in record["files"])
    assert_same(emnist.load(raw)[0], emnist.load(own)[0])
    assert records.catalogued_real(emnist_entry(), records.read_record(raw))
    # a folder without the files: the mirror is next, and the folder's reasons are kept
    (own / emnist.TRAIN_FILE).unlink()
    hand(mirror / "emnist")
    record = acquire("emnist", emnist_entry(), tmp_path / "raw2", "real", str(mirror), folder=str(own))
    assert record["source"] == "mirror" and sum(r.startswith(f"folder {own}") for r in record["fallback_reasons"]) == 3


def test_h5_content_check_refuses_a_wrong_layout(tmp_path):
    hand(tmp_path)
    with pytest.raises(DataError, match="client f0000_10: no creation_date dataset"):
        checks.tff_h5("stackoverflow", tmp_path / emnist.TRAIN_FILE, "stackoverflow", 3, 6)


def test_corrupt_database(tmp_path):
    bad = tmp_path / "x.sqlite.lzma"
    bad.write_bytes(b"not lzma")
    with pytest.raises(DataError, match="not a readable LZMA file"):
        checks.tff_sqlite("emnist", bad, {})
    other = tmp_path / "y.sqlite.lzma"
    db = tmp_path / "y.sqlite"
    sqlite3.connect(db).execute("CREATE TABLE examples (a)").connection.commit()
    other.write_bytes(lzma.compress(db.read_bytes()))
    db.unlink()
    with pytest.raises(DataError, match="no client_metadata table"):
        checks.tff_sqlite("emnist", other, {})


# --------------------------------------------------------------------------------------------------
# Stack Overflow: the database route gives the archive route's arrays
# --------------------------------------------------------------------------------------------------


def so_protos(clients: dict) -> dict:
    return {cid: [example({"creation_date": feature("bytes", [b"2018-02-01 10:00:00.000 UTC"]),
                           "score": feature("int", [i]), "tags": feature("bytes", [tags.encode()]),
                           "title": feature("bytes", [title.encode()]), "tokens": feature("bytes", [tokens.encode()]),
                           "type": feature("bytes", [b"question"])})
                  for i, (title, tokens, tags) in enumerate(docs)] for cid, docs in clients.items()}


def test_stackoverflow_sqlite_route_gives_the_h5_arrays(tmp_path, small_limits):  # noqa: F811
    (tmp_path / "h5").mkdir()
    want, _ = stackoverflow.load(tiny(tmp_path / "h5"))
    mirror = tmp_path / "mirror" / "stackoverflow"
    mirror.mkdir(parents=True)
    database(mirror / "stackoverflow.sqlite.lzma",
             {"train": so_protos(SO_TRAIN), "test": so_protos(SO_TEST), "heldout": so_protos({"z": []})})
    (mirror / "stackoverflow.word_count").write_text(WORDS)
    (mirror / "stackoverflow.tag_count").write_text(json.dumps(TAGS))
    so_counts = {s: {"clients": len(c), "examples": sum(map(len, c.values()))}
                 for s, c in (("train", SO_TRAIN), ("test", SO_TEST))}
    db = {"name": "stackoverflow.sqlite.lzma", "check": "tff_sqlite", "expect": {"splits": so_counts}, "urls": [],
          "convert": {"format": "tff_sqlite", "layout": "stackoverflow",
                      "members": {"stackoverflow_train.h5": "train", "stackoverflow_test.h5": "test"}}}
    plain = [{"name": n, "sha256": sha((mirror / n).read_bytes()), "urls": []}
             for n in ("stackoverflow.word_count", "stackoverflow.tag_count")]
    e = entry([{"name": "stackoverflow.tar.bz2", "sha256": "0" * 64, "urls": []}], mirror="stackoverflow",
              routes=[{"name": "tff_sqlite", "files": [db, *plain]}])
    raw = tmp_path / "raw"
    record = acquire("stackoverflow", e, raw, "real", str(tmp_path / "mirror"))
    assert record["route"] == "tff_sqlite"
    got, _ = stackoverflow.load(raw)
    assert_same(got, want)


# --------------------------------------------------------------------------------------------------
# obesity: another copy of the UCI table, accepted by its content
# --------------------------------------------------------------------------------------------------

OBESITY_HEADER = ",".join(checks.OBESITY_COLUMNS)
OBESITY_ROW = "Female,21,1.62,64,yes,no,2,3,Sometimes,no,2,no,0,1,no,Public_Transportation,{}"


def obesity_csv(classes: list[str], newline: str = "\r\n") -> bytes:
    return newline.join([OBESITY_HEADER, *(OBESITY_ROW.format(c) for c in classes)]).encode() + newline.encode()


def test_obesity_copy_with_another_checksum_is_accepted_by_content(tmp_path):
    name = "ObesityDataSet_raw_and_data_sinthetic.csv"
    mirror = tmp_path / "mirror" / "obesity"
    mirror.mkdir(parents=True)
    classes = ["Normal_Weight", "Obesity_Type_I", "Normal_Weight"]
    (mirror / name).write_bytes(obesity_csv(classes, "\n"))  # other line endings: another sha256
    real = config.load_datasets(ROOT)["obesity"]["files"][0]
    assert real["check"] == "obesity" and real["expect"] == {"rows": 2111}
    f = {"name": name, "sha256": sha(obesity_csv(classes)), "check": "obesity", "urls": [],
         "expect": {"rows": 3, "classes": {"Normal_Weight": 2, "Obesity_Type_I": 1}}}
    record = acquire("obesity", entry([f], mirror="obesity"), tmp_path / "raw", "real", str(tmp_path / "mirror"))
    verified = record["files"][0]["verified"]
    assert verified.startswith("content check 'obesity': 3 rows, 17 columns")
    assert "sha256 not a published one" in verified
    assert records.catalogued_real(entry([f], mirror="obesity"), records.read_record(tmp_path / "raw"))
    # wrong class counts: refused, and the message says the checksum did not match either
    f["expect"]["classes"] = {"Normal_Weight": 3}
    with pytest.raises(DataError, match="expected 3 rows with .*its sha256 .* is not a published one either"):
        acquire("obesity", entry([f], mirror="obesity"), tmp_path / "raw2", "real", str(tmp_path / "mirror"))


def test_obesity_check_defaults_are_the_real_counts(tmp_path):
    assert sum(checks.OBESITY_CLASSES.values()) == 2111 and len(checks.OBESITY_CLASSES) == 7
    path = tmp_path / "o.csv"
    path.write_bytes(obesity_csv(["Normal_Weight"]))
    with pytest.raises(DataError, match="1 rows .* expected 2111 rows"):
        checks.obesity("obesity", path)
    path.write_bytes(obesity_csv(["Normal_Weight"]).replace(b"MTRANS", b"Transport"))
    with pytest.raises(DataError, match="columns"):
        checks.obesity("obesity", path)
