"""The HTML report explains itself: built from small fixture outputs written here (sidecars, tidy tables, claims
evaluated by the claims stage), it shows every figure, both modes side by side where both were built, and for each
claim its verdict, a reason (outside any collapsed detail) and a cause; numbers are rounded; the standalone copy
inlines every file. Checked with an HTML parser, and with a headless browser when one is installed."""

from __future__ import annotations

import base64
import html
import json
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest

from dpfl import paths
from dpfl.claims import scale_reductions
from dpfl.stages.claims import run_claims, run_paper_claims
from dpfl.stages.report import build_report

# a valid 2×2 PNG (browsers must be able to decode it)
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAIAAAD91JpzAAAAFklEQVR4nGP8z8DAwMDAxMDAwMDAAAANHQEDasKb6QAAAABJRU5ErkJggg==")
PDF = b"%PDF-1.4\n%fixture\n"
PAPER = "demo2024"
EPS = [0.5, 1.0, 2.0, 4.0]
CLAIMS = [
    {"id": "C-D1", "claim": "A beats B at every ε", "note": "the paper's numbers come from the authors' code (D1)",
     "checks": [{"kind": "compare", "left": {"algorithm": "a"}, "right": {"algorithm": "b"}, "op": "<", "tol": 0.01}]},
    {"id": "C-D2", "claim": "A falls with ε",
     "checks": [{"kind": "monotone", "select": {"algorithm": "a"}, "direction": "decreasing", "tol": 0.01,
                 "tol_counts": "for"}]},
]
CROSS = {"id": "C-D4", "figures": ["fig1", "fig2"], "claim": "A beats B at the smallest ε in most panels",
         "checks": [{"kind": "compare", "left": {"algorithm": "a"}, "right": {"algorithm": "b"}, "op": "<", "at": "first",
                     "group_by": ["panel"], "min_group_share": 0.5, "tol": 0.01, "tol_counts": "for"}]}


def table(figure: str, a: list[float], b: list[float]) -> pd.DataFrame:
    rows = [{"paper": PAPER, "figure": figure, "panel": "a", "curve": name, "x": x, "y": y, "algorithm": alg, "se": 0.001}
            for name, alg, ys in (("Method A", "a", a), ("Method B", "b", b)) for x, y in zip(EPS, ys)]
    return pd.DataFrame(rows)


def write_figure(root: Path, figure: str, mode: str, df: pd.DataFrame, claims: list, *, data_source="real",
                 scale="quick", params=None, paper_params=None, other=()) -> dict:
    """The files the figure stages write, then the claims stage on them (real reasons and causes)."""
    d = root / paths.figure_dir(PAPER, figure, mode)
    d.mkdir(parents=True, exist_ok=True)
    df.to_csv(d / f"{figure}.csv", index=False)
    params = params or {"trials": 3}
    reductions = scale_reductions(paper_params or params, params)  # as the workflow decides it for the table stage
    sidecar = {"paper": PAPER, "figure": figure, "mode": mode, "scale": scale, "kind": "experiment",
               "data_source": data_source, "datasets": [{"name": "demo", "source": "mirror"}], "params": params,
               "reductions": reductions, "reduced_scale": bool(reductions),
               "config_hash": "abc123", "versions": {"python": "3.11"}, "compute_seconds": 1.5,
               "device": {"platform": "test", "cpu_count": 1, "accelerator": "none"},
               "title": f"Demo {figure}", "caption": f"Caption of {figure}.", "inferred": [], "plot": {},
               "plot_seconds": 0.2}
    (d / f"{figure}.json").write_text(json.dumps(sidecar))
    (d / f"{figure}.png").write_bytes(PNG)
    (d / f"{figure}.pdf").write_bytes(PDF)
    (d / f"{figure}.md").write_text(f"**{figure}**\n\n| ε | z |\n|---|---|\n| 1 | 0.5 |\n")
    context = {"x_name": "ε", "difference": "D1: the authors' code"}
    run_claims(PAPER, figure, claims, str(d / f"{figure}.csv"), str(d / f"{figure}.json"), str(d / "claims.json"),
               None, context, list(other))
    return {"paper": PAPER, "figure": figure, "mode": mode, "dir": paths.figure_dir(PAPER, figure, mode),
            "why": "D1: the authors' code"}


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """A project folder with fig1 in both modes (the default fails C-D1, the authors' code passes it: a documented
    difference), fig2 at reduced scale (C-D1 inconclusive), a claim over both figures, and the report."""
    root = tmp_path_factory.mktemp("report")
    fig1_ac = write_figure(root, "fig1", "authors-code", table("fig1", [0.5, 0.4, 0.3, 0.2], [0.6, 0.5, 0.4, 0.3]), CLAIMS)
    ac_claims = str(root / paths.figure_dir(PAPER, "fig1", "authors-code") / "claims.json")
    fig1 = write_figure(root, "fig1", "none", table("fig1", [0.9, 0.4, 0.3, 0.2], [0.6, 0.5, 0.4, 0.3]), CLAIMS,
                        other=[ac_claims])
    fig2 = write_figure(root, "fig2", "none", table("fig2", [0.5, 0.4, 0.3, 0.2], [0.505, 0.5, 0.4, 0.3]), CLAIMS,
                        params={"trials": 3}, paper_params={"trials": 20})
    cross_path = f"results/{PAPER}/claims-C-D4.json"
    run_paper_claims(PAPER, CROSS, [str(root / fig1["dir"] / "fig1.csv"), str(root / fig2["dir"] / "fig2.csv")],
                     [str(root / fig1["dir"] / "fig1.json"), str(root / fig2["dir"] / "fig2.json")],
                     str(root / cross_path), None, {"x_name": "ε"})
    figures = [fig1, fig1_ac, fig2]
    paper_claims = [{"paper": PAPER, "id": "C-D4", "mode": "none", "figures": ["fig1", "fig2"], "path": cross_path}]
    build_report(figures, {"scale": "quick", "compat_variants": True}, str(root / paths.REPORT_HTML), None, root=root,
                 paper_claims=paper_claims, standalone_html=str(root / "results/report/report-standalone.html"))
    return root


class ReportParser(HTMLParser):
    """Images, links, claim rows (their verdict cells and the reason of each) and <pre> blocks of the page."""

    def __init__(self):
        super().__init__()
        self.images, self.links, self.rows, self.pres = [], [], [], []
        self._row = self._cell = None
        self._in_reason = self._in_pre = False
        self._details = 0
        self._text: list[str] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        classes = (a.get("class") or "").split()
        if tag == "img":
            self.images.append(a.get("src", ""))
        elif tag == "a" and a.get("href"):
            self.links.append(a["href"])
        elif tag == "tr" and "claim-row" in classes:
            self._row = {"id": a.get("data-claim"), "cells": []}
            self.rows.append(self._row)
        elif tag == "td" and "verdict-cell" in classes and self._row is not None:
            self._cell = {"classes": classes, "reason": "", "reason_in_details": False, "cause": ""}
            self._row["cells"].append(self._cell)
        elif tag == "details":
            self._details += 1
        elif tag == "p" and "reason" in classes and self._cell is not None:
            self._in_reason, self._text = True, []
            self._cell["reason_in_details"] = self._details > 0
        elif tag == "span" and "cause-tag" in classes and self._cell is not None:
            self._cause = True
        elif tag == "pre":
            self._in_pre, self._text = True, []

    def handle_endtag(self, tag):
        if tag == "p" and self._in_reason:
            self._cell["reason"] = "".join(self._text).strip()
            self._in_reason = False
        elif tag == "pre" and self._in_pre:
            self.pres.append("".join(self._text))
            self._in_pre = False
        elif tag == "details":
            self._details -= 1
        elif tag == "tr":
            self._row = self._cell = None

    def handle_data(self, data):
        if self._in_reason or self._in_pre:
            self._text.append(data)
        if getattr(self, "_cause", False) and self._cell is not None:
            self._cell["cause"] = data.strip()
            self._cause = False


def parse(path: Path) -> ReportParser:
    p = ReportParser()
    p.feed(path.read_text())
    return p


def test_claims_json_has_reason_and_cause(built):
    d = built / paths.figure_dir(PAPER, "fig1", "none")
    c = {x["id"]: x for x in json.loads((d / "claims.json").read_text())["claims"]}
    assert c["C-D1"]["verdict"] == "fail" and c["C-D1"]["cause"] == "documented-difference"
    assert c["C-D1"]["reason"] == "fails: at ε = 0.5, Method A 0.900 vs Method B 0.600, difference 0.300 > tolerance 0.0100"
    assert "authors-code variant passes" in c["C-D1"]["cause_text"] and "D1" in c["C-D1"]["cause_text"]
    assert c["C-D1"]["other_mode"] == {"mode": "authors-code", "verdict": "pass"}
    assert c["C-D2"]["verdict"] == "pass" and c["C-D2"]["cause"] is None
    fig2 = json.loads((built / paths.figure_dir(PAPER, "fig2") / "claims.json").read_text())
    assert fig2["reductions"] == {"trials": [20, 3]}
    c = {x["id"]: x for x in fig2["claims"]}
    assert c["C-D1"]["verdict"] == "inconclusive" and c["C-D1"]["cause"] == "reduced-scale"
    assert c["C-D1"]["reason"].startswith("inconclusive: Method A < Method B clearly at 3 of 4 ε values")
    cross = json.loads((built / f"results/{PAPER}/claims-C-D4.json").read_text())
    assert cross["figures"] == ["fig1", "fig2"] and cross["claims"][0]["verdict"] == "pass"
    assert "2 panels" in cross["claims"][0]["reason"]


def test_every_image_resolves_and_every_claim_row_has_a_visible_reason(built):
    page = built / paths.REPORT_HTML
    p = parse(page)
    assert len(p.images) == 3  # fig1 in both modes, fig2
    for src in p.images:
        assert not src.startswith(("/", "data:")) and (page.parent / src).read_bytes() == PNG, src
    for href in p.links:
        if href.endswith((".pdf", ".csv")):
            assert (page.parent / href).exists(), href
    assert len(p.rows) == 2 * 2 + 1  # fig1 (C-D1, C-D2), fig2 (C-D1, C-D2), C-D4
    for row in p.rows:
        for cell in row["cells"]:
            assert re.match(r"(passes|fails|inconclusive|stand-in data): \S", cell["reason"]), row
            assert not cell["reason_in_details"], row


def test_both_modes_side_by_side_with_their_causes(built):
    p = parse(built / paths.REPORT_HTML)
    text = html.unescape((built / paths.REPORT_HTML).read_text())
    fig1_rows = p.rows[:2]
    assert [r["id"] for r in fig1_rows] == ["C-D1", "C-D2"] and all(len(r["cells"]) == 2 for r in fig1_rows)
    default, authors = fig1_rows[0]["cells"]
    assert "fail" in default["classes"] and default["cause"] == "documented-difference"
    assert "pass" in authors["classes"] and authors["cause"] == ""
    assert f'id="{PAPER}-fig1-none"' in text and f'id="{PAPER}-fig1-authors-code"' in text
    assert "paper's algorithm (compat: none)" in text and "authors' code (compat: authors-code)" in text
    fig2_rows = p.rows[2:4]
    assert all(len(r["cells"]) == 1 for r in fig2_rows) and fig2_rows[0]["cells"][0]["cause"] == "reduced-scale"
    assert 'id="scale-note"' in text and "trials 3 (paper 20)" in text and "not the paper-scale result" in text
    assert f'id="{PAPER}-claims-C-D4"' in text


def test_numbers_are_rounded_for_reading(built):
    p = parse(built / paths.REPORT_HTML)
    assert p.pres and all(not re.search(r"\d\.\d{5,}", pre) for pre in p.pres)
    raw = json.loads((built / paths.figure_dir(PAPER, "fig2") / "claims.json").read_text())
    assert raw["claims"][0]["checks"][0]["numbers"]["groups"]["all"]["worst"]["margin"] == pytest.approx(0.005)


def test_standalone_copy_inlines_every_file(built, tmp_path):
    page = built / "results/report/report-standalone.html"
    moved = tmp_path / "elsewhere.html"
    shutil.copy(page, moved)
    p = parse(moved)
    assert len(p.images) == 3
    for src in p.images:
        assert src.startswith("data:image/png;base64,") and base64.b64decode(src.split(",", 1)[1]) == PNG
    files = [h for h in p.links if not h.startswith("#")]
    assert files and all(h.startswith(("data:application/pdf;base64,", "data:text/csv;base64,")) for h in files), files
    assert len(p.rows) == 5 and all(c["reason"] for r in p.rows for c in r["cells"])


BROWSERS = ["chromium", "chromium-browser", "google-chrome", "google-chrome-stable"]
CHECK_SCRIPT = """<script>
window.addEventListener('load', () => {
  const rows = [...document.querySelectorAll('tr.claim-row')];
  const out = document.createElement('pre');
  out.id = 'browser-check';
  out.textContent = JSON.stringify({
    images: [...document.images].map(i => i.complete && i.naturalWidth > 0),
    reasons: rows.map(r => [...r.querySelectorAll('td.verdict-cell')].map(td => {
      const p = td.querySelector('p.reason');
      return p ? [p.innerText.trim(), p.offsetHeight > 0] : ['', false];
    })),
  });
  document.body.appendChild(out);
});
</script>
"""


def _browser() -> str | None:
    return next((b for b in map(shutil.which, BROWSERS) if b), None)


@pytest.mark.skipif(_browser() is None, reason="no headless browser (chromium / google-chrome) installed")
@pytest.mark.parametrize("name", ["index.html", "report-standalone.html"])
def test_report_in_a_headless_browser(built, tmp_path, name):
    """A real browser loads every figure image and shows a reason in every claim row (not collapsed)."""
    page = built / "results/report" / name
    probe = page.with_name(f"probe-{name}")  # beside the report: the relative image paths resolve the same
    probe.write_text(page.read_text().replace("</body>", CHECK_SCRIPT + "</body>"))
    cmd = [_browser(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
           f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=10000", "--dump-dom", probe.as_uri()]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    finally:
        probe.unlink()
    found = re.search(r'<pre id="browser-check">(.*?)</pre>', proc.stdout, re.S)
    assert found, f"no result from the browser:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
    result = json.loads(html.unescape(found.group(1)))
    assert len(result["images"]) == 3 and all(result["images"]), result["images"]
    assert len(result["reasons"]) == 5
    for cells in result["reasons"]:
        for reason, visible in cells:
            assert reason and visible, cells
