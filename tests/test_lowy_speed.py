"""lowy2023's fast paths compute the same numbers, to the bit, as the straightforward ones: Local SGD's row chunks
and elementwise rank-1 update, the skipped no-op clip, the in-place logistic loss, the row gathers and the noise
drawn in place (same draws, same order)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from dpfl.fl.data import SiloData
from dpfl.models.glm import GLM
from dpfl.papers.lowy2023 import isrl
from dpfl.papers.lowy2023.isrl import Grid, Settings, local_draws, local_sgd, minibatch_draws, minibatch_sgd


def problem(kind: str, N: int = 8, d: int = 9, seed: int = 0):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(15, 30, N)
    Xs = [rng.standard_normal((n, d)) for n in sizes]
    ys = [(rng.random(n) < 0.5).astype(float) if kind == "logistic" else rng.integers(0, 3, n) for n in sizes]
    return GLM(kind, classes=3 if kind == "softmax" else 1), SiloData.from_lists(Xs, ys)


def run(update: str, model, data, clip: str, noise: bool, G: int = 13, M: int = 8, reps: int = 3):
    """One call with step sizes large enough that the logistic scores reach the clamp at ±15."""
    eta = np.exp(np.linspace(-4, 2.5, G))
    L = 2 * data.norms.max()
    grid = Grid(eta, np.full(G, {"inf": np.inf, "L": L, "small": 0.3}[clip]),
                np.outer(np.linspace(0, 1.5, G), np.ones(data.n_silos)) if noise else np.zeros((G, data.n_silos)))
    settings = Settings(rounds=3, silos_per_round=M, local=5, average_last=2)
    rngs = [np.random.default_rng(r) for r in range(reps)]
    draw, fn = (local_draws, local_sgd) if update == "local" else (minibatch_draws, minibatch_sgd)
    return fn(model, data, settings, grid, draw(rngs, data, settings, model.out_dim, noise=noise), reps)


def assert_same(a, b):
    assert np.array_equal(a.W, b.W, equal_nan=True)
    assert np.array_equal(a.train_loss, b.train_loss, equal_nan=True)
    assert np.array_equal(a.diverged, b.diverged)


@pytest.mark.parametrize("kind", ["logistic", "softmax"])
@pytest.mark.parametrize("noise", [False, True])
def test_local_sgd_row_chunks_change_no_bit(monkeypatch, kind, noise):
    """24 rows of 13 configs (× 3 classes): chunks of 16 rows (a whole number of 16-double blocks) vs one chunk."""
    model, data = problem(kind)
    whole = run("local", model, data, "L", noise)
    monkeypatch.setattr(isrl, "_CHUNK_BYTES", 1)
    assert isrl._row_chunks(24, data.dim, 13 * model.out_dim, torch.device("cpu")) == [(0, 16), (16, 24)]
    assert_same(run("local", model, data, "L", noise), whole)


def test_row_chunks_start_on_whole_vector_blocks():
    cpu = torch.device("cpu")
    assert isrl._row_chunks(75, 50, 78, cpu) == [(0, 40), (40, 75)]  # MNIST's 78 noisy configs: 1.25 MB chunks
    assert isrl._row_chunks(75, 50, 10, cpu) == [(0, 75)]  # small enough for the cache as it is
    for width in (1, 7, 13, 78, 300):
        for lo, _ in isrl._row_chunks(1000, 50, width, cpu):
            assert lo * width % isrl._VECTOR_BLOCK == 0


@pytest.mark.parametrize("noise", [False, True])
def test_local_sgd_elementwise_rank1_update_changes_no_bit(monkeypatch, noise):
    model, data = problem("logistic")
    narrow = run("local", model, data, "inf", noise, G=10)
    monkeypatch.setattr(isrl, "_NARROW", 0)
    assert_same(run("local", model, data, "inf", noise, G=10), narrow)


@pytest.mark.parametrize("update", ["local", "minibatch"])
@pytest.mark.parametrize("kind, clip", [("logistic", "L"), ("logistic", "inf"), ("softmax", "L")])
def test_skipping_a_clip_that_cannot_bind_changes_no_bit(monkeypatch, update, kind, clip):
    model, data = problem(kind)
    assert not isrl._clip_binds(model, data.norms, np.full(3, 2 * data.norms.max() if clip == "L" else np.inf))
    skipped = run(update, model, data, clip, noise=True)
    monkeypatch.setattr(isrl, "_clip_binds", lambda *a: True)
    assert_same(run(update, model, data, clip, noise=True), skipped)


def test_clip_binds_where_it_can():
    logistic, linear = GLM("logistic"), GLM("linear")
    norms = np.array([[1.0, 2.0], [0.5, 0.0]])
    assert isrl._clip_binds(logistic, norms, np.array([1.9, 10.0]))  # a residual of 1 times ‖x‖ = 2 exceeds 1.9
    assert not isrl._clip_binds(logistic, norms, np.array([4.0, np.inf]))
    assert isrl._clip_binds(linear, norms, np.array([np.inf]))  # unbounded residuals: always applied


def test_in_place_logistic_loss_is_mean_loss_t():
    model = GLM("logistic")
    rng = np.random.default_rng(3)
    X = torch.from_numpy(rng.standard_normal((1001, 7)))
    y = torch.from_numpy((rng.random(1001) < 0.4).astype(float))
    W = torch.from_numpy(rng.standard_normal((3, 7, 11, 1)) * np.exp(rng.uniform(-3, 3, (1, 1, 11, 1))))
    W[0, :, 0] = np.inf  # scores at ±inf or NaN
    W[1, 2, 1] = np.nan
    got, want = isrl._mean_loss(model, X, y)(W.clone()), model.mean_loss_t(X, y, W)
    assert torch.equal(got.isnan(), want.isnan()) and torch.equal(got.nan_to_num(), want.nan_to_num())


def test_gather_is_advanced_indexing():
    table = torch.arange(5 * 7 * 3, dtype=torch.float64).reshape(5, 7, 3)
    silos, rows = torch.tensor([[4, 0, 2]]), torch.tensor([[[6, 0, 1]], [[2, 3, 5]]])
    assert torch.equal(isrl._gather(table, silos, rows), table[silos, rows])
    assert torch.equal(isrl._gather(table[..., 0], silos, rows), table[..., 0][silos, rows])


def test_local_noise_is_drawn_as_before():
    """The noise written in place is standard_normal((K, M, d, C)) per repetition, in the same order."""
    _, data = problem("logistic")
    settings = Settings(rounds=2, silos_per_round=3, local=4)
    got = list(local_draws([np.random.default_rng(r) for r in range(2)], data, settings, 2))
    rngs = [np.random.default_rng(r) for r in range(2)]
    for dr in got:
        S = np.stack([rng.permutation(data.n_silos)[:3] for rng in rngs])
        J = np.stack([np.floor(rng.random((4, 3)) * data.counts[S[i]]).astype(np.int64) for i, rng in enumerate(rngs)])
        Z = np.stack([rng.standard_normal((4, 3, data.dim, 2)) for rng in rngs])
        assert np.array_equal(dr["S"], S) and np.array_equal(dr["J"], J) and np.array_equal(dr["Z"], Z)
