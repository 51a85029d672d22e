"""Fixtures for the conformance kit's own tests (pytester is enabled in tests/conftest.py:
pytest refuses ``pytest_plugins`` in a conftest below the top level)."""

from __future__ import annotations

from pathlib import Path

import pytest
from kit_support import BROKEN, install_fake


@pytest.fixture
def broken_site(tmp_path: Path) -> Path:
    """A directory holding the broken plugin's fake distribution record, made from its
    ``pyproject.toml``; put it on sys.path with its source directory (``BROKEN / "src"``)."""
    return install_fake((BROKEN / "pyproject.toml").read_text(), tmp_path / "site")
