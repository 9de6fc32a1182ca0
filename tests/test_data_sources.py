"""dpfl.data.sources (with dpfl.data.fetchers and dpfl.data.staging): the order of sources (mirror -> URLs ->
Kaggle -> stand-in), verification before use, the `real` / `standin` modes, SOURCE.json, and that a failed attempt
leaves no file behind. Every source is simulated locally (folders, file:// URLs, an http.server on 127.0.0.1, a fake
`kaggle` module): nothing is downloaded."""

from __future__ import annotations

import bz2
import functools
import hashlib
import http.server
import io
import json
import socket
import sys
import tarfile
import threading
import types
import zipfile
from pathlib import Path

import pytest

from dpfl import config
from dpfl.data import checks, fetchers, sources
from dpfl.data.common import DataError, sha256_gzip_content
from dpfl.data.hashes import HASH_CACHE

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = ROOT / "workflow" / "schemas" / "datasets.schema.yaml"

CSV = b"age,sex,bmi,children,smoker,region,charges\r\n19,female,27.9,0,yes,southwest,16884.924\r\n"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def entry(files: list[dict], dataset: str = "toy", **keys) -> dict:
    """A catalog entry validated by the real schema (defaults filled), as the rules pass it."""
    data = {"description": "test", "license": "test", "mirror": keys.pop("mirror", "toy"), "files": files, **keys}
    return config.validate({"datasets": {dataset: data}}, SCHEMA, "test entry")["datasets"][dataset]


def closed_port_url(name: str) -> str:
    """A URL on 127.0.0.1 where nothing listens (connection refused at once)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/{name}"


@pytest.fixture(autouse=True)
def _offline(no_credentials):
    """No Kaggle credentials and no mirror from the environment (tests/conftest.py)."""


@pytest.fixture
def server(tmp_path):
    """An http.server on 127.0.0.1 serving tmp_path/www; yields (folder, base URL)."""
    root = tmp_path / "www"
    root.mkdir()

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(root)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield root, f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def leftovers(raw_dir: Path) -> list[str]:
    """The files in raw_dir, but the sha256 cache (dpfl.data.hashes.HASH_CACHE) written beside verified files."""
    return sorted(p.name for p in raw_dir.iterdir() if p.name != HASH_CACHE) if raw_dir.exists() else []


# --------------------------------------------------------------------------------------------------
# mirror
# --------------------------------------------------------------------------------------------------


def test_mirror_checksum_mismatch_with_real_fails_and_leaves_nothing(tmp_path):
    mirror = tmp_path / "mirror"
    (mirror / "toy").mkdir(parents=True)
    (mirror / "toy" / "insurance.csv").write_bytes(CSV.replace(b"27.9", b"28.9"))  # altered copy
    e = entry([{"name": "insurance.csv", "sha256": sha(CSV), "urls": [closed_port_url("insurance.csv")]}])
    raw = tmp_path / "data" / "raw" / "toy"
    with pytest.raises(DataError) as err:
        sources.acquire("toy", e, raw, "real", str(mirror))
    msg = str(err.value)
    assert "dataset 'toy'" in msg and "insurance.csv" in msg and "sha256 mismatch" in msg
    assert f"expected {sha(CSV)}" in msg
    assert f"actual {sha(CSV.replace(b'27.9', b'28.9'))}" in msg
    assert "mirror " + str(mirror / "toy") in msg and "url http://127.0.0.1:" in msg
    assert leftovers(raw) == []


def test_valid_mirror_is_used_first(tmp_path):
    mirror = tmp_path / "mirror"
    (mirror / "toysub").mkdir(parents=True)
    (mirror / "toysub" / "insurance.csv").write_bytes(CSV)
    e = entry([{"name": "insurance.csv", "sha256": sha(CSV), "urls": [closed_port_url("x")]}], mirror="toysub")
    raw = tmp_path / "raw" / "toy"
    record = sources.acquire("toy", e, raw, "real", str(mirror))
    assert record["source"] == "mirror" and record["standin"] is False and record["attempts"] == []
    assert record["location"] == str(mirror / "toysub")
    assert leftovers(raw) == ["SOURCE.json", "insurance.csv"]
    saved = json.loads((raw / "SOURCE.json").read_text())
    assert saved["files"] == [{"name": "insurance.csv", "sha256": sha(CSV), "bytes": len(CSV), "verified": "sha256"}]
    assert saved["retrieved_at"].endswith("Z") and saved["generator"] is None


def test_published_variant_checksum_is_accepted_and_labelled(tmp_path):
    lf = CSV.replace(b"\r\n", b"\n")
    mirror = tmp_path / "mirror"
    (mirror / "toy").mkdir(parents=True)
    (mirror / "toy" / "insurance.csv").write_bytes(lf)
    e = entry([{"name": "insurance.csv", "sha256": sha(CSV), "alt_sha256": [sha(lf)], "urls": []}])
    record = sources.acquire("toy", e, tmp_path / "raw", "real", str(mirror))
    assert record["files"][0]["verified"].startswith("sha256 of a published variant")


# --------------------------------------------------------------------------------------------------
# URLs
# --------------------------------------------------------------------------------------------------


def test_unreachable_source_with_real_lists_every_attempt(tmp_path):
    url = closed_port_url("insurance.csv")
    e = entry([{"name": "insurance.csv", "sha256": sha(CSV), "urls": [url]}], kaggle="someone/toy")
    raw = tmp_path / "raw" / "toy"
    with pytest.raises(DataError) as err:
        sources.acquire("toy", e, raw, "real", None)
    msg = str(err.value)
    assert "dataset 'toy': no real source worked (data_source: real)" in msg
    assert "- mirror: no mirror configured" in msg
    assert f"- url {url}: toy: insurance.csv: URLError" in msg and "refused" in msg
    assert "- kaggle someone/toy: skipped: no Kaggle credentials" in msg
    assert not raw.exists()


def test_http_server_download_is_verified_and_recorded(tmp_path, server):
    www, base = server
    (www / "good.csv").write_bytes(CSV)
    (www / "bad.csv").write_bytes(CSV + b"20,male,30,1,no,northeast,2000\r\n")
    urls = [closed_port_url("a.csv"), f"{base}/bad.csv", f"{base}/good.csv"]
    e = entry([{"name": "insurance.csv", "sha256": sha(CSV), "urls": urls}])
    raw = tmp_path / "raw" / "toy"
    record = sources.acquire("toy", e, raw, "real", None)
    assert record["source"] == "url" and record["location"] == f"{base}/good.csv"
    assert (raw / "insurance.csv").read_bytes() == CSV
    failed = [(a["source"], a["location"]) for a in record["attempts"]]
    assert failed == [("mirror", None), ("url", urls[0]), ("url", urls[1])]
    assert "sha256 mismatch" in record["attempts"][2]["error"]
    assert leftovers(raw) == ["SOURCE.json", "insurance.csv"]


def test_file_url(tmp_path):
    src = tmp_path / "elsewhere" / "insurance.csv"
    src.parent.mkdir()
    src.write_bytes(CSV)
    e = entry([{"name": "insurance.csv", "sha256": sha(CSV), "urls": [src.as_uri()]}])
    record = sources.acquire("toy", e, tmp_path / "raw", "auto", None)
    assert record["source"] == "url" and record["location"] == src.as_uri()


def test_zip_member_and_gzip_storage_with_content_check(tmp_path, monkeypatch, server):
    """A file inside a zip archive, stored gzip-compressed, verified by a content check (no published sha256):
    its sha256 and the sha256 of its content are recorded."""
    www, base = server
    with zipfile.ZipFile(www / "bundle.zip", "w") as z:
        z.writestr("folder/table.csv", CSV)
    calls = []

    def check(dataset, path):
        calls.append(path.name)
        return "1 row"

    monkeypatch.setitem(checks.CHECKS, "creditcard", check)
    e = entry([{"name": "table.csv.gz", "gzip": True, "check": "creditcard",
                "urls": [{"url": f"{base}/bundle.zip", "member": "table.csv"}]}])
    raw = tmp_path / "raw"
    record = sources.acquire("toy", e, raw, "real", None)
    f = record["files"][0]
    assert calls == ["table.csv.gz"] and f["location"] == f"{base}/bundle.zip#table.csv"
    assert f["content_sha256"] == sha(CSV) == sha256_gzip_content(raw / "table.csv.gz")
    assert "content check 'creditcard': 1 row" in f["verified"]
    assert leftovers(raw) == ["SOURCE.json", "table.csv.gz"]


def test_tar_bz2_archive_is_verified_then_unpacked(tmp_path, server):
    www, base = server
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in (("a_train.h5", b"train"), ("a_test.h5", b"test"), ("README", b"x")):
            info = tarfile.TarInfo(f"inner/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    archive = bz2.compress(buf.getvalue())
    (www / "a.tar.bz2").write_bytes(archive)
    e = entry([{"name": "a.tar.bz2", "sha256": sha(archive), "unpack": ["a_train.h5", "a_test.h5"],
                "urls": [f"{base}/a.tar.bz2"]}])
    raw = tmp_path / "raw"
    record = sources.acquire("toy", e, raw, "real", None)
    assert leftovers(raw) == ["SOURCE.json", "a_test.h5", "a_train.h5"]  # archive dropped, README not listed
    assert (raw / "a_train.h5").read_bytes() == b"train"
    assert [f["from_archive"] for f in record["files"]] == ["a.tar.bz2", "a.tar.bz2"]
    assert record["archives"][0]["sha256"] == sha(archive)


def test_tampered_archive_is_not_unpacked(tmp_path, server):
    www, base = server
    (www / "a.tar.bz2").write_bytes(b"not the archive")
    e = entry([{"name": "a.tar.bz2", "sha256": "0" * 64, "unpack": ["a.h5"], "urls": [f"{base}/a.tar.bz2"]}])
    raw = tmp_path / "raw"
    with pytest.raises(DataError, match="a.tar.bz2 from .*sha256 mismatch"):
        sources.acquire("toy", e, raw, "real", None)
    assert leftovers(raw) == []


# --------------------------------------------------------------------------------------------------
# Kaggle (a fake module: the real one authenticates over the network when imported)
# --------------------------------------------------------------------------------------------------


def test_kaggle_credentials_detection(monkeypatch, tmp_path):
    assert fetchers.kaggle_credentials() is None
    monkeypatch.setenv("KAGGLE_USERNAME", "u")
    monkeypatch.setenv("KAGGLE_KEY", "k")
    assert fetchers.kaggle_credentials() == "KAGGLE_USERNAME/KAGGLE_KEY"
    monkeypatch.delenv("KAGGLE_KEY")
    token = tmp_path / "home" / ".kaggle" / "kaggle.json"
    token.parent.mkdir(parents=True)
    token.write_text("{}")
    assert fetchers.kaggle_credentials() == str(token)


def test_kaggle_source_after_urls(monkeypatch, tmp_path):
    downloads = []

    class FakeApi:
        def authenticate(self):
            pass

        def dataset_download_files(self, slug, path, unzip, quiet, force):
            downloads.append(slug)
            Path(path, "insurance.csv").write_bytes(CSV)

    fake = types.ModuleType("kaggle.api.kaggle_api_extended")
    fake.KaggleApi = FakeApi
    for name in ("kaggle", "kaggle.api"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, "kaggle.api.kaggle_api_extended", fake)
    monkeypatch.setenv("KAGGLE_API_TOKEN", "token")
    url = closed_port_url("insurance.csv")
    e = entry([{"name": "insurance.csv", "sha256": sha(CSV), "urls": [url]}], kaggle="mirichoi0218/insurance")
    raw = tmp_path / "raw"
    record = sources.acquire("toy", e, raw, "real", None)
    assert downloads == ["mirichoi0218/insurance"]
    assert record["source"] == "kaggle" and record["location"] == "mirichoi0218/insurance"
    assert [a["source"] for a in record["attempts"]] == ["mirror", "url"]
    assert leftovers(raw) == ["SOURCE.json", "insurance.csv"]


# --------------------------------------------------------------------------------------------------
# stand-ins and modes
# --------------------------------------------------------------------------------------------------


def test_auto_falls_back_to_standin(tmp_path):
    url = closed_port_url("insurance.csv")
    e = entry([{"name": "insurance.csv", "sha256": sha(CSV), "urls": [url]}], standin="insurance")
    raw = tmp_path / "raw" / "insurance"
    record = sources.acquire("insurance", e, raw, "auto", None)
    saved = json.loads((raw / "SOURCE.json").read_text())
    assert saved == json.loads(json.dumps(record))
    assert saved["source"] == "standin" and saved["standin"] is True
    assert saved["generator"]["module"] == "dpfl.data.standins.insurance" and saved["generator"]["seed_entropy"]
    assert [a["source"] for a in saved["attempts"]] == ["mirror", "url"]
    assert saved["files"][0]["name"] == "insurance.csv" and saved["files"][0]["verified"] == "generated"


def test_auto_without_standin_fails_listing_attempts(tmp_path):
    e = entry([{"name": "insurance.csv", "sha256": sha(CSV), "urls": [closed_port_url("x")]}])
    with pytest.raises(DataError, match="no stand-in generator yet(.|\n)*there is no stand-in to fall back to"):
        sources.acquire("toy", e, tmp_path / "raw", "auto", None)


def test_standin_mode_ignores_real_sources(tmp_path):
    mirror = tmp_path / "mirror"
    (mirror / "toy").mkdir(parents=True)
    (mirror / "toy" / "insurance.csv").write_bytes(CSV)
    e = entry([{"name": "insurance.csv", "sha256": sha(CSV), "urls": []}], standin="insurance")
    record = sources.acquire("insurance", e, tmp_path / "raw", "standin", str(mirror))
    assert record["source"] == "standin" and record["attempts"] == []


def test_new_download_replaces_files_of_the_previous_one(tmp_path):
    mirror = tmp_path / "mirror"
    (mirror / "toy").mkdir(parents=True)
    (mirror / "toy" / "old.csv").write_bytes(b"old")
    (mirror / "toy" / "new.csv").write_bytes(b"new")
    raw = tmp_path / "raw"
    sources.acquire("toy", entry([{"name": "old.csv", "sha256": sha(b"old"), "urls": []}]), raw, "real", str(mirror))
    sources.acquire("toy", entry([{"name": "new.csv", "sha256": sha(b"new"), "urls": []}]), raw, "real", str(mirror))
    assert leftovers(raw) == ["SOURCE.json", "new.csv"]


def test_failed_attempt_keeps_earlier_files_untouched_and_no_temporaries(tmp_path):
    """A failed download removes only what it wrote (its staging folder); it leaves no temporary file."""
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "keep.txt").write_text("from an earlier run")
    e = entry([{"name": "insurance.csv", "sha256": sha(CSV), "urls": [closed_port_url("x")]}])
    with pytest.raises(DataError):
        sources.acquire("toy", e, raw, "real", None)
    assert leftovers(raw) == ["keep.txt"]


# --------------------------------------------------------------------------------------------------
# verified real files already present are kept
# --------------------------------------------------------------------------------------------------


def test_verified_real_files_already_present_are_kept_without_a_source(tmp_path):
    """A second download with no source reachable (no mirror, URL refused) keeps the verified real copy: it does
    not fall back to the stand-in, and the record still names where the data came from."""
    mirror = tmp_path / "mirror"
    (mirror / "toy").mkdir(parents=True)
    (mirror / "toy" / "insurance.csv").write_bytes(CSV)
    e = entry([{"name": "insurance.csv", "sha256": sha(CSV), "urls": [closed_port_url("x")]}], standin="insurance")
    raw = tmp_path / "raw" / "insurance"
    first = sources.acquire("insurance", e, raw, "auto", str(mirror), source_key="mirror key")
    again = sources.acquire("insurance", e, raw, "auto", None, source_key="mirror key")
    assert again["source"] == "mirror" and again["standin"] is False and again["location"] == str(mirror / "toy")
    assert again["retrieved_at"] == first["retrieved_at"] and again["checked_at"]
    assert (raw / "insurance.csv").read_bytes() == CSV and leftovers(raw) == ["SOURCE.json", "insurance.csv"]
    assert json.loads((raw / "SOURCE.json").read_text())["source_key"] == "mirror key"


def test_an_edited_present_file_is_fetched_again(tmp_path):
    mirror = tmp_path / "mirror"
    (mirror / "toy").mkdir(parents=True)
    (mirror / "toy" / "insurance.csv").write_bytes(CSV)
    e = entry([{"name": "insurance.csv", "sha256": sha(CSV), "urls": []}])
    raw = tmp_path / "raw"
    sources.acquire("toy", e, raw, "real", str(mirror))
    (raw / "insurance.csv").write_bytes(CSV.replace(b"27.9", b"28.9"))
    record = sources.acquire("toy", e, raw, "real", str(mirror))
    assert record["source"] == "mirror" and "checked_at" not in record
    assert (raw / "insurance.csv").read_bytes() == CSV


def test_standin_mode_replaces_present_real_files(tmp_path):
    mirror = tmp_path / "mirror"
    (mirror / "toy").mkdir(parents=True)
    (mirror / "toy" / "insurance.csv").write_bytes(CSV)
    e = entry([{"name": "insurance.csv", "sha256": sha(CSV), "urls": []}], standin="insurance")
    raw = tmp_path / "raw"
    sources.acquire("insurance", e, raw, "real", str(mirror))
    record = sources.acquire("insurance", e, raw, "standin", str(mirror))
    assert record["source"] == "standin" and (raw / "insurance.csv").read_bytes() != CSV


# --------------------------------------------------------------------------------------------------
# fallback reasons (SOURCE.json `fallback_reasons`: one line per failed source before the one used)
# --------------------------------------------------------------------------------------------------


def standin_entry(**keys) -> dict:
    return entry([{"name": "insurance.csv", "sha256": sha(CSV), "urls": [closed_port_url("insurance.csv")]}],
                 standin="insurance", **keys)


def test_corrupted_mirror_file_falls_back_to_the_standin_with_its_reason(tmp_path):
    mirror = tmp_path / "mirror"
    (mirror / "toy").mkdir(parents=True)
    (mirror / "toy" / "insurance.csv").write_bytes(CSV.replace(b"27.9", b"28.9"))
    record = sources.acquire("insurance", standin_entry(), tmp_path / "raw", "auto", str(mirror))
    assert record["standin"] is True
    reasons = record["fallback_reasons"]
    assert len(reasons) == 2 and all("\n" not in r for r in reasons)
    assert reasons[0].startswith(f"mirror {mirror / 'toy'}: ") and "insurance.csv" in reasons[0]
    assert "sha256 mismatch" in reasons[0] and reasons[1].startswith("url http://127.0.0.1:")


def test_missing_mirror_folder_is_named_as_such(tmp_path):
    missing = tmp_path / "no" / "such" / "mirror"
    record = sources.acquire("insurance", standin_entry(), tmp_path / "raw", "auto", str(missing))
    assert record["standin"] is True
    assert record["fallback_reasons"][0] == f"mirror {missing / 'toy'}: mirror folder {missing} does not exist"


def test_mirror_without_the_dataset_folder_is_named_as_such(tmp_path):
    (tmp_path / "mirror").mkdir()
    record = sources.acquire("insurance", standin_entry(), tmp_path / "raw", "auto", str(tmp_path / "mirror"))
    assert f"the mirror {tmp_path / 'mirror'} has no toy/ folder" in record["fallback_reasons"][0]


def test_no_fallback_reasons_when_the_first_choice_works(tmp_path):
    mirror = tmp_path / "mirror"
    (mirror / "toy").mkdir(parents=True)
    (mirror / "toy" / "insurance.csv").write_bytes(CSV)
    assert sources.acquire("toy", standin_entry(), tmp_path / "a", "auto", str(mirror))["fallback_reasons"] == []
    # without a mirror configured the URL is the first choice: "no mirror configured" is no failure
    src = tmp_path / "elsewhere.csv"
    src.write_bytes(CSV)
    e = entry([{"name": "insurance.csv", "sha256": sha(CSV), "urls": [src.as_uri()]}])
    record = sources.acquire("toy", e, tmp_path / "b", "auto", None)
    assert record["source"] == "url" and record["fallback_reasons"] == []
    # but it explains a stand-in
    record = sources.acquire("insurance", standin_entry(), tmp_path / "c", "auto", None)
    assert record["fallback_reasons"][0].startswith("mirror: no mirror configured")
    assert sources.acquire("insurance", standin_entry(), tmp_path / "d", "standin", None)["fallback_reasons"] == []


def test_real_source_after_a_failed_mirror_lists_the_mirror(tmp_path):
    src = tmp_path / "elsewhere.csv"
    src.write_bytes(CSV)
    e = entry([{"name": "insurance.csv", "sha256": sha(CSV), "urls": [src.as_uri()]}])
    record = sources.acquire("toy", e, tmp_path / "raw", "auto", str(tmp_path / "typo"))
    assert record["source"] == "url"
    typo = tmp_path / "typo"
    assert record["fallback_reasons"] == [f"mirror {typo / 'toy'}: mirror folder {typo} does not exist"]
