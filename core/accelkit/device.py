"""``Device``: one schedulable accelerator (or partition) as a family names it."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Optional

from accelkit._json import check_keys
from accelkit._shown import shown
from accelkit.errors import InvalidData

__all__ = ["MAX_DEVICES", "Device"]

MAX_DEVICES = 1024
"""The most devices one family may have on a node. Far above any machine (a node with 16 cards
of 8 partitions has 128), it bounds what garbage can cost: a vendor count of a billion, an
override of ``{"GPU": 1e9}`` or a visibility list of a million ids is cut here and reported. Low
enough that matching a full visibility list against a full family (each token against each
device, by the family's own ``matches``) stays around a second."""


@dataclass(frozen=True)
class Device:
    """One accelerator as its family's visibility variable names it.

    Only ``id`` is required: the core fills ``family`` and ``resource_name`` from the manager and
    ``index`` from the detection order. ``id`` is the token the family's variable takes on this
    node ("0", "GPU-…", "MIG-…", a Gaudi module id), so a grant's ids can be written as they are.
    A partition names its parent's id in ``parent``; a partition and its parent are never both
    allocatable. An ``exclusive`` device admits one process at a time, so it is granted whole.
    A device that is not ``offered`` is one the runtime counts but no worker may use.
    """

    id: str
    index: Optional[int] = None
    family: str = ""
    resource_name: str = ""
    type_label: Optional[str] = None
    model: Optional[str] = None
    uuid: Optional[str] = None
    memory_bytes: Optional[int] = None
    pci_bus_id: Optional[str] = None
    numa_node: Optional[int] = None
    parent: Optional[str] = None
    source: str = ""
    """Where the device's facts came from, for diagnostics ("library", "command", "sysfs",
    "devfs", "env", "override", "snapshot"); ``""`` until a detection layer or the core sets it."""
    exclusive: bool = False
    """The device admits one process at a time (NVIDIA's ``Exclusive_Process`` compute mode): it
    is granted whole, to one grant, never as a fraction and never shown to a grant's peers
    (``Grant.env(peers=...)``). Carried in a node's JSON only when True, so a node without such
    devices reads as it always did."""
    offered: bool = True
    """False for a device the family's runtime sees and numbers but no worker may use (an NVIDIA
    GPU in the ``Prohibited`` compute mode, an integrated GPU the runtime does not support).
    ``detect()`` still returns it, so that detection knows the device exists: it is never in the
    node, yet a visibility variable naming it is read on past it, as the runtime reads it (the
    runtime counts it), instead of ending there; and a variable naming only such devices makes
    no stand-in devices. Say why with ``accelkit.note()``. Written by ``to_dict`` only when
    False."""
    minor: Optional[int] = None
    """The minor number of the device's character file (4 for ``/dev/nvidia4``), where a family's
    ``Scheduling.device_file`` names files by it (``"/dev/nvidia{minor}"``): an NVIDIA GPU's
    minor is not its index, and SLURM's cgroup binds the file, so an export that guessed it would
    hand a job another GPU. None where detection did not read it; then no file is named.
    Written by ``to_dict`` only when known, so a node without minors reads as it always did."""

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id:
            raise ValueError(f"Device id must be a non-empty str, got {shown(self.id)}")
        if any(ch.isspace() or ch == "," for ch in self.id):
            raise ValueError(
                f"Device id {self.id!r} contains whitespace or a comma: it could not be written "
                "into a visibility variable"
            )
        for name in _WHOLE_FIELDS:
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
                raise ValueError(f"Device {name} must be an int or None, got {shown(value)}")
        for name in _TEXT_FIELDS:
            value = getattr(self, name)
            if not isinstance(value, str) and (value is not None or name in _REQUIRED_TEXT):
                raise ValueError(f"Device {name} must be a str, got {shown(value)}")
        for name in ("index", "minor"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ValueError(f"Device {name} must be a non-negative int, got {shown(value)}")
        for name in _FLAGS:
            value = getattr(self, name)
            if not isinstance(value, bool):
                raise ValueError(f"Device {name} must be True or False, got {shown(value)}")

    def replace(self, **changes: Any) -> Device:
        """A copy with ``changes`` applied (the dataclass is frozen)."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """Every field, JSON-ready (``exclusive`` only when True, ``offered`` only when False,
        ``minor`` only when known); :meth:`from_dict` restores an equal device."""
        # Every field is a plain value, so no deep copy (``dataclasses.asdict``) is needed: this
        # runs for each device of each grant a ledger records.
        data = {name: getattr(self, name) for name in _FIELDS}
        if self.exclusive:
            data["exclusive"] = True
        if not self.offered:
            data["offered"] = False
        if self.minor is not None:
            data["minor"] = self.minor
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Device:
        """Rebuild a device from :meth:`to_dict`; unknown keys, missing ids and values of the
        wrong kind are an :class:`~accelkit.InvalidData` naming them, not silently lost."""
        known = [f.name for f in dataclasses.fields(cls)]
        checked = check_keys(data, known, "a device", required=("id",))
        try:
            return cls(**checked)
        except ValueError as exc:
            raise InvalidData(f"malformed device: {exc}") from None


_FLAGS = ("exclusive", "offered")
_SOMETIMES_WRITTEN = (*_FLAGS, "minor")
_FIELDS = tuple(f.name for f in dataclasses.fields(Device) if f.name not in _SOMETIMES_WRITTEN)
"""The fields :meth:`Device.to_dict` always writes (the flags only where they differ from their
defaults, ``minor`` only where known)."""
_WHOLE_FIELDS = ("index", "memory_bytes", "numa_node", "minor")
_REQUIRED_TEXT = ("family", "resource_name", "source")
_TEXT_FIELDS = (*_REQUIRED_TEXT, "type_label", "model", "uuid", "pci_bus_id", "parent")
