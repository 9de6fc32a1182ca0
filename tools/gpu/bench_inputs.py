"""The input files (prepared datasets, allocations) that `python -m dpfl bench PAPER --figures ...` reads at paper
scale, with their sizes: what must travel to a GPU machine beside the code and the wheels. The bench builds a missing
input with snakemake, which a machine without a package index (and without the `all` wheel set) does not have.

    python tools/gpu/bench_inputs.py kato2024 fig5 fig10b             # list them (and their total size)
    python tools/gpu/bench_inputs.py --missing kato2024 fig5 fig10b   # list the absent ones; exit 1 if any

Run from the repository root (or with src/ on PYTHONPATH)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))


def bench_inputs(paper: str, figures: list[str]) -> list[str]:
    """Paths (relative to the repository root) that the bench of these figures reads, as dpfl.bench finds them."""
    from dpfl import jobs, paths
    from dpfl.config import load

    cfg = load(ROOT, {"scale": "paper"})
    out: list[str] = []
    for figure in figures:
        datasets, allocations = jobs.needs(cfg, paper, figure, "none")
        for p in [paths.prepared_npz(d) for d in datasets] + [
                paths.allocation_npz(cfg.allocation(a)["dataset"], a) for a in allocations]:
            if str(p) not in out:
                out.append(str(p))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--missing", action="store_true", help="only the absent files; exit 1 if there are any")
    ap.add_argument("paper")
    ap.add_argument("figures", nargs="+")
    args = ap.parse_args(argv)
    files = bench_inputs(args.paper, args.figures)
    absent = [p for p in files if not (ROOT / p).exists()]
    if args.missing:
        for p in absent:
            print(p)
        return 1 if absent else 0
    total = 0
    for p in files:
        f = ROOT / p
        size = f.stat().st_size if f.exists() else None
        total += size or 0
        print(f"{'absent' if size is None else f'{size / 2**20:8.1f} MiB'}  {p}")
    print(f"{total / 2**20:8.1f} MiB  in all ({len(absent)} absent)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
