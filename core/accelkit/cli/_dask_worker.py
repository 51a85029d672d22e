"""``accelkit dask-worker SCHEDULER_ADDRESS``: this node's accelerators as workers of a Dask
cluster, one worker process per device (or per ``--per-worker`` share) free in the node's
ledger, each seeing only its devices and advertising them as dask resources. Run it on every
node of a multi-node cluster, after ``dask scheduler`` on one of them.

The request (``--resource``, ``--per-worker``) is checked first, so a typo is reported as such, not
as a missing scheduler. A node without accelerators exits quietly (0) only when nothing was asked of
it: a ``--resource`` or ``--per-worker`` it cannot serve is an error there too. Then the scheduler
is asked (a connection, distributed's handshake and the names of its workers,
:data:`CONNECT_TIMEOUT` at most): a scheduler that is not running, a mistyped address, or a port
where something else listens (the dashboard's) is one line and an exit status, not a worker start
that fails after distributed's own 30 s connect timeout, or never. Worker names carry this process's
pid (see :func:`worker_prefix`), and a scheduler that already has workers of those names is one line
too.
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import sys
from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from accelkit.cli import EXIT_OK, describe, printable
from accelkit.cli._common import (
    add_ledger_option,
    host_from_args,
    open_ledger,
    process_text,
    quantity_argument,
)
from accelkit.schedule._grant import grant_text, shared_resources

if TYPE_CHECKING:
    from accelkit.ledger._ledger import Ledger

EXIT_BUSY = 75
"""Every device of the node is held by others (sysexits' EX_TEMPFAIL, as ``accelkit run``)."""

CONNECT_TIMEOUT = 5.0
"""Seconds the scheduler has to take a TCP connection before the verb says it is not there."""

STREAM_SCHEMES = ("tcp", "tls", "ws", "wss")
"""distributed's transports over a TCP connection to ``host:port``: the ones checked first."""


def register(verbs: Any, common: argparse.ArgumentParser) -> None:
    """Add the ``dask-worker`` verb."""
    parser = verbs.add_parser(
        "dask-worker",
        parents=[common],
        help="serve this node's accelerators to a Dask scheduler, one worker per device",
        description=(
            "Detect this node (or the snapshot given with --host) and start one dask worker "
            "process per device of each accelerator resource (or per --per-worker share of "
            "one), each with the environment of its grant and advertising it as resources "
            "(GPU=1 accelerator_type:H100=1). Submit with client.submit(f, resources={'GPU': 1}). "
            "Takes the devices free in the node's ledger when it starts (as `accelkit run` "
            "does; `accelkit ps` lists the workers' grants) and returns them when it stops. "
            "Needs accelkit[dask]. Stops when the scheduler closes or on SIGINT/SIGTERM."
        ),
        epilog=(
            f"Exit status: 0 once the workers stop (at once on a node without accelerators, "
            f"when neither --resource nor --per-worker is given); {EXIT_BUSY} when every device "
            "is held; 2 when the scheduler does not answer, or for a request the node cannot "
            "serve."
        ),
    )
    parser.add_argument("scheduler_address", metavar="SCHEDULER_ADDRESS", help="tcp://host:8786")
    parser.add_argument(
        "--resource",
        metavar="R",
        default=None,
        help="serve only this resource (GPU, neuron_cores, ...); default: every device resource",
    )
    parser.add_argument(
        "--per-worker",
        metavar="Q",
        type=quantity_argument,
        default=None,
        help="how much of the resource each worker holds: 1 (default), 2, 0.5 (two per device)",
    )
    add_ledger_option(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Check the request, then that the scheduler answers and knows none of this process's
    worker names; take the node's free slots from the ledger, say what each holds, and serve
    until stopped."""
    try:
        from accelkit.integrations.dask import run_workers, served_resources, worker_slots
    except ImportError as error:
        raise ValueError(
            f"dask-worker needs distributed: pip install 'accelkit[dask]' ({error})"
        ) from None
    ledger = open_ledger(args, host=host_from_args(args))
    if not ledger.node.devices and args.resource is None and args.per_worker is None:
        _say("this node has no accelerators to serve")  # a node of a cluster that has none
        return EXIT_OK
    per_worker = 1 if args.per_worker is None else args.per_worker
    served = served_resources(ledger.node, args.resource, per_worker)  # asked for: checked
    prefix = worker_prefix()
    taken = check_scheduler(args.scheduler_address)
    _check_names_free(args.scheduler_address, prefix, served, taken)
    slots = worker_slots(ledger, args.resource, per_worker, prefix=prefix)
    if not slots:
        _say(f"nothing to serve: {_holders(ledger)}; `accelkit ps` lists them")
        return EXIT_BUSY
    for slot in slots:
        seen = " ".join(f"{var}={value}" for var, value in slot.env.items())
        print(f"{slot.name}: {slot.resources} {seen}", file=sys.stderr, flush=True)
    import asyncio  # here, not at the top: `accelkit --help` imports every verb's module

    try:
        asyncio.run(run_workers(args.scheduler_address, slots))
    except RuntimeError as error:  # distributed's "Nanny failed to start." over the real cause
        if not isinstance(error.__cause__, OSError):
            raise
        raise ValueError(
            f"the workers could not join the scheduler at {args.scheduler_address}: "
            f"{describe(error.__cause__)}"
        ) from None
    return EXIT_OK


def worker_prefix() -> str:
    """``<hostname>-<pid>-``: what this process's worker names start with. The pid keeps them
    apart from those of another ``dask-worker`` on this node (the scheduler refuses a second
    worker of the same name), one that took the devices an earlier one left free included."""
    return f"{socket.gethostname()}-{os.getpid()}-"


def _check_names_free(
    address: str, prefix: str, served: Collection[str], taken: Collection[object]
) -> None:
    """``ValueError`` when the scheduler has a worker named as ours would be
    (``<prefix><resource>-<n>``, a resource we serve): ours would be refused as duplicates (a
    former process of this pid that the scheduler still lists, or a host of the same name).
    Whole names are compared: host ``w`` of pid 1 is not host ``w-1``'s process 4242."""
    ours = re.compile(f"{re.escape(prefix)}(?:{'|'.join(map(re.escape, served))})-[0-9]+")
    clashes = sorted(str(name) for name in taken if ours.fullmatch(str(name)))
    if clashes:
        raise ValueError(
            f"the scheduler at {address} already has workers named {', '.join(clashes)}, as this "
            f"process would name its own: stop those workers, or wait until the scheduler "
            "drops them, and start again"
        )


def check_scheduler(address: str, timeout: float = CONNECT_TIMEOUT) -> list[object]:
    """The names of the workers the scheduler at ``address`` has; ``ValueError`` unless a Dask
    server answers there within ``timeout`` seconds: first a TCP connection (refused at once
    when nothing listens), then distributed's own handshake and its ``identity`` call, with the
    TLS settings the workers will use from Dask's configuration (transports other than TCP are
    left to distributed, and answer no names)."""
    import asyncio

    from distributed.comm import connect
    from distributed.comm.addressing import parse_address, parse_host_port
    from distributed.security import Security

    scheme, location = parse_address(address)
    if scheme not in STREAM_SCHEMES:
        return []
    try:
        host, port = parse_host_port(location)
    except ValueError as error:
        raise ValueError(
            f"{address!r} is not a scheduler address ({error}): give the one `dask scheduler` "
            "prints, e.g. tcp://node0:8786"
        ) from None
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as error:
        if isinstance(error, socket.timeout):
            reason = f"no answer within {timeout:g} s"
        else:
            reason = error.strerror or str(error)
        raise ValueError(
            f"no Dask scheduler answers at {address} ({reason}): start `dask scheduler` there "
            "first, or give the address it prints"
        ) from None

    async def handshake() -> Any:
        security = Security().get_connection_args("worker")
        comm = await connect(address, timeout=timeout, **security)
        try:
            await comm.write({"op": "identity", "reply": True})
            return await comm.read()
        finally:
            await comm.close()

    try:
        identity = asyncio.run(asyncio.wait_for(handshake(), timeout))
    except Exception as error:  # whatever a server that is not Dask's makes distributed raise
        if isinstance(error, asyncio.TimeoutError):
            reason = f"no handshake within {timeout:g} s"
        elif isinstance(error, OSError):
            reason = describe(error)
        else:
            reason = "it does not speak Dask's protocol"
        raise ValueError(
            f"{address} answers, but not as a Dask scheduler ({reason}): give the address "
            "`dask scheduler` prints (its port, 8786 by default; not the dashboard's)"
        ) from None
    workers = identity.get("workers") if isinstance(identity, dict) else None
    if not isinstance(workers, dict):
        return []
    return [w.get("name") for w in workers.values() if isinstance(w, dict)]


def _holders(ledger: Ledger) -> str:
    """``GPU 0,1 held by pid 41 (sleep 60); ...``: who holds the node's devices."""
    view = ledger.view()
    shared = shared_resources(ledger.node.devices)
    held = [
        f"{grant_text(h.grant, shared)} held by {process_text(h.holder)}" for h in view.holdings
    ]
    if view.waiting:
        held.append(f"{len(view.waiting)} waiting request(s) come first")
    return printable("; ".join(held)) or "every device is held"  # others' grants' text


def _say(message: str) -> None:
    print(f"accelkit dask-worker: {message}", file=sys.stderr, flush=True)
