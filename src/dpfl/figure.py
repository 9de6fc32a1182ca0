"""What a paper package declares in its `__init__`: its figures (`FigureDef`) and the ways it arranges a dataset
into silos and users (`AllocationKind`). Functions are named as "module:function" strings so that reading the
declarations imports no numerics (the Snakefile reads them when it builds the DAG) and so that the code files
each stage depends on can be found (dpfl.codedeps)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FigureDef:
    """How a figure is made (ARCHITECTURE.md stages).

    Analytic figures: `table(params, log)` returns the tidy table.
    Experiment figures: `layout` names an import-light module with `cells(params)` (one job each),
    `needs(params)` -> (prepared datasets, allocation names) and `cell_params(params, settings, cell)` (the part of
    the params a cell uses, so unrelated edits do not rerun it); `cell(job, inputs, log)` computes one cell's
    table; `table(params, tables, log)` aggregates the cell tables into the figure's tidy table.
    """

    table: str  # "module:function" returning the tidy DataFrame (the figure's numbers)
    plot: str  # "module:function"(df, spec, meta) -> matplotlib figure
    kind: str = "analytic"  # analytic (closed form, no data) | experiment (trained on datasets)
    has_compat: bool = False  # whether `compat: authors-code` changes this figure
    markdown: str | None = None  # "module:function"(df, spec) -> Markdown tables shown with the figure
    layout: str | None = None  # experiment figures: import-light module with cells, needs, cell_params
    cell: str | None = None  # experiment figures: "module:function" computing one cell


@dataclass(frozen=True)
class AllocationKind:
    """A way to arrange a prepared dataset into silos/users; a paper's YAML `allocations:` instantiates it
    with parameters, cached in data/allocations/<dataset>/<name>.npz."""

    function: str  # "module:function"(arrays, params, log) -> dict of arrays
    datasets: tuple[str, ...]  # the datasets it applies to
    # seeded families (one file per instance, e.g. "zipf-U1000-S5-seed0"): "module:function"(instance) -> the
    # instance's params, named data/allocations/<dataset>/<paper>-<name>/<instance>.npz; None: one fixed file
    instances: str | None = None
