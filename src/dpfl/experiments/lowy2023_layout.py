"""The shape of a lowy2023 figure, import-light (read by the Snakefile when it builds the DAG): its
cells (one per panel and algorithm) and the data they need."""

from __future__ import annotations

#: algorithm id -> (label in the figure, local method, private)
ALGORITHMS = {
    "noisy_mb_sgd": ("ISRL-DP MB-SGD", "minibatch", True),
    "noisy_local_sgd": ("ISRL-DP Local SGD", "local", True),
    "mb_sgd": ("MB-SGD", "minibatch", False),
    "local_sgd": ("Local SGD (FedAvg)", "local", False),
}


def cells(params: dict) -> list[str]:
    """One cell per (panel, algorithm): "<panel>-<algorithm>"."""
    return [f"{panel['id']}-{alg}" for panel in params["panels"] for alg in ALGORITHMS]


def needs(params: dict) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(prepared datasets, allocations): MNIST runs on the PCA-50 (even, odd) silo pool; insurance
    and obesity on the prepared tables."""
    if params["experiment"] == "mnist":
        return ("mnist",), ("lowy2023-mnist-pairs",)
    return (params["experiment"],), ()


def cell_params(params: dict, paper_settings: dict, cell: str) -> tuple[dict, dict]:
    """What one cell depends on, and nothing more: its panel, its algorithm's step grid, and the
    noise settings only if it is private. So editing one method's grid (or one panel) in the YAML
    reruns exactly the cells that use it."""
    panel_id, algorithm = cell.split("-", 1)
    _, method, private = ALGORITHMS[algorithm]
    grids = params["step_grids"]
    grid_key = algorithm if algorithm in grids else method
    own = {**params, "panels": [p for p in params["panels"] if p["id"] == panel_id],
           "step_grids": {grid_key: grids[grid_key]}}
    return own, (paper_settings if private else {})
