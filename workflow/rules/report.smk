# The HTML report: every figure (both modes side by side where both are built), its claims with reasons and
# causes, the claims over several figures (claims.smk), settings, inferred values, provenance and run times; and
# report-standalone.html, the same page with images, PDFs and CSVs inlined, to copy on its own.
REPORT_STANDALONE_HTML = os.path.join(os.path.dirname(REPORT_HTML), "report-standalone.html")


def _report_figures():
    """Every built figure variant, with the documented difference its authors-code variant implements."""
    return [
        {"paper": p, "figure": f, "mode": m, "dir": figure_dir(p, f, m),
         "why": CFG.figure(p, f).get("authors_code", {}).get("why", "")}
        for p, f, m in selected_variants()
    ]


def _report_paper_claims():
    return [{"paper": p, "id": c["id"], "mode": m, "figures": list(c["figures"]), "path": paper_claims_json(p, c["id"], m)}
            for p, c, m in selected_paper_claims()]


rule report:
    input:
        figures=all_figure_outputs(),
        paper_claims=paper_claim_outputs(),
        code=code_files("dpfl.stages.report"),
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
