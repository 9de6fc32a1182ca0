"""The configuration limits of bietti2022 (dpfl.config_limits): its grids (users sampled per round, users of the
prepared data, the model's task, the synthetic task's dimensions, distinct σ cells, Fig 1's one grid and `show`);
the docstring of `_bietti_training` names the code that assumes each limit.
"""

from __future__ import annotations

from dpfl.config_limits.variant import Variant, _distinct
from dpfl.papers import FIGURES

def _bietti_training(v: Variant) -> None:
    """bietti2022 Figs 1a-d and 2 (dpfl.papers.bietti2022.layout, tasks, table), per grid:

    - federated tasks: users_per_round Q ≤ users N (users are sampled at rate q = Q/N: layout.GridLayout.needs), and
      N ≤ the users the prepared data holds (federated.FederatedTask.from_arrays, sparse.SparseTask.from_arrays);
    - model cnn only on an image task (emnist: tasks.Setup);
    - the synthetic task: synthetic.personal ≤ synthetic.dim (ppsgd.Synthetic);
    - sigmas name distinct cells ("<grid>-sigma<σ>", layout.GridLayout.cells);
    - Fig 1 (table fig1): exactly one grid, and `show` picks at least one of the grid's levels and σ (table.fig1
      refuses both only after every cell ran)."""
    from dpfl.papers.bietti2022.layout import TASK_DATASETS, level
    from dpfl.papers.bietti2022.tasks import FEDERATED

    p = v.params
    for gid, grid in p["grids"].items():
        g = ("grids", gid)
        task = grid["task"]
        _distinct(v, grid["sigmas"], lambda j, g=g: v.p(*g, "sigmas", j), lambda s: f"{float(s):g}", "σ cell")
        if task == "synthetic":
            syn = grid["synthetic"]
            if syn["personal"] > syn["dim"]:
                v.problem(v.p(*g, "synthetic", "personal"),
                          f"{syn['personal']} must be <= {syn['dim']}, the task's dim "
                          f"({v.ref(v.p(*g, 'synthetic', 'dim'))}): the personal coordinates are among the dim "
                          f"coordinates (dpfl.papers.bietti2022.ppsgd.Synthetic)")
        else:
            N, Q = int(grid["users"]), int(grid["users_per_round"])
            if Q > N:
                v.problem(v.p(*g, "users_per_round"),
                          f"{Q} must be <= {N}, the grid's users ({v.ref(v.p(*g, 'users'))}): users are sampled at "
                          f"rate q = Q/N (dpfl.papers.bietti2022.layout)")
            dataset = TASK_DATASETS[task]
            size = v.data(dataset)
            if N > size.counts["users"]:
                v.problem(v.p(*g, "users"),
                          f"{N} must be <= {size.counts['users']}, the users of the prepared {dataset} data "
                          f"({size.origin}): a grid trains on the first N users (dpfl.papers.bietti2022.federated, "
                          f"sparse)")
        if grid["model"] == "cnn":
            images = [t for t, f in FEDERATED.items() if not f.sparse]
            if task not in images:
                v.problem(v.p(*g, "model"),
                          f"'cnn' needs an image task ({', '.join(images)}), not task {task!r} "
                          f"({v.ref(v.p(*g, 'task'))}) (dpfl.papers.bietti2022.tasks)")
    if not FIGURES[(v.paper, v.figure)].table.endswith(":fig1"):
        return
    if len(p["grids"]) != 1:
        v.problem(v.p("grids"), f"{len(p['grids'])} grids ({', '.join(p['grids'])}); Fig 1 draws exactly one "
                                f"(dpfl.papers.bietti2022.table.fig1)")
        return
    grid = next(iter(p["grids"].values()))
    show = p.get("show") or {}
    ran = [level(a) for a in grid["levels"]]
    if "levels" in show and not any(level(a) in ran for a in show["levels"]):
        v.problem(v.p("show", "levels"), f"{show['levels']} picks none of the grid's levels {grid['levels']}; "
                                         f"allowed: at least one of them (dpfl.papers.bietti2022.table.fig1)")
    sigmas = [float(s) for s in grid["sigmas"]]
    if "sigmas" in show and not any(float(s) in sigmas for s in show["sigmas"]):
        v.problem(v.p("show", "sigmas"), f"{show['sigmas']} picks none of the grid's sigmas {grid['sigmas']}; "
                                         f"allowed: at least one of them (dpfl.papers.bietti2022.table.fig1)")
