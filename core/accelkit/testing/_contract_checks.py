"""Contract: what a manager declares is well-formed and consistent with itself."""

from __future__ import annotations

import inspect
import re

from accelkit.device import Device
from accelkit.errors import InvalidRequest
from accelkit.manager import AcceleratorManager
from accelkit.quantities import to_units
from accelkit.registry import contract_errors, variables_read, version_1_note
from accelkit.testing._audit import watching
from accelkit.testing._catalog import check
from accelkit.testing._subject import THROUGH_HOST, Noted, Skipped, Subject
from accelkit.testing._watch import WatchedEnv

ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
TYPE_LABEL = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9_.\-]{0,61}[A-Za-z0-9])?$")
"""A type label is used as a resource name suffix and a Kubernetes label value: letters, digits,
``-``, ``_`` and ``.``, starting and ending alphanumeric, at most 63 characters."""


@check("contract")
def declarations(subject: Subject) -> None:
    """Family name, resource name, api_version, quantity and placement declarations are valid."""
    manager = subject.manager
    errors = contract_errors(manager)
    replaces = getattr(manager, "replaces", None)
    if replaces is not None and replaces != getattr(manager, "name", None):
        errors.append(
            f"{type(manager).__name__}.replaces is {replaces!r} but its name is "
            f"{getattr(manager, 'name', None)!r}; a plugin replaces a built-in family by taking "
            "its name: set both to the family"
        )
    frameworks = manager.frameworks
    names = ("device", "collective", "platform")
    for field, value in ((name, getattr(frameworks, name)) for name in names):
        if value is not None and not (isinstance(value, str) and value and value.strip() == value):
            errors.append(
                f"{type(manager).__name__}.frameworks.{field} must be a name like 'cuda' or "
                f"None, got {value!r}"
            )
    assert not errors, "; ".join(errors)


@check("contract")
def contract_version(subject: Subject) -> None:
    """The manager is written for the current contract: no version-1 attributes to move (a
    version-1 plugin keeps working, so it passes, with the note saying where each moved)."""
    note = version_1_note(subject.manager)
    if note is not None:
        raise Noted(note)


@check("contract")
def variables(subject: Subject) -> None:
    """Every variable the family reads or writes is declared in env_vars_read."""
    manager = subject.manager
    label = subject.label
    declared = variables_read(manager)
    assert isinstance(declared, tuple), f"{label}: env_vars_read must be a tuple, got {declared!r}"
    bad = [v for v in declared if not isinstance(v, str) or not ENV_NAME.match(v)]
    assert not bad, f"{label}: env_vars_read holds {bad!r}, which are not variable names"
    repeated = sorted({v for v in declared if declared.count(v) > 1})
    assert not repeated, f"{label}: env_vars_read lists {repeated} more than once"
    primary = manager.visible_devices_env_var
    assert primary is not None or type(manager).visibility_env is not (
        AcceleratorManager.visibility_env
    ), (
        f"{label} declares no visible_devices_env_var and does not override visibility_env, so "
        "a grant cannot restrict which devices a worker sees; declare the runtime's variable"
    )
    assert primary is None or primary in declared, (
        f"{label}: visible_devices_env_var {primary!r} is not in env_vars_read {declared!r}"
    )
    env = WatchedEnv({})
    manager.read_visible(env)
    undeclared_reads = sorted(env.names - set(declared))
    assert not undeclared_reads, (
        f"{label}.read_visible reads {undeclared_reads}, which env_vars_read {declared!r} does "
        "not declare"
    )
    ids = subject.sample_ids()
    for chosen in ([], ids[:1], ids):
        written = set(manager.visibility_env(chosen))
        undeclared = sorted(written - set(declared))
        assert not undeclared, (
            f"{label}.visibility_env({chosen!r}) writes {undeclared}, which env_vars_read "
            f"{declared!r} does not declare; snapshots record only declared variables, so add them"
        )


@check("contract")
def type_labels(subject: Subject) -> None:
    """Type labels can be resource names and label values (no spaces, at most 63 characters)."""
    counts = [n for n in subject.host_counts() if n > 0]
    if not counts:
        raise Skipped("no device count above 0 to build a host for")
    devices: list[Device] = subject.devices(max(counts))
    labels = [d.type_label for d in devices]
    labels.append(subject.manager.accelerator_type(devices))
    bad = sorted({str(v) for v in labels if v is not None and not TYPE_LABEL.match(str(v))})
    assert not bad, (
        f"{subject.label}: type labels {bad} are not usable as `accelerator_type:<label>` "
        "resources and node label values; use letters, digits, '-', '_' and '.', like 'H100' "
        "or 'Intel-GAUDI2'"
    )


@check("contract")
def node_facts(subject: Subject) -> None:
    """additional_resources and labels give well-formed values, reading only through the host."""
    counts = [n for n in subject.host_counts() if n > 0]
    if not counts:
        raise Skipped("no device count above 0 to build a host for")
    host = subject.host(max(counts))
    found = subject.detect(host, f"make_host({max(counts)})")
    devices = [d for d in found if d.offered]  # what node detection passes them
    manager, label = subject.manager, subject.label
    with watching(host, subject.vendor_libraries) as audit:
        resources = manager.additional_resources(devices, host)
        labels = manager.labels(devices, host)
    assert not audit.events, (
        f"{label}.additional_resources/labels did {audit.summary()}, outside the host; "
        f"{THROUGH_HOST}"
    )
    for name, value in resources.items():
        assert isinstance(name, str) and name not in (manager.resource_name, ""), (
            f"{label}.additional_resources gives resource {name!r}, which is not a new name"
        )
        try:
            to_units(value, what=f"additional resource {name!r}")
        except InvalidRequest as exc:
            raise AssertionError(f"{label}.additional_resources: {exc}") from exc
    bad = {k: v for k, v in labels.items() if not isinstance(k, str) or not isinstance(v, str)}
    assert not bad, f"{label}.labels gives {bad!r}; keys and values must be str"


@check("contract")
def visibility_signature(subject: Subject) -> None:
    """A manager of contract version 2 or later takes ``visibility_env(ids, *, total=None)``.

    Version 1 managers are called with ``ids`` only, which every override accepts.
    """
    manager = subject.manager
    if manager.api_version < 2:
        return
    try:
        parameters = inspect.signature(manager.visibility_env).parameters
    except (TypeError, ValueError) as exc:
        raise AssertionError(f"{subject.label}: visibility_env has no signature: {exc}") from None
    total = parameters.get("total")
    assert total is not None and total.kind in (total.KEYWORD_ONLY, total.POSITIONAL_OR_KEYWORD), (
        f"{subject.label} declares api_version {manager.api_version}, so grants call "
        "visibility_env(ids, total=...); declare it as "
        "`def visibility_env(self, ids, *, total=None)`"
    )
    assert total.default is None, (
        f"{subject.label}: visibility_env's total must default to None (callers may not know it)"
    )
