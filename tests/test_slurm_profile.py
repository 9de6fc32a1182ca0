"""The cluster path without a cluster: profiles/slurm is valid, every rule the scheduler gets declares what sbatch is
asked for (threads -> --cpus-per-task, mem_mb -> --mem, runtime -> -t), and the light rules are localrules, so that
only compute jobs are submitted. The rules are read from the workflow as Snakemake loads it (its API, in a subprocess
working in a temp dir, so that nothing is written to the project's .snakemake/). The real run on a throwaway Slurm
cluster is `make test-slurm` (tools/slurm/test_slurm.sh)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]

# The jobs worth a cluster node: arrays of a dataset, configured allocations, training/experiment cells.
COMPUTE_RULES = {"prepare", "allocate", "figure_cell"}
# Seconds of work, or the network: run where Snakemake runs (localrules), never submitted.
LIGHT_RULES = {"download", "figure_table", "figure_plot", "figure_claims", "paper_claims", "report", "unknown_dataset"}

_PROBE = r"""
import json, sys
from pathlib import Path
from snakemake.api import SnakemakeApi
from snakemake.settings.types import ConfigSettings, OutputSettings, ResourceSettings

root, workdir = Path(sys.argv[1]), Path(sys.argv[2])
with SnakemakeApi(OutputSettings()) as api:
    wf = api.workflow(resource_settings=ResourceSettings(), config_settings=ConfigSettings(config={"scale": "smoke"}),
                      snakefile=root / "workflow" / "Snakefile", workdir=workdir)._workflow
    rules = {}
    for rule in wf.rules:
        info = rule.ruleinfo
        declared = dict(info.resources[1]) if info.resources else {}
        rules[rule.name] = {
            # Workflow.is_local minus its local_exec short cut (true whenever no cluster executor is loaded):
            # what a cluster executor runs on the submitting node
            "local": rule.group is None and (rule.name in wf._localrules or rule.norun or rule.is_template_engine),
            "action": not rule.norun,
            "threads": (None if info.threads is None
                        else (info.threads if isinstance(info.threads, int) else "callable")),
            "resources": {k: (v if isinstance(v, (int, float, str)) else "callable") for k, v in declared.items()},
        }
print("RULES-JSON " + json.dumps(rules))
"""


@pytest.fixture(scope="module")
def rules(tmp_path_factory) -> dict:
    workdir = tmp_path_factory.mktemp("slurm-rules")
    for name in ("config", "workflow", "src", "profiles"):
        (workdir / name).symlink_to(ROOT / name)
    proc = subprocess.run([sys.executable, "-c", _PROBE, str(ROOT), str(workdir)], cwd=workdir,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("RULES-JSON "))
    return json.loads(line.removeprefix("RULES-JSON "))


def test_slurm_profile_parses_and_uses_the_slurm_executor():
    profile = yaml.safe_load((ROOT / "profiles/slurm/config.yaml").read_text())
    assert profile["executor"] == "slurm"
    assert profile["jobs"] >= 1
    assert {"mem_mb", "runtime"} <= set(profile["default-resources"])


def test_every_rule_is_classified(rules):
    """A new rule must be placed: compute (scheduler, with resources) or light (localrules)."""
    with_action = {name for name, r in rules.items() if r["action"]}
    assert with_action == COMPUTE_RULES | LIGHT_RULES, (
        f"unclassified rules {sorted(with_action - COMPUTE_RULES - LIGHT_RULES)}, "
        f"gone {sorted((COMPUTE_RULES | LIGHT_RULES) - with_action)}: add them to COMPUTE_RULES or LIGHT_RULES "
        "(and to a localrules: directive if light)")


def test_compute_rules_go_to_the_scheduler_with_threads_mem_and_runtime(rules):
    for name in sorted(COMPUTE_RULES):
        r = rules[name]
        assert not r["local"], f"{name} is a compute rule but a localrule: it would run on the submitting node"
        assert r["threads"] is not None, f"{name} declares no threads (sbatch --cpus-per-task)"
        for key in ("mem_mb", "runtime"):
            assert key in r["resources"], f"{name} declares no {key} (sbatch {'--mem' if key == 'mem_mb' else '-t'})"
            value = r["resources"][key]
            assert value == "callable" or (isinstance(value, (int, float)) and value > 0), (name, key, value)
        assert r["threads"] == "callable" or r["threads"] >= 1, (name, r["threads"])


def test_cells_carry_the_gpu_resource_the_profile_maps(rules):
    assert "gpu" in rules["figure_cell"]["resources"], "figure_cell lost its gpu resource (profiles/slurm: --gpus)"


def test_light_rules_are_localrules(rules):
    submitted = sorted(name for name in LIGHT_RULES if not rules[name]["local"])
    assert not submitted, f"light rules not in localrules (would be sbatch jobs): {submitted}"


def test_only_compute_rules_leave_the_submitting_node(rules):
    remote = {name for name, r in rules.items() if r["action"] and not r["local"]}
    assert remote == COMPUTE_RULES


def test_make_test_slurm_exists_outside_make_test():
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^test-slurm:.*\n\tbash tools/slurm/test_slurm\.sh", makefile, re.M)
    test_recipe = re.search(r"^test:.*\n((?:\t.*\n)+)", makefile, re.M).group(1)
    assert "slurm" not in test_recipe
    script = ROOT / "tools/slurm/test_slurm.sh"
    subprocess.run(["bash", "-n", str(script)], check=True)
    text = script.read_text()
    assert "--slurm-status-command squeue" in text and "--profile profiles/slurm" in text
