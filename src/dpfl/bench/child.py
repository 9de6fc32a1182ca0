"""One benchmarked cell, in its own process (`python -m dpfl.bench.child JOB INPUTS THREADS`, run by dpfl.bench).

A fresh process per cell, so that its peak resident memory (ru_maxrss) is the cell's own and no import or cache of an
earlier cell is counted or reused. It prints one JSON line: the cell's seconds (imports outside the timed region),
the peak memory, the GPU's peak where there is one, and what `timing_of` reads from the cell's table.
"""

from __future__ import annotations

import json
import resource
import sys
import time

import pandas as pd


def timing_of(df: pd.DataFrame) -> dict:
    """What a cell's table says of its own timing, by family (the columns the cells write):

    - `loop_per_unit`: the round loop alone, seconds per round (`seconds_per_round`); a cell of several runs
      (kato2024's panels, a `run` column) sums its runs' loops, and `runs` gives each;
    - lowy2023's panels (`run` and `seconds_per_trial`): each run's own work per trial in `runs` (the trial's data,
      shared by the runs, is in no run's: the cell's seconds per trial count it);
    - `units`: T where the data sets it (`rounds_from_epochs`); `configs`: the (a, η) configs trained together
      (bietti2022); `per_eval` and `evals`: the evaluations, timed apart (`seconds_per_evaluation`, `evaluations`);
    - `phases`: mean seconds per protocol phase (kato2024 Figs 11-12: `phase`, `seconds`), with the rounds after
      the first apart (the first may pay one-off costs)."""
    cols = set(df.columns)
    loop = float(df["seconds_per_round"].iloc[0]) if "seconds_per_round" in cols else None
    runs = None
    if "run" in cols and "seconds_per_round" in cols:
        runs = {str(k): float(d["seconds_per_round"].iloc[0]) for k, d in df.groupby("run", sort=False)}
        loop = sum(runs.values())
    elif "run" in cols and "seconds_per_trial" in cols:
        runs = {str(k): float(d["seconds_per_trial"].iloc[0]) for k, d in df.groupby("run", sort=False)}
    phases = df.groupby("phase")["seconds"].mean().to_dict() if {"phase", "seconds"} <= cols else None
    if phases and "round" in cols and (df["round"] > 1).any():
        later = df[df["round"] > 1].groupby("phase")["seconds"].mean()
        phases.update({f"{k} (rounds ≥ 2)": v for k, v in later.items()})
    return {
        "loop_per_unit": loop,
        "runs": runs,
        "units": int(df["rounds_from_epochs"].iloc[0]) if "rounds_from_epochs" in cols else None,
        "configs": len(df[["a", "eta"]].drop_duplicates()) if {"a", "eta"} <= cols else None,
        "per_eval": float(df["seconds_per_evaluation"].iloc[0]) if "seconds_per_evaluation" in cols else 0.0,
        "evals": int(df["evaluations"].iloc[0]) if "evaluations" in cols else 0,
        "phases": phases,
    }


def measure(job, inputs: dict, threads: int) -> dict:
    """Run the cell once and return its seconds, timing and memory."""
    import torch

    from dpfl.io import resolve
    from dpfl.papers import FIGURES

    torch.set_num_threads(threads)
    run = resolve(FIGURES[(job.paper, job.figure)].cell)  # imports outside the timed region
    start = time.perf_counter()
    df = run(job, inputs, lambda *a: None)
    seconds = time.perf_counter() - start
    return {"seconds": seconds, **timing_of(df),
            "gpu_peak_mb": torch.cuda.max_memory_allocated() / 2**20 if torch.cuda.is_available() else None,
            "device": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu",
            "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def main(argv: list[str]) -> int:
    from dpfl.jobs import CellJob

    job, inputs, threads = CellJob(**json.loads(argv[0])), json.loads(argv[1]), int(argv[2])
    print(json.dumps(measure(job, inputs, threads)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
