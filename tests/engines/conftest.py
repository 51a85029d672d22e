"""Every engine test gets a ledger of its own (``$ACCELKIT_LEDGER`` in a temporary directory),
and, as every test, no inherited visibility variable (tests/conftest.py): the clusters and Ray
workers they start take their devices from that ledger, never from the machine's per-user one,
whatever the machine has."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def own_ledger(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    path = tmp_path / "ledger.json"
    monkeypatch.setenv("ACCELKIT_LEDGER", str(path))
    return path
