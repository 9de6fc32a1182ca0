"""Stage `claims`: check the paper's claims on a figure's tidy table -> claims.json; and claims over several
figures together (a paper file's top-level `claims:`, e.g. lowy2023's C-L89a/b over Figs 8 and 9) on their tables
concatenated, panels renamed "<figure>/<panel>" -> results/<paper>/claims-<id>.json.

A claim over several figures some of which (not all) ran on stand-in data is `stand-in` as a whole; it also gets its
verdict over the other figures alone (`without_standin`), so that a stand-in member does not hide what the real data
say.

Each claim gets its verdict, a one-sentence `reason` built from its numbers, and a `cause` where known
(dpfl.claims.cause_of): `stand-in`, `documented-difference` (the authors-code variant of the same figure passes
the claim: its claims file is an input when that variant is built), `reduced-scale` (this run's settings differ
from the paper's: the `reductions` the table stage recorded in each figure's meta, carried by its sidecar),
`not-reproduced`, or None for a pass.

A check whose selection finds no rows in the table makes its claim `inconclusive` (cause `no-rows`, a reason naming
the claim, the selection and the values the table holds): the job still writes every claim. Any other error (e.g. a
selector column the table does not have) stops the job, naming the claim, and is written to the job's log, which
the report shows in place of the claims (Snakemake deletes the outputs of a failed job).

Each claims file records what it was computed from (`inputs`: the SHA-256 of every table it read and the hash of the
claims as configured, dpfl.io.config_hash), so that the report can tell a claims file older than its figure's table
or its claims (dpfl.report: `stale`) and never shows its verdicts as current."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from dpfl import claims as claims_mod
from dpfl import paths, tidy
from dpfl.data.common import sha256_file
from dpfl.io import config_hash, get_logger, write_json


def inputs_record(tables: dict[str, str], claims) -> dict:
    """`inputs` of a claims file: {figure: SHA-256 of its table} and the hash of the claims evaluated."""
    return {"table_sha256": {figure: sha256_file(path) for figure, path in tables.items()},
            "claims_hash": config_hash(claims)}


def _log_results(log, results: list[dict], where: str = "") -> None:
    for r in results:
        line = f"{r['id']}{where}: {r['verdict']} ({r['cause'] or '-'}) {r['reason']}"
        (log.warning if r.get("no_rows") else log.info)("%s", line)


def _other_verdicts(paths, part: str | None = None) -> dict[str, dict[str, str]]:
    """{mode: {claim id: verdict}} in the other variants built (their claims files: the authors-code variant, the
    one-switch ablations); with `part`, the verdict of that part of the claim (e.g. `without_standin`), where the
    variant has one."""
    out: dict[str, dict[str, str]] = {}
    for path in paths or ():
        data = json.loads(Path(path).read_text())
        verdicts = out.setdefault(data["mode"], {})
        for c in data["claims"]:
            if part is None:
                verdicts[c["id"]] = c["verdict"]
            elif c.get(part):
                verdicts[c["id"]] = c[part]["verdict"]
    return out


def _evaluate(df: pd.DataFrame, claims: list, sidecars: list[dict], context: dict, other: dict, mode: str) -> dict:
    """claims.json's content: the run's facts (mode, data, scale and its reductions) and every claim with its
    verdict, reason and cause."""
    context = context or {}
    sources = [s["data_source"] for s in sidecars]
    data_source = "standin" if "standin" in sources else sources[0]
    scale = sidecars[0].get("scale", "")
    reductions = {}
    for s in sidecars:  # decided by the table stage (meta, copied into the sidecar), not here
        reductions.update(s["reductions"])
    x_name = context.get("x_name") or claims_mod.x_name_of(df)
    results = claims_mod.evaluate(df, claims, data_source, x_name)
    for r in results:
        other_verdict = other.get(paths.AUTHORS_CODE, {}).get(r["id"])
        runs = {kind: {m: {"items": list(context.get(kind, {})[m]), "verdict": v[r["id"]]}
                       for m, v in other.items() if m in context.get(kind, {}) and r["id"] in v}
                for kind in ("ablations", "evidence")}
        r["cause"], r["cause_text"] = claims_mod.cause_of(
            r, data_source=data_source, scale=scale, reductions=reductions, mode=mode, other_verdict=other_verdict,
            difference=r.get("note") or context.get("difference", ""), ablations=runs["ablations"],
            authors_items=context.get("authors_items", []), evidence=runs["evidence"])
        if other_verdict is not None:
            r["other_mode"] = {"mode": paths.AUTHORS_CODE, "verdict": other_verdict}
        if runs["ablations"] or runs["evidence"]:  # the variants' verdicts: the evidence behind a cause
            r["ablations"] = {**runs["ablations"], **runs["evidence"]}
    return {"mode": mode, "data_source": data_source, "scale": scale, "reductions": reductions, "x_name": x_name,
            "claims": results}


def run_claims(paper: str, figure: str, claims: list, csv_path: str, sidecar_path: str, out_path: str,
               log_path: str | None, context: dict | None = None, other_paths=()) -> None:
    """One figure's claims. `context`: x_name (how the reasons name x), difference (the documented difference the
    authors-code variant implements); `other_paths`: the authors-code variant's claims.json, when built (default mode
    only). Whether the run is reduced comes from the sidecar (`reductions`, recorded by the table stage)."""
    log = get_logger(log_path, f"{paper}/{figure}:claims")
    try:
        df = tidy.read(csv_path)
        sidecar = json.loads(Path(sidecar_path).read_text())
        out = _evaluate(df, claims, [sidecar], context or {}, _other_verdicts(other_paths), sidecar["mode"])
    except Exception as exc:
        log.error("claims of %s/%s not evaluated: %s: %s", paper, figure, type(exc).__name__, exc)
        raise
    _log_results(log, out["claims"])
    write_json({"paper": paper, "figure": figure, **out, "inputs": inputs_record({figure: csv_path}, claims)},
               out_path)


def concat_tables(tables: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Tidy tables of several figures as one, panels made distinct by figure ("fig8/a")."""
    parts = []
    for figure, df in tables.items():
        df = df.copy()
        df["panel"] = figure + "/" + df["panel"].astype(str)
        parts.append(df)
    return pd.concat(parts, ignore_index=True, sort=False)


#: what a claim's part over the figures without stand-in data keeps of its evaluation
_PART_KEYS = ("verdict", "verdict_on_data", "reason", "cause", "cause_text", "checks", "no_rows", "other_mode",
              "ablations")


def _without_standin(tables: dict[str, pd.DataFrame], sidecars: dict[str, dict], spec: dict, context: dict,
                     other_paths, mode: str) -> dict | None:
    """The claim's verdict over the figures whose data are not stand-ins, when some (not all) are: a stand-in member
    makes the verdict over all figures `stand-in`, which would hide what the real data say (kato2024's C-K4a-f over
    Figs 4-7 with a stand-in Creditcard, Fig 4). None when every figure, or none, is a stand-in."""
    kept = [f for f in tables if sidecars[f]["data_source"] != "standin"]
    if not kept or len(kept) == len(tables):
        return None
    out = _evaluate(concat_tables({f: tables[f] for f in kept}), [spec], [sidecars[f] for f in kept], context,
                    _other_verdicts(other_paths, "without_standin"), mode)
    result = out["claims"][0]
    return {"figures": kept, "standin_figures": [f for f in tables if f not in kept],
            "data_source": out["data_source"], "reductions": out["reductions"],
            **{k: result[k] for k in _PART_KEYS if k in result}}


def _only_figures(check: dict, figures: list[str]) -> bool:
    """Does the check select rows of these figures only (its `select` names a `figure` among them)?"""
    chosen = (check.get("select") or {}).get("figure")
    if chosen is None:
        return False
    return all(f in figures for f in (chosen if isinstance(chosen, list) else [chosen]))


def run_paper_claims(paper: str, claim: dict, csv_paths: list[str], sidecar_paths: list[str], out_path: str,
                     log_path: str | None, context: dict | None = None, other_paths=(),
                     built: list[str] | None = None) -> None:
    """A claim over several figures, evaluated over those of `claim["figures"]` that were built (`built`, default
    all; in the order of csv_paths / sidecar_paths): the claims file names them (`figures`) and the others
    (`figures_not_built`), and the reason says so. Where some but not all of them ran on stand-in data, the claim
    also gets its verdict over the others alone (`without_standin`: figures, verdict, reason, cause, checks), beside
    the verdict over all of them (then `stand-in`)."""
    log = get_logger(log_path, f"{paper}/{claim['id']}:claims")
    figures = list(built or claim["figures"])
    missing = [f for f in claim["figures"] if f not in figures]
    try:
        tables = {f: tidy.read(p) for f, p in zip(figures, csv_paths)}
        sidecars = [json.loads(Path(p).read_text()) for p in sidecar_paths]
        modes = {s["mode"] for s in sidecars}
        mode = next((m for m in modes if m != "none"), "none")  # a variant's claim reads its figures' variants
        spec = {k: v for k, v in claim.items() if k != "figures"}
        if missing:  # a check that selects only figures not built has nothing to check: it is left out, and said so
            kept = [c for c in spec["checks"] if not _only_figures(c, missing)]
            dropped = len(spec["checks"]) - len(kept)
            if kept and dropped:
                spec = {**spec, "checks": kept,
                        "note": (spec.get("note", "") + f" ({dropped} check(s) on figures not built left out)").strip()}
        out = _evaluate(concat_tables(tables), [spec], sidecars, context or {}, _other_verdicts(other_paths), mode)
        part = _without_standin(tables, dict(zip(figures, sidecars)), spec, context or {}, other_paths, mode)
    except Exception as exc:
        log.error("claim %s over %s not evaluated: %s: %s", claim["id"], "+".join(figures), type(exc).__name__, exc)
        raise
    _log_results(log, out["claims"], f" over {'+'.join(figures)}")
    if missing:  # evaluated over the built figures only: say so where the verdict is read
        for r in [out["claims"][0]] + ([part] if part is not None else []):
            r["reason"] = f"over {', '.join(part['figures'] if r is part else figures)} (not built: " \
                          f"{', '.join(missing)}): {r['reason']}"
    if part is not None:
        out["claims"][0]["without_standin"] = part
        _log_results(log, [{"id": claim["id"], **part}], f" over {'+'.join(part['figures'])} (without stand-ins)")
    write_json({"paper": paper, "figure": None, "figures": figures, "figures_not_built": missing,
                "claim_id": claim["id"],
                "data_sources": {f: s["data_source"] for f, s in zip(figures, sidecars)}, **out,
                "inputs": inputs_record(dict(zip(figures, csv_paths)), claim)}, out_path)
