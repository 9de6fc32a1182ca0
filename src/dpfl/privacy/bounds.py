"""Closed-form privacy bounds of asoodeh2021 (Theorem 2) and balle2020 (Thms 3.2, 5.1; EFMRTT19 Thm 7).

No library implements these; each function is the formula of spec/analytic.md, written in a
numerically stable form and vectorized with numpy broadcasting. Q(t) = P[N(0,1) > t].
"""

from __future__ import annotations

import numpy as np
from scipy.stats import norm

# --------------------------------------------------------------------------------------------------
# asoodeh2021: E_ε-divergence of two Gaussians (Lemma 1) and Theorem 2
# --------------------------------------------------------------------------------------------------


def theta(eps, r):
    """θ_ε(r) = Q(ε/r − r/2) − e^ε Q(ε/r + r/2): E_ε(N(μ1,σ²I) ‖ N(μ2,σ²I)) with r = ‖μ1−μ2‖/σ."""
    eps, r = np.broadcast_arrays(np.asarray(eps, float), np.asarray(r, float))
    return norm.sf(eps / r - r / 2) - np.exp(eps + norm.logsf(eps / r + r / 2))


def one_minus_theta(eps, r):
    """1 − θ_ε(r) = Q(r/2 − ε/r) + e^ε Q(ε/r + r/2), computed directly (θ is often within 1e-12 of 1)."""
    eps, r = np.broadcast_arrays(np.asarray(eps, float), np.asarray(r, float))
    return norm.sf(r / 2 - eps / r) + np.exp(eps + norm.logsf(eps / r + r / 2))


def asoodeh_radii(n_batch, lipschitz, radius, step_size, sigma):
    """(r1, r2) of Theorem 2: r1 = 2L/(√m σ) (one user's gradient), r2 = 2ρ√m/(η σ) (the projection ball)."""
    m = np.asarray(n_batch, float)
    return 2 * lipschitz / (np.sqrt(m) * sigma), 2 * radius * np.sqrt(m) / (step_size * sigma)


def asoodeh_delta_closed(eps, n_users, n_batch, lipschitz, radius, step_size, sigma):
    """Theorem 2 with constant η, σ: δ(ε) = (m/n) θ_ε(r1) (1 − θ_ε(r2)^{n/m}) / (1 − θ_ε(r2)).

    The exponent T = n/m is used as a real number (for q = 0.3 it is 10/3, *inferred*). The geometric
    factor is −expm1(T·log1p(−(1−θ)))/(1−θ), stable when θ_ε(r2) is extremely close to 1.
    """
    r1, r2 = asoodeh_radii(n_batch, lipschitz, radius, step_size, sigma)
    gap = one_minus_theta(eps, r2)
    T = np.asarray(n_users, float) / np.asarray(n_batch, float)
    geometric = -np.expm1(T * np.log1p(-gap)) / gap
    return (np.asarray(n_batch, float) / n_users) * theta(eps, r1) * geometric


def asoodeh_delta_sum(eps, n_users, n_batch, lipschitz, radius, step_sizes, sigmas):
    """Theorem 2, general form: δ = (m/n) Σ_t θ_ε(2L/(√m σ_t)) Π_{j>t} θ_ε(2ρ√m/(η_j σ_j)).

    `step_sizes` and `sigmas` are sequences of length T (one per iteration); `eps` may be an array.
    """
    etas = np.asarray(step_sizes, float)
    sigmas = np.asarray(sigmas, float)
    if etas.shape != sigmas.shape or etas.ndim != 1:
        raise ValueError("step_sizes and sigmas must be 1-D sequences of the same length T")
    eps = np.asarray(eps, float)
    m = float(n_batch)
    total = np.zeros_like(eps)
    tail = np.ones_like(eps)  # Π_{j>t} θ_ε(r2_j), built from the last iteration backwards
    for t in range(len(etas) - 1, -1, -1):
        total = total + theta(eps, 2 * lipschitz / (np.sqrt(m) * sigmas[t])) * tail
        tail = tail * theta(eps, 2 * radius * np.sqrt(m) / (etas[t] * sigmas[t]))
    return (m / n_users) * total


# --------------------------------------------------------------------------------------------------
# balle2020: amplification by shuffling and by random check-ins, for ε0-DP local randomizers
# --------------------------------------------------------------------------------------------------


def shuffle_thm51(eps0, n, delta):
    """balle2020 Thm 5.1: e^{3ε0}(e^{ε0}−1)²/(2n) + e^{3ε0/2}(e^{ε0}−1)·sqrt(2 ln(1/δ)/n)."""
    eps0 = np.asarray(eps0, float)
    em1 = np.expm1(eps0)
    L = np.log(1 / delta)
    return np.exp(3 * eps0) * em1**2 / (2 * n) + np.exp(1.5 * eps0) * em1 * np.sqrt(2 * L / n)


def shuffle_efmrtt19(eps0, n, delta):
    """Erlingsson et al. 2019 Thm 7 as restated by balle2020: advanced composition of n steps of
    ε1 = 2e^{2ε0}(e^{ε0}−1)/n, i.e. n·ε1·(e^{ε1} − 1) + ε1·sqrt(2n ln(1/δ))."""
    eps0 = np.asarray(eps0, float)
    a = 2 * np.exp(2 * eps0) * np.expm1(eps0)
    L = np.log(1 / delta)
    return a * np.expm1(a / n) + a * np.sqrt(2 * L / n)


def checkins_thm32(eps0, m, p0, delta):
    """balle2020 Thm 3.2 (random check-ins, fixed window of m slots, check-in probability p0):
    p0(e^{ε0}−1)·sqrt(2e^{ε0} ln(1/δ)/m) + p0² e^{ε0}(e^{ε0}−1)²/(2m)."""
    eps0 = np.asarray(eps0, float)
    em1 = np.expm1(eps0)
    L = np.log(1 / delta)
    return p0 * em1 * np.sqrt(2 * np.exp(eps0) * L / m) + p0**2 * np.exp(eps0) * em1**2 / (2 * m)


def checkins_thm32_simplified(eps0, m, p0, delta):
    """Simplified Thm 3.2 (valid for ε0 < 1, δ < 1/100): 7·p0·ε0·sqrt(ln(1/δ)/m)."""
    return 7 * p0 * np.asarray(eps0, float) * np.sqrt(np.log(1 / delta) / m)


def approx_dp_condition(eps0, delta1):
    """Largest δ0 for which the (ε0, δ0) extensions hold:
    δ0 ≤ (1−e^{−ε0}) δ1 / (4e^{ε0}(2 + ln(2/δ1)/ln(1/(1−e^{−5ε0}))))."""
    eps0 = np.asarray(eps0, float)
    return (-np.expm1(-eps0)) * delta1 / (
        4 * np.exp(eps0) * (2 + np.log(2 / delta1) / -np.log1p(-np.exp(-5 * eps0)))
    )


def shuffle_thm51_approx(eps0, delta0, n, delta, delta1):
    """Thm 5.1 for (ε0, δ0)-DP randomizers: returns (ε', δ') with
    ε' = e^{24ε0}(e^{8ε0}−1)²/(2n) + e^{12ε0}(e^{8ε0}−1)·sqrt(2 ln(1/δ)/n), δ' = δ + n(e^{ε'}+1)δ1.
    Raises if δ0 exceeds the theorem's condition."""
    _check_delta0(eps0, delta0, delta1)
    eps0 = np.asarray(eps0, float)
    em1 = np.expm1(8 * eps0)
    L = np.log(1 / delta)
    eps_c = np.exp(24 * eps0) * em1**2 / (2 * n) + np.exp(12 * eps0) * em1 * np.sqrt(2 * L / n)
    return eps_c, delta + n * (np.exp(eps_c) + 1) * delta1


def checkins_thm32_approx(eps0, delta0, m, p0, delta, delta1):
    """Thm 3.2 for (ε0, δ0)-DP randomizers: returns (ε', δ') with
    ε' = p0² e^{8ε0}(e^{8ε0}−1)²/(2m) + p0(e^{8ε0}−1)·sqrt(2e^{8ε0} ln(1/δ)/m), δ' = δ + m(e^{ε'}+1)δ0.
    (The paper prints δ0 in δ'; the analogous theorems print δ1. We follow the print.)"""
    _check_delta0(eps0, delta0, delta1)
    eps0 = np.asarray(eps0, float)
    em1 = np.expm1(8 * eps0)
    L = np.log(1 / delta)
    eps_c = p0**2 * np.exp(8 * eps0) * em1**2 / (2 * m) + p0 * em1 * np.sqrt(2 * np.exp(8 * eps0) * L / m)
    return eps_c, delta + m * (np.exp(eps_c) + 1) * delta0


def _check_delta0(eps0, delta0, delta1):
    limit = approx_dp_condition(eps0, delta1)
    if np.any(np.asarray(delta0) > limit):
        raise ValueError(f"δ0 = {delta0} exceeds the theorem's condition δ0 ≤ {np.min(limit):.3e} at ε0 = {eps0}")
