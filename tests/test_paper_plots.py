"""Plots of lowy2023 (Figs 4-9), asoodeh2021 Fig 2 and balle2020 Fig 2, drawn from their tables: lowy2023's panels
carry the letters the claims' reasons name ("panel c") and the figure has one legend, below the axes (it covered a
curve inside them); asoodeh2021's figure names Theorem 2 once; both of balle2020's panels are covered by one legend."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from dpfl import config, plotting
from dpfl.io import resolve
from dpfl.papers import FIGURES

ROOT = Path(__file__).resolve().parent.parent
META = {"mode": "none", "data_source": "real", "scale": "smoke", "reduced_scale": True}


@pytest.fixture(autouse=True)
def _close():
    plotting.setup()
    yield
    plt.close("all")


def analytic(paper: str, figure: str):
    """The figure drawn from its table at the YAML's settings, with the title and corner note of the plot stage."""
    spec = config.load(ROOT, {"scale": "smoke"}).figure(paper, figure)
    df = resolve(FIGURES[(paper, figure)].table)(spec["params"], lambda *a: None)
    fig = resolve(FIGURES[(paper, figure)].plot)(df, spec, META)
    fig.suptitle(spec["title"], fontsize=9)
    plotting.annotate(fig, META)
    fig.canvas.draw()
    return fig, spec


def lowy_table(panels=("a", "b", "c", "d", "e")) -> pd.DataFrame:
    """A lowy2023 figure table: per panel two private methods (certified ε) over ε and two tuned baselines."""
    rows = []
    for k, panel in enumerate(panels):
        for alg, curve, private in (("noisy_mb_sgd", "ISRL-DP MB-SGD", True),
                                    ("noisy_local_sgd", "ISRL-DP Local SGD", True),
                                    ("minibatch", "MB-SGD", False), ("local", "Local SGD (FedAvg)", False)):
            for x in (0.5, 1.0, 3.0):
                y = 1.0 + 0.1 / x if private else 0.9
                rows.append({"panel": panel, "curve": curve, "algorithm": alg, "x": x, "y": y, "y_lo": y - 0.02,
                             "y_hi": y + 0.02, "trials": 2, "n_silos": 5, "silos_per_round": 5 - k % 3, "K": 73,
                             "upsilon2": 9.6e7,
                             # Local SGD's noise is far from private at ε = 3, by a different margin per panel
                             "eps_certified": (x * (100 * (k + 1) if alg == "noisy_local_sgd" else 1.1))
                             if private else np.nan})
    return pd.DataFrame(rows)


def lowy(df):
    from dpfl.papers.lowy2023.plot import figure
    fig = figure(df, {"plot": {"ylabel": "Relative test RMSE"}}, META)
    plotting.annotate(fig, META)
    fig.canvas.draw()
    return fig


def test_lowy_panels_carry_their_letters_and_the_figure_one_legend_below_the_axes():
    fig = lowy(lowy_table())
    drawn = [ax for ax in fig.axes if ax.get_visible() and ax.axison]
    assert [ax.get_title()[:4] for ax in drawn] == ["(a) ", "(b) ", "(c) ", "(d) ", "(e) "]
    assert all(ax.get_legend() is None for ax in fig.axes) and len(fig.legends) == 1
    (legend,) = fig.legends
    labels = [t.get_text() for t in legend.get_texts()]
    assert len(labels) == 4 and labels[2:] == ["MB-SGD", "Local SGD (FedAvg)"]
    # one entry per method for every panel: the certified ε over the panels where it is far from private
    assert labels[0] == "ISRL-DP MB-SGD"
    assert labels[1] == "ISRL-DP Local SGD (certified ε 300–1.50e3 at ε = 3)"
    box = legend.get_window_extent()
    assert all(ax.get_window_extent().y0 >= box.y1 for ax in drawn)  # below every axis: covers no curve
    note = next(t for t in fig.texts if t.get_text().startswith("mode:")).get_window_extent()
    assert note.y1 <= box.y0


def test_a_one_panel_lowy_figure_has_no_letter_and_its_legend_outside_the_axes():
    fig = lowy(lowy_table(panels=("a",)))  # Fig 6: the legend covered a curve of the authors-code variant
    (ax,) = fig.axes
    assert ax.get_title().startswith("N = 5") and ax.get_legend() is None
    (legend,) = fig.legends
    assert ax.get_window_extent().y0 >= legend.get_window_extent().y1
    assert "certified ε 300 at ε = 3" in legend.get_texts()[1].get_text()


def test_asoodeh2021_fig2_names_theorem_2_once():
    fig, spec = analytic("asoodeh2021", "fig2")
    texts = [fig._suptitle.get_text(), *(ax.get_title() for ax in fig.axes),
             *(ax.get_xlabel() for ax in fig.axes), *(ax.get_ylabel() for ax in fig.axes)]
    assert sum(t.count("Theorem 2") for t in texts) == 1
    assert "η=0.5" in fig.axes[0].get_title()


def test_balle2020_fig2_has_one_legend_for_both_panels():
    fig, _ = analytic("balle2020", "fig2")
    linear, log = fig.axes
    assert linear.get_yscale() == "linear" and log.get_yscale() == "log"
    assert linear.get_legend() is None and log.get_legend() is None
    (legend,) = fig.legends
    labels = [t.get_text() for t in legend.get_texts()]
    assert labels == [line.get_label() for line in linear.lines]  # every curve of the linear panel is named
    assert len(labels) == 7 and "ε = ε0 (vacuous above)" in labels
    assert all(ax.get_window_extent().y0 >= legend.get_window_extent().y1 for ax in fig.axes)
