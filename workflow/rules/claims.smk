# Claims over several figures together (common.smk explains them and holds the functions); the claims of one figure
# are rule figure_claims (figures.smk).


localrules:
    paper_claims,


rule paper_claims:
    """One claim over several figures, on their tables concatenated, in one variant (the `variant` wildcard)."""
    input:
        csvs=lambda w: claim_tables(w, "csv"),
        sidecars=lambda w: claim_tables(w, "json"),
        other=paper_other_claims,
        code=code_files("dpfl.stages.claims"),
    output:
        claims="results/{paper}/{variant}claims-{claim}.json",
    log:
        "results/logs/{paper}/{variant}claims-{claim}.log",
    benchmark:
        "results/logs/{paper}/{variant}claims-{claim}.benchmark.tsv"
    wildcard_constraints:
        claim="[A-Za-z0-9_.-]+",
    conda:
        DPFL_ENV
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
    params:
        claim=lambda w: paper_claim(w.paper, w.claim),
        built=claim_figures,  # the figures it is evaluated over
        # from the figures it is evaluated over: a first figure not built (e.g. kato2024's Fig 4 for C-K4c-f) has
        # none of the built ablations whose verdicts name the cause
        context=lambda w: CFG.claims_context(w.paper, claim_figures(w)),
    script:
        "../scripts/figure_claims.py"
