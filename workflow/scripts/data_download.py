# Snakemake script: a dataset's raw files and SOURCE.json (see dpfl.stages.download.run_download).
from dpfl.stages.download import run_download

run_download(snakemake.wildcards.dataset, {**snakemake.params.identity, "mirror": snakemake.params.mirror},
             snakemake.output.source, snakemake.log[0])
