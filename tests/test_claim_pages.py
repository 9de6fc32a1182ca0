"""The project's own description of every claim (dpfl.claim_pages): docs/papers/<paper>.md carries a Claims section
generated from config/papers/<paper>.yaml, kept current by a test, and the record links every claim id to it."""

from __future__ import annotations

from pathlib import Path

import yaml

from dpfl import claim_pages, cli
from dpfl.papers import PAPERS

ROOT = Path(__file__).resolve().parents[1]

SPEC = {
    "figures": {
        "fig1": {"claims": [
            {"id": "C-X1", "claim": "A beats B", "quote": "A outperforms B", "place": "Sec. 2",
             "checks": [{"kind": "compare", "left": {"curve": "A"}, "right": {"curve": "B"}, "op": "<",
                         "rel_tol": 0.05, "inferred": "the 5% tolerance"}]},
            {"id": "S-X2", "claim": "ε grows with T", "quote": "ε grows like √T", "place": "Thm. 1",
             "verbatim": False, "sanity": True, "checks": [{"kind": "slope", "min": 0.4, "max": 0.65}]},
        ]},
        "fig2": {"claims": [
            {"id": "C-X1", "claim": "A beats B", "quote": "A outperforms B", "place": "Sec. 2",
             "checks": [{"kind": "compare", "left": {"curve": "A"}, "right": {"curve": "B"}, "op": "<",
                         "min_points": 3}]},
        ]},
    },
    "claims": [{"id": "C-X3", "claim": "A is faster over both", "quote": "faster", "place": "Sec. 3",
                "inferred_claim": "no sentence names Fig 2", "figures": ["fig1", "fig2"],
                "paper_inconsistent": "Sec. 3 and Sec. 4 disagree",
                "checks": [{"kind": "compare", "left": {"level": float("inf")}, "right": {"level": [0, 0.3]},
                            "op": "<"}]}],
}


def test_a_claims_section_says_the_claim_the_papers_words_and_each_figures_checks():
    text = claim_pages.section("demo", SPEC)
    assert text.startswith("<!-- claims: generated") and text.rstrip().endswith(claim_pages.END)
    assert "(2 of the paper, 1 sanity check)" in text
    one = text[text.index("### C-X1"):text.index("### S-X2")]
    assert "Claim: A beats B." in one and "The paper: “A outperforms B” (Sec. 2)" in one
    # per figure, its own checks as configured, the inferred mark in words and not in the configured form
    assert one.index("Checked on Fig 1 ") < one.index("rel_tol: 0.05") < one.index("Checked on Fig 2 ")
    assert "*Inferred:* the 5% tolerance" in one and "inferred:" not in one
    assert one.index("Checked on Fig 2 ") < one.index("min_points: 3")
    sanity = text[text.index("### S-X2"):text.index("### C-X3")]
    assert "A sanity check" in sanity and "Restated in the project's words (not a quote)" in sanity
    over = text[text.index("### C-X3"):]
    assert "Checked on Fig 1 and Fig 2 together" in over and "right: {level: [0, 0.3]}" in over
    assert "left: {level: inf}" in over and "*Inferred claim:* no sentence names Fig 2" in over
    assert "contradicts itself here" in over and "Sec. 3 and Sec. 4 disagree" in over


def test_the_section_replaces_its_old_self_keeps_the_page_and_is_appended_where_missing(tmp_path):
    (tmp_path / "config" / "papers").mkdir(parents=True)
    (tmp_path / "docs" / "papers").mkdir(parents=True)
    (tmp_path / "config" / "papers" / "demo.yaml").write_text(yaml.safe_dump(SPEC, allow_unicode=True))
    page = tmp_path / "docs" / "papers" / "demo.md"
    page.write_text("# demo\n\nBy hand.\n")
    assert claim_pages.check(tmp_path, ["demo"]) != []
    assert claim_pages.write(tmp_path, ["demo"]) == [page]
    first = page.read_text()
    assert first.startswith("# demo\n\nBy hand.\n\n<!-- claims: generated") and "### C-X3" in first
    assert claim_pages.check(tmp_path, ["demo"]) == [] and claim_pages.write(tmp_path, ["demo"]) == []
    page.write_text(first.replace("Claim: A beats B.", "Claim: edited by hand.") + "\nAfter.\n")
    claim_pages.write(tmp_path, ["demo"])
    assert page.read_text() == first + "\nAfter.\n"  # the section regenerated, the text around it kept
    assert list((tmp_path / "docs" / "papers").iterdir()) == [page]  # nothing half-written left beside it


def test_every_papers_page_describes_every_configured_claim_and_is_current(capsys):
    """The committed pages match their configuration (python -m dpfl claims-doc rewrites them), and every claim id
    of config/papers/*.yaml has its heading, the record's links land on."""
    assert claim_pages.check(ROOT, PAPERS) == [], "run: python -m dpfl claims-doc"
    for paper in PAPERS:
        spec = yaml.safe_load((ROOT / "config" / "papers" / f"{paper}.yaml").read_text())
        page = (ROOT / "docs" / "papers" / f"{paper}.md").read_text()
        ids = {c["id"] for f in spec["figures"].values() for c in f.get("claims") or []}
        ids |= {c["id"] for c in spec.get("claims") or []}
        for cid in ids:
            assert f"\n### {cid}\n" in page, (paper, cid)
    assert cli.main(["claims-doc", "--check"]) == 0
    assert cli.main(["claims-doc", "--papers", "nopaper"]) == 2
    assert "unknown paper(s) nopaper" in capsys.readouterr().err


def test_a_syntax_error_in_the_paper_file_is_one_line_naming_file_line_and_column(tmp_path, monkeypatch, capsys):
    (tmp_path / "config" / "papers").mkdir(parents=True)
    (tmp_path / "config" / "config.yaml").write_text("")
    (tmp_path / "workflow").mkdir()
    (tmp_path / "workflow" / "Snakefile").write_text("")
    (tmp_path / "config" / "papers" / "lowy2023.yaml").write_text("figures:\n  fig4:\n<<<<<<< HEAD\n  x: 1\n")
    monkeypatch.chdir(tmp_path)
    assert cli.main(["claims-doc", "--papers", "lowy2023", "--check"]) == 2
    err = capsys.readouterr().err
    assert "lowy2023.yaml, line 4, column 4: not valid YAML" in err and "Traceback" not in err
