"""Devices one process at a time may use (``Device.exclusive``: NVIDIA's Exclusive_Process) are
granted whole, to one grant; partitions a process uses one of (MIG instances) and exclusive
devices are never merged into a peer's visible list."""

from __future__ import annotations

import json

import pytest
from accelkit import Allocator, Device, Grant, Node, Unsatisfiable
from sched_nodes import devices, make_node


def gpus(exclusive: set[str], count: int = 2) -> list[Device]:
    """NVIDIA GPUs "0".., those in ``exclusive`` admitting one process at a time."""
    return [d.replace(exclusive=d.id in exclusive) for d in devices("nvidia", count)]


def mig(uuid: str, parent: str = "0") -> Device:
    """A MIG instance of GPU ``parent``."""
    return Device(
        uuid, family="nvidia", resource_name="GPU", type_label="A100-1g.5gb", parent=parent
    )


# -- the record ----------------------------------------------------------------------------------
def test_exclusive_travels_in_json_and_only_when_true() -> None:
    plain, exclusive = gpus({"1"})
    assert "exclusive" not in plain.to_dict()  # a node without such devices reads as before
    assert exclusive.to_dict()["exclusive"] is True
    node = make_node([plain, exclusive])
    again = Node.from_dict(json.loads(json.dumps(node.to_dict())))
    assert [d.exclusive for d in again.devices] == [False, True]
    assert Device.from_dict({"id": "0"}).exclusive is False


def test_exclusive_is_a_bool() -> None:
    with pytest.raises(ValueError, match="Device exclusive must be True or False"):
        Device("0", exclusive=1)  # type: ignore[arg-type]


# -- allocation ----------------------------------------------------------------------------------
def test_an_exclusive_gpu_takes_no_fraction_and_one_grant() -> None:
    alloc = Allocator(make_node(gpus({"0"})))
    halves = [alloc.acquire({"GPU": 0.5}) for _ in range(2)]
    assert [g.ids for g in halves if g] == [{"GPU": ["1"]}, {"GPU": ["1"]}]
    assert alloc.acquire({"GPU": 0.5}) is None  # GPU 0 is free, but never shared
    whole = alloc.acquire({"GPU": 1})
    assert whole is not None and whole.ids == {"GPU": ["0"]}
    assert alloc.acquire({"GPU": 1}) is None


def test_a_node_of_exclusive_gpus_never_serves_a_fraction() -> None:
    node = make_node(gpus({"0", "1"}))
    with pytest.raises(Unsatisfiable, match=r"exclusive devices are granted whole: 0, 1"):
        Allocator(node).acquire({"GPU": 0.5})
    grant = Allocator(Node.from_dict(node.to_dict())).acquire({"GPU": 2})  # over JSON, no plugin
    assert grant is not None and grant.ids == {"GPU": ["0", "1"]}


# -- peers ---------------------------------------------------------------------------------------
def test_peers_mig_instances_are_never_merged_into_one_list() -> None:
    node = make_node([mig("MIG-aaaa"), mig("MIG-bbbb"), *devices("nvidia", ids=["1"])])
    alloc = Allocator(node)
    held = {g.ids["GPU"][0]: g for g in (alloc.acquire({"GPU": 1}) for _ in range(3)) if g}
    assert sorted(held) == ["1", "MIG-aaaa", "MIG-bbbb"]
    first, second, whole = held["MIG-aaaa"], held["MIG-bbbb"], held["1"]
    env = second.env({}, hooks=False, peers=[first, whole])
    assert env["CUDA_VISIBLE_DEVICES"] == "MIG-bbbb"  # CUDA would use only the first listed
    assert "ACCELKIT_LOCAL_DEVICES_NVIDIA" not in env
    env = whole.env({}, hooks=False, peers=[first, second])
    assert env["CUDA_VISIBLE_DEVICES"] == "1"  # no peer's instance beside a whole GPU either


def test_an_exclusive_gpu_is_never_shown_to_a_peer() -> None:
    alloc = Allocator(make_node(gpus({"1"}, 3)))
    first, second, third = (alloc.acquire({"GPU": 1}) for _ in range(3))
    assert first is not None and second is not None and third is not None
    env = third.env({}, hooks=False, peers=[first, second])
    assert env["CUDA_VISIBLE_DEVICES"] == "0,2"
    assert env["ACCELKIT_LOCAL_DEVICES_NVIDIA"] == "1"
    env = second.env({}, hooks=False, peers=[first, third])
    assert env["CUDA_VISIBLE_DEVICES"] == "1"


def test_shared_gpus_are_still_merged_in_numeric_order() -> None:
    alloc = Allocator(make_node(devices("nvidia", 12)))
    held = [alloc.acquire({"GPU": 1}) for _ in range(12)]
    ten, two = held[10], held[2]
    assert isinstance(ten, Grant) and isinstance(two, Grant)
    assert ten.env({}, hooks=False, peers=[two])["CUDA_VISIBLE_DEVICES"] == "2,10"
