"""Speed and memory benchmark of the experiment figures at paper scale (not a test: it prints numbers).

For each figure and each of its cells, a reduced run (the figure layout's `bench_params`: lowy2023 one trial,
kato2024 every seed for two rounds) runs in a fresh subprocess (a kato2024 training cell and a lowy2023 cell are
panels: their runs, one per method, are timed one by one inside them, and `--cells` may name runs, e.g. `a-default`,
`a-noisy_mb_sgd`) with the paper-scale settings
(config/papers/<paper>.yaml, scale `paper`); we report its seconds per unit of work (`bench_units`: a trial, or a
round), the peak resident memory of that process, and the projected time of the whole figure (units × Σ cells),
on one core and with the cells spread over the available cores as Snakemake runs them.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path


def _run_child(job, inputs: dict, env: dict, threads: int = 1) -> dict:
    """The cell run in its own process (dpfl.bench.child): its seconds, timing and peak memory."""
    proc = subprocess.Popen([sys.executable, "-m", "dpfl.bench.child", json.dumps(job.as_dict()), json.dumps(inputs),
                             str(threads)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    out, err = proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"benchmark cell {job.cell} failed:\n{err[-3000:]}")
    return json.loads(out.strip().splitlines()[-1])  # the child reports its own peak RSS (ru_maxrss, KiB)


class BenchError(ValueError):
    """A benchmark request that names nothing to run (unknown paper, figure or cell; trials < 1)."""


def plan(cfg, paper: str, figures: list[str] | None, trials: int, cells: list[str] | None) -> list[str]:
    """The figures to time, after checking the request against the configuration; raises BenchError naming what is
    wrong and what is allowed."""
    from dpfl import jobs

    if paper not in cfg.papers:
        raise BenchError(f"unknown paper {paper!r}; papers: {', '.join(sorted(cfg.papers))}")
    configured = sorted(cfg.papers[paper]["figures"])
    unknown = [f for f in figures or [] if f not in configured]
    if unknown:
        raise BenchError(f"{paper} has no figure {', '.join(map(repr, unknown))}; figures: {', '.join(configured)}")
    if trials < 1:
        raise BenchError(f"--trials must be ≥ 1 (units of work per cell), got {trials}")
    figs = figures or configured
    if cells:
        known = {c for f in figs for c in jobs.cell_ids(cfg, paper, f, "none")}
        runs = {r for f in figs for r in jobs.cell_runs(cfg, paper, f, "none")} - known
        missing = [c for c in cells if c not in known | runs]
        if missing:
            also = f"; runs inside cells: {', '.join(sorted(runs))}" if runs else ""
            raise BenchError(f"no cell {', '.join(map(repr, missing))} in {paper} {', '.join(figs)}; cells: "
                             f"{', '.join(sorted(known)) or 'none (analytic figures)'}{also}")
    return figs


def selected(cfg, paper: str, figure: str, cells: list[str] | None) -> dict[str, list[str] | None]:
    """{cell: the runs to time, None for the runs its job computes}: every cell, or those `cells` names, whole, or
    the runs it names inside a cell of several runs (kato2024: `a-default` inside panel `a`; lowy2023:
    `a-noisy_mb_sgd`)."""
    from dpfl import jobs

    cell_of = jobs.cell_runs(cfg, paper, figure, "none")
    out = {}
    for cell in jobs.cell_ids(cfg, paper, figure, "none"):
        if not cells or cell in cells:
            out[cell] = None
        else:
            chosen = [r for r, c in cell_of.items() if c == cell and r in cells]
            if chosen:
                out[cell] = chosen
    return out


def bench(paper: str, figures: list[str] | None, root: Path, trials: int = 1, cores: int = 2,
          cells: list[str] | None = None, threads: int = 1, scale: str = "paper") -> None:
    """`threads`: torch threads per cell (1: as Snakemake runs the cells, one per core; `cores`: one cell using
    the whole machine). `scale`: the settings whose cells are timed (paper; smaller scales check the path)."""
    from dpfl import jobs, paths
    from dpfl.config import load
    from dpfl.papers import FIGURES

    cfg = load(root, {"scale": scale})
    figs = plan(cfg, paper, figures, trials, cells)
    env = {**os.environ, "PYTHONPATH": str(root / "src")}
    print(f"{paper}: {scale}-scale settings, a reduced run of each cell ({trials} unit(s) of work), each in its own "
          f"process with {threads} thread(s)")
    for figure in figs:
        if FIGURES[(paper, figure)].layout is None:
            print(f"{figure}: analytic (no training); skipped")
            continue
        lay = jobs.layout(paper, figure)
        params = cfg.figure_params(paper, figure, "none")
        if lay.bench_units(params) is None:
            print(f"{figure}: nothing to time (its cells only count or arrange records); skipped")
            continue
        full_units, unit = lay.bench_units(params)
        todo = selected(cfg, paper, figure, cells)
        if not todo:
            continue
        datasets, allocations = jobs.needs(cfg, paper, figure, "none")
        inputs = {"prepared": {d: str(root / paths.prepared_npz(d)) for d in datasets},
                  "allocations": {a: str(root / paths.allocation_npz(cfg.allocation(a)["dataset"], a))
                                  for a in allocations}}
        missing = [p for group in inputs.values() for p in group.values() if not Path(p).exists()]
        if missing:
            _build_inputs(root, missing, cores, scale)
        rows, phases = [], {}
        for cell, runs in todo.items():
            full = jobs.build_cell_job(cfg, paper, figure, cell, "none", runs=runs)
            job = dataclasses.replace(full, params=lay.bench_params(full.params, trials))
            r = _run_child(job, inputs, env, threads)
            # a cell that times its own loop (kato2024: seconds per round) is projected as setup + loop × units;
            # otherwise as total per unit × units. A cell that times its evaluations apart (bietti2022) adds them
            # at the full run's count: a short run evaluates far more often per round than the full one.
            per_unit = r["loop_per_unit"] if r.get("loop_per_unit") else r["seconds"] / trials
            setup = max(0.0, r["seconds"] - per_unit * trials - r.get("per_eval", 0.0) * r.get("evals", 0))
            units = r.get("units") or full_units
            evals = lay.bench_evaluations(full.params, units)
            setup += r.get("per_eval", 0.0) * evals  # the full run's evaluations, counted with the fixed costs
            rows.append((cell, per_unit, r["peak_mb"], setup, units))
            if r.get("phases"):  # a cell that times phases (kato2024 Figs 11-12: the protocol)
                phases[cell] = r["phases"]
            seeds = len(job.params.get("seeds") or [1])
            per_seed = f" ({per_unit / seeds:7.2f} s/{unit} per seed)" if seeds > 1 else ""
            if r.get("configs"):
                per_seed += (f" ({r['configs']} configs batched: {per_unit / r['configs'] * 1e3:.2f} ms/{unit} "
                             f"per config)")
            what = f"setup, accounting and {evals} evaluations" if evals else "setup and accounting"
            if r.get("gpu_peak_mb") is not None:
                what += f"; GPU peak {r['gpu_peak_mb']:.0f} MiB on {r['device']}"
            if r.get("runs") and not r.get("loop_per_unit"):  # runs timed apart from the work they share (lowy2023)
                what += f"; of the {per_unit:.2f} s/{unit}, {sum(r['runs'].values()):.2f} in the runs, the rest shared"
            for run, loop in (r.get("runs") or {}).items():  # a cell of several runs: each one's loop
                each = f" ({loop / seeds:7.2f} s/{unit} per seed)" if seeds > 1 else ""
                print(f"  {figure} {run:28s} {loop:8.2f} s/{unit}{each}", flush=True)
            name = f"{cell} ({len(r['runs'])} runs)" if r.get("runs") else cell
            print(f"  {figure} {name:28s} {per_unit:8.2f} s/{unit}{per_seed}  + {setup:6.1f} s {what}"
                  f"   peak {r['peak_mb']:7.0f} MiB", flush=True)
        side_by_side = lay.bench_side_by_side(phases) if phases else []
        if side_by_side:
            print(f"  {figure}: mean seconds per phase (local training: per silo and round)")
            print("\n".join(side_by_side))
        per_cell = [units * s + setup for _, s, _, setup, units in rows]  # a cell's own T where the data set it
        serial = sum(per_cell)
        # Snakemake runs cells in parallel; the figure takes at least its slowest cell
        parallel = max(serial / max(1, cores // threads), max(per_cell))
        print(f"  {figure}: {sum(r[1] for r in rows):.1f} s per {unit} over {len(rows)} cells; projected at "
              f"{max(r[4] for r in rows)} {unit}s: {serial / 60:.1f} min one cell at a time "
              f"({threads} thread(s) each), ≈{parallel / 60:.1f} min on {cores} cores; "
              f"peak {max(r[2] for r in rows):.0f} MiB per job")


def _build_inputs(root: Path, missing: list[str], cores: int, scale: str) -> None:
    """Build the prepared datasets and allocations the cells read with Snakemake, its output in a log file."""
    from dpfl import paths

    log = root / paths.bench_log()
    log.parent.mkdir(parents=True, exist_ok=True)
    print(f"  building the inputs first ({len(missing)} file(s); Snakemake's output in {log})", flush=True)
    targets = [str(Path(p).relative_to(root)) for p in missing]
    with open(log, "a") as out:
        done = subprocess.run([str(Path(sys.executable).parent / "snakemake"), "--cores", str(cores),
                               "--config", f"scale={scale}", "--", *targets], cwd=root, stdout=out, stderr=out)
    if done.returncode != 0:
        raise RuntimeError(f"building the benchmark's inputs failed (exit {done.returncode}); see {log}")
