"""The method of bietti2022 (spec §3, §4): PP-SGD, one registered object with its accounting.

Privacy unit: one user, add/remove. Only the global part w is released: each round the sum of the sampled users'
clipped gradients (sensitivity C) plus N(0, σ²C²) noise, users sampled by Poisson at rate q = Q/N (q = 1 on the
synthetic task): the Poisson-subsampled Gaussian with multiplier σ, once per round, δ = 1e-4. σ = 0 gives ε = ∞;
a = 0 (w never moves) releases nothing that depends on the data: ε = 0. ε does not depend on η or a > 0, so it is
computed once per (σ, q, T) (dpfl.privacy.rdp caches per-step RDP). Import-light at module level.
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
