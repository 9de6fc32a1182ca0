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
    data: str  # "module:function" returning the tidy DataFrame (the figure's numbers)
    plot: str  # "module:function" drawing it
    kind: str = "analytic"  # analytic (closed form, no data) | experiment (trained on datasets)
    has_compat: bool = False  # whether `compat: authors-code` changes this figure
    table: bool = False  # a table rather than a plot (the report renders its Markdown)


FIGURES: dict[tuple[str, str], FigureDef] = {
    ("asoodeh2021", "fig2"): FigureDef("dpfl.figures.asoodeh2021:fig2", "dpfl.plotting.asoodeh2021:fig2"),
    ("balle2020", "fig2"): FigureDef("dpfl.figures.balle2020:fig2", "dpfl.plotting.balle2020:fig2"),
    ("balle2020", "table1"): FigureDef(
        "dpfl.figures.balle2020:table1", "dpfl.plotting.balle2020:table1", table=True
    ),
    ("balle2020", "thm3_2"): FigureDef("dpfl.figures.balle2020:thm3_2", "dpfl.plotting.balle2020:thm3_2"),
    ("kato2024", "fig2"): FigureDef("dpfl.figures.kato2024:fig2", "dpfl.plotting.kato2024:fig2", has_compat=True),
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
