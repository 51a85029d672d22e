"""The node's resources and labels: what a scheduler matches requests and nodes on, computed from
the devices the earlier steps left.

Resources: ``<resource>`` = device count, ``accelerator_type:<label>`` = 1 per distinct type
label, each manager's ``additional_resources``, plain-capacity overrides. Labels:
``<prefix>accelerator-type``, ``<prefix><family>.count``, ``<prefix><family>.type``,
``<prefix><family>.<key>`` for each manager label, then the ``accelkit_node_labels`` hook. A
manager's naming method that raises or answers nonsense is an error diagnostic, never a failed
detection.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Callable, Optional

from accelkit._faults import PLUGIN_FAULTS
from accelkit._shown import shown
from accelkit.device import Device
from accelkit.diagnostics import Diagnostic, note
from accelkit.errors import InvalidRequest
from accelkit.manager import ACCELERATOR_TYPE_PREFIX
from accelkit.node._state import NODE_FAMILY, Detection, Family, Override, noting
from accelkit.quantities import from_units, to_units

__all__ = ["DEFAULT_LABEL_PREFIX", "step_labels", "step_resources"]


DEFAULT_LABEL_PREFIX = "accelkit/"
"""What the node's labels start with unless :func:`~accelkit.node.detect_node` is told another."""


def step_resources(state: Detection) -> None:
    """Device counts, ``accelerator_type:<label>``, managers' extras, plain overrides."""
    state.node.resources = _resources(state.families, state.plain, state.diagnostics)


def step_labels(state: Detection) -> None:
    """Per-family labels, the node's type when every device shares one, then plugins' hooks."""
    state.node.labels = _labels(state.families, state.label_prefix, state.diagnostics)
    with noting(NODE_FAMILY, state.diagnostics):  # a hook that fails is an error of the node's
        added = state.registry.node_labels(state.node)
    for key, value in added.items():
        state.node.labels.setdefault(key, value)


def _resources(
    families: list[Family], plain: Mapping[str, Override], sink: list[Diagnostic]
) -> dict[str, float]:
    resources: dict[str, float] = {}
    for family in families:
        if family.devices:
            name = family.manager.resource_name
            resources[name] = resources.get(name, 0.0) + len(family.devices)
    for family in families:
        for device in family.devices:
            if device.type_label:
                resources[ACCELERATOR_TYPE_PREFIX + device.type_label] = 1.0
    for family in families:
        if not family.devices:
            continue
        with noting(family.manager.name, sink):
            manager, devices = family.manager, family.devices
            _explain_shared_cards(devices)
            extra = _guarded(
                "additional_resources", {}, manager.additional_resources, devices, family.host
            )
            for key, value in extra.items():
                _add_resource(resources, key, value)
    for resource, override in plain.items():
        if override.units:
            resources[resource] = from_units(override.units)
        else:
            resources.pop(resource, None)
    return resources


def _add_resource(resources: dict[str, float], key: object, value: object) -> None:
    """One manager-provided resource, checked; a bad or clashing one is a warning."""
    if not isinstance(key, str) or not key or any(ch.isspace() for ch in key):
        note(
            f"additional resource name {shown(key)} is not a name without blanks that a request "
            "could ask for; ignoring it",
            "warning",
        )
        return
    if key in resources:
        note(f"additional resource {key!r} is already set; keeping {resources[key]}", "warning")
        return
    try:
        resources[key] = from_units(to_units(value, what=f"additional resource {key!r}"))
    except InvalidRequest as exc:
        note(f"{exc}; ignoring it", "warning")
        return
    note(f"node resource {key} = {resources[key]:g} comes from the plugin's additional_resources()")


def _explain_shared_cards(devices: Sequence[Device]) -> None:
    """Say so when devices share PCI cards (Intel stacks, AMD partitions): a 4-card node that
    shows 8 GPUs is right, and ``accelkit ls -v`` says why."""
    cards = {d.pci_bus_id for d in devices if d.pci_bus_id}
    on_cards = sum(1 for d in devices if d.pci_bus_id)
    if cards and on_cards > len(cards):
        note(
            f"{on_cards} devices on {len(cards)} PCI card(s): each card shows as several "
            "schedulable devices (stacks or partitions that the runtime numbers one by one)"
        )


def _labels(families: list[Family], prefix: str, sink: list[Diagnostic]) -> dict[str, str]:
    """Per-family facts always; ``<prefix><family>.type`` as the manager names the family's
    type (by default only when its devices share one), ``<prefix>accelerator-type`` only when
    every device on the node shares one type (a node of T4s and A100s has no single type)."""
    labels: dict[str, str] = {}
    kinds: list[Optional[str]] = []
    for family in families:
        if not family.devices:
            continue
        manager, devices = family.manager, family.devices
        with noting(manager.name, sink):
            kind = _guarded("accelerator_type", None, manager.accelerator_type, devices)
            if not kind and len({d.type_label for d in devices}) > 1:
                note(
                    f"no {prefix}{manager.name}.type label: its devices have several types "
                    f"({_types_text(devices)}); the accelerator_type:<label> resources name them"
                )
            kinds.append(str(kind) if kind else None)
            labels[f"{prefix}{manager.name}.count"] = str(len(devices))
            if kind:
                labels[f"{prefix}{manager.name}.type"] = str(kind)
            extra = _guarded("labels", {}, manager.labels, devices, family.host)
            for key, value in extra.items():
                labels[f"{prefix}{manager.name}.{key}"] = str(value)
            if extra:
                note(f"labels {', '.join(map(str, extra))} come from the plugin's labels()")
    shared = {d.type_label for f in families for d in f.devices}
    if len(set(kinds)) == 1 and kinds[0] is not None and len(shared) <= 1:
        labels = {f"{prefix}accelerator-type": kinds[0], **labels}
    elif len(shared) > 1 or len(kinds) > 1:
        types = sorted(str(t) for t in shared if t)
        sink.append(
            Diagnostic(
                NODE_FAMILY,
                "info",
                f"no {prefix}accelerator-type label: the node's devices have several types "
                f"({', '.join(types) or 'unlabelled'}); each family's {prefix}<family>.type "
                "(where its devices share one) and the accelerator_type:<label> resources name "
                "them",
            )
        )
    return labels


def _types_text(devices: Sequence[Device]) -> str:
    """``A100, T4, 2 untyped``: the distinct type labels of ``devices``, for a note."""
    types = sorted({str(d.type_label) for d in devices if d.type_label})
    untyped = sum(1 for d in devices if not d.type_label)
    return ", ".join(types + ([f"{untyped} untyped"] if untyped else []))


def _guarded(what: str, fallback: Any, method: Callable[..., Any], *args: Any) -> Any:
    """A manager's naming method; a raise, or an answer of another type than ``fallback``'s
    (a mapping for a mapping, text or None for None), becomes an error note and ``fallback``."""
    try:
        result = method(*args)
    except PLUGIN_FAULTS as exc:
        note(f"{what}() failed: {type(exc).__name__}: {exc}", "error")
        return fallback
    expected = Mapping if isinstance(fallback, Mapping) else (str, type(None))
    if not isinstance(result, expected):
        note(f"{what}() returned {shown(result)}, not a {_kind(fallback)}; ignoring it", "error")
        return fallback
    return result


def _kind(fallback: object) -> str:
    return "mapping" if isinstance(fallback, Mapping) else "string or None"
