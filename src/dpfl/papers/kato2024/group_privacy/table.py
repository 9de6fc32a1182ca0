"""The table of kato2024 Fig 2 (spec §5, analytic): the group-privacy ε of a group of k records vs k, by the RDP
conversion and by the normal-DP conversion."""

from __future__ import annotations

import numpy as np
import pandas as pd

from dpfl.privacy.group import group_epsilon_dp, group_epsilon_rdp
from dpfl.privacy.rdp import STANDARD_ORDERS, SampledGaussian, rdp_per_step


def fig2(params: dict, log) -> pd.DataFrame:
    mech = SampledGaussian("poisson", q=params["q"])
    z, steps, delta = params["sigma"], params["steps"], params["delta"]

    def record_rdp(orders):
        return steps * rdp_per_step(mech, z, orders)

    rows = []
    for k in params["k_rdp"]:
        r = group_epsilon_rdp(record_rdp, k, delta, orders=params["group_orders"])
        log(f"RDP conversion k = {k}: ε = {r['epsilon']:.6g} (k' = {r['k_effective']}, order {r['record_order']:.4g})")
        rows.append({"curve": "RDP conversion", "conversion": "rdp", "x": k, "y": r["epsilon"], "k": k,
                     "k_effective": r["k_effective"], "optimal_order": r["record_order"], "converged": True})
    rdp_std = record_rdp(np.asarray(STANDARD_ORDERS))
    for k in params["k_normal"]:
        r = group_epsilon_dp(rdp_std, k, delta)
        log(f"normal DP conversion k = {k}: ε = {r['epsilon']:.6g} "
            f"(ln δ' = {r.get('log_delta_prime', np.log(delta)):.6g}, "
            f"{r['iterations']} bisection steps{'' if r['converged'] else ', NOT converged'})")
        rows.append({"curve": "normal DP conversion", "conversion": "normal", "x": k, "y": r["epsilon"], "k": k,
                     "k_effective": r["k_effective"], "log_delta_prime": r.get("log_delta_prime", np.log(delta)),
                     "converged": r["converged"]})
    df = pd.DataFrame(rows)
    df["sigma"], df["q"], df["steps"], df["delta"] = z, params["q"], steps, delta
    return df
