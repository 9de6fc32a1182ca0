# One figure = table (tidy table) -> plot (PNG/PDF + sidecar) -> claims (verdicts).
# Experiment figures add cells before `table` (one job per cell, e.g. one method on one panel over all trials, or a
# kato2024 panel with all its methods), which read prepared datasets (data.smk) and configured allocations (rule
# allocate).
# Each rule serves every variant of a figure: the `variant` wildcard is its folder under the figure's (FIGURE_DIR,
# common.smk): "" for the paper's algorithm, "authors-code/", or "ablations/<name>/" for a one-switch ablation; the
# functions read the mode from it (variant_mode).
# Table assembly, plots, claims and the report take seconds (an analytic figure's table is its whole computation:
# seconds at every scale; an experiment figure's aggregates its cells): under a cluster executor (profiles/slurm)
# they run on the submitting machine, never as cluster jobs; allocate and the cells are the scheduler's.


wildcard_constraints:
    paper="[a-z]+[0-9]{4}",
    figure="[a-z0-9_]+",
    variant=VARIANT_PATTERN,
    cell="[A-Za-z0-9_.-]+",
    allocation="[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)?",  # "<paper>-<name>" or "<paper>-<name>/<instance>"


localrules:
    figure_table,
    figure_plot,
    figure_claims,


rule allocate:
    """A configured arrangement of a prepared dataset shared by figures (a paper's `allocations:` entry, e.g.
    lowy2023's MNIST silos); its YAML entry is its params, so editing it reruns it and what reads it."""
    input:
        prepared=lambda w: prepared_npz(allocation_entry(w)["dataset"]),
        code=allocation_code,
    output:
        npz=paths.allocation_npz("{dataset}", "{allocation}"),
    log:
        f"{paths.data_logs('{dataset}')}allocate-{{allocation}}.log",
    benchmark:
        f"{paths.data_logs('{dataset}')}allocate-{{allocation}}.benchmark.tsv"
    conda:
        DPFL_ENV
    threads: 1
    resources:
        mem_mb=4000,
        runtime=20,
    params:
        entry=allocation_entry,
    script:
        "../scripts/allocate.py"


rule figure_cell:
    """One cell of an experiment figure: its table, and its wall-clock seconds beside it (out of the table)."""
    input:
        prepared=lambda w: [prepared_npz(d) for d in cell_needs(w)[0]],
        allocations=lambda w: [allocation_npz(a) for a in cell_needs(w)[1]],
        code=lambda w: stage_code(w, "cell"),
    output:
        table=f"{FIGURE_FILES.cells}{{cell}}.parquet",
        timing=paths.cell_timing(f"{FIGURE_FILES.cells}{{cell}}.parquet"),
    log:
        f"{FIGURE_LOGS}cells/{{cell}}.log",
    benchmark:
        f"{FIGURE_LOGS}cells/{{cell}}.benchmark.tsv"
    conda:
        DPFL_ENV
    threads: cell_threads
    resources:
        mem_mb=4000,
        # minutes; a kato2024 training cell is a whole panel (all its methods in turn): ≈ 2 h on one core for
        # Fig 4(d) at paper scale, so the limit leaves room (a cluster queue may need a longer partition)
        runtime=480,
        gpu=cell_gpu,
    params:
        job=cell_job,
        datasets=lambda w: list(cell_needs(w)[0]),
        allocations=lambda w: list(cell_needs(w)[1]),
    script:
        "../scripts/figure_cell.py"


rule figure_table:
    """A figure's tidy table (and its meta), from its cells or, for an analytic figure, computed here."""
    input:
        cells=cell_tables,
        prepared=table_prepared_inputs,
        code=lambda w: stage_code(w, "table"),
    output:
        csv=FIGURE_FILES.table,
        meta=FIGURE_FILES.meta,
    log:
        f"{FIGURE_LOGS}table.log",
    benchmark:
        f"{FIGURE_LOGS}table.benchmark.tsv"
    conda:
        DPFL_ENV
    threads: 1
    resources:
        mem_mb=2000,
        runtime=15,
    params:
        job=table_job,
        reductions=table_reductions,  # is this run reduced? (meta: read by plot and claims)
        cell_runs=cell_table_runs,  # per cell table: all its rows, or the runs read from it
    script:
        "../scripts/figure_table.py"


rule figure_plot:
    """A figure's PNG and PDF, its sidecar (settings, provenance, data sources) and its Markdown table."""
    input:
        csv=FIGURE_FILES.table,
        meta=FIGURE_FILES.meta,
        code=lambda w: stage_code(w, "plot"),
    output:
        png=report(
            FIGURE_FILES.png,
            caption="../report/figure.rst",
            category="{paper}",
            subcategory="{figure}",
            labels=report_labels,
        ),
        pdf=FIGURE_FILES.pdf,
        sidecar=FIGURE_FILES.sidecar,
        md=FIGURE_FILES.markdown,
    log:
        f"{FIGURE_LOGS}plot.log",
    benchmark:
        f"{FIGURE_LOGS}plot.benchmark.tsv"
    conda:
        DPFL_ENV
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        spec=plot_spec,
    script:
        "../scripts/figure_plot.py"


rule figure_claims:
    """A figure's claims checked on its table (and, in the default mode, beside its other variants' verdicts)."""
    input:
        csv=FIGURE_FILES.table,
        sidecar=FIGURE_FILES.sidecar,
        other=figure_other_claims,
        code=lambda w: stage_code(w, "claims"),
    output:
        claims=FIGURE_FILES.claims,
    log:
        f"{FIGURE_LOGS}claims.log",
    benchmark:
        f"{FIGURE_LOGS}claims.benchmark.tsv"
    conda:
        DPFL_ENV
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
    params:
        claims=figure_claims_spec,
        context=lambda w: CFG.claims_context(w.paper, [w.figure]),
    script:
        "../scripts/figure_claims.py"
