"""bietti2022 federated tasks (spec §1.3, §3): per-user minibatch streams, Poisson user sampling, the number of rounds
and the pooled personalized test accuracy, on tiny arrays built here."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from dpfl.papers.bietti2022.federated import FederatedTask, UserStreams, accuracy

DT = torch.float64


def arrays(counts, test_counts, d=3, seed=0):
    rng = np.random.default_rng(seed)
    n, t = sum(counts), sum(test_counts)
    return {"x_train": rng.normal(size=(n, d)).astype(np.float32), "y_train": rng.integers(0, 4, n),
            "train_offsets": np.concatenate([[0], np.cumsum(counts)]),
            "x_test": rng.normal(size=(t, d)).astype(np.float32),
            "y_test": rng.integers(0, 4, t), "test_offsets": np.concatenate([[0], np.cumsum(test_counts)])}


def test_targets_users_and_rounds():
    a = arrays([25, 7, 40], [3, 2, 5])
    task = FederatedTask.from_arrays(a, 2, 4, 0.1, DT, "cpu")
    assert task.n_users == 2 and task.X.shape == (32, 3) and task.X_test.shape == (5, 3)
    onehot = task.Y.numpy() + 0.1
    assert np.allclose(onehot.sum(1), 1) and np.array_equal(onehot.argmax(1), a["y_train"][:32])
    assert set(np.unique(task.Y.numpy()).round(6)) == {-0.1, 0.9}
    assert task.rounds(epochs=3, per_round=2, m=10) == math.ceil(3 * (2 + 0) / 2)  # ⌊25/10⌋ + ⌊7/10⌋ = 2
    with pytest.raises(ValueError, match="4 users requested but the prepared data holds 3"):
        FederatedTask.from_arrays(a, 4, 4, 0.1, DT, "cpu")


def test_streams_cycle_through_each_users_contiguous_minibatches():
    """q = 1: every user every round; over ⌊n_i/m⌋ rounds a user sees each of its contiguous minibatches once (in a
    permuted order), then starts a new permutation; a user with n_i < m is sampled but sends nothing."""
    a = arrays([25, 7, 31], [1, 1, 1])
    task = FederatedTask.from_arrays(a, 3, 4, 0.1, DT, "cpu")
    streams = UserStreams(task, 10, 1.0, np.random.default_rng(1))
    seen = {0: [], 2: []}
    for _ in range(6):
        b = streams.next_batch()
        assert b.users.tolist() == [0, 1, 2] and b.valid.tolist() == [True, False, True]
        for j, user in ((0, 0), (2, 2)):
            rows = b.X[j].numpy()
            start = int(np.flatnonzero((a["x_train"] == rows[0].astype(np.float32)).all(1))[0])
            assert np.allclose(rows, a["x_train"][start: start + 10])  # contiguous
            seen[user].append((start - a["train_offsets"][user]) // 10)
    assert sorted(seen[0][:2]) == [0, 1] and sorted(seen[0][2:4]) == [0, 1]  # 2 minibatches per epoch (5 rows unused)
    assert sorted(seen[2][:3]) == [0, 1, 2] and sorted(seen[2][3:6]) == [0, 1, 2]


def test_poisson_sampling_rate_and_reproducibility():
    a = arrays([20] * 200, [1] * 200)
    task = FederatedTask.from_arrays(a, 200, 4, 0.1, DT, "cpu")
    streams = UserStreams(task, 10, 0.05, np.random.default_rng(2))
    sizes = [len(streams.next_batch().users) for _ in range(400)]
    assert np.mean(sizes) == pytest.approx(10, abs=0.5)  # Binomial(200, 0.05): mean 10, se ≈ 0.15
    assert np.var(sizes) == pytest.approx(200 * 0.05 * 0.95, rel=0.25)
    again = UserStreams(task, 10, 0.05, np.random.default_rng(2))
    first = [again.next_batch() for _ in range(3)]
    ref = UserStreams(task, 10, 0.05, np.random.default_rng(2))
    for b in first:
        c = ref.next_batch()
        assert torch.equal(b.users, c.users) and torch.equal(b.X, c.X)


def test_accuracy_scores_each_user_with_its_own_model():
    a = arrays([10, 10, 10], [4, 1, 6], d=3, seed=5)
    task = FederatedTask.from_arrays(a, 3, 4, 0.1, DT, "cpu")
    rng = np.random.default_rng(0)
    W = torch.tensor(rng.normal(size=(2, 3, 4)))
    Th = torch.tensor(rng.normal(size=(2, 3, 3, 4)))  # (G, N, d, K) here; the engine stores (N, d, G, K)
    want = []
    for g in range(2):
        hits = 0
        for i in range(3):
            lo, hi = a["test_offsets"][i], a["test_offsets"][i + 1]
            scores = a["x_test"][lo:hi].astype(np.float64) @ (W[g] + Th[g, i]).numpy()
            hits += int((scores.argmax(1) == a["y_test"][lo:hi]).sum())
        want.append(hits / 11)
    for chunk in (64, 2, 1):
        assert accuracy(task, W, Th.permute(1, 2, 0, 3).contiguous(), chunk=chunk).tolist() == pytest.approx(want)
