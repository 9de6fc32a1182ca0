"""Rényi-DP accounting of (sub)sampled Gaussian mechanisms and RDP -> (ε, δ) conversion.

The RDP values come from maintained libraries; this module only arranges them: per-step RDP vectors,
ε curves over many rounds in one vectorized pass (RDP is linear in the number of steps), and
calibration of the noise multiplier to a target ε.

Which library: Google's `dp-accounting` for the Gaussian, the sampled-without-replacement Gaussian and
(as a fallback) the Poisson-subsampled Gaussian; `opacus` for the Poisson-subsampled Gaussian at
fractional orders. dp-accounting 0.6.0 sums the fractional-order series of Mironov, Talwar & Zhang
(2019) with |C(α, i)| for every term, ignoring the sign of the generalized binomial coefficient: a valid
upper bound, but up to ~7% loose at α ∈ (1, 2) and +inf where its loop stops. opacus sums the signed
series (spec README §4: "same results as opacus"). Where opacus's signed sum breaks down numerically
(NaN/inf at very large fractional orders) or exceeds dp-accounting's upper bound, the bound is used,
so the value is never below what the exact series allows. Integer orders agree in both libraries.
For the Poisson-subsampled Gaussian both libraries' numbers come from dpfl.privacy.series, which gives their bits in
a fraction of their time (their scalar loops take minutes at the large orders of the group conversion); so do
dp-accounting's for the sampled-without-replacement Gaussian, from dpfl.privacy.series_wor (its O(order^2) scalar
loops per order dominated the noise calibration of lowy2023).
"""

from __future__ import annotations

import functools
import logging
import math
from dataclasses import dataclass

import dp_accounting
import numpy as np
from dp_accounting.rdp import rdp_privacy_accountant as _rdp

from dpfl.privacy import series, series_wor

# dp-accounting logs a warning for every order whose series fails to converge (it then excludes the
# order by setting its RDP to +inf, which is the correct, conservative outcome). Keep the logs readable.
logging.getLogger("absl").setLevel(logging.ERROR)

#: The standard orders of spec/README.md §4 (the opacus default list): 1.1, 1.2, ..., 10.9 and 12..63.
STANDARD_ORDERS: tuple[float, ...] = tuple([1 + x / 10.0 for x in range(1, 100)] + list(range(12, 64)))


@dataclass(frozen=True)
class SampledGaussian:
    """One step of a Gaussian mechanism, optionally subsampled.

    sampling:
      - "none": every record every step (q = 1), add/remove adjacency.
      - "poisson": Poisson sampling with rate q, add/remove adjacency.
      - "without_replacement": a fixed batch of `batch_size` out of `population`, replace-one adjacency
        (Wang, Balle & Kasiviswanathan 2019).
    The noise multiplier z (noise std / ℓ2 sensitivity) is passed separately so that the same sampling
    scheme can be calibrated.
    """

    sampling: str = "none"
    q: float = 1.0
    population: int = 0
    batch_size: int = 0

    def event(self, z: float) -> dp_accounting.DpEvent:
        gaussian = dp_accounting.GaussianDpEvent(z)
        if self.sampling == "none" or (self.sampling == "poisson" and self.q == 1.0):
            return gaussian
        if self.sampling == "poisson":
            return dp_accounting.PoissonSampledDpEvent(self.q, gaussian)
        if self.sampling == "without_replacement":
            return dp_accounting.SampledWithoutReplacementDpEvent(self.population, self.batch_size, gaussian)
        raise ValueError(f"unknown sampling {self.sampling!r}; expected none, poisson or without_replacement")

    @property
    def neighboring_relation(self) -> dp_accounting.NeighboringRelation:
        if self.sampling == "without_replacement":
            return dp_accounting.NeighboringRelation.REPLACE_ONE
        return dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE


def rdp_per_step(mechanism: SampledGaussian, z: float, orders=STANDARD_ORDERS) -> np.ndarray:
    """RDP of one step at each order (dp-accounting's; opacus's at the fractional orders of the Poisson-subsampled
    Gaussian, see the module doc). +inf marks orders it could not bound. Cached per (mechanism, z, orders)."""
    return _rdp_per_step_cached(mechanism, float(z), tuple(float(a) for a in orders)).copy()


@functools.lru_cache(maxsize=4096)
def _rdp_per_step_cached(mechanism: SampledGaussian, z: float, orders: tuple[float, ...]) -> np.ndarray:
    if z <= 0:
        return np.full(len(orders), np.inf)
    fast = mechanism.sampling == "poisson" and 0.0 < mechanism.q < 1.0 and series.SAME_LIBRARIES
    if fast:  # the libraries' own numbers, vectorized (their scalar loops take minutes at large fractional orders)
        bound = series.dpa_poisson_rdp(mechanism.q, z, orders)
    elif mechanism.sampling == "without_replacement" and series.SAME_LIBRARIES:  # dp-accounting's, vectorized
        event = mechanism.event(z)
        bound = series_wor.dpa_wor_rdp(event.sample_size / event.source_dataset_size, event.event.noise_multiplier,
                                       orders)
    else:
        accountant = _rdp.RdpAccountant(list(orders), mechanism.neighboring_relation)
        accountant.compose(mechanism.event(z), 1)
        bound = np.asarray(accountant.rdp, dtype=float)
    if mechanism.sampling == "poisson" and 0.0 < mechanism.q < 1.0:
        fractional = np.array([a != round(a) for a in orders])
        if fractional.any():
            frac_orders = np.asarray(orders)[fractional]
            if fast:
                exact = series.opacus_poisson_rdp(mechanism.q, z, frac_orders)
            else:
                exact = _opacus_poisson_rdp(mechanism.q, z, frac_orders)
            usable = np.isfinite(exact) & (exact <= bound[fractional])
            bound[np.flatnonzero(fractional)[usable]] = exact[usable]
    return bound


def _opacus_poisson_rdp(q: float, z: float, orders: np.ndarray) -> np.ndarray:
    """opacus's signed-series RDP of one Poisson-subsampled Gaussian step (imported lazily: opacus
    imports torch, ~2 s)."""
    import warnings

    from opacus.accountants.analysis.rdp import compute_rdp

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        out = []
        for a in orders:  # one order at a time: an overflow at one order must not spoil the others
            try:
                out.append(float(compute_rdp(q=q, noise_multiplier=z, steps=1, orders=[float(a)])[0]))
            except (OverflowError, ValueError, ZeroDivisionError):
                out.append(np.nan)
    return np.asarray(out, dtype=float)


def poisson_gaussian_rdp(q: float, z: float, orders=STANDARD_ORDERS) -> np.ndarray:
    """RDP of one step of the Poisson-subsampled Gaussian (rate q, multiplier z), add/remove adjacency."""
    return rdp_per_step(SampledGaussian("poisson", q=q), z, orders)


def epsilon_from_rdp(orders, rdp, delta: float | None = None, log_delta: float | None = None):
    """RDP -> (ε, δ): ε = min_α [RDP(α) + ln((α−1)/α) − (ln δ + ln α)/(α−1)] (Balle et al. 2020).

    Vectorized: `rdp` has the orders on its last axis (any leading shape, e.g. rounds); returns
    (ε, optimal order) with the leading shape. Same rules as `dp_accounting`'s `compute_epsilon`
    (ε = 0 when the KL bound already gives δ; orders ≤ 1.01 are unusable), but δ may be given as
    ln δ so that δ far below the float range (needed by the group conversion of kato2024) works.
    """
    if (delta is None) == (log_delta is None):
        raise ValueError("give exactly one of delta and log_delta")
    if log_delta is None:
        if delta <= 0:
            raise ValueError(f"delta must be > 0, got {delta}")
        log_delta = math.log(delta)
    a = np.asarray(orders, dtype=float)
    r = np.asarray(rdp, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        eps = r + np.log1p(-1.0 / a) - (log_delta + np.log(a)) / (a - 1.0)
        # KL shortcut of dp-accounting: δ ≥ sqrt(1 − e^{−RDP}) already holds, so ε = 0.
        kl_ok = 2.0 * log_delta > np.log(-np.expm1(-np.maximum(r, 0.0)))
    eps = np.where(a > 1.01, eps, np.inf)
    eps = np.where(kl_ok & np.isfinite(r), 0.0, eps)
    eps = np.where(r < 0, 0.0, eps)
    eps = np.where(np.isnan(eps), np.inf, eps)
    idx = np.argmin(eps, axis=-1)
    best = np.take_along_axis(eps, idx[..., None], axis=-1)[..., 0]
    return np.maximum(best, 0.0), a[idx]


def epsilon(mechanism: SampledGaussian, z: float, steps: int, delta: float, orders=STANDARD_ORDERS) -> float:
    """ε after `steps` compositions of the mechanism with multiplier z, at δ."""
    eps, _ = epsilon_from_rdp(orders, steps * rdp_per_step(mechanism, z, orders), delta)
    return float(eps)


def epsilon_curve(
    mechanism: SampledGaussian,
    z: float,
    steps_per_round: int,
    rounds: int,
    delta: float,
    orders=STANDARD_ORDERS,
) -> np.ndarray:
    """ε after each round t = 1..rounds, each round being `steps_per_round` steps, in one pass."""
    per_step = rdp_per_step(mechanism, z, orders)
    t = np.arange(1, rounds + 1, dtype=float)[:, None]
    eps, _ = epsilon_from_rdp(orders, t * steps_per_round * per_step[None, :], delta)
    return eps


def epsilon_after_steps(
    mechanism: SampledGaussian, z: float, steps, delta: float, orders=STANDARD_ORDERS
) -> np.ndarray:
    """ε after each count in `steps` (how many times the mechanism has run so far; any shape, 0 gives ε = 0), in one
    vectorized pass: for schedules whose count per round is not t (e.g. the rounds one privacy unit can have taken
    part in, capped by how many it takes at most)."""
    per_step = rdp_per_step(mechanism, z, orders)
    counts = np.asarray(steps, dtype=float)
    if counts.size and counts.min() < 0:
        raise ValueError(f"step counts must be >= 0, got {counts.min()}")
    with np.errstate(invalid="ignore"):  # 0 steps of an order with unbounded RDP: 0, not NaN
        total = np.where(counts[..., None] == 0, 0.0, counts[..., None] * per_step)
    eps, _ = epsilon_from_rdp(orders, total, delta)
    return np.asarray(eps, float)


def epsilon_curve_schedule(mechanisms, z: float, delta: float, orders=STANDARD_ORDERS) -> np.ndarray:
    """ε after each round t = 1..len(mechanisms) of a run whose round t is one step of `mechanisms[t-1]` (e.g. a
    sampling rate that changes from round to round): the rounds' RDP adds up (composition), computed once per
    distinct mechanism."""
    per = {m: rdp_per_step(m, z, orders) for m in dict.fromkeys(mechanisms)}
    if not per:
        return np.zeros(0)
    total = np.cumsum(np.stack([per[m] for m in mechanisms]), axis=0)
    eps, _ = epsilon_from_rdp(orders, total, delta)
    return np.asarray(eps, float)


@functools.lru_cache(maxsize=1024)
def calibrate_noise_multiplier(
    mechanism: SampledGaussian,
    target_epsilon: float,
    steps: int,
    delta: float,
    orders: tuple[float, ...] = STANDARD_ORDERS,
    rel_tol: float = 1e-3,
    guess: float | None = None,
) -> float:
    """Smallest noise multiplier z with ε(z) ≤ target (spec/README.md §4), to a relative tolerance, rounded up.

    A bracket lo < hi with ε(lo) > target ≥ ε(hi) is found around `guess` (default 1), then shrunk until
    hi/lo ≤ 1 + rel_tol; the upper end is returned, so ε(z) ≤ target always holds. The bracket shrinks by
    regula falsi on (ln z, ln ε) with the Illinois modification (ln ε is close to linear in ln z, so this needs a
    few accountant evaluations where bisection needs ~10), falling back to bisection when a step gains little.
    Cached per (mechanism, target, steps, δ, orders, tolerance, guess).
    """
    if target_epsilon <= 0:
        raise ValueError(f"target epsilon must be > 0, got {target_epsilon}")
    log_target = math.log(target_epsilon)

    def f(z: float) -> float:
        eps = epsilon(mechanism, z, steps, delta, orders)
        return math.log(eps) - log_target if eps > 0 else -math.inf

    z0 = guess if guess and guess > 0 else 1.0
    lo, hi = z0 / 1.25, z0
    f_hi = f(hi)
    while f_hi > 0:
        lo, hi = hi, hi * 2.0
        if hi > 1e7:
            raise ValueError(f"no noise multiplier ≤ 1e7 reaches ε = {target_epsilon} at δ = {delta}")
        f_hi = f(hi)
    f_lo = f(lo)
    while f_lo <= 0:
        lo, hi, f_hi = lo / 2.0, lo, f_lo
        if lo < 1e-12:
            return hi  # ε stays below the target for any noise at all
        f_lo = f(lo)
    side = 0
    while hi / lo > 1.0 + rel_tol:
        a, b = math.log(lo), math.log(hi)
        if math.isfinite(f_hi) and math.isfinite(f_lo):
            c = b - f_hi * (b - a) / (f_hi - f_lo)
            # stay strictly inside, and not closer to an end than a quarter of the tolerance
            margin = min(math.log1p(rel_tol) / 4, (b - a) / 4)
            c = min(max(c, a + margin), b - margin)
        else:
            c = (a + b) / 2
        mid = math.exp(c)
        f_mid = f(mid)
        if f_mid <= 0:
            hi, f_hi = mid, f_mid
            if side == -1:
                f_lo /= 2  # Illinois: the end kept twice in a row pulls the next step toward it
            side = -1
        else:
            lo, f_lo = mid, f_mid
            if side == 1:
                f_hi /= 2
            side = 1
    return hi
