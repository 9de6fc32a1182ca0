"""Carrying a record entry across a change of code that does not change its numbers, on the evidence of a run.

An entry is stale when a file its figure imports changes (dpfl.record.entries.stale_entries). A change to a module
every figure imports (a shared type, the provenance) makes every entry stale, and rebuilding the whole record at
paper scale takes hours (each entry's run time is on its page). Such a change is carried, entry by entry, only where
a run shows that it does not change the figure's numbers:

- a *baseline* build at quick scale from a checkout whose code for the figure is the entry's (every file its stages
  import hashes as the entry records; the files as that checkout's own registry and imports list them,
  dpfl.record.stage_files, since a refactor adds and moves modules), and
- a *new* build at quick scale from this checkout's code (the same hashes as this checkout),
- with the same quick-scale settings (config hash), neither older than its checkout's code (entries.outdated), both
  from clean checkouts,

must give the same figure table (CSV, byte for byte), the same claims file (byte for byte) and equal cell tables
(every cell the figure reads, jobs.cell_sources; measured seconds live in timing sidecars, not in tables).

A figure whose numbers are measured wall-clock time (its family's `measured` columns, dpfl.figure.FigureFamily:
kato2024's protocol timings) cannot repeat them: its tables are compared without those columns, its claims file is
not compared (its verdicts rest on the times), and the entry keeps the times and verdicts of its paper-scale build.

A carried entry keeps everything from its paper-scale build (commit, date, verdicts, run time, versions) and takes
the new code files; its `carried` list names each change it was carried across (the commit, the files that
changed, the baseline's commit and what was compared), and its page shows it. A change of settings is never
carried: the entry needs a paper-scale rebuild. A figure whose tables differ is not carried, and stays stale.
"""

from __future__ import annotations

import datetime
import hashlib
from pathlib import Path

import pandas as pd

from dpfl import jobs, paths
from dpfl.papers import FIGURES
from dpfl.record.state import (
    RecordError, build_checkout, built_meta, changed_files, checkout_state, code_files, code_hash, entry_name, outdated,
    read_json, stale_entries)


def measured_columns(paper: str, figure: str) -> tuple[str, ...]:
    """The columns of a figure's tables a rebuild of the same code does not repeat (its family's `measured`: the
    protocol's wall-clock seconds, and its decryption error, a value of freshly drawn Paillier keys; empty: none)."""
    return FIGURES[(paper, figure)].family.measured


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _same_frame(a: pd.DataFrame, b: pd.DataFrame, drop: tuple[str, ...]) -> bool:
    """Equal columns (names and order) and equal values outside `drop` (dtype included: DataFrame.equals)."""
    if list(a.columns) != list(b.columns):
        return False
    keep = [c for c in a.columns if c not in drop]
    return a[keep].equals(b[keep])


def compare(baseline: Path, new: Path, paper: str, figure: str, mode: str, cfg) -> tuple[dict, list[str]]:
    """Compare one figure in one mode between two quick-scale results directories: ({what: [identical, total]},
    one line per difference). `cfg`: the quick-scale configuration (which cells the figure reads)."""
    made = paths.figure_files(paper, figure, mode)
    drop = measured_columns(paper, figure)
    counts = {"figure table": [0, 0], "claims": [0, 0], "cell tables": [0, 0]}
    diffs = []

    def one(kind: str, path: str, same) -> None:
        counts[kind][1] += 1
        name = Path(path).relative_to("results")  # as the difference names it
        a, b = paths.under(baseline, path), paths.under(new, path)
        for path, which in ((a, "baseline"), (b, "new")):
            if not path.is_file():
                diffs.append(f"{name}: missing in the {which} build")
                return
        if same(a, b):
            counts[kind][0] += 1
        else:
            diffs.append(f"{name}: differs")

    if drop:
        one("figure table", made.table, lambda a, b: _same_frame(pd.read_csv(a), pd.read_csv(b), drop))
    else:
        one("figure table", made.table, lambda a, b: _digest(a) == _digest(b))
        one("claims", made.claims, lambda a, b: _digest(a) == _digest(b))
    for source, cell, _runs in jobs.cell_sources(cfg, paper, figure, mode):
        one("cell tables", paths.cell_table(paper, source, cell, mode),
            lambda a, b: _same_frame(pd.read_parquet(a), pd.read_parquet(b), drop))
    return {k: v for k, v in counts.items() if v[1]}, diffs


def _check_build(results: Path, paper: str, figure: str, mode: str, want_files: dict, which: str) -> dict:
    """The quick-scale build of a figure in `results` ({"commit", "config_hash"}), or RecordError: not a quick
    build, built from code other than `want_files` (the entry's, or this checkout's), from a dirty checkout, or
    older than its checkout's code."""
    name = f"{paper}/{entry_name({'figure': figure, 'mode': mode})}"
    checkout = build_checkout(results)
    if checkout is None:
        raise RecordError(f"--{which} {results}: not the results/ of a project checkout, so its code is unknown")
    meta = built_meta(results, paper, figure, mode)
    if meta is None:
        raise RecordError(f"--{which} {results}: {name} is not built there")
    if meta["scale"] != "quick":
        raise RecordError(f"--{which} {results}: {name} was built at scale {meta['scale']}; carrying compares "
                          "quick-scale builds")
    files = code_files(paper, figure, checkout)
    if files != want_files:
        changed = changed_files(files, want_files)
        what = "the record entry's" if which == "baseline" else "this checkout's"
        raise RecordError(f"--{which} {results}: {name} was built from code other than {what} "
                          f"({', '.join(changed[:3])}{' …' if len(changed) > 3 else ''})")
    late = outdated(results, paper, figure, mode, checkout)
    if late:
        raise RecordError(f"--{which} {results}: {name} is older than its checkout's code ({'; '.join(late)})")
    return {**checkout_state(checkout, results), "config_hash": meta["config_hash"]}


def carry_over(root: Path, baseline: Path, new: Path, chosen: dict[str, set[str] | None],
               out: Path | None = None) -> tuple[dict, list[str], list[str]]:
    """Carry the chosen stale entries (those whose settings are unchanged) across this checkout's code change on
    the evidence of two quick-scale builds (module docstring); returns (the record, one line per carried entry, one
    line per entry that could not be carried). The record is returned, not written (dpfl.record.carry_entries)."""
    from dpfl.config import load

    out = out or root / paths.RECORD_DIR
    record = read_json(out / "record.json")
    if record is None:
        raise RecordError(f"no record at {out / 'record.json'} (python -m dpfl record builds it)")
    stale = stale_entries(root, out)
    cfg = load(root, {"scale": "quick"})
    configs = {"quick": cfg}  # per scale: today's settings, to tell a change of settings from one of code
    today = datetime.date.today().isoformat()
    carried, refused = [], []
    for paper, part in record["papers"].items():
        if paper not in chosen:
            continue
        for e in part["entries"]:
            key = (paper, e["figure"], e["mode"])
            if key not in stale or (chosen[paper] is not None and e["figure"] not in chosen[paper]):
                continue
            name = f"{paper}/{entry_name(e)}"
            if e["scale"] not in configs:
                configs[e["scale"]] = load(root, {"scale": e["scale"]})
            if (paper, e["figure"]) not in FIGURES or e["figure"] not in configs[e["scale"]].papers[paper]["figures"]:
                refused.append(f"{name}: {stale[key]}")  # no longer registered or configured: nothing to carry to
                continue
            if jobs.settings_hash(configs[e["scale"]], paper, e["figure"], e["mode"]) != e["settings_hash"]:
                refused.append(f"{name}: {stale[key]}: a change of settings needs a paper-scale rebuild")
                continue
            now = code_files(paper, e["figure"])
            try:
                old = _check_build(baseline, paper, e["figure"], e["mode"], e["code_files"], "baseline")
                made = _check_build(new, paper, e["figure"], e["mode"], now, "quick")
            except RecordError as exc:
                refused.append(f"{name}: {exc}")
                continue
            if old["config_hash"] != made["config_hash"]:
                refused.append(f"{name}: the two quick builds have different settings (config hash "
                               f"{old['config_hash']} and {made['config_hash']})")
                continue
            counts, diffs = compare(baseline, new, paper, e["figure"], e["mode"], cfg)
            if diffs:
                refused.append(f"{name}: the quick builds differ: {'; '.join(diffs[:3])}"
                               f"{f' and {len(diffs) - 3} more' if len(diffs) > 3 else ''}")
                continue
            changed = changed_files(now, e["code_files"])
            dropped = measured_columns(paper, e["figure"])
            e.setdefault("carried", []).append({
                "recorded": today, "commit": made["commit"], "from_code_hash": e["code_hash"],
                "changed": changed, "baseline_commit": old["commit"],
                "compared": {k: f"{same} of {total} identical" for k, (same, total) in counts.items()},
                **({"not_compared": f"measured columns {', '.join(dropped)}; claims (their verdicts rest on the "
                                    "measured times)"} if dropped else {})})
            e["code_files"], e["code_hash"] = now, code_hash(now)
            carried.append(f"{name}: carried ({', '.join(v for v in e['carried'][-1]['compared'].values())}; "
                           f"{len(changed)} file(s) changed)")
    return record, carried, refused
