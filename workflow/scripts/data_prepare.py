# Snakemake script: a dataset's prepared arrays (see dpfl.stages.prepare.run_prepare).
from dpfl.joblog import job_errors

with job_errors(snakemake):  # the error in the job's log too (dpfl.joblog)
    from dpfl.stages.prepare import run_prepare

    run_prepare(snakemake.wildcards.dataset, snakemake.input.source, snakemake.output.npz, snakemake.log[0])
