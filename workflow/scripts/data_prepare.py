# Snakemake script: a dataset's prepared arrays (see dpfl.data.prepare.run_prepare).
from dpfl.data.prepare import run_prepare

run_prepare(snakemake.wildcards.dataset, snakemake.input.source, snakemake.output.npz, snakemake.log[0])
