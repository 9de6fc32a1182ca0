"""The reasons of dpfl.claims beyond one check kind's numbers: the sentence of a claim (claim_reason: its verdict
and the checks that decided it, marked when the data were a stand-in) and that of a check whose selection found no
rows in the table (no_rows_reason: the claim, the selection and the values the table holds), whatever the check's
kind. The per-kind sentences are in dpfl.claims.reasons."""

from __future__ import annotations

from dpfl.claims.formats import fmt_cfg, fmt_x
from dpfl.claims.selection import _selector_text

VERB = {"pass": "passes", "fail": "fails", "inconclusive": "inconclusive"}


def _value_text(v) -> str:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return '""' if v == "" else str(v)
    return fmt_x(v)


def _values_text(values: list, count: int | None = None) -> str:
    text = ", ".join(_value_text(v) for v in values)
    return text + (f", … ({count} values)" if count and count > len(values) else "")


def _where_text(where_x: dict, x_name: str) -> str:
    words = {"gt": ">", "ge": "≥", "lt": "<", "le": "≤"}
    return " and ".join(f"{x_name} {words[k]} {fmt_cfg(v)}" for k, v in where_x.items())


def no_rows_reason(claim_id: str, index: int, check: dict, numbers: dict, x_name: str = "x") -> str:
    """Why a check could not be evaluated (its selection found no rows, dpfl.claims.selection.NoRowsError), without
    the leading verdict: the claim id, the check, the selection, and the values the table holds in the selected
    columns (numbers: dpfl.claims.selection.describe_no_rows)."""
    n = numbers["no_rows"]
    sels = n["selections"]
    named = " and ".join(f"{name} ({_selector_text(sel) or 'every row'})" for name, sel in sels.items())
    head = f"claim {claim_id}, check {index} ({check['kind']}): "
    if n.get("unpaired"):
        cols = ", ".join(x_name if k == "x" else k for k in n["unpaired"])
        sides = "; ".join(f"{name} has " + ", ".join(f"{x_name if k == 'x' else k} {_values_text(v)}"
                                                     for k, v in cols_vals.items())
                          for name, cols_vals in n["paired_values"].items())
        text = f"{head}{named} share no {cols} to compare ({sides})"
    elif "x" in n:
        text = (f"{head}{named} has no row at {x_name} = {fmt_cfg(n['x'])} (its {x_name}: "
                f"{_values_text(n['x_in_selection']) or 'none'})")
    else:
        text = f"{head}{named} selects no rows of this table"
        if n["absent"]:
            text += ": no row has " + " or ".join(
                f"{col} = {'/'.join(_value_text(v) for v in vals)}" for col, vals in n["absent"].items())
        elif n.get("where_x"):
            text += (f" where {_where_text(n['where_x'], x_name)} (its {x_name} without that: "
                     f"{_values_text(n['x_without_where_x']) or 'none'})")
        else:
            text += ": each selected value is in the table, but no row has them all"
    if n["table_values"]:
        text += "; the table has " + "; ".join(f"{col} {_values_text(v, n['values_in_table'].get(col))}"
                                               for col, v in n["table_values"].items())
    return text


def claim_reason(results: list[dict], verdict: str, data_source: str) -> str:
    """One sentence: the verdict and the reasons of the checks that decided it (and of every check that could not be
    evaluated, whatever the verdict)."""
    decisive = [r["reason"] for r in results if r["verdict"] == verdict or "no_rows" in r["numbers"]] \
        or [r["reason"] for r in results]
    body = "; ".join(decisive)
    if data_source == "standin":
        return f"stand-in data, not evidence (on the synthetic data it {VERB[verdict]}: {body})"
    return f"{VERB[verdict]}: {body}"
