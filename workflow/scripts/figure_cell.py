# Snakemake script: one cell of an experiment figure (see dpfl.stages.cell.run_cell).
from dpfl.joblog import job_errors

with job_errors(snakemake):  # the error in the job's log too (dpfl.joblog)
    from dpfl.jobs import CellJob
    from dpfl.stages.cell import run_cell

    inputs = {"prepared": dict(zip(snakemake.params.datasets, snakemake.input.prepared)),
              "allocations": dict(zip(snakemake.params.allocations, snakemake.input.allocations))}
    run_cell(CellJob(**snakemake.params.job), inputs, snakemake.output.table, snakemake.log[0],
             threads=snakemake.threads)
    # (snakemake.output.timing, the table's wall-clock sidecar, is written beside it: dpfl.paths.cell_timing)
