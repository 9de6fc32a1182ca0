"""The figure-family contract (dpfl.figure.FigureLayout) and the benchmark that drives it.

Every registered experiment figure's layout is instantiated and every hook is called on the figure's configured params
in every mode it has, at every scale: a hook that is missing or crashes on real settings fails here, not in a user's
`dpfl bench` (as Fig 13's missing `bench_units` once did). `dpfl bench <paper>` runs to the end for every paper with
the cell runs replaced by a stand-in measurement, and rejects requests that name nothing.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import dataclasses
import inspect
from pathlib import Path

import pytest

from dpfl import bench, codedeps, config, jobs
from dpfl.figure import FigureDef, FigureFamily, FigureLayout, PaperDef
from dpfl.papers import FIGURES, MODES, REGISTRY

ROOT = Path(__file__).resolve().parent.parent
SCALES = ("smoke", "quick", "paper")
EXPERIMENTS = sorted(key for key, fdef in FIGURES.items() if fdef.layout is not None)


@pytest.fixture(scope="module")
def configs():
    return {scale: config.load(ROOT, {"scale": scale}) for scale in SCALES}


def test_every_experiment_figure_has_a_figure_layout_and_every_analytic_none():
    assert EXPERIMENTS, "no experiment figure registered"
    for key, fdef in FIGURES.items():
        if fdef.kind == "experiment":
            lay = jobs.layout(*key)
            assert isinstance(lay, FigureLayout) and not inspect.isabstract(type(lay)), key
        else:
            assert fdef.layout is None and fdef.cell is None, key
            with pytest.raises(ValueError, match="analytic"):
                jobs.layout(*key)


def test_a_family_that_mixes_kinds_or_a_figure_without_a_plot_is_rejected():
    with pytest.raises(ValueError, match="experiment family has a layout and a cell"):
        FigureFamily(name="f", table="m:t", plot="m:p", schema="f", kind="experiment")
    with pytest.raises(ValueError, match="experiment family has a layout and a cell"):
        FigureFamily(name="f", table="m:t", plot="m:p", schema="f", layout="m:L", cell="m:c")  # kind left analytic
    with pytest.raises(ValueError, match="only an experiment family"):
        FigureFamily(name="f", table="m:t", plot="m:p", schema="f", settings="m:S")
    open_family = FigureFamily(name="f", table="m:t", plot=None, schema=None)
    with pytest.raises(ValueError, match="names no plot, schema, and neither does its family"):
        FigureDef(open_family)
    fdef = FigureDef(open_family, plot="m:p2", schema="s2")
    assert (fdef.table, fdef.plot, fdef.schema, fdef.kind, fdef.cell) == ("m:t", "m:p2", "s2", "analytic", None)


def test_every_figure_names_a_family_and_a_papers_families_have_distinct_names():
    for name, paper in REGISTRY.items():
        families = paper.families()
        assert families, name
        for figure, fdef in paper.figures.items():
            assert families[fdef.family.name] is fdef.family, (name, figure)
    twice = PaperDef(figures={"a": FigureDef(FigureFamily(name="f", table="m:t", plot="m:p", schema="s")),
                              "b": FigureDef(FigureFamily(name="f", table="m:u", plot="m:p", schema="s"))})
    with pytest.raises(ValueError, match="figure b: a second figure family named 'f'"):
        twice.families()


@pytest.mark.parametrize("scale", SCALES)
def test_a_familys_settings_type_reads_every_cells_params(configs, scale):
    """The frozen settings a family declares (FigureFamily.settings) are built from every cell's params of every
    figure of the family, in every mode, at every scale: the boundary the cell crosses at its start."""
    cfg = configs[scale]
    checked = 0
    for (paper, figure), fdef in FIGURES.items():
        if fdef.settings is None or figure not in cfg.papers[paper]["figures"]:
            continue
        module, name = fdef.settings.split(":")
        settings = getattr(importlib.import_module(module), name)
        for mode in MODES if fdef.has_compat else ("none",):
            for cell in jobs.cell_ids(cfg, paper, figure, mode):
                if not jobs.computed_runs(cfg, paper, figure, cell, mode):
                    continue  # every run borrowed from another figure's cell: no job
                made = settings.from_job(jobs.build_cell_job(cfg, paper, figure, cell, mode))
                assert dataclasses.is_dataclass(made) and made.__dataclass_params__.frozen, (paper, figure, mode)
                checked += 1
    assert checked


def test_the_contract_requires_the_three_layout_hooks():
    class Incomplete(FigureLayout):
        def cells(self, params):
            return []

    with pytest.raises(TypeError, match="cell_params|needs"):
        Incomplete()


@pytest.mark.parametrize("scale", SCALES)
@pytest.mark.parametrize("key", EXPERIMENTS, ids=lambda k: "/".join(k))
def test_every_hook_runs_on_the_configured_params(configs, scale, key):
    cfg = configs[scale]
    paper, figure = key
    if figure not in cfg.papers[paper]["figures"]:
        pytest.skip(f"{paper}/{figure} is not configured")
    lay = jobs.layout(paper, figure)
    for mode in MODES if FIGURES[key].has_compat else ("none",):
        params = cfg.figure_params(paper, figure, mode)
        cells = lay.cells(params)
        assert cells and len(set(cells)) == len(cells), (key, mode, cells)
        datasets, allocations = lay.needs(params)
        assert isinstance(datasets, tuple) and isinstance(allocations, tuple)
        for a in allocations:
            cfg.allocation(a)  # every allocation it reads is configured (raises ConfigError otherwise)
        runs = {c: lay.cell_runs(params, c) for c in cells}
        assert all(r and len(set(r)) == len(r) for r in runs.values()), (key, mode)
        assert len({r for rs in runs.values() for r in rs}) == sum(map(len, runs.values())), (key, mode)
        reused = lay.reused_cells(params)
        assert set(reused) <= {r for rs in runs.values() for r in rs}
        assert all(f in cfg.papers[paper]["figures"] for f in reused.values())
        units = lay.bench_units(params)
        assert units is None or (isinstance(units[0], int) and units[0] >= 0 and isinstance(units[1], str))
        own = [jobs.cell_needs(cfg, paper, figure, cell, mode) for cell in cells]
        assert all(set(d) <= set(datasets) and set(a) <= set(allocations) for d, a in own), (key, mode)
        assert {d for d, _ in own for d in d} == set(datasets) and {a for _, a in own for a in a} == set(allocations)
        for cell in cells:
            job = jobs.build_cell_job(cfg, paper, figure, cell, mode)
            assert isinstance(lay.timed_cell(job.params), bool) and isinstance(lay.gpu_cell(job.params), bool)
            assert jobs.cell_threads(cfg, paper, figure, cell, mode, 2) >= 1
            if units is not None:
                reduced = lay.bench_params(job.params, 1)
                assert isinstance(reduced, dict) and reduced != job.params or units[0] <= 1
                assert lay.bench_evaluations(job.params, units[0]) >= 0
        assert isinstance(lay.bench_side_by_side({}), list)


@pytest.mark.parametrize("module", ["jobs", "bench"])
def test_jobs_and_bench_call_the_contract_and_never_look_hooks_up(module):
    tree = ast.parse(Path(importlib.util.find_spec(f"dpfl.{module}").origin).read_text())  # a module or a package
    names = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    assert not names & {"getattr", "hasattr"}, f"dpfl/{module}.py looks hooks up by name"


def _fake_child(seen):
    """Stands in for the cell's subprocess: records the job and reports a measurement in the child's format."""
    def run(job, inputs, env, threads=1):
        seen.append((job.figure, job.cell, job.params))
        return {"phases": {"local training": 0.5} if job.paper == "kato2024" and job.figure in ("fig11", "fig12")
                else None, "seconds": 2.0, "loop_per_unit": None, "units": None, "configs": None, "per_eval": 0.0,
                "evals": 0, "gpu_peak_mb": None, "device": "cpu", "peak_mb": 100.0}
    return run


@pytest.mark.parametrize("paper", sorted({p for p, _ in FIGURES}))
def test_bench_runs_to_the_end_for_every_paper(paper, monkeypatch, capsys):
    seen, built = [], []
    monkeypatch.setattr(bench, "_run_child", _fake_child(seen))
    monkeypatch.setattr(bench, "_build_inputs", lambda root, missing, cores, scale: built.append(missing))
    bench.bench(paper, None, ROOT, trials=1, scale="paper")
    out = capsys.readouterr().out
    cfg = config.load(ROOT, {"scale": "paper"})
    for figure in cfg.papers[paper]["figures"]:
        fdef = FIGURES[(paper, figure)]
        if fdef.layout is None:
            assert f"{figure}: analytic" in out
        elif jobs.layout(paper, figure).bench_units(cfg.figure_params(paper, figure, "none")) is None:
            assert f"{figure}: nothing to time" in out
        else:
            timed = [c for f, c, _ in seen if f == figure]
            assert timed == jobs.cell_ids(cfg, paper, figure, "none")
            assert f"  {figure}: " in out and "projected at" in out
    if paper == "kato2024":
        assert "fig13: nothing to time" in out and "speed-up" in out  # the protocol's side-by-side table


def test_bench_times_the_reduced_run_of_the_full_job(monkeypatch):
    seen = []
    monkeypatch.setattr(bench, "_run_child", _fake_child(seen))
    monkeypatch.setattr(bench, "_build_inputs", lambda *a: None)
    bench.bench("lowy2023", ["fig4"], ROOT, trials=3, cells=["a"], scale="paper")
    cfg = config.load(ROOT, {"scale": "paper"})
    full = jobs.build_cell_job(cfg, "lowy2023", "fig4", "a", "none")
    assert seen == [("fig4", "a", {**full.params, "trials": 3})]
    assert dataclasses.replace(full, params=seen[0][2]).params["trials"] == 3


def test_bench_prints_each_lowy_run_of_a_panel_cell(monkeypatch, capsys):
    """lowy2023: `--cells a-noisy_mb_sgd` times panel a's cell computing that run only (its params: the one method);
    a whole panel prints each run's seconds per trial (the child's per-run `seconds_per_trial`) and the cell's."""
    seen = []

    def child(job, inputs, env, threads=1):
        seen.append((job.cell, job.params["methods"], job.params["trials"]))
        runs = {f"a-{m}": 0.5 for m in job.params["methods"]}
        return {"phases": None, "seconds": 3.0 * job.params["trials"], "loop_per_unit": None, "runs": runs,
                "units": None, "configs": None, "per_eval": 0.0, "evals": 0, "gpu_peak_mb": None, "device": "cpu",
                "peak_mb": 100.0}

    monkeypatch.setattr(bench, "_run_child", child)
    monkeypatch.setattr(bench, "_build_inputs", lambda *a: None)
    bench.bench("lowy2023", ["fig4"], ROOT, trials=2, cells=["a-noisy_mb_sgd"], scale="paper")
    bench.bench("lowy2023", ["fig4"], ROOT, trials=1, scale="paper")
    assert seen == [("a", ["noisy_mb_sgd"], 2), ("a", ["noisy_mb_sgd", "noisy_local_sgd", "mb_sgd", "local_sgd"], 1)]
    out = capsys.readouterr().out
    assert all(f"fig4 a-{m} " in out for m in ("noisy_mb_sgd", "noisy_local_sgd", "mb_sgd", "local_sgd")), out
    assert "fig4 a (4 runs)" in out and "3.00 s/trial" in out and "2.00 in the runs" in out


def test_bench_times_the_runs_named_inside_a_panel_cell(monkeypatch, capsys):
    """kato2024: `--cells d-default d-uldp_naive` times panel d's cell computing those two runs only, and prints
    each run's seconds per round (the child's per-run loops) and the cell's."""
    seen = []

    def child(job, inputs, env, threads=1):
        seen.append((job.cell, job.params["methods"]))
        return {"phases": None, "seconds": 9.0, "loop_per_unit": 3.0, "runs": {"d-default": 1.0, "d-uldp_naive": 2.0},
                "units": None, "configs": None, "per_eval": 0.0, "evals": 0, "gpu_peak_mb": None, "device": "cpu",
                "peak_mb": 100.0}

    monkeypatch.setattr(bench, "_run_child", child)
    monkeypatch.setattr(bench, "_build_inputs", lambda *a: None)
    bench.bench("kato2024", ["fig4"], ROOT, trials=2, cells=["d-default", "d-uldp_naive"], scale="paper")
    assert seen == [("d", ["default", "uldp_naive"])]
    out = capsys.readouterr().out
    assert "fig4 d-default" in out and "fig4 d-uldp_naive" in out and "d (2 runs)" in out
    with pytest.raises(bench.BenchError, match="runs inside cells: .*d-uldp_naive"):
        bench.plan(config.load(ROOT, {"scale": "paper"}), "kato2024", ["fig4"], 1, ["d-nope"])


@pytest.mark.parametrize("args, needle", [
    (("nope", None, 1, None), "unknown paper 'nope'; papers: asoodeh2021"),
    (("kato2024", ["fig99"], 1, None), "kato2024 has no figure 'fig99'; figures: fig10a"),
    (("kato2024", None, 0, None), "--trials must be ≥ 1"),
    (("kato2024", ["fig13"], 1, ["zz"]), "no cell 'zz' in kato2024 fig13; cells: a, b"),
    (("balle2020", None, 1, ["a"]), "cells: none (analytic figures)"),
])
def test_bench_rejects_requests_that_name_nothing(configs, args, needle):
    paper, figures, trials, cells = args
    with pytest.raises(bench.BenchError, match=needle.replace("(", r"\(").replace(")", r"\)")):
        bench.plan(configs["paper"], paper, figures, trials, cells)


def test_bench_cli_exits_nonzero_with_one_line(monkeypatch):
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "dpfl", "bench", "kato2024", "--figures", "fig13", "--cells", "zz"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "dpfl bench: error: no cell 'zz'" in proc.stderr
    assert "Traceback" not in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "dpfl", "bench", "kato2024", "--trials", "0"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "trials must be ≥ 1" in proc.stderr


# ------------------------------------------------------------------------------------------------ generated schemas

def test_each_paper_schema_takes_its_figure_ids_from_the_registry():
    import yaml

    from dpfl.papers import REGISTRY

    for paper, pdef in REGISTRY.items():
        schema = yaml.safe_load((ROOT / "workflow/schemas/papers" / f"{paper}.schema.yaml").read_text())
        assert schema["properties"]["figures"]["$ref"] == f"urn:dpfl:{paper}:figures", paper
        assert "properties" not in schema["properties"]["figures"], f"{paper}: figure ids are generated, not listed"
        generated = config.schema._figures_schema(paper, ROOT / "workflow/schemas/papers")
        assert set(generated["properties"]) == set(pdef.figures)
        for fig, fdef in pdef.figures.items():
            assert fdef.schema in schema["$defs"], f"{paper}/{fig}: no $defs entry {fdef.schema!r}"


def test_kato2024_method_ids_and_hyper_families_are_generated_from_the_method_registry():
    import yaml

    from dpfl.papers.kato2024.methods import schema_fragments
    from dpfl.papers.kato2024.methods import BY_ID

    fragments = schema_fragments()
    assert fragments["method-id"]["enum"] == list(BY_ID)
    assert set(fragments["hyper-block"]["enum"]) == {m.hyper for m in BY_ID.values()}
    text = (ROOT / "workflow/schemas/papers/kato2024.schema.yaml").read_text()
    assert "uldp_avg_ws]" not in text and "fedavg: {$ref" not in text  # nothing restated by hand
    schema = yaml.safe_load(text)
    params = schema["$defs"]["training_figure"]["properties"]["params"]["properties"]
    assert params["methods"]["items"] == {"$ref": "urn:dpfl:kato2024:method-id"}
    assert params["hyper"]["propertyNames"] == {"$ref": "urn:dpfl:kato2024:hyper-block"}


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))


def test_an_unknown_figure_or_hyper_family_names_file_key_and_allowed(project):
    paper_file = project / "config/papers/kato2024.yaml"
    _edit(paper_file, "\n  fig13:\n", "\n  fig99:\n")
    with pytest.raises(config.ConfigError,
                       match=r"(?s)kato2024\.yaml.*figures: unknown key 'fig99' \(did you mean 'fig9'\?\); "
                             r"allowed keys: .*fig13"):
        config.load(project)
    _edit(paper_file, "\n  fig99:\n", "\n  fig13:\n")
    _edit(paper_file, "      fedavg:", "      fedavgg:")
    with pytest.raises(config.ConfigError, match=r"(?s)kato2024\.yaml.*hyper.*'fedavgg'") as err:
        config.load(project)
    assert "naive" in str(err.value)  # the registered families are listed


def test_a_figure_of_an_existing_family_is_one_registry_entry_and_its_yaml(project, monkeypatch):
    """kato2024 "fig6b": Fig 6's family, registered in code and written in the paper file; no schema, rule or scale
    file edit: at every scale the DAG's jobs build and its cells are Fig 6's cells with Fig 6's params (the scale
    files reduce the family, not the figure)."""
    import yaml

    from dpfl.papers import REGISTRY

    fdef = FIGURES[("kato2024", "fig6")]
    monkeypatch.setitem(REGISTRY["kato2024"].figures, "fig6b", fdef)
    monkeypatch.setitem(FIGURES, ("kato2024", "fig6b"), fdef)
    config.schema._validator_cached.cache_clear()  # the generated figures schema is read from the registry once
    try:
        paper_file = project / "config/papers/kato2024.yaml"
        data = yaml.safe_load(paper_file.read_text())
        data["figures"]["fig6b"] = data["figures"]["fig6"]
        paper_file.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
        for scale in ("smoke", "quick", "paper"):
            cfg = config.load(project, {"scale": scale})
            assert "fig6b" in cfg.papers["kato2024"]["figures"]
            assert jobs.cell_ids(cfg, "kato2024", "fig6b", "none") == jobs.cell_ids(cfg, "kato2024", "fig6", "none")
            job = jobs.build_cell_job(cfg, "kato2024", "fig6b", "a", "none")
            assert job.params == jobs.build_cell_job(cfg, "kato2024", "fig6", "a", "none").params, scale
            written = cfg.paper_file_params("kato2024", "fig6b", "none")
            assert (cfg.figure_params("kato2024", "fig6b", "none")["rounds"] < written["rounds"]) == (scale != "paper")
    finally:
        config.schema._validator_cached.cache_clear()


def test_a_cell_reads_only_its_own_data(configs):
    """bietti2022 Fig 2's Stackoverflow cells (which Fig 1b reads) need no EMNIST; a kato2024 cell reads its own
    panel's allocations; a Fig 12 protocol cell reads nothing."""
    cfg = configs["quick"]
    for cell in jobs.cell_ids(cfg, "bietti2022", "fig2", "none"):
        datasets, _ = jobs.cell_needs(cfg, "bietti2022", "fig2", cell, "none")
        assert datasets == (("stackoverflow",) if cell.startswith("stackoverflow") else ("emnist",)), cell
    assert {(f, r) for f, _, r in jobs.cell_sources(cfg, "bietti2022", "fig1b", "none")} == {("fig2", None)}
    _, allocations = jobs.cell_needs(cfg, "kato2024", "fig6", "a", "none")
    assert allocations
    panel = cfg.figure_params("kato2024", "fig6", "none")["panels"][0]
    assert all(f"{panel['distribution']}-U{panel['users']}-S{panel['silos']}-" in a for a in allocations)
    assert jobs.cell_needs(cfg, "kato2024", "fig12", jobs.cell_ids(cfg, "kato2024", "fig12", "none")[0],
                           "none") == ((), ())


def _settings_reads(path: Path) -> list[str]:
    """Where a module reads a settings dict: a string key subscripted or `.get` from `params`, `p` or `job.params`
    (path:line: text)."""
    tree = ast.parse(path.read_text())
    lines = path.read_text().splitlines()

    def is_settings(node) -> bool:
        return (isinstance(node, ast.Name) and node.id in ("p", "params")) or (
            isinstance(node, ast.Attribute) and node.attr == "params" and isinstance(node.value, ast.Name)
            and node.value.id == "job")

    def is_key(node) -> bool:  # a settings key is a string (a tensor's index or a model's named parameter is not)
        return isinstance(node, ast.Constant) and isinstance(node.value, str)

    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and is_settings(node.value) and is_key(node.slice):
            found.append(node.lineno)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" \
                and is_settings(node.func.value) and node.args and is_key(node.args[0]):
            found.append(node.lineno)
    return [f"{path.relative_to(ROOT)}:{n}: {lines[n - 1].strip()}" for n in sorted(set(found))]


#: modules shared by a paper's layouts and its settings types, read at either boundary, with why
SHARED_BOUNDARY = {
    "dpfl.papers.kato2024.panels": "picks a figure's panel and its allocations from the params when the DAG is built "
                                   "(panel_of, seed_allocation) and reads a cell's own panel into a frozen Panel",
}


def test_no_settings_dict_is_read_below_the_boundary_of_a_family_with_a_settings_type():
    """A family that declares its frozen settings (FigureFamily.settings) reads its params dict only at a boundary:
    its layout (which builds the cell's params, at the Snakemake boundary), its settings module (`from_job`, at the
    cell's start), the modules of the paper's allocation kinds (the allocate stage's entry, reading an allocation's
    params) and the `SHARED_BOUNDARY` modules. Every other module of the paper its cell imports reads typed
    settings; every experiment family declares its settings type."""
    checked = set()
    for fdef in FIGURES.values():
        assert fdef.settings is not None or fdef.kind != "experiment", f"{fdef.cell}: no settings type"
        if fdef.settings is None:
            continue
        paper = ".".join(fdef.cell.split(".")[:3])  # dpfl.papers.<paper>
        kinds = REGISTRY[paper.rsplit(".", 1)[1]].allocation_kinds.values()
        boundary = {fdef.layout.split(":")[0], fdef.settings.split(":")[0], *SHARED_BOUNDARY,
                    *(kind.function.split(":")[0] for kind in kinds)}
        for file in codedeps.code_files(fdef.cell):
            module = file.removeprefix("src/").removesuffix(".py").replace("/", ".")
            if module.startswith(paper + ".") and module not in boundary:
                checked.add(ROOT / file)
    assert checked
    reads = [line for path in sorted(checked) for line in _settings_reads(path)]
    assert not reads, "settings dicts read below the boundary:\n" + "\n".join(reads)
