# One figure = data (tidy table) -> plot (PNG/PDF + sidecar) -> claims (verdicts).
# Experiment figures add cells before `data` (one job per cell, e.g. one algorithm on one panel over
# all trials), which read prepared datasets (data.smk) and shared allocations (rule allocate).
# The rules are defined once per mode; the authors-code variant lives in <figure>/authors-code/.


def _paper_settings(paper):
    """Paper-level settings that shape results (e.g. lowy2023's noise_calibration)."""
    return {k: v for k, v in CFG.papers[paper].items() if k not in ("paper", "figures", "compat")}


def _job_params(mode):
    def params(wildcards):
        fdef = figure_def(wildcards)
        return {"function": fdef.data, "kind": fdef.kind, "mode": mode, "scale": CFG.globals["scale"],
                "params": figure_params(wildcards.paper, wildcards.figure, mode),
                "paper_settings": _paper_settings(wildcards.paper)}
    return params


def _needs(wildcards):
    fdef = figure_def(wildcards)
    if fdef.needs is None:
        return (), ()
    return call(fdef.needs, CFG.figure(wildcards.paper, wildcards.figure)["params"])


def _prepared_inputs(wildcards):
    return [prepared_npz(d) for d in _needs(wildcards)[0]]


def _allocation_inputs(wildcards):
    return [f"data/allocations/{ALLOCATIONS[a].dataset}/{a}.npz" for a in _needs(wildcards)[1]]


def _cell_ids(wildcards):
    fdef = figure_def(wildcards)
    if fdef.cells is None:
        return []
    return call(fdef.cells, CFG.figure(wildcards.paper, wildcards.figure)["params"])


def _cell_job(mode):
    def params(wildcards):
        fdef = figure_def(wildcards)
        if wildcards.cell not in _cell_ids(wildcards):
            raise WorkflowError(f"{wildcards.paper}/{wildcards.figure} has no cell {wildcards.cell!r}; "
                                f"cells: {', '.join(_cell_ids(wildcards))}")
        params, settings = figure_params(wildcards.paper, wildcards.figure, mode), _paper_settings(wildcards.paper)
        if fdef.cell_params:  # only what this cell uses, so that unrelated edits do not rerun it
            params, settings = call(fdef.cell_params, params, settings, wildcards.cell)
        return {"function": fdef.cell, "cell": wildcards.cell, "mode": mode, "scale": CFG.globals["scale"],
                "seed": CFG.globals["seed"], "threads": CFG.globals["threads"], "params": params,
                "paper_settings": settings}
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


rule allocate:
    """A fixed arrangement of a prepared dataset shared by figures (e.g. lowy2023's MNIST silos)."""
    input:
        prepared=lambda w: prepared_npz(ALLOCATIONS[w.allocation].dataset),
        code=lambda w: sorted(set(code_files("dpfl.stages.allocate")) | set(code_files(ALLOCATIONS[w.allocation].function))),
    output:
        npz="data/allocations/{dataset}/{allocation}.npz",
    params:
        function=lambda w: ALLOCATIONS[w.allocation].function,
    log:
        "results/logs/data/{dataset}/allocate-{allocation}.log",
    benchmark:
        "results/logs/data/{dataset}/allocate-{allocation}.benchmark.tsv"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=20,
    script:
        "../scripts/allocate.py"


for _mode, _sub in MODE_SUBDIR.items():
    _slug = _mode.replace("-", "_")
    _dir = "results/{paper}/{figure}/" + _sub
    _logs = "results/logs/{paper}/{figure}/" + _sub

    rule:
        name:
            f"figure_cell_{_slug}"
        input:
            prepared=_prepared_inputs,
            allocations=_allocation_inputs,
            code=stage_code("cell"),
        output:
            table=_dir + "cells/{cell}.parquet",
        params:
            job=_cell_job(_mode),
            datasets=lambda w: list(_needs(w)[0]),
            allocations=lambda w: list(_needs(w)[1]),
        log:
            _logs + "cells/{cell}.log",
        benchmark:
            _logs + "cells/{cell}.benchmark.tsv"
        threads: lambda wildcards: CFG.globals["threads"]
        resources:
            mem_mb=4000,
            runtime=120,
        script:
            "../scripts/figure_cell.py"

    rule:
        name:
            f"figure_data_{_slug}"
        input:
            cells=lambda w, _dir=_dir: [_dir.format(paper=w.paper, figure=w.figure) + f"cells/{c}.parquet"
                                         for c in _cell_ids(w)],
            prepared=_prepared_inputs,
            code=stage_code("data"),
        output:
            csv=_dir + "{figure}.csv",
            meta=_dir + "{figure}.meta.json",
        params:
            job=_job_params(_mode),
        log:
            _logs + "data.log",
        benchmark:
            _logs + "data.benchmark.tsv"
        threads: 1
        resources:
            mem_mb=2000,
            runtime=15,
        script:
            "../scripts/figure_data.py"

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
            code=stage_code("claims"),
        output:
            claims=_dir + "claims.json",
        params:
            claims=_claims_spec,
        log:
            _logs + "claims.log",
        threads: 1
        resources:
            mem_mb=1000,
            runtime=5,
        script:
            "../scripts/figure_claims.py"
