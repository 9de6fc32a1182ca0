"""The round rules of kato2024 (spec §4) for every method family, vectorized over runs (seeds), silos and users.

A `Federation` holds the training data of R runs as *pairs*: (run, silo, user) for the user-level families (AVG,
AVG-w, AVG-ws, SGD), (run, silo) for the silo-level ones (DEFAULT, NAIVE, GROUP: a silo trains on all its records,
GROUP on those its bounding flags keep). The global models are one matrix θ (R, D); `round_fn(method, ...)` gives
θ ← one communication round, drawing every shuffle, Poisson sample and noise from one torch Generator.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from dpfl.fl.aggregate import clip_updates, pair_weights, weighted_clipped_sum
from dpfl.fl.local import (Bucket, FlatModel, clipped_mean_grad_sums, dp_sgd, local_sgd, make_buckets,
                           mean_grads)


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


def _subset(b: Bucket, keep: torch.Tensor) -> Bucket:
    return Bucket(b.pairs[keep], b.X[keep], b.y[keep], b.mask[keep], b.counts[keep])


def silo_noise(n_runs: int, n_silos: int, dim: int, std: float, gen: torch.Generator, like: torch.Tensor):
    """Σ_s of one N(0, std²) draw per silo: (R, D)."""
    z = torch.randn((n_runs, n_silos, dim), generator=gen, device=like.device, dtype=like.dtype)
    return std * z.sum(dim=1)


def round_fn(method, hyper: dict, fed: Federation, fm: FlatModel, *, sigma: float, batch: int,
             gen: torch.Generator, q: float = 1.0, sgd_gradient: str = "mean"):
    """θ (R, D) -> θ after one round of `method` (spec §4). `hyper`: eta_g, eta_l, epochs, clip (as the method
    needs). `sgd_gradient` (ULDP-SGD): mean (the paper) | authors (K1: Σ over the user's batches of the batch-mean
    gradient divided by the batch size)."""
    fam = method.family
    eta_g = float(hyper["eta_g"])
    clip = float(hyper.get("clip") or 0.0)
    R, S, U = fed.n_runs, fed.n_silos, fed.n_users
    dev = fed.buckets[0].X.device
    run_of = torch.as_tensor(fed.run, device=dev)
    user_of = torch.as_tensor(fed.user, device=dev)
    if fam in ("avg", "sgd"):
        weights = torch.as_tensor(fed.weights(method.weighting), device=dev)

    def local(theta_pairs, b):
        if fam == "group":
            return dp_sgd(fm, theta_pairs, b, epochs=int(hyper["epochs"]), batch=batch, lr=float(hyper["eta_l"]),
                          clip=clip, noise_std=sigma * clip, gen=gen)
        return local_sgd(fm, theta_pairs, b, epochs=int(hyper["epochs"]), batch=batch, lr=float(hyper["eta_l"]),
                         gen=gen)

    def step(theta: torch.Tensor) -> torch.Tensor:
        if fam in ("default", "naive", "group"):
            delta = torch.zeros_like(theta)
            for b in fed.buckets:
                start = theta[run_of[b.pairs]]
                d = local(start, b).sub_(start)
                if fam == "naive":
                    d, _ = clip_updates(d, clip)
                    d = d + sigma * clip * math.sqrt(S) * torch.randn(d.shape, generator=gen, device=dev, dtype=d.dtype)
                delta.index_add_(0, run_of[b.pairs], d)
            return theta + eta_g * delta / S
        total = torch.zeros_like(theta)
        if method.sampled:  # each run samples each user with probability q
            sampled = torch.rand((R, U), generator=gen, device=dev) < q
        for b in fed.buckets:
            if method.sampled:
                keep = sampled[run_of[b.pairs], user_of[b.pairs]]
                if not bool(keep.any()):
                    continue
                b = _subset(b, keep)
            if fam == "sgd" and sgd_gradient == "mean":
                total += clipped_mean_grad_sums(fm, theta, b, run_of[b.pairs], weights[b.pairs], clip, gen)
                continue
            start = theta[run_of[b.pairs]]
            d = authors_sgd_grads(fm, start, b, batch, gen) if fam == "sgd" else local(start, b).sub_(start)
            total += weighted_clipped_sum(d, weights[b.pairs], run_of[b.pairs], R, clip)
        total = total + silo_noise(R, S, theta.shape[1], sigma * clip / math.sqrt(S), gen, theta)
        scale = eta_g / (U * S * (q if method.sampled else 1.0))
        return theta - scale * total if fam == "sgd" else theta + scale * total

    return step


def authors_sgd_grads(fm: FlatModel, theta: torch.Tensor, b: Bucket, batch: int, gen=None) -> torch.Tensor:
    """K1 (the authors' code): Σ over the pair's consecutive batches of B records of (batch-mean gradient)/|batch|."""
    out = torch.zeros_like(theta)
    for j in range(max(1, math.ceil(b.mask.shape[1] / batch))):
        sl = slice(j * batch, (j + 1) * batch)
        part = Bucket(b.pairs, b.X[:, sl], b.y[:, sl], b.mask[:, sl], b.mask[:, sl].sum(1))
        g = mean_grads(fm, theta, part, gen)
        out += g / part.counts.clamp(min=1).to(g.dtype)[:, None]
    return out
