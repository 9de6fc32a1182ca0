"""The scale files' family reductions (dpfl.config.overlays._scale_overlay): what they reach, what they never add, their
precedence and their errors."""

import shutil
from pathlib import Path

import pytest
import yaml

from dpfl import config
from dpfl.config import ConfigError

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def root(tmp_path):
    for sub in ("config", "workflow/schemas"):
        shutil.copytree(ROOT / sub, tmp_path / sub)
    return tmp_path


def set_quick(root: Path, paper: str, part: dict):
    path = root / "config/scales/quick.yaml"
    data = yaml.safe_load(path.read_text())
    data["papers"][paper] = part
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))


def params(cfg, figure):
    return cfg.figure_params("kato2024", figure, "none")


def test_a_family_reduction_reaches_every_figure_of_the_family_and_adds_no_block(root):
    set_quick(root, "kato2024", {"families": {"training": {
        "params": {"rounds": 3, "hyper": {"naive": {"epochs": 7}, "avg": {"epochs": 4}}},
        "datasets": {"mnist": {"params": {"rounds": 2, "train_subsample": 0.5}}}}}})
    cfg = config.load(root, {"scale": "quick"})
    paper = config.load(root, {"scale": "paper"})
    for fig in ("fig4", "fig6", "fig7", "fig8", "fig9", "fig10a"):
        assert params(cfg, fig)["rounds"] == 3, fig
        assert params(cfg, fig)["hyper"]["avg"]["epochs"] == 4, fig
    for fig in ("fig5", "fig10b"):  # the dataset's refinement wins over the family's
        assert (params(cfg, fig)["rounds"], params(cfg, fig)["train_subsample"]) == (2, 0.5), fig
    assert params(cfg, "fig4")["hyper"]["naive"]["epochs"] == 7
    assert "naive" not in params(cfg, "fig8")["hyper"]  # Fig 8 runs ULDP-AVG only: no NAIVE block appears
    assert params(cfg, "fig8")["hyper"]["avg"]["eta_g"] == params(paper, "fig8")["hyper"]["avg"]["eta_g"]
    assert params(cfg, "fig12") == params(paper, "fig12")  # another family: untouched
    assert params(cfg, "fig4")["panels"] == params(paper, "fig4")["panels"]


def test_precedence_family_then_dataset_then_figure(root):
    set_quick(root, "kato2024", {
        "families": {"training": {"params": {"rounds": 8, "seeds": [0]},
                                         "datasets": {"tcga_brca": {"params": {"rounds": 7}}}}},
        "figures": {"fig9": {"params": {"rounds": 6}}}})
    cfg = config.load(root, {"scale": "quick"})
    assert params(cfg, "fig4")["rounds"] == 8
    assert params(cfg, "fig7")["rounds"] == 7  # TCGA-BRCA
    assert params(cfg, "fig9")["rounds"] == 6
    assert params(cfg, "fig9")["seeds"] == [0]


@pytest.mark.parametrize("part, expected", [
    ({"families": {"trainin": {"params": {"rounds": 2}}}},
     ["papers.kato2024.families", "unknown figure family ['trainin']", "group_privacy, protocol, records, training"]),
    ({"families": {"training": {"datasets": {"mnsit": {"params": {"rounds": 2}}}}}},
     ["families.training.datasets", "no figure of this family names dataset ['mnsit']", "mnist"]),
    ({"families": {"training": {"params": {"rounds": "five"}}}},
     ["families.training as applied to figures.fig4", "rounds"]),
    ({"families": {"training": {"parms": {"rounds": 2}}}}, ["config/scales/quick.yaml", "parms"]),
])
def test_a_bad_family_reduction_names_the_file_the_key_and_what_was_expected(root, part, expected):
    set_quick(root, "kato2024", part)
    with pytest.raises(ConfigError) as err:
        config.load(root, {"scale": "quick"})
    for text in expected:
        assert text in str(err.value), (text, str(err.value))
