"""Visibility: a family's visibility variable, set on the node, restricts what exists and names it.

The variable exists so that a process (or a whole node) sees only some devices, by the ids the
family's runtime will use; detection honours it the way the runtime would, so the node never
offers a device that a worker could not see. Two steps of :data:`~accelkit.node._detect.STEPS`
live here, around the operator's exclusions: reading the variable (and making logical devices
when nothing was detected), then restricting the detected devices by it.

A family's visibility variable, when set, restricts what exists and supplies the ids, in the
variable's order: ``CUDA_VISIBLE_DEVICES=2,3,5`` on an 8-GPU node leaves three devices with ids
"2", "3", "5" (each keeps its detected facts; ``index`` becomes its position in the variable, the
ordinal the family's runtime will use). A token that names no detected device (by id, UUID or
index) still stands, with a warning, for one of the detected devices no other token names, while
there is one (Ray's rule, min(detected, listed)): so the same variable on a node where only 3
GPUs are detected, numbered 0-2, also gives "2", "3", "5". It carries only the facts those
devices share; a partition granted whole (a MIG instance) is never stood for. Tokens beyond that,
and repeats, are dropped with a warning; a value that makes nothing visible by accident (not
``""``/``NoDevFiles``) is a warning too. When the family detected nothing, its tokens become
logical devices (source ``"env"``), unless another family already provides that resource: an AMD
node whose shell sets ``CUDA_VISIBLE_DEVICES`` is not also an NVIDIA node, and on a node with no
device at all only the first such family in registry order makes logical devices. A value the
manager cannot read (``read_visible`` raising ``ValueError``, or a token that could not be
written back as an id) is an error diagnostic and counts as *nothing visible*: the variable
exists to restrict, so a restriction we cannot read must not be widened into "everything".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Optional

from accelkit._faults import PLUGIN_FAULTS
from accelkit._shown import shown
from accelkit._visibility import NOTHING_VISIBLE, checked_ids, is_index, join_ids
from accelkit.device import MAX_DEVICES, Device
from accelkit.diagnostics import note
from accelkit.manager import AcceleratorManager
from accelkit.node._state import Detection, Family
from accelkit.registry import variables_read

__all__ = ["find", "logical", "step_read_visibility", "step_restrict"]


def step_read_visibility(state: Detection) -> None:
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


def step_restrict(state: Detection) -> None:
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


def _read_visibility(family: Family, provided: set[str]) -> None:
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
        if tokens == [] and detected and not _says_nothing_visible(manager, env):
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
    family.devices = logical(manager, dict.fromkeys(tokens), "env")
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


def _says_nothing_visible(manager: AcceleratorManager, env: Mapping[str, str]) -> bool:
    """Whether one of the family's variables holds a "nothing visible" value (``""``,
    ``NoDevFiles``) on purpose: then seeing none of the detected devices is no surprise."""
    return any(
        env[name].strip() in NOTHING_VISIBLE for name in variables_read(manager) if name in env
    )


def _visibility_text(manager: AcceleratorManager, env: Mapping[str, str]) -> str:
    """``VAR='value'`` for the family's visibility variables that are set, for messages."""
    primary = manager.visible_devices_env_var
    names = [primary] if primary and primary in env else list(variables_read(manager))
    shown = [f"{n}={env[n]!r}" for n in names if n in env]
    return " and ".join(shown) if shown else f"the {manager.name} visibility variable"


def logical(manager: AcceleratorManager, ids: Mapping[str, None], source: str) -> list[Device]:
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


def find(manager: AcceleratorManager, token: str, devices: Sequence[Device]) -> Optional[Device]:
    """The device a token names: an exact id first, then the manager's own matching."""
    exact = next((d for d in devices if d.id == token), None)
    return exact or next((d for d in devices if manager.matches(token, d)), None)


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
        device = find(manager, token, devices)
        if device is None:
            if find(manager, token, excluded) is not None:
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
    special = manager.scheduling.partitions_per_grant is not None
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
