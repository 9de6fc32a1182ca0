"""The committed docs, the reproduction record, the configuration, the tools and the code speak of the project for a
reader on any machine: no words about the circumstances the work was made in (development sessions and their time
boxes, machines lent or not), no citations of files outside the repository (`shared/spec/`, `../shared/...`), no
tracker issue numbers and no absolute paths of the machines that built it. What a reader can use instead: "not built
for this record: ≈ 4 h on 2 cores", "a GPU job; the record's builds ran without a GPU", the per-paper pages
docs/papers/<paper>.md and docs/claims.md.

A line is allowed only through ALLOWED (a legitimate use, with why) or PENDING_ELSEWHERE (a line known to need
rewording, kept empty); every ALLOWED entry must still match, so that the list does not outlive its reason."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: what a committed text must not say (case-insensitive), with what it is about
PATTERNS = {
    "circumstances of the work": re.compile(
        r"session|180-min|been lent|not drawn|device status|device tool|device machine|this VM", re.IGNORECASE),
    "a file outside the repository": re.compile(r"shared/spec|\.\./shared", re.IGNORECASE),
    "an absolute path of a build machine": re.compile(r"/work/|/root/|/home/[\w.-]+/"),
    "a tracker issue number": re.compile(r"\bissue[- ]\d+", re.IGNORECASE),
}

#: what the docs, the record, the configuration and the tools must not say either: a section of the specification the
#: project was built from, which a reader of the repository does not have (cite docs/papers/<paper>.md, docs/data.md,
#: docs/claims.md instead). Comments in src/ still carry such citations: a comment edit in a stage's code reruns
#: that stage's jobs (and stales the record), so each is reworded with the next change to its file.
OUTSIDE_CODE = {
    "a section of an external specification": re.compile(
        r"\bspec(?:'s)? ?§|\bspec D\d|\bMANIFEST §|\(spec\b|\bthe spec's\b|\bspec \w+\d{4} §", re.IGNORECASE),
}

#: legitimate uses: (file relative to the repository root, phrase on the line, why it is allowed)
ALLOWED = [
    ("src/dpfl/papers/kato2024/training/plot.py", "have panels of their own: not drawn",
     "a plot comment: the summary rows are not drawn"),
    ("src/dpfl/papers/bietti2022/plot.py", "not drawn at σ = 0", "a plot docstring: the ε axis is not drawn at σ = 0"),
    ("config/papers/kato2024.yaml", "not drawn in the paper", "the paper's figure does not draw the fourth column"),
]

#: to be fixed on another branch: hits in files this branch does not edit; the main branch empties this list once
#: those files are reworded (file, phrase, what replaces it)
PENDING_ELSEWHERE: list[tuple[str, str, str]] = []


def scanned_files() -> list[Path]:
    """README.md, docs/**/*.md, the reproduction record, config/**/*.yaml, tools/** (text files), src/**/*.py."""
    files = [ROOT / "README.md", ROOT / "docs" / "reproduction" / "record.json"]
    files += sorted((ROOT / "docs").rglob("*.md"))
    files += sorted((ROOT / "config").rglob("*.yaml"))
    files += sorted(p for p in (ROOT / "tools").rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    files += sorted(p for p in (ROOT / "src").rglob("*.py") if "__pycache__" not in p.parts)
    return [p for p in files if p.is_file()]


def _text(path: Path) -> str | None:
    """The file's text, or None for a binary file."""
    raw = path.read_bytes()
    if b"\0" in raw:
        return None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _excerpt(line: str, match: re.Match, width: int = 80) -> str:
    start, end = max(0, match.start() - width), min(len(line), match.end() + width)
    return ("…" if start else "") + line[start:end].strip() + ("…" if end < len(line) else "")


def offending_lines(allowed: list[tuple[str, str, str]]) -> tuple[list[str], set[tuple[str, str]]]:
    """(file:line: what: text for every hit not covered by `allowed`, the (file, phrase) entries of `allowed` used)."""
    hits, used = [], set()
    for path in scanned_files():
        text = _text(path)
        if text is None:
            continue
        rel = path.relative_to(ROOT).as_posix()
        phrases = [phrase for f, phrase, _ in allowed if f == rel]
        for number, line in enumerate(text.splitlines(), 1):
            rest = line
            for phrase in phrases:  # an allowed phrase is taken out; anything else on the line still counts
                if phrase in rest:
                    used.add((rel, phrase))
                    rest = rest.replace(phrase, " ")
            patterns = PATTERNS if rel.startswith("src/") else {**PATTERNS, **OUTSIDE_CODE}
            for what, pattern in patterns.items():
                m = pattern.search(rest)
                if m:
                    hits.append(f"{rel}:{number}: {what} ({m.group(0)!r}): {_excerpt(rest, m)}")
    return hits, used


def test_committed_texts_speak_of_the_project_not_of_its_build_machines():
    hits, _ = offending_lines(ALLOWED + PENDING_ELSEWHERE)
    assert not hits, ("wording about the machines or circumstances the work was made in, or files outside the "
                      "repository (say what a reader can use instead, or add a justified ALLOWED entry):\n"
                      + "\n".join(hits))


def test_every_allowed_entry_is_still_needed():
    _, used = offending_lines(ALLOWED + PENDING_ELSEWHERE)
    stale = [f"{f}: {phrase!r}" for f, phrase, _ in ALLOWED if (f, phrase) not in used]
    assert not stale, "ALLOWED entries that no longer match anything (remove them):\n" + "\n".join(stale)


def test_the_patterns_catch_what_they_are_for():
    """Guard against patterns that silently match nothing."""
    bad = ["fits a CPU but not one 180-min session", "no GPU has been lent (the device status: not drawn)",
           "measured on this VM", "Spec: `shared/spec/kato2024.md`", "DPFL_DATA_MIRROR=../shared/datasets",
           "--results /work/pb/results", "/root/.cache/x", "/home/someone/dpfl", "the issue-25 target", "issue 24"]
    for line in bad:
        assert any(p.search(line) for p in PATTERNS.values()), line
    for line in ["(spec §7)", "the spec's 0.005 accuracy", "MANIFEST §6", "(spec D3)", "spec bietti2022 §1.2"]:
        assert any(p.search(line) for p in OUTSIDE_CODE.values()), line
    for line in ["spec = cfg.papers[paper]", "specified by the user", "docs/papers/kato2024.md, 'Settings'"]:
        assert not any(p.search(line) for p in OUTSIDE_CODE.values()), line
    good = ["not built for this record: ≈ 4 h on 2 cores", "a GPU job; the record's builds ran without a GPU",
            "Claims and settings: docs/papers/lowy2023.md", "--results ../pb/results", "~/.kaggle/kaggle.json",
            "PyYAML keeps the last one silently"]
    for line in good:
        assert not any(p.search(line) for p in PATTERNS.values()), line


#: what a user-visible string of the code must not cite either (the code's comments and docstrings are not shown to a
#: user): a section of the specification the project was built from
SPEC_IN_TEXT = re.compile(r"\bspec(?:'s)? ?§|\bspec D\d|\bMANIFEST §|\(spec\b|\bthe spec\b|\bspec/|\bspec \w+\d{4} §",
                          re.IGNORECASE)

#: user-visible strings that still cite it, in stage code (editing it reruns that stage's jobs and stales the committed
#: record, so each is reworded with the next change to its file): (file, phrase, where the text shows)
SPEC_IN_STAGE_CODE = [
    ("src/dpfl/papers/kato2024/training/layout.py", "(spec §2)", "a configuration error message"),
]


def user_visible_strings(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every string constant of a module that is not a docstring or a bare string statement: the
    texts of messages, captions and written fields (f-strings by their constant parts)."""
    import ast

    tree = ast.parse(path.read_text())
    bare = {id(node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)}
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in bare]


def test_no_user_visible_string_of_the_code_cites_the_specification():
    hits, used = [], set()
    for path in sorted(p for p in (ROOT / "src").rglob("*.py") if "__pycache__" not in p.parts):
        rel = path.relative_to(ROOT).as_posix()
        known = [phrase for f, phrase, _ in SPEC_IN_STAGE_CODE if f == rel]
        for line, text in user_visible_strings(path):
            for phrase in known:
                if phrase in text:
                    used.add((rel, phrase))
                    text = text.replace(phrase, " ")
            m = SPEC_IN_TEXT.search(text)
            if m:
                hits.append(f"{rel}:{line}: {m.group(0)!r} in {text.strip()[:120]!r}")
    assert not hits, "user-visible texts citing a specification the reader does not have:\n" + "\n".join(hits)
    stale = [f"{f}: {phrase!r}" for f, phrase, _ in SPEC_IN_STAGE_CODE if (f, phrase) not in used]
    assert not stale, "SPEC_IN_STAGE_CODE entries that no longer match (remove them):\n" + "\n".join(stale)


def test_the_spec_pattern_catches_what_it_is_for():
    for line in ["(spec §2)", "the spec's 0.02 closeness", "spec D3", "(bietti2022 spec §1.3)", "see spec/lowy2023.md",
                 "warped per writer: spec §1.3's preferred source"]:
        assert SPEC_IN_TEXT.search(line), line
    for line in ["spec", "ClaimSpecError", "the figure's plot spec", "specified by the user"]:
        assert not SPEC_IN_TEXT.search(line), line
