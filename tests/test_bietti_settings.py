"""bietti2022's cell settings (dpfl.papers.bietti2022.settings): a cell's params are read once, at the start of
run_cell, into frozen typed settings; every key is checked there (the implementation keys B1-B5 with the messages
the config's users see), values convert as the cell always used them, and every cell of every figure, variant and
ablation of the shipped configuration at paper scale reads."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest

from dpfl import paths
from dpfl.config import load
from dpfl.jobs import build_cell_job, cell_ids
from dpfl.papers.bietti2022 import PAPER as BIETTI
from dpfl.papers.bietti2022.ppsgd import Synthetic
from dpfl.papers.bietti2022.settings import FederatedSettings, GridSettings, Implementation
from dpfl.papers.bietti2022.tasks import Setup

ROOT = Path(__file__).resolve().parent.parent

PAPER = {"sampling": "poisson", "cnn_local_step": "eta_theta", "excess_risk": "coordinate_sum",
         "end_point": "last_round", "rng": "per_seed"}
CODE = {"sampling": "shuffle", "cnn_local_step": "times_users", "excess_risk": "coordinate_mean",
        "end_point": "last_multiple", "rng": "per_run"}

#: a federated cell's params as dpfl.papers.bietti2022.layout.GridLayout.cell_params gives them
FEDERATED = {"delta": 1e-4, "seeds": [0, 3], "dtype": "float32", "implementation": PAPER, "task": "emnist",
             "users": 20, "users_per_round": 4, "batch": 10, "epochs": 2, "rounds": None, "eval_every": 5, "clip": 10,
             "etas": [1.0e-3, 1], "model": "linear", "max_memory_mib": 4096,
             "synthetic": {"n_users": 1000, "dim": 100, "personal": 5}, "grid": "emn", "levels": [0.1, "inf"],
             "sigmas": [3.0]}
SYNTHETIC = {"delta": 1e-4, "seeds": [0], "dtype": "float64", "implementation": CODE, "task": "synthetic",
             "synthetic": {"n_users": 9, "dim": 5, "personal": 2}, "rounds": 6, "clip": 1.0, "etas": [0.1],
             "model": "linear", "max_memory_mib": 512, "grid": "syn", "levels": [0], "sigmas": []}


def test_implementation_keys_are_checked_with_the_keys_named():
    assert Implementation.from_params({"implementation": CODE}) == Implementation(**CODE)
    expected = r"expected exactly \['sampling', 'cnn_local_step', 'excess_risk', 'end_point', 'rng'\]"
    with pytest.raises(ValueError, match=r"^bietti2022: params\.implementation: unknown key\(s\) \['noise'\], "
                                         r"missing key\(s\) \[\]; " + expected):
        Implementation.from_params({"implementation": {**PAPER, "noise": "unseeded"}})
    with pytest.raises(ValueError, match=r"unknown key\(s\) \[\], missing key\(s\) \['cnn_local_step', 'end_point', "
                                         r"'excess_risk', 'rng'\]; " + expected):
        Implementation.from_params({"implementation": {"sampling": "shuffle"}})
    with pytest.raises(ValueError, match=r"params\.implementation\.sampling: 'fixed'; allowed: poisson, shuffle"):
        Implementation.from_params({"implementation": {**PAPER, "sampling": "fixed"}})
    # the cell's boundary reports the same
    with pytest.raises(ValueError, match=r"missing key\(s\) \['rng'\]"):
        GridSettings.from_params({**FEDERATED, "implementation": {k: v for k, v in PAPER.items() if k != "rng"}})


def test_values_convert_as_the_cell_reads_them():
    s = GridSettings.from_params(FEDERATED)
    assert (s.grid, s.task, s.model, s.dtype) == ("emn", "emnist", "linear", "float32")
    assert s.etas == (1.0e-3, 1.0) and all(type(e) is float for e in s.etas)
    assert s.levels == (0.1, math.inf) and s.seeds == (0, 3) and all(type(x) is int for x in s.seeds)
    assert type(s.clip) is float and s.clip == 10.0 and s.delta == 1e-4 and s.max_memory_mib == 4096.0
    assert s.rounds is None and s.synthetic is None and s.implementation == Implementation(**PAPER)
    assert s.federated == FederatedSettings(users=20, users_per_round=4, batch=10, epochs=2.0, eval_every=5)
    assert type(s.federated.epochs) is float
    # `rounds`: set when given and not null or 0 (a federated task's T then comes from the data's passes)
    assert GridSettings.from_params({**FEDERATED, "rounds": 7}).rounds == 7
    assert GridSettings.from_params({k: v for k, v in FEDERATED.items() if k != "rounds"}).rounds is None
    syn = GridSettings.from_params(SYNTHETIC)
    assert syn.synthetic == Synthetic(n_users=9, dim=5, personal=2) and syn.federated is None
    assert syn.rounds == 6 and syn.levels == (0.0,) and syn.implementation == Implementation(**CODE)


def test_settings_are_frozen():
    s = GridSettings.from_params(SYNTHETIC)
    for obj, field in ((s, "rounds"), (s.implementation, "rng"), (s.synthetic, "dim"),
                       (GridSettings.from_params(FEDERATED).federated, "users")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(obj, field, 1)


DROP = object()  # a change that removes the key


@pytest.mark.parametrize(("change", "message"), [
    ({"noise": 1}, r"unknown key\(s\) \['noise'\], missing key\(s\) \[\]"),
    ({"users": DROP}, r"unknown key\(s\) \[\], missing key\(s\) \['users'\]"),
    ({"dtype": "float16"}, r"bietti2022 grid emn: dtype 'float16'; allowed: float32, float64"),
    ({"model": "mlp"}, r"bietti2022 grid emn: model 'mlp'; allowed: linear, cnn"),
    ({"task": "synthetic", "rounds": DROP}, r"missing key\(s\) \['rounds'\]"),
    ({"task": "synthetic", "rounds": None}, r"the synthetic task needs rounds ≥ 1, got None"),
    ({"task": "synthetic", "rounds": 3, "synthetic": {"dim": 2}}, r"personal = 5 coordinates must lie between 0"),
    ({"levels": [-1]}, r"personalization level -1"),
])
def test_bad_params_stop_the_cell_at_its_boundary(change, message):
    params = {k: v for k, v in {**FEDERATED, **change}.items() if v is not DROP}
    with pytest.raises(ValueError, match=message):
        GridSettings.from_params(params)


def test_the_task_checks_come_before_any_data_is_read():
    """An unknown task and a CNN on a task without images stop the cell before the prepared data is opened (no
    inputs here)."""
    log = lambda m: None  # noqa: E731
    with pytest.raises(ValueError, match=r"bietti2022 grid emn: model cnn needs an image task \(emnist\)"):
        Setup(GridSettings.from_params({**FEDERATED, "task": "stackoverflow", "model": "cnn"}), {}, None, "cpu", log)
    with pytest.raises(ValueError, match=r"bietti2022: unknown task 'mnist'; known: synthetic, emnist, stackoverflow"):
        Setup(GridSettings.from_params({**FEDERATED, "task": "mnist"}), {}, None, "cpu", log)


def test_every_cell_of_the_shipped_configuration_reads_at_paper_scale():
    """Every cell of every bietti2022 figure in every mode it builds in (the paper's, the authors' code, each
    ablation) at paper scale: the settings read, and hold what the params say."""
    cfg = load(ROOT, {"scale": "paper"})
    seen = set()
    for figure in BIETTI.figures:
        modes = ["none", "authors-code", *(paths.ablation_mode(n) for n in cfg.ablations("bietti2022", figure))]
        for mode in modes:
            for cell in cell_ids(cfg, "bietti2022", figure, mode):
                params = build_cell_job(cfg, "bietti2022", figure, cell, mode).params
                s = GridSettings.from_params(params)
                assert s.grid == params["grid"] and s.task == params["task"] and s.model == params["model"]
                assert list(s.etas) == [float(e) for e in params["etas"]] and len(s.levels) == len(params["levels"])
                # the ablations here are evidence variants: the paper's algorithm with one setting changed
                assert s.implementation == Implementation(**(CODE if mode == "authors-code" else PAPER))
                if s.task == "synthetic":
                    assert s.synthetic == Synthetic(**params["synthetic"]) and s.rounds == params["rounds"]
                else:
                    assert s.federated.users == params["users"] and s.rounds is None  # T from the passes
                seen.add((figure, mode, s.task, s.model))
    assert {(f, t, m) for f, _, t, m in seen} >= {
        ("fig1a", "synthetic", "linear"), ("fig1b", "stackoverflow", "linear"), ("fig1c", "emnist", "linear"),
        ("fig1d", "emnist", "cnn"), ("fig2", "stackoverflow", "linear"), ("fig2", "emnist", "cnn")}
    assert {mode for _, mode, _, _ in seen} >= {"none", "authors-code", "ablation-d20", "ablation-d20_lw01"}
