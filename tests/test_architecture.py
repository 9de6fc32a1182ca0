"""The house rules of src/dpfl (docs/architecture.md), read from the imports with ast:

- layers: a module imports only from its own layer or below (LAYERS; the data layer never imports the stages,
  the engine never imports a paper, only their own layer and the entry points import the stage runners);
- the ground floor (the first entry of LAYERS) imports nothing from dpfl;
- papers never import each other;
- a paper's plot (a module named `plot` or `*_plot`) draws the figure table only: of dpfl it imports the plotting
  helpers, the tidy-table schema, the figure declarations and its own paper's registry entry (the paper package's
  `__init__`), nothing else (PLOT_ALLOWED), so editing an algorithm never reruns a plot job by itself; nor do the
  packages between the paper and the plot (a figure family's sub-package, e.g. kato2024/training/), whose
  `__init__` importing the plot runs and a plot job depends on (dpfl.codedeps);
- no import cycles between modules.

What counts as an import of a module (`imports_of`): `import dpfl.x`, `from dpfl.x import y` (dpfl.x.y when y is a
module), the relative forms resolved against the importing module (`from . import y`, `from ..x import y`), and
`importlib.import_module(...)` / `import_module(...)` / `__import__(...)` with a literal name (relative names with
a literal `package=` or `__package__` too). A name built at run time whose constant prefix names a dpfl package
(`f"dpfl.data.loaders.{dataset}"`, `"dpfl.papers." + paper`) counts as an import of *some module under* that
package, written "dpfl.data.loaders.*": its layer is the package's, and it is never on the plot allow-list. A name
with no constant dpfl prefix (e.g. a "module:function" string read from a FigureDef) cannot be checked here.
Imports inside functions and under `if TYPE_CHECKING:` count like the others.

Every rule is a function returning its violations, checked on src/dpfl and, once per rule, on a small synthetic
module that breaks it (the tests at the end), so that a checker that silently stops seeing imports fails too.
"""

from __future__ import annotations

import ast
from collections.abc import Collection, Mapping
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
TOP = "dpfl"

LAYERS = [
    # ground floor: no dpfl imports
    {"io", "provenance", "paths", "seeds", "tidy", "codedeps", "figure", "cell_settings", "joblog"},
    {"privacy", "models", "data", "plotting", "claims"},  # building blocks
    {"fl"},  # the round engine
    {"papers"},  # one package per paper
    {"config", "config_limits", "jobs"},  # configuration (and its limits across keys) -> jobs
    # stage runners (Snakemake scripts call these), the report, its record and the claims pages
    {"stages", "report", "record", "claim_pages", "runinfo"},
    {"bench", "cli", "__main__", "__init__"},  # entry points
]
GROUND = LAYERS[0]

#: what a paper's plot may import of dpfl (with their submodules, should one become a package), besides its own
#: paper package's `__init__` (the registry entry: FigureDefs and constants shared by the table and the plot, e.g.
#: balle2020's TABLE1_ROWS)
PLOT_ALLOWED = ("dpfl.plotting", "dpfl.tidy", "dpfl.figure")


# ------------------------------------------------------------------------------------------ reading the imports


def module_files(root: Path = SRC) -> dict[str, list[Path]]:
    """Every dotted module name under root/dpfl with the files that define it (two for a module that is both
    `x.py` and `x/__init__.py`, e.g. half-way through turning a module into a package)."""
    out: dict[str, list[Path]] = {}
    for path in sorted((root / TOP).rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out.setdefault(name, []).append(path)
    return out


def modules(root: Path = SRC) -> dict[str, Path]:
    """Module name -> its file (the package's `__init__.py` where both exist, as Python picks it)."""
    return {name: next((p for p in paths if p.name == "__init__.py"), paths[0])
            for name, paths in module_files(root).items()}


def is_dpfl(name: str) -> bool:
    return name == TOP or name.startswith(TOP + ".")


def resolve(name: str | None, level: int, package: str) -> str:
    """The absolute name of `from <level dots><name> import ...` written in a module of `package`."""
    if level == 0:
        return name or ""
    parts = package.split(".") if package else []
    if level - 1 >= len(parts):
        raise AssertionError(f"relative import {'.' * level}{name or ''} goes above the top package from {package!r}")
    base = ".".join(parts[: len(parts) - (level - 1)])
    return f"{base}.{name}" if name else base


def _constant_prefix(node: ast.expr) -> tuple[str, bool] | None:
    """(text, complete) of a string expression: the whole literal, or the constant start of an f-string, a `+`
    concatenation or a `"...".format(...)` call; None when it starts with something computed."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value, True
    if isinstance(node, ast.JoinedStr):
        text = ""
        for part in node.values:
            if not (isinstance(part, ast.Constant) and isinstance(part.value, str)):
                return text, False
            text += part.value
        return text, True
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left = _constant_prefix(node.left)
        if left is None or not left[1]:
            return left
        right = _constant_prefix(node.right)
        return (left[0] + right[0], right[1]) if right else (left[0], False)
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format"
            and isinstance(node.func.value, ast.Constant) and isinstance(node.func.value.value, str)):
        text = node.func.value.value
        return (text, True) if "{" not in text else (text[: text.index("{")], False)
    return None


def _is_import_call(func: ast.expr) -> bool:
    return ((isinstance(func, ast.Name) and func.id in ("import_module", "__import__"))
            or (isinstance(func, ast.Attribute) and func.attr == "import_module"))


def _dynamic_target(call: ast.Call, module: str, package: str) -> str | None:
    """The dpfl module an import_module/__import__ call names: exact for a literal, "<package>.*" for a name whose
    constant prefix ends inside a dpfl package; None when it cannot be read or is not dpfl."""
    if not call.args:
        return None
    found = _constant_prefix(call.args[0])
    if found is None:
        return None
    text, complete = found
    if text.startswith("."):  # relative: import_module(".x", package=...)
        anchor = next((kw.value for kw in call.keywords if kw.arg == "package"),
                      call.args[1] if len(call.args) > 1 else None)
        if isinstance(anchor, ast.Constant) and isinstance(anchor.value, str):
            anchor_pkg = anchor.value
        elif isinstance(anchor, ast.Name) and anchor.id == "__package__":
            anchor_pkg = package
        elif isinstance(anchor, ast.Name) and anchor.id == "__name__":
            anchor_pkg = module
        else:
            return None
        level = len(text) - len(text.lstrip("."))
        rest = text[level:]
        text = resolve(None, level, anchor_pkg) + ("." + rest if rest else "" if complete else ".")
    if complete:
        return text if is_dpfl(text) else None
    if "." not in text:
        return None
    base = text.rpartition(".")[0]  # "dpfl.data.loaders." -> dpfl.data.loaders; "dpfl.papers.kato2024.c" -> ...kato2024
    return f"{base}.*" if is_dpfl(base) else None


def imports_of(source: str, module: str, *, is_package: bool = False, known: Collection[str] | None = None) -> set[str]:
    """dpfl modules imported by a module's source text (anywhere in it, also inside functions). `module` is its
    dotted name and `is_package` whether it is a package's `__init__` (both needed to resolve relative imports);
    `known` the existing module names (to tell `from pkg import submodule` from `from pkg import attribute`)."""
    known = set(MODULES) if known is None else set(known)
    package = module if is_package else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(source, filename=module)):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if is_dpfl(a.name)}
        elif isinstance(node, ast.ImportFrom):
            base = resolve(node.module, node.level, package)
            if not is_dpfl(base):
                continue
            subs = {f"{base}.{a.name}" for a in node.names} & known
            found |= subs
            if len(subs) < len(node.names):  # some name is an attribute of base (or `*`): base itself is imported
                found.add(base)
        elif isinstance(node, ast.Call) and _is_import_call(node.func):
            target = _dynamic_target(node, module, package)
            if target:
                found.add(target)
    return found


def imports(path: Path, root: Path = SRC, known: Collection[str] | None = None) -> set[str]:
    """imports_of for a file under root/dpfl."""
    parts = path.relative_to(root).with_suffix("").parts
    is_package = parts[-1] == "__init__"
    name = ".".join(parts[:-1] if is_package else parts)
    return imports_of(path.read_text(), name, is_package=is_package, known=known)


# ------------------------------------------------------------------------------------------ the rules


def top_name(module: str) -> str:
    return module.split(".")[1] if module != TOP else "__init__"


def layer(module: str) -> int:
    top = top_name(module)
    if top == "*":  # f"dpfl.{x}": could be any module, so it counts as above every layer
        return len(LAYERS)
    for i, names in enumerate(LAYERS):
        if top in names:
            return i
    raise AssertionError(f"{module} is in no layer: add its top-level name to LAYERS (and docs/architecture.md)")


def layer_violations(module: str, targets: set[str]) -> list[str]:
    return [f"{module} (layer {layer(module)}) imports {t} (layer {layer(t)})"
            for t in sorted(targets) if layer(t) > layer(module)]


def ground_floor_violations(module: str, targets: set[str]) -> list[str]:
    """A ground-floor module imports nothing from dpfl (a ground-floor package may import its own submodules)."""
    if top_name(module) not in GROUND:
        return []
    own = f"{TOP}.{top_name(module)}"
    return [f"ground-floor {module} imports {t}" for t in sorted(targets) if t != own and not t.startswith(own + ".")]


def paper_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if parts[:2] == [TOP, "papers"] and len(parts) > 2 else None


def is_plot(module: str) -> bool:
    return paper_of(module) is not None and module.endswith((".plot", "_plot"))


def paper_violations(module: str, targets: set[str]) -> list[str]:
    """A paper's module imports no other paper (nor "some paper", dpfl.papers.*)."""
    paper = paper_of(module)
    if paper is None:
        return []
    return [f"{module} imports another paper: {t}" for t in sorted(targets)
            if t.startswith(f"{TOP}.papers.") and paper_of(t) != paper]


def _plot_may_import(paper: str, target: str) -> bool:
    return target == f"{TOP}.papers.{paper}" or any(target == a or target.startswith(a + ".") for a in PLOT_ALLOWED)


def plot_violations(module: str, targets: set[str]) -> list[str]:
    """A paper's plot imports only PLOT_ALLOWED (and their submodules) and its own paper package's `__init__`."""
    if not is_plot(module):
        return []
    own = f"{TOP}.papers.{paper_of(module)}"
    return [f"{module} imports {t}: a plot draws the figure table only (allowed: {', '.join(PLOT_ALLOWED)}, {own})"
            for t in sorted(targets) if not _plot_may_import(paper_of(module), t)]


def plot_package_violations(module: str, imports_by_module: Mapping[str, set[str]]) -> list[str]:
    """The packages between a paper's package and its plot (kato2024.training for kato2024.training.plot) import no
    more than the plot may: importing the plot runs their `__init__`, and its job depends on them."""
    if not is_plot(module):
        return []
    paper, parts = paper_of(module), module.split(".")
    packages = [".".join(parts[:i]) for i in range(4, len(parts))]  # below dpfl.papers.<paper>, above the plot
    return [f"{pkg} imports {t}: it is a package of the plot {module}, which draws the figure table only"
            for pkg in packages for t in sorted(imports_by_module.get(pkg, ())) if not _plot_may_import(paper, t)]


def import_graph(mods: Mapping[str, Path], root: Path = SRC) -> dict[str, set[str]]:
    """Module -> the modules it imports (a "pkg.*" import is an edge to pkg: importing under it runs pkg)."""
    graph = {}
    for m, path in mods.items():
        edges = {t.removesuffix(".*") for t in imports(path, root, known=mods)}
        graph[m] = {t for t in edges if t in mods and t != m}
    return graph


def find_cycle(graph: Mapping[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m):
        state[m] = 1
        stack.append(m)
        for t in sorted(graph[m]):
            if state.get(t) == 1:
                return stack[stack.index(t):] + [t]
            if t not in state and (cycle := visit(t)):
                return cycle
        stack.pop()
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state and (cycle := visit(m)):
            return cycle
    return None


# ------------------------------------------------------------------------------------------ src/dpfl


MODULES = modules()
IMPORTS = {m: imports(p) for m, p in MODULES.items()}
PLOTS = sorted(m for m in MODULES if is_plot(m))


def test_each_module_is_defined_once_and_in_exactly_one_layer():
    twice = {m: [str(p.relative_to(SRC)) for p in ps] for m, ps in module_files().items() if len(ps) > 1}
    assert not twice, f"modules defined by two files (Python imports the package, the .py is dead): {twice}"
    named = [n for names in LAYERS for n in names]
    assert len(named) == len(set(named)), "a name is in two layers"
    tops = {top_name(m) for m in MODULES}
    assert not (set(named) - tops), f"LAYERS names modules that do not exist: {sorted(set(named) - tops)}"
    for m in MODULES:
        layer(m)
    assert PLOTS and all(paper_of(m) for m in PLOTS)  # the plot rule below checks something


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_module_imports_a_layer_above_it(module):
    assert not layer_violations(module, IMPORTS[module])


@pytest.mark.parametrize("module", sorted(m for m in MODULES if top_name(m) in GROUND))
def test_the_ground_floor_imports_nothing_from_dpfl(module):
    assert not ground_floor_violations(module, IMPORTS[module])


@pytest.mark.parametrize("module", sorted(m for m in MODULES if paper_of(m)))
def test_papers_do_not_import_each_other(module):
    assert not paper_violations(module, IMPORTS[module])


@pytest.mark.parametrize("module", PLOTS)
def test_plots_import_only_the_plotting_helpers_and_their_registry_entry(module):
    assert not plot_violations(module, IMPORTS[module])
    assert not plot_package_violations(module, IMPORTS)


def test_no_import_cycles():
    cycle = find_cycle(import_graph(MODULES))
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


# ------------------------------------------------------------------------------------------ the checker itself
# Each rule once on a synthetic module that breaks it (and, beside it, a form it must let through). The modules the
# synthetic sources name are fixed here, so that these tests do not depend on today's tree.

KNOWN = {"dpfl", "dpfl.io", "dpfl.paths", "dpfl.tidy", "dpfl.figure", "dpfl.plotting", "dpfl.config", "dpfl.privacy",
         "dpfl.privacy.rdp", "dpfl.data", "dpfl.data.common", "dpfl.data.loaders", "dpfl.fl", "dpfl.fl.engine",
         "dpfl.stages", "dpfl.stages.cell", "dpfl.papers", "dpfl.papers.kato2024", "dpfl.papers.kato2024.cell",
         "dpfl.papers.kato2024.table", "dpfl.papers.kato2024.methods", "dpfl.papers.kato2024.group",
         "dpfl.papers.kato2024.bars", "dpfl.papers.kato2024.training", "dpfl.papers.kato2024.training.cell",
         "dpfl.papers.kato2024.training.layout", "dpfl.papers.kato2024.training.table", "dpfl.papers.lowy2023"}


def read(source: str, module: str, is_package: bool = False) -> set[str]:
    return imports_of(source, module, is_package=is_package, known=KNOWN)


def test_reading_resolves_relative_and_dynamic_imports():
    known = {"dpfl.papers.kato2024", "dpfl.papers.kato2024.cell", "dpfl.papers.kato2024.table", "dpfl.data.loaders"}
    src = """
from . import cell, FIGURES
from .table import fig2
from .. import kato2024
from ...data import loaders as L
import importlib
from importlib import import_module
def later(paper, name):
    importlib.import_module("dpfl.stages.cell")
    import_module(f"dpfl.data.loaders.{name}")
    __import__("dpfl." + "privacy" + ".rdp")
    importlib.import_module("dpfl.papers.{}.cell".format(paper))
    importlib.import_module(".split", package=__package__)
    importlib.import_module(".methods", "dpfl.papers.lowy2023")
    importlib.import_module(name)  # cannot be read: ignored
    importlib.import_module("numpy")
"""
    assert imports_of(src, "dpfl.papers.kato2024.plot", known=known) == {
        "dpfl.papers.kato2024.cell", "dpfl.papers.kato2024",  # FIGURES is an attribute of the package
        "dpfl.papers.kato2024.table", "dpfl.data.loaders", "dpfl.stages.cell", "dpfl.data.loaders.*",
        "dpfl.privacy.rdp", "dpfl.papers.*", "dpfl.papers.kato2024.split", "dpfl.papers.lowy2023.methods"}
    # in a package's __init__, `.` is the package itself
    assert read("from .cell import x\nfrom . import table", "dpfl.papers.kato2024", is_package=True) == {
        "dpfl.papers.kato2024.cell", "dpfl.papers.kato2024.table"}
    with pytest.raises(AssertionError, match="above the top package"):
        read("from ... import x", "dpfl.io")


def test_layer_rule_flags_an_upward_import():
    assert layer_violations("dpfl.fl.engine", read("from dpfl.stages.cell import run_cell", "dpfl.fl.engine"))
    engine = "dpfl.fl.engine"
    assert layer_violations(engine, read("def f():\n    import dpfl.papers.kato2024.cell\n", engine))
    assert not layer_violations("dpfl.fl.engine", read("from dpfl.privacy import rdp", "dpfl.fl.engine"))


def test_layer_rule_flags_a_relative_upward_import():
    assert layer_violations("dpfl.data.sources", read("from ..stages import cell", "dpfl.data.sources"))
    assert layer_violations("dpfl.fl", read("from ..papers.kato2024 import methods", "dpfl.fl", is_package=True))
    assert not layer_violations("dpfl.data.sources", read("from .common import DataError", "dpfl.data.sources"))


def test_layer_rule_flags_an_importlib_upward_import():
    for call in ('importlib.import_module("dpfl.stages.cell")', 'importlib.import_module(f"dpfl.papers.{p}.cell")',
                 'import_module(".cell", package="dpfl.stages")', 'importlib.import_module(f"dpfl.{name}")'):
        src = f"import importlib\nfrom importlib import import_module\ndef f(p, name):\n    {call}\n"
        assert layer_violations("dpfl.data.prepare", read(src, "dpfl.data.prepare")), call
    src = 'import importlib\ndef f(d):\n    importlib.import_module(f"dpfl.data.loaders.{d}")\n'
    assert not layer_violations("dpfl.data.prepare", read(src, "dpfl.data.prepare"))


def test_plot_rule_flags_a_plot_importing_computation():
    plot = "dpfl.papers.kato2024.plot"
    for src in ("from .cell import run_cell", "from dpfl.papers.kato2024.table import fig2",
                "from . import methods", "from dpfl.privacy import rdp", "from dpfl import config",
                "from dpfl.papers.lowy2023 import FIGURES",
                'import importlib\nimportlib.import_module(f"dpfl.papers.kato2024.{name}")'):
        assert plot_violations(plot, read(src, plot)), src
    bars_plot = "dpfl.papers.kato2024.bars_plot"
    assert plot_violations(bars_plot, read("from .bars import x", bars_plot))
    fine = ("from dpfl.plotting import PALETTE\nfrom dpfl import tidy\nfrom dpfl.figure import FigureDef\n"
            "from . import FIGURES")
    assert not plot_violations(plot, read(fine, plot))
    # a plot in a figure family's sub-package: its siblings and the sub-package itself are computation
    family_plot = "dpfl.papers.kato2024.training.plot"
    for src in ("from .cell import run_cell", "from . import layout", "from .. import methods",
                "from dpfl.papers.kato2024.training.table import curves", "from dpfl.papers.kato2024 import training"):
        assert plot_violations(family_plot, read(src, family_plot)), src
    assert not plot_violations(family_plot, read("from dpfl.plotting import PALETTE\nfrom .. import FIGURES",
                                                 family_plot))


def test_plot_package_rule_flags_a_family_package_importing_computation():
    plot = "dpfl.papers.kato2024.training.plot"
    package = read("from .cell import run_cell", "dpfl.papers.kato2024.training", is_package=True)
    assert plot_package_violations(plot, {"dpfl.papers.kato2024.training": package})
    assert not plot_package_violations(plot, {"dpfl.papers.kato2024.training": set()})
    # the paper's own package is the plot rule's (its registry entry), not this one's
    assert not plot_package_violations("dpfl.papers.kato2024.plot", {"dpfl.papers.kato2024": {"dpfl.config"}})


def test_ground_floor_rule_flags_a_dpfl_import():
    for src in ("from dpfl.io import atomic_write", "from . import paths"):  # the same layer: only this rule sees it
        targets = read(src, "dpfl.tidy")
        assert ground_floor_violations("dpfl.tidy", targets) and not layer_violations("dpfl.tidy", targets), src
    assert ground_floor_violations("dpfl.tidy", read("def f():\n    import dpfl.plotting\n", "dpfl.tidy"))
    assert not ground_floor_violations("dpfl.tidy", read("import numpy as np", "dpfl.tidy"))


def test_paper_rule_flags_a_paper_importing_another():
    src = "from dpfl.papers.kato2024.methods import BY_ID"
    lowy = "dpfl.papers.lowy2023.cell"
    assert paper_violations(lowy, read(src, lowy))
    assert paper_violations(lowy, read("from ..kato2024 import group", lowy))
    assert not paper_violations("dpfl.papers.kato2024.cell", read(src, "dpfl.papers.kato2024.cell"))


def test_cycle_rule_flags_a_cycle(tmp_path):
    files = {"dpfl/__init__.py": "", "dpfl/a.py": "from dpfl import b\n",
             "dpfl/b/__init__.py": "from .c import run\n", "dpfl/b/c.py": "def run():\n    import dpfl.a\n"}
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    mods = modules(tmp_path)
    assert find_cycle(import_graph(mods, tmp_path)) == ["dpfl.a", "dpfl.b", "dpfl.b.c", "dpfl.a"]
    (tmp_path / "dpfl/b/c.py").write_text("def run():\n    pass\n")
    assert find_cycle(import_graph(mods, tmp_path)) is None
