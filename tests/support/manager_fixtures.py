"""Fixtures for the node and architecture tests, imported by their conftests: which managers node
detection sees, and a host root."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Optional

import pytest
from accelkit import registry
from accelkit.manager import AcceleratorManager
from core_fakes import AcmeManager, MakeManagers, Provides, RivalManager, WidgetManager


@pytest.fixture
def use_managers() -> Iterator[MakeManagers]:
    """Make node detection see exactly the given managers (registry order as given): the
    default registry becomes one of these managers only, and is restored after the test."""
    restore: list[Optional[registry.Registry]] = []

    def install(*managers: AcceleratorManager) -> list[AcceleratorManager]:
        found = list(managers)
        previous = registry.set_default(registry.Registry([Provides(found)], autoload=False))
        restore.append(previous)
        return found

    yield install
    if restore:
        registry.set_default(restore[0])


@pytest.fixture
def generic(use_managers: MakeManagers) -> list[AcceleratorManager]:
    return use_managers(AcmeManager(), RivalManager(), WidgetManager())


@pytest.fixture
def sandbox(tmp_path: Path) -> Iterator[Path]:
    root = tmp_path / "root"
    root.mkdir()
    yield root
