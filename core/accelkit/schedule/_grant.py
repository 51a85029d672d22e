"""``Grant``: what one acquire handed out, and the environment that makes a worker see it.

A grant is plain data (it survives ``to_dict``/``from_dict`` and a scheduler restart); the
environment is built on demand from each granted family's own visibility rule, so the core never
knows a vendor's variables.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Optional, TypeVar, Union

from accelkit._json import check_keys, check_version
from accelkit._shown import shown
from accelkit.device import Device
from accelkit.errors import InvalidData
from accelkit.manager import ACCELERATOR_TYPE_PREFIX
from accelkit.quantities import json_amount

if TYPE_CHECKING:
    from accelkit.registry import Registry

__all__ = ["SCHEMA_VERSION", "Grant", "devices_text", "grant_text", "shared_resources"]

SCHEMA_VERSION = 1
"""Version of :meth:`Grant.to_dict`'s layout; readers refuse another rather than guess."""


class Grant:
    """Devices and resources held by one request, until the allocator is told to release them.

    ``token`` identifies the grant to its allocator (a copy rebuilt with :meth:`from_dict` is the
    same grant). ``resources`` is the granted amount by resource, as floats of the 1e-4 grid.
    ``devices`` pairs each device with its share (1.0 for whole devices). ``families`` are the
    accelerator families of the node the grant came from (what ``hide_others`` hides), and
    ``family_sizes`` how many allocatable devices each has there (how a family tells a grant of
    every device, e.g. a whole TPU host, from a part). Grants are immutable.
    """

    __slots__ = ("devices", "families", "family_sizes", "resources", "token")

    token: int
    resources: Mapping[str, float]
    devices: tuple[tuple[Device, float], ...]
    families: tuple[str, ...]
    family_sizes: Mapping[str, int]

    def __init__(
        self,
        token: int,
        resources: Mapping[str, float],
        devices: Sequence[tuple[Device, float]],
        families: Sequence[str] = (),
        family_sizes: Optional[Mapping[str, int]] = None,
    ) -> None:
        setter = object.__setattr__
        setter(self, "token", token)
        setter(
            self,
            "resources",
            resources
            if isinstance(resources, MappingProxyType)
            else MappingProxyType(dict(resources)),
        )
        setter(self, "devices", devices if isinstance(devices, tuple) else tuple(devices))
        setter(self, "families", families if isinstance(families, tuple) else tuple(families))
        setter(
            self,
            "family_sizes",
            family_sizes
            if isinstance(family_sizes, MappingProxyType)
            else MappingProxyType(dict(family_sizes or {})),
        )

    @classmethod
    def _new(
        cls,
        token: int,
        resources: MappingProxyType[str, float],
        devices: tuple[tuple[Device, float], ...],
        families: tuple[str, ...],
        family_sizes: MappingProxyType[str, int],
    ) -> Grant:
        """The allocator's constructor: arguments already in their final, immutable types."""
        grant = object.__new__(cls)
        _SET_TOKEN(grant, token)
        _SET_RESOURCES(grant, resources)
        _SET_DEVICES(grant, devices)
        _SET_FAMILIES(grant, families)
        _SET_SIZES(grant, family_sizes)
        return grant

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Grant is immutable; cannot set {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"Grant is immutable; cannot delete {name!r}")

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickle by value, so a grant can travel to a worker process."""
        return (
            Grant,
            (
                self.token,
                dict(self.resources),
                self.devices,
                self.families,
                dict(self.family_sizes),
            ),
        )

    @property
    def ids(self) -> dict[str, list[str]]:
        """Device ids by resource, in grant order: ``{"GPU": ["0"]}``."""
        ids: dict[str, list[str]] = {}
        for device, _share in self.devices:
            ids.setdefault(device.resource_name, []).append(device.id)
        return ids

    def ids_by_family(self) -> dict[str, list[str]]:
        """Device ids by family, in grant order: ``{"nvidia": ["0"]}``."""
        ids: dict[str, list[str]] = {}
        for device, _share in self.devices:
            ids.setdefault(device.family, []).append(device.id)
        return ids

    def env(
        self,
        base_env: Optional[Mapping[str, str]] = None,
        *,
        hide_others: Union[bool, Collection[str]] = False,
        hooks: bool = True,
        registry: Optional[Registry] = None,
        peers: Sequence[Grant] = (),
    ) -> dict[str, Optional[str]]:
        """The variables to set in the worker's environment (None: unset that variable).

        Each granted family writes its own variables (``visibility_env``), which also
        neutralise the layers stacked on them, but never another node family's primary
        variable. Families of the node that the grant does not touch are left as inherited,
        unless ``hide_others`` makes them see nothing: True hides every one, a collection of
        family names those it names (``accelkit run -r GPU=0 -r NPU=1`` hides the GPU
        families, as Ray does for a task that asks for no GPU); a bare string is a
        ``TypeError``, whatever the node. ``base_env`` is the environment the
        worker inherits (default ``os.environ``); a family with ``ACCELKIT_NOSET_<FAMILY>=1``
        there is left alone. ``peers`` are the grants of workers beside this one on the node:
        a family that declares ``Frameworks.shared_visibility`` then shows every peer's ids
        too, and ``ACCELKIT_LOCAL_DEVICES_<FAMILY>`` names the worker's own. With ``hooks``,
        plugins' ``accelkit_worker_env`` hooks add advisory variables. The rules, in the order
        they apply, are in :mod:`accelkit.schedule._worker_env`; the families' plugins come
        from ``registry`` (None: the default one), and a family whose plugin is not loaded is
        a :class:`~accelkit.PluginError` naming it.
        """
        from accelkit.schedule._worker_env import worker_env

        inherited: Mapping[str, str] = os.environ if base_env is None else base_env
        return worker_env(
            self, inherited, hide_others=hide_others, hooks=hooks, registry=registry, peers=peers
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready and lossless: :meth:`from_dict` gives an equal grant."""
        return {
            "schema_version": SCHEMA_VERSION,
            "token": self.token,
            "resources": dict(self.resources),
            "devices": [{"device": d.to_dict(), "share": share} for d, share in self.devices],
            "families": list(self.families),
            "family_sizes": dict(self.family_sizes),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Grant:
        """Rebuild a grant from :meth:`to_dict` (e.g. state a scheduler persisted).

        :class:`~accelkit.InvalidData` (a ``ValueError``) saying what is wrong for anything
        else: another schema version, unknown or missing keys, values of the wrong kind.
        """
        checked = check_keys(data, _GRANT_KEYS, "a grant", required=_GRANT_KEYS)
        check_version(checked, SCHEMA_VERSION, "grant")
        token = checked["token"]
        if isinstance(token, bool) or not isinstance(token, int):
            raise InvalidData(f"a grant's token must be a whole number, got {shown(token)}")
        devices = []
        for entry in _typed(checked["devices"], list, "devices"):
            entry = check_keys(
                entry, ("device", "share"), "a granted device", required=("device", "share")
            )
            share = json_amount(entry["share"], "malformed grant: a device's share")
            devices.append((Device.from_dict(_typed(entry["device"], dict, "a device")), share))
        return cls(
            token=token,
            resources={
                _typed(k, str, "a resource name"): json_amount(
                    v, f"malformed grant: resource {k!r}"
                )
                for k, v in _typed(checked["resources"], dict, "resources").items()
            },
            devices=devices,
            families=[
                _typed(f, str, "a family") for f in _typed(checked["families"], list, "families")
            ],
            family_sizes={
                _typed(k, str, "a family"): _whole(v, f"family_sizes[{k!r}]")
                for k, v in _typed(checked["family_sizes"], dict, "family_sizes").items()
            },
        )

    def _key(self) -> tuple[Any, ...]:
        return (
            self.token,
            dict(self.resources),
            self.devices,
            self.families,
            dict(self.family_sizes),
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Grant):
            return NotImplemented
        return self is other or self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self.token)

    def __repr__(self) -> str:
        held = ", ".join(
            f"{d.family}:{d.id}" + ("" if share == 1.0 else f"*{share:g}")
            for d, share in self.devices
        )
        return f"<Grant {self.token} {dict(self.resources)} [{held}]>"


def grant_text(grant: Grant, shared: Collection[str] = ()) -> str:
    """``GPU 0,1`` or ``GPU 2 (0.5)``: what a grant holds, as people say it, its plain capacity
    after its devices (``GPU 0; scratch_disk=2``), ``nothing`` when it holds neither; see
    :func:`devices_text`."""
    counted = {device.resource_name for device, _share in grant.devices}
    plain = [
        f"{name}={amount:g}"
        for name, amount in grant.resources.items()
        if name not in counted and not name.startswith(ACCELERATOR_TYPE_PREFIX)
    ]
    devices = devices_text(grant.devices, shared) if grant.devices else ""
    return "; ".join(part for part in (devices, *plain) if part) or "nothing"


def devices_text(devices: Iterable[tuple[Device, float]], shared: Collection[str] = ()) -> str:
    """``GPU 0,1`` or ``GPU 2 (0.5)``: devices with their shares, by resource.

    Ids name a device within its family, so a resource that several families serve on the node
    (an NVIDIA and an AMD GPU are both ``GPU 0``) is said with its family: ``amd GPU 0,1``.
    ``shared`` names those resources (:func:`shared_resources`); devices of one resource from
    several families name them too.
    """
    groups: dict[tuple[str, str], list[tuple[Device, float]]] = {}
    for device, share in devices:
        groups.setdefault((device.resource_name, device.family), []).append((device, share))
    resources = [resource for resource, _family in groups]  # one entry per family held
    parts = []
    for (resource, family), held in groups.items():
        part = f"{resource} {','.join(device.id for device, _share in held)}"
        if resource in shared or resources.count(resource) > 1:
            part = f"{family} {part}"
        shares = {share for _device, share in held}
        parts.append(part if shares == {1.0} else f"{part} ({held[0][1]:g})")
    return "; ".join(parts) or "nothing"


def shared_resources(devices: Iterable[Device]) -> frozenset[str]:
    """The resources that more than one family serves among ``devices`` (a node's, or those of
    the grants a ledger lists): where a device id alone does not say which device it is."""
    families: dict[str, set[str]] = {}
    for device in devices:
        families.setdefault(device.resource_name, set()).add(device.family)
    return frozenset(resource for resource, named in families.items() if len(named) > 1)


# Slot setters that bypass the immutability guard, for Grant._new (the acquire hot path).
_SET_TOKEN = Grant.__dict__["token"].__set__
_SET_RESOURCES = Grant.__dict__["resources"].__set__
_SET_DEVICES = Grant.__dict__["devices"].__set__
_SET_FAMILIES = Grant.__dict__["families"].__set__
_SET_SIZES = Grant.__dict__["family_sizes"].__set__

_T = TypeVar("_T")


def _typed(value: object, kind: type[_T], what: str) -> _T:
    if not isinstance(value, kind):
        raise InvalidData(f"malformed grant: {what} must be a {kind.__name__}, not {shown(value)}")
    return value


def _whole(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidData(f"malformed grant: {what} is {shown(value)}, not a whole number")
    return value


_GRANT_KEYS = ("schema_version", "token", "resources", "devices", "families", "family_sizes")
