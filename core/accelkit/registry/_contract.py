"""Checks of a manager against the contract, and what the core reads off it.

The contract class holds declarations and methods only; everything the core derives from a
manager is here, in the registry that loads it: the errors in its declarations, its scheduling
policy as data (what a node's JSON carries), every variable it reads, and the adoption of a
plugin written for contract version 1 (its old attributes read once into the records, with one
deprecation note naming where each moved).
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Mapping
from typing import Any, Optional

from accelkit._visibility import split_ids
from accelkit.manager import (
    ACCELERATOR_TYPE_PREFIX,
    API_VERSION,
    AcceleratorManager,
    Frameworks,
    Scheduling,
)
from accelkit.policy import PLACEMENTS, FamilyPolicy, file_number_field

__all__ = [
    "VERSION_1_ATTRIBUTES",
    "adopt_version_1",
    "call_errors",
    "contract_errors",
    "family_policy",
    "variables_read",
    "version_1_note",
]

_FAMILY = r"^[a-z][a-z0-9_]*$"
_RESOURCE = r"^[A-Za-z][A-Za-z0-9_.\-]*$"

VERSION_1_ATTRIBUTES: dict[str, str] = {
    "allowed_quantities": "scheduling.allowed_quantities",
    "placement": "scheduling.placement",
    "partitions_per_grant": "scheduling.partitions_per_grant",
    "device_file": "scheduling.device_file",
    "framework_device": "frameworks.device",
    "framework_device_indexed": "frameworks.indexed",
    "collective_backend": "frameworks.collective",
    "framework_memory_hints": "frameworks.memory_hints",
    "shared_visibility": "frameworks.shared_visibility",
    "nothing_visible": "a rule in read_visible()",
    "tolerates_whitespace": "a rule in read_visible()",
}
"""Each version-1 attribute, and where version 2 keeps what it declared."""


def variables_read(manager: AcceleratorManager) -> tuple[str, ...]:
    """Every variable the family reads: ``env_vars_read``, or the primary variable alone.

    Snapshots record these, a replayed host offers them, and detection shows a manager no others.
    A malformed declaration (caught by :func:`contract_errors`) names no variable, rather than
    breaking every caller.
    """
    declared = manager.env_vars_read
    if declared:
        if not isinstance(declared, (tuple, list)):
            return ()
        return tuple(name for name in declared if isinstance(name, str))
    primary = manager.visible_devices_env_var
    return (primary,) if isinstance(primary, str) and primary else ()


def family_policy(manager: AcceleratorManager) -> FamilyPolicy:
    """The family's scheduling rules as data, for a node's JSON (``Node.to_dict``)."""
    scheduling = manager.scheduling
    return FamilyPolicy(
        name=manager.name,
        resource_name=manager.resource_name,
        fractional=manager.fractional,
        allowed_quantities=scheduling.allowed_quantities,
        placement=scheduling.placement,
        partitions_per_grant=scheduling.partitions_per_grant,
        visible_devices_env_var=manager.visible_devices_env_var,
        device_file=scheduling.device_file,
    )


def contract_errors(manager: AcceleratorManager) -> list[str]:
    """What is wrong with the manager's declarations, as sentences; empty when valid."""
    cls = type(manager).__name__
    errors: list[str] = []
    name = getattr(manager, "name", None)
    if not isinstance(name, str) or not re.match(_FAMILY, name):
        errors.append(f"{cls}.name must be a lowercase identifier like 'nvidia', got {name!r}")
    resource = getattr(manager, "resource_name", None)
    if not isinstance(resource, str) or not re.match(_RESOURCE, resource):
        errors.append(f"{cls}.resource_name must be a name like 'GPU', got {resource!r}")
    elif resource.startswith(ACCELERATOR_TYPE_PREFIX.rstrip(":")):
        errors.append(f"{cls}.resource_name {resource!r} collides with accelerator_type:")
    version = manager.api_version
    if isinstance(version, bool) or not isinstance(version, int) or not 1 <= version <= API_VERSION:
        if isinstance(version, int) and not isinstance(version, bool) and version > API_VERSION:
            advice = "upgrade accelkit, or install a release of the plugin written for this one"
        else:
            advice = f"declare api_version = {API_VERSION}"
        errors.append(
            f"{cls}.api_version is {version!r}; this accelkit supports 1..{API_VERSION}: {advice}"
        )
    declared = manager.env_vars_read
    if not isinstance(declared, tuple) or not all(isinstance(n, str) and n for n in declared):
        errors.append(f"{cls}.env_vars_read must be a tuple of variable names, got {declared!r}")
    if type(manager).detect is AcceleratorManager.detect:
        errors.append(f"{cls} must implement detect(host)")
    if version == API_VERSION:
        errors.extend(_version_2_leftovers(manager))
    errors.extend(_scheduling_errors(cls, manager.scheduling))
    if not isinstance(manager.frameworks, Frameworks):
        errors.append(
            f"{cls}.frameworks must be an accelkit.Frameworks, got {manager.frameworks!r}"
        )
    return errors


def _scheduling_errors(cls: str, scheduling: object) -> list[str]:
    """What is wrong with a ``scheduling`` declaration: only data a node's JSON can carry."""
    if not isinstance(scheduling, Scheduling):
        return [f"{cls}.scheduling must be an accelkit.Scheduling, got {scheduling!r}"]
    errors = []
    allowed = scheduling.allowed_quantities
    if allowed is not None and (
        not allowed or any(isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in allowed)
    ):
        errors.append(
            f"{cls}.scheduling.allowed_quantities must be positive whole numbers, got {allowed!r}"
        )
    if PLACEMENTS.get(getattr(scheduling.placement, "name", "")) is not scheduling.placement:
        errors.append(
            f"{cls}.scheduling.placement must be one of accelkit.LOWEST_FREE, ALIGNED_BLOCKS or "
            f"CONTIGUOUS (rules a node's JSON names), got {scheduling.placement!r}"
        )
    per_grant = scheduling.partitions_per_grant
    if per_grant is not None and (
        isinstance(per_grant, bool) or not isinstance(per_grant, int) or per_grant < 1
    ):
        errors.append(
            f"{cls}.scheduling.partitions_per_grant must be None or a positive whole number, "
            f"got {per_grant!r}"
        )
    device_file = scheduling.device_file
    if device_file is not None and file_number_field(device_file) is None:
        errors.append(
            f"{cls}.scheduling.device_file must be None or a path with {{id}} or {{minor}} in "
            f"it, got {device_file!r}"
        )
    return errors


def _version_2_leftovers(manager: AcceleratorManager) -> list[str]:
    """What a version-2 manager still does the version-1 way: each version-1 attribute it sets,
    with its new home, and a quantity rule in code."""
    cls = type(manager).__name__
    errors = [
        f"{cls}.{old} is a contract version 1 attribute, not read at api_version 2: use {new}"
        for old, new in VERSION_1_ATTRIBUTES.items()
        if hasattr(type(manager), old)
    ]
    if type(manager).validate_quantity is not AcceleratorManager.validate_quantity:
        errors.append(
            f"{cls} overrides validate_quantity, which is computed from the declarations so a "
            "node's JSON carries the same rule: declare fractional and "
            "scheduling.allowed_quantities instead"
        )
    return errors


def call_errors(manager: AcceleratorManager) -> list[str]:
    """What the core could not call as it will, as sentences; empty when callable.

    The loader refuses such a manager, so the mistake is a sentence in the plugin report, not a
    ``TypeError`` at the first grant. (The conformance kit says the same to the author in its
    own check, ``visibility_signature``, so a broken rule fails one check, not two.)
    """
    version = manager.api_version
    if not isinstance(version, int) or version < 2:  # version 1 is called with ids alone
        return []
    overridden = type(manager).visibility_env is not AcceleratorManager.visibility_env
    if overridden and not _takes_keyword(manager.visibility_env, "total"):
        return [
            f"{type(manager).__name__}.visibility_env must take the keyword total "
            f"(visibility_env(self, ids, *, total=None)): accelkit passes it at api_version "
            f"{version}"
        ]
    return []


def _takes_keyword(method: Callable[..., object], keyword: str) -> bool:
    """Whether ``method`` may be called with ``keyword=``."""
    try:
        parameters = inspect.signature(method).parameters.values()
    except (TypeError, ValueError):  # no signature Python can read: the call will tell
        return True
    return any(
        parameter.kind is inspect.Parameter.VAR_KEYWORD
        or (
            parameter.name == keyword
            and parameter.kind is not inspect.Parameter.POSITIONAL_ONLY
            and parameter.kind is not inspect.Parameter.VAR_POSITIONAL
        )
        for parameter in parameters
    )


def version_1_note(manager: AcceleratorManager) -> Optional[str]:
    """The deprecation note for a version-1 manager that sets old attributes (None otherwise).

    One sentence naming where each attribute it sets moved, for the loader's warning and the
    conformance kit.
    """
    if manager.api_version >= API_VERSION:
        return None
    moved = [
        f"{old} -> {new}"
        for old, new in VERSION_1_ATTRIBUTES.items()
        if hasattr(type(manager), old)
    ]
    if type(manager).validate_quantity is not AcceleratorManager.validate_quantity:
        moved.append("validate_quantity override -> fractional and scheduling.allowed_quantities")
    if not moved:
        return None
    return (
        f"{type(manager).__name__} is written for accelkit contract version 1; declare "
        f"api_version = {API_VERSION} and move: {'; '.join(moved)}"
    )


def adopt_version_1(manager: AcceleratorManager) -> Optional[str]:
    """Read a version-1 manager's old attributes into its records, once; the note, if any.

    The records are set on the instance (the class is the plugin's own), so everything after
    loading reads one contract. ``nothing_visible`` keeps meaning what it meant: the default
    ``read_visible`` of version 1 honoured it.
    """
    note = version_1_note(manager)
    if note is None:
        return None
    cls = type(manager)
    scheduling: dict[str, Any] = {}
    frameworks: dict[str, Any] = {}
    for old, new in VERSION_1_ATTRIBUTES.items():
        if not hasattr(cls, old):
            continue
        record, _, field_name = new.partition(".")
        value = getattr(cls, old)
        if record == "scheduling":
            scheduling[field_name] = (
                tuple(value) if old == "allowed_quantities" and value else value
            )
        elif record == "frameworks":
            frameworks[field_name] = value
    if scheduling:
        manager.scheduling = Scheduling(**scheduling)
    if frameworks:
        manager.frameworks = Frameworks(**frameworks)
    if hasattr(cls, "nothing_visible") and cls.read_visible is AcceleratorManager.read_visible:
        manager.read_visible = _sentinel_reader(manager, tuple(cls.nothing_visible))  # type: ignore[method-assign]
    return note


def _sentinel_reader(manager: AcceleratorManager, nothing: tuple[str, ...]) -> Any:
    """Version 1's default ``read_visible``, with the manager's own "nothing visible" values."""

    def read_visible(env: Mapping[str, str]) -> Optional[list[str]]:
        var = manager.visible_devices_env_var
        if var is None or var not in env:
            return None
        return split_ids(env[var], nothing)

    return read_visible
