"""The data rules (workflow/rules/data.smk) end to end on temporary copies of the project: stand-ins when no real
source works, the mirror when one is given, a clear failure with `data_source=real`, and reruns that follow the
catalog and data_source exactly. The copied catalog points every URL at a closed local port and drops the Kaggle
slugs, so nothing is downloaded."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from dpfl.data import load_prepared

ROOT = Path(__file__).resolve().parent.parent
MIRROR = Path(os.environ.get("DPFL_DATA_MIRROR") or ROOT.parent / "shared" / "datasets")
TARGETS = ["data/prepared/insurance.npz", "data/prepared/obesity.npz"]

pytestmark = pytest.mark.pipeline


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def project(tmp_path):
    dest = tmp_path / "project"
    dest.mkdir()
    for item in ("Snakefile", "workflow", "config", "src", "profiles"):
        src = ROOT / item
        if src.is_dir():
            shutil.copytree(src, dest / item, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(src, dest / item)
    catalog = yaml.safe_load((dest / "config" / "datasets.yaml").read_text())
    port = closed_port()
    for entry in catalog["datasets"].values():
        entry["kaggle"] = None
        for f in entry["files"]:
            f["urls"] = [f"http://127.0.0.1:{port}/{f['name']}"]
    (dest / "config" / "datasets.yaml").write_text(yaml.safe_dump(catalog, sort_keys=False))
    return dest


def snakemake(project: Path, *args: str, mirror: Path | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "DPFL_DATA_MIRROR") and not k.startswith("KAGGLE_")}
    env["HOME"] = str(project / "home")  # no Kaggle credentials
    if mirror:
        env["DPFL_DATA_MIRROR"] = str(mirror)
    return subprocess.run([sys.executable, "-m", "snakemake", "--cores", "2", *args], cwd=project, env=env,
                          capture_output=True, text=True, timeout=600)


def planned(proc) -> set[str]:
    outs = set()
    for line in (proc.stdout + proc.stderr).splitlines():
        m = re.match(r"\s+output:\s+(.*)", line)
        if m:
            outs |= {p.strip() for p in m.group(1).split(",")}
    return outs


def test_standins_then_reruns_follow_the_catalog(project):
    proc = snakemake(project, *TARGETS)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for dataset in ("insurance", "obesity"):
        arrays, meta = load_prepared(project / f"data/prepared/{dataset}.npz")
        assert meta["source"] == "standin" and meta["standin"] is True
        log = (project / f"results/logs/data/{dataset}/download.log").read_text()
        assert "generating the synthetic stand-in" in log and "failed:" in log
    again = snakemake(project, "-n", *TARGETS)
    assert "Nothing to be done" in again.stdout + again.stderr

    # a per-dataset data_source override reruns that dataset only
    outs = planned(snakemake(project, "-n", *TARGETS, "--config", "dataset_source={insurance: standin}"))
    assert outs == {"data/raw/insurance/SOURCE.json", "data/prepared/insurance.npz"}

    # so does an edit of one dataset's catalog entry
    path = project / "config" / "datasets.yaml"
    path.write_text(path.read_text().replace("Estimation of obesity levels", "Estimation of obesity level", 1))
    assert planned(snakemake(project, "-n", *TARGETS)) == {"data/raw/obesity/SOURCE.json", "data/prepared/obesity.npz"}


def test_real_without_a_source_fails_clearly(project):
    proc = snakemake(project, "data/prepared/insurance.npz", "--config", "data_source=real")
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "dataset 'insurance': no real source worked (data_source: real)" in out
    assert "- mirror: no mirror configured" in out and "Connection refused" in out
    assert "- kaggle" not in out  # the copied catalog has no Kaggle slug
    assert not (project / "data" / "raw" / "insurance").exists() or not any((project / "data/raw/insurance").iterdir())
    assert not (project / "data" / "prepared").exists()


@pytest.mark.skipif(not (MIRROR / "insurance").is_dir(), reason=f"no dataset mirror at {MIRROR}")
def test_mirror_is_used_when_given(project):
    proc = snakemake(project, *TARGETS, "--config", "data_source=real", mirror=MIRROR)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for dataset in ("insurance", "obesity"):
        _, meta = load_prepared(project / f"data/prepared/{dataset}.npz")
        assert meta["source"] == "mirror" and meta["standin"] is False and meta["location"] == str(MIRROR / dataset)
