"""Where a build's code comes from and which record entries are stale today (dpfl.record): the checkout that made a
results directory and its commit, the code files each figure's stages import and their hashes, whether a build's
outputs are older than its code, and the entries whose settings or code differ from today's. Building entries is
dpfl.record.entries; carrying them across a code change, dpfl.record.carry."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

from dpfl import codedeps, jobs, paths
from dpfl.config import SNAKEFILE
from dpfl.papers import FIGURES
from dpfl.runinfo import git_output


class RecordError(Exception):
    """A record cannot be written or checked (missing results, unknown paper): one line for the command line."""


def same_checkout(root: Path) -> None:
    """Raise RecordError unless `root` (the project checkout the command runs in: its settings, its record) holds the
    dpfl package this process imported (whose files the code hashes read, codedeps.SRC, and whose paper-scale
    claims the summary lists): a record or a check that mixed two checkouts would compare one's settings with the
    other's code, silently."""
    package = (codedeps.SRC / "dpfl").resolve()
    here = (Path(root) / "src" / "dpfl").resolve()
    if here == package:
        return
    has = "its own src/dpfl" if here.is_dir() else "no src/dpfl"
    home = package.parents[1]
    there = (f"run the command from that checkout ({home})" if (home / SNAKEFILE).is_file()
             else "that package is installed outside a project checkout")
    here_too = (f", or use this checkout's own code: cd {Path(root).resolve()} && PYTHONPATH=src python -m dpfl "
                "record …" if here.is_dir() else "")
    raise RecordError(f"the project checkout here ({Path(root).resolve()}, with {has}) is not the one the dpfl "
                      f"package in use is imported from ({package}): the record would take its settings from the "
                      f"first and its code hashes from the second. Either {there}{here_too}")


@functools.cache
def checkout_stage_files(checkout: Path | None = None) -> dict[str, dict[str, list[str]]]:
    """{"<paper>/<figure>": {stage: [source files]}} as `checkout`'s own registry and import graph give them
    (dpfl.record.stage_files; default: this package's checkout, computed here). Another checkout's answer comes
    from a child Python that imports that checkout's dpfl, and is refused unless it did."""
    from dpfl.record import stage_files

    home = codedeps.SRC.parent.resolve()
    root = home if checkout is None else Path(checkout).resolve()
    if root == home:
        return stage_files.registry_stage_files()["figures"]
    if not (root / "src" / "dpfl" / "papers").is_dir():
        raise RecordError(f"{root}: not a project checkout (no src/dpfl/papers), so its code files are unknown")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root / "src"), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, stage_files.__file__], cwd=root, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RecordError(f"{root}: its code could not list its figures' code files: "
                          f"{(done.stderr.strip().splitlines() or ['no message'])[-1]}")
    answer = json.loads(done.stdout)
    if Path(answer["root"]).resolve() != root / "src":
        raise RecordError(f"{root}: the child Python imported dpfl from {answer['root']}, not from {root / 'src'}")
    return answer["figures"]


def code_files(paper: str, figure: str, checkout: Path | None = None) -> dict[str, str]:
    """{source file: sha256[:12]} of every file the figure's stages import (cell, table, plot, claims), as
    `checkout`'s own code lists them (checkout_stage_files; default: this package's own checkout) and read from
    it; a file that checkout lacks hashes as "absent"."""
    stages = checkout_stage_files(checkout).get(f"{paper}/{figure}")
    if stages is None:
        raise RecordError(f"{checkout or codedeps.SRC.parent}: its code registers no figure {paper}/{figure}")
    files = sorted({f for stage_files in stages.values() for f in stage_files})
    root = checkout or codedeps.SRC.parent
    return {f: hashlib.sha256((root / f).read_bytes()).hexdigest()[:12] if (root / f).is_file() else "absent"
            for f in files}


def changed_files(now: dict[str, str], then: dict[str, str]) -> list[str]:
    """The source files whose hash differs between two code_files maps (a file in one only counts)."""
    return sorted(f for f in set(now) | set(then) if now.get(f) != then.get(f))


def code_hash(files: dict[str, str]) -> str:
    return hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()[:12]


def build_checkout(results: Path) -> Path | None:
    """The checkout whose code made `results`: its parent when that holds the dpfl sources (a build in its own
    clone, or this project's results/); None when it does not (a results directory moved elsewhere: the code is
    taken to be this package's)."""
    return results.parent if (results.parent / "src" / "dpfl").is_dir() else None


def checkout_state(checkout: Path, results: Path, allow_dirty: bool = False) -> dict:
    """The commit of the checkout that made `results`, {"commit", "dirty"}, for the record to name the code of the
    build. A checkout with uncommitted changes (to tracked files), or one git cannot read, is refused: its commit does
    not name that code. With `allow_dirty` it is recorded as dirty, with "diff_sha256": the sha256 of `git diff HEAD`
    there (what `git diff HEAD | sha256sum` prints), so that the exact tree can still be told apart and checked."""
    commit = git_output(checkout, "rev-parse", "--short=12", "HEAD")
    status = git_output(checkout, "status", "--porcelain", "--untracked-files=no")
    if commit is None or status is None:
        if not allow_dirty:
            raise RecordError(f"{checkout} (the checkout that made {results}) is not a git checkout git can read, so "
                              "no commit names the code of the build; build in a committed checkout, or pass "
                              "--allow-dirty to record it as dirty")
        return {"commit": "unknown", "dirty": True}
    state = {"commit": commit.decode().strip(), "dirty": bool(status.strip())}
    if state["dirty"]:
        if not allow_dirty:
            raise RecordError(f"{checkout} (the checkout that made {results}) has uncommitted changes (git status), so "
                              f"its commit {state['commit']} does not name the code of the build; commit them (the "
                              "code the build ran) and record again, or pass --allow-dirty to record it as dirty with "
                              "the sha256 of its `git diff HEAD`")
        diff = git_output(checkout, "diff", "--no-ext-diff", "--no-color", "HEAD")
        state["diff_sha256"] = hashlib.sha256(diff).hexdigest() if diff is not None else "unknown"
    return state


def read_json(path: Path) -> dict | None:
    return json.loads(path.read_text()) if path.exists() else None


def figure_paths(results: Path, paper: str, figure: str, mode: str) -> dict[str, Path]:
    """A figure's files (dpfl.paths.FigureFiles, spelled from results/) inside the results directory `results`."""
    made = paths.figure_files(paper, figure, mode)
    return {name: paths.under(results, getattr(made, name)) for name in ("dir", "table", "meta", "png", "claims")}


def built_meta(results: Path, paper: str, figure: str, mode: str) -> dict | None:
    """A built figure's meta (its table stage's), None when the figure is not built in `results`."""
    return read_json(figure_paths(results, paper, figure, mode)["meta"])


def outdated(results: Path, paper: str, figure: str, mode: str, checkout: Path) -> list[str]:
    """A built figure's outputs older than the code of their stage in the checkout that built them, one line each
    (empty: current), by Snakemake's own rule (an output older than an input reruns): the table's meta against the
    cell and table stages' code, the image against the plot's, claims.json against the claims'. Recording such a
    figure would stamp a build of older code with the checkout's current commit and code hashes."""
    code = checkout_stage_files(checkout)[f"{paper}/{figure}"]  # that checkout's own stages' files
    made = figure_paths(results, paper, figure, mode)
    stages = {"table": (made["meta"], ("cell", "table")), "plot": (made["png"], ("plot",)),
              "claims": (made["claims"], ("claims",))}
    out = []
    for output, code_stages in stages.values():
        if not output.is_file():
            continue
        built = output.stat().st_mtime
        newer = sorted({f for stage in code_stages for f in code.get(stage, ())
                        if (checkout / f).is_file() and (checkout / f).stat().st_mtime > built})
        if newer:
            out.append(f"{output.relative_to(results)} is older than {', '.join(newer[:3])}"
                       f"{f' and {len(newer) - 3} more' if len(newer) > 3 else ''}")
    return out


def stale_entries(root: Path, out: Path | None = None) -> dict[tuple[str, str, str], str]:
    """{(paper, figure, mode): why} for the record's built entries whose settings or code differ from today's."""
    from dpfl.config import load

    out = out or root / paths.RECORD_DIR
    record = read_json(out / "record.json")
    if record is None:
        raise RecordError(f"no record at {out / 'record.json'} (python -m dpfl record builds it)")
    configs, stale = {}, {}
    for paper, part in sorted(record["papers"].items()):
        for e in part["entries"]:
            if e["status"] != "built":
                continue
            key = (paper, e["figure"], e["mode"])
            if (paper, e["figure"]) not in FIGURES:
                stale[key] = "no longer a registered figure"
                continue
            if e["scale"] not in configs:
                configs[e["scale"]] = load(root, {"scale": e["scale"]})
            cfg = configs[e["scale"]]
            if e["figure"] not in cfg.papers[paper]["figures"]:
                stale[key] = f"no longer in config/papers/{paper}.yaml"
                continue
            why = []
            if jobs.settings_hash(cfg, paper, e["figure"], e["mode"]) != e["settings_hash"]:
                why.append(f"settings changed since the record (scale {e['scale']})")
            now = code_files(paper, e["figure"])
            changed = changed_files(now, e["code_files"])
            if changed:
                why.append(f"code changed since the record ({', '.join(changed[:3])}"
                           f"{f' and {len(changed) - 3} more' if len(changed) > 3 else ''})")
            if why:
                stale[key] = "; ".join(why)
    return stale


def not_recorded(root: Path, out: Path | None = None) -> list[tuple[str, str]]:
    """The registered figures (dpfl.papers.FIGURES) of the papers the record holds that have no entry in it yet: a
    figure added since its paper was recorded. Listed, not an error: the record gets its entry from the next
    paper-scale build that is recorded (python -m dpfl record --figures <paper>/<figure>)."""
    record = read_json((out or root / paths.RECORD_DIR) / "record.json")
    if record is None:
        return []
    have = {(paper, e["figure"]) for paper, part in record["papers"].items() for e in part["entries"]}
    return [(p, f) for (p, f) in FIGURES if p in record["papers"] and (p, f) not in have]


def check(root: Path, out: Path | None = None) -> list[str]:
    """The record's built entries whose settings or code differ from today's, one line each (empty: none stale)."""
    return [f"{paper}/{figure}" + ("" if mode == "none" else f" ({mode})") + f": {why}"
            for (paper, figure, mode), why in stale_entries(root, out).items()]


def entry_name(e: dict) -> str:
    """An entry's name on its paper's page: the figure, with its mode unless the paper's."""
    return f"{e['figure']}" + ("" if e["mode"] == "none" else f" ({e['mode']})")
