"""lowy2023: the figure table from the cell tables (spec §5): a group-by over small tables (every privacy
diagnostic, the accountant's multiplier included, is computed in the cells)."""

from __future__ import annotations

import numpy as np
import pandas as pd



def aggregate(params: dict, tables: list[pd.DataFrame], log) -> pd.DataFrame:
    """Mean over trials per method and ε, with error bars (p95 − p5)/2 drawn symmetrically (spec §5);
    non-private methods are tuned once per trial and drawn flat across ε. Error-rate bars are clamped to [0, 1]
    with `implementation.clamp_error_bars` (the authors' code, Q12)."""
    runs = pd.concat(tables, ignore_index=True)
    eps_grid = np.asarray(params["epsilons"], float)
    clamp = params["implementation"]["clamp_error_bars"] and params["experiment"] in ("mnist", "obesity")
    out = []
    for (panel, algorithm), d in runs.groupby(["panel", "algorithm"], sort=False):
        for eps in eps_grid:
            v = d if d["eps"].isna().all() else d[np.isclose(d["eps"], eps)]
            vals = v["test"].to_numpy(float)
            lo, hi = np.percentile(vals, 5), np.percentile(vals, 95)
            if clamp:
                lo, hi = max(0.0, lo), min(1.0, hi)
            half = max(hi - lo, 0.0) / 2 if params["error_bars"] else 0.0
            mean = float(vals.mean())
            out.append({
                "panel": panel, "curve": v["label"].iloc[0], "algorithm": algorithm, "x": eps, "y": mean,
                "y_lo": mean - half, "y_hi": mean + half,
                "se": float(vals.std(ddof=1) / np.sqrt(len(vals))) if len(vals) > 1 else 0.0,
                "trials": len(vals), "n_silos": int(v["n_silos"].iloc[0]),
                "silos_per_round": int(v["silos_per_round"].iloc[0]), "K": int(v["K"].iloc[0]),
                "upsilon2": float(v["upsilon2"].mean(skipna=False)),  # n/a if any trial's optimum is not certified
                "eps_certified": float(v["eps_certified"].max()) if v["eps_certified"].notna().any() else np.nan,
                "eps_certified_paper_noise": (float(v["eps_certified_paper_noise"].max())
                                              if v["eps_certified_paper_noise"].notna().any() else np.nan),
                # how the certified ε differs from the paper's accounting for this variant ("" when it does not)
                "certification": "; ".join(dict.fromkeys(str(t) for t in v.get("certification", pd.Series(dtype=str))
                                                         .fillna("") if t)),
                "z_used": float(v["z_used"].min()), "z_paper": float(v["z_paper"].min()),
                "z_accountant": float(v["z_accountant"].min()),
                "step_median": float(v["step"].median()), "diverged_reps": int(v["diverged_reps"].sum()),
                "grid_edge_share": float((v["grid_edge"] != "").mean()),
            })
    return pd.DataFrame(out)
