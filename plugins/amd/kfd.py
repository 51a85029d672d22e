"""AMD's KFD topology: the order ROCr numbers its GPUs in, and each node's PCI bus id.

``/sys/class/kfd/kfd/topology/nodes/<n>/properties`` holds ``name value`` lines per node; CPU
nodes have ``simd_count 0``. ``ROCR_VISIBLE_DEVICES`` counts GPU nodes in node-number order
(partitions in CPX/TPX modes included), which is neither amdsmi's handle order nor
``amd-smi list``'s, so the other layers are mapped onto this order by bus id.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Optional

from accelkit import Device, Host
from accelkit.detect import is_index, parse_int

__all__ = ["in_rocr_order", "kfd_bus_id", "kfd_gpu_nodes"]


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
    for name in sorted(host.listdir(base), key=_node_number):
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


def _node_number(name: str) -> tuple[int, str]:
    """Sort key: node directories by number ("2" before "10"), anything else last."""
    return (int(name), "") if is_index(name) else (1 << 30, name)


def in_rocr_order(host: Host, devices: list[Device]) -> list[Device]:
    """``devices`` renumbered 0..n-1 in the order ROCr counts them: their KFD node order.

    amdsmi's handle order and ``amd-smi list``'s differ from KFD's on real machines (MI350 is a
    documented case), and ``ROCR_VISIBLE_DEVICES`` counts in KFD's, so every layer is mapped
    onto it by PCI bus id. Partitions of one card share a bus id and keep their layer's order.
    Without a KFD topology, or with a device it does not know, the layer's order is kept: ids
    are then as the layer numbered them, which is the best any tool on the machine can say.
    """
    order = [kfd_bus_id(node) for node in kfd_gpu_nodes(host) or []]
    if not order or any(device.pci_bus_id not in order for device in devices):
        return devices
    ranked = sorted(devices, key=lambda device: order.index(device.pci_bus_id))
    return [device.replace(id=str(n), index=n) for n, device in enumerate(ranked)]
