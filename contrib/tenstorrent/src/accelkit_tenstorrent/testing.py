"""Fake Tenstorrent hosts, for tests and for ``accelkit check tenstorrent`` (``accelkit.testing``).

The boards are n300s: two Wormhole chips each, the left one on PCIe (``/dev/tenstorrent/<N>``, a
PCI function of vendor 0x1e52, device 0x401e) and the right one behind it, which tt-smi's
snapshot lists with the bus id ``N/A``. The snapshot keeps the fields tt-smi's own tests require
(``device_info[].board_info``: ``bus_id``, ``board_type``, ``board_id``, ``coords``, ...).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from accelkit import FakeHost

__all__ = ["BUS_IDS", "SNAPSHOT_ARGV", "make_host", "snapshot_json", "write_devices"]

SNAPSHOT_ARGV = ("tt-smi", "-s", "--snapshot_no_tty")
BUS_IDS = [f"0000:{bus:02x}:00.0" for bus in (0x03, 0x04, 0x21, 0x22, 0x41, 0x42, 0x61, 0x62)]
WORMHOLE = "0x401e"


def chip(bus_id: str, board_type: str, board_id: str) -> dict[str, Any]:
    """One chip of tt-smi's snapshot, its board facts filled in."""
    board = {
        "bus_id": bus_id,
        "board_type": board_type,
        "board_id": board_id,
        "coords": "N/A",
        "dram_status": True,
        "dram_speed": "12G",
        "pcie_speed": 4 if bus_id != "N/A" else "N/A",
        "pcie_width": "16" if bus_id != "N/A" else "N/A",
    }
    return {"smbus_telem": {}, "board_info": board, "telemetry": {}, "firmwares": {}, "limits": {}}


def snapshot_json(boards: int) -> str:
    """What ``tt-smi -s --snapshot_no_tty`` prints for ``boards`` n300 boards (two chips each)."""
    chips = []
    for index in range(boards):
        board_id = f"100014611{index:07d}"
        chips.append(chip(BUS_IDS[index % len(BUS_IDS)], "n300 L", board_id))
        chips.append(chip("N/A", "n300 R", board_id))
    host = {"OS": "Linux", "Distro": "Ubuntu 22.04.5 LTS", "Driver": "TT-KMD 2.0.0"}
    snapshot = {
        "time": "2026-11-20T10:00:00",
        "host_info": host,
        "host_sw_vers": {"tt_smi": "3.0.30"},
        "device_info": chips,
    }
    return json.dumps(snapshot, indent=2)


def write_devices(root: Path, boards: int) -> None:
    """The driver's ``/dev/tenstorrent/<N>`` files and the boards' PCI functions under ``root``."""
    (root / "dev" / "tenstorrent").mkdir(parents=True, exist_ok=True)
    for index in range(boards):
        (root / "dev" / "tenstorrent" / str(index)).write_text("")
        function = root / "sys" / "bus" / "pci" / "devices" / BUS_IDS[index % len(BUS_IDS)]
        function.mkdir(parents=True)
        facts = {"vendor": "0x1e52", "device": WORMHOLE, "class": "0x120000", "numa_node": "0"}
        for name, value in facts.items():
            (function / name).write_text(value + "\n")


def make_host(count: int, root: Path) -> FakeHost:
    """A host with ``count`` n300 boards: ``count`` devices, by files and by tt-smi."""
    write_devices(root, count)
    return FakeHost(root=root, commands={SNAPSHOT_ARGV: (0, snapshot_json(count))})
