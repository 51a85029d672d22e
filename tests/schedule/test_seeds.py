"""The seeds' examples, through the public API: detect a node, acquire, read the worker env."""

from __future__ import annotations

from pathlib import Path

import accelkit
import pytest
from accelkit import Allocator, FakeHost, Grant, detect_node, get_manager
from accelkit.host import load_snapshot

NODES = Path(__file__).parents[2] / "examples" / "nodes"


def allocator(**overrides: float) -> Allocator:
    """A node with no accelerator, given logical devices as ``ray.init(num_gpus=2)`` does."""
    return Allocator(detect_node(FakeHost(), overrides=overrides))


def acquire(alloc: Allocator, request: dict[str, float]) -> Grant:
    grant = alloc.acquire(request)
    assert grant is not None
    return grant


def test_num_gpus_2_one_whole_task_and_one_whole_actor() -> None:
    alloc = allocator(GPU=2)
    task, actor = acquire(alloc, {"GPU": 1}), acquire(alloc, {"GPU": 1})
    assert (task.ids, actor.ids) == ({"GPU": ["0"]}, {"GPU": ["1"]})
    assert task.env({})["CUDA_VISIBLE_DEVICES"] == "0"
    assert actor.env({})["CUDA_VISIBLE_DEVICES"] == "1"
    assert alloc.acquire({"GPU": 1}) is None


def test_three_half_gpu_actors_on_three_gpus_pack() -> None:
    alloc = allocator(GPU=3)
    actors = [acquire(alloc, {"GPU": 0.5}) for _ in range(3)]
    assert [a.ids["GPU"] for a in actors] == [["0"], ["0"], ["1"]]
    assert [a.env({})["CUDA_VISIBLE_DEVICES"] for a in actors] == ["0", "0", "1"]


def test_four_quarter_tasks_share_one_gpu() -> None:
    alloc = allocator(GPU=2)
    tasks = [acquire(alloc, {"GPU": 0.25}) for _ in range(4)]
    assert {t.env({})["CUDA_VISIBLE_DEVICES"] for t in tasks} == {"0"}
    assert alloc.available()["GPU"] == 1.0


def test_npu_quarter_shares() -> None:
    alloc = allocator(NPU=2)
    shares = [acquire(alloc, {"NPU": 0.25}) for _ in range(5)]
    assert [s.env({}, hooks=False) for s in shares[:4]] == [{"ASCEND_RT_VISIBLE_DEVICES": "0"}] * 4
    assert shares[4].ids == {"NPU": ["1"]}


def test_neuron_cores_whole_contiguous_grants() -> None:
    alloc = allocator(neuron_cores=4)
    two, one = acquire(alloc, {"neuron_cores": 2}), acquire(alloc, {"neuron_cores": 1})
    assert two.ids == {"neuron_cores": ["0", "1"]}
    assert one.ids == {"neuron_cores": ["2"]}
    assert two.env({}, hooks=False) == get_manager("neuron").visibility_env(["0", "1"])
    with pytest.raises(accelkit.InvalidRequest):
        alloc.acquire({"neuron_cores": 0.5})


def test_tpu_whole_aligned_grants() -> None:
    alloc = allocator(TPU=4)
    one, two = acquire(alloc, {"TPU": 1}), acquire(alloc, {"TPU": 2})
    assert (one.ids, two.ids) == ({"TPU": ["0"]}, {"TPU": ["2", "3"]})
    assert two.env({}, hooks=False)["TPU_VISIBLE_CHIPS"] == "2,3"
    with pytest.raises(accelkit.InvalidRequest):
        alloc.acquire({"TPU": 3})


def test_tpu_whole_host_grant_leaves_libtpu_its_defaults() -> None:
    alloc = allocator(TPU=4)
    host = acquire(alloc, {"TPU": 4})
    assert host.ids == {"TPU": ["0", "1", "2", "3"]}
    env = host.env({}, hooks=False)
    assert env["TPU_VISIBLE_CHIPS"] is None and set(env.values()) == {None}
    assert alloc.acquire({"TPU": 1}) is None


def test_hpu_whole_aligned_grants() -> None:
    alloc = allocator(HPU=8)
    one, four = acquire(alloc, {"HPU": 1}), acquire(alloc, {"HPU": 4})
    assert (one.ids, four.ids) == ({"HPU": ["0"]}, {"HPU": ["4", "5", "6", "7"]})
    assert four.env({}, hooks=False) == {"HABANA_VISIBLE_MODULES": "4,5,6,7"}


@pytest.mark.parametrize("name", sorted(p.name for p in NODES.iterdir()) if NODES.is_dir() else [])
def test_every_example_node_serves_whole_devices_of_each_family(name: str) -> None:
    node = detect_node(load_snapshot(NODES / name))
    alloc = Allocator(node)
    by_family: dict[str, set[str]] = {}
    for device in node.devices:
        by_family.setdefault(device.family, set()).add(device.id)
    for family, family_ids in by_family.items():
        manager = get_manager(family)
        count = min(2, len(family_ids))
        grant = acquire(alloc, {manager.resource_name: count})
        assert [share for _, share in grant.devices] == [1.0] * count
        ids = [device.id for device, _ in grant.devices]
        assert set(ids) <= family_ids and len(set(ids)) == count
        if len(ids) < len(family_ids):  # part of the node: ids written as they are
            assert grant.env({}, hooks=False) == manager.visibility_env(ids)
