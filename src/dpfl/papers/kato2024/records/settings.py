"""The settings of one kato2024 Fig 13 cell, read once from its job's params (`RecordsSettings.from_params`, at the
start of dpfl.papers.kato2024.records.cell.run_cell) into a frozen, typed object; nothing below that boundary reads
the params dict.

A cell's params are the figure's (dpfl.papers.kato2024.records.layout.RecordsLayout.cell_params) with its own panel
only, validated by workflow/schemas/papers/kato2024.schema.yaml (`allocation_figure`). Values are converted as the
cell always used them (U, S and the seed: `int`), so that its table stays the same.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from numbers import Integral
from typing import ClassVar

from dpfl.cell_settings import exact_keys, one_of
from dpfl.papers.kato2024.panels import DISTRIBUTIONS, Panel

WHERE = "kato2024 fig13 cell"


@dataclass(frozen=True)
class RecordsSettings:
    """One Fig 13 cell: its `panel` of the figure's `dataset`, whose allocation instance of the scheme `allocation`
    at seed k = `seed` it counts."""

    dataset: str
    allocation: str
    seed: int
    panel: Panel

    KEYS: ClassVar[tuple[str, ...]] = ("dataset", "allocation", "seed", "panels")

    @classmethod
    def from_job(cls, job) -> RecordsSettings:
        """The cell's settings (the boundary a cell crosses at its start, dpfl.figure.FigureFamily.settings)."""
        return cls.from_params(job.params, job.cell)

    @classmethod
    def from_params(cls, params: Mapping, cell: str) -> RecordsSettings:
        """The settings of panel cell `cell`: exactly the figure's keys, a known dataset and allocation scheme, a
        seed ≥ 0 and the panel's own keys (dpfl.papers.kato2024.panels.Panel)."""
        exact_keys(f"{WHERE} params", params, cls.KEYS)
        for key in ("dataset", "allocation"):
            one_of(f"{WHERE}: params.{key}", params[key], tuple(DISTRIBUTIONS))
        seed = params["seed"]
        if isinstance(seed, bool) or not isinstance(seed, Integral) or seed < 0:
            raise ValueError(f"{WHERE}: params.seed: {seed!r}; expected an integer ≥ 0")
        return cls(dataset=params["dataset"], allocation=params["allocation"], seed=int(seed),
                   panel=Panel.from_params(params, cell, params["dataset"], WHERE))

    @property
    def allocation_name(self) -> str:
        """The configured allocation instance the cell counts (dpfl.papers.kato2024.panels.Panel.allocation)."""
        return self.panel.allocation(self.allocation, self.seed)
