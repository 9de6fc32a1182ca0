"""Exact sampling of the discrete Gaussian N_Z(0, σ²) (P[X = x] ∝ exp(−x²/(2σ²)) on the integers), as Canonne,
Kamath and Steinke, "The Discrete Gaussian for Differential Privacy" (NeurIPS 2020), give it: Algorithm 1 (a
Bernoulli(exp(−γ)) coin from Bernoulli(γ/k) coins), Algorithm 2 (the discrete Laplace) and Algorithm 3 (the discrete
Gaussian by rejection from the discrete Laplace with scale t = ⌊σ⌋ + 1).

Why exact: a floating-point Gaussian rounded to a grid leaks through the float's low bits and its rounding (Mironov
2012's attack on the Laplace mechanism); these samplers use only integer and rational arithmetic (`fractions`) and
uniform integers from the generator, so the output distribution is exactly N_Z(0, σ²) for a rational σ². Protecting
the draws needs a cryptographic generator: pass a `secrets.SystemRandom()` (the default). The paper proves that
N_Z(0, σ²) added to an integer query of ℓ2-sensitivity Δ is Δ²/(2σ²)-concentrated DP, as the continuous Gaussian;
its variance is at most σ² (and within 10⁻¹² of it for σ ≥ 1). `tests/test_discrete_gaussian.py` checks the mean, the
variance and the probabilities of 0 and ±1 against the exact ones.
"""

from __future__ import annotations

import math
import random
import secrets
from fractions import Fraction


def _source(rng: random.Random | None) -> random.Random:
    return secrets.SystemRandom() if rng is None else rng


def bernoulli(p: Fraction, rng: random.Random) -> bool:
    """A Bernoulli(p) coin for a rational p ∈ [0, 1], exactly: a uniform integer below p's denominator."""
    return rng.randrange(p.denominator) < p.numerator


def bernoulli_exp(gamma: Fraction, rng: random.Random) -> bool:
    """A Bernoulli(exp(−γ)) coin for a rational γ ≥ 0 (Canonne, Kamath and Steinke 2020, Algorithm 1): for γ ≤ 1,
    count Bernoulli(γ/k) successes k = 1, 2, … until the first failure, and return whether the count is even;
    a larger γ is ⌊γ⌋ coins of exp(−1) and one of exp(−(γ − ⌊γ⌋))."""
    if gamma < 0:
        raise ValueError(f"γ = {gamma} < 0")
    while gamma > 1:  # exp(−γ) = exp(−1)·exp(−(γ − 1))
        if not bernoulli_exp(Fraction(1), rng):
            return False
        gamma -= 1
    k = 1
    while bernoulli(gamma / k, rng):
        k += 1
    return k % 2 == 1


def discrete_laplace(s: int, t: int, rng: random.Random) -> int:
    """One draw of the discrete Laplace with scale t/s, P[Y = y] ∝ exp(−|y|·s/t), for positive integers s, t
    (Canonne, Kamath and Steinke 2020, Algorithm 2)."""
    while True:
        u = rng.randrange(t)
        if not bernoulli_exp(Fraction(u, t), rng):
            continue
        v = 0
        while bernoulli_exp(Fraction(1), rng):
            v += 1
        y = (u + t * v) // s
        negative = rng.randrange(2) == 1
        if negative and y == 0:
            continue
        return -y if negative else y


def discrete_gaussian(sigma2: Fraction, rng: random.Random | None = None) -> int:
    """One draw of N_Z(0, σ²) for a rational σ² > 0 (Canonne, Kamath and Steinke 2020, Algorithm 3): a discrete
    Laplace Y of scale t = ⌊σ⌋ + 1, kept with probability exp(−(|Y| − σ²/t)²/(2σ²)). `rng`: default a fresh
    `secrets.SystemRandom()` (the operating system's CSPRNG)."""
    sigma2 = Fraction(sigma2)
    if sigma2 <= 0:
        raise ValueError(f"σ² = {sigma2} must be positive")
    rng = _source(rng)
    t = math.isqrt(math.floor(sigma2)) + 1  # ⌊σ⌋ + 1 (⌊√x⌋ = isqrt(⌊x⌋))
    while True:
        y = discrete_laplace(1, t, rng)
        if bernoulli_exp((abs(y) - sigma2 / t) ** 2 / (2 * sigma2), rng):
            return y


def discrete_gaussians(sigma2: Fraction, count: int, rng: random.Random | None = None) -> list[int]:
    """`count` independent draws of N_Z(0, σ²) from one generator (default: a fresh `secrets.SystemRandom()`)."""
    rng = _source(rng)
    return [discrete_gaussian(sigma2, rng) for _ in range(count)]
