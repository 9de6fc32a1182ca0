"""kato2024's figures list what their configuration decides beyond the paper's text, and the
numbers their notes give are the code's: the unused local test split of silos over 500 records, the exactly
balanced `uniform` allocation, the Creditcard MLP's parameter count, Fig 12's records dropped above N̄."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dpfl import config
from dpfl.papers.kato2024.allocation import local_test_split, silos_uniform, users_uniform

ROOT = Path(__file__).resolve().parent.parent
TRAINING = ("fig4", "fig5", "fig8", "fig10a", "fig10b")  # the training figures on a record allocation


@pytest.fixture(scope="module")
def cfg():
    return config.load(ROOT, {"scale": "paper"})


def inferred(cfg, figure: str) -> dict[str, str]:
    return {i["key"]: i["note"] for i in cfg.figure("kato2024", figure).get("inferred", [])}


def test_the_local_test_split_is_listed_where_a_record_allocation_is_used(cfg):
    """Creditcard and MNIST silos over 500 records lose ⌈10%⌉ (stratified) to an unused split."""
    for figure in (*TRAINING, "fig13"):
        alloc = cfg.figure_params("kato2024", figure, "none")["allocation"]
        params = cfg.papers["kato2024"]["allocations"][alloc]["params"]
        assert (params["local_test_threshold"], params["local_test_fraction"]) == (500, 0.1)
        note = inferred(cfg, figure)[f"allocations.{alloc}.params.local_test_*"]
        assert "more than 500 records" in note and "⌈10%⌉" in note and "all training data" in note
    rng = np.random.default_rng(0)
    silo = np.repeat([0, 1], [501, 500])
    mask = local_test_split(silo, rng.integers(0, 2, len(silo)), 2, rng)
    assert (~mask[silo == 0]).sum() == 51 and mask[silo == 1].all()  # ⌈50.1⌉ from the silo over 500; none below


def test_the_balanced_uniform_allocation_is_listed_where_a_uniform_panel_is(cfg):
    for figure in ("fig4", "fig5", "fig8", "fig13"):
        panels = cfg.figure_params("kato2024", figure, "none")["panels"]
        assert any(p["distribution"] == "uniform" for p in panels)
        assert "⌊N/U⌋ or ⌈N/U⌉" in inferred(cfg, figure)["allocations (uniform)"]
    rng = np.random.default_rng(1)
    assert set(np.bincount(users_uniform(24584, 100, rng))) == {245, 246}  # Creditcard's N at U = 100
    assert set(np.bincount(silos_uniform(24584, 5, rng))) == {4916, 4917}


def test_the_creditcard_mlp_has_the_parameters_its_note_gives(cfg):
    from dpfl.models.nets import build_model

    n = sum(p.numel() for p in build_model("creditcard_mlp", 0).parameters())
    assert n == 5012
    for figure in ("fig4", "fig8", "fig10a"):
        assert cfg.figure_params("kato2024", figure, "none")["dataset"] == "creditcard"
        note = inferred(cfg, figure)["model (creditcard_mlp)"]
        assert f"{n:,} parameters" in note and '"about 4K"' in note


def test_fig12_lists_the_records_dropped_above_the_bound(cfg):
    p = cfg.figure_params("kato2024", "fig12", "none")
    records = p["data"]["records_per_silo"] * p["silos"]
    note = inferred(cfg, "fig12")["params.record_bound"]
    assert p["record_bound"] == 2000 and f"N̄ = {p['record_bound']}" in note
    fewest = min(p["users"])
    assert records / fewest > p["record_bound"]  # the smallest sweep point holds more than N̄ per user
    assert f"{records - fewest * p['record_bound']:,} of {records:,} at {fewest} users" in note
    assert cfg.figure_params("kato2024", "fig12", "authors-code")["default_users"] == fewest  # "… in that sweep too"
