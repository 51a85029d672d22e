"""Compute partitions: one Instinct card as several GPUs (DPX, TPX, QPX, CPX).

In a compute partition mode other than SPX, each partition (XCP) of a card is a KFD node of its
own and a ROCr device of its own (an MI300X in CPX mode is 8), yet not a PCI function: only the
card's (``0000:05:00.0``) is in ``/sys/bus/pci/devices``, so every sysfs file is read there.

Bus ids: KFD gives partition n the card's PCI id with n OR-ed into the function bits
(kfd_topology.c, ``kfd_topology_add_device``: ``location_id |= node_id`` when a card has several
nodes), so partition 2 reads as ``0000:05:00.2`` in KFD, in amdsmi (its BDF comes from that
``location_id``) and in amd-smi (ROCm/rocm_smi_lib#208, ROCm/rocm-systems#5805,
open-mpi/hwloc#774). A variant putting n in bits 31:28 was posted and reverted; under it every
partition reads as the card's own bus id. Both layouts are read alike: a node whose bus id is no
PCI function joins the card of its slot (PCI domain, bus and device) listed before it, partition 0
(whose id is the card's own) naming the card, while separate GPUs on one slot (SR-IOV functions)
are each a PCI function of their own and stay apart; each partition is given the card's bus id
and NUMA node.

The amdgpu driver gives the card's mode in ``current_compute_partition`` beside the card's
other PCI attributes (``SPX``, ``DPX``, ``TPX``, ``QPX``, ``CPX``; amdgpu_gfx.c), so a
partition's label names it ("AMD-Instinct-MI300X-OAM-CPX"). Each partition's memory is its KFD
node's ``mem_banks``: sysfs ``mem_info_vram_total``, and amdsmi and amd-smi, which read it, give
the whole card's. From ROCm 7.0 each partition has its own unique id; before, the partitions of
a card share one, which then names none of them: the UUIDs are left empty and ids stay ROCr's
ordinals.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

from accelkit import Device, Host, note
from accelkit.detect import numa_node, read_value

from .kfd import MEMORY, kfd_bus_id, kfd_gpu_nodes

__all__ = ["MODES", "with_partitions"]

MODES = ("SPX", "DPX", "TPX", "QPX", "CPX")
"""Compute partition modes, as ``current_compute_partition`` spells them; SPX is the whole card."""
MODE_FILE = "current_compute_partition"


def with_partitions(host: Host, devices: Sequence[Device]) -> list[Device]:
    """``devices`` (in ROCr's order) with each partition's own facts from its KFD node: label
    naming the mode, memory, UUID; and the card's bus id and NUMA node. Unchanged where the
    layer's devices are not KFD's nodes one for one (the DRM layer lists a card once)."""
    nodes = kfd_gpu_nodes(host) or []
    if [d.pci_bus_id for d in devices] != [kfd_bus_id(n) for n in nodes]:
        return list(devices)
    found = list(devices)
    for positions in _cards(host, devices):
        card = devices[positions[0]].pci_bus_id or ""  # partition 0: the card's own bus id
        mode = _mode(host, card, len(positions))
        if mode is None:
            continue
        uuids = _uuids([nodes[p] for p in positions], card)
        numa = numa_node(host, card)
        for position, uuid in zip(positions, uuids):
            device, memory = found[position], nodes[position].get(MEMORY)
            label = f"{device.type_label}-{mode}" if device.type_label else None
            facts = {"uuid": uuid, "memory_bytes": memory, "pci_bus_id": card, "numa_node": numa}
            found[position] = device.replace(type_label=label, **facts)
    return found


def _cards(host: Host, devices: Sequence[Device]) -> list[list[int]]:
    """Positions of ``devices`` grouped by card. A device whose bus id is a PCI function is a
    card (or, when several share that exact id, its partitions under the reverted bits-31:28
    layout). One whose bus id is no PCI function is a partition with its index in the function
    bits: it joins the card of its slot (domain, bus, device) listed before it. Separate GPUs on
    one slot (SR-IOV functions) stay separate, each a PCI function of its own. Devices without a
    bus id are on no known card."""
    cards: dict[str, list[int]] = {}
    for position, device in enumerate(devices):
        bus = device.pci_bus_id
        if bus is None:
            continue
        card = bus
        if not host.exists(f"/sys/bus/pci/devices/{bus}"):
            slot = bus.rsplit(".", 1)[0]  # "0000:05:00" of "0000:05:00.2"
            card = next((c for c in reversed(list(cards)) if c.rsplit(".", 1)[0] == slot), bus)
        cards.setdefault(card, []).append(position)
    return list(cards.values())


def _mode(host: Host, bus: str, count: int) -> Optional[str]:
    """The card's partition mode, None for a whole card (SPX); "XCP" (AMD's word for a
    partition) when the card is split but its mode cannot be read."""
    text = read_value(host, f"/sys/bus/pci/devices/{bus}/{MODE_FILE}")
    mode = (text or "").upper()
    if mode in MODES:
        return None if mode == "SPX" else mode
    if count == 1:
        return None
    note(f"GPU {bus} is split into {count} partitions, but its {MODE_FILE} is {text!r}", "warning")
    return "XCP"


def _uuids(nodes: Sequence[dict[str, int]], bus: str) -> list[Optional[str]]:
    """Each partition's ROCr UUID, or None for all when they do not tell the partitions apart."""
    serials = [node.get("unique_id") for node in nodes]
    if None not in serials and 0 not in serials and len(set(serials)) == len(serials):
        return [f"GPU-{serial:016x}" for serial in serials if serial is not None]
    if len(nodes) > 1:
        note(
            f"the {len(nodes)} partitions of GPU {bus} share one unique id (ROCm before 7.0): "
            "no UUID names one of them; their ids are ROCr's ordinals"
        )
    return [None] * len(nodes)
