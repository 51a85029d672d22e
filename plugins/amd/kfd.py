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

__all__ = ["MEMORY", "in_rocr_order", "kfd_bus_id", "kfd_gpu_nodes"]

BASE = "/sys/class/kfd/kfd/topology/nodes"
MEMORY = "mem_banks.size_in_bytes"
"""Where :func:`kfd_gpu_nodes` puts a node's memory from its ``mem_banks`` (not a KFD property
name): the sum of its frame-buffer banks' ``size_in_bytes``, right per compute partition where
sysfs ``mem_info_vram_total`` gives the whole card."""
FRAME_BUFFER = (1, 2)  # heap_type of HSA_HEAPTYPE_FRAME_BUFFER_PUBLIC and _PRIVATE banks


def kfd_gpu_nodes(host: Host) -> Optional[list[dict[str, int]]]:
    """Integer properties of the GPU nodes of the AMD KFD topology, in node order.

    Each ``/sys/class/kfd/kfd/topology/nodes/<n>/properties`` is ``name value`` lines; CPU nodes
    have ``simd_count 0`` and are skipped. ROCr numbers its GPUs in this order, partitions
    (CPX/TPX modes) included. Each node's frame-buffer memory is under :data:`MEMORY` when its
    ``mem_banks`` give it. None when there is no KFD topology.
    """
    if not host.is_dir(BASE):
        return None
    nodes: list[dict[str, int]] = []
    for name in sorted(host.listdir(BASE), key=_node_number):
        properties = _properties(host, f"{BASE}/{name}/properties")
        if properties.get("simd_count", 0) > 0:
            memory = _memory(host, f"{BASE}/{name}/mem_banks")
            nodes.append(properties if memory is None else {**properties, MEMORY: memory})
    return nodes


def _properties(host: Host, path: str) -> dict[str, int]:
    """A KFD ``properties`` file: ``name value`` lines, the integer ones."""
    lines = (host.read_text(path) or "").splitlines()
    pairs = (line.split(None, 1) for line in lines)
    return {p[0]: n for p in pairs if len(p) == 2 and (n := parse_int(p[1])) is not None}


def _memory(host: Host, banks: str) -> Optional[int]:
    """The sum of a node's frame-buffer ``mem_banks`` sizes; None when it lists none."""
    sizes = [_properties(host, f"{banks}/{bank}/properties") for bank in host.listdir(banks)]
    frame_buffer = [p for p in sizes if p.get("heap_type") in FRAME_BUFFER]
    found = [p["size_in_bytes"] for p in frame_buffer if "size_in_bytes" in p]
    if not found:
        return None
    return sum(found)


def kfd_bus_id(properties: Mapping[str, int]) -> Optional[str]:
    """The PCI bus id of a KFD node from its ``domain`` and ``location_id`` (bus<<8|dev<<3|fn).
    A compute partition's is its card's with the partition's index in the function bits, a
    function that does not exist (``partitions``); bits above 15 are not part of it."""
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
    onto it by PCI bus id. Compute partitions have ids of their own (the card's, with the
    partition's index in the function bits: ``partitions``); where a kernel gives them the
    card's own, they keep their layer's order.
    Without a KFD topology, or with a device it does not know, the layer's order is kept: ids
    are then as the layer numbered them, which is the best any tool on the machine can say.
    """
    order = [kfd_bus_id(node) for node in kfd_gpu_nodes(host) or []]
    if not order or any(device.pci_bus_id not in order for device in devices):
        return devices
    ranked = sorted(devices, key=lambda device: order.index(device.pci_bus_id))
    return [device.replace(id=str(n), index=n) for n, device in enumerate(ranked)]
