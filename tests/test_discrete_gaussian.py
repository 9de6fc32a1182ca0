"""The exact discrete Gaussian sampler (dpfl.privacy.discrete_gaussian, Canonne, Kamath and Steinke 2020): its draws
are integers with mean ≈ 0 and variance ≈ σ² (a few thousand draws from the operating system's CSPRNG, tolerances of
≈ 5 standard errors), P[0] and P[±1] match the exact probabilities at σ = 1, and the Bernoulli(exp(−γ)) coin has
the right mean."""

from __future__ import annotations

import math
import secrets
from fractions import Fraction

import numpy as np
import pytest

from dpfl.privacy.discrete_gaussian import bernoulli_exp, discrete_gaussian, discrete_gaussians


@pytest.mark.parametrize("sigma", ["3.7", "2500000000.5"])
def test_mean_and_variance(sigma):
    s2 = Fraction(sigma) ** 2
    n = 4000
    draws = discrete_gaussians(s2, n, secrets.SystemRandom())
    assert all(isinstance(x, int) for x in draws)
    x = np.array(draws, dtype=np.float64)
    sd = math.sqrt(float(s2))
    assert abs(x.mean()) < 5 * sd / math.sqrt(n)
    # the sample variance's standard error is ≈ σ²·√(2/n) (≈ 2.2% here)
    assert x.var() == pytest.approx(float(s2), rel=5 * math.sqrt(2 / n))


def test_probabilities_of_zero_and_one_at_sigma_one():
    n = 4000
    draws = np.array(discrete_gaussians(Fraction(1), n))
    z = sum(math.exp(-k * k / 2) for k in range(-40, 41))
    for value in (0, 1, -1):
        p = math.exp(-value * value / 2) / z
        assert abs((draws == value).mean() - p) < 5 * math.sqrt(p * (1 - p) / n), value


def test_bernoulli_exp_and_bad_arguments():
    rng = secrets.SystemRandom()
    n = 4000
    for gamma in (Fraction(1, 3), Fraction(5, 2)):
        p = math.exp(-float(gamma))
        hits = sum(bernoulli_exp(gamma, rng) for _ in range(n)) / n
        assert abs(hits - p) < 5 * math.sqrt(p * (1 - p) / n)
    with pytest.raises(ValueError, match="must be positive"):
        discrete_gaussian(Fraction(0))
    with pytest.raises(ValueError, match="< 0"):
        bernoulli_exp(Fraction(-1), rng)
