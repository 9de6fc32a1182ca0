# Snakemake script: check the paper's claims on one figure's table (rules figure_claims_*), or one claim over
# several figures together (rules paper_claims_*; see dpfl.stages.claims).
from dpfl.joblog import job_errors

with job_errors(snakemake):  # the error in the job's log too (dpfl.joblog)
    from dpfl.stages.claims import run_claims, run_paper_claims

    if snakemake.rule.startswith("paper_claims"):
        run_paper_claims(snakemake.wildcards.paper, snakemake.params.claim, list(snakemake.input.csvs),
                         list(snakemake.input.sidecars), snakemake.output.claims, snakemake.log[0],
                         snakemake.params.context, list(snakemake.input.other), built=list(snakemake.params.built))
    else:
        run_claims(snakemake.wildcards.paper, snakemake.wildcards.figure, snakemake.params.claims, snakemake.input.csv,
                   snakemake.input.sidecar, snakemake.output.claims, snakemake.log[0], snakemake.params.context,
                   list(snakemake.input.other))
