"""Fake Rebellions hosts, for tests and for ``accelkit check rbln`` (group ``accelkit.testing``).

The cards are ATOM+ (``RBLN-CA12``, 16 GiB) as ``rbln-smi -j`` describes them: its JSON shape
(``KMD_version``, ``devices`` with ``npu``, ``name``, ``uuid``, ``device``, ``pci.bus_id``,
``memory.total`` in bytes, ``contexts``) follows the readers of that output cited in the README.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from accelkit import FakeHost

__all__ = ["MODEL", "SMI_ARGV", "fake_rebel", "make_host", "smi_json", "write_devices"]

SMI_ARGV = ("rbln-smi", "-j")
MODEL = "RBLN-CA12"
MEMORY_BYTES = 16877879296
BUS_IDS = [f"0000:{bus:02x}:00.0" for bus in (0x51, 0x52, 0x8A, 0x8B, 0xD8, 0xD9, 0xDA, 0xDB)]


def smi_json(count: int, model: str = MODEL, npu_as_number: bool = True) -> str:
    """What ``rbln-smi -j`` prints for ``count`` idle NPUs (``npu`` a number as in SDK 2.0, a
    string as in SDK 1.x with ``npu_as_number=False``)."""
    devices = [
        {
            "npu": index if npu_as_number else str(index),
            "name": model,
            "sid": f"00000000{index:08d}",
            "uuid": f"3c9a7e1a-51f2-4d1c-9b7e-00000000{index:04x}",
            "device": f"rbln{index}",
            "status": "normal",
            "fw_ver": "1.3.73",
            "pci": {
                "dev": "1eff:1220",
                "bus_id": BUS_IDS[index % len(BUS_IDS)],
                "numa_node": str(index * 2 // max(count, 1)),
                "link_speed": "32.0GT/s",
                "link_width": "16",
            },
            "temperature": "31C",
            "card_power": "41.0W",
            "pstate": "P14",
            "memory": {"used": "0", "total": str(MEMORY_BYTES)},
            "util": "0.0",
            "board_info": "RBLN-CA12 PCIe",
            "location": index,
        }
        for index in range(count)
    ]
    return json.dumps({"KMD_version": "1.3.73", "devices": devices, "contexts": []}, indent=2)


def write_devices(root: Path, count: int) -> None:
    """The ``/dev/rbln<N>`` files the driver creates, one per NPU."""
    (root / "dev").mkdir(parents=True, exist_ok=True)
    for index in range(count):
        (root / "dev" / f"rbln{index}").write_text("")


def make_host(count: int, root: Path) -> FakeHost:
    """A host with ``count`` ATOM+ NPUs: their device files, and ``rbln-smi -j`` describing them."""
    write_devices(root, count)
    return FakeHost(root=root, commands={SMI_ARGV: (0, smi_json(count))})


def fake_rebel(count: int, model: str = MODEL) -> Any:
    """A stand-in for the ``rebel`` module's two calls the plugin makes."""
    return SimpleNamespace(device_count=lambda: count, get_npu_name=lambda index=0: model)
