"""The shape of kato2024 Fig 13 (spec §7, sanity check S-K13 of §8), how an allocation spreads the training records
over users and silos, read when the DAG is built (import-light): one cell per panel, one allocation instance
(<distribution>-U<U>-S<S>-seed<k>)."""

from __future__ import annotations

from dpfl.figure import FigureLayout
from dpfl.papers.kato2024.panels import panel_of, seed_allocation

SUMMARIES = {"mean_largest_silo_share": "mean largest-silo share", "cv_of_totals": "CV of per-user totals"}


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
        """The setting columns of the table (rows: dpfl.papers.kato2024.records.table): each panel's id, U, S,
        distribution and the seed, and the quantities."""
        panels = params["panels"]
        return {"panel": {panel["id"] for panel in panels}, "users": {int(panel["users"]) for panel in panels},
                "silos": {int(panel["silos"]) for panel in panels},
                "distribution": {panel["distribution"] for panel in panels},
                "seed": {int(params["seed"])},
                "quantity": {"records", "user_total", "largest_silo_share", *SUMMARIES}}
