"""One benchmarked cell, in its own process (`python -m dpfl.bench.child JOB INPUTS THREADS`, run by dpfl.bench).

A fresh process per cell, so that its peak resident memory (ru_maxrss) is the cell's own and no import or cache of an
earlier cell is counted or reused. It prints one JSON line: the cell's seconds (imports outside the timed region),
the peak memory, the GPU's peak where there is one, and what `timing_of` reads from the cell's result.
"""

from __future__ import annotations

import json
import resource
import sys
import time

from dpfl.figure import CellResult, RunTiming


def timing_of(result: CellResult) -> dict:
    """What a cell measured of its own time (its CellResult's RunTiming) and the counts its table gives:

    - `loop_per_unit`: the round loop alone, seconds per round; a cell of several runs (kato2024's panels) sums its
      runs' loops, and `runs` gives each;
    - lowy2023's panels (runs timed per trial): each run's own work per trial in `runs` (the trial's data, shared by
      the runs, is in no run's: the cell's seconds per trial count it), and no loop;
    - `units`: T where the data sets it (RunTiming.full_rounds); `per_eval`: one evaluation, timed apart;
    - from the table: `configs`, the (a, η) configs trained together (bietti2022); `evals`, the evaluations (its
      `evaluations` column); `phases`, mean seconds per protocol phase (kato2024 Figs 11-12: `phase`, `seconds`,
      which are the figure's results), with the rounds after the first apart (the first may pay one-off costs)."""
    df, timing = result.table, result.timing
    cols = set(df.columns)
    single = timing if isinstance(timing, RunTiming) else None
    loop, runs = (single.seconds_per_round if single else None), None
    if isinstance(timing, dict) and timing:
        if all(t.seconds_per_round is not None for t in timing.values()):
            runs = {str(k): float(t.seconds_per_round) for k, t in timing.items()}
            loop = sum(runs.values())
        elif all(t.seconds_per_trial is not None for t in timing.values()):
            runs = {str(k): float(t.seconds_per_trial) for k, t in timing.items()}
    phases = df.groupby("phase")["seconds"].mean().to_dict() if {"phase", "seconds"} <= cols else None
    if phases and "round" in cols and (df["round"] > 1).any():
        later = df[df["round"] > 1].groupby("phase")["seconds"].mean()
        phases.update({f"{k} (rounds ≥ 2)": v for k, v in later.items()})
    return {
        "loop_per_unit": None if loop is None else float(loop),
        "runs": runs,
        "units": single.full_rounds if single else None,
        "configs": len(df[["a", "eta"]].drop_duplicates()) if {"a", "eta"} <= cols else None,
        "per_eval": float(single.seconds_per_evaluation or 0.0) if single else 0.0,
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
    result = run(job, inputs, lambda *a: None)
    seconds = time.perf_counter() - start
    return {"seconds": seconds, **timing_of(result),
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
