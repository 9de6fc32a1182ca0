"""bietti2022 bad input: each stops before any training with a message naming the file, the key and
what is allowed: negative a or η, σ < 0, C = 0, an unknown task, Q > N."""

from __future__ import annotations

from pathlib import Path

import pytest

from dpfl import config
from dpfl.papers.bietti2022 import layout
from dpfl.papers.bietti2022.layout import GridLayout
from tests.test_kato_bad_input import edit_in_figure

LAYOUT = GridLayout()

ROOT = Path(__file__).resolve().parent.parent
PAPER_FILE = "config/papers/bietti2022.yaml"


@pytest.mark.parametrize("figure, old, new, key", [
    ("fig1a", "etas: [0.01,", "etas: [-0.01,", "figures.fig1a.params.grids.synthetic.etas[0]"),
    ("fig1c", "levels: [0, 0.1,", "levels: [0, -0.1,", "figures.fig1c.params.grids.emnist_linear.levels[1]"),
    ("fig1a", "sigmas: [0, 3, 10]", "sigmas: [0, -3, 10]", "figures.fig1a.params.grids.synthetic.sigmas[1]"),
    ("fig1c", "clip: 10.0", "clip: 0", "figures.fig1c.params.grids.emnist_linear.clip"),
    ("fig1c", "task: emnist", "task: emnist_full", "figures.fig1c.params.grids.emnist_linear.task"),
])
def test_bad_grid_values_stop_naming_file_and_key(project, figure, old, new, key):
    edit_in_figure(project, figure, old, new, PAPER_FILE)
    with pytest.raises(config.ConfigError) as err:
        config.load(project)
    msg = str(err.value)
    assert PAPER_FILE in msg and key in msg, msg


def test_more_users_per_round_than_users_stops_the_dag():
    cfg = config.load(ROOT)
    params = cfg.figure_params("bietti2022", "fig1c", "none")
    params["grids"]["emnist_linear"].update(users=5, users_per_round=10)
    with pytest.raises(ValueError,
                       match=r"config/papers/bietti2022.yaml: params.grids.emnist_linear.users_per_round: "
                             r"Q = 10 is larger than params.grids.emnist_linear.users N = 5; allowed: 1 ≤ Q ≤ N"):
        LAYOUT.needs(params)


def test_levels_accept_numbers_and_inf_only():
    assert layout.level("inf") == float("inf") and layout.level(0.3) == 0.3
    with pytest.raises(ValueError, match="must be a number ≥ 0"):
        layout.level(-1)
