"""The code lints clean: ruff with the project's settings (pyproject.toml: line length 120, rules E, F, W) over the
library, the tests, the workflow scripts and the tools."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PATHS = ["src", "tests", "workflow/scripts", "tools"]


@pytest.mark.skipif(importlib.util.find_spec("ruff") is None,
                    reason="ruff is not installed in this environment (pip install -e '.[test]' pins it)")
def test_ruff_check_is_clean():
    proc = subprocess.run([sys.executable, "-m", "ruff", "check", *PATHS], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    if proc.returncode != 0:
        pytest.fail(f"ruff check {' '.join(PATHS)} exited {proc.returncode}:\n{proc.stdout}{proc.stderr}",
                    pytrace=False)
