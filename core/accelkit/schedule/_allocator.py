"""``Allocator``: hand out a node's devices and resources to requests, and take them back.

State is integer units (1e-4) per device and per plain resource, so ten grants of 0.1 fill a
device exactly and every release restores exactly what its acquire took. Each acquire is a few
integer and bitmask operations whatever the node's size:

- whole devices: the family's placement rule (:mod:`accelkit.policy`) picks keys out of the
  bitmask of fully free devices (lowest free, aligned blocks, contiguous ranges);
- a fraction: best fit. Devices are bucketed by their free units (a bitmask of positions per
  level, levels kept sorted), so the tightest device that fits is a bisect away, and ties go to
  the lowest position (index order). One device is packed before the next is opened.

A request is checked once per distinct shape (:mod:`._request`) and the result cached, so
a scheduler asking for ``{"GPU": 0.5}`` a million times pays for validation once.
"""

from __future__ import annotations

import itertools
import os
import threading
from abc import ABC, abstractmethod
from bisect import bisect_left, insort
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Optional, Union

from accelkit.device import Device
from accelkit.errors import InvalidRequest
from accelkit.quantities import UNIT, from_units, to_units
from accelkit.schedule._grant import Grant
from accelkit.schedule._request import FamilyDevices, Inventory, request_units

if TYPE_CHECKING:
    from accelkit.node._record import Node
    from accelkit.registry import Registry

__all__ = ["Allocator"]

_PLAN_CACHE_SIZE = 1024
"""Distinct request shapes remembered; schedulers use a handful, so this is never reached."""


class _Pool:
    """Free units of one family's devices of one resource, indexed for placement and best fit.

    Positions are the devices' places in index order; placement keys are the family rule's keys.
    ``full`` is the key mask of fully free devices, ``buckets`` maps a free amount (> 0) to the
    position mask of devices with exactly that much free, and ``levels`` lists those amounts in
    ascending order.
    """

    __slots__ = ("buckets", "devices", "family", "free", "full", "key_bits", "levels", "position")

    def __init__(self, family: FamilyDevices) -> None:
        self.family = family
        self.devices = family.devices
        self.free = [UNIT] * len(family.devices)
        self.key_bits = [1 << key for key in family.keys]
        self.position = {key: position for position, key in enumerate(family.keys)}
        self.full = family.all_keys
        self.buckets: dict[int, int] = (
            {UNIT: (1 << len(family.devices)) - 1} if family.devices else {}
        )
        self.levels = list(self.buckets)

    def set(self, position: int, new: int) -> None:
        """Make ``new`` units of the device at ``position`` free, keeping every index in step."""
        old = self.free[position]
        bit = 1 << position
        buckets = self.buckets
        if old:
            rest = buckets[old] ^ bit
            if rest:
                buckets[old] = rest
            else:
                del buckets[old]
                del self.levels[bisect_left(self.levels, old)]
        if new:
            peers = buckets.get(new)
            if peers is None:
                buckets[new] = bit
                insort(self.levels, new)
            else:
                buckets[new] = peers | bit
        self.free[position] = new
        if (old == UNIT) != (new == UNIT):
            self.full ^= self.key_bits[position]

    def give(self, position: int, units: int) -> None:
        """Return ``units`` of the device at ``position`` (a release)."""
        self.set(position, self.free[position] + units)

    def best_fit(self, units: int, allowed: int) -> int:
        """The position of the allowed device with the least free room that still fits ``units``
        (lowest position on ties), or -1."""
        levels = self.levels
        buckets = self.buckets
        for i in range(bisect_left(levels, units), len(levels)):
            fits = buckets[levels[i]] & allowed
            if fits:
                return (fits & -fits).bit_length() - 1
        return -1

    def free_units(self) -> int:
        """Free units over every device (for ``available()``, not the hot path)."""
        return sum(self.free)


class _Capacity:
    """A resource without devices (``accelerator_type:H100``, a custom resource)."""

    __slots__ = ("free", "name")

    def __init__(self, name: str, total: int) -> None:
        self.name = name
        self.free = total

    def give(self, position: int, units: int) -> None:
        """Return ``units`` (``position`` is 0: a capacity has no devices)."""
        self.free += units


_Holder = Union[_Pool, _Capacity]
_Held = tuple[tuple[_Holder, int, int], ...]
"""What a grant holds: (pool or capacity, device position or 0, units) per entry."""


class _Step(ABC):
    """One resource of a compiled request: find room for it, then take it."""

    __slots__ = ("units",)

    def __init__(self, units: int) -> None:
        self.units = units

    @abstractmethod
    def find(self) -> Any:
        """Where the resource fits now (opaque to the caller), or None."""

    @abstractmethod
    def take(self, where: Any, devices: list[tuple[Device, float]], held: list[Any]) -> None:
        """Take the room :meth:`find` returned, recording devices and what to give back."""


class _CapacityStep(_Step):
    __slots__ = ("capacity",)

    def __init__(self, capacity: _Capacity, units: int) -> None:
        super().__init__(units)
        self.capacity = capacity

    def find(self) -> Any:
        return True if self.capacity.free >= self.units else None

    def take(self, where: Any, devices: list[tuple[Device, float]], held: list[Any]) -> None:
        self.capacity.free -= self.units
        held.append((self.capacity, 0, self.units))


class _FractionStep(_Step):
    """A share below 1 of one device, best fit among the allowed positions of every family that
    serves the resource: one device is packed before the next is opened, whichever family it is
    of. Each family's best fit costs a walk of its free levels, never of its devices."""

    __slots__ = ("candidates", "share")

    def __init__(self, candidates: list[tuple[_Pool, int]], units: int) -> None:
        super().__init__(units)
        self.candidates = tuple(candidates)
        self.share = from_units(units)

    def find(self) -> Any:
        best: Optional[tuple[_Pool, int]] = None
        least = UNIT + 1
        for pool, allowed in self.candidates:
            position = pool.best_fit(self.units, allowed)
            if position >= 0 and pool.free[position] < least:  # ties: the first family's
                best, least = (pool, position), pool.free[position]
        return best

    def take(self, where: Any, devices: list[tuple[Device, float]], held: list[Any]) -> None:
        pool, position = where
        pool.set(position, pool.free[position] - self.units)
        devices.append((pool.devices[position], self.share))
        held.append((pool, position, self.units))


class _WholeStep(_Step):
    """``count`` fully free devices of one family, as its placement rule chooses them."""

    __slots__ = ("candidates", "count")

    def __init__(self, candidates: list[tuple[_Pool, int]], units: int) -> None:
        super().__init__(units)
        self.candidates = tuple(candidates)
        self.count = units // UNIT

    def find(self) -> Any:
        for pool, allowed in self.candidates:
            chosen = pool.family.policy.placement.choose(pool.full & allowed, self.count)
            if chosen is not None:
                return pool, chosen
        return None

    def take(self, where: Any, devices: list[tuple[Device, float]], held: list[Any]) -> None:
        pool, chosen = where
        while chosen:
            low = chosen & -chosen
            chosen ^= low
            position = pool.position[low.bit_length() - 1]
            pool.set(position, 0)
            devices.append((pool.devices[position], 1.0))
            held.append((pool, position, UNIT))


class _Plan:
    """A validated request shape, ready to run: its steps and the grant's resource mapping."""

    __slots__ = ("resources", "steps")

    def __init__(self, resources: Mapping[str, float], steps: list[_Step]) -> None:
        self.resources = MappingProxyType(dict(resources))
        self.steps = tuple(steps)


class Allocator:
    """Grants devices and resources of one node to requests; thread-safe.

    Built from a :class:`~accelkit.Node` (detected, or rebuilt from JSON with no host). Every
    family's quantity rule, placement rule and partition rule comes from the policy the node
    carries (``Node.policies``, the JSON's ``families``), so an allocator over JSON loads no
    plugin; ``registry`` (None: the default one) serves only families whose policy is missing
    or whose rules are plugin code.
    """

    __slots__ = (
        "_capacities",
        "_families",
        "_family_sizes",
        "_inventory",
        "_live",
        "_lock",
        "_plans",
        "_pools",
        "_tokens",
        "_where",
        "node",
    )

    def __init__(self, node: Node, *, registry: Optional[Registry] = None) -> None:
        self.node = node
        self._inventory = Inventory(node, registry=registry)
        self._pools: dict[str, list[_Pool]] = {
            resource: [_Pool(family) for family in families]
            for resource, families in self._inventory.families.items()
        }
        self._where: dict[tuple[str, str], tuple[_Pool, int]] = {
            (device.family, device.id): (pool, position)
            for pools in self._pools.values()
            for pool in pools
            for position, device in enumerate(pool.devices)
        }
        """(family, device id) -> its pool and position: how restore finds a grant's devices."""
        self._capacities = {
            name: _Capacity(name, total) for name, total in self._inventory.capacity.items()
        }
        self._families = tuple(dict.fromkeys(d.family for d in node.devices))
        offered: dict[str, int] = {}
        for families in self._inventory.families.values():
            for family in families:
                name = family.policy.name
                offered[name] = offered.get(name, 0) + len(family.devices)
        # What a grant of every offered device covers: the whole host only when the host has
        # no more (exclusions, a visibility variable or an override may have taken some away).
        sizes = {name: node.detected.get(name) or count for name, count in offered.items()}
        self._family_sizes = MappingProxyType(sizes)
        """Devices per family on the host, as a grant tells a whole TPU host from a block."""
        self._live: dict[int, tuple[Grant, _Held]] = {}
        self._plans: dict[Any, _Plan] = {}
        self._lock = threading.Lock()
        self._tokens = itertools.count(int.from_bytes(os.urandom(4), "big") << 20)
        """Grant tokens: a random start, so grants of another allocator are told apart, and below
        2**53 so JSON readers in any language keep them exact. (``os.urandom``, not ``secrets``,
        which loads OpenSSL's hashes: milliseconds at every ``accelkit run``.)"""

    # -- acquire -----------------------------------------------------------------------------
    def acquire(
        self, request: Mapping[str, object], *, accelerator_type: Optional[str] = None
    ) -> Optional[Grant]:
        """A grant for ``request``, None if it does not fit now, or raise.

        Raises :class:`~accelkit.InvalidRequest` for a malformed request and
        :class:`~accelkit.Unsatisfiable` for one this node could never serve (see
        :func:`~accelkit.validate_request`). All of the request is granted, or none of it.
        """
        try:
            # Types are part of the key: True == 1 (and hashes alike), yet a bool is refused.
            key: Any = (accelerator_type, *request.items(), *map(type, request.values()))
            plan = self._plans.get(key)
        except (AttributeError, TypeError):  # not a mapping, or an unhashable quantity
            key, plan = None, None
        if plan is None:
            plan = self._compile(request, accelerator_type, key)
        steps = plan.steps
        devices: list[tuple[Device, float]] = []
        held: list[Any] = []
        with self._lock:
            # Find room for every resource first, then take it: all of the request, or none.
            found = [step.find() for step in steps]
            if None in found:
                return None
            for step, where in zip(steps, found):
                step.take(where, devices, held)
            token = next(self._tokens)
            while token in self._live:  # a restored grant of another allocator took it
                token = next(self._tokens)
            grant = Grant._new(
                token, plan.resources, tuple(devices), self._families, self._family_sizes
            )
            self._live[token] = (grant, tuple(held))
        return grant

    def _compile(
        self, request: Mapping[str, object], accelerator_type: Optional[str], key: Any
    ) -> _Plan:
        """Validate a request shape against the node and turn it into steps (cached by shape)."""
        units, label = request_units(request, accelerator_type, self._inventory)
        steps: list[_Step] = []
        for name, amount in units.items():
            capacity = self._capacities.get(name)
            if capacity is not None:
                steps.append(_CapacityStep(capacity, amount))
                continue
            constraint = self._inventory.constraint(name, label)
            serving = {id(f) for f in self._inventory.candidates(name, amount, constraint)}
            pools = [p for p in self._pools[name] if id(p.family) in serving]
            if amount % UNIT:
                steps.append(
                    _FractionStep([(p, _positions(p, amount, constraint)) for p in pools], amount)
                )
            else:
                steps.append(
                    _WholeStep([(p, p.family.allowed(amount, constraint)) for p in pools], amount)
                )
        plan = _Plan({name: from_units(amount) for name, amount in units.items()}, steps)
        if key is not None:
            if len(self._plans) >= _PLAN_CACHE_SIZE:
                self._plans.clear()
            self._plans[key] = plan
        return plan

    # -- release and restore -----------------------------------------------------------------
    def release(self, grant: Grant) -> None:
        """Give back everything ``grant`` holds.

        A grant released already, or not from this allocator, raises
        :class:`~accelkit.InvalidRequest` and changes nothing.
        """
        with self._lock:
            record = self._live.get(getattr(grant, "token", None))  # type: ignore[arg-type]
            if record is None or (record[0] is not grant and record[0] != grant):
                raise InvalidRequest(
                    f"{grant!r} is not held from this allocator: it was released already, "
                    "or it came from another allocator"
                )
            del self._live[grant.token]
            for holder, position, units in record[1]:
                holder.give(position, units)

    def restore(self, grants: Iterable[Union[Grant, Mapping[str, Any]]]) -> None:
        """Take again what ``grants`` hold, e.g. after a scheduler restart (all or nothing).

        Each grant (or its ``to_dict()``) must name this node's devices (the same ones, told by
        UUID, else PCI bus id, where both sides know it) and resources, and fit beside what is
        held already; the restored grants can then be released as usual.
        """
        try:
            restored = [g if isinstance(g, Grant) else Grant.from_dict(g) for g in grants]
        except InvalidRequest:
            raise
        except ValueError as error:
            raise InvalidRequest(f"cannot restore: {error}") from None
        with self._lock:
            demand: dict[tuple[_Holder, int], int] = {}
            records: list[tuple[Grant, _Held]] = []
            tokens: set[int] = set()
            for grant in restored:
                if grant.token in self._live or grant.token in tokens:
                    raise InvalidRequest(f"{grant!r} is held already; cannot restore it twice")
                tokens.add(grant.token)
                held = self._holdings(grant)
                for holder, position, units in held:
                    demand[(holder, position)] = demand.get((holder, position), 0) + units
                records.append((grant, held))
            for (holder, position), units in demand.items():
                free = holder.free[position] if isinstance(holder, _Pool) else holder.free
                if units > free:
                    what = (
                        f"device {holder.devices[position].family}:{holder.devices[position].id}"
                        if isinstance(holder, _Pool)
                        else holder.name
                    )
                    raise InvalidRequest(
                        f"cannot restore: the grants hold {from_units(units):g} of {what}, "
                        f"but only {from_units(free):g} is free"
                    )
            for grant, held in records:
                for holder, position, units in held:
                    if isinstance(holder, _Pool):
                        holder.set(position, holder.free[position] - units)
                    else:
                        holder.free -= units
                self._live[grant.token] = (grant, held)

    def _holdings(self, grant: Grant) -> _Held:
        """What ``grant`` holds on this node, checked against its own resources."""
        held: list[tuple[_Holder, int, int]] = []
        on_devices: dict[str, int] = {}
        for device, share in grant.devices:
            where = self._where.get((device.family, device.id))
            if where is None:
                raise InvalidRequest(
                    f"{grant!r} holds {device.family}:{device.id}, which this node does not have"
                )
            _check_same_device(grant, device, where[0].devices[where[1]])
            units = to_units(share, what=f"share of {device.family}:{device.id}")
            if not 0 < units <= UNIT:
                raise InvalidRequest(f"{grant!r} holds a share {share!r}; shares are in (0, 1]")
            held.append((where[0], where[1], units))
            resource = where[0].devices[where[1]].resource_name
            on_devices[resource] = on_devices.get(resource, 0) + units
        for name, amount in grant.resources.items():
            units = to_units(amount, what=f"{name} held by grant {grant.token}")
            capacity = self._capacities.get(name)
            if capacity is not None:
                held.append((capacity, 0, units))
            elif name not in self._pools:
                raise InvalidRequest(f"{grant!r} holds {name!r}, which this node does not have")
            elif on_devices.pop(name, 0) != units:
                raise InvalidRequest(f"{grant!r}: its devices do not add up to {name} {amount:g}")
        if on_devices:
            raise InvalidRequest(
                f"{grant!r} holds devices of {sorted(on_devices)} it does not list"
            )
        return tuple(held)

    # -- state -------------------------------------------------------------------------------
    def available(self) -> dict[str, float]:
        """Free capacity now, by resource: the keys of ``node.resources`` (and device resources
        a hand-built node left out)."""
        with self._lock:
            free = {name: c.free for name, c in self._capacities.items()}
            free.update(
                (name, sum(p.free_units() for p in pools)) for name, pools in self._pools.items()
            )
        return {name: from_units(free[name]) for name in self._inventory.resources}

    def grants(self) -> list[Grant]:
        """The grants held now (persist ``[g.to_dict() for g in ...]`` to :meth:`restore` later)."""
        with self._lock:
            return [grant for grant, _held in self._live.values()]

    def __repr__(self) -> str:
        return f"<Allocator {len(self._live)} grant(s) held, available {self.available()}>"


def _check_same_device(grant: Grant, held: Device, present: Device) -> None:
    """Refuse a restored grant whose device is another one than this node's of that id: GPUs
    swapped or renumbered since it was taken (a reboot, a replaced card) would give its
    device to two jobs. Told by UUID, else by PCI bus id, where both sides know it."""
    for fact in ("uuid", "pci_bus_id"):
        recorded, now = getattr(held, fact), getattr(present, fact)
        if recorded is not None and now is not None:
            if recorded != now:
                raise InvalidRequest(
                    f"{grant!r} holds {held.family}:{held.id} with {fact} {recorded}, but this "
                    f"node's {held.family}:{held.id} has {now}: another device (the node changed "
                    "since the grant was taken); restore grants of this node only"
                )
            return


def _positions(pool: _Pool, units: int, label: Optional[str]) -> int:
    """The position mask of the devices in ``pool`` that may take ``units`` with ``label``."""
    keys = pool.family.allowed(units, label)
    return sum(1 << p for p, bit in enumerate(pool.key_bits) if keys & bit)
