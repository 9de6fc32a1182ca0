# One figure = table (tidy table) -> plot (PNG/PDF + sidecar) -> claims (verdicts).
# Experiment figures add cells before `table` (one job per cell, e.g. one method on one panel over
# all trials, or a kato2024 panel with all its methods), which read prepared datasets (data.smk) and configured
# allocations (rule allocate).
# The rules are defined once per mode; the authors-code variant lives in <figure>/authors-code/, a one-switch
# ablation in <figure>/ablations/<name>/ (one set of rules for all ablations, the name a wildcard).
# Table assembly, plots, claims and the report take seconds (an analytic figure's table is its whole computation:
# seconds at every scale; an experiment figure's aggregates its cells): under a cluster executor (profiles/slurm)
# they run on the submitting machine, never as cluster jobs; allocate and the cells are the scheduler's.
localrules: report, figure_table_none, figure_table_authors_code, figure_table_ablation, figure_plot_none,
    figure_plot_authors_code, figure_plot_ablation, figure_claims_none, figure_claims_authors_code, figure_claims_ablation


def _local_cores():
    """The cores of a local run (None under a cluster executor, or when no core count is set)."""
    if not workflow.local_exec:
        return None
    try:
        return workflow.cores
    except Exception:  # WorkflowError: no --cores given (e.g. a dry run)
        return None


def _table_job(mode):
    def params(wildcards):
        figure_def(wildcards)
        return jobs.table_job(CFG, wildcards.paper, wildcards.figure, rule_mode(mode, wildcards))
    return params


def _reductions(mode):
    """Is this run reduced (below paper scale)? Decided once, here: the settings whose value in this run differs from
    the paper file's own (dpfl.claims.scale_reductions, in this mode). The table stage records them in the figure's
    meta (`reductions`, `reduced_scale`); the plot (the figure's face label) and the claims (cause reduced-scale)
    read them from there. A rule param beside `job`, so that the meta's config hash does not change."""
    def reductions(wildcards):
        figure_def(wildcards)
        from dpfl.claims import scale_reductions

        m = rule_mode(mode, wildcards)
        return scale_reductions(CFG.paper_file_params(wildcards.paper, wildcards.figure, m),
                                CFG.figure_params(wildcards.paper, wildcards.figure, m))
    return reductions


def _needs(mode):
    def needs(wildcards):
        figure_def(wildcards)
        return jobs.needs(CFG, wildcards.paper, wildcards.figure, rule_mode(mode, wildcards))
    return needs


def _prepared_inputs(mode):
    return lambda w: [prepared_npz(d) for d in _needs(mode)(w)[0]]


def _cell_needs(mode):
    """What one cell reads (jobs.cell_needs): building a figure builds only the data its own cells use."""
    def needs(wildcards):
        figure_def(wildcards)
        try:
            return jobs.cell_needs(CFG, wildcards.paper, wildcards.figure, wildcards.cell, rule_mode(mode, wildcards))
        except ValueError as exc:
            raise WorkflowError(str(exc)) from None
    return needs


def _cell_tables(mode):
    """The cell tables a figure's table reads: its own cells, or the cell of another figure that computes a run of
    it (jobs.cell_sources)."""
    def tables(wildcards):
        figure_def(wildcards)
        m = rule_mode(mode, wildcards)
        return [paths.cell_table(wildcards.paper, f, c, m)
                for f, c, _ in jobs.cell_sources(CFG, wildcards.paper, wildcards.figure, m)]
    return tables


def _cell_table_runs(mode):
    """Per cell table the figure reads (_cell_tables), None (all its rows) or the runs it reads there."""
    def runs(wildcards):
        figure_def(wildcards)
        return [None if r is None else list(r)
                for _, _, r in jobs.cell_sources(CFG, wildcards.paper, wildcards.figure, rule_mode(mode, wildcards))]
    return runs


def _cell_job(mode):
    def params(wildcards):
        figure_def(wildcards)
        try:
            return jobs.build_cell_job(CFG, wildcards.paper, wildcards.figure, wildcards.cell,
                                       rule_mode(mode, wildcards)).as_dict()
        except ValueError as exc:
            raise WorkflowError(str(exc)) from None
    return params


def _plot_spec(wildcards):
    fdef = figure_def(wildcards)
    spec = CFG.figure(wildcards.paper, wildcards.figure)
    out = {k: spec[k] for k in ("title", "caption", "params", "plot", "inferred") if k in spec}
    out["function"] = fdef.plot
    out["table_function"] = fdef.markdown
    return out


def _claims_spec(wildcards):
    return CFG.figure(wildcards.paper, wildcards.figure).get("claims", [])


def allocation_npz(name):
    """The cached file of a configured allocation (a paper's `allocations:` entry, named "<paper>-<name>")."""
    try:
        entry = CFG.allocation(name)
    except dpfl_config.ConfigError as exc:
        raise WorkflowError(str(exc)) from None
    return paths.allocation_npz(entry["dataset"], name)


def _allocation_entry(wildcards):
    try:
        entry = CFG.allocation(wildcards.allocation)
    except dpfl_config.ConfigError as exc:
        raise WorkflowError(str(exc)) from None
    if entry["dataset"] != wildcards.dataset:
        raise WorkflowError(f"allocation {wildcards.allocation!r} arranges {entry['dataset']}, not {wildcards.dataset}: "
                            f"{paths.allocation_npz(entry['dataset'], wildcards.allocation)}")
    return entry


rule allocate:
    """A configured arrangement of a prepared dataset shared by figures (a paper's `allocations:` entry, e.g.
    lowy2023's MNIST silos); its YAML entry is its params, so editing it reruns it and what reads it."""
    input:
        prepared=lambda w: prepared_npz(_allocation_entry(w)["dataset"]),
        code=lambda w: sorted(set(code_files("dpfl.stages.allocate"))
                              | set(code_files(ALLOCATION_KINDS[_allocation_entry(w)["kind"]].function))),
    output:
        npz=paths.allocation_npz("{dataset}", "{allocation}"),
    params:
        entry=_allocation_entry,
    log:
        paths.data_logs("{dataset}") + "allocate-{allocation}.log",
    benchmark:
        paths.data_logs("{dataset}") + "allocate-{allocation}.benchmark.tsv"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=20,
    script:
        "../scripts/allocate.py"


for _mode in (*MODE_SUBDIR, paths.ABLATION):  # the ablation rules take the ablation's name from a wildcard
    _slug = _mode.replace("-", "_").rstrip("_")
    _dir = paths.figure_dir("{paper}", "{figure}", _mode if _mode != paths.ABLATION else "ablation-{ablation}")
    _logs = paths.figure_logs("{paper}", "{figure}", _mode if _mode != paths.ABLATION else "ablation-{ablation}")

    rule:
        name:
            f"figure_cell_{_slug}"
        input:
            prepared=lambda w, _mode=_mode: [prepared_npz(d) for d in _cell_needs(_mode)(w)[0]],
            allocations=lambda w, _mode=_mode: [allocation_npz(a) for a in _cell_needs(_mode)(w)[1]],
            code=stage_code("cell"),
        output:
            table=_dir + "cells/{cell}.parquet",
            timing=paths.cell_timing(_dir + "cells/{cell}.parquet"),  # wall-clock seconds, out of the table
        params:
            job=_cell_job(_mode),
            datasets=lambda w, _mode=_mode: list(_cell_needs(_mode)(w)[0]),
            allocations=lambda w, _mode=_mode: list(_cell_needs(_mode)(w)[1]),
        log:
            _logs + "cells/{cell}.log",
        benchmark:
            _logs + "cells/{cell}.benchmark.tsv"
        # all local cores for cells that time themselves (jobs.cell_threads), so that nothing runs beside them
        threads: lambda w, _mode=_mode: jobs.cell_threads(CFG, w.paper, w.figure, w.cell, rule_mode(_mode, w), _local_cores())
        resources:
            mem_mb=4000,
            # minutes; a kato2024 training cell is a whole panel (all its methods in turn): ≈ 2 h on one core for
            # Fig 4(d) at paper scale, so the limit leaves room (a cluster queue may need a longer partition)
            runtime=480,
            # 1 for cells worth a GPU (jobs.cell_gpu): `--resources gpu=1` serialises them, profiles/slurm maps it
            gpu=lambda w, _mode=_mode: jobs.cell_gpu(CFG, w.paper, w.figure, w.cell, rule_mode(_mode, w)),
        script:
            "../scripts/figure_cell.py"

    rule:
        name:
            f"figure_table_{_slug}"
        input:
            cells=_cell_tables(_mode),
            prepared=_prepared_inputs(_mode),
            code=stage_code("table"),
        output:
            csv=_dir + "{figure}.csv",
            meta=_dir + "{figure}.meta.json",
        params:
            job=_table_job(_mode),
            reductions=_reductions(_mode),  # is this run reduced? (meta: read by plot and claims)
            cell_runs=_cell_table_runs(_mode),  # per cell table: all its rows, or the runs read from it
        log:
            _logs + "table.log",
        benchmark:
            _logs + "table.benchmark.tsv"
        threads: 1
        resources:
            mem_mb=2000,
            runtime=15,
        script:
            "../scripts/figure_table.py"

    rule:
        name:
            f"figure_plot_{_slug}"
        input:
            csv=_dir + "{figure}.csv",
            meta=_dir + "{figure}.meta.json",
            code=stage_code("plot"),
        output:
            png=report(
                _dir + "{figure}.png",
                caption="../report/figure.rst",
                category="{paper}",
                subcategory="{figure}",
                labels={"paper": "{paper}", "figure": "{figure}", "mode": _mode},
            ),
            pdf=_dir + "{figure}.pdf",
            sidecar=_dir + "{figure}.json",
            md=_dir + "{figure}.md",
        params:
            spec=_plot_spec,
        log:
            _logs + "plot.log",
        benchmark:
            _logs + "plot.benchmark.tsv"
        threads: 1
        resources:
            mem_mb=1000,
            runtime=10,
        script:
            "../scripts/figure_plot.py"

    rule:
        name:
            f"figure_claims_{_slug}"
        input:
            csv=_dir + "{figure}.csv",
            sidecar=_dir + "{figure}.json",
            other=lambda w, _mode=_mode: other_mode_claims(w.paper, [w.figure], rule_mode(_mode, w)),  # claims.smk
            code=stage_code("claims"),
        output:
            claims=_dir + "claims.json",
        params:
            claims=_claims_spec,
            context=lambda w: CFG.claims_context(w.paper, [w.figure]),
        log:
            _logs + "claims.log",
        benchmark:
            _logs + "claims.benchmark.tsv"
        threads: 1
        resources:
            mem_mb=1000,
            runtime=5,
        script:
            "../scripts/figure_claims.py"
