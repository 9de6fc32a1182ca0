# One figure = three jobs: data (tidy table) -> plot (PNG/PDF + sidecar) -> claims (verdicts).
# The rules are defined once per mode; the authors-code variant lives in <figure>/authors-code/.


def _job_params(mode):
    def params(wildcards):
        fdef = figure_def(wildcards)
        spec = CFG.figure(wildcards.paper, wildcards.figure)
        return {"function": fdef.data, "kind": fdef.kind, "mode": mode, "scale": CFG.globals["scale"],
                "params": spec["params"]}
    return params


def _plot_spec(wildcards):
    fdef = figure_def(wildcards)
    spec = CFG.figure(wildcards.paper, wildcards.figure)
    out = {k: spec[k] for k in ("title", "caption", "params", "plot", "inferred") if k in spec}
    out["function"] = fdef.plot
    out["table_function"] = fdef.plot + "_markdown" if fdef.table else None
    return out


def _claims_spec(wildcards):
    return CFG.figure(wildcards.paper, wildcards.figure).get("claims", [])


for _mode, _sub in MODE_SUBDIR.items():
    _slug = _mode.replace("-", "_")
    _dir = "results/{paper}/{figure}/" + _sub
    _logs = "results/logs/{paper}/{figure}/" + _sub

    rule:
        name:
            f"figure_data_{_slug}"
        input:
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
