"""The pairs' records of local training (dpfl.fl.local) as padded buckets, and the rows each step reads.

- `Bucket`, `make_buckets`: pairs grouped by padded size (`padded_size`: n ≤ B the next power of two, n > B whole
  batches), so padding costs at most 2×; within a bucket the pairs are ordered by size, largest first, and a step
  only touches those that still have a batch (`active_pairs`).
- `epoch_batches`: one epoch's shuffled minibatches of every pair (torch DataLoader semantics: the last batch of an
  epoch holds the remainder); `poisson_rows`: DP-SGD's Poisson sample of each pair's records; `gather_rows`: the
  picked rows of each pair.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch


@dataclass
class Bucket:
    pairs: torch.Tensor  # (Pb,) indices into the pair list
    X: torch.Tensor  # (Pb, n_pad, ...)
    y: torch.Tensor  # (Pb, n_pad, ...)
    mask: torch.Tensor  # (Pb, n_pad)
    counts: torch.Tensor  # (Pb,)
    active: dict = field(default_factory=dict, repr=False, compare=False)  # active_pairs per batch size (cached)


def padded_size(n: int, batch: int) -> int:
    """n ≤ B: the next power of two (at most B); n > B: whole batches."""
    if n > batch:
        return int(math.ceil(n / batch) * batch)
    return min(batch, 1 << max(0, int(n - 1).bit_length()))


def make_buckets(records: list[tuple[np.ndarray, np.ndarray]], batch: int, device, chunk: int | None = None,
                 single: bool = False) -> list[Bucket]:
    """Group pairs (X_p, y_p) by padded size; each bucket is padded and moved to `device` once, its pairs ordered by
    record count, largest first (stable), so that the pairs still holding a batch at any step of an epoch are a
    prefix of the bucket (`active_pairs`). `chunk` caps the pairs of a bucket (memory: a bucket's parameter copies
    are (pairs, D)). `single`: one bucket padded to the largest pair (silo-level training: a few pairs of unequal
    size, where separate buckets would multiply the number of sequential steps; the prefix skips finished pairs)."""
    sizes = np.array([padded_size(len(x), batch) for x, _ in records])
    counts = np.array([len(x) for x, _ in records])
    if single:
        sizes = np.full(len(sizes), sizes.max())
    out = []
    for size in np.unique(sizes):
        idx = np.flatnonzero(sizes == size)
        idx = idx[np.argsort(-counts[idx], kind="stable")]
        for start in range(0, len(idx), chunk or len(idx)):
            part = idx[start: start + (chunk or len(idx))]
            x0, y0 = records[part[0]]
            X = np.zeros((len(part), size, *x0.shape[1:]), dtype=np.float32)
            Y = np.zeros((len(part), size, *y0.shape[1:]), dtype=y0.dtype)
            M = np.zeros((len(part), size), dtype=bool)
            for i, p in enumerate(part):
                x, y = records[p]
                X[i, : len(x)], Y[i, : len(x)], M[i, : len(x)] = x, y, True
            out.append(Bucket(torch.as_tensor(part, device=device), torch.as_tensor(X, device=device),
                              torch.as_tensor(Y, device=device), torch.as_tensor(M, device=device),
                              torch.as_tensor(M.sum(1), device=device)))
    return out


def active_pairs(bucket: Bucket, batch: int) -> list[int]:
    """For each step j of an epoch, how many pairs still hold a batch (those with more than j·B records; at least
    one step for every pair): a prefix of the bucket, its pairs being ordered by count, largest first."""
    if batch not in bucket.active:  # read from the device once per bucket, not every round (a host sync on a GPU)
        counts = bucket.counts.cpu().numpy()
        steps = max(1, math.ceil(bucket.mask.shape[1] / batch))
        bucket.active[batch] = [len(counts)] + [int((counts > j * batch).sum()) for j in range(1, steps)]
    return bucket.active[batch]


def epoch_batches(bucket: Bucket, batch: int, gen: torch.Generator, shuffle: bool, active: list[int]):
    """The (k, X, y, mask) minibatches of one epoch: a fresh shuffle of each pair's valid rows (padding last), cut
    into batches of B; step j involves only the first k = active[j] pairs (the others have no records left). Without
    `shuffle` (a bucket of one batch per epoch and a loss that is a mean of per-row terms, where the order of the
    rows changes nothing) no keys are drawn."""
    if not shuffle:
        yield len(bucket.counts), bucket.X, bucket.y, bucket.mask
        return
    keys = torch.rand(bucket.mask.shape, generator=gen, device=bucket.X.device)
    order = torch.argsort(torch.where(bucket.mask, keys, torch.full_like(keys, 2.0)), dim=1)
    for j, k in enumerate(active):
        idx = order[:k, j * batch: (j + 1) * batch]
        yield k, gather_rows(bucket.X[:k], idx), gather_rows(bucket.y[:k], idx), gather_rows(bucket.mask[:k], idx)


def poisson_rows(counts: torch.Tensor, q: torch.Tensor, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Poisson sampling of each pair's records: record i of pair p joins with probability q_p, independently.
    Drawn as the positions of the successes of a Bernoulli(q_p) sequence, whose gaps are i.i.d. Geometric(q_p)
    (inverse CDF ⌊log U / log(1 − q)⌋ + 1, U uniform on (0, 1], float64): about N·q draws per pair instead of one
    per record (a silo of 15k records sampled at q = 1/236 per step). Returns (idx, valid), both (k, w): each pair's
    sampled rows in increasing order, then padding; w = the largest sample (at least 1)."""
    k, dev = counts.shape[0], counts.device
    n = counts.to(torch.float64)
    logq = torch.log1p(-q.to(torch.float64))[:, None]  # −inf at q = 1: every gap is 1
    mean = float((n * q.to(torch.float64)).max()) if k else 0.0
    width = int(mean + 6.0 * math.sqrt(mean) + 8)  # a second draw is rarely needed
    last, chunks = torch.full((k,), -1.0, dtype=torch.float64, device=dev), []
    while True:
        u = 1.0 - torch.rand((k, width), generator=gen, dtype=torch.float64, device=dev)
        pos = last[:, None] + torch.cumsum(torch.floor(torch.log(u) / logq) + 1.0, dim=1)
        chunks.append(pos)
        last = pos[:, -1]
        if not bool((last < n).any()):  # every pair has passed its last record
            break
    pos = torch.cat(chunks, dim=1) if len(chunks) > 1 else chunks[0]
    valid = pos < n[:, None]  # a prefix of each row: positions increase
    w = max(1, int(valid.sum(1).max()))
    idx = torch.where(valid[:, :w], pos[:, :w], torch.zeros((), dtype=pos.dtype, device=dev)).to(torch.int64)
    return idx, valid[:, :w]


def gather_rows(t: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """t[p, idx[p, j]] for t (k, N, ...) and idx (k, w): whole rows by one index_select over the flattened pairs
    (~5× faster than torch.gather with an index expanded to every feature)."""
    k, n = t.shape[:2]
    flat = (idx + torch.arange(k, device=idx.device)[:, None] * n).reshape(-1)
    return t.reshape(k * n, *t.shape[2:]).index_select(0, flat).reshape(*idx.shape, *t.shape[2:])
