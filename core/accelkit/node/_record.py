"""``Node``: what a machine offers, as schedulers consume it, and its JSON form.

A node is plain data: every family's devices, the node's resources and labels, why detection
said so, and each family's declared scheduling policy. ``to_dict``/``from_dict`` are lossless,
and the JSON carries the policies (``families``), so a scheduler on another machine can allocate
over ``accelkit ls --json`` output without loading a plugin. :func:`accelkit.detect_node`
(:mod:`accelkit.node._detect`) builds a node from a host.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from accelkit._json import check_keys, check_version
from accelkit._shown import shown
from accelkit._visibility import canonical_id
from accelkit.device import Device
from accelkit.diagnostics import Diagnostic
from accelkit.errors import InvalidData
from accelkit.policy import FamilyPolicy
from accelkit.quantities import json_amount

__all__ = ["SCHEMA_VERSION", "Node"]

SCHEMA_VERSION = 1
"""Version of :meth:`Node.to_dict`'s layout; readers refuse a newer one rather than guess."""

_NODE_KEYS = (
    "schema_version",
    "devices",
    "resources",
    "labels",
    "diagnostics",
    "detected",
    "families",
)


@dataclass
class Node:
    """Devices of every family, the node's resources and labels, and why detection said so."""

    devices: list[Device] = field(default_factory=list)
    resources: dict[str, float] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    detected: dict[str, int] = field(default_factory=dict)
    """Devices each family found on the host before exclusions, its visibility variable and
    overrides changed the node, those it does not offer (``Device.offered``) included (families
    that found none are absent). A grant of every device the node offers is a grant of the
    whole host only when that is all the host has: TPU grants unset every variable then, and
    write a block's bounds otherwise."""
    policies: dict[str, FamilyPolicy] = field(default_factory=dict)
    """Each family's declared scheduling policy, by family (the JSON key ``families``): what an
    ``Allocator`` needs to validate and place without the family's plugin."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready and lossless: :meth:`from_dict` gives an equal node."""
        return {
            "schema_version": SCHEMA_VERSION,
            "devices": [d.to_dict() for d in self.devices],
            "resources": dict(self.resources),
            "labels": dict(self.labels),
            "diagnostics": [d.to_dict() for d in self.diagnostics],
            "detected": dict(self.detected),
            "families": {name: p.to_dict() for name, p in self.policies.items()},
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Node:
        """Rebuild a node from :meth:`to_dict` (e.g. ``accelkit ls --json`` output).

        Raises :class:`~accelkit.InvalidData` (a ``ValueError``) saying what is wrong for anything
        else: another schema version, unknown keys (nothing is silently lost), values of the
        wrong kind, or one device id twice in a family (two workers would get one device).
        ``families`` may be absent (JSON from before it existed): an allocator then asks the
        plugins.
        """
        data = dict(check_keys(data, _NODE_KEYS, "a node"))
        check_version(data, SCHEMA_VERSION, "node")
        families = _mapping(data.get("families", {}), "families")
        devices = [Device.from_dict(d) for d in _list(data.get("devices", []), "devices")]
        _check_unique(devices)
        return cls(
            devices=devices,
            resources={
                _text(k, "resources"): json_amount(v, f"malformed node: resource {k!r}")
                for k, v in _mapping(data.get("resources", {}), "resources").items()
            },
            labels={
                _text(k, "labels"): _text(v, f"label {k!r}")
                for k, v in _mapping(data.get("labels", {}), "labels").items()
            },
            diagnostics=[
                Diagnostic.from_dict(d) for d in _list(data.get("diagnostics", []), "diagnostics")
            ],
            detected={
                _text(k, "detected"): _count(v)
                for k, v in _mapping(data.get("detected", {}), "detected").items()
            },
            policies={
                _text(name, "families"): FamilyPolicy.from_dict(name, policy)
                for name, policy in families.items()
            },
        )


def _mapping(value: object, key: str) -> dict[Any, Any]:
    if not isinstance(value, dict):
        raise InvalidData(f"malformed node: {key} must be a JSON object, not {shown(value)}")
    return value


def _list(value: object, key: str) -> list[Any]:
    if not isinstance(value, list):
        raise InvalidData(f"malformed node: {key} must be a JSON list, not {shown(value)}")
    return value


def _text(value: object, where: str) -> str:
    if not isinstance(value, str):
        raise InvalidData(f"malformed node: {where} holds {shown(value)}, not a string")
    return value


def _count(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise InvalidData(
            f"malformed node: a detected count must be a whole number, not {shown(value)}"
        )
    return value


def _check_unique(devices: list[Device]) -> None:
    """One id once per family (``"0"`` and ``"00"`` are one to every runtime): the allocator
    would otherwise grant one device twice."""
    seen: set[tuple[str, str]] = set()
    for device in devices:
        key = (device.family, canonical_id(device.id))
        if key in seen:
            raise InvalidData(
                f"malformed node: {device.family or 'a family'} lists device id {device.id!r} "
                "twice (or as another spelling of one index); each device appears once"
            )
        seen.add(key)
