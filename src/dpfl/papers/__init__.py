"""The papers: which figures exist, which functions make them, and which allocations they share.

Import-light (the Snakefile reads it when it builds the DAG): each paper package's `__init__` declares
`PAPER = PaperDef(...)`, naming functions as "module:function" strings, so reading the registry imports no numerics.
Adding a figure = one entry in its paper's `__init__` + its functions + its YAML (docs/extending.md).
"""

from __future__ import annotations

import importlib

from dpfl.figure import AllocationKind, FigureDef, PaperDef
from dpfl.paths import MODES  # noqa: F401  (the two modes, spelled in dpfl.paths; imported from here by callers)

PAPERS = ("asoodeh2021", "balle2020", "bietti2022", "kato2024", "lowy2023")


def _collect() -> dict[str, PaperDef]:
    out = {}
    for paper in PAPERS:
        pdef = importlib.import_module(f"dpfl.papers.{paper}").PAPER
        if not isinstance(pdef, PaperDef):
            raise TypeError(f"dpfl.papers.{paper}.PAPER is not a dpfl.figure.PaperDef")
        pdef.families()  # its figures' families have distinct names (the scale files' `families:` keys)
        out[paper] = pdef
    return out


REGISTRY: dict[str, PaperDef] = _collect()
FIGURES: dict[tuple[str, str], FigureDef] = {(paper, fig): fdef for paper, pdef in REGISTRY.items()
                                             for fig, fdef in pdef.figures.items()}
ALLOCATION_KINDS: dict[str, AllocationKind] = {k: v for pdef in REGISTRY.values()
                                               for k, v in pdef.allocation_kinds.items()}


def load_methods() -> dict:
    """Import every paper's methods module (`PaperDef.methods`) and return the method registry
    (dpfl.fl.methods.METHODS)."""
    from dpfl.fl.methods import METHODS

    for pdef in REGISTRY.values():
        if pdef.methods:
            importlib.import_module(pdef.methods)
    return METHODS
