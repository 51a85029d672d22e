"""Dask workers for any accelkit family: one worker process per device or fractional slot.

Each worker holds one grant of the node. distributed's ``Nanny`` starts its worker process with
the grant's variables in ``env`` (set in that process before the worker is built, so before any
task imports a framework), and the worker advertises the grant as dask resources
(``{"GPU": 1, "accelerator_type:H100": 1}``), so ``client.submit(f, resources={"GPU": 1})`` runs
where a device is. A ``Nanny`` can only set variables; the variables a grant must leave unset
are removed by :class:`GrantWorker` at the same point.

:class:`LocalAcceleratorCluster` is a ``LocalCluster`` of such workers on this machine;
:func:`run_workers` (``accelkit dask-worker SCHEDULER_ADDRESS``) joins them to a cluster's
scheduler from each node of a multi-node cluster.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional

from distributed import LocalCluster, Nanny, Worker
from distributed.worker_memory import parse_memory_limit

from accelkit.manager import ACCELERATOR_TYPE_PREFIX
from accelkit.node._detect import detect_node
from accelkit.schedule._allocator import Allocator

if TYPE_CHECKING:
    from accelkit.node._record import Node
    from accelkit.registry import Registry
    from accelkit.schedule._grant import Grant

_LOG = logging.getLogger(__name__)

__all__ = ["GrantWorker", "LocalAcceleratorCluster", "WorkerSlot", "run_workers", "worker_slots"]


class GrantWorker(Worker):  # type: ignore[misc]
    """A dask ``Worker`` that first unsets the variables its grant must leave unset.

    Built in the worker process right after the nanny applied ``env`` and before any task runs;
    ``unset_env`` reaches it through the nanny's worker options.
    """

    def __init__(self, *args: Any, unset_env: Sequence[str] = (), **kwargs: Any) -> None:
        for name in unset_env:
            os.environ.pop(name, None)
        super().__init__(*args, **kwargs)


@dataclass(frozen=True)
class WorkerSlot:
    """One worker's share of the node: its grant, its environment and its dask resources."""

    name: str
    grant: Grant
    env: dict[str, str]
    unset: tuple[str, ...]
    resources: dict[str, float]

    def nanny_options(self) -> dict[str, Any]:
        """The ``Nanny`` keywords that start this slot's worker."""
        return {
            "name": self.name,
            "env": self.env,
            "resources": self.resources,
            "worker_class": GrantWorker,
            "unset_env": self.unset,
        }


def worker_slots(
    node: Node,
    resource: Optional[str] = None,
    per_worker: object = 1,
    *,
    prefix: str = "",
    registry: Optional[Registry] = None,
) -> list[WorkerSlot]:
    """Grants of ``per_worker`` of ``resource`` (None: of every device resource of the node),
    as many as the node holds, each with its worker's environment and resources.

    A worker sees only its grant's devices: the node's other families are hidden from it.
    ``ValueError`` for a resource the node has no devices of; the allocator's
    :class:`~accelkit.InvalidRequest` for a quantity the family does not grant.
    """
    offered = list(dict.fromkeys(d.resource_name for d in node.devices))
    if resource is not None and resource not in offered:
        raise ValueError(
            f"this node has no devices of resource {resource!r}; it has {offered or 'none'}"
        )
    allocator = Allocator(node, registry=registry)
    slots: list[WorkerSlot] = []
    for name in offered if resource is None else [resource]:
        grant = allocator.acquire({name: per_worker})
        number = 0
        while grant is not None:
            env = grant.env(hide_others=True, registry=registry)
            types = {d.type_label for d, _share in grant.devices if d.type_label}
            slots.append(
                WorkerSlot(
                    name=f"{prefix}{name}-{number}",
                    grant=grant,
                    env={var: value for var, value in env.items() if value is not None},
                    unset=tuple(var for var, value in env.items() if value is None),
                    resources={
                        name: grant.resources[name],
                        **{ACCELERATOR_TYPE_PREFIX + label: 1.0 for label in sorted(types)},
                    },
                )
            )
            grant = allocator.acquire({name: per_worker})
            number += 1
    return slots


class LocalAcceleratorCluster(LocalCluster):  # type: ignore[misc]
    """A real ``distributed`` cluster on this machine with one worker process per slot of the
    node (per device, or per ``per_worker`` share of one), each started with its grant's
    environment and advertising its resources.

    ``node`` None detects this machine; ``resource`` None serves every device resource.
    Other keywords go to ``LocalCluster`` (``dashboard_address``, ``asynchronous``, ...);
    each worker has one thread unless ``threads_per_worker`` says otherwise. The workers are
    the node's slots, so the cluster does not scale.
    """

    def __init__(
        self,
        node: Optional[Node] = None,
        resource: Optional[str] = None,
        per_worker: object = 1,
        **local_cluster_kwargs: Any,
    ) -> None:
        for fixed in ("n_workers", "processes", "worker_class"):
            if fixed in local_cluster_kwargs:
                raise TypeError(
                    f"LocalAcceleratorCluster starts one worker process per slot of the node; "
                    f"{fixed}= cannot be given"
                )
        self.node = detect_node() if node is None else node
        self.slots = worker_slots(self.node, resource, per_worker)
        if not self.slots:
            raise ValueError(
                "this node has no accelerator devices to start workers for; pass node= (e.g. "
                "detect_node(overrides={'GPU': 2})) or use distributed.LocalCluster"
            )
        local_cluster_kwargs.setdefault("threads_per_worker", 1)
        local_cluster_kwargs.setdefault(
            "memory_limit", parse_memory_limit("auto", 1, max(1, len(self.slots)), logger=_LOG)
        )
        super().__init__(n_workers=0, processes=True, worker_class=Nanny, **local_cluster_kwargs)

    async def _start(self) -> None:
        """Put one worker per slot in the spec before the cluster starts its workers."""
        for slot in self.slots:
            options = {**self.new_spec["options"], **slot.nanny_options()}
            self.worker_spec[slot.name] = {"cls": self.new_spec["cls"], "options": options}
        await super()._start()

    def new_worker_spec(self) -> dict[str, Any]:
        """Refuse to add a worker: every slot of the node has one already."""
        raise ValueError(
            f"a LocalAcceleratorCluster has one worker per slot of its node "
            f"({len(self.slots)}); it cannot add workers"
        )


async def run_workers(
    scheduler_address: str, slots: Sequence[WorkerSlot], **nanny_kwargs: Any
) -> None:
    """Start one nanny per slot against ``scheduler_address`` and serve until the scheduler
    closes them, or SIGINT/SIGTERM closes them here."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for number in (signal.SIGINT, signal.SIGTERM):  # before any worker can be seen: a stop
        loop.add_signal_handler(number, stop.set)  # sent as soon as one joins closes them all
    nannies = [
        Nanny(scheduler_address, nthreads=1, **{**nanny_kwargs, **slot.nanny_options()})
        for slot in slots
    ]
    await asyncio.gather(*nannies)
    finished = asyncio.ensure_future(asyncio.gather(*(n.finished() for n in nannies)))
    stopping = asyncio.ensure_future(stop.wait())
    await asyncio.wait([finished, stopping], return_when=asyncio.FIRST_COMPLETED)
    stopping.cancel()
    await asyncio.gather(*(n.close() for n in nannies))
    await finished
