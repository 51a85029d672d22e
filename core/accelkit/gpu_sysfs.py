"""Walking sysfs for GPU-like devices: DRM cards and AMD KFD topology nodes.

A GPU shows up several times in sysfs (a DRM ``card<N>`` and a ``renderD<N>``; a KFD topology
node per compute partition), so walkers deduplicate or filter as each source requires, and
report devices with the facts a :class:`Device` needs. They look only through the :class:`Host`
and return None when the source itself is absent, so a detection layer can tell "no such
interface" (try the next layer) from "no devices". A device's NUMA node needs no walker here:
:func:`accelkit.detection.detect_layers` reads it for every device with a PCI bus id.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Optional

from .detection import PciDevice, pci_device_at
from .gpu_facts import parse_int
from .host import Host

__all__ = ["drm_devices", "kfd_bus_id", "kfd_gpu_nodes"]


def drm_devices(host: Host, vendor: int) -> Optional[list[PciDevice]]:
    """PCI devices of ``vendor`` behind ``/sys/class/drm/card<N>`` and ``renderD<N>``.

    A GPU has both a card and a render node: they are deduplicated by bus id and returned in
    bus order. None when ``/sys/class/drm`` does not exist (no DRM at all).
    """
    base = "/sys/class/drm"
    if not host.is_dir(base):
        return None
    found: dict[str, PciDevice] = {}
    for name in host.listdir(base):
        if not re.fullmatch(r"(card|renderD)[0-9]+", name):
            continue
        device = pci_device_at(host, f"{base}/{name}/device")
        if device.vendor == vendor:
            found.setdefault(device.bus_id, device)
    return [found[bus] for bus in sorted(found)]


def kfd_gpu_nodes(host: Host) -> Optional[list[dict[str, int]]]:
    """Integer properties of the GPU nodes of the AMD KFD topology, in node order.

    Each ``/sys/class/kfd/kfd/topology/nodes/<n>/properties`` is ``name value`` lines; CPU nodes
    have ``simd_count 0`` and are skipped. ROCr numbers its GPUs in this order, partitions
    (CPX/TPX modes) included. None when there is no KFD topology.
    """
    base = "/sys/class/kfd/kfd/topology/nodes"
    if not host.is_dir(base):
        return None
    nodes: list[dict[str, int]] = []
    for name in host.listdir(base):
        lines = (host.read_text(f"{base}/{name}/properties") or "").splitlines()
        pairs = (line.split(None, 1) for line in lines)
        properties = {p[0]: n for p in pairs if len(p) == 2 and (n := parse_int(p[1])) is not None}
        if properties.get("simd_count", 0) > 0:
            nodes.append(properties)
    return nodes


def kfd_bus_id(properties: Mapping[str, int]) -> Optional[str]:
    """The PCI bus id of a KFD node from its ``domain`` and ``location_id`` (bus<<8|dev<<3|fn)."""
    location = properties.get("location_id")
    if location is None:
        return None
    domain = properties.get("domain", 0)
    return f"{domain:04x}:{location >> 8 & 0xFF:02x}:{location >> 3 & 0x1F:02x}.{location & 7}"
