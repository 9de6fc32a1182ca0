# Snakemake script: compute one figure's tidy table (see dpfl.stages.table.run_table).
from dpfl.joblog import job_errors

with job_errors(snakemake):  # the error in the job's log too (dpfl.joblog)
    from dpfl.stages.table import run_table

    run_table(snakemake.wildcards.paper, snakemake.wildcards.figure, snakemake.params.job,
              snakemake.output.csv, snakemake.output.meta, snakemake.log[0],
              cell_tables=list(snakemake.input.cells), prepared=list(snakemake.input.prepared),
              reductions=snakemake.params.reductions, cell_runs=snakemake.params.cell_runs)
