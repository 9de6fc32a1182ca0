"""ULDP-GROUP-k record bounding (kato2024 spec §4, step 2): how many records each user may contribute, and which
of them each silo keeps. Computed once per allocation by a trusted coordinator from the true histograms (the paper
accepts this for a baseline), before any training."""

from __future__ import annotations

import numpy as np

# where k comes from: the method ids in a training figure's `methods:` (and the GROUP methods in methods.py)
_WHERE = ("(the method ids uldp_group_max, uldp_group_median, uldp_group_<k> in `methods:` of a figure in "
          "config/papers/kato2024.yaml)")


def group_size(kind: str | int, user_counts: np.ndarray) -> int:
    """k: `max` = max_u n_u; `median` = ⌊median of n_u over users with ≥ 1 record⌋; an integer ≥ 1 as given."""
    counts = np.asarray(user_counts)
    if kind == "max":
        return int(counts.max())
    if kind == "median":
        return int(np.floor(np.median(counts[counts > 0])))
    if isinstance(kind, (int, np.integer)) and not isinstance(kind, bool) and kind >= 1:
        return int(kind)
    raise ValueError(f"ULDP-GROUP-k: group size k = {kind!r} is not allowed; allowed: 'max', 'median' or an integer "
                     f"≥ 1 {_WHERE}")


def bounding_flags(user: np.ndarray, silo: np.ndarray, n_silos: int, k: int, step: int = 1) -> np.ndarray:
    """Per record (in the silos' local order = the order of the arrays), whether GROUP-k trains on it.

    Users are visited in order of first appearance scanning silo 0's records, then silo 1's, …; one round-robin silo
    pointer p starts at 0 and is shared across users. For user u: while allocated < min(k, n_u): if silo p still holds
    unallocated records of u, allocate `step` of them there (1; 2 for TCGA, never more than it holds or than the
    budget left); then p ← (p + 1) mod S. Each silo keeps, per user, the first records of that user in its order."""
    user, silo = np.asarray(user), np.asarray(silo)
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"ULDP-GROUP-k record bounding: group size k must be ≥ 1, got {k!r}; allowed: an integer "
                         f"≥ 1 {_WHERE}")
    order = np.lexsort((np.arange(len(user)), silo))  # silo 0's records first, each silo in its local order
    users_in_order = list(dict.fromkeys(user[order].tolist()))
    held = {}  # (user, silo) -> that pair's records in local order
    for r in order:
        held.setdefault((int(user[r]), int(silo[r])), []).append(int(r))
    keep = np.zeros(len(user), dtype=bool)
    p = 0
    for u in users_in_order:
        left = {s: len(held.get((u, s), ())) for s in range(n_silos)}
        budget = min(k, sum(left.values()))
        taken = {s: 0 for s in range(n_silos)}
        allocated = 0
        while allocated < budget:
            if left[p] > 0:
                m = min(step, left[p], budget - allocated)
                taken[p] += m
                left[p] -= m
                allocated += m
            p = (p + 1) % n_silos
        for s, m in taken.items():
            keep[held.get((u, s), [])[:m]] = True
    return keep
