"""Which source files a piece of code depends on, found by reading imports (ast), without importing anything.

Snakemake does not track Python imports, so every rule declares the files of the code it runs (its stage runner,
the paper functions it calls, and every dpfl module they import, transitively) as inputs: editing a module reruns
exactly the jobs whose code imports it.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

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


#: the runner of each stage of a figure (the Snakemake rules run them)
STAGE_RUNNERS = {"cell": "dpfl.stages.cell", "table": "dpfl.stages.table", "plot": "dpfl.stages.plot",
                 "claims": "dpfl.stages.claims"}


def stage_code(fdef, stage: str) -> list[str]:
    """Source files a stage of a figure (`fdef`: its dpfl.figure.FigureDef) depends on: the stage runner and the
    figure's own functions for that stage, with every dpfl module they import. The rules declare them as inputs
    (Snakemake does not track imports: editing a module reruns exactly the jobs that import it), and the
    reproduction record hashes them to tell a stale entry."""
    files = set(code_files(STAGE_RUNNERS[stage]))
    for ref in {"cell": [fdef.cell], "table": [fdef.table], "plot": [fdef.plot, fdef.markdown]}.get(stage, []):
        if ref:
            files |= set(code_files(ref))
    return sorted(files)
