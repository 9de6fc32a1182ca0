# dpfl-repro: one DAG that regenerates the experiment figures of five DP federated-learning papers.
# Thin on purpose: configuration is loaded and validated in workflow/rules/common.smk (dpfl.config),
# the rules live in workflow/rules/*.smk and the work in the dpfl package (src/dpfl).
import os
import sys

from snakemake.exceptions import WorkflowError
from snakemake.utils import min_version

min_version("9.0")

# config/config.yaml goes through the project's YAML reader (dpfl.config.read_yaml) before Snakemake's: a syntax
# error names the file, line and column. The run's settings are read there too (common.smk), not from `config`.
sys.path.insert(0, os.path.join(workflow.basedir, "src"))
from dpfl.config import ConfigError, read_yaml  # noqa: E402

try:
    read_yaml(os.path.join(workflow.basedir, "config", "config.yaml"))
except ConfigError as exc:
    raise WorkflowError(f"dpfl configuration error: {exc}") from None


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
