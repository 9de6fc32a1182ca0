"""Where every stage reads and writes, spelled once (relative to the project root). The rules
(workflow/rules/*.smk), the stage runners and the benchmark all build their paths here."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

# A figure's mode (a str, everywhere): the paper's algorithm ("none", the default), the authors' published code
# ("authors-code", `compat: authors-code`), or a one-switch ablation ("ablation-<name>": the paper's algorithm with
# one documented item of the authors' code switched). Spelled here once.
PAPER_MODE = "none"
AUTHORS_CODE = "authors-code"
MODES = (PAPER_MODE, AUTHORS_CODE)  # the two modes every figure with an authors-code difference has
MODE_SUBDIR = {PAPER_MODE: "", AUTHORS_CODE: "authors-code/"}  # the authors-code variant sits beside the default
ABLATION = "ablation-"  # the mode of a one-switch ablation: "ablation-<name>", in ablations/<name>/


def ablation_mode(name: str) -> str:
    return f"{ABLATION}{name}"


def ablation_name(mode: str) -> str | None:
    """The ablation a mode names ("ablation-q7" -> "q7"), None for the two modes."""
    return mode[len(ABLATION):] if mode.startswith(ABLATION) else None


def mode_subdir(mode: str) -> str:
    """Where a variant lives under its figure's (or paper's) directory: "", "authors-code/", "ablations/<name>/"."""
    name = ablation_name(mode)
    return MODE_SUBDIR[mode] if name is None else f"ablations/{name}/"


def subdir_mode(subdir: str) -> str:
    """The mode of a variant's folder (the inverse of mode_subdir)."""
    for mode, folder in MODE_SUBDIR.items():
        if subdir == folder:
            return mode
    return ablation_mode(subdir.removeprefix("ablations/").removesuffix("/"))
REPORT_HTML = "results/report/index.html"
REPORT_LOGS = "results/logs/"
RECORD_DIR = "docs/reproduction/"  # the committed reproduction record (dpfl.record)


def raw_source(dataset: str) -> str:
    """A dataset's provenance record; its raw files lie beside it."""
    return f"data/raw/{dataset}/SOURCE.json"


def prepared_npz(dataset: str) -> str:
    return f"data/prepared/{dataset}.npz"


def allocation_npz(dataset: str, allocation: str) -> str:
    """A fixed arrangement of a prepared dataset (silos, users), named in a paper's `allocations:`."""
    return f"data/allocations/{dataset}/{allocation}.npz"


def data_logs(dataset: str) -> str:
    return f"results/logs/data/{dataset}/"


def figure_dir(paper: str, figure: str, mode: str = "none") -> str:
    return f"results/{paper}/{figure}/{mode_subdir(mode)}"


@dataclass(frozen=True)
class FigureFiles:
    """The files of one figure directory (one variant of a figure: results/<paper>/<figure>/<variant>), each spelled
    here once: the rules (as wildcard patterns, `files_in(pattern, "{figure}")`), the stages, the report and the
    record read them from here."""

    dir: str  # the directory, ending in "/"
    table: str  # <figure>.csv: the figure's tidy table (stage table)
    meta: str  # <figure>.meta.json: the table's provenance (mode, scale, settings hash, cells read, versions)
    png: str  # <figure>.png: the figure (stage plot)
    pdf: str  # <figure>.pdf
    sidecar: str  # <figure>.json: the plot's sidecar (settings, provenance, data sources)
    markdown: str  # <figure>.md: the caption and the figure's Markdown tables
    claims: str  # claims.json: the figure's claims checked on its table (stage claims)
    cells: str  # cells/: one table per cell and its timing sidecar (cell_table, cell_timing)

    def built(self) -> list[str]:
        """What a build of the figure ends with (what `snakemake` asks for): its image, PDF, sidecar, caption and
        claims."""
        return [self.png, self.pdf, self.sidecar, self.markdown, self.claims]

    def report_reads(self) -> list[str]:
        """What a report page reads of the figure: what a build ends with, and its table."""
        return [*self.built(), self.table]


def files_in(directory: str, figure: str) -> FigureFiles:
    """The files of a figure in `directory` (a figure_dir, or a rule's wildcard pattern for one)."""
    return FigureFiles(dir=directory, table=f"{directory}{figure}.csv", meta=f"{directory}{figure}.meta.json",
                       png=f"{directory}{figure}.png", pdf=f"{directory}{figure}.pdf",
                       sidecar=f"{directory}{figure}.json", markdown=f"{directory}{figure}.md",
                       claims=f"{directory}claims.json", cells=f"{directory}cells/")


def figure_files(paper: str, figure: str, mode: str = "none") -> FigureFiles:
    return files_in(figure_dir(paper, figure, mode), figure)


def under(results: Path, path: str) -> Path:
    """A path spelled from results/ (the functions here) inside another results directory (a build in its own
    clone, a quick build beside a paper-scale one)."""
    return Path(results) / Path(path).relative_to("results")


def figure_logs(paper: str, figure: str, mode: str = "none") -> str:
    return f"results/logs/{paper}/{figure}/{mode_subdir(mode)}"


def cell_table(paper: str, figure: str, cell: str, mode: str = "none") -> str:
    return f"{figure_files(paper, figure, mode).cells}{cell}.parquet"


def cell_timing(table_path: str) -> str:
    """The wall-clock sidecar beside a cell table (cells/<cell>.timing.json): measured seconds are kept out of the
    table, so that the same configuration gives the same table bytes."""
    return table_path.removesuffix(".parquet") + ".timing.json"


def bench_log() -> str:
    """Snakemake's output when `dpfl bench` builds the inputs its cells read."""
    return f"{REPORT_LOGS}bench/inputs.log"
