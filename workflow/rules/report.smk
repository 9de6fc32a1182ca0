# The HTML report: every figure (both modes side by side where both are built), its claims with reasons and
# causes, the claims over several figures (claims.smk), settings, inferred values, provenance and run times; and
# report-standalone.html, the same page with images, PDFs and CSVs inlined, to copy on its own.
#
# The page links the figures' files but holds the verdicts, so a run that ends without rebuilding it (a failed job
# stops the run first; Snakemake deletes a failed claims job's claims.json) would leave it showing new figures beside
# old verdicts. The onsuccess / onerror handlers below rebuild an existing page whose inputs changed or disappeared
# (dpfl.stages.report.refresh_report): a missing claims file is then shown as such, with its job's error, and one
# older than its table or its claims (each claims file records the table's SHA-256 and the claims' hash) as out of
# date, never with its verdicts.
#
# The handlers' last line names the datasets the selected figures used stand-ins for, and why
# (dpfl.runinfo.say_standins), so that it ends the run instead of sitting among the download jobs' output. The
# report reads the build's date and commit itself when it runs (dpfl.runinfo.build_info): no param of the rule
# depends on the commit, so a new commit does not rerun it.
from dpfl.io import config_hash  # noqa: E402
from dpfl.runinfo import say_standins  # noqa: E402

REPORT_STANDALONE_HTML = os.path.join(os.path.dirname(REPORT_HTML), "report-standalone.html")


def _report_figures():
    """Every built figure variant, with the documented difference its authors-code variant implements and the hash of
    its configured claims (a claims file computed for others is out of date)."""
    return [
        {"paper": p, "figure": f, "mode": m, "dir": figure_dir(p, f, m),
         "why": CFG.figure(p, f).get("authors_code", {}).get("why", ""),
         "claims_hash": config_hash(CFG.figure(p, f).get("claims", []))}
        for p, f, m in selected_variants()
    ]


def _report_paper_claims():
    """Every claim over several figures that is built, with the tables it reads and the hash of the claim."""
    return [{"paper": p, "id": c["id"], "mode": m, "figures": CFG.built_figures(p, c), "path": paper_claims_json(p, c["id"], m),
             "tables": {f: figure_dir(p, f, _figure_mode(p, f, m)) + f"{f}.csv" for f in CFG.built_figures(p, c)},
             "claims_hash": config_hash(c)}
            for p, c, m in selected_paper_claims()]


def _refresh_report(log, failed):
    """Keep an existing report from going stale at the end of a run that did not rebuild it (see above)."""
    from dpfl.stages.report import refresh_report

    try:
        done = refresh_report(_report_figures(), {**CFG.globals, "data_mirror_resolved": CFG.data_mirror(),
                                                  "config_sources": CFG.sources},
                              REPORT_HTML, REPORT_STANDALONE_HTML, _report_paper_claims(), failed=failed, run_log=log)
    except Exception as exc:  # a handler must not hide the run's own outcome
        done = f"report not refreshed: {type(exc).__name__}: {exc}"
    if done:
        print(f"dpfl: {done}: {REPORT_HTML}", file=sys.stderr)


onstart:
    joblog.run_started()


onsuccess:
    _refresh_report(log, failed=False)
    say_standins(CFG, selected_variants)


onerror:
    _refresh_report(log, failed=True)
    joblog.report_failed_jobs(paths.REPORT_LOGS)
    say_standins(CFG, selected_variants)


rule report:
    input:
        figures=all_figure_outputs(),
        paper_claims=paper_claim_outputs(),
        code=code_files("dpfl.stages.report"),
        # the committed paper-scale record shown beside each figure (dpfl.record.for_report), where there is one
        record=[p for p in [paths.RECORD_DIR + "record.json"] if os.path.exists(p)],
        templates=sorted(os.path.join("src", "dpfl", "templates", n)
                         for n in os.listdir(os.path.join(workflow.basedir, "src", "dpfl", "templates")) if n.endswith(".j2")),
    output:
        html=REPORT_HTML,
        standalone=REPORT_STANDALONE_HTML,
    params:
        figures=_report_figures(),
        paper_claims=_report_paper_claims(),
        # shown in the report, but not compared for reruns (a function of `output` is not a compared param): a
        # change that matters reaches the report through its inputs, while the mirror path or `threads` alone
        # (which change no result) rerun nothing
        settings=lambda wildcards, output: {**CFG.globals, "data_mirror_resolved": CFG.data_mirror(),
                                            "config_sources": CFG.sources},
    log:
        paths.REPORT_LOGS + "report.log",
    benchmark:
        paths.REPORT_LOGS + "report.benchmark.tsv"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
    script:
        "../scripts/report.py"
