"""The federated classification tasks of bietti2022 (spec §1.3, §3): per-user data, Poisson user sampling and the
per-user minibatch streams, and the pooled test accuracy of personalized linear models.

A user's stream cuts its training set into ⌊n_i/m⌋ contiguous minibatches, permutes their order each epoch, and
starts a new permuted epoch when exhausted; users with n_i < m contribute a zero gradient. User samples and
minibatch orders come from one numpy Generator per (task, seed): every config and every cell of a seed sees the
same users and minibatches (common random numbers).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from dpfl.papers.bietti2022.ppsgd import Batch


class UserRows:
    """What the streams and T need of a task: `offsets` (N + 1,), user i's training rows offsets[i]:offsets[i+1]."""

    offsets: np.ndarray

    @property
    def n_users(self) -> int:
        return len(self.offsets) - 1

    def counts(self) -> np.ndarray:
        return np.diff(self.offsets)

    def rounds(self, epochs: float, per_round: int, m: int) -> int:
        """T = ⌈E·Σ_i ⌊n_i/m⌋ / Q⌉ (spec §3): each user is then sampled ≈ E·mean⌊n_i/m⌋ times in expectation."""
        return max(1, math.ceil(epochs * int((self.counts() // m).sum()) / per_round))


@dataclass
class FederatedTask(UserRows):
    """Users' training rows X (n, d) with targets Y (n, K) and offsets (N + 1,), test rows with labels likewise,
    on one device. `targets`: one-hot labels minus `shift` (spec §2: +0.9 / −0.1)."""

    X: torch.Tensor
    Y: torch.Tensor
    offsets: np.ndarray
    X_test: torch.Tensor
    y_test: torch.Tensor
    test_offsets: np.ndarray
    classes: int

    @classmethod
    def from_arrays(cls, arrays: dict, users: int, classes: int, shift: float, dtype, device) -> "FederatedTask":
        """The first `users` users of a prepared dataset (x_train, y_train, train_offsets, x_test, y_test,
        test_offsets: dpfl.data.loaders.emnist)."""
        available = len(arrays["train_offsets"]) - 1
        if users > available:
            raise ValueError(f"bietti2022: {users} users requested but the prepared data holds {available} "
                             f"(params.users in config/papers/bietti2022.yaml)")
        off, toff = np.asarray(arrays["train_offsets"][: users + 1]), np.asarray(arrays["test_offsets"][: users + 1])
        y = np.asarray(arrays["y_train"][: off[-1]], np.int64)
        if y.size and (y.min() < 0 or y.max() >= classes):
            raise ValueError(f"bietti2022: labels outside 0..{classes - 1} in the prepared data")
        Y = np.eye(classes, dtype=np.float32)[y] - shift
        as_t = lambda a, dt=dtype: torch.as_tensor(np.ascontiguousarray(a), dtype=dt, device=device)  # noqa: E731
        return cls(as_t(arrays["x_train"][: off[-1]]), as_t(Y), off, as_t(arrays["x_test"][: toff[-1]]),
                   torch.as_tensor(np.asarray(arrays["y_test"][: toff[-1]], np.int64), device=device), toff, classes)

    @property
    def dim(self) -> int:
        return self.X.shape[1]


class UserStreams:
    """User sampling and each user's stream of contiguous minibatches of m rows (a new permutation of its ⌊n_i/m⌋
    minibatches every epoch).

    sampling "poisson" (spec §3, the paper): each round every user independently at rate q; streams cycle, for as
    many rounds as the caller takes (`rounds` is None).
    sampling "shuffle" (compat authors-code, spec §8 B1): each user's stream holds ⌊E·⌊n_i/m⌋⌉ minibatches (E passes);
    each round the users that still have data are shuffled and the first Q take their next minibatch, so late rounds
    have fewer than Q users; exhausted users drop out and the run ends when all are. The whole plan is drawn up
    front: `rounds` is its length, `users_per_round` the L_t of every round (the global step's denominator and the
    nominal accountant's rate L_t/N) and `rounds_per_user` how many rounds each user is in (the certified ε's count).
    """

    def __init__(self, task, m: int, q: float, rng: np.random.Generator, sampling: str = "poisson",
                 per_round: int | None = None, epochs: float | None = None):
        self.task, self.m, self.q, self.rng = task, m, q, rng
        self.n_batches = task.counts() // m
        self.order = [rng.permutation(int(b)) for b in self.n_batches]  # the first epoch of every user
        self.pos = np.zeros(task.n_users, dtype=np.int64)
        self.plan, self.rounds, self.users_per_round, self.t = None, None, None, 0
        self.rounds_per_user = None  # shuffle: how many rounds each user takes part in (its E·⌊n_i/m⌋ minibatches)
        if sampling == "shuffle":
            self.plan = self._shuffle_plan(int(per_round), float(epochs))
            self.rounds = len(self.plan)
            self.users_per_round = np.array([len(u) for u, _ in self.plan], dtype=np.int64)
        elif sampling != "poisson":
            raise ValueError(f"bietti2022: unknown user sampling {sampling!r}; allowed: poisson, shuffle")

    def _next_start(self, i: int) -> int:
        """The first training row of user i's next minibatch; advances its stream (a new permutation per epoch)."""
        start = self.task.offsets[i] + self.order[i][self.pos[i]] * self.m
        self.pos[i] += 1
        if self.pos[i] == self.n_batches[i]:  # epoch done: a new permutation of the user's minibatches
            self.order[i] = self.rng.permutation(int(self.n_batches[i]))
            self.pos[i] = 0
        return start

    def _shuffle_plan(self, per_round: int, epochs: float) -> list[tuple[np.ndarray, np.ndarray]]:
        left = np.rint(epochs * self.n_batches).astype(np.int64)  # minibatches each user still has
        self.rounds_per_user = left.copy()
        plan = []
        while left.any():
            users = np.sort(self.rng.permutation(np.flatnonzero(left > 0))[:per_round])
            starts = np.array([self._next_start(i) for i in users], dtype=np.int64)
            left[users] -= 1
            plan.append((users, starts))
        return plan

    def draw(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The round's sampled users, whether each has a minibatch (n_i ≥ m), and the first training row of its next
        minibatch (0 where it has none); advances the users' streams."""
        if self.plan is not None:
            if self.t >= len(self.plan):
                raise IndexError(f"the shuffled plan has {len(self.plan)} rounds; round {self.t + 1} was asked for")
            users, starts = self.plan[self.t]
            self.t += 1
            return users, np.ones(len(users), dtype=bool), starts
        users = np.flatnonzero(self.rng.random(self.task.n_users) < self.q)
        starts = np.zeros(len(users), dtype=np.int64)
        valid = self.n_batches[users] > 0
        for j, i in enumerate(users):
            if valid[j]:
                starts[j] = self._next_start(i)
        return users, valid, starts

    def next_batch(self) -> Batch:
        """The sampled users' next minibatches (dense rows)."""
        users, valid, starts = self.draw()
        dev = self.task.X.device
        rows = (torch.as_tensor(starts, device=dev)[:, None] + torch.arange(self.m, device=dev)[None]).reshape(-1)
        L = len(users)
        X = self.task.X.index_select(0, rows).reshape(L, self.m, self.task.X.shape[1])  # L may be 0
        Y = self.task.Y.index_select(0, rows).reshape(L, self.m, self.task.Y.shape[1])
        return Batch(torch.as_tensor(users, device=dev), X, Y, torch.as_tensor(valid, device=dev))


def accuracy(task: FederatedTask, W: torch.Tensor, Th: torch.Tensor, chunk: int = 64) -> torch.Tensor:
    """Top-1 test accuracy per config (G,) for W (G, d, K) and Θ (N, d, G, K), pooled over every user's test rows,
    user i scored with W + Θ_i: argmax of x·(W + Θ_i) equals the label. Users `chunk` at a time, their test rows
    padded to the longest."""
    G = W.shape[0]
    hits = torch.zeros(G, dtype=torch.float64, device=W.device)
    toff = task.test_offsets
    counts = np.diff(toff)
    for a in range(0, task.n_users, chunk):
        b = min(task.n_users, a + chunk)
        t_max = int(counts[a:b].max()) if b > a else 0
        if t_max == 0:
            continue
        rows = np.arange(t_max)[None, :] + toff[a:b, None]
        valid = torch.as_tensor(np.arange(t_max)[None, :] < counts[a:b, None], device=W.device)
        rows = torch.as_tensor(np.minimum(rows, toff[-1] - 1), device=W.device)
        X = task.X_test[rows]  # (u, t, d)
        y = task.y_test[rows]
        u, G, d, K = b - a, *W.shape
        scores = (torch.einsum("utd,gdk->utgk", X, W)
                  + torch.bmm(X, Th[a:b].reshape(u, d, G * K)).reshape(u, t_max, G, K))
        hits += ((scores.argmax(-1) == y[:, :, None]) & valid[:, :, None]).sum((0, 1)).to(torch.float64)
    return hits / max(1, int(toff[-1]))
