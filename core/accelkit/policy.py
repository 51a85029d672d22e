"""A family's scheduling policy as data, and the placement rules it names.

A manager declares its rules (``fractional``, and ``scheduling``: allowed quantities, placement,
partitions per grant, device file); :class:`FamilyPolicy` is those declarations taken off the
manager (by the registry), so they travel in a node's JSON (``Node.to_dict()["families"]``) and an
``Allocator`` over that JSON validates and places without importing any plugin. Rules are data
only: a placement is one of the named rules below, and quantities follow the declarations.

Placement rules: which free devices may serve a request for ``count`` whole devices.

A rule works on integer keys held in a bitmask (bit ``k`` set: device with key ``k`` is fully
free), so the allocator's hot path is a few integer operations, whatever the node's size. The key
of a device is its position in the family's order, or its numeric id for rules that care about
the id itself (TPU chips, Gaudi modules, Neuron cores) when every id is below
:data:`~accelkit.device.MAX_DEVICES`: an id of ``99999999999`` must not become a bit position.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Optional

from accelkit._visibility import is_index
from accelkit.device import MAX_DEVICES, Device
from accelkit.errors import InvalidData, InvalidRequest
from accelkit.quantities import UNIT, shown_quantity, to_units

__all__ = [
    "ALIGNED_BLOCKS",
    "CONTIGUOUS",
    "LOWEST_FREE",
    "PLACEMENTS",
    "FamilyPolicy",
    "Placement",
    "allowed_text",
    "check_quantity",
    "file_number_field",
]

_FILE_NUMBER_FIELDS = {"{id}": "id", "{minor}": "minor"}
"""What may number a family's device files (``Scheduling.device_file``), by placeholder: the
device's id (``"/dev/rbln{id}"``) or its ``minor`` (``"/dev/nvidia{minor}"``, where files do not
follow the ids)."""


def file_number_field(template: object) -> Optional[str]:
    """The ``Device`` field that numbers the files of ``template`` (``"minor"`` for
    ``"/dev/nvidia{minor}"``); None unless it is a path with exactly one placeholder."""
    if not isinstance(template, str):
        return None
    found = [field for placeholder, field in _FILE_NUMBER_FIELDS.items() if placeholder in template]
    return found[0] if len(found) == 1 else None


def _small_index(token: str) -> bool:
    """A decimal id below MAX_DEVICES (checked on the text: ``int`` of 5000 digits raises)."""
    return (
        is_index(token)
        and len(token.lstrip("0")) <= len(str(MAX_DEVICES))
        and (int(token) < MAX_DEVICES)
    )


class Placement:
    """Lowest-numbered free devices first (the default, as Ray and CUDA users expect)."""

    name = "lowest-free"
    keyed_by_id = False
    """True when keys are the devices' numeric ids rather than their positions."""

    def keys(self, devices: Sequence[Device]) -> list[int]:
        """One key per device, in the given order."""
        if self.keyed_by_id and all(_small_index(d.id) for d in devices):
            return [int(d.id) for d in devices]
        return list(range(len(devices)))

    def choose(self, free: int, count: int) -> Optional[int]:
        """The mask of keys to take for ``count`` devices out of ``free``, or None."""
        if count <= 0:
            return 0 if count == 0 else None
        if bin(free).count("1") < count:
            return None
        chosen = 0
        for _ in range(count):
            low = free & -free
            chosen |= low
            free ^= low
        return chosen

    def describe(self) -> str:
        """A phrase for error messages ("aligned blocks of 1, 2, 4 or 8")."""
        return "the lowest-numbered free devices"

    def __repr__(self) -> str:
        return f"<Placement {self.name}>"


class AlignedBlocks(Placement):
    """Blocks of ``count`` consecutive ids starting at a multiple of ``count`` (TPU, Gaudi)."""

    name = "aligned-blocks"
    keyed_by_id = True

    def choose(self, free: int, count: int) -> Optional[int]:
        if count <= 0:
            return 0 if count == 0 else None
        blocks = free.bit_length() // count + 1
        # Bits 0, count, 2 * count, ... (a geometric series: (2**(count*n) - 1) / (2**count - 1)).
        aligned = ((1 << (count * blocks)) - 1) // ((1 << count) - 1)
        return _lowest_run(free, count, aligned)

    def describe(self) -> str:
        return "an aligned block ({0,1}, {2,3}, {0-3}, {4-7}, ...)"


class Contiguous(Placement):
    """The lowest run of ``count`` consecutive ids (Neuron cores are granted as a range)."""

    name = "contiguous"
    keyed_by_id = True

    def choose(self, free: int, count: int) -> Optional[int]:
        if count <= 0:
            return 0 if count == 0 else None
        return _lowest_run(free, count, -1)

    def describe(self) -> str:
        return "a contiguous range of ids"


def _lowest_run(free: int, count: int, starts: int) -> Optional[int]:
    """The mask of the lowest run of ``count`` free keys that begins at a key in ``starts``.

    After the loop, bit ``k`` of ``runs`` is set when keys ``k .. k + count - 1`` are all free:
    ``count - 1`` shifts and ands, however many devices there are and wherever the run is.
    """
    runs = free & starts
    for shift in range(1, count):
        runs &= free >> shift
    if not runs:
        return None
    return ((1 << count) - 1) * (runs & -runs)


LOWEST_FREE = Placement()
ALIGNED_BLOCKS = AlignedBlocks()
CONTIGUOUS = Contiguous()

PLACEMENTS: dict[str, Placement] = {
    rule.name: rule for rule in (LOWEST_FREE, ALIGNED_BLOCKS, CONTIGUOUS)
}
"""The rules a node's JSON may name: an allocator over JSON places with them and no plugin."""


def check_quantity(
    quantity: object,
    *,
    family: str,
    resource: str,
    fractional: bool,
    allowed: Optional[tuple[int, ...]],
) -> int:
    """Integer units (1e-4) for ``quantity`` devices under a family's declared rule.

    Raises :class:`~accelkit.InvalidRequest`: a fraction of a family granted whole, or a whole
    count its ``allowed`` quantities leave out.
    """
    what = f"{resource} quantity"
    units = to_units(quantity, what=what)
    if units % UNIT:
        if not fractional:
            raise InvalidRequest(
                f"{what} {shown_quantity(quantity)} is fractional, but {family} devices are "
                f"granted whole: {allowed_text(fractional, allowed)}"
            )
        return units
    if allowed is not None and units and units // UNIT not in allowed:
        raise InvalidRequest(
            f"{what} {shown_quantity(quantity)} is not allowed: {allowed_text(fractional, allowed)}"
        )
    return units


def allowed_text(fractional: bool, allowed: Optional[tuple[int, ...]]) -> str:
    """``"ask for a fraction below 1, or 1, 2, 4, 8"``: the rule, for error messages."""
    whole = ", ".join(str(n) for n in allowed) if allowed is not None else "any whole number"
    fraction = "a fraction below 1, or " if fractional else ""
    return f"ask for {fraction}{whole}"


@dataclass(frozen=True)
class FamilyPolicy:
    """One family's scheduling rules, as declared by its manager; JSON-ready."""

    name: str
    resource_name: str
    fractional: bool = True
    allowed_quantities: Optional[tuple[int, ...]] = None
    placement: Placement = PLACEMENTS["lowest-free"]
    partitions_per_grant: Optional[int] = 1
    visible_devices_env_var: Optional[str] = None
    device_file: Optional[str] = None
    """A device's character file, ``{id}`` standing for its id or ``{minor}`` for its minor
    number (``Scheduling.device_file``)."""

    def validate_quantity(self, quantity: object) -> int:
        """Integer units for ``quantity`` by the declared rule (:func:`check_quantity`)."""
        return check_quantity(
            quantity,
            family=self.name,
            resource=self.resource_name,
            fractional=self.fractional,
            allowed=self.allowed_quantities,
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the placement rule by name."""
        return {
            "resource_name": self.resource_name,
            "fractional": self.fractional,
            "allowed_quantities": (
                None if self.allowed_quantities is None else list(self.allowed_quantities)
            ),
            "placement": self.placement.name,
            "partitions_per_grant": self.partitions_per_grant,
            "visible_devices_env_var": self.visible_devices_env_var,
            "device_file": self.device_file,
        }

    @classmethod
    def from_dict(cls, name: str, data: Mapping[str, Any]) -> FamilyPolicy:
        """Rebuild from :meth:`to_dict`; ``InvalidData`` naming the family for anything else."""
        from accelkit._json import check_keys

        where = f"node family {name!r}"
        check_keys(data, _POLICY_KEYS, where, required=("resource_name",))
        resource = data["resource_name"]
        fractional = data.get("fractional", True)
        allowed = data.get("allowed_quantities")
        placement = data.get("placement", "lowest-free")
        per_grant = data.get("partitions_per_grant", 1)
        variable = data.get("visible_devices_env_var")
        device_file = data.get("device_file")
        if not isinstance(resource, str) or not resource:
            raise InvalidData(f"{where}: resource_name must be a name like 'GPU', got {resource!r}")
        if not isinstance(fractional, bool):
            raise InvalidData(f"{where}: fractional must be true or false, got {fractional!r}")
        if allowed is not None and (
            not isinstance(allowed, list)
            or not allowed
            or any(isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in allowed)
        ):
            raise InvalidData(
                f"{where}: allowed_quantities must be null or a list of positive whole "
                f"numbers, got {allowed!r}"
            )
        if not isinstance(placement, str) or placement not in PLACEMENTS:
            raise InvalidData(
                f"{where}: placement {placement!r} is not one of {sorted(PLACEMENTS)}"
            )
        if per_grant is not None and (
            isinstance(per_grant, bool) or not isinstance(per_grant, int) or per_grant < 1
        ):
            raise InvalidData(
                f"{where}: partitions_per_grant must be null or a positive whole number, got "
                f"{per_grant!r}"
            )
        if variable is not None and not isinstance(variable, str):
            raise InvalidData(f"{where}: visible_devices_env_var must be a string or null")
        if device_file is not None and file_number_field(device_file) is None:
            raise InvalidData(
                f"{where}: device_file must be null or a path with {{id}} or {{minor}} in it, "
                f"got {device_file!r}"
            )
        if data.get("plugin_rules", []) != []:
            raise InvalidData(
                f"{where}: plugin_rules {data['plugin_rules']!r}: rules in plugin code are gone "
                "since contract version 2 (quantity and placement rules are data only)"
            )
        return cls(
            name=name,
            resource_name=resource,
            fractional=fractional,
            allowed_quantities=None if allowed is None else tuple(allowed),
            placement=PLACEMENTS[placement],
            partitions_per_grant=per_grant,
            visible_devices_env_var=variable,
            device_file=device_file,
        )


_POLICY_KEYS = (
    "resource_name",
    "fractional",
    "allowed_quantities",
    "placement",
    "partitions_per_grant",
    "visible_devices_env_var",
    "device_file",
    "plugin_rules",  # written empty by accelkit before contract version 2; read, never written
)
