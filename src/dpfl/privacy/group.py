"""Group privacy: ε for groups of k records (kato2024 §5, Fig 2; used by ULDP-GROUP-k).

Two conversions, both starting from a record-level RDP curve:
- RDP group conversion (Mironov 2017, Prop. 2): for k' = 2^c, an (α, ρ)-RDP mechanism with α ≥ 2k' is
  (α/k', 3^c ρ)-RDP for groups of k' records. A group of k records is protected at least as well as a
  group of k' = largest power of 2 ≤ k records; like the paper we report that (lower) value.
- Normal-DP group conversion: (ε, δ')-DP ⇒ (kε, k e^{(k−1)ε} δ')-DP; δ' is found by bisection so
  that the group δ equals the target δ.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from dpfl.privacy.rdp import STANDARD_ORDERS, epsilon_from_rdp

RdpFunction = Callable[[np.ndarray], np.ndarray]
"""Maps an array of orders to the record-level RDP (already composed over all steps) at those orders."""

#: Largest k for which the normal-DP conversion has a solution with the standard orders (max order 63).
NORMAL_DP_MAX_K = 62
#: The record-level order sets of the RDP group conversion (group_rdp_orders): `mironov` keeps the orders
#: Prop. 2 covers (a ≥ 2k'); `authors` all of the authors' set (kato2024 K4, the YAML's `group_orders`)
ORDER_SETS = ("mironov", "authors")


def largest_power_of_two_leq(k: int) -> int:
    if k < 1:
        raise ValueError(f"group size must be ≥ 1, got {k}")
    return 1 << (int(k).bit_length() - 1)


def group_rdp_orders(k_pow2: int, orders: str = "mironov") -> np.ndarray:
    """Record-level orders a at which RDP is evaluated for a group of k' = 2^c records.

    {2k' + j/10 : j = 0..99} ∪ linspace(k'+10, 64k', 20). `orders` "mironov": only a ≥ 2k' (Prop. 2's condition);
    "authors": all of them, as the authors' code does (this includes a = k'+10 < 2k' for k' ≥ 16, which the
    proposition does not cover and which gives a smaller ε).
    """
    if orders not in ORDER_SETS:
        raise ValueError(f"orders must be one of {', '.join(ORDER_SETS)}, got {orders!r}")
    if k_pow2 & (k_pow2 - 1):
        raise ValueError(f"k' must be a power of two, got {k_pow2}")
    candidates = np.concatenate([2 * k_pow2 + np.arange(100) / 10.0, np.linspace(k_pow2 + 10, 64 * k_pow2, 20)])
    return candidates if orders == "authors" else candidates[candidates >= 2 * k_pow2]


def group_epsilon_rdp(rdp_fn: RdpFunction, k: int, delta: float, orders: str = "mironov") -> dict:
    """ε for groups of k records via the RDP group conversion at k' = largest power of 2 ≤ k.

    Returns {epsilon, k_effective, group_order, record_order}. k' = 1 is the plain conversion with
    the standard orders; `orders` as group_rdp_orders.
    """
    kp = largest_power_of_two_leq(k)
    if kp == 1:
        orders = np.asarray(STANDARD_ORDERS)
        eps, best = epsilon_from_rdp(orders, rdp_fn(orders), delta)
        return {"epsilon": float(eps), "k_effective": 1, "group_order": float(best), "record_order": float(best)}
    c = int(round(math.log2(kp)))
    record_orders = group_rdp_orders(kp, orders)
    group_orders = record_orders / kp
    group_rdp = 3.0**c * np.asarray(rdp_fn(record_orders), dtype=float)
    eps, best = epsilon_from_rdp(group_orders, group_rdp, delta)
    return {
        "epsilon": float(eps),
        "k_effective": kp,
        "group_order": float(best),
        "record_order": float(best * kp),
    }


def dp_group_conversion(epsilon: float, delta: float, k: int) -> tuple[float, float]:
    """(ε, δ)-DP for one record ⇒ (kε, k·e^{(k−1)ε}·δ)-DP for groups of k records."""
    return k * epsilon, k * math.exp((k - 1) * epsilon) * delta


def group_epsilon_dp(
    rdp_standard: np.ndarray,
    k: int,
    delta: float,
    rel_accuracy: float = 1e-3,
    max_iter: int = 10_000,
) -> dict:
    """ε for groups of k records via the normal-DP group conversion (kato2024 §5).

    `rdp_standard` is the record-level RDP at STANDARD_ORDERS. Finds δ' with k·e^{(k−1)ε(δ')}·δ' = δ by
    bisection on ln δ' ∈ [−1e20, ln δ] until |group δ − δ| < δ·rel_accuracy, and reports k·ε(δ').
    With the largest order 63 there is no solution for k ≥ 63; k > 62 is clamped to 62 (reported in
    `k_effective`). Near k ≈ 60 the problem is ill-conditioned: that blow-up is part of the paper's figure.
    """
    orders = np.asarray(STANDARD_ORDERS)
    rdp_standard = np.asarray(rdp_standard, dtype=float)
    if k == 1:
        eps, _ = epsilon_from_rdp(orders, rdp_standard, delta)
        return {"epsilon": float(eps), "k_effective": 1, "delta_prime": delta, "iterations": 0, "converged": True}
    k_eff = min(int(k), NORMAL_DP_MAX_K)
    log_target = math.log(delta)
    lo, hi = -1e20, log_target
    log_group_delta = math.nan
    eps_record = math.nan
    converged = False
    iterations = 0
    for iterations in range(1, max_iter + 1):
        mid = 0.5 * (lo + hi)
        eps_record = float(epsilon_from_rdp(orders, rdp_standard, log_delta=mid)[0])
        log_group_delta = math.log(k_eff) + (k_eff - 1) * eps_record + mid
        if abs(math.expm1(log_group_delta - log_target)) < rel_accuracy:
            converged = True
            break
        if log_group_delta > log_target:
            hi = mid
        else:
            lo = mid
        if hi - lo <= 1e-12 * max(1.0, abs(mid)):
            break  # interval exhausted at float precision
    return {
        "epsilon": k_eff * eps_record,
        "k_effective": k_eff,
        "delta_prime": math.exp(mid) if mid > -745 else 0.0,
        "log_delta_prime": mid,
        "iterations": iterations,
        "converged": converged,
    }


def group_epsilon_curve(parts, z: float, rounds: int, k: int, delta: float, orders: str = "mironov",
                        parallel: str = "rdp", conversion: str = "rdp", every: int = 1) -> np.ndarray:
    """ε for groups of k records after each round t = 1..rounds, for a mechanism run in parallel on disjoint parts
    (kato2024 ULDP-GROUP-k: each silo runs DP-SGD on its own records; spec §5).

    `parts`: [(SampledGaussian, steps per round)], one per silo, all with noise multiplier z. Parallel composition
    (`parallel: rdp`, the paper): the per-order maximum over parts of the record-level RDP, then the group conversion
    at k' = largest power of 2 ≤ k (`orders` as group_rdp_orders). `parallel: epsilon` (the authors'
    code, K5) converts each part separately and takes the largest ε, which is never larger.
    `conversion: normal` (K6, the authors' plotting notebook) uses the (ε, δ) group conversion instead
    (group_epsilon_dp, k capped at 62), evaluated at every `every`-th round and the last; NaN between."""
    from dpfl.privacy.rdp import rdp_per_step

    if parallel not in ("rdp", "epsilon"):
        raise ValueError(f"parallel must be 'rdp' or 'epsilon', got {parallel!r}")
    if conversion not in ("rdp", "normal"):
        raise ValueError(f"conversion must be 'rdp' or 'normal', got {conversion!r}")
    if conversion == "normal":
        per_round = np.max([steps * rdp_per_step(mech, z, STANDARD_ORDERS) for mech, steps in parts], axis=0)
        out = np.full(rounds, np.nan)
        for t in range(1, rounds + 1):
            if t % every == 0 or t == rounds:
                out[t - 1] = group_epsilon_dp(t * per_round, k, delta)["epsilon"]
        return out
    if parallel == "epsilon":
        return np.max([group_epsilon_curve([p], z, rounds, k, delta, orders) for p in parts], axis=0)
    kp = largest_power_of_two_leq(k)
    record_orders = np.asarray(STANDARD_ORDERS) if kp == 1 else group_rdp_orders(kp, orders)
    per_round = np.max([steps * rdp_per_step(mech, z, record_orders) for mech, steps in parts], axis=0)
    c = int(round(math.log2(kp)))
    t = np.arange(1, rounds + 1, dtype=float)[:, None]
    eps, _ = epsilon_from_rdp(record_orders / kp, 3.0**c * t * per_round[None, :], delta)
    return np.asarray(eps, dtype=float)
