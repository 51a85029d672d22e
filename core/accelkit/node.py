"""``Node``: what a machine offers, as schedulers consume it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .device import Device
from .diagnostics import Diagnostic

__all__ = ["SCHEMA_VERSION", "Node"]

SCHEMA_VERSION = 1
"""Version of :meth:`Node.to_dict`'s layout; readers refuse a newer one rather than guess."""


@dataclass
class Node:
    """Devices of every family, the node's resources and labels, and why detection said so."""

    devices: list[Device] = field(default_factory=list)
    resources: dict[str, float] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    diagnostics: list[Diagnostic] = field(default_factory=list)

    def devices_of(self, family: str) -> list[Device]:
        """The devices of one family, in index order."""
        return [d for d in self.devices if d.family == family]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready and lossless: :meth:`from_dict` gives an equal node."""
        return {
            "schema_version": SCHEMA_VERSION,
            "devices": [d.to_dict() for d in self.devices],
            "resources": dict(self.resources),
            "labels": dict(self.labels),
            "diagnostics": [d.to_dict() for d in self.diagnostics],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Node:
        """Rebuild a node from :meth:`to_dict` (e.g. ``accelkit ls --json`` output)."""
        version = data.get("schema_version")
        if version != SCHEMA_VERSION:
            raise ValueError(
                f"node schema_version {version!r} is not supported; this accelkit reads "
                f"{SCHEMA_VERSION}"
            )
        return cls(
            devices=[Device.from_dict(d) for d in data.get("devices", [])],
            resources={str(k): float(v) for k, v in data.get("resources", {}).items()},
            labels={str(k): str(v) for k, v in data.get("labels", {}).items()},
            diagnostics=[Diagnostic.from_dict(d) for d in data.get("diagnostics", [])],
        )
