"""Node detection: :func:`detect_node` turns a host into a :class:`~accelkit.Node`, in named steps.

Detection runs every family's ``detect(host)`` on a view of the host whose environment holds only
the variables that manager declares (``env_vars_read``; :class:`~accelkit.host._host.HostView`), the
same view its ``read_visible``, ``labels`` and ``additional_resources`` get, so that live
detection and a snapshot replay see the same. Then it applies, per family and in this order:

1. **Partitions.** A device whose id is another device's ``parent`` (a MIG-enabled GPU listed
   beside its instances) is dropped with a warning: a partition and its parent are never both
   allocatable.
2. **Exclusions.** ``ACCELKIT_EXCLUDE_DEVICES`` (``nvidia:GPU-…,nvidia:3``; tokens matched with
   the manager's ``matches``, in the detected id space) removes devices, and the partitions of a
   removed device, with an info diagnostic.
3. **Visibility.** A family's visibility variable, when set, restricts what exists and supplies
   the ids, in the variable's order: ``CUDA_VISIBLE_DEVICES=2,3,5`` on an 8-GPU node leaves three
   devices with ids "2", "3", "5" (each keeps its detected facts; ``index`` becomes its position
   in the variable, the ordinal the family's runtime will use). A token that names no detected
   device (by id, UUID or index) still stands, with a warning, for one of the detected devices
   no other token names, while there is one (Ray's rule, min(detected, listed)): so the same
   variable on a node where only 3 GPUs are detected, numbered 0-2, also gives "2", "3", "5".
   It carries only the facts those devices share; a partition granted whole (a MIG instance) is
   never stood for. Tokens beyond that, and repeats, are dropped with a warning; a value that
   makes nothing visible by accident (not ``""``/``NoDevFiles``) is a warning too. When the
   family detected nothing, its tokens become logical
   devices (source ``"env"``), unless another family already provides that resource: an AMD
   node whose shell sets ``CUDA_VISIBLE_DEVICES`` is not also an NVIDIA node, and on a node with
   no device at all only the first such family in registry order makes logical devices. A value
   the manager cannot read (``read_visible`` raising ``ValueError``, or a token that could not be
   written back as an id) is an error diagnostic and counts as *nothing visible*: the variable
   exists to restrict, so a restriction we cannot read must not be widened into "everything".
4. **Overrides** (``overrides=`` and ``ACCELKIT_OVERRIDE_RESOURCES``, a JSON object; both are
   merged per resource and the argument wins). A device resource (one a manager owns) takes a
   whole count: fewer than found keeps the first N (registry order across families), more adds
   logical devices (source ``"override"``) to the first family that has devices, or to the
   resource's default family (the first manager in registry order owning it), with the lowest free
   integer ids; 0 removes the resource. Adding devices beyond what a set visibility variable
   allows raises :class:`~accelkit.ConfigurationError` naming both. Any other resource is plain
   capacity with no devices.

Then resources (``<resource>`` = device count, ``accelerator_type:<label>`` = 1 per distinct
type label, each manager's ``additional_resources``, plain-capacity overrides) and labels
(``<prefix>accelerator-type``, ``<prefix><family>.count``, ``<prefix><family>.type``,
``<prefix><family>.<key>`` for each manager label, then the ``accelkit_node_labels`` hook) are
computed from what is left. A family whose ``detect`` raises or times out becomes an error
diagnostic; the other families still answer. ``detect()`` runs off the calling thread, and
detection returns by one deadline (``ACCELKIT_DETECT_TIMEOUT``) however many families hang
(:mod:`accelkit.host._deadlines`). The same host always gives an equal node.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from accelkit._faults import PLUGIN_FAULTS
from accelkit._settings import DETECT_TIMEOUT_VAR, Budgets
from accelkit._shown import shown
from accelkit._stdout import end_captures
from accelkit._visibility import checked_ids, is_index, join_ids
from accelkit.device import MAX_DEVICES, Device
from accelkit.diagnostics import Diagnostic, collecting, note
from accelkit.errors import ConfigurationError, InvalidRequest
from accelkit.host import _deadlines as deadlines
from accelkit.host._host import Host, HostView, LocalHost
from accelkit.manager import ACCELERATOR_TYPE_PREFIX, AcceleratorManager
from accelkit.node._record import Node
from accelkit.quantities import UNIT, from_units, to_units
from accelkit.registry import Registry, resolve

__all__ = [
    "CONFIG_ENV_VARS",
    "DEFAULT_LABEL_PREFIX",
    "EXCLUDE_ENV",
    "NODE_FAMILY",
    "OVERRIDE_ENV",
    "STEPS",
    "detect_node",
]

OVERRIDE_ENV = "ACCELKIT_OVERRIDE_RESOURCES"
"""JSON object of resource -> count, read from the host's environment (``{"GPU": 2}``)."""

EXCLUDE_ENV = "ACCELKIT_EXCLUDE_DEVICES"
"""Comma list of ``family:token`` naming devices to leave out (``nvidia:GPU-…``)."""

CONFIG_ENV_VARS = (OVERRIDE_ENV, EXCLUDE_ENV)
"""The operator's variables :func:`detect_node` reads besides the managers' own."""

DEFAULT_LABEL_PREFIX = "accelkit/"

NODE_FAMILY = "accelkit"
"""The ``family`` of diagnostics about the node's configuration rather than one family."""


@dataclass(frozen=True)
class _Override:
    """One requested resource quantity and where it was asked for (for error messages)."""

    units: int
    source: str

    @property
    def count(self) -> int:
        return self.units // UNIT


@dataclass
class _Family:
    """A family's devices while :func:`detect_node` works on them."""

    manager: AcceleratorManager
    host: Host
    """The family's view of the host: only the variables its manager declares."""
    detected: list[Device] = field(default_factory=list)
    """What ``detect()`` found (partition parents left out): the node's ``detected`` count."""
    devices: list[Device] = field(default_factory=list)
    tokens: Optional[list[str]] = None
    """What the family's visibility variable names; None when it is unset."""
    restriction: Optional[str] = None
    """``VAR='value'`` of the visibility variable that restricts the family, None when free."""
    excluded: list[Device] = field(default_factory=list)


@dataclass
class _Detection:
    """A node being built: what the steps read and change, in :data:`STEPS` order."""

    registry: Registry
    env: Mapping[str, str]
    budgets: Budgets
    label_prefix: str
    families: list[_Family]
    wanted: dict[str, _Override]
    exclusions: dict[str, list[str]]
    diagnostics: list[Diagnostic] = field(default_factory=list)
    plain: dict[str, _Override] = field(default_factory=dict)
    node: Node = field(default_factory=Node)

    @contextlib.contextmanager
    def noting(self, family: _Family) -> Iterator[None]:
        """Collect :func:`note` calls made in the block as ``family``'s diagnostics."""
        with _noting(family.manager.name, self.diagnostics):
            yield


def detect_node(
    host: Optional[Host] = None,
    overrides: Optional[Mapping[str, object]] = None,
    *,
    label_prefix: str = DEFAULT_LABEL_PREFIX,
    registry: Optional[Registry] = None,
) -> Node:
    """Detect every family's devices on ``host`` (this machine when None) and build the node.

    ``overrides`` maps resource -> count and wins over ``ACCELKIT_OVERRIDE_RESOURCES`` for the
    resources it names. ``registry`` chooses the plugins (None: the default registry). Raises
    :class:`~accelkit.ConfigurationError` only for a configuration that contradicts itself (a
    malformed override, or one beyond a visibility variable); detection problems are
    diagnostics. The steps, in order, are :data:`STEPS`; the module docstring gives their rules.
    """
    if host is None:
        host = LocalHost()
    plugins = resolve(registry)
    env = host.env
    wanted = _read_overrides(env, overrides)
    managers = plugins.managers()
    state = _Detection(
        registry=plugins,
        env=env,
        budgets=Budgets.from_env(os.environ),
        label_prefix=label_prefix,
        families=[_Family(m, HostView(host, _declared(m))) for m in managers],
        wanted=wanted,
        exclusions={},
    )
    state.exclusions = _read_exclusions(env, managers, state.diagnostics)
    for _name, step in STEPS:
        step(state)
    state.node.diagnostics = list(dict.fromkeys(state.diagnostics))  # each finding once
    return state.node


def _declared(manager: AcceleratorManager) -> tuple[str, ...]:
    """The variables a manager declares it reads: all that its host view shows."""
    try:
        names = tuple(manager.all_env_vars_read())
    except PLUGIN_FAULTS:  # a malformed declaration shows the manager no variable at all
        return ()
    return tuple(n for n in names if isinstance(n, str))


@contextlib.contextmanager
def _noting(family: str, sink: list[Diagnostic]) -> Iterator[None]:
    """Collect :func:`note` calls made in the block for ``family`` into ``sink``."""
    notes: list[Diagnostic] = []
    try:
        with collecting(family) as notes:
            yield
    finally:  # after collecting() closes, which adds a note of what it cut
        sink.extend(notes)


# -- the steps ---------------------------------------------------------------------------------
def _step_detect(state: _Detection) -> None:
    """Run every family's ``detect()`` off this thread and wait until the detection's deadline:
    a family that raises, or has not answered by then, finds nothing, and the others still
    answer (a hung ``detect()`` cannot be killed; its thread is left, and the family is not
    detected again while it runs)."""
    with deadlines.clock(state.budgets) as running:
        runs = [_FamilyRun(family) for family in state.families]
        deadlines.run_all([run.task for run in runs if run.refused is None], running)
        for run in runs:
            state.diagnostics.extend(run.finish(running))
    end_captures()  # a hung vendor import must not keep accelkit's own stdout
    names = [family.manager.name for family in state.families]
    errors = [d for d in state.diagnostics if d.level == "error"]
    state.registry.record_problems(
        {name: [d.message for d in errors if d.family == name] for name in names}
    )


class _FamilyRun:
    """One family's ``detect()`` as a task off the calling thread, and what came of it."""

    def __init__(self, family: _Family) -> None:
        self.family = family
        self.notes: list[Diagnostic] = []
        self.devices: Optional[list[Device]] = None
        self.key = ("detect", id(family.manager))
        self.refused = deadlines.running(self.key)
        self.task = deadlines.Task(self._work, f"{family.manager.name} detect()")

    def _work(self) -> None:
        with collecting(self.family.manager.name) as notes:
            self.notes = notes
            try:
                self.devices = _detect(self.family.manager, self.family.host)
            except BaseException as exc:  # what _detect lets through ends its family alone
                note(f"detect() raised {type(exc).__name__}: {exc}; no devices", "error")

    def finish(self, running: deadlines.Clock) -> list[Diagnostic]:
        """The family's devices set from its task; its findings returned."""
        name, task = self.family.manager.name, self.task
        self.family.devices = []
        if self.refused is not None:
            return [Diagnostic(name, "error", f"detection skipped: {self.refused}")]
        if task.finished.is_set():
            self.family.devices = self.devices or []
            return list(self.notes)
        if task.thread is not None:
            deadlines.remember(self.key, task.name, task.began, task.thread)
        budget = f"{running.budgets.detection:g}s ({DETECT_TIMEOUT_VAR})"
        cut = f"detect() did not finish within {budget}; no devices"
        return [*self.notes, Diagnostic(name, "error", cut)]


def _step_partitions(state: _Detection) -> None:
    """A device listed with its partitions is left out: only the partitions are allocatable."""
    for family in state.families:
        with state.noting(family):
            family.devices = _drop_partitioned_parents(family.devices)
            family.detected = list(family.devices)


def _step_read_visibility(state: _Detection) -> None:
    """Read each family's visibility variable; with nothing detected, its ids become devices."""
    provided = {f.manager.resource_name for f in state.families if f.detected}
    for family in state.families:
        with state.noting(family):
            try:
                _read_visibility(family, provided)
            except PLUGIN_FAULTS as exc:  # a plugin's read_visible() is broken
                note(f"visibility rules failed: {type(exc).__name__}: {exc}; no devices", "error")
                family.devices = []
                family.restriction = f"the {family.manager.name} visibility rules (failing)"
        if family.devices:
            provided.add(family.manager.resource_name)


def _step_exclusions(state: _Detection) -> None:
    """``ACCELKIT_EXCLUDE_DEVICES`` removes devices and their partitions."""
    for family in state.families:
        tokens = state.exclusions.get(family.manager.name, [])
        with state.noting(family):
            try:
                family.devices, family.excluded = _exclude(family.manager, family.devices, tokens)
            except PLUGIN_FAULTS as exc:  # a plugin's matches() is broken
                note(f"visibility rules failed: {type(exc).__name__}: {exc}; no devices", "error")
                family.devices = []


def _step_restrict(state: _Detection) -> None:
    """A set visibility variable restricts what exists and supplies the ids, in its order."""
    for family in state.families:
        if family.tokens is None or not family.detected:
            continue
        with state.noting(family):
            try:
                family.devices = _restrict(
                    family.manager, family.devices, family.excluded, family.tokens
                )
            except PLUGIN_FAULTS as exc:  # a plugin's matches() is broken
                note(f"visibility rules failed: {type(exc).__name__}: {exc}; no devices", "error")
                family.devices = []


def _step_overrides(state: _Detection) -> None:
    """Overrides resize device resources; other overridden resources are plain capacity."""
    state.plain = _apply_overrides(state.families, state.wanted, state.diagnostics)
    state.node.devices = [d for f in state.families for d in f.devices]
    state.node.detected = {f.manager.name: len(f.detected) for f in state.families if f.detected}
    state.node.policies = {f.manager.name: f.manager.policy() for f in state.families}


def _step_resources(state: _Detection) -> None:
    """Device counts, ``accelerator_type:<label>``, managers' extras, plain overrides."""
    state.node.resources = _resources(state.families, state.plain, state.diagnostics)


def _step_labels(state: _Detection) -> None:
    """Per-family labels, the node's type when every device shares one, then plugins' hooks."""
    state.node.labels = _labels(state.families, state.label_prefix, state.diagnostics)
    for key, value in state.registry.node_labels(state.node).items():
        state.node.labels.setdefault(key, value)


STEPS: tuple[tuple[str, Callable[[_Detection], None]], ...] = (
    ("detect", _step_detect),
    ("partitions", _step_partitions),
    ("read visibility", _step_read_visibility),
    ("exclusions", _step_exclusions),
    ("visibility", _step_restrict),
    ("overrides", _step_overrides),
    ("resources", _step_resources),
    ("labels", _step_labels),
)
"""Node detection, step by step, in order (the module docstring gives each step's rules)."""


# -- detection ---------------------------------------------------------------------------------
def _detect(manager: AcceleratorManager, host: Host) -> list[Device]:
    """The family's devices with family, resource and index filled; never raises."""
    try:
        result = manager.detect(host)
    except TimeoutError as exc:
        note(f"detection timed out: {exc}", "error")
        return []
    except PLUGIN_FAULTS as exc:  # one broken family must not hide the others
        note(f"detection failed: {type(exc).__name__}: {exc}", "error")
        return []
    if not isinstance(result, (list, tuple)) or not all(isinstance(d, Device) for d in result):
        note(f"detect() returned {shown(result, 200)}, not a list of Device; ignoring it", "error")
        return []
    if len(result) > MAX_DEVICES:
        note(
            f"detect() found {len(result)} devices; keeping the first {MAX_DEVICES} "
            "(accelkit.detect.MAX_DEVICES per family)",
            "error",
        )
        result = result[:MAX_DEVICES]
    devices: list[Device] = []
    seen: set[str] = set()
    for position, device in enumerate(result):
        if device.id in seen:
            note(f"device id {device.id!r} was detected twice; keeping the first", "warning")
            continue
        seen.add(device.id)
        devices.append(
            device.replace(
                family=manager.name,
                resource_name=manager.resource_name,
                index=position if device.index is None else device.index,
            )
        )
    return devices


def _drop_partitioned_parents(devices: list[Device]) -> list[Device]:
    """Keep only the partitions of a device listed together with its partitions."""
    parents = {d.parent for d in devices if d.parent}
    for device in devices:
        if device.id in parents:
            count = sum(1 for d in devices if d.parent == device.id)
            note(
                f"device {device.id} was listed with its {count} partition(s); only the "
                "partitions are allocatable, so the device itself is left out",
                "warning",
            )
    return [d for d in devices if d.id not in parents]


def _read_visibility(family: _Family, provided: set[str]) -> None:
    """The family's visibility tokens and restriction; logical devices when none was detected."""
    manager, env, detected = family.manager, family.host.env, family.detected
    try:
        tokens = checked_ids(manager.read_visible(env), "read_visible()")
        if tokens is not None:
            join_ids(tokens)  # every token must be writable back as a device id
    except ValueError as exc:
        note(
            f"cannot read {_visibility_text(manager, env)}: {exc}; treating it as nothing "
            "visible (fix or unset the variable)",
            "error",
        )
        tokens = []
    else:
        if tokens == [] and detected and not _says_nothing(manager, env):
            note(
                f"{_visibility_text(manager, env)} makes none of the {len(detected)} detected "
                "device(s) visible",
                "warning",
            )
    family.tokens = None if tokens is None else _distinct(manager, tokens)
    tokens = family.tokens
    if tokens is not None:
        family.restriction = _visibility_text(manager, env)
    if detected or not tokens:
        return
    if manager.resource_name in provided:
        note(
            f"{family.restriction} is set but no {manager.name} device was detected, and "
            f"another family provides {manager.resource_name}: creating no devices from it"
        )
        return
    family.devices = _logical(manager, dict.fromkeys(tokens), "env")
    note(f"no device detected; {len(family.devices)} logical device(s) from {family.restriction}")


def _distinct(manager: AcceleratorManager, tokens: list[str]) -> list[str]:
    """Visibility tokens without aliases (``9`` and ``09`` are one device to every runtime) and
    at most MAX_DEVICES of them; what is dropped is a warning."""
    kept: dict[str, str] = {}
    distinct: list[str] = []
    for token in tokens:
        alias = (token.lstrip("0") or "0") if is_index(token) else token
        first = kept.get(alias, token)
        if first != token:
            note(
                f"{_visibility_var(manager)} names {shown(first)} and {shown(token)}, the same "
                "device; keeping the first",
                "warning",
            )
            continue
        if alias not in kept and len(kept) == MAX_DEVICES:
            note(
                f"{_visibility_var(manager)} names {len(tokens)} ids; keeping the first "
                f"{MAX_DEVICES} (accelkit.detect.MAX_DEVICES)",
                "warning",
            )
            break
        kept[alias] = token
        distinct.append(token)  # an exact repeat stays: the later steps report it as before
    return distinct


def _says_nothing(manager: AcceleratorManager, env: Mapping[str, str]) -> bool:
    """Whether one of the family's variables holds a "nothing visible" sentinel on purpose."""
    return any(
        env[name].strip() in manager.nothing_visible
        for name in manager.all_env_vars_read()
        if name in env
    )


def _visibility_text(manager: AcceleratorManager, env: Mapping[str, str]) -> str:
    """``VAR='value'`` for the family's visibility variables that are set, for messages."""
    primary = manager.visible_devices_env_var
    names = [primary] if primary and primary in env else list(manager.all_env_vars_read())
    shown = [f"{n}={env[n]!r}" for n in names if n in env]
    return " and ".join(shown) if shown else f"the {manager.name} visibility variable"


def _logical(manager: AcceleratorManager, ids: Mapping[str, None], source: str) -> list[Device]:
    """Devices that exist only by configuration (no detected facts)."""
    return [
        Device(
            id=i,
            index=n,
            family=manager.name,
            resource_name=manager.resource_name,
            source=source,
        )
        for n, i in enumerate(ids)
    ]


def _find(manager: AcceleratorManager, token: str, devices: Sequence[Device]) -> Optional[Device]:
    """The device a token names: an exact id first, then the manager's own matching."""
    exact = next((d for d in devices if d.id == token), None)
    return exact or next((d for d in devices if manager.matches(token, d)), None)


def _exclude(
    manager: AcceleratorManager, devices: list[Device], tokens: Sequence[str]
) -> tuple[list[Device], list[Device]]:
    """Split devices into (kept, excluded) by ``ACCELKIT_EXCLUDE_DEVICES`` tokens."""
    gone: set[str] = set()
    for token in tokens:
        hits = {d.id for d in devices if d.id == token or d.parent == token}
        match = _find(manager, token, devices)
        if match is not None:
            hits.add(match.id)
        if not hits:
            note(f"{EXCLUDE_ENV} names {manager.name}:{token}, which matches no device", "warning")
        gone |= hits
    gone |= {d.id for d in devices if d.parent in gone}
    excluded = [d for d in devices if d.id in gone]
    for device in excluded:
        note(f"device {device.id} is excluded by {EXCLUDE_ENV}")
    return [d for d in devices if d.id not in gone], excluded


def _restrict(
    manager: AcceleratorManager,
    devices: list[Device],
    excluded: list[Device],
    tokens: Sequence[str],
) -> list[Device]:
    """The devices the visibility tokens name, renamed to the tokens, in the tokens' order.

    A token names a detected device by id, UUID or index (the manager's ``matches``). A token
    that names none still stands for one of the detected devices that no other token names, as
    long as there is one left (Ray's rule: a node shows ``min(detected, listed)`` devices, with
    the listed ids): ``CUDA_VISIBLE_DEVICES=2,3,5`` on a node where 3 GPUs are detected (a
    container that numbers them 0-2) gives the 3 GPUs "2", "3", "5". Such a device carries only
    the facts all those unnamed devices share. Tokens beyond the detected count are left out, and
    a partition that is granted whole (a MIG instance) is never stood for this way.
    """
    var = _visibility_var(manager)
    named: list[tuple[str, Optional[Device]]] = []
    taken: set[str] = set()
    unmatched: set[str] = set()
    parents = {d.parent for d in (*devices, *excluded) if d.parent}
    for token in tokens:
        device = _find(manager, token, devices)
        if device is None:
            if _find(manager, token, excluded) is not None:
                continue  # excluded on purpose: not a surprise worth a warning
            if token in parents:
                note(
                    f"{var} names {shown(token)}, a device whose partitions are listed in its "
                    "place (a MIG-enabled GPU); leaving it out",
                    "warning",
                )
                continue
            if token in unmatched:
                note(f"{var} names {token!r} more than once; keeping the first", "warning")
                continue
            unmatched.add(token)
            named.append((token, None))
        elif device.id in taken:
            note(
                f"{var} names device {device.id} more than once ({token!r}); keeping the first",
                "warning",
            )
        else:
            taken.add(device.id)
            named.append((token, device))
    # a partition (MIG instance) is named only by its own id: a stray index never stands for it,
    # or a MIG-enabled GPU would be handed out by its parent's index
    special = manager.partitions_per_grant is not None
    spare = [d for d in devices if d.id not in taken and not (special and d.parent)]
    shared = _shared_facts(spare)
    room = len(spare)
    visible: list[Device] = []
    standing: list[str] = []
    dropped: list[str] = []
    for token, found in named:
        if found is None:
            if not room:
                dropped.append(token)
                continue
            room -= 1
            standing.append(token)
            found = Device(
                token, family=manager.name, resource_name=manager.resource_name, source="env"
            ).replace(**shared)
        visible.append(found.replace(id=token, index=len(visible)))
    if standing:
        note(
            f"{var} names {_listed(standing)}, which match(es) no detected device by id, UUID or "
            f"index; each stands for one of the {len(spare)} detected device(s) the variable "
            "names no other way, with only the facts they share (check the variable, unless "
            "this is a container that numbers its devices anew)",
            "warning",
        )
    if dropped:
        note(
            f"{var} names {_listed(dropped)}, which match(es) no detected device, and every "
            "detected device is already accounted for; leaving it out",
            "warning",
        )
    return visible


def _listed(tokens: Sequence[str]) -> str:
    return ", ".join(repr(t) for t in tokens)


_SHARED_FACTS = ("type_label", "model", "memory_bytes")
"""Facts a device named only by a visibility token takes when every candidate agrees on them."""


def _shared_facts(devices: Sequence[Device]) -> dict[str, Any]:
    """The :data:`_SHARED_FACTS` that all ``devices`` have, with the same value."""
    facts: dict[str, Any] = {}
    for name in _SHARED_FACTS:
        values = {getattr(d, name) for d in devices}
        if len(values) == 1 and None not in values:
            facts[name] = values.pop()
    return facts


def _visibility_var(manager: AcceleratorManager) -> str:
    return manager.visible_devices_env_var or "the visibility variable"


# -- configuration -----------------------------------------------------------------------------
def _read_overrides(
    env: Mapping[str, str], overrides: Optional[Mapping[str, object]]
) -> dict[str, _Override]:
    """Env overrides, then the argument's, per resource; malformed ones raise."""
    merged: dict[str, _Override] = {}
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
        merged.update(_checked(data, OVERRIDE_ENV))
    if overrides:
        merged.update(_checked(overrides, "overrides"))
    return merged


def _checked(data: Mapping[Any, Any], source: str) -> dict[str, _Override]:
    checked: dict[str, _Override] = {}
    for resource, value in data.items():
        if not isinstance(resource, str) or not resource or any(c.isspace() for c in resource):
            raise ConfigurationError(
                f"{source}: resource names are non-empty strings without blanks, got "
                f"{shown(resource)}"
            )
        try:
            units = to_units(value, what=f"override {resource} ({source})")
        except InvalidRequest as exc:
            raise ConfigurationError(str(exc)) from None
        checked[resource] = _Override(units, f"{resource}={shown(value)} from {source}")
    return checked


def _read_exclusions(
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


def _apply_overrides(
    families: list[_Family], wanted: Mapping[str, _Override], sink: list[Diagnostic]
) -> dict[str, _Override]:
    """Resize device resources as overridden; return the plain-capacity overrides."""
    plain: dict[str, _Override] = {}
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


def _resize(owners: list[_Family], override: _Override, sink: list[Diagnostic]) -> None:
    """Keep the first N devices of a resource across its families, or add logical ones."""
    have = sum(len(f.devices) for f in owners)
    target = override.count
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
    if family.restriction is not None:
        raise ConfigurationError(
            f"override {override.source} asks for {target} {family.manager.resource_name} "
            f"device(s), but {family.restriction} allows {len(family.devices)}: raise the "
            "variable's list or lower the override"
        )
    used = {d.id for d in family.devices} | {str(d.index) for d in family.devices}
    used |= {d.parent for d in family.devices if d.parent}
    free = (str(n) for n in range(target + len(used) + 1) if str(n) not in used)
    extra = [next(free) for _ in range(target - have)]
    start = max((d.index or 0 for d in family.devices), default=-1) + 1
    added = [
        d.replace(index=start + n)
        for n, d in enumerate(_logical(family.manager, dict.fromkeys(extra), "override"))
    ]
    family.devices = [*family.devices, *added]
    sink.append(
        Diagnostic(
            family.manager.name,
            "info",
            f"override {override.source} adds {len(added)} logical device(s): {', '.join(extra)}",
        )
    )


# -- resources and labels ----------------------------------------------------------------------
def _resources(
    families: list[_Family], plain: Mapping[str, _Override], sink: list[Diagnostic]
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
        with _noting(family.manager.name, sink):
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


def _labels(families: list[_Family], prefix: str, sink: list[Diagnostic]) -> dict[str, str]:
    """Per-family facts always; ``<prefix>accelerator-type`` only when every device on the node
    shares one type (a node of T4s and A100s has no single type)."""
    labels: dict[str, str] = {}
    kinds: list[Optional[str]] = []
    for family in families:
        if not family.devices:
            continue
        manager, devices = family.manager, family.devices
        with _noting(manager.name, sink):
            kind = _guarded("accelerator_type", None, manager.accelerator_type, devices)
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
                f"({', '.join(types) or 'unlabelled'}); each family's {prefix}<family>.type and "
                "the accelerator_type:<label> resources name them",
            )
        )
    return labels


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
