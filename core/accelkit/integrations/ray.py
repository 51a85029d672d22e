"""Ray tasks and actors for any accelkit family, third-party ones included, with no Ray change.

Ray assigns device ids only for the families it knows (``ray._private.accelerators``). For the
others, :func:`remote` lets Ray count the family's resource as a custom resource (offered by
``ray start $(accelkit resources --format ray)``) and, inside the worker process, takes the ids
from the node's :class:`~accelkit.ledger.Ledger` (the one ``accelkit run`` and the pool use),
sets the family's environment before the user's code runs, and gives the grant back at the end.
Tasks run one call per worker process (``max_calls=1``), so a framework never keeps a device
it was given for an earlier call. Resources Ray knows (``GPU``, ``TPU``, ``neuron_cores``, ...)
stay Ray's: Ray picks their ids and sets their variables, and the ledger does not count them.

The workers find the ledger as every accelkit process does (``$ACCELKIT_LEDGER``, else the
per-user default) and detect the node themselves (``ACCELKIT_OVERRIDE_RESOURCES`` applies), with
the visibility variables Ray narrows lifted: a worker of ``{"GPU": 1, "ACME": 1}`` sees one GPU
through ``CUDA_VISIBLE_DEVICES``, but the ledger is the physical node's, the same one the driver,
``accelkit run`` and the other workers meet (and an override of ``GPU=8`` is no contradiction
there).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Callable, Optional

import ray
from ray._private.accelerators import (
    get_all_accelerator_managers,
    get_all_accelerator_resource_names,
)

from accelkit.host import HostView, LocalHost
from accelkit.ledger._ledger import Ledger
from accelkit.manager import ACCELERATOR_TYPE_PREFIX
from accelkit.schedule._worker_env import apply_env

if TYPE_CHECKING:
    from accelkit.host._base import ProbeEnv, ProbeFunction

__all__ = ["remote", "split_request"]

GRANT_TIMEOUT = 60.0
"""Seconds a worker waits for the ledger when Ray has already counted the resource for it: a
grant is then only briefly in the way (a finished call releasing, ``accelkit run`` holding)."""


def split_request(
    resources: Mapping[str, float],
) -> tuple[dict[str, Any], dict[str, float], Optional[str]]:
    """``resources`` as Ray options, the part the ledger grants, and its accelerator type.

    ``{"GPU": 1, "ACME": 1, "accelerator_type:X": 0.001}`` -> ``({"num_gpus": 1, "resources":
    {"ACME": 1, "accelerator_type:X": 0.001}}, {"ACME": 1}, "X")``.
    """
    known = get_all_accelerator_resource_names()
    ray_resources = {name: value for name, value in resources.items() if name != "GPU"}
    options: dict[str, Any] = {"resources": ray_resources} if ray_resources else {}
    if "GPU" in resources:
        options["num_gpus"] = resources["GPU"]
    ledger = {
        name: value
        for name, value in resources.items()
        if name not in known and not name.startswith(ACCELERATOR_TYPE_PREFIX)
    }
    types = [
        n[len(ACCELERATOR_TYPE_PREFIX) :]
        for n in resources
        if n.startswith(ACCELERATOR_TYPE_PREFIX)
    ]
    if len(types) > 1:
        raise ValueError(f"one accelerator type per request, not {types}")
    return options, ledger, types[0] if types and ledger else None


def remote(
    function_or_class: Optional[Any] = None,
    *,
    resources: Optional[Mapping[str, float]] = None,
    **ray_options: Any,
) -> Any:
    """``ray.remote`` for a function or class whose ``resources`` may name any accelkit family.

    Use as ``remote(f, resources={"ACME": 1})`` or as a decorator ``@remote(resources=...)``.
    Other keywords are Ray's options. A task takes its grant when it starts and releases it when
    it returns; an actor takes it in its constructor and holds it for its life (the ledger
    reclaims it when the actor's process ends).
    """
    if function_or_class is None:
        return functools.partial(remote, resources=resources, **ray_options)
    options, request, accelerator_type = split_request(dict(resources or {}))
    options.update(ray_options)
    if not request:
        return ray.remote(**options)(function_or_class)
    if isinstance(function_or_class, type):
        return ray.remote(**options)(_actor(function_or_class, request, accelerator_type))
    options.setdefault("max_calls", 1)
    return ray.remote(**options)(_task(function_or_class, request, accelerator_type))


def _task(
    function: Callable[..., Any], request: dict[str, float], accelerator_type: Optional[str]
) -> Callable[..., Any]:
    """``function`` run with a ledger grant of ``request`` held and its environment applied."""

    @functools.wraps(function)
    def with_grant(*args: Any, **kwargs: Any) -> Any:
        ledger = _node_ledger()
        grant = _take(ledger, request, accelerator_type)
        try:
            return function(*args, **kwargs)
        finally:
            ledger.release(grant)

    return with_grant


def _actor(cls: type, request: dict[str, float], accelerator_type: Optional[str]) -> type:
    """A subclass of ``cls`` whose constructor first takes the grant and applies its env."""

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        _take(_node_ledger(), request, accelerator_type)
        cls.__init__(self, *args, **kwargs)  # type: ignore[misc]

    return type(cls.__name__, (cls,), {"__init__": __init__, "__module__": cls.__module__})


def _node_ledger() -> Ledger:
    """The node's ledger, seen from this worker as if Ray had not narrowed it.

    Ray sets its families' variables in each worker to that worker's share
    (``CUDA_VISIBLE_DEVICES=1``). Seen through them, the worker would be a process restricted to
    that share: an override the operator sized for the whole node would contradict them, and a
    node the configuration makes up (logical devices) would be a smaller one than the driver's.
    Without them, every worker meets the ledger the driver and ``accelkit run`` meet.
    """
    return Ledger(None, host=_BeforeRay())


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


def _take(ledger: Ledger, request: dict[str, float], accelerator_type: Optional[str]) -> Any:
    """A grant of ``request`` from the node's ledger, its environment applied to this process."""
    grant = ledger.acquire(
        request, wait=True, timeout=GRANT_TIMEOUT, accelerator_type=accelerator_type
    )
    if grant is None:
        raise TimeoutError(
            f"Ray scheduled this worker for {request}, but the node's ledger {ledger.path} had "
            f"no room for {GRANT_TIMEOUT:g} s: is the Ray node's resource larger than the "
            "node (compare `accelkit resources --format ray`), or is `accelkit run` holding it?"
        )
    apply_env(ledger.env(grant), os.environ)  # accelkit inside the task takes steps of it
    return grant
