"""The configuration schema of a claim's check is generated from dpfl.claims (CHECKS, CHECK_KEYS): one entry
per kind with exactly the keys its check function reads; config validation uses it (common.schema.yaml refers
to it by URI) with readable errors; the shipped configs validate; docs/claims.md and docstring list the kinds."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from jsonschema import Draft202012Validator

from dpfl import claims
from dpfl.claims import CHECK_KEYS, CHECK_META_KEYS, CHECKS, check_keys, check_schema
from test_claims import Recording

ROOT = Path(__file__).resolve().parent.parent
PAPER_FILES = sorted((ROOT / "config" / "papers").glob("*.yaml"))


@pytest.fixture(scope="module")
def config():
    from dpfl import config as config_module  # here: only the tests that validate through it need it

    return config_module


def schema_errors(check: dict) -> list:
    return list(Draft202012Validator(check_schema()).iter_errors(check))


# A check of each kind with every key its kind accepts, on TABLE (all valid; ALL_KEYS checks they are all).
TABLE = pd.DataFrame([
    {"paper": "demo", "figure": "f", "panel": "a", "curve": c, "g": g, "x": float(x),
     "y": float(x * (1 if c == "A" else 2)), "se": 0.1, "lo": 0.0, "hi": 100.0}
    for c in ("A", "B") for g in ("g1", "g2") for x in range(1, 5)])
_ROWS = {"select": {"panel": "a"}, "where_x": {"ge": 1}, "column": "y"}
FULL = {
    "compare": {"kind": "compare", "left": {"curve": "A"}, "right": {"curve": "B"}, "op": "abs<=", "max_diff": 100.0,
                **_ROWS, "left_column": "y", "right_column": "hi", "per_figure": {"other": {"op": "<"}},
                "match_on": ["panel"], "at": "last", "factor": 1.0, "offset": 0.0, "tol": 0.01, "tol_se": True,
                "rel_tol": 0.05, "group_by": ["g"], "min_points": 1, "min_group_share": 0.5,
                "min_groups": 1, "max_losses": 0, "inferred": "why"},
    "order": {"kind": "order", "by": "curve", "values": ["A", "B"], "op": "<", **_ROWS, "tol": 0.01,
              "group_by": ["g"],
              "inferred": "why"},
    "monotone": {"kind": "monotone", "direction": "increasing", **_ROWS, "strict": True, "tol": 0.01,
                 "tol_counts": "for", "group_by": ["g"],
                 "inferred": "why"},
    "bounds": {"kind": "bounds", "lower": 0.0, "upper": "hi", **_ROWS, "lower_strict": True, "upper_strict": False,
               "tol": 0.01, "tol_se": True, "group_by": ["g"], "min_points": 1, "min_group_share": 0.5,
               "min_groups": 1, "max_losses": 0, "min_point_share": 0.5, "misses_at_smallest_x": True,
               "inferred": "why"},
    "near": {"kind": "near", "x": 2.0, "target": 2.0, "rel_tol": 0.1, "select": {"curve": "A", "g": "g1"},
             "column": "y", "inferred": "why"},
    "ratio": {"kind": "ratio", "numerator": {"curve": "B", "g": "g1"}, "denominator": {"curve": "A", "g": "g1"},
              "min": 1.0, "max": 3.0, "interpolate": "linear", **_ROWS, "inferred": "why"},
    "successive_ratio": {"kind": "successive_ratio", "min": 1.0, **_ROWS, "select": {"curve": "A", "g": "g1"},
                         "inferred": "why"},
    "crossing": {"kind": "crossing", "first": {"curve": "A"}, "second": {"curve": "B"}, **_ROWS, "match_on": ["g"],
                 "line": "identity", "inferred": "why"},
    "eventually": {"kind": "eventually", "left": {"curve": "A"}, "right": {"curve": "B"}, "op": "abs<=",
                   "max_diff": 100.0, **_ROWS, "match_on": ["panel"], "at": "last", "factor": 1.0, "tol": 0.01,
                   "tol_se": True, "group_by": ["g"], "inferred": "why"},
    "slope": {"kind": "slope", "min": 0.4, "max": 0.65, **_ROWS, "group_by": ["g"], "inferred": "why"},
    "jointly": {"kind": "jointly", "group_by": ["g"], "select": {"panel": "a"}, "min_groups": 1, "min_group_share": 0.5,
                "checks": [{"kind": "compare", "left": {"curve": "A"}, "right": {"curve": "B"}, "op": "<"}],
                "inferred": "why"},
    "mean_relative_gap": {"kind": "mean_relative_gap", "left": {"curve": "A"}, "right": {"curve": "B"}, "min": 0.1,
                          **_ROWS, "match_on": ["g"], "at": "last", "inferred": "why"},
}

REDUCED_SCALE = {"why": "quick cuts one family's epochs", "settings": ["hyper.group.epochs"]}
FULL = {kind: {**check, "reduced_scale": REDUCED_SCALE} for kind, check in FULL.items()}


def minimal(kind: str) -> dict:
    """FULL[kind] with only kind, the required keys and the first of `at_least_one` (and op '<' for op abs<=)."""
    spec = CHECK_KEYS[kind]
    keep = {"kind", *spec.required, *spec.at_least_one[:1]}
    out = {k: v for k, v in FULL[kind].items() if k in keep}
    if out.get("op") == "abs<=":
        out["op"] = "<"
    return out


# --------------------------------------------------------------------------------------------------
# the generated schema and the code agree
# --------------------------------------------------------------------------------------------------


def test_every_kind_has_a_schema_entry_and_vice_versa():
    schema = check_schema()
    assert list(CHECK_KEYS) == list(CHECKS)
    assert schema["properties"]["kind"]["enum"] == list(CHECKS)
    assert [branch["if"]["properties"]["kind"]["const"] for branch in schema["allOf"]] == list(CHECKS)
    assert set(schema["$defs"]) - {"selector", "where_x"} == set(CHECKS)
    assert set(FULL) == set(CHECKS)
    for kind in CHECKS:
        entry = schema["$defs"][kind]
        assert entry["additionalProperties"] is False
        assert set(entry["properties"]) == set(check_keys(kind))
        assert entry.get("required", []) == list(CHECK_KEYS[kind].required)
        assert set(CHECK_KEYS[kind].at_least_one) <= set(CHECK_KEYS[kind].optional)
        assert not set(CHECK_KEYS[kind].required) & set(CHECK_KEYS[kind].optional)
    assert all(key in claims.KEY_SCHEMAS for kind in CHECKS for key in check_keys(kind) if key != "kind")


def test_schema_has_no_defaults():
    """Defaults of a check live in the check functions; the schema must not add keys to a check."""
    assert '"default"' not in repr(check_schema()).replace("'", '"')


@pytest.mark.parametrize("kind", list(CHECKS))
def test_full_example_is_valid_and_the_check_reads_exactly_the_declared_keys(kind):
    """Every key a kind declares is read by its check function, and no other (CHECK_META_KEYS are for the reader)."""
    check = FULL[kind]
    assert set(check) == set(check_keys(kind)), "FULL must use every key of the kind"
    assert schema_errors(check) == []
    recorded = Recording(check)
    verdict, _ = CHECKS[kind](TABLE, recorded)
    assert verdict in ("pass", "fail", "inconclusive")
    assert recorded.read == set(check_keys(kind)) - {"kind", *CHECK_META_KEYS}


@pytest.mark.parametrize("kind", list(CHECKS))
def test_minimal_example_is_valid_and_each_required_key_is_required(kind):
    check = minimal(kind)
    assert schema_errors(check) == []
    assert CHECKS[kind](TABLE, check)[0] in ("pass", "fail", "inconclusive")
    for key in CHECK_KEYS[kind].required:
        partial = {k: v for k, v in check.items() if k != key}
        errors = schema_errors(partial)
        assert [e.validator for e in errors] == ["required"] and f"'{key}'" in errors[0].message
        with pytest.raises(KeyError, match=key):  # the check function indexes it
            CHECKS[kind](TABLE, partial)


@pytest.mark.parametrize("kind", [k for k in CHECKS if CHECK_KEYS[k].at_least_one])
def test_at_least_one_of(kind):
    keys = CHECK_KEYS[kind].at_least_one
    none = {k: v for k, v in FULL[kind].items() if k not in keys}
    assert [e.validator for e in schema_errors(none)] == ["anyOf"]
    for key in keys:
        assert schema_errors({**none, key: FULL[kind][key]}) == []


@pytest.mark.parametrize("kind", list(CHECKS))
def test_unknown_key_is_rejected(kind):
    errors = schema_errors({**minimal(kind), "colour": "red"})
    assert [e.validator for e in errors] == ["additionalProperties"]


def test_key_rules_and_types():
    ok = minimal("compare")
    assert schema_errors({**ok, "op": "abs<="})  # needs max_diff
    assert schema_errors({**ok, "max_diff": 0.1})  # max_diff needs op abs<=
    assert schema_errors({**ok, "min_groups": 1})  # needs group_by
    assert schema_errors({**ok, "group_by": ["g"], "min_groups": 1}) == []
    assert schema_errors({**minimal("order"), "op": "abs<="})  # order has no max_diff
    assert schema_errors({**minimal("near"), "where_x": {"gt": 1}})  # near takes one x
    assert schema_errors({**minimal("crossing"), "line": "diagonal"})
    assert schema_errors({**minimal("mean_relative_gap"), "tol_se": True})
    assert schema_errors({**minimal("near"), "target": "2100"})
    assert schema_errors({**minimal("compare"), "left": {"curve": {"nested": 1}}})
    assert schema_errors({**minimal("monotone"), "where_x": {"above": 1}})
    assert schema_errors({"kind": "nearby"})
    assert schema_errors({"x": 1})
    # a "better than" comparison never counts its tolerance for the claim (docs/claims.md): only monotone has tol_counts
    assert schema_errors({**ok, "tol": 0.01, "tol_counts": "for"})
    mono = minimal("monotone")
    assert schema_errors({**mono, "tol_counts": "for"})  # needs a tolerance
    assert schema_errors({**mono, "tol": 0.01, "tol_counts": "always"})
    assert schema_errors({**mono, "tol": 0.01, "tol_counts": "for"}) == []
    assert schema_errors({**ok, "rel_tol": -0.05}) and schema_errors({**ok, "rel_tol": "5%"})
    assert schema_errors({**minimal("eventually"), "rel_tol": 0.05})  # compare's only (and near's, required)
    assert schema_errors({**minimal("near"), "tol_counts": "for"})  # near has no tolerance at all


def test_every_shipped_check_is_valid():
    checks = []

    def walk(node, where):
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "checks" and isinstance(value, list):
                    checks.extend((f"{where}.checks[{i}]", c) for i, c in enumerate(value))
                else:
                    walk(value, f"{where}.{key}")
        elif isinstance(node, list):
            for i, value in enumerate(node):
                walk(value, f"{where}[{i}]")

    for path in PAPER_FILES + sorted((ROOT / "config" / "scales").glob("*.yaml")):
        walk(yaml.safe_load(path.read_text()), path.name)
    assert len(checks) > 40
    bad = {where: [e.message for e in schema_errors(c)] for where, c in checks if schema_errors(c)}
    assert not bad


# --------------------------------------------------------------------------------------------------
# through dpfl.config: the schema files refer to the generated schema; readable errors
# --------------------------------------------------------------------------------------------------


def paper_with_check(check: dict) -> tuple[dict, Path]:
    """A shipped paper config whose first claim has this one check, and the paper's schema."""
    for path in PAPER_FILES:
        data = yaml.safe_load(path.read_text())
        for figure in data.get("figures", {}).values():
            if figure.get("claims"):
                figure["claims"] = [{**figure["claims"][0], "checks": [check]}]
                return data, ROOT / "workflow" / "schemas" / "papers" / f"{data['paper']}.schema.yaml"
    raise AssertionError("no shipped paper config has a claim")


def error_of(config, check: dict, tmp_path: Path) -> str:
    data, schema = paper_with_check(check)
    path = tmp_path / "config" / "papers" / f"{data['paper']}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(config.ConfigError) as err:
        config.validate(config.read_yaml(path), schema, str(path))
    msg = str(err.value)
    assert str(path) in msg
    return msg


@pytest.mark.parametrize("path", PAPER_FILES, ids=[p.stem for p in PAPER_FILES])
def test_shipped_paper_configs_validate(config, path):
    data = config.read_yaml(path)

    def checks(d):
        return [c for f in d.get("figures", {}).values() for cl in f.get("claims", []) for c in cl["checks"]] + \
            [c for cl in d.get("claims", []) for c in cl["checks"]]  # claims over several figures

    before = copy.deepcopy(checks(data))
    schema = ROOT / "workflow" / "schemas" / "papers" / f"{data['paper']}.schema.yaml"
    config.validate(data, schema, str(path))  # fills defaults
    assert checks(data) == before  # nothing added to a check


def test_project_config_loads_with_every_claim(config):
    cfg = config.load(ROOT)
    n = sum(len(cl["checks"]) for p in cfg.papers.values() for f in p["figures"].values() for cl in f["claims"])
    assert n > 40


def test_defaults_are_still_filled_through_the_generated_schema(config):
    data, schema = paper_with_check(minimal("near"))
    figure = next(f for f in data["figures"].values() if f.get("claims"))
    figure.pop("inferred", None)
    other = copy.deepcopy(data)
    config.validate(data, schema, "test")
    assert figure["inferred"] == [] and figure["claims"][0]["checks"] == [minimal("near")]
    # each figure gets its own default list
    for f in other["figures"].values():
        f.pop("claims", None)
        f.pop("inferred", None)
    config.validate(other, schema, "test")
    lists = [f["claims"] for f in other["figures"].values()]
    assert all(c == [] for c in lists) and len({id(c) for c in lists}) == len(lists)


def test_missing_target_of_near_names_file_key_path_and_kind(config, tmp_path):
    msg = error_of(config, {"kind": "near", "x": 32}, tmp_path)
    assert re.search(r"figures\.\w+\.claims\[0\]\.checks\[0\]: "
                     r"'target' is a required property for kind 'near'", msg), msg
    assert "'rel_tol' is a required property for kind 'near'" in msg


@pytest.mark.parametrize("kind", list(CHECKS))
def test_missing_required_key_is_rejected_naming_key_and_kind(config, tmp_path, kind):
    spec = CHECK_KEYS[kind]
    for key in spec.required:
        msg = error_of(config, {k: v for k, v in minimal(kind).items() if k != key}, tmp_path)
        assert f"checks[0]: '{key}' is a required property for kind '{kind}'" in msg, msg
    if spec.at_least_one:
        msg = error_of(config, {k: v for k, v in minimal(kind).items() if k not in spec.at_least_one}, tmp_path)
        wanted = ", ".join(map(repr, spec.at_least_one))
        assert f"checks[0]: at least one of {wanted} is required for kind '{kind}'" in msg, msg


def test_unknown_kind_lists_the_allowed_kinds(config, tmp_path):
    msg = error_of(config, {"kind": "nearr", "x": 32}, tmp_path)
    assert f"checks[0].kind: 'nearr' is not allowed (did you mean 'near'?); allowed: {', '.join(CHECKS)}" in msg
    assert msg.count("\n  - ") == 1  # no error from the per-kind entries


def test_misspelt_key_gives_did_you_mean(config, tmp_path):
    check = {**minimal("near"), "rel_tl": 0.05}
    del check["rel_tol"]
    msg = error_of(config, check, tmp_path)
    assert ("checks[0]: unknown key 'rel_tl' (did you mean 'rel_tol'?) for kind 'near'; "
            "allowed keys: column, inferred") in msg
    assert "'rel_tol' is a required property for kind 'near'" in msg


def test_unknown_key_and_wrong_type_are_rejected(config, tmp_path):
    msg = error_of(config, {**minimal("compare"), "banana": "red", "factor": "2"}, tmp_path)
    assert "checks[0]: unknown key 'banana' for kind 'compare'; allowed keys:" in msg
    assert "checks[0].factor: expected number, got str '2'" in msg
    msg = error_of(config, {**minimal("compare"), "op": "abs<="}, tmp_path)
    assert "'max_diff' is a required property for kind 'compare' with op 'abs<='" in msg


def test_relaxed_overlay_validator_also_uses_the_generated_schema(config, tmp_path):
    from dpfl.config.schema import strip_required, validator_for

    data, schema = paper_with_check({**minimal("near"), "colour": "red"})
    errors = list(validator_for(schema, transform=strip_required).iter_errors(data))
    assert [e.validator for e in errors] == ["additionalProperties"]


# --------------------------------------------------------------------------------------------------
# the documentation lists the kinds the code has
# --------------------------------------------------------------------------------------------------


def test_docs_list_the_check_kinds_and_their_required_keys():
    text = (ROOT / "docs" / "claims.md").read_text()
    section = text.split("\n## Check kinds\n", 1)[1].split("\n## ", 1)[0]
    listed = re.findall(r"^- `(\w+)` \(([^)]*)\)", section, re.M)
    assert [kind for kind, _ in listed] == list(CHECKS)
    for kind, keys in listed:
        spec = CHECK_KEYS[kind]
        assert keys == ", ".join([*spec.required] + ([" and/or ".join(spec.at_least_one)] if spec.at_least_one else []))


def test_module_docstring_describes_every_kind():
    block = claims.__doc__.split("Check kinds", 1)[1].split("All kinds accept", 1)[0]
    assert set(re.findall(r"^  (\w+) ", block, re.M)) == set(CHECKS)


def test_where_x_keys_are_those_select_knows():
    df = pd.DataFrame({"x": np.arange(5.0)})
    for key in check_schema()["$defs"]["where_x"]["properties"]:
        claims.select(df, None, {key: 2.0})


# --------------------------------------------------------------------------------------------------
# lowy2023's claims as the spec (§7) words them
# --------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def lowy(config):
    return config.load(ROOT).papers["lowy2023"]


def test_lowy_better_than_checks_never_count_the_tolerance_for_the_claim(lowy):
    """Every lowy2023 check but C-Lmono's "non-increasing within tol" counts a point within the tolerance as a tie
    (C-L4a, C-L4b, C-L7 and C-L89a counted it for the claim before the comparison rule of docs/claims.md)."""
    checks = [(cl["id"], c) for spec in lowy["figures"].values() for cl in spec["claims"] for c in cl["checks"]]
    checks += [(cl["id"], c) for cl in lowy["claims"] for c in cl["checks"]]
    for cid, c in checks:
        assert ("tol_counts" in c) == (cid == "C-Lmono" and c["kind"] == "monotone"), cid
    ops = {cid: c["op"] for cid, c in checks if cid in ("C-L4a", "C-L4b", "C-L7", "C-L89a")}
    assert set(ops.values()) == {"<"}


def test_lowy_cross_figure_claims_live_at_the_top_level(lowy):
    """C-L89a/b (the 8 panels of Figs 8 and 9) and C-L5c (Figs 5, 8, 9 together, with the paper's exception at
    small ε) are claims over several figures, with the standard-error tolerance."""
    top = {cl["id"]: cl for cl in lowy["claims"]}
    assert set(top) == {"C-L89a", "C-L89b", "C-L5c"}
    assert top["C-L5c"]["figures"] == ["fig5", "fig8", "fig9"]
    for cl in top.values():
        assert all(c.get("tol_se") and c.get("group_by") == ["panel"] for c in cl["checks"])
    for fig, spec in lowy["figures"].items():
        assert not set(top) & {cl["id"] for cl in spec["claims"]}, fig
    assert [cl["id"] for cl in lowy["figures"]["fig8"]["claims"]] == ["C-Lmono"]
    assert [cl["id"] for cl in lowy["figures"]["fig9"]["claims"]] == ["C-Lmono"]


def test_every_shipped_claim_carries_the_papers_words_and_place(config):
    """Every claim of the five paper files quotes the paper and says where (docs/claims.md); sanity checks are
    marked and say so in their own words."""
    cfg = config.load(ROOT)
    sanity = set()
    for paper, spec in cfg.papers.items():
        claims = [cl for f in spec["figures"].values() for cl in f["claims"]] + spec.get("claims", [])
        for cl in claims:
            assert cl.get("quote") and cl.get("place"), (paper, cl["id"])
            if cl.get("sanity"):
                sanity.add(cl["id"])
                assert cl.get("verbatim") is False, cl["id"]
    assert sanity == {"C-A2", "C-A3", "C-B20-5", "C-B20-6", "C-B1a-4", "S-K13"}


def test_lowy_mono_closeness_only_for_mnist(lowy):
    """C-Lmono's 0.02 closeness at ε_max is a claim about MNIST (Figs 4 and 7) only."""
    for fig, spec in lowy["figures"].items():
        mono = next(cl for cl in spec["claims"] if cl["id"] == "C-Lmono")
        close = [c for c in mono["checks"] if c.get("op") == "abs<="]
        assert (len(close) == 2) == (spec["params"]["experiment"] == "mnist"), fig


def test_paper_claims_schema(config, tmp_path):
    """A claim over several figures needs its figures (at least two) and valid checks."""
    path = ROOT / "config" / "papers" / "lowy2023.yaml"
    schema = ROOT / "workflow" / "schemas" / "papers" / "lowy2023.schema.yaml"
    data = yaml.safe_load(path.read_text())
    config.validate(copy.deepcopy(data), schema, "ok")
    for broken, needle in [({"figures": ["fig8"]}, "claims[0].figures"),
                           ({"figures": None}, "claims[0]: 'figures' is a required property"),
                           ({"colour": "red"}, "unknown key 'colour'")]:
        bad = copy.deepcopy(data)
        bad["claims"][0].update(broken)
        if broken.get("figures", 1) is None:
            del bad["claims"][0]["figures"]
        with pytest.raises(config.ConfigError, match=re.escape(needle)):
            config.validate(bad, schema, "bad")


def test_paper_inconsistent_is_a_claim_key(config):
    """A claim (a figure's, or one over several figures) may say why the paper contradicts itself
    (`paper_inconsistent`, a non-empty string; dpfl.claims.cause_of then gives the cause paper-inconsistent)."""
    path = ROOT / "config" / "papers" / "lowy2023.yaml"
    schema = ROOT / "workflow" / "schemas" / "papers" / "lowy2023.schema.yaml"
    data = yaml.safe_load(path.read_text())
    figure = next(iter(data["figures"]))
    for pick in (lambda d: d["figures"][figure]["claims"][0], lambda d: d["claims"][0]):
        ok = copy.deepcopy(data)
        pick(ok)["paper_inconsistent"] = "Sec. 4 says T = 300, Fig. 1 needs d = 20"
        config.validate(copy.deepcopy(ok), schema, "ok")
        for bad_value in ("", 3):
            pick(ok)["paper_inconsistent"] = bad_value
            with pytest.raises(config.ConfigError, match="paper_inconsistent"):
                config.validate(copy.deepcopy(ok), schema, "bad")
