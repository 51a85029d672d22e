"""Plan a training job with accelkit and start its workers, each seeing its devices.

    python examples/training/plan_and_run.py [--host examples/nodes/nvidia-h100-8gpu]
        [--workers 4] [--gpus 2]
    python examples/training/plan_and_run.py --tpu-slices 2 [--host examples/nodes/tpu-v6e-8]
        [--chips 4]

The plan (``accelkit.scaling.ScalingConfig``) says what each worker needs; an allocator grants
each worker its devices; each worker starts in a fresh process with its grant's environment,
its peers' devices on the same host visible too (collectives need them) and its own named by
position, then reports the devices its framework would use, its rank, its slice and the
collective backend.

GPU plans place every worker on the one recorded node. A TPU plan (``--tpu-slices``) is Ray
Train's multi-slice plan on the recorded TPU node's slice shape: each worker is one host, so
the recorded host is replayed once per worker, each slice under its own name, and the first
bundle of each slice takes that slice's head resource. ``--chips`` (default 4, half a v6e-8
host) makes each worker use that many of its host's chips, Ray Train's
``resources_per_worker={"TPU": 2}`` override; ``--chips 0`` gives each worker its whole host,
where the TPU plugin leaves every variable unset (``visible`` is then null). Each worker learns
its slice from ``MEGASCALE_NUM_SLICES`` and ``MEGASCALE_SLICE_ID``, as JAX multi-slice jobs
read them.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Mapping
from typing import Optional

import accelkit
from accelkit import load_snapshot
from accelkit.scaling import ScalingConfig, tpu_slice

WORKER = """
import json, os, sys
from accelkit.runtime import devices
slice_id = os.environ.get("MEGASCALE_SLICE_ID")
print(json.dumps({
    "rank": int(os.environ["RANK"]),
    "slice": None if slice_id is None else int(slice_id),
    "devices": devices("torch"),
    "backend": os.environ["ACCELKIT_BACKEND"],
    "visible": os.environ.get(sys.argv[1]),
}))
"""
LOCAL_DEVICES = "ACCELKIT_LOCAL_DEVICES_"
"""The variables naming a worker's own devices among its peers' (``Grant.env(peers=...)``)."""
TPU_HOST = "examples/nodes/tpu-v6e-8"
GPU_HOST = "examples/nodes/nvidia-h100-8gpu"
Layout = tuple[ScalingConfig, list[accelkit.Allocator], str]
"""A plan, the allocator of the host each bundle goes to, and the visibility variable."""


def gpu_layout(args: argparse.Namespace) -> Layout:
    """``--workers`` workers of ``--gpus`` GPUs, all on the one recorded node."""
    plan = ScalingConfig(args.workers, use_gpu=True, resources_per_worker={"GPU": args.gpus})
    # accelkit counts accelerators, not CPUs: give the recorded node the CPUs the plan needs
    cpus = plan.total_resources["CPU"]
    node = accelkit.detect_node(load_snapshot(args.host or GPU_HOST), overrides={"CPU": cpus})
    return plan, [accelkit.Allocator(node)] * plan.num_workers, "CUDA_VISIBLE_DEVICES"


def tpu_layout(args: argparse.Namespace) -> Layout:
    """``--tpu-slices`` slices shaped like the recorded TPU host's, one host for each worker."""
    path = args.host or TPU_HOST
    labels = accelkit.detect_node(load_snapshot(path)).labels
    accelerator_type = labels["accelkit/accelerator-type"]
    topology = labels["accelkit/tpu.topology"]
    hosts = tpu_slice(accelerator_type, topology).hosts
    plan = ScalingConfig(
        args.tpu_slices * hosts,
        use_tpu=True,
        topology=topology,
        accelerator_type=accelerator_type,
        resources_per_worker={"TPU": args.chips} if args.chips else None,
    )
    allocators = []
    for rank, bundle in enumerate(plan.bundles):
        # the recorded host again, as host number `rank % hosts` of slice `slice_of(rank)`
        slice_env = {
            "TPU_NAME": f"{labels['accelkit/tpu.slice-name']}-{plan.slice_of(rank)}",
            "TPU_WORKER_ID": str(rank % hosts),
        }
        host = load_snapshot(path, env=slice_env)
        node = accelkit.detect_node(host, overrides={"CPU": bundle["CPU"]})
        allocators.append(accelkit.Allocator(node))
    return plan, allocators, "TPU_VISIBLE_CHIPS"


def without_visibility(environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` without any family's variables: the workers run on the recorded node, so none
    may inherit a restriction of the machine this runs on (a shell's ``NEURON_RT_VISIBLE_CORES``
    would make a GPU worker report Neuron cores too); each one's grant sets its own family's."""
    families = accelkit.managers()
    read = {m.visible_devices_env_var for m in families}
    read |= {name for m in families for name in m.env_vars_read}
    return {k: v for k, v in environ.items() if k not in read and not k.startswith(LOCAL_DEVICES)}


def main(argv: Optional[list[str]] = None) -> int:
    """Plan, grant, start every worker, print what each one saw (one JSON line each)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--host", help=f"a recorded node ({GPU_HOST}, or {TPU_HOST} for TPUs)")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--gpus", type=float, default=2)
    parser.add_argument("--tpu-slices", type=int, help="plan this many TPU slices instead")
    parser.add_argument("--chips", type=int, default=4, help="TPU chips each worker uses")
    args = parser.parse_args(argv)

    try:
        plan, allocators, visible = (tpu_layout if args.tpu_slices else gpu_layout)(args)
    except ValueError as error:  # a plan accelkit refuses says why and what to ask for instead
        print(f"plan_and_run: {error}", file=sys.stderr)
        return 2
    grants: list[accelkit.Grant] = []
    for bundle, allocator in zip(plan.bundles, allocators):
        grant = allocator.acquire(bundle)
        if grant is None:
            print(f"the host cannot hold worker {len(grants)}'s {bundle}", file=sys.stderr)
            return 1
        grants.append(grant)
    workers = []
    for rank, grant in enumerate(grants):
        env = without_visibility(os.environ)
        peers = [g for g, a in zip(grants, allocators) if a is allocators[rank] and g is not grant]
        for name, value in grant.env(env, peers=peers).items():
            if value is None:
                env.pop(name, None)
            else:
                env[name] = value
        env.update(RANK=str(rank), WORLD_SIZE=str(len(grants)), ACCELKIT_BACKEND=plan.backend)
        if plan.slices:
            env.update(
                MEGASCALE_NUM_SLICES=str(plan.slices),
                MEGASCALE_SLICE_ID=str(plan.slice_of(rank)),
            )
        workers.append(
            subprocess.Popen(
                [sys.executable, "-c", WORKER, visible], env=env, text=True, stdout=subprocess.PIPE
            )
        )
    for worker in workers:
        out, _ = worker.communicate(timeout=120)
        print(json.dumps(json.loads(out)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
