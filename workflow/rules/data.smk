# Data layer: download (raw files + SOURCE.json provenance) -> prepare (arrays + meta in one .npz).
# The catalog is config/datasets.yaml (CFG.datasets); the work is in src/dpfl/data. Other rules take a dataset
# as input through prepared_npz("<dataset>") (common.smk, with the functions these rules call).


wildcard_constraints:
    dataset="|".join(sorted(CFG.datasets)),


# Downloads run on the submitting machine under a cluster executor (profiles/slurm): they need the network or the
# mirror, which compute nodes often lack, and little CPU. prepare (arrays, up to GBs of memory) goes to the scheduler.
localrules:
    download,


rule download:
    """A dataset's raw files in data/raw/<dataset>/, from the mirror, the official URLs, Kaggle or the stand-in."""
    input:
        unpack(standin_prepared_inputs),
        code=download_code,
    output:
        source=paths.raw_source("{dataset}"),
    log:
        f"{paths.data_logs('{dataset}')}download.log",
    benchmark:
        f"{paths.data_logs('{dataset}')}download.benchmark.tsv"
    conda:
        DPFL_ENV
    threads: 1
    resources:
        mem_mb=2000,
        runtime=lambda wildcards: CFG.datasets[wildcards.dataset]["download_minutes"],
    params:
        identity=download_identity,
        mirror=download_mirror,
        folder=download_folder,
    script:
        "../scripts/data_download.py"


rule prepare:
    """A dataset's arrays and provenance in data/prepared/<dataset>.npz (read with dpfl.data.load_prepared)."""
    input:
        source=paths.raw_source("{dataset}"),
        code=prepare_code,
    output:
        npz=paths.prepared_npz("{dataset}"),
    log:
        f"{paths.data_logs('{dataset}')}prepare.log",
    benchmark:
        f"{paths.data_logs('{dataset}')}prepare.benchmark.tsv"
    conda:
        DPFL_ENV
    threads: 1
    resources:
        mem_mb=3000,
        runtime=15,
    script:
        "../scripts/data_prepare.py"


rule unknown_dataset:
    """Matches only names that are not in the catalog, to stop with the list of known datasets (instead of
    Snakemake's 'No rule to produce'); its input function raises before any job runs."""
    input:
        unknown_dataset,
    output:
        paths.prepared_npz("{name}"),
        paths.raw_source("{name}"),
    log:
        f"{paths.data_logs('{name}')}unknown.log",
    wildcard_constraints:
        name=not_a_dataset_pattern(),
    localrule: True
    conda:
        DPFL_ENV
    shell:
        "false"
