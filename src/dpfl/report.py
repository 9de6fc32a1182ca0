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
page (`problems`)."""

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
from dpfl.record import cells_seconds, for_report
from dpfl.claims import CAUSES, rounded, summarize_check
from dpfl.data.common import sha256_file
from dpfl.runinfo import blob_url, build_info, standin_summary

VERDICT_ORDER = ["pass", "fail", "inconclusive", "stand-in"]
CAUSE_ORDER = ["reduced-scale", "no-rows", "documented-difference", "paper-inconsistent", "stand-in", "not-reproduced"]
class _ModeLabels(dict):
    """A variant's name for a reader: the two modes, and "one-switch ablation <name>" for the others."""

    def __missing__(self, mode: str) -> str:
        return f"one-switch ablation {paths.ablation_name(mode) or mode} (the paper's algorithm, one item switched)"


MODE_LABEL = _ModeLabels({paths.PAPER_MODE: "paper's algorithm (compat: none)",
                          paths.AUTHORS_CODE: "authors' code (compat: authors-code)"})
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
