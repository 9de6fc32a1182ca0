"""lowy2023 cell pieces: step grids, K, the named random streams, the figure table (aggregate), and a panel cell
(its methods as runs) against its runs computed apart."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpfl import config
from dpfl.jobs import CellJob
from dpfl.papers.lowy2023.cell import Streams, local_steps, run_cell, step_grid
from dpfl.papers.lowy2023.layout import LowyLayout
from dpfl.papers.lowy2023.methods import BY_ID
from dpfl.papers.lowy2023.settings import StepGrids
from dpfl.papers.lowy2023.table import aggregate
from dpfl.seeds import rng_for

GRIDS = {"minibatch": {"start": -2, "stop": 0, "num": 3}, "local": {"start": -4, "stop": -1, "num": 4},
         "noisy_local_sgd": {"start": -6, "stop": -1, "num": 6, "first": 2}}


@pytest.mark.parametrize("scale, factor", [("silos_per_round", 5), ("local", 7), (None, 1)])
def test_minibatch_grid_is_rescaled_by_m_or_k(scale, factor):
    grids = StepGrids.from_params(GRIDS)
    got = step_grid(grids, scale, BY_ID["noisy_mb_sgd"], M=5, K=7)
    np.testing.assert_allclose(got, np.exp(np.linspace(-2, 0, 3)) * factor)
    # Local SGD is never rescaled; a method's own grid wins over its update's, and `first` truncates it
    np.testing.assert_allclose(step_grid(grids, scale, BY_ID["local_sgd"], 5, 7), np.exp(np.linspace(-4, -1, 4)))
    np.testing.assert_allclose(step_grid(grids, scale, BY_ID["noisy_local_sgd"], 5, 7),
                               np.exp(np.linspace(-6, -1, 6))[:2])


def test_local_steps_formula():
    assert local_steps(1238, 18.0, 35) == int(np.floor(1238 * np.sqrt(18 / 140)))
    assert local_steps(10, 1e-9, 35) == 1  # at least one step


def test_rng_for_is_deterministic_and_keyed():
    a, b = rng_for(0, "x", 1).random(3), rng_for(0, "x", 1).random(3)
    assert np.array_equal(a, b)
    assert not np.array_equal(a, rng_for(0, "x", 2).random(3))
    assert not np.array_equal(a, rng_for(1, "x", 1).random(3))
    assert not np.array_equal(rng_for(0, "x", "1").random(3), rng_for(0, "x1").random(3))


def test_streams_share_trial_splits_across_figures_and_methods_only():
    s1 = Streams(0, "mnist", 25, "fig4", "a", "noisy_mb_sgd")
    s2 = Streams(0, "mnist", 25, "fig7", "a", "local_sgd")
    assert np.array_equal(s1.trial(3).random(4), s2.trial(3).random(4))  # same data split in Figs 4 and 7
    assert np.array_equal(s1.upsilon(3).random(4), s2.upsilon(3).random(4))
    assert not np.array_equal(s1.trial(3).random(4), s1.trial(4).random(4))
    assert not np.array_equal(s1.rep(0, 0).random(4), s2.rep(0, 0).random(4))  # own optimization draws
    assert not np.array_equal(s1.rep(0, 0).random(4), s1.rep(0, 1).random(4))
    other_n = Streams(0, "mnist", 12, "fig4", "a", "noisy_mb_sgd")
    assert not np.array_equal(s1.trial(0).random(4), other_n.trial(0).random(4))


def _cells(values_private, values_public, eps=(1.0, 2.0)):
    rows = []
    for t, (vals) in enumerate(values_private):
        for e, v in zip(eps, vals):
            rows.append({"trial": t, "algorithm": "noisy_mb_sgd", "label": "ISRL-DP MB-SGD", "panel": "a", "eps": e,
                         "test": v, "step": 0.1, "diverged_reps": 0, "grid_edge": "low" if t == 0 else "",
                         "n_silos": 3, "silos_per_round": 2, "K": 4, "rounds": 5, "upsilon2": 1.0, "n_train_min": 50,
                         "eps_certified": e * 1.1, "eps_certified_paper_noise": e * 1.1, "z_used": 2.0 / e,
                         "z_paper": 2.0 / e, "z_accountant": 2.2 / e + 0.1 * t})
    for t, v in enumerate(values_public):
        rows.append({"trial": t, "algorithm": "mb_sgd", "label": "MB-SGD", "panel": "a", "eps": np.nan, "test": v,
                     "step": 0.2, "diverged_reps": 1, "grid_edge": "", "n_silos": 3, "silos_per_round": 2, "K": 4,
                     "rounds": 5, "upsilon2": 1.0, "n_train_min": 50, "eps_certified": np.nan,
                     "eps_certified_paper_noise": np.nan, "z_used": np.nan, "z_paper": np.nan, "z_accountant": np.nan})
    return [pd.DataFrame(rows)]


def test_aggregate_means_percentile_bars_and_flat_baselines():
    private = [[0.2, 0.1], [0.4, 0.3], [0.9, 0.5]]
    params = {"epsilons": [1.0, 2.0], "experiment": "mnist", "error_bars": True,
              "implementation": {"clamp_error_bars": False}}
    df = aggregate(params, _cells(private, [0.05, 0.15, 0.25]), log=print)
    p1 = df[(df["algorithm"] == "noisy_mb_sgd") & (df["x"] == 1.0)].iloc[0]
    vals = np.array([0.2, 0.4, 0.9])
    half = (np.percentile(vals, 95) - np.percentile(vals, 5)) / 2
    assert p1["y"] == pytest.approx(vals.mean()) and p1["y_hi"] - p1["y"] == pytest.approx(half)
    assert p1["se"] == pytest.approx(vals.std(ddof=1) / np.sqrt(3)) and p1["trials"] == 3
    assert p1["grid_edge_share"] == pytest.approx(1 / 3) and p1["eps_certified"] == pytest.approx(1.1)
    base = df[df["algorithm"] == "mb_sgd"]
    assert base["x"].tolist() == [1.0, 2.0] and base["y"].nunique() == 1  # tuned once, drawn flat across ε
    assert base["y"].iloc[0] == pytest.approx(0.15) and base["diverged_reps"].iloc[0] == 3
    assert np.isnan(base["z_accountant"]).all() and np.isnan(base["eps_certified"]).all()
    assert p1["z_accountant"] == pytest.approx(2.2)  # the smallest over trials (computed in the cells)


def test_aggregate_clamps_error_rate_bars_only_when_asked():
    """A diverged run's test value is the penalty (100 on MNIST), so the p95 of an error rate can exceed 1;
    the authors' code clamps the percentiles to [0, 1] (Q12)."""
    private = [[0.0, 0.0], [0.0, 0.0], [100.0, 100.0]]
    lo, hi = np.percentile([0, 0, 100], 5), np.percentile([0, 0, 100], 95)
    for clamp, half in ((False, (hi - lo) / 2), (True, (min(hi, 1.0) - max(lo, 0.0)) / 2)):
        params = {"epsilons": [1.0, 2.0], "experiment": "mnist", "error_bars": True,
                  "implementation": {"clamp_error_bars": clamp}}
        r = aggregate(params, _cells(private, [0.1] * 3), log=print)
        r = r[(r["algorithm"] == "noisy_mb_sgd") & (r["x"] == 1.0)].iloc[0]
        assert r["y_hi"] - r["y"] == pytest.approx(half)
    params["experiment"] = "insurance"  # relative RMSE is not a rate: never clamped
    r = aggregate(params, _cells(private, [0.1] * 3), log=print)
    assert (r["y_hi"] - r["y"]).iloc[0] == pytest.approx((hi - lo) / 2)
    params["error_bars"] = False
    r = aggregate(params, _cells(private, [0.1] * 3), log=print)
    assert (r["y_hi"] == r["y"]).all()


def test_a_diverged_run_is_never_chosen_over_a_finite_one():
    """Obesity's test penalty (1.0) is below the loss at W = 0 (ln 7): as a score it would prefer divergence."""
    from dpfl.papers.lowy2023.cell import tuning_score

    loss = np.array([[2.5, 0.3, np.nan]])
    diverged = np.array([[False, True, True]])
    score = tuning_score(loss, diverged, np.nan, "excess_loss")
    assert int(np.argmin(score.mean(axis=0))) == 0 and np.isinf(score[0, 1:]).all()
    # with a certified F* the excess loss is the loss minus F*; without one the loss itself (same choice)
    assert tuning_score(np.array([[2.0]]), np.array([[False]]), 0.5, "excess_loss")[0, 0] == 1.5
    assert tuning_score(np.array([[2.0]]), np.array([[False]]), 0.5, "loss")[0, 0] == 2.0


# ---- a panel cell: its four methods as runs, one process --------------------------------------------------------

LAYOUT = LowyLayout()
SETTINGS = {"noise_calibration": "paper"}


def _panel_params(mode: str) -> dict:
    """Fig 4's smoke params in `mode` (every implementation key), shrunk to a 3-silo panel of a tiny silo pool: two
    trials, two repetitions, four rounds, two ε and three-point grids (Local SGD's private twin with its own)."""
    cfg = config.load(Path(__file__).resolve().parent.parent, {"scale": "smoke"})
    grid = {"start": -3, "stop": 0, "num": 3}
    return {**cfg.figure_params("lowy2023", "fig4", mode), "panels": [{"id": "a", "n_silos": 3, "silos_per_round": 2}],
            "trials": 2, "reps": 2, "rounds": 4, "epsilons": [1.0, 4.0],
            "step_grids": {"minibatch": grid, "local": grid, "noisy_local_sgd": {"start": -5, "stop": -1, "num": 3}}}


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    """A tiny MNIST-like silo pool (the `lowy2023-mnist-pairs` allocation's arrays): 4 silos × 30 rows × 5 features,
    labels from a noisy linear rule (not separable)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(4, 30, 5))
    y = (X @ rng.normal(size=5) + rng.normal(size=(4, 30)) > 0).astype(float)
    path = tmp_path_factory.mktemp("lowy") / "pairs.npz"
    np.savez(path, X=X, y=y, meta=json.dumps({"kind": "fixture"}))
    return {"prepared": {}, "allocations": {"lowy2023-mnist-pairs": str(path)}}


def _job(params: dict, runs: list[str] | None = None) -> CellJob:
    """Panel a's cell computing every run, or only `runs`."""
    own, settings = (LAYOUT.cell_params(params, SETTINGS, "a") if runs is None
                     else LAYOUT.runs_params(params, SETTINGS, "a", runs))
    return CellJob(paper="lowy2023", figure="fig4", cell="a", mode="none", scale="smoke", seed=0, device="cpu",
                   params=own, settings=settings)


def test_a_panel_cell_has_its_methods_as_runs_each_with_only_its_params():
    params = _panel_params("none")
    runs = LAYOUT.cell_runs(params, "a")
    assert LAYOUT.cells(params) == ["a"] and runs == ["a-noisy_mb_sgd", "a-noisy_local_sgd", "a-mb_sgd", "a-local_sgd"]
    own, settings = LAYOUT.runs_params(params, SETTINGS, "a", ["a-mb_sgd"])  # a baseline: ε_max, no noise setting
    assert own["methods"] == ["mb_sgd"] and own["step_grids"] == {"minibatch": params["step_grids"]["minibatch"]}
    assert own["epsilons"] == [4.0] and settings == {}
    own, settings = LAYOUT.runs_params(params, SETTINGS, "a", ["a-noisy_local_sgd"])  # its own grid
    assert list(own["step_grids"]) == ["noisy_local_sgd"] and own["epsilons"] == [1.0, 4.0] and settings == SETTINGS
    own, settings = LAYOUT.cell_params(params, SETTINGS, "a")
    assert own["methods"] == [r.split("-", 1)[1] for r in runs] and own["panels"] == params["panels"]
    assert set(own["step_grids"]) == {"minibatch", "noisy_local_sgd", "local"} and settings == SETTINGS
    with pytest.raises(ValueError, match="not runs of panel 'a'"):
        LAYOUT.runs_params(params, SETTINGS, "a", ["b-mb_sgd"])


@pytest.mark.parametrize("mode", ["none", "authors-code"])
def test_a_panel_cell_is_its_runs_computed_apart(pool, mode):
    """A panel cell computes its methods one after another on each trial's data, built once: its table is exactly
    the concatenation of the runs computed one by one (in another order, so that nothing a run leaves behind, e.g.
    a generator, a cached object or modified trial data, changes the next), each with one seconds per trial."""
    params = _panel_params(mode)
    runs = LAYOUT.cell_runs(params, "a")
    result = run_cell(_job(params), pool, lambda *a: None)
    panel = result.table
    assert list(dict.fromkeys(panel["run"])) == runs and len(panel) == 2 * (2 + 2 + 1 + 1)
    assert (panel["run"] == "a-" + panel["algorithm"]).all()
    apart = {r: run_cell(_job(params, [r]), pool, lambda *a: None).table for r in reversed(runs)}
    want = pd.concat([apart[r] for r in runs], ignore_index=True)
    pd.testing.assert_frame_equal(panel, want)
    assert list(result.timing) == runs and all(t.seconds_per_trial > 0 for t in result.timing.values())  # one per run
    assert panel["test"].notna().all() and panel.loc[panel["private"], "z_used"].gt(0).all()


def test_a_cell_records_the_epsilon_its_variant_certifies(pool):
    """The authors' MNIST code does not clip (clip_at_lipschitz: false): its cell certifies ε = ∞ and says why,
    where the paper's mode certifies the finite ε of its noise (spec §9: never the default's ε beside a variant
    that does not have it)."""
    rows = {mode: run_cell(_job(_panel_params(mode)), pool, lambda *a: None).table for mode in ("none", "authors-code")}
    for mode, table in rows.items():
        noisy = table[table["private"]]
        if mode == "none":
            assert np.isfinite(noisy["eps_certified"]).all() and (noisy["certification"] == "").all()
        else:
            assert np.isinf(noisy["eps_certified"]).all()
            assert noisy["certification"].str.contains("not clipped").all()
