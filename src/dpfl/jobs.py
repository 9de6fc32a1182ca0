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


def cell_sources(cfg, paper: str, figure: str, mode: str) -> list[tuple[str, str]]:
    """(figure, cell) whose table each of the figure's cells reads: its own, or, where the layout declares that a
    cell is the same run as another figure's (`reused_cells`, e.g. kato2024 Fig 10(a)'s q = 1 curve is Fig 8's
    S = 5 zipf ULDP-AVG-w run), that figure's cell, provided both jobs are identical in everything but the figure
    name (otherwise the figure computes its own). An analytic figure has none."""
    if FIGURES[(paper, figure)].layout is None:
        return []
    reused = layout(paper, figure).reused_cells(cfg.figure_params(paper, figure, mode))
    configured = cfg.papers[paper].get("figures", {})
    available = {f: set(cell_ids(cfg, paper, f, mode)) if f in configured else set() for f in set(reused.values())}
    out = []
    for cell in cell_ids(cfg, paper, figure, mode):
        source = reused.get(cell)
        if source and cell in available[source]:
            mine, theirs = (build_cell_job(cfg, paper, f, cell, mode) for f in (figure, source))
            if (mine.params, mine.settings) == (theirs.params, theirs.settings):
                out.append((source, cell))
                continue
        out.append((figure, cell))
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


def build_cell_job(cfg, paper: str, figure: str, cell: str, mode: str) -> CellJob:
    """The job of one cell from the resolved configuration `cfg` (dpfl.config.ProjectConfig); change a field with
    dataclasses.replace (the benchmark sets its trials that way)."""
    known = cell_ids(cfg, paper, figure, mode)
    if cell not in known:
        raise ValueError(f"{paper}/{figure} has no cell {cell!r}; cells: {', '.join(known)}")
    params, settings = layout(paper, figure).cell_params(cfg.figure_params(paper, figure, mode),
                                                         cfg.paper_settings(paper), cell)
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
