"""Stage `table`: compute one figure's tidy table (results/<paper>/<figure>/<figure>.csv) and its
provenance record (<figure>.meta.json: mode, data source, params, whether the run is reduced, config hash, timing,
versions)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pandas as pd

from dpfl import paths, tidy
from dpfl.io import atomic_path, config_hash, get_logger, resolve, write_json
from dpfl.provenance import device, versions


def run_table(paper: str, figure: str, job: dict, csv_path: str, meta_path: str, log_path: str | None,
             cell_tables: list[str] = (), prepared: list[str] = (), *, reductions: dict,
             cell_runs: list | None = None) -> None:
    """`job` (the rule's params) = {function, kind, mode, scale, params}. Analytic figures compute the
    table from params; experiment figures aggregate their cell tables, and record the provenance of
    every prepared dataset they used (real or stand-in, where from, checksums). `cell_runs`: per cell table, None
    (all its rows) or the runs whose rows the figure reads there (a run another figure's cell computed,
    dpfl.jobs.cell_sources), by the table's `run` column. `reductions`: the settings of this
    run that differ from the paper's ({key: [paper, used]}, dpfl.config.overlays.scale_reductions; the workflow
    decides them, figures.smk's _reductions): the meta records them and `reduced_scale` (any of them), which the
    plot (the figure's face label) and the claims (cause reduced-scale) read instead of deciding again."""
    log = get_logger(log_path, f"{paper}/{figure}:table")
    log.info("mode %s, scale %s; computing with %s", job["mode"], job["scale"], job["function"])
    start = time.perf_counter()
    if job["kind"] == "experiment":
        runs = list(cell_runs) if cell_runs is not None else [None] * len(cell_tables)
        tables = [read_cell_table(path, r) for path, r in zip(cell_tables, runs, strict=True)]
        training = sum(_round_loop_seconds(path, r) for path, r in zip(cell_tables, runs))
        df = resolve(job["function"])(job["params"], tables, log.info)
        datasets = [dataset_provenance(path) for path in prepared]
        # no dataset at all: the task is generated in code from the seed (bietti2022's synthetic regression)
        data_source = ("standin" if any(d["standin"] for d in datasets) else "real") if datasets else "synthetic"
    else:
        df = resolve(job["function"])(job["params"], log.info)
        datasets, data_source, training = [], "analytic", 0.0
    df = tidy.finalize(df, paper, figure)
    seconds = time.perf_counter() - start
    with atomic_path(csv_path) as tmp:
        tidy.write(df, tmp)
    meta = {
        "paper": paper,
        "figure": figure,
        "mode": job["mode"],
        "scale": job["scale"],
        "kind": job["kind"],
        "data_source": data_source,
        "datasets": datasets,
        "params": job["params"],
        "reductions": reductions,  # below paper scale: the one decision, read by the plot and claims stages
        "reduced_scale": bool(reductions),
        "settings": job.get("paper_settings", {}),
        "config_hash": config_hash({"paper": paper, "figure": figure, **job}),
        "compute_seconds": round(seconds, 3),
        "cells_training_seconds": round(training, 3),  # the round loops of the cells that time them (kato2024)
        # the figure's own cell tables this table read (file names in its cells/): the report sums their timing
        # sidecars only, not whatever an older layout or another scale left in cells/
        "cells_read": sorted({Path(c).name for c in (cell_tables if job["kind"] == "experiment" else [])
                              if Path(c).parent.parent == Path(csv_path).parent}),
        "rows": len(df),
        "versions": versions(),
        "device": _devices(df),
    }
    write_json(meta, meta_path)
    log.info("wrote %d rows in %.2f s -> %s (data: %s)", len(df), seconds, csv_path, data_source)


def _devices(df) -> dict:
    """The machine of the table job, and the devices the cells trained on (a `device` column, e.g. "cpu" or
    "cuda (NVIDIA H100)"), which is where the numbers were computed."""
    out = device()
    if "device" in df.columns:
        used = sorted(set(df["device"].dropna().astype(str)))
        out["cells_ran_on"] = used
        out["accelerator"] = ", ".join(u for u in used if u != "cpu") or "none (CPU)"
    return out


def dataset_provenance(prepared_path: str) -> dict:
    """Where a prepared dataset came from, read from its npz meta (written by the data layer)."""
    from dpfl.data import load_prepared_meta

    meta = load_prepared_meta(prepared_path)
    keep = ("dataset", "source", "standin", "location", "files", "retrieved_at", "generator", "fallback_reasons")
    return {"name": meta.get("dataset"), **{k: meta[k] for k in keep if k in meta}}


def read_cell_table(path: str, runs=None) -> pd.DataFrame:
    """A cell table, or only the rows of `runs` (its `run` column) when the figure reads some runs of another
    figure's cell."""
    df = pd.read_parquet(path)
    if runs is None:
        return df
    if "run" not in df:
        raise ValueError(f"{path}: the figure reads its runs {', '.join(runs)}, but the cell table has no `run` column")
    missing = [r for r in runs if r not in set(df["run"])]
    if missing:
        raise ValueError(f"{path}: no rows of run {', '.join(missing)}; runs: {', '.join(df['run'].unique())}")
    return df[df["run"].isin(list(runs))].reset_index(drop=True)


def _round_loop_seconds(cell_table: str, runs=None) -> float:
    """Seconds of a cell's round loops (its timing sidecar: seconds per round × rounds; of `runs` only when given and
    the sidecar times runs apart), 0 when it does not time one."""
    path = Path(paths.cell_timing(str(cell_table)))
    if not path.exists():
        return 0.0
    timing = json.loads(path.read_text())
    parts = [timing["runs"][r] for r in runs if r in timing["runs"]] if runs is not None and "runs" in timing \
        else [timing]
    total = 0.0
    for part in parts:
        per_round, rounds = part.get("seconds_per_round"), part.get("rounds")
        total += float(per_round) * int(rounds) if per_round is not None and rounds else 0.0
    return total
