"""The reproduction record (dpfl.record, `python -m dpfl record`): an entry for every registered figure, the claims
as the build judged them, images small enough to commit, and `--check` telling a stale entry from a current one."""

import hashlib
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from dpfl import cli, config, jobs, paths, record
from dpfl.papers import FIGURES, PAPERS

ROOT = Path(__file__).resolve().parents[1]
MISSING = ("kato2024", "fig5")  # left out of the fake build: its entry must say "not built"


@pytest.fixture
def project(tmp_path):
    """A copy of the configuration (check() reads today's settings from it) and a fake paper-scale build whose
    meta files carry the settings hash of that configuration. Its src/ is this checkout's (a link): the command line
    refuses a project checkout other than the one the dpfl package in use comes from."""
    root = tmp_path / "project"
    for sub in ("config", "workflow/schemas"):
        shutil.copytree(ROOT / sub, root / sub)
    (root / "workflow" / "Snakefile").write_text("")
    (root / "src").symlink_to(ROOT / "src", target_is_directory=True)
    _commit(root)  # a record names the commit of the checkout that made the build, and refuses uncommitted changes
    results = tmp_path / "results"
    cfg = config.load(root, {"scale": "paper"})
    png = _png(tmp_path / "tiny.png", 40)
    for (paper, figure), fdef in FIGURES.items():
        if (paper, figure) == MISSING:
            continue
        d = results / Path(paths.figure_dir(paper, figure)).relative_to("results")
        d.mkdir(parents=True)
        meta = {"scale": "paper", "data_source": "real" if fdef.kind == "experiment" else "analytic",
                "datasets": [], "reduced_scale": False, "reductions": {},
                "config_hash": jobs.settings_hash(cfg, paper, figure, "none"), "compute_seconds": 1.0,
                "cells_training_seconds": 2.0, "device": {"cpu_count": 2, "accelerator": "none (CPU)"}}
        (d / f"{figure}.meta.json").write_text(json.dumps(meta))
        claims = [{"id": c["id"], "claim": c["claim"], "verdict": "pass", "reason": "passes"}
                  for c in cfg.figure(paper, figure).get("claims", [])]
        (d / "claims.json").write_text(json.dumps({"claims": claims}))
        shutil.copy(png, d / f"{figure}.png")
    return root, results


def _commit(checkout: Path) -> None:
    """Commit every file of `checkout` (made a git repository first if it is none; results/ ignored, as in the
    project)."""
    git = ["git", "-c", "user.name=dpfl tests", "-c", "user.email=tests@dpfl.invalid", "-c", "commit.gpgsign=false"]
    if not (checkout / ".git").exists():
        subprocess.run([*git, "init", "-q"], cwd=checkout, check=True)
        (checkout / ".gitignore").write_text("results/\n")
    subprocess.run([*git, "add", "-A"], cwd=checkout, check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "build"], cwd=checkout, check=True)


def _png(path: Path, size: int) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rng = np.random.default_rng(0)
    fig = plt.figure(figsize=(size / 10, size / 10), dpi=10)
    fig.figimage(rng.random((size, size, 3)))
    fig.savefig(path, dpi=10)  # size pixels a side, whatever savefig.dpi another test left in rcParams
    plt.close(fig)
    return path


def test_every_registered_figure_has_an_entry_and_every_configured_claim_appears(project):
    root, results = project
    out = root / paths.RECORD_DIR
    rec = record.build(root, results, None, list(PAPERS), "python -m dpfl record")
    cfg = config.load(root, {"scale": "paper"})
    for (paper, figure) in FIGURES:
        entries = [e for e in rec["papers"][paper]["entries"] if e["figure"] == figure and e["mode"] == "none"]
        assert len(entries) == 1, (paper, figure)
        if (paper, figure) == MISSING:
            assert entries[0]["status"] == "not built"
            continue
        assert entries[0]["status"] == "built" and (out / entries[0]["image"]).exists()
        ids = {c["id"] for c in entries[0]["claims"]}
        assert ids == {c["id"] for c in cfg.figure(paper, figure).get("claims", [])}, (paper, figure)
    summary = (out / "README.md").read_text()
    assert f"- {MISSING[0]} {MISSING[1]}: not in the recorded build" in summary
    assert "| [lowy2023](lowy2023.md) |" in summary
    page = (out / "lowy2023.md").read_text()
    assert "![lowy2023 fig4](images/lowy2023-fig4.png)" in page and "**pass**" in page
    assert record.check(root) == []


def test_check_names_the_entries_whose_settings_or_code_changed(project):
    root, results = project
    record.build(root, results, None, ["balle2020", "lowy2023"], "python -m dpfl record")
    paper_file = root / "config/papers/lowy2023.yaml"
    paper_file.write_text(paper_file.read_text().replace("trials: 20", "trials: 21", 1))
    rec_path = root / paths.RECORD_DIR / "record.json"
    rec = json.loads(rec_path.read_text())
    entry = next(e for e in rec["papers"]["balle2020"]["entries"] if e["figure"] == "table1")
    first = sorted(entry["code_files"])[0]
    entry["code_files"][first] = "0" * 12
    rec_path.write_text(json.dumps(rec))
    stale = record.check(root)
    assert any(line.startswith("lowy2023/fig4: settings changed") for line in stale), stale
    assert any(line.startswith("balle2020/table1: code changed") and first in line for line in stale), stale
    assert not any(line.startswith("balle2020/fig2") for line in stale), stale


def test_recording_one_paper_keeps_the_others(project):
    root, results = project
    record.build(root, results, None, ["balle2020"], "first")
    rec = record.build(root, results, None, ["asoodeh2021"], "second")
    assert set(rec["papers"]) == {"balle2020", "asoodeh2021"}
    assert {e["command"] for e in rec["papers"]["balle2020"]["entries"]} == {"first"}
    assert "not recorded" in (root / paths.RECORD_DIR / "README.md").read_text()  # the three papers not yet recorded


def test_recording_some_figures_keeps_the_papers_other_entries_with_their_own_build(project, monkeypatch, capsys):
    """A record is built in pieces: --figures replaces only the entries of the figures named (both modes), and every
    entry keeps the build (date, commit, command) it came from; the paper's page lists each build once."""
    root, results = project
    record.build(root, results, None, ["kato2024"], "whole paper")
    shutil.rmtree(results / "kato2024/fig6")
    monkeypatch.chdir(root)
    assert cli.main(["record", "--results", str(results), "--figures", "kato2024/fig4", "kato2024/fig6"]) == 0
    assert "recorded now: fig4, fig6" in capsys.readouterr().out
    rec = json.loads((root / paths.RECORD_DIR / "record.json").read_text())["papers"]["kato2024"]
    by_figure = {e["figure"]: e for e in rec["entries"] if e["mode"] == "none"}
    assert by_figure["fig7"]["command"] == "whole paper" and by_figure["fig7"]["status"] == "built"
    assert by_figure["fig4"]["command"].endswith("--figures kato2024/fig4 kato2024/fig6")
    assert by_figure["fig6"]["status"] == "not built" and by_figure["fig6"]["command"] == by_figure["fig4"]["command"]
    page = (root / paths.RECORD_DIR / "kato2024.md").read_text()
    assert "1. recorded" in page and "by `whole paper` from a build" in page and "2. recorded" in page
    assert [e["figure"] for e in rec["entries"] if e["mode"] == "none"] == [f for p, f in FIGURES if p == "kato2024"]
    assert cli.main(["record", "--results", str(results), "--figures", "kato2024/fig99"]) == 2
    assert "expected PAPER/FIGURE, one of: kato2024/fig2" in capsys.readouterr().err
    shutil.rmtree(results / "kato2024/fig7")
    assert cli.main(["record", "--results", str(results), "--figures", "kato2024/fig7"]) == 2
    assert "holds no built figure of kato2024/fig7" in capsys.readouterr().err


def test_an_entrys_code_is_the_build_checkouts_so_an_older_build_shows_as_stale(project, tmp_path):
    """Entries hash the code of the checkout that made the results (its parent, when that holds src/dpfl): a
    build made with other code than today's is recorded as stale, not as current."""
    root, results = project
    clone = tmp_path / "clone"
    shutil.copytree(ROOT / "src", clone / "src", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(results / "balle2020", clone / "results/balle2020")
    _commit(clone)
    assert record.build_checkout(clone / "results") == clone and record.build_checkout(results) is None
    record.build(root, clone / "results", None, ["balle2020"], "python -m dpfl record")
    assert record.check(root) == []
    plot = clone / "src/dpfl/plotting.py"
    plot.write_text(plot.read_text() + "\n# an older build's code\n")
    _commit(clone)
    # its outputs are older than the code now in that checkout: recorded as they are, they would pass for a build
    # of that code; refused until rebuilt (here: touched, as Snakemake's rerun would leave them)
    with pytest.raises(record.RecordError, match=r"built by older code than its checkout holds \(.*fig2.png is "
                                                 r"older than .*src/dpfl/plotting.py"):
        record.build(root, clone / "results", None, ["balle2020"], "python -m dpfl record")
    # or left out with why (e.g. its rebuild's cost): then recorded as not built, never as a build of that code
    rec = record.build(root, clone / "results", None, {"balle2020": {"fig2"}}, "python -m dpfl record",
                       why={("balle2020", "fig2"): "not built for this record: ≈ 1 s"})
    fig2 = next(e for e in rec["papers"]["balle2020"]["entries"] if e["figure"] == "fig2")
    assert fig2["status"] == "not built" and "≈ 1 s" in fig2["why"]
    for path in (clone / "results").rglob("*"):
        os.utime(path)
    record.build(root, clone / "results", None, ["balle2020"], "python -m dpfl record")
    stale = record.check(root)
    assert stale and all("code changed since the record (src/dpfl/plotting.py" in line for line in stale), stale


def test_a_record_written_per_paper_is_read_per_entry(project):
    """A record.json from before entries carried their build (recorded, commit, command per paper) is upgraded:
    each entry and claim takes its paper's, and recording another figure keeps them."""
    root, results = project
    rec = record.build(root, results, None, ["lowy2023"], "old")
    part = rec["papers"]["lowy2023"]
    for item in part["entries"] + part["paper_claims"]:
        for k in record.BUILD_KEYS:
            item.pop(k, None)
    part.update({"recorded": "2026-01-01", "commit": "abc", "dirty": False, "command": "per paper"})
    (root / paths.RECORD_DIR / "record.json").write_text(json.dumps(rec))
    assert record.for_report(root)[("lowy2023", "fig5", "none")]["commit"] == "abc"  # the report reads it as well
    new = record.build(root, results, None, {"lowy2023": {"fig4"}}, "new")["papers"]["lowy2023"]
    fig5 = next(e for e in new["entries"] if e["figure"] == "fig5" and e["mode"] == "none")
    assert (fig5["recorded"], fig5["commit"], fig5["command"]) == ("2026-01-01", "abc", "per paper")
    assert set(new) == {"entries", "paper_claims"}


def test_a_large_figure_is_shrunk_below_the_commit_limit(tmp_path):
    big = _png(tmp_path / "big.png", 900)
    assert big.stat().st_size > record.MAX_IMAGE_BYTES
    small = record.entries._image(big)
    assert len(small) <= record.MAX_IMAGE_BYTES and small[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_command_line_explains_a_missing_build_and_an_unknown_paper(project, monkeypatch, capsys):
    root, results = project
    monkeypatch.chdir(root)
    assert cli.main(["record", "--results", str(root / "nowhere")]) == 2
    assert "no results directory" in capsys.readouterr().err
    assert cli.main(["record", "--results", str(results), "--papers", "lowy2032"]) == 2
    assert "unknown paper 'lowy2032'" in capsys.readouterr().err
    assert cli.main(["record", "--check"]) == 2
    assert "python -m dpfl record builds it" in capsys.readouterr().err
    assert cli.main(["record", "--results", str(results), "--papers", "balle2020"]) == 0
    assert cli.main(["record", "--check"]) == 0
    assert "0 stale entries" in capsys.readouterr().out


def test_the_command_line_refuses_a_project_checkout_other_than_the_packages(tmp_path, monkeypatch, capsys):
    """`record` and `record --check` take the settings and the record from the project checkout they run in, and the
    code hashes from the imported dpfl package: run in another checkout (its own src/dpfl, or none), they stop
    before reading anything, naming both and how to run them consistently."""
    other = tmp_path / "other"
    (other / "config").mkdir(parents=True)
    (other / "config" / "config.yaml").write_text("scale: quick\n")
    (other / "workflow").mkdir()
    (other / "workflow" / "Snakefile").write_text("")
    package = (ROOT / "src" / "dpfl").resolve()
    monkeypatch.chdir(other / "config")  # a sub-folder: the checkout is found above it
    for argv, has in ((["record", "--check"], "with no src/dpfl"), (["record", "--results", "results"], None)):
        assert cli.main(argv) == 2
        err = " ".join(capsys.readouterr().err.split())
        assert f"the project checkout here ({other.resolve()}, with no src/dpfl)" in err, err
        assert f"imported from ({package})" in err and f"run the command from that checkout ({ROOT})" in err, err
        assert "PYTHONPATH=src" not in err  # this one has no code of its own to use
    (other / "src" / "dpfl").mkdir(parents=True)
    (other / "src" / "dpfl" / "__init__.py").write_text("")
    assert cli.main(["record", "--check"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"({other.resolve()}, with its own src/dpfl)" in err and f"({package})" in err, err
    assert f"cd {other.resolve()} && PYTHONPATH=src python -m dpfl record" in err, err
    record.same_checkout(ROOT)  # the package's own checkout is fine


def test_the_committed_record_covers_every_figure_and_claim():
    """The record under docs/reproduction/ (built paper by paper): every recorded paper has an entry for each of its
    registered figures, every claim the configuration gives its built figures appears, every image it names is
    committed and small, and the summary page lists every paper (those not recorded yet say so)."""
    path = ROOT / paths.RECORD_DIR / "record.json"
    if not path.exists():
        pytest.skip("no reproduction record committed yet (python -m dpfl record builds it)")
    rec = json.loads(path.read_text())
    cfg = config.load(ROOT, {"scale": "paper"})
    summary = (ROOT / paths.RECORD_DIR / "README.md").read_text()
    for paper in PAPERS:
        if paper not in rec["papers"]:
            assert f"| {paper} | not recorded |" in summary, paper
            continue
        assert f"| [{paper}]({paper}.md) |" in summary, paper
        part = rec["papers"][paper]
        figures = {e["figure"] for e in part["entries"]}
        registered = {f for p, f in FIGURES if p == paper}
        assert figures <= registered, (paper, figures - registered)  # an unregistered entry is stale (check)
        assert registered - figures == {f for p, f in record.not_recorded(ROOT) if p == paper}, paper
        recorded = {c["id"] for e in part["entries"] for c in e.get("claims", [])} | {
            c["id"] for c in part["paper_claims"]}
        built = {e["figure"] for e in part["entries"] if e["status"] == "built"}
        configured = {c["id"] for f in built for c in cfg.figure(paper, f).get("claims", [])}
        assert configured <= recorded, (paper, configured - recorded)
        for e in part["entries"]:
            if e.get("image"):
                image = ROOT / paths.RECORD_DIR / e["image"]
                assert image.exists() and image.stat().st_size <= record.MAX_IMAGE_BYTES, image


def test_readmes_status_table_points_to_each_recorded_papers_page():
    """README's status table: a recorded paper's row links its record page; one not recorded says so."""
    path = ROOT / paths.RECORD_DIR / "record.json"
    recorded = set(json.loads(path.read_text())["papers"]) if path.exists() else set()
    readme = (ROOT / "README.md").read_text().splitlines()
    for paper in PAPERS:
        row = next(line for line in readme if line.startswith("| ") and f"(`{paper}`)" in line)
        if paper in recorded:
            assert row.endswith(f"| [{paper}](docs/reproduction/{paper}.md) |"), row
        else:
            assert "not recorded yet" in row, row


def test_the_report_reads_each_entry_with_its_staleness_and_anchor(project):
    """dpfl.record.for_report: what the HTML report shows beside a figure (verdicts, date, commit, page and anchor),
    stale once the figure's settings change."""
    root, results = project
    record.build(root, results, None, ["lowy2023", "kato2024"], "python -m dpfl record")
    shown = record.for_report(root)
    fig4 = shown[("lowy2023", "fig4", "none")]
    assert fig4["status"] == "built" and fig4["stale"] == "" and fig4["anchor"] == "fig4"
    assert {c["verdict"] for c in fig4["claims"]} == {"pass"}
    assert fig4["page"] == root / paths.RECORD_DIR / "lowy2023.md"
    assert shown[MISSING + ("none",)]["status"] == "not built"
    assert record.anchor({"figure": "fig5", "mode": "authors-code"}) == "fig5-authors-code"
    paper_file = root / "config/papers/lowy2023.yaml"
    paper_file.write_text(paper_file.read_text().replace("trials: 20", "trials: 19", 1))
    assert "settings changed" in record.for_report(root)[("lowy2023", "fig4", "none")]["stale"]


def test_a_figure_left_out_says_why_gpu_and_the_given_reason(project, monkeypatch, capsys):
    """A not-built row names a GPU figure as such (its cells' `gpu` resource at paper scale) and carries the --why
    text given for it, which the recorded command repeats; a malformed --why is a one-line error."""
    root, results = project
    monkeypatch.chdir(root)
    shutil.rmtree(results / Path(paths.figure_dir("kato2024", "fig10b")).relative_to("results"))
    assert cli.main(["record", "--results", str(results), "--papers", "kato2024",
                     "--why", "kato2024/fig5=≈ 9 h projected on 2 cores", "--why", "kato2024/fig10b=a GPU job"]) == 0
    rec = json.loads((root / paths.RECORD_DIR / "record.json").read_text())["papers"]["kato2024"]
    fig5 = next(e for e in rec["entries"] if e["figure"] == "fig5" and e["mode"] == "none")
    assert fig5["why"] == ("not in the recorded build; its cells are GPU jobs at paper scale (docs/gpu.md); "
                           "≈ 9 h projected on 2 cores")
    fig10b = next(e for e in rec["entries"] if e["figure"] == "fig10b" and e["mode"] == "none")
    assert fig10b["why"].endswith("; a GPU job")  # a repeated --why adds to the earlier ones
    assert "--why 'kato2024/fig5=≈ 9 h projected on 2 cores'" in fig5["command"]
    assert cli.main(["record", "--results", str(results), "--why", "fig5 needs a GPU"]) == 2
    assert "expected PAPER/FIGURE=TEXT" in capsys.readouterr().err


def test_run_time_counts_the_cells_the_table_read(project):
    """An entry's run time is its cells' wall-clock seconds (their timing sidecars) plus the table stage's."""
    root, results = project
    d = results / "lowy2023/fig4"
    (d / "cells").mkdir()
    (d / "cells/a.timing.json").write_text(json.dumps({"cell_seconds": 30.0}))
    (d / "cells/old.timing.json").write_text(json.dumps({"cell_seconds": 999.0}))  # not read by this table
    meta = json.loads((d / "fig4.meta.json").read_text())
    (d / "fig4.meta.json").write_text(json.dumps({**meta, "cells_read": ["a.parquet"]}))
    rec = record.build(root, results, None, ["lowy2023"], "python -m dpfl record")
    fig4 = next(e for e in rec["papers"]["lowy2023"]["entries"] if e["figure"] == "fig4" and e["mode"] == "none")
    assert fig4["seconds"] == 31.0 and fig4["shared_seconds"] == 0.0


def test_run_time_counts_the_runs_read_from_other_figures_cells(project):
    """A figure that reads runs from another figure's cells (bietti2022 Fig 1b: every cell is Fig 2's; kato2024 Fig
    10(a): one run of Fig 8's panel cell b) counts their seconds too: a whole cell's, or the runs' own."""
    root, results = project
    for cell in ("stackoverflow-local", "stackoverflow-sigma0"):
        path = results / "bietti2022/fig2/cells" / f"{cell}.timing.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"cell_seconds": 100.0}))
    (results / "kato2024/fig8/cells").mkdir(parents=True)
    runs = {"b-uldp_avg": {"seconds_per_round": 5.0, "rounds": 100},
            "b-uldp_avg_w": {"seconds_per_round": 4.0, "rounds": 100}}
    (results / "kato2024/fig8/cells/b.timing.json").write_text(json.dumps({"cell_seconds": 900.0, "runs": runs}))
    rec = record.build(root, results, None, ["bietti2022", "kato2024"], "python -m dpfl record")
    entry = {(p, e["figure"]): e for p in ("bietti2022", "kato2024") for e in rec["papers"][p]["entries"]
             if e["mode"] == "none"}
    assert entry[("bietti2022", "fig1b")]["shared_seconds"] == 200.0  # two of its 13 cells have timings here
    assert entry[("bietti2022", "fig1b")]["seconds"] == 201.0  # + the table stage's 1 s
    assert entry[("kato2024", "fig10a")]["shared_seconds"] == 400.0  # only the run b-uldp_avg_w of Fig 8's cell b
    page = (root / paths.RECORD_DIR / "kato2024.md").read_text()
    assert "(of which 400 s in cells shared with another figure)" in page


def test_a_refused_record_writes_nothing(project, tmp_path):
    """A selection with a paper that has no built figure is refused before anything is written: the images of the
    other papers' figures are not left behind."""
    root, results = project
    shutil.rmtree(results / Path(paths.figure_dir("bietti2022", "fig1a")).relative_to("results"))
    out = tmp_path / "out"
    with pytest.raises(record.RecordError, match="holds no built figure of bietti2022/fig1a"):
        record.build(root, results, None, {"kato2024": {"fig6"}, "bietti2022": {"fig1a"}}, "cmd", out=out)
    assert not out.exists()


def test_each_row_shows_its_own_quick_verdict_whatever_its_id_mode_or_variant(project, tmp_path):
    """Quick-scale verdicts are keyed by claim id, mode and variant: the same id in both modes of a claim over several
    figures, or twice in one claims file, shows each row's own quick verdict (keyed by id alone, one overwrote the
    other)."""
    root, results = project
    quick = tmp_path / "quick"
    shutil.copytree(results / "lowy2023", quick / "lowy2023")
    twice = [{"id": "C-Lmono", "claim": "errors fall with ε", "verdict": v, "reason": "r"} for v in ("pass", "fail")]
    for tree, verdicts in ((results, ("pass", "pass")), (quick, ("inconclusive", "fail"))):
        fig4 = [{**c, "verdict": v} for c, v in zip(twice, verdicts)]
        (tree / "lowy2023/fig4/claims.json").write_text(json.dumps({"claims": fig4}))
        for mode, verdict in (("none", verdicts[0]), ("authors-code", verdicts[1])):
            d = tree / "lowy2023" / paths.MODE_SUBDIR[mode]
            d.mkdir(parents=True, exist_ok=True)
            claim = {"id": "C-L89a", "claim": "MB-SGD beats Local SGD", "verdict": "pass", "reason": "r"}
            if tree is quick:
                claim["verdict"] = verdict
            (d / "claims-C-L89.json").write_text(json.dumps({"figures": ["fig8", "fig9"], "claims": [claim]}))
    rec = record.build(root, results, quick, ["lowy2023"], "python -m dpfl record")["papers"]["lowy2023"]
    fig4 = next(e for e in rec["entries"] if e["figure"] == "fig4")
    assert fig4["quick_verdicts"] == [{"id": "C-Lmono", "mode": "none", "variant": "none", "verdict": v}
                                      for v in ("inconclusive", "fail")]
    assert {(c["mode"], c["quick_verdict"]) for c in rec["paper_claims"]} == {("none", "inconclusive"),
                                                                              ("authors-code", "fail")}
    page = (root / paths.RECORD_DIR / "lowy2023.md").read_text().splitlines()
    fig4_rows = [line for line in page if line.startswith("| C-Lmono | errors fall with ε |")]
    assert [row.rsplit("|", 2)[-2].strip() for row in fig4_rows] == ["inconclusive", "fail"]
    cross_rows = [line for line in page if line.startswith("| C-L89a |")]
    assert [row.rsplit("|", 2)[-2].strip() for row in cross_rows] == ["inconclusive", "fail"]  # none, authors-code


def test_a_record_with_quick_verdicts_keyed_by_id_is_read_per_claim_mode_and_variant(project):
    """An older record.json ({id: verdict} per entry) is upgraded to {id, mode, variant, verdict} items when read."""
    part = {"entries": [{"figure": "fig5", "mode": "authors-code", "quick_verdicts": {"C-L5a": "inconclusive"}}],
            "paper_claims": []}
    assert record.entries.upgrade(part)["entries"][0]["quick_verdicts"] == [
        {"id": "C-L5a", "mode": "authors-code", "variant": "authors-code", "verdict": "inconclusive"}]


def test_the_summary_counts_figures_apart_from_their_authors_code_variants(project):
    """The summary's "figures built" counts distinct figures built in the paper's own mode; the authors-code builds
    are counted as variants (they were counted as more figures)."""
    root, results = project
    for figure in ("fig5", "fig8"):
        d = results / "lowy2023" / figure
        shutil.copytree(d, results / Path(paths.figure_dir("lowy2023", figure, "authors-code")).relative_to("results"),
                        ignore=shutil.ignore_patterns("authors-code"))
    record.build(root, results, None, ["lowy2023"], "python -m dpfl record")
    summary = (root / paths.RECORD_DIR / "README.md").read_text().splitlines()
    head = next(line for line in summary if line.startswith("| paper | last recorded |"))
    row = next(line for line in summary if line.startswith("| [lowy2023]"))
    cells = dict(zip([c.strip() for c in head.split("|")], [c.strip() for c in row.split("|")]))
    n_figures = sum(p == "lowy2023" for p, _ in FIGURES)
    assert (cells["figures built"], cells["variants built"], cells["not built"]) == (str(n_figures), "2", "0")
    not_recorded = next(line for line in summary if line.startswith("| kato2024 | not recorded |"))
    assert not_recorded.count("|") == head.count("|")


def test_a_papers_builds_are_numbered_in_time_order(project):
    """A page lists its builds by recorded date, then by commit in the order the commits appear (then first seen),
    not in the order the figures come: each entry's "build N" names the build of its own date and commit."""
    root, results = project
    part = record.build(root, results, None, ["lowy2023"], "today")["papers"]["lowy2023"]
    today = (part["entries"][0]["recorded"], "today", part["entries"][0]["commit"])
    later = {"fig4": ("2099-01-01", "later", "bbb"), "fig5": ("2099-01-01", "later", "aaa"),
             "fig6": ("2099-01-01", "later again", "bbb"), "fig9": ("2000-01-01", "earlier", "old")}
    for e in part["entries"]:
        if e["figure"] in later:
            e["recorded"], e["command"], e["commit"] = later[e["figure"]]
    page = record.pages._paper_page("lowy2023", part).splitlines()
    listed = [line for line in page if line[:1].isdigit() and ". recorded " in line]
    expected = [later["fig9"], today, later["fig4"], later["fig6"], later["fig5"]]
    for n, (line, (recorded, command, commit)) in enumerate(zip(listed, expected, strict=True), 1):
        assert line.startswith(f"{n}. recorded {recorded} by `{command}` from a build at commit `{commit}`"), line
    for e in part["entries"]:
        heading = page.index(f"## {record.entry_name(e)}")
        row = next(line for line in page[heading:] if line.startswith(f"| {e['mode']} |"))
        build = expected.index((e["recorded"], e["command"], e["commit"])) + 1
        assert row.endswith(f"| build {build} |"), (e["figure"], row)


def test_a_reason_for_an_unknown_figure_and_a_missing_quick_build_are_errors(project, monkeypatch, capsys):
    """`--why` for a figure that does not exist names the paper's figures (it was kept and shown on no row), and
    `--quick DIR` for a directory that does not exist names DIR (every quick verdict was silently missing); neither
    writes anything."""
    root, results = project
    monkeypatch.chdir(root)
    assert cli.main(["record", "--results", str(results), "--papers", "kato2024", "--why", "kato2024/fig99=x"]) == 2
    err = capsys.readouterr().err
    assert "no figure kato2024/fig99; kato2024's figures: kato2024/fig2, " in err and "kato2024/fig13" in err
    assert cli.main(["record", "--results", str(results), "--why", "kato2042/fig4=x"]) == 2
    assert "no figure kato2042/fig4; papers: asoodeh2021, " in capsys.readouterr().err
    nowhere = root / "no-quick-build"
    assert cli.main(["record", "--results", str(results), "--papers", "lowy2023", "--quick", str(nowhere)]) == 2
    assert f"--quick {nowhere}: no quick-scale results directory there" in capsys.readouterr().err
    assert not (root / paths.RECORD_DIR).exists()


def test_a_reduced_scale_build_is_refused_by_the_committed_record_but_not_elsewhere(project, tmp_path, monkeypatch,
                                                                                    capsys):
    """The committed record holds paper-scale builds only: a figure built at another scale, or marked reduced, does
    not replace its entry there (nothing is written), and --out DIR records it elsewhere."""
    root, results = project
    out = root / paths.RECORD_DIR
    record.build(root, results, None, ["lowy2023"], "paper scale")
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    for figure, change in (("fig4", {"scale": "smoke", "reduced_scale": True}), ("fig5", {"reduced_scale": True})):
        meta_path = results / "lowy2023" / figure / f"{figure}.meta.json"
        meta_path.write_text(json.dumps({**json.loads(meta_path.read_text()), **change}))
    with pytest.raises(record.RecordError, match=r"lowy2023/fig4 in .* was built at scale 'smoke' \(reduced\); the "
                       r"reproduction record holds paper-scale builds only; pass --out DIR to record it elsewhere"):
        record.build(root, results, None, {"lowy2023": {"fig4"}}, "smoke scale")
    with pytest.raises(record.RecordError, match=r"lowy2023/fig5 in .* was built at scale 'paper' \(reduced\)"):
        record.build(root, results, None, {"lowy2023": {"fig5"}}, "reduced")
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    monkeypatch.chdir(root)
    elsewhere = tmp_path / "smoke-record"
    assert cli.main(["record", "--results", str(results), "--figures", "lowy2023/fig4", "--out", str(elsewhere)]) == 0
    assert f"-> {elsewhere}/lowy2023.md" in capsys.readouterr().out
    fig4 = next(e for e in json.loads((elsewhere / "record.json").read_text())["papers"]["lowy2023"]["entries"]
                if e["figure"] == "fig4")
    assert fig4["scale"] == "smoke" and fig4["command"].endswith(f"--out {elsewhere} --figures lowy2023/fig4")
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


def test_a_build_from_uncommitted_changes_is_refused_unless_allowed_and_then_names_its_diff(project, monkeypatch,
                                                                                           capsys):
    """A checkout with uncommitted changes made code its commit does not name: recording its build is refused (it was
    only marked dirty), before anything is written; --allow-dirty records it as dirty with the sha256 of that
    checkout's `git diff HEAD`, so that the exact tree can be told apart. A clean checkout records neither."""
    root, results = project
    out = root / paths.RECORD_DIR
    clean = record.build(root, results, None, ["balle2020"], "clean")["papers"]["balle2020"]["entries"][0]
    head = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=root, capture_output=True, text=True)
    assert clean["dirty"] is False and "diff_sha256" not in clean and clean["commit"] == head.stdout.strip()
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    paper_file = root / "config/papers/lowy2023.yaml"
    paper_file.write_text(paper_file.read_text() + "\n# an uncommitted change\n")
    with pytest.raises(record.RecordError, match=re.escape(f"{root} (the checkout that made {results}) has uncommitted "
                       "changes") + ".* commit them .* or pass --allow-dirty"):
        record.build(root, results, None, ["lowy2023"], "dirty")
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before  # no lowy2023 page, no image
    monkeypatch.chdir(root)
    assert cli.main(["record", "--results", str(results), "--papers", "lowy2023"]) == 2
    assert "has uncommitted changes" in capsys.readouterr().err
    assert cli.main(["record", "--results", str(results), "--papers", "lowy2023", "--allow-dirty"]) == 0
    diff = subprocess.run(["git", "diff", "HEAD"], cwd=root, capture_output=True, check=True).stdout
    assert b"an uncommitted change" in diff
    part = json.loads((out / "record.json").read_text())["papers"]["lowy2023"]
    for item in part["entries"] + part["paper_claims"]:
        assert item["dirty"] is True and item["diff_sha256"] == hashlib.sha256(diff).hexdigest(), item["figure"]
        assert item["command"].endswith("--allow-dirty --papers lowy2023")
    page = (out / "lowy2023.md").read_text()
    assert f"(with uncommitted changes: `git diff HEAD` sha256 `{hashlib.sha256(diff).hexdigest()[:12]}`)" in page
    shutil.rmtree(root / ".git")  # no commit names the code at all
    with pytest.raises(record.RecordError, match="is not a git checkout git can read"):
        record.build(root, results, None, ["lowy2023"], "no git")


def test_the_summary_has_one_row_per_paper_claim_and_the_sanity_checks_apart():
    """docs/reproduction/README.md: every claim id of config/papers/*.yaml has one row, paper claims in the claims
    table and sanity checks in their own; the shares count the paper's claims only."""
    summary = (ROOT / paths.RECORD_DIR / "README.md").read_text()
    if "## The claims" not in summary:
        pytest.skip("no reproduction record committed yet")
    claims_part, rest = summary.split("## The claims", 1)[1].split("### Sanity checks", 1)
    sanity_part, shares = rest.split("### Shares over the paper's claims", 1)
    cfg = config.load(ROOT, {"scale": "paper"})
    paper_ids, sanity_ids = set(), set()
    for paper, spec in cfg.papers.items():
        for c in [c for f in spec["figures"].values() for c in f["claims"]] + spec.get("claims", []):
            (sanity_ids if c.get("sanity") else paper_ids).add((paper, c["id"]))
    for paper, cid in paper_ids:  # each id links to the project's description of the claim (dpfl.claim_pages)
        row = f"| {paper} | [{cid}](../papers/{paper}.md#{cid.lower()}) |"
        assert claims_part.count(row) == 1, cid
        assert f"[{cid}](" not in sanity_part
    for paper, cid in sanity_ids:
        row = f"| {paper} | [{cid}](../papers/{paper}.md#{cid.lower()}) |"
        assert sanity_part.count(row) == 1 and row not in claims_part, cid
    total = next(line for line in shares.splitlines() if line.startswith("| all |"))
    assert total.split("|")[2].strip() == str(len(paper_ids))


def test_the_summary_opens_with_the_findings_and_the_record_keeps_no_mirror_path(project, monkeypatch, tmp_path):
    """findings.md (written by hand beside the record) opens the summary page; a stand-in's reason names the data
    mirror as $DPFL_DATA_MIRROR, not the build machine's path."""
    root, results = project
    out = root / paths.RECORD_DIR
    out.mkdir(parents=True, exist_ok=True)
    (out / record.pages.FINDINGS).write_text("## Findings\n\n1. A finding with its evidence.\n")
    record.build(root, results, None, ["lowy2023"], "python -m dpfl record")
    summary = (out / "README.md").read_text()
    assert summary.index("## Findings") < summary.index("## The claims") < summary.index("## Builds per paper")
    mirror = tmp_path / "mirror"
    monkeypatch.setenv("DPFL_DATA_MIRROR", str(mirror))
    assert record.portable(f"the mirror {mirror} has no creditcard/ folder") == (
        "the mirror $DPFL_DATA_MIRROR has no creditcard/ folder")


def test_a_shown_cause_links_the_ablation_entries_that_show_it(project):
    """A documented difference is shown by a run: the claims table's ablation cell and its cause link the one-switch
    ablation's entry on the paper's page (kato2024's C-K2a, moved by K4 alone)."""
    root, results = project
    fig2 = results / "kato2024" / "fig2"
    k4 = fig2 / "ablations" / "k4"
    k4.mkdir(parents=True)
    for name in ("fig2.meta.json", "fig2.png"):
        shutil.copy(fig2 / name, k4 / name)
    (k4 / "claims.json").write_text(json.dumps(
        {"mode": "ablation-k4", "claims": [{"id": "C-K2a", "verdict": "pass", "reason": "passes"}]}))
    data = json.loads((fig2 / "claims.json").read_text())
    for c in data["claims"]:
        if c["id"] == "C-K2a":
            c.update(verdict="fail", reason="fails", cause="documented-difference",
                     cause_text="one switch moves it: K4 alone passes (ablation k4)",
                     ablations={"ablation-k4": {"items": ["K4"], "verdict": "pass"}})
    (fig2 / "claims.json").write_text(json.dumps(data))
    record.build(root, results, None, ["kato2024"], "python -m dpfl record")
    summary = (root / paths.RECORD_DIR / "README.md").read_text()
    row = next(line for line in summary.splitlines() if "[C-K2a](" in line)
    link = "[k4](kato2024.md#fig2-ablation-k4)"
    assert f"| {link}: pass |" in row and f"(evidence: {link})" in row
    page = (root / paths.RECORD_DIR / "kato2024.md").read_text()
    assert "\n## fig2 (ablation-k4)\n" in page  # the heading the link lands on


def test_the_summary_says_once_which_sources_the_builds_lacked(project):
    """The data's availability is stated once, from the entries' stand-in datasets, not per machine or build."""
    root, results = project
    meta_path = results / "kato2024" / "fig8" / "fig8.meta.json"
    meta = json.loads(meta_path.read_text())
    meta.update(data_source="standin", datasets=[{"name": "creditcard", "standin": True,
                                                  "fallback_reasons": ["no file under $DPFL_DATA_MIRROR"]}])
    meta_path.write_text(json.dumps(meta))
    record.build(root, results, None, ["kato2024", "lowy2023"], "python -m dpfl record")
    summary = (root / paths.RECORD_DIR / "README.md").read_text()
    assert summary.count("had no access to the sources of creditcard:") == 1


def test_a_not_reproduced_cause_says_what_was_tried():
    """The claims table's cause cell carries what a not-reproduced verdict tried (or that nothing was yet), not the
    bare word."""
    tried = {"cause": "not-reproduced", "cause_text": "not reproduced: a finding at paper scale on real data (scale "
             "'paper'); tried: Q2 alone inconclusive; Q3 alone inconclusive"}
    assert record.pages._cause_cell(tried) == "not-reproduced: tried: Q2 alone inconclusive; Q3 alone inconclusive"
    untried = {**tried, "cause_text": "not reproduced: …; not yet investigated (no ablation of the authors' items "
               "was built)"}
    assert "not yet investigated" in record.pages._cause_cell(untried)
    assert record.pages._cause_cell({"cause": "stand-in", "cause_text": "synthetic stand-in data"}) == "stand-in"


@pytest.mark.parametrize("argv", [["bench", "lowy2023", "--figures"], ["bench", "lowy2023", "--cells"],
                                  ["record", "--papers"], ["record", "--figures"], ["record", "--why"],
                                  ["claims-doc", "--papers"]])
def test_a_list_option_given_no_names_is_an_error_not_every_item(argv, capsys):
    """`--figures` with nothing after it once benched every figure at paper settings; now it is refused, before any
    work, as argparse refuses a missing value."""
    from dpfl import cli

    with pytest.raises(SystemExit) as exc:
        cli.main(argv)
    assert exc.value.code == 2 and "expected at least one argument" in capsys.readouterr().err


def test_a_figure_registered_after_its_paper_was_recorded_is_listed_not_an_error(project, monkeypatch, capsys):
    """The recipe for a new figure (docs/extending.md) touches two files; until a paper-scale build of it is recorded,
    `record --check` lists it as not recorded yet and passes, and the report says the record has no entry for it."""
    from dpfl import cli, papers

    root, results = project
    record.build(root, results, None, ["balle2020"], "python -m dpfl record")
    added = ("balle2020", "fig2-copy")
    monkeypatch.setitem(papers.FIGURES, added, papers.FIGURES[("balle2020", "fig2")])
    monkeypatch.setattr(record.state, "FIGURES", papers.FIGURES)
    assert record.not_recorded(root) == [added] and record.check(root) == []
    assert added not in {k[:2] for k in record.for_report(root)}
    monkeypatch.setattr(cli, "_project_root", lambda: root)
    monkeypatch.setattr(record, "same_checkout", lambda root: None)
    assert cli.main(["record", "--check"]) == 0
    out = capsys.readouterr().out
    assert "not recorded yet: balle2020/fig2-copy (python -m dpfl record --figures balle2020/fig2-copy" in out
    assert "0 stale entries" in out
