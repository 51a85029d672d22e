"""Which node a ledger serves, and which part of it this process may take.

The ledger belongs to the physical node. A process often sees less of it: a shell with
``CUDA_VISIBLE_DEVICES=0,1,2,3``, a command run on a grant (whose environment narrows every
family it was granted), an operator's ``ACCELKIT_EXCLUDE_DEVICES`` or ``--override GPU=4`` for
one user. Detected through those, the node would be a smaller one, and every such process would
find the ledger "holding grants on another node". So the ledger's node is detected with the
process's restriction lifted: every family's visibility variables (those its ``visibility_env``
writes, the ones a grant's environment sets) and the operator's corrections. The node as the
process sees it only says which of the physical devices it may take (:class:`Restriction`),
matched as detection matched the variable's tokens: by UUID, else by id, else by the family's
``matches`` (a variable may name a device by another token, a bus id, which becomes its id).

One case keeps the old identity: a node the configuration makes up (logical devices an override
or a visibility variable creates where nothing is detected). There is no physical device to share
then, so the ledger serves the node as configured. Plain capacity an override gives one user
(``scratch_disk=2``) is no device: that process meets the physical node, with its capacity.

A node handed in already narrowed (``Ledger(node=detect_node())`` in a shell with
``CUDA_VISIBLE_DEVICES`` set: its ``detected`` counts more devices than it lists) is matched the
same way, against the node detected on the host without the restriction.

The identity (:func:`fingerprint`) covers what the node's devices are (their device files'
minors too, where detection reads them: processes in two device cgroups number different GPUs
alike), and only that: families that have no device on the node, and plain capacity, are left
out, so that a process with another set of plugins (beside those of the families the node has:
one without such a family detects another node), or one user's override, meets the same
ledger. (An earlier accelkit's
identity covered every registered family, and its NVIDIA policy named files by index: a ledger
it left with live grants is another node's to this one until those grants end.)

A process that runs on a grant finds it in ``ACCELKIT_GRANT`` (``<token>@<ledger>``, written by
:func:`grant_variable` into the grant's environment), and takes steps of that grant.
"""

from __future__ import annotations

import json
import os
import zlib
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any, NamedTuple, Optional

from accelkit._faults import PLUGIN_FAULTS
from accelkit.errors import ConfigurationError
from accelkit.host import Host, HostView, LocalHost
from accelkit.ledger._location import GRANT_VAR, grant_named
from accelkit.manager import ACCELERATOR_TYPE_PREFIX

if TYPE_CHECKING:
    from accelkit.device import Device
    from accelkit.host import ProbeEnv
    from accelkit.manager import AcceleratorManager
    from accelkit.node._record import Node
    from accelkit.registry import Registry

__all__ = [
    "DeviceKey",
    "Restriction",
    "allocatable",
    "counterpart",
    "enclosing_grant",
    "fingerprint",
    "given_node",
    "grant_variable",
    "ledger_node",
    "mismatch",
]

DeviceKey = tuple[str, str]
"""``(family, id)``: a device of the ledger's node."""

_LOGICAL = ("override",)
"""Sources of devices that exist only by configuration: never the counterpart of a real one."""


class Restriction(NamedTuple):
    """The devices of the ledger's node this process sees (``keys``), and why (for messages)."""

    keys: frozenset[DeviceKey]
    why: str


def ledger_node(
    host: Host, overrides: Optional[Mapping[str, object]], registry: Registry
) -> tuple[Node, Optional[Restriction]]:
    """The node a ledger serves for a process on ``host``, and what the process may take of it
    (None: all of it). One detection when nothing restricts the process, two otherwise (more
    when an override asks for more devices than a visibility variable shows)."""
    from accelkit.node._detect import detect_node
    from accelkit.node._operator import CONFIG_ENV_VARS, OVERRIDE_ENV

    present = _restricting(host, registry)
    if not present and not overrides:
        return detect_node(host, registry=registry), None
    physical = detect_node(_Lifted(host, present), registry=registry)
    causes = [f"{name}={host.env[name]!r}" for name in present]
    causes += [f"--override {name}={value}" for name, value in (overrides or {}).items()]
    why = ", ".join(causes)
    try:  # the operator's override held to the variables, as a caller's is: see below
        seen = detect_node(host, {**_operator_counts(host), **(overrides or {})}, registry=registry)
    except ConfigurationError:
        variables = [name for name in present if name not in CONFIG_ENV_VARS]
        if not variables or not (overrides or OVERRIDE_ENV in host.env):
            raise
        return _configured_then_seen(host, overrides, physical, variables, why, registry)
    return _part_of(seen, physical, why, registry)


def _operator_counts(host: Host) -> dict[str, float]:
    """The operator's ``ACCELKIT_OVERRIDE_RESOURCES`` on ``host``, as a caller's overrides.

    Detection lets the variables a process inherits narrow the operator's count (every
    granted worker sees fewer devices than the node has); the ledger must know the node the
    operator configured, so it asks for the count strictly, and a disagreement sends it to
    :func:`_configured_then_seen`."""
    from accelkit.node._operator import read_overrides
    from accelkit.quantities import from_units

    return {name: from_units(o.units) for name, o in read_overrides(host.env, None).items()}


def _configured_then_seen(
    host: Host,
    overrides: Optional[Mapping[str, object]],
    physical: Node,
    variables: list[str],
    why: str,
    registry: Registry,
) -> tuple[Node, Optional[Restriction]]:
    """The ledger's node when an override asks for more devices than a visibility variable
    shows: the override says what the node has, the variable which of it this process sees.

    Detected together, the two disagree (``accelkit ls`` refuses them), yet that is every
    process run on a grant of an overridden node: its grant's variables list two GPUs of the
    eight the operator configured. So the override is applied to the node seen without the
    variables, and each variable then picks, of its own family's devices on that node, those
    the process may take: devices the machine has as the process detects them through the
    variable, matched by :func:`counterpart` (one the override left out is not taken); logical
    devices the override made, which no detection shows, by the variable's tokens read as the
    family's runtime reads them.
    """
    from accelkit.node._detect import detect_node
    from accelkit.node._operator import OVERRIDE_ENV

    configured = detect_node(_Lifted(host, variables), overrides, registry=registry)
    node, restriction = _part_of(configured, physical, why, registry)
    offered = allocatable(node)
    narrowed = [m for m in registry.managers() if _visibility_names(m) & set(variables)]
    names = {m.name for m in narrowed}
    keys = {_key(device) for device in offered if device.family not in names}
    visible: Optional[Node] = None
    for manager in narrowed:
        devices = [d for d in offered if d.family == manager.name]
        if any(d.source in _LOGICAL for d in devices):
            keys |= _named_by_variable(manager, host.env, devices)
            continue
        if visible is None:
            visible = detect_node(_Lifted(host, [OVERRIDE_ENV]), registry=registry)
        seen = (d for d in allocatable(visible) if d.family == manager.name)
        keys |= {
            _key(m) for m in (counterpart(d, devices, registry) for d in seen) if m is not None
        }
    if restriction is not None:
        keys &= restriction.keys
    if keys == {_key(d) for d in offered}:
        return node, None
    return node, Restriction(frozenset(keys), why)


def _named_by_variable(
    manager: AcceleratorManager, env: Mapping[str, str], devices: list[Device]
) -> set[DeviceKey]:
    """The devices of ``devices`` the family's variables in ``env`` name, read as its runtime
    reads them: in order, up to the first token that names no device or two (where CUDA, HIP
    and ROCr stop); all of them when the family is unrestricted, none when the value cannot be
    read (a restriction that cannot be read is never widened)."""
    try:
        tokens = manager.read_visible(env)
    except PLUGIN_FAULTS:
        return set()
    if tokens is None:
        return {_key(device) for device in devices}
    keys: set[DeviceKey] = set()
    for token in tokens:
        named = [d for d in devices if d.id == token] or [
            d for d in devices if manager.matches(token, d)
        ]
        if len(named) != 1:
            break
        keys.add(_key(named[0]))
    return keys


def given_node(
    node: Node, host: Optional[Host], registry: Registry
) -> tuple[Node, Optional[Restriction]]:
    """The node a ledger serves when handed ``node``, and what it may take: ``node`` itself,
    unless detection narrowed it (a visibility variable, an exclusion, an override); then the
    node detected on ``host`` (None: this machine) without the restriction, of which it takes
    ``node``'s devices, as a process that detects its node itself does. A node that is not of
    that machine (a snapshot's, handed in on another one: its families count other devices than
    the machine's) is served as it is."""
    from accelkit.node._detect import detect_node

    listed = Counter(d.family for d in node.devices)
    if all(count <= listed[family] for family, count in node.detected.items()):
        return node, None
    host = LocalHost() if host is None else host
    physical = detect_node(_Lifted(host, _restricting(host, registry)), registry=registry)
    if any(physical.detected.get(family) != n for family, n in node.detected.items()):
        return node, None
    return _part_of(node, physical, "the node given to the ledger, detected narrowed", registry)


def fingerprint(node: Node) -> dict[str, str]:
    """What identifies a node to its ledger: a checksum of what its devices are (the devices,
    the resources they count, their types, each of their families' policies), and a readable
    summary for messages. Families without devices (detection lists every registered one) and
    plain capacity (one user's override) are no part of it: see the module's docstring.

    CRC-32 tells one node configuration from another; it is no defence against someone who may
    write the ledger, who could change anything in it anyway. (SHA-256 would load OpenSSL's
    ``_hashlib``: 2 ms and 3.5 MiB on every ``accelkit run``.)"""
    families = sorted({d.family for d in node.devices})
    counted = {d.resource_name for d in node.devices}
    resources = sorted(
        (name, amount)
        for name, amount in node.resources.items()
        if name in counted or name.startswith(ACCELERATOR_TYPE_PREFIX)
    )
    facts = {
        "devices": _device_facts(node),
        "resources": resources,
        "families": {
            name: node.policies[name].to_dict() for name in families if name in node.policies
        },
    }
    summary = ", ".join(f"{name}={amount:g}" for name, amount in resources)
    return {"fingerprint": _checksum(facts), "summary": summary or "no devices"}


def mismatch(recorded: Mapping[str, str], identity: Mapping[str, str]) -> str:
    """``(theirs), not this one (ours)``, and what differs when the summaries cannot show it."""
    theirs, ours = recorded.get("summary"), identity["summary"]
    if theirs != ours:
        return f"({theirs}), not this one ({ours})"
    return (
        f"({theirs}), not this one: the same resources, but a device's id, index, type or "
        "parent, or a family's scheduling policy, differs (another accelkit or plugin version?)"
    )


def allocatable(node: Node) -> list[Device]:
    """The node's devices a grant may hold: all but those listed with their partitions."""
    parents = {(d.family, d.parent) for d in node.devices if d.parent is not None}
    return [d for d in node.devices if _key(d) not in parents]


def counterpart(device: Device, devices: Iterable[Device], registry: Registry) -> Optional[Device]:
    """The device among ``devices`` that ``device`` (as a restricted process sees it) is: the one
    with its UUID, else the one with its id, else the one its family's ``matches`` names by its
    id. Detection renames a device its visibility variable names to the token naming it, which
    need not be an id (``TT_VISIBLE_DEVICES=0000:04:00.0``, a bus id), so it is matched back as
    detection matched it. None for a device that exists only by configuration, and for a token
    that names no device or several."""
    if device.source in _LOGICAL:
        return None
    family = [d for d in devices if d.family == device.family]
    if device.uuid:
        same = next((d for d in family if d.uuid == device.uuid), None)
        if same is not None:
            return same
    same = next((d for d in family if d.id == device.id), None)
    if same is not None or not family:
        return same
    named = _matched(device.id, family, registry)
    return named[0] if len(named) == 1 else None


def _matched(token: str, devices: list[Device], registry: Registry) -> list[Device]:
    """The devices of one family (``devices``) its manager's ``matches`` says ``token`` names;
    none when the family has no manager here (a node handed in) or its ``matches`` fails
    (detection has reported that)."""
    try:
        manager = registry.get_manager(devices[0].family)
        return [d for d in devices if manager.matches(token, d)]
    except PLUGIN_FAULTS:
        return []


def enclosing_grant(ledger: str) -> Optional[int]:
    """The token of the grant this process runs on, when ``ACCELKIT_GRANT`` names one of
    ``ledger`` (a grant of another ledger has no steps here); a malformed value is an error."""
    value = os.environ.get(GRANT_VAR, "").strip()
    if not value:
        return None
    token, path = grant_named(value)
    return token if os.path.realpath(path) == os.path.realpath(ledger) else None


def grant_variable(token: int, ledger: str) -> dict[str, str]:
    """``{"ACCELKIT_GRANT": "<token>@<ledger>"}``: what marks a process as running on a grant."""
    return {GRANT_VAR: f"{token}@{ledger}"}


class _Lifted(HostView):
    """``inner`` without the variables that restrict this process (for its probe processes too:
    a vendor library there reads the real environment)."""

    def __init__(self, inner: Host, lifted: Iterable[str]) -> None:
        gone = set(lifted)
        super().__init__(inner, [name for name in inner.env if name not in gone])
        self._removed: dict[str, Optional[str]] = dict.fromkeys(gone)

    def probe(
        self,
        function: Any,
        *args: Any,
        timeout: Optional[float] = None,
        env: Optional[ProbeEnv] = None,
    ) -> Any:
        return self.inner.probe(
            function, *args, timeout=timeout, env={**self._removed, **(env or {})}
        )


def _visibility_names(manager: AcceleratorManager) -> set[str]:
    """The family's visibility variables: its primary one, and every variable its rule writes to
    hide all its devices (the layers stacked on it; a grant's environment sets them). A rule
    that fails names none here; detection reports the family."""
    names = {manager.visible_devices_env_var} if manager.visible_devices_env_var else set()
    try:
        if manager.api_version >= 2:
            written = manager.visibility_env([], total=None)
        else:
            written = manager.visibility_env([])
    except PLUGIN_FAULTS:
        return names
    if isinstance(written, Mapping):
        names.update(name for name in written if isinstance(name, str))
    return names


def _restricting(host: Host, registry: Registry) -> list[str]:
    """The variables set on ``host`` that narrow what a process sees of its node: every
    family's visibility variables and the operator's corrections."""
    from accelkit.node._operator import CONFIG_ENV_VARS

    names = {*CONFIG_ENV_VARS, *(n for m in registry.managers() for n in _visibility_names(m))}
    return sorted(name for name in names if name in host.env)


def _part_of(
    seen: Node, physical: Node, why: str, registry: Registry
) -> tuple[Node, Optional[Restriction]]:
    """The ledger's node for a process that sees ``seen`` of the machine ``physical``, and the
    devices it may take: the physical node, with the plain capacity ``seen`` is configured
    with; ``seen`` itself when it has a device the machine has not (logical devices)."""
    keys = _counterparts(seen, physical, registry)
    if keys is None:
        return seen, None
    node = _with_exclusion_warnings(_with_plain_capacity(physical, seen), seen)
    if keys == {_key(d) for d in allocatable(physical)}:
        return node, None
    return node, Restriction(frozenset(keys), why)


def _counterparts(seen: Node, physical: Node, registry: Registry) -> Optional[set[DeviceKey]]:
    """The physical devices the process's node offers; None when it offers a device the
    machine does not have."""
    devices = allocatable(physical)
    keys = set()
    for device in allocatable(seen):
        match = counterpart(device, devices, registry)
        if match is None:
            return None
        keys.add(_key(match))
    return keys


def _with_plain_capacity(physical: Node, seen: Node) -> Node:
    """``physical`` with the plain capacity (counted by no device, no type) ``seen`` has: an
    override for one user gives that process capacity, not another node."""
    counted = {d.resource_name for d in (*seen.devices, *physical.devices)}
    plain = {
        name: amount
        for name, amount in seen.resources.items()
        if name not in counted and not name.startswith(ACCELERATOR_TYPE_PREFIX)
    }
    if all(physical.resources.get(name) == amount for name, amount in plain.items()):
        return physical
    return replace(physical, resources={**physical.resources, **plain})


def _with_exclusion_warnings(node: Node, seen: Node) -> Node:
    """``node`` with the warnings ``seen``'s detection gave on the operator's exclusions (an
    ``ACCELKIT_EXCLUDE_DEVICES`` entry that is malformed or matches no device). The ledger's node
    is detected with the exclusions lifted, so without them ``accelkit run`` would hand out the
    GPU an operator's typo meant to keep off, and say nothing."""
    from accelkit.node._operator import EXCLUDE_ENV

    said = [
        d
        for d in seen.diagnostics
        if d.level != "info" and d.message.startswith(EXCLUDE_ENV) and d not in node.diagnostics
    ]
    return replace(node, diagnostics=[*node.diagnostics, *said]) if said else node


def _device_facts(node: Node) -> list[list[object]]:
    """What each device is, for the fingerprint. A device's file minor (NVIDIA's ``Device.minor``)
    joins it where detection read one: two processes in different device cgroups number the
    GPUs they may open alike (CUDA's numbers, from 0), and only the files tell whose GPU 0 is
    which, so they never meet in one ledger as one node and hand one GPU out twice. (Devices of
    families that read no minor keep the facts an earlier accelkit fingerprinted.)"""
    facts: list[list[object]] = []
    for d in node.devices:
        fact: list[object] = [d.family, d.id, d.resource_name, d.index, d.type_label, d.parent]
        if d.minor is not None:
            fact.append(d.minor)
        facts.append(fact)
    return facts


def _checksum(facts: Mapping[str, object]) -> str:
    return f"{zlib.crc32(json.dumps(facts, sort_keys=True).encode()):08x}"


def _key(device: Device) -> DeviceKey:
    return (device.family, device.id)
