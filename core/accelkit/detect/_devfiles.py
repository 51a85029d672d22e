"""Device files traced back to the PCI function behind them.

A file under ``/dev`` does not say whose device it is. TPU chips appear as ``/dev/accel<N>`` or
``/dev/vfio/<group>``, but NVIDIA's driver 570 and Habana's create ``/dev/accel/accel<N>`` too,
and DPDK binds network cards to ``vfio-pci``, which gives them a ``/dev/vfio/<group>`` as well.
Counting such files made GPU nodes "TPU nodes" once; only the PCI function behind a file names
its vendor, so a family that counts device files asks here which function each one is (the
TPU plugin does; any accelerator under the kernel's accel subsystem or behind VFIO can).

A family whose driver has device files of its own name (``/dev/davinci<N>``, ``/dev/rbln<N>``)
lists them with :func:`numbered_files`.
"""

from __future__ import annotations

import posixpath
import re
from typing import NamedTuple

from accelkit._visibility import is_index
from accelkit.detect._layers import PciDevice, listed_vendors, pci_device_at
from accelkit.host import Host

__all__ = ["DeviceFile", "accel_files", "device_files", "numbered_files", "vfio_files"]

ACCEL_CLASS = "/sys/class/accel"
IOMMU_GROUPS = "/sys/kernel/iommu_groups"
GLOB_SPECIAL = r"([*?[])"
"""The characters a glob pattern reads as wildcards, each made literal by bracketing it, as
``glob.escape`` does (``glob`` itself compiles its patterns at import, which start-up avoids)."""


def numbered_files(host: Host, prefix: str) -> list[tuple[int, str]]:
    """The files ``<prefix><N>`` the host has, as ``(N, path)`` in N order (``10`` after ``9``).

    N is the rest of the file's name when that is a plain index (:func:`is_index`): the driver's
    other files (``/dev/davinci_manager``, ``/dev/rbln_ctl``, ``/dev/hl_controlD0``) are left
    out. ``prefix`` is a machine path taken as written (a ``[`` or ``*`` in it is no wildcard);
    its last part may be empty (``/dev/vfio/``: files named by a number alone) and the ones
    before it directories (``/dev/rngd/npu``). An index with leading zeros is one too:
    ``<prefix>01`` is ``(1, path)``, and beside a ``<prefix>1`` both are listed, under 1.
    ``[]`` when there are none.
    """
    stem = posixpath.basename(prefix)
    found = []
    for path in host.glob(re.sub(GLOB_SPECIAL, r"[\1]", prefix) + "[0-9]*"):
        number = posixpath.basename(path)[len(stem) :]
        if is_index(number):
            found.append((int(number), path))
    return sorted(found)


class DeviceFile(NamedTuple):
    """A device file a process opens, and the PCI function that backs it."""

    path: str
    pci: PciDevice


def accel_files(host: Host) -> list[DeviceFile]:
    """``/dev/accel<N>`` and ``/dev/accel/accel<N>`` (any vendor), in accel number order.

    Both spellings are backed by ``/sys/class/accel/accel<N>/device``; a file whose class entry
    has no PCI vendor is left out, since nothing says whose it is.
    """
    found: list[DeviceFile] = []
    files = (*numbered_files(host, "/dev/accel"), *numbered_files(host, "/dev/accel/accel"))
    for _, path in files:
        device = f"{ACCEL_CLASS}/{posixpath.basename(path)}/device"
        if host.exists(f"{device}/vendor"):
            found.append(DeviceFile(path, pci_device_at(host, device)))
    return found


def vfio_files(host: Host) -> list[DeviceFile]:
    """``/dev/vfio/<group>`` with each PCI function of its IOMMU group, in PCI bus order.

    ``/dev/vfio/vfio`` (the container file) is not a group and is skipped.
    """
    found: list[DeviceFile] = []
    for _, path in numbered_files(host, "/dev/vfio/"):
        group = posixpath.basename(path)
        members = f"{IOMMU_GROUPS}/{group}/devices"
        for name in host.listdir(members):
            found.append(DeviceFile(path, pci_device_at(host, f"{members}/{name}", name)))
    return sorted(found, key=lambda f: f.pci.bus_id)


def device_files(host: Host, vendor: int) -> list[DeviceFile]:
    """Accel and VFIO device files backed by a PCI function of ``vendor``, one per function.

    Every such file is backed by a PCI function, so where the kernel's listing of them has none
    of ``vendor`` there is nothing to trace (see :func:`~accelkit.detect.pci_devices`): a server
    whose network cards are bound to VFIO for DPDK has a group per virtual function, each read
    to find it is not the vendor's.
    """
    listed = listed_vendors(host)
    if listed is not None and vendor not in listed:
        return []
    seen: set[str] = set()
    found: list[DeviceFile] = []
    for file in (*accel_files(host), *vfio_files(host)):
        if file.pci.vendor == vendor and file.pci.bus_id not in seen:
            seen.add(file.pci.bus_id)
            found.append(file)
    return found
