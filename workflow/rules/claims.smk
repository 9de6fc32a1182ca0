# Claims: what the claims jobs need besides the figure (rules figure_claims_* in figures.smk), and claims over
# several figures together. A paper file's top-level `claims:` lists the latter, each with `figures: [...]` (e.g.
# lowy2023's C-L89a/b over the 8 panels of Figs 8 and 9); rule paper_claims_<mode> evaluates one on the figures'
# tidy tables concatenated (panels renamed "<figure>/<panel>") -> results/<paper>/[authors-code/]claims-<id>.json,
# which the report shows under the paper. It is built when at least one of its figures is selected, over the selected
# ones (it names them, and the figures it could not read), in the modes they share: a claim is never left without a
# verdict because one of its figures is not built (e.g. a figure that takes hours, or needs a GPU, at paper scale).
localrules: paper_claims_none, paper_claims_authors_code, paper_claims_ablation


def _figure_mode(paper, figure, mode):
    """The variant of a figure that a claim in `mode` reads (a figure without an authors-code variant: its one)."""
    return mode if FIGURES[(paper, figure)].has_compat else "none"


def _claim_mode(mode, wildcards):
    return paths.ablation_mode(wildcards.ablation) if mode == paths.ABLATION else mode


def _modes_of(paper, figures):
    modes = [set(modes_for(paper, f)) for f in figures]
    return [m for m in modes_for(paper, figures[0]) if all(m in s for s in modes)]


def paper_claims_json(paper, claim_id, mode):
    return f"results/{paper}/{paths.mode_subdir(mode)}claims-{claim_id}.json"


def other_mode_claims(paper, figures, mode, claim_id=None):
    """In the default mode, the claims files of the other variants built too (the authors-code variant, the
    one-switch ablations): a claim that fails here and passes there is a documented difference, named by the items
    whose ablation moves it (dpfl.claims.cause_of)."""
    if mode != "none":
        return []
    built = [set(modes_for(paper, f)) for f in figures]
    others = [m for m in modes_for(paper, figures[0]) if m != "none" and all(m in b for b in built)]
    if claim_id is None:
        return [figure_dir(paper, figures[0], m) + "claims.json" for m in others]
    return [paper_claims_json(paper, claim_id, m) for m in others]


def paper_claim(paper, claim_id):
    for claim in CFG.papers[paper].get("claims", []):
        if claim["id"] == claim_id:
            return claim
    raise WorkflowError(f"no claim {claim_id!r} in the top-level claims of config/papers/{paper}.yaml")


def selected_paper_claims():
    """(paper, claim, mode) of every claim over several figures with at least one of its figures selected."""
    chosen = set(CFG.selected())
    out = []
    for paper in sorted(CFG.papers):
        for claim in CFG.papers[paper].get("claims", []):
            unknown = [f for f in claim["figures"] if f not in CFG.papers[paper]["figures"]]
            if unknown:
                raise WorkflowError(f"dpfl configuration error: config/papers/{paper}.yaml: claims {claim['id']}: "
                                    f"unknown figure(s) {unknown}; allowed: {', '.join(sorted(CFG.papers[paper]['figures']))}")
            built = CFG.built_figures(paper, claim)
            if built:
                out += [(paper, claim, m) for m in _modes_of(paper, built)]
    return out


def paper_claim_outputs():
    return [paper_claims_json(p, c["id"], m) for p, c, m in selected_paper_claims()]


def _claim_tables(mode, ext):
    def files(wildcards):
        m = _claim_mode(mode, wildcards)
        figures = CFG.built_figures(wildcards.paper, paper_claim(wildcards.paper, wildcards.claim))
        return [figure_dir(wildcards.paper, f, _figure_mode(wildcards.paper, f, m)) + f"{f}.{ext}" for f in figures]
    return files


for _mode in (*MODE_SUBDIR, paths.ABLATION):  # the ablation rule takes the ablation's name from a wildcard
    _slug = _mode.replace("-", "_").rstrip("_")
    _sub = paths.mode_subdir(_mode if _mode != paths.ABLATION else "ablation-{ablation}")

    rule:
        name:
            f"paper_claims_{_slug}"
        input:
            csvs=_claim_tables(_mode, "csv"),
            sidecars=_claim_tables(_mode, "json"),
            other=lambda w, _mode=_mode: other_mode_claims(w.paper, CFG.built_figures(w.paper, paper_claim(w.paper, w.claim)),
                                                           _claim_mode(_mode, w), w.claim),
            code=code_files("dpfl.stages.claims"),
        output:
            claims=f"results/{{paper}}/{_sub}claims-{{claim}}.json",
        params:
            claim=lambda w: paper_claim(w.paper, w.claim),
            built=lambda w: CFG.built_figures(w.paper, paper_claim(w.paper, w.claim)),  # the figures it is evaluated over
            # from the figures it is evaluated over: a first figure not built (e.g. kato2024's Fig 4 for C-K4c-f) has
            # none of the built ablations whose verdicts name the cause
            context=lambda w: CFG.claims_context(w.paper, CFG.built_figures(w.paper, paper_claim(w.paper, w.claim))),
        wildcard_constraints:
            claim="[A-Za-z0-9_.-]+",
        log:
            f"results/logs/{{paper}}/{_sub}claims-{{claim}}.log",
        benchmark:
            f"results/logs/{{paper}}/{_sub}claims-{{claim}}.benchmark.tsv"
        threads: 1
        resources:
            mem_mb=1000,
            runtime=5,
        script:
            "../scripts/figure_claims.py"
