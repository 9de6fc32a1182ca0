# Data layer: download (raw files + SOURCE.json provenance) -> prepare (arrays + meta in one .npz).
# The catalog is config/datasets.yaml (CFG.datasets); the work is in src/dpfl/data. Other rules take a dataset
# as input through prepared_npz("<dataset>").
import importlib.util


wildcard_constraints:
    dataset="|".join(sorted(CFG.datasets)),


def prepared_npz(dataset):
    """The prepared arrays of a dataset (data/prepared/<dataset>.npz), for the inputs of other rules."""
    if dataset not in CFG.datasets:
        raise WorkflowError(f"unknown dataset {dataset!r}; known datasets (config/datasets.yaml): "
                            f"{', '.join(sorted(CFG.datasets))}")
    return paths.prepared_npz(dataset)


def _download_job(wildcards):
    """Everything that decides a dataset's download: editing any of it reruns exactly that dataset (the mirror
    only counts where a real source may be used)."""
    source = CFG.data_source(wildcards.dataset)
    return {"entry": CFG.datasets[wildcards.dataset], "data_source": source,
            "mirror": CFG.data_mirror() if source != "standin" else None}


def _download_code(wildcards):
    """The download stage's modules, plus this dataset's stand-in generator (imported by name at run time)."""
    files = set(code_files("dpfl.stages.download"))
    standin = CFG.datasets[wildcards.dataset]["standin"]
    if standin:
        files |= set(code_files(f"dpfl.data.standins.{standin}"))
    return sorted(files)


def _prepare_code(wildcards):
    """The prepare stage's modules, plus this dataset's loader (imported by name at run time)."""
    loader = f"dpfl.data.loaders.{wildcards.dataset}"
    if importlib.util.find_spec(loader) is None:
        raise WorkflowError(f"dataset {wildcards.dataset} has no loader yet ({loader}); it can be downloaded "
                            f"(data/raw/{wildcards.dataset}/SOURCE.json) but not prepared")
    return sorted(set(code_files("dpfl.stages.prepare")) | set(code_files(loader)))


rule download:
    """A dataset's raw files in data/raw/<dataset>/, from the mirror, the official URLs, Kaggle or the stand-in."""
    input:
        code=_download_code,
    output:
        source=paths.raw_source("{dataset}"),
    params:
        job=_download_job,
    log:
        paths.data_logs("{dataset}") + "download.log",
    benchmark:
        paths.data_logs("{dataset}") + "download.benchmark.tsv"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=lambda wildcards: CFG.datasets[wildcards.dataset]["download_minutes"],
    script:
        "../scripts/data_download.py"


rule prepare:
    """A dataset's arrays and provenance in data/prepared/<dataset>.npz (read with dpfl.data.load_prepared)."""
    input:
        source=paths.raw_source("{dataset}"),
        code=_prepare_code,
    output:
        npz=paths.prepared_npz("{dataset}"),
    log:
        paths.data_logs("{dataset}") + "prepare.log",
    benchmark:
        paths.data_logs("{dataset}") + "prepare.benchmark.tsv"
    threads: 1
    resources:
        mem_mb=3000,
        runtime=15,
    script:
        "../scripts/data_prepare.py"
