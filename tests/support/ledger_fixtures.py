"""Fixtures of the ledger, `accelkit run` and pool tests (tests/ledger, tests/pool), imported by
their conftests: they run on example nodes (no hardware), each with its own ledger file, in a
clean environment: no inherited ACCELKIT_* or visibility variable (tests/conftest.py), no
third-party plugin."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from accelkit import Node, registry
from accelkit.ledger._ledger import Ledger
from ledger_support import NODES, node_of


@pytest.fixture(autouse=True)
def builtins_only(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A fresh registry of the built-ins: no third-party entry point."""
    monkeypatch.setenv(registry.AUTOLOAD_OFF_VAR, "1")
    registry.reset()
    yield
    registry.reset()


@pytest.fixture(scope="session")
def node_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each example node's JSON (``accelkit ls --json``), detected once for the session."""
    folder = tmp_path_factory.mktemp("nodes")
    files = {}
    for name in NODES:
        files[name] = folder / f"{name}.json"
        files[name].write_text(json.dumps(node_of(name).to_dict()))
    return files


@pytest.fixture
def h100(node_files: dict[str, Path]) -> Node:
    return Node.from_dict(json.loads(node_files["nvidia-h100-8gpu"].read_text()))


@pytest.fixture
def ledger_path(tmp_path: Path) -> Path:
    return tmp_path / "ledger.json"


@pytest.fixture
def ledger(ledger_path: Path, h100: Node) -> Ledger:
    return Ledger(ledger_path, h100)
