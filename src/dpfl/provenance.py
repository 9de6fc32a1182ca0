"""What a result was made with: package versions and the machine (recorded in every figure's sidecar)."""

from __future__ import annotations

import os
import platform
from importlib import metadata

VERSIONED_PACKAGES = ["dpfl", "numpy", "scipy", "pandas", "torch", "matplotlib", "dp-accounting", "snakemake",
                      "jsonschema"]


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
