"""Run inside a loopback-only network namespace by test_ray.py: a real Ray node started with
``to_ray``'s resources runs ``accelkit.integrations.ray.remote`` tasks and an actor of the
example plugin's ACME family, which Ray has never heard of; prints what they saw as JSON.

The node is this machine with ``ACCELKIT_OVERRIDE_RESOURCES={"GPU": 2, "ACME": 2}`` (set by the
test), so the driver and every Ray worker detect the same two GPUs and two ACME cards and share the
ledger at ``$ACCELKIT_LEDGER``. A task asking for both gets its GPU from Ray (which narrows
``CUDA_VISIBLE_DEVICES`` in its worker) and its card from the ledger. The Ray node also has a
license (``my_license``) and an ``accelerator_type:H100``, which are Ray's alone: tasks asking for
them beside a card still get the card.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import ray
from accelkit import detect_node
from accelkit.exports import to_ray
from accelkit.integrations.ray import remote
from accelkit.ledger._ledger import Ledger
from ray._private.utils import parse_resources_json
from ray.autoscaler._private.cli_logger import cf, cli_logger
from ray.scripts.scripts import start


def meet(barrier: str, parties: int) -> dict[str, object]:
    """Wait until ``parties`` tasks are running at once, then report this one's view."""
    Path(barrier, str(os.getpid())).touch()
    deadline = time.monotonic() + 60
    while len(os.listdir(barrier)) < parties:
        if time.monotonic() > deadline:
            raise TimeoutError("the tasks never ran at the same time")
        time.sleep(0.05)
    return {
        "pid": os.getpid(),
        "acme": os.environ.get("ACME_VISIBLE_DEVICES"),
        "cuda": os.environ.get("CUDA_VISIBLE_DEVICES"),
    }


def sees() -> dict[str, object]:
    """This task's card, and how many grants the ledger holds while it runs."""
    return {"acme": os.environ.get("ACME_VISIBLE_DEVICES"), "held": len(Ledger().grants())}


def stream(count: int) -> Iterator[dict[str, object]]:
    """A generator task: what it sees at each item."""
    for _ in range(count):
        yield sees()


class Holder:
    """An actor that keeps its ACME cards for its life."""

    def acme(self) -> object:
        return os.environ.get("ACME_VISIBLE_DEVICES")


def main(workdir: str) -> None:
    params = start.make_context("start", ["--head", *to_ray(detect_node())]).params
    resources = parse_resources_json(params["resources"], cli_logger, cf)
    ray.init(
        num_cpus=2,
        num_gpus=params["num_gpus"],
        resources={**resources, "my_license": 1, "accelerator_type:H100": 1},
        include_dashboard=False,
        _node_ip_address="127.0.0.1",
        log_to_driver=False,
    )
    try:
        task = remote(meet, resources={"ACME": 1})
        first = ray.get([task.remote(f"{workdir}/first", 2) for _ in range(2)])
        held_after_tasks = len(Ledger().grants())
        holder = remote(Holder, resources={"ACME": 1}).remote()
        actor_sees = ray.get(holder.acme.remote())
        beside_actor = ray.get(task.remote(f"{workdir}/second", 1))
        held_with_actor = len(Ledger().grants())
        ray.kill(holder)  # its card returns to the ledger when its process ends
        both = remote(meet, resources={"GPU": 1, "ACME": 1})
        with_gpu = ray.get([both.remote(f"{workdir}/with_gpu", 2) for _ in range(2)])
        rays_own = {
            "license": {"ACME": 1, "my_license": 1, "node:127.0.0.1": 0.001},
            "license_alone": {"my_license": 1},
            "gpu_type": {"GPU": 1, "ACME": 1, "accelerator_type:H100": 0.001},
        }
        beside_rays_own = {
            name: ray.get(remote(sees, resources=wants).remote())
            for name, wants in rays_own.items()
        }
        options_task = ray.get(
            remote(sees, resources={"ACME": 1}).options(resources={"ACME": 2}).remote()
        )
        wider = remote(Holder, resources={"ACME": 1}).options(resources={"ACME": 2}).remote()
        options_actor = ray.get(wider.acme.remote())
        ray.kill(wider)
        streamed = [ray.get(item) for item in remote(stream, resources={"ACME": 1}).remote(2)]
        held_after_stream = len(Ledger().grants())
    finally:
        ray.shutdown()
    print(
        json.dumps(
            {
                "cluster_resources": params["resources"],
                "first": first,
                "held_after_tasks": held_after_tasks,
                "actor_sees": actor_sees,
                "beside_actor": beside_actor,
                "held_with_actor": held_with_actor,
                "with_gpu": with_gpu,
                "beside_rays_own": beside_rays_own,
                "options_task": options_task,
                "options_actor": options_actor,
                "streamed": streamed,
                "held_after_stream": held_after_stream,
            }
        )
    )


if __name__ == "__main__":
    for name in ("first", "second", "with_gpu"):
        Path(sys.argv[1], name).mkdir()
    main(sys.argv[1])
