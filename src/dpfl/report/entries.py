"""The report's entries (dpfl.report): one per figure variant (paper, figure, mode) and one per claim over several
figures, from what the figure stages wrote: the sidecar, the claims file, the Markdown table, the benchmark file and
the cells' timing sidecars, the committed reproduction record's entry, and why each stand-in dataset is one.

It decides what the page may show of a claims file (`claims_problem`): current when its recorded `inputs` match the
tables on disk and the configured claims, else missing (with the error its job logged) or stale, without verdicts;
a figure whose files are missing is an entry that says so (not built).

Apart from the rendering (dpfl.report): these are the rules on what belongs to which figure, and they read best apart
from how the page lays them out.
"""

from __future__ import annotations

import csv
import html
import json
import os
from pathlib import Path

from dpfl import paths
from dpfl.claims import rounded, summarize_check
from dpfl.data.common import sha256_file
from dpfl.record import cells_seconds, for_report
from dpfl.runinfo import standin_summary


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


def _compute(sidecar: dict, figure_dir: Path) -> dict:
    """What the report shows as a figure's compute: `seconds` (the cells' for an experiment figure, the table stage's
    for an analytic one), `what` they are, and `title` (the split, for a tooltip)."""
    table = sidecar.get("compute_seconds")
    if sidecar.get("kind") != "experiment":
        return {"seconds": table, "what": "table", "title": "computed by the table stage (closed form)"}
    cells = cells_seconds(figure_dir, sidecar.get("cells_read"))
    params = sidecar.get("params") or {}
    reused = params.get("reuse_from") or sorted(set((params.get("reuse_cells") or {}).values()))
    also = f"; it also reads cells of {', '.join(reused) if isinstance(reused, list) else reused}" if reused else ""
    if not cells["cells"]:
        return {"seconds": "–", "what": "cells",
                "title": f"no timing sidecar in its cells/ (table stage: {table} s){also}"}
    return {"seconds": cells["seconds"], "what": "cells", "cells": cells["cells"],
            "title": f"the wall-clock seconds of its {cells['cells']} cells (their timing sidecars); the table stage "
                     f"took {table} s{also}"}


def standin_reasons(dataset: dict, settings: dict) -> dict | None:
    """Why a dataset of a figure is a stand-in: `summary` (one line, dpfl.runinfo.standin_summary) and `lines` (each
    source that failed before it, from the data sidecar's fallback_reasons); None for real data."""
    if not dataset.get("standin"):
        return None
    lines = list(dataset.get("fallback_reasons") or [])
    asked = (settings.get("dataset_source") or {}).get(dataset.get("name")) or settings.get("data_source")
    return {"summary": standin_summary(lines, configured=not lines and asked == "standin"), "lines": lines}


def _prepare_claims(claims: list[dict]) -> list[dict]:
    """Add what the page shows to each claim: a summary line per check and its numbers rounded for reading."""
    for c in claims:
        for part in (c, c.get("without_standin")):  # a claim over several figures: also without its stand-ins
            if not part:
                continue
            part.setdefault("reason", "")
            part.setdefault("cause", None)
            part.setdefault("cause_text", "")
            for check in part["checks"]:
                check["summary"] = summarize_check(check["check"])
                check.setdefault("reason", "")
                check["numbers_json"] = json.dumps(rounded(check["numbers"]), indent=1, default=str,
                                                   ensure_ascii=False)
        c.setdefault("without_standin", None)
    return claims


def _job_error(log: Path) -> str:
    """The error a claims job wrote to its log (dpfl.stages.claims: "... not evaluated: <error>"), or ''."""
    if not log.exists():
        return ""
    lines = [ln for ln in log.read_text(errors="replace").splitlines() if " not evaluated: " in ln]
    return lines[-1].split(" not evaluated: ", 1)[1].strip() if lines else ""


def claims_problem(path: Path, tables: dict[str, Path], claims_hash: str | None, log: Path,
                   root: Path) -> tuple[str, str, dict | None]:
    """(state, why, content) of a claims file: ("current", "", data) when it belongs to the tables on disk and the
    configured claims; ("missing", why, None) when there is none; ("stale", why, None) when its `inputs` name
    another table or other claims. A file without `inputs` (written before they were recorded) counts as current."""
    shown = os.path.relpath(log, root).replace(os.sep, "/")
    if not path.exists():
        error = _job_error(log)
        why = (f"the claims job failed: {error}" if error else "the claims job failed or has not run")
        return "missing", f"no claims file: {why} (log: {shown})", None
    data = json.loads(path.read_text())
    inputs = data.get("inputs") or {}
    for figure, sha in (inputs.get("table_sha256") or {}).items():
        table = tables.get(figure)
        if table is not None and table.exists() and sha256_file(table) != sha:
            why = (f"the claims file was computed from an earlier {figure} table and its verdicts are not shown: the "
                   f"claims job failed or has not run since the table changed (log: {shown})")
            return "stale", why, None
    if claims_hash and inputs.get("claims_hash") not in (None, claims_hash):
        return "stale", ("the claims file was computed for other claims than the configured ones and its verdicts are "
                         f"not shown: the claims job failed or has not run since they changed (log: {shown})"), None
    return "current", "", data


#: what the page shows of a figure whose files are missing
_NOT_BUILT = {"title": "(not built)", "caption": "", "data_source": "not built", "scale": "", "compute_seconds": "",
              "plot_seconds": "", "inferred": [], "datasets": [], "config_hash": "", "versions": {}, "device": {}}


def collect(figures: list[dict], root: Path, settings: dict | None = None) -> list[dict]:
    """One entry per figure variant (paper, figure, mode) with its sidecar, claims, files and tables; `claims_state`
    current / missing / stale (claims_problem) and `built` (its sidecar, image and table are there); `compute` (its
    cells' seconds); each stand-in dataset's `standin_why` (standin_reasons; `settings`: the run's)."""
    settings = settings or {}
    record = for_report(root)  # the committed paper-scale record (docs/reproduction/), shown beside each figure
    entries = []
    for f in figures:
        d, made = root / f["dir"], paths.files_in(f["dir"], f["figure"])
        log_dir = root / paths.figure_logs(f["paper"], f["figure"], f["mode"])
        files = {ext: root / path for ext, path in (("png", made.png), ("pdf", made.pdf), ("csv", made.table),
                                                     ("json", made.sidecar), ("md", made.markdown))}
        built = all(p.exists() for p in files.values())
        state, problem, claims_file = claims_problem(root / made.claims, {f["figure"]: files["csv"]},
                                                     f.get("claims_hash"), log_dir / "claims.log", root)
        if not built:
            missing = ", ".join(p.name for p in files.values() if not p.exists())
            problem = (f"figure not built ({missing} missing: its jobs failed or have not run; logs: "
                       f"{os.path.relpath(log_dir, root)})" + (f"; {problem}" if problem else ""))
            state, claims_file = "missing", None
        md = files["md"].read_text() if built else ""
        sidecar = (json.loads(files["json"].read_text()) if built
                   else {**_NOT_BUILT, "title": f"{f['figure']} (not built)"})
        for dataset in sidecar.get("datasets", []):
            dataset["standin_why"] = standin_reasons(dataset, settings)
        entries.append({
            "why": "",
            **f,
            "built": built,
            "sidecar": sidecar,
            "compute": _compute(sidecar, d) if built else {"seconds": "", "what": "", "title": ""},
            "claims": _prepare_claims(claims_file["claims"]) if claims_file else [],
            "claims_state": state,
            "claims_problem": problem,
            "reductions": claims_file.get("reductions", {}) if claims_file else {},
            "files": {ext: files[ext] for ext in ("png", "pdf", "csv")},
            "table_html": _markdown_table_to_html(md[md.find("\n|") + 1:]) if "\n|" in md else "",
            "benchmark": _benchmark(log_dir / "table.benchmark.tsv"),
            "record": record.get((f["paper"], f["figure"], f["mode"])),
        })
    return entries


def collect_paper_claims(paper_claims: list[dict], root: Path) -> list[dict]:
    """Claims over several figures: one entry per (paper, claim id, mode) from results/<paper>/…claims-<id>.json
    (`tables`: {figure: its table}, `claims_hash`: the configured claim's hash, both optional: what a current file
    was computed from)."""
    out = []
    for p in paper_claims:
        log = root / paths.REPORT_LOGS / p["paper"] / f"{paths.mode_subdir(p['mode'])}claims-{p['id']}.log"
        tables = {f: root / t for f, t in (p.get("tables") or {}).items()}
        state, problem, data = claims_problem(root / p["path"], tables, p.get("claims_hash"), log, root)
        data = data or {}
        out.append({**p, "data_source": data.get("data_source", ""), "scale": data.get("scale", ""),
                    "reductions": data.get("reductions", {}), "claims": _prepare_claims(data.get("claims", [])),
                    "claims_state": state, "claims_problem": problem})
    return out
