"""Shared fixtures for the plugin tests: detection with its diagnostics, fake hosts, snapshots."""

from __future__ import annotations

import pathlib
from collections.abc import Sequence
from typing import Callable

import accelkit
import pytest
from accelkit.device import Device
from accelkit.diagnostics import Diagnostic, collecting
from accelkit.host import FakeHost, Host, load_snapshot
from accelkit.manager import AcceleratorManager

Detect = Callable[[AcceleratorManager, Host], tuple[list[Device], str]]


def _notes_text(notes: Sequence[Diagnostic]) -> str:
    return "\n".join(f"{note.level}: {note.message}" for note in notes)


@pytest.fixture
def run_detect() -> Detect:
    """``run_detect(manager, host)`` -> the devices and the diagnostics as ``level: message`` lines.

    Detection must never raise, whatever the host holds: a raise fails the test right here.
    """

    def run(manager: AcceleratorManager, host: Host) -> tuple[list[Device], str]:
        with collecting(manager.name) as notes:
            devices = manager.detect(host)
        return devices, _notes_text(notes)

    return run


@pytest.fixture
def check_make_host(
    run_detect: Detect, tmp_path: pathlib.Path
) -> Callable[[AcceleratorManager, Callable[[int, pathlib.Path], FakeHost], int], None]:
    """``check(manager, make_host, count)``: the fake host has devices "0".."count-1"."""

    def check(
        manager: AcceleratorManager, make_host: Callable[[int, pathlib.Path], FakeHost], count: int
    ) -> None:
        devices, _ = run_detect(manager, make_host(count, tmp_path))
        assert [d.id for d in devices] == [str(n) for n in range(count)]

    return check


@pytest.fixture
def check_snapshot(
    run_detect: Detect,
) -> Callable[[AcceleratorManager, pathlib.Path, int, str], list[Device]]:
    """``check(manager, directory, count, label)``: replaying the node snapshot, the command
    layer gives devices "0".."count-1" of one type label, and the node offers them."""

    def check(
        manager: AcceleratorManager, directory: pathlib.Path, count: int, label: str
    ) -> list[Device]:
        devices, notes = run_detect(manager, load_snapshot(directory))
        assert [d.id for d in devices] == [str(n) for n in range(count)]
        assert {d.type_label for d in devices} == {label}
        assert f"{count} device(s) from the command layer" in notes
        node = accelkit.detect_node(load_snapshot(directory))
        assert [d.id for d in node.devices if d.family == manager.name] == [d.id for d in devices]
        assert node.resources[manager.resource_name] == float(count)
        assert node.resources[f"accelerator_type:{label}"] == 1.0
        return devices

    return check
