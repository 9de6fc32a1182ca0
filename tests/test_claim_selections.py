"""Every claim selects rows at every scale, in every mode, before anything is built.

A claim's check selects rows of its figure's tidy table by column values (`select`, `left`, `right`, `by`/`values`,
`x`, `where_x`, ...). Where a column's values come from the settings (kato2024's `implementation` from
params.implementations, `method` from params.methods, `panel` from the panel ids; bietti2022's `sigma` and `level`
from the grid and `show`; lowy2023's `algorithm`, `panel` and x = the ε grid), a scale that drops a value a claim
selects leaves that claim nothing to check (smoke once ran Figs 11-12 with the fast implementation only, and
C-K11/C-K12 select the reference one). This test derives those values from each scale's settings, through the
figure family's `table_values` hook (dpfl.figure.FigureLayout), and checks every selection of every claim against
them: the figures' own claims and the paper-level claims over several figures (panels renamed <figure>/<panel>), in
both modes where a figure has `compat: authors-code`. An analytic figure's table is computed (closed forms,
milliseconds) and the selections are applied to it as the claims stage does.

A list of values selects rows holding any of them; at paper scale every listed value must be there (a claim must not
silently check fewer cases than it says), at a reduced scale at least one.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pandas as pd
import pytest

from dpfl import config, jobs, tidy
from dpfl.claims import select
from dpfl.io import resolve
from dpfl.papers import FIGURES, MODES
from dpfl.stages.claims import concat_tables

ROOT = Path(__file__).resolve().parent.parent
SCALES = ("smoke", "quick", "paper")
SIDES = ("left", "right", "first", "second", "numerator", "denominator")
#: selector columns of experiment figures whose values no setting lists (not checked here), and why
UNCHECKED = {
    ("bietti2022", "late"): "a round's position in the run (x ≥ 5T/6), true or false in every run",
    ("bietti2022", "half"): "a round's half of the run, first or second in every run",
}


@pytest.fixture(scope="module")
def configs():
    return {scale: config.load(ROOT, {"scale": scale}) for scale in SCALES}


# ------------------------------------------------------------------------------------------------ what a table holds


def figure_mode(paper: str, figure: str, mode: str) -> str:
    return mode if FIGURES[(paper, figure)].has_compat else "none"


def analytic_table(cfg, paper: str, figure: str, mode: str) -> pd.DataFrame:
    fdef = FIGURES[(paper, figure)]
    params = cfg.figure_params(paper, figure, mode)
    return tidy.finalize(resolve(fdef.table)(params, lambda *a: None), paper, figure)


def known_values(cfg, paper: str, figure: str, mode: str) -> dict[str, set] | pd.DataFrame:
    """An analytic figure: its table; an experiment figure: its layout's table_values (column -> values), with the
    figure column every tidy table holds (its id; per_figure and claims over several figures select by it)."""
    fdef = FIGURES[(paper, figure)]
    if fdef.kind == "analytic":
        return analytic_table(cfg, paper, figure, mode)
    values = jobs.layout(paper, figure).table_values(cfg.figure_params(paper, figure, mode), fdef.table)
    return {**values, "figure": {figure}} if values else values


def as_values(known) -> dict[str, set]:
    if isinstance(known, pd.DataFrame):
        return {c: set(known[c].dropna()) for c in known.columns}
    return known


def union_known(parts: dict):
    """What the concatenated tables of several figures hold (panels renamed <figure>/<panel>): a claim over several
    figures, or a selection naming some of them."""
    if all(isinstance(p, pd.DataFrame) for p in parts.values()):
        return concat_tables(parts)
    out: dict[str, set] = {}
    for f, part in parts.items():
        values = dict(as_values(part))
        if "panel" in values:
            values["panel"] = {f"{f}/{p}" for p in values["panel"]}
        for col, vals in values.items():
            out.setdefault(col, set()).update(vals)
    # a column some figure does not declare is unknown for the union
    declared = [set(as_values(p)) for p in parts.values()]
    return {c: v for c, v in out.items() if all(c in d for d in declared)}


# ------------------------------------------------------------------------------------------------ the check


def selections(check: dict) -> list[tuple[str, dict]]:
    """(name, selector) of every row selection a check makes (as dpfl.claims.checks and dpfl.claims.paired do): with
    compare's per_figure, also each named figure's (its selection merged into `select`, on that figure's rows)."""
    base = dict(check.get("select") or {})
    if check["kind"] == "order":
        return [(f"{check['by']} = {v}", {**base, check["by"]: v}) for v in check["values"]]
    bases = [("", base)] + [(f" on {fig}", {**base, **o.get("select", {}), "figure": fig})
                            for fig, o in (check.get("per_figure") or {}).items()]
    sides = [(side + on, {**b, **check[side]}) for on, b in bases for side in SIDES if side in check]
    return sides or [("select", base)]


def flat_checks(claim: dict) -> list[tuple[str, dict]]:
    """(number, check) of a claim's checks, a `jointly` check's own checks numbered under it (1.1, 1.2, …) with its
    selection merged into theirs (they select within its rows)."""
    out = []
    for i, check in enumerate(claim["checks"], 1):
        out.append((str(i), check))
        if check["kind"] == "jointly":
            out += [(f"{i}.{j}", {**sub, "select": {**check.get("select", {}), **sub.get("select", {})}})
                    for j, sub in enumerate(check["checks"], 1)]
    return out


def _holds(values: set, value) -> bool:
    """Whether a column holding `values` has a row matching `value`, by dpfl.claims.select's rule."""
    if not values:
        return False
    return not select(pd.DataFrame({"c": sorted(values, key=repr)}), {"c": value}).empty


def _x_ok(xs: set, check: dict) -> bool:
    where = check.get("where_x") or {}
    ops = {"gt": lambda x, b: x > b, "ge": lambda x, b: x >= b, "lt": lambda x, b: x < b, "le": lambda x, b: x <= b}
    return any(all(ops[k](float(x), b) for k, b in where.items()) for x in xs)


def problems_of(claim: dict, known, *, strict_lists: bool, paper: str, where: str, parts: dict | None = None
                ) -> list[str]:
    """Why a claim's selections would find no rows (or fewer than it names) in a table holding `known`; `parts`: a
    claim over several figures, each figure's own values, against which a selection that names its figures (column
    figure, e.g. per_figure's) is checked."""
    out = []
    whole = known
    for i, check in flat_checks(claim):
        label = f"{where}: {claim['id']} check {i} ({check['kind']})"
        for name, sel in selections(check):
            known = whole
            if parts and "figure" in sel:
                named = sel["figure"] if isinstance(sel["figure"], list) else [sel["figure"]]
                known = union_known({f: parts[f] for f in named if f in parts}) if set(named) & set(parts) else whole
            if isinstance(known, pd.DataFrame):  # the table itself: select as the check does
                rows = select(known, sel, check.get("where_x"))
                if check["kind"] == "near":
                    rows = rows[(rows["x"] - check["x"]).abs() <= 1e-9 * max(1.0, abs(check["x"]))]
                if rows.empty:
                    out.append(f"{label}: {name} {sel} selects no rows")
                if strict_lists:
                    for col, value in sel.items():
                        for v in value if isinstance(value, list) else []:
                            if select(known, {**sel, col: v}, check.get("where_x")).empty:
                                out.append(f"{label}: {name} selects no rows with {col} = {v!r}")
                continue
            for col, value in sel.items():
                if col not in known:
                    if (paper, col) not in UNCHECKED:
                        out.append(f"{label}: {name} selects column {col!r}, whose values the layout's table_values "
                                   f"does not declare (declare them, or list the column in UNCHECKED with why)")
                    continue
                wanted = value if isinstance(value, list) else [value]
                missing = [v for v in wanted if not _holds(known[col], v)]
                if missing and (strict_lists or not isinstance(value, list) or len(missing) == len(wanted)):
                    out.append(f"{label}: {name} selects {col} = {value!r}, but this scale's table holds "
                               f"{col} {sorted(known[col], key=repr)} ({', '.join(map(repr, missing))} missing)")
            if "x" in known:
                if check.get("where_x") and not _x_ok(known["x"], check):
                    out.append(f"{label}: where_x {check['where_x']} keeps none of x {sorted(known['x'])}")
                if check["kind"] == "near" and not _holds(known["x"], check["x"]):
                    out.append(f"{label}: x = {check['x']} is not among x {sorted(known['x'])}")
    return out


def scale_problems(cfg, scale: str, paper: str) -> list[str]:
    """Every problem of every claim of a paper at one scale, in every mode."""
    out = []
    figures = cfg.papers[paper]["figures"]
    for figure in sorted(figures):
        claims = cfg.figure(paper, figure).get("claims", [])
        if not claims:
            continue
        for mode in MODES if FIGURES[(paper, figure)].has_compat else ("none",):
            known = known_values(cfg, paper, figure, mode)
            if not isinstance(known, pd.DataFrame) and not known:
                out.append(f"{scale} {paper}/{figure} ({mode}): has claims, but its layout declares no table_values")
                continue
            for claim in claims:
                out += problems_of(claim, known, strict_lists=scale == "paper", paper=paper,
                                   where=f"{scale} {paper}/{figure} ({mode})")
    for claim in cfg.papers[paper].get("claims", []):
        for mode in MODES if any(FIGURES[(paper, f)].has_compat for f in claim["figures"]) else ("none",):
            parts = {f: known_values(cfg, paper, f, figure_mode(paper, f, mode)) for f in claim["figures"]}
            out += problems_of(claim, union_known(parts), strict_lists=scale == "paper", paper=paper,
                               where=f"{scale} {paper} over {'+'.join(claim['figures'])} ({mode})", parts=parts)
    return out


# ------------------------------------------------------------------------------------------------ tests


@pytest.mark.parametrize("scale", SCALES)
@pytest.mark.parametrize("paper", sorted({p for p, _ in FIGURES}))
def test_every_claim_selects_rows_at_every_scale(configs, scale, paper):
    cfg = configs[scale]
    if paper not in cfg.papers:
        pytest.skip(f"{paper} is not configured")
    problems = scale_problems(cfg, scale, paper)
    assert not problems, "\n".join(problems)


def test_every_claimed_figure_is_covered(configs):
    """Every figure with claims is checked (an experiment figure through its layout's table_values)."""
    cfg = configs["paper"]
    for (paper, figure), fdef in FIGURES.items():
        if figure in cfg.papers.get(paper, {}).get("figures", {}) and cfg.figure(paper, figure).get("claims"):
            if fdef.kind == "experiment":
                assert jobs.layout(paper, figure).table_values(cfg.figure_params(paper, figure, "none"), fdef.table), \
                    (paper, figure)


def _with_params(cfg, paper: str, edits: dict[str, dict]):
    """A copy of a loaded configuration with some params of some figures replaced ({figure: {key: value}})."""
    cfg = copy.deepcopy(cfg)
    for figure, params in edits.items():
        cfg.papers[paper]["figures"][figure]["params"].update(params)
    return cfg


def test_the_check_finds_a_scale_that_drops_a_selected_value(configs):
    """Smoke's Figs 11-12 with the fast implementation only leave C-K11 and C-K12 (implementation:
    reference) nothing to check; bietti2022 Fig 1a without the σ of C-B1a-3/4 leaves them nothing; a lowy2023 ε grid
    without ε ≤ 0.25 leaves C-L5a's where_x nothing; kato2024 Fig 8 without ULDP-AVG-w has no loss-gap rows
    (C-K8b); Figs 4-7 without ULDP-SGD leave C-K4a/e (over several figures) nothing; Fig 5 without GROUP-2 leaves
    C-K5c's jointly checks nothing, and without ULDP-AVG-w C-K4d's fig5 selection (strict at paper scale)."""
    cfg = configs["smoke"]
    for figure, claim in (("fig11", "C-K11"), ("fig12", "C-K12")):
        found = scale_problems(_with_params(cfg, "kato2024", {figure: {"implementations": ["fast"]}}), "smoke",
                               "kato2024")
        assert any(claim in p and "implementation = 'reference'" in p for p in found), found

    # the σ that C-B1a-3 and C-B1a-4 select, edited out of Fig 1a's grid
    fig1a = {c["id"]: c for c in cfg.figure("bietti2022", "fig1a")["claims"]}
    sigma = fig1a["C-B1a-3"]["checks"][0]["select"]["sigma"]
    assert fig1a["C-B1a-4"]["checks"][0]["select"]["sigma"] == sigma
    grids = copy.deepcopy(cfg.figure_params("bietti2022", "fig1a", "none")["grids"])
    grids["synthetic"]["sigmas"] = [s for s in grids["synthetic"]["sigmas"] if s != sigma] + [50]
    found = scale_problems(_with_params(cfg, "bietti2022", {"fig1a": {"grids": grids}}), "smoke", "bietti2022")
    assert any("C-B1a-3" in p and f"sigma = {sigma}" in p for p in found), found
    assert any("C-B1a-4" in p and f"sigma = {sigma}" in p for p in found), found

    found = scale_problems(_with_params(cfg, "lowy2023", {"fig5": {"epsilons": [0.5, 1, 2]}}), "smoke", "lowy2023")
    assert any("C-L5a" in p and "where_x" in p for p in found), found

    found = scale_problems(_with_params(cfg, "kato2024", {"fig8": {"methods": ["uldp_avg"]}}), "smoke", "kato2024")
    assert any("C-K8b" in p and "loss_gap" in p for p in found), found

    edits = {f: {"methods": [m for m in cfg.figure_params("kato2024", f, "none")["methods"] if m != "uldp_sgd"]}
             for f in ("fig4", "fig5", "fig6", "fig7")}
    found = scale_problems(_with_params(cfg, "kato2024", edits), "smoke", "kato2024")
    assert any("C-K4a" in p and "over fig4+fig5+fig6+fig7" in p and "uldp_sgd" in p for p in found), found
    assert any("C-K4e" in p for p in found), found

    # the checks inside a `jointly` check (C-K5c), and per_figure's own selection (C-K4d/e on fig5)
    methods = [m for m in cfg.figure_params("kato2024", "fig5", "none")["methods"] if m != "uldp_group_2"]
    found = scale_problems(_with_params(cfg, "kato2024", {"fig5": {"methods": methods}}), "smoke", "kato2024")
    assert any("C-K5c check 1.1 (compare)" in p and "uldp_group_2" in p for p in found), found
    methods = [m for m in cfg.figure_params("kato2024", "fig5", "none")["methods"] if m != "uldp_avg_w"]
    found = scale_problems(_with_params(cfg, "kato2024", {"fig5": {"methods": methods}}), "paper", "kato2024")
    assert any("C-K4d check 1 (compare)" in p and "left on fig5" in p for p in found), found


def test_analytic_selections_are_applied_to_the_table(configs):
    """An analytic figure's claims are checked on its computed table: a value not on the grid is found."""
    cfg = configs["smoke"]
    df = analytic_table(cfg, "kato2024", "fig2", "none")
    claim = {"id": "C-T", "checks": [{"kind": "near", "select": {"conversion": "rdp"}, "x": 33, "target": 1,
                                      "rel_tol": 0.1},
                                     {"kind": "monotone", "select": {"conversion": "rpd"}, "direction": "increasing"}]}
    found = problems_of(claim, df, strict_lists=True, paper="kato2024", where="t")
    assert len(found) == 2 and "check 1 (near)" in found[0] and "rpd" in found[1], found
