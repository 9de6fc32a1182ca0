"""Fixtures shared by several test files."""

from __future__ import annotations

import pytest


@pytest.fixture
def no_credentials(monkeypatch, tmp_path):
    """No Kaggle credentials and no mirror from the environment, whatever the machine running the tests has."""
    for var in ("KAGGLE_USERNAME", "KAGGLE_KEY", "KAGGLE_API_TOKEN", "KAGGLE_CONFIG_DIR", "DPFL_DATA_MIRROR"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "home" / ".config"))
