# Data layer: download (raw files + SOURCE.json provenance) -> prepare (arrays + meta in one .npz).
# The catalog is config/datasets.yaml (CFG.datasets); the work is in src/dpfl/data. Other rules take a dataset
# as input through prepared_npz("<dataset>").
import importlib.util

from dpfl.data import source_record as data_record
from dpfl.data.standins import standin_inputs


wildcard_constraints:
    dataset="|".join(sorted(CFG.datasets)),

# Downloads run on the submitting machine under a cluster executor (profiles/slurm): they need the network or the
# mirror, which compute nodes often lack, and little CPU. prepare (arrays, up to GBs of memory) goes to the scheduler.
localrules: download


def prepared_npz(dataset):
    """The prepared arrays of a dataset (data/prepared/<dataset>.npz), for the inputs of other rules."""
    if dataset not in CFG.datasets:
        raise WorkflowError(f"unknown dataset {dataset!r}; known datasets (config/datasets.yaml): "
                            f"{', '.join(sorted(CFG.datasets))}")
    return paths.prepared_npz(dataset)


def _download_identity(wildcards):
    """What a dataset's download is; Snakemake compares it (params) and reruns exactly that dataset, and what uses it,
    when it changes: the catalog entry, the effective data_source and the source key
    (dpfl.data.source_record.source_key), and max_auto_download_mb for a dataset that data_source auto does not
    download for its size.
    Once SOURCE.json records real data matching the catalog checksums, the key is the one kept there, so the mirror
    setting of the moment no longer counts; until then it is the mirror copy a download would try."""
    dataset = wildcards.dataset
    entry, source = CFG.datasets[dataset], CFG.data_source(dataset)
    key = data_record.source_key(entry, source, _mirror(source), os.path.dirname(paths.raw_source(dataset)),
                                 CFG.dataset_folder(dataset))
    identity = {"entry": entry, "data_source": source, "source_key": key}
    limit = CFG.globals["max_auto_download_mb"]
    if data_record.over_auto_limit(entry, source, limit):  # only then: other downloads keep their identity
        identity["max_auto_download_mb"] = limit
    return identity


def _download_mirror(wildcards, output):
    """The mirror in effect now, which the job uses. This function takes `output`, so Snakemake treats its value as
    derived from the output and leaves it out of the params it compares: the mirror path itself never reruns
    anything (the identity above decides)."""
    return _mirror(CFG.data_source(wildcards.dataset))


def _download_folder(wildcards, output):
    """The user's own folder of this dataset's files (config dataset_files), as the mirror: its path is in the
    source key until real data is there, and is not compared itself."""
    return CFG.dataset_folder(wildcards.dataset)


def _mirror(source):
    """The resolved mirror (symlinks too), where a real source may be used."""
    return CFG.data_mirror() if source != "standin" else None


def _download_code(wildcards):
    """The download stage's modules, plus this dataset's stand-in generator (imported by name at run time)."""
    files = set(code_files("dpfl.stages.download"))
    standin = CFG.datasets[wildcards.dataset]["standin"]
    if standin:
        files |= set(code_files(f"dpfl.data.standins.{standin}"))
    return sorted(files)


def _standin_inputs(wildcards):
    """The prepared datasets this dataset's stand-in generator reads (dpfl.data.standins.INPUTS), as inputs of its
    download wherever the stand-in may be used (not with data_source real): EMNIST's draws its digits from
    data/prepared/mnist.npz (real MNIST when the mirror or the URLs serve it, else the MNIST stand-in, and then the
    EMNIST stand-in uses its templates)."""
    if CFG.data_source(wildcards.dataset) == "real":
        return {}
    reads = standin_inputs(CFG.datasets[wildcards.dataset]["standin"])
    return {f"standin_{name}": prepared_npz(name) for name in reads}


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
        unpack(_standin_inputs),
        code=_download_code,
    output:
        source=paths.raw_source("{dataset}"),
    params:
        identity=_download_identity,
        mirror=_download_mirror,
        folder=_download_folder,
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
