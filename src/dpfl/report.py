"""The HTML report (results/report/index.html): every figure with its caption, mode, data provenance,
claims table and run time; the settings used; every inferred setting. It only reads what the figure
stages wrote (sidecars, claims.json, Markdown captions, benchmark files), so it is cheap to rebuild. The stage
runner that writes it is dpfl.stages.report."""

from __future__ import annotations

import csv
import html
import json
import os
from collections import Counter
from pathlib import Path

import jinja2

from dpfl.claims import summarize_check

VERDICT_ORDER = ["pass", "fail", "inconclusive", "stand-in"]


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


def collect(figures: list[dict], root: Path, report_dir: Path) -> list[dict]:
    entries = []
    for f in figures:
        d = root / f["dir"]
        sidecar = json.loads((d / f"{f['figure']}.json").read_text())
        claims = json.loads((d / "claims.json").read_text())["claims"]
        for c in claims:
            for check in c["checks"]:
                check["summary"] = summarize_check(check["check"])
                check["numbers_json"] = json.dumps(check["numbers"], indent=1, default=str)
        log_dir = root / "results" / "logs" / f["paper"] / f["figure"] / ("authors-code" if f["mode"] == "authors-code" else "")
        md = (d / f"{f['figure']}.md").read_text()
        rel = os.path.relpath(d, report_dir)
        entries.append({
            **f,
            "sidecar": sidecar,
            "claims": claims,
            "png": f"{rel}/{f['figure']}.png",
            "pdf": f"{rel}/{f['figure']}.pdf",
            "csv": f"{rel}/{f['figure']}.csv",
            "table_html": _markdown_table_to_html(md[md.find("\n|") + 1:]) if "\n|" in md else "",
            "benchmark": _benchmark(log_dir / "table.benchmark.tsv"),
        })
    return entries


def render_report(figures: list[dict], settings: dict, report_dir: Path, root: Path = Path(".")) -> tuple[str, Counter]:
    """The report page (HTML) and the count of claim verdicts, from what the figure stages wrote."""
    entries = collect(figures, root, report_dir)
    verdicts = Counter(c["verdict"] for e in entries for c in e["claims"])
    env = jinja2.Environment(loader=jinja2.PackageLoader("dpfl", "templates"), autoescape=True,
                             undefined=jinja2.StrictUndefined)
    page = env.get_template("report.html.j2").render(
        entries=entries,
        settings=settings,
        verdicts=[(v, verdicts.get(v, 0)) for v in VERDICT_ORDER],
        papers=sorted({e["paper"] for e in entries}),
        versions=entries[0]["sidecar"]["versions"] if entries else {},
        device=entries[0]["sidecar"]["device"] if entries else {},
    )
    return page, verdicts
