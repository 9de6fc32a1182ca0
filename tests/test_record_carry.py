"""Carrying record entries across a code change (dpfl.record.carry, `python -m dpfl record --carry`): only on two
quick-scale builds that agree, one of the entry's recorded code and one of this checkout's; the entry keeps its
paper-scale numbers and says it was carried."""

import json
import os
import shutil
from pathlib import Path

import pandas as pd
import pytest

from dpfl import cli, config, jobs, paths, record
from dpfl.papers import FIGURES
from dpfl.record import carry
from test_record import ROOT, _commit, project  # noqa: F401  (the fixture)

PAPER = "balle2020"


def _clone(tmp_path: Path, name: str, edit: bool) -> Path:
    """A checkout holding this project's sources, with one line added to plotting.py (a change every figure's plot
    stage imports) when `edit`: the "older" code."""
    clone = tmp_path / name
    shutil.copytree(ROOT / "src", clone / "src", ignore=shutil.ignore_patterns("__pycache__"))
    if edit:
        plot = clone / "src/dpfl/plotting.py"
        plot.write_text(plot.read_text() + "\n# the code the record was built with\n")
    return clone


def _quick_build(clone: Path, root: Path, rows: dict[str, list[float]] | None = None) -> Path:
    """Fake quick-scale outputs of balle2020's figures in clone/results (settings hash of the quick configuration),
    committed; `rows`: a figure's table values (default [1, 2, 3])."""
    cfg = config.load(root, {"scale": "quick"})
    for (paper, figure) in [k for k in FIGURES if k[0] == PAPER]:
        d = clone / paths.figure_dir(paper, figure)
        d.mkdir(parents=True)
        meta = {"scale": "quick", "config_hash": jobs.settings_hash(cfg, paper, figure, "none")}
        (d / f"{figure}.meta.json").write_text(json.dumps(meta))
        pd.DataFrame({"x": [1, 2, 3], "y": (rows or {}).get(figure, [1.0, 2.0, 3.0])}).to_csv(d / f"{figure}.csv")
        (d / "claims.json").write_text(json.dumps({"claims": [{"id": "C", "verdict": "pass"}]}))
    _commit(clone)
    return clone / "results"


@pytest.fixture
def stale_record(project, tmp_path):  # noqa: F811
    """balle2020 recorded from a paper-scale build of older code (stale today), and a baseline quick build of that
    older code."""
    root, results = project
    old = _clone(tmp_path, "old", edit=True)
    shutil.copytree(results / PAPER, old / "results" / PAPER)
    for path in (old / "results").rglob("*"):
        os.utime(path)  # built after its code
    _commit(old)
    record.build(root, old / "results", None, [PAPER], "python -m dpfl record")
    assert len(record.check(root)) == 3  # fig2, table1, thm3_2: plotting.py changed
    baseline = _quick_build(_clone(tmp_path, "base", edit=True), root)
    return root, baseline


def test_identical_quick_builds_carry_the_entries_which_keep_their_paper_scale_build(stale_record, tmp_path):
    root, baseline = stale_record
    before = json.loads((root / paths.RECORD_DIR / "record.json").read_text())["papers"][PAPER]["entries"]
    new = _quick_build(_clone(tmp_path, "new", edit=False), root)
    carried, refused = record.carry_entries(root, baseline, new, {PAPER: None})
    assert refused == [] and len(carried) == 3
    assert record.check(root) == []
    after = json.loads((root / paths.RECORD_DIR / "record.json").read_text())["papers"][PAPER]["entries"]
    for b, a in zip(before, after):
        assert {k: v for k, v in a.items() if k not in ("code_files", "code_hash", "carried")} == \
            {k: v for k, v in b.items() if k not in ("code_files", "code_hash")}  # the paper-scale build's numbers
        (c,) = a["carried"]
        assert c["changed"] == ["src/dpfl/plotting.py"] and c["from_code_hash"] == b["code_hash"]
        assert c["compared"] == {"figure table": "1 of 1 identical", "claims": "1 of 1 identical"}
    page = (root / paths.RECORD_DIR / f"{PAPER}.md").read_text()
    assert page.count("- Carried ") == 3 and "changed: `src/dpfl/plotting.py`" in page


def test_a_difference_other_code_or_other_settings_is_not_carried(stale_record, tmp_path, monkeypatch, capsys):
    root, baseline = stale_record
    differs = _quick_build(_clone(tmp_path, "differs", edit=False), root, rows={"fig2": [1.0, 2.0, 3.5]})
    carried, refused = record.carry_entries(root, baseline, differs, {PAPER: {"fig2", "table1"}})
    assert len(carried) == 1 and carried[0].startswith("balle2020/table1")
    assert refused == ["balle2020/fig2: the quick builds differ: balle2020/fig2/fig2.csv: differs"]
    assert [line.split(":")[0] for line in record.check(root)] == ["balle2020/fig2", "balle2020/thm3_2"]
    # a baseline of this checkout's code is not the entry's code
    monkeypatch.chdir(root)
    assert cli.main(["record", "--carry", "--baseline", str(differs), "--quick", str(differs),
                     "--figures", "balle2020/fig2"]) == 1
    assert "was built from code other than the record entry's (src/dpfl/plotting.py)" in capsys.readouterr().out
    assert cli.main(["record", "--carry", "--quick", str(differs)]) == 2
    assert "--carry needs --baseline DIR" in capsys.readouterr().err
    # a change of settings is never carried
    paper_file = root / "config/papers/balle2020.yaml"
    paper_file.write_text(paper_file.read_text().replace("delta: 1.0e-6", "delta: 2.0e-6"))
    changed = [line.split(":")[0] for line in record.check(root) if "settings changed" in line]
    assert changed
    _, refused = record.carry_entries(root, baseline, differs, {PAPER: None})
    assert {line.split(":")[0] for line in refused if "needs a paper-scale rebuild" in line} == set(changed)


def test_measured_columns_are_left_out_only_for_the_timing_figures(tmp_path):
    assert carry.measured_columns("kato2024", "fig11") == ("seconds", "per_round", "y", "y_std", "decrypted_rel_err")
    assert carry.measured_columns("kato2024", "fig6") == () and carry.measured_columns("balle2020", "fig2") == ()
    a = pd.DataFrame({"phase": ["aggregation"], "seconds": [1.0], "rounds": [3]})
    assert carry._same_frame(a, a.assign(seconds=2.0), ("seconds",))
    assert not carry._same_frame(a, a.assign(rounds=4), ("seconds",))
    assert not carry._same_frame(a, a.assign(seconds=2.0), ())
    assert not carry._same_frame(a, a.assign(extra=1), ("seconds",))  # a column more is a difference


def test_cell_tables_are_compared_without_the_measured_columns(tmp_path):
    """kato2024 Fig 11: every cell it reads is compared, measured seconds aside; its claims are not compared."""
    cfg = config.load(ROOT, {"scale": "quick"})
    sources = jobs.cell_sources(cfg, "kato2024", "fig11", "none")
    assert sources
    for build, seconds in (("a", 1.0), ("b", 2.0)):
        d = tmp_path / build
        csv = d / "kato2024/fig11/fig11.csv"
        csv.parent.mkdir(parents=True)
        pd.DataFrame({"quantity": ["phase_seconds"], "y": [seconds]}).to_csv(csv, index=False)
        for source, cell, _ in sources:
            table = d / Path(paths.cell_table("kato2024", source, cell)).relative_to("results")
            table.parent.mkdir(parents=True, exist_ok=True)
            pd.DataFrame({"phase": ["aggregation"], "seconds": [seconds]}).to_parquet(table)
    counts, diffs = carry.compare(tmp_path / "a", tmp_path / "b", "kato2024", "fig11", "none", cfg)
    assert diffs == [] and counts == {"figure table": [1, 1], "cell tables": [len(sources), len(sources)]}
    source, cell, _ = sources[0]
    table = tmp_path / "b" / Path(paths.cell_table("kato2024", source, cell)).relative_to("results")
    pd.DataFrame({"phase": ["local training"], "seconds": [2.0]}).to_parquet(table)
    _, diffs = carry.compare(tmp_path / "a", tmp_path / "b", "kato2024", "fig11", "none", cfg)
    assert diffs == [f"{Path(paths.cell_table('kato2024', source, cell)).relative_to('results')}: differs"]


def test_a_checkouts_code_files_follow_its_own_import_graph(tmp_path):
    """A baseline checkout whose figure imports a module this one does not have (or lacks one this one has) is
    judged by its own registry and imports, computed by its own dpfl in a child Python: a module added or moved by
    the change under test is neither looked for where it never was nor missed where it is."""
    from dpfl.record import state

    other = _clone(tmp_path, "other", edit=False)
    extra = other / "src/dpfl/papers/asoodeh2021/extra_bound.py"
    extra.write_text('"""A module only the other checkout has."""\n\nBOUND = 1.0\n')
    table = other / "src/dpfl/papers/asoodeh2021/table.py"
    table.write_text("from dpfl.papers.asoodeh2021 import extra_bound  # noqa: F401\n" + table.read_text())
    name = "src/dpfl/papers/asoodeh2021/extra_bound.py"
    theirs = state.checkout_stage_files(other)["asoodeh2021/fig2"]
    assert name in theirs["table"] and name not in state.checkout_stage_files()["asoodeh2021/fig2"]["table"]
    files = state.code_files("asoodeh2021", "fig2", other)
    assert name in files and files[name] != "absent"
    assert name not in state.code_files("asoodeh2021", "fig2")
    # the checkout's other files hash as its own copies (here identical to this checkout's)
    assert files["src/dpfl/figure.py"] == state.code_files("asoodeh2021", "fig2")["src/dpfl/figure.py"]
    with pytest.raises(record.RecordError, match="not a project checkout"):
        state.checkout_stage_files(tmp_path / "nowhere")
