"""Dask workers for any accelkit family: one worker process per device or fractional slot.

Each worker holds one grant of the node, taken from the node's :class:`~accelkit.ledger.Ledger`
(the one ``accelkit run``, the pool and the Ray bridge use), so Dask never starts a worker on a
device another path holds, and ``accelkit ps`` lists the workers' grants. distributed's ``Nanny``
starts its worker process with the grant's variables in ``env`` (set in that process before the
worker is built, so before any task imports a framework), and the worker advertises the grant as
dask resources (``{"GPU": 1, "accelerator_type:H100": 1}``), so
``client.submit(f, resources={"GPU": 1})`` runs where a device is. A ``Nanny`` can only set
variables; the variables a grant must leave unset are removed by :class:`GrantWorker` at the
same point.

Who holds the grants: the process the nannies run in (the cluster's, or ``accelkit
dask-worker``'s), not the worker processes, because that is the process whose life bounds the
devices' use. A nanny restarts a worker process that dies, on the same devices, so a grant
held by the worker process would return while the restarted worker uses it; and every worker
process ends as soon as its nanny's process does (distributed's ``AsyncProcess`` exits a child
whose parent is gone), so after a kill -9 of the nannies' process the ledger's next decision
reclaims grants nobody uses any more. A nanny that closes (the cluster closing or scaling
down, ``dask-worker`` stopping) gives its grant back at once (:class:`GrantNanny`).

:class:`LocalAcceleratorCluster` is a ``LocalCluster`` of such workers on this machine;
:func:`run_workers` (``accelkit dask-worker SCHEDULER_ADDRESS``) joins them to a cluster's
scheduler from each node of a multi-node cluster.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import signal
from collections.abc import Sequence
from dataclasses import dataclass
from numbers import Real
from typing import TYPE_CHECKING, Any, Optional

from distributed import LocalCluster, Nanny, Worker
from distributed.worker_memory import parse_memory_limit

from accelkit.errors import InvalidRequest, Unsatisfiable
from accelkit.ledger._ledger import Ledger
from accelkit.manager import ACCELERATOR_TYPE_PREFIX
from accelkit.quantities import as_float, shown_quantity, to_units
from accelkit.schedule._request import validate_request

if TYPE_CHECKING:
    from accelkit.node._record import Node
    from accelkit.schedule._grant import Grant

_LOG = logging.getLogger(__name__)

__all__ = [
    "GrantNanny",
    "GrantWorker",
    "LocalAcceleratorCluster",
    "WorkerSlot",
    "run_workers",
    "served_resources",
    "worker_slots",
]


class GrantWorker(Worker):  # type: ignore[misc]
    """A dask ``Worker`` that first unsets the variables its grant must leave unset.

    Built in the worker process right after the nanny applied ``env`` and before any task runs;
    ``unset_env`` reaches it through the nanny's worker options.
    """

    def __init__(self, *args: Any, unset_env: Sequence[str] = (), **kwargs: Any) -> None:
        for name in unset_env:
            os.environ.pop(name, None)
        super().__init__(*args, **kwargs)


class GrantNanny(Nanny):  # type: ignore[misc]
    """A dask ``Nanny`` that gives its worker's grant back to the node's ledger when it closes.

    It runs in the process that holds the grant (see the module's docstring), which the ledger
    records as the holder; ``ledger`` and ``grant`` reach it through the worker spec's options.
    """

    def __init__(self, *args: Any, ledger: Ledger, grant: Grant, **kwargs: Any) -> None:
        self.ledger = ledger
        self.grant = grant
        super().__init__(*args, **kwargs)

    async def close(self, *args: Any, **kwargs: Any) -> Any:
        """Close as a ``Nanny`` does (its worker process first), then return the grant."""
        try:
            return await super().close(*args, **kwargs)
        finally:
            self.ledger.discard(self.grant)


@dataclass(frozen=True)
class WorkerSlot:
    """One worker's share of the node: its grant (held in ``ledger`` by this process), its
    environment and its dask resources."""

    name: str
    grant: Grant
    ledger: Ledger
    env: dict[str, str]
    unset: tuple[str, ...]
    resources: dict[str, float]

    def nanny_options(self) -> dict[str, Any]:
        """The :class:`GrantNanny` keywords that start this slot's worker."""
        return {
            "name": self.name,
            "env": self.env,
            "resources": self.resources,
            "worker_class": GrantWorker,
            "unset_env": self.unset,
            "ledger": self.ledger,
            "grant": self.grant,
        }


def served_resources(
    node: Node, resource: Optional[str] = None, per_worker: object = 1
) -> list[str]:
    """The resources whose workers would hold ``per_worker`` each on ``node`` (``resource``, or
    every device resource of the node when None), checked without taking anything, so that a
    mistyped resource or share is reported before a scheduler is asked or a grant taken.

    ``ValueError`` for a resource the node has no devices of (any, when None);
    :class:`~accelkit.InvalidRequest` for a share that is not positive, or that a family does not
    grant; :class:`~accelkit.Unsatisfiable` when no served resource could ever give that share.
    """
    offered = list(dict.fromkeys(d.resource_name for d in node.devices))
    if resource is not None and resource not in offered:
        raise ValueError(
            f"this node has no devices of resource {resource!r}; it has {offered or 'none'}"
        )
    _check_share(per_worker)
    if not offered:
        raise ValueError(
            f"this node has no accelerator devices: no worker can hold "
            f"{shown_quantity(per_worker)} of one"
        )
    names = offered if resource is None else [resource]
    served: list[str] = []
    refused: list[Exception] = []
    for name in names:
        try:
            validate_request({name: per_worker}, node)
        except (Unsatisfiable, InvalidRequest) as error:  # left out of "every resource":
            refused.append(error)  # those that cannot give it (neuron_cores=0.5) serve none
        else:
            served.append(name)
    if not served:
        raise refused[0]
    return served


def _check_share(per_worker: object) -> None:
    """:class:`~accelkit.InvalidRequest` unless ``per_worker`` is a quantity above 0: a worker
    that holds nothing would serve no device (and the node would have endless such slots)."""
    if _at_most_zero(per_worker) or to_units(per_worker, what="per_worker") == 0:
        raise InvalidRequest(
            f"per_worker {shown_quantity(per_worker)} gives a worker no device: ask for a "
            "fraction from 0.0001 to 1, or a whole number of devices per worker"
        )


def _at_most_zero(value: object) -> bool:
    """Whether ``value`` is a real number (not a bool) of 0 or less; NaN is not."""
    return isinstance(value, Real) and not isinstance(value, bool) and value <= 0


def worker_slots(
    ledger: Ledger,
    resource: Optional[str] = None,
    per_worker: object = 1,
    *,
    prefix: str = "",
) -> list[WorkerSlot]:
    """Grants of ``per_worker`` of ``resource`` (None: of every device resource of the node),
    as many as ``ledger`` can give now, held by this process until each slot's
    :class:`GrantNanny` closes, each with its worker's environment and resources. Empty when
    every device is held, or the node has none.

    A worker sees only its grant's devices: the node's other families are hidden from it, and
    accelkit inside it (``accelkit run``, a pool) takes steps of its grant. Workers are named
    ``<prefix><resource>-<n>``, numbered from 0: a ``prefix`` unique to the calling process
    keeps the names of two processes on one scheduler apart. Each grant's note in the ledger is
    ``dask worker <name>`` (what ``accelkit ps`` shows). Raises what :func:`served_resources`
    raises, and :class:`~accelkit.Unsatisfiable` for a share this process can never take
    (larger than the grant it runs on) of every resource it serves.
    """
    names = served_resources(ledger.node, resource, per_worker)
    share = as_float(per_worker, what="per_worker")
    slots: list[WorkerSlot] = []
    refused: list[Unsatisfiable] = []
    try:
        for name in names:
            try:
                for number in itertools.count():
                    worker = f"{prefix}{name}-{number}"
                    grant = ledger.acquire({name: per_worker}, note=f"dask worker {worker}")
                    if grant is None:
                        break
                    slots.append(_slot(worker, name, share, grant, ledger))
            except Unsatisfiable as error:  # serving every resource: those this process can
                refused.append(error)  # never take (not in the grant it runs on) are left out
        if refused and len(refused) == len(names):
            raise refused[0]
    except BaseException:
        _release(slots)
        raise
    return slots


def _release(slots: Sequence[WorkerSlot]) -> None:
    """Give the slots' grants back (those their nannies returned already are skipped)."""
    for slot in slots:
        slot.ledger.discard(slot.grant)


def _slot(name: str, resource: str, share: float, grant: Grant, ledger: Ledger) -> WorkerSlot:
    """The worker slot of ``grant``: its variables to set and unset, its dask resources. The
    worker advertises ``share`` of ``resource``, the share as it was asked for, not the grant's
    amount: the ledger floors 1/3 to 0.3333, and Dask, which compares floats (``supplied >=
    required``), would never run a task asking for 1/3 on a worker offering 0.3333."""
    env = ledger.env(grant, hide_others=True)
    types = {d.type_label for d, _share in grant.devices if d.type_label}
    return WorkerSlot(
        name=name,
        grant=grant,
        ledger=ledger,
        env={var: value for var, value in env.items() if value is not None},
        unset=tuple(var for var, value in env.items() if value is None),
        resources={
            resource: share,
            **{ACCELERATOR_TYPE_PREFIX + label: 1.0 for label in sorted(types)},
        },
    )


def _nothing_free(ledger: Ledger, resource: Optional[str]) -> str:
    """Why no slot could be taken although the node has devices: who holds them, who waits."""
    view = ledger.view()
    pids = sorted({h.holder.pid for h in view.holdings})
    why = [f"held by pid {', '.join(map(str, pids))}"] if pids else []
    if view.waiting:
        why.append(f"{len(view.waiting)} waiting request(s) come first")
    return (
        f"no {resource or 'accelerator device'} of this node is free in the ledger "
        f"{ledger.path} ({'; '.join(why)}; `accelkit ps` lists them): Dask workers take the "
        "devices free when they start, so start them when some are"
    )


class LocalAcceleratorCluster(LocalCluster):  # type: ignore[misc]
    """A real ``distributed`` cluster on this machine with one worker process per slot of the
    node (per device, or per ``per_worker`` share of one) that is free in the node's ledger
    when it starts, each started with its grant's environment and advertising its resources.

    ``node`` None detects this machine; ``resource`` None serves every device resource.
    ``ledger`` None: the node's default ledger, the one ``accelkit run`` uses (a given ledger
    brings its own node). Other keywords go to ``LocalCluster`` (``dashboard_address``,
    ``asynchronous``, ...); each worker has one thread unless ``threads_per_worker`` says
    otherwise. The workers are the slots free at the start, so the cluster does not grow; it
    gives each worker's devices back when the worker's nanny closes (scaling down, closing).
    ``RuntimeError`` when the node's devices are all held (the message names the holders).
    """

    def __init__(
        self,
        node: Optional[Node] = None,
        resource: Optional[str] = None,
        per_worker: object = 1,
        *,
        ledger: Optional[Ledger] = None,
        **local_cluster_kwargs: Any,
    ) -> None:
        for fixed in ("n_workers", "processes", "worker_class"):
            if fixed in local_cluster_kwargs:
                raise TypeError(
                    f"LocalAcceleratorCluster starts one worker process per slot of the node; "
                    f"{fixed}= cannot be given"
                )
        if ledger is not None and node is not None:
            raise TypeError("give node= or ledger=, not both: a ledger hands out its own node")
        self.ledger = Ledger(None, node) if ledger is None else ledger
        self.node = self.ledger.node
        if not self.node.devices:
            raise ValueError(
                "this node has no accelerator devices to start workers for; pass node= (e.g. "
                "detect_node(overrides={'GPU': 2})) or use distributed.LocalCluster"
            )
        self.slots = worker_slots(self.ledger, resource, per_worker)
        if not self.slots:
            raise RuntimeError(_nothing_free(self.ledger, resource))
        local_cluster_kwargs.setdefault("threads_per_worker", 1)
        local_cluster_kwargs.setdefault(
            "memory_limit", parse_memory_limit("auto", 1, max(1, len(self.slots)), logger=_LOG)
        )
        try:
            super().__init__(
                n_workers=0, processes=True, worker_class=GrantNanny, **local_cluster_kwargs
            )
        except BaseException:
            _release(self.slots)
            raise

    async def _start(self) -> None:
        """Put one worker per slot in the spec before the cluster starts its workers."""
        for slot in self.slots:
            options = {**self.new_spec["options"], **slot.nanny_options()}
            self.worker_spec[slot.name] = {"cls": self.new_spec["cls"], "options": options}
        await super()._start()

    async def _close(self) -> None:
        """Close as a ``LocalCluster`` does (each nanny returns its grant), then return the
        grants of slots whose nanny never started."""
        try:
            await super()._close()
        finally:
            _release(self.slots)

    def new_worker_spec(self) -> dict[str, Any]:
        """Refuse to add a worker: every slot free at the start has one already."""
        raise ValueError(
            f"a LocalAcceleratorCluster has one worker per slot that was free when it started "
            f"({len(self.slots)}); it cannot add workers"
        )


async def run_workers(
    scheduler_address: str, slots: Sequence[WorkerSlot], **nanny_kwargs: Any
) -> None:
    """Start one nanny per slot against ``scheduler_address`` and serve until the scheduler
    closes them, or SIGINT/SIGTERM closes them here; every slot's grant is returned at the
    end."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for number in (signal.SIGINT, signal.SIGTERM):  # before any worker can be seen: a stop
        loop.add_signal_handler(number, stop.set)  # sent as soon as one joins closes them all
    nannies = [
        GrantNanny(scheduler_address, nthreads=1, **{**nanny_kwargs, **slot.nanny_options()})
        for slot in slots
    ]
    try:
        await asyncio.gather(*nannies)
        finished = asyncio.ensure_future(asyncio.gather(*(n.finished() for n in nannies)))
        stopping = asyncio.ensure_future(stop.wait())
        await asyncio.wait([finished, stopping], return_when=asyncio.FIRST_COMPLETED)
        stopping.cancel()
        await asyncio.gather(*(n.close() for n in nannies))
        await finished
    finally:
        _release(slots)
