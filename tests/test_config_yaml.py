"""Every YAML file the pipeline reads goes through one reader (dpfl.config.read_yaml) that rejects a key written
twice in one mapping, naming the file, the line and the key (PyYAML alone keeps the last value silently)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dpfl import config

ROOT = Path(__file__).resolve().parent.parent


def test_a_duplicate_key_in_a_paper_file_names_file_line_and_key(project):
    path = project / "config/papers/kato2024.yaml"
    lines = path.read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if "kind: monotone, direction: increasing" in line)
    lines[at] = lines[at].replace("strict: true}", "strict: true, direction: decreasing}")
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(config.ConfigError, match=rf"kato2024\.yaml, line {at + 1}, column \d+: not valid YAML: "
                                                 r"duplicate key 'direction' \(first at line \d+"):
        config.load(project)


def test_a_duplicate_key_in_nested_blocks_and_other_files_is_caught(tmp_path):
    path = tmp_path / "x.yaml"
    path.write_text("a: 1\nb:\n  c: 2\n  d: 3\n  c: 4\n")
    with pytest.raises(config.ConfigError, match=r"x\.yaml, line 5, column 3: .*duplicate key 'c' \(first at line 3"):
        config.read_yaml(path)


def test_merge_keys_may_be_overridden_and_the_same_key_in_sibling_mappings_is_fine(tmp_path):
    path = tmp_path / "x.yaml"
    path.write_text("base: &b {x: 1, y: 2}\nmine:\n  <<: *b\n  y: 3\nother: {x: 1}\n")
    assert config.read_yaml(path) == {"base": {"x": 1, "y": 2}, "mine": {"x": 1, "y": 3}, "other": {"x": 1}}


@pytest.mark.parametrize("path", sorted(p.relative_to(ROOT) for folder in ("config", "workflow/schemas", "profiles")
                                        for p in (ROOT / folder).rglob("*.yaml")), ids=str)
def test_every_yaml_file_of_the_project_has_unique_keys(path):
    config.read_yaml(ROOT / path)
