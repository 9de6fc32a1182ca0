"""kato2024 bad input: each stops before any training, with a message naming the file, the key and what is
allowed, and leaves nothing half-written. One test (or two) per item:

- an unknown method id or distribution name in a training figure of config/papers/kato2024.yaml (ConfigError);
- a GROUP size k < 1 (group_size, bounding_flags);
- an allocation that cannot be built: TCGA with more users than ≥ 2 records each allow, S larger than the records,
  S other than FLamby's silos (the allocation functions, the per-instance builders and the `allocate` stage);
- creditcard unreachable with `data_source: real` (every source tried is listed; the network is never touched);
- a creditcard file with the wrong row count or columns (loader, download verification, `prepare` stage);
- `device: cuda` without a GPU (resolve_device, and the Snakefile check before any job).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from dpfl import config
from dpfl.data import fetchers, sources
from dpfl.data.common import DataError, save_prepared, sha256_file
from dpfl.data.loaders import creditcard
from dpfl.papers.kato2024.allocation import allocate_flamby, allocate_records
from dpfl.papers.kato2024.allocation_instances import build_flamby, build_records
from dpfl.papers.kato2024.training.group import bounding_flags, group_size
from dpfl.stages.allocate import run_allocate
from dpfl.stages.download import run_download
from dpfl.stages.prepare import run_prepare

from tests.test_data_kato_loaders import CC_COLUMNS, creditcard_table  # a small valid creditcard table
from tests.test_pipeline import copy_project, snakemake

ROOT = Path(__file__).resolve().parent.parent
PAPER_FILE = "config/papers/kato2024.yaml"
TCGA = [248, 156, 164, 129, 129, 40]  # FLamby's training silos: Σ ⌊n_s/2⌋ = 432 (conftest.tcga_arrays(TCGA))
CC_URLS = ["https://storage.googleapis.com/download.tensorflow.org/data/creditcard.csv",
           "https://www.openml.org/data/get_csv/1673544/creditcard.csv",
           "https://raw.githubusercontent.com/jbrownlee/Datasets/master/creditcard.csv.zip"]


def files_under(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*")) if folder.exists() else []


# --------------------------------------------------------------------------------------------------
# unknown method or distribution name: a ConfigError naming the file, the key path and the allowed values
# --------------------------------------------------------------------------------------------------


def edit_in_figure(project: Path, figure: str, old: str, new: str, paper_file: str = PAPER_FILE) -> None:
    """Replace the first `old` after the line `  <figure>:` of a paper file (default: kato2024's)."""
    path = project / paper_file
    text = path.read_text()
    start = text.index(f"\n  {figure}:\n")
    at = text.index(old, start)
    path.write_text(text[:at] + new + text[at + len(old):])


def allowed(*keys: str) -> str:
    """The enum of a training figure's params key in the kato2024 schema (or the fragment generated from the
    registry that it `$ref`s, urn:dpfl:kato2024:<name>), as the error lists it."""
    from dpfl.papers.kato2024.methods import schema_fragments

    node = yaml.safe_load((ROOT / "workflow/schemas/papers/kato2024.schema.yaml").read_text())
    node = node["$defs"]["training_figure"]["properties"]["params"]["properties"]
    for key in keys:
        node = node[key]
    if "$ref" in node:
        prefix, _, name = node["$ref"].rpartition(":")
        assert prefix == "urn:dpfl:kato2024", node
        node = schema_fragments()[name]
    return ", ".join(node["enum"])


def test_the_allowed_values_are_the_registered_ones():
    from dpfl.papers.kato2024.allocation import RECORD_KINDS
    from dpfl.papers.kato2024.methods import BY_ID

    assert allowed("methods", "items").split(", ") == list(BY_ID)
    assert allowed("panels", "items", "properties", "distribution").split(", ") == list(RECORD_KINDS)


@pytest.mark.parametrize("figure, old, new, key", [
    ("fig6", "uldp_group_2,", "uldp_group_0,", "figures.fig6.params.methods[4]"),
    ("fig8", "methods: [uldp_avg, uldp_avg_w]", "methods: [uldp_avg, uldp_avgw]", "figures.fig8.params.methods[1]"),
])
def test_unknown_method_stops_naming_file_key_and_allowed(project, figure, old, new, key):
    edit_in_figure(project, figure, old, new)
    with pytest.raises(config.ConfigError) as err:
        config.load(project)
    msg = str(err.value)
    bad = new.split("[")[-1].split(", ")[-1].rstrip("],")
    assert PAPER_FILE in msg
    assert f"{key}: '{bad}' is not allowed" in msg
    assert f"allowed: {allowed('methods', 'items')}" in msg


@pytest.mark.parametrize("figure, bad, key, hint", [
    ("fig7", "zipff", "figures.fig7.params.panels[1].distribution", "zipf"),
    ("fig4", "zipf-nonid", "figures.fig4.params.panels[1].distribution", "zipf-noniid"),
])
def test_unknown_distribution_stops_naming_file_key_and_allowed(project, figure, bad, key, hint):
    edit_in_figure(project, figure, "distribution: zipf,", f"distribution: {bad},")
    with pytest.raises(config.ConfigError) as err:
        config.load(project)
    msg = str(err.value)
    assert PAPER_FILE in msg
    assert f"{key}: '{bad}' is not allowed (did you mean '{hint}'?)" in msg
    assert "allowed: uniform, zipf, zipf-iid, zipf-noniid" in msg
    assert f"allowed: {allowed('panels', 'items', 'properties', 'distribution')}" in msg


# --------------------------------------------------------------------------------------------------
# group size k < 1
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("k", [0, -3])
def test_group_size_below_one_is_refused_naming_what_is_allowed(k):
    counts = np.array([3, 1, 4])
    with pytest.raises(ValueError) as err:
        group_size(k, counts)
    msg = str(err.value)
    assert f"group size k = {k}" in msg and "allowed: 'max', 'median' or an integer ≥ 1" in msg
    assert "`methods:`" in msg and PAPER_FILE in msg
    with pytest.raises(ValueError) as err:
        bounding_flags(np.array([0, 1, 1]), np.array([0, 0, 1]), 2, k)
    msg = str(err.value)
    assert f"group size k must be ≥ 1, got {k}" in msg and "allowed: an integer ≥ 1" in msg and PAPER_FILE in msg


# --------------------------------------------------------------------------------------------------
# an allocation that cannot be built
# --------------------------------------------------------------------------------------------------


def flamby_params(**kw) -> dict:
    return {"dataset": "tcga_brca", "distribution": "zipf", "users": 500, "silos": 6, "seed": 0, "global_seed": 0,
            "user_alpha": 0.5, "main_ratio": 0.8, "min_records": 2, **kw}


def test_tcga_with_more_users_than_pairs_is_refused_with_the_limit(tcga_arrays):
    with pytest.raises(ValueError) as err:
        allocate_flamby("zipf", TCGA, 500, np.random.default_rng(0), min_records=2)
    msg = str(err.value)
    assert "n_users = 500 is more than the 866 records allow at ≥ 2 records in some silo each" in msg
    assert "at most 432 users" in msg
    # the per-instance builder names the dataset and the instance
    with pytest.raises(ValueError) as err:
        build_flamby(tcga_arrays(TCGA), flamby_params(), log=lambda m: None)
    msg = str(err.value)
    assert msg.startswith("tcga_brca allocation zipf-U500-S6-seed0 cannot be built from 866 training records")
    assert "at most 432 users" in msg


def test_flamby_silo_count_other_than_the_centres_is_refused(tcga_arrays):
    with pytest.raises(ValueError, match=r"tcga_brca allocation uniform-U50-S5-seed1: S = 5, but tcga_brca has 6 "
                                         r"FLamby silos \(its centres\): S must be 6"):
        build_flamby(tcga_arrays(TCGA), flamby_params(distribution="uniform", users=50, silos=5, seed=1), log=print)


def test_more_silos_than_records_is_refused_with_the_limit():
    with pytest.raises(ValueError, match=r"n_silos = 4 is larger than the 3 records: at most 3 silos"):
        allocate_records("uniform", [0, 1, 1], 2, 4, np.random.default_rng(0))
    # through the Creditcard builder: 40 rows, 10 frauds -> about 11 training records after the split and
    # undersampling (spec §1.1), far fewer than 50 silos
    rng = np.random.default_rng(1)
    arrays = {"X": rng.standard_normal((40, 30)), "y": (np.arange(40) % 4 == 0).astype(np.int64)}
    params = {"dataset": "creditcard", "distribution": "zipf", "users": 10, "silos": 50, "seed": 3, "global_seed": 0}
    with pytest.raises(ValueError) as err:
        build_records(arrays, params, log=lambda m: None)
    msg = str(err.value)
    assert msg.startswith("creditcard allocation zipf-U10-S50-seed3 cannot be built from ")
    assert "n_silos = 50 is larger than the" in msg and "silos (every silo needs ≥ 1 record)" in msg


def test_allocate_stage_stops_and_leaves_no_file(tmp_path, tcga_arrays):
    prepared = tmp_path / "prepared" / "tcga_brca.npz"
    save_prepared(prepared, tcga_arrays(TCGA), {"dataset": "tcga_brca"})
    name = "kato2024-tcga_brca/zipf-U500-S6-seed0"
    entry = {"dataset": "tcga_brca", "kind": "kato_flamby", "params": flamby_params(), "instance": "zipf-U500-S6-seed0"}
    out_dir = tmp_path / "allocations" / "tcga_brca" / "kato2024-tcga_brca"
    out, log = out_dir / "zipf-U500-S6-seed0.npz", tmp_path / "logs" / "allocate.log"
    with pytest.raises(SystemExit) as exc:
        run_allocate(name, entry, str(prepared), str(out), str(log))
    assert exc.value.code == 1
    text = log.read_text()
    assert f"allocation {name}: nothing written: tcga_brca allocation zipf-U500-S6-seed0 cannot be built" in text
    assert "tcga_brca allocation zipf-U500-S6-seed0" in text and "at most 432 users" in text
    assert PAPER_FILE in text and "`users`, `silos` and `distribution`" in text
    assert files_under(out_dir) == []  # no npz, no temporary


# --------------------------------------------------------------------------------------------------
# creditcard unreachable with data_source: real (the network is never touched)
# --------------------------------------------------------------------------------------------------


@pytest.fixture
def offline(monkeypatch, no_credentials):
    """Every URL fails as an unreachable host would; Kaggle has no credentials (and would fail if tried)."""
    tried = []

    def no_network(url, dest, label, log, **kwargs):
        tried.append(url)
        raise DataError(f"{label}: URLError: <urlopen error [Errno -3] Temporary failure in name resolution>")

    def no_kaggle(*args, **kwargs):
        raise AssertionError("Kaggle must not be tried without credentials")

    monkeypatch.setattr(fetchers, "_download", no_network)
    monkeypatch.setattr(fetchers, "_fetch_kaggle", no_kaggle)
    return tried


@pytest.fixture(scope="module")
def creditcard_entry():
    return config.load_datasets(ROOT)["creditcard"]


@pytest.mark.parametrize("with_mirror", [False, True])
def test_creditcard_unreachable_with_real_lists_every_source(tmp_path, offline, creditcard_entry, with_mirror):
    raw = tmp_path / "data" / "raw" / "creditcard"
    mirror = tmp_path / "mirror"
    if with_mirror:
        (mirror / "creditcard").mkdir(parents=True)  # the folder exists but holds no file
    log = tmp_path / "logs" / "download.log"
    job = {"entry": creditcard_entry, "data_source": "real", "mirror": str(mirror) if with_mirror else None}
    with pytest.raises(SystemExit) as exc:
        run_download("creditcard", job, str(raw / "SOURCE.json"), str(log))
    assert exc.value.code == 1
    text = log.read_text()
    assert "dataset 'creditcard': no real source worked (data_source: real); sources tried:" in text
    if with_mirror:
        assert f"- mirror {mirror}/creditcard: creditcard: creditcard.csv.gz: not in the mirror" in text
    else:
        assert "- mirror: no mirror configured (config/config.yaml data_mirror or $DPFL_DATA_MIRROR)" in text
    for url in CC_URLS:
        assert f"- url {url}: creditcard: creditcard.csv.gz: URLError" in text
    assert "- kaggle mlg-ulb/creditcardfraud: skipped: no Kaggle credentials" in text
    assert "config/config.yaml" in text and "allowed: auto, real, standin" in text
    assert offline == CC_URLS  # each official URL tried once, in order
    assert not raw.exists()  # nothing half-written


# --------------------------------------------------------------------------------------------------
# a creditcard file with the wrong row count or columns
# --------------------------------------------------------------------------------------------------


def write_gz(path: Path, table: pd.DataFrame) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wb") as fh:
        fh.write(table.to_csv(index=False).encode())
    return path


def test_creditcard_with_the_wrong_row_count_names_file_and_expected(tmp_path):
    write_gz(tmp_path / "creditcard.csv.gz", creditcard_table(20))
    with pytest.raises(DataError) as err:
        creditcard.load(tmp_path, expected={"rows": 25, "frauds": 4})
    assert str(err.value) == ("creditcard: creditcard.csv.gz: 20 rows with 4 frauds (Class = 1), expected 25 rows "
                              "with 4 frauds")
    arrays, info = creditcard.load(tmp_path, expected={"rows": 20, "frauds": 4})  # the right counts load
    assert info["counts"] == {"rows": 20, "frauds": 4} and arrays["X"].shape == (20, 30)


@pytest.mark.parametrize("change, detail", [
    (lambda t: t.drop(columns="Amount"), "missing: Amount"),
    (lambda t: t.rename(columns={"Amount": "Amt"}), "missing: Amount; unexpected: Amt"),
    (lambda t: t.assign(Extra=1.0), "unexpected: Extra"),
    (lambda t: t[["Class", *CC_COLUMNS[:-1]]], "the same names in another order"),
])
def test_creditcard_with_wrong_columns_names_file_expected_and_difference(tmp_path, change, detail):
    write_gz(tmp_path / "creditcard.csv.gz", change(creditcard_table(20)))
    with pytest.raises(DataError) as err:
        creditcard.load(tmp_path, expected={"rows": 20, "frauds": 4})
    msg = str(err.value)
    assert msg.startswith("creditcard: creditcard.csv.gz: columns ")
    assert "expected Time, V1..V28, Amount, Class (31) in this order; " + detail in msg


def test_wrong_creditcard_file_in_the_mirror_is_refused_at_download(tmp_path, offline, creditcard_entry):
    mirror = tmp_path / "mirror"
    write_gz(mirror / "creditcard" / "creditcard.csv.gz", creditcard_table(20))
    raw = tmp_path / "data" / "raw" / "creditcard"
    with pytest.raises(DataError) as err:
        sources.acquire("creditcard", creditcard_entry, raw, "real", str(mirror))
    msg = str(err.value)
    assert (f"- mirror {mirror}/creditcard: creditcard: creditcard.csv.gz: 20 rows with 4 frauds (Class = 1), "
            f"expected 284807 rows with 492 frauds and Class in {{0, 1}} (from mirror {mirror}/creditcard/"
            f"creditcard.csv.gz)") in msg
    assert not raw.exists()


def test_prepare_stage_stops_on_a_wrong_creditcard_file_and_writes_nothing(tmp_path):
    raw = tmp_path / "raw" / "creditcard"
    path = write_gz(raw / "creditcard.csv.gz", creditcard_table(20))
    record = {"dataset": "creditcard", "source": "mirror", "standin": False, "location": "/somewhere/creditcard",
              "retrieved_at": "2024-01-01T00:00:00Z", "generator": None, "fallback_reasons": [], "archives": [],
              "files": [{"name": path.name, "sha256": sha256_file(path), "bytes": path.stat().st_size}]}
    (raw / "SOURCE.json").write_text(json.dumps(record))
    npz, log = tmp_path / "prepared" / "creditcard.npz", tmp_path / "logs" / "prepare.log"
    with pytest.raises(SystemExit) as exc:
        run_prepare("creditcard", str(raw / "SOURCE.json"), str(npz), str(log))
    assert exc.value.code == 1
    assert ("creditcard: creditcard.csv.gz: 20 rows with 4 frauds (Class = 1), expected 284807 rows with 492 frauds"
            in log.read_text())
    assert files_under(npz.parent) == []


# --------------------------------------------------------------------------------------------------
# device: cuda with no GPU
# --------------------------------------------------------------------------------------------------


def test_cuda_without_a_gpu_names_the_key_and_the_allowed_values(monkeypatch):
    import torch

    from dpfl.fl.device import DeviceError, resolve_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(DeviceError) as err:
        resolve_device("cuda")
    msg = str(err.value)
    assert "device: cuda" in msg and "no CUDA GPU" in msg
    assert "auto" in msg and "cpu" in msg
    assert resolve_device("auto").type == "cpu" and resolve_device("cpu").type == "cpu"  # the allowed fallbacks
    with pytest.raises(DeviceError) as err:
        resolve_device("tpu")
    msg = str(err.value)
    assert "unknown device 'tpu'" in msg and all(name in msg for name in ("auto", "cpu", "cuda"))


@pytest.mark.pipeline
def test_cuda_without_a_gpu_stops_the_workflow_before_any_job(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    project = copy_project(tmp_path / "project")
    proc = snakemake(project, "-n", "--cores", "1", "--config", "device=cuda")
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert "dpfl configuration error:" in out and "device: cuda was requested but torch sees no CUDA GPU" in out, out
    assert not (project / "results").exists() and not (project / "data").exists()
