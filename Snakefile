# dpfl-repro: one DAG that regenerates the experiment figures of five DP federated-learning papers.
# Thin on purpose: configuration is loaded and validated in workflow/rules/common.smk (dpfl.config),
# the rules live in workflow/rules/*.smk and the work in the dpfl package (src/dpfl).
from snakemake.utils import min_version

min_version("9.0")


configfile: "config/config.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/figures.smk"
include: "workflow/rules/claims.smk"
include: "workflow/rules/report.smk"


rule all:
    """Every selected figure (in each paper's configured mode), its claims and the HTML report."""
    input:
        all_figure_outputs(),
        REPORT_HTML,
    default_target: True


rule compat:
    """The `compat: authors-code` variant of every selected figure that has one."""
    input:
        compat_figure_outputs(),
