"""One cell of kato2024 Fig 13: the counts n_{u,s} of a panel's allocation, the training records of user u in silo s
(records with `train_mask`: the unused local test split is not counted, spec §2.1). `run_cell` reads the job's params
once into frozen settings (dpfl.papers.kato2024.records.settings.RecordsSettings)."""

from __future__ import annotations

from dpfl.figure import CellResult
from dpfl.papers.kato2024.records.settings import RecordsSettings


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


def run_cell(job, inputs: dict, log) -> CellResult:
    """One panel: the (user, silo) counts of its allocation, one row per pair (nothing timed)."""
    import numpy as np
    import pandas as pd

    settings = RecordsSettings.from_job(job)  # the boundary: below, typed settings only
    panel = settings.panel
    U, S, seed = panel.users, panel.silos, settings.seed
    name = settings.allocation_name
    with np.load(inputs["allocations"][name], allow_pickle=False) as z:
        alloc = {k: z[k] for k in ("user", "silo", "train_mask")}
    trained, held = counts(alloc, U, S)
    log(f"{job.cell}: {name}: {int(trained.sum())} training records of {U} users in {S} silos "
        f"({int(held.sum())} local-test records not counted)")
    users, silos = np.meshgrid(np.arange(U), np.arange(S), indexing="ij")
    return CellResult(pd.DataFrame({"panel": panel.id, "user": users.ravel(), "silo": silos.ravel(),
                                    "records": trained.ravel(), "held_out": held.ravel(), "users": U, "silos": S,
                                    "distribution": panel.distribution, "seed": seed, "allocation": name}))
