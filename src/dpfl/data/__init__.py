"""The data layer, shared by every paper.

download: a dataset's raw files into data/raw/<dataset>/ with a provenance record SOURCE.json, from the local mirror,
the official URLs, the Kaggle API or a synthetic stand-in (dpfl.data.sources; the catalog is config/datasets.yaml).
prepare: the raw files read by the dataset's loader (dpfl.data.loaders.<dataset>) into data/prepared/<dataset>.npz,
which consumers open with `load_prepared`.

Import-light on purpose: rules declare the modules a job imports as its inputs, so importing the package pulls in
only dpfl.data.common.
"""

from dpfl.data.common import DataError, load_prepared, load_prepared_meta

__all__ = ["DataError", "load_prepared", "load_prepared_meta"]
