"""The papers: which figures exist, which functions make them, and which allocations they share.

Import-light (the Snakefile reads it when it builds the DAG): each paper package's `__init__` lists its figures
as `FigureDef`s naming functions as "module:function" strings, so reading the registry imports no numerics.
Adding a figure = one entry in its paper's `__init__` + its functions + its YAML (README: "Recipes").
"""

from __future__ import annotations

import importlib

from dpfl.figure import AllocationKind, FigureDef

PAPERS = ("asoodeh2021", "balle2020", "bietti2022", "kato2024", "lowy2023")
MODES = ("none", "authors-code")


def _collect():
    figures, kinds = {}, {}
    for paper in PAPERS:
        module = importlib.import_module(f"dpfl.papers.{paper}")
        figures.update({(paper, fig): fdef for fig, fdef in getattr(module, "FIGURES", {}).items()})
        kinds.update(getattr(module, "ALLOCATION_KINDS", {}))
    return figures, kinds


FIGURES: dict[tuple[str, str], FigureDef]
ALLOCATION_KINDS: dict[str, AllocationKind]
FIGURES, ALLOCATION_KINDS = _collect()


def paper_module(paper: str):
    return importlib.import_module(f"dpfl.papers.{paper}")


def load_methods() -> dict:
    """Import every paper's methods module (named in its package as METHODS_MODULE) and return the method
    registry (dpfl.fl.methods.METHODS)."""
    from dpfl.fl.methods import METHODS

    for paper in PAPERS:
        name = getattr(paper_module(paper), "METHODS_MODULE", None)
        if name:
            importlib.import_module(name)
    return METHODS
