"""Federated data as padded tensors: silos × users × records, with a mask for the padding.

Every silo and user is padded to the largest one, so a round over all (silo, user) pairs is one batched tensor
operation instead of a Python loop. lowy2023's cross-silo data is the one-user-per-record case (`SiloData`: a silo's
records are its users); kato2024's user-level data keeps the user axis (`UserSiloData`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def pad(arrays: list[np.ndarray], fill=0) -> tuple[np.ndarray, np.ndarray]:
    """Stack ragged arrays along a new first axis, padding their first axis to the longest:
    (stacked (n_arrays, n_max, ...), mask (n_arrays, n_max) True where a row is real)."""
    n_max = max((len(a) for a in arrays), default=0)
    first = next((a for a in arrays if len(a)), arrays[0])
    out = np.full((len(arrays), n_max, *first.shape[1:]), fill, dtype=first.dtype)
    mask = np.zeros((len(arrays), n_max), dtype=bool)
    for i, a in enumerate(arrays):
        out[i, : len(a)], mask[i, : len(a)] = a, True
    return out, mask


@dataclass
class SiloData:
    """Training data of N silos, one user per record, zero-padded to the largest silo: X (N, n_max, d),
    y (N, n_max), counts (N,). `pooled_X`, `pooled_y` hold all real rows (for the training loss)."""

    X: np.ndarray
    y: np.ndarray
    counts: np.ndarray

    @classmethod
    def from_lists(cls, Xs: list[np.ndarray], ys: list[np.ndarray]) -> "SiloData":
        X, _ = pad([np.asarray(x, dtype=np.float64) for x in Xs])
        y, _ = pad(list(ys))
        return cls(X, y, np.array([len(x) for x in Xs]))

    @property
    def mask(self) -> np.ndarray:
        """(N, n_max): True for real records, False for padding."""
        return np.arange(self.X.shape[1])[None, :] < self.counts[:, None]

    @property
    def n_silos(self) -> int:
        return self.X.shape[0]

    @property
    def dim(self) -> int:
        return self.X.shape[2]

    @property
    def pooled_X(self) -> np.ndarray:
        return self.X[self.mask]

    @property
    def pooled_y(self) -> np.ndarray:
        return self.y[self.mask]

    @property
    def norms(self) -> np.ndarray:
        return np.linalg.norm(self.X, axis=-1)


@dataclass
class UserSiloData:
    """Records of U users spread over S silos: X (S, U, n_max, ...), y (S, U, n_max), mask (S, U, n_max).
    A user may hold records in several silos (user-level DP counts them together); `records` (S, U) says how many."""

    X: np.ndarray
    y: np.ndarray
    mask: np.ndarray

    @classmethod
    def from_records(cls, X: np.ndarray, y: np.ndarray, silo: np.ndarray, user: np.ndarray,
                     n_silos: int, n_users: int) -> "UserSiloData":
        """From flat records with their silo and user ids (the output of an allocation)."""
        key = silo.astype(np.int64) * n_users + user.astype(np.int64)
        order = np.argsort(key, kind="stable")
        counts = np.bincount(key, minlength=n_silos * n_users)
        n_max = int(counts.max()) if len(counts) else 0
        start = np.concatenate([[0], np.cumsum(counts)[:-1]])
        slot = np.arange(len(order)) - start[key[order]]  # position of each record within its (silo, user)
        Xp = np.zeros((n_silos * n_users, n_max, *X.shape[1:]), dtype=X.dtype)
        yp = np.zeros((n_silos * n_users, n_max), dtype=y.dtype)
        mask = np.zeros((n_silos * n_users, n_max), dtype=bool)
        Xp[key[order], slot], yp[key[order], slot], mask[key[order], slot] = X[order], y[order], True
        shape = (n_silos, n_users, n_max)
        return cls(Xp.reshape(*shape, *X.shape[1:]), yp.reshape(shape), mask.reshape(shape))

    @property
    def records(self) -> np.ndarray:
        return self.mask.sum(axis=-1)
