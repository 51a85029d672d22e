"""Walking sysfs for GPUs behind DRM: each GPU is a ``card<N>`` and a ``renderD<N>``.

The walker deduplicates by bus id, looks only through the :class:`Host` and returns None when
``/sys/class/drm`` itself is absent, so a detection layer can tell "no such interface" (try the
next layer) from "no devices". A device's NUMA node needs no walker here:
:func:`accelkit.detect.detect_layers` reads it for every device with a PCI bus id.
"""

from __future__ import annotations

import posixpath
import re
from typing import Optional

from accelkit.detect._layers import PciDevice, listed_vendors, pci_device_at, read_int
from accelkit.host import Host

__all__ = ["drm_devices"]


def drm_devices(host: Host, vendor: int) -> Optional[list[PciDevice]]:
    """PCI devices of ``vendor`` behind ``/sys/class/drm/card<N>`` and ``renderD<N>``.

    A GPU has both a card and a render node: they are deduplicated by bus id and returned in
    bus order. Only the ``vendor`` file of another vendor's GPU is read, and a GPU's facts are
    read once; none at all when the kernel's listing of PCI functions has none of ``vendor``
    (see :func:`~accelkit.detect.pci_devices`). None when ``/sys/class/drm`` does not exist (no
    DRM at all).
    """
    base = "/sys/class/drm"
    if not host.is_dir(base):
        return None
    listed = listed_vendors(host)
    if listed is not None and vendor not in listed:
        return []  # a DRM GPU of the vendor is one of its PCI functions, and it has none
    found: dict[str, PciDevice] = {}
    for name in host.listdir(base):
        if not re.fullmatch(r"(card|renderD)[0-9]+", name):
            continue
        path = f"{base}/{name}/device"
        if read_int(host, f"{path}/vendor", 16) != vendor:
            continue  # another vendor's GPU: its other files are not read
        bus_id = posixpath.basename(host.realpath(path) or path).lower()
        if bus_id not in found:  # else the render node of a card already read, or the card
            found[bus_id] = pci_device_at(host, path, bus_id)
    return [found[bus] for bus in sorted(found)]
