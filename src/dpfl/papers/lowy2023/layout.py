"""The shape of a lowy2023 figure, read when the DAG is built: its cells (one per panel, named by the panel id, which
runs the four methods in turn in one process, each run named "<panel>-<method>"), the data they need, and the part of
the params each cell (or run) uses."""

from __future__ import annotations

from dpfl.figure import FigureLayout
from dpfl.papers.lowy2023.methods import BY_ID, METHODS


def run_id(panel_id: str, method_id: str) -> str:
    """The run of `method_id` on a panel: "<panel>-<method>" (a panel id has no "-": the schema's pattern)."""
    return f"{panel_id}-{method_id}"


def parse_run(run: str) -> tuple[str, str]:
    """"a-noisy_mb_sgd" -> ("a", "noisy_mb_sgd")."""
    panel_id, _, method_id = run.partition("-")
    if not panel_id or method_id not in BY_ID:
        raise ValueError(f"lowy2023 run {run!r} is not <panel>-<method> with method one of {', '.join(BY_ID)}")
    return panel_id, method_id


def grid_key(method_id: str, step_grids: dict) -> str:
    """The `step_grids` entry a method tunes over: its own if the YAML has one, else its update's."""
    method = BY_ID[method_id]
    return method.id if method.id in step_grids else method.update


class LowyLayout(FigureLayout):
    """Figs 4-9: one cell per panel, named by the panel id; its runs (`cell_runs`) are the panel's four methods,
    "<panel>-<method>" in the registry's order, computed one after another in the cell's process over every trial
    (each trial's data, optimum and υ*² computed once and shared by the runs)."""

    def cells(self, params: dict) -> list[str]:
        """One cell per panel: its id."""
        return [panel["id"] for panel in params["panels"]]

    def cell_runs(self, params: dict, cell: str) -> list[str]:
        """The panel's methods, in the registry's (legend) order: "<panel>-<method>"."""
        self._panel(params, cell)
        return [run_id(cell, m.id) for m in METHODS]

    def needs(self, params: dict) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(prepared datasets, allocations): MNIST runs on the PCA (even, odd) silo pool (allocation
        `lowy2023-mnist-pairs` in config/papers/lowy2023.yaml); insurance and obesity on the prepared tables."""
        if params["experiment"] == "mnist":
            return ("mnist",), ("lowy2023-mnist-pairs",)
        return (params["experiment"],), ()

    def cell_params(self, params: dict, paper_settings: dict, cell: str) -> tuple[dict, dict]:
        """What one panel cell depends on: `runs_params` of all its runs."""
        return self.runs_params(params, paper_settings, cell, self.cell_runs(params, cell))

    def runs_params(self, params: dict, paper_settings: dict, cell: str, runs: list[str]) -> tuple[dict, dict]:
        """What the panel cell computing only `runs` depends on, and nothing more: its panel, its methods (`methods`,
        in order) and their step grids, and the noise settings only if one of them is private (non-private runs see
        only ε_max). For one run this is what the cell of that one method used before panels were cells (plus
        `methods`), and the cell computes each run from exactly that (dpfl.papers.lowy2023.cell), so a run's numbers
        do not depend on the runs beside it. Editing one method's grid (or an ε below the largest) reruns the panels
        whose runs use it."""
        self._panel(params, cell)
        parsed = [parse_run(r) for r in runs]
        if not parsed or any(panel_id != cell for panel_id, _ in parsed):
            raise ValueError(f"lowy2023 panel cell {cell!r}: runs {runs!r} are not runs of panel {cell!r}")
        methods = [m.id for m in METHODS if m.id in {mid for _, mid in parsed}]
        grids = params["step_grids"]
        keys = dict.fromkeys(grid_key(mid, grids) for mid in methods)
        own = {**params, "panels": [panel for panel in params["panels"] if panel["id"] == cell],
               "step_grids": {k: grids[k] for k in keys}, "methods": methods}
        private = any(BY_ID[mid].private for mid in methods)
        if not private:  # a baseline uses the ε grid only through K = ⌊n·sqrt(ε_max/(4R))⌋
            own["epsilons"] = [max(params["epsilons"])]
        return own, (paper_settings if private else {})

    @staticmethod
    def _panel(params: dict, cell: str) -> dict:
        for panel in params["panels"]:
            if panel["id"] == cell:
                return panel
        raise ValueError(f"lowy2023: no panel {cell!r}; panels: {', '.join(panel['id'] for panel in params['panels'])}")

    def bench_units(self, params: dict) -> tuple[int, str]:
        """How many units of work the full figure runs per cell, and their name."""
        return int(params["trials"]), "trial"

    def bench_params(self, params: dict, units: int) -> dict:
        """The benchmark's reduced run of a cell: `units` trials."""
        return {**params, "trials": int(units)}

    def table_values(self, params: dict, table: str) -> dict[str, set]:
        """The setting columns of the tidy table (dpfl.papers.lowy2023.table.aggregate): panel ids, every method's id
        (`algorithm`) and label (`curve`), and x = the ε grid (every method, the flat baselines too)."""
        return {"panel": {panel["id"] for panel in params["panels"]}, "algorithm": {m.id for m in METHODS},
                "curve": {m.label for m in METHODS}, "x": {float(e) for e in params["epsilons"]}}
