"""A kato2024 figure's panels (training Figs 4-10, Fig 13): one panel by its id, and the allocation a seed of it
reads when the figure's panels share one allocation family (the figure's `allocation`)."""

from __future__ import annotations

from dpfl.papers.kato2024.allocation import AllocationInstance


def panel_of(params: dict, panel_id: str) -> dict:
    for panel in params["panels"]:
        if panel["id"] == panel_id:
            return panel
    raise ValueError(f"no panel {panel_id!r}; panels: {', '.join(p['id'] for p in params['panels'])}")


def seed_allocation(params: dict, panel: dict, seed: int) -> str:
    """The allocation of one seed of a panel of a figure whose panels share the figure's `allocation` family."""
    return AllocationInstance.of_panel(panel, seed).of_family(params["allocation"])
