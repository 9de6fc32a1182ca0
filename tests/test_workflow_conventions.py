"""The workflow follows Snakemake's conventions: `snakemake --lint` finds nothing, snakefmt leaves every workflow file
unchanged, every rule that runs something names the conda environment workflow/envs/dpfl.yaml, the layout is the
one the Snakemake Workflow Catalog reads, and one rule per stage serves every variant of a figure (the `variant`
wildcard, read back as the mode the rules' functions use)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
PROJECT_ITEMS = ("config", "workflow", "src", "profiles")


def _project(tmp_path: Path) -> Path:
    """The project's folders linked into a temporary folder, so that Snakemake's own files land there."""
    for name in PROJECT_ITEMS:
        (tmp_path / name).symlink_to(ROOT / name, target_is_directory=True)
    return tmp_path


def _env() -> dict:
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "DPFL_DATA_MIRROR")}


def test_snakemake_lint_is_clean(tmp_path):
    proc = subprocess.run([str(BIN / "snakemake"), "--lint"], cwd=_project(tmp_path), capture_output=True, text=True,
                          env=_env(), timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "Lints for" not in out, out[-4000:]


def test_snakefmt_leaves_the_workflow_files_unchanged():
    proc = subprocess.run([str(BIN / "snakefmt"), "--check", "--diff", "workflow"], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:] + "\n(fix with: .venv/bin/snakefmt workflow)"


def test_the_catalog_layout():
    """Snakemake Workflow Catalog's 'standardized usage': workflow/Snakefile, config/README.md and
    .snakemake-workflow-catalog.yml with the usage section."""
    assert (ROOT / "workflow" / "Snakefile").is_file() and not (ROOT / "Snakefile").exists()
    readme = (ROOT / "config" / "README.md").read_text()
    for name in ("config.yaml", "datasets.yaml", "papers/", "scales/"):
        assert name in readme, f"config/README.md does not describe {name}"
    catalog = yaml.safe_load((ROOT / ".snakemake-workflow-catalog.yml").read_text())
    usage = catalog["usage"]
    assert set(usage) >= {"mandatory-flags", "software-stack-deployment", "report"}
    assert usage["software-stack-deployment"]["conda"] is True
    assert usage["report"] is True


_PROBE = r"""
import json, sys
from pathlib import Path
from snakemake.api import SnakemakeApi
from snakemake.settings.types import ConfigSettings, OutputSettings, ResourceSettings
from types import SimpleNamespace

workdir = Path(sys.argv[1])
with SnakemakeApi(OutputSettings()) as api:
    wf = api.workflow(resource_settings=ResourceSettings(), config_settings=ConfigSettings(config={"scale": "smoke"}),
                      snakefile=workdir / "workflow" / "Snakefile", workdir=workdir)._workflow
    paths, variant_mode = wf.globals["paths"], wf.globals["variant_mode"]
    modes = {}
    for mode in ("none", "authors-code", "ablation-q7", "ablation-d20_lw01"):
        w = SimpleNamespace(variant=paths.mode_subdir(mode))
        modes[mode] = variant_mode(w)
    envs = {r.name: (str(r.conda_env) if r.conda_env else None) for r in wf.rules if not r.norun}
    outputs = {r.name: [str(o) for o in r.output] for r in wf.rules if r.name.startswith(("figure_", "paper_"))}
print("PROBE " + json.dumps({"modes": modes, "envs": envs, "outputs": outputs}))
"""


@pytest.fixture(scope="module")
def probe(tmp_path_factory) -> dict:
    workdir = _project(tmp_path_factory.mktemp("workflow"))
    proc = subprocess.run([sys.executable, "-c", _PROBE, str(workdir)], cwd=workdir, capture_output=True, text=True,
                          env=_env(), timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("PROBE "))
    return json.loads(line.removeprefix("PROBE "))


def test_the_variant_wildcard_reads_back_as_the_mode(probe):
    """variant_mode (common.smk) inverts dpfl.paths.mode_subdir for both modes and any ablation."""
    assert probe["modes"] == {m: m for m in probe["modes"]}


def test_one_rule_per_stage_serves_every_variant(probe):
    assert set(probe["outputs"]) == {"figure_cell", "figure_table", "figure_plot", "figure_claims", "paper_claims"}
    for name, outputs in probe["outputs"].items():
        assert all("{variant," in o for o in outputs), (name, outputs)


def test_every_rule_that_runs_something_names_the_conda_environment(probe):
    assert probe["envs"], "no rules found"
    for name, env in probe["envs"].items():
        # relative to the rule files (workflow/rules/), as Snakemake resolves it
        assert env and (ROOT / "workflow" / "rules" / env).resolve() == ROOT / "workflow" / "envs" / "dpfl.yaml", (
            f"rule {name}: conda environment {env!r}")
