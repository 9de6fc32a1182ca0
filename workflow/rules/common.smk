# Configuration and helpers shared by the rules. Loading fails before any job runs if a YAML file is
# invalid; the message names the file, the key and what is allowed. Paths come from dpfl.paths.
import os
import sys

from snakemake.exceptions import WorkflowError

SRC = os.path.join(workflow.basedir, "src")
# Jobs import the dpfl package from this project tree (not from wherever it was pip-installed).
sys.path.insert(0, SRC)
os.environ["PYTHONPATH"] = SRC + (os.pathsep + os.environ["PYTHONPATH"] if os.environ.get("PYTHONPATH") else "")

from dpfl import config as dpfl_config  # noqa: E402
from dpfl import jobs, joblog, paths  # noqa: E402  (joblog: the failed jobs' errors, report.smk's handlers)
from dpfl import codedeps  # noqa: E402
from dpfl.codedeps import code_files  # noqa: E402
from dpfl.papers import ALLOCATION_KINDS, FIGURES  # noqa: E402

try:
    # the command line's settings over config/config.yaml as the project reads it: Snakemake's `config` holds the
    # file as Snakemake's YAML reader reads it (`1e-5` a string), so it is not passed on
    CFG = dpfl_config.load(workflow.basedir, dpfl_config.command_line_settings(workflow.config_settings.configfiles,
                                                                              workflow.config_settings.config))
except dpfl_config.ConfigError as exc:
    raise WorkflowError(f"dpfl configuration error: {exc}") from None

if CFG.globals["device"] == "cuda":
    from dpfl.fl.device import DeviceError, resolve_device  # noqa: E402

    try:
        resolve_device("cuda")
    except DeviceError as exc:
        raise WorkflowError(f"dpfl configuration error: {exc}") from None

MODE_SUBDIR = paths.MODE_SUBDIR
REPORT_HTML = paths.REPORT_HTML


wildcard_constraints:
    paper="[a-z]+[0-9]{4}",
    figure="[a-z0-9_]+",
    cell="[A-Za-z0-9_.-]+",
    allocation="[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)?",  # "<paper>-<name>" or "<paper>-<name>/<instance>"
    ablation="[a-z][a-z0-9_]*",


def figure_def(wildcards):
    key = (wildcards.paper, wildcards.figure)
    if key not in FIGURES:
        known = ", ".join(f"{p}/{f}" for p, f in sorted(FIGURES))
        raise WorkflowError(f"unknown figure {key[0]}/{key[1]}; known figures: {known}")
    return FIGURES[key]


def figure_dir(paper, figure, mode):
    return paths.figure_dir(paper, figure, mode)


def modes_for(paper, figure):
    """Modes in which `all` builds a figure: the paper's `compat` setting, plus the authors-code variant when
    `compat_variants` is on or the figure asks for it (`authors_code.build_by_default`: its verdicts hinge on a
    documented difference). Figures without an authors-code difference have one mode."""
    if not FIGURES[(paper, figure)].has_compat:
        return ["none"]
    if CFG.mode(paper) == "authors-code":
        return ["authors-code"]
    wanted = CFG.globals["compat_variants"] or CFG.figure(paper, figure).get("authors_code", {}).get("build_by_default")
    return (["none", "authors-code"] if wanted else ["none"]) + ablation_modes(paper, figure)


def ablation_modes(paper, figure):
    """The figure's one-switch ablations ("ablation-<name>"), built with `ablations: true` in the paper's own mode."""
    if not CFG.globals["ablations"] or CFG.mode(paper) != "none":
        return []
    return [paths.ablation_mode(name) for name in CFG.ablations(paper, figure)]


def rule_mode(mode, wildcards):
    """A rule's mode: "none", "authors-code", or for the ablation rules "ablation-<name>" from the wildcard."""
    return paths.ablation_mode(wildcards.ablation) if mode == paths.ABLATION else mode


def figure_outputs(paper, figure, mode):
    d = figure_dir(paper, figure, mode)
    return [f"{d}{figure}.png", f"{d}{figure}.pdf", f"{d}{figure}.json", f"{d}{figure}.md", f"{d}claims.json"]


def selected_variants():
    return [(p, f, m) for p, f in CFG.selected() for m in modes_for(p, f)]


def all_figure_outputs():
    return [path for p, f, m in selected_variants() for path in figure_outputs(p, f, m)]


def compat_figure_outputs():
    return [path for p, f in CFG.selected() if FIGURES[(p, f)].has_compat
            for path in figure_outputs(p, f, "authors-code")]


def stage_code(stage):
    """Source files a stage of a figure depends on (dpfl.codedeps.stage_code), declared as inputs: editing a module
    reruns exactly the jobs that import it."""
    return lambda wildcards: codedeps.stage_code(figure_def(wildcards), stage)


def _unknown_dataset(wildcards):
    raise WorkflowError(f"unknown dataset {wildcards.name!r}; known datasets (config/datasets.yaml): "
                        f"{', '.join(sorted(CFG.datasets))}")


rule unknown_dataset:
    """Matches only names that are not in the catalog, to stop with the list of known datasets (instead of
    Snakemake's 'No rule to produce')."""
    input:
        _unknown_dataset,
    output:
        "data/prepared/{name}.npz",
        "data/raw/{name}/SOURCE.json",
    wildcard_constraints:
        # not a catalog name (followed by the ".npz" or "/SOURCE.json" of the path)
        name="(?!(?:" + "|".join(sorted(CFG.datasets)) + r")(?:\.npz$|/))[^/]+",
    localrule: True
    shell:
        "false"
