"""Robust transfers (dpfl.data.transfer through dpfl.data.sources): retries that resume by HTTP Range, a server that
ignores Range, the sha256 check after a resumed transfer, the free-disk refusal, the size limit of data_source auto,
one-pass extraction of an archive's members, and the sha256 cache of raw files. Every transfer is served by an
http.server on 127.0.0.1 in this process (or a local mirror folder): nothing touches the network."""

from __future__ import annotations

import collections
import importlib
import os
import shutil
import tarfile
from pathlib import Path

import pytest
import yaml

from dpfl import config
from dpfl.data import hashes, sources, source_record as records
from dpfl.data.common import DataError
from loopback import Server, tar_bz2
from test_data_sources import CSV, entry, sha

ROOT = Path(__file__).resolve().parent.parent
PAYLOAD = bytes(range(256)) * 1200  # 307,200 bytes


def transfer_module():
    return importlib.import_module("dpfl.data.transfer")


@pytest.fixture(autouse=True)
def _offline_and_fast(no_credentials, monkeypatch):
    """No Kaggle credentials or mirror from the environment; no waiting between tries; a progress line per block."""
    try:
        transfer = transfer_module()
    except ImportError:
        return
    monkeypatch.setattr(transfer, "BACKOFF_SECONDS", 0.0)
    monkeypatch.setattr(transfer, "PROGRESS_SECONDS", 0.0)
    monkeypatch.setattr(transfer, "TIMEOUT_SECONDS", 5)


@pytest.fixture
def server():
    s = Server()
    yield s
    s.close()


def payload_entry(server: Server, data: bytes = PAYLOAD, expected: bytes | None = None, **keys) -> dict:
    server.files["blob.bin"] = data
    expected = data if expected is None else expected
    return entry([{"name": "blob.bin", "sha256": sha(expected), "bytes": len(expected),
                   "urls": [f"{server.url}/blob.bin"]}], **keys)


def leftovers(raw_dir: Path) -> list[str]:
    """Every file and folder under raw_dir (hidden ones included), relative to it."""
    return sorted(str(p.relative_to(raw_dir)) for p in raw_dir.rglob("*")) if raw_dir.exists() else []


# --------------------------------------------------------------------------------------------------
# retries, resume, hash
# --------------------------------------------------------------------------------------------------


def test_a_transfer_cut_off_half_way_resumes_by_range_and_its_sha256_matches(tmp_path, server):
    server.drops = 1
    raw, lines = tmp_path / "raw" / "toy", []
    record = sources.acquire("toy", payload_entry(server), raw, "real", None, log=lines.append)
    assert record["source"] == "url" and (raw / "blob.bin").read_bytes() == PAYLOAD
    half = len(PAYLOAD) // 2
    assert server.requests == [("blob.bin", None, 200), ("blob.bin", f"bytes={half}-", 206)]
    assert any(f"resuming after {half:,} bytes" in line for line in lines)
    # progress lines: bytes, rate and time left, while downloading and while hashing
    assert any("blob.bin: " in line and "/s" in line and "left" in line for line in lines)
    assert any("blob.bin: sha256" in line and "/s" in line for line in lines)
    assert leftovers(raw) == [".sha256.json", "SOURCE.json", "blob.bin"]  # no partial file left


def test_a_server_that_ignores_range_still_gives_the_right_file(tmp_path, server):
    server.drops, server.honour_range = 1, False
    raw, lines = tmp_path / "raw" / "toy", []
    record = sources.acquire("toy", payload_entry(server), raw, "real", None, log=lines.append)
    assert record["files"][0]["sha256"] == sha(PAYLOAD) and (raw / "blob.bin").read_bytes() == PAYLOAD
    assert [status for _, _, status in server.requests] == [200, 200]
    assert server.requests[1][1] == f"bytes={len(PAYLOAD) // 2}-"  # asked for the rest, got the whole file
    assert any("does not resume" in line and "from zero" in line for line in lines)


def test_the_partial_file_stays_between_runs_and_the_next_run_resumes(tmp_path, server, monkeypatch):
    monkeypatch.setattr(transfer_module(), "RETRIES", 0)
    server.drops = 1
    raw, e = tmp_path / "raw" / "toy", payload_entry(server)
    with pytest.raises(DataError, match="the next run resumes"):
        sources.acquire("toy", e, raw, "real", None)
    kept = [p for p in leftovers(raw) if p.startswith(".partial/")]
    assert len(kept) == 1 and (raw / kept[0]).stat().st_size == len(PAYLOAD) // 2
    record = sources.acquire("toy", e, raw, "real", None)
    assert record["source"] == "url" and (raw / "blob.bin").read_bytes() == PAYLOAD
    assert server.requests[-1] == ("blob.bin", f"bytes={len(PAYLOAD) // 2}-", 206)
    assert leftovers(raw) == [".sha256.json", "SOURCE.json", "blob.bin"]


def test_a_sha256_mismatch_after_a_resumed_transfer_is_refused_and_leaves_nothing(tmp_path, server):
    server.drops = 1
    raw = tmp_path / "raw" / "toy"
    e = payload_entry(server, data=PAYLOAD, expected=PAYLOAD[::-1])
    with pytest.raises(DataError) as err:
        sources.acquire("toy", e, raw, "real", None)
    assert "blob.bin" in str(err.value) and "sha256 mismatch" in str(err.value)
    assert len(server.requests) == 2  # the transfer did resume before the check
    assert leftovers(raw) == []


# --------------------------------------------------------------------------------------------------
# free disk space
# --------------------------------------------------------------------------------------------------


def test_not_enough_disk_space_is_refused_before_writing_with_a_clear_message(tmp_path, server, monkeypatch):
    usage = collections.namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage(10**6, 10**6 - 1000, 1000))
    raw = tmp_path / "raw" / "toy"
    with pytest.raises(DataError) as err:
        sources.acquire("toy", payload_entry(server), raw, "real", None)
    msg = str(err.value)
    assert "toy: blob.bin: not enough free disk space in" in msg and str(raw) in msg
    assert f"needs {len(PAYLOAD):,} bytes" in msg and "1,000 bytes (1.0 kB) are free" in msg
    assert leftovers(raw) == []


def test_the_free_space_check_counts_the_unpacked_members_of_an_archive(tmp_path, server, monkeypatch):
    transfer = transfer_module()
    usage = collections.namedtuple("usage", "total used free")
    free = len(PAYLOAD) * 2  # room for the archive, not for its members
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage(10**9, 0, free))
    server.files["a.tar"] = PAYLOAD
    e = entry([{"name": "a.tar", "sha256": sha(PAYLOAD), "bytes": len(PAYLOAD), "unpack": ["x.h5"],
                "urls": [f"{server.url}/a.tar"]}])
    with pytest.raises(DataError) as err:
        sources.acquire("toy", e, tmp_path / "raw" / "toy", "real", None)
    need = len(PAYLOAD) * (1 + transfer.UNPACK_FACTOR)
    assert f"the download and its unpacked members need {need:,} bytes" in str(err.value)
    assert leftovers(tmp_path / "raw" / "toy") == []


# --------------------------------------------------------------------------------------------------
# the size limit of data_source auto
# --------------------------------------------------------------------------------------------------


def big_entry(server: Server) -> dict:
    server.files["insurance.csv"] = CSV
    return entry([{"name": "insurance.csv", "sha256": sha(CSV), "bytes": len(CSV),
                   "urls": [f"{server.url}/insurance.csv"]}], dataset="insurance", standin="insurance")


def test_auto_uses_the_standin_for_a_download_over_the_limit_and_says_how_to_get_it(tmp_path, server):
    e = big_entry(server)
    limit = len(CSV) / 2e6  # half the file's size, in MB
    record = sources.acquire("insurance", e, tmp_path / "raw", "auto", None, max_auto_download_mb=limit)
    assert record["source"] == "standin" and record["standin"] is True
    assert server.requests == []  # nothing downloaded
    reason = record["fallback_reasons"][-1]
    assert f"its download is {len(CSV)} B, over max_auto_download_mb" in reason
    assert "at 10 MB/s" in reason and "`dataset_source: {insurance: real}` in config/config.yaml" in reason


def test_real_downloads_whatever_the_limit(tmp_path, server):
    e = big_entry(server)
    record = sources.acquire("insurance", e, tmp_path / "raw", "real", None, max_auto_download_mb=0.00001)
    assert record["source"] == "url" and record["standin"] is False and len(server.requests) == 1


def test_auto_under_the_limit_downloads(tmp_path, server):
    record = sources.acquire("insurance", big_entry(server), tmp_path / "raw", "auto", None,
                             max_auto_download_mb=1000)
    assert record["source"] == "url"


def test_every_catalog_file_states_its_size_and_stackoverflow_is_over_the_default_limit():
    cat = config.load_datasets(ROOT)
    for name, e in cat.items():
        for f in e["files"]:
            assert f["bytes"] or f["approx_bytes"], (name, f["name"])
    schema = yaml.safe_load((ROOT / "workflow" / "schemas" / "config.schema.yaml").read_text())
    limit = schema["properties"]["max_auto_download_mb"]["default"]
    assert records.over_auto_limit(cat["stackoverflow"], "auto", limit)
    assert not records.over_auto_limit(cat["stackoverflow"], "real", limit)
    for small in ("mnist", "insurance", "obesity", "creditcard", "heart_disease", "tcga_brca", "emnist"):
        assert not records.over_auto_limit(cat[small], "auto", limit), small
    # only the members a loader reads are unpacked
    assert cat["stackoverflow"]["files"][0]["unpack"] == ["stackoverflow_train.h5", "stackoverflow_test.h5"]


# --------------------------------------------------------------------------------------------------
# one-pass extraction
# --------------------------------------------------------------------------------------------------


def test_the_members_of_an_archive_are_extracted_in_one_pass(tmp_path, monkeypatch):
    members = {"d/a_train.h5": b"train" * 100, "d/a_held_out.h5": b"held" * 100, "d/a_test.h5": b"test" * 100,
               "d/a.count": b"counts"}
    data = tar_bz2(members)
    mirror = tmp_path / "mirror"
    (mirror / "toy").mkdir(parents=True)
    (mirror / "toy" / "a.tar.bz2").write_bytes(data)
    e = entry([{"name": "a.tar.bz2", "sha256": sha(data), "bytes": len(data),
                "unpack": ["a_train.h5", "a_test.h5", "a.count"], "urls": []}])
    opened = []
    real_open = tarfile.open

    def counting_open(*args, **kwargs):
        opened.append(args)
        return real_open(*args, **kwargs)

    monkeypatch.setattr(tarfile, "open", counting_open)
    raw = tmp_path / "raw" / "toy"
    record = sources.acquire("toy", e, raw, "real", str(mirror))
    assert len(opened) == 1
    assert sorted(f["name"] for f in record["files"]) == ["a.count", "a_test.h5", "a_train.h5"]
    for name in ("a_train.h5", "a_test.h5", "a.count"):
        assert (raw / name).read_bytes() == members[f"d/{name}"]
    assert not (raw / "a_held_out.h5").exists()


# --------------------------------------------------------------------------------------------------
# the sha256 cache
# --------------------------------------------------------------------------------------------------


def test_a_raw_file_is_hashed_once_while_its_size_and_mtime_match(tmp_path, monkeypatch):
    mirror = tmp_path / "mirror"
    (mirror / "toy").mkdir(parents=True)
    (mirror / "toy" / "blob.bin").write_bytes(PAYLOAD)
    e = entry([{"name": "blob.bin", "sha256": sha(PAYLOAD), "bytes": len(PAYLOAD), "urls": []}])
    raw = tmp_path / "raw" / "toy"
    record = sources.acquire("toy", e, raw, "real", str(mirror))
    hashed = []
    real_hash = hashes.sha256_file
    monkeypatch.setattr(hashes, "sha256_file", lambda path, *a, **k: hashed.append(Path(path).name)
                        or real_hash(path, *a, **k))
    for _ in range(3):  # what prepare checks on every run
        hashes.check_recorded_files("toy", raw, record)
    assert hashed == []
    # a new mtime (same content): hashed again, once, then trusted again
    st = (raw / "blob.bin").stat()
    os.utime(raw / "blob.bin", ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    hashes.check_recorded_files("toy", raw, record)
    hashes.check_recorded_files("toy", raw, record)
    assert hashed == ["blob.bin"]
    # changed content, same size, the mtime moved on: hashed, and refused
    (raw / "blob.bin").write_bytes(PAYLOAD[::-1])
    os.utime(raw / "blob.bin", ns=(st.st_atime_ns, st.st_mtime_ns + 2 * 10**9))
    with pytest.raises(DataError, match="changed after its download"):
        hashes.check_recorded_files("toy", raw, record)
    # changed size: hashed, and refused
    (raw / "blob.bin").write_bytes(PAYLOAD + b"x")
    with pytest.raises(DataError, match="changed after its download"):
        hashes.check_recorded_files("toy", raw, record)
    assert hashed == ["blob.bin"] * 3



def test_the_download_stage_passes_the_limit_and_warns_with_the_opt_in(tmp_path, server):
    from dpfl.stages.download import run_download

    job = {"entry": big_entry(server), "data_source": "auto", "source_key": None,
           "max_auto_download_mb": len(CSV) / 2e6, "mirror": None}
    log = tmp_path / "download.log"
    record = run_download("insurance", job, str(tmp_path / "raw" / "SOURCE.json"), str(log))
    assert record["standin"] is True and server.requests == []
    text = log.read_text()
    assert "WARNING: insurance: not downloaded (larger than max_auto_download_mb), using the SYNTHETIC STAND-IN" in text
    assert "dataset_source: {insurance: real}" in text
