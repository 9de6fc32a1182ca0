"""The documentation's shape: a short README whose first screen has the two commands, and
no relative link in README.md or docs/ (recursively) that points to a missing file."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOC_FILES = [README, *sorted((ROOT / "docs").rglob("*.md"))]

# [text](target) and ![alt](target), target up to the first space or ")"; reference-style [id]: target lines too
INLINE_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_LINK = re.compile(r"^\s*\[[^\]]+\]:\s*<?([^\s>]+)>?", re.M)
EXTERNAL = re.compile(r"^(?:[a-zA-Z][a-zA-Z0-9+.-]*:|//|#)")  # http:, https:, mailto:, ... and in-page anchors


def _without_code(text: str) -> str:
    """The text with fenced code blocks and inline code removed: links are only links outside code."""
    text = re.sub(r"^[ \t]*(```|~~~).*?^[ \t]*\1[^\n]*$", "", text, flags=re.M | re.S)
    return re.sub(r"`[^`\n]*`", "", text)


def relative_links(path: Path) -> list[str]:
    text = _without_code(path.read_text(encoding="utf-8"))
    targets = INLINE_LINK.findall(text) + REFERENCE_LINK.findall(text)
    return [t for t in targets if not EXTERNAL.match(t)]


def test_readme_is_short():
    size = len(README.read_bytes())
    assert size <= 15_000, f"README.md is {size} bytes (wc -c); at most 15,000: move detail to docs/"


@pytest.mark.parametrize("command", ["make reproduce", "make test"])
def test_readme_shows_the_two_commands_on_its_first_screen(command):
    first = README.read_text(encoding="utf-8").splitlines()[:40]
    assert any(re.search(rf"(^|\s|`){re.escape(command)}(\s|`|$)", line) for line in first), \
        f"`{command}` is not in the first 40 lines of README.md"


def test_every_paper_and_topic_has_its_page():
    names = {p.relative_to(ROOT).as_posix() for p in DOC_FILES}
    papers = sorted(p.stem for p in (ROOT / "config" / "papers").glob("*.yaml"))
    expected = {"docs/configuration.md", "docs/claims.md", "docs/cluster.md", "docs/gpu.md", "docs/extending.md",
                "docs/architecture.md", *(f"docs/papers/{paper}.md" for paper in papers)}
    assert expected <= names, f"missing: {sorted(expected - names)}"


@pytest.mark.parametrize("path", DOC_FILES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_relative_links_point_to_existing_files(path):
    broken = []
    for target in relative_links(path):
        file_part = target.split("#", 1)[0].split("?", 1)[0]
        if file_part and not (path.parent / file_part).resolve().exists():
            broken.append(target)
    assert not broken, f"{path.relative_to(ROOT)}: links to missing files: {broken}"


def test_the_link_finder_sees_links():
    """Guard against a regex that silently finds nothing: README links to the docs."""
    assert "docs/configuration.md" in relative_links(README)
