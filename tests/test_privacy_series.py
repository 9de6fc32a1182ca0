"""dpfl.privacy.series gives the very bits of dp-accounting's RdpAccountant (Poisson-subsampled Gaussian) and opacus's
compute_rdp at fractional orders, which rdp_per_step combined before it existed: compared value by value (NaN where
opacus raises, +inf where dp-accounting's series does not converge), on the orders of the group conversion too; and
dpfl.privacy.series_wor those of dp-accounting's sampled-without-replacement Gaussian."""

from __future__ import annotations

import math
import random
import warnings

import dp_accounting
import numpy as np
import pytest
from dp_accounting.rdp import rdp_privacy_accountant as dpa

from dpfl.privacy import rdp, series, series_wor
from dpfl.privacy.group import group_rdp_orders
from dpfl.privacy.rdp import STANDARD_ORDERS, SampledGaussian

opacus_rdp = pytest.importorskip("opacus.accountants.analysis.rdp")


def library_bound(q, z, orders):
    acc = dpa.RdpAccountant([float(a) for a in orders], dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE)
    acc.compose(dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(z)), 1)
    return np.asarray(acc.rdp, dtype=float)


def library_signed(q, z, orders):
    out = []
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        for a in orders:
            try:
                out.append(float(opacus_rdp.compute_rdp(q=q, noise_multiplier=z, steps=1, orders=[float(a)])[0]))
            except (OverflowError, ValueError, ZeroDivisionError):
                out.append(np.nan)
    return np.asarray(out, dtype=float)


def same_bits(a, b):
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return a.shape == b.shape and bool(np.all((a.view(np.int64) == b.view(np.int64)) | (np.isnan(a) & np.isnan(b))))


def fractional(orders):
    orders = np.asarray(orders, dtype=float)
    return orders[[not float(a).is_integer() for a in orders]]


CASES = [  # (q, z, orders): the standard orders, and the group conversion's (kato2024 GROUP-k: z = 5, q = 1/⌈N/B⌉)
    *[(q, z, STANDARD_ORDERS) for q, z in [(0.001, 5.0), (0.1, 0.8), (0.5, 1.0), (1 / 3, 20.0), (0.03, 0.5)]],
    *[(q, 5.0, group_rdp_orders(kp)) for q in (0.5, 1 / 7, 1 / 70) for kp in (2, 8)],  # the authors' set is the same
    (1 / 27, 5.0, group_rdp_orders(32, "authors")),
]


@pytest.mark.parametrize("q, z, orders", CASES)
def test_bound_is_dp_accountings_to_the_bit(q, z, orders):
    assert same_bits(series.dpa_poisson_rdp(q, z, orders), library_bound(q, z, orders))


@pytest.mark.parametrize("q, z, orders", CASES)
def test_signed_series_is_opacuss_to_the_bit(q, z, orders):
    frac = fractional(orders)
    assert same_bits(series.opacus_poisson_rdp(q, z, frac), library_signed(q, z, frac))


def test_cases_cover_the_failures_the_libraries_signal():
    """dp-accounting's +inf (no convergence in 1000 terms) and opacus's NaN (binomial coefficients overflow) occur
    in the cases compared (opacus's at orders above ~1030; its own loop runs ~2000 terms there)."""
    assert np.isinf(series.dpa_poisson_rdp(0.5, 1.0, STANDARD_ORDERS)).any()
    orders = [1029.4, 1100.5, 1500.3, 2048.6, 2600.1]
    got = series.opacus_poisson_rdp(1 / 70, 5.0, orders)
    assert np.isnan(got).all() and same_bits(got, library_signed(1 / 70, 5.0, orders))
    assert same_bits(series.dpa_poisson_rdp(1 / 70, 5.0, orders + [1030.0, 4096.0]),
                     library_bound(1 / 70, 5.0, orders + [1030.0, 4096.0]))


def test_large_integer_order_runs_its_long_series_to_the_bit():
    """dp-accounting sums alpha + 1 terms at an integer order (64k' in the group conversion: 2^13 for k' = 128)."""
    assert same_bits(series.dpa_poisson_rdp(1 / 50, 5.0, [8192.0]), library_bound(1 / 50, 5.0, [8192.0]))


def test_rdp_per_step_is_unchanged_by_the_replica(monkeypatch):
    """rdp_per_step with the replica (installed versions = the pinned ones) equals its library path."""
    assert series.SAME_LIBRARIES
    orders = tuple(group_rdp_orders(16)) + tuple(STANDARD_ORDERS[:20])
    mech = SampledGaussian("poisson", q=1 / 9)
    rdp._rdp_per_step_cached.cache_clear()
    fast = rdp.rdp_per_step(mech, 5.0, orders)
    monkeypatch.setattr(series, "SAME_LIBRARIES", False)
    rdp._rdp_per_step_cached.cache_clear()
    slow = rdp.rdp_per_step(mech, 5.0, orders)
    rdp._rdp_per_step_cached.cache_clear()
    assert same_bits(fast, slow)


def test_scalar_helpers_are_the_libraries():
    values = [-np.inf, np.inf, np.nan, 0.0, -0.0, 1e-300, -3.5, 2.0, 2.0 + 1e-15, 700.0, 1e6, -1e6]
    for x in values:
        for y in values:
            assert same_bits(series.log_add(x, y), dpa._log_add(x, y))
            assert same_bits(series.log_add(x, y), opacus_rdp._log_add(x, y))
            try:
                want = opacus_rdp._log_sub(x, y)
            except ValueError:
                with pytest.raises(ValueError):
                    series.log_sub(x, y)
            else:
                assert same_bits(series.log_sub(x, y), want)


def scalar_fold(terms, start=-np.inf):
    cur = start
    for x in terms:
        cur = dpa._log_add(cur, float(x))
    return cur


@pytest.mark.parametrize("seed", range(6))
def test_fold_is_the_scalar_loop(seed):
    """Sequences where the shortcut applies (steep rises and falls, sums near 0 where an ulp is tiny, magnitudes
    where it is large) and where it must not (plateaus), with and without a start value, +-inf and NaN terms."""
    rng = np.random.default_rng(seed)
    n = 3000
    i = np.arange(n)
    shapes = [
        -0.5 * (i - 1200.0) ** 2 / 50.0,  # a peak
        np.cumsum(rng.normal(0, 3, n)),  # a random walk: many steps near the sum
        1e-3 * rng.standard_normal(n) - 40.0,  # a plateau far below 0: sums near 0
        (i * i - i) / 50.0 - 7.0 * i,  # the integer-order series' shape
        1e7 + rng.standard_normal(n) * 100,  # large magnitudes
        np.where(rng.random(n) < 0.01, np.inf, -rng.random(n) * 80),  # +inf terms (sum inf, then NaN)
        np.where(rng.random(n) < 0.01, np.nan, rng.random(n) * 10),  # NaN terms (Python's min/max semantics)
        np.where(rng.random(n) < 0.2, -np.inf, -0.01 * i),  # -inf terms
    ]
    for s in shapes:
        for start in (-np.inf, 0.0, float(s[0]) + 5.0, 1e-12):
            assert same_bits(series.fold_log_add(s, start), scalar_fold(s, start))
            assert same_bits(series.fold_log_add(s[:50], start), scalar_fold(s[:50], start))


@pytest.mark.parametrize("seed", range(4))
def test_signed_fold_is_the_scalar_loop(seed):
    """opacus's alternating tail: log_add and log_sub by the coefficient's sign, including the subtractions that
    raise (ValueError) and those far below the sum that expm1 cannot take (OverflowError: the sum is kept)."""
    rng = random.Random(seed)
    for _ in range(200):
        n = rng.choice([5, 40, 400])
        cur = rng.choice([-np.inf, 0.3, 50.0, 800.0])
        s = np.array([cur - rng.choice([0.01, 1.0, 20.0, 60.0, 700.0, 720.0, 5000.0]) * rng.random() - 0.5
                      for _ in range(n)])
        if rng.random() < 0.3:
            s[rng.randrange(n)] = cur + 1.0  # a subtraction of more than the sum: ValueError
        add = np.array([rng.random() < 0.5 for _ in range(n)])
        want, raised = cur, -1
        for k, (x, a) in enumerate(zip(s.tolist(), add.tolist())):
            try:
                want = opacus_rdp._log_add(want, x) if a else opacus_rdp._log_sub(want, x)
            except ValueError:
                raised = k
                break
        got, bad = series._fold_signed(s, add, cur)
        assert bad == raised
        if raised < 0:
            assert same_bits(got, want)


def test_versions_outside_the_pins_fall_back_to_the_libraries(monkeypatch):
    """Another dp-accounting or opacus may sum differently: rdp_per_step then calls them (slow, but theirs)."""
    calls = []
    monkeypatch.setattr(series, "SAME_LIBRARIES", False)
    monkeypatch.setattr(series, "dpa_poisson_rdp", lambda *a: calls.append(a))
    rdp._rdp_per_step_cached.cache_clear()
    got = rdp.rdp_per_step(SampledGaussian("poisson", q=0.25), 2.0, [2.5, 3.0])
    rdp._rdp_per_step_cached.cache_clear()
    assert not calls and same_bits(got[1:], library_bound(0.25, 2.0, [3.0]))
    assert math.isfinite(got[0])


def test_arguments_outside_the_replica_raise():
    with pytest.raises(ValueError):
        series.dpa_poisson_rdp(1.0, 1.0, [2.5])
    with pytest.raises(ValueError):
        series.opacus_poisson_rdp(0.1, 0.0, [2.5])
    with pytest.raises(ValueError):
        series.opacus_poisson_rdp(0.1, 1.0, [3.0])


# ---- dp-accounting's sampled-without-replacement Gaussian (REPLACE_ONE): series_wor.dpa_wor_rdp ----------------


def library_wor(population, batch, z, orders):
    acc = dpa.RdpAccountant([float(a) for a in orders], dp_accounting.NeighboringRelation.REPLACE_ONE)
    acc.compose(dp_accounting.SampledWithoutReplacementDpEvent(population, batch, dp_accounting.GaussianDpEvent(z)), 1)
    return np.asarray(acc.rdp, dtype=float)


WOR_CASES = [  # (population, batch, z): q from 1e-6 to 0.9 (lowy2023: batch K of n records, or single records)
    (10**6, 1, 0.8), (500, 1, 1.3), (40, 4, 0.05), (10, 9, 3.0), (100, 50, 200.0), (7, 3, 0.5), (3, 1, 1e4),
]
#: fractional orders below 2 (interpolated with order 1), around the exact/Stirling switch at 256, large orders, inf
WOR_ORDERS = [1.01, 1.5, 2.0, 2.5, 3.0, 17.25, 128.0, 255.5, 256.0, 256.5, 257.0, 1000.3, 4096.0, np.inf]


@pytest.mark.parametrize("population, batch, z", WOR_CASES)
def test_wor_bound_is_dp_accountings_to_the_bit(population, batch, z):
    series_wor._WOR_DELTAS.clear()  # the forward differences computed afresh, then reused (both must give the bits)
    for _ in range(2):
        got = series_wor.dpa_wor_rdp(batch / population, z, STANDARD_ORDERS)
        assert same_bits(got, library_wor(population, batch, z, STANDARD_ORDERS))


@pytest.mark.parametrize("population, batch, z", [(500, 1, 1.3), (10, 9, 0.05), (100, 50, 200.0)])
def test_wor_bound_at_large_fractional_and_infinite_orders(population, batch, z):
    got = series_wor.dpa_wor_rdp(batch / population, z, WOR_ORDERS)
    assert same_bits(got, library_wor(population, batch, z, WOR_ORDERS))
    assert np.isinf(got[-1]) and np.isfinite(got[:-1]).all()


def test_wor_forward_differences_are_the_librarys():
    """Computed once per sigma for the largest order and cut: the k-th difference does not depend on how many the
    library's per-order call asks for."""
    for z in (0.05, 1.0, 30.0):
        series_wor._WOR_DELTAS.clear()
        big = series_wor._wor_deltas(z, 200)
        for n in (2, 11, 63, 200):
            want, _ = dpa._get_forward_diffs(lambda x, z=z: x * 1.0 * (x + 1) / (2.0 * z**2), n)
            assert same_bits(series_wor._wor_deltas(z, n), want) and same_bits(big[:n + 2], want)


def test_wor_edge_cases_are_the_librarys(monkeypatch):
    """q = 1 (the whole population), order 1 (NaN in the library), a numpy-scalar sigma, and numpy builds whose scalar
    exp/log1p differ from their array loop (the library's own function is then used)."""
    orders = [1.0, 1.5, 2.0, 7.5, 12.0]
    with np.errstate(all="ignore"):
        assert same_bits(series_wor.dpa_wor_rdp(1.0, 2.0, orders), library_wor(5, 5, 2.0, orders))
        assert same_bits(series_wor.dpa_wor_rdp(0.25, 2.0, orders), library_wor(8, 2, 2.0, orders))
        assert same_bits(series_wor.dpa_wor_rdp(0.25, np.float64(0.7), orders),
                         library_wor(8, 2, np.float64(0.7), orders))
        monkeypatch.setattr(series_wor, "_NUMPY_SCALAR_PROBE", [False])
        monkeypatch.setattr(series_wor, "_dpa_wor_log_a_ints", lambda *a: pytest.fail("replica used"))
        assert same_bits(series_wor.dpa_wor_rdp(0.25, 2.0, orders), library_wor(8, 2, 2.0, orders))


def test_rdp_per_step_without_replacement_is_unchanged_by_the_replica(monkeypatch):
    assert series.SAME_LIBRARIES and series_wor._numpy_scalar_is_array()
    mech = SampledGaussian("without_replacement", population=60, batch_size=6)
    orders = tuple(STANDARD_ORDERS[::3]) + (300.0, 300.5)
    rdp._rdp_per_step_cached.cache_clear()
    fast = rdp.rdp_per_step(mech, 0.9, orders)
    monkeypatch.setattr(series, "SAME_LIBRARIES", False)
    monkeypatch.setattr(series_wor, "dpa_wor_rdp", lambda *a: pytest.fail("replica used"))
    rdp._rdp_per_step_cached.cache_clear()
    slow = rdp.rdp_per_step(mech, 0.9, orders)
    rdp._rdp_per_step_cached.cache_clear()
    assert same_bits(fast, slow)
