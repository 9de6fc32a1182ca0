"""Unit tests of dpfl.privacy.bounds (spec/analytic.md): asoodeh2021 Lemma 1 / Theorem 2 and the
balle2020 amplification bounds. References are written out again independently (math / scipy / mpmath)."""

from __future__ import annotations

import importlib
import math

import numpy as np
import pytest
from scipy import integrate
from scipy.stats import norm

from dpfl.privacy.bounds import (
    approx_dp_condition,
    asoodeh_delta_closed,
    asoodeh_delta_sum,
    asoodeh_radii,
    checkins_thm32,
    checkins_thm32_approx,
    checkins_thm32_simplified,
    one_minus_theta,
    shuffle_efmrtt19,
    shuffle_thm51,
    shuffle_thm51_approx,
    theta,
)

# asoodeh2021 Fig 2 parameters
ETA, LIP, RHO, SIGMA, N_USERS = 0.5, 1.0, 1.0, 1.5, 100
EPS_GRID = np.linspace(0.0, 2.0, 201)


def Q(t):
    return 0.5 * math.erfc(t / math.sqrt(2))


def mp_theta(eps, r, dps=60):
    """θ_ε(r) = Q(ε/r − r/2) − e^ε Q(ε/r + r/2) in 60-digit arithmetic; returns an mpf."""
    mp = importlib.import_module("mpmath")
    with mp.workdps(dps):
        eps, r = mp.mpf(eps), mp.mpf(r)
        q = lambda t: mp.erfc(t / mp.sqrt(2)) / 2  # noqa: E731
        return q(eps / r - r / 2) - mp.exp(eps) * q(eps / r + r / 2)


def e_divergence_numeric(eps, r):
    """E_ε(N(r,1) ‖ N(0,1)) = ∫ max(0, p(x) − e^ε q(x)) dx by quadrature of the definition."""
    f = lambda x: max(0.0, norm.pdf(x, loc=r) - math.exp(eps) * norm.pdf(x))  # noqa: E731
    crossing = eps / r + r / 2  # where the integrand's kink is (a quadrature hint only)
    lo, hi = min(-12.0, crossing - 12.0), max(r + 12.0, crossing + 12.0)
    val, _ = integrate.quad(f, lo, hi, points=[crossing], limit=200, epsabs=1e-15, epsrel=1e-11)
    return val


# --------------------------------------------------------------------------------------------------
# θ and 1 − θ
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("r", [0.3, 1.0, 2.5, 5.0])
@pytest.mark.parametrize("eps", [0.0, 0.1, 0.5, 1.0, 2.0])
def test_theta_is_the_e_divergence_of_two_gaussians(eps, r):
    want = e_divergence_numeric(eps, r)
    got = float(theta(eps, r))
    assert got == pytest.approx(want, rel=1e-7, abs=1e-14)


@pytest.mark.parametrize("sigma", [0.5, 2.0])
def test_theta_depends_on_distance_over_sigma(sigma):
    """Lemma 1 with σ ≠ 1: E_ε(N(μ1, σ²) ‖ N(μ2, σ²)) = θ_ε(|μ1 − μ2|/σ)."""
    mu1, mu2, eps = 1.3, 0.2, 0.4
    f = lambda x: max(0.0, norm.pdf(x, mu1, sigma) - math.exp(eps) * norm.pdf(x, mu2, sigma))  # noqa: E731
    val, _ = integrate.quad(f, -20 * sigma, 20 * sigma, limit=200, epsabs=1e-14)
    assert float(theta(eps, abs(mu1 - mu2) / sigma)) == pytest.approx(val, rel=1e-7)


def test_theta_hand_values():
    for eps, r in [(0.5, 1.0), (1.0, 3.0), (0.0, 2.0), (2.0, 0.7)]:
        want = Q(eps / r - r / 2) - math.exp(eps) * Q(eps / r + r / 2)
        assert float(theta(eps, r)) == pytest.approx(want, rel=1e-12, abs=1e-300)


@pytest.mark.parametrize("r", [0.1, 0.5, 1.0, 3.0, 8.0])
def test_theta_at_zero_is_total_variation(r):
    assert float(theta(0.0, r)) == pytest.approx(1 - 2 * Q(r / 2), rel=1e-12)
    assert float(one_minus_theta(0.0, r)) == pytest.approx(2 * Q(r / 2), rel=1e-12)


def test_theta_plus_one_minus_theta_is_one():
    eps, r = np.meshgrid(np.linspace(0, 3, 31), np.array([0.05, 0.3, 1.0, 2.0, 4.0, 6.0]))
    total = theta(eps, r) + one_minus_theta(eps, r)
    np.testing.assert_allclose(total, 1.0, rtol=0, atol=4e-16)


def test_theta_is_a_probability_and_monotone():
    eps = np.linspace(0, 3, 61)
    for r in (0.2, 1.0, 3.0, 10.0):
        t = theta(eps, r)
        assert np.all((t >= 0) & (t <= 1))
        assert np.all(np.diff(t) <= 0)  # decreasing in ε
    r = np.linspace(0.1, 10, 100)
    assert np.all(np.diff(theta(0.5, r)) >= 0)  # increasing in r


@pytest.mark.parametrize("eps", [0.0, 0.5, 1.0, 2.0])
@pytest.mark.parametrize("r", [8.43, 11.93, 18.86])
def test_one_minus_theta_is_accurate_when_theta_is_one(eps, r):
    """1 − θ is computed directly, accurate to 1e-10 relative where it is 3e-5 .. 1e-45 (θ rounds to 1)."""
    mp = importlib.import_module("mpmath")
    with mp.workdps(80):
        want = float(1 - mp_theta(eps, r, dps=80))
    got = float(one_minus_theta(eps, r))
    assert 0 < got < 1e-4
    assert got == pytest.approx(want, rel=1e-10)


def test_theta_broadcasts():
    t = theta(np.array([[0.0], [1.0]]), np.array([1.0, 2.0, 3.0]))
    assert t.shape == (2, 3)
    assert t[1, 2] == pytest.approx(float(theta(1.0, 3.0)), rel=1e-15)


# --------------------------------------------------------------------------------------------------
# asoodeh2021 Theorem 2
# --------------------------------------------------------------------------------------------------


def test_asoodeh_radii():
    r1, r2 = asoodeh_radii(25, LIP, RHO, ETA, SIGMA)
    assert r1 == pytest.approx(2 * 1.0 / (5 * 1.5), rel=1e-15)
    assert r2 == pytest.approx(2 * 1.0 * 5 / (0.5 * 1.5), rel=1e-15)


@pytest.mark.parametrize("m", [10, 20, 25, 50])
def test_general_sum_equals_closed_form_for_integer_T(m):
    T = N_USERS // m
    closed = asoodeh_delta_closed(EPS_GRID, N_USERS, m, LIP, RHO, ETA, SIGMA)
    summed = asoodeh_delta_sum(EPS_GRID, N_USERS, m, LIP, RHO, [ETA] * T, [SIGMA] * T)
    assert closed.shape == summed.shape == EPS_GRID.shape
    np.testing.assert_allclose(summed, closed, rtol=1e-12, atol=0)


@pytest.mark.parametrize("m", [10, 20, 25, 30, 50])
@pytest.mark.parametrize("eps", [0.0, 0.3, 1.0, 2.0])
def test_closed_form_against_high_precision(m, eps):
    """δ = (m/n) θ(r1) (1 − θ(r2)^{n/m}) / (1 − θ(r2)), real exponent n/m (10/3 for m = 30), in 60 digits."""
    mp = importlib.import_module("mpmath")
    with mp.workdps(60):
        r1 = 2 * mp.mpf(LIP) / (mp.sqrt(m) * mp.mpf(SIGMA))
        r2 = 2 * mp.mpf(RHO) * mp.sqrt(m) / (mp.mpf(ETA) * mp.mpf(SIGMA))
        t1, t2 = mp_theta(eps, r1), mp_theta(eps, r2)
        T = mp.mpf(N_USERS) / m
        want = float(mp.mpf(m) / N_USERS * t1 * (1 - t2**T) / (1 - t2))
    got = float(asoodeh_delta_closed(eps, N_USERS, m, LIP, RHO, ETA, SIGMA))
    assert got == pytest.approx(want, rel=1e-10)


def test_general_sum_with_varying_steps_and_noise():
    """δ = (m/n) Σ_t θ(2L/(√m σ_t)) Π_{j>t} θ(2ρ√m/(η_j σ_j)), written as a double loop in 60 digits."""
    mp = importlib.import_module("mpmath")
    m, n = 10, 40
    etas = [0.5, 0.4, 0.3, 0.2]
    sigmas = [1.0, 1.5, 2.0, 3.0]
    for eps in (0.0, 0.4, 1.5):
        with mp.workdps(60):
            total = mp.mpf(0)
            for t in range(4):
                term = mp_theta(eps, 2 * LIP / (math.sqrt(m) * sigmas[t]))
                for j in range(t + 1, 4):
                    term *= mp_theta(eps, 2 * RHO * math.sqrt(m) / (etas[j] * sigmas[j]))
                total += term
            want = float(mp.mpf(m) / n * total)
        got = float(asoodeh_delta_sum(eps, n, m, LIP, RHO, etas, sigmas))
        assert got == pytest.approx(want, rel=1e-12)
    # the order of the iterations matters (the product runs over later iterations only)
    a = float(asoodeh_delta_sum(0.4, n, m, LIP, RHO, etas, sigmas))
    b = float(asoodeh_delta_sum(0.4, n, m, LIP, RHO, etas[::-1], sigmas[::-1]))
    assert a != pytest.approx(b, rel=1e-9)


def test_general_sum_rejects_mismatched_sequences():
    with pytest.raises(ValueError):
        asoodeh_delta_sum(0.5, 100, 10, LIP, RHO, [0.5, 0.5], [1.5])
    with pytest.raises(ValueError):
        asoodeh_delta_sum(0.5, 100, 10, LIP, RHO, [[0.5]], [[1.5]])


@pytest.mark.parametrize("m", [10, 20, 25, 30, 50])
def test_delta_between_single_term_and_theta_r1(m):
    """0 < θ(r2) ≤ 1 makes the geometric factor lie in [1, n/m], so (m/n)θ(r1) ≤ δ ≤ θ(r1)."""
    r1, r2 = asoodeh_radii(m, LIP, RHO, ETA, SIGMA)
    delta = asoodeh_delta_closed(EPS_GRID, N_USERS, m, LIP, RHO, ETA, SIGMA)
    t1 = theta(EPS_GRID, r1)
    assert np.all(delta >= (m / N_USERS) * t1 * (1 - 1e-12))
    assert np.all(delta <= t1 * (1 + 1e-12))
    gap = one_minus_theta(EPS_GRID, r2)
    assert np.all((gap > 0) & (gap < 1))
    # δ is a valid privacy curve: strictly decreasing in ε, within (0, 1]
    assert np.all((delta > 0) & (delta <= 1))
    assert np.all(np.diff(delta) < 0)


def test_more_users_per_iteration_gives_smaller_delta():
    """C-A1 at the Fig 2 parameters (q = 0.1, 0.2, 0.3)."""
    d = {m: asoodeh_delta_closed(EPS_GRID, N_USERS, m, LIP, RHO, ETA, SIGMA) for m in (10, 20, 30)}
    assert np.all(d[30] < d[20]) and np.all(d[20] < d[10])


def test_closed_form_hand_value():
    """One point typed out with math.erfc, where θ(r2) is well below 1: n = 100, m = 4 (T = 25), ε = 1."""
    m, eps = 4, 1.0
    r1 = 2 * LIP / (math.sqrt(m) * SIGMA)
    r2 = 2 * RHO * math.sqrt(m) / (ETA * SIGMA)
    t1 = Q(eps / r1 - r1 / 2) - math.exp(eps) * Q(eps / r1 + r1 / 2)
    t2 = Q(eps / r2 - r2 / 2) - math.exp(eps) * Q(eps / r2 + r2 / 2)
    assert 0.9 < t2 < 0.999
    want = m / N_USERS * t1 * sum(t2**j for j in range(25))
    assert float(asoodeh_delta_closed(eps, N_USERS, m, LIP, RHO, ETA, SIGMA)) == pytest.approx(want, rel=1e-11)
    assert float(asoodeh_delta_sum(eps, N_USERS, m, LIP, RHO, [ETA] * 25, [SIGMA] * 25)) == pytest.approx(
        want, rel=1e-11
    )


# --------------------------------------------------------------------------------------------------
# balle2020
# --------------------------------------------------------------------------------------------------

BALLE_POINTS = [(0.5, 1000, 1e-6), (0.1, 10_000, 1e-6), (1.0, 100_000, 1e-8), (2.0, 500, 1e-5)]


@pytest.mark.parametrize("eps0,n,delta", BALLE_POINTS)
def test_thm51_hand(eps0, n, delta):
    L = math.log(1 / delta)
    want = math.exp(3 * eps0) * (math.exp(eps0) - 1) ** 2 / (2 * n) + math.exp(1.5 * eps0) * (
        math.exp(eps0) - 1
    ) * math.sqrt(2 * L / n)
    assert float(shuffle_thm51(eps0, n, delta)) == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("eps0,n,delta", BALLE_POINTS)
def test_efmrtt19_hand(eps0, n, delta):
    L = math.log(1 / delta)
    a = 2 * math.exp(2 * eps0) * (math.exp(eps0) - 1)
    want = a * (math.exp(a / n) - 1) + a * math.sqrt(2 * L / n)
    assert float(shuffle_efmrtt19(eps0, n, delta)) == pytest.approx(want, rel=1e-12)


def advanced_composition(eps1, k, delta):
    """Dwork-Rothblum-Vadhan: k-fold composition of ε1-DP is (ε1 sqrt(2k ln(1/δ)) + k ε1 (e^{ε1} − 1), δ)."""
    return eps1 * math.sqrt(2 * k * math.log(1 / delta)) + k * eps1 * (math.exp(eps1) - 1)


@pytest.mark.parametrize("eps0,n,delta", BALLE_POINTS)
def test_efmrtt19_is_advanced_composition(eps0, n, delta):
    eps1 = 2 * math.exp(2 * eps0) * (math.exp(eps0) - 1) / n
    assert float(shuffle_efmrtt19(eps0, n, delta)) == pytest.approx(advanced_composition(eps1, n, delta), rel=1e-12)


@pytest.mark.parametrize("eps0,m,p0,delta", [(0.5, 1000, 1.0, 1e-6), (0.2, 10_000, 0.5, 1e-6), (1.5, 300, 0.1, 1e-4)])
def test_thm32_hand(eps0, m, p0, delta):
    L = math.log(1 / delta)
    em1 = math.exp(eps0) - 1
    want = p0 * em1 * math.sqrt(2 * math.exp(eps0) * L / m) + p0**2 * math.exp(eps0) * em1**2 / (2 * m)
    assert float(checkins_thm32(eps0, m, p0, delta)) == pytest.approx(want, rel=1e-12)
    assert float(checkins_thm32_simplified(eps0, m, p0, delta)) == pytest.approx(
        7 * p0 * eps0 * math.sqrt(L / m), rel=1e-14
    )


def test_balle_bounds_vectorize():
    eps0 = np.linspace(0.01, 1, 7)
    for f, args in [(shuffle_thm51, (1000, 1e-6)), (shuffle_efmrtt19, (1000, 1e-6)),
                    (checkins_thm32, (1000, 0.5, 1e-6)), (checkins_thm32_simplified, (1000, 0.5, 1e-6))]:
        vec = f(eps0, *args)
        assert vec.shape == eps0.shape
        np.testing.assert_allclose(vec, [float(f(e, *args)) for e in eps0], rtol=1e-15)


def test_bounds_vanish_at_eps0_zero():
    for v in (shuffle_thm51(0.0, 1000, 1e-6), shuffle_efmrtt19(0.0, 1000, 1e-6), checkins_thm32(0.0, 1000, 1.0, 1e-6)):
        assert float(v) == 0.0


EPS0_GRID = np.linspace(0.0, 1.0, 201)[1:]  # 200 points in (0, 1]


@pytest.mark.parametrize("n", [1000, 10_000, 100_000])
def test_thm51_beats_efmrtt19(n):
    assert np.all(shuffle_thm51(EPS0_GRID, n, 1e-6) < shuffle_efmrtt19(EPS0_GRID, n, 1e-6))


@pytest.mark.parametrize("m", [1000, 10_000, 100_000])
@pytest.mark.parametrize("p0", [0.1, 0.5, 1.0])
def test_thm32_below_simplified_bound(m, p0):
    eps0 = EPS0_GRID[EPS0_GRID < 1.0]
    assert np.all(checkins_thm32(eps0, m, p0, 1e-6) <= checkins_thm32_simplified(eps0, m, p0, 1e-6))


def test_thm32_monotonicity():
    for m in (1000, 10_000, 100_000):
        for p0 in (0.1, 0.5, 1.0):
            assert np.all(np.diff(checkins_thm32(EPS0_GRID, m, p0, 1e-6)) > 0)  # increasing in ε0
        by_p0 = [checkins_thm32(EPS0_GRID, m, p0, 1e-6) for p0 in (0.1, 0.5, 1.0)]
        assert np.all(by_p0[0] < by_p0[1]) and np.all(by_p0[1] < by_p0[2])  # increasing in p0
    by_m = [checkins_thm32(EPS0_GRID, m, 1.0, 1e-6) for m in (1000, 10_000, 100_000)]
    assert np.all(by_m[0] > by_m[1]) and np.all(by_m[1] > by_m[2])  # decreasing in m
    # and decreasing in δ's strength: smaller δ -> larger ε
    assert np.all(checkins_thm32(EPS0_GRID, 1000, 1.0, 1e-9) > checkins_thm32(EPS0_GRID, 1000, 1.0, 1e-6))


# ---- (ε0, δ0) extensions ------------------------------------------------------------------------


def hand_condition(eps0, delta1):
    return (1 - math.exp(-eps0)) * delta1 / (
        4 * math.exp(eps0) * (2 + math.log(2 / delta1) / math.log(1 / (1 - math.exp(-5 * eps0))))
    )


@pytest.mark.parametrize("eps0,delta1", [(0.1, 1e-6), (0.5, 1e-4), (1.0, 1e-8)])
def test_approx_dp_condition_hand(eps0, delta1):
    assert float(approx_dp_condition(eps0, delta1)) == pytest.approx(hand_condition(eps0, delta1), rel=1e-12)


@pytest.mark.parametrize("eps0,n,delta,delta1", [(0.05, 100_000, 1e-6, 1e-9), (0.1, 1000, 1e-6, 1e-10)])
def test_thm51_approx_formula(eps0, n, delta, delta1):
    delta0 = 0.5 * hand_condition(eps0, delta1)
    L = math.log(1 / delta)
    e8 = math.exp(8 * eps0) - 1
    eps_c = math.exp(24 * eps0) * e8**2 / (2 * n) + math.exp(12 * eps0) * e8 * math.sqrt(2 * L / n)
    got_eps, got_delta = shuffle_thm51_approx(eps0, delta0, n, delta, delta1)
    assert float(got_eps) == pytest.approx(eps_c, rel=1e-12)
    assert float(got_delta) == pytest.approx(delta + n * (math.exp(eps_c) + 1) * delta1, rel=1e-12)
    # the (ε0, δ0) extension is the pure bound evaluated at 8ε0 with the e^{3ε} factor (e^{24ε0} = e^{3·8ε0})
    assert float(got_eps) == pytest.approx(float(shuffle_thm51(8 * eps0, n, delta)), rel=1e-12)


@pytest.mark.parametrize("eps0,m,p0,delta,delta1", [(0.05, 10_000, 1.0, 1e-6, 1e-9), (0.2, 1000, 0.5, 1e-6, 1e-8)])
def test_thm32_approx_formula(eps0, m, p0, delta, delta1):
    delta0 = 0.9 * hand_condition(eps0, delta1)
    L = math.log(1 / delta)
    e8 = math.exp(8 * eps0) - 1
    eps_c = p0**2 * math.exp(8 * eps0) * e8**2 / (2 * m) + p0 * e8 * math.sqrt(2 * math.exp(8 * eps0) * L / m)
    got_eps, got_delta = checkins_thm32_approx(eps0, delta0, m, p0, delta, delta1)
    assert float(got_eps) == pytest.approx(eps_c, rel=1e-12)
    # the paper prints δ0 (not δ1) in δ' for Thm 3.2
    assert float(got_delta) == pytest.approx(delta + m * (math.exp(eps_c) + 1) * delta0, rel=1e-12)
    assert float(got_eps) == pytest.approx(float(checkins_thm32(8 * eps0, m, p0, delta)), rel=1e-12)


@pytest.mark.filterwarnings("ignore:overflow encountered in exp:RuntimeWarning")  # ε' is vacuous (δ' = inf) at ε0 = 0.5
@pytest.mark.parametrize("eps0,delta1", [(0.1, 1e-6), (0.5, 1e-9)])
def test_approx_extensions_enforce_the_delta0_condition(eps0, delta1):
    limit = float(approx_dp_condition(eps0, delta1))
    too_big = limit * 1.01
    with pytest.raises(ValueError):
        shuffle_thm51_approx(eps0, too_big, 1000, 1e-6, delta1)
    with pytest.raises(ValueError):
        checkins_thm32_approx(eps0, too_big, 1000, 1.0, 1e-6, delta1)
    # at (just below) the limit both are fine
    shuffle_thm51_approx(eps0, limit * (1 - 1e-12), 1000, 1e-6, delta1)
    checkins_thm32_approx(eps0, limit * (1 - 1e-12), 1000, 1.0, 1e-6, delta1)
    # an array of ε0 raises if any point violates
    small = eps0 / 100
    delta0 = 1.01 * float(approx_dp_condition(small, delta1))
    assert delta0 < limit
    checkins_thm32_approx(np.array([eps0]), delta0, 1000, 1.0, 1e-6, delta1)
    with pytest.raises(ValueError):
        checkins_thm32_approx(np.array([eps0, small]), delta0, 1000, 1.0, 1e-6, delta1)
    with pytest.raises(ValueError):
        shuffle_thm51_approx(np.array([eps0, small]), delta0, 1000, 1e-6, delta1)
