"""The federated round engine (dpfl.fl): padded data with masks, the tracker, the device choice, the generic
per-example gradients through torch.func, and the torch twins of the GLM maths."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from dpfl.fl.data import SiloData, UserSiloData, pad
from dpfl.fl.device import DeviceError, resolve_device
from dpfl.fl.engine import Tracker, run_rounds
from dpfl.fl.aggregate import clip_updates
from dpfl.fl.local import FlatModel, per_example_grads
from dpfl.models.glm import GLM

KINDS = ["logistic", "linear", "softmax"]


def glm_data(kind, n=7, d=4, seed=0):
    rng = np.random.default_rng(seed)
    model = GLM(kind, classes=3 if kind == "softmax" else 1)
    X = rng.normal(size=(n, d))
    y = rng.integers(0, 3, n).astype(float) if kind == "softmax" else (rng.random(n) < 0.5).astype(float)
    if kind == "linear":
        y = rng.normal(size=n) * 2
    W = rng.normal(size=(d, model.out_dim))
    return model, X, y, W


def test_pad_and_silo_masks():
    Xs = [np.ones((3, 2)), 2 * np.ones((1, 2)), np.zeros((0, 2))]
    out, mask = pad(Xs)
    assert out.shape == (3, 3, 2) and mask.sum(axis=1).tolist() == [3, 1, 0]
    data = SiloData.from_lists(Xs, [np.arange(3.0), np.array([7.0]), np.zeros(0)])
    assert data.mask.tolist() == mask.tolist()
    assert data.pooled_y.tolist() == [0.0, 1.0, 2.0, 7.0] and data.pooled_X.shape == (4, 2)


def test_user_silo_data_puts_every_record_in_its_slot():
    rng = np.random.default_rng(1)
    n, S, U = 40, 3, 5
    X, y = rng.normal(size=(n, 2)), rng.integers(0, 2, n)
    silo, user = rng.integers(0, S, n), rng.integers(0, U, n)
    data = UserSiloData.from_records(X, y, silo, user, S, U)
    assert data.records.sum() == n
    for s in range(S):
        for u in range(U):
            rows = np.flatnonzero((silo == s) & (user == u))  # original order kept within (silo, user)
            assert data.records[s, u] == len(rows)
            np.testing.assert_array_equal(data.X[s, u, : len(rows)], X[rows])
            np.testing.assert_array_equal(data.y[s, u, : len(rows)], y[rows])
            assert not data.mask[s, u, len(rows):].any()


@pytest.mark.parametrize("kind", KINDS)
def test_generic_per_example_grads_match_the_closed_form(kind):
    """vmap(grad(functional_call)) on the GLM as a torch module gives x ⊗ r(x), the closed form."""
    model, X, y, W = glm_data(kind)
    fm = FlatModel(model.module(X.shape[1]), model.example_loss_t)
    theta = torch.from_numpy(W).reshape(-1)  # the module's one parameter, weight (d, C), flattened
    mask = torch.ones(len(X), dtype=torch.bool)
    flat = per_example_grads(fm, theta, torch.from_numpy(X), torch.from_numpy(y), mask)
    grads = {"weight": flat.reshape(len(X), *W.shape)}
    closed = X[:, :, None] * model.residual(X @ W, y)[:, None, :]
    np.testing.assert_allclose(grads["weight"].numpy(), closed, rtol=1e-10, atol=1e-12)
    clipped, norms = clip_updates(flat, 0.5)
    clipped = {"weight": clipped.reshape(len(X), *W.shape)}
    np.testing.assert_allclose(norms.numpy(), np.linalg.norm(closed.reshape(len(X), -1), axis=1), rtol=1e-10)
    assert (np.linalg.norm(clipped["weight"].numpy().reshape(len(X), -1), axis=1) <= 0.5 + 1e-12).all()


@pytest.mark.parametrize("kind", KINDS)
def test_torch_twins_match_the_numpy_reference(kind):
    model, X, y, W = glm_data(kind, n=9)
    Wb = np.stack([W, 2 * W, -W])  # three runs
    Xt, yt = torch.from_numpy(X), torch.from_numpy(y)
    np.testing.assert_allclose(model.residual_t(torch.from_numpy(X @ W), yt).numpy(), model.residual(X @ W, y), rtol=1e-12)
    batch = torch.from_numpy(Wb).permute(1, 0, 2)[None]  # (reps=1, d, G=3, C)
    np.testing.assert_allclose(model.mean_loss_t(Xt, yt, batch).numpy()[0], [model.loss(X, y, w) for w in Wb], rtol=1e-12)


def test_tracker_averages_the_last_iterates_and_freezes_diverged_runs():
    W0 = torch.zeros((1, 1, 2, 1), dtype=torch.float64)  # two runs of a scalar model
    loss = lambda W: W[:, 0, :, 0] ** 2  # noqa: E731
    step = torch.tensor([1.0, 10.0], dtype=torch.float64).reshape(1, 1, 2, 1)
    tracker = Tracker(W0, loss, average_last=2, divergence_threshold=50.0, check_every=1)
    res = run_rounds(W0, lambda W, _: W + step, range(4), tracker)
    # run 0: iterates 1, 2, 3, 4 -> mean of the last two = 3.5; run 1: 10, 20 (loss of mean 15² > 50: frozen)
    assert res.W[0, 0, 0, 0] == pytest.approx(3.5)
    assert res.diverged.tolist() == [[False, True]]
    assert res.W[0, 1, 0, 0] == pytest.approx(20.0)


def test_device_choice():
    assert resolve_device("cpu").type == "cpu"
    assert resolve_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    if not torch.cuda.is_available():
        with pytest.raises(DeviceError, match="no CUDA GPU"):
            resolve_device("cuda")
    with pytest.raises(DeviceError, match="unknown device"):
        resolve_device("tpu")
