"""No network, ever: full detection of every family, on this machine and on every example node,
under an audit hook that records any socket connect or name lookup (records, not raises: a
raise inside detection would be caught and turned into a diagnostic, hiding the attempt)."""

from __future__ import annotations

import contextlib
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from accelkit import detect_node, load_snapshot, registry

NODES = sorted((Path(__file__).resolve().parents[2] / "examples" / "nodes").iterdir())
NETWORK_EVENTS = frozenset(
    {"socket.connect", "socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyaddr"}
)
_attempts: list[tuple[str, str]] = []
_armed = [False]


def _hook(event: str, args: tuple[Any, ...]) -> None:
    if _armed[0] and event in NETWORK_EVENTS:
        _attempts.append((event, repr(args)[:200]))


sys.addaudithook(_hook)  # an audit hook cannot be removed: it records only while armed


@pytest.fixture
def network_watch() -> Iterator[list[tuple[str, str]]]:
    _attempts.clear()
    _armed[0] = True
    try:
        yield _attempts
    finally:
        _armed[0] = False


def test_the_hook_sees_a_lookup(network_watch: list[tuple[str, str]]) -> None:
    with contextlib.suppress(OSError):  # a sandbox may have no resolver: the attempt counts
        socket.getaddrinfo("localhost", 80)
    assert [event for event, _ in network_watch] == ["socket.getaddrinfo"]


def test_detection_on_this_machine_uses_no_network(
    network_watch: list[tuple[str, str]],
) -> None:
    registry.reset()  # the default registry, every installed plugin, loaded under the watch
    node = detect_node()
    assert {m.name for m in registry.managers()} <= {d.family for d in node.diagnostics}
    assert network_watch == []


@pytest.mark.parametrize("node", NODES, ids=[n.name for n in NODES])
def test_detection_of_every_example_node_uses_no_network(
    node: Path, network_watch: list[tuple[str, str]]
) -> None:
    detected = detect_node(load_snapshot(node))
    assert detected.devices
    assert network_watch == []
