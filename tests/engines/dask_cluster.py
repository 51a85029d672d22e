"""Run by test_dask.py as a process of its own: a real ``LocalAcceleratorCluster`` of the node
JSON ``argv[1]`` over the ledger at ``$ACCELKIT_LEDGER`` (the default one), on loopback. Prints
its workers as JSON (``{name: [pid, CUDA_VISIBLE_DEVICES]}``) when they are up, again for each
line read on stdin, and closes the cluster at the end of stdin.

A separate process, so that the tests can kill -9 it and its workers, as a user's would be."""

from __future__ import annotations

import json
import os
import sys
import time

from accelkit import Node
from accelkit.integrations.dask import LocalAcceleratorCluster
from distributed import Client


def facts() -> tuple[int, object]:
    """In a worker (sent by value: this is ``__main__``): its pid and visible GPUs."""
    return os.getpid(), os.environ.get("CUDA_VISIBLE_DEVICES")


def workers(client: Client, count: int) -> dict[str, object]:
    """Each worker's name, pid and visible GPUs, once ``count`` workers answer (a worker just
    killed may still be listed until the scheduler notices: ask again)."""
    deadline = time.monotonic() + 60
    while True:
        client.wait_for_workers(count, timeout=60)
        try:
            seen = client.run(facts)
        except OSError:
            seen = {}
        names = {a: w["name"] for a, w in client.scheduler_info()["workers"].items()}
        if len(seen) == count and set(seen) <= set(names):
            return {names[a]: seen[a] for a in seen}
        if time.monotonic() > deadline:
            raise TimeoutError(f"{count} workers never answered at once: {seen}")
        time.sleep(0.05)


def main(node_file: str) -> None:
    with open(node_file) as file:
        node = Node.from_dict(json.load(file))
    with (
        LocalAcceleratorCluster(node, dashboard_address=None, host="127.0.0.1") as cluster,
        Client(cluster) as client,
    ):
        print(json.dumps(workers(client, len(cluster.slots))), flush=True)
        for _line in sys.stdin:
            print(json.dumps(workers(client, len(cluster.slots))), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
