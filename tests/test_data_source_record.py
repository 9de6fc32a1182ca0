"""dpfl.data.source_record.source_key, the part of a download's identity (the rule's params) besides the catalog entry
and data_source: verified real data keeps the key it was fetched under whatever the mirror setting is now; a stand-in
(or no data) is keyed by the mirror copy a download would try."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from dpfl import config
from dpfl.data import source_record as record

SCHEMA = Path(__file__).resolve().parent.parent / "workflow" / "schemas" / "datasets.schema.yaml"

CSV = b"age,sex,bmi\r\n19,female,27.9\r\n"
SHA = hashlib.sha256(CSV).hexdigest()


def catalog_entry(**keys) -> dict:
    data = {"description": "t", "license": "t", "mirror": "toy", "standin": "insurance",
            "files": [{"name": "insurance.csv", "sha256": SHA, "urls": []}], **keys}
    return config.validate({"datasets": {"toy": data}}, SCHEMA, "test entry")["datasets"]["toy"]


def write_record(raw, **keys):
    raw.mkdir(parents=True, exist_ok=True)
    rec = {"dataset": "toy", "source": "mirror", "standin": False, "location": "/m/toy", "data_source": "auto",
           "source_key": "mirror /m/toy", "files": [{"name": "insurance.csv", "sha256": SHA, "bytes": len(CSV)}],
           "archives": [], "attempts": [], **keys}
    (raw / "SOURCE.json").write_text(json.dumps(rec))


def test_verified_real_data_keeps_its_key_whatever_the_mirror(tmp_path):
    mirror = tmp_path / "mirror"
    (mirror / "toy").mkdir(parents=True)
    write_record(tmp_path / "raw")
    e = catalog_entry()
    keys = {record.source_key(e, ds, m, tmp_path / "raw") for ds in ("auto", "real") for m in (None, str(mirror))}
    assert keys == {"mirror /m/toy"}
    assert record.source_key(e, "standin", str(mirror), tmp_path / "raw") == "standin"


def test_without_verified_real_data_the_mirror_copy_counts(tmp_path):
    mirror = tmp_path / "mirror"
    (mirror / "toy").mkdir(parents=True)
    e = catalog_entry()
    raw = tmp_path / "raw"
    for state in ("no data", "stand-in", "real data the catalog does not list"):
        if state == "stand-in":
            write_record(raw, source="standin", standin=True, source_key="no mirror copy")
        elif state != "no data":
            write_record(raw, files=[{"name": "insurance.csv", "sha256": "0" * 64, "bytes": 1}])
        assert record.source_key(e, "auto", None, raw) == "no mirror copy", state
        assert record.source_key(e, "auto", str(tmp_path / "typo"), raw) == "no mirror copy", state
        assert record.source_key(e, "auto", str(mirror), raw) == f"mirror {mirror / 'toy'}", state


def test_published_variants_and_archives_count_as_catalogued(tmp_path):
    variant = "1" * 64
    e = catalog_entry(files=[{"name": "insurance.csv", "sha256": SHA, "alt_sha256": [variant], "urls": []},
                             {"name": "a.tar.bz2", "sha256": "2" * 64, "unpack": ["a.h5"], "urls": []}])
    rec = {"source": "url", "standin": False, "files": [{"name": "insurance.csv", "sha256": variant},
                                                        {"name": "a.h5", "sha256": "3" * 64}],
           "archives": [{"name": "a.tar.bz2", "sha256": "2" * 64}]}
    assert record.catalogued_real(e, rec)
    assert not record.catalogued_real(e, {**rec, "archives": [{"name": "a.tar.bz2", "sha256": "4" * 64}]})
    assert not record.catalogued_real(e, {**rec, "files": rec["files"][:1]})
