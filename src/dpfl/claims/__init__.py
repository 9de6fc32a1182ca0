"""Machine checks of the papers' claims on a figure's tidy table (docs/claims.md).

A claim (config/papers/<id>.yaml, `claims:`) is a list of checks; each check is one comparison of
rows of the table, chosen by column values ("selectors"). Every "better than" comparison follows one rule
(selection.count_verdict): at each point A vs B is a win (A better by more than the tolerance), a loss (B better
by more than the tolerance) or a tie, and a tie is never a win; a claim over several points or panels passes on
wins alone, fails when even every tie counted as a win cannot reach its count, and is inconclusive otherwise.
Only claims of equivalence (op "abs<=": "in line with") pass within their tolerance. Verdicts:
  pass          the wins reach what the claim needs;
  fail          losses make it unreachable;
  inconclusive  it hinges on ties (or there was nothing to compare); also a check whose selection finds no rows
                in the table (NoRowsError: settings that do not produce
                what the claim selects, e.g. a σ edited out of the grid), with a reason naming the claim, the
                selection and the values the table holds, and cause `no-rows`; a malformed claim is a configuration
                error before any job (the schema), and another ClaimSpecError (e.g. a selector column the table
                lacks) stops the claims job naming the claim;
  stand-in      the table was computed on synthetic stand-in data: not evidence (the underlying verdict
                is kept in `verdict_on_data`).
A claim's verdict is the worst of its checks (fail > inconclusive > pass). Each check returns the
numbers behind its verdict so that a reader can judge the margin, and a `reason`: one sentence built from those
numbers (REASONS: one builder per kind; `claim_reason` joins the checks that decided the verdict). `cause_of`
names why a verdict is not a pass, where known: no-rows, stand-in, documented-difference, paper-inconsistent (the
claim's `paper_inconsistent` says why the paper contradicts itself), reduced-scale, not-reproduced.

Check kinds (keys in brackets are optional; `CHECK_KEYS` (schema.py) is the exact list of each kind's keys,
and the configuration schema of a check is generated from it by `check_schema()`):
  compare           left OP factor·right + offset, pointwise on x [match_on: other columns that pair rows;
                    left_column / right_column: each side's value (default column), e.g. |gap| vs the signed gap;
                    per_figure: {figure: {select, op}} on that figure's rows (a loss panel: lower is better);
                    op "abs<=" with max_diff: |left − right| ≤ max_diff; at: first|last (only the
                    smallest/largest x); min_points: how many points must be wins, per
                    group (group_by, else the match_on columns: per panel) (default all);
                    group_by + min_group_share | min_groups: how many groups must pass; max_losses: fail when
                    more points are losses (e.g. 0: "and a loss in none"); tol_se: the
                    tolerance is at least the standard error of the difference (column se); rel_tol: a point
                    with |left − right| ≤ rel_tol·min(|left|, |right|) is within the tolerance (symmetric; for
                    values of one sign |ln(left/right)| ≤ ln(1 + rel_tol)), the largest of tol, tol_se and
                    rel_tol applying]
  eventually        some grid x0 has a win at every x ≥ x0 (reports the smallest); fails on a loss at the
                    largest x, else inconclusive [match_on, at, factor, op "abs<=" with max_diff, tol_se,
                    group_by: as compare]
  mean_relative_gap mean of (right − left)/right ≥ min [match_on, at]
  slope             min ≤ least-squares slope of log y against log x ≤ max (growth like x^slope), at least one
                    of min, max [group_by: each group separately]
  order             for `by` = values[0], values[1], …: y[v0] OP y[v1] OP …, pointwise [group_by]
  monotone          y strictly/weakly increasing or decreasing in x within each group [strict, group_by]
  bounds            lower ≤ value ≤ upper; lower/upper are numbers or column names, at least one of them
                    [lower_strict, upper_strict, min_points, group_by + min_group_share | min_groups, tol_se;
                    min_point_share: wins needed as a share of all points; misses_at_smallest_x: in every group
                    the points that are not wins lie at its smallest x]
  near              |y(x) − target| ≤ rel_tol·|target|
  ratio             min ≤ numerator/denominator ≤ max, pointwise; at least one of min, max
                    [interpolate: none|linear|loglog]
  successive_ratio  y[i+1]/y[i] ≥ min along x
  crossing          x where each curve first reaches the line (identity: y = x); first's crossing must
                    lie at a larger x than second's, when both exist [match_on]
  jointly           `checks` (any kinds) that must all pass on the rows of one group (group_by), e.g. "in ≥ 1
                    panel, both conditions"; a group with none failing but some inconclusive is inconclusive
                    [select, min_groups | min_group_share: how many groups must pass (default all)]
All kinds accept `select` (rows to use) and `column` (default y), all but near (which takes one x) accept
`where_x` (gt/ge/lt/le); compare, eventually, order, monotone and bounds also accept `tol` (an absolute
tolerance: a point within it is a tie); monotone alone accepts `tol_counts: for` ("non-increasing within tol": a
step within the tolerance keeps the curve monotone). Any check may carry
`inferred` (why a threshold the paper does not give was chosen) and `reduced_scale: {why, settings}` (why a run
below paper scale does not compare like with like here: added to the cause of a reduced-scale verdict the check
decided, when one of `settings` is reduced); neither changes the check.

The package, one concern a module (each imports only the ones listed before it, by absolute imports:
dpfl.codedeps and tests/test_architecture.py read those):
  selection      choosing, labelling and pairing rows of the table; the pointwise and per-group tallies the kinds
                 share
  paired         the check kinds on the paired points of a left and a right selection (compare, eventually,
                 mean_relative_gap)
  checks         the other check kinds, one function each, and the registry of all of them (CHECKS)
  schema         the keys of each kind (CHECK_KEYS) and the configuration schema generated from them (check_schema)
  formats        how the reasons write numbers (fmt, fmt_x, fmt_cfg)
  reasons        the sentence of a check, one builder per kind (REASONS, check_reason)
  claim_reasons  the sentence of a claim (claim_reason) and of a check whose selection found no rows
                 (no_rows_reason)
  verdicts       a claim's verdict (evaluate_claim, evaluate), why a verdict is not a pass (cause_of), and
                 helpers for the report (summarize_check, rounded)
This module re-exports their public names (and `_crossing`, which the tests use), so that
`from dpfl.claims import ...` and `dpfl.claims.<name>` keep working.
"""

from __future__ import annotations

from dpfl.claims.checks import CHECKS, _crossing  # noqa: F401  (_crossing: for the tests)
from dpfl.claims.claim_reasons import VERB, claim_reason, no_rows_reason
from dpfl.claims.formats import fmt, fmt_cfg, fmt_x
from dpfl.claims.reasons import NOT_OP, OP_TEXT, REASONS, check_reason
from dpfl.claims.schema import (
    CHECK_KEYS,
    CHECK_META_KEYS,
    CHECK_SCHEMA_ID,
    KEY_SCHEMAS,
    SELECTOR_SCHEMA,
    WHERE_X_SCHEMA,
    CheckKeys,
    check_keys,
    check_schema,
)
from dpfl.claims.selection import OPS, SEVERITY, ClaimSpecError, NoRowsError, describe_no_rows, select
from dpfl.claims.verdicts import (
    CAUSES,
    cause_of,
    evaluate,
    evaluate_claim,
    rounded,
    summarize_check,
    x_name_of,
)

__all__ = [
    # selection
    "OPS", "SEVERITY", "ClaimSpecError", "NoRowsError", "describe_no_rows", "select",
    # checks
    "CHECKS",
    # schema
    "CHECK_KEYS", "CHECK_META_KEYS", "CHECK_SCHEMA_ID", "KEY_SCHEMAS", "SELECTOR_SCHEMA", "WHERE_X_SCHEMA", "CheckKeys",
    "check_keys", "check_schema",
    # formats, reasons, claim_reasons
    "fmt", "fmt_cfg", "fmt_x", "NOT_OP", "OP_TEXT", "REASONS", "check_reason", "VERB", "claim_reason", "no_rows_reason",
    # verdicts
    "CAUSES", "cause_of", "evaluate", "evaluate_claim", "rounded", "summarize_check", "x_name_of",
]
