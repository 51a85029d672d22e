"""Visibility: a family's visibility variable, set on the node, restricts what exists and names it.

The variable exists so that a process (or a whole node) sees only some devices, by the ids the
family's runtime will use; detection honours it the way the runtime would, so the node never
offers a device that a worker could not see. Two steps of :data:`~accelkit.node._detect.STEPS`
live here, around the operator's exclusions: reading the variable (and making logical devices
when nothing was detected), then restricting the detected devices by it.

A family's visibility variable, when set, restricts what exists and supplies the ids, in the
variable's order: ``CUDA_VISIBLE_DEVICES=2,3,5`` on an 8-GPU node leaves three devices with ids
"2", "3", "5" (each keeps its detected facts; ``index`` becomes its position in the variable, the
ordinal the family's runtime will use). The manager's ``read_visible`` reads the value as its
runtime does (where a list stops, what a token means); matching its tokens to the detected devices
happens here, with the manager's ``matches``. The first token that names no detected device (or
names two: a UUID prefix they share) ends the list, with a warning, because CUDA, HIP and ROCr stop
reading there: ``CUDA_VISIBLE_DEVICES=1,0`` on a one-GPU node shows nothing. Such a token never
becomes a device of its own. A token naming an excluded device or a device the family does not
offer (``Device.offered`` False: a Prohibited GPU) is left out and the list goes on: the runtime
sees that device and counts it, and a device's ``index`` is the runtime's ordinal, so
``CUDA_VISIBLE_DEVICES=0,1,2`` with GPU 1 Prohibited leaves GPUs "0" and "2" at ordinals 0 and 2. A
token naming a device whose partitions are listed in its place is left out too, with a warning; a
device named twice is kept once, with a warning. A value that makes nothing visible by accident
(not ``""``/``NoDevFiles``) is a warning too. Only when the family detected nothing, offered or
not, do its tokens become logical devices (source ``"env"``: ``CUDA_VISIBLE_DEVICES=2,3,5`` with an
override of 3 GPUs gives ids "2", "3", "5"), unless another family already provides that resource
(with devices it offers), or its variable is another family's with devices: an AMD node whose shell
sets ``CUDA_VISIBLE_DEVICES`` is not also an NVIDIA node, and on a node with no device at all only
the first such family in registry order makes logical devices, of a resource and of a variable
(a Hygon DCU plugin reads ``CUDA_VISIBLE_DEVICES`` too: a grant of one family's logical device
could not write the variable the other one also reads), even where it finds nothing visible in
it: ``CUDA_VISIBLE_DEVICES=0,0`` is CUDA's error, not a GPU for HIP, which reads the variable
where its own are unset, to make. A value the manager cannot read
(``read_visible`` raising ``ValueError``, as NVIDIA's does for an ordinal given twice, which CUDA
refuses; or a token that could not be written back as an id) is an error diagnostic and counts as
*nothing visible*: the variable exists to restrict, so a restriction we cannot read must not be
widened into "everything".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Optional

from accelkit._faults import PLUGIN_FAULTS
from accelkit._shown import shown
from accelkit._visibility import NOTHING_VISIBLE, canonical_id, checked_ids, join_ids
from accelkit.device import MAX_DEVICES, Device
from accelkit.diagnostics import note
from accelkit.manager import AcceleratorManager
from accelkit.node._state import Detection, Family
from accelkit.registry import variables_read

__all__ = ["logical", "step_read_visibility", "step_restrict"]


def step_read_visibility(state: Detection) -> None:
    """Read each family's visibility variable; with nothing detected, its ids become devices.
    A family provides its resource only with devices it offers: an integrated GPU that its
    family does not offer leaves another family free to make devices of its variable."""
    provided = {f.manager.resource_name for f in state.families if f.devices}
    claimed = {f.manager.visible_devices_env_var for f in state.families if f.devices}
    claimed.discard(None)  # a family without a primary variable claims none
    read_first: dict[str, tuple[str, bool]] = {}  # a variable a family without devices read
    # first -> that family, and whether it made logical devices of it
    for family in state.families:
        with state.noting(family):
            _note_markers_among_ids(family.manager, family.host.env)
            try:
                _read_visibility(family, provided, claimed, read_first)
            except PLUGIN_FAULTS as exc:  # a plugin's read_visible() is broken
                note(f"visibility rules failed: {type(exc).__name__}: {exc}; no devices", "error")
                family.devices = []
                family.restriction = f"the {family.manager.name} visibility rules (failing)"
        if family.devices:
            provided.add(family.manager.resource_name)
            claimed.add(family.manager.visible_devices_env_var)


def step_restrict(state: Detection) -> None:
    """A set visibility variable restricts what exists and supplies the ids, in its order."""
    for family in state.families:
        if family.tokens is None or not family.detected:
            continue
        with state.noting(family):
            try:
                passed_over = [*family.excluded, *family.withheld]
                family.devices = _restrict(
                    family.manager, family.host.env, family.devices, passed_over, family.tokens
                )
                family.devices = _without_parent_ids(
                    family.manager, family.host.env, family.devices, family.detected
                )
            except PLUGIN_FAULTS as exc:  # a plugin's matches() is broken
                note(f"visibility rules failed: {type(exc).__name__}: {exc}; no devices", "error")
                family.devices = []


def _read_visibility(
    family: Family,
    provided: set[str],
    claimed: set[Optional[str]],
    read_first: dict[str, tuple[str, bool]],
) -> None:
    """The family's visibility tokens and restriction; logical devices when none was detected,
    unless another family already provides its resource, has devices named by its variable, or
    read one of its variables first. A family without devices that reads a variable claims it
    whatever it finds there: ``CUDA_VISIBLE_DEVICES=0,0`` is an error to NVIDIA, not a GPU for
    the next family that reads the variable (AMD's HIP, a MetaX plugin) to make."""
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
    family.tokens = None if tokens is None else _distinct(manager, env, tokens)
    tokens = family.tokens
    if tokens is not None:
        family.restriction = _visibility_text(manager, env)
    if detected or tokens is None:
        return
    variables = [name for name in variables_read(manager) if name in env]
    if not tokens:  # nothing visible, and no other family's to make devices of either
        _claim(manager, env, variables, read_first, made_devices=False)
        return
    if manager.resource_name in provided:
        note(
            f"{family.restriction} is set but no {manager.name} device was detected, and "
            f"another family provides {manager.resource_name}: creating no devices from it"
        )
        return
    if manager.visible_devices_env_var in claimed:
        note(
            f"{family.restriction} is set but no {manager.name} device was detected, and "
            f"another family's devices are named by {manager.visible_devices_env_var}: creating "
            "no devices from it"
        )
        return
    first = next((n for n in variables if n in read_first and _comes_from(manager, env, n)), None)
    if first is not None:
        owner, made_devices = read_first[first]
        what = (
            "whose logical devices it names"
            if made_devices
            else "for which it makes nothing visible"
        )
        note(
            f"{family.restriction} is set but no {manager.name} device was detected, and "
            f"{first} was read first by the {owner} family, {what}: creating no devices from it"
        )
        return
    _claim(manager, env, variables, read_first, made_devices=True)
    family.devices = logical(manager, dict.fromkeys(tokens), "env")
    note(f"no device detected; {len(family.devices)} logical device(s) from {family.restriction}")


def _claim(
    manager: AcceleratorManager,
    env: Mapping[str, str],
    variables: Sequence[str],
    read_first: dict[str, tuple[str, bool]],
    *,
    made_devices: bool,
) -> None:
    """Note the family as the first reader of each variable its reading comes from (only those:
    ``ROCR_VISIBLE_DEVICES=""`` hides AMD's GPUs, and leaves ``HIP_VISIBLE_DEVICES`` to a family
    whose own variable it is)."""
    for name in variables:
        if name not in read_first and _comes_from(manager, env, name):
            read_first[name] = (manager.name, made_devices)


def _comes_from(manager: AcceleratorManager, env: Mapping[str, str], name: str) -> bool:
    """Whether the family's reading of ``env`` changes without ``name`` (HIP reads
    ``CUDA_VISIBLE_DEVICES`` only where ``HIP_VISIBLE_DEVICES`` is unset)."""
    without = {key: value for key, value in env.items() if key != name}
    return _reading(manager, without) != _reading(manager, env)


def _reading(manager: AcceleratorManager, env: Mapping[str, str]) -> object:
    """The family's reading of ``env``, or the refusal it raises, to compare two readings."""
    try:
        return manager.read_visible(env)
    except ValueError as refused:
        return f"refused: {refused}"


def _distinct(manager: AcceleratorManager, env: Mapping[str, str], tokens: list[str]) -> list[str]:
    """Visibility tokens without aliases (``9`` and ``09`` are one device to every runtime) and
    at most MAX_DEVICES of them; what is dropped is a warning."""
    kept: dict[str, str] = {}
    distinct: list[str] = []
    for token in tokens:
        alias = canonical_id(token)
        first = kept.get(alias, token)
        if first != token:
            note(
                f"{_naming(manager, env, token)} names {shown(first)} and {shown(token)}, the same "
                "device; keeping the first",
                "warning",
            )
            continue
        if alias not in kept and len(kept) == MAX_DEVICES:
            note(
                f"{_naming(manager, env)} names {len(tokens)} ids; keeping the first "
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


def _named(manager: AcceleratorManager, token: str, devices: Sequence[Device]) -> list[Device]:
    """The device with the token as its id, else every device the manager's ``matches`` finds:
    several when the token is ambiguous (a UUID prefix two devices share)."""
    exact = [d for d in devices if d.id == token]
    return exact or [d for d in devices if manager.matches(token, d)]


def _restrict(
    manager: AcceleratorManager,
    env: Mapping[str, str],
    devices: list[Device],
    passed_over: list[Device],
    tokens: Sequence[str],
) -> list[Device]:
    """The devices the visibility tokens name, renamed to the tokens, in the tokens' order, up to
    the first token that names no single detected device (see the module). ``passed_over`` are
    the detected devices the node leaves out (excluded, or not offered): the runtime still
    counts them, so a token is matched against them too (a UUID prefix one of them shares is
    ambiguous), and one naming them is passed over while taking an ordinal."""
    detected = [*devices, *passed_over]
    left_out = {d.id for d in passed_over}
    parents = {d.parent for d in detected if d.parent}
    visible: list[Device] = []
    taken: set[str] = set()
    ordinal = 0  # the runtime's ordinal of the next device the tokens name
    for position, token in enumerate(tokens):
        var = _naming(manager, env, token)
        named = _named(manager, token, detected)
        if not named and token in parents:
            note(
                f"{var} names {shown(token)}, a device whose partitions are listed in its "
                "place (a MIG-enabled GPU); leaving it out",
                "warning",
            )
            continue
        if len(named) != 1:
            note(_list_ends(var, token, named, tokens[position + 1 :]), "warning")
            break
        device = named[0]
        if device.id in taken:
            note(
                f"{var} names device {device.id} more than once ({token!r}); keeping the first",
                "warning",
            )
            continue
        taken.add(device.id)
        if device.id not in left_out:  # excluded or not offered on purpose: no surprise
            visible.append(device.replace(id=token, index=ordinal))
        ordinal += 1
    return visible


def _list_ends(var: str, token: str, named: Sequence[Device], rest: Sequence[str]) -> str:
    """The warning for the token that ends a visibility list, with every token it leaves out."""
    if named:
        what = f"which matches {len(named)} detected devices ({_listed([d.id for d in named])})"
    else:
        what = "which matches no detected device by id, UUID or index"
    return (
        f"{var} names {shown(token)}, {what}; the runtime stops reading the list there, leaving "
        f"out {_listed([token, *rest])} (name only devices this node has)"
    )


_LISTED = 8
"""How many tokens a message lists before it counts the rest."""


def _listed(tokens: Sequence[str]) -> str:
    """``'3', '5'``: tokens for a message, at most a few of them."""
    shown_tokens = ", ".join(shown(t) for t in tokens[:_LISTED])
    return shown_tokens if len(tokens) <= _LISTED else f"{shown_tokens} (+{len(tokens) - _LISTED})"


def _without_parent_ids(
    manager: AcceleratorManager,
    env: Mapping[str, str],
    visible: list[Device],
    detected: Sequence[Device],
) -> list[Device]:
    """The visible devices, less any that a token renamed to the id of a device whose partitions
    are listed in its place; the rest keep their ordinals (the runtime still counted the token).

    Tokens rename the devices they name, and a family's ``matches`` may let an index token reach
    a partition (the default does): ``ZETA_VISIBLE=0,3`` renamed partition "a" of card "0" to
    "0", its own parent's id, and the allocator then refused the whole node, since a partition's
    parent is never allocatable. Such a token names the partitioned device, which is never handed
    out (the rule NVIDIA's MIG-enabled GPUs follow, for every family), so what it reached is left
    out, with a warning.
    """
    parents = {d.parent for d in detected if d.parent}
    clashing = [d for d in visible if d.id in parents]
    for device in clashing:
        note(
            f"{_naming(manager, env, device.id)} names {shown(device.id)}, a device whose "
            "partitions are listed in its place, and the family's matching also reached another "
            "device by it; leaving it out (name partitions by their own ids)",
            "warning",
        )
    return [d for d in visible if d.id not in parents]


def _note_markers_among_ids(manager: AcceleratorManager, env: Mapping[str, str]) -> None:
    """Warn when one of the family's variables holds a "nothing visible" marker among ids
    (``TPU_VISIBLE_CHIPS=NoDevFiles,0``, what appending ids to a SLURM value gives): it means
    nothing visible only as the whole value; among ids it names no device, and the list ends
    there (:func:`accelkit.detect.split_ids`), so the ids after it are left out."""
    for name in variables_read(manager):
        tokens = [token.strip() for token in env.get(name, "").split(",")]
        marker = next((t for t in tokens if t and t in NOTHING_VISIBLE), None)
        if marker is not None and len(tokens) > 1:
            note(
                f"{name}={shown(env[name])} holds {marker!r} among ids; it means nothing "
                "visible only as the whole value, so the list ends there, leaving out the ids "
                f"after it (write the ids alone, or {marker!r} alone)",
                "warning",
            )


def _naming(manager: AcceleratorManager, env: Mapping[str, str], token: str = "") -> str:
    """The variable a message says names ``token``: the family's primary one where it is set,
    else the variables it reads that hold the token (Intel's ``ZE_AFFINITY_MASK`` names devices
    on its own)."""
    primary = manager.visible_devices_env_var
    if primary and primary in env:
        return primary
    holding = [n for n in variables_read(manager) if n in env and token in env[n]]
    return " and ".join(holding) or primary or "the visibility variable"
