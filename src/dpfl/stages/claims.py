"""Stage `claims`: check the paper's claims on a figure's tidy table -> claims.json."""

from __future__ import annotations

import json
from pathlib import Path

from dpfl import claims as claims_mod
from dpfl import tidy
from dpfl.io import get_logger, write_json


def run_claims(paper: str, figure: str, claims: list, csv_path: str, sidecar_path: str, out_path: str,
               log_path: str | None) -> None:
    log = get_logger(log_path, f"{paper}/{figure}:claims")
    df = tidy.read(csv_path)
    sidecar = json.loads(Path(sidecar_path).read_text())
    results = claims_mod.evaluate(df, claims, sidecar["data_source"])
    for r in results:
        log.info("%s: %s", r["id"], r["verdict"])
    write_json({"paper": paper, "figure": figure, "mode": sidecar["mode"], "data_source": sidecar["data_source"],
                "claims": results}, out_path)
