"""Run inside a loopback-only network namespace by test_ray.py: a real Ray node started with
``to_ray``'s arguments on a Moore Threads node (a stand-in ``mthreads-gmi`` on ``PATH`` answers as
the recorded eight-GPU node), whose GPUs Ray counts as ``--num-gpus`` but narrows only through
``CUDA_VISIBLE_DEVICES``, which MUSA does not read. Prints what two tasks running at once saw.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import ray
from accelkit import detect_node
from accelkit.exports import to_ray
from accelkit.integrations.ray import remote
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
        "musa": os.environ.get("MUSA_VISIBLE_DEVICES"),
        "ray": [str(i) for i in ray.get_runtime_context().get_accelerator_ids()["GPU"]],
    }


def main(barrier: str) -> None:
    arguments = to_ray(detect_node())
    params = start.make_context("start", ["--head", *arguments]).params
    ray.init(
        num_cpus=2,
        num_gpus=params["num_gpus"],
        include_dashboard=False,
        _node_ip_address="127.0.0.1",
        log_to_driver=False,
    )
    try:
        task = remote(meet, resources={"GPU": 1})
        tasks = ray.get([task.remote(barrier, 2) for _ in range(2)])
    finally:
        ray.shutdown()
    print(json.dumps({"to_ray": arguments, "tasks": tasks}))


if __name__ == "__main__":
    main(sys.argv[1])
