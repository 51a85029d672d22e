"""Intel Gaudi (Habana Labs): HPUs, named by module id.

``HABANA_VISIBLE_MODULES`` takes *module ids*: a card's fixed place on the board, stable across
reboots. ``HABANA_VISIBLE_DEVICES`` is the container runtime's layer and holds device indices,
which can change across reboots, so it is never read as module ids. Partial-node jobs take 1, 2,
4 or 8 cards as aligned module groups ({0,1}, {2,3}, {0-3}, {4-7}), the groups the cards' links
are built for.

Detection: ``hl-smi``'s CSV query, else sysfs (``/sys/class/accel/accel*`` bound to the
habanalabs driver, or the older ``/sys/class/habanalabs/hl*``). Only the out-of-tree driver
writes ``module_id`` there; a card without it is counted in a diagnostic and not offered,
because writing its index into ``HABANA_VISIBLE_MODULES`` would select a different card.
"""

from __future__ import annotations

import posixpath
from typing import Optional

from accelkit import (
    ALIGNED_BLOCKS,
    AcceleratorManager,
    Device,
    Frameworks,
    Host,
    Scheduling,
    hookimpl,
    note,
)
from accelkit.detect import (
    detect_layers,
    is_index,
    parse_csv,
    parse_memory,
    pci_device_at,
    read_value,
    run_command,
    type_label,
)

HL_SMI = ("hl-smi", "-Q", "index,module_id,name,bus_id,memory.total", "-f", "csv,noheader")

TYPE_LABELS = (
    (r"^(HL-225|GAUDI2)", "Intel-GAUDI2"),  # HL-225: OAM module; sysfs: GAUDI2, GAUDI2B, ...
    (r"^(HL-325|HL-338|GAUDI3)", "Intel-GAUDI3"),  # HL-325L: OAM module; HL-338: PCIe card
    (r"^(HL-205|GAUDI\b)", "Intel-GAUDI"),  # first generation; sysfs: GAUDI, GAUDI SEC
)
"""hl-smi product names and sysfs ``device_type`` values -> type labels; others keep their
name ("HL-1000" -> "Intel-HL-1000")."""

SYSFS_CLASSES = (
    ("/sys/class/accel/accel[0-9]*", "device"),  # the accel subsystem (kernel 6.2+)
    ("/sys/class/habanalabs/hl[0-9]*", ""),  # older drivers; hl_controlD* are not cards
)
"""Device directories, and the subdirectory holding each one's module_id and device_type."""

DRIVER = "habanalabs"


class GaudiManager(AcceleratorManager):
    """Intel Gaudi HPUs: whole cards in aligned module groups, named by module id."""

    name = "gaudi"
    resource_name = "HPU"
    api_version = 2
    visible_devices_env_var = "HABANA_VISIBLE_MODULES"
    env_vars_read = ("HABANA_VISIBLE_MODULES", "HABANA_VISIBLE_DEVICES")
    fractional = False
    scheduling = Scheduling(allowed_quantities=(1, 2, 4, 8), placement=ALIGNED_BLOCKS)
    frameworks = Frameworks(
        device="hpu",
        indexed=False,  # a process uses its HPUs as one "hpu" device
        collective="hccl",
        shared_visibility=True,
    )

    def matches(self, token: str, device: Device) -> bool:
        """Module ids only: token "3" is module 3, never the fourth card in some order."""
        return token == device.id

    def detect(self, host: Host) -> list[Device]:
        """hl-smi's CSV, else the habanalabs driver's sysfs."""
        return detect_layers(host, ("command", from_hl_smi), ("sysfs", from_sysfs))


def from_hl_smi(host: Host) -> Optional[list[Device]]:
    """One device per hl-smi row with a numeric module id, ordered by module id."""
    rows = parse_csv(run_command(host, HL_SMI), 5, "hl-smi output")
    if not rows:  # printing nothing is no answer: sysfs says what is there
        return None
    devices = []
    for _index, module, name, bus_id, memory in rows:
        if not is_index(module):
            note(f"hl-smi gives module id {module!r} for {bus_id}: not offered", "warning")
            continue
        devices.append(
            Device(
                id=str(int(module)),
                model=name or None,
                type_label=type_label(name, TYPE_LABELS, prefix="Intel"),
                memory_bytes=parse_memory(memory),
                pci_bus_id=bus_id,
            )
        )
    return sorted(devices, key=lambda d: int(d.id))


def from_sysfs(host: Host) -> Optional[list[Device]]:
    """Cards bound to habanalabs with a module_id file; the others are only counted."""
    devices: list[Device] = []
    seen: set[str] = set()  # a card listed by both classes counts once
    for pattern, attributes in SYSFS_CLASSES:
        for path in host.glob(pattern):
            pci = pci_device_at(host, f"{path}/device")
            if pci.driver != DRIVER or pci.bus_id in seen:
                continue
            seen.add(pci.bus_id)
            folder = posixpath.join(path, attributes)
            module = read_value(host, f"{folder}/module_id")
            if module is None or not is_index(module):
                continue
            model = read_value(host, f"{folder}/device_type")
            devices.append(
                Device(
                    id=str(int(module)),
                    model=model,
                    type_label=type_label(model, TYPE_LABELS, prefix="Intel"),
                    pci_bus_id=pci.bus_id,
                    numa_node=pci.numa_node,
                )
            )
    if not seen:
        return None
    if len(seen) > len(devices):
        note(
            f"{len(seen) - len(devices)} of {len(seen)} Gaudi card(s) in sysfs have no module id "
            "(the in-tree habanalabs driver has no module_id file) and are not offered: "
            "HABANA_VISIBLE_MODULES takes module ids, not indices. Install hl-smi "
            "(habanalabs-firmware-tools) or the out-of-tree habanalabs driver to use them.",
            "warning",
        )
    return sorted(devices, key=lambda d: int(d.id))


@hookimpl
def accelkit_register_managers() -> list[AcceleratorManager]:
    """The plugin's one manager, for every scheduler that loads accelkit."""
    return [GaudiManager()]
