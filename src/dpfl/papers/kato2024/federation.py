"""The training data of a kato2024 cell as (run, silo, user) pairs in padded buckets (`Federation`), shared by the
training figures' round rules (dpfl.papers.kato2024.training.rules) and the private weighting protocol's rounds
(dpfl.papers.kato2024.protocol.secure)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from dpfl.fl.aggregate import pair_weights
from dpfl.fl.buckets import Bucket, make_buckets


@dataclass
class Federation:
    """Pairs of R runs: `run`, `silo`, `user` (−1 for silo-level pairs) and `count` per pair (numpy), the padded
    buckets (on the device) and the sizes S and U."""

    run: np.ndarray
    silo: np.ndarray
    user: np.ndarray
    count: np.ndarray
    buckets: list[Bucket]
    n_runs: int
    n_silos: int
    n_users: int

    @classmethod
    def build(cls, runs: list[dict], n_silos: int, n_users: int, level: str, batch: int, device,
              chunk: int | None = None) -> "Federation":
        """`runs`: per run {X, y, silo, user} of its training records (in the silos' local order); `level`:
        user (one pair per (silo, user) holding records) or silo (one pair per silo)."""
        meta, records = [], []
        for r, d in enumerate(runs):
            silo, user = np.asarray(d["silo"]), np.asarray(d["user"])
            if level == "silo":
                for s in range(n_silos):
                    idx = np.flatnonzero(silo == s)
                    meta.append((r, s, -1, len(idx)))
                    records.append((d["X"][idx], d["y"][idx]))
                continue
            key = silo.astype(np.int64) * n_users + user
            order = np.argsort(key, kind="stable")
            keys, starts, counts = np.unique(key[order], return_index=True, return_counts=True)
            for k, a, c in zip(keys, starts, counts):
                idx = order[a: a + c]
                meta.append((r, int(k // n_users), int(k % n_users), int(c)))
                records.append((d["X"][idx], d["y"][idx]))
        run, silo, user, count = (np.array(col, dtype=np.int64) for col in zip(*meta))
        buckets = make_buckets(records, batch, device, chunk, single=level == "silo")
        return cls(run, silo, user, count, buckets, len(runs), n_silos, n_users)

    def user_totals(self) -> np.ndarray:
        """n_u per (run, user): (R, U)."""
        out = np.zeros((self.n_runs, self.n_users), dtype=np.int64)
        np.add.at(out, (self.run, self.user), self.count)
        return out

    def weights(self, kind: str) -> np.ndarray:
        """w per pair (dpfl.fl.aggregate.pair_weights: avg 1/S, avg_w n_{s,u}/n_u)."""
        return pair_weights(self.count, self.user_totals()[self.run, self.user], self.n_silos, kind)


def subset(b: Bucket, keep: torch.Tensor) -> Bucket:
    """The pairs of bucket `b` where `keep` (P,) is true."""
    return Bucket(b.pairs[keep], b.X[keep], b.y[keep], b.mask[keep], b.counts[keep])
