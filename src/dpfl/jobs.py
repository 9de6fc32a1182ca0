"""The job of one cell, built in one place from the configuration (used by the Snakemake rule and by the
benchmark, so both run exactly the same thing)."""

from __future__ import annotations

import functools
from dataclasses import asdict, dataclass

from dpfl.figure import FigureLayout
from dpfl.io import config_hash, resolve
from dpfl.papers import FIGURES


@dataclass(frozen=True)
class CellJob:
    """Everything a cell computes from (besides its input files). Every field is part of the rule's params, so
    editing any of them reruns the cell; `params` and `settings` hold only what this cell uses."""

    paper: str
    figure: str
    cell: str
    mode: str  # none | authors-code (only a label here: the mode's effect is already merged into params)
    scale: str
    seed: int
    device: str  # auto | cpu | cuda
    params: dict  # the figure's params in this mode, reduced to what the cell uses
    settings: dict  # paper-level settings the cell uses (e.g. noise_calibration)

    def as_dict(self) -> dict:
        return asdict(self)


# How many threads a job may use is not part of its job (it does not change a result, so changing it must not rerun
# anything): the rule passes Snakemake's `threads` to the runner separately.


@functools.cache
def layout(paper: str, figure: str) -> FigureLayout:
    """The figure's `FigureLayout` (import-light): which cells an experiment figure has and what they need."""
    fdef = FIGURES[(paper, figure)]
    if fdef.layout is None:
        raise ValueError(f"{paper}/{figure} is an analytic figure: it has no cells")
    instance = resolve(fdef.layout)()
    if not isinstance(instance, FigureLayout):
        raise TypeError(f"{paper}/{figure}: layout {fdef.layout} is not a dpfl.figure.FigureLayout")
    return instance


def cell_ids(cfg, paper: str, figure: str, mode: str) -> list[str]:
    if FIGURES[(paper, figure)].layout is None:
        return []
    return list(layout(paper, figure).cells(cfg.figure_params(paper, figure, mode)))


def cell_runs(cfg, paper: str, figure: str, mode: str) -> dict[str, str]:
    """{run: cell} of every run of the figure's cells (the layout's `cell_runs`), in order."""
    if FIGURES[(paper, figure)].layout is None:
        return {}
    lay, params = layout(paper, figure), cfg.figure_params(paper, figure, mode)
    return {run: cell for cell in lay.cells(params) for run in lay.cell_runs(params, cell)}


def _run_params(cfg, paper: str, figure: str, cell: str, run: str, mode: str) -> tuple[dict, dict]:
    return layout(paper, figure).runs_params(cfg.figure_params(paper, figure, mode), cfg.paper_settings(paper), cell,
                                             [run])


def borrowed_runs(cfg, paper: str, figure: str, mode: str, _seen: frozenset = frozenset()) -> dict[str, tuple]:
    """{run: (figure, cell)}: the figure's runs that another figure's cell computes, which its own cells leave out.
    A run the layout declares the same as another figure's (`reused_cells`, e.g. kato2024 Fig 10(a)'s q = 1 curve
    is Fig 8's S = 5 zipf ULDP-AVG-w run) is borrowed when that figure is configured, has a run of that name, and both
    runs' params are identical (`runs_params` of the one run; otherwise the figure computes its own); a run that
    figure borrows in turn is read where it is computed."""
    if FIGURES[(paper, figure)].layout is None:
        return {}
    reused = layout(paper, figure).reused_cells(cfg.figure_params(paper, figure, mode))
    configured = cfg.papers[paper].get("figures", {})
    mine = cell_runs(cfg, paper, figure, mode)
    out = {}
    for run, source in reused.items():
        if run not in mine or source not in configured or source == figure or source in _seen:
            continue
        theirs = cell_runs(cfg, paper, source, mode)
        if run not in theirs or (_run_params(cfg, paper, figure, mine[run], run, mode)
                                 != _run_params(cfg, paper, source, theirs[run], run, mode)):
            continue
        onward = borrowed_runs(cfg, paper, source, mode, _seen | {figure})
        out[run] = onward.get(run, (source, theirs[run]))
    return out


def computed_runs(cfg, paper: str, figure: str, cell: str, mode: str) -> list[str]:
    """The runs the figure's own job of `cell` computes: its runs but the borrowed ones (`borrowed_runs`); all of
    them when every one is borrowed (a job nothing reads, e.g. `dpfl bench`'s)."""
    params = cfg.figure_params(paper, figure, mode)
    runs = layout(paper, figure).cell_runs(params, cell)
    borrowed = borrowed_runs(cfg, paper, figure, mode)
    return [r for r in runs if r not in borrowed] or runs


def cell_sources(cfg, paper: str, figure: str, mode: str) -> list[tuple[str, str, tuple[str, ...] | None]]:
    """(figure, cell, runs) whose table each part of the figure's table reads, in the order of the figure's runs: its
    own cells, and the runs it borrows from another figure's cell (`borrowed_runs`); `runs` None reads the whole
    cell table, a tuple only the rows of those runs (its `run` column). An analytic figure has none."""
    if FIGURES[(paper, figure)].layout is None:
        return []
    borrowed = borrowed_runs(cfg, paper, figure, mode)
    parts: list[list] = []  # [figure, cell, [runs]] of consecutive runs read from one cell
    for run, cell in cell_runs(cfg, paper, figure, mode).items():
        source = borrowed.get(run, (figure, cell))
        if parts and tuple(parts[-1][:2]) == source:
            parts[-1][2].append(run)
        else:
            parts.append([*source, [run]])
    out = []
    for f, c, runs in parts:
        whole = runs == [r for r in computed_runs(cfg, paper, f, c, mode)]
        out.append((f, c, None if whole else tuple(runs)))
    return out


def needs(cfg, paper: str, figure: str, mode: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(prepared datasets, allocation names) the figure's cells read."""
    if FIGURES[(paper, figure)].layout is None:
        return (), ()
    return layout(paper, figure).needs(cfg.figure_params(paper, figure, mode))


def cell_needs(cfg, paper: str, figure: str, cell: str, mode: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(prepared datasets, allocation names) one cell reads (the cell rule's inputs). The figure's `needs` runs first,
    so settings that cannot work stop the DAG with its message whichever cell asks."""
    needs(cfg, paper, figure, mode)
    return layout(paper, figure).cell_needs(cfg.figure_params(paper, figure, mode), cell)


def build_cell_job(cfg, paper: str, figure: str, cell: str, mode: str, runs: list[str] | None = None) -> CellJob:
    """The job of one cell from the resolved configuration `cfg` (dpfl.config.ProjectConfig): the runs it computes
    (`computed_runs`, or `runs`: the benchmark's choice); change a field with dataclasses.replace (the benchmark sets
    its trials that way)."""
    known = cell_ids(cfg, paper, figure, mode)
    if cell not in known:
        raise ValueError(f"{paper}/{figure} has no cell {cell!r}; cells: {', '.join(known)}")
    lay, params = layout(paper, figure), cfg.figure_params(paper, figure, mode)
    every = lay.cell_runs(params, cell)
    runs = computed_runs(cfg, paper, figure, cell, mode) if runs is None else list(runs)
    if not runs or not set(runs) <= set(every):
        raise ValueError(f"{paper}/{figure} cell {cell!r} has no runs {runs!r}; runs: {', '.join(every)}")
    if runs == every:
        params, settings = lay.cell_params(params, cfg.paper_settings(paper), cell)
    else:
        params, settings = lay.runs_params(params, cfg.paper_settings(paper), cell, [r for r in every if r in runs])
    g = cfg.globals
    return CellJob(paper=paper, figure=figure, cell=cell, mode=mode, scale=g["scale"], seed=g["seed"],
                   device=g["device"], params=params, settings=settings)


def cell_threads(cfg, paper: str, figure: str, cell: str, mode: str, local_cores: int | None) -> int:
    """Threads the cell rule claims: the config's `threads`, except for a cell that measures wall-clock time (its
    layout's `timed_cell(params)`: kato2024 Figs 11-12), which claims all `local_cores` of a local run so
    that no other job runs beside it and perturbs its timings (it computes on one thread itself, spec §7). Under a
    cluster executor (`local_cores` None) each job has its own allocation; ask for exclusive nodes there if timings
    matter (docs/cluster.md)."""
    threads = int(cfg.globals["threads"])
    if local_cores and layout(paper, figure).timed_cell(build_cell_job(cfg, paper, figure, cell, mode).params):
        return max(threads, int(local_cores))
    return threads


def cell_gpu(cfg, paper: str, figure: str, cell: str, mode: str) -> int:
    """1 if the cell is worth a GPU (its layout's `gpu_cell(params)`: kato2024's MNIST CNN cells, bietti2022's
    CNN cells), else 0: the `gpu` resource of the cell rule, so that `--resources gpu=1` runs them one at a time on a
    workstation and a cluster profile can send them to GPU nodes. It requests a resource only; the device the job
    computes on is `device:` (auto picks a GPU when one is visible)."""
    return int(bool(layout(paper, figure).gpu_cell(build_cell_job(cfg, paper, figure, cell, mode).params)))


def table_job(cfg, paper: str, figure: str, mode: str) -> dict:
    """The table rule's params (the figure's settings in a mode): what its table is computed from."""
    fdef = FIGURES[(paper, figure)]
    return {"function": fdef.table, "kind": fdef.kind, "mode": mode, "scale": cfg.globals["scale"],
            "params": cfg.figure_params(paper, figure, mode), "paper_settings": cfg.paper_settings(paper)}


def settings_hash(cfg, paper: str, figure: str, mode: str) -> str:
    """The hash of a figure's settings that its table's meta records (`config_hash`): the reproduction record
    compares it with today's configuration to tell a stale entry."""
    return config_hash({"paper": paper, "figure": figure, **table_job(cfg, paper, figure, mode)})
