"""Modes and configured data in the paper files: `authors_code.params` is validated as params once merged,
its settings reach the figure's params only in the authors-code mode, and allocations name implemented kinds."""

from __future__ import annotations

from pathlib import Path

import pytest

from dpfl import config

ROOT = Path(__file__).resolve().parent.parent


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new, 1))


def test_authors_code_settings_apply_only_in_that_mode():
    cfg = config.load(ROOT)
    paper, authors = (cfg.figure_params("lowy2023", "fig5", m)["implementation"] for m in ("none", "authors-code"))
    assert paper["server"] == "mean" and paper["mb_clip"] == "per_example"  # schema defaults = the paper
    assert authors["server"] == "sum" and authors["mb_clip"] == "batch_mean" and authors["local_noise_n"] == "share"
    assert cfg.figure_params("lowy2023", "fig5", "authors-code")["mb_step_scale"] is None
    assert cfg.figure_params("kato2024", "fig2", "none")["group_orders"] == "mironov"
    assert cfg.figure_params("kato2024", "fig2", "authors-code")["group_orders"] == "authors"
    assert ("implementation" not in cfg.paper_settings("lowy2023")
            and "allocations" not in cfg.paper_settings("lowy2023"))
    assert cfg.paper_settings("lowy2023") == {"noise_calibration": "paper"}


def test_misspelt_authors_code_setting_stops_with_file_and_key(project):
    edit(project / "config/papers/lowy2023.yaml",
         "implementation: {server: sum, batch_sampling: with_replacement, mb_clip",
         "implementation: {server: summ, batch_sampling: with_replacement, mb_clip")
    with pytest.raises(config.ConfigError) as err:
        config.load(project)
    msg = str(err.value)
    assert "config/papers/lowy2023.yaml" in msg and "authors_code.params" in msg and "server" in msg and "summ" in msg


def test_unknown_authors_code_key_is_rejected(project):
    edit(project / "config/papers/kato2024.yaml", "params: {group_orders: authors}", "params: {group_order: authors}")
    with pytest.raises(config.ConfigError, match="group_order"):
        config.load(project)


def test_allocation_of_an_unknown_kind_stops(project):
    edit(project / "config/papers/lowy2023.yaml", "kind: even_odd_pairs", "kind: even_odd_triples")
    with pytest.raises(config.ConfigError, match="allocations.mnist-pairs"):
        config.load(project)


def test_allocation_lookup_names_the_configured_ones():
    cfg = config.load(ROOT)
    assert cfg.allocation("lowy2023-mnist-pairs")["params"] == {"pca_components": 50, "per_digit": 774}
    with pytest.raises(config.ConfigError, match="lowy2023-mnist-pairs"):
        cfg.allocation("lowy2023-mnist-pair")
