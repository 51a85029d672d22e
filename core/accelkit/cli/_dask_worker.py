"""``accelkit dask-worker SCHEDULER_ADDRESS``: this node's accelerators as workers of a Dask
cluster, one worker process per device (or per ``--per-worker`` share), each seeing only its
devices and advertising them as dask resources. Run it on every node of a multi-node cluster,
after ``dask scheduler`` on one of them."""

from __future__ import annotations

import argparse
import socket
import sys
from typing import Any

from accelkit.cli import EXIT_OK
from accelkit.cli._common import host_from_args, quantity


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
            "Needs accelkit[dask]. Stops when the scheduler closes or on SIGINT/SIGTERM."
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
        type=quantity,
        default=1,
        help="how much of the resource each worker holds: 1 (default), 2, 0.5 (two per device)",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Plan the node's worker slots, say what each holds, and serve until stopped."""
    try:
        from accelkit.integrations.dask import run_workers, worker_slots
    except ImportError as error:
        raise ValueError(
            f"dask-worker needs distributed: pip install 'accelkit[dask]' ({error})"
        ) from None
    from accelkit.node._detect import detect_node

    node = detect_node(host_from_args(args))
    slots = worker_slots(node, args.resource, args.per_worker, prefix=f"{socket.gethostname()}-")
    if not slots:
        print("accelkit dask-worker: this node has no accelerators to serve", file=sys.stderr)
        return EXIT_OK
    for slot in slots:
        seen = " ".join(f"{var}={value}" for var, value in slot.env.items())
        print(f"{slot.name}: {slot.resources} {seen}", file=sys.stderr, flush=True)
    import asyncio  # only here: it costs more than the rest of the CLI's start together

    asyncio.run(run_workers(args.scheduler_address, slots))
    return EXIT_OK
