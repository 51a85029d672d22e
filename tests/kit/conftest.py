"""Fixtures for the conformance kit's own tests (pytester is enabled in tests/conftest.py:
pytest refuses ``pytest_plugins`` in a conftest below the top level)."""

from __future__ import annotations

from pathlib import Path

import pytest
from kit_support import write_distribution


@pytest.fixture
def broken_site(tmp_path: Path) -> Path:
    """A directory holding the broken plugin's fake distribution record; put it on sys.path
    together with the plugin's source directory (``BROKEN / "src"``)."""
    return write_distribution(
        tmp_path / "site", "accelkit-broken", "0.1.0", {"accelkit": {"broken": "accelkit_broken"}}
    )
