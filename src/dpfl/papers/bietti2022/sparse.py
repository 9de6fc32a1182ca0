"""PP-SGD on sparse bag-of-words data (Stackoverflow, spec §1.2): the linear round of dpfl.papers.bietti2022.ppsgd
with X sparse (d = 5000) and the personal models stored compactly.

θ_i only ever moves on the words user i's training documents contain (its gradient is X_iᵀR_i), so Θ is kept as
the rows of those words only: `theta` (Σ_i |V_i|, G, K), user i's rows at vocab_offsets[i]:vocab_offsets[i+1] (V_i
sorted). Dense, Θ would be N × 5000 × 80 floats per config (800 MB). Each training nonzero also knows its column's
position in its user's V_i, so a sampled user's minibatch is a small dense (m, |V_i|) block; the global part uses
the sparse rows directly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from dpfl.fl.aggregate import clip_factor
from dpfl.papers.bietti2022.federated import Streams, UserRows


@dataclass
class SparseTask(UserRows):
    """Users' training rows (CSR) with multi-hot targets, their vocabularies, and the test rows."""

    indptr: np.ndarray
    indices: np.ndarray
    data: np.ndarray
    local: np.ndarray  # per training nonzero: its column's position in its user's vocabulary
    Y: torch.Tensor  # (n, K) multi-hot − shift
    offsets: np.ndarray
    vocab: np.ndarray  # Σ_i |V_i| global column ids, user-major, sorted within a user
    vocab_offsets: np.ndarray
    test: dict  # indptr, indices, data, local (−1: a word outside the user's vocabulary), tags (n_test, K) bool
    test_offsets: np.ndarray
    dim: int
    classes: int
    device: object = "cpu"
    dtype: object = torch.float32

    @classmethod
    def from_arrays(cls, arrays: dict, users: int, shift: float, dtype, device) -> "SparseTask":
        """The first `users` users of a prepared sparse dataset (dpfl.data.loaders.stackoverflow)."""
        available = len(arrays["train_offsets"]) - 1
        if users > available:
            raise ValueError(f"bietti2022: {users} users requested but the prepared data holds {available} "
                             f"(params.grids.<id>.users in config/papers/bietti2022.yaml)")
        dim, classes = len(arrays["words"]), arrays["y_train"].shape[1]
        off, toff = np.asarray(arrays["train_offsets"][: users + 1]), np.asarray(arrays["test_offsets"][: users + 1])
        ip = np.asarray(arrays["x_train_indptr"][: off[-1] + 1])
        idx, val = np.asarray(arrays["x_train_indices"][: ip[-1]]), np.asarray(arrays["x_train_data"][: ip[-1]])
        tip = np.asarray(arrays["x_test_indptr"][: toff[-1] + 1])
        tidx, tval = np.asarray(arrays["x_test_indices"][: tip[-1]]), np.asarray(arrays["x_test_data"][: tip[-1]])
        vocab, vocab_off = [], [0]
        local = np.empty(len(idx), dtype=np.int64)
        tlocal = np.full(len(tidx), -1, dtype=np.int64)
        for i in range(users):
            a, b = ip[off[i]], ip[off[i + 1]]
            v = np.unique(idx[a:b])
            local[a:b] = np.searchsorted(v, idx[a:b])
            ta, tb = tip[toff[i]], tip[toff[i + 1]]
            pos = np.minimum(np.searchsorted(v, tidx[ta:tb]), max(len(v) - 1, 0))
            hit = (v[pos] == tidx[ta:tb]) if len(v) else np.zeros(tb - ta, bool)
            tlocal[ta:tb] = np.where(hit, pos, -1)
            vocab.append(v)
            vocab_off.append(vocab_off[-1] + len(v))
        Y = torch.as_tensor(np.asarray(arrays["y_train"][: off[-1]], np.float32) - shift, dtype=dtype, device=device)
        test = {"indptr": tip, "indices": tidx, "data": tval, "local": tlocal,
                "tags": torch.as_tensor(np.asarray(arrays["y_test"][: toff[-1]]) > 0, device=device)}
        return cls(ip, idx, val, local, Y, off, np.concatenate(vocab) if vocab else np.zeros(0, np.int64),
                   np.asarray(vocab_off), test, toff, dim, classes, device, dtype)

    def theta_rows(self) -> int:
        return int(self.vocab_offsets[-1])


def _block(indptr, indices, data, local, starts, ends, width, dim, dtype, device, positions: bool = False):
    """Rows given by nonzero ranges [starts, ends) of a CSR matrix: (sparse (r, dim) rows, dense (r, width) rows on
    local columns: `local` per nonzero of the matrix, or with `positions` per taken nonzero in order; a nonzero with
    local index −1 (a word outside the user's vocabulary) is left out there)."""
    lens = ends - starts
    take = np.concatenate([np.arange(a, b) for a, b in zip(starts, ends)] + [np.zeros(0, np.int64)])
    local = local if positions else local[take]
    take_local = np.arange(len(take))
    rr = torch.as_tensor(np.repeat(np.arange(len(starts)), lens), device=device)
    vals = torch.as_tensor(data[take], dtype=dtype, device=device)
    glob = torch.sparse_coo_tensor(torch.stack([rr, torch.as_tensor(indices[take], dtype=torch.int64, device=device)]),
                                   vals, (len(starts), dim), check_invariants=False).coalesce()
    loc = torch.zeros((len(starts), width), dtype=dtype, device=device)
    lidx = torch.as_tensor(local[take_local], device=device)
    keep = lidx >= 0
    loc.index_put_((rr[keep], lidx[keep]), vals[keep], accumulate=True)
    return glob, loc


@dataclass
class SparseBatch:
    users: torch.Tensor  # (L,)
    X: torch.Tensor  # sparse (L·m, d)
    X_local: torch.Tensor  # (L, m, U) dense on the words of each user's m documents (padded to the most)
    theta_rows: torch.Tensor  # (L, U) those words' rows of the compact Θ (padding → the spare zero row at the end)
    Y: torch.Tensor  # (L, m, K)
    valid: torch.Tensor  # (L,)


class SparseStreams(Streams):
    """The user sampling and minibatch streams of dpfl.papers.bietti2022.federated.Streams, batches of sparse rows."""

    def next_batch(self) -> SparseBatch:
        t, m = self.task, self.m
        users, valid, starts = self.draw()
        rows = (starts[:, None] + np.arange(m)[None]).reshape(-1)
        live = np.repeat(valid, m)  # a user with n_i < m: empty rows (it sends nothing)
        rows = np.where(live, rows, 0)
        lo, hi = np.where(live, t.indptr[rows], 0), np.where(live, t.indptr[rows + 1], 0)
        # the batch's own columns per user: only the words of its m documents (not all of V_i) are read or moved
        cols, sub = [], np.zeros(int((hi - lo).sum()), dtype=np.int64)
        at = 0
        for j in range(len(users)):
            seg = [np.arange(x, y) for x, y in zip(lo[j * m:(j + 1) * m], hi[j * m:(j + 1) * m])]
            take = np.concatenate(seg + [np.zeros(0, np.int64)])
            u, inv = np.unique(t.local[take], return_inverse=True)
            cols.append(u)
            sub[at: at + len(take)] = inv
            at += len(take)
        U = max([1] + [len(c) for c in cols])
        X, X_loc = _block(t.indptr, t.indices, t.data, sub, lo, hi, U, t.dim, t.dtype, t.device, positions=True)
        spare = t.theta_rows()
        th_rows = np.full((len(users), U), spare, dtype=np.int64)
        for j, i in enumerate(users):
            th_rows[j, : len(cols[j])] = t.vocab_offsets[i] + cols[j]
        Y = t.Y.index_select(0, torch.as_tensor(rows, device=t.device)).reshape(len(users), m, -1)
        dev = t.device
        return SparseBatch(torch.as_tensor(users, device=dev), X, X_loc.reshape(len(users), m, U),
                           torch.as_tensor(th_rows, device=dev), Y, torch.as_tensor(valid, device=dev))


def sparse_round(W: torch.Tensor, theta: torch.Tensor, batch: SparseBatch, grid_t: dict, *, clip: float, q: float,
                 n_users: int, xi: torch.Tensor) -> None:
    """dpfl.papers.bietti2022.ppsgd.ppsgd_round on sparse rows, in place on W (G, d, K) and the compact Θ
    (Σ|V_i| + 1, G, K) (the last row is a spare zero row that padding reads and never keeps)."""
    G, d, K = W.shape
    L = len(batch.users)
    if L == 0:
        grad_sum = torch.zeros_like(W)
    else:
        m = batch.Y.shape[1]
        V = batch.X_local.shape[2]
        Th_s = theta.index_select(0, batch.theta_rows.reshape(-1)).reshape(L, V, G * K)
        shared = torch.sparse.mm(batch.X, W.permute(1, 0, 2).reshape(d, G * K)).reshape(L, m, G * K)
        R = torch.baddbmm(shared, batch.X_local, Th_s).reshape(L, m, G, K).sub_(batch.Y[:, :, None, :])
        if not bool(batch.valid.all()):
            R.mul_(batch.valid.to(R.dtype)[:, None, None, None])
        gram = torch.bmm(batch.X_local, batch.X_local.transpose(1, 2))  # = X_i X_iᵀ: every word is in V_i
        sq = torch.einsum("lmn,lmgk,lngk->lg", gram, R, R) / (m * m)
        factor = clip_factor(sq.clamp_(min=0).sqrt_(), clip)
        scaled = (R * factor[:, None, :, None]).reshape(L * m, G * K)
        grad_sum = torch.sparse.mm(batch.X.t(), scaled).div_(m).reshape(d, G, K).permute(1, 0, 2)
        step = (R * (grid_t["eta_theta"] / m)[None, None, :, None]).reshape(L, m, G * K)
        Th_s.baddbmm_(batch.X_local.transpose(1, 2), step, alpha=-1.0)
        keep = batch.theta_rows.reshape(-1) < theta.shape[0] - 1  # padding goes back nowhere
        theta.index_copy_(0, batch.theta_rows.reshape(-1)[keep], Th_s.reshape(L * V, G, K)[keep])
    noisy = grad_sum + (grid_t["sigma"] * clip)[:, None, None] * xi[None]
    W -= (grid_t["eta_w"] / (q * n_users))[:, None, None] * noisy


def sparse_accuracy(task: SparseTask, W: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
    """Top-1 tag accuracy per config (G,): a hit if the argmax tag of x·(W + Θ_i) is one of the document's tags
    (documents without tags count as misses), pooled over every user's test documents."""
    G, d, K = W.shape
    t = task.test
    hits = torch.zeros(G, dtype=torch.float64, device=W.device)
    with torch.no_grad():
        for i in range(task.n_users):
            a, b = int(task.test_offsets[i]), int(task.test_offsets[i + 1])
            if b == a:
                continue
            lo, hi = int(task.vocab_offsets[i]), int(task.vocab_offsets[i + 1])
            s0, s1 = int(t["indptr"][a]), int(t["indptr"][b])
            r = torch.as_tensor(np.repeat(np.arange(b - a), np.diff(t["indptr"][a: b + 1])), device=W.device)
            vals = torch.as_tensor(t["data"][s0:s1], dtype=W.dtype, device=W.device)
            glob = torch.sparse_coo_tensor(torch.stack([r, torch.as_tensor(t["indices"][s0:s1], dtype=torch.int64,
                                                                           device=W.device)]), vals, (b - a, d),
                                           check_invariants=False)
            scores = torch.sparse.mm(glob, W.permute(1, 0, 2).reshape(d, G * K)).reshape(-1, G, K)
            inside = torch.as_tensor(t["local"][s0:s1] >= 0, device=W.device)
            if hi > lo and bool(inside.any()):  # the words of the user's vocabulary: θ_i is zero elsewhere
                loc = torch.sparse_coo_tensor(torch.stack([r[inside], torch.as_tensor(t["local"][s0:s1],
                                                                                      device=W.device)[inside]]),
                                              vals[inside], (b - a, hi - lo), check_invariants=False)
                scores += torch.sparse.mm(loc, theta[lo:hi].reshape(hi - lo, G * K)).reshape(-1, G, K)
            top = scores.argmax(-1)  # (r, G)
            hits += torch.gather(t["tags"][a:b].to(torch.int64), 1, top).sum(0).to(torch.float64)
    return hits / max(1, int(task.test_offsets[-1]))
