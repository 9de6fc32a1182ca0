"""ULDP-GROUP-k record bounding (kato2024 spec §4 step 2) on hand-worked examples."""

from __future__ import annotations

import numpy as np
import pytest

from dpfl.papers.kato2024.training.group import bounding_flags, group_size


def test_group_size_rules():
    counts = np.array([0, 1, 4, 9, 2])
    assert group_size("max", counts) == 9
    assert group_size("median", counts) == 3  # median of [1, 4, 9, 2] = 3.0
    assert group_size(2, counts) == 2 and group_size(8, counts) == 8
    for bad in (0, -1, "mean", 1.5, True):
        with pytest.raises(ValueError, match="group size"):
            group_size(bad, counts)


def test_hand_worked_example():
    # silo 0 holds records 0..4, silo 1 holds 5..8, silo 2 holds 9..10 (local order = index order)
    user = np.array([7, 3, 7, 7, 3,  3, 7, 5, 3,  5, 7])
    silo = np.array([0, 0, 0, 0, 0,  1, 1, 1, 1,  2, 2])
    # users by first appearance (silo 0, then 1, then 2): 7, 3, 5.  k = 2, S = 3, one pointer p = 0:
    #  user 7 (4 in s0, 1 in s1, 1 in s2): p=0 take 1 (s0), p=1 take 1 (s1) -> done, p=2
    #  user 3 (2 in s0, 2 in s1):          p=2 none, p=0 take 1 (s0), p=1 take 1 (s1) -> done, p=2
    #  user 5 (1 in s1, 1 in s2):          p=2 take 1 (s2), p=0 none, p=1 take 1 (s1) -> done, p=2
    keep = bounding_flags(user, silo, 3, k=2)
    assert np.flatnonzero(keep).tolist() == [0, 1, 5, 6, 7, 9]  # each silo's first records of each kept user


def test_budget_is_min_k_n_and_step_two_for_tcga():
    user = np.array([1, 1, 1, 1, 1, 2, 2])
    silo = np.array([0, 0, 0, 1, 1, 0, 1])
    keep = bounding_flags(user, silo, 2, k=4, step=2)
    # user 1: p=0 take 2 (s0), p=1 take 2 (s1) -> 4; user 2 (n = 2 < k): p=0 take 1 (s0, only one), p=1 take 1
    assert np.flatnonzero(keep).tolist() == [0, 1, 3, 4, 5, 6]
    assert bounding_flags(user, silo, 2, k=100).sum() == len(user)  # k ≥ n_u keeps everything
    with pytest.raises(ValueError, match="k must be ≥ 1"):
        bounding_flags(user, silo, 2, k=0)


def test_every_user_contributes_at_most_k_records():
    rng = np.random.default_rng(2)
    user, silo = rng.integers(0, 30, 2000), rng.integers(0, 5, 2000)
    for k in (1, 2, 8):
        keep = bounding_flags(user, silo, 5, k=k)
        per_user = np.bincount(user[keep], minlength=30)
        assert (per_user == np.minimum(k, np.bincount(user, minlength=30))).all()
