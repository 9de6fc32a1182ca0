# Snakemake script: draw one figure and write its sidecar (see dpfl.stages.plot.run_plot).
from dpfl.joblog import job_errors

with job_errors(snakemake):  # the error in the job's log too (dpfl.joblog)
    from dpfl.stages.plot import run_plot

    out = snakemake.output
    run_plot(snakemake.wildcards.paper, snakemake.wildcards.figure, snakemake.params.spec, snakemake.input.csv,
             snakemake.input.meta, {"png": out.png, "pdf": out.pdf, "json": out.sidecar, "md": out.md},
             snakemake.log[0])
