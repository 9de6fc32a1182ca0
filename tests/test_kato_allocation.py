"""kato2024 allocations (spec/kato2024.md §2): the invariants of each kind, on fixtures built in code."""

from __future__ import annotations

import time

import numpy as np
import pytest

from dpfl.papers.kato2024.allocation import (
    _at_least_two,
    _fill_round_robin,
    _round_robin,
    allocate,
    allocate_flamby,
    allocate_records,
    histogram,
    local_test_split,
)

HEART = [199, 172, 30, 85]
TCGA = [248, 156, 164, 129, 129, 40]


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def creditcard_labels(seed: int = 0) -> np.ndarray:
    """≈ the undersampled Creditcard training labels (24,618 records, 418 frauds)."""
    y = np.r_[np.zeros(24200, dtype=np.int64), np.ones(418, dtype=np.int64)]
    return np.random.default_rng(seed).permutation(y)


def mnist_labels(per: int = 6000, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).permutation(np.repeat(np.arange(10), per))


# ---------------------------------------------------------------- §2.1 uniform

@pytest.mark.parametrize("n_users", [100, 1000, 7])
def test_uniform_is_balanced_over_users_and_silos(n_users):
    y = creditcard_labels()
    out = allocate_records("uniform", y, n_users, 5, rng())
    per_user = np.bincount(out["user"], minlength=n_users)
    n = len(y)
    assert set(per_user.tolist()) <= {n // n_users, -(-n // n_users)}
    assert per_user.sum() == n
    sizes = np.bincount(out["silo"], minlength=5)
    assert sizes.max() - sizes.min() <= 1
    out = allocate_records("uniform", mnist_labels(), n_users, 5, rng())
    assert (np.bincount(out["silo"]) == 12000).all()  # N divisible by S: equal sizes


# ---------------------------------------------------------------- §2.1 zipf

def test_zipf_user_counts_follow_the_power_law():
    n, n_users = 200_000, 20
    out = allocate_records("zipf", np.zeros(n, dtype=np.int64), n_users, 5, rng(4))
    observed = np.bincount(out["user"], minlength=n_users)
    w = np.arange(1, n_users + 1) ** -0.5
    expected = n * w / w.sum()
    chi2 = float(((observed - expected) ** 2 / expected).sum())
    assert chi2 < 43.8  # 99.9% quantile of χ² with 19 degrees of freedom


def test_zipf_silo_weights_per_user_over_a_random_permutation():
    n, n_users, n_silos = 400_000, 40, 5
    out = allocate_records("zipf", np.zeros(n, dtype=np.int64), n_users, n_silos, rng(5))
    h = histogram(out["user"], out["silo"], n_users, n_silos)
    w = np.arange(1, n_silos + 1) ** -2.0
    w /= w.sum()
    big = h.sum(axis=1) >= 4000  # users with enough records to see their weights
    assert big.sum() >= 10
    shares = np.sort(h[big] / h[big].sum(axis=1, keepdims=True), axis=1)[:, ::-1]
    assert np.abs(shares - w).max() < 0.03  # the most frequent silo takes ≈ 1/H = 0.68
    assert len(set(np.argmax(h, axis=1).tolist())) == n_silos  # the favourite silo varies between users


@pytest.mark.parametrize("kind", ["uniform", "zipf", "zipf-iid", "zipf-noniid"])
def test_same_seed_same_allocation_other_seed_differs(kind):
    y = mnist_labels(per=600)
    a, b, c = (allocate_records(kind, y, 50, 5, rng(s)) for s in (1, 1, 2))
    for key in ("user", "silo", "train_mask"):
        np.testing.assert_array_equal(a[key], b[key])
    assert (a["user"] != c["user"]).any() and (a["silo"] != c["silo"]).any()


def test_zipf_iid_is_zipf():
    y = creditcard_labels()
    a, b = allocate_records("zipf", y, 100, 5, rng(3)), allocate_records("zipf-iid", y, 100, 5, rng(3))
    np.testing.assert_array_equal(a["user"], b["user"])
    np.testing.assert_array_equal(a["silo"], b["silo"])


# ---------------------------------------------------------------- §2.1 zipf-noniid

def test_round_robin_fill():
    assert _round_robin(5, [10, 10]) == [3, 2]
    assert _round_robin(7, [2, 10]) == [2, 5]
    assert _round_robin(7, [0, 10]) == [0, 7]
    assert _round_robin(9, [2, 3]) == [2, 3]  # short: the caller falls back to other labels
    assert _round_robin(4, [1, 1, 5]) == [1, 1, 2]


@pytest.mark.parametrize("n_users,seed", [(50, 0), (100, 1), (1000, 2)])
def test_noniid_two_labels_per_user_except_documented_fallbacks(n_users, seed):
    y = mnist_labels(per=600, seed=seed)
    out = allocate_records("zipf-noniid", y, n_users, 5, rng(seed))
    user, chosen, fallback = out["user"], out["user_labels"], out["fallback"]
    assert chosen.shape == (n_users, 2) and (chosen[:, 0] != chosen[:, 1]).all()
    # every record is assigned, and users keep exactly their zipf counts (the same first draw)
    zipf_counts = np.bincount(np.random.default_rng(seed).choice(
        n_users, size=len(y), p=(w := np.arange(1, n_users + 1) ** -0.5) / w.sum()), minlength=n_users)
    np.testing.assert_array_equal(np.bincount(user, minlength=n_users), zipf_counts)
    labels_of = [set(np.unique(y[user == u]).tolist()) for u in range(n_users)]
    for u in range(n_users):
        if not fallback[u]:
            assert labels_of[u] <= set(chosen[u].tolist()), u
    # fallback condition: both chosen pools were empty after that user, so no later user holds those labels
    for u in np.flatnonzero(fallback):
        assert len(labels_of[u]) > 2 or not labels_of[u] <= set(chosen[u].tolist())
        for label in chosen[u]:
            assert not (user[y == label] > u).any(), (u, label)
    n_fallback = int(fallback.sum())
    assert n_fallback < 0.3 * n_users  # only users that come when their pools have run dry
    if n_users == 50:
        assert n_fallback >= 1  # the fixture is small enough to drain pools


def test_noniid_with_two_classes_uses_both():
    out = allocate_records("zipf-noniid", creditcard_labels(), 100, 5, rng())
    assert not out["fallback"].any()
    assert (np.bincount(out["user"], minlength=100) > 0).sum() > 90


def test_noniid_is_fast_for_mnist_with_10000_users():
    y = mnist_labels()
    start = time.perf_counter()
    out = allocate_records("zipf-noniid", y, 10_000, 5, rng())
    assert time.perf_counter() - start < 1.0
    assert len(out["user"]) == 60_000


# ---------------------------------------------------------------- §2.1 local test split

def test_local_test_split_stratified_above_500_only():
    y = np.r_[np.zeros(800), np.ones(200), np.zeros(400), np.ones(101), np.zeros(450), np.ones(50)].astype(int)
    silo = np.repeat([0, 1, 2], [1000, 501, 500])
    train = local_test_split(silo, y, 3, rng())
    assert (~train[silo == 0]).sum() == 100 and (~train[silo == 1]).sum() == 51 and train[silo == 2].all()
    for s in (0, 1):
        for label in (0, 1):
            sel = (silo == s) & (y == label)
            assert abs((~train[sel]).sum() - (~train[silo == s]).sum() * sel.sum() / (silo == s).sum()) < 1


@pytest.mark.parametrize("kind", ["uniform", "zipf", "zipf-noniid"])
@pytest.mark.parametrize("n_silos", [5, 50])
def test_allocations_split_off_local_test_sets(kind, n_silos):
    y = creditcard_labels()
    out = allocate_records(kind, y, 1000, n_silos, rng(7))
    for s in range(n_silos):
        sel = out["silo"] == s
        n_s, n_test = sel.sum(), (~out["train_mask"][sel]).sum()
        if n_s > 500:
            assert n_test == int(np.ceil(0.1 * n_s))
            for label in (0, 1):
                cls = sel & (y == label)
                assert abs((~out["train_mask"][cls]).sum() - n_test * cls.sum() / n_s) < 1  # stratified
        else:
            assert n_test == 0


def test_fig13_sanity_s_k13():
    y = creditcard_labels()
    z = allocate_records("zipf", y, 100, 5, rng(0))
    h = histogram(z["user"], z["silo"], 100, 5, z["train_mask"])
    active = h.sum(axis=1) > 0
    assert (h[active].max(axis=1) / h[active].sum(axis=1)).mean() > 0.5
    u = allocate_records("uniform", y, 100, 5, rng(0))
    totals = histogram(u["user"], u["silo"], 100, 5, u["train_mask"]).sum(axis=1)
    assert totals.std() / totals.mean() < 0.15
    assert totals.sum() == u["train_mask"].sum()


# ---------------------------------------------------------------- §2.2 HeartDisease, TcgaBrca

@pytest.mark.parametrize("sizes,min_records", [(HEART, 1), (TCGA, 2)])
@pytest.mark.parametrize("kind", ["uniform", "zipf"])
@pytest.mark.parametrize("n_users", [50, 200])
def test_flamby_sizes_fixed_and_tcga_pairs(sizes, min_records, kind, n_users):
    for seed in range(5):
        out = allocate_flamby(kind, sizes, n_users, rng(seed), min_records=min_records)
        np.testing.assert_array_equal(out["silo"], np.repeat(np.arange(len(sizes)), sizes))
        assert out["train_mask"].all() and out["user"].min() >= 0 and out["user"].max() < n_users
        h = histogram(out["user"], out["silo"], n_users, len(sizes))
        np.testing.assert_array_equal(h.sum(axis=0), sizes)
        assert h[h > 0].min() >= min_records
        if kind == "zipf":
            assert (h.sum(axis=1) >= min_records).all()  # the guaranteed records


def test_tcga_uniform_pairs_with_odd_leftover():
    out = allocate_flamby("uniform", TCGA, 200, rng(1), min_records=2)
    h = histogram(out["user"], out["silo"], 200, len(TCGA))
    for s, size in enumerate(TCGA):
        odd = (h[:, s] % 2 == 1).sum()
        assert odd == size % 2  # all pairs, plus one user holding the odd leftover (≥ 3 records)
        if size % 2:
            assert h[h[:, s] % 2 == 1, s][0] >= 3


def test_heart_uniform_is_iid_uniform():
    out = allocate_flamby("uniform", [50_000, 50_000], 10, rng(2))
    counts = np.bincount(out["user"], minlength=10)
    assert np.abs(counts / 100_000 - 0.1).max() < 0.005


@pytest.mark.parametrize("min_records", [1, 2])
def test_zipf_main_silo_share(min_records):
    n_users, n_silos = 30, 4
    out = allocate_flamby("zipf", [100_000] * n_silos, n_users, rng(3), min_records=min_records)
    h = histogram(out["user"], out["silo"], n_users, n_silos)
    early = h[:15]  # placed before any silo is full (later users are moved by the full-silo round robin)
    assert abs(early.max(axis=1).sum() / early.sum() - 0.8) < 0.005
    w = np.arange(1, n_users + 1) ** -0.5
    assert abs(h.sum(axis=1)[0] / h.sum() - w[0] / w.sum()) < 0.01  # zipf user counts


def test_full_silo_moves_to_the_next_silo_id():
    counts = np.array([[3, 0, 0], [0, 4, 0], [2, 0, 0]])
    placed = _fill_round_robin(counts, np.array([4, 4, 1]))
    np.testing.assert_array_equal(placed, [[3, 0, 0], [0, 4, 0], [1, 0, 1]])
    placed = _fill_round_robin(np.array([[0, 0, 5], [0, 0, 4]]), np.array([3, 3, 3]))
    np.testing.assert_array_equal(placed, [[2, 0, 3], [1, 3, 0]])  # wraps around to silo 0
    # within a real allocation: the small silo overflows, and totals still match the FLamby sizes
    out = allocate_flamby("zipf", [1000, 1000, 10], 20, rng(0), main_ratio=1.0)
    assert (np.bincount(out["silo"]) == [1000, 1000, 10]).all()


def test_tcga_at_least_two_rule():
    c = _at_least_two(np.array([1, 3, 0, 1]), rng())
    np.testing.assert_array_equal(c, [0, 5, 0, 0])
    c = _at_least_two(np.array([1, 1, 0]), rng())
    assert sorted(c.tolist()) == [0, 0, 2] and c[2] == 0
    np.testing.assert_array_equal(_at_least_two(np.array([2, 0, 3]), rng()), [2, 0, 3])


def test_tcga_repairs_keep_every_pair_at_two_or_more():
    repaired = 0
    for seed in range(20):
        for n_users in (300, 432):
            out = allocate_flamby("zipf", TCGA, n_users, rng(seed), min_records=2)
            h = histogram(out["user"], out["silo"], n_users, len(TCGA))
            assert h[h > 0].min() >= 2 and (h.sum(axis=0) == TCGA).all()
            repaired += int(out["n_repaired"])
    assert repaired > 0  # the repair path is exercised


def test_allocate_dispatches():
    a = allocate("zipf", n_users=50, rng=rng(1), silo_sizes=TCGA, min_records=2)
    b = allocate_flamby("zipf", TCGA, 50, rng(1), min_records=2)
    np.testing.assert_array_equal(a["user"], b["user"])
    y = creditcard_labels()
    a = allocate("zipf-noniid", n_users=100, n_silos=5, labels=y, rng=rng(1))
    b = allocate_records("zipf-noniid", y, 100, 5, rng(1))
    np.testing.assert_array_equal(a["user"], b["user"])


# ---------------------------------------------------------------- bad inputs

@pytest.mark.parametrize("call,message", [
    (lambda: allocate_records("dirichlet", [0, 1], 2, 1, rng()), "unknown kato2024 allocation kind"),
    (lambda: allocate_flamby("zipf-noniid", HEART, 2, rng()), "unknown kato2024 FLamby allocation kind"),
    (lambda: allocate_records("uniform", [0, 1, 1], 0, 1, rng()), "n_users must be a positive integer"),
    (lambda: allocate_flamby("uniform", HEART, 0, rng()), "n_users must be a positive integer"),
    (lambda: allocate_records("uniform", [0, 1, 1], 2, 0, rng()), "n_silos must be a positive integer"),
    (lambda: allocate_records("uniform", [0, 1, 1], 2, 4, rng()), "larger than the 3 records"),
    (lambda: allocate_flamby("zipf", TCGA, 433, rng(), min_records=2), "at most 432"),
    (lambda: allocate_flamby("zipf", HEART, 487, rng()), "at most 486"),
    # uniform: more users than records (or TCGA pairs) would leave users surely without data, labelled with all U
    (lambda: allocate_flamby("uniform", HEART, 487, rng()), "at most 486 users"),
    (lambda: allocate_flamby("uniform", TCGA, 5000, rng(), min_records=2), "at most 432 users"),
    (lambda: allocate_records("uniform", [0, 1, 1], 4, 1, rng()), "more than the 3 records.*at most 3 users"),
    (lambda: allocate_flamby("uniform", [5, 1], 3, rng(), min_records=2), "≥ 2 records"),
    (lambda: allocate_flamby("uniform", [5, 0], 3, rng()), "positive integers"),
    (lambda: allocate_flamby("uniform", HEART, 3, rng(), min_records=3), "min_records"),
    (lambda: allocate("uniform", n_users=3, rng=rng(), labels=[0, 1]), "silo_sizes"),
    (lambda: allocate("uniform", n_users=3, rng=rng(), silo_sizes=HEART, n_silos=5), "4 FLamby silo sizes"),
])
def test_bad_inputs_raise_clear_errors(call, message):
    with pytest.raises(ValueError, match=message):
        call()


# ---------------------------------------------------------------- instance names

def test_an_allocation_instance_name_round_trips_and_is_spelled_once():
    from dpfl.papers.kato2024.allocation_instances import AllocationInstance, parse_instance
    from dpfl.papers.kato2024.panels import seed_allocation
    from dpfl.papers.kato2024.protocol.layout import panel_allocation

    inst = AllocationInstance.parse("zipf-noniid-U1000-S5-seed3")
    assert inst == AllocationInstance("zipf-noniid", 1000, 5, 3) and inst.name == "zipf-noniid-U1000-S5-seed3"
    assert parse_instance(inst.name) == {"distribution": "zipf-noniid", "users": 1000, "silos": 5, "seed": 3}
    panel = {"id": "a", "distribution": "zipf", "users": 100, "silos": 5}
    assert seed_allocation({"allocation": "mnist"}, panel, 2) == "kato2024-mnist/zipf-U100-S5-seed2"
    assert panel_allocation({**panel, "allocation": "heart_disease"}, 0) == "kato2024-heart_disease/zipf-U100-S5-seed0"
    for bad in ("zipf-U0-S5-seed0", "dirichlet-U10-S5-seed0", "zipf-U10-S5"):
        with pytest.raises(ValueError, match="allocation instance"):
            AllocationInstance.parse(bad)
