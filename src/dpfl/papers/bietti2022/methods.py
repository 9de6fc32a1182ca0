"""The method of bietti2022 (spec §3, §4): PP-SGD, one registered object with its accounting.

Privacy unit: one user, add/remove. Only the global part w is released: each round the sum of the sampled users'
clipped gradients (sensitivity C) plus N(0, σ²C²) noise, users sampled by Poisson at rate q = Q/N (q = 1 on the
synthetic task): the Poisson-subsampled Gaussian with multiplier σ, once per round, δ = 1e-4. σ = 0 gives ε = ∞;
a = 0 (w never moves) releases nothing that depends on the data: ε = 0. ε does not depend on η or a > 0, so it is
computed once per (σ, q, T) (dpfl.privacy.rdp caches per-step RDP). Import-light at module level.
`compat: authors-code` (B1, shuffled rounds): the nominal ε is the authors' Poisson analysis at q_t = L_t/N; the
certified ε is `shuffled_certified_curve` (no amplification, replace-one).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dpfl.fl.methods import Accounting, PrivateMethod, register


@dataclass(frozen=True)
class PpSgdMethod(PrivateMethod):
    neighbouring = "add_remove"
    probe_sizes: tuple = (("rounds", 50), ("q", 0.02))

    def accounting(self, rounds: int, q: float = 1.0, delta: float = 1e-4) -> Accounting:
        from dpfl.privacy.rdp import SampledGaussian

        mech = SampledGaussian("none") if q >= 1.0 else SampledGaussian("poisson", q=float(q))
        return Accounting(mech, int(rounds), delta)

    def sensitivity(self, clip):
        """Adding or removing one user changes Σ_i clip_C(g_i) by one clipped gradient: C."""
        return clip


PPSGD = PpSgdMethod(id="ppsgd", label="PP-SGD", private=True)
register(PPSGD)


def epsilon_curve(sigma: float, a: float, rounds: int, q, delta: float) -> np.ndarray:
    """ε after rounds 1..T of a run at (σ, a): ∞ at σ = 0 (a > 0), 0 at a = 0, else the accountant's ε. `q`: the
    user rate, or one rate per round (compat authors-code, B1: round t is accounted as Poisson sampling at
    q_t = L_t/N, the fraction of users it actually took)."""
    if a == 0:
        return np.zeros(rounds)
    if sigma == 0:
        return np.full(rounds, math.inf)
    from dpfl.privacy.rdp import epsilon_curve as curve
    from dpfl.privacy.rdp import epsilon_curve_schedule

    if np.ndim(q) == 0:
        acc = PPSGD.accounting(rounds=rounds, q=float(q), delta=delta)
        return np.asarray(curve(acc.mechanism, float(sigma), 1, rounds, delta), float)
    if len(q) != rounds:
        raise ValueError(f"epsilon_curve: {len(q)} per-round rates for {rounds} rounds")
    mechanisms = [PPSGD.accounting(rounds=1, q=float(qt), delta=delta).mechanism for qt in q]
    return epsilon_curve_schedule(mechanisms, float(sigma), delta)


def replace_one_sensitivity(clip: float) -> float:
    """Replacing one user's data swaps its clipped gradient in the sum for another of norm ≤ C: 2C."""
    return 2.0 * clip


def shuffled_certified_curve(sigma: float, a: float, rounds: int, most_rounds: int, delta: float) -> np.ndarray:
    """The ε an accountant certifies after rounds 1..T of a shuffled run (compat authors-code, B1), where the nominal
    ε (`epsilon_curve` at q_t = L_t/N) is the authors' Poisson analysis of a sampler that is not Poisson.

    The schedule: each user i takes part in exactly k_i = rint(E·⌊n_i/m⌋) rounds, at most one minibatch per round,
    the rounds drawn by shuffling the users with data left. No amplification result fits it: not Poisson; not
    independent per-round sampling without replacement (Wang, Balle & Kasiviswanathan 2019, dp-accounting's
    SampledWithoutReplacementDpEvent), since a round's draw depends on the earlier ones and the last rounds take
    every user left. So no amplification is claimed. The plan depends on the users' minibatch counts only, and the
    run releases them anyway (T and the step denominators L_t follow from them), so they are public; for two data
    sets that differ in one user's data (replace-one, its count kept) the plan has the same distribution, and given
    the plan the run is an adaptive composition of Gaussian mechanisms in which the changed user enters at most
    min(t, k_max) of the first t rounds, each time with sensitivity 2C against noise std σC: multiplier σ/2. ε(t) is
    that Gaussian composed min(t, k_max) times (every plan's worst case; at the end every plan gives k_max).
    ∞ at σ = 0 (a > 0), 0 at a = 0, as the nominal curve."""
    if a == 0:
        return np.zeros(rounds)
    if sigma == 0:
        return np.full(rounds, math.inf)
    from dpfl.privacy.rdp import SampledGaussian, epsilon_after_steps

    z = sigma * PPSGD.sensitivity(1.0) / replace_one_sensitivity(1.0)  # noise std σC over the sensitivity 2C
    steps = np.minimum(np.arange(1, rounds + 1), int(most_rounds))
    return epsilon_after_steps(SampledGaussian("none"), float(z), steps, delta)
