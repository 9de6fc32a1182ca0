# Snakemake script: a dataset's prepared arrays (see dpfl.stages.prepare.run_prepare).
from dpfl.stages.prepare import run_prepare

run_prepare(snakemake.wildcards.dataset, snakemake.input.source, snakemake.output.npz, snakemake.log[0])
