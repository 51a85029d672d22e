"""The operator's corrections: ``ACCELKIT_EXCLUDE_DEVICES``, ``ACCELKIT_OVERRIDE_RESOURCES`` and
the ``overrides`` argument, read, checked and applied.

They let an operator correct a node without code (a broken GPU left out, a count lowered for
sharing, logical devices on a machine without any), so a malformed override is an error that
stops detection, while a malformed exclusion is a warning.

**Exclusions.** ``ACCELKIT_EXCLUDE_DEVICES`` (``nvidia:GPU-…,nvidia:3``; tokens matched with the
manager's ``matches``, in the detected id space) removes devices, and the partitions of a removed
device, with an info diagnostic.

**Overrides** (``overrides=`` and ``ACCELKIT_OVERRIDE_RESOURCES``, a JSON object; both are merged
per resource and the argument wins). A device resource (one a manager owns) takes a whole count:
fewer than found keeps the first N (registry order across families), more adds logical devices
(source ``"override"``) to the first family that has devices, or to the resource's default
family (the first manager in registry order owning it), with the lowest free integer ids; 0
removes the resource. Adding devices beyond what a set visibility variable allows raises
:class:`~accelkit.ConfigurationError` naming both. Any other resource is plain capacity with no
devices.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Optional

from accelkit._faults import PLUGIN_FAULTS
from accelkit._shown import shown
from accelkit.device import MAX_DEVICES, Device
from accelkit.diagnostics import Diagnostic, note
from accelkit.errors import ConfigurationError, InvalidRequest
from accelkit.manager import AcceleratorManager
from accelkit.node._state import NODE_FAMILY, Detection, Family, Override
from accelkit.node._visibility import logical
from accelkit.quantities import REQUEST_ADVICE, UNIT, to_units

__all__ = [
    "CONFIG_ENV_VARS",
    "EXCLUDE_ENV",
    "OVERRIDE_ENV",
    "read_exclusions",
    "read_overrides",
    "step_exclusions",
    "step_overrides",
]


OVERRIDE_ENV = "ACCELKIT_OVERRIDE_RESOURCES"
"""JSON object of resource -> count, read from the host's environment (``{"GPU": 2}``)."""

EXCLUDE_ENV = "ACCELKIT_EXCLUDE_DEVICES"
"""Comma list of ``family:token`` naming devices to leave out (``nvidia:GPU-…``)."""

CONFIG_ENV_VARS = (OVERRIDE_ENV, EXCLUDE_ENV)
"""The operator's variables :func:`~accelkit.node.detect_node` reads besides the managers' own."""

_COUNT_ADVICE = (
    "give 0 (removes the resource) or a whole number of devices (a fraction only for capacity "
    "no device counts)"
)
"""What an override may give, in place of a request's advice when a value is no count."""


def read_overrides(
    env: Mapping[str, str], overrides: Optional[Mapping[str, object]]
) -> dict[str, Override]:
    """Env overrides, then the argument's, per resource; malformed ones raise."""
    merged: dict[str, Override] = {}
    raw = env.get(OVERRIDE_ENV, "")
    if raw.strip():
        try:
            data = json.loads(raw)
        except (ValueError, RecursionError) as exc:  # RecursionError: nested beyond any use
            raise ConfigurationError(
                f"{OVERRIDE_ENV}={shown(raw)} is not JSON ({shown(str(exc), 120)}); write an "
                'object such as {"GPU": 2}'
            ) from None
        if not isinstance(data, dict):
            raise ConfigurationError(
                f"{OVERRIDE_ENV}={shown(raw)} must be a JSON object of resource -> count, such "
                'as {"GPU": 2}'
            )
        merged.update(_checked(data, OVERRIDE_ENV, configured=True))
    if overrides:
        merged.update(_checked(overrides, "overrides"))
    return merged


def _checked(data: Mapping[Any, Any], source: str, configured: bool = False) -> dict[str, Override]:
    checked: dict[str, Override] = {}
    for resource, value in data.items():
        if not isinstance(resource, str) or not resource or any(c.isspace() for c in resource):
            raise ConfigurationError(
                f"{source}: resource names are non-empty strings without blanks, got "
                f"{shown(resource)}"
            )
        try:
            units = to_units(value, what=f"override {resource} ({source})")
        except InvalidRequest as exc:  # an override is a count, not a request: say so
            raise ConfigurationError(str(exc).replace(REQUEST_ADVICE, _COUNT_ADVICE)) from None
        text = f"{resource}={shown(value)} from {source}"
        checked[resource] = Override(units, text, configured)
    return checked


def read_exclusions(
    env: Mapping[str, str], managers: Sequence[AcceleratorManager], sink: list[Diagnostic]
) -> dict[str, list[str]]:
    """``ACCELKIT_EXCLUDE_DEVICES`` as family -> tokens; malformed entries are warnings."""
    known = [m.name for m in managers]
    tokens: dict[str, list[str]] = {}
    for entry in (e.strip() for e in env.get(EXCLUDE_ENV, "").split(",")):
        if not entry:
            continue
        family, sep, token = (part.strip() for part in entry.partition(":"))
        if not (sep and family and token):
            message = (
                f"{EXCLUDE_ENV} entry {entry!r} is not family:device "
                "(e.g. nvidia:GPU-… or nvidia:3); ignoring it"
            )
        elif family not in known:
            message = f"{EXCLUDE_ENV} entry {entry!r} names an unknown family; known: {known}"
        else:
            tokens.setdefault(family, []).append(token)
            continue
        sink.append(Diagnostic(NODE_FAMILY, "warning", message))
    return tokens


def step_exclusions(state: Detection) -> None:
    """``ACCELKIT_EXCLUDE_DEVICES`` removes devices and their partitions."""
    for family in state.families:
        tokens = state.exclusions.get(family.manager.name, [])
        with state.noting(family):
            try:
                family.devices, family.excluded = _exclude(
                    family.manager, family.devices, family.withheld, tokens
                )
            except PLUGIN_FAULTS as exc:  # a plugin's matches() is broken
                note(f"visibility rules failed: {type(exc).__name__}: {exc}; no devices", "error")
                family.devices = []


def _exclude(
    manager: AcceleratorManager,
    devices: list[Device],
    withheld: list[Device],
    tokens: Sequence[str],
) -> tuple[list[Device], list[Device]]:
    """Split devices into (kept, excluded) by ``ACCELKIT_EXCLUDE_DEVICES`` tokens.

    A token names devices by id or as their parent, else every device the family's own
    matching finds: a UUID prefix two GPUs share excludes both (with a warning), since an
    exclusion errs on the side of not using a device. A token naming only devices the family
    does not offer excludes nothing, and is no mistake."""
    gone: set[str] = set()
    offered = {d.id for d in devices}
    for token in tokens:
        named = _by_id(token, [*devices, *withheld])
        matched = not named
        if matched:
            named = {d.id for d in (*devices, *withheld) if manager.matches(token, d)}
        hits = named & offered
        said = f"{EXCLUDE_ENV} names {manager.name}:{token}"
        if not named:
            note(f"{said}, which matches no device", "warning")
        elif not hits:
            note(f"{said}, a device not offered anyway")
        elif matched and len(named) > 1:
            listed = ", ".join(repr(i) for i in sorted(named))
            note(
                f"{said}, which matches {len(named)} devices ({listed}); excluding each (name "
                "one device by its id or whole UUID)",
                "warning",
            )
        gone |= hits
    gone |= {d.id for d in devices if d.parent in gone}
    excluded = [d for d in devices if d.id in gone]
    for device in excluded:
        note(f"device {device.id} is excluded by {EXCLUDE_ENV}")
    return [d for d in devices if d.id not in gone], excluded


def _by_id(token: str, devices: Sequence[Device]) -> set[str]:
    """The ids of ``devices`` an exclusion token names by id, or as their parent."""
    return {d.id for d in devices if token in (d.id, d.parent)}


def step_overrides(state: Detection) -> None:
    """Overrides resize device resources; other overridden resources are plain capacity."""
    state.plain = _apply_overrides(state.families, state.wanted, state.diagnostics)


def _apply_overrides(
    families: list[Family], wanted: Mapping[str, Override], sink: list[Diagnostic]
) -> dict[str, Override]:
    """Resize device resources as overridden; return the plain-capacity overrides."""
    plain: dict[str, Override] = {}
    for resource, override in wanted.items():
        owners = [f for f in families if f.manager.resource_name == resource]
        if not owners:
            plain[resource] = override
            continue
        if override.units % UNIT:
            raise ConfigurationError(
                f"override {override.source}: {resource} is counted in whole devices; "
                "use a whole number"
            )
        _resize(owners, override, sink)
    return plain


def _resize(owners: list[Family], override: Override, sink: list[Diagnostic]) -> None:
    """Keep the first N devices of a resource across its families, or add logical ones."""
    have = sum(len(f.devices) for f in owners)
    target = override.device_count
    if target <= have:
        left = target
        for family in owners:
            keep = family.devices[:left]
            if len(keep) < len(family.devices):
                sink.append(
                    Diagnostic(
                        family.manager.name,
                        "info",
                        f"override {override.source} keeps {len(keep)} of "
                        f"{len(family.devices)} device(s)",
                    )
                )
            family.devices = keep
            left -= len(keep)
        return
    family = next((f for f in owners if f.devices), owners[0])
    if target - have + len(family.devices) > MAX_DEVICES:
        raise ConfigurationError(
            f"override {override.source} asks for {target} {family.manager.resource_name} "
            f"device(s); one family may have at most {MAX_DEVICES} (accelkit.detect.MAX_DEVICES)"
        )
    if family.restriction is not None and override.configured:
        # The operator's count is the node's; the variable says which of it this process sees
        # (a granted worker sees its grant's): what the variable allows stands.
        sink.append(
            Diagnostic(
                family.manager.name,
                "info",
                f"override {override.source} is the node's; {family.restriction} shows this "
                f"process {have} of its {family.manager.resource_name} device(s)",
            )
        )
        return
    if family.restriction is not None:
        raise ConfigurationError(
            f"override {override.source} asks for {target} {family.manager.resource_name} "
            f"device(s), but {family.restriction} allows {len(family.devices)}: raise the "
            "variable's list or lower the override"
        )
    # a logical device must not take the id of one the host has: not an excluded one, nor one
    # its family does not offer, nor one left out for its partitions (a grant would write that
    # id, and show the worker that device)
    existing = [*family.devices, *family.excluded, *family.withheld, *family.partitioned]
    used = {d.id for d in existing} | {str(d.index) for d in existing}
    used |= {d.parent for d in existing if d.parent}
    free = (str(n) for n in range(target + len(used) + 1) if str(n) not in used)
    extra = [next(free) for _ in range(target - have)]
    start = max((d.index or 0 for d in existing), default=-1) + 1
    added = [
        d.replace(index=start + n)
        for n, d in enumerate(logical(family.manager, dict.fromkeys(extra), "override"))
    ]
    family.devices = [*family.devices, *added]
    sink.append(
        Diagnostic(
            family.manager.name,
            "info",
            f"override {override.source} adds {len(added)} logical device(s): {', '.join(extra)}",
        )
    )
