"""End-to-end behaviour of the Snakemake pipeline, on temporary copies of the project:
bad configuration stops the run before any job; a full run builds every output with the documented
schema; a second run does nothing; a parameter edit or a library edit reruns exactly the affected jobs;
the slurm profile dry-runs; `snakemake --report` works."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parent.parent
PROJECT_ITEMS = ["workflow", "config", "src", "profiles"]

pytestmark = pytest.mark.pipeline


def copy_project(dest: Path, source: Path = ROOT) -> Path:
    """Copy the project (or an already-run copy, with its results and .snakemake metadata), keeping mtimes."""
    dest.mkdir(parents=True, exist_ok=True)
    items = PROJECT_ITEMS + (["results", "data", ".snakemake"] if source != ROOT else [])
    for item in items:
        src = source / item
        if src.is_dir():
            shutil.copytree(src, dest / item, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
        elif src.exists():
            shutil.copy2(src, dest / item)
    return dest


def snakemake(project: Path, *args: str, check: bool = False) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, "-m", "snakemake", *args], cwd=project, env=env,
                          capture_output=True, text=True, timeout=600)
    if check and proc.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}")
    return proc


def planned_outputs(project: Path, *args: str) -> set[str]:
    """Output files of every job a dry run plans (the `output:` lines of `snakemake -n`)."""
    proc = snakemake(project, "-n", "--cores", "2", *args, check=True)
    text = proc.stdout + proc.stderr
    outs = set()
    for line in text.splitlines():
        m = re.match(r"\s+output:\s+(.*)", line)
        if m:
            outs |= {p.strip() for p in m.group(1).split(",")}
    return outs


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new, 1))


# --------------------------------------------------------------------------------------------------
# configuration errors stop the run before any job, naming file, key and what is allowed
# --------------------------------------------------------------------------------------------------


@pytest.fixture
def fresh(tmp_path):
    return copy_project(tmp_path / "project")


def assert_stopped(proc, project, *needles):
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    for needle in needles:
        assert needle in out, f"{needle!r} not in output:\n{out}"
    assert not (project / "results").exists(), "a job ran despite the configuration error"


def test_misspelt_key_in_paper_file_stops_the_run(fresh):
    edit(fresh / "config/papers/balle2020.yaml", "      delta: 1.0e-6\n      eps0_grid: {start: 0.005",
         "      detla: 1.0e-6\n      eps0_grid: {start: 0.005")
    proc = snakemake(fresh, "--cores", "1")
    assert_stopped(proc, fresh, "config/papers/balle2020.yaml", "figures.fig2.params", "unknown key 'detla'",
                   "did you mean 'delta'", "allowed keys: delta, eps0_grid, n")


def test_wrong_type_stops_the_run(fresh):
    edit(fresh / "config/papers/kato2024.yaml", "steps: 100000", "steps: many")
    proc = snakemake(fresh, "--cores", "1")
    assert_stopped(proc, fresh, "config/papers/kato2024.yaml", "figures.fig2.params.steps",
                   "expected integer, got str 'many'")
    proc = snakemake(fresh, "--cores", "1", "--config", "scale=huge")
    assert_stopped(proc, fresh, "config/config.yaml", "scale: 'huge' is not allowed", "allowed: smoke, quick, paper")


def test_unknown_paper_or_figure_stops_the_run(fresh):
    proc = snakemake(fresh, "--cores", "1", "--config", 'only=["balle2020/fig9"]')
    assert_stopped(proc, fresh, "only: unknown figure 'fig9' of paper 'balle2020'", "allowed: fig2, table1, thm3_2")
    proc = snakemake(fresh, "--cores", "1", "--config", 'only=["lowy2032"]')
    assert_stopped(proc, fresh, "only: unknown paper 'lowy2032'", "allowed: asoodeh2021, balle2020")
    text = (fresh / "config/papers/balle2020.yaml").read_text()
    (fresh / "config/papers/balle2020.yaml").write_text(text + "  fig9:\n    params: {}\n")
    proc = snakemake(fresh, "--cores", "1")
    assert_stopped(proc, fresh, "config/papers/balle2020.yaml", "unknown key 'fig9'",
                   "allowed keys: fig2, table1, thm3_2")


@pytest.mark.parametrize("target, needles", [
    ("data/prepared/mnst.npz", ["unknown dataset 'mnst'", "known datasets", "mnist"]),
    ("results/lowy2023/fig99/fig99.png", ["unknown figure lowy2023/fig99", "known figures", "lowy2023/fig4"]),
])
def test_unknown_target_names_the_known_ones(fresh, target, needles):
    assert_stopped(snakemake(fresh, "-n", target), fresh, *needles)


def test_misspelt_key_in_scale_file_names_the_scale_file(fresh):
    edit(fresh / "config/scales/smoke.yaml", "eps_grid:", "eps_gird:")
    proc = snakemake(fresh, "--cores", "1", "--config", "scale=smoke")
    assert_stopped(proc, fresh, "config/scales/smoke.yaml", "unknown key 'eps_gird'", "did you mean 'eps_grid'")


# --------------------------------------------------------------------------------------------------
# a full run (smoke scale), then caching
# --------------------------------------------------------------------------------------------------

FIGURES = [("asoodeh2021", "fig2", ""), ("balle2020", "fig2", ""), ("balle2020", "table1", ""),
           ("balle2020", "thm3_2", ""), ("kato2024", "fig2", ""), ("kato2024", "fig2", "authors-code/"),
           ("lowy2023", "fig5", ""), ("lowy2023", "fig5", "authors-code/"), ("bietti2022", "fig1a", "")]
# every analytic figure, and two experiment figures (insurance: small data, fast; bietti2022's synthetic task,
# generated in code) to keep the suite quick
SMOKE = ["--config", "scale=smoke",
         'only=["asoodeh2021", "balle2020", "kato2024/fig2", "lowy2023/fig5", "bietti2022/fig1a"]',
         "compat_variants=true"]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    project = copy_project(tmp_path_factory.mktemp("built") / "project")
    snakemake(project, "--cores", "2", *SMOKE, check=True)
    return project


def test_full_run_builds_every_output(built):
    for paper, figure, sub in FIGURES:
        d = built / "results" / paper / figure / sub
        for ext in ("png", "pdf", "csv", "json", "md"):
            assert (d / f"{figure}.{ext}").stat().st_size > 0, (paper, figure, ext)
        df = pd.read_csv(d / f"{figure}.csv")
        assert list(df.columns[:6]) == ["paper", "figure", "panel", "curve", "x", "y"]
        assert (df["paper"] == paper).all() and (df["figure"] == figure).all()
        sidecar = json.loads((d / f"{figure}.json").read_text())
        assert sidecar["mode"] == ("authors-code" if sub else "none")
        if paper == "lowy2023":  # trained on the insurance data: a mirror copy (CI) or the stand-in
            assert sidecar["data_source"] in ("real", "standin")
            assert [d["name"] for d in sidecar["datasets"]] == ["insurance"]
            # one cell per panel (Fig 5: panel a), its four methods as runs, in order
            assert sorted(p.name for p in (d / "cells").glob("*.parquet")) == ["a.parquet"]
            assert list(pd.read_parquet(d / "cells/a.parquet")["run"].unique()) == [
                "a-noisy_mb_sgd", "a-noisy_local_sgd", "a-mb_sgd", "a-local_sgd"]
        elif paper == "bietti2022":  # the synthetic task: no dataset; cells a = 0 once, then one per σ
            assert sidecar["data_source"] == "synthetic" and sidecar["datasets"] == []
            assert sorted(p.stem for p in (d / "cells").glob("*.parquet")) == [
                "synthetic-local", "synthetic-sigma0", "synthetic-sigma10", "synthetic-sigma3"]
        else:
            assert sidecar["data_source"] == "analytic"
        assert {"config_hash", "versions", "inferred", "device"} <= set(sidecar)
        claims = json.loads((d / "claims.json").read_text())["claims"]
        assert claims and all(c["verdict"] in {"pass", "fail", "inconclusive", "stand-in"} for c in claims)
        assert (built / "results/logs" / paper / figure / sub / "table.log").read_text().strip()
    html = (built / "results/report/index.html").read_text()
    for paper, figure, _ in FIGURES:
        assert f'id="{paper}-{figure}-' in html
    assert "C-K2a" in html and "Inferred settings" in html and "Data provenance" in html
    assert "<table class='data'>" in html  # Table 1 rendered as a table


def test_same_config_gives_identical_tables(built, tmp_path):
    again = copy_project(tmp_path / "again")
    snakemake(again, "--cores", "2", *SMOKE, "--until", "figure_table", check=True)
    for paper, figure, sub in FIGURES:
        if sub:
            continue
        a = (built / "results" / paper / figure / f"{figure}.csv").read_bytes()
        b = (again / "results" / paper / figure / f"{figure}.csv").read_bytes()
        assert a == b, (paper, figure)


def test_second_run_has_nothing_to_do(built):
    proc = snakemake(built, "-n", "--cores", "2", *SMOKE, check=True)
    assert "Nothing to be done" in proc.stdout + proc.stderr


def test_param_edit_reruns_only_that_figure(built, tmp_path):
    project = copy_project(tmp_path / "p", source=built)
    edit(project / "config/scales/smoke.yaml", "thm3_2: {params: {eps0_grid: {start: 0.025, stop: 1.0, num: 40}}}",
         "thm3_2: {params: {eps0_grid: {start: 0.025, stop: 1.0, num: 40}, p0: [0.2, 1.0]}}")
    outs = planned_outputs(project, *SMOKE)
    figure_outs = {o for o in outs if o.startswith("results/") and not o.startswith("results/report/")}
    assert figure_outs, "the edit triggered nothing"
    assert all(o.startswith("results/balle2020/thm3_2/") for o in figure_outs), figure_outs
    assert "results/balle2020/thm3_2/thm3_2.csv" in figure_outs
    assert "results/report/index.html" in outs


def test_plot_setting_edit_does_not_recompute_data(built, tmp_path):
    project = copy_project(tmp_path / "p", source=built)
    edit(project / "config/papers/kato2024.yaml", "annotate_k: [1, 32, 64]", "annotate_k: [1, 64]")
    outs = {o for o in planned_outputs(project, *SMOKE) if not o.startswith("results/report/")}
    assert "results/kato2024/fig2/fig2.png" in outs
    assert not any(o.endswith(".csv") for o in outs), outs


def test_library_edit_reruns_only_importing_figures(built, tmp_path):
    project = copy_project(tmp_path / "p", source=built)
    with open(project / "src/dpfl/privacy/group.py", "a") as fh:
        fh.write("\n# edited\n")
    outs = {o for o in planned_outputs(project, *SMOKE) if not o.startswith("results/report/")}
    assert {"results/kato2024/fig2/fig2.csv", "results/kato2024/fig2/authors-code/fig2.csv"} <= outs
    assert all(o.startswith("results/kato2024/fig2/") for o in outs), outs

    project = copy_project(tmp_path / "q", source=built)
    with open(project / "src/dpfl/privacy/bounds.py", "a") as fh:
        fh.write("\n# edited\n")
    outs = {o for o in planned_outputs(project, *SMOKE) if not o.startswith("results/report/")}
    data_jobs = {o for o in outs if o.endswith(".csv")}
    assert data_jobs == {"results/asoodeh2021/fig2/fig2.csv", "results/balle2020/fig2/fig2.csv",
                         "results/balle2020/table1/table1.csv", "results/balle2020/thm3_2/thm3_2.csv"}
    assert not any(o.startswith("results/kato2024/") for o in outs)


@pytest.mark.skipif(importlib.util.find_spec("snakemake_executor_plugin_slurm") is None,
                    reason="Snakemake's SLURM executor is not installed: pip install -e '.[slurm]' (the `test` extra "
                           "includes it)")
def test_slurm_profile_dry_run(built):
    proc = snakemake(built, "-n", "--profile", "profiles/slurm", *SMOKE, "--forceall", check=True)
    text = proc.stdout + proc.stderr
    assert "figure_table" in text and "report" in text


def test_snakemake_report(built, tmp_path):
    project = copy_project(tmp_path / "r", source=built)
    snakemake(project, "--cores", "1", *SMOKE, "--report", "report.html", check=True)
    assert (project / "report.html").stat().st_size > 10_000


def _lowy_run_params(project: Path, figure: str, mode: str) -> dict:
    """{run: its params and settings} of a lowy2023 figure (the part of the params each run depends on)."""
    from dpfl import config, jobs

    cfg = config.load(project, {"scale": "smoke"})
    return {run: jobs.layout("lowy2023", figure).runs_params(cfg.figure_params("lowy2023", figure, mode),
                                                             cfg.paper_settings("lowy2023"), cell, [run])
            for run, cell in jobs.cell_runs(cfg, "lowy2023", figure, mode).items()}


def test_algorithm_setting_edit_reruns_only_its_cells(built, tmp_path):
    """Editing Local SGD's step grid reruns lowy2023 Fig 5's panel cell (whose runs include the two Local SGD
    methods), in both modes, and nothing else but what reads Fig 5 (C-L5c, a claim over Figs 5, 8 and 9, evaluated
    over the built Fig 5); of its runs' params only the Local SGD ones change."""
    project = copy_project(tmp_path / "p", source=built)
    before = {mode: _lowy_run_params(project, "fig5", mode) for mode in ("none", "authors-code")}
    edit(project / "config/papers/lowy2023.yaml", "local: {start: -10, stop: 0, num: 10}",
         "local: {start: -9, stop: 0, num: 10}")
    outs = {o for o in planned_outputs(project, *SMOKE) if not o.startswith("results/report/")}
    cells = {o for o in outs if "/cells/" in o and o.endswith(".parquet")}  # (each with its timing sidecar)
    assert cells == {f"results/lowy2023/fig5/{sub}cells/a.parquet" for sub in ("", "authors-code/")}, outs
    reads_fig5 = {f"results/lowy2023/{sub}claims-C-L5c.json" for sub in ("", "authors-code/")}
    assert all(o.startswith("results/lowy2023/fig5/") or o in reads_fig5 for o in outs), outs
    for mode in before:  # both modes use that grid
        after = _lowy_run_params(project, "fig5", mode)
        assert {r for r in after if after[r] != before[mode][r]} == {"a-local_sgd", "a-noisy_local_sgd"}, mode


def test_allocation_edit_reruns_that_allocation_and_its_cells(tmp_path):
    """An allocation is configured data: editing its YAML entry reruns it and the cells that read it; editing a
    figure's params does not rerun the allocation."""
    project = copy_project(tmp_path / "alloc")
    args = ["--config", "scale=smoke", 'only=["lowy2023/fig4"]']
    cell = "results/lowy2023/fig4/cells/a.parquet"
    timing = "results/lowy2023/fig4/cells/a.timing.json"  # the cell job's wall-clock sidecar
    alloc = "data/allocations/mnist/lowy2023-mnist-pairs.npz"
    snakemake(project, "--cores", "2", cell, *args, check=True)
    meta = json.loads(str(np.load(project / alloc)["meta"]))
    assert meta["kind"] == "even_odd_pairs" and meta["params"] == {"pca_components": 50, "per_digit": 774}
    assert planned_outputs(project, cell, *args) == set()
    edit(project / "config/papers/lowy2023.yaml", "params: {pca_components: 50, per_digit: 774}",
         "params: {pca_components: 50, per_digit: 700}")
    assert planned_outputs(project, cell, *args) == {alloc, cell, timing}
    edit(project / "config/papers/lowy2023.yaml", "per_digit: 700}", "per_digit: 774}")
    edit(project / "config/scales/smoke.yaml", "rounds: 10,", "rounds: 11,")
    assert planned_outputs(project, cell, *args) == {cell, timing}


def test_threads_change_reruns_nothing(built):
    """`threads` does not change a result, so it is not part of any job's params."""
    proc = snakemake(built, "-n", "--cores", "2", *SMOKE, "threads=2", check=True)
    assert "Nothing to be done" in proc.stdout + proc.stderr


def test_epsilon_edit_below_the_largest_changes_only_private_runs(built, tmp_path):
    """A non-private baseline depends on the ε grid only through ε_max (which sets K): editing an ε below the
    largest reruns Fig 5's panel cell (its private runs changed), and of its runs' params only the private ones."""
    project = copy_project(tmp_path / "p", source=built)
    before = {mode: _lowy_run_params(project, "fig5", mode) for mode in ("none", "authors-code")}
    # the first insurance figure in the file is Fig 5
    edit(project / "config/papers/lowy2023.yaml", "epsilons: [0.125, 0.25, 0.5, 1, 2, 3]",
         "epsilons: [0.125, 0.3, 0.5, 1, 2, 3]")
    cells = {o for o in planned_outputs(project, *SMOKE) if "/cells/" in o and o.endswith(".parquet")}
    assert cells == {f"results/lowy2023/fig5/{sub}cells/a.parquet" for sub in ("", "authors-code/")}, cells
    for mode in before:
        after = _lowy_run_params(project, "fig5", mode)
        assert {r for r in after if after[r] != before[mode][r]} == {"a-noisy_mb_sgd", "a-noisy_local_sgd"}, mode


MIRROR = Path(os.environ.get("DPFL_DATA_MIRROR") or ROOT.parent / "shared" / "datasets")


@pytest.mark.skipif(not (MIRROR / "heart_disease").is_dir(), reason="needs the offline heart_disease copy")
def test_seeded_allocation_instances(tmp_path):
    """kato2024 allocations are seeded schemes: one file per instance, built from the YAML entry + the instance
    name + the global seed; editing the family's params or the seed reruns it; a malformed name stops the DAG."""
    project = copy_project(tmp_path / "alloc")
    target = "data/allocations/heart_disease/kato2024-heart_disease/zipf-U50-S4-seed0.npz"
    env_args = ["--config", f"data_mirror={MIRROR}"]
    snakemake(project, "--cores", "2", target, *env_args, check=True)
    z = np.load(project / target)
    assert np.bincount(z["silo"], minlength=4).tolist() == [199, 172, 30, 85]
    assert z["user"].max() < 50 and len(np.unique(z["user"])) == 50
    meta = json.loads(str(z["meta"]))
    assert (meta["params"]["users"] == 50 and meta["params"]["global_seed"] == 0
            and meta["instance"] == "zipf-U50-S4-seed0")
    assert planned_outputs(project, target, *env_args) == set()
    assert planned_outputs(project, target, *env_args, "seed=1") == {target}
    edit(project / "config/papers/kato2024.yaml", "params: {user_alpha: 0.5, main_ratio: 0.8, min_records: 1}",
         "params: {user_alpha: 0.6, main_ratio: 0.8, min_records: 1}")
    assert planned_outputs(project, target, *env_args) == {target}
    bad = "data/allocations/heart_disease/kato2024-heart_disease/zipf-50.npz"
    proc = snakemake(project, "-n", bad, *env_args)
    assert proc.returncode != 0 and "<distribution>-U<users>-S<silos>-seed<k>" in proc.stdout + proc.stderr
