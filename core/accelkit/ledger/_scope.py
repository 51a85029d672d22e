"""Deciding within part of the node: the devices a restricted process sees, or a grant's steps.

Two requests do not take from the whole node. A process restricted to some devices (a shell with
``CUDA_VISIBLE_DEVICES=0,1,2,3``) takes only from those, beside everyone's grants. A run inside a
grant (a *step*, as in a SLURM allocation) takes from that grant's devices, beside the grant's
other steps, and never from the node: the grant holds those devices already.

Both are a :class:`Scope`: what each device (and each plain resource) offers inside it. The
decision is the allocator's own, on the ledger's node, with stand-in grants restored first: one
per device (and one of plain capacity) that hold everything outside the scope and everything
the scope's holders use. Placement, packing and validation are therefore exactly the node's: a
step of two TPU chips is still an aligned block. A request that could never fit in the scope,
even were it idle, raises :class:`~accelkit.Unsatisfiable` at once, as one the node could never
serve does.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, NamedTuple, Optional

from accelkit.errors import LedgerError, Unsatisfiable
from accelkit.ledger._identity import DeviceKey, Restriction, allocatable
from accelkit.ledger._location import GRANT_VAR
from accelkit.manager import ACCELERATOR_TYPE_PREFIX
from accelkit.quantities import UNIT, from_units, to_units
from accelkit.schedule._allocator import Allocator
from accelkit.schedule._grant import Grant, grant_text, shared_resources

if TYPE_CHECKING:
    from accelkit.device import Device
    from accelkit.ledger._state import LedgerState, Record
    from accelkit.node._record import Node
    from accelkit.registry import Registry

__all__ = [
    "Scope",
    "acquire_around",
    "acquire_in",
    "describe",
    "enclosing_record",
    "never_fitting",
    "step_scope",
    "visible_scope",
]


class Scope(NamedTuple):
    """Units each device offers (``devices``), units of each plain resource (``plain``; a name
    left out offers the node's whole capacity), what it is (for messages), and the grant whose
    steps take from it (None: the node's level)."""

    devices: Mapping[DeviceKey, int]
    plain: Mapping[str, int]
    what: str
    parent: Optional[int]

    def narrowed(self, restriction: Optional[Restriction]) -> Scope:
        """This scope less the devices a restricted process does not see."""
        if restriction is None:
            return self
        devices = {k: v for k, v in self.devices.items() if k in restriction.keys}
        what = f"{self.what}, as far as this process sees ({restriction.why})"
        return Scope(devices, self.plain, what, self.parent)


def visible_scope(restriction: Restriction, node: Node) -> Scope:
    """The node's devices a restricted process sees, at the node's level."""
    seen = [d for d in allocatable(node) if (d.family, d.id) in restriction.keys]
    what = f"the devices this process sees ({_devices_text(seen)}: {restriction.why})"
    return Scope(dict.fromkeys(restriction.keys, UNIT), {}, what, None)


def enclosing_record(state: LedgerState, token: int, location: str) -> Record:
    """The record of grant ``token``, which this process runs on (``ACCELKIT_GRANT``), from the
    ledger at ``location``. A :class:`~accelkit.LedgerError` when the ledger no longer holds it,
    or another user took it: the variable is only text, which any process may set, and a step
    of someone else's grant would take the devices they hold. Root's grants are the exception
    (a node agent's ``accelkit run -r GPU=2 -- runuser -u alice -- job``), and root steps any."""
    record = next((r for r in state.grants if r.token == token), None)
    if record is None:
        raise LedgerError(
            f"this process runs on grant {token} of the ledger {location} ({GRANT_VAR}), which "
            "the ledger no longer holds: the process that held it ended or gave it back. A step "
            f"takes from its grant; unset {GRANT_VAR} to take from the node itself"
        )
    if record.user not in (None, 0, os.getuid()) and os.getuid() != 0:
        raise LedgerError(
            f"{GRANT_VAR} names grant {token} of the ledger {location}, which uid {record.user} "
            f"took, not this user (uid {os.getuid()}): a step takes from a grant of its own "
            f"user's (or root's); unset {GRANT_VAR} to take from the node itself"
        )
    return record


def step_scope(parent: Grant, node: Node) -> Scope:
    """What a step of ``parent`` may take: its devices and plain resources (type capacities stay
    the node's: a step of an H100 grant may ask for H100s)."""
    devices: dict[DeviceKey, int] = {}
    for device, share in parent.devices:
        key = (device.family, device.id)
        devices[key] = devices.get(key, 0) + to_units(share)
    plain = {
        name: to_units(parent.resources.get(name, 0))
        for name in _plain(node)
        if not name.startswith(ACCELERATOR_TYPE_PREFIX)
    }
    held = grant_text(parent, shared_resources(node.devices))
    what = f"grant {parent.token} ({held}), which this process runs on"
    return Scope(devices, plain, what, parent.token)


def acquire_in(
    scope: Scope,
    node: Node,
    registry: Optional[Registry],
    used: Sequence[Grant],
    request: Mapping[str, object],
    accelerator_type: Optional[str],
    wants: str,
) -> Optional[Grant]:
    """A grant of ``request`` from ``scope``, beside the grants ``used`` there; None when it
    does not fit now. Raises as the allocator does, and :class:`~accelkit.Unsatisfiable` for a
    request the idle scope could never serve."""
    never_fitting(scope, node, registry, request, accelerator_type, wants)
    return _allocator(scope, node, registry, used).acquire(
        request, accelerator_type=accelerator_type
    )


def acquire_around(
    scope: Optional[Scope],
    node: Node,
    registry: Optional[Registry],
    used: Sequence[Grant],
    request: Mapping[str, object],
    accelerator_type: Optional[str],
    reserved: Collection[DeviceKey],
) -> Optional[Grant]:
    """A grant of ``request`` from ``scope`` (None: the node's level), beside the grants ``used``
    there, that takes none of the ``reserved`` devices (waiters ahead of it wait for them); None
    when none fits now. Placed as the node places it, with stand-ins holding those devices."""
    if scope is None:
        everything = dict.fromkeys(((d.family, d.id) for d in allocatable(node)), UNIT)
        scope = Scope(everything, {}, "the node", None)
    free = {key: units for key, units in scope.devices.items() if key not in reserved}
    allocator = _allocator(scope._replace(devices=free), node, registry, used)
    return allocator.acquire(request, accelerator_type=accelerator_type)


def never_fitting(
    scope: Scope,
    node: Node,
    registry: Optional[Registry],
    request: Mapping[str, object],
    accelerator_type: Optional[str],
    wants: str,
) -> None:
    """Raise :class:`~accelkit.Unsatisfiable` for a request the idle scope could never serve
    (``wants`` says it as people write it), and as the allocator does for a malformed one."""
    idle = _allocator(scope, node, registry, ())
    if idle.acquire(request, accelerator_type=accelerator_type) is None:
        raise Unsatisfiable(f"{wants} can never fit in {scope.what}")


def describe(request: Mapping[str, object], accelerator_type: Optional[str]) -> str:
    """``GPU=1, accelerator_type=H100``: a request as people write it on the command line."""
    try:
        parts = [
            f"{name}={quantity:g}" if isinstance(quantity, float) else f"{name}={quantity}"
            for name, quantity in request.items()
        ]
    except AttributeError:
        return repr(request)
    if accelerator_type is not None:
        parts.append(f"accelerator_type={accelerator_type}")
    return ", ".join(parts) or "nothing"


def _allocator(
    scope: Scope, node: Node, registry: Optional[Registry], used: Sequence[Grant]
) -> Allocator:
    """An allocator of ``node`` in which only the scope's free room is free."""
    allocator = Allocator(node, registry=registry)
    taken: dict[DeviceKey, int] = {}
    plain_taken: dict[str, int] = {}
    for grant in used:
        for device, share in grant.devices:
            key = (device.family, device.id)
            taken[key] = taken.get(key, 0) + to_units(share)
        for name, amount in grant.resources.items():
            plain_taken[name] = plain_taken.get(name, 0) + to_units(amount)
    stand_ins: list[Grant] = []
    for device in allocatable(node):
        key = (device.family, device.id)
        units = min(UNIT - scope.devices.get(key, 0) + taken.get(key, 0), UNIT)
        if units > 0:  # one grant per device: a share above 1 of a resource must be whole
            share = from_units(units)
            stand_ins.append(
                Grant(len(stand_ins), {device.resource_name: share}, [(device, share)])
            )
    plain: dict[str, float] = {}
    for name, total in _plain(node).items():
        units = total - scope.plain.get(name, total) + plain_taken.get(name, 0)
        if units > 0:
            plain[name] = from_units(min(units, total))
    if plain:
        stand_ins.append(Grant(len(stand_ins), plain, []))
    allocator.restore(stand_ins)
    return allocator


def _plain(node: Node) -> dict[str, int]:
    """The node's resources that no device counts (types, custom capacity), in units."""
    counted = {d.resource_name for d in node.devices}
    return {
        name: round(amount * UNIT) for name, amount in node.resources.items() if name not in counted
    }


def _devices_text(devices: Sequence[Device]) -> str:
    ids: dict[str, list[str]] = {}
    for device in devices:
        ids.setdefault(device.resource_name, []).append(device.id)
    return "; ".join(f"{name} {','.join(group)}" for name, group in ids.items()) or "no device"
