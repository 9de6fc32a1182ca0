# The HTML report: every figure (both modes side by side where both are built), its claims with reasons and
# causes, the claims over several figures (claims.smk), settings, inferred values, provenance and run times; and
# report-standalone.html, the same page with images, PDFs and CSVs inlined, to copy on its own.
#
# The handlers below keep an existing page from going stale at the end of a run that did not rebuild it
# (common.smk's refresh_report). Their last line names the datasets the selected figures used stand-ins for, and why
# (dpfl.runinfo.say_standins), so that it ends the run instead of sitting among the download jobs' output. The
# report reads the build's date and commit itself when it runs (dpfl.runinfo.build_info): no param of the rule
# depends on the commit, so a new commit does not rerun it.


localrules:
    report,


onstart:
    joblog.run_started()


onsuccess:
    refresh_report(log, failed=False)
    say_standins(CFG, selected_variants)


onerror:
    refresh_report(log, failed=True)
    joblog.report_failed_jobs(paths.REPORT_LOGS)
    say_standins(CFG, selected_variants)


rule report:
    """The HTML report and its standalone copy."""
    input:
        figures=all_figure_outputs(),
        paper_claims=paper_claim_outputs(),
        code=code_files("dpfl.stages.report"),
        # the committed paper-scale record shown beside each figure (dpfl.record.for_report), where there is one
        record=[p for p in [f"{paths.RECORD_DIR}record.json"] if os.path.exists(p)],
        templates=report_templates(),
    output:
        html=REPORT_HTML,
        standalone=REPORT_STANDALONE_HTML,
    log:
        f"{paths.REPORT_LOGS}report.log",
    benchmark:
        f"{paths.REPORT_LOGS}report.benchmark.tsv"
    conda:
        DPFL_ENV
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
    params:
        figures=report_figures(),
        paper_claims=report_paper_claims(),
        settings=report_settings,  # shown, not compared (common.smk)
    script:
        "../scripts/report.py"
