"""Ray tasks and actors for any accelkit family, third-party ones included, with no Ray change.

Ray reserves resources and assigns device ids only for the resources its accelerator managers
know (``ray._private.accelerators``: ``GPU``, ``TPU``, ``neuron_cores``, ...). :func:`remote`
wraps a function or class so that, inside the worker process and before the user's code runs,
whatever Ray reserved for that worker becomes visible, from Ray's own accounting of it
(``get_assigned_resources``, so ``.options()``, actors and placement groups are read as Ray
placed them):

- **Ids Ray assigned** (``GPU`` and the other resources it knows) stay Ray's. Ray writes them
  into its manager's variable (``CUDA_VISIBLE_DEVICES``, ``HIP_VISIBLE_DEVICES``, ...); a family
  of the node that does not read that variable (Moore Threads' ``MUSA_VISIBLE_DEVICES``) gets
  the same ids written into its own (:func:`ray_ids_env`). Ray is the only one counting them,
  so no device is handed out twice, by the bridge or by a plain ``ray.remote`` task beside it.
- **Resources of the node's other accelkit families** (``MLU``, ``ACME``) are custom resources
  to Ray, which counts them but picks no ids: those ids come from the node's
  :class:`~accelkit.ledger.Ledger` (the one ``accelkit run`` and the pool use), held for the call
  (:func:`ledger_request`). A type pin applies only to the family that has that type.
- **Anything else** (``my_license``, ``node:<ip>``) is Ray's alone.

A task that reserves anything beyond CPU and memory runs one call per worker process
(``max_calls=1``), so a framework never keeps a device it was given for an earlier call; a task
that reserves nothing else keeps Ray's worker reuse (a fresh process costs about half a second),
and a call that ``.options()`` gives devices leaves its worker's environment as it found it.

The workers find the ledger as every accelkit process does (``$ACCELKIT_LEDGER``, else the
per-user default) and detect the node themselves (``ACCELKIT_OVERRIDE_RESOURCES`` applies), with
the visibility variables Ray narrows lifted: a worker of ``{"GPU": 1, "ACME": 1}`` sees one GPU
through ``CUDA_VISIBLE_DEVICES``, but the node is the one ``accelkit resources --format ray``
described to ``ray start``, and the ledger is the physical node's, the same one the driver,
``accelkit run`` and the other workers meet.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
import warnings
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Callable, Optional

import ray
from ray._private.accelerators import (
    get_accelerator_manager_for_resource,
    get_all_accelerator_managers,
    get_all_accelerator_resource_names,
)

from accelkit.host import HostView, LocalHost
from accelkit.ledger._ledger import Ledger
from accelkit.manager import ACCELERATOR_TYPE_PREFIX
from accelkit.node._detect import detect_node
from accelkit.registry import resolve
from accelkit.registry._contract import variables_read
from accelkit.schedule._grant import Grant
from accelkit.schedule._request import FamilyDevices, Inventory
from accelkit.schedule._worker_env import apply_env

if TYPE_CHECKING:
    from accelkit.device import Device
    from accelkit.host._base import ProbeEnv, ProbeFunction
    from accelkit.manager import AcceleratorManager
    from accelkit.node._record import Node
    from accelkit.registry import Registry

__all__ = ["ledger_request", "ray_ids_env", "ray_remote_options", "remote"]

GRANT_TIMEOUT = 60.0
"""Seconds a worker waits for the ledger when Ray has already counted the resource for it: a
grant is then only briefly in the way (a finished call releasing, ``accelkit run`` holding)."""

RAY_ASSIGNS = frozenset(get_all_accelerator_resource_names())
"""Resources whose ids Ray assigns itself: never the ledger's."""

_RAY_ONLY = ("CPU", "memory", "object_store_memory")
"""Ray's own resources, which no accelkit family provides."""


def ray_remote_options(resources: Mapping[str, float]) -> dict[str, Any]:
    """``resources`` as ``ray.remote`` options: ``GPU`` is ``num_gpus`` (Ray refuses it inside
    ``resources``), the rest stays in ``resources``.

    ``{"GPU": 1, "MLU": 1}`` -> ``{"num_gpus": 1, "resources": {"MLU": 1}}``.
    """
    options: dict[str, Any] = {}
    if "GPU" in resources:
        options["num_gpus"] = resources["GPU"]
    custom = {name: value for name, value in resources.items() if name != "GPU"}
    if custom:
        options["resources"] = custom
    return options


def ledger_request(
    reserved: Mapping[str, float], node: Node
) -> tuple[dict[str, float], Optional[str]]:
    """The part of what Ray ``reserved`` for a worker that ``node``'s ledger grants, and the
    accelerator type that pins it.

    Only resources an accelkit family of ``node`` provides go to the ledger, and not those Ray
    assigns ids for itself (:data:`RAY_ASSIGNS`): ``{"GPU": 1, "MLU": 1, "my_license": 1,
    "accelerator_type:H100": 0.001}`` on a node with MLUs and H100s -> ``({"MLU": 1}, None)``:
    the H100 pin is Ray's GPU's, the license Ray's alone. A type pins the ledger's part only
    where one of its families has devices of that type; two such pins are a ``ValueError``.
    """
    inventory = Inventory(node)
    request = {
        name: amount
        for name, amount in reserved.items()
        if name in inventory.families and name not in RAY_ASSIGNS
    }
    pins = [
        name[len(ACCELERATOR_TYPE_PREFIX) :]
        for name in reserved
        if name.startswith(ACCELERATOR_TYPE_PREFIX)
    ]
    ledger_pins = [label for label in pins if any(inventory.constraint(n, label) for n in request)]
    if len(ledger_pins) > 1:
        raise ValueError(
            f"one accelerator type per ledger request, not {ledger_pins} for {request}: the "
            "node's ledger grants its families' devices of a single type"
        )
    return request, ledger_pins[0] if ledger_pins else None


def ray_ids_env(
    node: Node,
    ray_ids: Mapping[str, Sequence[str]],
    reserved: Mapping[str, float],
    ray_variables: Mapping[str, Optional[str]],
    *,
    registry: Optional[Registry] = None,
) -> dict[str, Optional[str]]:
    """The environment that shows a family of ``node`` the ids Ray assigned for its resource,
    where the variable Ray wrote does not reach the family.

    ``ray_ids`` are Ray's ids by resource (``{"GPU": ["3"]}``), ``reserved`` the amounts Ray
    reserved, ``ray_variables`` the variable Ray's manager wrote for each resource. A family
    that reads that variable (NVIDIA, or AMD reading ``HIP_VISIBLE_DEVICES``) needs nothing
    more. Another (Moore Threads' ``MUSA_VISIBLE_DEVICES``) gets Ray's ids translated: Ray counts
    the node's ``--num-gpus`` as ids 0 to N-1, so id k is the family's k-th device in index order,
    the order ``to_ray`` counted. A resource that several families share on the node is left as
    Ray set it, with a warning: which family's device an id means is not known.
    """
    plugins = resolve(registry)
    inventory = Inventory(node, registry=plugins)
    devices: list[tuple[Device, float]] = []
    resources: dict[str, float] = {}
    for name, ids in ray_ids.items():
        families = inventory.families.get(name, [])
        managers = [plugins.get_manager(f.policy.name) for f in families]
        if all(_reads(m, ray_variables.get(name)) for m in managers):
            continue
        if len(families) > 1:
            warnings.warn(
                f"Ray assigned {name} ids {list(ids)} on a node where "
                f"{', '.join(m.name for m in managers)} share {name}: which family's devices "
                "they are is unknown, so only Ray's variable is set",
                RuntimeWarning,
                stacklevel=2,
            )
            continue
        amount = reserved.get(name, float(len(ids)))
        share = min(1.0, amount / len(ids))
        devices += [(_nth_device(families[0], name, ray_id), share) for ray_id in ids]
        resources[name] = amount
    if not devices:
        return {}
    grant = Grant(0, resources, devices, *_grant_context(node, inventory))
    return grant.env(registry=plugins)


def _reads(manager: AcceleratorManager, variable: Optional[str]) -> bool:
    """Whether the family's runtime reads ``variable`` (so Ray's narrowing reaches it)."""
    return variable is not None and variable in {
        manager.visible_devices_env_var,
        *variables_read(manager),
    }


def _nth_device(family: FamilyDevices, name: str, ray_id: str) -> Device:
    """The device Ray's id ``ray_id`` counts: the family's device at that position."""
    if not ray_id.isdigit() or int(ray_id) >= len(family.devices):
        raise ValueError(
            f"Ray assigned {name} id {ray_id!r}, which is no position among this node's "
            f"{family.describe()}: start Ray on this node with `ray start $(accelkit resources "
            "--format ray)` and without Ray's own visibility variable set"
        )
    return family.devices[int(ray_id)]


def _grant_context(node: Node, inventory: Inventory) -> tuple[tuple[str, ...], dict[str, int]]:
    """The node's families and their sizes, as a grant of this node carries them (what tells
    a family's variable to show all its devices from some)."""
    families = tuple(dict.fromkeys(d.family for d in node.devices))
    offered: dict[str, int] = {}
    for serving in inventory.families.values():
        for family in serving:
            offered[family.policy.name] = offered.get(family.policy.name, 0) + len(family.devices)
    return families, {name: node.detected.get(name) or count for name, count in offered.items()}


def remote(
    function_or_class: Optional[Any] = None,
    *,
    resources: Optional[Mapping[str, float]] = None,
    **ray_options: Any,
) -> Any:
    """``ray.remote`` for a function or class whose ``resources`` may name any accelkit family.

    Use as ``remote(f, resources={"ACME": 1})`` or as a decorator ``@remote(resources=...)``.
    Other keywords are Ray's options, and Ray's ``.options()`` works as with ``ray.remote``:
    the worker reads what Ray reserved for it. A task makes its devices visible when it starts
    and gives its ledger grant back when it returns (a generator task: when it is exhausted or
    closed); an actor does so in its constructor and holds them for its life (the ledger reclaims
    the grant when the actor's process ends). ``async def`` functions are refused, as Ray
    refuses them as tasks.
    """
    if function_or_class is None:
        return functools.partial(remote, resources=resources, **ray_options)
    options = {**ray_remote_options(resources or {}), **ray_options}
    if isinstance(function_or_class, type):
        return _ray_remote(_actor(function_or_class), options)
    if _reserves_devices(options):
        options.setdefault("max_calls", 1)
    return _ray_remote(_task(function_or_class), options)


def _ray_remote(function_or_class: Any, options: Mapping[str, Any]) -> Any:
    """``ray.remote`` applied with ``options``, or bare when there are none (Ray refuses
    ``ray.remote()`` with no arguments)."""
    return ray.remote(**options)(function_or_class) if options else ray.remote(function_or_class)


def _reserves_devices(options: Mapping[str, Any]) -> bool:
    """Whether Ray options reserve more than CPU and memory: GPUs, or custom resources."""
    return bool(options.get("num_gpus")) or _may_name_a_family(options.get("resources") or {})


def _task(function: Callable[..., Any]) -> Callable[..., Any]:
    """``function`` run with this worker's devices visible; a generator function stays one, so
    Ray streams it, and holds the devices until it finishes."""
    if inspect.iscoroutinefunction(function) or inspect.isasyncgenfunction(function):
        raise ValueError(
            f"{function.__qualname__} is an async def function, which Ray does not run as a "
            "task: wrap it in a def that calls asyncio.run(...), or make it an actor method"
        )
    if inspect.isgeneratorfunction(function):

        @functools.wraps(function)
        def generate_with_devices(*args: Any, **kwargs: Any) -> Iterator[Any]:
            with _reserved_devices():
                yield from function(*args, **kwargs)

        return generate_with_devices

    @functools.wraps(function)
    def call_with_devices(*args: Any, **kwargs: Any) -> Any:
        with _reserved_devices():
            return function(*args, **kwargs)

    return call_with_devices


def _actor(cls: type) -> type:
    """A subclass of ``cls`` whose constructor first makes the actor's devices visible."""

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        _show_reserved()
        cls.__init__(self, *args, **kwargs)  # type: ignore[misc]

    return type(cls.__name__, (cls,), {"__init__": __init__, "__module__": cls.__module__})


@contextlib.contextmanager
def _reserved_devices() -> Iterator[None]:
    """This worker's devices visible for the ``with`` block, its ledger grant given back after,
    and its environment as it was: a worker Ray reuses must not show the next call a device
    given back."""
    before = dict(os.environ)
    taken = _show_reserved()
    try:
        yield
    finally:
        if taken is not None:
            ledger, grant = taken
            ledger.release(grant)
        _restore(before)


def _restore(before: Mapping[str, str]) -> None:
    """Put ``os.environ`` back as ``before``, changing only what differs: Ray's own threads read
    the environment too, and must never see it empty."""
    for name in [name for name in os.environ if name not in before]:
        del os.environ[name]
    for name, value in before.items():
        if os.environ.get(name) != value:
            os.environ[name] = value


def _show_reserved() -> Optional[tuple[Ledger, Grant]]:
    """Make what Ray reserved for this worker visible in its environment: Ray's ids for the
    families its variables miss, ledger ids for the node's other families (the grant, returned
    with its ledger, is this process's until released or until the process ends)."""
    context = ray.get_runtime_context()
    reserved = context.get_assigned_resources()
    ray_ids = {name: ids for name, ids in context.get_accelerator_ids().items() if ids}
    variables = {name: _ray_variable(name) for name in ray_ids}
    custom = {name: amount for name, amount in reserved.items() if name not in RAY_ASSIGNS}
    if not _may_name_a_family(custom) and not _ray_misses_a_family(variables):
        return None  # Ray's own variables reach every family: nothing to detect the node for
    host = _BeforeRay()
    node = detect_node(host)
    _check_detected(reserved, node)
    translated = ray_ids_env(node, ray_ids, reserved, variables)
    request, accelerator_type = ledger_request(reserved, node)
    taken = None
    if request:
        ledger = Ledger(None, host=host)
        taken = ledger, _take(ledger, request, accelerator_type)
    apply_env(translated, os.environ)
    return taken


def _ray_misses_a_family(variables: Mapping[str, Optional[str]]) -> bool:
    """Whether a family registered here serves a resource Ray assigned ids for without reading
    the variable Ray wrote (Moore Threads' ``GPU``): only then is the node worth detecting for
    Ray's ids, which costs a task a tenth of a second or more."""
    return any(
        manager.resource_name in variables and not _reads(manager, variables[manager.resource_name])
        for manager in resolve(None).managers()
    )


def _check_detected(reserved: Mapping[str, float], node: Node) -> None:
    """Refuse to run a call whose reserved family this worker's detection did not find: Ray
    counted the devices, but nothing here can say which are the call's, and the call would
    see them all. A family whose plugin failed to load here is not even a manager: a custom
    resource that no loaded family serves may be that plugin's (``MLU`` when
    ``accelkit_cambricon`` does not import), so while a plugin is failing, such a call stops
    too, naming the plugin; with every plugin loaded, it is Ray's alone (``my_license``)."""
    plugins = resolve(None)
    families = Inventory(node).families
    missing = [
        manager
        for manager in plugins.managers()
        if manager.resource_name in reserved
        and manager.resource_name not in RAY_ASSIGNS
        and manager.resource_name not in families
    ]
    if missing:
        names = ", ".join(f"{m.resource_name} ({m.name})" for m in missing)
        why = "; ".join(
            d.message
            for d in node.diagnostics
            if d.level == "error" and d.family in {m.name for m in missing}
        )
        raise RuntimeError(
            f"Ray reserved {names} for this call, but detecting the node in its worker found "
            f"no such device{': ' + why if why else ''}; run `accelkit ls -v` on the node"
        )
    served = {manager.resource_name for manager in plugins.managers()}
    unserved = [
        name
        for name in reserved
        if _is_custom(name) and name not in RAY_ASSIGNS and name not in served
    ]
    failed = [info for info in plugins.report() if info.status == "error"]
    if unserved and failed:
        names = ", ".join(unserved)
        raise RuntimeError(
            f"Ray reserved {names} for this call, but no accelkit family loaded in its worker "
            f"serves it, and a plugin failed to load ({'; '.join(i.not_in_use() for i in failed)})"
            f". If {names} is that plugin's, nothing here can say which devices are the call's, "
            "and the call would see them all: fix the plugin (`accelkit plugins` on the node "
            f"says why), or, if {names} is not its, disable it (ACCELKIT_DISABLE_PLUGINS)"
        )


def _may_name_a_family(reserved: Mapping[str, float]) -> bool:
    """Whether ``reserved`` has a resource beyond Ray's own, node pins and type pins."""
    return any(_is_custom(name) for name in reserved)


def _is_custom(name: str) -> bool:
    """Whether ``name`` is a resource beyond Ray's own, node pins and type pins: one that an
    accelkit family may serve."""
    return (
        name not in _RAY_ONLY
        and not name.startswith("node:")
        and not name.startswith(ACCELERATOR_TYPE_PREFIX)
    )


def _ray_variable(resource: str) -> Optional[str]:
    """The variable Ray's manager for ``resource`` writes in this worker (which manager serves
    ``GPU`` Ray decides per node: AMD, Intel, Apple or MetaX where it finds them, else NVIDIA)."""
    manager = get_accelerator_manager_for_resource(resource)
    return None if manager is None else manager.get_visible_accelerator_ids_env_var()


class _BeforeRay(HostView):
    """This machine without the visibility variables Ray sets in its workers, for detection and
    for its probe processes (a vendor library there reads the real environment)."""

    def __init__(self) -> None:
        managers = get_all_accelerator_managers()
        narrowed = {m.get_visible_accelerator_ids_env_var() for m in managers} - {None}
        super().__init__(LocalHost(), [name for name in os.environ if name not in narrowed])
        self._unset: dict[str, Optional[str]] = dict.fromkeys(narrowed)

    def probe(
        self,
        function: ProbeFunction,
        *args: Any,
        timeout: Optional[float] = None,
        env: Optional[ProbeEnv] = None,
    ) -> Any:
        return self.inner.probe(
            function, *args, timeout=timeout, env={**self._unset, **(env or {})}
        )


def _take(ledger: Ledger, request: dict[str, float], accelerator_type: Optional[str]) -> Grant:
    """A grant of ``request`` from the node's ledger, its environment applied to this process."""
    grant = ledger.acquire(
        request, wait=True, timeout=GRANT_TIMEOUT, accelerator_type=accelerator_type
    )
    if grant is None:
        raise TimeoutError(
            f"Ray scheduled this worker for {request}, but the node's ledger {ledger.path} had "
            f"no room for {GRANT_TIMEOUT:g} s: is the Ray node's resource larger than the "
            "node (compare `accelkit resources --format ray`), is `accelkit run` holding it, "
            "or do fractions of one device not add up to it (Ray counts the resource as one "
            "pool, where five 0.4 shares fit in two devices; the ledger counts each device, "
            "where two do): ask for a fraction that divides one device (0.5, 0.25)"
        )
    apply_env(ledger.env(grant), os.environ)  # accelkit inside the task takes steps of it
    return grant
