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
from dpfl.papers.bietti2022.federated import UserRows, UserStreams


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


def _block(values, lens, cols, local, n_cols, width, dtype, device):
    """Rows of a CSR matrix, given by their nonzeros' values and each row's count, twice: sparse (r, n_cols) on the
    columns `cols` and dense (r, width) on the columns `local` (both given per nonzero)."""
    rr = torch.as_tensor(np.repeat(np.arange(len(lens)), lens), device=device)
    vals = torch.as_tensor(values, dtype=dtype, device=device)
    glob = torch.sparse_coo_tensor(torch.stack([rr, torch.as_tensor(cols, dtype=torch.int64, device=device)]),
                                   vals, (len(lens), n_cols), check_invariants=False).coalesce()
    loc = torch.zeros((len(lens), width), dtype=dtype, device=device)
    loc.index_put_((rr, torch.as_tensor(local, device=device)), vals, accumulate=True)
    return glob, loc


@dataclass
class SparseBatch:
    users: torch.Tensor  # (L,)
    cols: torch.Tensor  # (c,) the global word ids the batch's documents use, sorted
    X: torch.Tensor  # sparse (L·m, c): the batch's rows on those words only
    X_local: torch.Tensor  # (L, m, U) dense on the words of each user's m documents (padded to the most)
    theta_rows: torch.Tensor  # (L, U) those words' rows of the compact Θ (padding → the spare zero row at the end)
    Y: torch.Tensor  # (L, m, K)
    valid: torch.Tensor  # (L,)

    def dense_rows(self, dim: int) -> torch.Tensor:
        """The batch's rows as a dense (L, m, dim) tensor on all words (for reference computations)."""
        L, m = self.Y.shape[:2]
        out = torch.zeros((L * m, dim), dtype=self.X.dtype, device=self.X.device)
        out[:, self.cols] = self.X.to_dense()
        return out.reshape(L, m, dim)


class SparseUserStreams(UserStreams):
    """The user sampling and minibatch streams of dpfl.papers.bietti2022.federated.UserStreams, batches of sparse
    rows."""

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
        take = np.concatenate([np.arange(a, b) for a, b in zip(lo, hi)] + [np.zeros(0, np.int64)])
        words, word_pos = np.unique(t.indices[take], return_inverse=True)  # the batch's global columns, compacted
        X, X_loc = _block(t.data[take], hi - lo, word_pos.reshape(-1), sub, len(words), U, t.dtype, t.device)
        spare = t.theta_rows()
        th_rows = np.full((len(users), U), spare, dtype=np.int64)
        for j, i in enumerate(users):
            th_rows[j, : len(cols[j])] = t.vocab_offsets[i] + cols[j]
        # L may be 0
        Y = t.Y.index_select(0, torch.as_tensor(rows, device=t.device)).reshape(len(users), m, t.Y.shape[1])
        dev = t.device
        return SparseBatch(torch.as_tensor(users, device=dev), torch.as_tensor(words.astype(np.int64), device=dev), X,
                           X_loc.reshape(len(users), m, U), torch.as_tensor(th_rows, device=dev), Y,
                           torch.as_tensor(valid, device=dev))


@dataclass
class SparseState:
    """The models of G configs on sparse data, with W kept as W = S − noise_coef ⊗ Ξ.

    Every config adds the same standard-normal ξ_t each round, scaled by its own c_g = η_w,g·σ_g·C/(qN); the clipped
    gradient sums only touch the words of the round's documents. So the dense part of W's update is shared: Ξ = Σ_t ξ_t
    (d, K) accumulates it once for all configs, and S (d, G, K) takes only the sparse gradient steps. A round then
    costs O(d·K + words·G·K) instead of O(G·d·K); W is formed on the batch's words when read, and in full to evaluate.
    """

    S: torch.Tensor  # (d, G, K)
    xi_sum: torch.Tensor  # (d, K)
    noise_coef: torch.Tensor  # (G,)
    theta: torch.Tensor  # (Σ|V_i| + 1, G, K), the last row a spare zero row that padding reads and never keeps
    denominator: float  # qN of noise_coef; a round with another denominator (B1: L_t) adds ξ·qN/L_t to Ξ

    @classmethod
    def zeros(cls, d: int, K: int, theta_rows: int, grid_t: dict, *, clip: float, q: float, n_users: int,
              dtype, device, theta: torch.Tensor | None = None) -> "SparseState":
        """Zero models; `theta`: zeroed storage to use for Θ (dpfl.papers.bietti2022.models.Storage reuses it)."""
        G = len(grid_t["eta_w"])
        coef = grid_t["eta_w"] * grid_t["sigma"] * clip / (q * n_users)
        theta = torch.zeros((theta_rows + 1, G, K), dtype=dtype, device=device) if theta is None else theta
        return cls(torch.zeros((d, G, K), dtype=dtype, device=device), torch.zeros((d, K), dtype=dtype, device=device),
                   coef.to(dtype), theta, q * n_users)

    @classmethod
    def from_weights(cls, W: torch.Tensor, theta: torch.Tensor, grid_t: dict, *, clip: float, q: float,
                     n_users: int) -> "SparseState":
        """A state holding the given W (G, d, K) and compact Θ (copies)."""
        G, d, K = W.shape
        st = cls.zeros(d, K, theta.shape[0] - 1, grid_t, clip=clip, q=q, n_users=n_users, dtype=W.dtype,
                       device=W.device)
        st.S.copy_(W.permute(1, 0, 2))
        st.theta.copy_(theta)
        return st

    def global_rows(self, rows: torch.Tensor | None = None) -> torch.Tensor:
        """W on the given word rows (all when None), as (rows, G, K)."""
        S, Xi = ((self.S, self.xi_sum) if rows is None
                 else (self.S.index_select(0, rows), self.xi_sum.index_select(0, rows)))
        return torch.addcmul(S, Xi[:, None, :], self.noise_coef[None, :, None], value=-1.0)

    def weights(self) -> torch.Tensor:
        """W (G, d, K)."""
        return self.global_rows().permute(1, 0, 2)


def sparse_round(state: SparseState, batch: SparseBatch, grid_t: dict, *, q: float, clip: float, n_users: int,
                 xi: torch.Tensor) -> None:
    """dpfl.papers.bietti2022.ppsgd.ppsgd_round on sparse rows, in place on the state (W as S − c ⊗ Ξ, compact Θ).
    The global step's denominator is qN (the paper; compat B1 passes q = L_t/N)."""
    d, G, K = state.S.shape
    theta = state.theta
    L = len(batch.users)
    if L > 0:
        m = batch.Y.shape[1]
        V, c = batch.X_local.shape[2], len(batch.cols)
        Th_s = theta.index_select(0, batch.theta_rows.reshape(-1)).reshape(L, V, G * K)
        W_c = state.global_rows(batch.cols).reshape(c, G * K)
        shared = torch.sparse.mm(batch.X, W_c).reshape(L, m, G * K)
        R = torch.baddbmm(shared, batch.X_local, Th_s).reshape(L, m, G, K).sub_(batch.Y[:, :, None, :])
        if not bool(batch.valid.all()):
            R.mul_(batch.valid.to(R.dtype)[:, None, None, None])
        gram = torch.bmm(batch.X_local, batch.X_local.transpose(1, 2))  # = X_i X_iᵀ: every word is in V_i
        sq = torch.einsum("lmn,lmgk,lngk->lg", gram, R, R) / (m * m)
        factor = clip_factor(sq.clamp_(min=0).sqrt_(), clip)
        # minus the global step on the clipped sum, (c, G, K): η_w/(qN) · Σ_i clip(g_i), g_i = X_iᵀR_i/m
        scaled = (R * (factor * (grid_t["eta_w"] / (q * n_users * m)))[:, None, :, None]).reshape(L * m, G * K)
        state.S.index_add_(0, batch.cols, torch.sparse.mm(batch.X.t(), scaled).reshape(c, G, K), alpha=-1.0)
        step = (R * (grid_t["eta_theta"] / m)[None, None, :, None]).reshape(L, m, G * K)
        Th_s.baddbmm_(batch.X_local.transpose(1, 2), step, alpha=-1.0)
        theta.index_copy_(0, batch.theta_rows.reshape(-1), Th_s.reshape(L * V, G, K))
        theta[-1].zero_()  # padding wrote into the spare row (zeros, or NaN from a diverged config): keep it zero
    ratio = state.denominator / (q * n_users)
    state.xi_sum.add_(xi if ratio == 1.0 else xi * ratio)  # the server's noise σC·ξ, every config at once (SparseState)


def sparse_accuracy(task: SparseTask, state: SparseState, chunk: int = 4096) -> torch.Tensor:
    """Top-1 tag accuracy per config (G,): a hit if the argmax tag of x·(W + Θ_i) is one of the document's tags
    (documents without tags count as misses), pooled over every user's test documents. Two sparse products per
    chunk of test documents: on W (all words) and on the compact Θ (each nonzero of user i's documents that lies in
    V_i addresses row vocab_offsets[i] + its local index; θ_i is zero elsewhere)."""
    d, G, K = state.S.shape
    t, dev = task.test, state.S.device
    W = state.global_rows().reshape(d, G * K)
    theta = state.theta.reshape(state.theta.shape[0], G * K)
    n_test = int(task.test_offsets[-1])
    user = np.repeat(np.arange(task.n_users), np.diff(task.test_offsets))  # per test document
    hits = torch.zeros(G, dtype=torch.float64, device=dev)
    with torch.no_grad():
        for a in range(0, n_test, chunk):
            b = min(n_test, a + chunk)
            s0, s1 = int(t["indptr"][a]), int(t["indptr"][b])
            r = np.repeat(np.arange(b - a), np.diff(t["indptr"][a: b + 1]))
            vals = torch.as_tensor(t["data"][s0:s1], dtype=W.dtype, device=dev)
            glob = torch.sparse_coo_tensor(torch.as_tensor(np.stack([r, t["indices"][s0:s1]]), dtype=torch.int64,
                                                           device=dev), vals, (b - a, d), check_invariants=False)
            scores = torch.sparse.mm(glob, W)
            local = t["local"][s0:s1]
            inside = local >= 0
            rows = task.vocab_offsets[user[a + r[inside]]] + local[inside]
            loc = torch.sparse_coo_tensor(torch.as_tensor(np.stack([r[inside], rows]), dtype=torch.int64, device=dev),
                                          vals[torch.as_tensor(inside, device=dev)], (b - a, theta.shape[0]),
                                          check_invariants=False)
            scores += torch.sparse.mm(loc, theta)
            top = scores.reshape(b - a, G, K).argmax(-1)  # (r, G)
            hits += torch.gather(t["tags"][a:b].to(torch.int64), 1, top).sum(0).to(torch.float64)
    return hits / max(1, n_test)
