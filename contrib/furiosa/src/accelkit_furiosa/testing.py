"""Fake FuriosaAI hosts, for tests and for ``accelkit check furiosa`` (group ``accelkit.testing``).

An RNGD card is eight cores (PEs). Its driver makes ``/dev/rngd/npu<N>mgmt`` and one file per
core group it can fuse (``npu<N>pe0``, ``npu<N>pe0-1``, ``npu<N>pe0-3``, ...), and a management
directory ``/sys/class/rngd_mgmt/rngd!npu<N>mgmt`` with ``busname`` and ``device_uuid`` files:
the layout libfuriosa-kubernetes mounts into RNGD containers and furiosa-smi-go's mock, cited
(and what of it is not confirmed) in the README. ``fake_furiosa_smi`` stands in for
``furiosa_smi_py``'s ``list_devices()``.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from accelkit import FakeHost

__all__ = ["BUS_IDS", "CORE_GROUPS", "fake_furiosa_smi", "make_host", "write_devices"]

BUS_IDS = [f"0000:{bus:02x}:00.0" for bus in (0x17, 0x2A, 0x3D, 0x63, 0x99, 0xAB, 0xBD, 0xE3)]
CORE_GROUPS = ("0", "1", "2", "3", "4", "5", "6", "7", "0-1", "2-3", "4-5", "6-7", "0-3", "4-7")


def uuid_of(index: int) -> str:
    """A stable UUID for NPU ``index``."""
    return f"a1b2c3d4-0000-4000-8000-{index:012x}"


def write_devices(root: Path, count: int) -> None:
    """The driver's files for ``count`` RNGD NPUs under ``root``."""
    devices = root / "dev" / "rngd"
    devices.mkdir(parents=True, exist_ok=True)
    for index in range(count):
        (devices / f"npu{index}mgmt").write_text("")
        for group in CORE_GROUPS:
            (devices / f"npu{index}pe{group}").write_text("")
        management = root / "sys" / "class" / "rngd_mgmt" / f"rngd!npu{index}mgmt"
        management.mkdir(parents=True)
        (management / "busname").write_text(BUS_IDS[index % len(BUS_IDS)] + "\n")
        (management / "device_uuid").write_text(uuid_of(index) + "\n")


def make_host(count: int, root: Path) -> FakeHost:
    """A host with ``count`` RNGD NPUs, as their device files and sysfs show them."""
    write_devices(root, count)
    return FakeHost(root=root)


def fake_furiosa_smi(count: int, arch: str = "Arch.Rngd") -> Any:
    """A stand-in for ``furiosa_smi_py`` whose ``list_devices()`` gives ``count`` NPUs."""

    def info(index: int) -> Any:
        """The ``device_info()`` of NPU ``index``."""
        return SimpleNamespace(
            name=lambda: f"npu{index}",
            arch=lambda: arch,
            uuid=lambda: uuid_of(index),
            bdf=lambda: BUS_IDS[index % len(BUS_IDS)],
        )

    devices = [SimpleNamespace(device_info=lambda i=i: info(i)) for i in range(count)]
    return SimpleNamespace(list_devices=lambda: devices)
