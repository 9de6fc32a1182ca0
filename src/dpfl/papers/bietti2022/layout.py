"""The shape of a bietti2022 training figure, read when the DAG is built.

A figure's params hold one or more *grids* (`grids: {<id>: {task, clip, sigmas, levels, etas, …}}`): Fig 1a–d one
each, Fig 2 one per panel. A grid's runs are split into cells that share a data stream and a noise multiplier:
"<grid>-local" (a = 0: w never moves, so σ does not matter and these runs are made once per η, not once per σ) and
"<grid>-sigma<σ>" (every a > 0 and η at that σ). Every cell is one vectorized run over its configs
(dpfl.papers.bietti2022.cell). A figure that shows a subset of another figure's runs (Fig 1c of Fig 2's EMNIST
panel) lists the same grid and reads that figure's cells (`reuse_from: fig2`) when the jobs are identical;
`show: {sigmas, levels}` picks what it draws.
"""

from __future__ import annotations

from dpfl.figure import FigureLayout
import math

#: the prepared dataset of each federated task (the synthetic task is generated in code)
TASK_DATASETS = {"emnist": "emnist", "stackoverflow": "stackoverflow"}
SHARED = ("delta", "seeds", "dtype", "implementation")  # run settings every cell reads besides its grid


def level(value) -> float:
    """A personalization level a = αQ from the YAML: a number ≥ 0 or the string "inf"."""
    a = math.inf if isinstance(value, str) and value.strip().lower() in ("inf", "infinity", "∞") else float(value)
    if not a >= 0:
        raise ValueError(f"personalization level {value!r} must be a number ≥ 0 or \"inf\"")
    return a


def level_name(a: float) -> str:
    """The label of a level in tables and legends: "inf" or the shortest decimal ("0.3", "10")."""
    return "inf" if math.isinf(a) else f"{a:g}"


def parse_cell(cell: str) -> tuple[str, float | None]:
    """(grid id, σ) of a cell; σ None for the a = 0 cell."""
    gid, _, rest = cell.rpartition("-")
    if gid and rest == "local":
        return gid, None
    if gid and rest.startswith("sigma"):
        try:
            return gid, float(rest[len("sigma"):])
        except ValueError:
            pass
    raise ValueError(f"bietti2022 cell {cell!r} is neither '<grid>-local' nor '<grid>-sigma<σ>'")


def evaluation_rounds(rounds: int, every: int | None) -> set[int]:
    """The rounds evaluated (before that round's update; `rounds` = after the last): every round when `every` is
    None (the synthetic task), else 0, every, 2·every, … and the last (spec §2)."""
    return set(range(rounds + 1)) if every is None else set(range(0, rounds, int(every))) | {rounds}


class GridLayout(FigureLayout):
    """Figs 1a-d, 2: per grid, "<grid>-local" (a = 0) and "<grid>-sigma<σ>" (every a > 0 and η at σ)."""

    def cells(self, params: dict) -> list[str]:
        out = []
        for gid, grid in params["grids"].items():
            levels = [level(a) for a in grid["levels"]]
            if 0.0 in levels:
                out.append(f"{gid}-local")
            if any(a > 0 for a in levels):
                out += [f"{gid}-sigma{float(s):g}" for s in grid["sigmas"]]
        return out

    def needs(self, params: dict) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(prepared datasets, allocations); settings that cannot work stop the DAG here, before any job."""
        datasets = []
        for gid, grid in params["grids"].items():
            if grid["task"] == "synthetic":
                continue
            Q, N = int(grid["users_per_round"]), int(grid["users"])
            if Q > N:
                raise ValueError(f"config/papers/bietti2022.yaml: params.grids.{gid}.users_per_round: Q = {Q} is "
                                 f"larger than params.grids.{gid}.users N = {N}; allowed: 1 ≤ Q ≤ N (users are sampled "
                                 f"at rate q = Q/N)")
            datasets.append(TASK_DATASETS[grid["task"]])
        return tuple(dict.fromkeys(datasets)), ()

    def cell_needs(self, params: dict, cell: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """A cell reads its own grid's dataset only."""
        gid, _ = parse_cell(cell)
        return self.needs({**params, "grids": {gid: params["grids"][gid]}})

    def cell_params(self, params: dict, paper_settings: dict, cell: str) -> tuple[dict, dict]:
        """A cell sees the shared run settings, its grid, its σ (none for the a = 0 cell) and its levels only: editing
        another σ, level or grid reruns only the cells that use it."""
        gid, sigma = parse_cell(cell)
        grid = params["grids"][gid]
        own = {k: params[k] for k in SHARED if k in params}
        own.update({k: v for k, v in grid.items() if k not in ("sigmas", "levels")}, grid=gid)
        own["levels"] = [a for a in grid["levels"] if (level(a) == 0) == (sigma is None)]
        own["sigmas"] = [] if sigma is None else [sigma]
        return own, {}

    def reused_cells(self, params: dict) -> dict[str, str]:
        """{cell: figure}: every cell from `reuse_from`, read there when both jobs are identical
        (dpfl.jobs.cell_sources)."""
        source = params.get("reuse_from")
        return {cell: source for cell in self.cells(params)} if source else {}

    def gpu_cell(self, params: dict) -> bool:
        """A cell worth a GPU (dpfl.jobs.cell_gpu): the CNN grids (Fig 1d, Fig 2's EMNIST CNN panel)."""
        return params.get("model", "linear") == "cnn"

    def bench_units(self, params: dict) -> tuple[int, str]:
        """Rounds of the figure's runs where configured (federated tasks with `rounds: null` take T from the data:
        their cells report it, dpfl.bench uses that) and their name."""
        return max([int(g["rounds"]) for g in params["grids"].values() if g.get("rounds")] or [0]), "round"


    def bench_params(self, params: dict, units: int) -> dict:
        """The benchmark's reduced run of a cell: `units` rounds."""
        return {**params, "rounds": int(units)}

    def table_values(self, params: dict, table: str) -> dict[str, set]:
        """The setting columns of the tidy table (dpfl.papers.bietti2022.table). Fig 1 (one grid): one panel
        "σ = <σ>" per shown σ the grid ran (`sigma`), the shown levels it ran and the `best_of` groups with a shown
        member (`level`, by name: "0", "0.3", "inf", "small"; the ε rows' empty level reads back as missing), the
        quantity (the metric's, and eps where a panel has σ > 0 and a level a > 0 ran) and the windows. Fig 2: a
        panel per grid, its metric and gain_area, the fixed curves, a level label per finite a > 0 (the private
        points, where σ > 0 ran), their σ and levels, and the windows."""
        grids = params["grids"]
        impl = params.get("implementation") or {}

        def metric(grid):
            if grid["task"] != "synthetic":
                return "accuracy"
            return "excess_risk_per_coordinate" if impl.get("excess_risk") == "coordinate_mean" else "excess_risk"

        if table.endswith(":fig1"):
            grid = next(iter(grids.values()))
            show = params.get("show") or {}
            ran = [level(a) for a in grid["levels"]]
            levels = [a for a in (level(a) for a in show.get("levels", grid["levels"])) if a in ran]
            ran_sigmas = [float(s) for s in grid["sigmas"]]
            sigmas = [float(s) for s in show.get("sigmas", grid["sigmas"]) if float(s) in ran_sigmas]
            eps_rows = any(s > 0 for s in sigmas) and any(a > 0 for a in ran)
            groups = {g for g, members in (params.get("best_of") or {}).items()
                      if any(level(a) in levels for a in members)}
            return {"panel": {f"σ = {s:g}" for s in sigmas}, "sigma": set(sigmas),
                    "level": {level_name(a) for a in levels} | groups,
                    "quantity": {"excess_risk" if grid["task"] == "synthetic" else "accuracy"}
                    | ({"eps"} if eps_rows else set()),
                    "window": {"round", "early_round", "final"}}
        out = {"panel": set(grids), "quantity": {metric(g) for g in grids.values()} | {"gain_area"},
               "curve": {"local only", "global only", "best personalized", "best of local and global", "gain"},
               "level": {"0"}, "sigma": set(), "window": {"point", "budget", "summary"}}
        for grid in grids.values():
            private = [float(s) for s in grid["sigmas"] if float(s) > 0]
            finite = [a for a in (level(a) for a in grid["levels"]) if 0 < a < math.inf]
            if not private:
                continue
            out["sigma"] |= set(private)
            out["level"] |= {level_name(a) for a in (level(a) for a in grid["levels"]) if a > 0}
            b2 = grid.get("model") == "cnn" and impl.get("cnn_local_step") == "times_users"  # table._level_label
            Q = int(grid.get("users_per_round") or 1)
            out["curve"] |= {f"αQ = {level_name(a)}" + (f" (effective {a / Q:g})" if b2 else "") for a in finite}
            if math.inf in [level(a) for a in grid["levels"]]:
                out["window"].add("smallest_global_eps")
        return out

    def bench_evaluations(self, params: dict, rounds: int) -> int:
        """How many evaluations a cell with these params makes in `rounds` rounds (dpfl.bench projects their time apart
        from the rounds')."""
        return len(evaluation_rounds(rounds, None if params["task"] == "synthetic" else params["eval_every"]))

