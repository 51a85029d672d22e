"""Fake Intel Gaudi hosts, modelled on an 8-card HLS-Gaudi2 node.

On such a node the device index (PCI order, what ``HABANA_VISIBLE_DEVICES`` counts) and the
module id (the card's place on the board, what ``HABANA_VISIBLE_MODULES`` takes) disagree, so
the fakes give every card a module id different from its index wherever the count allows.

``make_host`` is this family's backdoor for the conformance kit, declared in the entry-point
group ``accelkit.testing`` (in accelkit's ``pyproject.toml``) as a third-party plugin declares
its own.
"""

from __future__ import annotations

import os
import pathlib
from collections.abc import Sequence
from dataclasses import dataclass

from accelkit import FakeHost

__all__ = [
    "BUS_IDS",
    "HL_SMI_ARGV",
    "MODULE_BY_INDEX",
    "FakeCard",
    "fake_cards",
    "hl_smi_output",
    "make_host",
    "write_sysfs",
]

HL_SMI_ARGV = ("hl-smi", "-Q", "index,module_id,name,bus_id,memory.total", "-f", "csv,noheader")
"""The query the Gaudi plugin runs (DESIGN.md vendor table)."""

BUS_IDS = (
    "0000:33:00.0",
    "0000:34:00.0",
    "0000:4d:00.0",
    "0000:4e:00.0",
    "0000:9a:00.0",
    "0000:9b:00.0",
    "0000:b3:00.0",
    "0000:b4:00.0",
)
"""PCI addresses of the eight cards, in index (bus) order."""

MODULE_BY_INDEX = (3, 1, 0, 2, 7, 5, 4, 6)
"""Module id of the card at each index on the modelled board."""

HABANA_VENDOR = "0x1da3"
GAUDI2_DEVICE = "0x1020"


@dataclass(frozen=True)
class FakeCard:
    """One Gaudi card as hl-smi and sysfs show it."""

    module_id: int
    bus_id: str
    name: str = "HL-225"
    device_type: str = "GAUDI2"
    memory_mib: int = 98304
    numa_node: int = 0


def fake_cards(count: int, name: str = "HL-225", device_type: str = "GAUDI2") -> list[FakeCard]:
    """``count`` cards (0, 1, 2, 4 or 8) in index order, holding module ids 0..count-1."""
    if count not in (0, 1, 2, 4, 8):
        raise ValueError(f"a Gaudi node has 0, 1, 2, 4 or 8 cards, not {count}")
    modules = [m for m in MODULE_BY_INDEX if m < count]
    return [
        FakeCard(
            module_id=module,
            bus_id=BUS_IDS[index],
            name=name,
            device_type=device_type,
            numa_node=0 if index < 4 else 1,
        )
        for index, module in enumerate(modules)
    ]


def hl_smi_output(cards: Sequence[FakeCard]) -> str:
    """What ``hl-smi -Q index,module_id,name,bus_id,memory.total -f csv,noheader`` prints."""
    return "".join(
        f"{index}, {card.module_id}, {card.name}, {card.bus_id}, {card.memory_mib} MiB\n"
        for index, card in enumerate(cards)
    )


def write_sysfs(
    root: pathlib.Path,
    cards: Sequence[FakeCard],
    *,
    module_ids: bool = True,
    accel_class: bool = True,
) -> None:
    """The habanalabs sysfs tree and device files for ``cards`` under ``root``.

    ``module_ids=False`` models the in-tree driver (no ``module_id`` file);
    ``accel_class=False`` the older driver (``/sys/class/habanalabs/hl<N>``, ``/dev/hl<N>``).
    """
    drivers = root / "sys/bus/pci/drivers/habanalabs"
    drivers.mkdir(parents=True, exist_ok=True)
    for index, card in enumerate(cards):
        pci = root / f"sys/devices/pci{card.bus_id[:7]}/{card.bus_id}"
        _files(
            pci,
            {"vendor": HABANA_VENDOR, "device": GAUDI2_DEVICE, "numa_node": str(card.numa_node)},
        )
        _link(pci / "driver", "../../../bus/pci/drivers/habanalabs")
        _link(
            root / f"sys/bus/pci/devices/{card.bus_id}",
            f"../../../devices/{pci.parent.name}/{card.bus_id}",
        )
        kind, name = ("accel", f"accel{index}") if accel_class else ("habanalabs", f"hl{index}")
        node = pci / kind / name
        attributes = pci if accel_class else node
        facts = {"device_type": card.device_type, "pci_addr": card.bus_id}
        if module_ids:
            facts["module_id"] = str(card.module_id)
        _files(attributes, facts)
        _link(node / "device", "../..")
        _link(
            root / f"sys/class/{kind}/{name}",
            f"../../devices/{pci.parent.name}/{card.bus_id}/{kind}/{name}",
        )
        device_file = root / ("dev/accel" if accel_class else "dev") / name
        device_file.parent.mkdir(parents=True, exist_ok=True)
        device_file.touch()


def make_host(count: int, root: pathlib.Path) -> FakeHost:
    """A host on which the Gaudi manager detects ``count`` cards (hl-smi and sysfs agree)."""
    cards = fake_cards(count)
    if not cards:
        return FakeHost(root=root)
    write_sysfs(root, cards)
    return FakeHost(root=root, commands={HL_SMI_ARGV: (0, hl_smi_output(cards))})


def _files(directory: pathlib.Path, values: dict[str, str]) -> None:
    """One sysfs attribute file per ``{name: value}``, newline-terminated as the driver's are."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, value in values.items():
        (directory / name).write_text(value + "\n")


def _link(path: pathlib.Path, target: str) -> None:
    """A relative symlink as sysfs has it; a fake tree may write the same card twice."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.is_symlink():
        os.symlink(target, path)
