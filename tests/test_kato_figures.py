"""kato2024 training figures (Figs 4, 6-10a): the layout (one cell per panel, its runs, inputs, what each cell
depends on), runs on a tiny TCGA-like fixture (rows, ε columns, determinism, a panel cell's table = its runs' tables
computed apart, a diverging run recorded as failed instead of crashing), the figure table's windows, and a smoke run
of Fig 9 through Snakemake on the offline TCGA copy."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpfl.jobs import CellJob
from dpfl.papers.kato2024.allocation_instances import build_flamby
from dpfl.papers.kato2024.methods import BY_ID, epsilon_curves
from dpfl.papers.kato2024.training import layout
from dpfl.papers.kato2024.training.cell import run_cell
from dpfl.papers.kato2024.training.layout import TrainingLayout
from dpfl.papers.kato2024.training.table import curves

LAYOUT = TrainingLayout()

ROOT = Path(__file__).resolve().parent.parent

PARAMS = {
    "dataset": "tcga_brca", "allocation": "tcga_brca",
    "panels": [{"id": "a", "users": 6, "distribution": "uniform", "silos": 2},
               {"id": "b", "users": 6, "distribution": "zipf", "silos": 2}],
    "methods": ["default", "uldp_group_2", "uldp_sgd", "uldp_avg", "uldp_avg_w", "uldp_avg_ws"],
    "sampling_rates": [0.5], "seeds": [0, 1], "rounds": 3, "batch": 4, "sigma": 5.0, "delta": 1e-5,
    "eval_batch": 512, "pair_chunk": None, "train_subsample": 1.0,
    "hyper": {"fedavg": {"eta_g": 1.0, "eta_l": 0.01, "epochs": 2},
              "group": {"eta_g": 1.0, "clip": 1.0, "eta_l": 0.01, "epochs": 1},
              "sgd": {"eta_g": 10.0, "clip": 0.1}, "avg": {"eta_g": 10.0, "clip": 0.1, "eta_l": 0.01, "epochs": 2}},
    "implementation": {"sgd_gradient": "mean", "test_loss": "mean", "group_orders": "mironov", "group_parallel": "rdp",
                       "group_conversion": "rdp"},
}


def test_cells_are_panels_and_their_runs_methods_and_sampling_rates():
    assert LAYOUT.cells(PARAMS) == ["a", "b"]
    assert LAYOUT.cell_runs(PARAMS, "a") == ["a-default", "a-uldp_group_2", "a-uldp_sgd", "a-uldp_avg", "a-uldp_avg_w",
                                             "a-uldp_avg_ws-q0.5"]
    assert len(LAYOUT.cell_runs(PARAMS, "b")) == 6
    assert layout.parse_run("b-uldp_avg_ws-q0.5") == ("b", "uldp_avg_ws", 0.5)
    with pytest.raises(ValueError, match="uldp_avg_x"):
        layout.parse_run("a-uldp_avg_x")


def test_needs_one_allocation_per_panel_and_seed():
    datasets, allocations = LAYOUT.needs(PARAMS)
    assert datasets == ("tcga_brca",)
    assert allocations == ("kato2024-tcga_brca/uniform-U6-S2-seed0", "kato2024-tcga_brca/uniform-U6-S2-seed1",
                           "kato2024-tcga_brca/zipf-U6-S2-seed0", "kato2024-tcga_brca/zipf-U6-S2-seed1")


def test_a_cell_depends_only_on_its_panel_and_a_run_on_its_method():
    own, _ = LAYOUT.cell_params(PARAMS, {}, "a")
    other = {**PARAMS, "panels": [PARAMS["panels"][0], {**PARAMS["panels"][1], "users": 9}],
             "hyper": {**PARAMS["hyper"], "naive": {"eta_g": 1.0, "clip": 0.5, "eta_l": 0.1, "epochs": 1}}}
    assert LAYOUT.cell_params(other, {}, "a")[0] == own  # another panel, a family none of its methods uses
    assert own["methods"] == PARAMS["methods"] and own["sampling_rates"] == [0.5]
    assert set(own["hyper"]) == {"fedavg", "group", "sgd", "avg"} and own["panels"] == [PARAMS["panels"][0]]
    changed = {**PARAMS, "hyper": {**PARAMS["hyper"], "avg": {**PARAMS["hyper"]["avg"], "clip": 0.2}}}
    assert LAYOUT.cell_params(changed, {}, "a")[0] != own
    # one run (what reuse_cells compares across figures): its method's family only
    run, _ = LAYOUT.runs_params(PARAMS, {}, "a", ["a-uldp_avg"])
    assert run["methods"] == ["uldp_avg"] and set(run["hyper"]) == {"avg"} and "sampling_rates" not in run
    sgd = {**PARAMS, "hyper": {**PARAMS["hyper"], "sgd": {"eta_g": 1.0, "clip": 0.5}}}
    assert LAYOUT.runs_params(sgd, {}, "a", ["a-uldp_avg"])[0] == run
    assert LAYOUT.runs_params(changed, {}, "a", ["a-uldp_avg"])[0] != run
    assert LAYOUT.runs_params(PARAMS, {}, "a", ["a-uldp_avg_ws-q0.5"])[0]["sampling_rates"] == [0.5]
    assert LAYOUT.runs_params(PARAMS, {}, "a", LAYOUT.cell_runs(PARAMS, "a")) == LAYOUT.cell_params(PARAMS, {}, "a")
    with pytest.raises(ValueError, match="not runs of panel 'a'"):
        LAYOUT.runs_params(PARAMS, {}, "a", ["b-uldp_avg"])


# ------------------------------------------------------------------------------------------ one cell


@pytest.fixture(scope="module")
def fixture(tmp_path_factory):
    """A TCGA-shaped prepared file (2 centres, 40 training and 20 test records) and the allocations of PARAMS."""
    d = tmp_path_factory.mktemp("kato")
    rng = np.random.default_rng(0)
    n = 60
    X = rng.normal(size=(n, 39))
    T = rng.exponential(size=n) * np.exp(-X[:, 0])
    prepared = {"X": X, "T": T, "E": (rng.random(n) < 0.7).astype(np.int64), "center": np.repeat([0, 1], 30),
                "train": np.tile(np.r_[np.ones(20, bool), np.zeros(10, bool)], 2), "centers": np.array(["c0", "c1"])}
    np.savez(d / "tcga_brca.npz", **prepared)
    allocations = {}
    for name in LAYOUT.needs(PARAMS)[1]:
        panel = next(p for p in PARAMS["panels"] if f"/{p['distribution']}-" in name)
        seed = int(name.rsplit("seed", 1)[1])
        alloc = build_flamby(prepared, {"dataset": "tcga_brca", "distribution": panel["distribution"], "users": 6,
                                        "silos": 2, "seed": seed, "global_seed": 0, "user_alpha": 0.5,
                                        "main_ratio": 0.8, "min_records": 2}, log=lambda *a: None)
        path = d / (name.replace("/", "_") + ".npz")
        np.savez(path, **alloc)
        allocations[name] = str(path)
    return {"prepared": {"tcga_brca": str(d / "tcga_brca.npz")}, "allocations": allocations}


def job(name: str, params=PARAMS) -> CellJob:
    """The job of panel cell `name` ("a"), or of its panel cell computing only run `name` ("a-uldp_avg")."""
    panel = name.split("-")[0]
    own, settings = (LAYOUT.cell_params(params, {}, panel) if name == panel
                     else LAYOUT.runs_params(params, {}, panel, [name]))
    return CellJob(paper="kato2024", figure="figX", cell=panel, mode="none", scale="smoke", seed=0, device="cpu",
                   params=own, settings=settings)


@pytest.mark.parametrize("cell", ["a-uldp_avg", "b-uldp_group_2", "a-uldp_avg_ws-q0.5", "b-default", "a-uldp_sgd"])
def test_cell_rows_and_privacy_columns(fixture, cell):
    df = run_cell(job(cell), fixture, lambda *a: None).table
    assert len(df) == 2 * 3 and sorted(df["seed"].unique()) == [0, 1] and (df["run"] == cell).all()
    assert df["round"].tolist() == [1, 1, 2, 2, 3, 3] or sorted(df["round"]) == [1, 1, 2, 2, 3, 3]
    assert df["utility"].between(0, 1).all() and np.isfinite(df["test_loss"]).all() and not df["failed"].any()
    method = BY_ID[layout.parse_run(cell)[1]]
    if not method.private:
        assert df["eps"].isna().all()
        return
    eps = df.sort_values(["seed", "round"]).groupby("seed")["eps"].apply(list)
    assert (np.diff(eps.iloc[0]) > 0).all()  # ε grows every round
    if method.scheme != "group":  # user level: the same curve for every seed, from the accountant
        q = layout.parse_run(cell)[2] or 1.0
        want, _ = epsilon_curves(method, 3, 5.0, 1e-5, q=q)
        np.testing.assert_allclose(eps.iloc[0], want, rtol=1e-12)
    assert (df["eps_certified"] >= df["eps"] - 1e-12).all()


def test_same_job_gives_identical_numbers(fixture):
    a = run_cell(job("b-uldp_avg_w"), fixture, lambda *a: None).table
    b = run_cell(job("b-uldp_avg_w"), fixture, lambda *a: None).table
    pd.testing.assert_frame_equal(a, b)


def test_a_panel_cell_is_its_runs_computed_apart(fixture):
    """A panel cell runs its methods one after another in one process: its table is exactly the concatenation of
    the runs computed one by one (in another order, so that nothing one run leaves behind, e.g. a generator, a
    cached object or the global RNG, changes the next), and it logs which run it is at."""
    lines = []
    result = run_cell(job("a"), fixture, lines.append)
    panel = result.table
    runs = LAYOUT.cell_runs(PARAMS, "a")
    assert list(dict.fromkeys(panel["run"])) == runs
    assert [line for line in lines if line.startswith("run ")] == [f"run {i}/6: {r}" for i, r in enumerate(runs, 1)]
    apart = {r: run_cell(job(r), fixture, lambda *a: None).table for r in reversed(runs)}
    want = pd.concat([apart[r] for r in runs], ignore_index=True)
    pd.testing.assert_frame_equal(panel, want)
    assert list(result.timing) == runs and all(t.seconds_per_round > 0 for t in result.timing.values())  # one per run


def test_a_diverging_run_is_recorded_as_failed_not_a_crash(fixture, monkeypatch):
    """Seed 1's model turns NaN in round 2: its rows from round 2 on are failed and NaN, seed 0 goes on, and the
    figure table draws that curve from the remaining seed (`seeds` = 1) with failed_seeds = 1."""
    from dpfl.papers.kato2024.training import rules

    real, calls = rules.AvgRound.step, []

    def breaking(self, theta, t):
        calls.append(t)
        out = real(self, theta, t)
        if len(calls) >= 2:
            out = out.clone()
            out[1] = float("nan")
        return out

    monkeypatch.setattr(rules.AvgRound, "step", breaking)  # ULDP-AVG's round rule (the family chosen by the cell)
    df = run_cell(job("a-uldp_avg"), fixture, lambda *a: None).table
    s1, s0 = df[df["seed"] == 1].sort_values("round"), df[df["seed"] == 0]
    assert s1["failed"].tolist() == [False, True, True] and s1["utility"].iloc[1:].isna().all()
    assert not s0["failed"].any() and s0["utility"].notna().all()
    table = curves(PARAMS, [df], lambda *a: None)
    u = table[(table["quantity"] == "utility") & (table["window"] == "round")].sort_values("x")
    assert u["seeds"].tolist() == [2, 1, 1] and (u["failed_seeds"] == 1).all()


def test_table_has_round_final_and_early_windows(fixture):
    tables = [run_cell(job(c), fixture, lambda *a: None).table.assign(cell="a") for c in ("a-uldp_avg", "a-uldp_avg_w")]
    t = curves(PARAMS, tables, lambda *a: None)
    assert set(t["window"]) == {"round", "final", "early", "by_silos"}
    gap = t[t["quantity"] == "loss_gap"]  # final test loss AVG − AVG-w, x = S (claims C-K8a/b)
    finals = t[(t["quantity"] == "test_loss") & (t["window"] == "final")].set_index("method")["y"]
    assert gap["x"].item() == 2 and gap["y"].item() == pytest.approx(finals["uldp_avg"] - finals["uldp_avg_w"])
    u = t[(t["quantity"] == "utility") & (t["curve"] == "ULDP-AVG")]
    raw = tables[0]
    assert u[u["window"] == "final"]["y"].item() == pytest.approx(raw[raw["round"] == 3]["utility"].mean())
    early = raw[raw["round"] <= 1].groupby("seed")["utility"].mean().mean()
    assert u[u["window"] == "early"]["y"].item() == pytest.approx(early)
    assert (t["loss"] == "test_loss").all() and (t["metric"] == "c_index").all()


# ------------------------------------------------------------------------------------------ pipeline

MIRROR = Path(os.environ.get("DPFL_DATA_MIRROR") or ROOT.parent / "shared" / "datasets")


@pytest.mark.pipeline
@pytest.mark.skipif(not (MIRROR / "tcga_brca").is_dir(), reason="needs the offline tcga_brca copy")
def test_fig9_smoke_run_builds_figure_claims_and_report(tmp_path):
    from tests.test_pipeline import copy_project, snakemake

    project = copy_project(tmp_path / "project")
    snakemake(project, "--cores", "2", "--config", "scale=smoke", "only=[kato2024/fig9]", f"data_mirror={MIRROR}",
              check=True)
    d = project / "results/kato2024/fig9"
    table = pd.read_csv(d / "fig9.csv")
    curves = set(table.loc[table["window"] == "round", "curve"])
    assert curves == {"ULDP-AVG", "ULDP-AVG-w"} and set(table["panel"]) == {"a", "b"}
    sidecar = json.loads((d / "fig9.json").read_text())
    assert sidecar["data_source"] == "real" and sidecar["device"]["cells_ran_on"] == ["cpu"]
    assert sidecar["cells_training_seconds"] > 0
    assert "seconds_per_round" not in table.columns  # measured seconds live in the cells' timing sidecars
    timing = json.loads((d / "cells" / "b.timing.json").read_text())  # one cell per panel, its runs timed apart
    assert list(timing["runs"]) == ["b-uldp_avg", "b-uldp_avg_w"] and (d / "cells" / "a.timing.json").exists()
    assert timing["seconds_per_round"] == pytest.approx(sum(r["seconds_per_round"] for r in timing["runs"].values()))
    claims = json.loads((d / "claims.json").read_text())["claims"]
    assert [c["id"] for c in claims] == ["C-K9"] and claims[0]["verdict"] in {"pass", "fail", "inconclusive"}
    assert "C-K9" in (project / "results/report/index.html").read_text()


def test_fig10a_reads_fig8s_identical_run_and_computes_its_own_when_they_differ():
    """Spec §7: Fig 10(a)'s q = 1 curve is Fig 8's (S = 5, zipf) ULDP-AVG-w run: built once in Fig 8's panel cell b,
    whose rows of that run Fig 10(a)'s table reads, while Fig 10(a)'s panel cell b computes only the ULDP-AVG-ws runs;
    if a setting of either is edited so that the runs differ, Fig 10(a)'s cell computes its own."""
    import copy

    from dpfl import jobs
    from dpfl.config import load

    cfg = load(ROOT, {"scale": "smoke"})
    rates = cfg.figure_params("kato2024", "fig10a", "none")["sampling_rates"]
    assert jobs.cell_sources(cfg, "kato2024", "fig10a", "none") == [("fig8", "b", ("b-uldp_avg_w",)),
                                                                   ("fig10a", "b", None)]
    own = jobs.build_cell_job(cfg, "kato2024", "fig10a", "b", "none").params
    assert own["methods"] == ["uldp_avg_ws"] and own["sampling_rates"] == rates
    assert jobs.build_cell_job(cfg, "kato2024", "fig8", "b", "none").params["methods"] == ["uldp_avg", "uldp_avg_w"]
    edited = copy.deepcopy(cfg)
    edited.papers["kato2024"]["figures"]["fig8"]["params"]["hyper"]["avg"]["clip"] = 0.5
    assert jobs.cell_sources(edited, "kato2024", "fig10a", "none") == [("fig10a", "b", None)]
    assert jobs.build_cell_job(edited, "kato2024", "fig10a", "b", "none").params["methods"] == ["uldp_avg_w",
                                                                                              "uldp_avg_ws"]


def test_the_table_reads_the_borrowed_runs_rows_and_their_loop_seconds(tmp_path):
    """dpfl.stages.table: a cell table read for some of its runs gives only their rows, and only their round loops
    count in the figure's training seconds (dpfl.stages.cell.cell_timing: per run, and their sum)."""
    from dpfl import paths
    from dpfl.io import write_json
    from dpfl.figure import CellResult, RunTiming
    from dpfl.stages.cell import cell_timing
    from dpfl.stages.table import _round_loop_seconds, read_cell_table

    df = pd.DataFrame({"run": ["b-uldp_avg"] * 2 + ["b-uldp_avg_w"] * 2, "round": [1, 2, 1, 2], "y": [1, 2, 3, 4]})
    timing = cell_timing(CellResult(df, {"b-uldp_avg": RunTiming(seconds_per_round=0.5),
                                         "b-uldp_avg_w": RunTiming(seconds_per_round=2.0)}))
    assert timing == {"seconds_per_round": 2.5, "rounds": 2,
                      "runs": {"b-uldp_avg": {"seconds_per_round": 0.5, "rounds": 2},
                               "b-uldp_avg_w": {"seconds_per_round": 2.0, "rounds": 2}}}
    path = tmp_path / "b.parquet"
    df.to_parquet(path)
    write_json(timing, paths.cell_timing(str(path)))
    assert read_cell_table(str(path), ("b-uldp_avg_w",))["y"].tolist() == [3, 4]
    assert len(read_cell_table(str(path))) == 4
    assert _round_loop_seconds(str(path), ("b-uldp_avg_w",)) == 4.0 and _round_loop_seconds(str(path)) == 5.0
    with pytest.raises(ValueError, match="no rows of run b-uldp_sgd"):
        read_cell_table(str(path), ("b-uldp_sgd",))


@pytest.mark.parametrize("cell, block", [("a-uldp_avg", "avg"), ("b-uldp_group_2", "group"), ("a-uldp_sgd", "sgd")])
def test_a_private_method_without_clip_stops_with_the_method_and_the_key(fixture, cell, block):
    """A private family's YAML block without `clip` is an error naming the method and the key (it used to train
    with every update clipped to 0 and no noise)."""
    from dpfl.papers.kato2024.methods import HyperError

    params = {**PARAMS, "hyper": {**PARAMS["hyper"], block: {k: v for k, v in PARAMS["hyper"][block].items()
                                                             if k != "clip"}}}
    label = BY_ID[layout.parse_run(cell)[1]].label
    with pytest.raises(HyperError, match=rf"{label}.*params\.hyper\.{block} lacks 'clip'"):
        run_cell(job(cell, params), fixture, lambda *a: None).table


def test_typed_hyper_parameters_per_family():
    from dpfl.papers.kato2024.methods import HyperError, LocalHyper, PrivateLocalHyper, SgdHyper

    h = BY_ID["uldp_avg_w"].hyper_params({"eta_g": 10, "clip": 0.1, "eta_l": 0.01, "epochs": 2})
    assert h == PrivateLocalHyper(eta_g=10.0, eta_l=0.01, epochs=2, clip=0.1) and isinstance(h.eta_g, float)
    assert BY_ID["default"].hyper_params({"eta_g": 1.0, "eta_l": 0.1, "epochs": 3}) == LocalHyper(1.0, 0.1, 3)
    sgd = BY_ID["uldp_sgd"].hyper_params({"eta_g": 10.0, "clip": 0.1})
    assert sgd == SgdHyper(10.0, 0.1) and sgd.epochs == 1
    with pytest.raises(HyperError, match="ULDP-SGD.*'epochs'.*does not use"):
        BY_ID["uldp_sgd"].hyper_params({"eta_g": 10.0, "clip": 0.1, "epochs": 5})
    with pytest.raises(HyperError, match="DEFAULT.*lacks 'eta_l'"):
        BY_ID["default"].hyper_params({"eta_g": 1.0, "epochs": 3})
    with pytest.raises(AttributeError):  # frozen
        h.clip = 1.0


def test_k6_normal_conversion_every_fifth_round(fixture):
    """compat K6: GROUP's plotted ε from the (ε, δ) group conversion, every 5th round and the last, NaN between;
    the certified column stays the RDP upper bound."""
    params = {**PARAMS, "rounds": 6, "implementation": {**PARAMS["implementation"], "group_conversion": "normal"}}
    df = run_cell(job("a-uldp_group_2", params), fixture, lambda *a: None).table.sort_values(["seed", "round"])
    s0 = df[df["seed"] == 0]
    assert s0["eps"].notna().tolist() == [False, False, False, False, True, True]
    assert s0["eps_certified"].notna().all()
    rdp = run_cell(job("a-uldp_group_2", {**params, "implementation": PARAMS["implementation"]}), fixture,
                   lambda *a: None).table.sort_values(["seed", "round"])
    # for k = 2 the normal-DP conversion is the looser one here (Fig 2: within 3.6× of the RDP conversion)
    ratio = s0["eps"].iloc[4] / rdp[rdp["seed"] == 0]["eps"].iloc[4]
    assert 1 / 3.6 <= ratio <= 3.6


def test_a_distribution_the_dataset_does_not_support_stops_before_any_job():
    bad = {**PARAMS, "panels": [{"id": "a", "users": 6, "distribution": "zipf-noniid", "silos": 2}]}
    with pytest.raises(ValueError, match=r"panels\[0\] \(id a\)\.distribution: 'zipf-noniid' is not allowed for "
                                         r"tcga_brca; allowed: uniform, zipf"):
        LAYOUT.needs(bad)
