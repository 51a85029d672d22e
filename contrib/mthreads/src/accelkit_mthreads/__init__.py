"""Moore Threads GPUs (MTT S4000, S5000, ...) for accelkit: experimental, community.

A process sees the GPUs listed in ``MUSA_VISIBLE_DEVICES``, comma-separated indices, as the MUSA
runtime (torch_musa, MCCL) reads it. GPUs take the ``GPU`` resource and may be shared by fractions;
frameworks name them ``musa`` (``torch.musa``), collectives use MCCL.

Detection: ``mthreads-gmi -q --json`` (the spelling its real readers run; else ``-q -j`` or
``--query --json``): a JSON object whose ``GPU`` list holds each GPU's ``Index``, ``Product Name``,
``GPU UUID``, ``PCI`` ``Bus ID`` and ``FB Memory Usage`` ``Total``; else the display-class PCI
functions of vendor ``0x1ed5``, numbered 0.. in bus order, without a model. Sources, and what is
not confirmed: the package's README.
"""

from __future__ import annotations

from typing import Optional

from accelkit import AcceleratorManager, Device, Frameworks, Host, hookimpl, note
from accelkit.detect import (
    detect_layers,
    find_field,
    first_records,
    is_index,
    parse_memory,
    pci_devices,
    sanitize_label,
)

VARIABLE = "MUSA_VISIBLE_DEVICES"
QUERY = (  # the spelling real readers run (SwanLab's collector, ...) first, then two others
    ("mthreads-gmi", "-q", "--json"),
    ("mthreads-gmi", "-q", "-j"),
    ("mthreads-gmi", "--query", "--json"),
)
VENDOR = 0x1ED5
DISPLAY = 0x03  # PCI base class of a display controller; a card's audio function is 0x04
UNCONFIRMED = (
    "not confirmed by Moore Threads' documentation: the JSON of mthreads-gmi (read from tools "
    "that parse it), that MUSA_VISIBLE_DEVICES indices follow its Index and PCI bus order "
    "(MUSA_DEVICE_ORDER's default order is unknown), and how MUSA reads spaces or invalid tokens; "
    "see accelkit-mthreads's README"
)


class MthreadsManager(AcceleratorManager):
    """Moore Threads GPUs: ``GPU`` resources by index in ``MUSA_VISIBLE_DEVICES``, shareable."""

    name = "mthreads"
    resource_name = "GPU"
    visible_devices_env_var = VARIABLE
    api_version = 2
    frameworks = Frameworks(device="musa", collective="mccl")

    def detect(self, host: Host) -> list[Device]:
        """mthreads-gmi's JSON, else the PCI functions of vendor 0x1ed5."""
        note(UNCONFIRMED)
        return detect_layers(host, ("command", from_gmi), ("sysfs", from_pci))


def from_gmi(host: Host) -> Optional[list[Device]]:
    """One GPU per record of mthreads-gmi's ``GPU`` list, in index order."""
    records = first_records(host, *QUERY)
    if records is None:
        return None
    devices = []
    for record in records:
        index, name = str(find_field(record, "Index")), find_field(record, "Product Name")
        if not is_index(index):
            note(f"mthreads-gmi lists a GPU without an index: {str(dict(record))[:160]}", "warning")
            continue
        model = str(name) if name else None
        devices.append(
            Device(
                str(int(index)),
                model=model,
                type_label=sanitize_label(model),
                uuid=find_field(record, "GPU UUID"),
                pci_bus_id=find_field(record, "Bus ID"),
                memory_bytes=parse_memory(find_field(record.get("FB Memory Usage"), "Total")),
            )
        )
    if records and not devices:  # records of a shape not understood: no answer
        return None
    return sorted(devices, key=lambda d: int(d.id))


def from_pci(host: Host) -> Optional[list[Device]]:
    """The display functions of vendor 0x1ed5, numbered 0.. in bus order, without a model."""
    functions = [
        f
        for f in pci_devices(host, VENDOR)
        if f.class_code is not None and f.class_code >> 16 == DISPLAY
    ]
    if not functions:
        return None
    note(f"{len(functions)} GPU(s) counted from PCI (vendor 0x1ed5); mthreads-gmi would name them")
    return [
        Device(str(i), pci_bus_id=f.bus_id, numa_node=f.numa_node) for i, f in enumerate(functions)
    ]


@hookimpl
def accelkit_register_managers() -> list[AcceleratorManager]:
    """The plugin's one manager, for every scheduler that loads accelkit."""
    return [MthreadsManager()]
