"""Stage `report`: results/report/index.html from every figure's outputs (dpfl.report renders it), and beside it
report-standalone.html, the same page with every image, PDF and CSV inlined (data: URIs) so that it can be copied
on its own."""

from __future__ import annotations

from pathlib import Path

from dpfl.io import atomic_path, get_logger
from dpfl.report import render_reports


def build_report(figures: list[dict], settings: dict, out_html: str, log_path: str | None = None,
                 root: str | Path = ".", paper_claims: list[dict] | None = None,
                 standalone_html: str | None = None) -> None:
    """`figures`: one dict per built figure variant (paper, figure, mode, dir[, why]); `paper_claims`: one per built
    claim over several figures (paper, id, mode, figures, path); `standalone_html`: where to write the
    self-contained copy (none if None)."""
    log = get_logger(log_path, "report")
    root = Path(root)
    outputs = [Path(out_html)] + ([Path(standalone_html)] if standalone_html else [])
    outputs = [out if out.is_absolute() else root / out for out in outputs]
    pages, verdicts = render_reports(figures, settings, [(out.parent, i > 0) for i, out in enumerate(outputs)], root,
                                     paper_claims)
    for i, (out, page) in enumerate(zip(outputs, pages)):
        with atomic_path(out) as tmp:
            tmp.write_text(page)
        log.info("report%s with %d figures and %d claims (%s) -> %s", " (standalone)" if i else "",
                 len({(f["paper"], f["figure"], f["mode"]) for f in figures}), sum(verdicts.values()),
                 ", ".join(f"{k}: {v}" for k, v in verdicts.items()), out)
