# Snakemake script: build results/report/index.html (+ report-standalone.html, images inlined) from every figure's
# outputs and the claims over several figures (see dpfl.stages.report).
from dpfl.joblog import job_errors

with job_errors(snakemake):  # the error in the job's log too (dpfl.joblog)
    from dpfl.stages.report import build_report

    build_report(snakemake.params.figures, snakemake.params.settings, snakemake.output.html, snakemake.log[0],
                 paper_claims=snakemake.params.paper_claims, standalone_html=snakemake.output.standalone)
