"""kato2024 Fig 13 (spec §7, sanity check S-K13 of §8): how an allocation spreads the training records over users and
silos. One cell per panel (one allocation instance: <distribution>-U<U>-S<S>-seed<k>); the cell counts n_{u,s}, the
training records of user u in silo s (records with `train_mask`: the unused local test split is not counted, spec
§2.1); the table turns the counts into stacked bars (x = user id, one curve per silo) and the S-K13 diagnostics.

This module is the figure's layout (`RecordsLayout`: import-light, read when the DAG is built), its
cell (`run_cell`) and its table (`table`); the plot is in `bars_plot`.

Table rows (column `quantity`), per panel:
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

from dpfl.figure import FigureLayout
from dpfl.papers.kato2024.layout import panel_of, seed_allocation

SUMMARIES = {"mean_largest_silo_share": "mean largest-silo share", "cv_of_totals": "CV of per-user totals"}


# ------------------------------------------------------------------------------------------------ layout

class RecordsLayout(FigureLayout):
    """Fig 13: one cell per panel (one allocation instance), named by the panel id; nothing worth timing."""

    def cells(self, params: dict) -> list[str]:
        """One cell per panel, named by the panel id."""
        return [panel["id"] for panel in params["panels"]]

    def needs(self, params: dict) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The prepared dataset (its provenance says whether the table is a stand-in's) and every panel's allocation."""
        names = [seed_allocation(params, panel, params["seed"]) for panel in params["panels"]]
        return (params["dataset"],), tuple(dict.fromkeys(names))

    def cell_needs(self, params: dict, cell: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """A cell reads its own panel's allocation only."""
        return self.needs({**params, "panels": [panel_of(params, cell)]})

    def cell_params(self, params: dict, paper_settings: dict, cell: str) -> tuple[dict, dict]:
        """A cell depends on its own panel only."""
        own = {k: v for k, v in params.items() if k != "panels"}
        own["panels"] = [panel_of(params, cell)]
        return own, {}

    def table_values(self, params: dict, table: str) -> dict[str, set]:
        """The setting columns of the table (rows: see the module docstring): each panel's id, U, S, distribution and
        the seed, and the quantities."""
        panels = params["panels"]
        return {"panel": {p["id"] for p in panels}, "users": {int(p["users"]) for p in panels},
                "silos": {int(p["silos"]) for p in panels}, "distribution": {p["distribution"] for p in panels},
                "seed": {int(params["seed"])},
                "quantity": {"records", "user_total", "largest_silo_share", *SUMMARIES}}


# ------------------------------------------------------------------------------------------------ cell

def counts(alloc: dict, n_users: int, n_silos: int):
    """(trained, held_out): U × S counts of the records with and without `train_mask`."""
    import numpy as np

    from dpfl.papers.kato2024.allocation import histogram

    user, silo = np.asarray(alloc["user"]), np.asarray(alloc["silo"])
    mask = np.asarray(alloc["train_mask"]).astype(bool)
    if len(user) != len(silo) or len(user) != len(mask):
        raise ValueError(f"allocation arrays differ in length: user {len(user)}, silo {len(silo)}, "
                         f"train_mask {len(mask)}")
    if len(user) and (user.min() < 0 or user.max() >= n_users):
        raise ValueError(f"allocation has user ids in [{user.min()}, {user.max()}], outside 0..{n_users - 1} "
                         f"(U = {n_users})")
    if len(silo) and (silo.min() < 0 or silo.max() >= n_silos):
        raise ValueError(f"allocation has silo ids in [{silo.min()}, {silo.max()}], outside 0..{n_silos - 1} "
                         f"(S = {n_silos})")
    return histogram(user, silo, n_users, n_silos, mask), histogram(user, silo, n_users, n_silos, ~mask)


def run_cell(job, inputs: dict, log):
    """One panel: the (user, silo) counts of its allocation, one row per pair."""
    import numpy as np
    import pandas as pd

    p = job.params
    panel = panel_of(p, job.cell)
    U, S, seed = int(panel["users"]), int(panel["silos"]), int(p["seed"])
    name = seed_allocation(p, panel, seed)
    with np.load(inputs["allocations"][name], allow_pickle=False) as z:
        alloc = {k: z[k] for k in ("user", "silo", "train_mask")}
    trained, held = counts(alloc, U, S)
    log(f"{job.cell}: {name}: {int(trained.sum())} training records of {U} users in {S} silos "
        f"({int(held.sum())} local-test records not counted)")
    users, silos = np.meshgrid(np.arange(U), np.arange(S), indexing="ij")
    return pd.DataFrame({"panel": panel["id"], "user": users.ravel(), "silo": silos.ravel(),
                         "records": trained.ravel(), "held_out": held.ravel(), "users": U, "silos": S,
                         "distribution": panel["distribution"], "seed": seed, "allocation": name})


# ------------------------------------------------------------------------------------------------ table

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
    order = [p["id"] for p in params["panels"]]
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
