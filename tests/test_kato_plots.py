"""kato2024's training plot (and the shared helpers of dpfl.plotting it uses) on hand-made figure tables: an axis is
log only where its values span a decade (`log_scale_fits`; over less, a linear axis with plain tick labels), the
legend names every curve even in a one-panel figure, the certified-ε entry appears only where a certified curve is
drawn, and the mode/data/scale note stays clear of a legend below the axes."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dpfl import plotting
from dpfl.papers.kato2024.training.plot import curves

META = {"mode": "none", "data_source": "real", "scale": "quick", "reduced_scale": True}


def table(left: dict[str, np.ndarray], eps: dict[str, np.ndarray], certified: dict[str, np.ndarray] | None = None,
          panels=("a",), column: str = "test_loss") -> pd.DataFrame:
    """A training figure's tidy table: per panel and curve, the `column` and ε rows of every round."""
    rows = []
    for panel in panels:
        for curve in left:
            for quantity, values in ((column, left[curve]), ("eps", eps[curve]),
                                     ("eps_certified", (certified or eps)[curve])):
                for t, y in enumerate(values, start=1):
                    rows.append({"panel": panel, "curve": curve, "quantity": quantity, "window": "round", "x": t,
                                 "y": float(y), "y_lo": float(y), "y_hi": float(y), "users": 100, "silos": 5,
                                 "distribution": "zipf"})
    df = pd.DataFrame(rows)
    df["metric"], df["loss"] = "accuracy", "test_loss"
    return df


def draw(df, **plot):
    plotting.setup()
    return curves(df, {"plot": {"left": "loss", **plot}}, META)


def test_log_scale_fits_only_a_span_of_a_decade():
    assert not plotting.log_scale_fits([2.26, 2.28, 2.31])  # Fig 5's test losses: 2%
    assert not plotting.log_scale_fits([0.2, 1.9])
    assert plotting.log_scale_fits([0.2, 2.0])
    assert plotting.log_scale_fits([1.0, np.nan, 1e6])  # NaN (a failed seed's rounds) ignored
    assert not plotting.log_scale_fits([0.0, 10.0]) and not plotting.log_scale_fits([-1.0, 100.0])
    assert not plotting.log_scale_fits([np.nan]) and not plotting.log_scale_fits([])


@pytest.mark.parametrize("losses, log", [((2.31, 2.29, 2.27), False), ((2.0, 0.5, 0.01), True)])
def test_log_left_is_log_only_where_the_losses_span_a_decade(losses, log):
    fig = draw(table({"AVG": np.array(losses)}, {"AVG": np.array([1.0, 2.0, 3.0])}), log_left=True)
    left, right = fig.axes[0], fig.axes[1]
    assert left.get_yscale() == ("log" if log else "linear")
    assert right.get_yscale() == "linear"  # ε 1-3: less than a decade


def test_a_short_log_axis_labels_plain_numbers():
    import matplotlib.pyplot as plt

    fig, (short, wide) = plt.subplots(1, 2)
    assert plotting.value_scale(short, [0.2, 7.0]) and plotting.value_scale(wide, [1.0, 1e6])
    assert not plotting.value_scale(short.twinx(), [0.2, 7.0], log=False)
    fig.canvas.draw()
    labels = [t.get_text() for t in short.get_yticklabels(minor=True) + short.get_yticklabels() if t.get_text()]
    assert labels and all("10^" not in s and "×" not in s for s in labels), labels
    assert {"0.2", "0.5", "1", "2", "5"} <= set(labels)
    assert short.get_yscale() == wide.get_yscale() == "log"
    plt.close(fig)


def test_the_legend_names_every_curve_in_a_one_panel_figure():
    names = ["ULDP-AVG-w", *(f"ULDP-AVG-ws (q={q})" for q in (0.1, 0.3, 0.5, 0.7))]
    rounds = np.array([1.0, 0.9, 0.8])
    fig = draw(table({n: rounds for n in names}, {n: rounds * (i + 1) for i, n in enumerate(names)}),
               panels_per_row=1)
    plotting.annotate(fig, META)
    fig.canvas.draw()
    (legend,) = fig.legends
    assert [t.get_text() for t in legend.get_texts()] == names  # no certified entry: none differs
    box = legend.get_window_extent()
    assert box.x0 >= 0 and box.x1 <= fig.bbox.width  # not cut by the figure's edges
    note = next(t for t in fig.texts if t.get_text().startswith("mode:")).get_window_extent()
    assert note.y1 <= box.y0 and all(ax.get_window_extent().y0 >= box.y1 for ax in fig.axes)


def test_the_certified_entry_appears_only_where_a_certified_curve_is_drawn():
    eps = {"GROUP-max": np.array([1.0, 2.0]), "AVG": np.array([0.5, 0.7])}
    same = draw(table({k: np.array([1.0, 0.9]) for k in eps}, eps))
    assert [t.get_text() for t in same.legends[0].get_texts()] == ["GROUP-max", "AVG"]
    differs = draw(table({k: np.array([1.0, 0.9]) for k in eps}, eps, {**eps, "GROUP-max": eps["GROUP-max"] * 4}))
    texts = [t.get_text() for t in differs.legends[0].get_texts()]
    assert texts[:2] == ["GROUP-max", "AVG"] and "certified ε" in texts[2]
    assert sum(line.get_linestyle() == "--" for line in differs.axes[1].lines) == 1


def test_a_curve_drawn_only_in_a_later_panel_is_in_the_legend():
    df = table({"AVG": np.array([1.0, 0.9]), "SGD": np.array([1.0, 0.8])},
               {"AVG": np.array([1.0, 2.0]), "SGD": np.array([1.0, 2.0])}, panels=("a", "b"))
    df = df[~((df["panel"] == "a") & (df["curve"] == "SGD"))]
    fig = draw(df)
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["AVG", "SGD"]


def with_methods(df: pd.DataFrame, methods: dict[str, str], q: dict[str, float] | None = None) -> pd.DataFrame:
    """The table's method id (and sampling rate) of every curve, as the training table has them."""
    return df.assign(method=df["curve"].map(methods), q=df["curve"].map(q or {}).fillna(1.0))


def test_a_method_has_one_colour_and_marker_in_every_figure():
    rounds = np.linspace(1.0, 0.5, 100)
    nine = {f"M{i}": m for i, m in enumerate(["default", "uldp_naive", "uldp_group_max", "uldp_group_median",
                                              "uldp_group_2", "uldp_group_8", "uldp_sgd", "uldp_avg", "uldp_avg_w"])}
    same = ("M1", "M6", "M7", "M8")  # NAIVE, SGD, AVG, AVG-w: one nominal ε
    eps = {c: rounds * (2 if c in same else 3 + i) for i, c in enumerate(nine)}
    fig6 = draw(with_methods(table({c: rounds for c in nine}, eps), nine))
    pair = {"M7": "uldp_avg", "M8": "uldp_avg_w"}
    fig9 = draw(with_methods(table({c: rounds for c in pair}, {c: rounds * 2 for c in pair}), pair))
    styles = {line.get_label(): (line.get_color(), line.get_marker()) for line in fig6.axes[0].lines}
    assert len(set(styles.values())) == 9 and len({c for c, _ in styles.values()}) == 9  # nine hues, nine markers
    assert len({m for _, m in styles.values()}) == 9
    assert {line.get_label(): (line.get_color(), line.get_marker()) for line in fig9.axes[0].lines} == \
        {c: styles[c] for c in pair}
    # the same ε: each curve's markers at other rounds than the others', so that all of them show
    starts = [line.get_markevery()[0] for line in fig6.axes[1].lines if line.get_color() in
              {styles[c][0] for c in same}]
    assert len(starts) == 4 and len(set(starts)) == 4


def test_smaller_sampling_rates_are_drawn_on_top_in_their_own_line_style():
    curves_q = {"ULDP-AVG-w": 1.0, **{f"ULDP-AVG-ws (q={q})": q for q in (0.1, 0.3, 0.5, 0.7)}}
    methods = {c: "uldp_avg_w" if q == 1.0 else "uldp_avg_ws" for c, q in curves_q.items()}
    flat = np.full(30, 0.5)  # Fig 10(a) at paper scale: q = 0.1 and q = 0.3 both at 0.5
    fig = draw(with_methods(table({c: flat for c in curves_q}, {c: flat * (1 + q) for c, q in curves_q.items()}),
                            methods, curves_q), panels_per_row=1)
    lines = {line.get_label(): line for line in fig.axes[0].lines}
    assert len({lines[c].get_marker() for c in curves_q}) == len({lines[c].get_color() for c in curves_q}) == 5
    assert all(lines[c].get_linestyle() != "-" for c in curves_q if c != "ULDP-AVG-w")  # broken: what is under shows
    order = sorted(curves_q, key=lambda c: lines[c].get_zorder(), reverse=True)
    assert order == ["ULDP-AVG-ws (q=0.1)", "ULDP-AVG-ws (q=0.3)", "ULDP-AVG-ws (q=0.5)", "ULDP-AVG-ws (q=0.7)",
                     "ULDP-AVG-w"]


def test_an_eps_the_same_in_every_panel_is_drawn_once_and_named_for_both_methods():
    """Fig 9: ULDP-AVG and ULDP-AVG-w have one ε, the same in both panels: one ε panel, one line, which says so."""
    eps = np.array([0.8, 1.2, 1.5])
    df = table({"ULDP-AVG": np.array([0.6, 0.58, 0.57]), "ULDP-AVG-w": np.array([0.59, 0.58, 0.56])},
               {"ULDP-AVG": eps, "ULDP-AVG-w": eps}, panels=("a", "b"))
    fig = draw(df)
    eps_axes = [ax for ax in fig.axes if ax.get_ylabel().startswith("ε")]
    assert len(eps_axes) == 1 and len(fig.axes) == 3
    (ax,) = eps_axes
    assert len(ax.lines) == 1 and "(a), (b)" in ax.get_title()
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["ULDP-AVG and ULDP-AVG-w: the same ε"]
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["ULDP-AVG", "ULDP-AVG-w"]
    # where the panels' ε differ (Figs 4-7: GROUP's depends on the data), each panel keeps its own ε plot
    other = df.copy()
    other.loc[(other["panel"] == "b") & (other["quantity"].str.startswith("eps")), "y"] *= 2
    assert sum(a.get_ylabel().startswith("ε") for a in draw(other).axes) == 2
