"""Stage `plot`: draw a figure from its tidy table; write PNG, PDF, the sidecar JSON (everything a
reader needs to trust the figure: mode, data source, inferred settings, config hash, versions) and a
Markdown caption (for tables, the table itself)."""

from __future__ import annotations

import json
import time
from pathlib import Path

from dpfl import tidy
from dpfl import plotting as common
from dpfl.io import atomic_path, get_logger, resolve, write_json


def run_plot(paper: str, figure: str, spec: dict, csv_path: str, meta_path: str, outputs: dict,
             log_path: str | None) -> None:
    """`spec` = {function, table_function?, title, caption, params, plot, inferred}."""
    log = get_logger(log_path, f"{paper}/{figure}:plot")
    df = tidy.read(csv_path)
    meta = json.loads(Path(meta_path).read_text())
    start = time.perf_counter()
    common.setup()
    fig = resolve(spec["function"])(df, spec, meta)
    fig.suptitle(spec.get("title", f"{paper} {figure}"), fontsize=9)
    common.annotate(fig, meta)  # the face label says whether the run is reduced: meta's reduced_scale (table stage)
    with atomic_path(outputs["png"]) as png, atomic_path(outputs["pdf"]) as pdf:
        common.save(fig, png, pdf)
    markdown = caption_markdown(paper, figure, spec, meta)
    if spec.get("table_function"):  # tables of the figure (e.g. Table 1, noise diagnostics), in Markdown
        markdown += "\n" + resolve(spec["table_function"])(df, spec)
    with atomic_path(outputs["md"]) as tmp:
        tmp.write_text(markdown)
    sidecar = {
        **meta,
        "title": spec.get("title", ""),
        "caption": (spec.get("caption") or "").strip(),
        "inferred": spec.get("inferred", []),
        "plot": spec.get("plot", {}),
        "plot_seconds": round(time.perf_counter() - start, 3),
        "files": {k: Path(v).name for k, v in outputs.items()},
        "table_columns": list(df.columns),
    }
    write_json(sidecar, outputs["json"])
    log.info("plotted %s/%s (mode %s) in %.2f s", paper, figure, meta["mode"], sidecar["plot_seconds"])


def caption_markdown(paper, figure, spec, meta) -> str:
    lines = [f"**{paper} {figure}**: {spec.get('title', '')}", "", (spec.get("caption") or "").strip(), "",
             f"Mode: `{meta['mode']}`. Data: {meta['data_source']}. Scale: {meta['scale']}."]
    for item in spec.get("inferred", []):
        lines.append(f"Inferred: `{item['key']}`: {item['note']}")
    return "\n".join(lines) + "\n"
