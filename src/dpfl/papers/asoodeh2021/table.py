"""asoodeh2021 Fig 2: the Theorem 2 privacy curve δ(ε) (spec/analytic.md §1)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from dpfl.privacy.bounds import asoodeh_delta_closed, asoodeh_delta_sum, asoodeh_radii, one_minus_theta, theta


def fig2(params: dict, log) -> pd.DataFrame:
    g = params["eps_grid"]
    eps = np.linspace(g["start"], g["stop"], g["num"])
    n = params["n_users"]
    frames = []
    for q in params["q"]:
        m = q * n
        if abs(m - round(m)) > 1e-9:
            raise ValueError(f"q = {q} gives a non-integer batch m = q·n = {m} (n = {n})")
        m = int(round(m))
        common = dict(lipschitz=params["lipschitz"], radius=params["radius"], sigma=params["sigma"])
        delta = asoodeh_delta_closed(eps, n, m, step_size=params["step_size"], **common)
        T_int = math.ceil(n / m)
        delta_sum = asoodeh_delta_sum(
            eps, n, m, step_sizes=[params["step_size"]] * T_int, sigmas=[params["sigma"]] * T_int, **{
                k: common[k] for k in ("lipschitz", "radius")}
        )
        r1, r2 = asoodeh_radii(m, params["lipschitz"], params["radius"], params["step_size"], params["sigma"])
        th1 = theta(eps, r1)
        log(f"q = {q}: m = {m}, T = n/m = {n / m:.4g}, r1 = {r1:.4g}, r2 = {r2:.4g}")
        frames.append(
            pd.DataFrame(
                {
                    "curve": f"q = {q:g}",
                    "x": eps,
                    "y": delta,
                    "q": q,
                    "m": m,
                    "T": n / m,
                    "delta_sum": delta_sum,
                    "T_sum": T_int,
                    "theta_r1": th1,
                    "delta_lower": (m / n) * th1,
                    "one_minus_theta_r2": one_minus_theta(eps, r2),
                    "r1": r1,
                    "r2": r2,
                }
            )
        )
    return pd.concat(frames, ignore_index=True)
