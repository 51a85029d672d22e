"""Nodes built by hand for the scheduler tests (what ``detect_node`` would give, without a host)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

from accelkit import Device, Node, registry
from accelkit.manager import ACCELERATOR_TYPE_PREFIX


def devices(
    family: str,
    count: int = 0,
    *,
    ids: Optional[Sequence[str]] = None,
    label: Optional[str] = None,
    parent: Optional[str] = None,
) -> list[Device]:
    """``count`` devices of ``family`` (ids "0".., or ``ids``), indexed in order."""
    manager = registry.get_manager(family)
    names = list(ids) if ids is not None else [str(i) for i in range(count)]
    return [
        Device(
            id=name,
            index=index,
            family=family,
            resource_name=manager.resource_name,
            type_label=label,
            parent=parent,
        )
        for index, name in enumerate(names)
    ]


def make_node(*groups: list[Device], **capacity: float) -> Node:
    """A node of these devices, with the resources ``detect_node`` would give them.

    Keyword arguments add plain capacity (custom resources without devices); the
    ``accelerator_type:<label>`` resources come from the devices' labels.
    """
    every = [d for group in groups for d in group]
    resources: dict[str, float] = {}
    for device in every:
        resources[device.resource_name] = resources.get(device.resource_name, 0.0) + 1.0
    for device in every:
        if device.type_label:
            resources[ACCELERATOR_TYPE_PREFIX + device.type_label] = 1.0
    resources.update(capacity)
    return Node(devices=every, resources=resources)
