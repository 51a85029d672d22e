"""The environment that makes a worker see its grant: named rules, applied in order.

Every vendor rule meets here, so each is a function of its own, and :func:`worker_env` reads as
the list of them:

1. :func:`shown_ids`: the ids each granted family shows; a family whose frameworks share devices
   between co-located workers (``Frameworks.shared_visibility``) shows its peers' ids too, with
   ``ACCELKIT_LOCAL_DEVICES_<FAMILY>`` naming the worker's own;
2. :func:`families_to_write`: the granted families, after the node's other families that
   ``hide_others`` hides (all of them, or those it names; a granted family's variables win where
   two share one), leaving out any family the inherited environment marks
   ``ACCELKIT_NOSET_<FAMILY>=1``;
3. :func:`family_variables`: each family's own ``visibility_env``, told the family's device count
   on the node (``total``) unless the inherited environment already narrows the family, never
   writing whitespace, and never another node family's primary variable;
4. :func:`hook_additions`: the plugins' ``accelkit_worker_env`` hooks add advisory variables, never
   one the worker already inherits.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Collection, Iterator, Mapping, MutableMapping, Sequence
from typing import TYPE_CHECKING, Optional, Union

from accelkit._faults import PLUGIN_FAULTS
from accelkit._settings import flag
from accelkit._shown import shown
from accelkit._visibility import is_index
from accelkit.errors import ConfigurationError, PluginError, PluginWarning

if TYPE_CHECKING:
    from accelkit.device import Device
    from accelkit.manager import AcceleratorManager
    from accelkit.registry import Registry
    from accelkit.schedule._grant import Grant

__all__ = [
    "LOCAL_DEVICES_PREFIX",
    "NOSET_PREFIX",
    "apply_env",
    "families_to_write",
    "family_variables",
    "hook_additions",
    "numeric_order",
    "shown_ids",
    "worker_env",
    "worker_environ",
]

LOCAL_DEVICES_PREFIX = "ACCELKIT_LOCAL_DEVICES_"
"""``ACCELKIT_LOCAL_DEVICES_<FAMILY>=2,3``: the worker's own devices, by position in the visible
list, when ``Grant.env(peers=...)`` shows it its peers' devices too."""

NOSET_PREFIX = "ACCELKIT_NOSET_"
"""``ACCELKIT_NOSET_<FAMILY>=1`` (e.g. ``ACCELKIT_NOSET_NVIDIA``) leaves that family's variables
alone, for workers whose launcher already sets them."""


def worker_env(
    grant: Grant,
    inherited: Mapping[str, str],
    *,
    hide_others: Union[bool, Collection[str]],
    hooks: bool,
    registry: Optional[Registry],
    peers: Sequence[Grant],
) -> dict[str, Optional[str]]:
    """``Grant.env``: the rules above, in order, for a worker inheriting ``inherited``."""
    from accelkit.registry import resolve

    _check_hide_others(hide_others)
    plugins = resolve(registry)
    _check_names(hide_others, grant, plugins)
    shown, env = shown_ids(grant, plugins, peers)
    for family, ids in families_to_write(grant, shown, inherited, hide_others):
        env.update(family_variables(grant, plugins, family, ids, inherited))
    if hooks:
        env.update(hook_additions(grant, plugins, env, inherited))
    return env


def shown_ids(
    grant: Grant, plugins: Registry, peers: Sequence[Grant]
) -> tuple[dict[str, list[str]], dict[str, Optional[str]]]:
    """The ids each granted family shows, and the local-device variables peers make necessary.

    Collectives between co-located workers need each other's devices visible: a family that
    declares ``shared_visibility`` shows the union of every peer's ids, in numeric order ("2,10",
    never "10,2"); a family whose devices are exclusive (Neuron cores) keeps its own ids. Only
    devices that may be seen by several processes are merged: a partition the family grants a
    limited number of per grant (a MIG instance: CUDA uses one per process, so peers' instances
    merged into one list would show the worker another's) and an ``exclusive`` device are
    never shown to a peer, and a worker holding such a device sees only its own ids.
    """
    granted = grant.ids_by_family()
    if not peers:
        return granted, {}
    shown: dict[str, list[str]] = {}
    local: dict[str, Optional[str]] = {}
    for family, ids in granted.items():
        manager = _manager(plugins, family)
        limited = manager.scheduling.partitions_per_grant is not None
        own = [d for d, _share in grant.devices if d.family == family]
        if not manager.frameworks.shared_visibility or any(_alone(d, limited) for d in own):
            shown[family] = ids
            continue
        union = {
            *ids,
            *(
                d.id
                for peer in peers
                for d, _share in peer.devices
                if d.family == family and not _alone(d, limited)
            ),
        }
        shown[family] = sorted(union, key=numeric_order)
        positions = (str(shown[family].index(i)) for i in ids)
        local[LOCAL_DEVICES_PREFIX + family.upper()] = ",".join(positions)
    return shown, local


def _alone(device: Device, limited: bool) -> bool:
    """Whether only its own grant's process may see ``device``: an exclusive device, or a
    partition of a family that limits partitions per grant (``partitions_per_grant``)."""
    return device.exclusive or (limited and device.parent is not None)


def families_to_write(
    grant: Grant,
    shown: Mapping[str, list[str]],
    inherited: Mapping[str, str],
    hide_others: Union[bool, Collection[str]],
) -> Iterator[tuple[str, list[str]]]:
    """``(family, ids)`` in writing order: hidden families (no ids) first, then granted ones, so a
    granted family's variables win where two families share one; ``ACCELKIT_NOSET_<FAMILY>``
    leaves a family out, granted or hidden. ``hide_others`` hides every family of the node the
    grant does not touch (True), none (False) or those it names."""
    hidden = [f for f in grant.families if f not in shown and _hides(hide_others, f)]
    for family, ids in [*((f, []) for f in hidden), *shown.items()]:
        if not flag(inherited, NOSET_PREFIX + family.upper()):
            yield family, list(ids)


def _check_hide_others(hide_others: Union[bool, Collection[str]]) -> None:
    """Refuse a bare string, which would be read letter by letter. Checked before any family
    is looked at: were it checked only when a family is to be hidden, a string would pass on a
    node whose only family is granted, and fail the same code on a node with another."""
    if isinstance(hide_others, str):
        raise TypeError(
            f"hide_others takes True, False or a collection of family names, not the string "
            f"{hide_others!r}: write [{hide_others!r}]"
        )


def _check_names(
    hide_others: Union[bool, Collection[str]], grant: Grant, plugins: Registry
) -> None:
    """Refuse a family name neither the grant's node nor any plugin knows: a typo
    (``{"acsend"}``) hid nothing, silently, and the worker saw every NPU. A family known to
    the plugins but absent from this node hides nothing, as the rule says (one list for every
    node of a cluster)."""
    if isinstance(hide_others, bool) or not isinstance(hide_others, Collection):
        return
    known = {*grant.families, *(m.name for m in plugins.managers())}
    unknown = sorted(str(name) for name in hide_others if name not in known)
    if unknown:
        raise ValueError(
            f"hide_others names {', '.join(map(repr, unknown))}, no family this node or its "
            f"plugins know; known: {', '.join(sorted(known))}"
        )


def _hides(hide_others: Union[bool, Collection[str]], family: str) -> bool:
    """Whether ``hide_others`` hides ``family``: a collection of family names hides those (one
    the node lacks hides nothing), anything else by its truth, as before collections were
    taken (``numpy.bool_``, ``None``)."""
    if isinstance(hide_others, Collection):
        return family in hide_others
    return bool(hide_others)


def family_variables(
    grant: Grant,
    plugins: Registry,
    family: str,
    ids: list[str],
    inherited: Mapping[str, str],
) -> dict[str, Optional[str]]:
    """The family's ``visibility_env(ids)``, less the node's other families' primary variables.

    On a node with NVIDIA and AMD GPUs, AMD's rule unsets ``CUDA_VISIBLE_DEVICES`` (HIP reads it
    relative to ROCr's list); written as is, that would show the NVIDIA family every device. A
    value with whitespace is a :class:`~accelkit.PluginError`: no runtime reads it as meant.
    """
    manager = _manager(plugins, family, hiding=not ids)
    written = _visibility_env(manager, ids, _total(grant, manager, family, inherited))
    spaced = {name: value for name, value in written.items() if not _writable(value)}
    if spaced:
        raise PluginError(
            f"the {family} plugin's visibility_env({ids!r}) writes whitespace: {spaced}"
        )
    owned = _owned_elsewhere(grant, plugins, family)
    if ids and manager.visible_devices_env_var in owned:
        raise ConfigurationError(
            f"the grant's {family} devices {ids} are named by {manager.visible_devices_env_var}, "
            "which another family of the node reads too: no environment can show the worker "
            "those devices alone (detection refuses such a node; this one was built otherwise)"
        )
    return {name: value for name, value in written.items() if name not in owned}


def hook_additions(
    grant: Grant,
    plugins: Registry,
    env: Mapping[str, Optional[str]],
    inherited: Mapping[str, str],
) -> dict[str, Optional[str]]:
    """Advisory variables the plugins' hooks add (the built-in ``hints`` plugin's memory
    fractions); one the worker inherits is kept as the user set it, and one with whitespace is
    left out with a warning."""
    added: dict[str, Optional[str]] = {}
    for name, value in plugins.worker_env(grant, env).items():
        if name in inherited:
            continue
        if _writable(value):
            added[name] = value
        else:
            warnings.warn(
                f"accelkit_worker_env gave {name}={value!r}, which has whitespace; left out",
                PluginWarning,
                stacklevel=4,
            )
    return added


def _owned_elsewhere(grant: Grant, plugins: Registry, family: str) -> set[str]:
    """Primary variables of the node's other families, which ``family`` must not write. A family
    whose plugin this process has not loaded names none (nothing can write its variable)."""
    owned = set()
    for other in grant.families:
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
    grant: Grant, manager: AcceleratorManager, family: str, inherited: Mapping[str, str]
) -> Optional[int]:
    """The family's device count on the node, when the worker would otherwise see them all."""
    total = grant.family_sizes.get(family)
    if total is None:
        return None
    try:
        narrowed = manager.read_visible(inherited) is not None
    except ValueError:
        narrowed = True
    return None if narrowed else total


def _manager(plugins: Registry, family: str, *, hiding: bool = False) -> AcceleratorManager:
    """The family's manager; a missing plugin is a PluginError (a grant's env needs its code,
    to show the family's granted devices or, ``hiding``, to hide them all)."""
    try:
        return plugins.get_manager(family)
    except KeyError as error:
        needs = f"the grant has {family} devices, and writing their environment"
        if hiding:
            needs = f"hiding the node's {family} devices from the worker (hide_others)"
        raise PluginError(f"{needs} needs the {family} plugin: {error.args[0]}") from None


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


def _writable(value: Optional[str]) -> bool:
    """Whether a value can be written as is: None (unset) or text without whitespace."""
    return value is None or not any(ch.isspace() for ch in value)


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
