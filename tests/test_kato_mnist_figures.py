"""kato2024 Figs 5 and 10(b) (MNIST): the DAG's cells and deduplication, a panel's hyper-parameter override, the
training-record subsample of reduced scales, and the non-iid gap rows that claims C-K5a/b compare."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpfl import jobs
from dpfl.config import load
from dpfl.papers.kato2024.training.table import _noniid_gaps
from dpfl.papers.kato2024.training.layout import TrainingLayout

LAYOUT = TrainingLayout()

ROOT = Path(__file__).resolve().parents[1]


def test_fig5_cells_and_fig10b_reads_fig5s_identical_run():
    cfg = load(ROOT, {"scale": "quick"})
    cells = jobs.cell_ids(cfg, "kato2024", "fig5", "none")
    runs = jobs.cell_runs(cfg, "kato2024", "fig5", "none")
    assert cells == list("abcdef") and len(runs) == 6 * 8 and not any("uldp_naive" in r for r in runs)
    sources = jobs.cell_sources(cfg, "kato2024", "fig10b", "none")
    # q = 1 is Fig 5's run, read from Fig 5's panel cell e (spec §7: deduplicate); Fig 10(b)'s cell e computes the rest
    assert sources == [("fig5", "e", ("e-uldp_avg_w",)), ("fig10b", "e", None)]
    assert jobs.cell_runs(cfg, "kato2024", "fig10b", "none") == {
        r: "e" for r in ["e-uldp_avg_w", "e-uldp_avg_ws-q0.1", "e-uldp_avg_ws-q0.3", "e-uldp_avg_ws-q0.5"]}
    assert jobs.build_cell_job(cfg, "kato2024", "fig10b", "e", "none").params["methods"] == ["uldp_avg_ws"]
    # the U = 10000 panels take ULDP-AVG's η_g = 100 from their own override; U = 100 keeps the figure's 10
    fig5 = cfg.figure_params("kato2024", "fig5", "none")
    own_e, _ = LAYOUT.cell_params(fig5, {}, "e")
    own_b, _ = LAYOUT.cell_params(fig5, {}, "b")
    assert own_e["hyper"]["avg"]["eta_g"] == 100.0 and own_b["hyper"]["avg"]["eta_g"] == 10.0
    assert own_e["hyper"]["avg"]["clip"] == 0.1 and "hyper" not in own_e["panels"][0]
    assert own_e["hyper"]["fedavg"] == fig5["hyper"]["fedavg"]
    assert LAYOUT.runs_params(fig5, {}, "e", ["e-default"])[0]["hyper"] == {"fedavg": fig5["hyper"]["fedavg"]}
    # editing Fig 10(b)'s ULDP-AVG so that the runs differ: it computes its own q = 1 run
    edited = copy.deepcopy(cfg)
    edited.papers["kato2024"]["figures"]["fig10b"]["params"]["hyper"]["avg"]["eta_g"] = 50.0
    assert jobs.cell_sources(edited, "kato2024", "fig10b", "none") == [("fig10b", "e", None)]


def test_reduced_scale_subsamples_mnist_and_says_so():
    quick = load(ROOT, {"scale": "quick"}).figure_params("kato2024", "fig5", "none")
    paper = load(ROOT, {"scale": "paper"}).figure_params("kato2024", "fig5", "none")
    assert 0.0 < quick["train_subsample"] < 1.0 and paper.get("train_subsample", 1.0) == 1.0


def _final(method, users, distribution, panel, y, se=0.01):
    return {"panel": panel, "method": method, "curve": method, "q": 1.0, "users": users, "silos": 5,
            "distribution": distribution, "quantity": "test_loss", "window": "final", "x": 200, "y": y, "se": se,
            "seeds": 5, "metric": "accuracy"}


def test_noniid_gap_rows_by_hand():
    df = pd.DataFrame([_final("uldp_avg", 100, "zipf-iid", "b", 0.5), _final("uldp_avg", 100, "zipf-noniid", "c", 1.25),
                       _final("uldp_avg", 10000, "zipf-iid", "e", 0.4),
                       _final("uldp_avg", 10000, "zipf-noniid", "f", 0.5),
                       _final("default", 100, "zipf-iid", "b", 0.3), _final("default", 100, "zipf-noniid", "c", 0.4),
                       _final("default", 100, "uniform", "a", 0.2)])
    gaps = _noniid_gaps(df, "test_loss").set_index(["method", "users"])
    assert set(gaps.index) == {("uldp_avg", 100), ("uldp_avg", 10000), ("default", 100)}
    assert gaps.loc[("uldp_avg", 100), "y"] == pytest.approx(0.75)
    assert gaps.loc[("uldp_avg", 10000), "y"] == pytest.approx(0.1)
    assert gaps.loc[("default", 100), "y"] == pytest.approx(0.1)
    assert gaps.loc[("uldp_avg", 100), "se"] == pytest.approx(np.hypot(0.01, 0.01))
    assert (gaps["quantity"] == "noniid_gap").all() and (gaps["x"] == 5).all()


def test_subsample_keeps_a_share_of_the_records_with_their_users_and_silos():
    from dpfl.papers.kato2024.training.cell import subsample

    n = 20000
    run = {"X": np.arange(n * 2, dtype=np.float32).reshape(n, 2), "y": np.arange(n) % 10, "silo": np.arange(n) % 5,
           "user": np.arange(n) % 7, "X_test": np.zeros((3, 2)), "y_test": np.zeros(3)}
    a = subsample(run, 0.1, np.random.default_rng(0))
    b = subsample(run, 0.1, np.random.default_rng(0))
    kept = a["X"][:, 0].astype(int) // 2  # the original record index of every kept row
    assert abs(len(kept) - 0.1 * n) < 4 * np.sqrt(n * 0.09) and np.all(np.diff(kept) > 0)  # a share, in order
    assert (np.array_equal(a["y"], kept % 10) and np.array_equal(a["silo"], kept % 5)
            and np.array_equal(a["user"], kept % 7))
    assert np.array_equal(a["X"], b["X"]) and a["X_test"] is run["X_test"]  # reproducible; the test set untouched
