"""Synthetic stand-ins: one module per dataset, each with `VERSION` and `generate(out_dir, seed, ...)`, which writes
raw files in the real dataset's own format (same names, header, line endings, counts), so the real loader and
everything downstream run unchanged. Deterministic: the seed comes from the dataset name (common.standin_seed) and
gzip output carries no time stamp, so every run writes the same bytes. Size keywords exist for the tests only."""

#: the prepared datasets a stand-in generator reads, by generator module: each is passed to its `generate` as the
#: keyword <dataset> = the path of data/prepared/<dataset>.npz (None when not given). Import-light: the workflow reads
#: it to declare them as inputs of the download job.
INPUTS: dict[str, tuple[str, ...]] = {"emnist": ("mnist",)}


def standin_inputs(standin: str | None) -> tuple[str, ...]:
    """The prepared datasets the stand-in generator `standin` (config/datasets.yaml's `standin`) reads."""
    return INPUTS.get(standin, ()) if standin else ()
