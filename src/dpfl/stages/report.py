"""Stage `report`: results/report/index.html from every figure's outputs (dpfl.report renders it), and beside it
report-standalone.html, the same page with every image, PDF and CSV inlined (data: URIs) so that it can be copied
on its own.

`refresh_report` keeps an existing report from going stale when a run ends without rebuilding it (a failed job
stops the run before the report job; or the run built other targets): the page links the figures' image files,
which such a run may have rewritten, beside verdicts written into the page. workflow/rules/report.smk calls it from
Snakemake's onsuccess and onerror handlers; it rebuilds the page from the files on disk when one of them is newer
than the page or missing (dpfl.report then shows a claims file deleted by a failed job as missing, with the job's
error, and one older than its table as out of date)."""

from __future__ import annotations

import html
import os
from pathlib import Path

from dpfl import paths
from dpfl.io import atomic_path, get_logger
from dpfl.report import render_reports


def build_report(figures: list[dict], settings: dict, out_html: str, log_path: str | None = None,
                 root: str | Path = ".", paper_claims: list[dict] | None = None,
                 standalone_html: str | None = None, notice: str = "", build: dict | None = None) -> None:
    """`figures`: one dict per built figure variant (paper, figure, mode, dir[, why, claims_hash]); `paper_claims`:
    one per built claim over several figures (paper, id, mode, figures, path[, tables, claims_hash]);
    `standalone_html`: where to write the self-contained copy (none if None); `notice`: a line shown first; `build`:
    the date and commit shown (dpfl.runinfo.build_info), read from the checkout at `root` when None: the rule passes
    nothing commit-dependent, so a new commit does not rerun the report by itself."""
    log = get_logger(log_path, "report")
    root = Path(root)
    outputs = [Path(out_html)] + ([Path(standalone_html)] if standalone_html else [])
    outputs = [out if out.is_absolute() else root / out for out in outputs]
    pages, verdicts = render_reports(figures, settings, [(out.parent, i > 0) for i, out in enumerate(outputs)], root,
                                     paper_claims, notice, build)
    for i, (out, page) in enumerate(zip(outputs, pages)):
        with atomic_path(out) as tmp:
            tmp.write_text(page)
        log.info("report%s with %d figures and %d claims (%s) -> %s", " (standalone)" if i else "",
                 len({(f["paper"], f["figure"], f["mode"]) for f in figures}), sum(verdicts.values()),
                 ", ".join(f"{k}: {v}" for k, v in verdicts.items()), out)


def report_inputs(figures: list[dict], paper_claims: list[dict] | None, root: Path) -> list[Path]:
    """The files a report page reads: each figure variant's image, PDF, sidecar, caption, table and claims file, and
    each claims file over several figures."""
    out = []
    for f in figures:
        out += [root / path for path in paths.files_in(f["dir"], f["figure"]).report_reads()]
    return out + [root / p["path"] for p in paper_claims or []]


def refresh_report(figures: list[dict], settings: dict, out_html: str, standalone_html: str | None = None,
                   paper_claims: list[dict] | None = None, root: str | Path = ".", failed: bool = False,
                   run_log: str | list | None = None) -> str:
    """At the end of a Snakemake run (workflow/rules/report.smk: onsuccess, onerror): rebuild an existing report
    whose inputs changed or disappeared since it was written, so that it never shows verdicts beside figures they do
    not belong to. Returns what was done ("" when the page was current or there was none). A page that cannot be
    rebuilt is replaced by one saying so (an out-of-date page is never left behind). `run_log`: the run's log file
    (Snakemake 9 hands the handlers a list of them)."""
    root = Path(root)
    if isinstance(run_log, (list, tuple)):
        run_log = next((str(p) for p in run_log if p), None)
    outputs = [Path(p) for p in (out_html, standalone_html) if p]
    outputs = [p if p.is_absolute() else root / p for p in outputs]
    if not outputs[0].exists():
        return ""
    written = min(p.stat().st_mtime for p in outputs if p.exists())
    inputs = report_inputs(figures, paper_claims, root)
    changed = [p for p in inputs if not p.exists() or p.stat().st_mtime > written]
    if not changed and all(p.exists() for p in outputs):
        return ""
    shown = os.path.relpath(run_log, root) if run_log else "the Snakemake log"
    notice = (f"The last run failed before it rebuilt this page (see {shown}); the page was rebuilt from the files "
              f"on disk at the end of that run. Figures whose jobs did not finish show their earlier outputs; claims "
              f"files the run deleted or did not rewrite are listed below, without verdicts." if failed else
              "This page was rebuilt from the files on disk at the end of a run that did not build the report itself "
              "(its targets were other files).")
    try:
        build_report(figures, settings, str(outputs[0]), None, root, paper_claims,
                     str(outputs[1]) if len(outputs) > 1 else None, notice=notice)
        return f"report rebuilt from the files on disk ({len(changed)} changed or missing since it was written)"
    except Exception as exc:  # never leave the out-of-date page: say why there is none
        page = ("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>dpfl-repro report</title></head>"
                "<body><h1>dpfl-repro report: out of date</h1><p>The last run ended without rebuilding this report, "
                f"and it could not be rebuilt from the files on disk ({html.escape(type(exc).__name__)}: "
                f"{html.escape(str(exc))}). Run the workflow again to build it; see {html.escape(shown)}.</p>"
                "</body></html>")
        for out in outputs:
            with atomic_path(out) as tmp:
                tmp.write_text(page)
        return f"report replaced by an out-of-date notice: it could not be rebuilt ({type(exc).__name__}: {exc})"
