"""Fake Google TPU hosts: a sysfs PCI tree with TPU chips and the device files that open them.

Laid out as on a Cloud TPU VM: each PCI function is a directory under
``/sys/devices/pci0000:00/`` linked from ``/sys/bus/pci/devices/``; v5p/v6e chips are bound to
``vfio-pci`` and opened through ``/dev/vfio/<group>`` (the group's members linked from
``/sys/kernel/iommu_groups/<group>/devices/``), v2-v4 and v5e chips through ``/dev/accel<N>``
(``/sys/class/accel/accel<N>/device``). Every host also has Google's virtual NIC, which shares
the TPU's PCI vendor id and must never be counted.

``make_host`` is this family's backdoor for the conformance kit, declared in the entry-point
group ``accelkit.testing`` (in accelkit's ``pyproject.toml``) as a third-party plugin declares
its own.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Optional

from accelkit import FakeHost
from accelkit.testing import write_pci_function

__all__ = ["GVNIC_BUS_ID", "chip_bus_id", "make_host", "write_chips", "write_pci_function"]
# write_pci_function is the kit's, named here too for this family's tests

GOOGLE = 0x1AE0
V6E = 0x006F
GVNIC_BUS_ID = "0000:00:04.0"
PCI_ROOT = "sys/devices/pci0000:00"


def chip_bus_id(index: int) -> str:
    """The bus id of chip ``index`` on the fake hosts (after the NIC, one slot per chip)."""
    return f"0000:00:{5 + index:02x}.0"


def write_chips(
    root: Path,
    count: int,
    *,
    device: int = V6E,
    vfio: bool = True,
    first_group: int = 0,
    functions: int = 1,
) -> None:
    """``count`` TPU chips of PCI device id ``device``, opened by VFIO groups or accel files.

    ``functions`` > 1 lays a chip out as TPU7x (Ironwood) does: that many PCI functions of one
    PCI device (``0000:00:05.0`` and ``0000:00:05.1``), each in a VFIO group of its own.
    """
    for index in range(count):
        bus_id = chip_bus_id(index)
        if vfio:
            for function in range(functions):
                function_id = f"{bus_id[:-1]}{function}"
                write_pci_function(root, function_id, GOOGLE, device, 0x120000)
                group = first_group + index * functions + function
                members = root / f"sys/kernel/iommu_groups/{group}/devices"
                members.mkdir(parents=True, exist_ok=True)
                os.symlink(f"../../../../devices/pci0000:00/{function_id}", members / function_id)
                _touch(root / f"dev/vfio/{group}")
        else:
            write_pci_function(root, bus_id, GOOGLE, device, 0x120000)
            link = root / f"sys/class/accel/accel{index}"
            link.mkdir(parents=True, exist_ok=True)
            os.symlink(f"../../../devices/pci0000:00/{bus_id}", link / "device")
            _touch(root / f"dev/accel{index}")
    if count and vfio:
        _touch(root / "dev/vfio/vfio")


def make_host(count: int, root: Path, env: Optional[Mapping[str, str]] = None) -> FakeHost:
    """A TPU v6e VM with ``count`` chips (0, 1, 2, 4 or 8) behind VFIO, and its virtual NIC."""
    write_pci_function(root, GVNIC_BUS_ID, GOOGLE, 0x0042, 0x020000)
    write_chips(root, count)
    return FakeHost(root=root, env=env)


def _touch(path: Path) -> None:
    """An empty device file: detection looks only for its name, never reads it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch()
