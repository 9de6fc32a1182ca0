"""Padded silo data for lowy2023's cross-silo GLMs: `SiloData` holds N silos' records (one user per record, so a
silo's records are its users) zero-padded to the largest silo, with the counts that mask the padding, so a round over
every silo is one batched tensor operation; `pad` stacks ragged arrays that way.

The other training papers keep their own layouts: kato2024's user-level data are lists of (run, silo, user) pairs
grouped into padded buckets (dpfl.papers.kato2024.federation.Federation, dpfl.fl.buckets.make_buckets); bietti2022's are
per-user row offsets (dpfl.papers.bietti2022.federated).
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
