"""A fake PCI function in sysfs, laid out as the kernel lays it out, for any plugin's fake hosts.

Every family whose detection reads the PCI bus (ids, class, NUMA node, driver) writes the same
files in its fakes; :func:`write_pci_function` writes them once, the way
:func:`accelkit.detect.pci_devices` and :func:`accelkit.detect.pci_device_at` read them: the
function's directory under a host bridge, ``/sys/devices/pci<domain>:00/<bus id>``, and
``/sys/bus/pci/devices/<bus id>`` a relative symlink to it, so a path resolved through the bus
(or through ``/sys/class/drm/card0/device``) ends where it ends on a machine.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Optional, Union

__all__ = ["write_pci_function"]

PROCESSING_ACCELERATOR = 0x120000
"""PCI class 0x12, subclass 0x00: what TPUs, Gaudi, Instinct and most NPUs declare."""


def write_pci_function(
    root: Union[str, os.PathLike[str]],
    bus_id: str,
    vendor: int,
    device: int,
    class_code: int = PROCESSING_ACCELERATOR,
    *,
    numa_node: int = 0,
    driver: Optional[str] = None,
    files: Optional[Mapping[str, str]] = None,
) -> Path:
    """Write PCI function ``bus_id`` (``0000:17:00.0``) under ``root``, a fake host's root
    directory; return its directory, so a caller can add what else its driver shows there.

    The directory is ``/sys/devices/pci<domain>:00/<bus id>`` (directly under the domain's
    first host bridge: the bridges between are left out, as no detection reads them), holding
    ``vendor``, ``device``, ``class`` and ``numa_node`` (-1 for a machine without NUMA), and
    ``/sys/bus/pci/devices/<bus id>`` links to it. ``driver`` is the driver it is bound to:
    its ``driver`` link to ``/sys/bus/pci/drivers/<driver>``. ``files`` are further attributes
    by name (``{"mem_info_vram_total": "206158430208"}``; ``accel/accel0/dev`` makes the
    directories). Every value is written newline-terminated, as the kernel's are.

    The kernel's one-file listing ``/proc/bus/pci/devices`` is not written: without it,
    detection reads every function, as where a container hides it. Writing one function twice,
    or two functions of one device, is fine: directories and links already there are kept.
    """
    bridge = f"pci{bus_id[:4]}:00"
    function = Path(root) / "sys/devices" / bridge / bus_id
    attributes = {
        "vendor": f"{vendor:#06x}",
        "device": f"{device:#06x}",
        "class": f"{class_code:#08x}",
        "numa_node": str(numa_node),
        **(files or {}),
    }
    for name, value in attributes.items():
        (function / name).parent.mkdir(parents=True, exist_ok=True)
        (function / name).write_text(value + "\n")
    _link(Path(root) / "sys/bus/pci/devices" / bus_id, f"../../../devices/{bridge}/{bus_id}")
    if driver is not None:
        (Path(root) / "sys/bus/pci/drivers" / driver).mkdir(parents=True, exist_ok=True)
        _link(function / "driver", f"../../../bus/pci/drivers/{driver}")
    return function


def _link(path: Path, target: str) -> None:
    """A relative symlink, unless ``path`` is one already (the same function written again)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.is_symlink():
        os.symlink(target, path)
