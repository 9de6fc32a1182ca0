"""The shape of a lowy2023 figure, read when the DAG is built: its cells (one per panel and method), the data
they need, and the part of the params each cell uses."""

from __future__ import annotations

from dpfl.figure import FigureLayout
from dpfl.papers.lowy2023.methods import BY_ID, METHODS


class LowyLayout(FigureLayout):
    """Figs 4-9: one cell per (panel, method), "<panel>-<method>", every trial of the method on the panel."""

    def cells(self, params: dict) -> list[str]:
        """One cell per (panel, method): "<panel>-<method>"."""
        return [f"{panel['id']}-{m.id}" for panel in params["panels"] for m in METHODS]

    def needs(self, params: dict) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(prepared datasets, allocations): MNIST runs on the PCA (even, odd) silo pool (allocation
        `lowy2023-mnist-pairs` in config/papers/lowy2023.yaml); insurance and obesity on the prepared tables."""
        if params["experiment"] == "mnist":
            return ("mnist",), ("lowy2023-mnist-pairs",)
        return (params["experiment"],), ()

    def cell_params(self, params: dict, paper_settings: dict, cell: str) -> tuple[dict, dict]:
        """What one cell depends on, and nothing more: its panel, its method's step grid, and the noise settings only
        if it is private (a non-private cell sees only ε_max). So editing one method's grid (or one panel, or an ε
        below the largest) in the YAML reruns exactly the cells that use it."""
        panel_id, method_id = cell.split("-", 1)
        method = BY_ID[method_id]
        grids = params["step_grids"]
        grid_key = method.id if method.id in grids else method.update
        own = {**params, "panels": [p for p in params["panels"] if p["id"] == panel_id],
               "step_grids": {grid_key: grids[grid_key]}}
        if not method.private:  # a baseline uses the ε grid only through K = ⌊n·sqrt(ε_max/(4R))⌋
            own["epsilons"] = [max(params["epsilons"])]
        return own, (paper_settings if method.private else {})

    def bench_units(self, params: dict) -> tuple[int, str]:
        """How many units of work the full figure runs per cell, and their name."""
        return int(params["trials"]), "trial"

    def bench_params(self, params: dict, units: int) -> dict:
        """The benchmark's reduced run of a cell: `units` trials."""
        return {**params, "trials": int(units)}

    def table_values(self, params: dict, table: str) -> dict[str, set]:
        """The setting columns of the tidy table (dpfl.papers.lowy2023.table.aggregate): panel ids, every method's id
        (`algorithm`) and label (`curve`), and x = the ε grid (every method, the flat baselines too)."""
        return {"panel": {p["id"] for p in params["panels"]}, "algorithm": {m.id for m in METHODS},
                "curve": {m.label for m in METHODS}, "x": {float(e) for e in params["epsilons"]}}

