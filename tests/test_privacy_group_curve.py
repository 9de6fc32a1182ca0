"""ε curves of a mechanism run in parallel on disjoint parts, for groups of k records (ULDP-GROUP-k accounting,
kato2024 §5)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpfl.privacy.group import group_epsilon_curve, group_epsilon_rdp
from dpfl.privacy.rdp import SampledGaussian, epsilon_curve, rdp_per_step


def test_one_part_and_k_one_is_the_record_level_curve():
    mech = SampledGaussian("poisson", q=0.05)
    got = group_epsilon_curve([(mech, 20)], 1.2, 10, 1, 1e-5)
    np.testing.assert_allclose(got, epsilon_curve(mech, 1.2, 20, 10, 1e-5), rtol=1e-12)


@pytest.mark.parametrize("k", [2, 3, 8, 20])
def test_last_round_matches_the_group_conversion(k):
    mech = SampledGaussian("poisson", q=0.02)
    steps, rounds, z = 30, 12, 1.5
    curve = group_epsilon_curve([(mech, steps)], z, rounds, k, 1e-5)
    ref = group_epsilon_rdp(lambda a: rounds * steps * rdp_per_step(mech, z, a), k, 1e-5)["epsilon"]
    assert curve[-1] == pytest.approx(ref, rel=1e-12)
    assert np.all(np.diff(curve) > 0)


def test_gaussian_by_hand():
    """q = 1 Gaussian, k = 2 (c = 1): group RDP at order a/2 is 3·t·a/(2z²); Balle conversion by hand."""
    z, t, delta = 4.0, 5, 1e-5
    curve = group_epsilon_curve([(SampledGaussian("none"), 1)], z, t, 2, delta)
    orders = 4 + np.arange(100) / 10.0
    orders = np.concatenate([orders, np.linspace(12, 128, 20)])
    orders = orders[orders >= 4]
    best = min(3 * t * a / (2 * z**2) + math.log((a / 2 - 1) / (a / 2))
               - (math.log(delta) + math.log(a / 2)) / (a / 2 - 1)
               for a in orders)
    assert curve[-1] == pytest.approx(best, rel=1e-9)


def test_parallel_composition_takes_the_worst_part_per_order():
    parts = [(SampledGaussian("poisson", q=0.1), 10), (SampledGaussian("poisson", q=0.02), 50)]
    both = group_epsilon_curve(parts, 1.1, 8, 4, 1e-5)
    each = [group_epsilon_curve([p], 1.1, 8, 4, 1e-5) for p in parts]
    assert np.all(both >= np.max(each, axis=0) - 1e-12)  # per-order max, then convert: never below a part
    authors = group_epsilon_curve(parts, 1.1, 8, 4, 1e-5, parallel="epsilon")  # K5: max over parts of ε
    np.testing.assert_allclose(authors, np.max(each, axis=0), rtol=1e-12)
    same = group_epsilon_curve([parts[0], parts[0]], 1.1, 8, 4, 1e-5)
    np.testing.assert_allclose(same, each[0], rtol=1e-12)  # identical disjoint parts cost one part
    with pytest.raises(ValueError, match="parallel"):
        group_epsilon_curve(parts, 1.1, 8, 4, 1e-5, parallel="sum")


@pytest.mark.parametrize("k, orders", [(5, "mironov"), (20, "authors")])
def test_kato2024_group_curves_equal_the_libraries_path_to_the_bit(monkeypatch, k, orders):
    """A GROUP-k cell's ε after every round, nominal and certified (kato2024 epsilon_curves), is the same with the
    vectorized series (dpfl.privacy.series) as with dp-accounting's and opacus's own loops."""
    from dpfl.papers.kato2024.methods import BY_ID, epsilon_curves
    from dpfl.privacy import rdp, series

    def curves():
        rdp._rdp_per_step_cached.cache_clear()
        return epsilon_curves(BY_ID["uldp_group_8"], 12, 5.0, 1e-5, silo_records=[40, 25, 0, 13], batch=4, epochs=2,
                              group_k=k, group_orders=orders)

    fast = curves()
    monkeypatch.setattr(series, "SAME_LIBRARIES", False)
    slow = curves()
    rdp._rdp_per_step_cached.cache_clear()
    for a, b in zip(fast, slow):
        assert np.array_equal(a.view(np.int64), b.view(np.int64))
