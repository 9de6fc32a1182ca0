"""Unit tests of dpfl.privacy.rdp (spec/README.md §4): RDP of (sub)sampled Gaussians, RDP -> (ε, δ),
ε curves over rounds and noise calibration.

References used here are independent of the module: a hand implementation of the integer-order formula,
an exact (mpmath) evaluation of the Rényi divergence integral, dp-accounting's RdpAccountant /
compute_epsilon, and opacus' compute_rdp.
"""

from __future__ import annotations

import importlib
import math

import numpy as np
import pytest

import dp_accounting
from dp_accounting.rdp import rdp_privacy_accountant as dpa_rdp

from dpfl.privacy import rdp
from dpfl.privacy.rdp import (
    STANDARD_ORDERS,
    SampledGaussian,
    calibrate_noise_multiplier,
    epsilon,
    epsilon_after_steps,
    epsilon_curve,
    epsilon_from_rdp,
    poisson_gaussian_rdp,
    rdp_per_step,
)

ORDERS = np.asarray(STANDARD_ORDERS, dtype=float)
INTEGER_ORDERS = [2, 3, 5, 8, 12, 20, 32, 63]
# (q, z) pairs: small and large sampling rates, low and high noise.
QZ = [(0.01, 1.0), (0.001, 5.0), (0.1, 0.8), (0.5, 2.0), (0.03, 0.5), (0.2, 1.5), (0.01, 5.0)]


# --------------------------------------------------------------------------------------------------
# independent references
# --------------------------------------------------------------------------------------------------


def _logsumexp(xs):
    m = max(xs)
    if m == -math.inf:
        return -math.inf
    return m + math.log(sum(math.exp(x - m) for x in xs))


def hand_rdp_integer(q: float, z: float, alpha: int) -> float:
    """RDP(α) = log(Σ_{k=0..α} C(α,k)(1−q)^{α−k} q^k exp((k²−k)/(2z²))) / (α−1), integer α.

    Evaluated without cancellation: since Σ_k C(α,k)(1−q)^{α−k}q^k = 1 and the k = 0, 1 terms have a zero
    exponent, the sum equals 1 + S with S = Σ_{k≥2} C(α,k)(1−q)^{α−k}q^k·expm1((k²−k)/(2z²)) > 0, so
    RDP = log1p(S)/(α−1), with S summed in log space (math.lgamma + log-sum-exp).
    """
    logs = []
    for k in range(2, alpha + 1):
        x = (k * k - k) / (2 * z * z)
        log_expm1 = x + math.log(-math.expm1(-x))  # log(e^x − 1), stable for large x
        log_binom = math.lgamma(alpha + 1) - math.lgamma(k + 1) - math.lgamma(alpha - k + 1)
        logs.append(log_binom + (alpha - k) * math.log1p(-q) + k * math.log(q) + log_expm1)
    log_s = _logsumexp(logs)
    log1p_s = log_s + math.log1p(math.exp(-log_s)) if log_s > 0 else math.log1p(math.exp(log_s))
    return log1p_s / (alpha - 1)


def mpmath_rdp_integer(q: float, z: float, alpha: int, dps: int = 60) -> float:
    """The same formula, literally, in 60-digit arithmetic."""
    mp = importlib.import_module("mpmath")
    with mp.workdps(dps):
        q, z = mp.mpf(q), mp.mpf(z)
        s = mp.fsum(
            mp.binomial(alpha, k) * (1 - q) ** (alpha - k) * q**k * mp.exp(mp.mpf(k * k - k) / (2 * z * z))
            for k in range(alpha + 1)
        )
        return float(mp.log(s) / (alpha - 1))


def mpmath_rdp_exact(q: float, z: float, alpha: float, dps: int = 30) -> float:
    """Exact RDP of the Poisson-subsampled Gaussian at any order α > 1 (Mironov, Talwar & Zhang 2019):
    log(A_α)/(α−1), A_α = E_{x~N(0,z²)}[((1−q) + q·exp((2x−1)/(2z²)))^α], by numerical integration."""
    mp = importlib.import_module("mpmath")
    with mp.workdps(dps):
        q, z, a = mp.mpf(q), mp.mpf(z), mp.mpf(alpha)

        def f(x):
            return mp.npdf(x, 0, z) * ((1 - q) + q * mp.exp((2 * x - 1) / (2 * z * z))) ** a

        z0 = z * z * mp.log(1 / q - 1) + mp.mpf(1) / 2
        area = mp.quad(f, [-mp.inf, 0, z0, mp.inf])
        return float(mp.log(area) / (a - 1))


def balle(orders, rdp_values, delta):
    """ε = min_α [RDP(α) + ln((α−1)/α) − (ln δ + ln α)/(α−1)], written out order by order."""
    return min(
        r + math.log((a - 1) / a) - (math.log(delta) + math.log(a)) / (a - 1) for a, r in zip(orders, rdp_values)
    )


def dpa_epsilon(event, count, delta, orders=STANDARD_ORDERS, relation=None):
    kwargs = {} if relation is None else {"neighboring_relation": relation}
    acc = dpa_rdp.RdpAccountant(list(orders), **kwargs)
    acc.compose(event, count)
    return acc.get_epsilon(delta)


# --------------------------------------------------------------------------------------------------
# standard orders
# --------------------------------------------------------------------------------------------------


def test_standard_orders_are_the_opacus_default_list():
    expected = [1 + x / 10.0 for x in range(1, 100)] + list(range(12, 64))
    assert len(STANDARD_ORDERS) == 99 + 52 == 151
    np.testing.assert_allclose(STANDARD_ORDERS, expected, rtol=0, atol=1e-12)
    assert STANDARD_ORDERS[0] == pytest.approx(1.1) and STANDARD_ORDERS[98] == pytest.approx(10.9)
    assert STANDARD_ORDERS[99] == 12 and STANDARD_ORDERS[-1] == 63
    assert np.all(np.diff(ORDERS) > 0)
    assert 11 not in STANDARD_ORDERS


def test_standard_orders_match_opacus_defaults():
    accountant = pytest.importorskip("opacus.accountants.rdp")
    np.testing.assert_allclose(STANDARD_ORDERS, accountant.RDPAccountant.DEFAULT_ALPHAS, rtol=0, atol=1e-12)


# --------------------------------------------------------------------------------------------------
# per-step RDP of the Poisson-subsampled Gaussian
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("q,z", QZ)
def test_integer_orders_match_hand_implementation(q, z):
    got = rdp_per_step(SampledGaussian("poisson", q=q), z, INTEGER_ORDERS)
    want = np.array([hand_rdp_integer(q, z, a) for a in INTEGER_ORDERS])
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=0)


@pytest.mark.parametrize("q,z", [(0.01, 1.0), (0.1, 0.8), (0.5, 2.0), (0.03, 0.5)])
def test_integer_orders_match_literal_formula_in_high_precision(q, z):
    orders = [2, 3, 7, 16, 63]
    got = poisson_gaussian_rdp(q, z, orders)
    want = np.array([mpmath_rdp_integer(q, z, a) for a in orders])
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=0)


def test_hand_reference_is_itself_correct():
    """Guard the reference: the cancellation-free rewrite equals the literal formula."""
    for q, z in [(0.05, 1.2), (0.3, 0.7)]:
        for a in (2, 5, 11):
            assert hand_rdp_integer(q, z, a) == pytest.approx(mpmath_rdp_integer(q, z, a), rel=1e-12)


@pytest.mark.parametrize("z", [0.5, 1.0, 5.0])
def test_q_one_reduces_to_gaussian_closed_form(z):
    want = ORDERS / (2 * z * z)
    np.testing.assert_allclose(poisson_gaussian_rdp(1.0, z), want, rtol=1e-12)
    np.testing.assert_allclose(rdp_per_step(SampledGaussian("none"), z), want, rtol=1e-12)
    # "none" ignores q: every record every step
    np.testing.assert_allclose(rdp_per_step(SampledGaussian("none", q=0.01), z), want, rtol=1e-12)


def test_subsampling_amplifies_and_rdp_is_monotone():
    full = poisson_gaussian_rdp(1.0, 1.0)
    for q in (0.5, 0.1, 0.01):
        sub = poisson_gaussian_rdp(q, 1.0)
        finite = np.isfinite(sub)
        assert finite[-52:].all()  # integer orders are always bounded
        assert np.all(sub[finite] < full[finite])
    # RDP is non-decreasing in α (integer orders), and decreasing in z
    r = poisson_gaussian_rdp(0.05, 1.0)[-52:]
    assert np.all(np.diff(r) > 0)
    assert np.all(poisson_gaussian_rdp(0.05, 2.0)[-52:] < r)


def test_q_zero_is_free_and_z_nonpositive_is_unbounded():
    np.testing.assert_array_equal(poisson_gaussian_rdp(0.0, 1.0), np.zeros(len(ORDERS)))
    assert np.all(np.isinf(poisson_gaussian_rdp(0.1, 0.0)))
    assert np.all(np.isinf(rdp_per_step(SampledGaussian("none"), -1.0)))


def test_rdp_per_step_returns_a_fresh_array_each_call():
    mech = SampledGaussian("poisson", q=0.02)
    first = rdp_per_step(mech, 1.3)
    keep = first.copy()
    first *= 1000.0  # must not poison the cache
    np.testing.assert_array_equal(rdp_per_step(mech, 1.3), keep)


def test_rdp_per_step_accepts_any_order_sequence():
    mech = SampledGaussian("poisson", q=0.02)
    a = rdp_per_step(mech, 1.3, [2, 3.5, 10])
    b = rdp_per_step(mech, 1.3, np.array([2.0, 3.5, 10.0]))
    np.testing.assert_array_equal(a, b)
    assert a.shape == (3,)


def test_unknown_sampling_raises():
    with pytest.raises(ValueError, match="unknown sampling"):
        SampledGaussian("shuffle").event(1.0)
    with pytest.raises(ValueError):
        rdp_per_step(SampledGaussian("shuffle"), 1.0)


def test_events_and_neighboring_relations():
    assert isinstance(SampledGaussian("none").event(2.0), dp_accounting.GaussianDpEvent)
    assert isinstance(SampledGaussian("poisson", q=1.0).event(2.0), dp_accounting.GaussianDpEvent)
    ev = SampledGaussian("poisson", q=0.1).event(2.0)
    assert ev == dp_accounting.PoissonSampledDpEvent(0.1, dp_accounting.GaussianDpEvent(2.0))
    ev = SampledGaussian("without_replacement", population=100, batch_size=10).event(2.0)
    assert ev == dp_accounting.SampledWithoutReplacementDpEvent(100, 10, dp_accounting.GaussianDpEvent(2.0))
    add_remove = dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE
    assert SampledGaussian("none").neighboring_relation == add_remove
    assert SampledGaussian("poisson", q=0.1).neighboring_relation == add_remove
    assert SampledGaussian("without_replacement").neighboring_relation == dp_accounting.NeighboringRelation.REPLACE_ONE


# ---- cross-check against opacus (spec: "same results as opacus compute_rdp") -----------------------


@pytest.fixture(scope="module")
def opacus_compute_rdp():
    return pytest.importorskip("opacus.accountants.analysis.rdp").compute_rdp


@pytest.mark.parametrize("q,z", QZ)
def test_integer_orders_match_opacus(opacus_compute_rdp, q, z):
    int_orders = [float(a) for a in range(2, 64)]
    got = poisson_gaussian_rdp(q, z, int_orders)
    want = np.asarray(opacus_compute_rdp(q=q, noise_multiplier=z, steps=1, orders=int_orders))
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=0)


@pytest.mark.parametrize("q,z,steps", [(1.0, 1.3, 7), (0.01, 5.0, 100_000), (0.01, 1.0, 1000)])
def test_standard_orders_match_opacus_where_dp_accounting_is_exact(opacus_compute_rdp, q, z, steps):
    """q = 1 is closed form; at small q / large z the fractional-order series has negligible negative terms."""
    got = steps * poisson_gaussian_rdp(q, z)
    want = np.asarray(opacus_compute_rdp(q=q, noise_multiplier=z, steps=steps, orders=list(STANDARD_ORDERS)))
    integer = ORDERS == np.round(ORDERS)
    np.testing.assert_allclose(got[integer], want[integer], rtol=1e-9)
    # ε (what the pipeline reports) agrees closely in these regimes
    assert epsilon_from_rdp(ORDERS, got, 1e-5)[0] == pytest.approx(epsilon_from_rdp(ORDERS, want, 1e-5)[0], rel=1e-6)


@pytest.mark.parametrize("q,z", [(0.01, 1.0), (0.1, 0.8), (0.03, 0.5)])
def test_fractional_orders_match_opacus(opacus_compute_rdp, q, z):
    got = poisson_gaussian_rdp(q, z)
    want = np.asarray(opacus_compute_rdp(q=q, noise_multiplier=z, steps=1, orders=list(STANDARD_ORDERS)))
    np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize("q,z,alpha", [(0.01, 1.0, 1.1), (0.1, 0.8, 1.1)])
def test_fractional_orders_match_exact_integral(q, z, alpha):
    got = poisson_gaussian_rdp(q, z, [alpha])[0]
    assert got == pytest.approx(mpmath_rdp_exact(q, z, alpha), rel=1e-6)


@pytest.mark.parametrize("q,z,alpha", [(0.01, 1.0, 1.1), (0.01, 1.0, 2.5), (0.1, 0.8, 1.7), (0.2, 1.5, 4.5)])
def test_fractional_orders_are_valid_upper_bounds(q, z, alpha):
    """Whatever the deviation above, the value used is never below the exact RDP (so ε stays valid)."""
    exact = mpmath_rdp_exact(q, z, alpha)
    got = poisson_gaussian_rdp(q, z, [alpha])[0]
    assert got >= exact * (1 - 1e-7)  # opacus's signed series is accurate to ~1e-8 relative


@pytest.mark.parametrize("q,z,alpha", [(0.2, 1.5, 3.0), (0.05, 0.9, 7.0)])
def test_exact_integral_reference_agrees_with_integer_formula(q, z, alpha):
    """Guard the integral reference used above."""
    assert mpmath_rdp_exact(q, z, alpha) == pytest.approx(hand_rdp_integer(q, z, int(alpha)), rel=1e-9)


# --------------------------------------------------------------------------------------------------
# composition, ε and ε curves
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("q,z,steps", [(0.01, 1.1, 1000), (0.1, 2.0, 50), (1.0, 3.0, 20), (0.004, 0.9, 5000)])
def test_steps_compose_additively_and_match_rdp_accountant(q, z, steps):
    mech = SampledGaussian("poisson", q=q)
    gaussian = dp_accounting.GaussianDpEvent(z)
    event = gaussian if q == 1.0 else dp_accounting.PoissonSampledDpEvent(q, gaussian)
    acc = dpa_rdp.RdpAccountant(list(STANDARD_ORDERS))
    acc.compose(event, steps)
    got = steps * rdp_per_step(mech, z)
    integer = ORDERS == np.round(ORDERS)
    # integer orders: identical to dp-accounting; fractional orders: opacus's signed series, never above
    # dp-accounting's absolute-value bound
    np.testing.assert_allclose(got[integer], acc.rdp[integer], rtol=1e-12)
    assert np.all(got <= acc.rdp * (1 + 1e-12))
    for delta in (1e-5, 1e-3):
        assert epsilon(mech, z, steps, delta) <= acc.get_epsilon(delta) * (1 + 1e-12)
        assert epsilon(mech, z, steps, delta) == pytest.approx(acc.get_epsilon(delta), rel=1e-3)


@pytest.mark.parametrize(
    "mech,z,steps_per_round,rounds,delta",
    [
        (SampledGaussian("poisson", q=0.01), 1.0, 10, 30, 1e-5),
        (SampledGaussian("poisson", q=0.2), 2.5, 1, 25, 1e-5),
        (SampledGaussian("none"), 5.0, 1, 40, 1e-5),
        (SampledGaussian("poisson", q=0.05), 0.8, 3, 12, 1e-6),
    ],
)
def test_epsilon_curve_equals_per_round_epsilon_and_rdp_accountant(mech, z, steps_per_round, rounds, delta):
    curve = epsilon_curve(mech, z, steps_per_round, rounds, delta)
    assert curve.shape == (rounds,)
    per_round = np.array([epsilon(mech, z, t * steps_per_round, delta) for t in range(1, rounds + 1)])
    np.testing.assert_allclose(curve, per_round, rtol=1e-12)
    event = mech.event(z)
    for t in (1, rounds // 2, rounds):
        want = dpa_epsilon(event, t * steps_per_round, delta)
        # same conversion; the RDP may be slightly tighter at fractional orders (opacus), never looser
        assert curve[t - 1] <= want * (1 + 1e-12)
        assert curve[t - 1] == pytest.approx(want, rel=1e-3)
    assert np.all(np.diff(curve) > 0)


def test_epsilon_curve_q_one_gaussian_closed_form():
    """Gaussian, q = 1: the curve is the Balle conversion of t·α/(2σ²) (kato2024 §5 NAIVE/AVG/SGD)."""
    sigma, delta = 4.0, 1e-5
    curve = epsilon_curve(SampledGaussian("none"), sigma, 1, 10, delta)
    for t in range(1, 11):
        want = balle(STANDARD_ORDERS, [t * a / (2 * sigma**2) for a in STANDARD_ORDERS], delta)
        assert curve[t - 1] == pytest.approx(max(want, 0.0), rel=1e-12)


def test_sampled_without_replacement_matches_rdp_accountant_replace_one():
    n, batch, z = 1000, 50, 1.2
    mech = SampledGaussian("without_replacement", population=n, batch_size=batch)
    event = dp_accounting.SampledWithoutReplacementDpEvent(n, batch, dp_accounting.GaussianDpEvent(z))
    acc = dpa_rdp.RdpAccountant(list(STANDARD_ORDERS), dp_accounting.NeighboringRelation.REPLACE_ONE)
    acc.compose(event, 1)
    np.testing.assert_allclose(rdp_per_step(mech, z), acc.rdp, rtol=1e-12)
    relation = dp_accounting.NeighboringRelation.REPLACE_ONE
    for steps in (1, 200, 3000):
        want = dpa_epsilon(event, steps, 1e-5, relation=relation)
        assert epsilon(mech, z, steps, 1e-5) == pytest.approx(want, rel=1e-12)
    curve = epsilon_curve(mech, z, 100, 5, 1e-5)
    want = [dpa_epsilon(event, 100 * t, 1e-5, relation=relation) for t in range(1, 6)]
    np.testing.assert_allclose(curve, want, rtol=1e-12)
    # replace-one with sampling is looser than the add/remove Poisson analogue at the same rate
    assert epsilon(mech, z, 200, 1e-5) > epsilon(SampledGaussian("poisson", q=batch / n), z, 200, 1e-5)


def test_epsilon_after_steps_takes_any_step_counts():
    """ε after arbitrary step counts (a capped schedule such as min(t, k)): the same as `epsilon` at each count, the
    Gaussian's closed form by hand, dp-accounting's RdpAccountant under replace-one, 0 for no step."""
    z, delta = 1.5, 1e-4
    mech = SampledGaussian("none")
    steps = np.minimum(np.arange(0, 9), 5).reshape(3, 3)  # any shape; 0, 1, .., 5, 5, 5
    got = epsilon_after_steps(mech, z, steps, delta)
    assert got.shape == (3, 3) and got[0, 0] == 0.0
    for k, e in zip(steps.ravel()[1:], got.ravel()[1:]):
        assert e == pytest.approx(epsilon(mech, z, int(k), delta), rel=1e-12)
        assert e == pytest.approx(
            balle(STANDARD_ORDERS, [k * a / (2 * z**2) for a in STANDARD_ORDERS], delta), rel=1e-12
        )
        replace_one = dp_accounting.NeighboringRelation.REPLACE_ONE
        assert e == pytest.approx(
            dpa_epsilon(dp_accounting.GaussianDpEvent(z), int(k), delta, relation=replace_one), rel=1e-12
        )
    assert (got.ravel()[6:] == got.ravel()[5]).all() and np.all(np.diff(got.ravel()[:6]) > 0)
    sub = SampledGaussian("poisson", q=0.05)
    np.testing.assert_allclose(
        epsilon_after_steps(sub, 0.9, np.arange(1, 7), delta), epsilon_curve(sub, 0.9, 1, 6, delta), rtol=1e-12
    )
    with pytest.raises(ValueError, match=">= 0"):
        epsilon_after_steps(mech, z, [-1, 2], delta)


# --------------------------------------------------------------------------------------------------
# RDP -> (ε, δ)
# --------------------------------------------------------------------------------------------------


def test_epsilon_from_rdp_hand_computed_two_orders():
    # α = 2: 0.5 + ln(1/2) − (ln 1e-5 + ln 2)/1 = 10.626631103850338
    # α = 3: 1.0 + ln(2/3) − (ln 1e-5 + ln 3)/2 = 5.801691480042895  <- minimum
    eps, order = epsilon_from_rdp([2.0, 3.0], [0.5, 1.0], 1e-5)
    assert float(eps) == pytest.approx(5.801691480042895, rel=1e-13)
    assert float(order) == 3.0
    assert float(eps) == pytest.approx(balle([2.0, 3.0], [0.5, 1.0], 1e-5), rel=1e-13)
    # with a larger RDP at order 3 the minimum moves to order 2
    eps, order = epsilon_from_rdp([2.0, 3.0], [0.5, 6.0], 1e-5)
    assert float(eps) == pytest.approx(10.626631103850338, rel=1e-13)
    assert float(order) == 2.0


def test_epsilon_from_rdp_matches_dp_accounting_on_random_inputs():
    rng = np.random.default_rng(20240611)
    for _ in range(300):
        n = int(rng.integers(1, 12))
        orders = np.sort(rng.choice(np.concatenate([ORDERS, [1.001, 1.005, 1.01, 70.0, 256.0]]), n, replace=False))
        rdp_values = 10.0 ** rng.uniform(-6, 2.5, n)
        if rng.random() < 0.2:
            rdp_values[rng.integers(n)] = np.inf
        delta = 10.0 ** rng.uniform(-12, -0.5)
        eps, order = epsilon_from_rdp(orders, rdp_values, delta)
        want_eps, want_order = dpa_rdp.compute_epsilon(list(orders), list(rdp_values), delta)
        if np.isinf(want_eps):
            assert np.isinf(eps)
        else:
            assert float(eps) == pytest.approx(want_eps, rel=1e-12, abs=1e-15)
            assert float(order) == want_order


def test_epsilon_from_rdp_special_rules_match_dp_accounting():
    cases = [
        ([2.0, 3.0], [1e-12, 1e-12], 1e-3),  # KL shortcut: δ ≥ sqrt(1 − e^{−RDP}) -> ε = 0
        ([2.0, 3.0], [-1e-9, 0.3], 1e-5),  # negative RDP (numerical noise) -> ε = 0
        ([1.005, 1.01], [0.1, 0.2], 1e-5),  # orders ≤ 1.01 are unusable -> ∞
        ([2.0, 4.0], [np.inf, np.inf], 1e-5),
        ([2.0, 4.0], [0.0, 0.0], 1e-5),
    ]
    for orders, values, delta in cases:
        eps, _ = epsilon_from_rdp(orders, values, delta)
        want, _ = dpa_rdp.compute_epsilon(orders, values, delta)
        assert float(eps) == want
    assert float(epsilon_from_rdp([2.0, 3.0], [1e-12, 1e-12], 1e-3)[0]) == 0.0
    assert np.isinf(epsilon_from_rdp([1.005, 1.01], [0.1, 0.2], 1e-5)[0])


def test_epsilon_from_rdp_is_vectorized_over_leading_axes():
    rng = np.random.default_rng(1)
    values = 10.0 ** rng.uniform(-3, 1.5, size=(4, 5, len(ORDERS)))
    eps, order = epsilon_from_rdp(ORDERS, values, 1e-5)
    assert eps.shape == order.shape == (4, 5)
    for i in range(4):
        for j in range(5):
            e, o = dpa_rdp.compute_epsilon(list(ORDERS), list(values[i, j]), 1e-5)
            assert eps[i, j] == pytest.approx(e, rel=1e-12)
            assert order[i, j] == o


def test_log_delta_path_equals_delta_path():
    values = 300 * poisson_gaussian_rdp(0.05, 1.1)
    for delta in (1e-2, 1e-5, 1e-9, 1e-300):
        a = epsilon_from_rdp(ORDERS, values, delta=delta)
        b = epsilon_from_rdp(ORDERS, values, log_delta=math.log(delta))
        assert float(a[0]) == float(b[0]) and float(a[1]) == float(b[1])


def test_log_delta_far_below_float_range():
    """ln δ = −5000 (δ underflows to 0): the formula is applied as written."""
    values = [0.5, 1.0, 2.0]
    orders = [2.0, 32.0, 63.0]
    eps, order = epsilon_from_rdp(orders, values, log_delta=-5000.0)
    want = min(r + math.log1p(-1 / a) - (-5000.0 + math.log(a)) / (a - 1) for a, r in zip(orders, values))
    assert float(eps) == pytest.approx(want, rel=1e-13)
    assert float(order) == 63.0


def test_epsilon_is_monotone_non_increasing_in_delta():
    values = 1000 * poisson_gaussian_rdp(0.02, 1.0)
    deltas = np.logspace(-15, -0.1, 120)
    eps = np.array([float(epsilon_from_rdp(ORDERS, values, d)[0]) for d in deltas])
    assert np.all(np.diff(eps) <= 1e-12)
    assert eps[0] > eps[-1]
    # and via log δ beyond the float range
    log_deltas = np.linspace(-3000, -1, 60)
    eps = np.array([float(epsilon_from_rdp(ORDERS, values, log_delta=ld)[0]) for ld in log_deltas])
    assert np.all(np.diff(eps) <= 1e-12)


def test_epsilon_from_rdp_argument_errors():
    with pytest.raises(ValueError):
        epsilon_from_rdp([2.0], [1.0])
    with pytest.raises(ValueError):
        epsilon_from_rdp([2.0], [1.0], delta=1e-5, log_delta=-5.0)
    for bad in (0.0, -1e-5):
        with pytest.raises(ValueError):
            epsilon_from_rdp([2.0], [1.0], delta=bad)


# --------------------------------------------------------------------------------------------------
# calibration
# --------------------------------------------------------------------------------------------------

CALIBRATION_CASES = [
    (SampledGaussian("poisson", q=0.01), 2.0, 1000, 1e-5),
    (SampledGaussian("poisson", q=0.1), 8.0, 100, 1e-5),
    (SampledGaussian("none"), 1.0, 50, 1e-5),
    (SampledGaussian("none"), 0.5, 1, 1e-6),
    (SampledGaussian("without_replacement", population=500, batch_size=25), 3.0, 200, 1e-5),
]


@pytest.mark.parametrize("mech,target,steps,delta", CALIBRATION_CASES)
def test_calibration_gives_smallest_multiplier_rounded_up(mech, target, steps, delta):
    z = calibrate_noise_multiplier(mech, target, steps, delta)
    assert z > 0
    assert epsilon(mech, z, steps, delta) <= target
    assert epsilon(mech, z / (1 + 1e-3) ** 2, steps, delta) > target


def test_calibration_respects_rel_tol():
    mech = SampledGaussian("poisson", q=0.02)
    z = calibrate_noise_multiplier(mech, 1.5, 500, 1e-5, STANDARD_ORDERS, 1e-6)
    assert epsilon(mech, z, 500, 1e-5) <= 1.5
    assert epsilon(mech, z / (1 + 1e-6) ** 2, 500, 1e-5) > 1.5
    # the coarse answer is within its tolerance of the fine one, from above
    coarse = calibrate_noise_multiplier(mech, 1.5, 500, 1e-5)
    assert z <= coarse <= z * (1 + 1e-3) ** 2


def test_calibration_is_monotone_in_target_and_steps():
    mech = SampledGaussian("poisson", q=0.01)
    zs = [calibrate_noise_multiplier(mech, t, 1000, 1e-5) for t in (0.5, 1.0, 2.0, 4.0)]
    assert all(a > b for a, b in zip(zs, zs[1:]))
    assert calibrate_noise_multiplier(mech, 1.0, 4000, 1e-5) > zs[1]


@pytest.mark.parametrize("target", [0.0, -1.0])
def test_calibration_rejects_nonpositive_target(target):
    with pytest.raises(ValueError):
        calibrate_noise_multiplier(SampledGaussian("none"), target, 10, 1e-5)


def test_calibration_raises_when_target_is_unreachable():
    # δ = 1e-9: at z ≤ 1e7 the KL shortcut (δ² > 1 − e^{−RDP}) never applies, and with max order 63 the Balle
    # bound stays ≥ ln(62/63) + (ln 1e9 − ln 63)/62 ≈ 0.25 > 0.01
    with pytest.raises(ValueError, match="no noise multiplier"):
        calibrate_noise_multiplier(SampledGaussian("none"), 0.01, 1, 1e-9)
    # at δ = 1e-5 the same target is reached through the KL shortcut (ε = 0 once RDP(1.1) < δ²)
    z = calibrate_noise_multiplier(SampledGaussian("none"), 0.01, 1, 1e-5)
    assert epsilon(SampledGaussian("none"), z, 1, 1e-5) <= 0.01 < epsilon(SampledGaussian("none"), z / 1.002, 1, 1e-5)


def test_calibration_smallest_even_below_search_floor():
    mech, target, steps, delta = SampledGaussian("none"), 1e7, 1, 1e-5
    z = calibrate_noise_multiplier(mech, target, steps, delta)
    assert epsilon(mech, z, steps, delta) <= target
    assert epsilon(mech, z / (1 + 1e-3) ** 2, steps, delta) > target


def test_calibration_is_cached():
    mech = SampledGaussian("poisson", q=0.03)
    calibrate_noise_multiplier.cache_clear()
    z1 = calibrate_noise_multiplier(mech, 2.0, 300, 1e-5)
    z2 = calibrate_noise_multiplier(mech, 2.0, 300, 1e-5)
    assert z1 == z2
    assert calibrate_noise_multiplier.cache_info().hits >= 1


def test_module_exports_poisson_helper_consistently():
    np.testing.assert_array_equal(
        rdp.poisson_gaussian_rdp(0.07, 1.4), rdp.rdp_per_step(SampledGaussian("poisson", q=0.07), 1.4)
    )
