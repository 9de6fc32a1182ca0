"""Fixtures shared by several test files."""

from __future__ import annotations

import shutil
import socket
from pathlib import Path

import numpy as np
import pytest
import yaml


@pytest.fixture
def no_credentials(monkeypatch, tmp_path):
    """No Kaggle credentials and no mirror from the environment, whatever the machine running the tests has."""
    for var in ("KAGGLE_USERNAME", "KAGGLE_KEY", "KAGGLE_API_TOKEN", "KAGGLE_CONFIG_DIR", "DPFL_DATA_MIRROR"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "home" / ".config"))


# ------------------------------------------------------------------------------------------ a copy of the project

ROOT = Path(__file__).resolve().parent.parent
CONFIG_ITEMS = ("config", "workflow/schemas")  # enough for dpfl.config.load


def closed_port() -> int:
    """A local port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def make_project(tmp_path):
    """Factory: `make_project(items=CONFIG_ITEMS, into=None, offline_catalog=False)` copies `items` of the project
    (files or folders, without __pycache__) into tmp_path, or tmp_path/<into>, and returns that folder.
    `offline_catalog=True` points every URL of the copied config/datasets.yaml (its routes' too) at a closed local
    port and drops the Kaggle slugs, so a data rule run on the copy downloads nothing."""

    def make(items=CONFIG_ITEMS, *, into: str | None = None, offline_catalog: bool = False) -> Path:
        dest = tmp_path / into if into else tmp_path
        dest.mkdir(parents=True, exist_ok=True)
        for item in items:
            src = ROOT / item
            if src.is_dir():
                shutil.copytree(src, dest / item, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                shutil.copy2(src, dest / item)
        if offline_catalog:
            path = dest / "config" / "datasets.yaml"
            catalog = yaml.safe_load(path.read_text())
            port = closed_port()
            for entry in catalog["datasets"].values():
                entry["kaggle"] = None
                for f in entry["files"]:
                    f["urls"] = [f"http://127.0.0.1:{port}/{f['name']}"]
                for f in (f for route in entry.get("routes") or [] for f in route["files"]):
                    f["urls"] = [f"http://127.0.0.1:{port}/{f['name']}"] if f.get("urls") else []
            path.write_text(yaml.safe_dump(catalog, sort_keys=False))
        return dest

    return make


@pytest.fixture
def project(make_project) -> Path:
    """A copy of the configuration and schemas (enough for dpfl.config.load) in tmp_path."""
    return make_project()


# ------------------------------------------------------------------------------------------ TCGA-BRCA shaped data


@pytest.fixture(scope="session")
def tcga_arrays():
    """Factory: `tcga_arrays(train, test=0, features=39, seed=0)` -> prepared arrays shaped like FLamby's TCGA-BRCA
    (X with `features` columns, survival times T and events E, `center` per record, `train` mask, `centers` names),
    one centre per entry of `train` with that many training records followed by `test` test records."""

    def make(train, test: int = 0, features: int = 39, seed: int = 0) -> dict:
        rng = np.random.default_rng(seed)
        per_centre = [t + test for t in train]
        n = sum(per_centre)
        return {"X": rng.normal(size=(n, features)), "T": rng.exponential(size=n),
                "E": (rng.random(n) < 0.7).astype(np.int64),
                "center": np.repeat(np.arange(len(train)), per_centre),
                "train": np.concatenate([np.r_[np.ones(t, bool), np.zeros(test, bool)] for t in train]),
                "centers": np.array([f"c{i}" for i in range(len(train))])}

    return make


def masked_sequential_forward(net, x, masks=None):
    """A Sequential's forward with explicit dropout masks (one per Dropout site, in order; None: no dropout), as the
    small test MLPs with `dropout_sites` run it."""
    import torch

    site = 0
    for layer in net:
        if isinstance(layer, torch.nn.Dropout):
            x = x if masks is None else x * masks[site]
            site += 1
        else:
            x = layer(x)
    return x
