"""``Device``: one schedulable accelerator (or partition) as a family names it."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Optional

from ._json import check_keys

__all__ = ["SOURCES", "Device"]

SOURCES = ("library", "command", "sysfs", "devfs", "env", "override", "snapshot", "")
"""Where a device's facts came from; ``""`` until a detection layer or the core sets it."""


@dataclass(frozen=True)
class Device:
    """One accelerator as its family's visibility variable names it.

    Only ``id`` is required: the core fills ``family`` and ``resource_name`` from the manager and
    ``index`` from the detection order. ``id`` is the token the family's variable takes on this
    node ("0", "GPU-…", "MIG-…", a Gaudi module id), so a grant's ids can be written as they are.
    A partition names its parent's id in ``parent``; a partition and its parent are never both
    allocatable.
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

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id:
            raise ValueError(f"Device id must be a non-empty str, got {self.id!r}")
        if any(ch.isspace() or ch == "," for ch in self.id):
            raise ValueError(
                f"Device id {self.id!r} contains whitespace or a comma: it could not be written "
                "into a visibility variable"
            )
        if self.index is not None and (not isinstance(self.index, int) or self.index < 0):
            raise ValueError(f"Device index must be a non-negative int, got {self.index!r}")

    def replace(self, **changes: Any) -> Device:
        """A copy with ``changes`` applied (the dataclass is frozen)."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """Every field, JSON-ready; :meth:`from_dict` restores an equal device."""
        # Every field is a plain value, so no deep copy (``dataclasses.asdict``) is needed: this
        # runs for each device of each grant a ledger records.
        return {name: getattr(self, name) for name in _FIELDS}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Device:
        """Rebuild a device from :meth:`to_dict`; unknown keys are an error, not silently lost."""
        known = [f.name for f in dataclasses.fields(cls)]
        checked = check_keys(data, known, "a device", required=("id",))
        return cls(**checked)


_FIELDS = tuple(f.name for f in dataclasses.fields(Device))
