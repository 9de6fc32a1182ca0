"""Command line helpers (the pipeline itself runs through `snakemake`):

  python -m dpfl list                      figures, their families, modes and where their outputs land
  python -m dpfl config [--scale S]        the resolved, validated configuration (defaults filled in)
  python -m dpfl epsilon --q Q --sigma Z --steps T --delta D [--group-k K]
                                           ε of the Poisson-subsampled Gaussian (and for groups of K records)
  python -m dpfl bench PAPER [--figures fig4 fig6] [--trials 1] [--cells …] [--scale paper]
                                           seconds per unit of work (trial, round, run) and peak memory of each
                                           cell, and each figure's projected time, at paper scale
  python -m dpfl record [--results DIR] [--quick DIR] [--papers P ...] [--figures P/F ...] [--out DIR]
                          [--allow-dirty]
                                           the reproduction record (docs/reproduction/) from a built results/
  python -m dpfl record --check            the record's entries whose settings or code changed since
  python -m dpfl record --carry --baseline DIR --quick DIR [--papers P ...] [--figures P/F ...]
                                           carry stale entries across a code change that two quick-scale
                                           builds (the entry's code, this checkout's) show changes no number
  python -m dpfl claims-doc [--check]      the Claims section of docs/papers/<paper>.md, from the configuration
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def _project_root() -> Path:
    from dpfl.config import SNAKEFILE

    here = Path.cwd()
    for d in [here, *here.parents]:
        if (d / SNAKEFILE).exists() and (d / "config" / "config.yaml").exists():
            return d
    return Path(__file__).resolve().parents[2]


def cmd_list(args) -> int:
    from dpfl.config import load
    from dpfl.papers import FIGURES

    cfg = load(_project_root(), {"scale": args.scale} if args.scale else None)
    for paper, figure in cfg.selected():
        fdef = FIGURES[(paper, figure)]
        compat = " (+ authors-code variant)" if fdef.has_compat else ""
        print(f"{paper:12s} {figure:8s} {fdef.kind:10s} {fdef.family.name:14s} results/{paper}/{figure}/{compat}")
    return 0


def cmd_config(args) -> int:
    from dpfl.config import load

    cfg = load(_project_root(), {"scale": args.scale} if args.scale else None)
    out = {"globals": cfg.globals, "data_mirror_resolved": cfg.data_mirror(), "papers": cfg.papers}
    sys.stdout.write(json.dumps(out, indent=2, default=str, ensure_ascii=False) + "\n")  # ε, σ, ≤ as written
    return 0


def cmd_epsilon(args) -> int:
    import numpy as np

    from dpfl.privacy.group import group_epsilon_rdp
    from dpfl.privacy.rdp import SampledGaussian, epsilon, rdp_per_step

    mech = SampledGaussian("poisson", q=args.q)
    eps = epsilon(mech, args.sigma, args.steps, args.delta)
    print(f"record level: ε = {eps:.6g} at δ = {args.delta:g} (q = {args.q:g}, σ = {args.sigma:g}, {args.steps} steps)")
    if args.group_k:
        r = group_epsilon_rdp(lambda a: args.steps * rdp_per_step(mech, args.sigma, np.asarray(a)), args.group_k,
                              args.delta, orders=args.group_orders)
        print(f"group of {args.group_k} (RDP conversion at k' = {r['k_effective']}): ε = {r['epsilon']:.6g}")
    return 0


def cmd_bench(args) -> int:
    from dpfl.bench import BenchError, bench

    try:
        bench(args.paper, args.figures, _project_root(), trials=args.trials, cores=args.cores, cells=args.cells,
              threads=args.threads, scale=args.scale)
    except BenchError as exc:
        print(f"dpfl bench: error: {exc}", file=sys.stderr)
        return 2
    return 0


def cmd_record(args) -> int:
    from dpfl.record import (RecordError, build, carry_entries, check, not_recorded, same_checkout, selection,
                             why_texts)

    root = _project_root()
    try:
        same_checkout(root)  # settings and record from root, code hashes from the imported package: one checkout
        out = Path(args.out).resolve() if args.out else None
        if args.check:
            stale = check(root, out)
            for line in stale:
                print(f"stale: {line}")
            for paper, figure in not_recorded(root, out):
                print(f"not recorded yet: {paper}/{figure} (python -m dpfl record --figures {paper}/{figure} "
                      "after a paper-scale build)")
            print(f"{len(stale)} stale entr{'y' if len(stale) == 1 else 'ies'} in the reproduction record")
            return 1 if stale else 0
        chosen = selection(args.papers, args.figures)
        if args.carry:
            if not (args.baseline and args.quick):
                raise RecordError("--carry needs --baseline DIR (a quick-scale build of the entries' own code) and "
                                  "--quick DIR (a quick-scale build of this checkout's code)")
            carried, refused = carry_entries(root, Path(args.baseline).resolve(), Path(args.quick).resolve(),
                                             chosen, out)
            for line in carried:
                print(line)
            for line in refused:
                print(f"not carried: {line}")
            print(f"{len(carried)} entr{'y' if len(carried) == 1 else 'ies'} carried, {len(refused)} not carried")
            return 1 if refused else 0
        why = why_texts(args.why)
        parts = ["python -m dpfl record", f"--results {args.results}" if args.results != "results" else "",
                 f"--quick {args.quick}" if args.quick else "", f"--out {args.out}" if args.out else "",
                 "--allow-dirty" if args.allow_dirty else "",
                 " ".join(["--papers", *args.papers]) if args.papers else "",
                 " ".join(["--figures", *args.figures]) if args.figures else "",
                 *(f"--why '{item}'" for item in args.why or [])]
        command = " ".join(part for part in parts if part)
        record = build(root, Path(args.results).resolve(), Path(args.quick).resolve() if args.quick else None,
                       chosen, command, out=out, why=why, allow_dirty=args.allow_dirty)
    except RecordError as exc:
        print(f"dpfl record: error: {exc}", file=sys.stderr)
        return 2
    for paper, figures in chosen.items():
        entries = record["papers"][paper]["entries"]
        built = sum(e["status"] == "built" for e in entries)
        what = "" if figures is None else f" (recorded now: {', '.join(sorted(figures))})"
        print(f"{paper}: {built} of {len(entries)} figure entries built{what} -> {args.out or 'docs/reproduction'}/"
              f"{paper}.md")
    return 0


def cmd_claims_doc(args) -> int:
    from dpfl import claim_pages
    from dpfl.papers import PAPERS

    root = _project_root()
    papers = args.papers or sorted(PAPERS)
    unknown = sorted(set(papers) - set(PAPERS))
    if unknown:
        print(f"dpfl claims-doc: error: unknown paper(s) {', '.join(unknown)} (known: {', '.join(sorted(PAPERS))})",
              file=sys.stderr)
        return 2
    if args.check:
        differ = claim_pages.check(root, papers)
        for line in differ:
            print(line)
        print(f"{len(differ)} page{'' if len(differ) == 1 else 's'} to regenerate")
        return 1 if differ else 0
    for page in claim_pages.write(root, papers):
        print(f"rewrote {page.relative_to(root)}")
    return 0


def _bounded(kind, name: str, low=None, high=None, low_open: bool = False, high_open: bool = False):
    """An argparse type that parses `kind` and checks the bounds, with a one-line message instead of a traceback."""
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{name} must be a{'n integer' if kind is int else ' number'}, got {text!r}")
        if value != value or value in (float("inf"), float("-inf")):
            raise argparse.ArgumentTypeError(f"{name} must be finite, got {text!r}")
        if low is not None and (value <= low if low_open else value < low):
            raise argparse.ArgumentTypeError(f"{name} must be {'>' if low_open else '≥'} {low}, got {value}")
        if high is not None and (value >= high if high_open else value > high):
            raise argparse.ArgumentTypeError(f"{name} must be {'<' if high_open else '≤'} {high}, got {value}")
        return value
    return parse


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="dpfl", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("list", help="list the configured figures")
    p.add_argument("--scale", choices=["smoke", "quick", "paper"])
    p.set_defaults(func=cmd_list)
    p = sub.add_parser("config", help="print the resolved configuration")
    p.add_argument("--scale", choices=["smoke", "quick", "paper"])
    p.set_defaults(func=cmd_config)
    p = sub.add_parser("epsilon", help="ε of the Poisson-subsampled Gaussian mechanism")
    p.add_argument("--q", type=_bounded(float, "q", low=0, low_open=True, high=1), required=True,
                   help="sampling rate, 0 < q ≤ 1")
    p.add_argument("--sigma", type=_bounded(float, "sigma", low=0, low_open=True), required=True,
                   help="noise multiplier (std / sensitivity), > 0")
    p.add_argument("--steps", type=_bounded(int, "steps", low=1), required=True, help="compositions, ≥ 1")
    p.add_argument("--delta", type=_bounded(float, "delta", low=0, low_open=True, high=1, high_open=True),
                   required=True, help="0 < δ < 1")
    p.add_argument("--group-k", type=_bounded(int, "group-k", low=0), default=0,
                   help="also report ε for groups of k records")
    p.add_argument("--group-orders", choices=["mironov", "authors"], default="mironov",
                   help="record-level orders of the group conversion: mironov (a ≥ 2k', Prop. 2) | authors (kato2024's "
                        "code, K4)")
    p.set_defaults(func=cmd_epsilon)
    p = sub.add_parser("bench", help="speed and memory of the experiment figures at paper scale")
    p.add_argument("paper")
    p.add_argument("--figures", nargs="+", help="default: every experiment figure of the paper")
    p.add_argument("--trials", type=_bounded(int, "trials", low=1), default=1,
                   help="units of work to time per cell, ≥ 1 (lowy2023: trials; kato2024, bietti2022: rounds, all "
                        "seeds batched; kato2024 Figs 11-12: runs)")
    p.add_argument("--cells", nargs="+", help="only these cells, or runs inside a cell (kato2024 training: panel "
                   "\"a\", or its runs \"a-default\", \"a-uldp_avg_ws-q0.1\"; lowy2023: panel \"a\", or its runs "
                   "\"a-noisy_mb_sgd\", \"a-local_sgd\"; default: every cell of each figure)")
    p.add_argument("--cores", type=_bounded(int, "cores", low=1), default=2,
                   help="cores for the projected parallel time (default 2)")
    p.add_argument("--threads", type=_bounded(int, "threads", low=1), default=1,
                   help="torch threads per cell (default 1, as the pipeline runs one cell per core)")
    p.add_argument("--scale", choices=["smoke", "quick", "paper"], default="paper",
                   help="whose settings the cells run with (default paper; smoke checks the path in seconds)")
    p.set_defaults(func=cmd_bench)
    p = sub.add_parser("record", help="the reproduction record (docs/reproduction/) from a built results directory")
    p.add_argument("--results", default="results", help="the build to record (default: results, normally a "
                   "paper-scale build, e.g. the results/ of a checkout run with --config scale=paper)")
    p.add_argument("--quick", help="a quick-scale build whose verdicts are shown beside the recorded ones")
    p.add_argument("--papers", nargs="+", help="record only these papers, all their figures (default: every paper, "
                   "unless --figures names some); the others' entries stay")
    p.add_argument("--figures", nargs="+", metavar="PAPER/FIGURE", help="record only these figures (e.g. "
                   "kato2024/fig10a); every other entry stays, so a record is built in pieces across builds")
    p.add_argument("--why", nargs="+", action="extend", metavar="PAPER/FIGURE=TEXT",
                   help="why a figure is not in the recorded build (e.g. its projected time), shown on its row; "
                   "repeatable; a figure whose cells need a GPU at paper scale says so without it")
    p.add_argument("--out", metavar="DIR", help="write the record to DIR instead of docs/reproduction/ (which takes "
                   "paper-scale builds only: a reduced-scale build, e.g. smoke or quick, is recorded elsewhere)")
    p.add_argument("--allow-dirty", action="store_true", help="record a build made from a checkout with uncommitted "
                   "changes (refused without it): its entries say dirty, with the sha256 of that checkout's `git diff "
                   "HEAD`")
    p.add_argument("--check", action="store_true", help="list the entries whose settings or code changed since the "
                   "record (exit 1 when any)")
    p.add_argument("--carry", action="store_true", help="carry the stale entries (of --papers/--figures; default all) "
                   "across this checkout's code change where a quick-scale build of their recorded code (--baseline) "
                   "and one of this checkout's (--quick) give identical tables and claims (docs/configuration.md); "
                   "each carried entry keeps its paper-scale numbers and says so; exit 1 when one is not carried")
    p.add_argument("--baseline", metavar="DIR", help="with --carry: the results/ of a quick-scale build made in a "
                   "clean checkout whose code for the entries is the recorded code")
    p.set_defaults(func=cmd_record)
    p = sub.add_parser("claims-doc", help="the Claims section of docs/papers/<paper>.md, from the configuration")
    p.add_argument("--papers", nargs="+", help="only these papers (default: all)")
    p.add_argument("--check", action="store_true", help="list the pages whose Claims section differs from the "
                   "configuration, writing nothing (exit 1 when any)")
    p.set_defaults(func=cmd_claims_doc)
    args = parser.parse_args(argv)
    from dpfl.config import ConfigError

    try:
        return args.func(args)
    except ConfigError as exc:
        print(f"dpfl: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
