"""kato2024 Figs 11 and 12 (dpfl.papers.kato2024.protocol): the layout read from the YAML, Fig 12's generated data
(users within the record bound, reproducible), one real cell of each figure through the protocol (every phase timed,
the decrypted aggregate equal to the plaintext one, ε from the accountant), the table's per-run totals, sweeps,
ratios and speed-ups on hand-made cell tables, the YAML's C-K11 and C-K12 checks on them, and the plots.

The cells here use a 1024-bit modulus and a record bound N̄ = 30 so that they take seconds (L = lcm(1..30) fits a
1024-bit n with room; the arithmetic is the same as at 3072 bits, which tests/test_kato_secure.py runs once)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from dpfl import claims, config, tidy
from dpfl.papers.kato2024.allocation_instances import build_flamby
from dpfl.papers.kato2024.methods import BY_ID, epsilon_curves
from dpfl.papers.kato2024.protocol.cell import artificial_run, run_cell
from dpfl.papers.kato2024.protocol.layout import (PHASES, ProtocolLayout, is_fig11, panel_allocation, parse_cell,
                                                  parse_setting, settings)
from dpfl.papers.kato2024.protocol.settings import ArtificialData, ProtocolSettings
from dpfl.papers.kato2024.protocol.table import table

PROTOCOL = ProtocolLayout()

ROOT = Path(__file__).resolve().parent.parent
SMALL = {"key_bits": 1024, "record_bound": 30, "simulation": True}


def yaml_params(figure: str, scale: str = "paper") -> dict:
    cfg = config.load(ROOT, {"scale": scale})
    return cfg.figure_params("kato2024", figure, "none")


# ------------------------------------------------------------------------------------------ layout


def test_layout_from_the_yaml():
    p11, p12 = yaml_params("fig11"), yaml_params("fig12")
    assert PROTOCOL.cells(p11) == [f"{panel}-{impl}{level}" for panel in ("heart10", "heart100", "tcga10", "tcga100")
                                   for impl in ("fast", "reference") for level in ("", "-secure")]
    datasets, allocations = PROTOCOL.needs(p11)
    assert datasets == ("heart_disease", "tcga_brca") and len(allocations) == 4 * 5
    assert "kato2024-tcga_brca/zipf-U100-S6-seed10" in allocations
    # Fig 12: the two sweeps share their default setting (h = 2, U = 20): 7 settings, no data files
    assert settings(p12) == [(2, 20), (4, 20), (8, 20), (15, 20), (2, 10), (2, 30), (2, 40)]
    assert len(PROTOCOL.cells(p12)) == 28 and PROTOCOL.needs(p12) == ((), ())
    own, _ = PROTOCOL.cell_params(p12, {}, "h8-U20-reference")
    assert ((own["hidden"], own["users"], own["implementation"], own["security"]) == (8, 20, "reference", "paper")
            and "hidden" not in p12.get("x", {}) and "securities" not in own)
    own, _ = PROTOCOL.cell_params(p11, {}, "tcga10-fast-secure")
    assert own["panel"]["id"] == "tcga10" and own["implementation"] == "fast" and is_fig11(own)
    assert (own["key_bits"], own["record_bound"], own["optimizer"]) == (3072, 2000, "sgd")  # the paper's settings
    assert (own["security"], own["simulation"]) == ("secure", False)
    assert parse_cell("h2-U20-reference-secure") == ("h2-U20", "reference", "secure")
    for bad in ("tcga10", "tcga10-slow", "-fast", "tcga10-secure", "-fast-secure"):
        with pytest.raises(ValueError, match="implementation one of fast, reference"):
            parse_cell(bad)
    with pytest.raises(ValueError, match="h<hidden>-U<users>"):
        parse_setting("h2U20")


def test_authors_code_sets_adam_and_ten_users():
    cfg = config.load(ROOT, {"scale": "paper"})
    p = cfg.figure_params("kato2024", "fig12", "authors-code")
    assert p["optimizer"] == "adam" and p["default_users"] == 10  # K7, K8
    assert cfg.figure_params("kato2024", "fig11", "authors-code")["optimizer"] == "adam"


# ------------------------------------------------------------------------------------------ Fig 12's data


def test_generated_data_keeps_every_user_within_the_record_bound():
    from dpfl.papers.kato2024.streams import Streams

    data = ArtificialData(features=4, classes=2, records_per_silo=300)
    run = artificial_run(data, 3, 100, 4, 7, Streams(0))  # 900 records, 4 users: ≈ 225 each → 100 kept each
    counts = np.bincount(run["user"], minlength=4)
    assert counts.max() == 100 and run["dropped"] == 900 - counts.sum() and run["X"].shape == (counts.sum(), 4)
    assert set(np.unique(run["silo"])) == {0, 1, 2} and set(np.unique(run["y"])) == {0, 1}
    again = artificial_run(data, 3, 100, 4, 7, Streams(0))
    assert all(np.array_equal(run[k], again[k]) for k in ("X", "y", "silo", "user"))
    # the data derive from the global seed: another one gives other records and users
    other = artificial_run(data, 3, 100, 4, 7, Streams(1))
    assert not np.array_equal(run["user"], other["user"]) and not np.array_equal(run["X"][:50], other["X"][:50])
    roomy = artificial_run(data, 3, 2000, 4, 7, Streams(0))
    assert roomy["dropped"] == 0 and len(roomy["y"]) == 900
    # the records do not depend on the number of users (a #users sweep shares them)
    assert np.array_equal(artificial_run(data, 3, 2000, 9, 7, Streams(0))["X"], roomy["X"])
    assert np.array_equal(np.bincount(roomy["silo"]), [300, 300, 300])


# ------------------------------------------------------------------------------------------ real cells


def fig12_job(cell="h2-U3-fast", **over):
    params = {"data": {"features": 4, "classes": 2, "records_per_silo": 20}, "silos": 2, "hidden": [2], "users": [3],
              "default_hidden": 2, "default_users": 3, "seeds": [0, 1], "rounds": 2, "batch": 4, "sigma": 5.0,
              "delta": 1e-5, "hyper": {"eta_g": 0.1, "clip": 1.0, "eta_l": 0.01, "epochs": 2},
              "implementations": ["fast", "reference"], "securities": ["paper", "secure"], "optimizer": "sgd",
              **SMALL, **over}
    own, _ = PROTOCOL.cell_params(params, {}, cell)
    return SimpleNamespace(params=own, cell=cell, seed=0)


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_fig12_cell_times_every_phase_and_checks_the_decryption(optimizer):
    df = run_cell(fig12_job(optimizer=optimizer), {}, lambda *a: None).table
    per_seed = df.groupby(["seed", "phase"]).size().unstack()
    # per run: one key exchange, one blinded histogram (-w), local training per silo and round, aggregation per round
    assert per_seed.to_dict("index") == {s: {"aggregation": 2, "blinded histogram": 1, "key exchange": 1,
                                             "local training": 4} for s in (0, 1)}
    assert (df.loc[df["phase"] == "key exchange", "round"] == 0).all() and (df["seconds"] > 0).all()
    lt = df[df["phase"] == "local training"]
    assert sorted(lt.groupby(["seed", "round"])["silo"].apply(list).iloc[0]) == [0, 1]
    assert (df["decrypted_rel_err"] < 1e-8).all() and (df["params"] == 16).all()  # Linear(4,2)-ReLU-Linear(2,2)
    assert (df["records_dropped"] == 0).all() and df["optimizer"].iloc[0] == optimizer and df["threads"].iloc[0] == 1
    # the fast weighting's full-size exponentiations: c_u of every (silo, user) pair in round 1, none in round 2
    work = lt.pivot_table(index=["seed", "silo"], columns="round", values="full_exponentiations")
    assert (work[1] >= 1).all() and (work[1] <= 3).all() and (work[2] == 0).all()
    assert (df.loc[df["phase"] != "local training", "full_exponentiations"] == 0).all()
    nominal, certified = epsilon_curves(BY_ID["uldp_avg_w"], 2, 5.0, 1e-5)
    assert (df["eps"].iloc[0] == pytest.approx(nominal[-1])
            and df["eps_certified"].iloc[0] == pytest.approx(certified[-1]))


def test_fig12_cell_drops_records_above_the_bound_and_both_implementations_agree():
    fast = run_cell(fig12_job("h2-U3-fast", seeds=[0], data={"features": 4, "classes": 2, "records_per_silo": 60}),
                    {}, lambda *a: None).table
    assert fast["records_dropped"].iloc[0] > 0  # 120 records, 3 users: ≈ 40 each > N̄ = 30
    assert (fast["decrypted_rel_err"] < 1e-8).all()


@pytest.mark.parametrize("impl", ["fast", "reference"])
def test_fig12_secure_cell_re_randomises_every_coordinate_and_decrypts_to_the_plaintext(impl):
    """The secure mode's cell: the same phases and checks; each silo's weighting adds one full-size exponentiation per
    coordinate and round (its fresh r^n), so the fast path's second round costs exactly the 16 coordinates."""
    df = run_cell(fig12_job(f"h2-U3-{impl}-secure"), {}, lambda *a: None).table
    assert (df["security"] == "secure").all() and df["simulation"].all()
    assert (df["decrypted_rel_err"] < 1e-8).all() and set(df["phase"]) == set(PHASES)
    work = df[df["phase"] == "local training"].pivot_table(index=["seed", "silo"], columns="round",
                                                           values="full_exponentiations")
    if impl == "fast":
        assert (work[1] >= 16 + 1).all() and (work[2] == 16).all()
    else:
        assert (work[2] > 16).all()


def test_a_secure_cell_on_a_small_key_is_refused_outside_a_simulation():
    params = fig12_job().params | {"simulation": False}
    figure = {"data": {"features": 4, "classes": 2, "records_per_silo": 20}, "silos": 2, "hidden": [2], "users": [3],
              "default_hidden": 2, "default_users": 3, "implementations": ["fast"], "securities": ["paper", "secure"],
              "key_bits": 1024, "simulation": False}
    with pytest.raises(ValueError, match=r"security: secure refuses a 1024-bit Paillier key .*simulation: true"):
        PROTOCOL.cells(figure)
    assert PROTOCOL.cells({**figure, "securities": ["paper"]}) == ["h2-U3-fast"]  # the paper's mode: as it was
    assert PROTOCOL.cells({**figure, "simulation": True}) == ["h2-U3-fast", "h2-U3-fast-secure"]
    with pytest.raises(ValueError, match="simulation: true"):
        run_cell(SimpleNamespace(params={**params, "security": "secure"}, cell="h2-U3-fast-secure", seed=0), {},
                 lambda *a: None).table


@pytest.fixture(scope="module")
def tcga(tmp_path_factory, tcga_arrays):
    """A TCGA-shaped prepared file (2 centres, 40 training records) and one zipf allocation of 6 users."""
    d = tmp_path_factory.mktemp("kato_protocol")
    prepared = tcga_arrays([20, 20], test=10)
    np.savez(d / "tcga_brca.npz", **prepared)
    panel = {"id": "t6", "dataset": "tcga_brca", "allocation": "tcga_brca", "users": 6, "distribution": "zipf",
             "silos": 2, "batch": 8}
    alloc = build_flamby(prepared, {"dataset": "tcga_brca", "distribution": "zipf", "users": 6, "silos": 2, "seed": 0,
                                    "global_seed": 0, "user_alpha": 0.5, "main_ratio": 0.8, "min_records": 2},
                         log=lambda *a: None)
    np.savez(d / "alloc.npz", **alloc)
    inputs = {"prepared": {"tcga_brca": str(d / "tcga_brca.npz")},
              "allocations": {panel_allocation(panel, 0): str(d / "alloc.npz")}}
    return panel, inputs


def test_fig11_cell_on_a_flamby_allocation(tcga):
    panel, inputs = tcga
    params = {"panels": [panel], "seeds": [0], "rounds": 2, "sigma": 5.0, "delta": 1e-5,
              "hyper": {"eta_g": 10.0, "clip": 0.1, "eta_l": 0.001, "epochs": 2}, "implementations": ["reference"],
              "securities": ["paper"], "optimizer": "sgd", **SMALL}
    assert PROTOCOL.needs(params) == (("tcga_brca",), ("kato2024-tcga_brca/zipf-U6-S2-seed0",))
    own, _ = PROTOCOL.cell_params(params, {}, "t6-reference")
    df = run_cell(SimpleNamespace(params=own, cell="t6-reference", seed=0), inputs, lambda *a: None).table
    assert set(df["phase"]) == set(PHASES) and (df["decrypted_rel_err"] < 1e-8).all()
    assert (df["dataset"] == "tcga_brca").all() and (df["params"] == 40).all() and (df["silos"] == 2).all()
    assert (df["implementation"] == "reference").all()


# ------------------------------------------------------------------------------------------ table, claims, plot


def fake_cells(params: dict, seconds) -> list[pd.DataFrame]:
    """Cell tables as run_cell writes them, with seconds(setting meta, phase, silo, round, impl) chosen by hand."""
    out = []
    for cell in PROTOCOL.cells(params):
        own, _ = PROTOCOL.cell_params(params, {}, cell)
        setting, impl, security = parse_cell(cell)
        if is_fig11(own):
            meta = {"panel": setting, "dataset": own["panel"]["dataset"], "users": own["panel"]["users"],
                    "silos": own["panel"]["silos"], "params": 14 if own["panel"]["dataset"] == "heart_disease" else 40}
        else:
            meta = {"panel": setting, "dataset": "artificial", "users": own["users"], "silos": own["silos"],
                    "params": {2: 16, 4: 30, 8: 58, 15: 107}[own["hidden"]], "hidden": own["hidden"]}
        meta["security"] = security
        rows = []
        for seed in own["seeds"]:
            rows.append({"seed": seed, "round": 0, "phase": "key exchange", "silo": -1,
                         "seconds": seconds(meta, "key exchange", -1, 0, impl)})
            for t in range(1, own["rounds"] + 1):
                if t == 1:
                    rows.append({"seed": seed, "round": 1, "phase": "blinded histogram", "silo": -1,
                                 "seconds": seconds(meta, "blinded histogram", -1, 1, impl)})
                rows += [{"seed": seed, "round": t, "phase": "local training", "silo": s,
                          "seconds": seconds(meta, "local training", s, t, impl)} for s in range(meta["silos"])]
                rows.append({"seed": seed, "round": t, "phase": "aggregation", "silo": -1,
                             "seconds": seconds(meta, "aggregation", -1, t, impl)})
        out.append(pd.DataFrame(rows).assign(**meta, implementation=impl, optimizer="sgd", key_bits=3072,
                                             rounds=own["rounds"], threads=1, device="cpu", cpu="test",
                                             decrypted_rel_err=1e-11, eps=1.0, eps_certified=1.0, records_dropped=0))
    return out


def paper_like(meta, phase, silo, t, impl):
    """Times shaped as the paper reports: local training ∝ users × params and dominant, aggregation ∝ params; the
    secure mode's local training twice the paper protocol's."""
    slow = 3.0 if impl == "reference" else 1.0
    secure = 2.0 if meta["security"] == "secure" and phase == "local training" else 1.0
    return {"key exchange": 0.01, "blinded histogram": 0.002 * meta["users"],
            "local training": secure * slow * 0.001 * meta["users"] * meta["params"] * (1 + 0.1 * silo),
            "aggregation": 0.001 * meta["params"]}[phase]


def verdicts(figure: str, df: pd.DataFrame) -> dict:
    cfg = config.load(ROOT, {"scale": "paper"})
    spec = cfg.papers["kato2024"]["figures"][figure]
    return {c["id"]: claims.evaluate_claim(df, c, "real")["verdict"] for c in spec["claims"]}


def test_fig11_table_per_run_totals_speedups_and_c_k11():
    params = {**yaml_params("fig11"), "seeds": [0, 1]}
    df = tidy.finalize(table(params, fake_cells(params, paper_like), lambda *a: None), "kato2024", "fig11")
    row = df[(df["quantity"] == "phase_seconds") & (df["panel"] == "heart100") & (df["implementation"] == "fast")
             & (df["security"] == "paper")]
    lt = row[row["phase"] == "local training"].iloc[0]
    # a silo's local training per run = 3 rounds × 0.001·U·P·(1 + 0.1·s); mean over silos 0..3 and both runs
    assert lt["y"] == pytest.approx(3 * 0.001 * 100 * 14 * np.mean([1, 1.1, 1.2, 1.3]))
    assert lt["per_round"] == pytest.approx(lt["y"] / 3) and lt["x"] == 100
    agg = row[row["phase"] == "aggregation"].iloc[0]
    assert agg["y"] == pytest.approx(3 * 0.014) and agg["y_std"] == pytest.approx(0.0)
    silo3 = df[(df["quantity"] == "silo_seconds") & (df["panel"] == "heart100") & (df["implementation"] == "fast")
               & (df["x"] == 3) & (df["security"] == "paper")].iloc[0]
    assert silo3["y"] == pytest.approx(3 * 0.001 * 100 * 14 * 1.3)
    sp = df[(df["quantity"] == "speedup") & (df["phase"] == "local training")]
    assert len(sp) == 8 and np.allclose(sp["y"], 3.0) and set(sp["security"]) == {"paper", "secure"}
    # the secure mode's cost beside the paper's protocol: local training twice as long, the other phases the same
    over = df[df["quantity"] == "secure_overhead"]
    assert len(over) == 4 * 2 * 4 and (over["security"] == "secure/paper").all()
    lt_over = over[over["phase"] == "local training"]
    assert np.allclose(lt_over["y"], 2.0) and np.allclose(over.loc[over["phase"] != "local training", "y"], 1.0)
    fast100 = lt_over[(lt_over["panel"] == "heart100") & (lt_over["implementation"] == "fast")].iloc[0]
    assert fast100["per_round"] == pytest.approx(lt["per_round"])  # + one paper round's worth per round
    assert verdicts("fig11", df) == {"C-K11": "pass"}

    def histogram_dominates(meta, phase, silo, t, impl):
        return 50.0 if phase == "blinded histogram" and meta["users"] == 100 else paper_like(meta, phase, silo, t, impl)

    df = table(params, fake_cells(params, histogram_dominates), lambda *a: None)
    assert verdicts("fig11", tidy.finalize(df, "kato2024", "fig11")) == {"C-K11": "fail"}

    def secure_histogram_dominates(meta, phase, silo, t, impl):  # C-K11 is the paper protocol's claim only
        if meta["security"] == "secure":
            return histogram_dominates(meta, phase, silo, t, impl)
        return paper_like(meta, phase, silo, t, impl)

    df = table(params, fake_cells(params, secure_histogram_dominates), lambda *a: None)
    assert verdicts("fig11", tidy.finalize(df, "kato2024", "fig11")) == {"C-K11": "pass"}


def test_fig12_table_sweeps_ratios_and_c_k12():
    params = yaml_params("fig12")
    df = tidy.finalize(table(params, fake_cells(params, paper_like), lambda *a: None), "kato2024", "fig12")
    ph = df[(df["quantity"] == "phase_seconds") & (df["security"] == "paper")]
    # the default setting (h = 2, U = 20) appears in both sweeps
    assert sorted(ph.loc[(ph["sweep"] == "params") & (ph["phase"] == "aggregation") & (ph["implementation"] == "fast"),
                         "x"]) == [16, 30, 58, 107]
    assert sorted(ph.loc[(ph["sweep"] == "users") & (ph["phase"] == "aggregation") & (ph["implementation"] == "fast"),
                         "x"]) == [10, 20, 30, 40]
    ratio = df[(df["quantity"] == "last_over_first") & (df["phase"] == "blinded histogram") & (df["sweep"] == "users")]
    assert len(ratio) == 4 and np.allclose(ratio["y"], 4.0) and (ratio["x_first"] == 10).all()
    over = df[(df["quantity"] == "secure_overhead") & (df["phase"] == "local training")]
    assert len(over) == 2 * (4 + 4) and np.allclose(over["y"], 2.0)  # per sweep point and implementation
    assert verdicts("fig12", df) == {"C-K12": "pass"}

    def aggregation_grows_with_users(meta, phase, silo, t, impl):
        base = paper_like(meta, phase, silo, t, impl)
        return base * meta["users"] / 10 if phase == "aggregation" else base

    df = table(params, fake_cells(params, aggregation_grows_with_users), lambda *a: None)
    assert verdicts("fig12", tidy.finalize(df, "kato2024", "fig12")) == {"C-K12": "fail"}


def test_plots_draw_both_figures(tmp_path):
    from dpfl.papers.kato2024.protocol import plot

    for figure, draw in (("fig11", plot.fig11), ("fig12", plot.fig12)):
        params = {**yaml_params(figure), "seeds": [0]}
        df = table(params, fake_cells(params, paper_like), lambda *a: None)
        fig = draw(df, {"plot": {}}, {})
        fig.savefig(tmp_path / f"{figure}.png")
        assert (tmp_path / f"{figure}.png").stat().st_size > 10_000
        bars = sum(len(ax.patches) for ax in fig.axes)
        lines = sum(len(ax.lines) for ax in fig.axes)
        assert (bars if figure == "fig11" else lines) > 0
        titles = " ".join(ax.get_title() for ax in fig.axes)
        if figure == "fig11":  # readers' names, no internal ids (panel heart10, dataset heart_disease)
            assert "HeartDisease, U = 10" in titles and "TcgaBrca" in titles
            assert not any(s in titles for s in ("heart10", "tcga100", "heart_disease", "tcga_brca", "round(s)"))


def test_report_table_lists_both_implementations_and_the_decryption_check():
    from dpfl.papers.kato2024.protocol.plot import phase_markdown

    params = {**yaml_params("fig11"), "seeds": [0, 1]}
    md = phase_markdown(table(params, fake_cells(params, paper_like), lambda *a: None), {})
    row = next(line for line in md.splitlines() if line.startswith("| heart100") and "local training" in line)
    assert "| paper |" in row and "| 3.0× |" in row and row.endswith("| 1.0e-11 |")
    secure = next(line for line in md.splitlines()
                  if line.startswith("| heart100") and "local training | secure" in line)
    assert "| 2.00× (+" in secure and " / 2.00× (+" in secure  # the secure mode's cost, fast / reference
    assert md.count("| tcga10 ") == 8 and "Paillier 3072-bit" in md


def test_timed_cells_claim_every_local_core_and_other_cells_do_not():
    """Fig 11/12 cells measure wall-clock time: a local run gives them the machine alone (the rule's threads), a
    cluster run (no local core count) asks for the configured threads; training cells always the configured ones."""
    from dpfl import jobs

    cfg = config.load(ROOT, {"scale": "quick"})
    assert jobs.cell_threads(cfg, "kato2024", "fig11", "heart10-fast", "none", 8) == 8
    assert jobs.cell_threads(cfg, "kato2024", "fig12", "h2-U20-reference", "none", None) == cfg.globals["threads"]
    assert jobs.cell_threads(cfg, "kato2024", "fig6", "a", "none", 8) == cfg.globals["threads"]


# ------------------------------------------------------------------------------------------ a cell's settings


def _cell_params(figure: str, cell: str, **overrides) -> dict:
    cfg = config.load(ROOT, {"scale": "smoke"})
    own, _ = ProtocolLayout().cell_params(cfg.figure_params("kato2024", figure, "none"), {}, cell)
    return {**own, **overrides}


def test_a_cells_settings_are_typed_once_for_either_figure():
    fig11 = ProtocolSettings.from_params(_cell_params("fig11", "heart10-fast"))
    assert fig11.panel is not None and fig11.data is None and fig11.setting == "heart10"
    assert (fig11.silos, fig11.users, fig11.batch) == (fig11.panel.silos, fig11.panel.users, fig11.panel.batch)
    assert fig11.panel.allocation_name(3) == panel_allocation(_cell_params("fig11", "heart10-fast")["panel"], 3)
    fig12 = ProtocolSettings.from_params(_cell_params("fig12", "h2-U20-reference"))
    assert fig12.panel is None and fig12.setting == "h2-U20" and fig12.implementation == "reference"
    assert isinstance(fig12.data, ArtificialData) and fig12.hidden == 2 and fig12.users == 20
    assert fig12.security.level == "paper" and fig12.hyper.clip == 1.0


@pytest.mark.parametrize(("overrides", "message"), [
    ({"sigmas": 1.0}, r"unknown key\(s\) \['sigmas'\]"),
    ({"implementation": "fastest"}, r"params.implementation: 'fastest'; allowed: fast, reference"),
    ({"optimizer": "rmsprop"}, r"params.optimizer: 'rmsprop'; allowed: sgd, adam"),
    ({"rounds": 0}, r"rounds: 0; expected an integer ≥ 1"),
    ({"seeds": []}, r"params.seeds is empty"),
    ({"security": "secure", "simulation": False}, r"refuses a 1024-bit Paillier key"),
])
def test_a_bad_cell_setting_is_refused_at_the_boundary_naming_its_key(overrides, message):
    with pytest.raises(ValueError, match=message):
        ProtocolSettings.from_params(_cell_params("fig12", "h2-U20-fast", **overrides))
