"""The path a user with internet takes, end to end and offline: `snakemake` with `data_source: real` on a copy of the
project whose catalog points at a local HTTP server (tests/loopback.py, 127.0.0.1 only) instead of the official hosts.

- EMNIST from a tiny TFF-layout .tar.bz2 (the legacy archive route), Stack Overflow from a tiny .sqlite.lzma in TFF's
  current schema (the archive's URL answers 404, so the run falls through to the database route), and creditcard
  from a full-size CSV with Kaggle's quoting served as `creditcard.csv` (its content check, then gzip): the prepared
  .npz files, SOURCE.json and a figure whose sidecar names the source.
- A transfer the server cuts off half-way, after which the server goes away: the run fails and keeps the partial
  file; the next run resumes it by HTTP Range and the sha256 matches.
- A download larger than any disk: refused before a byte is written, with the folder and sizes, leaving nothing.

The copied catalog keeps the real entries' structure and replaces only the URLs, sha256, sizes and expected counts
with the tiny files'. Nothing is downloaded from the network."""

from __future__ import annotations

import gzip
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest
import yaml
from loopback import Server, tar_bz2
from test_data_routes import database, so_protos
from test_data_sources import sha

from dpfl import paths
from dpfl.data import load_prepared
from dpfl.data.common import standin_seed
from dpfl.data.loaders import emnist, stackoverflow
from dpfl.data.standins import creditcard as creditcard_standin

pytestmark = pytest.mark.pipeline

CLIENTS = 24  # smoke scale trains on 20 users (config/scales/smoke.yaml)


def snakemake(project: Path, *args: str) -> subprocess.CompletedProcess:
    """A run with no mirror and no Kaggle credentials, so the loopback server is the only source."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "DPFL_DATA_MIRROR") and not k.startswith("KAGGLE_")}
    env["HOME"] = str(project / "home")
    return subprocess.run([sys.executable, "-m", "snakemake", "--cores", "2", *args, "--config", "data_source=real",
                           "scale=smoke"], cwd=project, env=env, capture_output=True, text=True, timeout=600)


def out(proc: subprocess.CompletedProcess) -> str:
    return proc.stdout + proc.stderr


# --------------------------------------------------------------------------------------------------
# tiny files in the real layouts
# --------------------------------------------------------------------------------------------------


def emnist_h5(rng: np.random.Generator, n: int) -> bytes:
    """A TFF-layout HDF5 file (examples/<client>/{pixels, label}) of CLIENTS writers with n images each."""
    buf = io.BytesIO()
    with h5py.File(buf, "w") as f:
        for c in range(CLIENTS):
            g = f.create_group(f"examples/f{c:04d}_{c % 7:02d}")
            g.create_dataset("pixels", data=rng.uniform(0, 1, (n, 28, 28)).astype(np.float32))
            g.create_dataset("label", data=rng.integers(0, 10, n).astype(np.int32))
    return buf.getvalue()


def emnist_archive() -> tuple[bytes, dict]:
    rng = np.random.default_rng(1)
    members = {emnist.TRAIN_FILE: emnist_h5(rng, 8), emnist.TEST_FILE: emnist_h5(rng, 3)}
    return tar_bz2(members), members


WORDS = [f"w{i:04d}" for i in range(stackoverflow.WORD_VOCAB + 10)]
TAGS = [f"t{i:02d}" for i in range(stackoverflow.TAG_VOCAB + 5)]


def stackoverflow_clients(rng: np.random.Generator, docs: int) -> dict:
    """client -> [(title, tokens, tags)], words and tags drawn from the full vocabularies."""
    def doc():
        return (" ".join(rng.choice(WORDS[:200], 3)), " ".join(rng.choice(WORDS, 12)),
                "|".join(rng.choice(TAGS[:20], 2, replace=False)))
    return {f"{1000 + c:08d}": [doc() for _ in range(docs)] for c in range(CLIENTS)}


def stackoverflow_files(folder: Path) -> dict[str, bytes]:
    """stackoverflow.sqlite.lzma (train, test and heldout splits) and the two count archives."""
    rng = np.random.default_rng(2)
    splits = {"train": so_protos(stackoverflow_clients(rng, 10)), "test": so_protos(stackoverflow_clients(rng, 3)),
              "heldout": so_protos(stackoverflow_clients(rng, 1))}
    db = database(folder / "stackoverflow.sqlite.lzma", splits)
    words = "".join(f"{w} {len(WORDS) - i}\n" for i, w in enumerate(WORDS)).encode()
    tags = json.dumps({t: len(TAGS) - i for i, t in enumerate(TAGS)}).encode()
    return {"stackoverflow.sqlite.lzma": db.read_bytes(),
            "stackoverflow.word_count.tar.bz2": tar_bz2({"stackoverflow.word_count": words}),
            "stackoverflow.tag_count.tar.bz2": tar_bz2({"stackoverflow.tag_count": tags})}


def creditcard_csv(folder: Path) -> bytes:
    """The full-size stand-in (284,807 rows, 492 frauds) as a plain CSV with Kaggle's quoting (quoted header names and
    Class values), as Kaggle and the TensorFlow mirror serve creditcard.csv."""
    folder.mkdir(parents=True, exist_ok=True)
    creditcard_standin.generate(folder, standin_seed("creditcard"))
    data = gzip.decompress((folder / creditcard_standin.FILE).read_bytes())
    assert data.startswith(b'"Time","V1",') and re.search(rb',"1"\n', data)
    return data


# --------------------------------------------------------------------------------------------------
# the catalog of the copied project
# --------------------------------------------------------------------------------------------------


def point_at(project: Path, server: Server, edit) -> dict:
    """Rewrite the copied catalog with edit(catalog), then check it still validates (the rules do too)."""
    path = project / "config" / "datasets.yaml"
    catalog = yaml.safe_load(path.read_text())
    edit(catalog["datasets"])
    path.write_text(yaml.safe_dump(catalog, sort_keys=False))
    return catalog["datasets"]


def serve(server: Server, f: dict, data: bytes, *, sha256: bool = True) -> None:
    """Serve `data` as catalog file f's only URL, with its exact size (and sha256 unless a content check decides)."""
    server.files[f["name"]] = data
    f["urls"] = [f"{server.url}/{f['name']}"]
    f.pop("approx_bytes", None)
    f["bytes"] = len(data)
    if sha256:
        f["sha256"] = sha(data)


@pytest.fixture
def server():
    s = Server()
    yield s
    s.close()


@pytest.fixture
def project(make_project):
    return make_project(("workflow", "config", "src", "profiles"), into="project", offline_catalog=True)


def test_real_data_over_http_to_prepared_arrays_and_a_figure(project, server, tmp_path):
    archive, members = emnist_archive()
    so_files = stackoverflow_files(tmp_path)
    csv = creditcard_csv(tmp_path / "cc")

    def edit(datasets):
        serve(server, datasets["emnist"]["files"][0], archive)
        so = datasets["stackoverflow"]
        so["files"][0]["urls"] = [f"{server.url}/stackoverflow.tar.bz2"]  # not served: 404
        sqlite_route = next(r for r in so["routes"] if r["name"] == "tff_sqlite")
        for f in sqlite_route["files"]:
            serve(server, f, so_files[f["name"]], sha256=f["name"] != "stackoverflow.sqlite.lzma")
        sqlite_route["files"][0]["expect"]["splits"] = {"train": {"clients": CLIENTS, "examples": CLIENTS * 10},
                                                         "test": {"clients": CLIENTS, "examples": CLIENTS * 3}}
        cc = datasets["creditcard"]["files"][0]
        cc["urls"] = [f"{server.url}/creditcard.csv"]
        server.files["creditcard.csv"] = csv

    point_at(project, server, edit)
    figure = paths.figure_dir("bietti2022", "fig1b") + "fig1b.png"
    proc = snakemake(project, figure, paths.prepared_npz("emnist"), paths.prepared_npz("creditcard"))
    assert proc.returncode == 0, out(proc)[-4000:]

    # EMNIST: the legacy archive, its two members unpacked, the loader's arrays from them
    source = json.loads((project / paths.raw_source("emnist")).read_text())
    assert (source["source"], source["route"], source["standin"]) == ("url", "archive", False)
    assert source["location"] == f"{server.url}/fed_emnist_digitsonly.tar.bz2" and source["fallback_reasons"] == []
    assert source["archives"][0]["sha256"] == sha(archive) and source["archives"][0]["verified"] == "sha256"
    assert {f["name"]: f["sha256"] for f in source["files"]} == {k: sha(v) for k, v in members.items()}
    arrays, meta = load_prepared(project / paths.prepared_npz("emnist"))
    assert meta["source"] == "url" and meta["standin"] is False
    assert len(arrays["client_ids"]) == CLIENTS and arrays["x_train"].shape == (CLIENTS * 8, 784)

    # Stack Overflow: the archive's URL fails (404), the database route serves it, converted to the .h5 files
    source = json.loads((project / paths.raw_source("stackoverflow")).read_text())
    assert (source["source"], source["route"], source["standin"]) == ("url", "tff_sqlite", False)
    assert any("stackoverflow.tar.bz2" in r and "404" in r for r in source["fallback_reasons"])
    assert sorted(f["name"] for f in source["files"]) == [
        "stackoverflow.tag_count", "stackoverflow.word_count", "stackoverflow_test.h5", "stackoverflow_train.h5"]
    assert "content check 'tff_sqlite'" in source["archives"][0]["verified"]
    assert ("stackoverflow.sqlite.lzma", None, 200) in server.requests
    arrays, meta = load_prepared(project / paths.prepared_npz("stackoverflow"))
    assert meta["standin"] is False and len(arrays["client_ids"]) == CLIENTS
    assert arrays["x_train_indptr"][-1] > 0 and arrays["y_train"].shape[1] == stackoverflow.TAG_VOCAB

    # creditcard: the plain CSV with Kaggle's quoting, checked by content, stored gzip-compressed
    source = json.loads((project / paths.raw_source("creditcard")).read_text())
    assert (source["source"], source["location"]) == ("url", f"{server.url}/creditcard.csv")
    (stored,) = source["files"]
    assert stored["name"] == "creditcard.csv.gz" and stored["content_sha256"] == sha(csv)
    assert stored["verified"].startswith("content check 'creditcard': 284807 rows, 31 columns, 492 frauds")
    arrays, meta = load_prepared(project / paths.prepared_npz("creditcard"))
    assert arrays["X"].shape == (284_807, 30) and int(arrays["y"].sum()) == 492 and meta["standin"] is False

    # the figure, and its sidecar naming where its data came from
    assert (project / figure).stat().st_size > 10_000
    sidecar = json.loads((project / paths.figure_dir("bietti2022", "fig1b") / "fig1b.meta.json").read_text())
    (used,) = [d for d in sidecar["datasets"] if d["dataset"] == "stackoverflow"]
    assert used["source"] == "url" and used["standin"] is False, used
    assert "stand-ins" not in out(proc)  # the end-of-run line names none


def test_a_full_disk_is_refused_then_a_cut_transfer_resumes_on_the_next_run(project, server, tmp_path):
    archive, members = emnist_archive()
    point_at(project, server, lambda datasets: serve(server, datasets["emnist"]["files"][0], archive))
    target, raw = paths.prepared_npz("emnist"), project / "data" / "raw" / "emnist"

    # a download larger than any disk: refused before the transfer starts, nothing left behind
    server.lengths["fed_emnist_digitsonly.tar.bz2"] = 10**18
    proc = snakemake(project, target)
    assert proc.returncode != 0
    log = (project / paths.data_logs("emnist") / "download.log").read_text()
    assert "emnist: fed_emnist_digitsonly.tar.bz2: not enough free disk space in" in log
    assert "the download and its unpacked members need" in log
    assert re.search(r"need 7,000,000,000,000,000,000 bytes \(7\.0 EB\), [\d,]+ bytes \([\d.]+ [kMGTP]?B\) are "
                     r"free", log), log
    assert not raw.exists() or not any(raw.rglob("*")), sorted(raw.rglob("*"))

    # cut off half-way, then the server goes away: the run fails, the partial file stays
    del server.lengths["fed_emnist_digitsonly.tar.bz2"]
    server.drops, server.vanish_after_drop = 1, True
    proc = snakemake(project, target)
    assert proc.returncode != 0
    log = (project / paths.data_logs("emnist") / "download.log").read_text()
    assert "the next run resumes after them" in log, log[-3000:]
    (partial,) = (raw / ".partial").iterdir()
    assert partial.stat().st_size == len(archive) // 2
    assert not (project / paths.raw_source("emnist")).exists()

    # the server is back (same address): the next run asks for the rest, and the sha256 matches
    port = server.port
    server.close()
    again = Server(port)
    again.files = dict(server.files)
    try:
        proc = snakemake(project, target)
        assert proc.returncode == 0, out(proc)[-4000:]
        assert again.requests == [("fed_emnist_digitsonly.tar.bz2", f"bytes={len(archive) // 2}-", 206)]
    finally:
        again.close()
    source = json.loads((project / paths.raw_source("emnist")).read_text())
    assert source["archives"][0]["sha256"] == sha(archive) and source["source"] == "url"
    assert {f["name"]: f["sha256"] for f in source["files"]} == {k: sha(v) for k, v in members.items()}
    assert not (raw / ".partial").exists()
    assert load_prepared(project / target)[1]["standin"] is False
