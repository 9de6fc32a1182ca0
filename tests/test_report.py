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

from dpfl import config, paths
from dpfl.config.overlays import scale_reductions
from dpfl.stages.claims import run_claims, run_paper_claims
from dpfl.io import config_hash
from dpfl.stages.report import build_report, refresh_report

# a valid 2×2 PNG (browsers must be able to decode it)
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAIAAAD91JpzAAAAFklEQVR4nGP8z8DAwMDAxMDAwMDAAAANHQEDasKb6QAAAABJRU5ErkJggg==")
PDF = b"%PDF-1.4\n%fixture\n"
ROOT = Path(__file__).resolve().parent.parent
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
         "checks": [{"kind": "compare", "left": {"algorithm": "a"}, "right": {"algorithm": "b"}, "op": "<",
                     "at": "first", "group_by": ["panel"], "min_group_share": 0.5, "tol": 0.001}]}


def table(figure: str, a: list[float], b: list[float]) -> pd.DataFrame:
    rows = [{"paper": PAPER, "figure": figure, "panel": "a", "curve": name, "x": x, "y": y, "algorithm": alg,
             "se": 0.001} for name, alg, ys in (("Method A", "a", a), ("Method B", "b", b)) for x, y in zip(EPS, ys)]
    return pd.DataFrame(rows)


def write_figure(root: Path, figure: str, mode: str, df: pd.DataFrame, claims: list, *, data_source="real",
                 scale="quick", params=None, paper_params=None, other=(), log=None, datasets=None,
                 cells=None) -> dict:
    """The files the figure stages write, then the claims stage on them (real reasons and causes). `cells`: {cell:
    seconds} of the timing sidecars the cell stage writes beside its tables."""
    d = root / paths.figure_dir(PAPER, figure, mode)
    d.mkdir(parents=True, exist_ok=True)
    for cell, seconds in (cells or {}).items():
        table = d / "cells" / f"{cell}.parquet"
        table.parent.mkdir(exist_ok=True)
        Path(paths.cell_timing(str(table))).write_text(json.dumps({"cell_seconds": seconds, "rounds": 5}))
    df.to_csv(d / f"{figure}.csv", index=False)
    params = params or {"trials": 3}
    reductions = scale_reductions(paper_params or params, params)  # as the workflow decides it for the table stage
    sidecar = {"paper": PAPER, "figure": figure, "mode": mode, "scale": scale, "kind": "experiment",
               "data_source": data_source, "params": params,
               "datasets": datasets or [{"name": "demo", "source": "mirror", "standin": data_source == "standin"}],
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
               log, context, list(other))
    return {"paper": PAPER, "figure": figure, "mode": mode, "dir": paths.figure_dir(PAPER, figure, mode),
            "why": "D1: the authors' code"}


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """A project folder with fig1 in both modes (the default fails C-D1, the authors' code passes it: a documented
    difference), fig2 at reduced scale (C-D1 inconclusive), a claim over both figures, and the report."""
    root = tmp_path_factory.mktemp("report")
    fig1_ac = write_figure(root, "fig1", "authors-code", table("fig1", [0.5, 0.4, 0.3, 0.2], [0.6, 0.5, 0.4, 0.3]),
                           CLAIMS, cells={"a-x": 1200.0, "a-y": 599.25})
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
    assert c["C-D1"]["reason"] == ("fails: at ε = 0.5, Method A 0.900 vs Method B 0.600, difference 0.300 > "
                                   "tolerance 0.0100")
    text = c["C-D1"]["cause_text"]
    assert "the authors-code variant (its items together) passes" in text and "D1" in text
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
    assert 'id="scale-note"' in text and "trials 3 (paper 20)" in text and "not the paper-scale results" in text
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


# --------------------------------------------------------------------------------------------------
# no rows selected is a verdict; a failed or missing claims file never shows old verdicts
# --------------------------------------------------------------------------------------------------

MISSING_VALUE = {"id": "C-D5", "claim": "A beats C", "checks": [
    {"kind": "compare", "left": {"algorithm": "a"}, "right": {"algorithm": "c"}, "op": "<"}]}
MISSING_COLUMN = {"id": "C-D6", "claim": "A beats B by method", "checks": [
    {"kind": "compare", "left": {"method": "a"}, "right": {"algorithm": "b"}, "op": "<"}]}


def test_a_claim_selecting_a_missing_value_is_inconclusive_and_the_stage_runs_to_the_end(tmp_path):
    write_figure(tmp_path, "fig1", "none", table("fig1", [0.5, 0.4, 0.3, 0.2], [0.6, 0.5, 0.4, 0.3]),
                 [MISSING_VALUE, *CLAIMS])
    d = tmp_path / paths.figure_dir(PAPER, "fig1")
    out = json.loads((d / "claims.json").read_text())
    c = {x["id"]: x for x in out["claims"]}
    assert [x["id"] for x in out["claims"]] == ["C-D5", "C-D1", "C-D2"]  # every claim written
    assert c["C-D5"]["verdict"] == "inconclusive" and c["C-D5"]["cause"] == "no-rows"
    assert c["C-D5"]["reason"] == ("inconclusive: claim C-D5, check 1 (compare): right (algorithm = c) selects no rows "
                                   "of this table: no row has algorithm = c; the table has algorithm a, b")
    assert c["C-D1"]["verdict"] == "pass" and c["C-D2"]["verdict"] == "pass"  # the others unchanged
    assert out["inputs"]["claims_hash"] == config_hash([MISSING_VALUE, *CLAIMS])
    assert set(out["inputs"]["table_sha256"]) == {"fig1"}
    # the report shows the claim with its reason, and the cause among the summary's causes
    fig = {"paper": PAPER, "figure": "fig1", "mode": "none", "dir": paths.figure_dir(PAPER, "fig1")}
    build_report([fig], {"scale": "quick"}, str(tmp_path / paths.REPORT_HTML), None, root=tmp_path)
    text = html.unescape((tmp_path / paths.REPORT_HTML).read_text())
    assert "no row has algorithm = c; the table has algorithm a, b" in text and "no-rows" in text


def test_a_claim_on_a_missing_column_stops_the_job_naming_the_claim_in_its_log(tmp_path):
    log = tmp_path / "claims.log"
    with pytest.raises(ValueError, match=r"claim C-D6, check 1 \(compare\): selector column 'method'"):
        write_figure(tmp_path, "fig1", "none", table("fig1", [0.5] * 4, [0.6] * 4), [MISSING_COLUMN], log=str(log))
    assert "demo2024/fig1 not evaluated: ClaimSpecError: claim C-D6, check 1 (compare)" in log.read_text()
    assert not (tmp_path / paths.figure_dir(PAPER, "fig1") / "claims.json").exists()


def _copy(built: Path, tmp_path: Path) -> Path:
    root = tmp_path / "project"
    shutil.copytree(built, root)
    return root


FIGS = [{"paper": PAPER, "figure": f, "mode": m, "dir": paths.figure_dir(PAPER, f, m), "why": "D1: the authors' code"}
        for f, m in (("fig1", "none"), ("fig1", "authors-code"), ("fig2", "none"))]
CROSS_ENTRY = [{"paper": PAPER, "id": "C-D4", "mode": "none", "figures": ["fig1", "fig2"],
                "path": f"results/{PAPER}/claims-C-D4.json",
                "tables": {f: paths.figure_dir(PAPER, f) + f"{f}.csv" for f in ("fig1", "fig2")}}]


def _report(root: Path, figures=FIGS, cross=CROSS_ENTRY) -> str:
    build_report(figures, {"scale": "quick"}, str(root / paths.REPORT_HTML), None, root=root, paper_claims=cross,
                 standalone_html=str(root / "results/report/report-standalone.html"))
    return html.unescape((root / paths.REPORT_HTML).read_text())


def test_a_claims_file_deleted_by_a_failed_job_shows_as_missing_with_its_error(built, tmp_path):
    """Snakemake deletes a failed job's outputs: the report shows fig2's claims as missing, with the error the job
    logged, and none of fig2's earlier verdicts."""
    root = _copy(built, tmp_path)
    d = root / paths.figure_dir(PAPER, "fig2")
    log_dir = root / paths.figure_logs(PAPER, "fig2")
    (d / "claims.json").unlink()
    log_dir.mkdir(parents=True, exist_ok=True)
    (log_dir / "claims.log").write_text("12:00:00 demo2024/fig2:claims: claims of demo2024/fig2 not evaluated: "
                                        "ClaimSpecError: claim C-D6, check 1 (compare): selector column 'method' is "
                                        "not in the table\n")
    text = _report(root)
    why = ("no claims file: the claims job failed: ClaimSpecError: claim C-D6, check 1 (compare): selector column "
           "'method' is not in the table (log: results/logs/demo2024/fig2/claims.log)")
    assert why in text and 'id="problems"' in text
    p = parse(root / paths.REPORT_HTML)
    assert [r["id"] for r in p.rows] == ["C-D1", "C-D2", "C-D4"]  # fig1's two rows and the cross claim; none of fig2
    assert "C-D1: inconclusive" not in text  # fig2's earlier verdict
    assert "claims missing" in text
    # a claims file that was never written (no log): the job failed or has not run
    (log_dir / "claims.log").unlink()
    assert "no claims file: the claims job failed or has not run (log: results/logs/demo2024/fig2/claims.log)" \
        in _report(root)


def test_a_claims_file_older_than_its_table_or_claims_is_out_of_date(built, tmp_path):
    root = _copy(built, tmp_path)
    csv = root / paths.figure_dir(PAPER, "fig1") / "fig1.csv"
    table("fig1", [0.1, 0.4, 0.3, 0.2], [0.6, 0.5, 0.4, 0.3]).to_csv(csv, index=False)  # the table changed
    text = _report(root)
    assert "the claims file was computed from an earlier fig1 table and its verdicts are not shown" in text
    p = parse(root / paths.REPORT_HTML)
    fig1 = p.rows[:2]
    # the default variant's cells say why; the authors-code variant (its own table) keeps its verdicts
    assert all("missing" in r["cells"][0]["classes"] and "earlier fig1 table" in r["cells"][0]["reason"] for r in fig1)
    assert "pass" in fig1[0]["cells"][1]["classes"]
    assert "claims stale" in text
    # the claim over fig1 and fig2 read the old fig1 table too
    assert not [r for r in p.rows if r["id"] == "C-D4"]
    assert re.search(r"demo2024 C-D4 over fig1 \+ fig2</a>: <span class=\"cause-tag\">stale</span> the claims file was "
                     r"computed from an earlier fig1 table", text)
    # the claims configured now differ from those the file was computed for
    root = _copy(built, tmp_path / "b")
    figures = [{**f, "claims_hash": config_hash(CLAIMS[:1])} for f in FIGS]
    text = _report(root, figures)
    assert "computed for other claims than the configured ones" in text
    figures = [{**f, "claims_hash": config_hash(CLAIMS)} for f in FIGS]
    assert "computed for other claims" not in _report(root, figures)


def test_a_figure_whose_files_are_missing_shows_as_not_built(built, tmp_path):
    root = _copy(built, tmp_path)
    (root / paths.figure_dir(PAPER, "fig2") / "fig2.png").unlink()
    text = _report(root)
    assert "figure not built (fig2.png missing" in text and "fig2 (not built)" in text
    assert len(parse(root / paths.REPORT_HTML).images) == 2
    standalone = html.unescape((root / "results/report/report-standalone.html").read_text())
    assert "figure not built" in standalone


def test_refresh_rebuilds_a_report_whose_inputs_changed_and_leaves_a_current_one(built, tmp_path):
    """The end-of-run handlers (workflow/rules/report.smk): a run that failed in fig2's claims job rewrote fig2's
    table and image and lost its claims file; the old page would show the new image beside the old verdicts."""
    root = _copy(built, tmp_path)
    html_path, standalone = root / paths.REPORT_HTML, root / "results/report/report-standalone.html"
    assert refresh_report(FIGS, {"scale": "quick"}, str(html_path), str(standalone), CROSS_ENTRY, root=root) == ""
    before = html_path.read_text()
    d = root / paths.figure_dir(PAPER, "fig2")
    table("fig2", [0.5, 0.4, 0.3, 0.2], [0.4, 0.3, 0.2, 0.1]).to_csv(d / "fig2.csv", index=False)
    (d / "claims.json").unlink()
    done = refresh_report(FIGS, {"scale": "quick"}, str(html_path), str(standalone), CROSS_ENTRY, root=root,
                          failed=True, run_log=[str(root / ".snakemake/log/run.log")])  # Snakemake 9: a list
    assert done.startswith("report rebuilt") and html_path.read_text() != before
    for page in (html_path, standalone):
        text = html.unescape(page.read_text())
        assert "The last run failed before it rebuilt this page (see .snakemake/log/run.log)" in text
        assert "no claims file: the claims job failed or has not run" in text
        assert "earlier fig2 table" in text  # the claim over fig1 and fig2
    # no report yet: nothing to keep current
    assert refresh_report(FIGS, {}, str(tmp_path / "none/index.html"), None, root=root) == ""


def test_refresh_replaces_a_report_it_cannot_rebuild(built, tmp_path):
    root = _copy(built, tmp_path)
    html_path = root / paths.REPORT_HTML
    sidecar = root / paths.figure_dir(PAPER, "fig2") / "fig2.json"
    sidecar.write_text("{ not json")
    done = refresh_report(FIGS, {"scale": "quick"}, str(html_path), None, CROSS_ENTRY, root=root, failed=True)
    assert done.startswith("report replaced by an out-of-date notice")
    text = html_path.read_text()
    assert "out of date" in text and "C-D1" not in text


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
    scale: [document.getElementById('scale-note').offsetHeight,
            document.querySelector('#scale-note table').checkVisibility()],
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
    """A real browser loads every figure image and shows a reason in every claim row (not collapsed); the scale
    banner is a few lines, its table collapsed."""
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
    banner, table_shown = result["scale"]
    assert 0 < banner < 150 and table_shown is False, result["scale"]  # a sentence; its table collapsed
    for cells in result["reasons"]:
        for reason, visible in cells:
            assert reason and visible, cells


def test_the_summary_orders_every_cause():
    """Every cause dpfl.claims can give has its place in the report's summary of causes (a cause missing from
    CAUSE_ORDER would vanish from it)."""
    from dpfl.claims import CAUSES
    from dpfl.report import CAUSE_ORDER

    assert sorted(CAUSE_ORDER) == sorted(CAUSES)


# --------------------------------------------------------------------------------------------------
# a claim over several figures with a stand-in member also gets its verdict without it
# --------------------------------------------------------------------------------------------------

C_D7 = {"id": "C-D7", "figures": ["fig1", "fig2"], "claim": "A beats B everywhere",
        "checks": [{"kind": "compare", "left": {"algorithm": "a"}, "right": {"algorithm": "b"}, "op": "<",
                    "tol": 0.01}]}


def _cross_with_standin(root: Path, fig2_a: list[float], sources=("standin", "real"), fig2_params=None) -> dict:
    """fig1 (A above B: the claim fails there) and fig2 (`fig2_a` against B), with these data sources; C-D7 over
    both; returns its claims file."""
    entries = [write_figure(root, "fig1", "none", table("fig1", [0.9, 0.8, 0.7, 0.6], [0.6, 0.5, 0.4, 0.3]), [],
                            data_source=sources[0]),
               write_figure(root, "fig2", "none", table("fig2", fig2_a, [0.6, 0.5, 0.4, 0.3]), [],
                            data_source=sources[1], params=fig2_params or {"trials": 3},
                            paper_params={"trials": 20} if fig2_params else None)]
    out = root / f"results/{PAPER}/claims-C-D7.json"
    run_paper_claims(PAPER, C_D7, [str(root / e["dir"] / f"{e['figure']}.csv") for e in entries],
                     [str(root / e["dir"] / f"{e['figure']}.json") for e in entries], str(out), None, {"x_name": "ε"})
    cross = [{"paper": PAPER, "id": "C-D7", "mode": "none", "figures": ["fig1", "fig2"],
              "path": f"results/{PAPER}/claims-C-D7.json"}]
    build_report(entries, {"scale": "quick"}, str(root / paths.REPORT_HTML), None, root=root, paper_claims=cross)
    return json.loads(out.read_text())


def test_a_claim_over_figures_with_a_stand_in_member_has_a_verdict_without_it(tmp_path):
    data = _cross_with_standin(tmp_path, [0.5, 0.4, 0.3, 0.2])
    assert data["data_sources"] == {"fig1": "standin", "fig2": "real"}
    c = data["claims"][0]
    assert c["verdict"] == "stand-in" and c["verdict_on_data"] == "fail" and c["cause"] == "stand-in"
    part = c["without_standin"]
    assert part["figures"] == ["fig2"] and part["standin_figures"] == ["fig1"] and part["data_source"] == "real"
    assert part["verdict"] == part["verdict_on_data"] == "pass" and part["cause"] is None
    assert part["reason"].startswith("passes: Method A < Method B at all 4 ε values")
    # the report shows both: in the claim's cell and in the summary row
    text = html.unescape((tmp_path / paths.REPORT_HTML).read_text())
    assert "without the stand-in figure fig1, over fig2 (real data): pass" in text
    raw = (tmp_path / paths.REPORT_HTML).read_text()
    assert re.search(r">&nbsp;C-D7: stand-in&nbsp;</span> <span class=\"pass\"[^>]*>&nbsp;without fig1: pass&nbsp;",
                     raw)
    p = parse(tmp_path / paths.REPORT_HTML)
    (row,) = [r for r in p.rows if r["id"] == "C-D7"]
    assert "stand-in" in row["cells"][0]["classes"] and row["cells"][0]["reason"].startswith("stand-in data")


def test_the_verdict_without_stand_ins_has_its_own_cause(tmp_path):
    """The real-data part fails at reduced scale: its cause is reduced-scale, while the whole stays stand-in."""
    c = _cross_with_standin(tmp_path, [0.5, 0.6, 0.3, 0.2], fig2_params={"trials": 3})["claims"][0]
    assert c["verdict"] == "stand-in" and c["without_standin"]["verdict"] == "fail"
    assert c["without_standin"]["cause"] == "reduced-scale" and "trials 3 (paper 20)" in c["without_standin"][
        "cause_text"]
    text = html.unescape((tmp_path / paths.REPORT_HTML).read_text())
    assert "over fig2 (real data): fail" in text and "fails: at ε = 1, Method A 0.600 vs Method B 0.500" in text


@pytest.mark.parametrize("sources", [("real", "real"), ("standin", "standin")])
def test_no_part_without_stand_ins_when_all_or_none_are_stand_ins(tmp_path, sources):
    c = _cross_with_standin(tmp_path, [0.5, 0.4, 0.3, 0.2], sources=sources)["claims"][0]
    assert "without_standin" not in c
    assert c["verdict"] == ("fail" if sources[0] == "real" else "stand-in")
    assert "without the stand-in" not in (tmp_path / paths.REPORT_HTML).read_text()


# --------------------------------------------------------------------------------------------------
# the scale banner, the cells' compute time, why a dataset is a stand-in
# --------------------------------------------------------------------------------------------------


def test_the_scale_banner_is_one_sentence_and_a_collapsed_table(tmp_path):
    """A smoke-like reduction (lists of dicts) is one sentence above a table inside <details>, values written
    for reading (no Python dict or list reprs)."""
    panels = [{"id": "a", "users": 100}, {"id": "b", "users": 1000}]
    figs = [write_figure(tmp_path, f, "none", table(f, [0.5, 0.4, 0.3, 0.2], [0.6, 0.5, 0.4, 0.3]), [],
                         params={"trials": 3, "panels": panels[:1], "eps": [0.5, 1.0]},
                         paper_params={"trials": 20, "panels": panels, "eps": [0.5, 1.0]}) for f in ("fig1", "fig2")]
    figs.append(write_figure(tmp_path, "fig3", "none", table("fig3", [0.5, 0.4, 0.3, 0.2], [0.6, 0.5, 0.4, 0.3]), []))
    build_report(figs, {"scale": "smoke"}, str(tmp_path / paths.REPORT_HTML), None, root=tmp_path)
    raw = (tmp_path / paths.REPORT_HTML).read_text()
    start = raw.index('<div class="scale-note" id="scale-note">')
    banner = raw[start:raw.index("</div>", start)]
    sentence = html.unescape(re.search(r"<p>(.*?)</p>", banner, re.S).group(1))
    assert sentence == ("Scale 'smoke': 2 of 3 figures ran with smaller settings than the papers' (trials, panels), so "
                        "their verdicts are not the paper-scale results (cause 'reduced-scale'); rerun with --config "
                        "scale=paper for those.")
    details = banner[banner.index("<details>"):]
    rows = [[html.unescape(re.sub(r"<[^>]+>", "", c)) for c in re.findall(r"<td[^>]*>(.*?)</td>", r, re.S)]
            for r in re.findall(r"<tr>(.*?)</tr>", details, re.S)[1:]]
    assert rows == [["demo2024", "panels", "[{id: a, users: 100}]", "[{id: a, users: 100}, {id: b, users: 1000}]",
                     "fig1, fig2"], ["demo2024", "trials", "3", "20", "fig1, fig2"]]
    assert "{'" not in html.unescape(banner) and "<summary>the 2 settings that differ from the papers'" in banner


def test_compute_seconds_are_the_cells_not_the_table_stage(built):
    """fig1 (authors-code) has two cells timed 1200 s and 599.25 s: its compute is their sum, the table stage's 1.5 s
    stays in the tooltip; a figure without timing sidecars shows a dash, an analytic one its table's time."""
    raw = (built / paths.REPORT_HTML).read_text()
    rows = re.findall(r'<tr><td>demo2024</td><td><a href="#demo2024-(\w+)-([\w-]+)">.*?<td class="num" title="([^"]*)">'
                      r"([^<]*)</td>", raw, re.S)
    compute = {(f, m): (html.unescape(v), html.unescape(t)) for f, m, t, v in rows}
    assert compute[("fig1", "authors-code")][0] == "1799.2"
    assert "its 2 cells" in compute[("fig1", "authors-code")][1] and "1.5 s" in compute[("fig1", "authors-code")][1]
    assert compute[("fig1", "none")][0] == "–" and "no timing sidecar" in compute[("fig1", "none")][1]
    assert "compute 1799.2 s in 2 cells, table 1.5 s" in html.unescape(raw)


def test_the_reason_a_dataset_is_a_stand_in_is_shown(tmp_path):
    """From the data sidecar's fallback_reasons (each source that failed), or the configuration's choice."""
    reasons = ["mirror /m/demo: demo: the mirror /m has no demo/ folder",
               "url https://a/demo.csv: demo: URLError: Name or service not known",
               "url https://b/demo.csv: demo: URLError: Name or service not known"]
    fig1 = write_figure(tmp_path, "fig1", "none", table("fig1", [0.5, 0.4, 0.3, 0.2], [0.6, 0.5, 0.4, 0.3]), [],
                        data_source="standin", datasets=[{"name": "demo", "source": "standin", "standin": True,
                                                          "fallback_reasons": reasons}])
    fig2 = write_figure(tmp_path, "fig2", "none", table("fig2", [0.5, 0.4, 0.3, 0.2], [0.6, 0.5, 0.4, 0.3]), [],
                        data_source="standin", datasets=[{"name": "other", "source": "standin", "standin": True,
                                                          "fallback_reasons": []}])
    build_report([fig1, fig2], {"scale": "quick", "data_source": "standin"}, str(tmp_path / paths.REPORT_HTML), None,
                 root=tmp_path)
    text = html.unescape((tmp_path / paths.REPORT_HTML).read_text())
    summary = ("no real source worked (mirror, 2 × url): mirror /m/demo: demo: the mirror /m has no demo/ folder; "
               "and 2 more")
    assert f"demo is a stand-in: {summary}" in text  # beside the figure's watermark banner
    assert f"<summary>why a stand-in: {summary}</summary>" in text  # in the data provenance table, every line below
    assert all(f"<li><code>{line}</code></li>" in text for line in reasons)
    assert "other is a stand-in: the configuration asks for the stand-in (data_source: standin)" in text


def test_compute_seconds_count_only_the_cells_the_table_read(tmp_path):
    """A stale timing sidecar left in cells/ (an older cell layout, another scale) is not this run's compute."""
    from dpfl.record import cells_seconds

    cells = tmp_path / "cells"
    cells.mkdir()
    for name, seconds in (("a", 10.0), ("b", 5.5), ("a-default", 99.0)):  # "a-default": a per-method cell of old
        (cells / f"{name}.timing.json").write_text(json.dumps({"cell_seconds": seconds}))
    assert cells_seconds(tmp_path, ["a.parquet", "b.parquet"]) == {"seconds": 15.5, "cells": 2}
    assert cells_seconds(tmp_path, ["a.parquet", "gone.parquet"]) == {"seconds": 10.0, "cells": 1}
    assert cells_seconds(tmp_path) == {"seconds": 114.5, "cells": 3}  # an older sidecar without cells_read


def test_each_figure_shows_the_committed_paper_scale_record_beside_its_own_verdicts(built, tmp_path):
    """docs/reproduction/record.json (dpfl.record) is shown per figure: the record's verdicts with their causes, its
    date and commit, a link to the entry on its paper's page, "not built" where the record has no run, and an entry
    that no longer matches today's figures is marked stale."""
    root = tmp_path / "project"
    shutil.copytree(built, root)
    fig1_claims = [{"id": "C-D1", "claim": "A beats B at every ε", "verdict": "fail", "cause": "not-reproduced",
                    "reason": "fails at ε = 0.5"}, {"id": "C-D2", "claim": "A falls with ε", "verdict": "pass",
                                                     "cause": None, "reason": "passes"}]
    rec = {"papers": {PAPER: {"recorded": "2026-01-02", "commit": "0123456789ab", "dirty": False, "command": "c",
                              "paper_claims": [],
                              "entries": [{"figure": "fig1", "mode": "none", "status": "built", "scale": "paper",
                                           "claims": fig1_claims, "settings_hash": "x", "code_files": {}},
                                          {"figure": "fig2", "mode": "none", "status": "not built",
                                           "why": "not in the recorded build"}]}}}
    (root / paths.RECORD_DIR).mkdir(parents=True)
    (root / paths.RECORD_DIR / "record.json").write_text(json.dumps(rec))
    figures = [{"paper": PAPER, "figure": f, "mode": "none", "dir": paths.figure_dir(PAPER, f, "none"), "why": ""}
               for f in ("fig1", "fig2")]
    build_report(figures, {"scale": "quick"}, str(root / paths.REPORT_HTML), None, root=root)
    page = (root / paths.REPORT_HTML).read_text()
    assert "Paper-scale record (2026-01-02, commit <code>0123456789ab</code>, scale paper)" in page
    assert "C-D1: fail (not-reproduced)" in page and "C-D2: pass" in page
    assert f'href="../../docs/reproduction/{PAPER}.md#fig1"' in page
    assert "not built at paper scale (not in the recorded build)" in page
    assert "stale: no longer a registered figure" in page  # demo2024 is not a registered paper


def test_a_claim_over_several_figures_is_evaluated_over_the_built_ones_and_names_them(tmp_path):
    """A claim over fig1-fig3 of which only fig2 was built (e.g. the others take hours at paper scale) still gets a
    verdict, over fig2, and its file and reason name fig2 and the figures not built."""
    fig2 = write_figure(tmp_path, "fig2", "none", table("fig2", [0.5, 0.4, 0.3, 0.2], [0.6, 0.5, 0.4, 0.3]), [])
    out = tmp_path / f"results/{PAPER}/claims-C-D7.json"
    spec = {**C_D7, "figures": ["fig1", "fig2", "fig3"]}
    run_paper_claims(PAPER, spec, [str(tmp_path / fig2["dir"] / "fig2.csv")],
                     [str(tmp_path / fig2["dir"] / "fig2.json")], str(out), None, {"x_name": "ε"}, built=["fig2"])
    data = json.loads(out.read_text())
    assert data["figures"] == ["fig2"] and data["figures_not_built"] == ["fig1", "fig3"]
    c = data["claims"][0]
    assert c["verdict"] == "pass" and c["reason"].startswith("over fig2 (not built: fig1, fig3): ")


def test_a_check_on_a_figure_not_built_is_left_out_of_a_claim_over_the_built_ones(tmp_path):
    """kato2024's C-K4b has a check on Fig 5 alone (GROUP-2 at U = 100): over Figs 6-7 it is left out, not a
    no-rows inconclusive."""
    fig2 = write_figure(tmp_path, "fig2", "none", table("fig2", [0.5, 0.4, 0.3, 0.2], [0.6, 0.5, 0.4, 0.3]), [])
    out = tmp_path / f"results/{PAPER}/claims-C-D7.json"
    check = C_D7["checks"][0]
    spec = {**C_D7, "figures": ["fig1", "fig2"], "checks": [check, {**check, "select": {"figure": "fig1"}}]}
    run_paper_claims(PAPER, spec, [str(tmp_path / fig2["dir"] / "fig2.csv")],
                     [str(tmp_path / fig2["dir"] / "fig2.json")], str(out), None, {"x_name": "ε"}, built=["fig2"])
    c = json.loads(out.read_text())["claims"][0]
    assert c["verdict"] == "pass" and len(c["checks"]) == 1 and "left out" in c["note"]


# --------------------------------------------------------------------------------------------------
# the first screen: stand-ins used, build date and commit; the standalone page's links to the record
# --------------------------------------------------------------------------------------------------

GIT = ["git", "-c", "user.name=dpfl tests", "-c", "user.email=tests@dpfl.invalid", "-c", "commit.gpgsign=false"]


def test_the_first_screen_names_the_datasets_that_used_stand_ins(tmp_path):
    """Before any figure: how many datasets the figures used stand-ins for, each with why and the figures on it."""
    reasons = ["mirror /m/demo: demo: the mirror /m has no demo/ folder",
               "url https://a/demo.csv: demo: URLError: Name or service not known"]
    standin = [{"name": "demo", "source": "standin", "standin": True, "fallback_reasons": reasons}]
    figures = [write_figure(tmp_path, f, "none", table(f, [0.5, 0.4, 0.3, 0.2], [0.6, 0.5, 0.4, 0.3]), [],
                            data_source="standin", datasets=standin) for f in ("fig1", "fig2")]
    figures.append(write_figure(tmp_path, "fig3", "none", table("fig3", [0.5, 0.4, 0.3, 0.2], [0.6, 0.5, 0.4, 0.3]),
                                [], data_source="standin",
                                datasets=[{"name": "other", "source": "standin", "standin": True}]))
    figures.append(write_figure(tmp_path, "fig4", "none", table("fig4", [0.5, 0.4, 0.3, 0.2], [0.6, 0.5, 0.4, 0.3]),
                                [], datasets=[{"name": "real", "source": "mirror", "standin": False}]))
    build_report(figures, {"scale": "quick", "data_source": "auto", "dataset_source": {"other": "standin"}},
                 str(tmp_path / paths.REPORT_HTML), None, root=tmp_path)
    raw = (tmp_path / paths.REPORT_HTML).read_text()
    text = re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", "", raw)))
    assert raw.index('id="standins"') < raw.index('class="figure"') and raw.index('id="standins"') < raw.index(
        "<h2>Summary</h2>") + 400
    assert ("2 datasets used stand-ins (synthetic data of the same format: figures on them are not evidence, "
            "their verdicts are stand-in): demo: no real source worked (mirror, url): mirror /m/demo: demo: the "
            "mirror /m has no demo/ folder; and 1 more. Figures: demo2024 fig1, demo2024 fig2. other: the "
            "configuration asks for the stand-in (data_source: standin). Figures: demo2024 fig3.") in text, text
    assert f'<a href="#{PAPER}-fig1-none">' in raw[raw.index('id="standins"'):raw.index('class="figure"')]
    build_report(figures[3:], {"scale": "quick"}, str(tmp_path / "real/index.html"), None, root=tmp_path)
    assert 'id="standins"' not in (tmp_path / "real/index.html").read_text()


def test_the_first_screen_says_how_to_get_each_stand_ins_real_data():
    """With the project's catalog, each stand-in comes with its download size and the one line that fetches it."""
    from dpfl.report import standins_used

    why = {"summary": "no real source worked (url): url x: URLError", "lines": []}
    entries = [{"built": True, "paper": "lowy2023", "figure": "fig4", "mode": "none",
                "sidecar": {"datasets": [{"name": "mnist", "standin_why": why}]}}]
    (item,) = standins_used(entries, config.load_datasets(ROOT))
    assert item["fetch"] == ("real data: 11.6 MB to download with `dataset_source: {mnist: real}` in "
                             "config/config.yaml, or a copy in the mirror")
    assert standins_used(entries)[0]["fetch"] == ""


def _first_screen(page: Path) -> str:
    raw = page.read_text()
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", "", raw[:raw.index("<h2>Summary</h2>")])))


def test_the_report_says_when_and_from_which_commit_it_was_built(built, tmp_path):
    """The commit is read when the page is built (the rule passes nothing commit-dependent, so a new commit does
    not rerun the report): its short hash, "dirty" with uncommitted changes, or that the folder is no git checkout."""
    screen = _first_screen(built / paths.REPORT_HTML)
    assert re.search(r"Built \d{4}-\d\d-\d\d \d\d:\d\d UTC from a folder that is not a git checkout\.", screen), screen
    root = tmp_path / "project"
    shutil.copytree(built, root)
    subprocess.run([*GIT, "init", "-q"], cwd=root, check=True)
    subprocess.run([*GIT, "add", "-A"], cwd=root, check=True)
    subprocess.run([*GIT, "commit", "-q", "-m", "build"], cwd=root, check=True)
    short = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True,
                           text=True).stdout.strip()
    figures = [{"paper": PAPER, "figure": "fig1", "mode": "none", "dir": paths.figure_dir(PAPER, "fig1", "none")}]
    build_report(figures, {"scale": "quick"}, str(root / paths.REPORT_HTML), None, root=root)
    assert f"from commit {short}." in _first_screen(root / paths.REPORT_HTML)
    (root / paths.figure_dir(PAPER, "fig1", "none") / "fig1.md").write_text("edited\n")
    build_report(figures, {"scale": "quick"}, str(root / paths.REPORT_HTML), None, root=root)
    assert f"from commit {short}, dirty (uncommitted changes)." in _first_screen(root / paths.REPORT_HTML)


def _with_record(built: Path, root: Path, remote: str | None) -> str:
    """`built` copied to a git checkout `root` (with `remote` as origin) holding a committed record of fig1; the
    report built there. Returns the commit."""
    shutil.copytree(built, root)
    rec = {"papers": {PAPER: {"recorded": "2026-01-02", "commit": "0123456789ab", "dirty": False, "command": "c",
                              "paper_claims": [],
                              "entries": [{"figure": "fig1", "mode": "none", "status": "built", "scale": "paper",
                                           "claims": [], "settings_hash": "x", "code_files": {}}]}}}
    (root / paths.RECORD_DIR).mkdir(parents=True)
    (root / paths.RECORD_DIR / "record.json").write_text(json.dumps(rec))
    subprocess.run([*GIT, "init", "-q"], cwd=root, check=True)
    if remote:
        subprocess.run(["git", "remote", "add", "origin", remote], cwd=root, check=True)
    subprocess.run([*GIT, "add", "-A"], cwd=root, check=True)
    subprocess.run([*GIT, "commit", "-q", "-m", "record"], cwd=root, check=True)
    figures = [{"paper": PAPER, "figure": "fig1", "mode": "none", "dir": paths.figure_dir(PAPER, "fig1", "none")}]
    build_report(figures, {"scale": "quick"}, str(root / paths.REPORT_HTML), None, root=root,
                 standalone_html=str(root / "results/report/report-standalone.html"))
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True).stdout.strip()


def test_the_standalone_page_links_the_record_by_its_web_address(built, tmp_path):
    """report-standalone.html is copied on its own: its links to the committed record are absolute, at the commit
    of the build, from the `origin` remote; index.html, inside the checkout, keeps relative links."""
    root = tmp_path / "project"
    commit = _with_record(built, root, "git@github.com:owner/dpfl-repro.git")
    index = (root / paths.REPORT_HTML).read_text()
    standalone = (root / "results/report/report-standalone.html").read_text()
    assert f'href="../../docs/reproduction/{PAPER}.md#fig1"' in index and "github.com" not in index
    assert (f'href="https://github.com/owner/dpfl-repro/blob/{commit}/docs/reproduction/{PAPER}.md#fig1"'
            in standalone)
    assert "../../docs/" not in standalone and 'id="relative-links"' not in standalone
    assert "Links to the paper-scale record go to https://github.com/owner/dpfl-repro at commit" in _first_screen(
        root / "results/report/report-standalone.html")


def test_without_a_remote_the_standalone_page_says_its_record_links_are_relative(built, tmp_path):
    root = tmp_path / "project"
    _with_record(built, root, None)
    standalone = root / "results/report/report-standalone.html"
    assert f'href="../../docs/reproduction/{PAPER}.md#fig1"' in standalone.read_text()
    assert ("Links to the paper-scale record (docs/reproduction/) are relative to the repository"
            in _first_screen(standalone))
    assert 'id="relative-links"' not in (root / paths.REPORT_HTML).read_text()


def test_no_page_text_cites_an_external_specification(built):
    """The pages cite the project's own docs (docs/…) or state the rule; a reader has no specification to look up."""
    from test_wording import OUTSIDE_CODE

    for name in ("index.html", "report-standalone.html"):
        text = html.unescape(re.sub(r"<[^>]+>", " ", (built / "results/report" / name).read_text()))
        hits = [m.group(0) for p in OUTSIDE_CODE.values() for m in p.finditer(text)]
        assert not hits and not re.search(r"\bspec\b", text, re.IGNORECASE), (name, hits)
