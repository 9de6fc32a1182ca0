"""The HTML report (results/report/index.html): every figure with its caption, mode, data provenance (and why a dataset
is a stand-in: the sources that failed, from its data sidecar), claims table and run time (an experiment figure's
compute is its cells' seconds, from their timing sidecars); the settings used, a run below paper scale summed up in
one sentence with its reduced settings in a collapsed table; every inferred setting. A figure built in both modes
(the paper's algorithm and `compat: authors-code`) shows both images and both verdicts side by side. Each claim
shows its verdict, the reason (one sentence from its numbers) and the cause where known; the raw numbers are one
click away, rounded to 4 significant digits. Claims over several figures (a paper file's top-level `claims:`) have
their own table under the paper; where some of their figures ran on stand-in data, the verdict over the others alone
(`without_standin`, dpfl.stages.claims) is shown beside the verdict over all of them.

Its first screen says when and from which commit it was built (dpfl.runinfo.build_info: short hash, "dirty" with
uncommitted changes, or "not a git checkout") and which datasets the figures used stand-ins for, and why.

It only reads what the figure stages wrote (sidecars, claims.json, Markdown captions, benchmark files), so it is
cheap to rebuild. `standalone=True` inlines every image, PDF and CSV as a data: URI: one file that can be copied
on its own (results/report/report-standalone.html); its links to the committed reproduction record
(docs/reproduction/) are absolute web addresses at the build's commit where the `origin` remote gives one
(dpfl.runinfo.blob_url), else relative, with a note saying so. The stage runner that writes it is
dpfl.stages.report.

It never shows verdicts that do not belong to the figure beside them. A claims file that is missing (its job failed:
Snakemake deletes the outputs of a failed job; or it has not run) is shown as missing, with the error its job logged;
one computed from another table or from other claims than the configured ones (its `inputs`, recorded by
dpfl.stages.claims, against the table on disk and the `claims_hash` of the figure entry) is shown as out of date,
without its verdicts. A figure whose files are missing is shown as not built. Both are listed at the top of the
page (`problems`).

The package: this module renders (the page-level summaries: verdict and cause counts, the reduced-scale sentence,
the stand-ins used, the figures grouped with their variants; and the pages themselves); dpfl.report.entries reads
what the figure stages wrote into one entry per figure variant and per claim over several figures, and decides
which claims files are current, missing or stale.
"""

from __future__ import annotations

import base64
import os
from collections import Counter
from pathlib import Path

import jinja2

from dpfl import paths
from dpfl.claims import CAUSES
from dpfl.report.entries import collect, collect_paper_claims
from dpfl.runinfo import blob_url, build_info

VERDICT_ORDER = ["pass", "fail", "inconclusive", "stand-in"]
CAUSE_ORDER = ["reduced-scale", "no-rows", "documented-difference", "paper-inconsistent", "stand-in", "not-reproduced"]


class _ModeLabels(dict):
    """A variant's name for a reader: the two modes, and "one-switch ablation <name>" for the others."""

    def __missing__(self, mode: str) -> str:
        return f"one-switch ablation {paths.ablation_name(mode) or mode} (the paper's algorithm, one item switched)"


MODE_LABEL = _ModeLabels({paths.PAPER_MODE: "paper's algorithm (compat: none)",
                          paths.AUTHORS_CODE: "authors' code (compat: authors-code)"})
MIME = {".png": "image/png", ".pdf": "application/pdf", ".csv": "text/csv"}


def standins_used(entries: list[dict], catalog: dict | None = None) -> list[dict]:
    """The datasets the report's figures used stand-ins for, each {name, reason, fetch, figures: [(text, anchor)]},
    for the top of the page (the figures themselves carry the SYNTHETIC STAND-IN banner); from the figures' sidecars.
    `fetch`: how to get the real data, with its size, from the dataset `catalog` ("" without one)."""
    from dpfl.data.source_record import real_data_hint

    out: dict[str, dict] = {}
    for e in entries:
        for d in e["sidecar"].get("datasets", []) if e["built"] else []:
            if not d.get("standin_why"):
                continue
            name = d.get("name") or "?"
            item = out.setdefault(name, {"name": name, "reason": d["standin_why"]["summary"],
                                         "fetch": real_data_hint(name, (catalog or {}).get(name)), "figures": []})
            shown = (f"{e['paper']} {e['figure']}" + (f" ({e['mode']})" if e["mode"] != "none" else ""),
                     f"{e['paper']}-{e['figure']}-{e['mode']}")
            if shown not in item["figures"]:
                item["figures"].append(shown)
    return list(out.values())


def file_link(report_dir: Path, standalone: bool):
    """How the page refers to a file: a path relative to the report, or (standalone) the file itself as a data: URI."""
    def link(path: Path) -> str:
        if standalone:
            return f"data:{MIME[path.suffix]};base64," + base64.b64encode(path.read_bytes()).decode("ascii")
        return os.path.relpath(path, report_dir).replace(os.sep, "/")
    return link


def doc_link(report_dir: Path, build: dict | None = None):
    """How the page refers to a committed document (the reproduction record's pages): a path relative to the report;
    with `build` (the standalone page, dpfl.runinfo.build_info) its absolute web address at the build's commit
    (dpfl.runinfo.blob_url), so that the link works once the page is copied elsewhere, else still the relative path
    (the page then says what it is relative to)."""
    def link(path: Path) -> str:
        url = blob_url(build, path) if build else None
        return url or os.path.relpath(path, report_dir).replace(os.sep, "/")
    return link


def _rows(variants: list[dict]) -> list[dict]:
    """Claims of one figure (or one cross-figure claim) as rows: id, the paper's words, one cell per variant."""
    rows: dict[str, dict] = {}
    for i, v in enumerate(variants):
        for c in v["claims"]:
            row = rows.setdefault(c["id"], {"id": c["id"], "claim": c["claim"], "note": c.get("note", ""),
                                            "sanity": c.get("sanity", False), "quote": c.get("quote", ""),
                                            "place": c.get("place", ""), "cells": [None] * len(variants)})
            row["cells"][i] = c
    return list(rows.values())


def group_variants(entries: list[dict], key: str) -> list[dict]:
    """Entries of the same (paper, `key`) — a figure, or a claim over several figures — together, each with its built
    variants (default mode first) and its claims as rows (one cell per variant)."""
    groups: dict[tuple, dict] = {}
    for e in entries:
        g = groups.setdefault((e["paper"], e[key]), {k: v for k, v in e.items() if k in ("paper", key, "figures")})
        g.setdefault("variants", []).append(e)
    for g in groups.values():
        g["variants"].sort(key=lambda v: v["mode"] != "none")
        g["rows"] = _rows(g["variants"])
        for row in g["rows"]:  # a variant without verdicts says why in its cell
            row["cells"] = [c if c is not None or not v["claims_problem"] else {"problem": v["claims_problem"]}
                            for c, v in zip(row["cells"], g["variants"])]
        g["why"] = next((v["why"] for v in g["variants"] if v.get("why")), "")
        g["anchor"] = f"{g['paper']}-{g[key]}-{g['variants'][0]['mode']}"
    return list(groups.values())


def _setting_text(value, limit: int = 80) -> tuple[str, str]:
    """(shown, full) text of a setting's value for reading: lists comma-separated in brackets, mappings as
    key: value, numbers as written (no Python reprs); `shown` cut to `limit` characters."""
    def text(v) -> str:
        if isinstance(v, dict):
            return "{" + ", ".join(f"{k}: {text(x)}" for k, x in v.items()) + "}"
        if isinstance(v, (list, tuple)):
            return "[" + ", ".join(text(x) for x in v) + "]"
        if isinstance(v, float):
            return f"{v:g}"
        return str(v)

    full = text(value)
    return (full if len(full) <= limit else full[:limit - 1] + "…"), full


def scale_summary(entries: list[dict], settings: dict) -> dict | None:
    """What the reduced scale means for the verdicts, shown above the summary: one sentence, and the settings that
    differ from the papers' as rows (paper, setting, this run, the paper's, figures) for a collapsed table; None at
    paper settings. From each built figure's sidecar (`reductions`, decided by the workflow)."""
    rows: dict[tuple, dict] = {}
    reduced = set()
    for e in entries:
        reductions = (e["sidecar"].get("reductions") if e["built"] else None) or e.get("reductions") or {}
        for key, (paper_value, used) in reductions.items():
            (used_text, used_full), (paper_text, paper_full) = _setting_text(used), _setting_text(paper_value)
            row = rows.setdefault((e["paper"], key, used_full, paper_full), {
                "paper": e["paper"], "key": key, "used": used_text, "used_full": used_full, "paper_value": paper_text,
                "paper_full": paper_full, "figures": []})
            row["figures"].append(e["figure"] + (f" ({e['mode']})" if e["mode"] != "none" else ""))
            reduced.add((e["paper"], e["figure"], e["mode"]))
    if not rows:
        return None
    weight = Counter()  # the settings reduced in most figures first
    for (_, key, _, _), row in rows.items():
        weight[key.split(".")[-1]] += len(row["figures"])
    keys = [k for k, _ in weight.most_common()]
    shown = ", ".join(keys[:4]) + (f" and {len(keys) - 4} more" if len(keys) > 4 else "")
    built = sum(e["built"] for e in entries)
    sentence = (f"Scale '{settings.get('scale', '')}': {len(reduced)} of {built} figures ran with smaller settings "
                f"than the papers' ({shown}), so their verdicts are not the paper-scale results (cause "
                f"'reduced-scale'); rerun with --config scale=paper for those.")
    return {"sentence": sentence, "rows": sorted(rows.values(), key=lambda r: (r["paper"], r["key"], r["figures"]))}


def _catalog(root: Path) -> dict | None:
    """The dataset catalog of the project at `root` (config/datasets.yaml), or None where there is none to read."""
    from dpfl.config import ConfigError, load_datasets

    try:
        return load_datasets(root)
    except (OSError, ConfigError):
        return None


def render_reports(figures: list[dict], settings: dict, targets: list[tuple[Path, bool]], root: Path = Path("."),
                   paper_claims: list[dict] | None = None, notice: str = "",
                   build: dict | None = None) -> tuple[list[str], Counter]:
    """The report pages (HTML), one per target (report folder, standalone?), and the count of claim verdicts, from
    what the figure stages wrote (read once). `figures`: one dict per built variant (paper, figure, mode, dir[, why,
    claims_hash]); `paper_claims`: one per built claim over several figures (paper, id, mode, figures, path[, tables,
    claims_hash]); `notice`: a line shown first (e.g. that the page was rebuilt after a failed run); `build`: the
    date and commit shown (dpfl.runinfo.build_info; default: read now from the checkout at `root`)."""
    build = build if build is not None else build_info(root)
    entries = collect(figures, root, settings)
    cross = collect_paper_claims(paper_claims or [], root)
    problems = [{"what": f"{e['paper']} {e['figure']}" + (f" ({e['mode']})" if e["mode"] != "none" else ""),
                 "anchor": f"{e['paper']}-{e['figure']}-{e['mode']}", "state": e["claims_state"],
                 "text": e["claims_problem"]} for e in entries if e["claims_problem"]]
    problems += [{"what": f"{c['paper']} {c['id']} over {' + '.join(c['figures'])}"
                  + (f" ({c['mode']})" if c["mode"] != "none" else ""), "anchor": f"{c['paper']}-claims-{c['id']}",
                  "state": c["claims_state"], "text": c["claims_problem"]} for c in cross if c["claims_problem"]]
    every = [c for e in [*entries, *cross] for c in e["claims"]]
    all_claims = [c for c in every if not c.get("sanity")]  # the paper's claims; sanity checks are counted apart
    sanity = Counter(c["verdict"] for c in every if c.get("sanity"))
    verdicts = Counter(c["verdict"] for c in all_claims)
    causes = Counter(c["cause"] for c in all_claims if c.get("cause"))
    env = jinja2.Environment(loader=jinja2.PackageLoader("dpfl", "templates"), autoescape=True,
                             undefined=jinja2.StrictUndefined)
    template = env.get_template("report.html.j2")
    shared = dict(
        entries=entries,
        groups=group_variants(entries, "figure"),
        cross_groups=group_variants(cross, "id"),
        settings=settings,
        verdicts=[(v, verdicts.get(v, 0)) for v in VERDICT_ORDER],
        sanity=[(v, sanity.get(v, 0)) for v in VERDICT_ORDER if sanity.get(v)],
        causes=[(c, causes[c], CAUSES[c]) for c in CAUSE_ORDER if causes.get(c)],
        scale_note=scale_summary(entries, settings),
        mode_label=MODE_LABEL,
        papers=sorted({e["paper"] for e in entries}),
        versions=next((e["sidecar"]["versions"] for e in entries if e["built"]), {}),
        device=next((e["sidecar"]["device"] for e in entries if e["built"]), {}),
        problems=problems,
        notice=notice,
        standins=standins_used(entries, _catalog(root)),
        build=build,
        has_record=any(e.get("record") for e in entries),  # a link to the committed record's pages
    )
    pages = [template.render(**shared, standalone=standalone, link=file_link(report_dir, standalone),
                             doc_link=doc_link(report_dir, build if standalone else None))
             for report_dir, standalone in targets]
    return pages, verdicts
