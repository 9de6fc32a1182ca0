# Snakemake script: compute one figure's tidy table (see dpfl.stages.data.run_data).
from dpfl.stages.data import run_data

run_data(snakemake.wildcards.paper, snakemake.wildcards.figure, snakemake.params.job,
         snakemake.output.csv, snakemake.output.meta, snakemake.log[0],
         cell_tables=list(snakemake.input.cells), prepared=list(snakemake.input.prepared))
