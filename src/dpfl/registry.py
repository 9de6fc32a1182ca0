"""Which figures exist and which code makes them. Import-light: read by the Snakefile at parse time.

A figure is made in stages (ARCHITECTURE.md): `data` computes the tidy table, `plot` draws it. Each
stage names a function as "module:function"; the Snakefile declares the source files of that module
(and of every dpfl module it imports, transitively) as inputs, so editing a library module reruns
exactly the figures whose code imports it.
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass
from pathlib import Path

PAPERS = ("asoodeh2021", "balle2020", "bietti2022", "kato2024", "lowy2023")
MODES = ("none", "authors-code")


@dataclass(frozen=True)
class FigureDef:
    """How a figure is made.

    Analytic figures: `data(params, mode, log)` returns the tidy table.
    Experiment figures: `cells(params)` lists the cells (one job each), `cell(job, inputs, log)` computes
    one cell's table from the prepared datasets and allocations that `needs(params)` names, and
    `data(params, mode, tables, log)` aggregates the cell tables into the tidy table.
    """

    data: str  # "module:function" returning the tidy DataFrame (the figure's numbers)
    plot: str  # "module:function" drawing it
    kind: str = "analytic"  # analytic (closed form, no data) | experiment (trained on datasets)
    has_compat: bool = False  # whether `compat: authors-code` changes this figure
    markdown: str | None = None  # "module:function"(df, spec) -> Markdown tables shown with the figure
    cells: str | None = None  # "module:function"(params) -> cell ids (an import-light module)
    cell: str | None = None
    needs: str | None = None  # "module:function"(params) -> (datasets, allocations) (import-light)
    cell_params: str | None = None  # "module:function"(params, paper_settings, cell) -> the part a cell uses


@dataclass(frozen=True)
class AllocationDef:
    """A fixed arrangement of a prepared dataset (e.g. silos), cached in data/allocations/<dataset>/<name>.npz."""

    dataset: str
    function: str  # "module:function"(arrays, log) -> dict of arrays


ALLOCATIONS: dict[str, AllocationDef] = {
    "lowy2023-mnist-pairs": AllocationDef("mnist", "dpfl.experiments.lowy2023:mnist_pool"),
}


def _lowy2023(fig: str) -> FigureDef:
    return FigureDef(data="dpfl.experiments.lowy2023:aggregate", plot="dpfl.plotting.lowy2023:figure",
                     markdown="dpfl.plotting.lowy2023:diagnostics_markdown", kind="experiment", has_compat=True, cells="dpfl.experiments.lowy2023_layout:cells",
                     cell="dpfl.experiments.lowy2023:run_cell", needs="dpfl.experiments.lowy2023_layout:needs",
                     cell_params="dpfl.experiments.lowy2023_layout:cell_params")


FIGURES: dict[tuple[str, str], FigureDef] = {
    ("asoodeh2021", "fig2"): FigureDef("dpfl.figures.asoodeh2021:fig2", "dpfl.plotting.asoodeh2021:fig2"),
    ("balle2020", "fig2"): FigureDef("dpfl.figures.balle2020:fig2", "dpfl.plotting.balle2020:fig2"),
    ("balle2020", "table1"): FigureDef(
        "dpfl.figures.balle2020:table1", "dpfl.plotting.balle2020:table1", markdown="dpfl.plotting.balle2020:table1_markdown"
    ),
    ("balle2020", "thm3_2"): FigureDef("dpfl.figures.balle2020:thm3_2", "dpfl.plotting.balle2020:thm3_2"),
    ("kato2024", "fig2"): FigureDef("dpfl.figures.kato2024:fig2", "dpfl.plotting.kato2024:fig2", has_compat=True),
    **{("lowy2023", f): _lowy2023(f) for f in ("fig4", "fig5", "fig6", "fig7", "fig8", "fig9")},
}


SRC = Path(__file__).resolve().parent.parent  # the folder that holds the dpfl package


def _module_file(module: str) -> Path | None:
    base = SRC / Path(*module.split("."))
    if (base / "__init__.py").exists():
        return base / "__init__.py"
    if base.with_suffix(".py").exists():
        return base.with_suffix(".py")
    return None


@functools.lru_cache(maxsize=None)
def module_closure(module: str) -> tuple[str, ...]:
    """Source files of `module` and of every dpfl module it imports, transitively (found with ast,
    without importing anything). Paths are relative to the project root (the parent of src/)."""
    seen: dict[str, Path] = {}
    stack = [module]
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        path = _module_file(name)
        if path is None:
            continue
        seen[name] = path
        # importing a.b.c runs a/__init__ and a/b/__init__ too
        parts = name.split(".")
        stack += [".".join(parts[:i]) for i in range(1, len(parts))]
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                stack += [a.name for a in node.names if a.name.split(".")[0] == "dpfl"]
            elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "dpfl":
                stack.append(node.module)
                stack += [f"{node.module}.{a.name}" for a in node.names]  # "from dpfl.x import y" (module y)
    root = SRC.parent
    return tuple(sorted(str(p.relative_to(root)) for p in seen.values()))


def code_files(ref: str) -> list[str]:
    """Source files a "module:function" reference depends on."""
    return list(module_closure(ref.partition(":")[0]))


def call(ref: str, *args):
    """Call "module:function" (used at DAG-building time, so the module must be import-light)."""
    from dpfl.stages.common import resolve

    return resolve(ref)(*args)
