"""A family's declared scheduling policy, as data: what a scheduler needs to allocate its devices.

A manager declares its rules as attributes (``fractional``, ``allowed_quantities``,
``placement``, ``partitions_per_grant``); :class:`FamilyPolicy` is those declarations taken off
the manager, so they travel in a node's JSON (``Node.to_dict()["families"]``) and an
``Allocator`` over that JSON validates and places without importing any plugin. A manager that
overrides ``validate_quantity`` or uses a placement rule of its own has rules no data can carry:
``plugin_rules`` names them, and the allocator loads that family's plugin to apply them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Optional

from .errors import InvalidData, InvalidRequest
from .placement import PLACEMENTS, Placement
from .quantities import UNIT, to_units

__all__ = ["PLUGIN_RULES", "FamilyPolicy", "allowed_text", "check_quantity"]

PLUGIN_RULES = ("validate_quantity", "placement")
"""The rules a plugin may implement in code rather than declare."""


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
                f"{what} {quantity!r} is fractional, but {family} devices are granted whole: "
                f"{allowed_text(fractional, allowed)}"
            )
        return units
    if allowed is not None and units and units // UNIT not in allowed:
        raise InvalidRequest(
            f"{what} {quantity!r} is not allowed: {allowed_text(fractional, allowed)}"
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
    """A device's character file, ``{id}`` standing for its id (see ``device_file`` on the
    manager)."""
    plugin_rules: tuple[str, ...] = ()
    """Rules only the plugin's code applies (see :data:`PLUGIN_RULES`)."""

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
            "plugin_rules": list(self.plugin_rules),
        }

    @classmethod
    def from_dict(cls, name: str, data: Mapping[str, Any]) -> FamilyPolicy:
        """Rebuild from :meth:`to_dict`; ``InvalidData`` naming the family for anything else."""
        from ._json import check_keys

        where = f"node family {name!r}"
        check_keys(data, _POLICY_KEYS, where, required=("resource_name",))
        resource = data["resource_name"]
        fractional = data.get("fractional", True)
        allowed = data.get("allowed_quantities")
        placement = data.get("placement", "lowest-free")
        per_grant = data.get("partitions_per_grant", 1)
        variable = data.get("visible_devices_env_var")
        device_file = data.get("device_file")
        rules = data.get("plugin_rules", [])
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
                f"{where}: placement {placement!r} is not one of {sorted(PLACEMENTS)}; a rule of "
                "the plugin's own is named in plugin_rules"
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
        if device_file is not None and (
            not isinstance(device_file, str) or "{id}" not in device_file
        ):
            raise InvalidData(
                f"{where}: device_file must be null or a path with {{id}} in it, got "
                f"{device_file!r}"
            )
        if not isinstance(rules, list) or any(r not in PLUGIN_RULES for r in rules):
            raise InvalidData(f"{where}: plugin_rules must list some of {list(PLUGIN_RULES)}")
        return cls(
            name=name,
            resource_name=resource,
            fractional=fractional,
            allowed_quantities=None if allowed is None else tuple(allowed),
            placement=PLACEMENTS[placement],
            partitions_per_grant=per_grant,
            visible_devices_env_var=variable,
            device_file=device_file,
            plugin_rules=tuple(rules),
        )


_POLICY_KEYS = (
    "resource_name",
    "fractional",
    "allowed_quantities",
    "placement",
    "partitions_per_grant",
    "visible_devices_env_var",
    "device_file",
    "plugin_rules",
)
