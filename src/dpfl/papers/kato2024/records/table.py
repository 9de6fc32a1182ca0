"""The tidy table of kato2024 Fig 13: the cells' counts as stacked bars (x = user id, one curve per silo) and the
S-K13 diagnostics.

Rows (column `quantity`), per panel:
  records                  one per (user, silo): curve "silo <s>", x = user id, y = n_{u,s} (the bar segments);
                           `held_out` = that pair's local-test records (not counted)
  user_total               one per user: curve "total", x = user id, y = Σ_s n_{u,s} (the bar height)
  largest_silo_share       one per user: x = user id, y = max_s n_{u,s} / Σ_s n_{u,s} (NaN for a user without
                           training records)
  mean_largest_silo_share  one: x = the seed, y = the mean of largest_silo_share over the users with records
  cv_of_totals             one: x = the seed, y = std/mean of user_total over all U users (population std, ddof 0)
The two summary rows are what S-K13 checks (`bounds`), with x = the allocation's seed.
"""

from __future__ import annotations

from dpfl.papers.kato2024.records.layout import SUMMARIES


def diagnostics(n) -> dict:
    """S-K13 from a U × S count matrix: per-user totals and largest-silo shares (NaN without records), the mean
    share over the users with records and the CV (population std / mean) of the totals over all users."""
    import numpy as np

    n = np.asarray(n, dtype=float)
    total = n.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(total > 0, n.max(axis=1) / total, np.nan)
    has = total > 0
    mean_total = total.mean() if len(total) else np.nan
    return {"total": total, "share": share,
            "mean_largest_silo_share": float(share[has].mean()) if has.any() else float("nan"),
            "cv_of_totals": float(total.std() / mean_total) if mean_total > 0 else float("nan"),
            "users_without_records": int((~has).sum())}


def table(params: dict, tables: list, log):
    """The tidy table of Fig 13 (rows: see the module docstring)."""
    import numpy as np
    import pandas as pd

    cellrows = pd.concat(tables, ignore_index=True)
    order = [panel["id"] for panel in params["panels"]]
    out = []
    for panel in order:
        d = cellrows[cellrows["panel"] == panel]
        if d.empty:
            raise ValueError(f"fig13: no cell table for panel {panel!r}")
        first = d.iloc[0]
        U, S = int(first["users"]), int(first["silos"])
        meta = {"panel": panel, "users": U, "silos": S, "distribution": first["distribution"],
                "seed": int(first["seed"]), "allocation": first["allocation"]}
        n = np.zeros((U, S), dtype=np.int64)
        n[d["user"].to_numpy(), d["silo"].to_numpy()] = d["records"].to_numpy()
        held = np.zeros((U, S), dtype=np.int64)
        held[d["user"].to_numpy(), d["silo"].to_numpy()] = d["held_out"].to_numpy()
        diag = diagnostics(n)
        ids = np.arange(U)
        for s in range(S):
            out.append(pd.DataFrame({**meta, "quantity": "records", "curve": f"silo {s}", "x": ids, "y": n[:, s],
                                     "user": ids, "silo": s, "held_out": held[:, s]}))
        out.append(pd.DataFrame({**meta, "quantity": "user_total", "curve": "total", "x": ids, "y": diag["total"],
                                 "user": ids, "held_out": held.sum(axis=1)}))
        out.append(pd.DataFrame({**meta, "quantity": "largest_silo_share", "curve": "largest-silo share", "x": ids,
                                 "y": diag["share"], "user": ids}))
        summary = {"users_counted": U - diag["users_without_records"],
                   "users_without_records": diag["users_without_records"], "train_records": int(n.sum()),
                   "held_out": int(held.sum())}
        out.append(pd.DataFrame([{**meta, "quantity": q, "curve": label, "x": meta["seed"], "y": diag[q], **summary}
                                 for q, label in SUMMARIES.items()]))
        log(f"panel {panel} ({meta['distribution']}, U = {U}, S = {S}, seed {meta['seed']}): {int(n.sum())} training "
            f"records, mean largest-silo share {diag['mean_largest_silo_share']:.4f}, CV of per-user totals "
            f"{diag['cv_of_totals']:.4f}" + (f", {diag['users_without_records']} users without records"
                                              if diag["users_without_records"] else ""))
    return pd.concat(out, ignore_index=True)
