"""The `gpu` resource of the cell rule (dpfl.jobs.cell_gpu): 1 exactly for the cells worth a GPU (the CNNs), so that
`--resources gpu=1` serialises them and a cluster profile can route them; the SLURM profile stays valid YAML."""

from __future__ import annotations

from pathlib import Path

import yaml

from dpfl import jobs
from dpfl.config import load

ROOT = Path(__file__).resolve().parents[1]


def test_cnn_cells_ask_for_a_gpu_and_the_others_do_not():
    cfg = load(ROOT, {"scale": "smoke"})
    wants = lambda figure, cell, paper="bietti2022": jobs.cell_gpu(cfg, paper, figure, cell, "none")  # noqa: E731
    assert all(wants("fig1d", c) == 1 for c in jobs.cell_ids(cfg, "bietti2022", "fig1d", "none"))
    assert all(wants("fig1a", c) == 0 for c in jobs.cell_ids(cfg, "bietti2022", "fig1a", "none"))
    fig2 = {c: wants("fig2", c) for c in jobs.cell_ids(cfg, "bietti2022", "fig2", "none")}
    assert {c for c, g in fig2.items() if g} == {c for c in fig2 if c.startswith("emnist_cnn-")}
    assert all(wants("fig5", c, "kato2024") == 1 for c in jobs.cell_ids(cfg, "kato2024", "fig5", "none"))
    assert all(wants("fig4", c, "kato2024") == 0 for c in jobs.cell_ids(cfg, "kato2024", "fig4", "none"))
    assert all(wants("fig13", c, "kato2024") == 0 for c in jobs.cell_ids(cfg, "kato2024", "fig13", "none"))


def test_slurm_profile_is_yaml_with_the_executor():
    profile = yaml.safe_load((ROOT / "profiles/slurm/config.yaml").read_text())
    assert profile["executor"] == "slurm" and "mem_mb" in profile["default-resources"]
