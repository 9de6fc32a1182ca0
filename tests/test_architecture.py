"""The house rules of src/dpfl (docs/architecture.md), read from the imports with ast:

- layers: a module imports only from its own layer or below (the data layer never imports the stages,
  the engine never imports a paper, nothing imports the stage runners but the CLI);
- a paper's plot never imports that paper's computation (it draws the figure table only), and papers never
  import each other;
- no import cycles between modules.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"

LAYERS = [
    {"io", "provenance", "paths", "seeds", "tidy", "codedeps", "figure"},  # ground floor: no dpfl imports
    {"privacy", "models", "data", "plotting", "claims"},  # building blocks
    {"fl"},  # the round engine
    {"papers"},  # one package per paper
    {"config", "jobs"},  # configuration -> jobs
    {"stages", "report"},  # stage runners (Snakemake scripts call these)
    {"bench", "cli", "__main__", "__init__"},  # entry points
]
COMPUTATION = ("cell", "table", "methods", "isrl", "split", "layout", "uldp", "allocation", "group",
               "bars")  # a paper's modules that compute


def modules() -> dict[str, Path]:
    out = {}
    for path in (SRC / "dpfl").rglob("*.py"):
        parts = path.relative_to(SRC).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def imports(path: Path) -> set[str]:
    """dpfl modules named by the imports anywhere in a file (also inside functions)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "dpfl"}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "dpfl":
            known = modules()
            subs = {f"{node.module}.{a.name}" for a in node.names} & set(known)
            found |= subs or {node.module}
    return found


def layer(module: str) -> int:
    top = module.split(".")[1] if module != "dpfl" else "__init__"
    for i, names in enumerate(LAYERS):
        if top in names:
            return i
    raise AssertionError(f"{module} is in no layer: add its top-level name to LAYERS (and docs/architecture.md)")


MODULES = modules()


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_module_imports_a_layer_above_it(module):
    for target in imports(MODULES[module]):
        assert layer(target) <= layer(module), f"{module} (layer {layer(module)}) imports {target} (layer {layer(target)})"


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m.startswith("dpfl.papers.")))
def test_papers_are_independent_and_plots_draw_tables_only(module):
    paper = module.split(".")[2]
    for target in imports(MODULES[module]):
        parts = target.split(".")
        if parts[:2] == ["dpfl", "papers"] and len(parts) > 2:
            assert parts[2] == paper, f"{module} imports another paper: {target}"
            if module.endswith((".plot", "_plot")):
                assert not (len(parts) > 3 and parts[3] in COMPUTATION), f"{module} imports computation {target}"


def test_no_import_cycles():
    graph = {m: {t for t in imports(p) if t in MODULES and t != m} for m, p in MODULES.items()}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m):
        state[m] = 1
        stack.append(m)
        for t in graph[m]:
            if state.get(t) == 1:
                cycle = stack[stack.index(t):] + [t]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if t not in state:
                visit(t)
        stack.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)
