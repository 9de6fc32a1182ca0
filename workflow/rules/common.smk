# Configuration and every function the rules call (Snakemake's convention: functions here, rules in the other files).
# Loading fails before any job runs if a YAML file is invalid; the message names the file, the key and what is
# allowed. Paths come from dpfl.paths.
import importlib.util
import os
import re
import sys

from snakemake.exceptions import WorkflowError

SRC = os.path.join(PROJECT, "src")
# Jobs import the dpfl package from this project tree (not from wherever it was pip-installed, and in a conda
# environment of --sdm conda, which holds the dependencies only): the jobs inherit this PYTHONPATH. It is set here,
# never required of the user.
sys.path.insert(0, SRC)
os.environ.update(PYTHONPATH=os.pathsep.join(p for p in (SRC, os.environ.get("PYTHONPATH")) if p))

from dpfl import config as dpfl_config  # noqa: E402
from dpfl import jobs, joblog, paths  # noqa: E402  (joblog: the failed jobs' errors, report.smk's handlers)
from dpfl import codedeps  # noqa: E402
from dpfl.codedeps import code_files  # noqa: E402
from dpfl.data import source_record as data_record  # noqa: E402
from dpfl.data.standins import standin_inputs  # noqa: E402
from dpfl.io import config_hash  # noqa: E402
from dpfl.papers import ALLOCATION_KINDS, FIGURES  # noqa: E402
from dpfl.runinfo import say_standins  # noqa: E402

try:
    # the command line's settings over config/config.yaml as the project reads it: Snakemake's `config` holds the
    # file as Snakemake's YAML reader reads it (`1e-5` a string), so it is not passed on
    CFG = dpfl_config.load(
        PROJECT,
        dpfl_config.command_line_settings(workflow.config_settings.configfiles, workflow.config_settings.config),
    )
except dpfl_config.ConfigError as exc:
    raise WorkflowError(f"dpfl configuration error: {exc}") from None

if CFG.globals["device"] == "cuda":
    from dpfl.fl.device import DeviceError, resolve_device  # noqa: E402

    try:
        resolve_device("cuda")
    except DeviceError as exc:
        raise WorkflowError(f"dpfl configuration error: {exc}") from None

# The conda environment the rules name (--sdm conda, docs/install.md): the locked packages, no project code.
DPFL_ENV = "../envs/dpfl.yaml"
REPORT_HTML = paths.REPORT_HTML
REPORT_STANDALONE_HTML = os.path.join(os.path.dirname(REPORT_HTML), "report-standalone.html")

# A figure variant's folder under its figure's (the `variant` wildcard): "" for the paper's algorithm,
# "authors-code/", or "ablations/<name>/" for a one-switch ablation (dpfl.paths.mode_subdir).
VARIANT_PATTERN = "(" + "|".join(re.escape(s) for s in paths.MODE_SUBDIR.values()) + "|ablations/[a-z][a-z0-9_]*/)"
FIGURE_DIR = f"{paths.figure_dir('{paper}', '{figure}')}{{variant}}"
FIGURE_FILES = paths.files_in(FIGURE_DIR, "{figure}")  # the figure directory's files, as wildcard patterns
FIGURE_LOGS = f"{paths.figure_logs('{paper}', '{figure}')}{{variant}}"


# ---------------------------------------------------------------------------------------------- figures and modes


def variant_mode(wildcards):
    """The mode of the variant a job builds, from its folder (the inverse of dpfl.paths.mode_subdir): "none",
    "authors-code" or "ablation-<name>"."""
    return paths.subdir_mode(wildcards.variant)


def figure_def(wildcards):
    key = (wildcards.paper, wildcards.figure)
    if key not in FIGURES:
        known = ", ".join(f"{p}/{f}" for p, f in sorted(FIGURES))
        raise WorkflowError(f"unknown figure {key[0]}/{key[1]}; known figures: {known}")
    return FIGURES[key]


def modes_for(paper, figure):
    """Modes in which `all` builds a figure: the paper's `compat` setting, plus the authors-code variant when
    `compat_variants` is on or the figure asks for it (`authors_code.build_by_default`: its verdicts hinge on a
    documented difference). Figures without an authors-code difference have one mode."""
    if not FIGURES[(paper, figure)].has_compat:
        return ["none"]
    if CFG.mode(paper) == paths.AUTHORS_CODE:
        return [paths.AUTHORS_CODE]
    wanted = CFG.globals["compat_variants"] or CFG.figure(paper, figure).get("authors_code", {}).get("build_by_default")
    return (list(paths.MODES) if wanted else [paths.PAPER_MODE]) + ablation_modes(paper, figure)


def ablation_modes(paper, figure):
    """The figure's one-switch ablations ("ablation-<name>"), built with `ablations: true` in the paper's own mode."""
    if not CFG.globals["ablations"] or CFG.mode(paper) != "none":
        return []
    return [paths.ablation_mode(name) for name in CFG.ablations(paper, figure)]


def figure_outputs(paper, figure, mode):
    return paths.figure_files(paper, figure, mode).built()


def selected_variants():
    return [(p, f, m) for p, f in CFG.selected() for m in modes_for(p, f)]


def all_figure_outputs():
    return [path for p, f, m in selected_variants() for path in figure_outputs(p, f, m)]


def compat_figure_outputs():
    return [
        path
        for p, f in CFG.selected()
        if FIGURES[(p, f)].has_compat
        for path in figure_outputs(p, f, paths.AUTHORS_CODE)
    ]


def stage_code(wildcards, stage):
    """Source files a stage of a figure depends on (dpfl.codedeps.stage_code), declared as inputs: editing a module
    reruns exactly the jobs that import it."""
    return codedeps.stage_code(figure_def(wildcards), stage)


# ------------------------------------------------------------------------------------------------------ data


def prepared_npz(dataset):
    """The prepared arrays of a dataset (data/prepared/<dataset>.npz), for the inputs of other rules."""
    if dataset not in CFG.datasets:
        raise WorkflowError(
            f"unknown dataset {dataset!r}; known datasets (config/datasets.yaml): " f"{', '.join(sorted(CFG.datasets))}"
        )
    return paths.prepared_npz(dataset)


def unknown_dataset(wildcards):
    raise WorkflowError(
        f"unknown dataset {wildcards.name!r}; known datasets (config/datasets.yaml): "
        f"{', '.join(sorted(CFG.datasets))}"
    )


def not_a_dataset_pattern():
    """A name that is not in the catalog, followed by the `.npz` or the `/SOURCE.json` of a data path."""
    return "(?!(?:" + "|".join(sorted(CFG.datasets)) + r")(?:\.npz$|/))[^/]+"


def download_identity(wildcards):
    """What a dataset's download is; Snakemake compares it (params) and reruns exactly that dataset, and what uses it,
    when it changes: the catalog entry, the effective data_source and the source key
    (dpfl.data.source_record.source_key), and max_auto_download_mb for a dataset that data_source auto does not
    download for its size.
    Once SOURCE.json records real data matching the catalog checksums, the key is the one kept there, so the mirror
    setting of the moment no longer counts; until then it is the mirror copy a download would try."""
    dataset = wildcards.dataset
    entry, source = CFG.datasets[dataset], CFG.data_source(dataset)
    key = data_record.source_key(
        entry, source, _mirror(source), os.path.dirname(paths.raw_source(dataset)), CFG.dataset_folder(dataset)
    )
    identity = {"entry": entry, "data_source": source, "source_key": key}
    limit = CFG.globals["max_auto_download_mb"]
    if data_record.over_auto_limit(entry, source, limit):  # only then: other downloads keep their identity
        identity["max_auto_download_mb"] = limit
    return identity


def download_mirror(wildcards, output):
    """The mirror in effect now, which the job uses. This function takes `output`, so Snakemake treats its value as
    derived from the output and leaves it out of the params it compares: the mirror path itself never reruns
    anything (the identity above decides)."""
    return _mirror(CFG.data_source(wildcards.dataset))


def download_folder(wildcards, output):
    """The user's own folder of this dataset's files (config dataset_files), as the mirror: its path is in the
    source key until real data is there, and is not compared itself."""
    return CFG.dataset_folder(wildcards.dataset)


def _mirror(source):
    """The resolved mirror (symlinks too), where a real source may be used."""
    return CFG.data_mirror() if source != "standin" else None


def download_code(wildcards):
    """The download stage's modules, plus this dataset's stand-in generator (imported by name at run time)."""
    files = set(code_files("dpfl.stages.download"))
    standin = CFG.datasets[wildcards.dataset]["standin"]
    if standin:
        files |= set(code_files(f"dpfl.data.standins.{standin}"))
    return sorted(files)


def standin_prepared_inputs(wildcards):
    """The prepared datasets this dataset's stand-in generator reads (dpfl.data.standins.INPUTS), as inputs of its
    download wherever the stand-in may be used (not with data_source real): EMNIST's draws its digits from
    data/prepared/mnist.npz (real MNIST when the mirror or the URLs serve it, else the MNIST stand-in, and then the
    EMNIST stand-in uses its templates)."""
    if CFG.data_source(wildcards.dataset) == "real":
        return {}
    reads = standin_inputs(CFG.datasets[wildcards.dataset]["standin"])
    return {f"standin_{name}": prepared_npz(name) for name in reads}


def prepare_code(wildcards):
    """The prepare stage's modules, plus this dataset's loader (imported by name at run time)."""
    loader = f"dpfl.data.loaders.{wildcards.dataset}"
    if importlib.util.find_spec(loader) is None:
        raise WorkflowError(
            f"dataset {wildcards.dataset} has no loader yet ({loader}); it can be downloaded "
            f"(data/raw/{wildcards.dataset}/SOURCE.json) but not prepared"
        )
    return sorted(set(code_files("dpfl.stages.prepare")) | set(code_files(loader)))


def allocation_npz(name):
    """The cached file of a configured allocation (a paper's `allocations:` entry, named "<paper>-<name>")."""
    try:
        entry = CFG.allocation(name)
    except dpfl_config.ConfigError as exc:
        raise WorkflowError(str(exc)) from None
    return paths.allocation_npz(entry["dataset"], name)


def allocation_entry(wildcards):
    try:
        entry = CFG.allocation(wildcards.allocation)
    except dpfl_config.ConfigError as exc:
        raise WorkflowError(str(exc)) from None
    if entry["dataset"] != wildcards.dataset:
        raise WorkflowError(
            f"allocation {wildcards.allocation!r} arranges {entry['dataset']}, not {wildcards.dataset}: "
            f"{paths.allocation_npz(entry['dataset'], wildcards.allocation)}"
        )
    return entry


def allocation_code(wildcards):
    return sorted(
        set(code_files("dpfl.stages.allocate"))
        | set(code_files(ALLOCATION_KINDS[allocation_entry(wildcards)["kind"]].function))
    )


# ----------------------------------------------------------------------------------------- a figure's jobs


def local_cores():
    """The cores of a local run (None under a cluster executor, or when no core count is set)."""
    if not workflow.local_exec:
        return None
    try:
        return workflow.cores
    except Exception:  # WorkflowError: no --cores given (e.g. a dry run)
        return None


def cell_needs(wildcards):
    """(datasets, allocations) one cell reads (jobs.cell_needs): building a figure builds only the data its own cells
    use."""
    figure_def(wildcards)
    try:
        return jobs.cell_needs(CFG, wildcards.paper, wildcards.figure, wildcards.cell, variant_mode(wildcards))
    except ValueError as exc:
        raise WorkflowError(str(exc)) from None


def cell_job(wildcards):
    figure_def(wildcards)
    try:
        return jobs.build_cell_job(
            CFG, wildcards.paper, wildcards.figure, wildcards.cell, variant_mode(wildcards)
        ).as_dict()
    except ValueError as exc:
        raise WorkflowError(str(exc)) from None


def cell_threads(wildcards):
    """All local cores for cells that time themselves (jobs.cell_threads), so that nothing runs beside them."""
    return jobs.cell_threads(
        CFG, wildcards.paper, wildcards.figure, wildcards.cell, variant_mode(wildcards), local_cores()
    )


def cell_gpu(wildcards):
    """1 for cells worth a GPU (jobs.cell_gpu): `--resources gpu=1` serialises them, profiles/slurm maps it."""
    return jobs.cell_gpu(CFG, wildcards.paper, wildcards.figure, wildcards.cell, variant_mode(wildcards))


def table_job(wildcards):
    figure_def(wildcards)
    return jobs.table_job(CFG, wildcards.paper, wildcards.figure, variant_mode(wildcards))


def table_reductions(wildcards):
    """Is this run reduced (below paper scale)? Decided once, here: the settings whose value in this run differs from
    the paper file's own (dpfl.config.overlays.scale_reductions, in this mode). The table stage records them in the figure's
    meta (`reductions`, `reduced_scale`); the plot (the figure's face label) and the claims (cause reduced-scale)
    read them from there. A rule param beside `job`, so that the meta's config hash does not change."""
    figure_def(wildcards)
    from dpfl.config.overlays import scale_reductions

    mode = variant_mode(wildcards)
    return scale_reductions(
        CFG.paper_file_params(wildcards.paper, wildcards.figure, mode),
        CFG.figure_params(wildcards.paper, wildcards.figure, mode),
    )


def table_prepared_inputs(wildcards):
    """The prepared datasets a figure's table reads itself (jobs.needs)."""
    figure_def(wildcards)
    datasets = jobs.needs(CFG, wildcards.paper, wildcards.figure, variant_mode(wildcards))[0]
    return [prepared_npz(d) for d in datasets]


def cell_tables(wildcards):
    """The cell tables a figure's table reads: its own cells, or the cell of another figure that computes a run of
    it (jobs.cell_sources)."""
    figure_def(wildcards)
    mode = variant_mode(wildcards)
    return [
        paths.cell_table(wildcards.paper, f, c, mode)
        for f, c, _ in jobs.cell_sources(CFG, wildcards.paper, wildcards.figure, mode)
    ]


def cell_table_runs(wildcards):
    """Per cell table the figure reads (cell_tables), None (all its rows) or the runs it reads there."""
    figure_def(wildcards)
    return [
        None if r is None else list(r)
        for _, _, r in jobs.cell_sources(CFG, wildcards.paper, wildcards.figure, variant_mode(wildcards))
    ]


def plot_spec(wildcards):
    fdef = figure_def(wildcards)
    spec = CFG.figure(wildcards.paper, wildcards.figure)
    out = {k: spec[k] for k in ("title", "caption", "params", "plot", "inferred") if k in spec}
    out["function"] = fdef.plot
    out["table_function"] = fdef.markdown
    return out


def report_labels(wildcards):
    """The labels of a figure in Snakemake's own report (snakemake --report)."""
    return {"paper": wildcards.paper, "figure": wildcards.figure, "mode": variant_mode(wildcards)}


def figure_claims_spec(wildcards):
    return CFG.figure(wildcards.paper, wildcards.figure).get("claims", [])


# ------------------------------------------------------------------------------------------------------ claims
# A paper file's top-level `claims:` lists claims over several figures together, each with `figures: [...]` (e.g.
# lowy2023's C-L89a/b over the 8 panels of Figs 8 and 9); rule paper_claims evaluates one on the figures' tidy tables
# concatenated (panels renamed "<figure>/<panel>") -> results/<paper>/[<variant>/]claims-<id>.json, which the report
# shows under the paper. It is built when at least one of its figures is selected, over the selected ones (it names
# them, and the figures it could not read), in the modes they share: a claim is never left without a verdict because
# one of its figures is not built (e.g. a figure that takes hours, or needs a GPU, at paper scale).


def figure_mode(paper, figure, mode):
    """The variant of a figure that a claim in `mode` reads (a figure without an authors-code variant: its one)."""
    return mode if FIGURES[(paper, figure)].has_compat else "none"


def shared_modes(paper, figures):
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
        return [paths.figure_files(paper, figures[0], m).claims for m in others]
    return [paper_claims_json(paper, claim_id, m) for m in others]


def figure_other_claims(wildcards):
    return other_mode_claims(wildcards.paper, [wildcards.figure], variant_mode(wildcards))


def paper_claim(paper, claim_id):
    for claim in CFG.papers[paper].get("claims", []):
        if claim["id"] == claim_id:
            return claim
    raise WorkflowError(f"no claim {claim_id!r} in the top-level claims of config/papers/{paper}.yaml")


def claim_figures(wildcards):
    """The figures a claim over several figures is evaluated over: those of its figures that are built."""
    return CFG.built_figures(wildcards.paper, paper_claim(wildcards.paper, wildcards.claim))


def selected_paper_claims():
    """(paper, claim, mode) of every claim over several figures with at least one of its figures selected."""
    out = []
    for paper in sorted(CFG.papers):
        for claim in CFG.papers[paper].get("claims", []):
            unknown = [f for f in claim["figures"] if f not in CFG.papers[paper]["figures"]]
            if unknown:
                raise WorkflowError(
                    f"dpfl configuration error: config/papers/{paper}.yaml: claims {claim['id']}: "
                    f"unknown figure(s) {unknown}; allowed: {', '.join(sorted(CFG.papers[paper]['figures']))}"
                )
            built = CFG.built_figures(paper, claim)
            if built:
                out += [(paper, claim, m) for m in shared_modes(paper, built)]
    return out


def paper_claim_outputs():
    return [paper_claims_json(p, c["id"], m) for p, c, m in selected_paper_claims()]


def claim_tables(wildcards, ext):
    """The tables (ext "csv") or sidecars ("json") of the figures a claim over several figures reads."""
    mode = variant_mode(wildcards)
    return [
        paths.figure_dir(wildcards.paper, f, figure_mode(wildcards.paper, f, mode)) + f"{f}.{ext}"
        for f in claim_figures(wildcards)
    ]


def paper_other_claims(wildcards):
    return other_mode_claims(wildcards.paper, claim_figures(wildcards), variant_mode(wildcards), wildcards.claim)


# ------------------------------------------------------------------------------------------------------ report
# The page links the figures' files but holds the verdicts, so a run that ends without rebuilding it (a failed job
# stops the run first; Snakemake deletes a failed claims job's claims.json) would leave it showing new figures beside
# old verdicts. report.smk's onsuccess / onerror handlers rebuild an existing page whose inputs changed or disappeared
# (dpfl.stages.report.refresh_report): a missing claims file is then shown as such, with its job's error, and one
# older than its table or its claims (each claims file records the table's SHA-256 and the claims' hash) as out of
# date, never with its verdicts.


def report_figures():
    """Every built figure variant, with the documented difference its authors-code variant implements and the hash of
    its configured claims (a claims file computed for others is out of date)."""
    return [
        {
            "paper": p,
            "figure": f,
            "mode": m,
            "dir": paths.figure_dir(p, f, m),
            "why": CFG.figure(p, f).get("authors_code", {}).get("why", ""),
            "claims_hash": config_hash(CFG.figure(p, f).get("claims", [])),
        }
        for p, f, m in selected_variants()
    ]


def report_paper_claims():
    """Every claim over several figures that is built, with the tables it reads and the hash of the claim."""
    return [
        {
            "paper": p,
            "id": c["id"],
            "mode": m,
            "figures": CFG.built_figures(p, c),
            "path": paper_claims_json(p, c["id"], m),
            "tables": {f: paths.figure_files(p, f, figure_mode(p, f, m)).table for f in CFG.built_figures(p, c)},
            "claims_hash": config_hash(c),
        }
        for p, c, m in selected_paper_claims()
    ]


def report_settings(wildcards, output):
    """Shown in the report, but not compared for reruns (a function of `output` is not a compared param): a change
    that matters reaches the report through its inputs, while the mirror path or `threads` alone (which change no
    result) rerun nothing."""
    return {**CFG.globals, "data_mirror_resolved": CFG.data_mirror(), "config_sources": CFG.sources}


def report_templates():
    folder = os.path.join("src", "dpfl", "templates")
    return sorted(os.path.join(folder, n) for n in os.listdir(os.path.join(PROJECT, folder)) if n.endswith(".j2"))


def refresh_report(log, failed):
    """Keep an existing report from going stale at the end of a run that did not rebuild it (see above)."""
    from dpfl.stages.report import refresh_report as refresh

    try:
        done = refresh(
            report_figures(),
            report_settings(None, None),
            REPORT_HTML,
            REPORT_STANDALONE_HTML,
            report_paper_claims(),
            failed=failed,
            run_log=log,
        )
    except Exception as exc:  # a handler must not hide the run's own outcome
        done = f"report not refreshed: {type(exc).__name__}: {exc}"
    if done:
        print(f"dpfl: {done}: {REPORT_HTML}", file=sys.stderr)
