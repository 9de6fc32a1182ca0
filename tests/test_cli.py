"""The command-line tools (python -m dpfl …): arguments are checked with one-line messages, the configuration
prints readable UTF-8, configuration errors read like the pipeline's."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from dpfl import config

ROOT = Path(__file__).resolve().parent.parent


def dpfl(*args):
    return subprocess.run([sys.executable, "-m", "dpfl", *args], cwd=ROOT, capture_output=True, text=True,
                          encoding="utf-8", timeout=120)


@pytest.mark.parametrize("args, needle", [
    (["--q", "0", "--sigma", "5", "--steps", "10", "--delta", "1e-5"], "q must be > 0"),
    (["--q", "1.5", "--sigma", "5", "--steps", "10", "--delta", "1e-5"], "q must be ≤ 1"),
    (["--q", "0.1", "--sigma", "-1", "--steps", "10", "--delta", "1e-5"], "sigma must be > 0"),
    (["--q", "0.1", "--sigma", "nan", "--steps", "10", "--delta", "1e-5"], "sigma must be finite"),
    (["--q", "0.1", "--sigma", "5", "--steps", "0", "--delta", "1e-5"], "steps must be ≥ 1"),
    (["--q", "0.1", "--sigma", "5", "--steps", "10", "--delta", "1"], "delta must be < 1"),
])
def test_epsilon_rejects_bad_arguments_without_traceback(args, needle):
    proc = dpfl("epsilon", *args)
    assert proc.returncode == 2 and needle in proc.stderr and "Traceback" not in proc.stderr


def test_epsilon_prints_a_finite_epsilon():
    proc = dpfl("epsilon", "--q", "0.01", "--sigma", "5", "--steps", "1000", "--delta", "1e-5")
    assert proc.returncode == 0 and "ε = 0.234" in proc.stdout


def test_config_prints_utf8_not_escapes():
    proc = dpfl("config")
    assert proc.returncode == 0 and "\\u" not in proc.stdout and "ε" in proc.stdout
    assert json.loads(proc.stdout)["papers"]["lowy2023"]["noise_calibration"] == "paper"


def test_yaml_syntax_error_names_file_and_line(project):
    path = project / "config/papers/balle2020.yaml"
    lines = path.read_text().splitlines()
    lines[5] = lines[5] + " [unclosed"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(config.ConfigError, match=r"balle2020\.yaml, line \d+, column \d+: not valid YAML"):
        config.load(project)


def test_bound_violations_read_as_rules(project):
    path = project / "config/papers/lowy2023.yaml"
    path.write_text(path.read_text().replace("trials: 20", "trials: 0", 1))
    with pytest.raises(config.ConfigError, match=r"figures\.fig4\.params\.trials: 0 must be >= 1"):
        config.load(project)
