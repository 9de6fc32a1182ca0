"""What a paper package declares in its `__init__` (`PAPER = PaperDef(...)`): its figures (`FigureDef`), each of a
family (`FigureFamily`: the code and schema its figures share), the layout contract of an experiment family
(`FigureLayout`), the ways it arranges a dataset into silos and users
(`AllocationKind`), its methods module and the schema fragments generated from its registries. Functions
and classes are named as "module:name" strings so that reading the declarations imports no numerics (the Snakefile
reads them when it builds the DAG) and so that the code files each stage depends on can be found (dpfl.codedeps)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import ClassVar


class FigureLayout(ABC):
    """The shape of an experiment figure family, read when the DAG is built (so an implementation imports no
    numerics): which cells a figure has (one job each), what they read, and the part of the params each one uses.

    The three abstract hooks are required; the others have the defaults written here. dpfl.jobs (the DAG) and
    dpfl.bench (the benchmark) call these methods and nothing else. `params` is the figure's params in one mode
    (dpfl.config.ProjectConfig.figure_params), already validated against the paper's schema.
    """

    @abstractmethod
    def cells(self, params: dict) -> list[str]:
        """The figure's cell ids (unique; one job and one table each)."""

    @abstractmethod
    def needs(self, params: dict) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(prepared datasets, allocation names) the cells read. Settings that cannot work raise ValueError here,
        naming the file and key, so that the run stops before any job."""

    @abstractmethod
    def cell_params(self, params: dict, paper_settings: dict, cell: str) -> tuple[dict, dict]:
        """(params, paper settings) one cell depends on, and nothing more: editing anything else reruns nothing."""

    def cell_needs(self, params: dict, cell: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(prepared datasets, allocation names) one cell reads: its job's inputs, so that building one figure's cells
        needs only their own data (bietti2022 Fig 1b reads Fig 2's Stackoverflow cells, not its EMNIST ones).
        Default: the figure's `needs`."""
        return self.needs(params)

    def cell_runs(self, params: dict, cell: str) -> list[str]:
        """The runs one cell computes, in order. A run is what another figure may share (`reused_cells`) and what
        `dpfl bench --cells` may select inside a cell; a cell of several runs (kato2024: a panel, one run per method
        and sampling rate, in one process) marks each row of its table with its run in a `run` column, and its
        wall-clock columns per run (dpfl.stages.cell). Default: [cell] (a cell is one run)."""
        return [cell]

    def runs_params(self, params: dict, paper_settings: dict, cell: str, runs: list[str]) -> tuple[dict, dict]:
        """(params, paper settings) of `cell` computing only `runs` (a non-empty part of `cell_runs`, in its order):
        the job of a cell some of whose runs another figure computes (`reused_cells`), or a benchmark of some runs;
        for one run, what dpfl.jobs compares to decide that two figures' runs are the same. With every run it equals
        `cell_params`. Default: `cell_params` (a cell of one run)."""
        return self.cell_params(params, paper_settings, cell)

    def reused_cells(self, params: dict) -> dict[str, str]:
        """{run: figure}: runs (`cell_runs`; a cell id where a cell is one run) that are the same run as that figure's
        run of the same name; dpfl.jobs.cell_sources reads them from that figure's cell (its rows of that run) when
        both runs' params are identical (`runs_params`), and the figure's own cell then leaves them out. Default:
        none."""
        return {}

    def timed_cell(self, params: dict) -> bool:
        """Whether the cell measures wall-clock time, so that a local run gives it the machine alone
        (dpfl.jobs.cell_threads). Default: no."""
        return False

    def gpu_cell(self, params: dict) -> bool:
        """Whether the cell is worth a GPU (the `gpu` resource, dpfl.jobs.cell_gpu). Default: no."""
        return False

    def bench_units(self, params: dict) -> tuple[int, str] | None:
        """(how many units of work the full figure runs per cell, their name: "round", "trial", "run"), or None
        when the figure has nothing worth timing (dpfl.bench says so and moves on). Default: None."""
        return None

    def bench_params(self, params: dict, units: int) -> dict:
        """A cell's params reduced to `units` units of work (dpfl.bench). Required when bench_units is not None."""
        raise NotImplementedError(f"{type(self).__name__} times its cells (bench_units) but has no bench_params")

    def bench_evaluations(self, params: dict, units: int) -> int:
        """How many evaluations a cell makes in `units` units, when its table times them apart (bietti2022), so that
        the benchmark projects them at the full run's count. Default: 0 (evaluations are part of a unit)."""
        return 0

    def bench_side_by_side(self, phases: dict[str, dict]) -> list[str]:
        """Lines of a table comparing the phase times of cells that time phases ({cell: {phase: mean seconds}}).
        Default: none."""
        return []

    def table_values(self, params: dict, table: str) -> dict[str, set]:
        """{column: every value that column of the figure's tidy table can hold}, for the columns whose values follow
        from the settings (panel ids, methods, σ grid, implementations, ...), known before anything is built.
        tests/test_claim_selections.py checks every claim's selections against them at every scale and mode, so that
        settings which leave a claim nothing to select are found before a run. A value listed must be one the table
        can hold (a claim selecting it may find rows), and every value the table can hold must be listed (a claim
        selecting another one finds none). `table`: the figure's FigureDef.table ("module:function"), for a family
        whose figures make different tables from the same cells (bietti2022 Figs 1 and 2). A column not listed is
        unknown (not checked). Default: {} (nothing known)."""
        return {}


@dataclass(frozen=True)
class RunTiming:
    """What one run of a cell measured of its own wall-clock time (a cell of one run: the cell). Kept out of the cell's
    table, which then depends on the configuration alone: dpfl.stages.cell writes it to the table's timing sidecar,
    which the figure's table stage, the benchmark, the report and the record read."""

    seconds_per_round: float | None = None  # the round loop alone, per round
    seconds_per_trial: float | None = None  # lowy2023: the run's own work per trial (the trial's shared data aside)
    seconds_per_evaluation: float | None = None  # one evaluation, timed apart from the rounds (bietti2022)
    full_rounds: int | None = None  # T of the full run where its data sets it (bietti2022's epochs): a benchmark's
    # reduced run projects to it

    #: the fields that hold seconds (the sidecar's keys; never a column of a cell's table)
    SECONDS: ClassVar[tuple[str, ...]] = ("seconds_per_round", "seconds_per_trial", "seconds_per_evaluation")

    def measured(self) -> dict[str, float]:
        """The seconds it holds, by name (what the sidecar keeps)."""
        return {k: float(getattr(self, k)) for k in self.SECONDS if getattr(self, k) is not None}


@dataclass(frozen=True)
class CellResult:
    """What a cell function returns: its table (a pandas DataFrame of results only) and its timing: one RunTiming,
    or, for a cell of several runs (FigureLayout.cell_runs; a `run` column in the table), one per run in the order
    they ran; None for a cell that times nothing (kato2024's protocol cells measure their phases as results, in
    the table)."""

    table: object  # pandas.DataFrame (not imported here: the declarations stay import-light)
    timing: RunTiming | dict[str, RunTiming] | None = None


@dataclass(frozen=True)
class FigureFamily:
    """A family of figures: the code every figure of it runs (docs/architecture.md, stages) and the `$defs` entry its
    params follow. A new figure of an existing family is a `FigureDef(family=...)` and its YAML entry.

    Analytic families: `table(params, log)` returns the tidy table.
    Experiment families: `layout` names a `FigureLayout` subclass ("module:Class", import-light) that says which cells
    a figure has; `cell(job, inputs, log)` computes one cell and returns a `CellResult` (its table and timing);
    `table(params, tables, log)` aggregates the cell tables into the figure's tidy table; `settings` names the frozen
    type the cell reads its job into, once, at its start (`Class.from_job(job)`, job a dpfl.jobs.CellJob: its params
    and paper settings, checked and converted), so that nothing below that boundary reads a settings dict.

    `name` is the family's name within its paper: the key of the scale files' `families:` reductions (one reduction
    serves every figure of the family, a new one included), of the configuration limits (dpfl.config_limits) and of
    the figure's family in the report.
    """

    name: str
    # table, plot, schema: None where each figure names its own (kato2024's protocol figures: plot and schema)
    table: str | None  # "module:function" returning the tidy DataFrame (the figure's numbers)
    plot: str | None  # "module:function"(df, spec, meta) -> matplotlib figure
    schema: str | None  # the `$defs` entry of workflow/schemas/papers/<paper>.schema.yaml validating a figure's entry
    kind: str = "analytic"  # analytic (closed form, no data) | experiment (trained on datasets)
    has_compat: bool = False  # whether `compat: authors-code` changes its figures
    markdown: str | None = None  # "module:function"(df, spec) -> Markdown tables shown with the figure
    layout: str | None = None  # experiment families: "module:Class" of its FigureLayout
    cell: str | None = None  # experiment families: "module:function" computing one cell
    settings: str | None = None  # experiment families: "module:Class" of the cell's frozen settings (from_job)
    # the columns of its tables (cell and figure) that hold measured values no rebuild repeats (wall-clock seconds,
    # a value of freshly drawn keys): left out when two builds are compared (dpfl.record.carry)
    measured: tuple[str, ...] = ()

    def __post_init__(self):
        if (self.kind == "experiment") != (self.layout is not None) or (self.layout is None) != (self.cell is None):
            raise ValueError(f"FigureFamily {self.name!r}: an experiment family has a layout and a cell, an analytic "
                             f"family neither (kind {self.kind!r}, layout {self.layout!r}, cell {self.cell!r})")
        if self.settings is not None and self.kind != "experiment":
            raise ValueError(f"FigureFamily {self.name!r}: only an experiment family's cells read settings")


@dataclass(frozen=True)
class FigureDef:
    """One figure: its family, and what it draws differently from the family's other figures (its own table,
    plot, Markdown or `$defs` entry; None: the family's). The family's other fields read through (fdef.cell is
    fdef.family.cell)."""

    family: FigureFamily
    table: str | None = None
    plot: str | None = None
    markdown: str | None = None
    schema: str | None = None

    def __post_init__(self):
        for name in ("table", "plot", "markdown", "schema"):
            if getattr(self, name) is None:
                object.__setattr__(self, name, getattr(self.family, name))
        missing = [name for name in ("table", "plot", "schema") if getattr(self, name) is None]
        if missing:
            raise ValueError(f"a figure of family {self.family.name!r} names no {', '.join(missing)}, and neither does "
                             "its family")

    @property
    def kind(self) -> str:
        return self.family.kind

    @property
    def has_compat(self) -> bool:
        return self.family.has_compat

    @property
    def layout(self) -> str | None:
        return self.family.layout

    @property
    def cell(self) -> str | None:
        return self.family.cell

    @property
    def settings(self) -> str | None:
        return self.family.settings


@dataclass(frozen=True)
class AllocationKind:
    """A way to arrange a prepared dataset into silos/users; a paper's YAML `allocations:` instantiates it
    with parameters, cached in data/allocations/<dataset>/<name>.npz."""

    function: str  # "module:function"(arrays, params, log) -> dict of arrays
    datasets: tuple[str, ...]  # the datasets it applies to
    # seeded schemes (one file per instance, e.g. "zipf-U1000-S5-seed0"): "module:function"(instance) -> the
    # instance's params, named data/allocations/<dataset>/<paper>-<name>/<instance>.npz; None: one fixed file
    instances: str | None = None


@dataclass(frozen=True)
class PaperDef:
    """Everything a paper registers. Adding a figure of an existing family is one `figures` entry (+ its YAML);
    the paper's schema lists no figure ids (dpfl.config generates them from `figures`). `families` are its figures'
    families, each once (`families()`)."""

    figures: dict[str, FigureDef]
    allocation_kinds: dict[str, AllocationKind] = field(default_factory=dict)
    methods: str | None = None  # module whose import registers the paper's methods (dpfl.fl.methods.register)
    # "module:function"() -> {name: JSON schema}: schemas generated from the paper's registries (e.g. kato2024's
    # method ids), which its schema file `$ref`s as "urn:dpfl:<paper>:<name>"
    schema_fragments: str | None = None

    def families(self) -> dict[str, FigureFamily]:
        """{name: family} of the paper's figures, in figure order; two families of one name are an error."""
        out: dict[str, FigureFamily] = {}
        for fig, fdef in self.figures.items():
            if out.setdefault(fdef.family.name, fdef.family) is not fdef.family:
                raise ValueError(f"figure {fig}: a second figure family named {fdef.family.name!r}")
        return out
