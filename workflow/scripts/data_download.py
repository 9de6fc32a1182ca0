# Snakemake script: a dataset's raw files and SOURCE.json (see dpfl.data.download.run_download).
from dpfl.data.download import run_download

run_download(snakemake.wildcards.dataset, snakemake.params.job, snakemake.output.source, snakemake.log[0])
