"""The record's entries (dpfl.record): one per registered figure and mode of a build, with its verdicts, hashes
and build; updating record.json from a results directory, and which entries are stale today. The pages are
dpfl.record.pages."""

from __future__ import annotations

import datetime
import hashlib
import io
import json
import os
from collections import Counter
from pathlib import Path

from dpfl import codedeps, jobs, paths
from dpfl.config import SNAKEFILE
from dpfl.papers import FIGURES, MODES, PAPERS  # MODES: and the one-switch ablations a build holds (modes_built)
from dpfl.runinfo import git_output



def modes_built(results: Path, paper: str, figure: str | None = None) -> list[str]:
    """The modes to look for in `results` for a figure (or, figure None, a paper's claims over several figures):
    the two modes and every one-switch ablation built there ("ablation-<name>", in ablations/<name>/)."""
    base = results / paper / (figure or "") / "ablations"
    names = sorted(d.name for d in base.iterdir() if d.is_dir()) if base.is_dir() else []
    return [*MODES, *(paths.ablation_mode(n) for n in names)]
# what each entry and claim says about the build it is from (diff_sha256: only where its checkout had uncommitted
# changes, checkout_state)
BUILD_KEYS = ("recorded", "commit", "dirty", "diff_sha256", "command")
MAX_IMAGE_BYTES = 300_000
VERDICTS = ("pass", "fail", "inconclusive", "stand-in")


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


def code_files(paper: str, figure: str, checkout: Path | None = None) -> dict[str, str]:
    """{source file: sha256[:12]} of every file the figure's stages import (cell, table, plot, claims), read from
    `checkout` (default: this package's own checkout); a file that checkout lacks hashes as "absent"."""
    fdef = FIGURES[(paper, figure)]
    stages = ("cell", "table", "plot", "claims") if fdef.kind == "experiment" else ("table", "plot", "claims")
    files = sorted({f for stage in stages for f in codedeps.stage_code(fdef, stage)})
    root = checkout or codedeps.SRC.parent
    return {f: hashlib.sha256((root / f).read_bytes()).hexdigest()[:12] if (root / f).is_file() else "absent"
            for f in files}


def build_checkout(results: Path) -> Path | None:
    """The checkout whose code made `results`: its parent when that holds the dpfl sources (a build in its own
    clone, or this project's results/); None when it does not (a results directory moved elsewhere: the code is
    taken to be this package's)."""
    return results.parent if (results.parent / "src" / "dpfl").is_dir() else None


def cells_seconds(figure_dir: Path, cells_read: list | None = None) -> dict:
    """The compute of an experiment figure: its cells' wall-clock seconds summed from their timing sidecars
    (cells/<cell>.timing.json, dpfl.paths.cell_timing; the table stage only aggregates them), and how many cells.
    `cells_read` (the table's meta: the cell tables it read) limits the sum to the cells of this run; without it
    (an older sidecar) every timing sidecar in cells/ counts."""
    seconds, n = 0.0, 0
    timings = sorted((figure_dir / "cells").glob("*.timing.json"))
    if cells_read is not None:
        timings = [figure_dir / "cells" / paths.cell_timing(name) for name in cells_read]
    for path in timings:
        try:
            value = json.loads(path.read_text()).get("cell_seconds")
        except (OSError, ValueError):
            continue
        if isinstance(value, (int, float)):
            seconds, n = seconds + float(value), n + 1
    return {"seconds": round(seconds, 1), "cells": n}


def shared_seconds(root: Path, results: Path, paper: str, figure: str, mode: str, scale: str, configs: dict) -> float:
    """The wall-clock seconds of the runs a figure reads from other figures' cells (jobs.cell_sources; its table's
    meta counts only its own cells): a whole cell's `cell_seconds`, or the runs' own seconds where it reads some
    runs of a cell that times them per run (kato2024 panel cells). `configs` caches the configuration per scale."""
    from dpfl.config import load

    try:
        if scale not in configs:
            configs[scale] = load(root, {"scale": scale})
        sources = jobs.cell_sources(configs[scale], paper, figure, mode)
    except Exception:  # a figure or scale today's configuration no longer knows: nothing shared to count
        return 0.0
    total = 0.0
    for source, cell, runs in sources:
        if source == figure:
            continue
        rel = Path(paths.cell_timing(paths.cell_table(paper, source, cell, mode))).relative_to("results")
        timing = _read_json(results / rel) or {}
        per_run = timing.get("runs", {})
        if runs is not None and all(r in per_run for r in runs):
            total += sum(per_run[r]["seconds_per_round"] * per_run[r]["rounds"] for r in runs)
        else:
            total += float(timing.get("cell_seconds", 0.0))
    return total


def changed_files(now: dict[str, str], then: dict[str, str]) -> list[str]:
    """The source files whose hash differs between two code_files maps (a file in one only counts)."""
    return sorted(f for f in set(now) | set(then) if now.get(f) != then.get(f))


def _code_hash(files: dict[str, str]) -> str:
    return hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()[:12]


def _read_json(path: Path) -> dict | None:
    return json.loads(path.read_text()) if path.exists() else None


def _claims(data: dict | None) -> list[dict]:
    """The parts of a claims file's claims the record keeps: the verdict and every other verdict it reports."""
    keep = ("id", "claim", "verdict", "cause", "cause_text", "reason", "sanity", "quote", "place",
            "ablations")  # the variants' verdicts behind a cause: the record links the runs that show it
    out = []
    for c in (data or {}).get("claims", []):
        kept = {k: c[k] for k in c if k in keep or k.startswith("verdict_")}
        if c.get("without_standin"):  # a claim over several figures: its verdict without the stand-in figures
            part = c["without_standin"]
            kept["without_standin"] = {k: part.get(k) for k in ("figures", "verdict", "cause")}
        out.append(kept)
    return out


def variant(item: dict) -> str:
    """The variant an entry or claim comes from: its own `variant` where it names one (an ablation, e.g. "q7"), else
    its mode's name (today each mode is one variant: "none", "authors-code")."""
    return item.get("variant", item["mode"])


def quick_key(claim_id: str, mode: str, variant_name: str) -> tuple[str, str, str]:
    """What tells one quick-scale verdict from another: a claim id alone does not (a claim evaluated in several
    variants, or one id on several figures, would overwrite the others)."""
    return claim_id, mode, variant_name


def _quick_verdicts(quick_claims: list[dict], mode: str, variant_name: str) -> list[dict]:
    """A quick build's verdicts as the record keeps them: one {id, mode, variant, verdict} per claim, in the quick
    claims file's order (a list, so that no verdict overwrites another)."""
    return [{"id": c["id"], "mode": mode, "variant": variant_name, "verdict": c["verdict"]} for c in quick_claims]


def match_quick(claims: list[dict], quick: list[dict], mode: str, variant_name: str) -> list[str | None]:
    """The quick-scale verdict of each claim, in order (None where the quick build has none): the quick verdict with
    the claim's key (quick_key), the n-th one of a key for the n-th claim of that key (a claims file may hold an id
    twice)."""
    by_key: dict[tuple, list[str]] = {}
    for q in quick:
        by_key.setdefault(quick_key(q["id"], q["mode"], q["variant"]), []).append(q["verdict"])
    seen: Counter = Counter()
    matched = []
    for c in claims:
        key = quick_key(c["id"], mode, variant_name)
        verdicts = by_key.get(key, [])
        matched.append(verdicts[seen[key]] if seen[key] < len(verdicts) else None)
        seen[key] += 1
    return matched


def _image(png: Path) -> bytes:
    """The figure's PNG, shrunk until it is at most MAX_IMAGE_BYTES (a committed file)."""
    from PIL import Image

    data = png.read_bytes()
    if len(data) <= MAX_IMAGE_BYTES:
        return data
    image = Image.open(io.BytesIO(data)).convert("RGB")
    width = image.width
    while True:
        width = int(width * 0.8)
        small = image.resize((width, round(image.height * width / image.width)), Image.LANCZOS)
        buf = io.BytesIO()
        small.quantize(colors=128).save(buf, format="PNG", optimize=True)
        if buf.tell() <= MAX_IMAGE_BYTES or width < 300:
            return buf.getvalue()


def _not_built_why(root: Path, paper: str, figure: str, why: dict, configs: dict) -> str:
    """Why a figure is not in the recorded build: the `--why` text given for it, and whether its cells need a GPU at
    paper scale (jobs.cell_gpu, the `gpu` resource of its cell jobs). `configs` caches the paper-scale configuration
    across the entries of one build (loaded once, on the first figure left out)."""
    from dpfl.config import load

    parts = ["not in the recorded build"]
    try:
        if "paper" not in configs:
            configs["paper"] = load(root, {"scale": "paper"})
        cfg = configs["paper"]
        if any(jobs.cell_gpu(cfg, paper, figure, c, "none") for c in jobs.cell_ids(cfg, paper, figure, "none")):
            parts.append("its cells are GPU jobs at paper scale (docs/gpu.md)")
    except Exception:  # the reason is informative only
        pass
    if (paper, figure) in why:
        parts.append(why[(paper, figure)])
    return "; ".join(parts)


def _figure_rel(paper: str, figure: str, mode: str) -> Path:
    """A figure's directory relative to a results tree (paths.figure_dir, which is spelled from results/)."""
    return Path(paths.figure_dir(paper, figure, mode)).relative_to("results")


def _meta(results: Path, paper: str, figure: str, mode: str) -> dict | None:
    """A built figure's meta (its table stage's), None when the figure is not built in `results`."""
    return _read_json(results / _figure_rel(paper, figure, mode) / f"{figure}.meta.json")


def _entry(root: Path, results: Path, quick: Path | None, paper: str, figure: str, mode: str, out: Path,
           why: dict | None = None, configs: dict | None = None, checkout: Path | None = None,
           left_out: bool = False) -> dict | None:
    """One figure in one mode: None when the mode does not exist for the figure and was not built."""
    fdef = FIGURES[(paper, figure)]
    rel = _figure_rel(paper, figure, mode)
    meta = _meta(results, paper, figure, mode)
    if mode != "none" and (not fdef.has_compat or meta is None):
        return None
    entry = {"paper": paper, "figure": figure, "mode": mode}
    if left_out:  # outdated, given a --why (_refuse): its outputs are not a build of this checkout's code
        meta = None
        if mode != "none":
            return None
    if meta is None:
        return {**entry, "status": "not built", "why": _not_built_why(root, paper, figure, why or {},
                                                                  {} if configs is None else configs)}
    files = code_files(paper, figure, checkout)
    standin = [{"dataset": d.get("name"),
                "why": portable("; ".join(d.get("fallback_reasons") or []) or d.get("source", ""))}
               for d in meta.get("datasets", []) if d.get("standin")]
    image = None
    png = results / rel / f"{figure}.png"
    if png.exists():
        image = f"images/{paper}-{figure}{'' if mode == 'none' else '-' + mode}.png"
        (out / image).parent.mkdir(parents=True, exist_ok=True)
        (out / image).write_bytes(_image(png))
    quick_claims = _claims(_read_json(quick / rel / "claims.json")) if quick else []
    variant_name = mode  # each mode is one variant today; an ablation's entry would name its own (variant())
    shared = shared_seconds(root, results, paper, figure, mode, meta["scale"], {} if configs is None else configs)
    return {
        **entry,
        "status": "built",
        "scale": meta["scale"],
        "data_source": meta["data_source"],
        "standin": standin,
        "reduced_scale": meta.get("reduced_scale", False),
        "reductions": meta.get("reductions", {}),
        "settings_hash": meta["config_hash"],
        "code_hash": _code_hash(files),
        "code_files": files,
        # the cells' wall-clock seconds (their timing sidecars, as the report sums them) and the table stage's, plus
        # those of the runs it reads from other figures' cells (e.g. bietti2022 Figs 1b-c: all of theirs are Fig 2's)
        "seconds": round(cells_seconds(results / rel, meta.get("cells_read"))["seconds"]
                         + float(meta.get("compute_seconds", 0.0)) + shared, 1),
        "shared_seconds": round(shared, 1),
        "machine": {k: meta.get("device", {}).get(k) for k in ("platform", "cpu_count", "accelerator")},
        "versions": meta.get("versions", {}),
        "image": image,
        "claims": _claims(_read_json(results / rel / "claims.json")),
        "quick_verdicts": _quick_verdicts(quick_claims, mode, variant_name),
    }


def _paper_claims(results: Path, quick: Path | None, paper: str) -> list[dict]:
    """Claims over several figures (results/<paper>/[authors-code/]claims-<id>.json)."""
    out = []
    for mode in modes_built(results, paper):
        sub = f"{paper}/{paths.mode_subdir(mode)}"
        for path in sorted((results / sub).glob("claims-*.json")):
            data = json.loads(path.read_text())
            q = _read_json(quick / sub / path.name) if quick else None
            claims, variant_name = _claims(data), mode  # each mode is one variant today (variant())
            matched = match_quick(claims, _quick_verdicts(_claims(q), mode, variant_name), mode, variant_name)
            for c, quick_verdict in zip(claims, matched):
                out.append({"paper": paper, "mode": mode, "figures": data.get("figures", []),
                            "figures_not_built": data.get("figures_not_built", []), **c,
                            "quick_verdict": quick_verdict})
    return out


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


def selection(papers: list[str] | None, figures: list[str] | None) -> dict[str, set[str] | None]:
    """{paper: the figures to record (None: all of them)} from `--papers P …` and `--figures PAPER/FIGURE …`;
    neither given: every paper."""
    chosen: dict[str, set[str] | None] = {}
    for paper in papers or ([] if figures else list(PAPERS)):
        if paper not in PAPERS:
            raise RecordError(f"unknown paper {paper!r}; allowed: {', '.join(PAPERS)}")
        chosen[paper] = None
    for item in figures or []:
        paper, sep, figure = item.partition("/")
        if not sep or (paper, figure) not in FIGURES:
            known = ", ".join(f"{p}/{f}" for p, f in FIGURES if p == paper) or ", ".join(PAPERS)
            raise RecordError(f"--figures {item!r}: expected PAPER/FIGURE, one of: {known}")
        if paper not in chosen or chosen[paper] is not None:
            chosen.setdefault(paper, set()).add(figure)
    return chosen


def why_texts(items: list[str] | None) -> dict[tuple[str, str], str]:
    """{(paper, figure): why it is not in the build} from `--why PAPER/FIGURE=TEXT …` (a figure named twice: the last
    text). A figure that does not exist is an error, not a reason silently shown on no row."""
    why = {}
    for item in items or []:
        figure, sep, text = item.partition("=")
        if not sep or figure.count("/") != 1 or not text.strip():
            raise RecordError(f"--why {item!r}: expected PAPER/FIGURE=TEXT, e.g. 'kato2024/fig4=≈ 4 h on 2 cores'")
        paper, name = (part.strip() for part in figure.split("/"))
        if (paper, name) not in FIGURES:
            known = ", ".join(f"{p}/{f}" for p, f in FIGURES if p == paper)
            raise RecordError(f"--why {item!r}: no figure {paper}/{name}; "
                              + (f"{paper}'s figures: {known}" if known else f"papers: {', '.join(PAPERS)}"))
        why[(paper, name)] = text.strip()
    return why


def _upgrade(part: dict) -> dict:
    """A paper's part of a record written in an older form: before entries carried their own build (recorded, commit,
    dirty, command per paper), each entry and claim takes the paper's; before quick verdicts were keyed by claim, mode
    and variant ({id: verdict} per entry), each becomes one {id, mode, variant, verdict} of its entry's variant."""
    build_of = {k: part[k] for k in BUILD_KEYS if k in part}
    for item in part.get("entries", []) + part.get("paper_claims", []):
        for k, v in build_of.items():
            item.setdefault(k, v)
    for e in part.get("entries", []):
        if isinstance(e.get("quick_verdicts"), dict):
            e["quick_verdicts"] = [{"id": i, "mode": e["mode"], "variant": variant(e), "verdict": v}
                                   for i, v in e["quick_verdicts"].items()]
    return {"entries": part.get("entries", []), "paper_claims": part.get("paper_claims", [])}


def outdated(results: Path, paper: str, figure: str, mode: str, checkout: Path) -> list[str]:
    """A built figure's outputs older than the code of their stage in the checkout that built them, one line each
    (empty: current), by Snakemake's own rule (an output older than an input reruns): the table's meta against the
    cell and table stages' code, the image against the plot's, claims.json against the claims'. Recording such a
    figure would stamp a build of older code with the checkout's current commit and code hashes."""
    fdef = FIGURES[(paper, figure)]
    d = results / _figure_rel(paper, figure, mode)
    stages = {"table": (d / f"{figure}.meta.json", ("cell", "table") if fdef.kind == "experiment" else ("table",)),
              "plot": (d / f"{figure}.png", ("plot",)), "claims": (d / "claims.json", ("claims",))}
    out = []
    for output, code_stages in stages.values():
        if not output.is_file():
            continue
        built = output.stat().st_mtime
        newer = sorted({f for stage in code_stages for f in codedeps.stage_code(fdef, stage)
                        if (checkout / f).is_file() and (checkout / f).stat().st_mtime > built})
        if newer:
            out.append(f"{output.relative_to(results)} is older than {', '.join(newer[:3])}"
                       f"{f' and {len(newer) - 3} more' if len(newer) > 3 else ''}")
    return out


def _refuse(results: Path, chosen: dict[str, set[str] | None], paper_scale_only: bool,
            checkout: Path | None = None, why: dict | None = None) -> set[tuple[str, str, str]]:
    """Raise RecordError, before anything is written (a refused record leaves no image behind), when a chosen paper
    has no built figure in `results`; with `paper_scale_only` (the committed record), when a chosen figure was
    built at a reduced scale: the committed record stands for the paper-scale verdicts, and a smoke or quick build
    recorded there would replace a paper-scale entry with verdicts of other settings; and when a chosen figure's
    outputs are older than their code in `checkout`, the checkout that made them (`outdated`: rebuild first), unless
    `why` ({(paper, figure): text}, --why) says why it is left out: returns those, {(paper, figure, mode)}, to be
    recorded as not built."""
    left_out = set()
    for paper, figures in chosen.items():
        built = {(f, m): meta for (p, f) in FIGURES if p == paper and (figures is None or f in figures)
                 for m in modes_built(results, p, f) if (meta := _meta(results, p, f, m)) is not None}
        if not built:
            what = paper if figures is None else ", ".join(f"{paper}/{f}" for f in sorted(figures))
            raise RecordError(f"{results} holds no built figure of {what} (looked for "
                              f"results/{paper}/<figure>/<figure>.meta.json)")
        for (figure, mode), meta in built.items():
            if paper_scale_only and (meta.get("reduced_scale") or meta.get("scale") != "paper"):
                raise RecordError(f"{paper}/{entry_name({'figure': figure, 'mode': mode})} in {results} was built at "
                                  f"scale {meta.get('scale')!r} (reduced); the reproduction record holds paper-scale "
                                  "builds only; pass --out DIR to record it elsewhere")
            late = outdated(results, paper, figure, mode, checkout) if checkout is not None else []
            if late and (paper, figure) in (why or {}):
                left_out.add((paper, figure, mode))
            elif late:
                raise RecordError(f"{paper}/{entry_name({'figure': figure, 'mode': mode})} in {results} was built by "
                                  f"older code than its checkout holds ({'; '.join(late)}): run snakemake there "
                                  "first, then record")
    return left_out


def update(root: Path, results: Path, quick: Path | None, chosen: dict[str, set[str] | None] | list[str],
           command: str, out: Path | None = None, why: dict | None = None, allow_dirty: bool = False) -> dict:
    """Record the chosen figures ({paper: figures, None for all}, or a list of papers) from `results` (and
    `quick`'s verdicts) into out (default docs/reproduction/, which takes paper-scale builds only), keeping every
    other entry of an existing record; `why`: {(paper, figure): why it is not in the build}; returns the record.
    Each new entry and claim carries the build it came from: today's date, the commit of the checkout that made
    `results` (build_checkout; one with uncommitted changes is refused unless `allow_dirty`: checkout_state), and
    `command`."""
    out = out or root / paths.RECORD_DIR
    if isinstance(chosen, list):
        chosen = selection(chosen, None)
    if not results.is_dir():
        raise RecordError(f"no results directory at {results}")
    if quick is not None and not quick.is_dir():  # its verdicts would all be missing, silently
        raise RecordError(f"--quick {quick}: no quick-scale results directory there")
    checkout = build_checkout(results)
    left_out = _refuse(results, chosen, paper_scale_only=out.resolve() == (root / paths.RECORD_DIR).resolve(),
                       checkout=checkout, why=why)
    state = checkout_state(checkout or root, results, allow_dirty)
    out.mkdir(parents=True, exist_ok=True)
    old = _read_json(out / "record.json") or {"papers": {}}
    record = {"papers": {p: _upgrade(part) for p, part in old.get("papers", {}).items()}}
    made = {"recorded": datetime.date.today().isoformat(), **state, "command": command}
    configs: dict = {}  # the paper-scale configuration, loaded once if a figure is left out (_not_built_why)
    for paper, figures in chosen.items():
        kept = record["papers"].get(paper, {"entries": [], "paper_claims": []})
        old_entries = {(e["figure"], e["mode"]): e for e in kept["entries"]}
        entries, new = [], []
        for (p, f) in FIGURES:
            if p != paper:
                continue
            for m in dict.fromkeys([*modes_built(results, p, f), *(m for (g, m) in old_entries if g == f)]):
                if figures is None or f in figures:
                    e = _entry(root, results, quick, p, f, m, out, why, configs, checkout, (p, f, m) in left_out)
                    if e is not None:
                        new.append({**e, **made})
                        entries.append(new[-1])
                elif (f, m) in old_entries:
                    entries.append(old_entries[(f, m)])
                elif m == "none":
                    entries.append({"paper": p, "figure": f, "mode": m, "status": "not built",
                                    "why": "not recorded yet", **made})
        claims = [{**c, **made} for c in _paper_claims(results, quick, paper)]
        if figures is not None:  # recording some figures: the other claims over several figures stay
            fresh = {(c["id"], c["mode"], variant(c)) for c in claims}
            claims = [c for c in kept["paper_claims"] if (c["id"], c["mode"], variant(c)) not in fresh] + claims
        record["papers"][paper] = {"entries": entries, "paper_claims": claims}
    return record


def stale_entries(root: Path, out: Path | None = None) -> dict[tuple[str, str, str], str]:
    """{(paper, figure, mode): why} for the record's built entries whose settings or code differ from today's."""
    from dpfl.config import load

    out = out or root / paths.RECORD_DIR
    record = _read_json(out / "record.json")
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
    record = _read_json((out or root / paths.RECORD_DIR) / "record.json")
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


def anchor(e: dict) -> str:
    """The GitHub anchor of an entry's heading on its paper's page ("fig5 (authors-code)" -> "fig5-authors-code")."""
    text = "".join(ch for ch in entry_name(e).lower() if ch.isalnum() or ch in " -_")
    return text.replace(" ", "-")


def for_report(root: Path) -> dict[tuple[str, str, str], dict]:
    """What the HTML report shows beside each figure of the committed record: {(paper, figure, mode): {status, why,
    recorded, commit, scale, claims (id, verdict, cause, reason), page (its paper's page), anchor, stale (why, or
    "")}}; empty when there is no record. A record that cannot be read or checked is reported, not fatal."""
    out = root / paths.RECORD_DIR
    record = _read_json(out / "record.json")
    if record is None:
        return {}
    try:
        stale = stale_entries(root, out)
    except Exception as exc:  # the report must not fail on the record: say so beside every entry
        stale = None
        unchecked = f"could not be checked against today's settings and code ({type(exc).__name__}: {exc})"
    shown = {}
    for paper, part in record["papers"].items():
        for e in _upgrade(part)["entries"]:
            key = (paper, e["figure"], e["mode"])
            shown[key] = {
                "status": e["status"], "why": e.get("why", ""), "recorded": e.get("recorded", ""),
                "commit": e.get("commit", ""), "scale": e.get("scale", ""),
                "claims": [{k: c.get(k) for k in ("id", "verdict", "cause", "reason")} for c in e.get("claims", [])],
                "page": out / f"{paper}.md", "anchor": anchor(e),
                "stale": (stale.get(key, "") if stale is not None else unchecked) if e["status"] == "built" else ""}
    return shown


def portable(text: str) -> str:
    """A text the record keeps, for a reader on any machine: the data mirror's location (DPFL_DATA_MIRROR, as the
    build saw it) is written as `$DPFL_DATA_MIRROR`."""
    mirror = os.environ.get("DPFL_DATA_MIRROR")
    if mirror:
        for form in dict.fromkeys([mirror.rstrip("/"), str(Path(mirror).resolve())]):
            text = text.replace(form, "$DPFL_DATA_MIRROR")
    return text
