"""Where every stage reads and writes, spelled once (relative to the project root). The rules
(workflow/rules/*.smk), the stage runners and the benchmark all build their paths here."""

from __future__ import annotations

MODE_SUBDIR = {"none": "", "authors-code": "authors-code/"}  # the authors-code variant sits beside the default
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


def figure_logs(paper: str, figure: str, mode: str = "none") -> str:
    return f"results/logs/{paper}/{figure}/{mode_subdir(mode)}"


def cell_table(paper: str, figure: str, cell: str, mode: str = "none") -> str:
    return f"{figure_dir(paper, figure, mode)}cells/{cell}.parquet"


def cell_timing(table_path: str) -> str:
    """The wall-clock sidecar beside a cell table (cells/<cell>.timing.json): measured seconds are kept out of the
    table, so that the same configuration gives the same table bytes."""
    return table_path.removesuffix(".parquet") + ".timing.json"


def bench_log() -> str:
    """Snakemake's output when `dpfl bench` builds the inputs its cells read."""
    return f"{REPORT_LOGS}bench/inputs.log"
