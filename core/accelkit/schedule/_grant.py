"""``Grant``: what one acquire handed out, and the environment that makes a worker see it.

A grant is plain data (it survives ``to_dict``/``from_dict`` and a scheduler restart); the
environment is built on demand from each granted family's own visibility rule, so the core never
knows a vendor's variables.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping, MutableMapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Optional, TypeVar

from accelkit._faults import PLUGIN_FAULTS
from accelkit._json import check_keys, check_version
from accelkit._settings import flag
from accelkit._shown import shown
from accelkit._visibility import is_index
from accelkit.device import Device
from accelkit.errors import InvalidData, PluginError, PluginWarning
from accelkit.quantities import json_amount

if TYPE_CHECKING:
    from accelkit.manager import AcceleratorManager
    from accelkit.registry import Registry

__all__ = [
    "LOCAL_DEVICES_PREFIX",
    "NOSET_PREFIX",
    "SCHEMA_VERSION",
    "Grant",
    "apply_env",
    "numeric_order",
    "worker_environ",
]

LOCAL_DEVICES_PREFIX = "ACCELKIT_LOCAL_DEVICES_"
"""``ACCELKIT_LOCAL_DEVICES_<FAMILY>=2,3``: the worker's own devices, by position in the visible
list, when ``Grant.env(peers=...)`` shows it its peers' devices too."""


def numeric_order(device_id: str) -> tuple[int, int, str]:
    """Sort key: numeric ids by value ("2" before "10"), then the others by text."""
    return (0, int(device_id), "") if is_index(device_id) else (1, 0, device_id)


def apply_env(changes: Mapping[str, Optional[str]], environ: MutableMapping[str, str]) -> None:
    """Apply a grant's ``env()`` to ``environ`` in place: set each variable, or unset it where
    the value is None (``os.environ`` for this process, as a Ray worker does)."""
    for name, value in changes.items():
        if value is None:
            environ.pop(name, None)
        else:
            environ[name] = value


def worker_environ(
    changes: Mapping[str, Optional[str]], base: Optional[Mapping[str, str]] = None
) -> dict[str, str]:
    """A whole environment for a new process: ``base`` (None: ``os.environ``) with a grant's
    ``env()`` applied."""
    environ = dict(os.environ if base is None else base)
    apply_env(changes, environ)
    return environ


SCHEMA_VERSION = 1
"""Version of :meth:`Grant.to_dict`'s layout; readers refuse another rather than guess."""

NOSET_PREFIX = "ACCELKIT_NOSET_"
"""``ACCELKIT_NOSET_<FAMILY>=1`` (e.g. ``ACCELKIT_NOSET_NVIDIA``) leaves that family's variables
alone, for workers whose launcher already sets them."""


def _writable(value: Optional[str]) -> bool:
    """Whether a value can be written as is: None (unset) or text without whitespace."""
    return value is None or not any(ch.isspace() for ch in value)


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
        hide_others: bool = False,
        hooks: bool = True,
        registry: Optional[Registry] = None,
        peers: Sequence[Grant] = (),
    ) -> dict[str, Optional[str]]:
        """The variables to set in the worker's environment (None: unset that variable).

        Each granted family writes its own variables (``visibility_env``), which also
        neutralise the layers stacked on them, but never another node family's primary
        variable (AMD's rule unsets ``CUDA_VISIBLE_DEVICES``, which NVIDIA owns on a mixed
        node). Families of the node that the grant does not touch are left as inherited, unless
        ``hide_others`` makes them see nothing.

        ``base_env`` is the environment the worker inherits (default ``os.environ``: the
        caller's, which a scheduler's workers inherit). A family with
        ``ACCELKIT_NOSET_<FAMILY>=1`` there is left alone, granted or hidden. Each family's
        ``visibility_env`` is told how many devices it has on the node (``total``: a TPU
        grant of every chip then unsets every TPU variable), unless ``base_env`` already
        narrows what the family sees: then the node is not the whole host.

        The families' plugins come from ``registry`` (None: the default one); a family whose
        plugin is not loaded is a :class:`~accelkit.PluginError` naming it.

        ``peers`` are the grants of workers that run beside this one on the node (a training
        job's workers). Collectives between them need each other's devices visible: for a family
        that declares ``shared_visibility`` the worker then sees the union of every peer's ids,
        in numeric order ("2,10", never "10,2"), and ``ACCELKIT_LOCAL_DEVICES_<FAMILY>`` names
        its own devices by position in that list (``accelkit.runtime.devices`` reads it). A
        family whose devices are exclusive (Neuron cores) keeps only the worker's own ids.

        With ``hooks``, plugins' ``accelkit_worker_env`` hooks add advisory variables (the
        built-in ``hints`` plugin writes framework memory fractions for shared devices); one
        already set in ``base_env`` is kept as the user set it. No value is ever written with
        whitespace: a family's is a :class:`~accelkit.PluginError`, a hook's is left out with
        a warning.
        """
        from accelkit.registry import resolve

        plugins = resolve(registry)
        inherited: Mapping[str, str] = os.environ if base_env is None else base_env
        granted = self.ids_by_family()
        hidden = [f for f in self.families if f not in granted] if hide_others else []
        env: dict[str, Optional[str]] = {}
        if peers:
            granted, env = self._shared(plugins, granted, peers)
        # Hidden families first, so a granted family's variables win where two families share one.
        for family, ids in [*((f, []) for f in hidden), *granted.items()]:
            if flag(inherited, NOSET_PREFIX + family.upper()):
                continue
            manager = _manager(plugins, family)
            written = _visibility_env(manager, ids, self._total(manager, family, inherited))
            spaced = {name: value for name, value in written.items() if not _writable(value)}
            if spaced:
                raise PluginError(
                    f"the {family} plugin's visibility_env({ids!r}) writes whitespace: {spaced}"
                )
            owned = self._owned_elsewhere(plugins, family)
            env.update({name: value for name, value in written.items() if name not in owned})
        if hooks:
            for name, value in plugins.worker_env(self, env).items():
                if name in inherited:
                    continue
                if _writable(value):
                    env[name] = value
                else:
                    warnings.warn(
                        f"accelkit_worker_env gave {name}={value!r}, which has whitespace; "
                        "left out",
                        PluginWarning,
                        stacklevel=2,
                    )
        return env

    def _shared(
        self, plugins: Registry, granted: dict[str, list[str]], peers: Sequence[Grant]
    ) -> tuple[dict[str, list[str]], dict[str, Optional[str]]]:
        """The ids each family shows with ``peers`` visible too, and the local-device variables."""
        shown: dict[str, list[str]] = {}
        local: dict[str, Optional[str]] = {}
        for family, ids in granted.items():
            if not _manager(plugins, family).shared_visibility:
                shown[family] = ids
                continue
            union = {*ids, *(i for peer in peers for i in peer.ids_by_family().get(family, []))}
            shown[family] = sorted(union, key=numeric_order)
            positions = (str(shown[family].index(i)) for i in ids)
            local[LOCAL_DEVICES_PREFIX + family.upper()] = ",".join(positions)
        return shown, local

    def _owned_elsewhere(self, plugins: Registry, family: str) -> set[str]:
        """Primary variables of the node's other families, which ``family`` must not write.

        On a node with NVIDIA and AMD GPUs, AMD's rule unsets ``CUDA_VISIBLE_DEVICES`` (HIP
        reads it relative to ROCr's list); written as is, that would show the NVIDIA family
        every device, hidden or not. The owner's value (or the inherited one) stands. A family
        whose plugin this process has not loaded names no variable here (the grant does not
        touch it, and nothing can write its variable anyway).
        """
        owned = set()
        for other in self.families:
            if other == family:
                continue
            try:
                variable = plugins.get_manager(other).visible_devices_env_var
            except KeyError:
                continue
            if variable is not None:
                owned.add(variable)
        return owned

    def _total(
        self, manager: AcceleratorManager, family: str, inherited: Mapping[str, str]
    ) -> Optional[int]:
        """The family's device count on the node, when the worker would otherwise see them all."""
        total = self.family_sizes.get(family)
        if total is None:
            return None
        try:
            narrowed = manager.read_visible(inherited) is not None
        except ValueError:
            narrowed = True
        return None if narrowed else total

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


def _manager(plugins: Registry, family: str) -> AcceleratorManager:
    """The family's manager; a missing plugin is a PluginError (a grant's env needs its code)."""
    try:
        return plugins.get_manager(family)
    except KeyError as error:
        raise PluginError(
            f"the grant has {family} devices, and writing their environment needs the {family} "
            f"plugin: {error.args[0]}"
        ) from None


def _visibility_env(
    manager: AcceleratorManager, ids: list[str], total: Optional[int]
) -> dict[str, Optional[str]]:
    """``manager.visibility_env``, called as the contract version the manager declares.

    Version 2 and later always receive ``total``; version 1 managers (written before it, or
    declaring nothing) are called with ``ids`` only, as version 1 promised.
    """
    try:
        if manager.api_version >= 2:
            written = manager.visibility_env(ids, total=total)
        else:
            written = manager.visibility_env(ids)
    except PLUGIN_FAULTS as exc:
        raise PluginError(
            f"the {manager.name} plugin's visibility_env({ids!r}) failed: {type(exc).__name__}: "
            f"{exc}"
        ) from None
    if not isinstance(written, Mapping) or not all(
        isinstance(k, str) and (v is None or isinstance(v, str)) for k, v in written.items()
    ):
        raise PluginError(
            f"the {manager.name} plugin's visibility_env({ids!r}) returned {shown(written)}, not "
            "a mapping of variable names to strings or None"
        )
    return dict(written)
