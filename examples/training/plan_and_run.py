"""Plan a training job with accelkit and start its workers on one node, each seeing its devices.

    python examples/training/plan_and_run.py [--host examples/nodes/nvidia-h100-8gpu]
        [--workers 4] [--gpus 2]

The plan (``accelkit.scaling.ScalingConfig``) says what each worker needs; the allocator grants
each worker its devices; each worker starts in a fresh process with its grant's environment,
its peers' GPUs visible too (collectives need them) and its own named by position, then reports
the devices its framework would use, its rank and the collective backend.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from typing import Optional

import accelkit
from accelkit import load_snapshot
from accelkit.scaling import ScalingConfig

WORKER = """
import json, os
from accelkit.runtime import devices
print(json.dumps({
    "rank": int(os.environ["RANK"]),
    "devices": devices("torch"),
    "backend": os.environ["ACCELKIT_BACKEND"],
    "visible": os.environ.get("CUDA_VISIBLE_DEVICES"),
}))
"""


def main(argv: Optional[list[str]] = None) -> int:
    """Plan, grant, start every worker, print what each one saw (one JSON line each)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--host", default="examples/nodes/nvidia-h100-8gpu")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--gpus", type=float, default=2)
    args = parser.parse_args(argv)

    plan = ScalingConfig(args.workers, use_gpu=True, resources_per_worker={"GPU": args.gpus})
    # accelkit counts accelerators, not CPUs: give the recorded node the CPUs the plan needs
    cpus = plan.total_resources["CPU"]
    node = accelkit.detect_node(load_snapshot(args.host), overrides={"CPU": cpus})
    allocator = accelkit.Allocator(node)
    grants = []
    for bundle in plan.bundles:
        grant = allocator.acquire(bundle)
        if grant is None:
            print(f"the node cannot hold {args.workers} workers of {bundle}", file=sys.stderr)
            return 1
        grants.append(grant)
    workers = []
    for rank, grant in enumerate(grants):
        env = {k: v for k, v in os.environ.items() if not k.endswith("_VISIBLE_DEVICES")}
        peers = [g for g in grants if g is not grant]
        for name, value in grant.env(env, peers=peers).items():
            if value is None:
                env.pop(name, None)
            else:
                env[name] = value
        env.update(RANK=str(rank), WORLD_SIZE=str(len(grants)), ACCELKIT_BACKEND=plan.backend)
        workers.append(
            subprocess.Popen(
                [sys.executable, "-c", WORKER], env=env, text=True, stdout=subprocess.PIPE
            )
        )
    for worker in workers:
        out, _ = worker.communicate(timeout=120)
        print(json.dumps(json.loads(out)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
