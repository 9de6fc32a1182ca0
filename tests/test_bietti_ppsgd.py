"""bietti2022 PP-SGD (spec §3, §4): the (η, a) → (η_w, η_θ) map, the vectorized round against a plain per-config,
per-user loop, clipping and the noise on the sum, the user-level sensitivity, the accounting (dp-accounting and
hand values), the synthetic task and the excess risk."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from dpfl.papers.bietti2022.layout import GridLayout
from dpfl.papers.bietti2022.methods import PPSGD, epsilon_curve
from dpfl.papers.bietti2022.ppsgd import Batch, Grid, Synthetic, excess_risk, grid_tensors, ppsgd_round, step_sizes

LAYOUT = GridLayout()

DT = torch.float64


def test_step_sizes_follow_the_spec_table():
    assert step_sizes(0.5, 0) == (0.0, 0.5)
    assert step_sizes(0.5, 0.3) == (pytest.approx(0.15), 0.5)
    assert step_sizes(0.5, 1) == (0.5, 0.5)  # a = 1: both at η
    assert step_sizes(0.5, 10) == (0.5, pytest.approx(0.05))
    assert step_sizes(0.5, math.inf) == (0.5, 0.0)
    with pytest.raises(ValueError, match="≥ 0"):
        step_sizes(0.5, -1)
    g = Grid.product([0.1, 1.0], [0, math.inf], [0, 5])
    assert len(g) == 8 and list(g.sigma[:4]) == [0, 0, 0, 0] and list(g.eta[:2]) == [0.1, 1.0]
    assert list(g.eta_w[:4]) == [0, 0, 0.1, 1.0] and list(g.eta_theta[:4]) == [0.1, 1.0, 0, 0]


def reference_round(W, Th, users, X, Y, valid, grid, clip, q, N, xi):
    """Algorithm 3 of the paper written out per config and per sampled user (numpy)."""
    W, Th = W.copy(), Th.copy()
    for g in range(len(grid)):
        total = np.zeros_like(W[g])
        grads = []
        for j, i in enumerate(users):
            pred = X[j] @ (W[g] + Th[g, i])
            grad = X[j].T @ (pred - Y[j]) / X.shape[1] if valid[j] else np.zeros_like(W[g])
            grads.append((i, grad))
            total += grad / max(1.0, np.linalg.norm(grad) / clip)
        for i, grad in grads:  # both updates from gradients at the pre-update parameters
            Th[g, i] -= grid.eta_theta[g] * grad
        W[g] -= grid.eta_w[g] / (q * N) * (total + grid.sigma[g] * clip * xi)
    return W, Th


@pytest.mark.parametrize("sampled", ["everyone", "some"])
def test_round_matches_a_plain_loop(sampled):
    rng = np.random.default_rng(0)
    N, d, K, m, clip = 7, 4, 3, 5, 0.8
    grid = Grid.product([0.05, 0.3], [0, 0.3, 2, math.inf], [0, 1.5])
    G = len(grid)
    W = rng.normal(size=(G, d, K))
    Th = rng.normal(size=(G, N, d, K))
    users = np.arange(N) if sampled == "everyone" else np.array([5, 1, 3])
    X = rng.normal(size=(len(users), m, d)) * 2.0  # large: most gradients are clipped
    Y = rng.normal(size=(len(users), m, K))
    valid = np.ones(len(users), bool) if sampled == "everyone" else np.array([True, False, True])
    xi = rng.normal(size=(d, K))
    q = 1.0 if sampled == "everyone" else 3 / N
    want_W, want_Th = reference_round(W, Th, users, X, Y, valid, grid, clip, q, N, xi)
    Wt, Tht = torch.tensor(W), torch.tensor(Th).permute(1, 2, 0, 3).contiguous()  # Θ is stored (N, d, G, K)
    batch = Batch(torch.tensor(users), torch.tensor(X), torch.tensor(Y), torch.tensor(valid))
    ppsgd_round(Wt, Tht, batch, grid_tensors(grid, DT, "cpu"), clip=clip, q=q, n_users=N, xi=torch.tensor(xi))
    Tht = Tht.permute(2, 0, 1, 3)
    assert np.allclose(Wt.numpy(), want_W, atol=1e-12, rtol=1e-10)
    assert np.allclose(Tht.numpy(), want_Th, atol=1e-12, rtol=1e-10)
    clipped = 0
    for j in range(len(users)):  # the clip was active (the test would not see a missing clip otherwise)
        grad = X[j].T @ (X[j] @ (W[0] + Th[0, users[j]]) - Y[j]) / m
        clipped += np.linalg.norm(grad) > clip
    assert clipped >= 2
    untouched = np.setdiff1d(np.arange(N), users[valid])
    assert np.array_equal(Tht.numpy()[:, untouched], Th[:, untouched])  # unsampled / too-small users keep θ_i


def test_noise_on_the_sum_is_sigma_times_clip_and_a_zero_moves_nothing():
    """With zero data every gradient is 0: w moves by exactly −η_w/(qN)·σC·ξ (std σC on the sum, multiplier σ for
    sensitivity C); a = 0 configs never move w; θ_i stays."""
    N, d, K, clip, q = 4, 3, 2, 0.7, 0.5
    grid = Grid.product([0.2], [0, 1, math.inf], [3.0])
    W, Th = torch.zeros((3, d, K), dtype=DT), torch.zeros((N, d, 3, K), dtype=DT)
    xi = torch.randn((d, K), generator=torch.Generator().manual_seed(1), dtype=DT)
    batch = Batch(torch.arange(2), torch.zeros((2, 5, d), dtype=DT), torch.zeros((2, 5, K), dtype=DT),
                  torch.ones(2, dtype=torch.bool))
    ppsgd_round(W, Th, batch, grid_tensors(grid, DT, "cpu"), clip=clip, q=q, n_users=N, xi=xi)
    assert torch.equal(W[0], torch.zeros_like(W[0]))
    for g in (1, 2):
        assert torch.allclose(W[g], -grid.eta_w[g] / (q * N) * 3.0 * clip * xi, atol=1e-15)
    assert PPSGD.noise_std(3.0, clip) == pytest.approx(3.0 * clip)
    assert torch.equal(Th, torch.zeros_like(Th))


def test_one_user_changes_the_released_sum_by_at_most_c():
    """The released quantity is Σ_{i∈S} clip_C(g_i): adding a user with any data moves it by ≤ C (= sensitivity),
    and a user with a large gradient attains C."""
    rng = np.random.default_rng(3)
    N, d, K, m, clip = 6, 4, 2, 3, 0.5
    grid = Grid.product([1.0], [math.inf], [0.0])
    gt = grid_tensors(grid, DT, "cpu")
    W0 = torch.tensor(rng.normal(size=(1, d, K)))
    X = torch.tensor(rng.normal(size=(N, m, d)))
    Y = torch.tensor(rng.normal(size=(N, m, K)))
    worst = 0.0
    for scale in (0.01, 1.0, 100.0):
        Xs = X.clone()
        Xs[-1] *= scale
        sums = []
        for n in (N - 1, N):  # without and with the last user
            W, Th = W0.clone(), torch.zeros((N, d, 1, K), dtype=DT)
            ppsgd_round(W, Th, Batch(torch.arange(n), Xs[:n], Y[:n], torch.ones(n, dtype=torch.bool)), gt,
                        clip=clip, q=1.0, n_users=1, xi=torch.zeros((d, K), dtype=DT))
            sums.append(W0 - W)  # η_w/(qN) = 1: W moves by the sum
        worst = max(worst, float(torch.linalg.vector_norm(sums[1] - sums[0])))
    assert worst <= PPSGD.sensitivity(clip) * (1 + 1e-12)
    assert worst == pytest.approx(clip, rel=1e-9)


def test_epsilon_matches_dp_accounting_and_the_special_cases():
    import dp_accounting
    from dp_accounting import rdp

    from dpfl.privacy.rdp import STANDARD_ORDERS

    T, delta = 40, 1e-4
    for sigma, q in ((10.0, 1.0), (1.5, 0.02)):
        eps = epsilon_curve(sigma, 1.0, T, q, delta)
        acc = rdp.RdpAccountant(list(STANDARD_ORDERS), dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE)
        event = dp_accounting.GaussianDpEvent(sigma)
        acc.compose(event if q == 1 else dp_accounting.PoissonSampledDpEvent(q, event), T)
        assert eps[-1] == pytest.approx(acc.get_epsilon(delta), rel=1e-4)
        assert np.all(np.diff(eps) > 0) and len(eps) == T
        assert np.array_equal(epsilon_curve(sigma, 0.7, T, q, delta), eps)  # the same for every a > 0
    # hand value, q = 1: RDP t·α/(2σ²); the classic conversion min_α RDP + log(1/δ)/(α−1) bounds the accountant's
    sigma, t = 10.0, T
    classic = min(t * a / (2 * sigma**2) + math.log(1 / delta) / (a - 1) for a in np.linspace(1.01, 400, 200000))
    eps_t = epsilon_curve(sigma, 1.0, T, 1.0, delta)[-1]
    assert 0.8 * classic <= eps_t <= classic * (1 + 1e-6)
    assert np.all(np.isinf(epsilon_curve(0.0, 1.0, T, 1.0, delta)))  # no noise
    assert np.all(epsilon_curve(0.0, 0.0, T, 1.0, delta) == 0)  # a = 0: w never released
    assert np.all(epsilon_curve(5.0, 0.0, T, 0.02, delta) == 0)


def test_epsilon_of_a_rate_schedule_composes_the_rounds():
    """compat authors-code (B1): round t accounted at its own rate q_t = L_t/N; the curve composes the rounds as
    dp-accounting does, and a constant schedule equals the constant-rate curve."""
    import dp_accounting
    from dp_accounting import rdp

    from dpfl.privacy.rdp import STANDARD_ORDERS

    sigma, delta, N = 1.2, 1e-4, 100
    users = [10] * 30 + [7, 4, 4, 1]
    eps = epsilon_curve(sigma, 3.0, len(users), np.array(users) / N, delta)
    acc = rdp.RdpAccountant(list(STANDARD_ORDERS), dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE)
    for t, L in enumerate(users):
        acc.compose(dp_accounting.PoissonSampledDpEvent(L / N, dp_accounting.GaussianDpEvent(sigma)))
        assert eps[t] == pytest.approx(acc.get_epsilon(delta), rel=1e-4)
    const = epsilon_curve(sigma, 3.0, 30, 0.1, delta)
    assert np.allclose(eps[:30], const, rtol=1e-12)
    assert eps[-1] > const[-1] and np.all(np.diff(eps) > 0)
    assert np.all(epsilon_curve(sigma, 0.0, 4, np.full(4, 0.1), delta) == 0)
    with pytest.raises(ValueError, match="per-round rates"):
        epsilon_curve(sigma, 1.0, 5, np.full(4, 0.1), delta)


def test_synthetic_task_and_excess_risk():
    syn = Synthetic(n_users=6, dim=8, personal=2, local_weight=0.5)
    truth = syn.truth(DT)
    assert truth.shape == (6, 8, 1)
    assert torch.equal(truth[:, :6], truth[:1, :6].expand(6, 6, 1))  # θ_0 shared
    assert not torch.allclose(truth[0, 6:], truth[1, 6:])  # personal coordinates differ
    assert torch.equal(truth, Synthetic(n_users=6, dim=8, personal=2, local_weight=0.5).truth(DT))  # seed 42
    assert torch.allclose(syn.scales(DT), 1.0 / torch.arange(1, 9, dtype=DT))
    with pytest.raises(ValueError, match="personal = 9"):
        Synthetic(dim=8, personal=9)
    b = syn.draw(truth, torch.Generator().manual_seed(0))
    assert b.X.shape == (6, 10, 8) and b.Y.shape == (6, 10, 1)
    assert torch.allclose(b.Y, torch.einsum("nmd,ndk->nmk", b.X, truth), atol=0.05)  # τ = 0.01 label noise
    small = Synthetic(n_users=1, dim=3, personal=1, samples=200000)
    big = small.draw(small.truth(DT), torch.Generator().manual_seed(1))
    assert torch.allclose(big.X[0].var(dim=0), torch.tensor([1.0, 1 / 2, 1 / 3], dtype=DT), rtol=0.02)
    # excess risk by hand: (1/N) Σ_i Σ_k (w + θ_i − θ_i*)_k² / k
    W = torch.zeros((2, 8, 1), dtype=DT)
    Th = torch.zeros((6, 8, 2, 1), dtype=DT)  # (N, d, G, K)
    Th[:, :, 1] = truth
    W[1, 0, 0] = 1.0  # config 1: exact except coordinate 1 off by 1 for every user → 1/1
    want0 = float((truth[..., 0] ** 2 / torch.arange(1, 9, dtype=DT)).sum(1).mean())
    got = excess_risk(W, Th, truth, syn.scales(DT))
    assert got[0] == pytest.approx(want0) and got[1] == pytest.approx(1.0)


def test_best_over_eta_takes_the_best_finite_eta_at_every_round():
    import pandas as pd

    from dpfl.papers.bietti2022.table import best_over_eta

    rows = []
    for eta, risks in ((0.1, [5.0, 3.0, 2.0]), (1.0, [4.0, 3.5, math.nan]), (2.0, [math.nan, math.inf, math.nan])):
        for seed, shift in ((0, 0.0), (1, 0.2)):  # the mean over seeds is compared
            rows += [{"seed": seed, "level": "1", "a": 1.0, "eta": eta, "round": t, "excess_risk": r + shift}
                     for t, r in enumerate(risks)]
    best = best_over_eta(pd.DataFrame(rows), "excess_risk").sort_values("round")
    assert best["eta_best"].tolist() == [1.0, 0.1, 0.1]  # η switches between rounds
    assert best["y"].tolist() == pytest.approx([4.1, 3.1, 2.1])
    assert best["diverged"].tolist() == [1, 1, 2] and set(best["n_seeds"]) == {2}


def test_cell_is_reproducible_and_records_epsilon():
    from dpfl.jobs import CellJob
    from dpfl.papers.bietti2022.cell import run_cell

    # a hand-made figure gives every key the config loader would fill from the schema's defaults
    figure = {"grids": {"syn": {"task": "synthetic", "synthetic": {"n_users": 9, "dim": 5, "personal": 2}, "rounds": 6,
                                "clip": 1.0, "sigmas": [2.0], "levels": [0, 0.5, "inf"], "etas": [0.1, 0.5],
                                "model": "linear", "max_memory_mib": 4096}},
              "delta": 1e-4, "seeds": [0, 1], "dtype": "float32",
              "implementation": {"sampling": "poisson", "cnn_local_step": "eta_theta", "excess_risk": "coordinate_sum",
                                 "end_point": "last_round", "rng": "per_seed"}}
    assert LAYOUT.cells(figure) == ["syn-local", "syn-sigma2"]
    params, _ = LAYOUT.cell_params(figure, {}, "syn-sigma2")
    assert params["levels"] == [0.5, "inf"] and params["sigmas"] == [2.0] and params["grid"] == "syn"
    job = CellJob("bietti2022", "fig1a", "syn-sigma2", "none", "smoke", 0, "cpu", params, {})
    first, second = run_cell(job, {}, lambda m: None), run_cell(job, {}, lambda m: None)
    a, b = first.table, second.table
    pd_testing = pytest.importorskip("pandas.testing")
    pd_testing.assert_frame_equal(a, b)  # the same table: the measured seconds are in the timing, not in it
    assert first.timing.seconds_per_round > 0 and first.timing.seconds_per_evaluation >= 0
    assert len(a) == 2 * 2 * 2 * 7  # seeds × levels × η × rounds 0..6
    last = a[a["round"] == 6]
    assert np.allclose(last["eps"], epsilon_curve(2.0, 1.0, 6, 1.0, 1e-4)[-1])
    assert (a.loc[a["round"] == 0, "eps"] == 0).all() and (a["eps"] == a["eps_certified"]).all()
    assert not a.groupby("seed")["excess_risk"].apply(tuple).duplicated().any()  # seeds see different data
    # configs trained one at a time (a memory cap) replay the same data and noise: the same numbers
    small = CellJob("bietti2022", "fig1a", "syn-sigma2", "none", "smoke", 0, "cpu", {**params, "max_memory_mib": 1e-6},
                    {})
    c = run_cell(small, {}, lambda m: None).table
    assert (c["config_batches"] == 4).all()
    key = ["seed", "level", "eta", "round"]
    pd_testing.assert_frame_equal(a.sort_values(key).reset_index(drop=True)[key + ["excess_risk", "eps"]],
                                  c.sort_values(key).reset_index(drop=True)[key + ["excess_risk", "eps"]])
