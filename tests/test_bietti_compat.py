"""bietti2022 `compat: authors-code` (spec §8): B1 shuffled fixed-size rounds until the data is exhausted (÷ L_t,
accounted at L_t/N), B2 the CNN's local step L·η_θ, B3 the excess risk ÷ d, B4 the end at the last multiple of
eval_every, B5 independent streams per run; and that the paper's defaults are untouched by them."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from dpfl.config import load
from dpfl.jobs import CellJob
from dpfl.papers.bietti2022.cell import run_cell
from dpfl.papers.bietti2022.cnn import cnn_round, initial
from dpfl.papers.bietti2022.federated import FederatedTask, UserStreams
from dpfl.papers.bietti2022.methods import epsilon_curve
from dpfl.papers.bietti2022.ppsgd import Batch, Grid, grid_tensors
from dpfl.papers.bietti2022.settings import Implementation
from dpfl.papers.bietti2022.table import end_rows, fig1, fig2
from dpfl.papers.bietti2022.layout import GridLayout

LAYOUT = GridLayout()

DT = torch.float64
ROOT = Path(__file__).resolve().parent.parent

#: the paper's params.implementation (the schema's defaults); a hand-made params dict gives every key
PAPER = {"sampling": "poisson", "cnn_local_step": "eta_theta", "excess_risk": "coordinate_sum",
         "end_point": "last_round", "rng": "per_seed"}


def federated_arrays(counts, test_counts, d=4, classes=10, seed=0):
    rng = np.random.default_rng(seed)
    n, t = sum(counts), sum(test_counts)
    return {"x_train": rng.random((n, d)).astype(np.float32), "y_train": rng.integers(0, classes, n),
            "train_offsets": np.concatenate([[0], np.cumsum(counts)]), "x_test": rng.random((t, d)).astype(np.float32),
            "y_test": rng.integers(0, classes, t), "test_offsets": np.concatenate([[0], np.cumsum(test_counts)])}


def test_shuffled_plan_takes_every_minibatch_e_times_and_ends_when_all_are_exhausted():
    counts, m, Q, E = [25, 7, 40, 12, 31, 50], 5, 3, 2
    task = FederatedTask.from_arrays(federated_arrays(counts, [1] * 6), 6, 10, 0.1, DT, "cpu")
    s = UserStreams(task, m, Q / 6, np.random.default_rng(3), sampling="shuffle", per_round=Q, epochs=E)
    n_batches = np.array(counts) // m
    taken = {i: [] for i in range(6)}
    left = E * n_batches
    for t in range(s.rounds):
        users, valid, starts = s.draw()
        assert valid.all() and len(users) == s.users_per_round[t]
        # the first Q of the users that still have data: exactly min(Q, how many have data left)
        assert len(users) == min(Q, int((left > 0).sum())) and (left[users] > 0).all()
        left[users] -= 1
        for i, st in zip(users, starts):
            taken[i].append((st - task.offsets[i]) // m)
    assert not left.any() and s.rounds == len(s.plan)
    assert s.users_per_round[-1] < Q  # late rounds have fewer users (the longest streams end alone)
    for i in range(6):
        got = np.array(taken[i])
        assert len(got) == E * n_batches[i]  # every minibatch E times, each pass a permutation
        for e in range(E):
            assert sorted(got[e * n_batches[i]:(e + 1) * n_batches[i]]) == list(range(n_batches[i]))
    with pytest.raises(IndexError, match="rounds"):
        s.draw()
    again = UserStreams(task, m, Q / 6, np.random.default_rng(3), sampling="shuffle", per_round=Q, epochs=E)
    assert all(np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]) for a, b in zip(again.plan, s.plan))
    with pytest.raises(ValueError, match="unknown user sampling"):
        UserStreams(task, m, 0.5, np.random.default_rng(0), sampling="fixed")


def test_cnn_local_step_times_users_is_l_eta_theta():
    torch.manual_seed(1)
    N, K, m = 4, 3, 2
    grid = Grid.product([0.5], [0.3, 3], [1.0])
    gt = grid_tensors(grid, DT, "cpu")
    phi0, w0 = initial(K, dtype=DT)
    phi = {k: v[None].repeat(2, *[1] * v.dim()) for k, v in phi0.items()}
    w = w0[None].repeat(2, 1, 1)
    Th = 0.1 * torch.randn(N, 2, 32, K, dtype=DT)
    batch = Batch(torch.tensor([0, 2, 3]), torch.rand(3, m, 784, dtype=DT), torch.rand(3, m, K, dtype=DT),
                  torch.ones(3, dtype=torch.bool))
    noise = {k: torch.randn(v.shape[1:], dtype=DT) for k, v in phi.items()}
    noise["_w"] = torch.randn(32, K, dtype=DT)
    copy = lambda: ({k: v.clone() for k, v in phi.items()}, w.clone(), Th.clone())  # noqa: E731
    a, b = copy(), copy()
    cnn_round(*a, batch, gt, clip=0.1, q=0.5, n_users=N, noise=noise, local_scale=3.0)
    cnn_round(*b, batch, {**gt, "eta_theta": 3.0 * gt["eta_theta"]}, clip=0.1, q=0.5, n_users=N, noise=noise)
    assert torch.allclose(a[2], b[2], rtol=1e-12, atol=1e-14) and not torch.allclose(a[2], Th)
    assert torch.equal(a[1], b[1])  # the global part does not depend on the local step


def _emnist_job(tmp_path, impl: dict, cell="emn-sigma2", levels=(0.5, "inf"), etas=(0.1, 0.4), seeds=(0,)):
    path = tmp_path / "emnist.npz"
    if not path.exists():
        np.savez(path, **federated_arrays([23, 12, 4, 31, 17, 20], [3, 2, 2, 4, 1, 3], d=6))
    figure = {"grids": {"emn": {"task": "emnist", "users": 6, "users_per_round": 2, "batch": 5, "epochs": 2,
                                "rounds": None, "eval_every": 4, "clip": 0.5, "sigmas": [2.0],
                                "levels": [0, *levels], "etas": list(etas), "model": "linear", "max_memory_mib": 4096}},
              "delta": 1e-4, "seeds": list(seeds), "dtype": "float64", "implementation": {**PAPER, **impl}}
    params, _ = LAYOUT.cell_params(figure, {}, cell)
    job = CellJob("bietti2022", "fig2", cell, "authors-code" if impl else "none", "smoke", 0, "cpu", params, {})
    return job, {"prepared": {"emnist": str(path)}}, figure


def test_shuffled_runs_end_when_the_data_is_exhausted_and_account_each_rounds_rate(tmp_path):
    job, inputs, _ = _emnist_job(tmp_path, {"sampling": "shuffle", "end_point": "last_multiple"})
    result = run_cell(job, inputs, lambda m: None)
    df = result.table
    task = FederatedTask.from_arrays(dict(np.load(inputs["prepared"]["emnist"])), 6, 10, 0.1, DT, "cpu")
    rng = np.random.default_rng(int(__import__("dpfl.seeds", fromlist=["rng_for"]).rng_for(
        0, "bietti2022", "emnist", "data", 0).integers(2**62)))
    plan = UserStreams(task, 5, 2 / 6, rng, sampling="shuffle", per_round=2, epochs=2)
    T = plan.rounds
    assert T == int(df["round"].max()) and result.timing.full_rounds == T and (df["sampling"] == "shuffle").all()
    want = epsilon_curve(2.0, 1.0, T, plan.users_per_round / 6, 1e-4)
    for t, e in df.groupby("round")["eps"].first().items():
        assert e == (0.0 if t == 0 else pytest.approx(want[t - 1], rel=1e-12))
    # B4: the end of training is the last multiple of eval_every, not the last round
    assert (df.loc[df["end"], "round"] == T // 4 * 4).all() and T % 4 != 0
    assert df.groupby(["a", "eta"])["end"].sum().eq(1).all()


def test_shuffled_runs_record_the_epsilon_a_certificate_without_amplification_gives(tmp_path):
    """B1's nominal ε is the authors' Poisson analysis (q_t = L_t/N) of a sampler that is not Poisson; eps_certified
    is the Gaussian mechanism with multiplier σ/2 (replace one user: sensitivity 2C, noise σC) composed once per round
    the most active user takes part in, capped: min(t, k_max). Here the users hold [23, 12, 4, 31, 17, 20] rows,
    m = 5 and E = 2, so they take part in 2·⌊n_i/5⌋ = [8, 4, 0, 12, 6, 8] rounds: k_max = 12; σ = 2, so z = 1 and
    RDP(α) = k·α/2."""
    import dp_accounting
    from scipy.optimize import brentq
    from scipy.stats import norm

    from dpfl.privacy.rdp import STANDARD_ORDERS

    job, inputs, _ = _emnist_job(tmp_path, {"sampling": "shuffle"})
    df = run_cell(job, inputs, lambda m: None).table
    delta, k_max = 1e-4, 12

    def by_hand(k):  # Balle et al. (2020) on RDP(α) = k·α/(2z²), z = 1, order by order
        return min(k * a / 2 + math.log1p(-1 / a) - (math.log(delta) + math.log(a)) / (a - 1) for a in STANDARD_ORDERS)

    def dp_accounting_eps(k):
        acc = dp_accounting.rdp.RdpAccountant(list(STANDARD_ORDERS), dp_accounting.NeighboringRelation.REPLACE_ONE)
        acc.compose(dp_accounting.GaussianDpEvent(1.0), k)
        return acc.get_epsilon(delta)

    private = df[df["a"] > 0]
    rounds = private.groupby("round")["eps_certified"].agg(["min", "max"])
    assert (rounds["min"] == rounds["max"]).all()  # the same for every a > 0 and η
    T = int(df["round"].max())
    assert T > k_max and set(range(0, T + 1, 4)) <= set(rounds.index)
    for t, e in rounds["min"].items():
        k = min(t, k_max)
        assert e == (0.0 if t == 0 else pytest.approx(dp_accounting_eps(k), rel=1e-12))
        if t:
            assert e == pytest.approx(by_hand(k), rel=1e-12)
    final = float(rounds["min"].iloc[-1])
    assert final == pytest.approx(19.6121, abs=1e-4)  # by_hand(12): 6α + ln(1 − 1/α) − (ln δ + ln α)/(α − 1)
    # a valid bound: not below the exact (ε, δ) of the same Gaussian, μ = √k_max / z (Balle & Wang 2018) ...
    mu = math.sqrt(k_max)
    exact = brentq(lambda e: norm.cdf(-e / mu + mu / 2) - math.exp(e) * norm.cdf(-e / mu - mu / 2) - delta, 0, 100)
    assert exact < final < 1.1 * exact
    # ... and far above the authors' nominal ε, which counts on amplification the schedule does not give
    assert (private["eps_certified"] > 5 * private["eps"]).loc[private["round"] > 0].all()
    assert (df.loc[df["a"] == 0, "eps_certified"] == 0).all()
    # the paper's Poisson sampling: its analysis is exact, the certified ε is the nominal one
    paper, _, _ = _emnist_job(tmp_path, {})
    poisson = run_cell(paper, inputs, lambda m: None).table
    assert (poisson["eps_certified"] == poisson["eps"]).all() and (poisson["eps"] > 0).any()


def test_per_run_streams_name_each_run_by_its_config(tmp_path):
    impl = {"rng": "per_run"}
    job, inputs, _ = _emnist_job(tmp_path, impl, levels=(0.5,), etas=(0.1, 0.4))
    both = run_cell(job, inputs, lambda m: None).table
    assert (both["config_batches"] == 2).all()  # one run per batch
    alone_job, _, _ = _emnist_job(tmp_path, impl, levels=(0.5,), etas=(0.4,))
    alone = run_cell(alone_job, inputs, lambda m: None).table
    key = ["round", "accuracy", "eps"]
    pd.testing.assert_frame_equal(both[both["eta"] == 0.4][key].reset_index(drop=True), alone[key])  # its own streams
    shared_job, _, _ = _emnist_job(tmp_path, {}, levels=(0.5,), etas=(0.1, 0.4))
    shared = run_cell(shared_job, inputs, lambda m: None).table
    assert not np.allclose(shared[shared["eta"] == 0.4]["accuracy"].to_numpy()[1:],
                           both[both["eta"] == 0.4]["accuracy"].to_numpy()[1:])


def test_paper_defaults_come_from_the_schema_and_keys_are_checked():
    """The defaults of params.implementation (the paper's algorithm) live in the schema only: the config loader fills
    them; a params dict with a key missing or unknown is an error."""
    cfg = load(ROOT, {"scale": "smoke"})
    for figure in ("fig1a", "fig2"):
        params = cfg.figure_params("bietti2022", figure, "none")
        assert Implementation.from_params(params) == Implementation(**PAPER)
        assert "dtype" in params and all({"model", "max_memory_mib"} <= set(g) for g in params["grids"].values())
    with pytest.raises(ValueError, match=r"unknown key\(s\) \['noise'\]"):
        Implementation.from_params({"implementation": {**PAPER, "noise": "unseeded"}})
    with pytest.raises(ValueError, match=r"missing key\(s\) \['cnn_local_step'"):
        Implementation.from_params({"implementation": {"sampling": "shuffle"}})


def test_excess_risk_per_coordinate_and_end_rows():
    """B3 (with B1 set, as compat sets it: the synthetic task takes every user anyway): the synthetic figure draws
    the excess risk ÷ d (the claims still select quantity excess_risk); B4 and runs that end at different rounds: the
    final window reads each run's `end` row."""
    figure = {"grids": {"syn": {"task": "synthetic", "synthetic": {"n_users": 6, "dim": 4, "personal": 2}, "rounds": 5,
                                "clip": 1.0, "sigmas": [1.0], "levels": [0, 1, "inf"], "etas": [0.1, 0.3],
                                "model": "linear", "max_memory_mib": 4096}},
              "delta": 1e-4, "seeds": [0], "dtype": "float32",
              "implementation": {**PAPER, "excess_risk": "coordinate_mean", "sampling": "shuffle"}}
    tables = []
    for cell in LAYOUT.cells(figure):
        params, _ = LAYOUT.cell_params(figure, {}, cell)
        tables.append(run_cell(CellJob("bietti2022", "fig1a", cell, "authors-code", "smoke", 0, "cpu", params, {}), {},
                               lambda m: None).table)
    runs = pd.concat(tables)
    assert (runs["metric"] == "excess_risk_per_coordinate").all()
    # every user every round (B1 concerns the federated tasks): T Gaussian steps, the nominal ε is certified as it is
    assert (runs["eps_certified"] == runs["eps"]).all()
    assert (runs.loc[(runs["round"] == 5) & (runs["a"] > 0), "eps"] > 0).all()
    assert np.allclose(runs["excess_risk_per_coordinate"] * 4, runs["excess_risk"])
    table = fig1(figure, tables, lambda m: None)
    final = table[(table["window"] == "final") & (table["level"] == "1")]
    best = runs[(runs["level"] == "1") & (runs["round"] == 5)]["excess_risk_per_coordinate"].min()
    assert (final["quantity"] == "excess_risk").all() and final["y"].iloc[0] == pytest.approx(best)
    # runs ending at different rounds (B1/B5) compare at their own ends
    r = pd.DataFrame({"level": ["1", "1", "1"], "a": [1.0] * 3, "eta": [0.1, 0.2, 0.2], "seed": [0] * 3,
                      "round": [8, 9, 5], "accuracy": [0.5, 0.7, 0.9], "end": [True, True, False],
                      "eps": [1.0, 1.1, 0.7]})
    e = end_rows(r)
    assert list(e["accuracy"]) == [0.5, 0.7] and (e["round"] == 9).all()


def test_fig2_takes_the_winning_runs_epsilon(tmp_path):
    job, inputs, figure = _emnist_job(tmp_path, {"sampling": "shuffle", "rng": "per_run"})
    tables = [run_cell(job, inputs, lambda m: None).table]
    local, _ = LAYOUT.cell_params(figure, {}, "emn-local")
    tables.append(run_cell(CellJob("bietti2022", "fig2", "emn-local", "authors-code", "smoke", 0, "cpu", local, {}),
                           inputs, lambda m: None).table)
    table = fig2(figure, tables, lambda m: None)
    runs = pd.concat(tables)
    for _, row in table[(table["window"] == "point") & (table["a"] > 0)].iterrows():
        won = runs[(runs["a"] == row["a"]) & (runs["eta"] == row["eta_best"]) & runs["end"]]
        assert row["x"] == pytest.approx(float(won["eps"].iloc[0]))
        assert row["y"] == pytest.approx(won["accuracy"].iloc[0])
    assert math.isfinite(table[table["curve"] == "local only"]["y"].iloc[0])


def test_a_round_with_nobody_sampled_still_releases_noise():
    """Poisson sampling can pick no user (likely at small N): the batch is empty and the round only adds noise."""
    from test_bietti_sparse import sparse_arrays

    from dpfl.papers.bietti2022.ppsgd import ppsgd_round
    from dpfl.papers.bietti2022.sparse import SparseState, SparseTask, SparseUserStreams, sparse_round

    task = FederatedTask.from_arrays(federated_arrays([12, 9], [1, 1]), 2, 10, 0.1, DT, "cpu")
    b = UserStreams(task, 5, 0.0, np.random.default_rng(0)).next_batch()
    assert b.X.shape == (0, 5, 4) and b.Y.shape == (0, 5, 10)
    gt = grid_tensors(Grid.product([0.5], [1.0], [2.0]), DT, "cpu")
    W, Th, xi = torch.zeros(1, 4, 10, dtype=DT), torch.zeros(2, 4, 1, 10, dtype=DT), torch.ones(4, 10, dtype=DT)
    ppsgd_round(W, Th, b, gt, clip=0.5, q=0.5, n_users=2, xi=xi)
    assert torch.allclose(W, torch.full_like(W, -0.5 / 1.0 * 2.0 * 0.5))  # −η_w/(qN)·σC·ξ
    sp = SparseTask.from_arrays(sparse_arrays([12, 9], [1, 1]), 2, 0.1, DT, "cpu")
    sb = SparseUserStreams(sp, 5, 0.0, np.random.default_rng(0)).next_batch()
    state = SparseState.zeros(sp.dim, sp.classes, sp.theta_rows(), gt, clip=0.5, q=0.5, n_users=2, dtype=DT,
                              device="cpu")
    sparse_round(state, sb, gt, clip=0.5, q=0.5, n_users=2, xi=torch.ones(sp.dim, sp.classes, dtype=DT))
    assert torch.allclose(state.weights(), torch.full((1, sp.dim, sp.classes), -0.5, dtype=DT))
