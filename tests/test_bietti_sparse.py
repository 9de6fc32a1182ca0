"""bietti2022 on sparse bag-of-words data (Stackoverflow): the compact-Θ round equals the dense linear round on the
densified rows, with the same batch; the top-1 tag accuracy against a loop; users' vocabularies."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from dpfl.papers.bietti2022.ppsgd import Batch, Grid, grid_tensors, ppsgd_round
from dpfl.papers.bietti2022.sparse import SparseState, SparseTask, SparseUserStreams, sparse_accuracy, sparse_round

DT = torch.float64


def sparse_arrays(counts, test_counts, d=12, K=4, seed=0):
    """A tiny dataset in the Stackoverflow loader's contract: each user uses its own few words (test rows also use
    words outside the user's training vocabulary)."""
    rng = np.random.default_rng(seed)
    def rows(n, words):
        ip, ix, dv = [0], [], []
        for _ in range(n):
            k = rng.integers(1, 4)
            cols = np.sort(rng.choice(words, size=min(k, len(words)), replace=False))
            ix += cols.tolist()
            dv += (rng.random(len(cols)) / len(cols)).tolist()
            ip.append(len(ix))
        return np.array(ip), np.array(ix, np.int32), np.array(dv, np.float32)
    parts, tparts = [], []
    for c, tc in zip(counts, test_counts):
        words = rng.choice(d, size=5, replace=False)
        parts.append(rows(c, words))
        tparts.append(rows(tc, np.arange(d)))
    def join(ps):
        ip, ix, dv = [0], [], []
        for p in ps:
            ip += (p[0][1:] + ip[-1]).tolist()
            ix.append(p[1])
            dv.append(p[2])
        return np.array(ip, np.int64), np.concatenate(ix), np.concatenate(dv)
    ip, ix, dv = join(parts)
    tip, tix, tdv = join(tparts)
    n, nt = sum(counts), sum(test_counts)
    return {"x_train_indptr": ip, "x_train_indices": ix, "x_train_data": dv,
            "y_train": (rng.random((n, K)) < 0.3).astype(np.uint8), "train_offsets": np.cumsum([0, *counts]),
            "x_test_indptr": tip, "x_test_indices": tix, "x_test_data": tdv,
            "y_test": (rng.random((nt, K)) < 0.3).astype(np.uint8), "test_offsets": np.cumsum([0, *test_counts]),
            "words": np.array([f"w{i}" for i in range(d)]), "tags": np.array([f"t{i}" for i in range(K)])}


def test_vocabularies_and_local_indices():
    a = sparse_arrays([6, 4, 7], [2, 3, 1])
    task = SparseTask.from_arrays(a, 3, 0.1, DT, "cpu")
    for i in range(3):
        lo, hi = a["x_train_indptr"][a["train_offsets"][i]], a["x_train_indptr"][a["train_offsets"][i + 1]]
        v = task.vocab[task.vocab_offsets[i]: task.vocab_offsets[i + 1]]
        assert np.array_equal(v, np.unique(a["x_train_indices"][lo:hi]))
        assert np.array_equal(v[task.local[lo:hi]], a["x_train_indices"][lo:hi])
        tlo, thi = a["x_test_indptr"][a["test_offsets"][i]], a["x_test_indptr"][a["test_offsets"][i + 1]]
        tl = task.test["local"][tlo:thi]
        inside = np.isin(a["x_test_indices"][tlo:thi], v)
        assert np.array_equal(tl >= 0, inside) and np.array_equal(v[tl[inside]], a["x_test_indices"][tlo:thi][inside])
    assert np.allclose(task.Y.numpy() + 0.1, a["y_train"])


@pytest.mark.parametrize("q, vary", [(1.0, False), (0.5, False), (0.5, True)])
def test_sparse_round_equals_the_dense_round(q, vary):
    """vary: every round its own denominator (compat B1: the global step ÷ L_t), which the shared noise sum Ξ must
    carry."""
    a = sparse_arrays([25, 4, 31, 12, 20], [3, 2, 4, 1, 2], d=12, K=4)  # user 1 has fewer rows than m
    task = SparseTask.from_arrays(a, 5, 0.1, DT, "cpu")
    m, N, clip = 5, 5, 0.05
    grid = Grid.product([0.3, 1.0], [0.3, 3, math.inf], [2.0])
    G, K, d = len(grid), 4, 12
    gt = grid_tensors(grid, DT, "cpu")
    streams = SparseUserStreams(task, m, q, np.random.default_rng(4))
    rng = np.random.default_rng(1)
    W = torch.tensor(rng.normal(size=(G, d, K)) * 0.3)
    theta = torch.zeros((task.theta_rows() + 1, G, K), dtype=DT)
    theta[:-1] = torch.tensor(rng.normal(size=(task.theta_rows(), G, K)) * 0.3)
    dense_th = torch.zeros((N, d, G, K), dtype=DT)
    for i in range(N):
        lo, hi = task.vocab_offsets[i], task.vocab_offsets[i + 1]
        dense_th[i, task.vocab[lo:hi]] = theta[lo:hi]
    W_dense = W.clone()
    state = SparseState.from_weights(W, theta, gt, clip=clip, q=q, n_users=N)
    for k in range(4):
        b = streams.next_batch()
        dense = Batch(b.users, b.dense_rows(d), b.Y, b.valid)
        xi = torch.tensor(rng.normal(size=(d, K)))
        qk = (k + 1) / N if vary else q
        ppsgd_round(W_dense, dense_th, dense, gt, clip=clip, q=qk, n_users=N, xi=xi)
        sparse_round(state, b, gt, clip=clip, q=qk, n_users=N, xi=xi)
    W, theta = state.weights(), state.theta
    assert torch.allclose(W, W_dense, atol=1e-12, rtol=1e-9)
    for i in range(N):
        lo, hi = task.vocab_offsets[i], task.vocab_offsets[i + 1]
        assert torch.allclose(theta[lo:hi], dense_th[i, task.vocab[lo:hi]], atol=1e-12, rtol=1e-9)
        outside = np.setdiff1d(np.arange(d), task.vocab[lo:hi])
        assert torch.equal(dense_th[i, outside], torch.zeros_like(dense_th[i, outside]))  # never moves there
    assert torch.equal(theta[-1], torch.zeros_like(theta[-1]))  # the spare padding row stays zero
    # accuracy: a hit if the argmax tag is one of the document's tags
    acc = sparse_accuracy(task, state, chunk=3)
    want = np.zeros(G)
    for i in range(N):
        for r in range(a["test_offsets"][i], a["test_offsets"][i + 1]):
            x = np.zeros(d)
            s, e = a["x_test_indptr"][r], a["x_test_indptr"][r + 1]
            x[a["x_test_indices"][s:e]] = a["x_test_data"][s:e]
            for g in range(G):
                top = int(np.argmax(x @ (W[g] + dense_th[i, :, g]).numpy()))
                want[g] += a["y_test"][r, top]
    assert acc.numpy() == pytest.approx(want / a["test_offsets"][-1])
