"""The dataset catalog (config/datasets.yaml) and the data keys of config/config.yaml: validated with readable
errors (file, key, allowed values), per-dataset data_source overrides, mirror resolution."""

from __future__ import annotations

from pathlib import Path

import pytest

from dpfl import config

ROOT = Path(__file__).resolve().parent.parent
DATASETS = {"mnist", "insurance", "obesity", "creditcard", "heart_disease", "tcga_brca", "emnist", "emnist_full",
            "stackoverflow"}


def test_catalog_lists_every_dataset_with_sources():
    cat = config.load_datasets(ROOT)
    assert set(cat) == DATASETS
    for name, entry in cat.items():
        assert entry["description"] and entry["license"] and entry["mirror"], name
        for f in entry["files"]:
            assert f["urls"], (name, f["name"])
            assert f["sha256"] or f["check"], (name, f["name"])
    assert cat["creditcard"]["files"][0]["sha256"] is None and cat["creditcard"]["files"][0]["check"] == "creditcard"
    assert cat["insurance"]["kaggle"] == "mirichoi0218/insurance"
    assert cat["creditcard"]["kaggle"] == "mlg-ulb/creditcardfraud"
    assert {n for n, e in cat.items() if e["standin"]} == {"mnist", "insurance", "obesity", "creditcard",
                                                           "stackoverflow", "emnist"}
    assert cat["emnist"]["files"][0]["name"] == "fed_emnist_digitsonly.tar.bz2"
    assert [f["name"] for f in cat["stackoverflow"]["files"]] == [
        "stackoverflow.tar.bz2", "stackoverflow.word_count.tar.bz2", "stackoverflow.tag_count.tar.bz2"]


def test_catalog_errors_name_file_key_and_allowed(project):
    path = project / "config" / "datasets.yaml"
    text = path.read_text()
    path.write_text(text.replace("    kaggle: mirichoi0218/insurance", "    kagle: mirichoi0218/insurance", 1)
                    .replace("        check: creditcard", "        check: credit", 1))
    with pytest.raises(config.ConfigError) as err:
        config.load(project)
    msg = str(err.value)
    assert "config/datasets.yaml" in msg
    assert "datasets.insurance: unknown key 'kagle' (did you mean 'kaggle'?); allowed keys:" in msg
    assert "datasets.creditcard.files[0].check: 'credit' is not allowed (did you mean 'creditcard'?)" in msg


def test_file_without_checksum_needs_a_content_check(project):
    path = project / "config" / "datasets.yaml"
    path.write_text(path.read_text().replace(
        "        sha256: 388eff679557d08ac19f463d025de5e0b4adc482537c8456d19934d78621fd47\n", "", 1))
    with pytest.raises(config.ConfigError, match=r"datasets.insurance.files\[0\]: 'check' is a required property"):
        config.load_datasets(project)


def test_dataset_source_override(project):
    cfg = config.load(project, {"data_source": "real", "dataset_source": {"mnist": "standin"}})
    assert cfg.data_source("mnist") == "standin" and cfg.data_source("insurance") == "real"
    assert set(cfg.datasets) == DATASETS
    with pytest.raises(config.ConfigError, match="unknown dataset 'mnits'; allowed: creditcard"):
        cfg.data_source("mnits")


def test_dataset_source_errors(project):
    with pytest.raises(config.ConfigError) as err:
        config.load(project, {"dataset_source": {"mnsit": "standin"}})
    assert "dataset_source: unknown dataset 'mnsit' (did you mean 'mnist'?); allowed: creditcard" in str(err.value)
    with pytest.raises(config.ConfigError) as err:
        config.load(project, {"dataset_source": {"mnist": "rael"}})
    assert ("dataset_source.mnist: 'rael' is not allowed (did you mean 'real'?); allowed: auto, real, standin"
            in str(err.value))


def test_data_mirror_resolution(make_project, monkeypatch, tmp_path):
    project = make_project(into="project")
    somewhere, shared = tmp_path / "somewhere" / "datasets", tmp_path / "shared" / "datasets"
    somewhere.mkdir(parents=True)
    shared.mkdir(parents=True)
    monkeypatch.delenv("DPFL_DATA_MIRROR", raising=False)
    assert config.load(project).data_mirror() is None
    monkeypatch.setenv("DPFL_DATA_MIRROR", str(somewhere))
    assert config.load(project).data_mirror() == str(somewhere)
    cfg = config.load(project, {"data_mirror": "../shared/datasets"})  # config wins; relative to the project
    assert cfg.data_mirror() == str(shared)


def test_a_mirror_path_that_does_not_exist_stops_before_any_job(make_project, monkeypatch, tmp_path):
    """A mistyped mirror must not fall back to the stand-ins silently (data_source auto): whatever the data source,
    loading stops, naming the path, where it was set and how to fix it."""
    project = make_project(into="project")
    typo = tmp_path / "shared" / "datsets"
    monkeypatch.setenv("DPFL_DATA_MIRROR", str(typo))
    with pytest.raises(config.ConfigError) as err:
        config.load(project, {"data_source": "auto"})
    assert str(err.value) == (
        f"the data mirror {typo} does not exist (from the environment variable DPFL_DATA_MIRROR): point "
        "DPFL_DATA_MIRROR at the folder that holds the offline dataset copies, as <mirror>/<dataset>/<file> "
        "(docs/data.md), or unset it to run without a mirror")
    with pytest.raises(config.ConfigError, match=r"^the data mirror datsets \(that is .*/project/datsets\) does not "
                                                 r"exist \(from --config data_mirror=datsets\): give data_mirror the "
                                                 r"folder that holds the offline dataset copies"):
        config.load(project, {"data_source": "real", "data_mirror": "datsets"})  # the setting wins over the variable
    monkeypatch.delenv("DPFL_DATA_MIRROR")
    path = project / "config" / "config.yaml"
    path.write_text(path.read_text().replace("data_mirror: null", "data_mirror: README"))
    (project / "README").write_text("not a folder\n")
    with pytest.raises(config.ConfigError, match=r"^the data mirror README \(that is .*/project/README\) is not a "
                                                 r"folder \(from data_mirror in config/config\.yaml\): set "
                                                 r"data_mirror to the folder .*, or to null; a relative path is "
                                                 r"relative to the project$"):
        config.load(project, {"data_source": "standin"})


def test_data_mirror_resolves_symlinks(project, monkeypatch, tmp_path):
    """A mirror named through a symlink is the folder it points to (one folder, one mirror)."""
    real = tmp_path / "shared" / "datasets"
    real.mkdir(parents=True)
    (tmp_path / "link").symlink_to(real)
    monkeypatch.setenv("DPFL_DATA_MIRROR", str(tmp_path / "link"))
    assert config.load(project).data_mirror() == str(real.resolve())
    monkeypatch.delenv("DPFL_DATA_MIRROR")
    (project / "mirror-link").symlink_to(real)
    assert config.load(project, {"data_mirror": "mirror-link"}).data_mirror() == str(real.resolve())


def test_dataset_files_names_a_folder_of_your_own(make_project, monkeypatch, tmp_path):
    """dataset_files: resolved like the mirror (relative to the project, ~ expanded, symlinks resolved), unused with
    the stand-in; a folder that does not exist, or an unknown dataset, stops loading with the fix."""
    project = make_project(into="project")
    monkeypatch.delenv("DPFL_DATA_MIRROR", raising=False)
    own = tmp_path / "home" / ".keras" / "datasets"
    own.mkdir(parents=True)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    cfg = config.load(project, {"dataset_files": {"emnist": "~/.keras/datasets"}})
    assert cfg.dataset_folder("emnist") == str(own) and cfg.dataset_folder("mnist") is None
    cfg = config.load(project, {"dataset_files": {"emnist": "../home/.keras/datasets", "mnist": str(own)},
                                "dataset_source": {"mnist": "standin"}})
    assert cfg.dataset_folder("emnist") == str(own) and cfg.dataset_folder("mnist") is None  # not with the stand-in
    with pytest.raises(config.ConfigError) as err:
        config.load(project, {"dataset_files": {"emnist": "~/.kears/datasets"}})
    assert str(err.value) == (
        f"the folder of emnist's files ~/.kears/datasets (that is {tmp_path}/home/.kears/datasets) does not exist "
        "(from --config dataset_files): name the folder that holds the dataset's files (docs/data.md, \"Your own "
        "copy\"), or remove emnist from dataset_files; a relative path is relative to the project")
    with pytest.raises(config.ConfigError, match=r"dataset_files: unknown dataset 'emnsit' \(did you mean 'emnist'"):
        config.load(project, {"dataset_files": {"emnsit": str(own)}})
