"""Fixtures for the core tests: which managers node detection sees, and a host root."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from accelkit import registry
from accelkit.manager import AcceleratorManager
from core_fakes import AcmeManager, MakeManagers, RivalManager, WidgetManager


@pytest.fixture
def use_managers(monkeypatch: pytest.MonkeyPatch) -> MakeManagers:
    """Make node detection see exactly the given managers (registry order as given)."""

    def install(*managers: AcceleratorManager) -> list[AcceleratorManager]:
        found = list(managers)
        monkeypatch.setattr(registry, "managers", lambda: list(found))
        monkeypatch.setattr(registry, "call_node_labels", lambda node: {})
        return found

    return install


@pytest.fixture
def generic(use_managers: MakeManagers) -> list[AcceleratorManager]:
    return use_managers(AcmeManager(), RivalManager(), WidgetManager())


@pytest.fixture
def sandbox(tmp_path: Path) -> Iterator[Path]:
    root = tmp_path / "root"
    root.mkdir()
    yield root
