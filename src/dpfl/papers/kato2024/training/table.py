"""The tidy table of a kato2024 training figure (Figs 4-10): curves over rounds, mean over seeds, with the final and
early windows and the gap rows the claims compare."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

QUANTITIES = ("utility", "test_loss", "test_loss_batch_sum", "eps", "eps_certified")


def curves(params: dict, tables: list[pd.DataFrame], log) -> pd.DataFrame:
    """The tidy table of a training figure (Figs 4, 6-10): per (panel, curve, quantity) the mean over seeds after
    every round (x = round; failed runs leave the mean from their first NaN round on, `seeds` says how many are
    left), ±1 std (y_lo, y_hi) and the standard error; plus, per (panel, curve, quantity), one `window: final` row
    (the last round) and one `window: early` row (the mean over the first half of the rounds), spec §8. Utility is
    higher-is-better; `loss` names the test-loss column the paper plots (mean, or the per-batch sum under K2)."""
    runs = pd.concat(tables, ignore_index=True).rename(columns={"label": "curve"})
    T = int(runs["round"].max())
    meta_cols = ["panel", "method", "curve", "q", "users", "silos", "distribution"]
    out = []
    for keys, d in runs.groupby(meta_cols, sort=False):
        meta = dict(zip(meta_cols, keys))
        n_seeds = d["seed"].nunique()
        extra = {"group_k": float(d["group_k"].median()) if d["group_k"].notna().any() else np.nan,
                 "failed_seeds": int(d.groupby("seed")["failed"].any().sum()), "n_seeds": n_seeds,
                 "multiplier_used": float(d["multiplier_used"].iloc[0]), "device": d["device"].iloc[0],
                 "metric": d["metric"].iloc[0]}
        for quantity in QUANTITIES:
            wide = d.pivot(index="round", columns="seed", values=quantity).sort_index()
            vals = wide.to_numpy(float)
            if np.isnan(vals).all():
                continue
            with np.errstate(invalid="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                mean = np.nanmean(vals, axis=1)
                std = np.nanstd(vals, axis=1, ddof=1) if n_seeds > 1 else np.zeros(len(vals))
            valid = np.isfinite(vals).sum(axis=1)
            se = np.where(valid > 1, np.nan_to_num(std) / np.sqrt(np.maximum(valid, 1)), 0.0)
            for t, m, s, e, v in zip(wide.index, mean, std, se, valid):
                if v == 0:
                    continue
                s = 0.0 if not np.isfinite(s) else s
                row = {**meta, "quantity": quantity, "window": "round", "x": int(t), "y": m, "y_lo": m - s,
                       "y_hi": m + s, "se": e, "seeds": int(v), **extra}
                out.append(row)
                if t == T:  # spec §8 "final": the last round, mean over the seeds still valid there
                    out.append({**row, "window": "final"})
            half = vals[: max(1, T // 2)]
            per_seed = np.nanmean(half, axis=0) if np.isfinite(half).any() else np.full(vals.shape[1], np.nan)
            ok = per_seed[np.isfinite(per_seed)]
            if len(ok):
                out.append({**meta, "quantity": quantity, "window": "early", "x": T // 2, "y": float(ok.mean()),
                            "y_lo": np.nan, "y_hi": np.nan,
                            "se": float(ok.std(ddof=1) / np.sqrt(len(ok))) if len(ok) > 1 else 0.0,
                            "seeds": len(ok), **extra})
    df = pd.DataFrame(out, columns=[*meta_cols, "quantity", "window", "x", "y", "y_lo", "y_hi", "se", "seeds",
                                     "group_k", "failed_seeds", "n_seeds", "multiplier_used", "device", "metric"])
    loss = "test_loss_batch_sum" if params["implementation"]["test_loss"] == "batch_sum" else "test_loss"
    df = pd.concat([df, _weighting_gaps(df, loss), _noniid_gaps(df, loss)], ignore_index=True)
    df["loss"] = loss
    log(f"{df['curve'].nunique()} curves over {df['panel'].nunique()} panels, {T} rounds")
    return df


def _noniid_gaps(df: pd.DataFrame, loss: str) -> pd.DataFrame:
    """Fig 5 (spec §8 C-K5a/b): per method and (U, S) with both a zipf-iid and a zipf-noniid panel, the final
    test-loss gap noniid − iid (positive: non-iid data hurts), as rows `quantity: noniid_gap, window: by_users` with
    x = S and the column `users`, so the claims can compare gaps across U and across methods."""
    final = df[(df["quantity"] == loss) & (df["window"] == "final")]
    rows = []
    for (method, users, silos), d in final.groupby(["method", "users", "silos"], sort=False):
        by = d.set_index("distribution")
        if not {"zipf-iid", "zipf-noniid"} <= set(by.index):
            continue
        iid, noniid = by.loc["zipf-iid"], by.loc["zipf-noniid"]
        rows.append({"panel": f"{iid['panel']}→{noniid['panel']}", "method": method,
                     "curve": f"final-loss gap non-iid − iid, {iid['curve']}, U = {users}", "q": iid["q"],
                     "users": users, "silos": silos, "distribution": "zipf-noniid − zipf-iid", "quantity": "noniid_gap",
                     "window": "by_users", "x": int(silos), "y": float(noniid["y"] - iid["y"]),
                     "se": float(np.hypot(iid["se"], noniid["se"])), "seeds": int(min(iid["seeds"], noniid["seeds"])),
                     "metric": iid["metric"]})
    return pd.DataFrame(rows)


def _weighting_gaps(df: pd.DataFrame, loss: str) -> pd.DataFrame:
    """Figs 8, 9 (spec §8 C-K8a/b): per panel with both ULDP-AVG and ULDP-AVG-w, the final test-loss gap
    AVG − AVG-w (positive: the weighting helps), as rows `quantity: loss_gap, window: by_silos` with x = S, so the
    claims can compare gaps across S and across distributions (`abs_gap` = |gap|)."""
    final = df[(df["quantity"] == loss) & (df["window"] == "final")]
    rows = []
    for panel, d in final.groupby("panel", sort=False):
        by = d.set_index("method")
        if not {"uldp_avg", "uldp_avg_w"} <= set(by.index):
            continue
        gap = float(by.loc["uldp_avg", "y"] - by.loc["uldp_avg_w", "y"])
        first = by.loc["uldp_avg"]
        rows.append({"panel": panel, "method": "gap", "curve": f"final-loss gap AVG − AVG-w, {first['distribution']}",
                     "q": 1.0, "users": first["users"], "silos": first["silos"], "distribution": first["distribution"],
                     "quantity": "loss_gap", "window": "by_silos", "x": int(first["silos"]), "y": gap,
                     "abs_gap": abs(gap), "se": float(np.hypot(by.loc["uldp_avg", "se"], by.loc["uldp_avg_w", "se"])),
                     "seeds": int(min(by.loc["uldp_avg", "seeds"], by.loc["uldp_avg_w", "seeds"])),
                     "metric": first["metric"]})
    return pd.DataFrame(rows)
