# Snakemake script: check the paper's claims on one figure's table (see dpfl.stages.claims.run_claims).
from dpfl.stages.claims import run_claims

run_claims(snakemake.wildcards.paper, snakemake.wildcards.figure, snakemake.params.claims, snakemake.input.csv,
           snakemake.input.sidecar, snakemake.output.claims, snakemake.log[0])
