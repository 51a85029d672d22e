"""Every scheduler test runs against the real built-in managers only, in a clean environment."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from accelkit import registry


@pytest.fixture(autouse=True)
def builtins_only(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """A fresh registry of the built-ins (no third-party entry point), no inherited framework
    memory hint that the env tests read (the visibility variables and ``ACCELKIT_*`` are gone
    for every test: tests/conftest.py), and a ledger of the test's own (``accelkit env`` reads
    the node's ledger, never this user's)."""
    for name in list(os.environ):
        if name.endswith("_MEM_FRACTION"):
            monkeypatch.delenv(name)
    monkeypatch.setenv(registry.AUTOLOAD_OFF_VAR, "1")
    monkeypatch.setenv("ACCELKIT_LEDGER", str(tmp_path / "ledger.json"))
    registry.reset()
    yield
    registry.reset()
