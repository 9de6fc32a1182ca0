"""The download and prepare stages (dpfl.stages.download / .prepare): a fallback from the first-choice source is a
visible WARNING with its reasons (console and job log) and travels as `fallback_reasons` into SOURCE.json, the
prepared meta and the figure sidecars' `datasets` entries; a raw file edited after its download stops `prepare` with
a message naming the file and the command that fetches it again."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from dpfl import config
from dpfl.data import load_prepared
from dpfl.data.common import DataError, sha256_file
from dpfl.data.prepare import prepare
from dpfl.stages.download import run_download
from dpfl.stages.prepare import run_prepare
from dpfl.stages.table import dataset_provenance

ROOT = Path(__file__).resolve().parent.parent
CATALOG = config.load_datasets(ROOT)


@pytest.fixture(autouse=True)
def _offline(no_credentials):
    """No Kaggle credentials and no mirror from the environment (tests/conftest.py)."""


def offline_insurance() -> dict:
    """The insurance catalog entry with its URLs on a closed local port and no Kaggle slug."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    e = CATALOG["insurance"]
    return {**e, "kaggle": None, "files": [{**f, "urls": [f"http://127.0.0.1:{port}/{f['name']}"]} for f in e["files"]]}


def job(entry, mirror, data_source="auto"):
    return {"entry": entry, "data_source": data_source, "source_key": None, "mirror": mirror}


def download(tmp_path, mirror, data_source="auto"):
    source = tmp_path / "data" / "raw" / "insurance" / "SOURCE.json"
    log = tmp_path / "logs" / "download.log"
    run_download("insurance", job(offline_insurance(), mirror, data_source), str(source), str(log))
    return source, log


def test_fallback_to_the_standin_is_a_warning_with_its_reasons(tmp_path, capsys):
    missing = tmp_path / "mistyped-mirror"
    source, log = download(tmp_path, str(missing))
    err = capsys.readouterr().err
    record = json.loads(source.read_text())
    assert record["standin"] is True
    reason = f"mirror folder {missing} does not exist"
    assert any(reason in r for r in record["fallback_reasons"])
    for text in (err, log.read_text()):
        assert "WARNING: insurance: no real source worked, using the SYNTHETIC STAND-IN (real data: " in text
        assert "to download with `dataset_source: {insurance: real}` in config/config.yaml" in text
        assert reason in text and "Connection refused" in text


def test_first_choice_gives_no_warning(tmp_path, capsys):
    download(tmp_path, None, data_source="standin")
    assert "WARNING" not in capsys.readouterr().err


def test_fallback_reasons_reach_the_prepared_meta_and_the_sidecar_entry(tmp_path, capsys):
    source, _ = download(tmp_path, str(tmp_path / "mistyped-mirror"))
    reasons = json.loads(source.read_text())["fallback_reasons"]
    npz = tmp_path / "data" / "prepared" / "insurance.npz"
    run_prepare("insurance", str(source), str(npz), str(tmp_path / "logs" / "prepare.log"))
    _, meta = load_prepared(npz)
    assert meta["fallback_reasons"] == reasons and len(reasons) == 2
    assert dataset_provenance(str(npz))["fallback_reasons"] == reasons
    assert "WARNING: insurance: prepared from the SYNTHETIC STAND-IN" in capsys.readouterr().err


def test_edited_raw_file_names_the_file_and_the_fix(tmp_path):
    source, _ = download(tmp_path, None, data_source="standin")
    raw = source.parent / "insurance.csv"
    raw.write_bytes(raw.read_bytes().replace(b"\n", b"\n0", 1))
    with pytest.raises(DataError) as err:
        prepare("insurance", source.parent)
    msg = str(err.value)
    assert f"sha256 {sha256_file(raw)} differs from SOURCE.json" in msg and str(raw) in msg
    assert msg.endswith("fetch it again: .venv/bin/snakemake data/prepared/insurance.npz --forcerun download")
    raw.unlink()
    with pytest.raises(DataError, match=r"insurance.csv: listed in SOURCE.json but missing .*--forcerun download"):
        prepare("insurance", source.parent)
