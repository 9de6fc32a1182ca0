# Snakemake script: a dataset's raw files and SOURCE.json (see dpfl.stages.download.run_download).
from dpfl.joblog import job_errors

with job_errors(snakemake):  # the error in the job's log too (dpfl.joblog)
    from dpfl.stages.download import run_download

    # the prepared datasets the stand-in generator reads (inputs standin_<dataset>; dpfl.data.standins.INPUTS)
    standin_inputs = {name.removeprefix("standin_"): path for name, path in snakemake.input.items()
                      if name.startswith("standin_")}
    run_download(snakemake.wildcards.dataset, {**snakemake.params.identity, "mirror": snakemake.params.mirror,
                                                    "folder": snakemake.params.folder},
                 snakemake.output.source, snakemake.log[0], standin_inputs)
