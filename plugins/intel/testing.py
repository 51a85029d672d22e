"""Fake Intel GPU hosts, modelled on a server with Data Center GPU Max cards.

Under the default ``ZE_FLAT_DEVICE_HIERARCHY=FLAT`` a Max 1550 is two Level Zero root devices
(one per stack) and a Max 1100 is one, so :func:`make_host` builds ``count`` root devices from
``count // 2`` Max 1550 cards and, for an odd count, one Max 1100. The writers lay out what the
i915 driver shows: a DRM ``card<N>`` and ``renderD<N>`` per card, the PCI function with its
driver link and NUMA node, and the server's BMC display (ASPEED, driver ``ast``) beside them.

``make_host`` is this family's backdoor for the conformance kit, declared in the entry-point
group ``accelkit.testing`` (in accelkit's ``pyproject.toml``) as a third-party plugin declares
its own.
"""

from __future__ import annotations

import json
import os
import pathlib
from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType, SimpleNamespace

from accelkit import FakeHost
from accelkit.testing import write_pci_function

__all__ = [
    "BUS_IDS",
    "INTEGRATED",
    "XPU_SMI_ARGV",
    "FakeCard",
    "fake_cards",
    "fake_dpctl",
    "make_host",
    "write_sysfs",
    "xpu_smi_output",
]

XPU_SMI_ARGV = ("xpu-smi", "discovery", "-j")
BUS_IDS = ("0000:29:00.0", "0000:3a:00.0", "0000:9a:00.0", "0000:ca:00.0")
"""PCI addresses of the modelled server's four OAM slots, in bus order."""
BMC_BUS_ID = "0000:03:00.0"


@dataclass(frozen=True)
class FakeCard:
    """One Intel GPU card as xpu-smi and sysfs show it."""

    bus_id: str
    device_id: int = 0x0BD5
    name: str = "Intel(R) Data Center GPU Max 1550"
    numa_node: int = 0
    driver: str = "i915"

    @property
    def uuid(self) -> str:
        """xpu-smi's card UUID (vendor and device id at the end, as the tool prints them)."""
        return f"00000000-0000-0000-{self.bus_id[5:7]}00-{self.device_id:04x}00008086"


INTEGRATED = FakeCard("0000:00:02.0", 0x4680, "Intel(R) UHD Graphics 770")
"""A desktop's integrated GPU: same vendor, fixed address, never offered."""


def fake_cards(count: int) -> list[FakeCard]:
    """Cards giving ``count`` FLAT root devices (0 to 8): Max 1550s, then a Max 1100 if odd."""
    if not 0 <= count <= 2 * len(BUS_IDS):
        raise ValueError(f"the modelled server has 0 to {2 * len(BUS_IDS)} root devices")
    cards = [FakeCard(BUS_IDS[n], numa_node=n * 2 // len(BUS_IDS)) for n in range(count // 2)]
    if count % 2:
        bus = BUS_IDS[len(cards)]
        cards.append(FakeCard(bus, 0x0BDA, "Intel(R) Data Center GPU Max 1100", numa_node=1))
    return cards


def xpu_smi_output(cards: Sequence[FakeCard]) -> str:
    """``xpu-smi discovery -j``: one record per card (stacks are not listed)."""
    return json.dumps(
        {
            "device_list": [
                {
                    "device_id": index,
                    "device_name": card.name,
                    "device_type": "GPU",
                    "pci_bdf_address": card.bus_id,
                    "pci_device_id": hex(card.device_id),
                    "uuid": card.uuid,
                    "vendor_name": "Intel(R) Corporation",
                }
                for index, card in enumerate(cards)
            ]
        },
        indent=4,
    )


def fake_dpctl(root_devices: Sequence[tuple[str, int]]) -> ModuleType:
    """A module standing in for ``dpctl``: ``get_devices`` lists ``(name, memory)`` root devices."""
    module = ModuleType("dpctl")
    devices = [SimpleNamespace(name=name, global_mem_size=size) for name, size in root_devices]

    def get_devices(backend: str = "", device_type: str = "") -> list[SimpleNamespace]:
        return list(devices) if backend == "level_zero" and device_type == "gpu" else []

    module.__dict__["get_devices"] = get_devices
    return module


def write_sysfs(root: pathlib.Path, cards: Sequence[FakeCard], bmc: bool = True) -> None:
    """DRM card and render nodes and PCI functions of ``cards`` (and of the BMC display)."""
    drm = root / "sys/class/drm"
    drm.mkdir(parents=True, exist_ok=True)
    functions = [(BMC_BUS_ID, 0x1A03, 0x2000, "ast", 0)] if bmc else []
    functions += [(c.bus_id, 0x8086, c.device_id, c.driver, c.numa_node) for c in cards]
    for index, (bus_id, vendor, device, driver, numa) in enumerate(functions):
        # the BMC and an integrated GPU are VGA controllers (0x0300), a Max card "display, other"
        klass = 0x030000 if vendor != 0x8086 or bus_id.endswith("02.0") else 0x038000
        write_pci_function(root, bus_id, vendor, device, klass, numa_node=numa, driver=driver)
        entries = [f"card{index}"] + ([f"renderD{128 + index}"] if vendor == 0x8086 else [])
        for entry in entries:
            (drm / entry).mkdir(exist_ok=True)
            if not (drm / entry / "device").is_symlink():
                os.symlink(f"/sys/bus/pci/devices/{bus_id}", drm / entry / "device")


def make_host(count: int, root: pathlib.Path) -> FakeHost:
    """A host whose Intel GPUs give ``count`` root devices, by xpu-smi and by sysfs alike."""
    cards = fake_cards(count)
    write_sysfs(root, cards)
    return FakeHost(root=os.fspath(root), commands={XPU_SMI_ARGV: (0, xpu_smi_output(cards))})
