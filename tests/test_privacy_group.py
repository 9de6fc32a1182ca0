"""Unit tests of dpfl.privacy.group (kato2024 §5): RDP group conversion (Mironov Prop. 2) and the
normal-DP group conversion, including the paper's Fig 2 numbers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpfl.privacy.group import (
    NORMAL_DP_MAX_K,
    dp_group_conversion,
    group_epsilon_dp,
    group_epsilon_rdp,
    group_rdp_orders,
    largest_power_of_two_leq,
)
from dpfl.privacy.rdp import STANDARD_ORDERS, epsilon_from_rdp, poisson_gaussian_rdp

ORDERS = np.asarray(STANDARD_ORDERS)


def gaussian_rdp_fn(steps: float, z: float):
    """Synthetic record-level RDP: T steps of the plain Gaussian, ρ(α) = T·α/(2z²)."""
    return lambda orders: steps * np.asarray(orders, dtype=float) / (2 * z * z)


def balle_terms(orders, values, delta):
    """Balle et al. (2020) per order, written out: RDP(α) + ln((α−1)/α) − (ln δ + ln α)/(α−1)."""
    return [r + math.log((a - 1) / a) - (math.log(delta) + math.log(a)) / (a - 1) for a, r in zip(orders, values)]


def hand_group_epsilon(steps, z, k_pow2, delta, include_low=False):
    """Mironov Prop. 2 + Balle conversion by hand for the synthetic Gaussian RDP."""
    c = round(math.log2(k_pow2))
    record = [2 * k_pow2 + j / 10 for j in range(100)]
    step = (64 * k_pow2 - (k_pow2 + 10)) / 19
    record += [(k_pow2 + 10) + i * step for i in range(20)]
    if not include_low:
        record = [a for a in record if a >= 2 * k_pow2]
    pairs = []
    for a in record:
        group_order = a / k_pow2
        group_rdp = 3**c * steps * a / (2 * z * z)
        if group_order > 1.01:
            eps = balle_terms([group_order], [group_rdp], delta)[0]
            pairs.append((eps, a))
    eps, a = min(pairs)
    return max(eps, 0.0), a


# --------------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "k,want", [(1, 1), (2, 2), (3, 2), (4, 4), (5, 4), (7, 4), (8, 8), (31, 16), (32, 32), (63, 32), (64, 64),
               (65, 64), (1000, 512), (1024, 1024)]
)
def test_largest_power_of_two_leq(k, want):
    assert largest_power_of_two_leq(k) == want


@pytest.mark.parametrize("k", [0, -1, -8])
def test_largest_power_of_two_rejects_nonpositive(k):
    with pytest.raises(ValueError):
        largest_power_of_two_leq(k)


@pytest.mark.parametrize("kp", [2, 4, 8, 16, 32, 64])
def test_group_rdp_orders_default_keeps_only_mironov_orders(kp):
    full = group_rdp_orders(kp, "authors")
    np.testing.assert_allclose(full[:100], 2 * kp + np.arange(100) / 10.0, rtol=1e-15)
    np.testing.assert_allclose(full[100:], np.linspace(kp + 10, 64 * kp, 20), rtol=1e-15)
    assert full[100] == kp + 10 and full[-1] == 64 * kp
    default = group_rdp_orders(kp)
    np.testing.assert_array_equal(default, group_rdp_orders(kp, "mironov"))
    assert np.all(default >= 2 * kp)
    np.testing.assert_array_equal(default, full[full >= 2 * kp])


@pytest.mark.parametrize("kp", [16, 32, 64, 128])
def test_group_rdp_orders_authors_set_adds_low_order_for_large_k(kp):
    full, default = group_rdp_orders(kp, "authors"), group_rdp_orders(kp)
    assert kp + 10 < 2 * kp
    assert kp + 10 in full and kp + 10 not in default
    assert len(full) == 120 and len(default) == 119
    # only k'+10 is below 2k'
    assert np.sum(full < 2 * kp) == 1


@pytest.mark.parametrize("kp", [2, 4, 8])
def test_group_rdp_orders_small_k_authors_set_changes_nothing(kp):
    np.testing.assert_array_equal(group_rdp_orders(kp, "authors"), group_rdp_orders(kp))
    assert len(group_rdp_orders(kp)) == 120


def test_group_rdp_orders_bad_arguments():
    with pytest.raises(ValueError):
        group_rdp_orders(4, "paper")
    with pytest.raises(ValueError):
        group_rdp_orders(4, "")
    for not_pow2 in (3, 6, 12, 48):
        with pytest.raises(ValueError):
            group_rdp_orders(not_pow2)


def test_group_epsilon_rdp_unknown_order_set_raises():
    with pytest.raises(ValueError, match="orders must be one of mironov, authors"):
        group_epsilon_rdp(gaussian_rdp_fn(10, 3.0), 4, 1e-5, orders="authors-code")


# --------------------------------------------------------------------------------------------------
# RDP group conversion
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kp", [2, 4, 8, 16, 32])
@pytest.mark.parametrize("orders", ["mironov", "authors"])
def test_group_epsilon_rdp_matches_hand_computation(kp, orders):
    steps, z, delta = 50, 20.0, 1e-5
    got = group_epsilon_rdp(gaussian_rdp_fn(steps, z), kp, delta, orders)
    eps, record_order = hand_group_epsilon(steps, z, kp, delta, include_low=(orders == "authors"))
    assert got["epsilon"] == pytest.approx(eps, rel=1e-12)
    assert got["k_effective"] == kp
    assert got["record_order"] == pytest.approx(record_order, rel=1e-12)
    assert got["group_order"] == pytest.approx(record_order / kp, rel=1e-12)


def test_group_epsilon_rdp_hand_example_where_the_low_order_wins():
    """k' = 16, large RDP: the minimum is at the lowest record order; the authors' set uses a = 26 < 32."""
    steps, z, delta = 1000, 2.0, 1e-5
    fn = gaussian_rdp_fn(steps, z)
    default = group_epsilon_rdp(fn, 16, delta)
    authors = group_epsilon_rdp(fn, 16, delta, "authors")
    assert default["record_order"] == pytest.approx(32.0)
    assert authors["record_order"] == pytest.approx(26.0)
    # ε at record order 26: group order 26/16, group RDP 3^4 · 1000 · 26 / 8
    a = 26 / 16
    want = 81 * 1000 * 26 / 8 + math.log((a - 1) / a) - (math.log(delta) + math.log(a)) / (a - 1)
    assert authors["epsilon"] == pytest.approx(want, rel=1e-12)
    assert authors["epsilon"] < default["epsilon"]


@pytest.mark.parametrize("delta", [1e-5, 1e-8])
def test_group_epsilon_rdp_k1_is_plain_conversion(delta):
    fn = gaussian_rdp_fn(30, 4.0)
    got = group_epsilon_rdp(fn, 1, delta)
    eps, order = epsilon_from_rdp(ORDERS, fn(ORDERS), delta)
    assert got == {"epsilon": float(eps), "k_effective": 1, "group_order": float(order), "record_order": float(order)}
    # and by hand
    assert got["epsilon"] == pytest.approx(min(balle_terms(STANDARD_ORDERS, fn(ORDERS), delta)), rel=1e-12)
    # the order set does not matter for k = 1
    assert group_epsilon_rdp(fn, 1, delta, "authors") == got


@pytest.mark.parametrize("k,kp", [(3, 2), (5, 4), (6, 4), (7, 4), (15, 8), (33, 32), (63, 32), (100, 64)])
def test_group_epsilon_rdp_rounds_k_down_to_power_of_two(k, kp):
    fn = gaussian_rdp_fn(20, 30.0)
    got, ref = group_epsilon_rdp(fn, k, 1e-5), group_epsilon_rdp(fn, kp, 1e-5)
    assert got == ref
    assert got["k_effective"] == kp


@pytest.mark.parametrize("orders", ["mironov", "authors"])
def test_group_epsilon_rdp_monotone_in_k_and_delta(orders):
    fn = gaussian_rdp_fn(100, 10.0)
    eps_k = [group_epsilon_rdp(fn, 2**c, 1e-5, orders)["epsilon"] for c in range(7)]
    assert all(a < b for a, b in zip(eps_k, eps_k[1:]))
    for k in (1, 4, 32):
        eps_d = [group_epsilon_rdp(fn, k, d, orders)["epsilon"] for d in (1e-10, 1e-7, 1e-5, 1e-3, 1e-1)]
        assert all(a >= b for a, b in zip(eps_d, eps_d[1:]))
        assert eps_d[0] > eps_d[-1]


def test_group_epsilon_rdp_mironov_never_below_the_authors_set():
    fn = gaussian_rdp_fn(5000, 3.0)
    for c in range(1, 8):
        k = 2**c
        assert group_epsilon_rdp(fn, k, 1e-5)["epsilon"] >= group_epsilon_rdp(fn, k, 1e-5, "authors")["epsilon"]


def test_group_epsilon_rdp_evaluates_rdp_only_at_group_orders():
    seen = []

    def fn(orders):
        seen.append(np.array(orders, dtype=float))
        return np.asarray(orders, dtype=float) / 50.0

    group_epsilon_rdp(fn, 8, 1e-5)
    assert len(seen) == 1
    np.testing.assert_array_equal(seen[0], group_rdp_orders(8))


# --------------------------------------------------------------------------------------------------
# normal-DP group conversion
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("eps,delta,k,want", [
    (0.5, 1e-5, 1, (0.5, 1e-5)),
    (0.5, 1e-5, 3, (1.5, 3 * math.e * 1e-5)),
    (1.0, 1e-6, 2, (2.0, 2 * math.e * 1e-6)),
    (0.1, 1e-3, 10, (1.0, 10 * math.exp(0.9) * 1e-3)),
    (0.0, 1e-4, 5, (0.0, 5e-4)),
])
def test_dp_group_conversion_hand_values(eps, delta, k, want):
    got = dp_group_conversion(eps, delta, k)
    assert got[0] == pytest.approx(want[0], rel=1e-15)
    assert got[1] == pytest.approx(want[1], rel=1e-14)


@pytest.fixture(scope="module")
def fig2_standard_rdp():
    """kato2024 Fig 2 record mechanism at the standard orders: 100,000 steps of PSG(q = 0.01, σ = 5)."""
    return 100_000 * poisson_gaussian_rdp(0.01, 5.0)


def test_normal_dp_constant():
    assert NORMAL_DP_MAX_K == 62 == int(max(STANDARD_ORDERS)) - 1


@pytest.mark.parametrize("k", [2, 3, 5, 9, 17, 33, 45, 57, 61, 62])
def test_group_epsilon_dp_solves_the_delta_equation(fig2_standard_rdp, k):
    delta = 1e-5
    res = group_epsilon_dp(fig2_standard_rdp, k, delta)
    assert res["converged"]
    assert res["k_effective"] == k
    log_dp = res["log_delta_prime"]
    eps_record = float(epsilon_from_rdp(ORDERS, fig2_standard_rdp, log_delta=log_dp)[0])
    log_group_delta = math.log(k) + (k - 1) * eps_record + log_dp
    assert abs(math.expm1(log_group_delta - math.log(delta))) < 1e-3
    assert res["epsilon"] == pytest.approx(k * eps_record, rel=1e-12)
    assert log_dp < math.log(delta)
    if log_dp > -700:
        assert res["delta_prime"] == pytest.approx(math.exp(log_dp), rel=1e-12)
        e, d = dp_group_conversion(eps_record, res["delta_prime"], k)
        assert e == pytest.approx(res["epsilon"], rel=1e-12)
        assert d == pytest.approx(delta, rel=1e-3)
    else:
        assert res["delta_prime"] == 0.0


def test_group_epsilon_dp_synthetic_gaussian_solution():
    """Plain Gaussian RDP: check the δ' equation with a hand-written Balle conversion."""
    rdp_std = 10 * ORDERS / (2 * 3.0**2)
    k, delta = 4, 1e-6
    res = group_epsilon_dp(rdp_std, k, delta)
    log_dp = res["log_delta_prime"]
    terms = [r + math.log((a - 1) / a) - (log_dp + math.log(a)) / (a - 1) for a, r in zip(STANDARD_ORDERS, rdp_std)]
    eps_record = max(min(terms), 0.0)
    assert res["epsilon"] == pytest.approx(k * eps_record, rel=1e-10)
    assert k * math.exp((k - 1) * eps_record + log_dp) == pytest.approx(delta, rel=1e-3)


def test_group_epsilon_dp_k1_is_plain(fig2_standard_rdp):
    res = group_epsilon_dp(fig2_standard_rdp, 1, 1e-5)
    eps, _ = epsilon_from_rdp(ORDERS, fig2_standard_rdp, 1e-5)
    assert res["epsilon"] == float(eps)
    assert res["k_effective"] == 1 and res["delta_prime"] == 1e-5 and res["converged"]


@pytest.mark.parametrize("k", [63, 64, 100])
def test_group_epsilon_dp_clamps_large_k(fig2_standard_rdp, k):
    res = group_epsilon_dp(fig2_standard_rdp, k, 1e-5)
    ref = group_epsilon_dp(fig2_standard_rdp, 62, 1e-5)
    assert res["k_effective"] == 62
    assert res["epsilon"] == ref["epsilon"]
    assert res["log_delta_prime"] == ref["log_delta_prime"]


def test_group_epsilon_dp_monotone_in_k(fig2_standard_rdp):
    eps = [group_epsilon_dp(fig2_standard_rdp, k, 1e-5)["epsilon"] for k in range(1, 42)]
    assert all(a < b for a, b in zip(eps, eps[1:]))


def test_group_epsilon_dp_monotone_in_delta(fig2_standard_rdp):
    eps = [group_epsilon_dp(fig2_standard_rdp, 9, d)["epsilon"] for d in (1e-9, 1e-7, 1e-5, 1e-3)]
    assert all(a > b for a, b in zip(eps, eps[1:]))


def test_group_epsilon_dp_reports_nonconvergence():
    res = group_epsilon_dp(10 * ORDERS / 18.0, 5, 1e-5, max_iter=3)
    assert res["iterations"] == 3
    assert not res["converged"]


# --------------------------------------------------------------------------------------------------
# kato2024 Fig 2 (paper numbers)
# --------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def fig2_rdp_conversion():
    """RDP conversion of the Fig 2 record mechanism at k = 1..64 (powers of 2), both order sets."""
    cache = {}

    def record_rdp(orders):
        key = tuple(np.asarray(orders, dtype=float))
        if key not in cache:
            cache[key] = 100_000 * poisson_gaussian_rdp(0.01, 5.0, key)
        return cache[key]

    ks = [1, 2, 4, 8, 16, 32, 64]
    return {
        orders: {k: group_epsilon_rdp(record_rdp, k, 1e-5, orders) for k in ks}
        for orders in ("authors", "mironov")
    }


@pytest.mark.parametrize("k,paper", [(32, 2100.0), (64, 11400.0)])
def test_kato2024_fig2_paper_numbers_authors_code(fig2_rdp_conversion, k, paper):
    got = fig2_rdp_conversion["authors"][k]["epsilon"]
    assert got == pytest.approx(paper, rel=0.05)
    # the paper's value comes from the low order k'+10 < 2k' (the authors' order set, K4)
    assert fig2_rdp_conversion["authors"][k]["record_order"] == pytest.approx(k + 10)


def test_kato2024_fig2_default_is_larger_for_large_k(fig2_rdp_conversion):
    authors, default = fig2_rdp_conversion["authors"], fig2_rdp_conversion["mironov"]
    for k in (16, 32, 64):
        assert default[k]["epsilon"] > 1.05 * authors[k]["epsilon"]
        assert default[k]["record_order"] >= 2 * k
    for k in (1, 2, 4, 8):  # k'+10 ≥ 2k': nothing removed
        assert default[k]["epsilon"] == authors[k]["epsilon"]


def test_kato2024_fig2_k1_and_monotone(fig2_rdp_conversion, fig2_standard_rdp):
    for orders in ("authors", "mironov"):
        eps = [fig2_rdp_conversion[orders][k]["epsilon"] for k in (1, 2, 4, 8, 16, 32, 64)]
        assert all(a < b for a, b in zip(eps, eps[1:]))
    eps1 = fig2_rdp_conversion["mironov"][1]["epsilon"]
    assert eps1 == pytest.approx(float(epsilon_from_rdp(ORDERS, fig2_standard_rdp, 1e-5)[0]), rel=1e-12)
    assert 1.0 < eps1 < 5.0


def test_kato2024_fig2_rdp_vs_normal_dp(fig2_rdp_conversion, fig2_standard_rdp):
    """C-K2b (as a sanity check): at small k the RDP conversion is looser than normal DP, by < 3.6×."""
    for k in (2, 4, 8, 16, 32):
        rdp_eps = fig2_rdp_conversion["authors"][k]["epsilon"]
        dp_eps = group_epsilon_dp(fig2_standard_rdp, k, 1e-5)["epsilon"]
        assert rdp_eps / dp_eps < 3.6
