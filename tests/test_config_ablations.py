"""One-switch ablations (docs/configuration.md): a figure's authors-code params split into the paper's difference
items, and variants that switch some items alone; the workflow builds them into <figure>/ablations/<name>/."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dpfl import config, paths
from dpfl.config.overlays import deep_merge

ROOT = Path(__file__).resolve().parent.parent


def test_an_ablation_switches_only_its_items():
    cfg = config.load(ROOT)
    none = cfg.figure_params("lowy2023", "fig5", "none")
    q7 = cfg.figure_params("lowy2023", "fig5", "ablation-q7")
    code = cfg.figure_params("lowy2023", "fig5", "authors-code")
    assert q7["implementation"]["mb_clip"] == "batch_mean" == code["implementation"]["mb_clip"]
    changed = {k for k in none["implementation"] if none["implementation"][k] != q7["implementation"][k]}
    assert changed == {"mb_clip"} and q7["mb_step_scale"] == none["mb_step_scale"]
    assert cfg.figure_params("lowy2023", "fig5", "ablation-q2")["mb_step_scale"] is None  # Q2 rescales the grid too
    with pytest.raises(config.ConfigError, match="no variant 'ablation-q99'"):
        cfg.figure_params("lowy2023", "fig5", "ablation-q99")


def test_the_items_of_every_figure_add_up_to_its_authors_code_params():
    """Every figure that splits its authors-code params into items: the items merged give the params, so the
    authors-code variant is exactly its items (load() checks it; this test lists what it checked)."""
    cfg = config.load(ROOT)
    split = [(p, f) for p, spec in cfg.papers.items() for f, fig in spec["figures"].items()
             if fig.get("authors_code", {}).get("items")]
    assert ("lowy2023", "fig6") in split and ("kato2024", "fig2") in split and ("bietti2022", "fig1a") in split
    for p, f in split:
        code = cfg.figure(p, f)["authors_code"]
        merged: dict = {}
        for overlay in code["items"].values():
            merged = deep_merge(merged, overlay)
        assert merged == code["params"], (p, f)


def _write_paper(tmp_path: Path, edit) -> Path:
    """A copy of the configuration (and the schemas) with lowy2023's paper file edited."""
    root = tmp_path / "project"
    for item in ("config", "workflow"):
        shutil.copytree(ROOT / item, root / item)
    path = root / "config/papers/lowy2023.yaml"
    text = path.read_text()
    assert edit(text) != text, "the edit does not apply"
    path.write_text(edit(text))
    return root


@pytest.mark.parametrize("edit, message", [
    (lambda s: s.replace("ablations: {q9: [Q9], q10: [Q10]}", "ablations: {q9: [Q99]}"), "unknown item"),
    (lambda s: s.replace("        Q12: {implementation: {clamp_error_bars: true}}\n      build_by_default: true",
                         "      build_by_default: true"), "merged together give"),
])
def test_a_bad_ablation_or_item_table_is_a_configuration_error(tmp_path, edit, message):
    root = _write_paper(tmp_path, edit)
    with pytest.raises(config.ConfigError, match=message):
        config.load(root)


def test_paths_of_an_ablation():
    assert paths.figure_dir("lowy2023", "fig5", "ablation-q7") == "results/lowy2023/fig5/ablations/q7/"
    assert paths.ablation_name("ablation-q7") == "q7" and paths.ablation_name("authors-code") is None


@pytest.mark.pipeline
def test_ablations_true_plans_every_ablation_of_the_selected_figures(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--cores", "1", "--config", "scale=smoke",
                           "ablations=true", "only=[lowy2023/fig6]"], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout + proc.stderr
    for name in ("q9", "q10"):
        assert f"results/lowy2023/fig6/ablations/{name}/claims.json" in text
    without = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--cores", "1", "--config", "scale=smoke",
                              "only=[lowy2023/fig6]"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert "ablations/" not in without.stdout + without.stderr


def test_a_claim_over_several_figures_takes_its_context_from_the_built_ones():
    """kato2024's C-K4c-f name Fig 4 first; built over Figs 6-7 only, their cause must be read against the
    ablations of the figures built (K1, K2), not against Fig 4's (none), or a not-reproduced verdict would say
    nothing was tried."""
    cfg = config.load(ROOT, {"scale": "paper", "only": ["kato2024/fig6", "kato2024/fig7"]})
    claim = next(c for c in cfg.papers["kato2024"]["claims"] if c["id"] == "C-K4c")
    built = cfg.built_figures("kato2024", claim)
    assert claim["figures"][0] not in built and built == ["fig6", "fig7"]
    context = cfg.claims_context("kato2024", built)
    assert set(context["ablations"]) == {paths.ablation_mode("k1"), paths.ablation_mode("k2")}
    assert context["ablations"][paths.ablation_mode("k1")] == ["K1"] and context["evidence"] == {}
    assert cfg.claims_context("kato2024", claim["figures"])["ablations"] == {}  # what the first figure alone gives
