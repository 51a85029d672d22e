"""Resource requests: what a request may ask for, and whether a node could ever serve it.

A request maps resource names to quantities (``{"GPU": 0.5}``). Validation turns it into integer
units (1e-4, see :mod:`accelkit.quantities`) by the fixed-point rule, then applies the rule of each
family that owns the resource (GPUs take fractions, Neuron whole cores, TPU 1, 2, 4 or 8). Given a
node, it also proves the request could fit there at all, so a scheduler can tell "wait" from
"never": the allocator answers the first, :class:`~accelkit.errors.Unsatisfiable` the second.

An accelerator type is asked for as Ray does: 0.001 of the node resource
``accelerator_type:<label>``, which also restricts the request's devices to that label.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Optional

from accelkit._visibility import canonical_id
from accelkit.device import Device
from accelkit.errors import ConfigurationError, InvalidRequest, Unsatisfiable
from accelkit.manager import ACCELERATOR_TYPE_PREFIX
from accelkit.quantities import UNIT, from_units, to_units

if TYPE_CHECKING:
    from accelkit.node._record import Node
    from accelkit.policy import FamilyPolicy
    from accelkit.registry import Registry

__all__ = [
    "TYPE_KEY",
    "TYPE_REQUEST_UNITS",
    "FamilyDevices",
    "Inventory",
    "request_key",
    "validate_request",
]

TYPE_REQUEST_UNITS = 10
"""What a type request takes of ``accelerator_type:<label>``: 0.001, as Ray asks."""


TYPE_KEY = "accelerator_type"
"""``{"GPU": 1, "accelerator_type": "H100"}`` is the keyword form ``accelerator_type="H100"``
written into the request (as the CLI's ``-r accelerator_type=H100``)."""


def request_key(request: Mapping[str, object]) -> tuple[tuple[str, str], ...]:
    """The request as a hashable key, the same for the same request however its entries are
    ordered: what a caller that asks the same request many times (a pool's calls) remembers
    an earlier answer by. Quantities go by their ``repr``: two spellings of one amount (``1``
    and ``1.0``) are two keys, which costs a second check, never a wrong answer."""
    return tuple(sorted((name, repr(quantity)) for name, quantity in request.items()))


def validate_request(
    request: Mapping[str, object],
    node: Optional[Node] = None,
    *,
    accelerator_type: Optional[str] = None,
    registry: Optional[Registry] = None,
) -> dict[str, int]:
    """The request in integer units (1e-4) by resource, or raise :class:`InvalidRequest`.

    Zero quantities are dropped (asking for no GPU is asking for nothing). ``accelerator_type``
    (or the entry ``"accelerator_type": "<label>"``) adds 0.001 of ``accelerator_type:<label>``,
    like writing that key yourself, and lands the request's devices on that type only. Without
    a node, a resource no family owns is a custom resource and only the fixed-point rule applies.
    With a node, a resource the node lacks, a type it lacks, or more than it could ever hold
    raises :class:`Unsatisfiable` (an ``InvalidRequest``) naming what the node has. ``registry``
    supplies the families' rules (None: the default one), where the node does not carry them.
    """
    inventory = None if node is None else Inventory(node, registry=registry)
    return request_units(request, accelerator_type, inventory, registry)[0]


def request_units(
    request: Mapping[str, object],
    accelerator_type: Optional[str],
    inventory: Optional[Inventory],
    registry: Optional[Registry] = None,
) -> tuple[dict[str, int], Optional[str]]:
    """:func:`validate_request`'s work: the units and the type label that constrains devices."""
    if not isinstance(request, Mapping):
        raise InvalidRequest(
            f"a request maps resource names to quantities, like {{'GPU': 0.5}}; got {request!r}"
        )
    units: dict[str, int] = {}
    label: Optional[str] = None
    for name, value in request.items():
        if name == TYPE_KEY:
            accelerator_type = _type_entry(value, accelerator_type)
            continue
        _check_name(name)
        amount = _quantity(name, value, inventory, registry)
        if not amount:
            continue
        if name.startswith(ACCELERATOR_TYPE_PREFIX):
            label = _one_label(label, name[len(ACCELERATOR_TYPE_PREFIX) :])
        units[name] = amount
    if accelerator_type is not None:
        if not isinstance(accelerator_type, str):
            raise InvalidRequest(
                f"accelerator_type must be a label like 'H100', got {accelerator_type!r}"
            )
        _check_name(ACCELERATOR_TYPE_PREFIX + accelerator_type)
        label = _one_label(label, accelerator_type)
        units.setdefault(ACCELERATOR_TYPE_PREFIX + accelerator_type, TYPE_REQUEST_UNITS)
    if inventory is not None:
        inventory.check(units, label)
    return units, label


def _type_entry(value: object, keyword: Optional[str]) -> str:
    """``{"accelerator_type": "H100"}``: the keyword form written into the request."""
    if not isinstance(value, str):
        raise InvalidRequest(
            f"{TYPE_KEY} takes a label, got {value!r}: write {{'{TYPE_KEY}': 'H100'}}, "
            f"accelerator_type='H100', or {{'{ACCELERATOR_TYPE_PREFIX}H100': 0.001}}"
        )
    if keyword is not None and keyword != value:
        raise InvalidRequest(
            f"a request may name one accelerator type, got {keyword!r} and {value!r}"
        )
    return value


def _check_name(name: object) -> None:
    if (
        not isinstance(name, str)
        or not name
        or any(ch.isspace() for ch in name)
        or name == ACCELERATOR_TYPE_PREFIX
    ):
        raise InvalidRequest(
            f"resource name {name!r} is not a name like 'GPU', 'neuron_cores' or "
            "'accelerator_type:H100'"
        )


def _one_label(current: Optional[str], label: str) -> str:
    if current is not None and current != label:
        raise InvalidRequest(
            f"a request may name one accelerator type, got {current!r} and {label!r}"
        )
    return label


def _quantity(
    name: str, value: object, inventory: Optional[Inventory], registry: Optional[Registry]
) -> int:
    """Units of ``value`` by the fixed-point rule and the rule of the families owning ``name``."""
    units = to_units(value, what=f"{name} quantity")
    if not units:
        return 0
    if inventory is not None:
        families = inventory.families.get(name)
        if families is None:
            if name.startswith(ACCELERATOR_TYPE_PREFIX) and name not in inventory.capacity:
                raise inventory.missing_type(name[len(ACCELERATOR_TYPE_PREFIX) :])
            if name not in inventory.capacity:
                raise Unsatisfiable(
                    f"this node has no resource {name!r}; it has {sorted(inventory.resources)}"
                )
            return units
        owners: Sequence[FamilyPolicy] = [f.policy for f in families]
    else:
        from accelkit.registry import family_policy
        from accelkit.registry import resolve as resolve_registry

        managers = resolve_registry(registry).managers()
        owners = [family_policy(m) for m in managers if m.resource_name == name]
    first_error: Optional[InvalidRequest] = None
    for policy in owners:
        try:
            return policy.validate_quantity(value)
        except InvalidRequest as error:
            first_error = first_error or error
    if first_error is not None:
        raise first_error
    return units


class FamilyDevices:
    """One family's allocatable devices of one resource, in index order, keyed for placement.

    ``keys`` are the family placement rule's keys (:meth:`Placement.keys`); masks over them say
    which devices may serve a request: all, one type label's, or those a partition rule allows.
    """

    __slots__ = ("all_keys", "devices", "keys", "label_keys", "policy", "shared_keys", "whole_keys")

    def __init__(self, policy: FamilyPolicy, devices: Sequence[Device]) -> None:
        self.policy = policy
        self.devices = tuple(devices)
        counts = Counter(canonical_id(d.id) for d in self.devices)
        twice = sorted(device_id for device_id, count in counts.items() if count > 1)
        if twice:
            raise ConfigurationError(
                f"the node lists {policy.name} device id(s) {', '.join(map(repr, twice))} twice "
                "(or as two spellings of one index): two grants would get one device (each "
                "device appears once)"
            )
        self.keys = tuple(policy.placement.keys(self.devices))
        if len(set(self.keys)) != len(self.keys):
            raise ConfigurationError(
                f"{policy.name} device ids {[d.id for d in self.devices]} give duplicate "
                f"placement keys {list(self.keys)}"
            )
        self.all_keys = 0
        self.whole_keys = 0
        """Keys of unpartitioned devices: the only ones a fraction, or a request for more
        devices than the family's ``partitions_per_grant``, may use."""
        self.shared_keys = 0
        """Keys of the unpartitioned devices that are not ``exclusive``: the only ones a fraction
        may use (an exclusive device admits one process, so it is granted whole)."""
        self.label_keys: dict[str, int] = {}
        for device, key in zip(self.devices, self.keys):
            bit = 1 << key
            self.all_keys |= bit
            if device.parent is None or policy.partitions_per_grant is None:
                self.whole_keys |= bit
                if not device.exclusive:
                    self.shared_keys |= bit
            if device.type_label:
                self.label_keys[device.type_label] = self.label_keys.get(device.type_label, 0) | bit

    def allowed(self, units: int, label: Optional[str]) -> int:
        """The keys that may serve ``units`` of this resource with type ``label``."""
        keys = self.all_keys if label is None else self.label_keys.get(label, 0)
        limit = self.policy.partitions_per_grant
        if units % UNIT:
            keys &= self.shared_keys
        elif limit is not None and units // UNIT > limit:
            keys &= self.whole_keys
        return keys

    def serves(self, units: int, label: Optional[str]) -> bool:
        """Whether an idle node could serve ``units`` here: the family's rule and placement."""
        try:
            self.policy.validate_quantity(from_units(units))
        except InvalidRequest:
            return False
        keys = self.allowed(units, label)
        if units % UNIT:
            return keys != 0
        return self.policy.placement.choose(keys, units // UNIT) is not None

    def describe(self) -> str:
        """``"2 nvidia devices (0, 1)"`` for error messages."""
        ids = ", ".join(d.id for d in self.devices)
        return f"{len(self.devices)} {self.policy.name} device(s) ({ids})"


class Inventory:
    """What a node could ever offer: device resources by family, and plain capacities.

    Built once per node by the allocator (and per call by :func:`validate_request`). A device
    that is another device's ``parent`` is not allocatable: its partitions are. Each family's
    rules come from the node's declared policies, so a node rebuilt from JSON needs no plugin;
    only a family without a policy there is looked up in ``registry`` (None: the default one).
    """

    __slots__ = ("capacity", "families", "labels", "resources")

    def __init__(self, node: Node, registry: Optional[Registry] = None) -> None:
        rules = _Rules(node, registry)
        grouped: dict[str, dict[str, list[Device]]] = {}
        for device in _allocatable(node.devices, rules):
            grouped.setdefault(device.resource_name, {}).setdefault(device.family, []).append(
                device
            )
        self.families: dict[str, list[FamilyDevices]] = {
            resource: [
                FamilyDevices(rules.of(family), _in_index_order(devices))
                for family, devices in by_family.items()
            ]
            for resource, by_family in grouped.items()
        }
        self.capacity: dict[str, int] = {}
        for name, value in node.resources.items():
            counted = self.families.get(name)
            if counted is None:
                self.capacity[name] = _capacity_units(name, value)
                continue
            devices = sum(len(f.devices) for f in counted)
            if value != devices:
                raise ConfigurationError(
                    f"node resource {name}={value} disagrees with its {devices} allocatable "
                    f"device(s): {', '.join(f.describe() for f in counted)}"
                )
        self.resources = [*node.resources, *(r for r in self.families if r not in node.resources)]
        self.labels = sorted(
            name[len(ACCELERATOR_TYPE_PREFIX) :]
            for name in self.capacity
            if name.startswith(ACCELERATOR_TYPE_PREFIX)
        )

    def constraint(self, name: str, label: Optional[str]) -> Optional[str]:
        """The type label that restricts device resource ``name``: ``label`` when some device of
        ``name`` carries it (``{"GPU": 1, "TPU": 4}`` of type ``H100`` restricts only GPUs)."""
        if label is None or not any(label in f.label_keys for f in self.families[name]):
            return None
        return label

    def candidates(self, name: str, units: int, label: Optional[str]) -> list[FamilyDevices]:
        """The families that could serve ``units`` of device resource ``name`` on an idle node,
        ``label`` being its :meth:`constraint`."""
        return [f for f in self.families[name] if f.serves(units, label)]

    def check(self, units: Mapping[str, int], label: Optional[str]) -> None:
        """Raise :class:`Unsatisfiable` unless an idle node could serve the whole request."""
        if label is not None and ACCELERATOR_TYPE_PREFIX + label not in self.capacity:
            raise self.missing_type(label)
        wanted = [name for name in units if name in self.families]
        if label is not None and wanted and not any(self.constraint(n, label) for n in wanted):
            raise Unsatisfiable(self._why_not(wanted[0], units[wanted[0]], label))
        for name, amount in units.items():
            if name in self.families:
                constraint = self.constraint(name, label)
                if not self.candidates(name, amount, constraint):
                    raise Unsatisfiable(self._why_not(name, amount, constraint))
            elif amount > self.capacity[name]:
                raise Unsatisfiable(
                    f"{name} {from_units(amount):g} is more than this node's "
                    f"{from_units(self.capacity[name]):g}"
                )

    def missing_type(self, label: str) -> Unsatisfiable:
        """The error for a type this node does not have, or has devices of but no resource for
        (a hand-built node: detection adds ``accelerator_type:<label>`` for every type)."""
        resource = ACCELERATOR_TYPE_PREFIX + label
        if any(label in f.label_keys for families in self.families.values() for f in families):
            return Unsatisfiable(
                f"this node has {label!r} devices but no resource {resource!r}, which a request "
                f"for the type takes; a node built by hand gives it ({resource!r}: 1), as "
                "detection does"
            )
        return Unsatisfiable(
            f"this node has no {label!r} accelerators; its types are {self.labels or 'none'}"
        )

    def _why_not(self, name: str, units: int, label: Optional[str]) -> str:
        """Why no family of ``name`` could ever serve ``units``: the closest reason, with facts."""
        families = self.families[name]
        asked = f"{name} {from_units(units):g}" + (f" of type {label!r}" if label else "")
        if label is not None and not any(label in f.label_keys for f in families):
            types = sorted({t for f in families for t in f.label_keys})
            return f"{asked}: no {name} device on this node has that type (types: {types})"
        reasons = []
        for family in families:
            allowed = family.allowed(units, label)
            usable = [d.id for d, k in zip(family.devices, family.keys) if allowed >> k & 1]
            limit = family.policy.partitions_per_grant
            partitions = any(d.parent is not None for d in family.devices) and limit is not None
            rule = (
                f" (partitions are granted whole, at most {limit} per grant)" if partitions else ""
            )
            exclusive = [d.id for d in family.devices if d.exclusive]
            if exclusive:
                rule += f" (exclusive devices are granted whole: {', '.join(exclusive)})"
            if units % UNIT:
                reasons.append(f"no {family.policy.name} device may be shared{rule}")
            elif len(usable) < units // UNIT:
                reasons.append(
                    f"it needs {units // UNIT} devices and {family.policy.name} has "
                    f"{len(usable)} that may serve it ({', '.join(usable) or 'none'}){rule}"
                )
            else:
                reasons.append(
                    f"{family.policy.name} grants {family.policy.placement.describe()}, which "
                    f"its devices {', '.join(usable)} never form"
                )
        return f"{asked} can never fit on this node: " + "; ".join(reasons)


def _allocatable(devices: Sequence[Device], rules: _Rules) -> list[Device]:
    """Devices with family and resource filled in, parents of partitions and devices not
    ``offered`` left out (detection never puts the latter in a node; one built by hand may)."""
    parents = {(d.family, d.parent) for d in devices if d.parent is not None}
    usable: list[Device] = []
    for device in devices:
        if not device.family:
            raise ConfigurationError(
                f"device {device.id!r} has no family; build nodes with accelkit.detect_node() "
                "or give each Device its family"
            )
        if (device.family, device.id) in parents or not device.offered:
            continue
        if not device.resource_name:
            device = device.replace(resource_name=rules.resource_name(device.family))
        usable.append(device)
    return usable


def _in_index_order(devices: list[Device]) -> list[Device]:
    """By index, devices without one keeping their place after those with one."""
    order = sorted(
        range(len(devices)),
        key=lambda i: (devices[i].index is None, devices[i].index or 0, i),
    )
    return [devices[i] for i in order]


class _Rules:
    """Each family's policy for one node: the one the node declares, else its plugin's."""

    def __init__(self, node: Node, registry: Optional[Registry]) -> None:
        self.policies = dict(node.policies)
        self.registry = registry

    def of(self, family: str) -> FamilyPolicy:
        policy = self.policies.get(family)
        if policy is None:
            policy = self.policies[family] = self._from_plugin(family)
        return policy

    def resource_name(self, family: str) -> str:
        return self.of(family).resource_name

    def _from_plugin(self, family: str) -> FamilyPolicy:
        from accelkit.registry import family_policy
        from accelkit.registry import resolve as resolve_registry

        try:
            manager = resolve_registry(self.registry).get_manager(family)
        except KeyError as error:
            raise ConfigurationError(
                f"the node has {family} devices and does not carry the {family} policy "
                f"(families), but no {family} plugin is loaded: {error.args[0]}"
            ) from None
        return family_policy(manager)


def _capacity_units(name: str, value: float) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigurationError(f"node resource {name}={value!r} is not a finite number")
    if value < 0:
        raise ConfigurationError(f"node resource {name}={value!r} is negative")
    return round(value * UNIT)
