"""Stage `report`: results/report/index.html from every figure's outputs (dpfl.report renders it)."""

from __future__ import annotations

from pathlib import Path

from dpfl.io import atomic_path, get_logger
from dpfl.report import render_report


def build_report(figures: list[dict], settings: dict, out_html: str, log_path: str | None = None,
                 root: str | Path = ".") -> None:
    log = get_logger(log_path, "report")
    root, out = Path(root), Path(out_html)
    page, verdicts = render_report(figures, settings, (root / out).parent if not out.is_absolute() else out.parent, root)
    with atomic_path(out) as tmp:
        tmp.write_text(page)
    log.info("report with %d figures and %d claims (%s) -> %s", len({(f["paper"], f["figure"], f["mode"]) for f in figures}),
             sum(verdicts.values()), ", ".join(f"{k}: {v}" for k, v in verdicts.items()), out)
