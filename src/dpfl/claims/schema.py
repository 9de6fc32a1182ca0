"""The keys of each check kind (CHECK_KEYS, dpfl.claims) and the configuration schema generated from them
(check_schema(), served to the config validator by dpfl.config under CHECK_SCHEMA_ID)."""

from __future__ import annotations

import copy
from typing import NamedTuple

from dpfl.claims.checks import CHECKS
from dpfl.claims.selection import OPS

class CheckKeys(NamedTuple):
    """The keys one check kind reads (besides `kind` and CHECK_META_KEYS): `required` ones it indexes,
    `optional` ones it looks up with a default; `at_least_one`: optional keys of which one must be given
    (without any of them the check could not fail)."""

    required: tuple[str, ...]
    optional: tuple[str, ...] = ()
    at_least_one: tuple[str, ...] = ()


_ROWS = ("select", "where_x", "column")  # which rows and which value (see select())
_GROUP_SHARE = ("group_by", "min_points", "min_group_share", "min_groups", "max_losses")  # _reduce_groups

# The single source of truth for the keys of a check: the configuration schema (check_schema(), served to
# the config validator), the docstring of dpfl/claims/__init__.py and docs/claims.md ("Check kinds") follow it
# (tests/test_claim_schema.py compares).
# Rules derived from the keys a kind accepts (see _kind_schema): a kind with max_diff also accepts op
# "abs<=", which needs max_diff (and max_diff needs it); min_group_share / min_groups need group_by.
CHECK_KEYS: dict[str, CheckKeys] = {
    "compare": CheckKeys(("left", "right", "op"),
                         (*_ROWS, "left_column", "right_column", "per_figure", "match_on", "at", "factor", "offset",
                          "max_diff", "tol", "tol_se", "rel_tol", *_GROUP_SHARE)),
    "order": CheckKeys(("by", "values", "op"), (*_ROWS, "tol", "group_by")),
    "monotone": CheckKeys(("direction",), (*_ROWS, "strict", "tol", "tol_counts", "group_by")),
    "bounds": CheckKeys((), (*_ROWS, "lower", "upper", "lower_strict", "upper_strict", "tol", "tol_se",
                            "min_point_share", "misses_at_smallest_x", *_GROUP_SHARE),
                        at_least_one=("lower", "upper")),
    "near": CheckKeys(("x", "target", "rel_tol"), ("select", "column")),
    "ratio": CheckKeys(("numerator", "denominator"), (*_ROWS, "min", "max", "interpolate"),
                       at_least_one=("min", "max")),
    "successive_ratio": CheckKeys(("min",), _ROWS),
    "crossing": CheckKeys(("first", "second"), (*_ROWS, "match_on", "line")),
    "eventually": CheckKeys(("left", "right", "op"),
                            (*_ROWS, "match_on", "at", "factor", "max_diff", "tol", "tol_se", "group_by")),
    "mean_relative_gap": CheckKeys(("left", "right", "min"), (*_ROWS, "match_on", "at")),
    "slope": CheckKeys((), (*_ROWS, "min", "max", "group_by"), at_least_one=("min", "max")),
    "jointly": CheckKeys(("group_by", "checks"), ("select", "min_groups", "min_group_share")),
}
CHECK_META_KEYS = ("inferred", "reduced_scale")  # any kind: information for the reader, not read by the check

_SELECTOR = {"$ref": "#/$defs/selector"}
# The JSON schema of each key (the same for every kind that accepts it; op: see _kind_schema).
KEY_SCHEMAS: dict[str, dict] = {
    "select": _SELECTOR,
    "left": _SELECTOR,
    "right": _SELECTOR,
    "first": _SELECTOR,
    "second": _SELECTOR,
    "numerator": _SELECTOR,
    "denominator": _SELECTOR,
    "where_x": {"$ref": "#/$defs/where_x"},
    "column": {"type": "string", "description": "the value compared (default y)"},
    "left_column": {"type": "string", "description": "compare: the left side's value (default `column`)"},
    "right_column": {"type": "string", "description": "compare: the right side's value (default `column`)"},
    "per_figure": {"type": "object", "description": "compare: on the rows of these figures, this selection (merged "
                                                    "into `select`) and op, e.g. a loss panel where lower is better",
                   "additionalProperties": {"type": "object", "additionalProperties": False, "minProperties": 1,
                                            "properties": {"select": _SELECTOR, "op": {"enum": list(OPS)}}}},
    "by": {"type": "string", "description": "order: the column whose values are ordered"},
    "values": {"type": "array", "description": "order: the values of `by`, in the claimed order"},
    "group_by": {"type": "array", "items": {"type": "string"}},
    "match_on": {"type": "array", "items": {"type": "string"},
                 "description": "columns (besides x) that pair left and right rows"},
    "op": {"enum": list(OPS)},
    "max_diff": {"type": "number", "minimum": 0, "description": "op abs<=: |left − right| ≤ max_diff"},
    "at": {"enum": ["first", "last"], "description": "compare only at the smallest / largest x"},
    "min_points": {"type": "integer", "minimum": 0,
                   "description": "points that must satisfy the claim beyond the tolerance, per group (compare: "
                                  "group_by, else match_on) (default all)"},
    "min_group_share": {"type": "number", "minimum": 0, "maximum": 1,
                        "description": "with group_by: share of groups that must pass"},
    "min_groups": {"type": "integer", "minimum": 1, "description": "with group_by: number of groups that must pass"},
    "tol_se": {"type": "boolean", "description": "tolerance at least the standard error of the difference (column se)"},
    "factor": {"type": "number", "description": "compare: the right side is multiplied by this"},
    "offset": {"type": "number",
               "description": "compare: then this is added to the right side (e.g. −0.05: 'below right − 0.05')"},
    "direction": {"enum": ["increasing", "decreasing"]},
    "strict": {"type": "boolean"},
    "lower": {"type": ["number", "string"], "description": "a number or a column name"},
    "upper": {"type": ["number", "string"], "description": "a number or a column name"},
    "lower_strict": {"type": "boolean"},
    "upper_strict": {"type": "boolean"},
    "x": {"type": "number"},
    "target": {"type": "number"},
    "rel_tol": {"type": "number", "minimum": 0,
                "description": "relative tolerance. near: |y − target| ≤ rel_tol·|target| passes; compare: a point "
                               "with |left − right| ≤ rel_tol·min(|left|, |right|) (right after factor and offset; for "
                               "values of one sign |ln(left/right)| ≤ ln(1 + rel_tol)) is within the tolerance, the "
                               "larger of this, tol and tol_se applying"},
    "tol": {"type": "number", "minimum": 0,
            "description": "absolute tolerance: a point within it is inconclusive (or satisfies the claim, "
                           "tol_counts: for)"},
    "tol_counts": {"enum": ["inconclusive", "for"],
                   "description": "monotone only: how a step within the tolerance counts: inconclusive (default) | "
                                  "for (it keeps the curve monotone: 'non-increasing within tol'). Every 'better "
                                  "than' comparison counts a point within the tolerance as a tie, never for the claim"},
    "max_losses": {"type": "integer", "minimum": 0,
                   "description": "compare: fail when more points than this are losses (beyond the tolerance the "
                                  "wrong way), e.g. 'a win in ≥ 75% of panels and a loss in none': 0"},
    "min_point_share": {"type": "number", "minimum": 0, "maximum": 1,
                        "description": "bounds: wins needed as a share of all selected points (count_verdict)"},
    "misses_at_smallest_x": {"type": "boolean",
                             "description": "bounds: in every group (group_by) the points that are not wins lie at "
                                            "the group's smallest x (the paper's 'except at small ε'): a loss "
                                            "elsewhere fails, a tie elsewhere is inconclusive"},
    "min": {"type": "number"},
    "max": {"type": "number"},
    "interpolate": {"enum": ["none", "linear", "loglog"]},
    "line": {"enum": ["identity"], "description": "crossing: the curve crossed, 'identity' for y = x"},
    "inferred": {"type": "string", "description": "why a threshold not given by the paper was chosen"},
    "reduced_scale": {
        "type": "object", "additionalProperties": False, "required": ["why"],
        "description": "why a run below paper scale does not compare like with like here (e.g. it cuts one method "
                       "family's local epochs and so its ε): added to the cause of a reduced-scale verdict that this "
                       "check decided, when one of `settings` (prefixes of the reduced keys; default any) is reduced",
        "properties": {"why": {"type": "string", "minLength": 1},
                       "settings": {"type": "array", "items": {"type": "string"}, "minItems": 1}}},
    "checks": {"type": "array", "minItems": 1, "items": {"$ref": "#"},
               "description": "jointly: the checks that must all pass on the rows of one group"},
}

SELECTOR_SCHEMA = {
    "description": "rows of the tidy table whose columns equal these values (a list means any of them)",
    "type": "object",
    "additionalProperties": {"anyOf": [{"type": ["string", "number", "boolean"]}, {"type": "array"}]},
}
WHERE_X_SCHEMA = {
    "description": "restrict x: gt / ge / lt / le",
    "type": "object",
    "additionalProperties": False,
    "properties": {k: {"type": "number"} for k in ("gt", "ge", "lt", "le")},
}

# The URI by which the schema files refer to the generated schema (common.schema.yaml, $defs.check);
# dpfl.config serves check_schema() for it.
CHECK_SCHEMA_ID = "urn:dpfl:claims:check"


def check_keys(kind: str) -> tuple[str, ...]:
    """Every key a check of this kind may have: kind, its required and optional keys, CHECK_META_KEYS."""
    spec = CHECK_KEYS[kind]
    return ("kind", *spec.required, *spec.optional, *CHECK_META_KEYS)


def _kind_schema(kind: str) -> dict:
    """The schema of one kind: exactly its keys, its required keys, and the rules between keys."""
    spec = CHECK_KEYS[kind]
    keys = check_keys(kind)
    title = f"kind '{kind}'"  # dpfl.config._describe appends it to the message of an error raised here
    properties = {"kind": {"const": kind}, **{k: KEY_SCHEMAS[k] for k in keys if k != "kind"}}
    out: dict = {"title": title, "type": "object", "additionalProperties": False}
    if spec.required:
        out["required"] = list(spec.required)
    rules: list[dict] = []
    if spec.at_least_one:
        one_of = ", ".join(map(repr, spec.at_least_one))
        rules.append({"title": title, "description": f"at least one of {one_of} is required",
                      "anyOf": [{"required": [k]} for k in spec.at_least_one]})
    if "max_diff" in keys:
        properties["op"] = {"enum": [*OPS, "abs<="], "description": "abs<=: |left − right| ≤ max_diff"}
        rules.append({"if": {"properties": {"op": {"const": "abs<="}}, "required": ["op"]},
                      "then": {"title": f"{title} with op 'abs<='", "required": ["max_diff"]}})
        out["dependentSchemas"] = {"max_diff": {"properties": {"op": {
            "const": "abs<=", "description": "max_diff applies only to op 'abs<='"}}}}
    if "tol_counts" in keys:
        needs = [k for k in ("tol", "tol_se", "rel_tol") if k in keys]  # monotone: tol
        rules.append({"if": {"required": ["tol_counts"]},
                      "then": {"title": f"{title} with tol_counts", "anyOf": [{"required": [k]} for k in needs],
                               "description": f"tol_counts needs a tolerance: {' or '.join(needs)}"}})
    dependent = {k: ["group_by"] for k in ("min_group_share", "min_groups") if k in keys}
    if dependent:
        out["dependentRequired"] = dependent
    out["properties"] = properties
    if rules:
        out["allOf"] = rules
    return out


def check_schema() -> dict:
    """The JSON schema (draft 2020-12) of one check of a claim, generated from CHECKS, CHECK_KEYS and
    KEY_SCHEMAS: `kind` must be one of CHECKS; then, per kind (an if/then in allOf, so that an error names
    the kind instead of listing every alternative as oneOf would), the kind's required keys, no other keys
    than its own, each of the type KEY_SCHEMAS gives. It has no defaults (a check's defaults live in the
    check functions). Served to the config validator under CHECK_SCHEMA_ID (see dpfl.config)."""
    assert set(CHECK_KEYS) == set(CHECKS), "CHECK_KEYS and CHECKS list different kinds"
    assert not {"selector", "where_x"} & set(CHECKS)
    return copy.deepcopy({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": CHECK_SCHEMA_ID,
        "description": "one comparison on the figure's tidy table (generated by dpfl.claims.check_schema() "
                       "from CHECK_KEYS; see dpfl/claims/checks.py for each kind)",
        "type": "object",
        "required": ["kind"],
        "properties": {"kind": {"enum": list(CHECKS)}},
        "allOf": [{"if": {"properties": {"kind": {"const": kind}}, "required": ["kind"]},
                   "then": {"$ref": f"#/$defs/{kind}"}} for kind in CHECKS],
        "$defs": {"selector": SELECTOR_SCHEMA, "where_x": WHERE_X_SCHEMA,
                  **{kind: _kind_schema(kind) for kind in CHECKS}},
    })
