"""Verdicts (dpfl.claims): a claim's verdict is the worst of its checks' (evaluate_claim, evaluate); `cause_of`
names why a verdict is not a pass, where known (a reduced-scale run: dpfl.config.overlays.scale_reductions); and
helpers that show checks and numbers in the report (summarize_check, rounded)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from dpfl.claims.checks import CHECKS
from dpfl.claims.claim_reasons import claim_reason, no_rows_reason
from dpfl.claims.formats import fmt_cfg
from dpfl.claims.reasons import check_reason
from dpfl.claims.selection import SEVERITY, ClaimSpecError, NoRowsError, describe_no_rows
from dpfl.paths import ablation_name

# --------------------------------------------------------------------------------------------------
# verdicts
# --------------------------------------------------------------------------------------------------


def evaluate_claim(df: pd.DataFrame, claim: dict, data_source: str, x_name: str = "x") -> dict:
    """A claim's verdict, reason and checks. A check whose selection finds no rows in this table (NoRowsError: the
    settings do not produce what it selects) is `inconclusive`, its reason naming the claim, the selection and the
    values the table holds, its numbers under `no_rows` (the claim gets `no_rows: true`); any other ClaimSpecError
    (e.g. a selector column the table does not have) is raised again with the claim id and the check's number."""
    results = []
    for i, check in enumerate(claim["checks"], 1):
        kind = CHECKS[check["kind"]]
        try:
            verdict, numbers = kind(df, check)
            reason = check_reason(check, verdict, numbers, x_name)
        except NoRowsError as exc:
            verdict, numbers = "inconclusive", {"no_rows": describe_no_rows(df, exc)}
            reason = no_rows_reason(claim["id"], i, check, numbers, x_name)
        except ClaimSpecError as exc:
            raise ClaimSpecError(f"claim {claim['id']}, check {i} ({check['kind']}): {exc}") from exc
        results.append({"check": check, "verdict": verdict, "reason": reason, "numbers": numbers})
    verdict = max((r["verdict"] for r in results), key=SEVERITY.get)
    out = {
        "id": claim["id"],
        "claim": claim["claim"],
        "note": claim.get("note", ""),
        "verdict": "stand-in" if data_source == "standin" else verdict,
        "verdict_on_data": verdict,
        "reason": claim_reason(results, verdict, data_source),
        "checks": results,
    }
    # what the reader sees beside the verdict: the paper's words and their place; a sanity check (an identity, the
    # accounting, a property by construction) is reported apart and never counted among the paper's claims
    out["sanity"] = bool(claim.get("sanity", False))
    for key in ("quote", "place", "verbatim", "inferred_claim"):
        if key in claim:
            out[key] = claim[key]
    if claim.get("paper_inconsistent"):
        out["paper_inconsistent"] = claim["paper_inconsistent"]
    if any("no_rows" in r["numbers"] for r in results):
        out["no_rows"] = True
    return out


def evaluate(df: pd.DataFrame, claims: list[dict], data_source: str, x_name: str = "x") -> list[dict]:
    """Evaluate every claim of a figure (evaluate_claim: a selection that finds no rows makes its claim
    inconclusive; any other check that cannot be evaluated raises ClaimSpecError naming the claim). `x_name` names
    x in the reasons (e.g. "ε")."""
    return [evaluate_claim(df, claim, data_source, x_name) for claim in claims]


def x_name_of(df: pd.DataFrame, default: str = "x") -> str:
    """How the reasons name x: a parameter column equal to x on every row (e.g. kato2024's k), else `default`."""
    for col in df.columns:
        if col in ("x", "y", "paper", "figure", "panel", "curve") or not pd.api.types.is_numeric_dtype(df[col]):
            continue
        if np.allclose(df[col].to_numpy(float), df["x"].to_numpy(float), rtol=1e-12, atol=0, equal_nan=False):
            return col
    return default


# --------------------------------------------------------------------------------------------------
# causes: why a verdict is not a pass, where known
# --------------------------------------------------------------------------------------------------

CAUSES = {
    "no-rows": "a selection of the claim finds no rows in this table: the settings do not produce what it checks",
    "stand-in": "synthetic stand-in data: not evidence either way",
    "documented-difference": "a documented difference between the paper and the authors' code",
    "paper-inconsistent": "the paper contradicts itself here (the claim's paper_inconsistent says how): its "
                          "statements cannot all hold under its stated setup",
    "reduced-scale": "a reduced-scale run: not the paper-scale result",
    "not-reproduced": "not reproduced: a finding at paper scale on real data",
}


def _reductions_text(scale: str, reductions: dict) -> str:
    shown = ", ".join(f"{k} {_short(v[1])} (paper {_short(v[0])})" for k, v in list(reductions.items())[:4])
    more = f" and {len(reductions) - 4} more" if len(reductions) > 4 else ""
    return f"scale '{scale}': {shown}{more}"


def _short(v) -> str:
    if isinstance(v, float):
        return fmt_cfg(v)
    text = str(v)
    return text if len(text) <= 24 else text[:21] + "…"


def _difference_text(other_verdict: str | None, ablations: dict, authors_items) -> str | None:
    """Why a default-mode verdict is a documented difference, from the runs that show it (docs/claims.md): the
    one-switch ablations that pass the claim (their items named), or else the authors-code variant passing with all
    its items together (the single switches built said not to move it, or not built). None without such a run."""
    moving = [(m, a["items"]) for m, a in sorted(ablations.items()) if a["verdict"] == "pass"]
    if moving:
        return "one switch moves it: " + "; ".join(f"{' + '.join(items)} alone passes (ablation "
                                                   f"{ablation_name(m)})" for m, items in moving)
    if other_verdict != "pass":
        return None
    items = " + ".join(authors_items) if authors_items else "its items"
    text = f"only the combination moves it: the authors-code variant ({items} together) passes"
    if ablations:
        tried = ", ".join(f"{' + '.join(a['items'])} alone {a['verdict']}" for _, a in sorted(ablations.items()))
        return f"{text}; the single switches built do not ({tried})"
    return f"{text}; no single-switch ablation was built (`ablations: true` builds them)"


def cause_of(result: dict, *, data_source: str, scale: str, reductions: dict, mode: str = "none",
             other_verdict: str | None = None, difference: str = "", ablations: dict | None = None,
             authors_items=(), evidence: dict | None = None) -> tuple[str | None, str]:
    """(cause, short text) of a claim's verdict: None for a pass; for the others, in this order: `no-rows` (the claim
    is inconclusive because a selection found no rows: nothing was checked), `stand-in`
    (synthetic data), `documented-difference` (in the default mode a one-switch ablation passes the claim, named by
    its items (`ablations`: {mode: {items, verdict}}), or the authors-code variant does (`other_verdict`), all its
    items together (`authors_items`); `difference` adds the claim's note or the variant's why), `paper-inconsistent`
    (the claim carries `paper_inconsistent`: the paper's own statements contradict each other here, so no run, at
    any scale, reproduces them all; given only when an evidence variant built beside it passes the claim, `evidence`:
    {mode: {items, verdict}}, all of which the text names; with none built or none passing, `not-reproduced` says
    so; before reduced-scale, which would wrongly suggest that the paper scale could),
    `reduced-scale` (this run's settings differ from the paper's: `reductions`; the text adds the `reduced_scale.why`
    of the checks that decided it, e.g. a scale that cuts one method scheme's epochs and so its ε), else
    `not-reproduced` (a genuine finding at paper scale on real data)."""
    verdict = result["verdict"]
    if verdict == "pass":
        return None, ""
    if result.get("no_rows") and result.get("verdict_on_data", verdict) == "inconclusive":
        return "no-rows", CAUSES["no-rows"] + (f" ({_reductions_text(scale, reductions)})" if reductions else "")
    if verdict == "stand-in" or data_source == "standin":
        return "stand-in", CAUSES["stand-in"]
    shown = _difference_text(other_verdict, ablations or {}, authors_items) if mode == "none" else None
    if shown:
        text = shown
        if difference:
            text += f" ({difference})"
        if reductions:
            text += f" ({_reductions_text(scale, reductions)})"
        return "documented-difference", text
    if result.get("paper_inconsistent"):  # docs/claims.md: shown by an evidence run that passes, never asserted
        shown_by = {m: a for m, a in (evidence or {}).items() if a["verdict"] == "pass"}
        if shown_by:
            runs = "".join(f"; the {ablation_name(m)} run ({', '.join(a['items'])}): {a['verdict']}"
                           for m, a in sorted(evidence.items()))
            return "paper-inconsistent", (f"the paper contradicts itself here: {result['paper_inconsistent']}{runs}"
                                          + (f" ({_reductions_text(scale, reductions)})" if reductions else ""))
        if evidence:
            text = "not reproduced; the evidence runs do not show the paper's inconsistency (" + "; ".join(
                f"{ablation_name(m)}: {a['verdict']}" for m, a in sorted(evidence.items())) + ")"
        else:
            text = (f"not reproduced; the paper's inconsistency ({result['paper_inconsistent']}) is not shown: its "
                    "evidence runs were not built (`ablations: true` builds them)")
        if reductions:
            return "reduced-scale", f"{_reductions_text(scale, reductions)}; {text}"
        return "not-reproduced", text
    if reductions:
        why = "".join(f"; {w}" for w in _scale_whys(result, reductions))
        return "reduced-scale", (f"{_reductions_text(scale, reductions)}; a reduced-scale verdict is not the "
                                 f"paper-scale result{why}")
    tried = [f"{' + '.join(a['items'])} alone {a['verdict']}" for _, a in sorted((ablations or {}).items())]
    tried += [f"the {ablation_name(m)} run ({', '.join(a['items'])}): {a['verdict']}"
              for m, a in sorted((evidence or {}).items())]
    if not tried:  # docs/claims.md: a cause is shown by runs; without any, the verdict is not yet explained
        return "not-reproduced", CAUSES["not-reproduced"] + (f" (scale '{scale}')" if scale else "") + \
            "; not yet investigated (no ablation of the authors' items was built)"
    return "not-reproduced", CAUSES["not-reproduced"] + (f" (scale '{scale}')" if scale else "") + \
        "; tried: " + "; ".join(tried) + \
        (f"; the authors-code variant: {other_verdict}" if other_verdict else "")


def _scale_whys(result: dict, reductions: dict) -> list[str]:
    """The `reduced_scale.why` of the checks that decided the verdict (verdict equal to the claim's on the data), each
    when one of its `settings` (prefixes of reduced keys; none given: any) is among this run's reductions."""
    verdict = result.get("verdict_on_data", result["verdict"])
    out = []
    for r in result.get("checks", []):
        meta = r["check"].get("reduced_scale")
        if not meta or r["verdict"] != verdict:
            continue
        settings = meta.get("settings")
        reduced = settings is None or any(k == s or k.startswith(s + ".") for s in settings for k in reductions)
        if reduced and meta["why"] not in out:
            out.append(meta["why"])
    return out


def summarize_check(check: dict) -> str:
    """A one-line human description of a check (for the report)."""
    c = {k: v for k, v in check.items() if k != "kind"}
    return f"{check['kind']}(" + ", ".join(f"{k}={v}" for k, v in c.items()) + ")"


def rounded(obj, digits: int = 4):
    """A copy of JSON-like numbers with floats rounded to `digits` significant digits (for display)."""
    if isinstance(obj, float):
        return float(f"{obj:.{digits}g}") if math.isfinite(obj) else obj
    if isinstance(obj, dict):
        return {k: rounded(v, digits) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [rounded(v, digits) for v in obj]
    return obj
