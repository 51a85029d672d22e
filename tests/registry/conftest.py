"""Hermetic discovery: every test starts with a fresh registry, a clean environment and a fake
site directory as the only source of third-party entry points."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from accelkit import registry
from fake_dists import PLUGIN_VARS, FakeSite


@pytest.fixture(autouse=True)
def clean_registry(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No inherited ACCELKIT_*PLUGIN* variable, and no discovery left over from another test."""
    for var in PLUGIN_VARS:
        monkeypatch.delenv(var, raising=False)
    registry.reset()
    yield
    registry.reset()


@pytest.fixture(autouse=True)
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeSite]:
    """The only third-party plugins discovery sees; modules it imports are forgotten after."""
    path = tmp_path / "site"
    path.mkdir()
    fake = FakeSite(path)
    monkeypatch.syspath_prepend(str(path))
    registry.set_default(registry.Registry(entry_points=fake.entry_points))
    before = set(sys.modules)
    yield fake
    for name in set(sys.modules) - before:
        module_file = getattr(sys.modules[name], "__file__", None) or ""
        if module_file.startswith(str(path)):
            del sys.modules[name]
