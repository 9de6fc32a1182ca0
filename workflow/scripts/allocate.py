# Snakemake script: a configured arrangement of a prepared dataset (see dpfl.stages.allocate).
from dpfl.joblog import job_errors

with job_errors(snakemake):  # the error in the job's log too (dpfl.joblog)
    from dpfl.stages.allocate import run_allocate

    run_allocate(snakemake.wildcards.allocation, snakemake.params.entry, snakemake.input.prepared,
                 snakemake.output.npz, snakemake.log[0])
