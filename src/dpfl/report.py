"""The HTML report (results/report/index.html): every figure with its caption, mode, data provenance,
claims table and run time; the settings used; every inferred setting. A figure built in both modes (the paper's
algorithm and `compat: authors-code`) shows both images and both verdicts side by side. Each claim shows its
verdict, the reason (one sentence from its numbers) and the cause where known; the raw numbers are one click away,
rounded to 4 significant digits. Claims over several figures (a paper file's top-level `claims:`) have their own
table under the paper.

It only reads what the figure stages wrote (sidecars, claims.json, Markdown captions, benchmark files), so it is
cheap to rebuild. `standalone=True` inlines every image, PDF and CSV as a data: URI: one file that can be copied
on its own (results/report/report-standalone.html). The stage runner that writes it is dpfl.stages.report."""

from __future__ import annotations

import base64
import csv
import html
import json
import os
from collections import Counter
from pathlib import Path

import jinja2

from dpfl import paths
from dpfl.claims import CAUSES, rounded, summarize_check

VERDICT_ORDER = ["pass", "fail", "inconclusive", "stand-in"]
CAUSE_ORDER = ["reduced-scale", "documented-difference", "stand-in", "not-reproduced"]
MODE_LABEL = {"none": "paper's algorithm (compat: none)", "authors-code": "authors' code (compat: authors-code)"}
MIME = {".png": "image/png", ".pdf": "application/pdf", ".csv": "text/csv"}


def _markdown_table_to_html(markdown: str) -> str:
    """Render the pipe tables and fenced code blocks of a figure's Markdown (enough for Table 1)."""
    out, rows, in_code = [], [], False

    def flush():
        if rows:
            head, *body = rows
            out.append("<table class='data'><tr>" + "".join(f"<th>{html.escape(c)}</th>" for c in head) + "</tr>")
            out.extend("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in body)
            out.append("</table>")
            rows.clear()

    for line in markdown.splitlines():
        if line.startswith("```"):
            flush()
            out.append("</pre>" if in_code else "<pre>")
            in_code = not in_code
        elif in_code:
            out.append(html.escape(line))
        elif line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not all(set(c) <= set("-: ") for c in cells):
                rows.append(cells)
        else:
            flush()
            if line.strip():
                out.append(f"<p>{html.escape(line)}</p>")
    flush()
    return "\n".join(out)


def _benchmark(path: Path) -> dict:
    """Seconds and peak memory (MiB) of a job, from its Snakemake benchmark file, if any."""
    if not path.exists():
        return {}
    with open(path) as fh:
        row = next(csv.DictReader(fh, delimiter="\t"), None)
    if not row:
        return {}
    try:
        return {"seconds": float(row["s"]), "max_rss_mb": float(row["max_rss"]) if row["max_rss"] != "-" else None}
    except (KeyError, ValueError):
        return {}


def _prepare_claims(claims: list[dict]) -> list[dict]:
    """Add what the page shows to each claim: a summary line per check and its numbers rounded for reading."""
    for c in claims:
        c.setdefault("reason", "")
        c.setdefault("cause", None)
        c.setdefault("cause_text", "")
        for check in c["checks"]:
            check["summary"] = summarize_check(check["check"])
            check.setdefault("reason", "")
            check["numbers_json"] = json.dumps(rounded(check["numbers"]), indent=1, default=str, ensure_ascii=False)
    return claims


def file_link(report_dir: Path, standalone: bool):
    """How the page refers to a file: a path relative to the report, or (standalone) the file itself as a data: URI."""
    def link(path: Path) -> str:
        if standalone:
            return f"data:{MIME[path.suffix]};base64," + base64.b64encode(path.read_bytes()).decode("ascii")
        return os.path.relpath(path, report_dir).replace(os.sep, "/")
    return link


def collect(figures: list[dict], root: Path) -> list[dict]:
    """One entry per figure variant (paper, figure, mode) with its sidecar, claims, files and tables."""
    entries = []
    for f in figures:
        d = root / f["dir"]
        sidecar = json.loads((d / f"{f['figure']}.json").read_text())
        claims_file = json.loads((d / "claims.json").read_text())
        log_dir = root / paths.figure_logs(f["paper"], f["figure"], f["mode"])
        md = (d / f"{f['figure']}.md").read_text()
        entries.append({
            "why": "",
            **f,
            "sidecar": sidecar,
            "claims": _prepare_claims(claims_file["claims"]),
            "reductions": claims_file.get("reductions", {}),
            "files": {ext: d / f"{f['figure']}.{ext}" for ext in ("png", "pdf", "csv")},
            "table_html": _markdown_table_to_html(md[md.find("\n|") + 1:]) if "\n|" in md else "",
            "benchmark": _benchmark(log_dir / "table.benchmark.tsv"),
        })
    return entries


def collect_paper_claims(paper_claims: list[dict], root: Path) -> list[dict]:
    """Claims over several figures: one entry per (paper, claim id, mode) from results/<paper>/…claims-<id>.json."""
    out = []
    for p in paper_claims:
        data = json.loads((root / p["path"]).read_text())
        out.append({**p, "data_source": data["data_source"], "scale": data.get("scale", ""),
                    "reductions": data.get("reductions", {}), "claims": _prepare_claims(data["claims"])})
    return out


def _rows(variants: list[dict]) -> list[dict]:
    """Claims of one figure (or one cross-figure claim) as rows: id, the paper's words, one cell per variant."""
    rows: dict[str, dict] = {}
    for i, v in enumerate(variants):
        for c in v["claims"]:
            row = rows.setdefault(c["id"], {"id": c["id"], "claim": c["claim"], "note": c.get("note", ""),
                                            "cells": [None] * len(variants)})
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
        g["why"] = next((v["why"] for v in g["variants"] if v.get("why")), "")
        g["anchor"] = f"{g['paper']}-{g[key]}-{g['variants'][0]['mode']}"
    return list(groups.values())


def _scale_note(entries: list[dict], paper_claims: list[dict], settings: dict) -> str:
    """What the reduced scale means for the verdicts (shown next to the summary), or '' at paper settings."""
    reduced: dict[str, dict[str, tuple[set, set]]] = {}
    for e in [*entries, *paper_claims]:
        for key, (paper_value, used) in e.get("reductions", {}).items():
            pair = reduced.setdefault(e["paper"], {}).setdefault(key, (set(), set()))
            pair[0].add(str(used))
            pair[1].add(str(paper_value))
    if not reduced:
        return ""
    scale = settings.get("scale", "")
    parts = "; ".join(f"{paper}: " + ", ".join(f"{k} {'/'.join(sorted(u))} (paper {'/'.join(sorted(p))})"
                                               for k, (u, p) in sorted(keys.items()))
                      for paper, keys in sorted(reduced.items()))
    return (f"Scale '{scale}': these runs use settings other than the papers' ({parts}). A verdict at reduced scale is "
            f"not the paper-scale result (cause 'reduced-scale' below); rerun with --config scale=paper for that.")


def render_reports(figures: list[dict], settings: dict, targets: list[tuple[Path, bool]], root: Path = Path("."),
                   paper_claims: list[dict] | None = None) -> tuple[list[str], Counter]:
    """The report pages (HTML), one per target (report folder, standalone?), and the count of claim verdicts, from
    what the figure stages wrote (read once). `figures`: one dict per built variant (paper, figure, mode, dir[, why]);
    `paper_claims`: one per built claim over several figures (paper, id, mode, figures, path)."""
    entries = collect(figures, root)
    cross = collect_paper_claims(paper_claims or [], root)
    all_claims = [c for e in [*entries, *cross] for c in e["claims"]]
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
        causes=[(c, causes[c], CAUSES[c]) for c in CAUSE_ORDER if causes.get(c)],
        scale_note=_scale_note(entries, cross, settings),
        mode_label=MODE_LABEL,
        papers=sorted({e["paper"] for e in entries}),
        versions=entries[0]["sidecar"]["versions"] if entries else {},
        device=entries[0]["sidecar"]["device"] if entries else {},
    )
    pages = [template.render(**shared, standalone=standalone, link=file_link(report_dir, standalone))
             for report_dir, standalone in targets]
    return pages, verdicts
