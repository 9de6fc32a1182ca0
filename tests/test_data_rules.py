"""The data rules (workflow/rules/data.smk) end to end on temporary copies of the project: stand-ins when no real
source works (with a visible warning), the mirror when one is given, a clear failure with `data_source=real`, reruns
that follow the catalog and data_source exactly, real data that stays put whatever the mirror setting is later, and
an edited raw file caught with the command that fixes it. The copied catalog points every URL at a closed local port
and drops the Kaggle slugs, so nothing is downloaded. The mirror is the shared one when present, else a fake one
made in the test."""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from dpfl.data import load_prepared
from dpfl.data.common import sha256_file, standin_seed

ROOT = Path(__file__).resolve().parent.parent
MIRROR = Path(os.environ.get("DPFL_DATA_MIRROR") or ROOT.parent / "shared" / "datasets")
TARGETS = ["data/prepared/insurance.npz", "data/prepared/obesity.npz"]

pytestmark = pytest.mark.pipeline


@pytest.fixture
def project(make_project):
    """A copy of the project in tmp_path/project whose catalog downloads nothing (conftest.make_project)."""
    return make_project(("workflow", "config", "src", "profiles"), into="project", offline_catalog=True)


@pytest.fixture
def mirror(project, tmp_path) -> Path:
    """A dataset mirror with insurance and obesity: the shared one when present, else a fake one made of their
    stand-ins, whose checksums the copied catalog then lists (so that they count as the real data)."""
    if all((MIRROR / d).is_dir() for d in ("insurance", "obesity")):
        return MIRROR
    fake = tmp_path / "mirror"
    path = project / "config" / "datasets.yaml"
    catalog = yaml.safe_load(path.read_text())
    for dataset in ("insurance", "obesity"):
        entry = catalog["datasets"][dataset]
        folder = fake / entry["mirror"]
        folder.mkdir(parents=True)
        importlib.import_module(f"dpfl.data.standins.{entry['standin']}").generate(folder, standin_seed(dataset))
        for f in entry["files"]:
            f["sha256"], f["alt_sha256"] = sha256_file(folder / f["name"]), []
    path.write_text(yaml.safe_dump(catalog, sort_keys=False))
    return fake


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


def nothing_to_do(proc) -> bool:
    return proc.returncode == 0 and "Nothing to be done" in proc.stdout + proc.stderr


def test_mirror_is_used_when_given(project, mirror):
    proc = snakemake(project, *TARGETS, "--config", "data_source=real", mirror=mirror)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for dataset in ("insurance", "obesity"):
        _, meta = load_prepared(project / f"data/prepared/{dataset}.npz")
        assert (meta["source"] == "mirror" and meta["standin"] is False
                and meta["location"] == os.path.realpath(mirror / dataset))
        assert meta["fallback_reasons"] == []


def test_real_data_stays_whatever_the_mirror_setting_is_later(project, mirror):
    """Data identity is its verified content: a new shell without the mirror variable, or with another mirror, plans
    nothing (offline it would otherwise swap the real data for stand-ins); switching to stand-ins still reruns."""
    proc = snakemake(project, TARGETS[0], mirror=mirror)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    again = snakemake(project, "-n", TARGETS[0])
    assert nothing_to_do(again), again.stdout + again.stderr
    assert planned(snakemake(project, "-n", TARGETS[0], "--config", "data_source=standin")) == {
        "data/raw/insurance/SOURCE.json", "data/prepared/insurance.npz"}


def test_mirror_named_through_a_symlink(project, mirror, tmp_path):
    link = tmp_path / "link-to-mirror"
    link.symlink_to(mirror)
    proc = snakemake(project, TARGETS[0], mirror=link)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    _, meta = load_prepared(project / TARGETS[0])
    assert meta["source"] == "mirror" and meta["location"] == os.path.join(os.path.realpath(mirror), "insurance")
    again = snakemake(project, "-n", TARGETS[0])
    assert nothing_to_do(again), again.stdout + again.stderr


def test_a_mirror_given_after_a_standin_fallback_fetches_the_real_data(project, mirror):
    proc = snakemake(project, TARGETS[0])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert load_prepared(project / TARGETS[0])[1]["standin"] is True
    proc = snakemake(project, TARGETS[0], mirror=mirror)  # planned again (the jobs it ran are listed as planned)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert planned(proc) == {"data/raw/insurance/SOURCE.json", "data/prepared/insurance.npz"}
    _, meta = load_prepared(project / TARGETS[0])
    assert meta["source"] == "mirror" and meta["standin"] is False
    again = snakemake(project, "-n", TARGETS[0])  # and then it stays, without the mirror too
    assert nothing_to_do(again), again.stdout + again.stderr


def test_a_mistyped_mirror_stops_the_run_and_a_mirror_without_the_dataset_warns_on_the_console(project, tmp_path):
    """A mirror path that does not exist stops the run before any job (it would otherwise fall back to the stand-ins
    with data_source auto); a mirror that lacks the dataset still ends well (exit status 0), but says why it used a
    stand-in."""
    typo = tmp_path / "shared" / "datsets"
    proc = snakemake(project, TARGETS[0], mirror=typo)
    assert proc.returncode != 0 and not (project / "data" / "raw").exists()
    assert (f"dpfl configuration error: the data mirror {typo} does not exist (from the environment variable "
            "DPFL_DATA_MIRROR)") in proc.stderr
    typo.mkdir(parents=True)
    proc = snakemake(project, TARGETS[0], mirror=typo)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for text in (proc.stderr, (project / "results/logs/data/insurance/download.log").read_text()):
        assert "WARNING: insurance: no real source worked, using the SYNTHETIC STAND-IN" in text
        assert f"the mirror {typo} has no insurance/ folder" in text
    reasons = load_prepared(project / TARGETS[0])[1]["fallback_reasons"]
    assert reasons[0] == f"mirror {typo / 'insurance'}: insurance: the mirror {typo} has no insurance/ folder"


def test_edited_raw_file_is_caught_with_the_command_that_fixes_it(project, mirror):
    proc = snakemake(project, TARGETS[0], mirror=mirror)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    raw = project / "data" / "raw" / "insurance" / "insurance.csv"
    good = raw.read_bytes()
    raw.write_bytes(good.replace(b"\n", b"\n1", 1))  # one edited age
    proc = snakemake(project, TARGETS[0], "--forcerun", "prepare", mirror=mirror)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "data/raw/insurance/insurance.csv" in out
    command = re.search(r"fetch it again: \S*snakemake (.*--forcerun download)", out)
    assert command, out
    # it reruns exactly this dataset's download and prepare, and restores the verified file
    proc = snakemake(project, *command.group(1).split(), mirror=mirror)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert planned(proc) == {"data/raw/insurance/SOURCE.json", "data/prepared/insurance.npz"}
    assert raw.read_bytes() == good and load_prepared(project / TARGETS[0])[1]["source"] == "mirror"
