"""Placement rules: which free devices may serve a request for ``count`` whole devices.

A rule works on integer keys held in a bitmask (bit ``k`` set: device with key ``k`` is fully
free), so the allocator's hot path is a few integer operations, whatever the node's size. The key
of a device is its position in the family's order, or its numeric id for rules that care about
the id itself (TPU chips, Gaudi modules, Neuron cores) when every id is below
:data:`~accelkit.device.MAX_DEVICES`: an id of ``99999999999`` must not become a bit position.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

from .device import MAX_DEVICES, Device
from .visibility import is_index

__all__ = ["ALIGNED_BLOCKS", "CONTIGUOUS", "LOWEST_FREE", "PLACEMENTS", "Placement"]


def _small_index(token: str) -> bool:
    """A decimal id below MAX_DEVICES (checked on the text: ``int`` of 5000 digits raises)."""
    return (
        is_index(token)
        and len(token.lstrip("0")) <= len(str(MAX_DEVICES))
        and (int(token) < MAX_DEVICES)
    )


class Placement:
    """Lowest-numbered free devices first (the default, as Ray and CUDA users expect)."""

    name = "lowest-free"
    keyed_by_id = False
    """True when keys are the devices' numeric ids rather than their positions."""

    def keys(self, devices: Sequence[Device]) -> list[int]:
        """One key per device, in the given order."""
        if self.keyed_by_id and all(_small_index(d.id) for d in devices):
            return [int(d.id) for d in devices]
        return list(range(len(devices)))

    def choose(self, free: int, count: int) -> Optional[int]:
        """The mask of keys to take for ``count`` devices out of ``free``, or None."""
        if count <= 0:
            return 0 if count == 0 else None
        if bin(free).count("1") < count:
            return None
        chosen = 0
        for _ in range(count):
            low = free & -free
            chosen |= low
            free ^= low
        return chosen

    def describe(self) -> str:
        """A phrase for error messages ("aligned blocks of 1, 2, 4 or 8")."""
        return "the lowest-numbered free devices"

    def __repr__(self) -> str:
        return f"<Placement {self.name}>"


class AlignedBlocks(Placement):
    """Blocks of ``count`` consecutive ids starting at a multiple of ``count`` (TPU, Gaudi)."""

    name = "aligned-blocks"
    keyed_by_id = True

    def choose(self, free: int, count: int) -> Optional[int]:
        if count <= 0:
            return 0 if count == 0 else None
        blocks = free.bit_length() // count + 1
        # Bits 0, count, 2 * count, ... (a geometric series: (2**(count*n) - 1) / (2**count - 1)).
        aligned = ((1 << (count * blocks)) - 1) // ((1 << count) - 1)
        return _lowest_run(free, count, aligned)

    def describe(self) -> str:
        return "an aligned block ({0,1}, {2,3}, {0-3}, {4-7}, ...)"


class Contiguous(Placement):
    """The lowest run of ``count`` consecutive ids (Neuron cores are granted as a range)."""

    name = "contiguous"
    keyed_by_id = True

    def choose(self, free: int, count: int) -> Optional[int]:
        if count <= 0:
            return 0 if count == 0 else None
        return _lowest_run(free, count, -1)

    def describe(self) -> str:
        return "a contiguous range of ids"


def _lowest_run(free: int, count: int, starts: int) -> Optional[int]:
    """The mask of the lowest run of ``count`` free keys that begins at a key in ``starts``.

    After the loop, bit ``k`` of ``runs`` is set when keys ``k .. k + count - 1`` are all free:
    ``count - 1`` shifts and ands, however many devices there are and wherever the run is.
    """
    runs = free & starts
    for shift in range(1, count):
        runs &= free >> shift
    if not runs:
        return None
    return ((1 << count) - 1) * (runs & -runs)


LOWEST_FREE = Placement()
ALIGNED_BLOCKS = AlignedBlocks()
CONTIGUOUS = Contiguous()

PLACEMENTS: dict[str, Placement] = {
    rule.name: rule for rule in (LOWEST_FREE, ALIGNED_BLOCKS, CONTIGUOUS)
}
"""The rules a node's JSON may name: an allocator over JSON places with them and no plugin."""
