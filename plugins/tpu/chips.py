"""TPU chips from PCI functions: a chip may expose several, and is still one chip.

TPU7x (Ironwood) has two chiplets a chip, and each is a PCI function with a VFIO group of its own:
functions 0 and 1 of one PCI device. Google's tpu-info (``tpu_info/device.py``, ``get_chips``)
groups a host's Google functions by their base address, domain:bus:device, into one chip each,
ordered by the first function's VFIO group. So chips are counted the same way here, and the
count is checked against the generation's table (:mod:`.generations`): functions a chip exposes,
and the most chips a host of that generation has. A host that disagrees is reported, not
"corrected": its chips are those its PCI devices show.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

from accelkit import note
from accelkit.detect import PciDevice

from .generations import TpuGeneration

__all__ = ["one_per_chip"]


def one_per_chip(functions: Sequence[PciDevice], known: Optional[TpuGeneration]) -> list[PciDevice]:
    """The first PCI function of each chip, in the given (bus) order; checked against ``known``,
    the host's generation, when there is one."""
    chips: dict[str, list[PciDevice]] = {}
    for pci in functions:
        chips.setdefault(pci.bus_id.rpartition(".")[0], []).append(pci)
    if known is not None:
        _check(chips, known)
    return [found[0] for found in chips.values()]


def _check(chips: dict[str, list[PciDevice]], known: TpuGeneration) -> None:
    """Warn where the host disagrees with the generation's table."""
    expected = known.functions_per_chip
    odd = sorted(base for base, found in chips.items() if len(found) != expected)
    if odd:
        note(
            f"TPU {known.name} chips expose {expected} PCI function(s) each, but the chip(s) at "
            f"{', '.join(odd)} expose another number; each is counted as one chip",
            "warning",
        )
    if len(chips) > known.chips_per_host:
        note(
            f"{len(chips)} TPU {known.name} chips found, but a {known.name} host has at most "
            f"{known.chips_per_host}: check the PCI devices of vendor 0x1ae0",
            "warning",
        )
