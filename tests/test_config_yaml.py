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


# ------------------------------------------------------------------------------------------ numbers as written


def test_scientific_notation_is_a_number(tmp_path):
    """YAML 1.1 (PyYAML) reads 1e-5 and 5E3 as strings; the project's reader, as YAML 1.2 and JSON, as floats."""
    path = tmp_path / "x.yaml"
    path.write_text("a: [1e-5, 5E3, 1.0e5, -2e-3, +1E+2, .5e1, 1.0e-6, 1_0e1]\nquoted: '1e-5'\nword: 1e5x\nint: 12\n")
    assert config.read_yaml(path) == {"a": [1e-5, 5000.0, 1e5, -2e-3, 100.0, 5.0, 1e-6, 100.0], "quoted": "1e-5",
                                      "word": "1e5x", "int": 12}
    assert all(isinstance(v, float) for v in config.read_yaml(path)["a"])


def test_delta_written_1e_5_in_a_paper_file_is_the_number(project):
    path = project / "config/papers/balle2020.yaml"
    path.write_text(path.read_text().replace("delta: 1.0e-6", "delta: 1e-6"))
    figures = config.load(project).papers["balle2020"]["figures"]
    assert figures["fig2"]["params"]["delta"] == 1e-6 and isinstance(figures["fig2"]["params"]["delta"], float)


def test_an_integer_written_in_scientific_notation_is_refused_with_how_to_write_it(project):
    """1e5 is a float: where the schema wants an integer it would fail in a job, so it is refused before any."""
    path = project / "config/papers/kato2024.yaml"
    path.write_text(path.read_text().replace("steps: 100000", "steps: 1e5"))
    with pytest.raises(config.ConfigError, match=r"figures\.fig2\.params\.steps: expected integer, got float 100000\.0 "
                                                 r"\(write it as an integer: 100000\)"):
        config.load(project)
    with pytest.raises(config.ConfigError, match=r"seed: expected integer, got float 1000\.0 \(write it as an "
                                                 r"integer: 1000\)"):
        config.load(project, {"seed": 1000.0})  # `--config seed=1e3`: Snakemake gives the float


def test_a_paper_setting_on_the_command_line_is_refused_with_where_to_write_it(project):
    """`--config delta=1e-5` (Snakemake reads the value as the float 1e-05): --config sets the global keys only."""
    for value in (1e-05, "1e-5"):
        with pytest.raises(config.ConfigError) as err:
            config.load(project, {"delta": value})
        text = str(err.value)
        assert f"delta={value}: not a global setting (--config sets only the keys of config/config.yaml: " in text
        assert "'delta' is a setting of the paper files, e.g. config/papers/balle2020.yaml: figures.fig2.params.delta" \
               "" in text
        assert f"write it there, e.g. `delta: {value}`" in text


def test_command_line_settings_are_read_as_the_project_reads_files(tmp_path):
    """The settings handed to dpfl.config.load: each --configfile read by read_yaml, then --config over them."""
    extra = tmp_path / "extra.yaml"
    extra.write_text("seed: 3\nonly: [balle2020]\nthreads: 2e0\n")
    assert config.command_line_settings([extra], {"seed": 4}) == {"seed": 4, "only": ["balle2020"], "threads": 2.0}


@pytest.mark.pipeline
def test_a_run_reads_config_yaml_with_the_project_reader(tmp_path):
    """Snakemake's own reader would say only "Config file is not valid JSON or YAML", read `1e3` as a string, and
    hand its reading to the configuration over the project's."""
    from tests.test_pipeline import assert_stopped, copy_project, snakemake

    project = copy_project(tmp_path / "project")
    path = project / "config/config.yaml"
    good = path.read_text()
    path.write_text(good.replace("scale: quick ", "scale: quick: paper "))
    proc = snakemake(project, "-n")
    assert_stopped(proc, project, "dpfl configuration error: config/config.yaml, line 3, column 13: not valid YAML: "
                                  "mapping values are not allowed here")
    assert "not valid JSON or YAML" not in proc.stdout + proc.stderr
    path.write_text(good.replace("seed: 0 ", "seed: 1e3"))
    assert_stopped(snakemake(project, "-n"), project, "config/config.yaml (+ --config overrides):\n"
                   "  - seed: expected integer, got float 1000.0 (write it as an integer: 1000)")
