"""The shape of a bietti2022 training figure, read when the DAG is built. Runs of one figure are split into
cells that share a data stream and a noise multiplier: "local" (a = 0: w never moves, so σ does not matter and
these runs are made once per η, not once per σ) and "sigma<σ>" (every a > 0 and η at that σ). Every cell is one
vectorized grid (dpfl.papers.bietti2022.ppsgd)."""

from __future__ import annotations

import math


def level(value) -> float:
    """A personalization level a = αQ from the YAML: a number ≥ 0 or the string "inf"."""
    a = math.inf if isinstance(value, str) and value.strip().lower() in ("inf", "infinity", "∞") else float(value)
    if not a >= 0:
        raise ValueError(f"personalization level {value!r} must be a number ≥ 0 or \"inf\"")
    return a


def level_name(a: float) -> str:
    """The label of a level in tables and legends: "inf" or the shortest decimal ("0.3", "10")."""
    return "inf" if math.isinf(a) else f"{a:g}"


def sigma_cell(sigma: float) -> str:
    return f"sigma{float(sigma):g}"


def cells(params: dict) -> list[str]:
    levels = [level(a) for a in params["levels"]]
    out = ["local"] if 0.0 in levels else []
    if any(a > 0 for a in levels):
        out += [sigma_cell(s) for s in params["sigmas"]]
    return out


def parse_cell(cell: str) -> float | None:
    """None for the a = 0 cell, else its σ."""
    if cell == "local":
        return None
    if not cell.startswith("sigma"):
        raise ValueError(f"bietti2022 cell {cell!r} is neither 'local' nor 'sigma<σ>'")
    return float(cell[len("sigma"):])


#: the prepared dataset of each federated task (the synthetic task is generated in code)
TASK_DATASETS = {"emnist": "emnist"}


def needs(params: dict) -> tuple[tuple[str, ...], tuple[str, ...]]:
    return ((), ()) if params["task"] == "synthetic" else ((TASK_DATASETS[params["task"]],), ())


def cell_params(params: dict, paper_settings: dict, cell: str) -> tuple[dict, dict]:
    """A cell sees its σ (none for the a = 0 cell) and its levels only: editing another σ reruns only that cell."""
    sigma = parse_cell(cell)
    levels = [a for a in params["levels"] if (level(a) == 0) == (sigma is None)]
    own = {k: v for k, v in params.items() if k not in ("sigmas", "levels", "panels")}
    own.update(levels=levels, sigmas=[] if sigma is None else [sigma])
    return own, {}


def bench_params(params: dict, units: int) -> dict:
    """The benchmark's reduced run of a cell: `units` rounds."""
    return {**params, "rounds": int(units)}


def bench_units(params: dict) -> tuple[int, str]:
    return int(params["rounds"]), "round"
