"""lowy2023's cell settings (dpfl.papers.lowy2023.settings): a panel cell's params are read once, at the start of
run_cell, into frozen typed settings; every key is checked there with a message naming it, values convert as the
cell always used them (the same numbers: the step grids to the bit), and every cell and run of every figure, variant
and ablation of the shipped configuration reads, at smoke and at paper scale."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from dpfl import paths
from dpfl.config import load
from dpfl.jobs import build_cell_job, cell_ids
from dpfl.papers.lowy2023 import PAPER as LOWY
from dpfl.papers.lowy2023.cell import EXPERIMENTS as CELL_EXPERIMENTS
from dpfl.papers.lowy2023.layout import LowyLayout, run_id
from dpfl.papers.lowy2023.methods import METHODS
from dpfl.papers.lowy2023.settings import (EXPERIMENTS, PRIVATE, UPDATES, Divergence, Implementation, LogGrid, Panel,
                                           PanelSettings, StepGrids)

ROOT = Path(__file__).resolve().parent.parent

CODE = {"server": "sum", "batch_sampling": "with_replacement", "mb_clip": "batch_mean", "mb_message": "batch_sum",
        "noise_at": "server", "mnist_silos": "bootstrap_fixed_split", "class_silo_sampling": "with_replacement",
        "lipschitz": 20, "clip_at_lipschitz": False, "upsilon_bootstrap": True, "local_noise_n": "share",
        "clamp_error_bars": True}
GRID = {"start": -6, "stop": 0, "num": 4}
#: a panel cell's params as LowyLayout.cell_params gives them (the config loader's defaults filled in)
PARAMS = {"experiment": "insurance", "panels": [{"id": "b", "n_silos": 5, "silos_per_round": 3}], "trials": 2,
          "reps": 3, "rounds": 10, "epsilons": [0.125, 1, 3],
          "methods": ["noisy_mb_sgd", "noisy_local_sgd", "mb_sgd", "local_sgd"],
          "step_grids": {"minibatch": GRID, "local": {"start": -10, "stop": 0, "num": 2},
                         "noisy_local_sgd": {"start": -12, "stop": -2, "num": 8, "first": 5}},
          "mb_step_scale": "silos_per_round", "clips": [100.0, 1e4], "average_last": 8,
          "divergence": {"threshold": 100, "penalty": 5e9}, "score": "excess_loss", "error_bars": True,
          "implementation": dataclasses.asdict(Implementation.paper())}
SETTINGS = {"noise_calibration": "paper"}


def test_the_method_and_experiment_tables_are_the_registry_and_the_cell_s():
    assert UPDATES == {m.id: m.update for m in METHODS} and PRIVATE == {m.id for m in METHODS if m.private}
    assert EXPERIMENTS == tuple(CELL_EXPERIMENTS)
    assert set(UPDATES) | set(UPDATES.values()) == {f.name for f in dataclasses.fields(StepGrids)}


def test_implementation_keys_and_values_are_checked_with_the_key_named():
    assert Implementation.from_params({"implementation": CODE}) == Implementation(**{**CODE, "lipschitz": 20.0})
    paper = dataclasses.asdict(Implementation.paper())
    # the paper's values are the schema's defaults: those of a figure that sets none
    assert paper == load(ROOT, {"scale": "smoke"}).figure_params("lowy2023", "fig7", "none")["implementation"]
    with pytest.raises(ValueError, match=r"^lowy2023: params\.implementation: unknown key\(s\) \['noise'\], missing "
                                         r"key\(s\) \[\]; expected \['server', 'batch_sampling', "):
        Implementation.from_params({"implementation": {**paper, "noise": "x"}})
    with pytest.raises(ValueError, match=r"unknown key\(s\) \[\], missing key\(s\) \['mb_clip', 'clamp_error_bars'\]"):
        Implementation.from_params({"implementation": {k: v for k, v in paper.items()
                                                       if k not in ("mb_clip", "clamp_error_bars")}})
    for key, bad, allowed in (("server", "median", "mean, sum"), ("noise_at", "client", "silo, server"),
                              ("clip_at_lipschitz", "yes", "True, False"), ("upsilon_bootstrap", 1, "False, True"),
                              ("lipschitz", "data_silo2", "data, data_silo1 or a number > 0"),
                              ("lipschitz", True, "data, data_silo1 or a number > 0"),
                              ("lipschitz", -2, "data, data_silo1 or a number > 0")):
        where = rf"^lowy2023: params\.implementation\.{key}: "
        with pytest.raises(ValueError, match=rf"{where}{bad!r}; allowed: {allowed}$"):
            Implementation.from_params({"implementation": {**paper, key: bad}})


def test_values_convert_as_the_cell_reads_them():
    s = PanelSettings.from_params(PARAMS, SETTINGS, "b")
    assert s.panel == Panel(id="b", n_silos=5, silos_per_round=3) and s.experiment == "insurance"
    assert s.methods == ("noisy_mb_sgd", "noisy_local_sgd", "mb_sgd", "local_sgd")
    assert (s.trials, s.reps, s.rounds, s.average_last) == (2, 3, 10, 8)
    assert s.epsilons == (0.125, 1.0, 3.0) and all(type(e) is float for e in s.epsilons)
    assert s.clips == (100.0, 1e4) and s.divergence == Divergence(threshold=100.0, penalty=5e9)
    assert type(s.divergence.threshold) is float and s.noise_calibration == "paper" and s.error_bars is True
    assert (s.score, s.mb_step_scale, s.implementation) == ("excess_loss", "silos_per_round", Implementation.paper())
    assert s.step_grids.of("mb_sgd") == s.step_grids.of("noisy_mb_sgd") == LogGrid(-6.0, 0.0, 4)
    assert s.step_grids.of("noisy_local_sgd") == LogGrid(-12.0, -2.0, 8, 5) and s.step_grids.of("local_sgd").num == 2
    # the cell's float arrays of the lists, to the bit
    assert np.array_equal(np.asarray(s.epsilons, float), np.asarray(PARAMS["epsilons"], float))
    assert np.asarray(s.clips, float).tobytes() == np.asarray(PARAMS["clips"], float).tobytes()
    # `clips`, `mb_step_scale`: None where absent, null (or, clips, empty); noise_calibration: None without settings
    bare = {k: v for k, v in PARAMS.items() if k not in ("clips", "mb_step_scale")}
    s = PanelSettings.from_params({**bare, "methods": ["mb_sgd"]}, {}, "b")
    assert s.clips is None and s.mb_step_scale is None and s.noise_calibration is None
    assert PanelSettings.from_params({**PARAMS, "clips": []}, SETTINGS, "b").clips is None


def test_settings_are_frozen():
    s = PanelSettings.from_params(PARAMS, SETTINGS, "b")
    for obj, field in ((s, "rounds"), (s.panel, "n_silos"), (s.implementation, "server"), (s.divergence, "penalty"),
                       (s.step_grids, "local"), (s.step_grids.of("local_sgd"), "num")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(obj, field, 1)


DROP = object()  # a change that removes the key


@pytest.mark.parametrize(("change", "settings", "message"), [
    ({"noise": 1}, SETTINGS, r"cell params: unknown key\(s\) \['noise'\], missing key\(s\) \[\]"),
    ({"methods": DROP}, SETTINGS, r"cell params: unknown key\(s\) \[\], missing key\(s\) \['methods'\]"),
    ({}, {"noise_calibration": "paper", "compat": "none"}, r"cell settings: unknown key\(s\) \['compat'\]"),
    ({}, {}, r"settings\.noise_calibration: None; allowed: paper, accountant"),
    ({}, {"noise_calibration": "exact"}, r"settings\.noise_calibration: 'exact'; allowed: paper, accountant"),
    ({"experiment": "adult"}, SETTINGS, r"params\.experiment: 'adult'; allowed: mnist, insurance, obesity"),
    ({"score": "test"}, SETTINGS, r"params\.score: 'test'; allowed: excess_loss, loss"),
    ({"mb_step_scale": "rounds"}, SETTINGS, r"params\.mb_step_scale: 'rounds'; allowed: silos_per_round, local, None"),
    ({"error_bars": "yes"}, SETTINGS, r"params\.error_bars: 'yes'; allowed: True, False"),
    ({"panels": [{"id": "a", "n_silos": 5, "silos_per_round": 3}]}, SETTINGS,
     r"params\.panels has no panel 'b' \(the cell's\); panels: a"),
    ({"panels": [{"id": "b", "n_silos": 5}]}, SETTINGS,
     r"params\.panels\[b\]: .*missing key\(s\) \['silos_per_round'\]"),
    ({"methods": ["fedavg"]}, SETTINGS, r"params\.methods: 'fedavg'; allowed: noisy_mb_sgd, noisy_local_sgd, mb_sgd"),
    ({"methods": ["local_sgd"], "step_grids": {"minibatch": GRID}}, SETTINGS,
     r"params\.step_grids: method local_sgd has no grid; expected local_sgd or local"),
    ({"step_grids": {"minibatch": GRID, "local": GRID, "sgd": GRID}}, SETTINGS,
     r"params\.step_grids: unknown key\(s\) \['sgd'\]"),
    ({"step_grids": {"minibatch": GRID, "local": {"start": 0, "stop": 1}}}, SETTINGS,
     r"params\.step_grids\.local: unknown key\(s\) \[\], missing key\(s\) \['num'\]"),
    ({"divergence": {"threshold": None}}, SETTINGS, r"params\.divergence: .*missing key\(s\) \['penalty'\]"),
    ({"implementation": {**CODE, "mb_clip": "none"}}, SETTINGS, r"params\.implementation\.mb_clip: 'none'"),
])
def test_bad_params_stop_the_cell_at_its_boundary(change, settings, message):
    params = {k: v for k, v in {**PARAMS, **change}.items() if v is not DROP}
    with pytest.raises(ValueError, match=message):
        PanelSettings.from_params(params, settings, "b")


def test_log_grids_are_the_cell_s_to_the_bit():
    """A grid's points are exp(linspace(start, stop, num))[:first] of the YAML's numbers as they were (ints), for
    every grid the shipped configuration has at any scale."""
    seen = 0
    for scale in ("smoke", "quick", "paper"):
        cfg = load(ROOT, {"scale": scale})
        for figure in LOWY.figures:
            for mode in ("none", "authors-code"):
                for name, g in cfg.figure_params("lowy2023", figure, mode)["step_grids"].items():
                    old = np.exp(np.linspace(g["start"], g["stop"], g["num"]))[: g.get("first")]
                    new = getattr(StepGrids.from_params({name: g}), name).points()
                    assert old.tobytes() == new.tobytes()
                    seen += 1
    assert seen >= 3 * 6 * 2 * 2


@pytest.mark.parametrize("scale", ["smoke", "paper"])
def test_every_cell_and_run_of_the_shipped_configuration_reads(scale):
    """Every panel cell of every lowy2023 figure in every mode it builds in (the paper's, the authors' code, each
    ablation), and each of its runs' own params: the settings read, and hold what the params say."""
    cfg = load(ROOT, {"scale": scale})
    layout, seen = LowyLayout(), set()
    for figure in LOWY.figures:
        for mode in ["none", "authors-code", *(paths.ablation_mode(n) for n in cfg.ablations("lowy2023", figure))]:
            for cell in cell_ids(cfg, "lowy2023", figure, mode):
                job = build_cell_job(cfg, "lowy2023", figure, cell, mode)
                s = PanelSettings.from_params(job.params, job.settings, cell)
                params = job.params
                assert s.panel.id == cell and s.experiment == params["experiment"] and s.trials == params["trials"]
                assert list(s.methods) == params["methods"] and list(s.epsilons) == params["epsilons"]
                assert dataclasses.asdict(s.implementation) == params["implementation"]
                if mode == "none":  # the paper's algorithm: the schema's defaults
                    assert s.implementation == Implementation.paper()
                assert s.noise_calibration == job.settings["noise_calibration"]
                for method in s.methods:
                    own = PanelSettings.from_params(
                        *layout.runs_params(job.params, job.settings, cell, [run_id(cell, method)]), cell)
                    assert own.methods == (method,) and own.step_grids.of(method) == s.step_grids.of(method)
                    assert own.epsilons == (s.epsilons if method in PRIVATE else (max(s.epsilons),))
                    assert own.noise_calibration == (s.noise_calibration if method in PRIVATE else None)
                seen.add((figure, mode, s.experiment))
    assert {e for *_, e in seen} == set(EXPERIMENTS) and {f for f, *_ in seen} == set(LOWY.figures)
    assert {m for _, m, _ in seen} >= {"none", "authors-code", "ablation-q2", "ablation-q9"}
