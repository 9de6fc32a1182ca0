"""What a run says about itself (dpfl.runinfo): the datasets its selected figures used stand-ins for, in the run's
last lines (Snakemake's onsuccess and onerror handlers); the build's commit ("dirty", or "not a git checkout"); the
repository's web address derived from the `origin` remote."""

from __future__ import annotations

import io
import json
import re
import subprocess
from pathlib import Path

import pytest

from dpfl import config, paths, runinfo

ROOT = Path(__file__).resolve().parents[1]
GIT = ["git", "-c", "user.name=dpfl tests", "-c", "user.email=tests@dpfl.invalid", "-c", "commit.gpgsign=false"]


def git_checkout(path: Path, remote: str | None = None) -> Path:
    """A git checkout at `path` with one commit (README.md tracked) and, if given, an `origin` remote."""
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run([*GIT, "init", "-q"], cwd=path, check=True)
    (path / "README.md").write_text("demo\n")
    subprocess.run([*GIT, "add", "-A"], cwd=path, check=True)
    subprocess.run([*GIT, "commit", "-q", "-m", "one"], cwd=path, check=True)
    if remote:
        subprocess.run(["git", "remote", "add", "origin", remote], cwd=path, check=True)
    return path


@pytest.mark.parametrize("remote, web", [
    ("git@github.com:owner/dpfl-repro.git", "https://github.com/owner/dpfl-repro"),
    ("git@github.com:owner/dpfl-repro", "https://github.com/owner/dpfl-repro"),
    ("https://github.com/owner/dpfl-repro.git", "https://github.com/owner/dpfl-repro"),
    ("https://github.com/owner/dpfl-repro", "https://github.com/owner/dpfl-repro"),
    ("https://user:secret@gitlab.example.org/group/sub/repo.git/", "https://gitlab.example.org/group/sub/repo"),
    ("ssh://git@github.com:22/owner/repo.git", "https://github.com/owner/repo"),
    ("/srv/git/repo.git", None),
    ("file:///srv/git/repo.git", None),
    ("git@myalias:owner/repo.git", None),  # an ssh alias names no web host
    ("", None),
])
def test_the_web_address_comes_from_the_remote_without_credentials(remote, web):
    assert runinfo.web_url(remote) == web


def test_the_build_names_its_commit_dirty_or_not_a_git_checkout(tmp_path):
    info = runinfo.build_info(tmp_path / "plain")
    assert not info["git"] and info["text"] == "not a git checkout" and re.fullmatch(
        r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", info["date"])
    repo = git_checkout(tmp_path / "repo", "git@github.com:owner/dpfl-repro.git")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()
    info = runinfo.build_info(repo)
    assert info["commit"] == head and head.startswith(info["short"]) and not info["dirty"]
    assert info["text"] == f"commit {info['short']}" and info["web"] == "https://github.com/owner/dpfl-repro"
    assert (runinfo.blob_url(info, repo / "docs/reproduction/x.md")
            == f"https://github.com/owner/dpfl-repro/blob/{head}/docs/reproduction/x.md")
    assert runinfo.blob_url(info, tmp_path / "elsewhere.md") is None
    (repo / "untracked.txt").write_text("x")  # not a change to the committed code
    assert not runinfo.build_info(repo)["dirty"]
    (repo / "README.md").write_text("changed\n")
    info = runinfo.build_info(repo)
    assert info["dirty"] and info["text"] == f"commit {info['short']}, dirty"


def _source(root: Path, dataset: str, standin: bool, reasons=(), data_source="auto") -> None:
    path = root / paths.raw_source(dataset)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"dataset": dataset, "standin": standin, "data_source": data_source,
                                "fallback_reasons": list(reasons)}))


def test_the_run_ends_naming_the_stand_ins_of_its_selected_figures(tmp_path):
    """lowy2023 Figs 4-5 read mnist and insurance: mnist fell back to its stand-in (why: the failed sources), insurance
    is real; creditcard's stand-in belongs to figures this run did not select, so it is not named."""
    cfg = config.load(ROOT, None)
    url_error = "url https://example.org/train-images-idx3-ubyte.gz: mnist: URLError: " + "x" * 200
    _source(tmp_path, "mnist", True, ["mirror: no mirror configured (DPFL_DATA_MIRROR)", url_error, url_error])
    _source(tmp_path, "insurance", False)
    _source(tmp_path, "creditcard", True, ["mirror: no mirror configured (DPFL_DATA_MIRROR)"])
    out = io.StringIO()
    line = runinfo.say_standins(cfg, lambda: [("lowy2023", "fig4", "none"), ("lowy2023", "fig5", "none")],
                                tmp_path, out)
    assert out.getvalue() == line + "\n"
    assert line.startswith("dpfl: WARNING: 1 dataset used a stand-in: mnist (no real source worked (mirror, 2 × url): "
                           "mirror: no mirror configured (DPFL_DATA_MIRROR); and 2 more; real data: 11.6 MB to "
                           "download with `dataset_source: {mnist: real}` in config/config.yaml, or a copy in the "
                           "mirror)"), line
    assert "creditcard" not in line and "insurance" not in line and "SOURCE.json" in line
    _source(tmp_path, "insurance", True, data_source="standin")
    line = runinfo.say_standins(cfg, [("lowy2023", "fig5", "none"), ("lowy2023", "fig4", "none")], tmp_path,
                                io.StringIO())
    assert "2 datasets used stand-ins: insurance (the configuration asks for the stand-in (data_source: standin); " \
           "real data: 55.6 kB to download with `dataset_source: {insurance: real}`" in line, line
    assert "), mnist (no real source worked" in line, line
    # the failed source's message is cut for the console (the report shows every line in full)
    only = runinfo.standin_datasets(["mnist"], tmp_path, width=runinfo.CONSOLE_REASON_CHARS)[0]
    assert only["reasons"][1] == url_error and "x" * 200 not in only["reason"]
    assert runinfo.standin_summary([url_error], False, width=40).endswith("…")
    quiet = io.StringIO()
    assert runinfo.say_standins(cfg, [("balle2020", "fig2", "none")], tmp_path, quiet) == "" and not quiet.getvalue()


def test_the_end_of_run_line_never_raises(tmp_path):
    def broken():
        raise RuntimeError("no configuration")

    out = io.StringIO()
    assert "could not list the datasets that used stand-ins (RuntimeError: no configuration)" in runinfo.say_standins(
        None, broken, tmp_path, out)


def test_both_end_of_run_handlers_end_with_the_stand_in_line():
    """workflow/rules/report.smk: onsuccess and onerror each call say_standins (imported in common.smk) last, after
    the report refresh."""
    assert "from dpfl.runinfo import say_standins" in (ROOT / "workflow/rules/common.smk").read_text()
    text = (ROOT / "workflow/rules/report.smk").read_text()
    for handler in ("onsuccess", "onerror"):
        body = re.search(rf"^{handler}:\n((?:    .*\n|\n)+?)(?=\S)", text, re.M).group(1)
        lines = [ln.strip() for ln in body.splitlines() if ln.strip()]
        assert lines[-1] == "say_standins(CFG, selected_variants)", (handler, lines)
