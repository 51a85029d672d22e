"""Real ``distributed`` clusters on the example nodes: every worker process sees exactly the
devices of its grant, and tasks submitted with resources run where those devices are."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from accelkit import Node, detect_node, load_snapshot
from engine_nodes import ACME_NODE, SNAPSHOTS

pytestmark = pytest.mark.engine

distributed = pytest.importorskip("distributed")
from accelkit.integrations.dask import LocalAcceleratorCluster, worker_slots  # noqa: E402

VARIABLES = ("CUDA_VISIBLE_DEVICES", "NEURON_RT_VISIBLE_CORES", "NEURON_RT_NUM_CORES")


def seen(*variables: str, dask_worker: object = None) -> tuple[str, dict[str, object]]:
    """In a worker (as a task, or through ``client.run``, which passes ``dask_worker``): the
    worker's name and the variables it sees (None: unset)."""
    worker = dask_worker or distributed.get_worker()
    return str(worker.name), {v: os.environ.get(v) for v in variables}  # type: ignore[attr-defined]


def snapshot(name: str, **overrides: float) -> Node:
    return detect_node(load_snapshot(SNAPSHOTS / name), overrides or None)


def run_tasks(cluster: LocalAcceleratorCluster, request: dict[str, float], *variables: str) -> dict:
    """One task per worker through ``client.submit(..., resources=request)``: what each saw."""
    with distributed.Client(cluster) as client:
        futures = [
            client.submit(seen, *variables, resources=request, pure=False) for _ in cluster.slots
        ]
        results = client.gather(futures)
        by_worker = client.run(seen, *variables)
    for name, env in results:
        assert env in [e for n, e in by_worker.values() if n == name]
    return dict(by_worker.values())


def test_h100_workers_each_see_their_own_two_gpus() -> None:
    with LocalAcceleratorCluster(
        snapshot("nvidia-h100-8gpu"), "GPU", per_worker=2, dashboard_address=None
    ) as cluster:
        assert {
            name: spec["options"]["resources"] for name, spec in cluster.worker_spec.items()
        } == {f"GPU-{n}": {"GPU": 2.0, "accelerator_type:H100": 1.0} for n in range(4)}
        envs = run_tasks(cluster, {"GPU": 2}, "CUDA_VISIBLE_DEVICES")
    assert envs == {f"GPU-{n}": {"CUDA_VISIBLE_DEVICES": f"{2 * n},{2 * n + 1}"} for n in range(4)}


def test_a_fractional_share_puts_two_workers_on_one_gpu() -> None:
    with LocalAcceleratorCluster(
        snapshot("nvidia-h100-8gpu", GPU=1), per_worker=0.5, dashboard_address=None
    ) as cluster:
        envs = run_tasks(cluster, {"GPU": 0.5}, "CUDA_VISIBLE_DEVICES")
    assert envs == {"GPU-0": {"CUDA_VISIBLE_DEVICES": "0"}, "GPU-1": {"CUDA_VISIBLE_DEVICES": "0"}}


@pytest.fixture
def stray_neuron_variable() -> Iterator[None]:
    """A variable the grant must unset, inherited by the process that starts the workers."""
    os.environ["NEURON_RT_NUM_CORES"] = "32"
    yield
    del os.environ["NEURON_RT_NUM_CORES"]


def test_neuron_workers_each_see_their_own_core_range(stray_neuron_variable: None) -> None:
    with LocalAcceleratorCluster(
        snapshot("neuron-trn1-32xlarge"), per_worker=8, dashboard_address=None
    ) as cluster:
        envs = run_tasks(
            cluster, {"neuron_cores": 8}, "NEURON_RT_VISIBLE_CORES", "NEURON_RT_NUM_CORES"
        )
    assert envs == {
        f"neuron_cores-{n}": {
            "NEURON_RT_VISIBLE_CORES": f"{8 * n}-{8 * n + 7}",
            "NEURON_RT_NUM_CORES": None,
        }
        for n in range(4)
    }


def test_the_cluster_refuses_what_would_break_one_worker_per_slot() -> None:
    node = snapshot("nvidia-h100-8gpu")
    with pytest.raises(TypeError, match="n_workers= cannot be given"):
        LocalAcceleratorCluster(node, n_workers=2)
    with pytest.raises(ValueError, match="no devices of resource 'TPU'; it has \\['GPU'\\]"):
        worker_slots(node, "TPU")
    with pytest.raises(ValueError, match="no accelerator devices to start workers for"):
        LocalAcceleratorCluster(Node())


def test_dask_worker_verb_serves_a_third_party_family_to_a_scheduler(tmp_path: Path) -> None:
    """``accelkit dask-worker`` on the example plugin's node: two ACME workers join a running
    scheduler, each seeing one card, and stop on SIGTERM. (Its workers cannot import this test
    module, so the tasks are library functions.)"""
    log = tmp_path / "dask-worker.log"
    with (
        distributed.LocalCluster(
            n_workers=0, processes=True, dashboard_address=None, host="127.0.0.1"
        ) as cluster,
        distributed.Client(cluster) as client,
        log.open("w") as stderr,
    ):
        command = [sys.executable, "-m", "accelkit.cli", "dask-worker", cluster.scheduler_address]
        worker = subprocess.Popen([*command, "--host", str(ACME_NODE)], stderr=stderr)
        try:
            client.wait_for_workers(2, timeout=60)
            futures = [
                client.submit(os.getenv, "ACME_VISIBLE_DEVICES", resources={"ACME": 1}, pure=False)
                for _ in range(4)
            ]
            results = client.gather(futures)
            ran_on = client.who_has(futures)
            by_address = client.run(os.getenv, "ACME_VISIBLE_DEVICES")
            workers = client.scheduler_info()["workers"]
        finally:
            worker.send_signal(signal.SIGTERM)
            worker.wait(timeout=60)
    assert worker.returncode == 0, log.read_text()
    host = socket.gethostname()
    assert sorted((w["name"], by_address[a]) for a, w in workers.items()) == [
        (f"{host}-ACME-0", "0"),
        (f"{host}-ACME-1", "1"),
    ]
    assert [by_address[ran_on[f.key][0]] for f in futures] == results
    assert [w["resources"] for w in workers.values()] == 2 * [
        {"ACME": 1.0, "accelerator_type:ACME-Rocket-X1": 1.0}
    ]
    assert f"{host}-ACME-1: " in log.read_text()
