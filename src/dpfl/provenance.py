"""What a result was made with: package versions and the machine (recorded in every figure's sidecar)."""

from __future__ import annotations

import os
import platform
from importlib import metadata

#: the distributions whose version a figure's sidecar records: every one the figures' stages import that can change
#: a number or a picture (tests/test_packaging.py checks that none is missing), h5py, which decodes the federated
#: datasets' files, and the workflow's own tools
VERSIONED_PACKAGES = ["dpfl", "numpy", "scipy", "pandas", "torch", "matplotlib", "dp-accounting", "opacus",
                      "scikit-learn", "phe", "gmpy2", "cryptography", "h5py", "snakemake", "jsonschema"]
#: distributions the figures' stages import that change no number, and why
UNVERSIONED = {"threadpoolctl": "only caps the threads of the BLAS library (lowy2023's cells), not what it computes"}


def versions() -> dict:
    out = {"python": platform.python_version()}
    for pkg in VERSIONED_PACKAGES:
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = None
    return out


def device() -> dict:
    return {"platform": platform.platform(), "machine": platform.machine(), "cpu_count": os.cpu_count(),
            "accelerator": "none (CPU)"}
