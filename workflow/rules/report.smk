# The HTML report: every figure, its claims table, settings, inferred values, provenance and run times.


def _report_figures():
    return [
        {"paper": p, "figure": f, "mode": m, "dir": figure_dir(p, f, m)}
        for p, f, m in selected_variants()
    ]


rule report:
    input:
        figures=all_figure_outputs(),
        code=code_files("dpfl.stages.report"),
    output:
        html=REPORT_HTML,
    params:
        figures=_report_figures(),
        settings={**CFG.globals, "data_mirror_resolved": CFG.data_mirror(), "config_sources": CFG.sources},
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
