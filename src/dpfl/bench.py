"""Speed and memory benchmark of the experiment figures at paper scale (not a test: it prints numbers).

For each figure and each of its cells, one trial runs in a fresh subprocess with the paper-scale
settings (config/papers/<paper>.yaml, scale `paper`); we report seconds per trial, the peak resident
memory of that process, and the projected time of the whole figure (trials × Σ cells), on one core
and with the cells spread over the available cores as Snakemake runs them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

_CHILD = """
import json, resource, sys, time
from dpfl.registry import FIGURES, call
from dpfl.stages.common import resolve
job, inputs = json.loads(sys.argv[1]), json.loads(sys.argv[2])
fdef = FIGURES[(job.pop("paper"), job["figure"])]
run = resolve(fdef.cell)  # imports outside the timed region
t = time.perf_counter()
run(job, inputs, lambda *a: None)
print(json.dumps({"seconds": time.perf_counter() - t, "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def _run_child(job: dict, inputs: dict, env: dict) -> dict:
    proc = subprocess.Popen([sys.executable, "-c", _CHILD, json.dumps(job), json.dumps(inputs)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    out, err = proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"benchmark cell {job['cell']} failed:\n{err[-3000:]}")
    return json.loads(out.strip().splitlines()[-1])  # the child reports its own peak RSS (ru_maxrss, KiB)


def bench(paper: str, figures: list[str] | None, root: Path, trials: int = 1, cores: int = 2) -> None:
    from dpfl.config import load
    from dpfl.registry import ALLOCATIONS, FIGURES, call

    cfg = load(root, {"scale": "paper"})
    figs = figures or sorted(cfg.papers[paper]["figures"])
    env = {**os.environ, "PYTHONPATH": str(root / "src")}
    print(f"{paper}: paper-scale settings, {trials} trial(s) per cell, each cell in its own process")
    for figure in figs:
        fdef = FIGURES[(paper, figure)]
        if fdef.cell is None:
            print(f"{figure}: analytic (no training); skipped")
            continue
        spec = cfg.figure(paper, figure)
        params = {**spec["params"], "trials": trials}
        datasets, allocations = call(fdef.needs, params)
        inputs = {"prepared": {d: str(root / f"data/prepared/{d}.npz") for d in datasets},
                  "allocations": {a: str(root / f"data/allocations/{ALLOCATIONS[a].dataset}/{a}.npz") for a in allocations}}
        missing = [p for group in inputs.values() for p in group.values() if not Path(p).exists()]
        if missing:
            print(f"  building the inputs first: {', '.join(missing)}")
            targets = [str(Path(p).relative_to(root)) for p in missing]
            subprocess.run([str(Path(sys.executable).parent / "snakemake"), "--cores", str(cores), *targets],
                           cwd=root, check=True, stdout=subprocess.DEVNULL)
        paper_settings = {k: v for k, v in cfg.papers[paper].items() if k not in ("paper", "figures", "compat")}
        rows = []
        for cell in call(fdef.cells, params):
            own, settings = call(fdef.cell_params, params, paper_settings, cell) if fdef.cell_params else (params, paper_settings)
            job = {"paper": paper, "figure": figure, "cell": cell, "params": own, "paper_settings": settings,
                   "mode": "none", "scale": "paper", "seed": 0, "threads": 1}
            r = _run_child(job, inputs, env)
            rows.append((cell, r["seconds"] / trials, r["peak_mb"]))
            print(f"  {figure} {cell:28s} {r['seconds'] / trials:8.1f} s/trial   peak {r['peak_mb']:7.0f} MiB", flush=True)
        paper_trials = spec["params"]["trials"]
        serial = paper_trials * sum(s for _, s, _ in rows)
        # Snakemake runs cells in parallel; the figure takes at least its slowest cell
        parallel = max(serial / cores, paper_trials * max(s for _, s, _ in rows))
        print(f"  {figure}: {sum(s for _, s, _ in rows):.1f} s per trial over {len(rows)} cells; projected at "
              f"{paper_trials} trials: {serial / 60:.1f} min on 1 core, ≈{parallel / 60:.1f} min on {cores} cores; "
              f"peak {max(m for _, _, m in rows):.0f} MiB per job")
