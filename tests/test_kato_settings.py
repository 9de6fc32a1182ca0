"""kato2024's cell settings (dpfl.papers.kato2024.training.settings, dpfl.papers.kato2024.records.settings and the
panel, dpfl.papers.kato2024.panels.Panel): a training or Fig 13 cell's params are read once, at the start of its
run_cell, into frozen typed settings; every key is checked there, with messages naming the key and what it allows;
values convert as the cells always read them (so the runs' random streams and numbers stay the same); and every cell
of every training figure and of Fig 13, in every mode it builds in, at every scale of the shipped configuration,
reads."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from dpfl import paths
from dpfl.config import load
from dpfl.jobs import build_cell_job, cell_ids
from dpfl.papers import FIGURES
from dpfl.papers.kato2024.methods import BY_ID, HyperError, LocalHyper, PrivateLocalHyper, SgdHyper
from dpfl.papers.kato2024.panels import Panel, panel_of, seed_allocation
from dpfl.papers.kato2024.records.layout import RecordsLayout
from dpfl.papers.kato2024.records.settings import RecordsSettings
from dpfl.papers.kato2024.training.layout import TrainingLayout, method_cells, run_id
from dpfl.papers.kato2024.training.settings import Implementation, RunSettings, TrainingSettings

ROOT = Path(__file__).resolve().parent.parent
TRAINING = ("fig4", "fig5", "fig6", "fig7", "fig8", "fig9", "fig10a", "fig10b")
LAYOUT, RECORDS = TrainingLayout(), RecordsLayout()

PAPER = {"sgd_gradient": "mean", "test_loss": "mean", "group_orders": "mironov", "group_conversion": "rdp",
         "group_parallel": "rdp"}
CODE = {"sgd_gradient": "authors", "test_loss": "batch_sum", "group_orders": "authors", "group_conversion": "normal",
        "group_parallel": "epsilon"}
#: the one-switch ablations of the training figures (config/papers/kato2024.yaml `ablations:`)
ABLATIONS = {"ablation-k1": {**PAPER, "sgd_gradient": "authors"}, "ablation-k2": {**PAPER, "test_loss": "batch_sum"}}

#: a figure's params as the config loader gives them (every default filled in), two panels
FIGURE = {"dataset": "creditcard", "allocation": "creditcard",
          "panels": [{"id": "a", "users": 100, "distribution": "uniform", "silos": 5},
                     {"id": "b", "users": 1000, "distribution": "zipf", "silos": 5,
                      "hyper": {"avg": {"eta_g": 100.0}}}],
          "methods": ["default", "uldp_group_median", "uldp_sgd", "uldp_avg", "uldp_avg_ws"],
          "sampling_rates": [0.1, 1], "seeds": [0, 3], "rounds": 4, "batch": 64, "sigma": 5, "delta": 1e-5,
          "eval_batch": 512, "train_subsample": 1, "pair_chunk": None, "reuse_cells": {},
          "hyper": {"fedavg": {"eta_g": 1, "eta_l": 0.01, "epochs": 2},
                    "group": {"eta_g": 1.0, "clip": 0.1, "eta_l": 0.01, "epochs": 1},
                    "sgd": {"eta_g": 10.0, "clip": 0.1},
                    "avg": {"eta_g": 10.0, "clip": 0.1, "eta_l": 0.01, "epochs": 3},
                    "naive": {"eta_g": 1.0, "clip": 0.1, "eta_l": 0.01, "epochs": 1}},
          "implementation": PAPER}


def cell(panel: str = "b", figure: dict = FIGURE) -> dict:
    """Panel cell `panel`'s params, as the layout makes them at the Snakemake boundary."""
    return LAYOUT.cell_params(figure, {}, panel)[0]


def test_implementation_keys_are_checked_with_the_keys_named():
    assert Implementation.from_params({"implementation": CODE}) == Implementation(**CODE)
    expected = r"expected exactly \['sgd_gradient', 'test_loss', 'group_orders', 'group_conversion', 'group_parallel'\]"
    with pytest.raises(ValueError, match=r"^kato2024: params\.implementation: unknown key\(s\) \['noise'\], missing "
                                         r"key\(s\) \[\]; " + expected):
        Implementation.from_params({"implementation": {**PAPER, "noise": "x"}})
    with pytest.raises(ValueError, match=r"unknown key\(s\) \[\], missing key\(s\) \['group_parallel', "
                                         r"'test_loss'\]; " + expected):
        Implementation.from_params({"implementation": {k: v for k, v in PAPER.items()
                                                        if k not in ("test_loss", "group_parallel")}})
    with pytest.raises(ValueError, match=r"params\.implementation\.group_orders: 'rdp'; allowed: mironov, authors"):
        Implementation.from_params({"implementation": {**PAPER, "group_orders": "rdp"}})
    # the cell's boundary reports the same
    with pytest.raises(ValueError, match=r"params\.implementation\.sgd_gradient: 'sum'; allowed: mean, authors"):
        TrainingSettings.from_params({**cell(), "implementation": {**PAPER, "sgd_gradient": "sum"}}, "b")


def test_values_convert_as_the_cell_reads_them():
    s = TrainingSettings.from_params(cell("b"), "b")
    assert s.panel == Panel(id="b", users=1000, silos=5, distribution="zipf")
    assert (s.dataset, s.allocation, s.seeds, s.rounds, s.batch, s.eval_batch) == ("creditcard", "creditcard", (0, 3),
                                                                                    4, 64, 512)
    for value, kind in ((s.sigma, float), (s.delta, float), (s.train_subsample, float), (s.rounds, int)):
        assert type(value) is kind
    assert s.sigma == 5.0 and s.train_subsample == 1.0 and s.pair_chunk is None
    assert s.implementation == Implementation(**PAPER)
    # the runs in legend order, ULDP-AVG-ws once per rate (as floats), each with its family's typed block; the
    # panel's override merged in by the layout
    assert [r.name("b") for r in s.runs] == LAYOUT.cell_runs(FIGURE, "b") == [
        "b-default", "b-uldp_group_median", "b-uldp_sgd", "b-uldp_avg", "b-uldp_avg_ws-q0.1", "b-uldp_avg_ws-q1"]
    default, group, sgd, avg, ws, ws1 = s.runs
    assert default == RunSettings(BY_ID["default"], None, LocalHyper(eta_g=1.0, eta_l=0.01, epochs=2))
    assert type(default.hyper.eta_g) is float and default.rate == 1.0
    assert group.hyper == PrivateLocalHyper(eta_g=1.0, eta_l=0.01, epochs=1, clip=0.1)
    assert sgd.hyper == SgdHyper(eta_g=10.0, clip=0.1) and sgd.hyper.epochs == 1
    assert avg.hyper == PrivateLocalHyper(eta_g=100.0, eta_l=0.01, epochs=3, clip=0.1) == ws.hyper
    assert (ws.q, ws.rate, type(ws1.q), ws1.rate) == (0.1, 0.1, float, 1.0)
    # panel a keeps the figure's block; the allocation a seed reads is the one the layout asks for
    a = TrainingSettings.from_params(cell("a"), "a")
    assert a.runs[3].hyper.eta_g == 10.0
    for seed in (0, 3):
        assert a.panel.allocation(a.allocation, seed) == seed_allocation(FIGURE, FIGURE["panels"][0], seed) \
            == f"kato2024-creditcard/uniform-U100-S5-seed{seed}"
    assert TrainingSettings.from_params({**cell("a"), "pair_chunk": 8}, "a").pair_chunk == 8


def test_settings_are_frozen():
    s = TrainingSettings.from_params(cell("b"), "b")
    r = RecordsSettings.from_params(RECORDS.cell_params(FIG13, {}, "a")[0], "a")
    for obj, field in ((s, "rounds"), (s.panel, "users"), (s.implementation, "test_loss"), (s.runs[0], "q"),
                       (s.runs[0].hyper, "eta_g"), (r, "seed"), (r.panel, "silos")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(obj, field, 1)
    assert isinstance(s.runs, tuple) and isinstance(s.seeds, tuple)


DROP = object()  # a change that removes the key


@pytest.mark.parametrize(("change", "message"), [
    ({"noise": 1}, r"unknown key\(s\) \['noise'\], missing key\(s\) \[\]"),
    ({"batch": DROP}, r"unknown key\(s\) \[\], missing key\(s\) \['batch'\]"),
    ({"reuse_cells": {}}, r"unknown key\(s\) \['reuse_cells'\]"),  # the layout's, never a cell's
    ({"dataset": "emnist"}, r"params\.dataset: 'emnist'; allowed: creditcard, mnist, heart_disease, tcga_brca"),
    ({"allocation": "credit"}, r"params\.allocation: 'credit'; allowed: creditcard, mnist"),
    ({"seeds": []}, r"params\.seeds: \[\]; expected a non-empty list"),
    ({"seeds": [0, -1]}, r"params\.seeds: -1; expected integers ≥ 0"),
    ({"rounds": 0}, r"params\.rounds: 0; expected an integer ≥ 1"),
    ({"batch": "64"}, r"params\.batch: '64'; expected an integer ≥ 1"),
    ({"eval_batch": 2.5}, r"params\.eval_batch: 2\.5; expected an integer ≥ 1"),
    ({"pair_chunk": True}, r"params\.pair_chunk: True; expected an integer ≥ 1"),
    ({"sigma": -1.0}, r"params\.sigma: -1\.0; expected a number in \[0, ∞\)"),
    ({"delta": 1}, r"params\.delta: 1; expected a number in \(0, 1\)"),
    ({"train_subsample": 0}, r"params\.train_subsample: 0; expected a number in \(0, 1\]"),
    ({"methods": ["uldp_avg", "uldp_avg_x"]}, r"params\.methods: unknown method 'uldp_avg_x'; allowed: default, "),
    ({"methods": []}, r"params\.methods: \[\]; expected a non-empty list of method ids"),
    ({"sampling_rates": DROP}, r"params\.sampling_rates: None gives uldp_avg_ws no run"),
    ({"sampling_rates": [0.5, 1.5]}, r"params\.sampling_rates: 1\.5; expected rates q in \(0, 1\]"),
    ({"methods": ["uldp_avg"]}, r"params\.sampling_rates: given, but no listed method samples users"),
    ({"hyper": {"avg": {"eta_g": 1.0, "clip": 0.1, "eta_l": 0.1, "epochs": 1}}},
     r"params\.hyper: no 'fedavg' block, which DEFAULT \(default\) uses; it takes eta_g, eta_l, epochs"),
    ({"hyper": {**FIGURE["hyper"], "fedavgg": {}}}, r"params\.hyper: unknown block\(s\) \['fedavgg'\]; allowed: "),
    ({"panels": [{"id": "b", "users": 10, "distribution": "zipf", "silos": 5, "hyper": {}}]},
     r"params\.panels \(id b\): unknown key\(s\) \['hyper'\], missing key\(s\) \[\]; expected exactly \['id', "
     r"'users', 'distribution', 'silos'\]"),
    ({"panels": [{"id": "b", "users": 10, "distribution": "zipf"}]}, r"missing key\(s\) \['silos'\]"),
    ({"panels": [{"id": "b", "users": 0, "distribution": "zipf", "silos": 5}]},
     r"params\.panels \(id b\)\.users: 0; expected an integer ≥ 1"),
    ({"dataset": "tcga_brca", "allocation": "tcga_brca",
      "panels": [{"id": "b", "users": 10, "distribution": "zipf-iid", "silos": 6}]},
     r"params\.panels \(id b\)\.distribution: 'zipf-iid' is not allowed for tcga_brca; allowed: uniform, zipf"),
    ({"panels": [{"id": "a", "users": 10, "distribution": "zipf", "silos": 5}]}, r"no panel 'b'; panels: a"),
])
def test_bad_params_stop_the_cell_at_its_boundary(change, message):
    params = {k: v for k, v in {**cell("b"), **change}.items() if v is not DROP}
    with pytest.raises(ValueError, match=message):
        TrainingSettings.from_params(params, "b")


@pytest.mark.parametrize(("family", "method"), [("avg", "ULDP-AVG"), ("group", "ULDP-GROUP-median"),
                                                ("sgd", "ULDP-SGD")])
def test_a_hyper_block_without_its_clip_names_the_method_and_the_key(family, method):
    """A private family's block without `clip` (it would train with every update clipped to 0 and no noise) stops
    the cell before its first run, naming the method and the key (dpfl.papers.kato2024.methods.HyperError)."""
    hyper = {**cell("a")["hyper"], family: {k: v for k, v in FIGURE["hyper"][family].items() if k != "clip"}}
    with pytest.raises(HyperError, match=rf"{method} \(.*\): params\.hyper\.{family} lacks 'clip'"):
        TrainingSettings.from_params({**cell("a"), "hyper": hyper}, "a")
    with pytest.raises(HyperError, match=r"ULDP-SGD \(uldp_sgd\): params\.hyper\.sgd has 'epochs'"):
        TrainingSettings.from_params({**cell("a"), "hyper": {**cell("a")["hyper"],
                                                             "sgd": {"eta_g": 1.0, "clip": 0.1, "epochs": 2}}}, "a")


# ------------------------------------------------------------------------------------------ Fig 13

FIG13 = {"dataset": "mnist", "allocation": "mnist", "seed": 2,
         "panels": [{"id": "a", "users": 100, "distribution": "zipf-noniid", "silos": 5},
                    {"id": "b", "users": 10, "distribution": "uniform", "silos": 3}]}


def test_records_settings_read_the_cells_panel():
    own, _ = RECORDS.cell_params(FIG13, {}, "b")
    s = RecordsSettings.from_params(own, "b")
    assert s == RecordsSettings(dataset="mnist", allocation="mnist", seed=2,
                                panel=Panel(id="b", users=10, silos=3, distribution="uniform"))
    assert s.allocation_name == seed_allocation(FIG13, FIG13["panels"][1], 2) == "kato2024-mnist/uniform-U10-S3-seed2"


@pytest.mark.parametrize(("change", "message"), [
    ({"seeds": [0]}, r"fig13 cell params: unknown key\(s\) \['seeds'\], missing key\(s\) \[\]; expected exactly "
                     r"\['dataset', 'allocation', 'seed', 'panels'\]"),
    ({"seed": DROP}, r"missing key\(s\) \['seed'\]"),
    ({"seed": -1}, r"params\.seed: -1; expected an integer ≥ 0"),
    ({"seed": "0"}, r"params\.seed: '0'; expected an integer ≥ 0"),
    ({"dataset": "cifar"}, r"params\.dataset: 'cifar'; allowed: creditcard, mnist, heart_disease, tcga_brca"),
    ({"panels": [{"id": "a", "users": 4, "distribution": "zipf", "silos": 0}]},
     r"fig13 cell: params\.panels \(id a\)\.silos: 0; expected an integer ≥ 1"),
    ({"panels": [{"id": "a", "users": 4, "distribution": "normal", "silos": 2}]},
     r"\.distribution: 'normal' is not allowed for mnist; allowed: uniform, zipf, zipf-iid, zipf-noniid"),
])
def test_bad_records_params_stop_the_cell_at_its_boundary(change, message):
    params = {k: v for k, v in {**RECORDS.cell_params(FIG13, {}, "a")[0], **change}.items() if v is not DROP}
    with pytest.raises(ValueError, match=message):
        RecordsSettings.from_params(params, "a")


# ------------------------------------------------------------------------------------------ the shipped configuration


def modes(cfg, figure: str) -> list[str]:
    """The modes a figure builds in: the paper's, the authors' code (where it has one) and each ablation."""
    compat = ["authors-code"] if FIGURES[("kato2024", figure)].has_compat else []
    return ["none", *compat, *(paths.ablation_mode(n) for n in cfg.ablations("kato2024", figure))]


@pytest.mark.parametrize("scale", ["smoke", "quick", "paper"])
def test_every_cell_of_the_shipped_configuration_reads(scale):
    """Every cell of every training figure and of Fig 13 in every mode, at each scale: the settings read, hold what
    the params say, converted as the cells always read them, and name the runs the layout names."""
    cfg = load(ROOT, {"scale": scale})
    seen = set()
    for figure in TRAINING:
        for mode in modes(cfg, figure):
            figure_params = cfg.figure_params("kato2024", figure, mode)
            for c in cell_ids(cfg, "kato2024", figure, mode):
                params = build_cell_job(cfg, "kato2024", figure, c, mode).params
                s = TrainingSettings.from_params(params, c)
                panel = panel_of(params, c)
                assert (s.panel.id, s.panel.users, s.panel.silos, s.panel.distribution) == (
                    c, int(panel["users"]), int(panel["silos"]), panel["distribution"])
                assert (s.rounds, s.batch, s.eval_batch) == tuple(int(params[k]) for k in ("rounds", "batch",
                                                                                           "eval_batch"))
                assert (s.sigma, s.delta, s.train_subsample) == tuple(float(params[k]) for k in (
                    "sigma", "delta", "train_subsample"))
                assert s.seeds == tuple(params["seeds"]) and s.pair_chunk == params["pair_chunk"]
                assert [(r.method.id, r.q) for r in s.runs] == method_cells(params)
                names = [r.name(c) for r in s.runs]
                assert names == [run_id(c, m, q) for m, q in method_cells(params)]
                every = LAYOUT.cell_runs(figure_params, c)  # a run read from another figure is not computed here
                assert names == [n for n in every if n in names] and names
                for r in s.runs:
                    assert r.hyper == r.method.hyper_params(params["hyper"][r.method.hyper])
                for seed in s.seeds:
                    assert s.panel.allocation(s.allocation, seed) == seed_allocation(params, panel, seed)
                want = {"none": PAPER, "authors-code": CODE}.get(mode) or ABLATIONS[mode]
                assert s.implementation == Implementation(**want)
                seen.add((figure, mode))
        for mode in modes(cfg, "fig13"):
            for c in cell_ids(cfg, "kato2024", "fig13", mode):
                params = build_cell_job(cfg, "kato2024", "fig13", c, mode).params
                r = RecordsSettings.from_params(params, c)
                assert r.seed == int(params["seed"]) and r.panel.id == c
                assert r.allocation_name == seed_allocation(params, panel_of(params, c), params["seed"])
                seen.add(("fig13", mode))
    assert {f for f, _ in seen} == {*TRAINING, "fig13"}
    assert {m for _, m in seen} >= {"none", "authors-code", "ablation-k1", "ablation-k2"}
