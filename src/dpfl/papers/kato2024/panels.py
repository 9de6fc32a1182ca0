"""A kato2024 figure's panels (training Figs 4-10, Fig 13): one panel by its id, and the allocation a seed of it
reads when the figure's panels share one allocation scheme (the figure's `allocation`). The layouts read the params'
panel dicts when the DAG is built (`panel_of`, `seed_allocation`); a cell reads its own panel once, at its start,
into a frozen `Panel`, and nothing after that reads the dict."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from dpfl.cell_settings import count, exact_keys
from dpfl.papers.kato2024.allocation import FLAMBY_KINDS, RECORD_KINDS
from dpfl.papers.kato2024.allocation_instances import AllocationInstance

#: the distributions of spec §2 each dataset's allocation scheme supports
DISTRIBUTIONS = {"creditcard": RECORD_KINDS, "mnist": RECORD_KINDS, "heart_disease": FLAMBY_KINDS,
                 "tcga_brca": FLAMBY_KINDS}


def panel_of(params: dict, panel_id: str) -> dict:
    for panel in params["panels"]:
        if panel["id"] == panel_id:
            return panel
    raise ValueError(f"no panel {panel_id!r}; panels: {', '.join(p['id'] for p in params['panels'])}")


def seed_allocation(params: dict, panel: dict, seed: int) -> str:
    """The allocation of one seed of a panel of a figure whose panels share the figure's `allocation` scheme."""
    return AllocationInstance.of_panel(panel, seed).of_scheme(params["allocation"])


@dataclass(frozen=True)
class Panel:
    """One panel of a figure: its id (the cell's name), U users and S silos holding the records as `distribution`
    allocates them (spec §2); its seed's allocation instance is `allocation`."""

    id: str
    users: int
    silos: int
    distribution: str

    #: the keys of a panel in a cell's params (a training panel's `hyper` override is merged into the cell's
    #: params.hyper by the layout, dpfl.papers.kato2024.training.layout.TrainingLayout.runs_params)
    KEYS: ClassVar[tuple[str, ...]] = ("id", "users", "distribution", "silos")

    @classmethod
    def from_params(cls, params: Mapping, cell: str, dataset: str, where: str) -> Panel:
        """The panel `cell` of params.panels: exactly its keys, U and S integers ≥ 1, and a distribution the
        dataset's allocation scheme has (`DISTRIBUTIONS`); `where` names the figure family in the messages."""
        panel, at = panel_of(params, cell), f"{where}: params.panels (id {cell})"
        exact_keys(at, panel, cls.KEYS)
        allowed = DISTRIBUTIONS[dataset]
        if panel["distribution"] not in allowed:
            raise ValueError(f"{at}.distribution: {panel['distribution']!r} is not allowed for {dataset}; allowed: "
                             f"{', '.join(allowed)}")
        return cls(id=panel["id"], users=count(at, "users", panel["users"]), silos=count(at, "silos", panel["silos"]),
                   distribution=panel["distribution"])

    def allocation(self, scheme: str, seed: int) -> str:
        """The configured allocation instance one seed of this panel reads, of the figure's allocation `scheme`
        (the name `seed_allocation` gives the layouts)."""
        return AllocationInstance(self.distribution, self.users, self.silos, int(seed)).of_scheme(scheme)
